#!/usr/bin/env python3
"""Incremental fetch sessions (KIP-227) on and off, with a consumer of 1,000 partitions. Each run
starts a fresh release `floe dev`, with `--fetch-session-slots 0` (every Fetch sessionless, the
baseline) or the default, and a kafka-python consumer (librdkafka never opens sessions):

  idle     the consumer polls 1,000 empty partitions for --secs (fetch.max.wait.ms 500, as
           Kafka's default): agent CPU seconds, Fetch request and response bytes per second
  trickle  the same while --rate 100-byte records a second land on random partitions (a few
           partitions move per fetch, the case sessions are for); the producer's requests are
           served by the same agent, so its CPU is included in both modes

Agent CPU comes from its /metrics (`process_cpu_seconds_total`); the client runs on the same
cores. Prints a markdown table of medians over --runs and the ratio on/off.

    cargo build --release -p floe
    .venv/bin/python loadtest/scripts/bench_fetch_sessions.py --runs 3 --secs 30 --rate 500
"""

import argparse
import os
import random
import shutil
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench_read  # noqa: E402
from bench_read import Floe  # noqa: E402

PARTITIONS = 1000
TOPIC = "sessions"


def fetch_counters(floe):
    m = floe.metrics()
    return {
        "cpu": m.get("process_cpu_seconds_total", 0.0),
        "request_bytes": m.get('floe_kafka_request_bytes_total{api="Fetch"}', 0.0),
        "response_bytes": m.get('floe_kafka_response_bytes_total{api="Fetch"}', 0.0),
        "fetches": m.get('floe_kafka_requests_total{api="Fetch"}', 0.0),
    }


def delta(before, after):
    return {k: after[k] - before[k] for k in before}


def consumer(bootstrap):
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=500, client_id="bench-sessions")
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    c.assign(tps)
    return c, tps


def measure(floe, c, seconds):
    """Polls for `seconds`; the agent's counters over that time, and the records read."""
    before = fetch_counters(floe)
    start, records = time.monotonic(), 0
    while time.monotonic() - start < seconds:
        records += sum(len(m) for m in c.poll(timeout_ms=500).values())
    used = delta(before, fetch_counters(floe))
    return {k: v / (time.monotonic() - start) for k, v in used.items()}, records


def trickle(bootstrap, rate, stop):
    """Produces `rate` 100-byte records a second to random partitions until `stop` is set."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    rng, sent, start = random.Random(1), 0, time.monotonic()
    while not stop.is_set():
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            p.produce(TOPIC, partition=rng.randrange(PARTITIONS), value=b"x" * 100)
            sent += 1
        p.poll(0.01)
    p.flush(30)
    return sent


def one_run(sessions, args, run):
    shutil.rmtree(f"{bench_read.WORK}/data", ignore_errors=True)
    extra = [] if sessions else ["--fetch-session-slots", "0"]
    floe = Floe(extra)
    floe.start()
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": floe.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])[TOPIC].result(60)
        c, tps = consumer(floe.bootstrap)
        try:
            # Warm up: the first poll opens the session (or sends the first full fetch).
            c.seek_to_end(*tps)
            measure(floe, c, 3)
            idle, _ = measure(floe, c, args.secs)
            stop = threading.Event()
            producer = threading.Thread(target=trickle, args=(floe.bootstrap, args.rate, stop))
            producer.start()
            try:
                busy, records = measure(floe, c, args.secs)
            finally:
                stop.set()
                producer.join()
        finally:
            c.close()
    finally:
        floe.stop()
    result = {
        "idle_cpu_per_min": idle["cpu"] * 60,
        "idle_request_bps": idle["request_bytes"],
        "idle_response_bps": idle["response_bytes"],
        "idle_fetches_per_s": idle["fetches"],
        "busy_cpu_per_min": busy["cpu"] * 60,
        "busy_request_bps": busy["request_bytes"],
        "busy_response_bps": busy["response_bytes"],
        "busy_fetches_per_s": busy["fetches"],
        "busy_cpu_ms_per_fetch": busy["cpu"] * 1000 / max(busy["fetches"], 1e-9),
        "busy_records_per_s": records / args.secs,
    }
    label = "on" if sessions else "off"
    print(f"[{label} run {run + 1}/{args.runs}] " + ", ".join(f"{k}={v:.3g}" for k, v in result.items()),
          file=sys.stderr, flush=True)
    return result


ROWS = [
    ("idle: agent CPU s per minute", "idle_cpu_per_min"),
    ("idle: Fetch request bytes/s", "idle_request_bps"),
    ("idle: Fetch response bytes/s", "idle_response_bps"),
    ("idle: Fetches/s", "idle_fetches_per_s"),
    ("trickle: agent CPU s per minute (producer included)", "busy_cpu_per_min"),
    ("trickle: Fetch request bytes/s", "busy_request_bps"),
    ("trickle: Fetch response bytes/s", "busy_response_bps"),
    ("trickle: Fetches/s", "busy_fetches_per_s"),
    ("trickle: agent CPU ms per Fetch", "busy_cpu_ms_per_fetch"),
    ("trickle: records read/s", "busy_records_per_s"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--secs", type=float, default=30, help="length of each phase")
    p.add_argument("--rate", type=int, default=500, help="records a second in the trickle phase")
    args = p.parse_args()
    if not 1 <= args.runs <= 10 or not 5 <= args.secs <= 600 or not 1 <= args.rate <= 100_000:
        raise SystemExit("--runs in 1..10, --secs in 5..600, --rate in 1..100000")
    shutil.rmtree(bench_read.WORK, ignore_errors=True)
    os.makedirs(bench_read.WORK)
    results = {"off": [], "on": []}
    # Interleaved, so drift on a noisy machine hits both alike.
    for run in range(args.runs):
        for sessions in (False, True):
            results["on" if sessions else "off"].append(one_run(sessions, args, run))
    print(f"\n{PARTITIONS} partitions, kafka-python, medians of {args.runs} runs, {os.cpu_count()} cores\n")
    print("| | sessions off | sessions on | on/off |")
    print("|---|---:|---:|---:|")
    for label, key in ROWS:
        off = statistics.median(r[key] for r in results["off"])
        on = statistics.median(r[key] for r in results["on"])
        ratio = f"{on / off:.3f}" if off else "-"
        print(f"| {label} | {off:.4g} | {on:.4g} | {ratio} |")


if __name__ == "__main__":
    main()
