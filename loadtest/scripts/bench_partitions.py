#!/usr/bin/env python3
"""The cost of a partition (issue 53): the same produce load (records/s of a fixed size, one
producer and one consumer) spread over few and over many partitions of a fresh release `floe
dev` on file://. Per run: produce p50/p99 as the client saw them, server CPU (cores), server RSS
sampled every 5 s (first, last and peak after the warm-up), the metadata directory's size at the
end and the server's own Produce latency (`floe_kafka_request_duration_seconds`). Partition
counts alternate run by run, so both see the same machine; medians and the ratio of each count
to the first are printed, the samples go to a JSON file and RSS over time to an SVG plot.

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_partitions.py --partitions 8,2000 --runs 3 --duration 90
"""

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_produce import TARGET, cpu_seconds, free_port, metrics, wait_for_port  # noqa: E402

SAMPLE_EVERY = 5.0


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def dir_mib(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total / 2**20


def quantile_ms(m, name, q, labels=""):
    """The bucket bound under which `q` of histogram `name`{labels} fell, in ms."""
    prefix = f'{name}_bucket{{{labels}{"," if labels else ""}le="'
    buckets = sorted((float(k[len(prefix):-2]), v) for k, v in m.items()
                     if k.startswith(prefix) and not k.endswith('+Inf"}'))
    total = m.get(f"{name}_count{{{labels}}}" if labels else f"{name}_count", 0)
    for le, count in buckets:
        if total and count >= q * total:
            return le * 1000
    return float("nan")


def produce_quantile(m, q):
    """The bucket bound under which `q` of the server's Produce requests finished, in ms."""
    return quantile_ms(m, "floe_kafka_request_duration_seconds", q, 'api="Produce"')


def one_run(args, partitions, run):
    data = f"/var/tmp/floe-bench/partitions-{partitions}-run{run}"
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    kafka, http, meta = free_port(), free_port(), free_port()
    cmd = [f"{TARGET}/release/floe", "dev", "--data-dir", data, "--kafka-addr", f"127.0.0.1:{kafka}",
           "--http-addr", f"127.0.0.1:{http}", "--metadata-addr", f"127.0.0.1:{meta}"]
    if args.cache_bytes:
        cmd += ["--cache-bytes", str(args.cache_bytes)]
    cmd += args.floe_arg
    floe = subprocess.Popen(cmd, stderr=open(f"{data}.log", "w"))
    samples, state = [], []
    try:
        wait_for_port(kafka, 20)
        stop = threading.Event()
        started = time.time()

        def sample():
            while not stop.wait(SAMPLE_EVERY):
                samples.append((round(time.time() - started, 1), rss_mib(floe.pid)))
                try:
                    m = metrics(f"127.0.0.1:{http}")
                except OSError:
                    continue
                # The allocator's live and kept-free bytes, and the hot tier's share of the live
                # ones: what RSS growth is made of.
                state.append((round(time.time() - started, 1), m.get("floe_metadata_index_entries", 0),
                              m.get("floe_metadata_objects", 0), m.get("floe_heap_in_use_bytes", 0) / 2**20,
                              m.get("floe_heap_free_bytes", 0) / 2**20,
                              m.get("floe_block_cache_memory_bytes", 0) / 2**20))
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        client_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_started = time.time()
        load = subprocess.Popen(
            [f"{TARGET}/release/floe-loadtest", "--bootstrap", f"127.0.0.1:{kafka}", "--topic", "big",
             "--partitions", str(partitions), "--rate", str(args.rate), "--record-bytes", str(args.record_bytes),
             "--duration", f"{args.duration}s", "--warmup", f"{args.warmup}s", "--consumers", "1", "--quiet"]
            + args.loadtest_arg,
            stdout=subprocess.PIPE, text=True)
        # CPU and server latency over the measured part only: from the end of the warm-up.
        time.sleep(args.warmup)
        cpu_before, m_before = cpu_seconds(floe.pid), metrics(f"127.0.0.1:{http}")
        measured_from = time.time()
        out, _ = load.communicate()
        # The load generator's CPU over its whole run (warm-up included): it shares the machine.
        client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        client_cores = ((client_after.ru_utime + client_after.ru_stime)
                        - (client_before.ru_utime + client_before.ru_stime)) / (time.time() - load_started)
        cpu = (cpu_seconds(floe.pid) - cpu_before) / (time.time() - measured_from)
        m_after = metrics(f"127.0.0.1:{http}")
        stop.set()
        sampler.join()
        report = json.loads(out)
    finally:
        floe.send_signal(signal.SIGTERM)
        floe.wait(60)
    histograms = ("floe_kafka_request_duration_seconds", "floe_flush_duration_seconds",
                  "floe_metadata_commit_duration_seconds", "floe_flush_age_seconds",
                  "floe_metadata_written_bytes_total", "floe_broker_topic_bytes_in_total",
                  "floe_object_store_put_requests_total", "floe_compaction_runs_total",
                  "floe_compaction_objects_total", "floe_block_cache_object_gets_total",
                  "floe_object_store_get_bytes_total", "floe_block_cache_reads_total", "floe_compaction_bytes_total")
    delta = {k: m_after[k] - m_before.get(k, 0) for k in m_after if k.startswith(histograms)}
    after_warmup = [rss for t, rss in samples if t >= args.warmup] or [float("nan")]
    row = {
        "partitions": partitions,
        "p50_ms": report["produce"]["latency_ms"]["p50"],
        "p99_ms": report["produce"]["latency_ms"]["p99"],
        "server_produce_p50_ms": produce_quantile(delta, 0.5),
        "server_produce_p99_ms": produce_quantile(delta, 0.99),
        # The server's share, split: a flush from its start to its answer (upload, then commit),
        # the Raft commit alone, and how old a flush's oldest batch was when it started.
        "flush_p50_ms": quantile_ms(delta, "floe_flush_duration_seconds", 0.5),
        "flush_p99_ms": quantile_ms(delta, "floe_flush_duration_seconds", 0.99),
        "commit_p50_ms": quantile_ms(delta, "floe_metadata_commit_duration_seconds", 0.5),
        "commit_p99_ms": quantile_ms(delta, "floe_metadata_commit_duration_seconds", 0.99),
        "flush_age_p50_ms": quantile_ms(delta, "floe_flush_age_seconds", 0.5),
        "flushes_per_s": delta.get("floe_flush_duration_seconds_count", 0) / max(args.duration, 1),
        "produce_requests_per_s": delta.get('floe_kafka_request_duration_seconds_count{api="Produce"}', 0)
        / max(args.duration, 1),
        # PUTs of every kind (flushes, compaction, the usage journal, snapshots) and compaction's
        # commits, per second of the measured part: what a partition costs in requests.
        "fetch_requests_per_s": delta.get('floe_kafka_request_duration_seconds_count{api="Fetch"}', 0)
        / max(args.duration, 1),
        "puts_per_s": sum(v for k, v in delta.items() if k.startswith("floe_object_store_put_requests_total"))
        / max(args.duration, 1),
        "compaction_runs_per_s": sum(v for k, v in delta.items() if k.startswith("floe_compaction_runs_total"))
        / max(args.duration, 1),
        "compaction_objects_per_s": delta.get("floe_compaction_objects_total", 0) / max(args.duration, 1),
        # Blocks read through the hot tier, and the GETs its misses cost by cause (a fetch's miss,
        # a prefetch, a peer): what fills the memory tier besides the agent's own flushes.
        "block_reads_per_s": delta.get("floe_block_cache_reads_total", 0) / max(args.duration, 1),
        "block_gets_per_s": {k.split('"')[1]: v / max(args.duration, 1) for k, v in delta.items()
                             if k.startswith("floe_block_cache_object_gets_total{")},
        "get_mib_per_s": delta.get("floe_object_store_get_bytes_total", 0) / 2**20 / max(args.duration, 1),
        # What compaction's runs read (the chunks themselves) and wrote.
        "compaction_read_mib_per_s": delta.get('floe_compaction_bytes_total{direction="read"}', 0) / 2**20
        / max(args.duration, 1),
        "compaction_written_mib_per_s": delta.get('floe_compaction_bytes_total{direction="written"}', 0) / 2**20
        / max(args.duration, 1),
        "server_cores": cpu,
        "client_cores": client_cores,
        "rss_first_mib": after_warmup[0],
        "rss_last_mib": after_warmup[-1],
        "rss_peak_mib": max(after_warmup),
        "metadata_mib": dir_mib(os.path.join(data, "metadata")),
        # Metadata bytes written (Raft log and snapshots) per GiB of record batches produced, over
        # the measured part.
        "metadata_written_mib_per_gib": (sum(v for k, v in delta.items()
                                             if k.startswith("floe_metadata_written_bytes_total")) / 2**20)
        / max(sum(v for k, v in delta.items() if k.startswith("floe_broker_topic_bytes_in_total")) / 2**30, 1e-9),
        # The metadata state's index entries and segment objects, first and last after the
        # warm-up: bounded by retained data, not by the number of flushes (issue 53).
        "index_entries_first": next((s[1] for s in state if s[0] >= args.warmup), float("nan")),
        "index_entries_last": state[-1][1] if state else float("nan"),
        "objects_last": state[-1][2] if state else float("nan"),
        "heap_in_use_last_mib": state[-1][3] if state else float("nan"),
        "heap_free_last_mib": state[-1][4] if state else float("nan"),
        "errors": sum(report["errors"].values()),
        "rss_samples": samples,
        "state_samples": state,
    }
    print(f"{partitions} partitions, run {run}: " + ", ".join(
        f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items() if not k.endswith("_samples")),
        file=sys.stderr)
    return row


def plot(rows, path):
    """RSS over time (solid) and the heap's live allocations (dashed), one line each per run,
    coloured by partition count."""
    width, height, pad = 720, 360, 50
    t_max = max((t for r in rows for t, _ in r["rss_samples"]), default=1) or 1
    rss_max = max((v for r in rows for _, v in r["rss_samples"]), default=1) or 1
    counts = sorted({r["partitions"] for r in rows})
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]
    x = lambda t: pad + (width - 2 * pad) * t / t_max  # noqa: E731
    y = lambda v: height - pad - (height - 2 * pad) * v / rss_max  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
             f'font-size="12"><rect width="100%" height="100%" fill="white"/>',
             f'<text x="{pad}" y="20">Server RSS (solid) and heap in use (dashed), MiB over time (s), floe dev on '
             f'file://</text>',
             f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{height - pad}" stroke="black"/>',
             f'<text x="{pad - 45}" y="{pad + 4}">{rss_max:.0f}</text>',
             f'<text x="{pad - 15}" y="{height - pad + 4}">0</text>',
             f'<text x="{width - pad - 10}" y="{height - pad + 18}">{t_max:.0f}</text>']
    for r in rows:
        colour = colours[counts.index(r["partitions"]) % len(colours)]
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in r["rss_samples"])
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>')
        in_use = " ".join(f"{x(s[0]):.1f},{y(s[3]):.1f}" for s in r["state_samples"] if s[3] <= rss_max)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-dasharray="4 3" points="{in_use}"/>')
    for i, c in enumerate(counts):
        parts.append(f'<text x="{pad + 10}" y="{pad + 16 * i}" fill="{colours[i % len(colours)]}">'
                     f'{c} partitions</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", default="8,2000", help="partition counts, comma-separated; the first is the base")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--duration", type=int, default=90, help="measured seconds, after the warm-up")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--rate", type=int, default=20000, help="records/s")
    p.add_argument("--record-bytes", type=int, default=200)
    p.add_argument("--out", default="/var/tmp/floe-bench/partitions")
    # The hot tier fills for many minutes at its default size (a quarter of memory), so RSS
    # figures compare only with it pinned; 0 keeps the default.
    p.add_argument("--cache-bytes", type=int, default=512 << 20, help="the agent's hot tier (0: its default)")
    p.add_argument("--floe-arg", action="append", default=[],
                   help="an extra argument for `floe dev` (repeat it), e.g. --floe-arg=--compaction-interval-secs=60")
    p.add_argument("--loadtest-arg", action="append", default=[],
                   help="an extra argument for floe-loadtest (repeat it), e.g. --loadtest-arg=--producer-kind=per-broker "
                        "(one Produce request per broker with every partition's batch, the Java client's shape)")
    p.add_argument("--baseline", help="ratios recorded by an earlier run (--record-baseline): print this run's "
                                      "ratios beside them")
    p.add_argument("--record-baseline", help="write this run's medians and ratios to this JSON file")
    args = p.parse_args()
    counts = [int(c) for c in args.partitions.split(",")]
    os.makedirs("/var/tmp/floe-bench", exist_ok=True)
    rows = []
    for run in range(args.runs):
        for partitions in counts:
            rows.append(one_run(args, partitions, run))
    with open(f"{args.out}.json", "w") as f:
        json.dump(rows, f, indent=1)
    plot(rows, f"{args.out}.svg")
    keys = ["p50_ms", "p99_ms", "server_produce_p50_ms", "server_produce_p99_ms", "flush_p50_ms", "flush_p99_ms",
            "commit_p50_ms", "commit_p99_ms", "flush_age_p50_ms", "flushes_per_s", "produce_requests_per_s",
            "puts_per_s", "compaction_runs_per_s", "compaction_objects_per_s", "server_cores", "client_cores",
            "rss_first_mib", "rss_last_mib", "rss_peak_mib", "metadata_mib", "metadata_written_mib_per_gib",
            "index_entries_last", "objects_last", "heap_in_use_last_mib", "heap_free_last_mib"]
    medians = {c: {k: statistics.median(r[k] for r in rows if r["partitions"] == c) for k in keys} for c in counts}
    base = medians[counts[0]]
    ratios = {c: {k: medians[c][k] / base[k] for k in keys if base[k]} for c in counts}
    for c in counts:
        shown = ", ".join(f"{k} {medians[c][k]:.2f} ({ratios[c][k]:.2f}x)" if k in ratios[c] else
                          f"{k} {medians[c][k]:.2f}" for k in keys)
        print(f"median of {args.runs}, {c} partitions: {shown}")
    print(f"samples: {args.out}.json; plot: {args.out}.svg")
    if args.baseline:
        compare(args.baseline, counts, ratios)
    if args.record_baseline:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        with open(args.record_baseline, "w") as f:
            json.dump({"commit": commit, "date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(),
                       "runs": args.runs, "duration_s": args.duration, "rate": args.rate,
                       "medians": {str(c): medians[c] for c in counts},
                       "ratios": {str(c): ratios[c] for c in counts}}, f, indent=1)
            f.write("\n")
        print(f"baseline written: {args.record_baseline}")


# What a regression shows first when partitions cost more: the agent's CPU, the client's p99 and
# the server's own Produce p99 against the base count.
WATCHED = ["server_cores", "p99_ms", "server_produce_p99_ms", "rss_last_mib", "metadata_mib",
           "metadata_written_mib_per_gib"]


def compare(path, counts, ratios):
    """Prints each count's watched ratios beside the baseline's (ratios, not times: the machine
    and its load differ from run to run, both counts of one run share them)."""
    if not os.path.exists(path):
        print(f"no baseline at {path} yet: record one with --record-baseline")
        return
    with open(path) as f:
        baseline = json.load(f)
    print(f"against the baseline of {baseline['commit']} ({baseline['date']}, {baseline['cores']} cores, "
          f"{baseline['runs']} run(s) of {baseline['duration_s']} s):")
    for c in counts[1:]:
        was = baseline["ratios"].get(str(c))
        if was is None:
            print(f"  {c} partitions: not in the baseline")
            continue
        cells = [f"{k} {ratios[c][k]:.2f}x (was {was[k]:.2f}x)" for k in WATCHED if k in ratios[c] and k in was]
        print(f"  {c} partitions against {counts[0]}: " + ", ".join(cells))


if __name__ == "__main__":
    main()
