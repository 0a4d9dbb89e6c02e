#!/usr/bin/env python3
"""Catch-up reads of small records measured with librdkafka's own client (issue 28): a fresh
release `floe dev` per run, 600,000 records of 1 KiB written into 8 partitions by
`rdkafka_performance -P`, then one `rdkafka_performance -C` consumer of all 8 partitions from the
beginning, served from the writer's hot tier (the agent's default size unless --cache-bytes), --passes
times one after the other. Reports the consumer's MB/s (its own figure) and the agent's CPU
seconds (user + system, from /proc) per GiB read for the first pass (right after the writes,
beside compaction merging their chunks) and the later ones, medians over --runs, with progress on
stderr. Client and agent share the machine's cores.

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_catch_up_rdkafka.py --runs 3 [--bin OTHER/floe]
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_read  # noqa: E402
from bench_read import WORK, Floe, cpu_seconds  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(perf: str, binary: str | None, records: int, size: int, partitions: int, cache_bytes: int | None,
             passes: int) -> dict:
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    floe = Floe(extra=[] if cache_bytes is None else ["--cache-bytes", str(cache_bytes)], binary=binary)
    floe.start()
    try:
        broker = f"127.0.0.1:{floe.kafka}"
        topic = "catchup"
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": broker})
        for f in admin.create_topics([NewTopic(topic, partitions)]).values():
            f.result(20)
        subprocess.run([perf, "-P", "-t", topic, "-b", broker, "-s", str(size), "-c", str(records), "-q",
                        "-X", "linger.ms=20", "-X", "batch.size=1000000", "-X", "acks=all",
                        "-X", "topic.metadata.refresh.interval.ms=1000"],
                       check=True, capture_output=True, timeout=600)
        parts = [a for p in range(partitions) for a in ("-p", str(p))]
        result = {}
        for n in range(passes):
            before = cpu_seconds(floe.proc.pid)
            out = subprocess.run([perf, "-C", "-t", topic, "-b", broker, *parts, "-o", "beginning", "-c", str(records),
                                  "-X", "fetch.wait.max.ms=100"], capture_output=True, text=True, timeout=600)
            cpu = cpu_seconds(floe.proc.pid) - before
            text = out.stdout + out.stderr
            # "% 600000 messages (614400000 bytes) consumed in 1290ms: 465097 msgs/s (476.26 MB/s)"
            found = re.findall(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: \d+ msgs/s \(([\d.]+) MB/s\)",
                               text)
            if not found or int(found[-1][0]) != records:
                raise SystemExit(f"rdkafka_performance did not read every record:\n{text[-2000:]}")
            _, nbytes, ms, mbs = found[-1]
            # The first pass runs right after the writes, beside compaction merging their small
            # chunks; later passes read a settled log.
            kind = "first" if n == 0 else "later"
            result.setdefault(f"{kind}_mb_per_s", []).append(float(mbs))
            result.setdefault(f"{kind}_cpu_s_per_gib", []).append(cpu / (int(nbytes) / (1 << 30)))
        return {k: statistics.median(v) for k, v in result.items()}
    finally:
        floe.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--records", type=int, default=600_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--bin", default=None, help="the floe binary (default: the release build)")
    p.add_argument("--cache-bytes", type=int, default=None,
                   help="the agent's hot tier (default: the agent's own, a quarter of the machine's memory)")
    p.add_argument("--passes", type=int, default=3, help="reads of the topic per run, one after the other")
    a = p.parse_args()
    perf = subprocess.run([os.path.join(HERE, "build-rdkafka-performance.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()
    runs = []
    for i in range(a.runs):
        print(f"run {i + 1}/{a.runs}", file=sys.stderr)
        runs.append(run_once(perf, a.bin, a.records, a.size, a.partitions, a.cache_bytes, a.passes))
        print(f"  {runs[-1]}", file=sys.stderr)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("| pass | MB/s (rdkafka_performance) | agent CPU-s per GiB |")
    print("|---|---:|---:|")
    print(f"| first, right after the writes | {med['first_mb_per_s']:.0f} | {med['first_cpu_s_per_gib']:.2f} |")
    if "later_mb_per_s" in med:
        print(f"| later | {med['later_mb_per_s']:.0f} | {med['later_cpu_s_per_gib']:.2f} |")


if __name__ == "__main__":
    main()
