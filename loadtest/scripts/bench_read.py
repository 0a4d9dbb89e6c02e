#!/usr/bin/env python3
"""Catch-up read benchmark of `floe dev`: writes a topic once, then reads it from the start with
a `floe-loadtest --producers 0 --from-start` catch-up read from the hot tier (the agent that wrote it) and cold (after a restart,
memory-only cache), reporting MB/s and object GETs per GiB read; and compaction's write
amplification on a topic written in many small flushes. Needs release builds:

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_read.py --gib 1 --runs 3
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
WORK = "/var/tmp/floe-bench-read"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(http):
    text = urllib.request.urlopen(f"http://{http}/metrics", timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Floe:
    """A release `floe dev` on free ports, its data in `data` and its log in `log`."""

    def __init__(self, extra=(), binary=None, env=None, data=f"{WORK}/data", log=f"{WORK}/floe.log"):
        self.kafka, self.http, self.meta = free_port(), free_port(), free_port()
        self.extra = list(extra)
        self.env = {**os.environ, **(env or {})}
        self.binary = binary or f"{TARGET}/release/floe"
        self.data, self.log = data, log
        self.proc = None

    def start(self):
        cmd = [self.binary, "dev", "--data-dir", self.data, "--kafka-addr", f"127.0.0.1:{self.kafka}",
               "--http-addr", f"127.0.0.1:{self.http}", "--metadata-addr", f"127.0.0.1:{self.meta}", *self.extra]
        self.proc = subprocess.Popen(cmd, stderr=open(self.log, "a"), env=self.env)
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.kafka), timeout=0.2).close()
                return
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("floe did not start")
                time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.kafka}"

    def metrics(self):
        return metrics(f"127.0.0.1:{self.http}")


def loadtest(*args):
    out = subprocess.run([f"{TARGET}/release/floe-loadtest", "--quiet", *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def catch_up(bootstrap, topic):
    """One consumer reads the topic from its log start to its end offsets."""
    return loadtest("--producers", "0", "--from-start", "--warmup", "0s", "--duration", "600s",
                    "--bootstrap", bootstrap, "--topic", topic)


def gets(m):
    return m.get('floe_object_store_get_requests_total{outcome="ok"}', 0), m.get("floe_object_store_get_bytes_total", 0)


def read_once(floe, topic):
    before = gets(floe.metrics())
    report = catch_up(floe.bootstrap, topic)["consume"]
    after = gets(floe.metrics())
    gib = report["bytes_total"] / 2**30
    return {"mb_per_second": report["mb_per_second"], "gets_per_gib": (after[0] - before[0]) / gib,
            "get_bytes_per_byte_read": (after[1] - before[1]) / max(report["bytes_total"], 1)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=1.0, help="GiB written once and read back")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--hot-only", action="store_true", help="only the hot-tier reads (quick A/B of the read path)")
    p.add_argument("--flush-interval-ms", type=int, help="the agent's flush interval (default: floe dev's)")
    args = p.parse_args()
    if not 0 < args.gib <= 16 or not 1 <= args.runs <= 10:
        raise SystemExit("--gib must be in (0, 16] and --runs in 1..10")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    flush = ["--flush-interval-ms", str(args.flush_interval_ms)] if args.flush_interval_ms else []
    floe = Floe(["--cache-bytes", str(int(args.gib * 2**30 * 1.5)), *flush])
    floe.start()
    try:
        # 64 KiB records at 2048/s (128 MiB/s): the topic holds about --gib GiB.
        seconds = max(1, round(args.gib * 8))
        loadtest("--consumers", "0", "--bootstrap", floe.bootstrap, "--topic", "read", "--partitions", "8",
                 "--record-bytes", "65536", "--rate", "2048", "--duration", f"{seconds}s", "--warmup", "0s")
        hot = [read_once(floe, "read") for _ in range(args.runs)]
        print(f"hot: {hot}", file=sys.stderr)
        if args.hot_only:
            print(json.dumps({"cores": os.cpu_count(), "gib": args.gib,
                              "hot": {k: statistics.median(r[k] for r in hot) for k in hot[0]}}, indent=2))
            return
        cold = []
        for _ in range(args.runs):
            floe.stop()
            floe.start()  # memory-only cache: empty after the restart
            cold.append(read_once(floe, "read"))
            print(f"cold: {cold[-1]}", file=sys.stderr)
        # The same data compacted into per-partition objects, then read cold again.
        floe.stop()
        floe.extra += ["--compaction-interval-secs", "1"]
        floe.start()
        settled, last = 0, -1.0
        deadline = time.time() + 300
        while settled < 3 and time.time() < deadline:
            time.sleep(2)
            runs_now = floe.metrics().get('floe_compaction_runs_total{outcome="ok"}', 0)
            settled = settled + 1 if runs_now == last else 0
            last = runs_now
        print(f"compacted the read topic in {last:.0f} runs", file=sys.stderr)
        compacted = []
        for _ in range(args.runs):
            floe.stop()
            floe.start()
            compacted.append(read_once(floe, "read"))
            print(f"cold, compacted: {compacted[-1]}", file=sys.stderr)
        # Compaction: small flushes (1 ms interval, 32 partitions), merged once a second.
        floe.stop()
        shutil.rmtree(f"{WORK}/data", ignore_errors=True)
        small = Floe(["--flush-interval-ms", "1", "--compaction-interval-secs", "1", "--compaction-min-run", "16"])
        small.start()
        loadtest("--consumers", "0", "--bootstrap", small.bootstrap, "--topic", "small", "--partitions", "32",
                 "--record-bytes", "1024", "--rate", "20000", "--duration", "20s", "--warmup", "0s")
        time.sleep(10)
        m = small.metrics()
        small.stop()
        produced = m.get('floe_broker_topic_bytes_in_total{topic="small"}', 0)
        written = m.get('floe_compaction_bytes_total{direction="written"}', 0)
        runs = m.get('floe_compaction_runs_total{outcome="ok"}', 0)
    finally:
        if floe.proc and floe.proc.poll() is None:
            floe.stop()
    median = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    print(json.dumps({
        "cores": os.cpu_count(), "gib": args.gib,
        "hot": {k: median(hot, k) for k in hot[0]}, "cold": {k: median(cold, k) for k in cold[0]},
        "cold_compacted": {k: median(compacted, k) for k in compacted[0]},
        "compaction": {"produced_bytes": produced, "written_bytes": written, "runs": runs,
                       "write_amplification": written / produced if produced else float("nan")},
    }, indent=2))


if __name__ == "__main__":
    main()
