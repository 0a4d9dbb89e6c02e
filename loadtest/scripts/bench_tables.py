#!/usr/bin/env python3
"""Table topic benchmark: freshness (how long after its timestamp a record is queryable in the
table), Parquet bytes per record byte, and object requests per GiB converted. Starts a fresh
`floe dev` (FLOE_BIN, default the debug build), produces Avro records at a steady rate to a
table topic with the given commit interval, then reads the table through the REST catalog:
each row's freshness is the commit time of the snapshot that added its file minus the row's
`_timestamp`. Prints one JSON line per run, and a summary.

    .venv/bin/python loadtest/scripts/bench_tables.py --interval-ms 5000 --seconds 60 --rate 2000
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import pyarrow.parquet as pq
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.catalog import load_catalog

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
SCHEMA = {
    "type": "record", "name": "Reading", "namespace": "bench",
    "fields": [{"name": "device", "type": "string"}, {"name": "at", "type": "long"},
               {"name": "celsius", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
               {"name": "note", "type": ["null", "string"], "default": None}],
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(http):
    text = urllib.request.urlopen(f"{http}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = out.get(name, 0.0) + float(value)
    return out


def run(args, floe_bin):
    work = tempfile.mkdtemp(prefix="floe-bench-tables-")
    kafka, http, meta = free_port(), free_port(), free_port()
    log = open(os.path.join(work, "floe.log"), "wb")
    proc = subprocess.Popen([floe_bin, "dev", "--data-dir", os.path.join(work, "data"),
                             "--kafka-addr", f"127.0.0.1:{kafka}", "--http-addr", f"127.0.0.1:{http}",
                             "--metadata-addr", f"127.0.0.1:{meta}"], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        bootstrap, base = f"127.0.0.1:{kafka}", f"http://127.0.0.1:{http}"
        topic = "bench.readings"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 4, 1, config={
            "floe.table.enable": "true", "floe.table.commit.interval.ms": str(args.interval_ms)})])[topic].result()
        sr = SchemaRegistryClient({"url": f"{base}/schema-registry"})
        serialize = AvroSerializer(sr, json.dumps(SCHEMA))
        ctx = SerializationContext(topic, MessageField.VALUE)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        before = metrics(base)
        sent, record_bytes, start = 0, 0, time.monotonic()
        while time.monotonic() - start < args.seconds:
            due = int((time.monotonic() - start) * args.rate)
            while sent < due:
                value = serialize({"device": f"d{sent % 500}", "at": sent, "celsius": sent / 10,
                                   "tags": ["a", "b"][: sent % 3], "note": None if sent % 4 else "n"}, ctx)
                producer.produce(topic, key=f"k{sent % 500}".encode(), value=value)
                record_bytes += len(value) + 4
                sent += 1
            producer.poll(0)
            time.sleep(0.005)
        producer.flush()
        print(f"  produced {sent} records in {args.seconds}s; waiting for the table", file=sys.stderr)
        catalog = load_catalog("bench", type="rest", uri=f"{base}/iceberg")
        deadline = time.monotonic() + args.interval_ms / 1000 * 3 + 60
        while True:
            table = catalog.load_table("bench.readings")
            snapshot = table.current_snapshot()
            if snapshot and int(snapshot.summary["total-records"]) >= sent:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the table did not catch up")
            time.sleep(0.5)
        after = metrics(base)
        committed_at = {s.snapshot_id: s.timestamp_ms for s in table.metadata.snapshots}
        # Each row once: read from the file an append snapshot added it in (merges rewrite rows
        # into new files later).
        freshness, parquet_bytes, seen = [], 0, set()
        for snapshot in table.metadata.snapshots:
            if snapshot.summary.operation.value != "append":
                continue
            for manifest in snapshot.manifests(table.io):
                if manifest.added_snapshot_id != snapshot.snapshot_id:
                    continue
                for entry in manifest.fetch_manifest_entry(table.io):
                    path = entry.data_file.file_path
                    if entry.status.value != 1 or path in seen:
                        continue
                    seen.add(path)
                    parquet_bytes += entry.data_file.file_size_in_bytes
                    with table.io.new_input(path).open() as f:
                        stamps = pq.read_table(f, columns=["_timestamp"]).column("_timestamp").to_pylist()
                    freshness += [(snapshot.timestamp_ms - ts.timestamp() * 1000) / 1000 for ts in stamps]
        freshness.sort()
        gib = record_bytes / 2**30
        puts = after.get('floe_object_store_put_requests_total{outcome="ok"}', 0) - \
            before.get('floe_object_store_put_requests_total{outcome="ok"}', 0)
        result = {
            "interval_ms": args.interval_ms, "records": sent, "record_bytes": record_bytes,
            "freshness_p50_s": round(freshness[len(freshness) // 2], 2),
            "freshness_p99_s": round(freshness[int(len(freshness) * 0.99)], 2),
            "parquet_bytes_per_record_byte": round(parquet_bytes / record_bytes, 3),
            "table_files": after.get("floe_table_files_total", 0), "commits": len(committed_at),
            "table_bytes_written": after.get("floe_table_bytes_written_total", 0),
            "convert_seconds": round(after.get("floe_table_convert_seconds_total", 0), 2),
            "puts_all_per_gib": round(puts / gib, 1),
            # Data files, plus a manifest, a manifest list and a metadata file per commit.
            "table_puts_per_gib": round((after.get("floe_table_files_total", 0) + 3 * len(committed_at)) / gib, 1),
        }
        print(json.dumps(result))
        return result
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval-ms", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--rate", type=int, default=2000, help="records per second")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    floe_bin = os.environ.get("FLOE_BIN", os.path.join(TARGET, "debug", "floe"))
    results = [run(args, floe_bin) for _ in range(args.runs)]
    print(json.dumps({"median_freshness_p99_s": statistics.median(r["freshness_p99_s"] for r in results)}))


if __name__ == "__main__":
    main()
