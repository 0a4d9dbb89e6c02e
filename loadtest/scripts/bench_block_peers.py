#!/usr/bin/env python3
"""One GET per block per zone (issue 28): object-store GETs when three consumer groups read the
same cold data through three fetch agents of one zone, with peer listeners (`--peer-addr`, each
block read once by its owner) and without (each agent reads every block it misses itself).

Each run starts the e2e suite's cluster (3 metadata nodes, agent 1 producing with 8 MiB flushes,
agents 2-4 fetching, each in an agent group of its own so a consumer reaching one reads
everything through it; zones by agent, all zone a, peer listeners on 127.0.0.2-4), writes
--mib MiB of 1 KiB records into 8 partitions, then three consumer groups (confluent-kafka,
stating zone a) read it all at once, one through each fetch agent. It counts
`floe_object_store_get_requests_total` on the fetch agents and the blocks of the objects written
(a small last block counts with the one before, as one GET reads both), and the cross-zone
record bytes (`floe_fetch_zone_bytes_total` with two different zones). Prints a markdown table
of medians over --runs, with progress on stderr.

    cargo build -p floe
    .venv/bin/python loadtest/scripts/bench_block_peers.py --mib 1024 --runs 3
    .venv/bin/python loadtest/scripts/bench_block_peers.py --tail --runs 3 [--profile s3-standard]

--tail measures what the other choice, the writer pushing each block it writes to its owner,
would save: tail consumers' end-to-end latency through the writer (its blocks are in its memory,
as pushed blocks would be at the owner) and through a fetch agent (the owner reads each new
block from the store on first read), at --rate records/s of 1 KiB with floe-loadtest.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import test_block_peers as scenario  # noqa: E402
from conftest import Cluster, free_port  # noqa: E402


def run_once(mib: int, peers: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="floe-bench-peers-") as tmp:
        ports = {a: free_port() for a in scenario.FETCHERS}

        def args(a):
            if a == 1:
                return ["--roles", "produce,jobs", "--flush-bytes", str(8 << 20), "--flush-interval-ms", "1000",
                        "--compaction-interval-secs", "3600"]
            extra = ["--peer-addr", f"127.0.0.{a}:{ports[a]}"] if peers else []
            return ["--roles", "fetch", "--agent-group", f"g{a}", *extra]
        c = Cluster(tmp, agent_args=args, zones=("a",) * 4)
        try:
            c.start()
            if peers:
                import requests

                def known(a):
                    body = requests.get(f"{c.http_url(a)}/v1/cluster", timeout=5).json()
                    return {x["agent_id"] for x in body.get("agents", []) if x.get("peer_listener")} == set(scenario.FETCHERS)
                for a in scenario.FETCHERS:
                    scenario.wait_until(lambda a=a: known(a), 60, "peer listeners known")
            topic = scenario.unique_name("bench-peers")
            began = time.monotonic()
            count = scenario.produce_topic(c, topic, mib, seed=1)
            print(f"  produced {mib} MiB in {time.monotonic() - began:.1f} s", file=sys.stderr)
            objects = scenario.segment_objects(c)
            before = sum(scenario.metric(c, a, "floe_object_store_get_requests_total") for a in scenario.FETCHERS)
            began = time.monotonic()
            counts, errors = scenario.read_through(c, scenario.FETCHERS, topic, count, timeout=1800)
            seconds = time.monotonic() - began
            if errors or any(n != count for n in counts.values()):
                raise SystemExit(f"read failed: {counts} {errors[:3]}")
            gets = sum(scenario.metric(c, a, "floe_object_store_get_requests_total") for a in scenario.FETCHERS) - before
            cross = 0.0
            for a in scenario.FETCHERS:
                for k, v in scenario.metrics(c, a).items():
                    if k.startswith("floe_fetch_zone_bytes_total{") and 'client_zone="a"' not in k:
                        cross += v
            blocks = sum(len(scenario.owner_blocks(size)) for size in objects.values())
            gib = sum(objects.values()) / (1 << 30)
            return {"objects": len(objects), "blocks": blocks, "gets": gets, "gets_per_gib": gets / gib,
                    "ideal_per_gib": 1024 / 4, "ratio": gets / blocks, "cross": cross, "seconds": seconds}
        finally:
            c.stop()


def tail_runs(runs: int, seconds: int, rate: int, loadtest: str, profile: str, flush_ms: int) -> None:
    """What a writer pushing its blocks to their owners would save tail consumers: end-to-end
    latency through the writer (its blocks are in its memory, as pushed blocks would be at an
    owner) against through a fetch agent of the zone (the owner reads a new block from the store
    on its first read), with every agent's object store delayed by `profile`."""
    import json
    import subprocess
    with tempfile.TemporaryDirectory(prefix="floe-bench-tail-") as tmp:
        ports = {a: free_port() for a in (2, 3)}

        def args(a):
            latency = ["--object-store-latency", profile]
            if a == 1:
                return ["--roles", "produce,jobs", "--flush-interval-ms", str(flush_ms), *latency]
            return ["--roles", "fetch", "--agent-group", f"g{a}", "--peer-addr", f"127.0.0.{a}:{ports[a]}", *latency]
        c = Cluster(tmp, agent_args=args, zones=("a",) * 3)
        try:
            c.start()
            results = {"writer": [], "fetch agent": []}
            for i in range(runs):
                for path, reader in (("writer", 1), ("fetch agent", 2)):
                    out = os.path.join(tmp, f"{path.replace(' ', '-')}-{i}.json")
                    print(f"tail run {i + 1}/{runs} through the {path}", file=sys.stderr)
                    subprocess.run([loadtest, "--bootstrap", c.bootstrap(1), "--topic", scenario.unique_name("tail"),
                                    "--duration", f"{seconds}s", "--rate", str(rate), "--consumers", "1",
                                    "--consumer-config", f"bootstrap.servers={c.bootstrap(reader)}",
                                    "--output", out, "--quiet"], check=True, timeout=seconds + 120)
                    with open(out) as f:
                        report = json.load(f)
                    e2e = report["consume"]["end_to_end_latency_ms"]
                    results[path].append((e2e["p50"], e2e["p99"], report["produce"]["latency_ms"]["p99"]))
            print(f"| tail consumer reads through | end-to-end p50 ms | end-to-end p99 ms | produce p99 ms |")
            print("|---|---:|---:|---:|")
            for path, rows in results.items():
                med = [statistics.median(r[k] for r in rows) for k in range(3)]
                print(f"| {path} | {med[0]:.0f} | {med[1]:.0f} | {med[2]:.0f} |")
        finally:
            c.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tail", action="store_true",
                   help="measure tail consumers' latency through the writer vs a fetch agent instead")
    p.add_argument("--seconds", type=int, default=20)
    p.add_argument("--rate", type=int, default=5000)
    p.add_argument("--profile", default="s3-standard")
    p.add_argument("--flush-interval-ms", type=int, default=250, help="the writer's (250: agents' default on s3://)")
    p.add_argument("--loadtest", default=os.environ.get("FLOE_LOADTEST", "target/debug/floe-loadtest"))
    a = p.parse_args()
    if a.tail:
        tail_runs(a.runs, a.seconds, a.rate, a.loadtest, a.profile, a.flush_interval_ms)
        return
    print("| peer listeners | objects | blocks | GETs by 3 agents | GETs per GiB | GETs per block | cross-zone bytes | read seconds |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for peers in (False, True):
        runs = []
        for i in range(a.runs):
            print(f"peers={peers} run {i + 1}/{a.runs}", file=sys.stderr)
            runs.append(run_once(a.mib, peers))
            print(f"  {runs[-1]}", file=sys.stderr)
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {'yes' if peers else 'no'} | {med['objects']:.0f} | {med['blocks']:.0f} | {med['gets']:.0f} | "
              f"{med['gets_per_gib']:.0f} | {med['ratio']:.2f} | {med['cross']:.0f} | {med['seconds']:.1f} |")


if __name__ == "__main__":
    main()
