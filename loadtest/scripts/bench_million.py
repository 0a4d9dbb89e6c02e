#!/usr/bin/env python3
"""A metadata state of many partitions, end to end (issue 53: "a metadata service sized for
1,000,000 partitions"): the `state_scale` bench builds a state of N partitions (topics of 10,000,
`--entries` index entries each, with `--group` a consumer group's offset each) and writes it as the leader's archive would; then, timed, with the release
`floe`:

1. `floe metadata restore` from that archive into an empty data directory;
2. a metadata node (one voter) started on it, until its `/metrics` count N partitions (it seeds
   the cluster from the restored state, then snapshots it: the first snapshot's time too);
3. an agent started against it, until `/readyz` answers (its mirror holds the state copy).

Also the resident memory per partition of the node and of the agent once ready. One run per
count; progress on stderr, a JSON summary on stdout.

    cargo build --release -p floe
    python3 loadtest/scripts/bench_million.py --partitions 100000,1000000
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from bench_produce import TARGET, free_port, metrics  # noqa: E402


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait(what, check, timeout):
    started = time.time()
    while time.time() - started < timeout:
        try:
            if check():
                return time.time() - started
        except OSError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not within {timeout} s")


def ready(http):
    try:
        return urllib.request.urlopen(f"http://{http}/readyz", timeout=5).status == 200
    except OSError:
        return False


def one_count(partitions, work, args):
    shutil.rmtree(work, ignore_errors=True)
    objects, data = os.path.join(work, "objects"), os.path.join(work, "m1")
    log(f"{partitions} partitions: building the state and its archive (state_scale bench)")
    shape = ["--entries", str(args.entries)] + (["--group"] if args.group else [])
    bench = subprocess.run(["cargo", "bench", "-q", "-p", "floe-metadata", "--bench", "state_scale", "--",
                            str(partitions), "--archive", objects, *shape], capture_output=True, text=True,
                           check=True)
    columns = [line.split() for line in bench.stdout.splitlines() if line.strip().startswith(str(partitions))][0]
    archive_bytes = sum(os.path.getsize(os.path.join(objects, "metadata", f))
                        for f in os.listdir(os.path.join(objects, "metadata")))
    floe = f"{TARGET}/release/floe"

    log("restoring the archive")
    started = time.time()
    subprocess.run([floe, "metadata", "restore", "--object-store", f"file://{objects}", "--data-dir", data],
                   check=True, capture_output=True)
    restore_s = time.time() - started

    meta, meta_metrics = free_port(), f"127.0.0.1:{free_port()}"
    kafka, http = free_port(), f"127.0.0.1:{free_port()}"
    node = agent = None
    try:
        log("starting the metadata node on it")
        started = time.time()
        node = subprocess.Popen([floe, "metadata", "--node-id", "1", "--metadata-addr", f"127.0.0.1:{meta}",
                                 "--data-dir", data, "--peers", f"1=127.0.0.1:{meta}",
                                 "--metrics-addr", meta_metrics],
                                stderr=open(os.path.join(work, "metadata.log"), "w"))
        wait("the node to hold every partition",
             lambda: metrics(meta_metrics).get("floe_metadata_partitions", 0) >= partitions, 600)
        node_ready_s = time.time() - started
        wait("the node's first snapshot",
             lambda: metrics(meta_metrics).get("floe_metadata_snapshot_index", 0) > 0, 600)
        snapshot_s = time.time() - started
        node_rss = rss_mib(node.pid)

        log("starting an agent against it")
        started = time.time()
        agent = subprocess.Popen([floe, "agent", "--metadata", f"127.0.0.1:{meta}",
                                  "--object-store", f"file://{objects}", "--kafka-addr", f"127.0.0.1:{kafka}",
                                  "--http-addr", http, "--node-id", "1",
                                  "--cache-dir", os.path.join(work, "cache")],
                                 stderr=open(os.path.join(work, "agent.log"), "w"))
        wait("the agent's mirror", lambda: ready(http), 600)
        agent_ready_s = time.time() - started
        time.sleep(2)
        agent_rss = rss_mib(agent.pid)
    finally:
        for p in (agent, node):
            if p is not None:
                p.terminate()
                p.wait(60)
    row = {
        "partitions": partitions,
        "entries_per_partition": args.entries,
        "group": args.group,
        "clone_ms": float(columns[2]), "encode_ms": float(columns[3]), "decode_ms": float(columns[4]),
        "archive_mib": archive_bytes / 2**20,
        "restore_s": restore_s,
        "node_ready_s": node_ready_s,
        "node_first_snapshot_s": snapshot_s,
        "agent_ready_s": agent_ready_s,
        "node_rss_b_per_partition": node_rss * 2**20 / partitions,
        "agent_rss_b_per_partition": agent_rss * 2**20 / partitions,
    }
    log(", ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="100000,1000000", help="partition counts, comma-separated")
    p.add_argument("--work", default="/var/tmp/floe-bench/million")
    p.add_argument("--entries", type=int, default=1, help="index entries per partition")
    p.add_argument("--group", action="store_true", help="and one consumer group's offset per partition")
    args = p.parse_args()
    rows = [one_count(int(c), args.work, args) for c in args.partitions.split(",")]
    print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
