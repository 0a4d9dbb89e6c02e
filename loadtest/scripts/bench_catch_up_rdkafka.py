#!/usr/bin/env python3
"""Catch-up reads of small records measured with librdkafka's own client (issue 28): a fresh
release `floe dev` per run, 600,000 records of 1 KiB written into 8 partitions by
`rdkafka_performance -P`, then one `rdkafka_performance -C` consumer of all 8 partitions from the
beginning, served from the writer's hot tier. Reports the consumer's MB/s (its own figure) and the
agent's CPU seconds (user + system, from /proc) per GiB read, medians over --runs, with progress
on stderr. Client and agent share the machine's cores.

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
from bench_read import WORK, Floe  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(perf: str, binary: str | None, records: int, size: int, partitions: int) -> dict:
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    floe = Floe(binary=binary)
    floe.start()
    try:
        broker = f"127.0.0.1:{floe.kafka}"
        topic = "catchup"
        from confluent_kafka.admin import AdminClient, NewTopic
        for f in AdminClient({"bootstrap.servers": broker}).create_topics([NewTopic(topic, partitions)]).values():
            f.result(20)
        subprocess.run([perf, "-P", "-t", topic, "-b", broker, "-s", str(size), "-c", str(records), "-q",
                        "-X", "linger.ms=20", "-X", "batch.size=1000000", "-X", "acks=all",
                        "-X", "topic.metadata.refresh.interval.ms=1000"],
                       check=True, capture_output=True, timeout=600)
        parts = [a for p in range(partitions) for a in ("-p", str(p))]
        before = cpu_seconds(floe.proc.pid)
        out = subprocess.run([perf, "-C", "-t", topic, "-b", broker, *parts, "-o", "beginning", "-c", str(records),
                              "-X", "fetch.wait.max.ms=100"], capture_output=True, text=True, timeout=600)
        cpu = cpu_seconds(floe.proc.pid) - before
        text = out.stdout + out.stderr
        # "% 600000 messages (614400000 bytes) consumed in 1034ms: 580270 msgs/s and 594.20 MB/s"
        m = re.findall(r"% (\d+) messages \((\d+) bytes\) consumed in (\d+)ms: (\d+) msgs/s and ([\d.]+) MB/s", text)
        if not m:
            raise SystemExit(f"no summary from rdkafka_performance:\n{text[-2000:]}")
        count, nbytes, ms, _, mbs = m[-1]
        return {"records": int(count), "mb_per_s": float(mbs), "seconds": int(ms) / 1000,
                "cpu_s_per_gib": cpu / (int(nbytes) / (1 << 30))}
    finally:
        floe.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--records", type=int, default=600_000)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--bin", default=None, help="the floe binary (default: the release build)")
    a = p.parse_args()
    perf = subprocess.run([os.path.join(HERE, "build-rdkafka-performance.sh")], check=True, capture_output=True,
                          text=True).stdout.strip()
    runs = []
    for i in range(a.runs):
        print(f"run {i + 1}/{a.runs}", file=sys.stderr)
        runs.append(run_once(perf, a.bin, a.records, a.size, a.partitions))
        print(f"  {runs[-1]}", file=sys.stderr)
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print("| records | MB/s (rdkafka_performance) | seconds | agent CPU-s per GiB |")
    print("|---:|---:|---:|---:|")
    print(f"| {med['records']:,.0f} | {med['mb_per_s']:.0f} | {med['seconds']:.2f} | {med['cpu_s_per_gib']:.2f} |")


if __name__ == "__main__":
    main()
