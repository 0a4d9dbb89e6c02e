#!/usr/bin/env python3
"""Kafka produce throughput with SASL/SCRAM and TLS against plaintext, each the median of --runs
runs of `floe-loadtest` (1 producer, 1 KiB records, max rate) against a fresh release
`floe dev` per run, all in one session:

  plaintext      no authentication, no TLS
  scram          SASL_PLAINTEXT with SCRAM-SHA-512
  scram+tls      SASL_SSL with SCRAM-SHA-512 (rustls, a self-signed P-256 certificate)
  scram+acls     SASL_PLAINTEXT with `--authorizer`: the producer passes ACL checks (its
                 own bindings among 200 of other users), not as a super user
  scram+acls-100k  the same among 99,000 bindings of other users (the tenant's ACL share
                 raised to 100,000): checks look bindings up by resource, so this should cost
                 what 200 do

The scram+acls mode creates ACLs with confluent-kafka (run with the test venv's python).

Prints a markdown table with MB/s, the ratio to plaintext, produce p50/p99 and the agent's CPU
per GiB produced (from /proc, whole run).

    cargo build --release -p floe -p floe-loadtest
    python3 loadtest/scripts/bench_security.py --runs 3 --duration 10
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

OUT = "/var/tmp/floe-bench/security"
PASSWORD = "bench-password"


def certificate():
    """A self-signed certificate for 127.0.0.1, made with the openssl command."""
    cert, key = f"{OUT}/cert.pem", f"{OUT}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=floe-bench",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def grant_acls(bootstrap, others=200):
    """As the super user: the producer may create and write its topics, among `others`
    bindings of other users."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "root", "sasl.password": PASSWORD})
    topic, literal, allow = ResourceType.TOPIC, ResourcePatternType.LITERAL, AclPermissionType.ALLOW
    bindings = [AclBinding(topic, f"other-{i}", literal, f"User:user{i}", "*", AclOperation.READ, allow)
                for i in range(others)]
    bindings += [AclBinding(topic, "loadtest", ResourcePatternType.PREFIXED, "User:bench", "*", op, allow)
                 for op in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.DESCRIBE)]
    # CreateAcls takes at most 1,000 bindings per request.
    for start in range(0, len(bindings), 1000):
        for future in admin.create_acls(bindings[start:start + 1000]).values():
            future.result(60)


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(floe, cmd, path):
    """Runs the load generator `cmd`, which writes its report to `path`, and adds the agent's
    CPU-seconds per GiB produced over the run."""
    before = cpu_seconds(floe.proc.pid)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = cpu_seconds(floe.proc.pid) - before
    with open(path) as f:
        report = json.load(f)
    report["agent_cpu_s_per_gib"] = cpu / (report["produce"]["bytes_total"] / 2**30)
    return report


def run(mode, duration, i, cert, key):
    shutil.rmtree(f"{bench_read.WORK}/data", ignore_errors=True)
    extra = []
    client = []
    if mode != "plaintext":
        extra += ["--sasl-mechanisms", "SCRAM-SHA-512"]
        client += ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-512", "sasl.username=bench",
                   f"sasl.password={PASSWORD}"]
    if mode.startswith("scram+acls"):
        extra += ["--authorizer", "--super-users", "root"]
    if mode == "scram+tls":
        extra += ["--tls-cert", cert, "--tls-key", key]
        client = [c.replace("SASL_PLAINTEXT", "SASL_SSL") for c in client] + [f"ssl.ca.location={cert}"]
    floe = Floe(extra)
    floe.start()
    try:
        if mode != "plaintext":
            admin = [f"{TARGET}/release/floe", "admin", "tenants", "--metadata", f"127.0.0.1:{floe.meta}"]
            subprocess.run([*admin, "create", "bench"], check=True, capture_output=True)
            for user in ("bench", "root"):
                subprocess.run([*admin, "add-user", "--tenant", "bench", user, "--password-stdin",
                                "--mechanisms", "SCRAM-SHA-512"], input=PASSWORD + "\n", text=True, check=True,
                               capture_output=True)
        if mode == "scram+acls":
            grant_acls(floe.bootstrap)
        if mode == "scram+acls-100k":
            subprocess.run([*admin, "set-quotas", "--tenant", "bench", "--acls", "100000"], check=True,
                           capture_output=True)
            grant_acls(floe.bootstrap, others=99_000)
        path = f"{OUT}/{mode}-{i}.json"
        # The agent's CPU comes from /proc (its /metrics is HTTPS under TLS, which the
        # generator does not scrape), over the whole run, warm-up included.
        cmd = [f"{TARGET}/release/floe-loadtest", "--bootstrap", floe.bootstrap, "--consumers", "0",
               "--duration", f"{duration}s", "--warmup", "2s", "--partitions", "8", "--output", path, "--quiet"]
        for c in client:
            cmd += ["--client-config", c]
        return measured(floe, cmd, path)
    finally:
        floe.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(bench_read.WORK, exist_ok=True)
    cert, key = certificate()
    modes = os.environ.get("BENCH_MODES", "plaintext,scram,scram+tls").split(",")
    reports = {}
    for mode in modes:
        reports[mode] = []
        for i in range(args.runs):
            print(f"{mode} run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
            reports[mode].append(run(mode, args.duration, i, cert, key))

    def med(mode, get):
        values = [v for v in (get(r) for r in reports[mode]) if v is not None]
        return statistics.median(values) if values else float("nan")

    # The ratio is to plaintext, or to the first mode when plaintext was not run.
    base_mode = "plaintext" if "plaintext" in reports else modes[0]
    base = med(base_mode, lambda r: r["produce"]["mb_per_second"])
    print(f"\n{os.cpu_count()} cores; medians of {args.runs} runs of {args.duration} s; 1 producer, 1 KiB records\n")
    print(f"| listener | MB/s | vs {base_mode} | p50 ms | p99 ms | agent CPU s/GiB |")
    print("|---|---|---|---|---|---|")
    for mode in modes:
        mbs = med(mode, lambda r: r["produce"]["mb_per_second"])
        print(f"| {mode} | {mbs:.1f} | {mbs / base:.2f} | {med(mode, lambda r: r['produce']['latency_ms']['p50']):.1f} "
              f"| {med(mode, lambda r: r['produce']['latency_ms']['p99']):.1f} "
              f"| {med(mode, lambda r: r['agent_cpu_s_per_gib']):.2f} |")


if __name__ == "__main__":
    main()
