#!/usr/bin/env python3
"""The load generator's benchmark suite against `floe dev` (release builds), each figure the
median of --runs runs, every run on a fresh data directory:

  flush    produce throughput and latency vs --flush-bytes and --flush-interval-ms (file://)
  latency  produce and end-to-end latency at a fixed rate under the simulated object-store
           latency profiles (none, s3-express, s3-standard): the old s3:// defaults (a 250 ms
           interval) against today's defaults for the store each profile simulates (adaptive
           flushing, hedged PUTs), and each change alone
  floor    the same max-rate produce against `floe-loadtest null-sink` (a Kafka endpoint that
           stores nothing) and against Floe: what the machine and the generator can do
  s3       the same max-rate produce on file:// and on s3:// (a moto server, in memory, on the
           same cores; MOTO_SERVER or `moto_server` on PATH), with payloads signed (SigV4's
           SHA-256 of the body: plain-HTTP endpoints' default) and unsigned (the HTTPS default)

Reports (JSON + SVG per run) go to /var/tmp/floe-bench/loadtest/; a markdown table is printed.

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_loadtest.py --runs 3 [--only flush,latency,floor]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from bench_read import TARGET, Floe, cpu_seconds  # noqa: E402
import bench_read  # noqa: E402

OUT = "/var/tmp/floe-bench/loadtest"
LOADTEST = f"{TARGET}/release/floe-loadtest"


def run_loadtest(name, bootstrap, args, metrics=None):
    path = f"{OUT}/{name}.json"
    cmd = [LOADTEST, "--bootstrap", bootstrap, "--output", path, "--quiet", *args]
    if metrics:
        cmd += ["--metrics", metrics]
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    with open(path) as f:
        return json.load(f)


def with_floe(extra, fn, env=None):
    shutil.rmtree(f"{bench_read.WORK}/data", ignore_errors=True)
    floe = Floe(extra, env=env)
    floe.start()
    try:
        return fn(floe)
    finally:
        floe.stop()


def med(reports, get):
    values = [get(r) for r in reports]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=1):
    return "-" if v is None else f"{v:,.{digits}f}"


def flush_sweep(runs, duration):
    print("\n### Produce vs flush size and interval (file://, 1 producer, 1 KiB records, max rate)\n")
    print("| --flush-bytes | --flush-interval-ms | MB/s | p50 ms | p99 ms | PUTs/GiB | agent CPU s/GiB |")
    print("|---|---|---|---|---|---|---|")
    configs = [(mib, 10) for mib in (1, 4, 8, 16)] + [(8, ms) for ms in (50, 250)]
    for mib, ms in configs:
        reports = []
        for i in range(runs):
            name = f"flush-{mib}m-{ms}ms-{i}"
            reports.append(with_floe(
                ["--flush-bytes", str(mib << 20), "--flush-interval-ms", str(ms)],
                lambda f: run_loadtest(name, f.bootstrap, ["--consumers", "0", "--duration", duration,
                                                           "--warmup", "2s", "--partitions", "8"],
                                       f"http://127.0.0.1:{f.http}/metrics")))
        print(f"| {mib} MiB | {ms} | {fmt(med(reports, lambda r: r['produce']['mb_per_second']))} "
              f"| {fmt(med(reports, lambda r: r['produce']['latency_ms']['p50']))} "
              f"| {fmt(med(reports, lambda r: r['produce']['latency_ms']['p99']))} "
              f"| {fmt(med(reports, lambda r: r['cost']['puts_per_gib_produced']), 0)} "
              f"| {fmt(med(reports, lambda r: r['cost']['agent_cpu_seconds_per_gib']), 2)} |", flush=True)


# (row name, profile, flags): the s3:// defaults before hedging and adaptive flushing, today's
# defaults of the store the profile simulates, and what each of today's two changes gives alone.
LATENCY_ROWS = [
    ("interval 250 ms (old s3:// defaults)", profile, ["--flush-interval-ms", "250", "--flush-adaptive=false",
                                                      "--hedge-puts=false"])
    for profile in ("none", "s3-express", "s3-standard")
] + [
    ("defaults", profile, []) for profile in ("none", "s3-express", "s3-standard")
] + [
    ("defaults, no hedging", "s3-standard", ["--hedge-puts=false"]),
    ("defaults, min flush interval 20 ms", "s3-standard", ["--min-flush-interval-ms", "20"]),
]


def latency_profiles(runs, duration):
    print("\n### Latency under simulated object-store profiles (5,000 records/s of 1 KiB, "
          "1 producer + 1 consumer, 8 partitions)\n")
    print("| flush | profile | produce p50 | produce p99 | produce p99.9 | e2e p50 | e2e p99 | e2e p99.9 "
          "| PUTs/GiB | USD/GiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, profile, flags in LATENCY_ROWS:
        extra = flags + ([] if profile == "none" else ["--object-store-latency", profile])
        reports = []
        for i in range(runs):
            name = f"latency-{len(flags)}-{mode.split()[0]}-{profile}-{i}"
            reports.append(with_floe(extra, lambda f: run_loadtest(
                name, f.bootstrap, ["--rate", "5000", "--duration", duration, "--warmup", "3s", "--partitions", "8"],
                f"http://127.0.0.1:{f.http}/metrics")))
        p = lambda q: lambda r: r["produce"]["latency_ms"][q]  # noqa: E731
        e = lambda q: lambda r: r["consume"]["end_to_end_latency_ms"][q]  # noqa: E731
        print(f"| {mode} | {profile} | {fmt(med(reports, p('p50')))} | {fmt(med(reports, p('p99')))} "
              f"| {fmt(med(reports, p('p999')))} | {fmt(med(reports, e('p50')))} | {fmt(med(reports, e('p99')))} "
              f"| {fmt(med(reports, e('p999')))} "
              f"| {fmt(med(reports, lambda r: r['cost']['puts_per_gib_produced']), 0)} "
              f"| {fmt(med(reports, lambda r: r['cost']['usd_per_gib']), 4)} |", flush=True)


def floor(runs, duration):
    print("\n### Floor: the same producers against a null sink and against Floe (max rate, 1 KiB records)\n")
    print("| target | producers | MB/s | generator CPU s/GiB | agent CPU s/GiB |")
    print("|---|---|---|---|---|")
    port = bench_read.free_port()
    for producers in (1, 2):
        args = ["--consumers", "0", "--producers", str(producers), "--duration", duration, "--warmup", "2s"]
        sink = subprocess.Popen([LOADTEST, "null-sink", "--listen", f"127.0.0.1:{port}"], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            sink_reports = [run_loadtest(f"floor-sink-{producers}p-{i}", f"127.0.0.1:{port}", args)
                            for i in range(runs)]
        finally:
            sink.kill()
            sink.wait()
        floe_reports = [with_floe([], lambda f: run_loadtest(f"floor-floe-{producers}p-{i}", f.bootstrap, args,
                                                             f"http://127.0.0.1:{f.http}/metrics"))
                        for i in range(runs)]
        for target, reports in (("null sink", sink_reports), ("floe dev", floe_reports)):
            print(f"| {target} | {producers} | {fmt(med(reports, lambda r: r['produce']['mb_per_second']))} "
                  f"| {fmt(med(reports, lambda r: r['generator']['cpu_seconds_per_gib']), 2)} "
                  f"| {fmt(med(reports, lambda r: (r['cost'] or {}).get('agent_cpu_seconds_per_gib')), 2)} |",
                  flush=True)


def s3_store(runs, duration):
    print("\n### Produce on file:// and on s3:// (moto), 1 producer, 1 KiB records, max rate; the last row "
          "adds a consumer group of 1 (CPU per GiB produced plus consumed)\n")
    print("| store | payload | consumers | MB/s | agent CPU s/GiB | S3 server CPU s/GiB | PUTs/GiB |")
    print("|---|---|---|---|---|---|---|")
    moto = os.environ.get("MOTO_SERVER") or shutil.which("moto_server")
    if not moto:
        raise SystemExit("no moto_server: set MOTO_SERVER or put it on PATH (scripts/test.sh installs it in .venv)")
    creds = {"AWS_ACCESS_KEY_ID": "floe-bench", "AWS_SECRET_ACCESS_KEY": "floe-bench-secret",
             "AWS_REGION": "us-east-1"}
    rows = (("file://", "-", 0), ("s3://", "signed", 0), ("s3://", "unsigned", 0), ("s3://", "unsigned", 1))
    for store, payload, consumers in rows:
        args = ["--consumers", str(consumers), "--duration", duration, "--warmup", "2s", "--partitions", "8"]
        reports, server_cpu = [], []
        for i in range(runs):
            name = f"s3-{store.rstrip(':/')}-{payload}-{consumers}c-{i}"
            if store == "file://":
                reports.append(with_floe([], lambda f: run_loadtest(name, f.bootstrap, args,
                                                                    f"http://127.0.0.1:{f.http}/metrics")))
                continue
            port = bench_read.free_port()
            server = subprocess.Popen([moto, "-H", "127.0.0.1", "-p", str(port)], env={**os.environ, **creds},
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                endpoint = f"http://127.0.0.1:{port}"
                deadline = time.time() + 20
                while True:
                    try:
                        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/bench", method="PUT"), timeout=2)
                        break
                    except OSError:
                        if time.time() > deadline:
                            raise SystemExit("moto_server did not start")
                        time.sleep(0.2)
                before = cpu_seconds(server.pid)
                env = {**creds, "AWS_UNSIGNED_PAYLOAD": "true" if payload == "unsigned" else "false"}
                report = with_floe(["--object-store", "s3://bench", "--s3-endpoint", endpoint],
                                   lambda f: run_loadtest(name, f.bootstrap, args, f"http://127.0.0.1:{f.http}/metrics"),
                                   env)
                reports.append(report)
                server_cpu.append((cpu_seconds(server.pid) - before) / report["cost"]["gib_produced"])
            finally:
                server.kill()
                server.wait()
        print(f"| {store} | {payload} | {consumers} | {fmt(med(reports, lambda r: r['produce']['mb_per_second']))} "
              f"| {fmt(med(reports, lambda r: r['cost']['agent_cpu_seconds_per_gib']), 2)} "
              f"| {fmt(statistics.median(server_cpu) if server_cpu else None, 2)} "
              f"| {fmt(med(reports, lambda r: r['cost']['puts_per_gib_produced']), 0)} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", default="10s")
    p.add_argument("--only", default="flush,latency,floor")
    args = p.parse_args()
    if not 1 <= args.runs <= 10:
        raise SystemExit("--runs must be in 1..10")
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(bench_read.WORK, exist_ok=True)
    print(f"cores: {os.cpu_count()}; reports in {OUT}", flush=True)
    parts = {"flush": flush_sweep, "latency": latency_profiles, "floor": floor, "s3": s3_store}
    for part in args.only.split(","):
        if part not in parts:
            raise SystemExit(f"unknown part {part!r}; known: {', '.join(parts)}")
        parts[part](args.runs, args.duration)


if __name__ == "__main__":
    main()
