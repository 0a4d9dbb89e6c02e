#!/usr/bin/env python3
"""Produce-time schema validation benchmark: the agent's CPU per record for Avro records
produced to a topic without validation, with `confluent.value.schema.validation=true` (mode
`id`), and with `floe.schema.validation.mode=full`. Each run starts a fresh release `floe dev`,
registers one Avro schema, and sends the same pre-serialized records (lz4 batches, as a tuned
producer would) to one topic per mode, in a rotated order; it reads the agent's CPU time from
/proc around each mode. Needs a release build and the test venv (confluent-kafka, fastavro):

    cargo build --release -p floe
    .venv/bin/python loadtest/scripts/bench_schema_validation.py --runs 3 --records 300000
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
CLK_TCK = os.sysconf("SC_CLK_TCK")
SCHEMA = {
    "type": "record", "name": "Reading", "namespace": "bench",
    "fields": [{"name": "device", "type": "string"}, {"name": "at", "type": "long"},
               {"name": "celsius", "type": "double"}, {"name": "tags", "type": {"type": "array", "items": "string"}},
               {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["OK", "WARN", "FAIL"]}}],
}
MODES = {
    "off": {},
    "id": {"confluent.value.schema.validation": "true"},
    "full": {"confluent.value.schema.validation": "true", "floe.schema.validation.mode": "full"},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def wait_for(url, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def one_run(args, run):
    data = f"/var/tmp/floe-bench-sv/run{run}"
    shutil.rmtree(data, ignore_errors=True)
    kafka, http, meta = free_port(), free_port(), free_port()
    proc = subprocess.Popen(
        [f"{TARGET}/release/floe", "dev", "--data-dir", data, "--kafka-addr", f"127.0.0.1:{kafka}",
         "--http-addr", f"127.0.0.1:{http}", "--metadata-addr", f"127.0.0.1:{meta}",
         "--object-store", f"file://{data}/objects"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(f"http://127.0.0.1:{http}/readyz")
        bootstrap = f"127.0.0.1:{kafka}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topics = {mode: f"readings-{mode}" for mode in MODES}
        futures = admin.create_topics([NewTopic(t, 1, 1, config=MODES[m]) for m, t in topics.items()])
        for f in futures.values():
            f.result(timeout=20)
        sr = SchemaRegistryClient({"url": f"http://127.0.0.1:{http}/schema-registry"})
        values = {}
        for mode, topic in topics.items():
            if args.client == "loadtest":
                sr.register_schema(f"{topic}-value", Schema(json.dumps(SCHEMA), "AVRO"))
                continue
            ser = AvroSerializer(sr, json.dumps(SCHEMA))
            ctx = SerializationContext(topic, MessageField.VALUE)
            values[mode] = [ser({"device": f"dev-{i % 1000}", "at": 1_700_000_000_000 + i, "celsius": 20.5 + i % 7,
                                 "tags": ["a", "b"][: i % 3], "status": ["OK", "WARN", "FAIL"][i % 3]}, ctx)
                            for i in range(1000)]
        order = list(args.modes)
        order = order[run % len(order):] + order[:run % len(order)]
        out = {}
        perf = None
        if args.perf:
            perf = subprocess.Popen(["perf", "record", "-F", "1999", "-g", "-o", f"{args.perf}.{run}",
                                     "-p", str(proc.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        for mode in order:
            if args.client == "loadtest":
                out[mode] = loadtest_mode(args, proc.pid, bootstrap, http, topics[mode], sr, run, mode)
                continue
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                          "compression.type": "lz4", "queue.buffering.max.messages": 1_000_000})
            p.list_topics(topics[mode], timeout=10)
            batch = values[mode]
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            for i in range(args.records):
                while True:
                    try:
                        p.produce(topics[mode], value=batch[i % len(batch)])
                        break
                    except BufferError:
                        p.poll(0.01)
            if p.flush(120) != 0:
                raise RuntimeError(f"{mode}: records left unsent")
            cpu, wall = cpu_seconds(proc.pid) - cpu0, time.monotonic() - t0
            out[mode] = {"cpu_us_per_record": cpu / args.records * 1e6, "records_per_s": args.records / wall}
            print(f"run {run} {mode:>4}: agent {out[mode]['cpu_us_per_record']:.2f} CPU-µs/record, "
                  f"{out[mode]['records_per_s']:,.0f} records/s", flush=True)
        if perf:
            perf.send_signal(2)
            perf.wait()
        return out
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def loadtest_mode(args, pid, bootstrap, http, topic, sr, run, mode):
    """One mode produced by floe-loadtest (a Rust librdkafka producer, far lighter than Python's
    loop, so the agent's share of the two cores is larger): values of --record-bytes text
    behind the registry's framing with the schema's id, lz4 batches."""
    schema_id = sr.get_latest_version(f"{topic}-value").schema_id
    report = f"/var/tmp/floe-bench-sv/loadtest-{run}-{mode}.json"
    cpu0 = cpu_seconds(pid)
    subprocess.run(
        [f"{TARGET}/release/floe-loadtest", "--bootstrap", bootstrap, "--topic", topic, "--partitions", "1",
         "--producers", "1", "--consumers", "0", "--records", str(args.records), "--duration", "10m",
         "--warmup", "0s", "--record-bytes", str(args.record_bytes), "--payload", "text", "--compression", "lz4",
         "--linger-ms", "20", "--schema-id", str(schema_id), "--metrics", f"http://127.0.0.1:{http}/metrics",
         "--output", report, "--quiet"], check=True, stdout=subprocess.DEVNULL)
    cpu = cpu_seconds(pid) - cpu0
    produce = json.load(open(report))["produce"]
    out = {"cpu_us_per_record": cpu / args.records * 1e6, "records_per_s": produce["records_per_second"]}
    print(f"run {run} {mode:>4}: agent {out['cpu_us_per_record']:.2f} CPU-µs/record, "
          f"{out['records_per_s']:,.0f} records/s (floe-loadtest)", flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--modes", type=lambda s: s.split(","), default=list(MODES),
                    help="comma-separated subset of off,id,full (default all)")
    ap.add_argument("--client", choices=["python", "loadtest"], default="python",
                    help="python: confluent-kafka's AvroSerializer output from one Python loop; loadtest: "
                         "floe-loadtest (cargo build --release -p floe-loadtest) with framed text values")
    ap.add_argument("--record-bytes", type=int, default=64, help="value bytes with --client loadtest")
    ap.add_argument("--perf", metavar="FILE", help="record the agent with `perf record` into FILE")
    args = ap.parse_args()
    if args.client == "loadtest" and "full" in args.modes:
        sys.exit("--client loadtest sends framed text, not Avro: use --modes off,id")
    if not os.path.exists(f"{TARGET}/release/floe"):
        sys.exit(f"{TARGET}/release/floe missing: cargo build --release -p floe")
    runs = [one_run(args, r) for r in range(args.runs)]
    base = statistics.median(r[args.modes[0]]["cpu_us_per_record"] for r in runs)
    print(f"\nmedians of {args.runs} runs, {args.records:,} records each ({os.cpu_count()} cores):")
    for mode in args.modes:
        cpu = statistics.median(r[mode]["cpu_us_per_record"] for r in runs)
        rate = statistics.median(r[mode]["records_per_s"] for r in runs)
        print(f"  {mode:>4}: {cpu:6.2f} agent CPU-µs/record ({cpu / base:.2f}x {args.modes[0]}), {rate:,.0f} records/s")


if __name__ == "__main__":
    main()
