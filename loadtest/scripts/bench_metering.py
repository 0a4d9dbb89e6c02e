#!/usr/bin/env python3
"""Usage metering's cost and an agent's drain time under load (issue 26), on release builds.

Overhead: one tenant's SCRAM producer and consumer (`floe-loadtest --consumers 1`, 1 KiB
records, max rate, 8 partitions) against a fresh `floe dev` per run, with the agent's metering on
(the default: every response counted into the usage journal before it is written, reports every
5 s) and off (`--usage-metering false`; commits are metered by metadata either way). Runs
alternate between the two so drift hits both; medians of --runs, the agent's CPU from /proc.

Drain: the same producer at max rate for 10 s, then SIGTERM to `floe dev`; the time from the
signal to the agent's "drained" log line (it has left the cluster, flushed and committed what it
buffered) and to the process's exit.

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_metering.py --runs 3 --duration 15
"""

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_read import TARGET, Floe  # noqa: E402
from bench_security import measured  # noqa: E402
import bench_read  # noqa: E402

OUT = "/var/tmp/floe-bench/metering"
PASSWORD = "bench-password"
CLIENT = ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=bench",
          f"sasl.password={PASSWORD}"]


def start(metering):
    shutil.rmtree(f"{bench_read.WORK}/data", ignore_errors=True)
    floe = Floe(["--sasl-mechanisms", "SCRAM-SHA-512", "--usage-metering", "true" if metering else "false"])
    floe.start()
    admin = [f"{TARGET}/release/floe", "admin", "tenants", "--metadata", f"127.0.0.1:{floe.meta}"]
    subprocess.run([*admin, "create", "bench"], check=True, capture_output=True)
    subprocess.run([*admin, "add-user", "--tenant", "bench", "bench", "--password-stdin", "--mechanisms",
                    "SCRAM-SHA-512"], input=PASSWORD + "\n", text=True, check=True, capture_output=True)
    return floe


def loadtest_cmd(floe, duration, consumers, path):
    cmd = [f"{TARGET}/release/floe-loadtest", "--bootstrap", floe.bootstrap, "--consumers", str(consumers),
           "--duration", f"{duration}s", "--warmup", "2s", "--partitions", "8", "--output", path, "--quiet"]
    for c in CLIENT:
        cmd += ["--client-config", c]
    return cmd


def overhead_run(metering, duration, i):
    floe = start(metering)
    try:
        path = f"{OUT}/{'on' if metering else 'off'}-{i}.json"
        return measured(floe, loadtest_cmd(floe, duration, 1, path), path)
    finally:
        floe.stop()


def drain_run(i):
    """Seconds from SIGTERM to the agent's `drained` line, and to the process's exit."""
    log = f"{bench_read.WORK}/floe.log"
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    floe = start(True)
    load = subprocess.Popen(loadtest_cmd(floe, 60, 0, f"{OUT}/drain-{i}.json"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(12)
    signalled = time.monotonic()
    floe.proc.send_signal(signal.SIGTERM)
    floe.proc.wait(120)
    exited = time.monotonic() - signalled
    load.send_signal(signal.SIGINT)
    threading.Thread(target=load.wait, daemon=True).start()
    with open(log) as f:
        f.seek(offset)
        text = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        found = re.findall(r"seconds=([0-9.]+)\s+drained|drained.*?seconds=([0-9.]+)", text)
    drained = next((float(a or b) for a, b in found), float("nan"))
    load.kill()
    return drained, exited


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=15)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(bench_read.WORK, exist_ok=True)
    reports = {True: [], False: []}
    for i in range(args.runs):
        for metering in (False, True):
            print(f"metering {'on' if metering else 'off'} run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
            reports[metering].append(overhead_run(metering, args.duration, i))
    drains = []
    for i in range(args.runs):
        print(f"drain run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
        drains.append(drain_run(i))

    def med(metering, get):
        return statistics.median(get(r) for r in reports[metering])

    base = med(False, lambda r: r["produce"]["mb_per_second"])
    print(f"\n{os.cpu_count()} cores; medians of {args.runs} runs of {args.duration} s; 1 SCRAM producer and "
          "1 consumer, 1 KiB records, max rate\n")
    print("| agent metering | produce MB/s | vs off | consume MB/s | produce p50 ms | p99 ms | agent CPU s/GiB |")
    print("|---|---|---|---|---|---|---|")
    for metering in (False, True):
        mbs = med(metering, lambda r: r["produce"]["mb_per_second"])
        consume = med(metering, lambda r: (r.get("consume") or {}).get("mb_per_second", float("nan")))
        print(f"| {'on' if metering else 'off'} | {mbs:.1f} | {mbs / base:.3f} | {consume:.1f} "
              f"| {med(metering, lambda r: r['produce']['latency_ms']['p50']):.1f} "
              f"| {med(metering, lambda r: r['produce']['latency_ms']['p99']):.1f} "
              f"| {med(metering, lambda r: r['agent_cpu_s_per_gib']):.2f} |")
    drained = statistics.median(d for d, _ in drains)
    exited = statistics.median(e for _, e in drains)
    print(f"\ndrain under max-rate produce: 'drained' after {drained:.2f} s, process exited after {exited:.2f} s "
          f"(medians of {args.runs}; each: {', '.join(f'{d:.2f}/{e:.2f}' for d, e in drains)})")


if __name__ == "__main__":
    main()
