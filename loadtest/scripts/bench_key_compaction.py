#!/usr/bin/env python3
"""Key compaction benchmark of `floe dev`: a compacted topic gets --updates rounds over --keys
keys (floe-loadtest --consumers 0 --keys), then one agent restart with compaction on; reports how
long the passes took, bytes read and written, and the records a consumer from offset 0 still
reads. Needs release builds:

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_key_compaction.py --keys 100000 --updates 10
"""

import argparse
import json
import os
import shutil
import sys
import time

from bench_read import WORK, Floe, catch_up, loadtest

PARTITIONS = 8


def create_compacted_topic(bootstrap, topic):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})])
    futures[topic].result(30)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=100_000)
    p.add_argument("--updates", type=int, default=10, help="records written per key")
    p.add_argument("--record-bytes", type=int, default=256)
    args = p.parse_args()
    if not 1 <= args.keys <= 10_000_000 or not 1 <= args.updates <= 100 or not 1 <= args.record_bytes <= 1 << 20:
        raise SystemExit("--keys in 1..=10M, --updates in 1..=100, --record-bytes in 1..=1 MiB")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    floe = Floe(["--compaction-interval-secs", "86400"])
    floe.start()
    try:
        create_compacted_topic(floe.bootstrap, "table")
        records = args.keys * args.updates
        rate = 100_000
        loadtest("--consumers", "0", "--bootstrap", floe.bootstrap, "--topic", "table", "--partitions", str(PARTITIONS),
                 "--record-bytes", str(args.record_bytes), "--keys", str(args.keys), "--rate", str(rate),
                 "--duration", f"{max(1, records // rate)}s", "--warmup", "0s")
        before = catch_up(floe.bootstrap, "table")
        print(f"written: {before}", file=sys.stderr)
        floe.stop()
        floe.extra = ["--compaction-interval-secs", "1"]
        started = time.time()
        floe.start()
        deadline = started + 1800
        while time.time() < deadline:
            m = floe.metrics()
            if m.get('floe_key_compaction_runs_total{outcome="ok"}', 0) >= PARTITIONS:
                break
            time.sleep(0.2)
        seconds = time.time() - started
        m = floe.metrics()
        after = catch_up(floe.bootstrap, "table")
    finally:
        floe.stop()
    read = m.get('floe_compaction_bytes_total{direction="read"}', 0)
    written = m.get('floe_compaction_bytes_total{direction="written"}', 0)
    print(json.dumps({
        "cores": os.cpu_count(), "keys": args.keys, "updates": args.updates, "record_bytes": args.record_bytes,
        "passes": m.get('floe_key_compaction_runs_total{outcome="ok"}', 0), "seconds_to_compact": round(seconds, 1),
        "bytes_read": read, "bytes_written": written, "mb_per_second_read": round(read / seconds / 1e6, 1),
        "written_over_read": round(written / read, 3) if read else None,
        "consumed_bytes_before": before["consume"]["bytes_total"],
        "consumed_bytes_after": after["consume"]["bytes_total"],
    }, indent=2))


if __name__ == "__main__":
    main()
