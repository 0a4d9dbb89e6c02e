#!/usr/bin/env python3
"""Share groups (KIP-932): records acknowledged per second with 1, 4 and 16 share consumers on
one partition, and Raft entries per 1,000 acknowledgements; with --idle, the Raft entries per
second that share consumers waiting on an empty topic cause.

Each run starts a fresh release `floe dev` (`floe.share.auto.offset.reset=earliest`), writes
--records records of 100 B to a new one-partition topic, then starts N share consumer processes
(confluent-kafka's ShareConsumer, implicit acknowledgement: a poll accepts the records of the
previous one) in one share group. The clock runs from their start until the group's
`floe_share_group_lag` for the partition is 0 (every record acknowledged); Raft entries are the
rise of `floe_metadata_raft_applied_index` over the same time, so they include everything else
the cluster wrote meanwhile (agent heartbeats, group membership), an upper bound for the
acknowledgements' own. Prints a markdown table of medians over --runs, with progress on stderr.

    cargo build --release -p floe
    .venv/bin/python loadtest/scripts/bench_share_groups.py --runs 3 --records 50000
    .venv/bin/python loadtest/scripts/bench_share_groups.py --idle 20 --consumers 0,4,16 [--bin OLD/floe]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench_read  # noqa: E402
from bench_read import Floe  # noqa: E402

CONSUMER = r"""
import sys, time
from confluent_kafka import ShareConsumer
c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2]})
c.subscribe([sys.argv[3]])
end = time.monotonic() + float(sys.argv[4])
while time.monotonic() < end:
    c.poll(0.5)
c.close()
"""


def set_configs(bootstrap, configs):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for f in a.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)]).values():
        f.result(10)


def produce(bootstrap, topic, n):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic(topic, 1)]).values():
        f.result(20)
    time.sleep(0.5)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 1000})
    value = b"x" * 100
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def lag(floe, group, topic):
    key = f'floe_share_group_lag{{group="{group}",partition="0",topic="{topic}"}}'
    return floe.metrics().get(key)


def run_once(floe, consumers, records, seq):
    topic, group = f"share-bench-{consumers}-{seq}", f"workers-{consumers}-{seq}"
    produce(floe.bootstrap, topic, records)
    applied = floe.metrics().get("floe_metadata_raft_applied_index", 0.0)
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", CONSUMER, floe.bootstrap, group, topic, "600"])
             for _ in range(consumers)]
    try:
        last_print = 0.0
        while True:
            left = lag(floe, group, topic)
            now = time.monotonic()
            if left == 0:
                break
            if now - start > 600:
                raise SystemExit(f"{consumers} consumers: not done after 600 s (lag {left})")
            if now - last_print > 5:
                print(f"  {consumers} consumers: {left if left is not None else records:.0f} records left",
                      file=sys.stderr)
                last_print = now
            time.sleep(0.05)
        elapsed = time.monotonic() - start
        entries = floe.metrics().get("floe_metadata_raft_applied_index", 0.0) - applied
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return {"acks_per_sec": records / elapsed, "entries_per_1000": entries * 1000 / records, "seconds": elapsed}


def idle_once(floe, consumers, seconds, seq):
    """Raft entries per second while `consumers` share consumers wait on an empty topic (after a
    settling period of 15 s for the processes to start, join and fetch)."""
    topic, group = f"share-idle-{consumers}-{seq}", f"idle-{consumers}-{seq}"
    produce(floe.bootstrap, topic, 0)
    procs = [subprocess.Popen([sys.executable, "-c", CONSUMER, floe.bootstrap, group, topic, str(seconds + 25)],
                              stderr=subprocess.DEVNULL) for _ in range(consumers)]
    try:
        time.sleep(15)
        applied = floe.metrics().get("floe_metadata_raft_applied_index", 0.0)
        time.sleep(seconds)
        entries = floe.metrics().get("floe_metadata_raft_applied_index", 0.0) - applied
    finally:
        for p in procs:
            p.kill()
            p.wait()
    return entries / seconds


def on_fresh_floe(binary, measure):
    """Runs `measure(floe)` on a fresh `floe dev` and returns what it returns."""
    shutil.rmtree(bench_read.WORK, ignore_errors=True)
    os.makedirs(bench_read.WORK)
    floe = Floe(binary=binary)
    floe.start()
    try:
        return measure(floe)
    finally:
        floe.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--consumers", default="1,4,16")
    parser.add_argument("--idle", type=float, default=0, help="measure idle consumers for this many seconds")
    parser.add_argument("--bin", help="the floe binary (default: the release build)")
    args = parser.parse_args()
    counts = [int(c) for c in args.consumers.split(",")]
    if args.idle:
        rates = {c: [] for c in counts}
        for run in range(args.runs):
            for consumers in counts:
                rates[consumers].append(on_fresh_floe(args.bin, lambda f: idle_once(f, consumers, args.idle, run)))
                print(f"run {run + 1}/{args.runs}, {consumers} idle consumers: {rates[consumers][-1]:.2f} entries/s",
                      file=sys.stderr)
        print("| idle share consumers | Raft entries/s |")
        print("|---:|---:|")
        for consumers in counts:
            print(f"| {consumers} | {statistics.median(rates[consumers]):.2f} |")
        return

    def acknowledged(floe, consumers, run):
        set_configs(floe.bootstrap, {"floe.share.auto.offset.reset": "earliest"})
        return run_once(floe, consumers, args.records, run)

    results = {c: [] for c in counts}
    for run in range(args.runs):
        for consumers in counts:
            r = on_fresh_floe(args.bin, lambda f: acknowledged(f, consumers, run))
            results[consumers].append(r)
            print(f"run {run + 1}/{args.runs}, {consumers} consumers: {r['acks_per_sec']:.0f} acks/s, "
                  f"{r['entries_per_1000']:.2f} Raft entries per 1,000 acks", file=sys.stderr)
    print("| share consumers | acknowledged records/s | Raft entries per 1,000 acknowledgements | seconds |")
    print("|---:|---:|---:|---:|")
    for consumers in counts:
        rs = results[consumers]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {consumers} | {med['acks_per_sec']:,.0f} | {med['entries_per_1000']:.2f} | {med['seconds']:.1f} |")


if __name__ == "__main__":
    main()
