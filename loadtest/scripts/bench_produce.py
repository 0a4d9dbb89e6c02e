#!/usr/bin/env python3
"""Produce benchmark of `floe dev`: runs floe-loadtest against a fresh floe dev N times and
reports produce MB/s, latency percentiles, agent CPU-seconds per GiB, peak RSS and objects per
GiB, with the median of the runs. Needs release builds of floe and floe-loadtest:

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_produce.py --runs 3 --duration 20 [--object-store memory://]
    python3 loadtest/scripts/bench_produce.py --runs 3 --duration 20 --idempotence
    python3 loadtest/scripts/bench_produce.py --runs 3 --duration 15 --workload transactions --records-per-txn 10
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout):
    """Returns once something listens on 127.0.0.1:`port`; exits after `timeout` seconds."""
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.time() > deadline:
                raise SystemExit("floe did not start")
            time.sleep(0.05)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def peak_rss_mib(pid):
    m = re.search(r"VmHWM:\s+(\d+) kB", open(f"/proc/{pid}/status").read())
    return int(m.group(1)) / 1024 if m else float("nan")


def metrics(http):
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def one_run(args, run):
    data = f"/var/tmp/floe-bench/run{run}"
    shutil.rmtree(data, ignore_errors=True)
    kafka, http, meta = free_port(), free_port(), free_port()
    cmd = [f"{TARGET}/release/floe", "dev", "--data-dir", data, "--kafka-addr", f"127.0.0.1:{kafka}",
           "--http-addr", f"127.0.0.1:{http}", "--metadata-addr", f"127.0.0.1:{meta}"]
    if args.object_store:
        cmd += ["--object-store", args.object_store]
    if args.flush_interval_ms is not None:
        cmd += ["--flush-interval-ms", str(args.flush_interval_ms)]
    floe = subprocess.Popen(cmd, stderr=open(f"/var/tmp/floe-bench/floe-run{run}.log", "w"))
    try:
        wait_for_port(kafka, 10)
        before_cpu, before = cpu_seconds(floe.pid), metrics(f"127.0.0.1:{http}")
        if args.workload == "transactions":
            load_cmd = [f"{TARGET}/release/floe-loadtest", "transactions", "--bootstrap", f"127.0.0.1:{kafka}",
                        "--topic", "loadtest", "--partitions", "4", "--record-bytes", "1024",
                        "--records-per-txn", str(args.records_per_txn),
                        "--duration-secs", str(args.duration), "--warmup-secs", "3"]
        else:
            load_cmd = [f"{TARGET}/release/floe-loadtest", "--consumers", "0", "--bootstrap", f"127.0.0.1:{kafka}",
                        "--partitions", "8", "--record-bytes", "1024", "--acks", "all", "--quiet",
                        "--duration", f"{args.duration}s", "--warmup", "3s", "--rate", str(args.rate)]
            if args.idempotence:
                load_cmd.append("--idempotence")
            if args.producers != 1:
                load_cmd += ["--producers", str(args.producers)]
            if args.request_bytes:
                load_cmd += ["--request-bytes", str(args.request_bytes)]
        load = subprocess.run(load_cmd, capture_output=True, text=True, check=True)
        after_cpu, after = cpu_seconds(floe.pid), metrics(f"127.0.0.1:{http}")
        report = json.loads(load.stdout)
        rss = peak_rss_mib(floe.pid)
    finally:
        floe.send_signal(signal.SIGTERM)
        floe.wait(30)
    bytes_in = after.get('floe_broker_topic_bytes_in_total{topic="loadtest"}', 0) - \
        before.get('floe_broker_topic_bytes_in_total{topic="loadtest"}', 0)
    puts = after.get('floe_object_store_put_requests_total{outcome="ok"}', 0) - \
        before.get('floe_object_store_put_requests_total{outcome="ok"}', 0)
    gib = bytes_in / 2**30
    if args.workload == "transactions":
        row = {
            "transactions_per_second": report["transactions_per_second"],
            "commit_p50_ms": report["commit_latency_ms"]["p50"],
            "commit_p99_ms": report["commit_latency_ms"]["p99"],
            "transaction_p99_ms": report["transaction_latency_ms"]["p99"],
            "agent_cpu_seconds_per_1k_txn": (after_cpu - before_cpu) / max(report["transactions"], 1) * 1000,
        }
        print(f"run {run}: " + ", ".join(f"{k}={v:.2f}" for k, v in row.items()), file=sys.stderr)
        return row
    row = {
        "mb_per_second": report["produce"]["mb_per_second"],
        "p50_ms": report["produce"]["latency_ms"]["p50"],
        "p99_ms": report["produce"]["latency_ms"]["p99"],
        "agent_cpu_seconds_per_gib": (after_cpu - before_cpu) / gib if gib else float("nan"),
        "peak_rss_mib": rss,
        "objects_per_gib": puts / gib if gib else float("nan"),
        "errors": sum(report["errors"].values()),
    }
    print(f"run {run}: " + ", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()),
          file=sys.stderr)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=int, default=20)
    p.add_argument("--object-store")
    p.add_argument("--flush-interval-ms", type=int)
    p.add_argument("--rate", type=int, default=0, help="records/s (0: as fast as possible)")
    p.add_argument("--idempotence", action="store_true", help="idempotent producer")
    p.add_argument("--request-bytes", type=int, help="largest produce request (message.max.bytes)")
    p.add_argument("--producers", type=int, default=1, help="producers (librdkafka instances)")
    p.add_argument("--workload", choices=("produce", "transactions"), default="produce")
    p.add_argument("--records-per-txn", type=int, default=10)
    args = p.parse_args()
    if not 1 <= args.runs <= 20 or not 1 <= args.duration <= 600:
        raise SystemExit("--runs must be 1..20 and --duration 1..600")
    os.makedirs("/var/tmp/floe-bench", exist_ok=True)
    rows = [one_run(args, i + 1) for i in range(args.runs)]
    median = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({"cores": os.cpu_count(), "object_store": args.object_store or "file://", "rate": args.rate,
                      "workload": args.workload, "idempotence": args.idempotence,
                      "request_bytes": args.request_bytes, "producers": args.producers,
                      "runs": rows, "median": median}, indent=2))


if __name__ == "__main__":
    main()
