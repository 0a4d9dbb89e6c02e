#!/usr/bin/env python3
"""Memory of idle Kafka connections (issue 52): starts a fresh release `floe dev`, opens N
connections that send nothing (as a stranger's before authentication would), then N more that
each send one ApiVersions, and prints the agent's RSS before, with them open and after they
close. Sources rotate over 127.0.0.2.. so the per-address limit (1,000) does not close them.

    cargo build --release -p floe
    python3 loadtest/scripts/bench_idle_connections.py --connections 10000
"""

import argparse
import os
import resource
import shutil
import socket
import struct
import subprocess
import time

TARGET = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/floe-target")
WORK = "/var/tmp/floe-bench-idle"
PER_SOURCE = 900


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return -1


def api_versions_v0():
    """ApiVersions v0, header v1: key 18, version 0, correlation id 1, client id `idle`."""
    body = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"
    return struct.pack(">i", len(body)) + body


def open_idle(port, n, send):
    socks = []
    for i in range(n):
        s = socket.socket()
        s.bind((f"127.0.0.{2 + i // PER_SOURCE}", 0))
        s.connect(("127.0.0.1", port))
        if send:
            s.sendall(api_versions_v0())
        socks.append(s)
        if (i + 1) % 2000 == 0:
            print(f"  {i + 1} open", flush=True)
    return socks


def still_open(socks):
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += s.recv(65536) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return alive


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--connections", type=int, default=10000)
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.connections + 100 > hard:
        raise SystemExit(f"{args.connections} connections need more than this shell's {hard} open files")
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    kafka, http, meta = free_port(), free_port(), free_port()
    log = open(f"{WORK}/floe.log", "w")
    floe = subprocess.Popen(
        [f"{TARGET}/release/floe", "dev", "--data-dir", f"{WORK}/data", "--kafka-addr", f"127.0.0.1:{kafka}",
         "--http-addr", f"127.0.0.1:{http}", "--metadata-addr", f"127.0.0.1:{meta}",
         "--max-connections", str(args.connections + 1000)],
        stdout=log, stderr=log)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", kafka), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        time.sleep(2)
        for send in (False, True):
            what = "one ApiVersions each" if send else "nothing sent"
            before = rss_mib(floe.pid)
            started = time.time()
            socks = open_idle(kafka, args.connections, send)
            took = time.time() - started
            time.sleep(3)
            alive, held = still_open(socks), rss_mib(floe.pid)
            for s in socks:
                s.close()
            time.sleep(3)
            after = rss_mib(floe.pid)
            print(f"{args.connections} connections ({what}) opened in {took:.1f} s, {alive} still open after 3 s: "
                  f"RSS {before} MiB before, {held} MiB with them open (+{(held - before) * 1024 / args.connections:.1f} "
                  f"KiB each), {after} MiB 3 s after they closed", flush=True)
    finally:
        floe.terminate()
        floe.wait(timeout=30)


if __name__ == "__main__":
    main()
