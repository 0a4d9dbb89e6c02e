#!/usr/bin/env python3
"""HTTP produce benchmark against `floe dev` (release builds), each figure the median of --runs
runs on a fresh data directory, with the Kafka path measured in the same session as baseline:

  single   one 100-byte record per request, 256 requests in flight
  multi    100 records per request to /records (a delivery report per record)
  bulk     1,000 records per request to /records:bulk (NDJSON), 8 in flight
  kafka    the same 100-byte keyed records from one librdkafka producer (baseline)

Every run reports records/s, request latency percentiles and the agent's CPU seconds (from its
/metrics), so records per agent CPU-second reads as records/s per core. The generator runs on
the same 2 cores, so the totals are lower bounds. Prints a markdown table.

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_http.py --runs 3 --duration 10
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from bench_read import TARGET, Floe  # noqa: E402
import bench_read  # noqa: E402

LOADTEST = f"{TARGET}/release/floe-loadtest"
OUT = "/var/tmp/floe-bench/http"

MODES = {
    "single": ["--mode", "single", "--concurrency", "256"],
    "multi": ["--mode", "multi", "--records-per-request", "100", "--concurrency", "16"],
    "bulk": ["--mode", "bulk", "--records-per-request", "1000", "--concurrency", "8"],
}


def fresh_floe():
    shutil.rmtree(f"{bench_read.WORK}/data", ignore_errors=True)
    floe = Floe(["--flush-interval-ms", "10"])
    floe.start()
    return floe


def http_run(mode, duration, i):
    floe = fresh_floe()
    try:
        path = f"{OUT}/{mode}-{i}.json"
        subprocess.run([LOADTEST, "http", "--url", f"http://127.0.0.1:{floe.http}", "--duration-secs", str(duration),
                        "--record-bytes", "100", "--output", path, *MODES[mode]],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path) as f:
            r = json.load(f)
        return {"rps": r["records_per_sec"], "p50": r["latency_ms"]["p50"], "p99": r["latency_ms"]["p99"],
                "per_cpu": r["records_per_agent_cpu_second"], "errors": r["errors"]}
    finally:
        floe.stop()


def kafka_run(duration, i):
    floe = fresh_floe()
    try:
        path = f"{OUT}/kafka-{i}.json"
        subprocess.run([LOADTEST, "--bootstrap", floe.bootstrap, "--consumers", "0", "--record-bytes", "100",
                        "--keys", "1000", "--partitions", "4", "--duration", f"{duration}s", "--warmup", "2s",
                        "--metrics", f"http://127.0.0.1:{floe.http}/metrics", "--output", path, "--quiet"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(path) as f:
            r = json.load(f)
        produce = r["produce"]
        records = produce["records"]
        cpu = (r.get("cost") or {}).get("agent_cpu_seconds")
        return {"rps": produce["records_per_second"], "p50": produce["latency_ms"]["p50"],
                "p99": produce["latency_ms"]["p99"], "per_cpu": records / cpu if cpu else None, "errors": 0}
    finally:
        floe.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run after a 2 s warm-up")
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(bench_read.WORK, exist_ok=True)
    rows = {}
    for mode in [*MODES, "kafka"]:
        runs = []
        for i in range(args.runs):
            print(f"{mode} run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
            runs.append(kafka_run(args.duration, i) if mode == "kafka" else http_run(mode, args.duration, i))
        rows[mode] = runs
    med = lambda runs, k: statistics.median([r[k] for r in runs if r[k] is not None] or [0])
    base = med(rows["kafka"], "rps")
    print(f"\n{os.cpu_count()} cores; medians of {args.runs} runs of {args.duration} s; 100-byte values\n")
    print("| path | records/s | vs Kafka | p50 ms | p99 ms | records per agent CPU-s | errors |")
    print("|---|---|---|---|---|---|---|")
    for mode, runs in rows.items():
        print(f"| {mode} | {med(runs, 'rps'):,.0f} | {med(runs, 'rps') / base:.2f} | {med(runs, 'p50'):.1f} "
              f"| {med(runs, 'p99'):.1f} | {med(runs, 'per_cpu'):,.0f} | {sum(r['errors'] for r in runs)} |")


if __name__ == "__main__":
    main()
