"""floe-loadtest against a running floe dev: the report's counts match what an independent
consumer reads back, the cost view reads Floe's metrics, compare works, bad arguments are
refused clearly, and the null sink takes a real librdkafka producer's load."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import FLOE_BIN, consume_kafka_python, free_port, unique_name, wait_until, port_open

LOADTEST_BIN = str(Path(FLOE_BIN).parent / "floe-loadtest")


def loadtest(*args, check=True, timeout=120) -> subprocess.CompletedProcess:
    # Through `floe loadtest`, which hands over to floe-loadtest beside it.
    proc = subprocess.run([FLOE_BIN, "loadtest", *map(str, args)], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"floe loadtest {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def test_report_counts_match_an_independent_consumer(floe, tmp_path):
    topic = unique_name("lt")
    report_path = tmp_path / "run.json"
    run = loadtest("--bootstrap", floe.bootstrap, "--topic", topic, "--partitions", 4,
                   "--duration", "3s", "--warmup", "1s", "--rate", 2000, "--producers", 2, "--consumers", 2,
                   "--record-bytes", 300, "--keys", 64, "--key-distribution", "zipf", "--compression", "lz4",
                   "--metrics", f"{floe.http_url}/metrics", "--output", report_path)
    assert "produce" in run.stderr and "e2e p99" in run.stderr, run.stderr  # the progress line
    report = json.loads(report_path.read_text())
    assert report["format"] == "floe-loadtest-report/1"
    assert report["machine"]["cores"] >= 1
    produce, consume = report["produce"], report["consume"]
    assert report["errors"] == {}, report["errors"]
    # About 2000 records/s for 4 s in all, of which 3 s are measured.
    assert 6000 <= produce["records_total"] <= 9000, produce
    assert 4500 <= produce["records"] <= produce["records_total"], produce
    assert produce["bytes_total"] == produce["records_total"] * (300 + len("key-000000000000"))
    lat = produce["latency_ms"]
    assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"] <= lat["max"], lat
    # The run's consumers saw every record sent after the warm-up, with its send time.
    e2e = consume["end_to_end_latency_ms"]
    assert e2e["count"] >= produce["records"], (e2e, produce)
    assert consume["records_total"] <= produce["records_total"]
    assert [s["t"] for s in report["timeline"]][:3] == [1.0, 2.0, 3.0]
    assert report["timeline"][0]["warmup"] and not report["timeline"][-1]["warmup"]
    # What an independent client reads back is what the report says was acknowledged.
    got = consume_kafka_python(floe.bootstrap, topic, 4)
    assert sum(len(v) for v in got.values()) == produce["records_total"]
    # The cost view: Floe's own counters around the run.
    cost = report["cost"]
    assert cost["metrics_urls"] == [f"{floe.http_url}/metrics"]
    assert cost["object_store_put_requests"] > 0 and cost["puts_per_gib_produced"] > 0, cost
    assert cost["agent_cpu_seconds"] > 0 and cost["usd_per_gib"] > 0, cost
    assert report["generator"]["cpu_seconds"] > 0
    svg = report_path.with_suffix(".svg").read_text()
    assert svg.startswith("<svg") and "end-to-end p99" in svg

    # A catch-up read of the same topic, consume-only: everything, to the end offsets.
    catch_up_path = tmp_path / "catch-up.json"
    loadtest("--bootstrap", floe.bootstrap, "--topic", topic, "--producers", 0, "--consumers", 1,
             "--from-start", "--duration", "60s", "--warmup", "0s", "--output", catch_up_path, "--quiet")
    catch_up = json.loads(catch_up_path.read_text())
    assert catch_up["produce"] is None
    assert catch_up["consume"]["caught_up"] is True
    assert catch_up["consume"]["records_total"] == produce["records_total"]
    assert catch_up["consume"]["end_to_end_latency_ms"] is None

    # compare: a table with ratios, or JSON, and a plot of both runs.
    table = loadtest("compare", report_path, catch_up_path, "--plot", tmp_path / "both.svg").stdout
    assert "produce MB/s" in table and "consume MB/s" in table and "ratio" in table, table
    rows = json.loads(loadtest("compare", report_path, report_path, "--json").stdout)
    assert {r["figure"]: r["ratio"] for r in rows}["produce MB/s"] == 1.0
    assert (tmp_path / "both.svg").read_text().startswith("<svg")


def test_bad_arguments_and_bad_reports_are_refused_clearly(tmp_path):
    cases = [
        (["--duration", "soon"], 2, "--duration"),
        (["--acks", "2"], 2, "--acks"),
        (["--producers", 0, "--consumers", 0], 1, "nothing to run"),
        (["--record-bytes", 0, "--bootstrap", "127.0.0.1:1"], 1, "--record-bytes"),
        (["--producer-config", "linger.ms"], 2, "KEY=VALUE"),
        (["compare", tmp_path / "missing.json", tmp_path / "missing.json"], 1, "missing.json"),
    ]
    not_a_report = tmp_path / "other.json"
    not_a_report.write_text('{"hello": 1}')
    cases.append((["compare", not_a_report, not_a_report], 1, "not a floe-loadtest report"))
    for args, code, needle in cases:
        proc = loadtest(*args, check=False, timeout=30)
        assert proc.returncode == code, (args, proc.returncode, proc.stderr)
        assert needle in proc.stderr, (args, proc.stderr)
        assert "panicked" not in proc.stderr


def test_null_sink_takes_a_real_producer(tmp_path):
    port = free_port()
    sink = subprocess.Popen([LOADTEST_BIN, "null-sink", "--listen", f"127.0.0.1:{port}"],
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: port_open(port), 10, "null sink listening")
        report_path = tmp_path / "sink.json"
        loadtest("--bootstrap", f"127.0.0.1:{port}", "--consumers", 0, "--duration", "2s", "--warmup", "0s",
                 "--rate", 20000, "--idempotence", "--compression", "zstd", "--output", report_path, "--quiet")
        report = json.loads(report_path.read_text())
        assert report["errors"] == {} and report["produce"]["records"] > 1000, report["produce"]
        assert report["cost"] is None  # not Floe: no metrics to read
    finally:
        sink.kill()
        sink.wait(10)


def test_transactional_and_counted_runs(floe, tmp_path):
    topic = unique_name("lt-txn")
    # Transactional producers, a read_committed consumer: every committed record arrives once.
    txn_path = tmp_path / "txn.json"
    loadtest("--bootstrap", floe.bootstrap, "--topic", topic, "--partitions", 2, "--duration", "3s",
             "--warmup", "1s", "--rate", 1000, "--transaction-records", 100, "--isolation", "read-committed",
             "--output", txn_path, "--quiet")
    txn = json.loads(txn_path.read_text())
    assert txn["errors"] == {}, txn["errors"]
    assert txn["consume"]["end_to_end_latency_ms"]["count"] >= txn["produce"]["records"] > 1000
    # A read_committed catch-up read sees each committed record once and reaches the end offsets,
    # though the last offset of each partition is a transaction marker.
    catch_up_path = tmp_path / "txn-catch-up.json"
    loadtest("--bootstrap", floe.bootstrap, "--topic", topic, "--producers", 0, "--from-start",
             "--duration", "60s", "--warmup", "0s", "--output", catch_up_path, "--quiet")
    catch_up = json.loads(catch_up_path.read_text())["consume"]
    assert catch_up["caught_up"] is True and catch_up["records_total"] == txn["produce"]["records_total"]
    assert json.loads(catch_up_path.read_text())["measured_seconds"] < 30
    # A record count instead of a duration: exactly that many, then the run ends.
    counted_path = tmp_path / "counted.json"
    loadtest("--bootstrap", floe.bootstrap, "--topic", topic + "-n", "--partitions", 3, "--records", 2500,
             "--producers", 2, "--consumers", 0, "--warmup", "0s", "--duration", "60s",
             "--output", counted_path, "--quiet")
    counted = json.loads(counted_path.read_text())
    assert counted["produce"]["records_total"] == 2500
    assert counted["measured_seconds"] < 30
