#!/usr/bin/env python3
"""Links (issue 29): how fast one jobs agent mirrors, and how far behind it stays.

Two release `floe dev` processes on this machine, a source and a destination, and a link from one
to the other. Per run:

- **Catch-up throughput.** --backlog-mib of 1 KiB records are written into the source's topic
  (8 partitions) by `rdkafka_performance -P` before the link exists; the link is then created and
  timed until every partition's log end here equals the source's: MB/s mirrored, and the
  destination's CPU seconds per GiB mirrored.
- **Steady-state lag.** `rdkafka_performance -P` produces --rate-mb MB/s into a second topic for
  --seconds while both sides' log ends are sampled every 100 ms. For each sample of the
  destination, the lag is how long before that the source had reached the same offsets (per
  partition, the largest): p50, p99 and max, over the samples after the first 5 s.

Medians over --runs; progress on stderr. Client, source and destination share the cores.

    cargo build --release -p floe && loadtest/scripts/build-rdkafka-performance.sh
    python3 loadtest/scripts/bench_links.py --runs 3
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_read import Floe, cpu_seconds  # noqa: E402

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
WORK = "/var/tmp/floe-bench-links"
PARTITIONS = 8
RECORD = 1024


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def floe(name):
    """A release `floe dev` with its data and log under WORK."""
    return Floe(data=f"{WORK}/{name}", log=f"{WORK}/{name}.log")


def create_topic(floe, topic):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": floe.bootstrap})
    for f in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
        f.result(20)


class LogEnds:
    """Reads a topic's log ends on one cluster, one partition after another."""

    def __init__(self, floe, topic):
        from confluent_kafka import Consumer, TopicPartition
        self.topic, self.tp = topic, TopicPartition
        self.c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": "bench-links-ends"})

    def read(self):
        try:
            return [self.c.get_watermark_offsets(self.tp(self.topic, p), timeout=5, cached=False)[1]
                    for p in range(PARTITIONS)]
        except Exception:  # noqa: BLE001 (the mirror topic may not exist yet)
            return [0] * PARTITIONS

    def close(self):
        self.c.close()


def link(dest, source, name, topics):
    subprocess.run([f"{TARGET}/release/floe", "admin", "links", "--metadata", f"127.0.0.1:{dest.meta}", "create",
                    "--name", name, "--source-bootstrap", source.bootstrap, "--topics", topics],
                   check=True, capture_output=True, timeout=60)


def produce(perf, floe, topic, count, rate=None):
    args = [perf, "-P", "-t", topic, "-b", floe.bootstrap, "-s", str(RECORD), "-c", str(count), "-q",
            "-X", "linger.ms=5", "-X", "acks=all"]
    if rate:
        args += ["-r", str(rate)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_once(perf, backlog_mib, rate_mb, seconds):
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    source, dest = floe("source"), floe("dest")
    source.start()
    dest.start()
    try:
        # Catch-up: a backlog first, then the link.
        create_topic(source, "backlog")
        count = backlog_mib * 1024 * 1024 // RECORD
        if produce(perf, source, "backlog", count).wait(600) != 0:
            raise SystemExit("rdkafka_performance -P failed")
        there = LogEnds(source, "backlog").read()
        here = LogEnds(dest, "backlog")
        cpu0, t0 = cpu_seconds(dest.proc.pid), time.monotonic()
        link(dest, source, "catchup", "backlog")
        while here.read() != there:
            if time.monotonic() - t0 > 600:
                raise SystemExit("the link did not catch up in 10 minutes")
            time.sleep(0.1)
        took, cpu = time.monotonic() - t0, cpu_seconds(dest.proc.pid) - cpu0
        here.close()
        mib = count * RECORD / 2**20
        result = {"catch_up_mb_s": count * RECORD / 1e6 / took, "catch_up_cpu_s_per_gib": cpu / (mib / 1024)}
        log(f"  catch-up: {mib:.0f} MiB in {took:.1f} s: {result['catch_up_mb_s']:.0f} MB/s, "
            f"{result['catch_up_cpu_s_per_gib']:.2f} CPU-s/GiB")

        # Steady state: a second topic at a fixed rate, both log ends sampled.
        create_topic(source, "steady")
        link(dest, source, "steady", "steady")
        src_ends, dst_ends = LogEnds(source, "steady"), LogEnds(dest, "steady")
        samples_src, samples_dst = [], []
        stop = threading.Event()

        def sample(ends, out):
            while not stop.is_set():
                out.append((time.monotonic(), ends.read()))
                time.sleep(0.1)

        threads = [threading.Thread(target=sample, args=(src_ends, samples_src)),
                   threading.Thread(target=sample, args=(dst_ends, samples_dst))]
        rate = int(rate_mb * 1e6 / RECORD)
        started = time.monotonic()
        for t in threads:
            t.start()
        producer = produce(perf, source, "steady", rate * seconds, rate)
        producer.wait(seconds * 3 + 60)
        produced_for = time.monotonic() - started
        time.sleep(3)
        stop.set()
        for t in threads:
            t.join()
        src_ends.close()
        dst_ends.close()
        lags = []
        for t, ends in samples_dst:
            if t - started < 5 or t - started > produced_for:
                continue
            worst = 0.0
            for p, offset in enumerate(ends):
                reached = next((s for s, e in samples_src if e[p] >= offset), t)
                worst = max(worst, t - reached)
            lags.append(worst)
        if os.environ.get("BENCH_LINKS_TRACE"):
            for (ts, se), (td, de) in zip(samples_src, samples_dst):
                log(f"    {ts - started:6.2f} src {sum(se):>9} | {td - started:6.2f} dst {sum(de):>9}")
        lags.sort()
        total = sum(samples_src[-1][1]) * RECORD / 1e6
        result.update({
            "steady_rate_mb_s": total / produced_for,
            "lag_p50_s": lags[len(lags) // 2],
            "lag_p99_s": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
            "lag_max_s": lags[-1],
        })
        log(f"  steady: {result['steady_rate_mb_s']:.1f} MB/s produced; lag p50 {result['lag_p50_s']:.2f} s, "
            f"p99 {result['lag_p99_s']:.2f} s, max {result['lag_max_s']:.2f} s over {len(lags)} samples")
        return result
    finally:
        source.stop()
        dest.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backlog-mib", type=int, default=512)
    ap.add_argument("--rate-mb", type=float, default=50.0)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--perf", default=f"{TARGET}/rdkafka_performance")
    args = ap.parse_args()
    runs = []
    for n in range(args.runs):
        log(f"run {n + 1}/{args.runs}")
        runs.append(run_once(args.perf, args.backlog_mib, args.rate_mb, args.seconds))
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(json.dumps({"cores": os.cpu_count(), "runs": runs, "median": medians}, indent=2))


if __name__ == "__main__":
    main()
