"""Produce/consume round trips with real clients: confluent-kafka (librdkafka),
kafka-python (independent pure-Python implementation) and kcat."""

import random
import subprocess
import time

import pytest

from conftest import (
    CODECS,
    assert_records_match,
    check_order_per_partition,
    consume_confluent,
    consume_kafka_python,
    create_topic,
    make_records,
    produce,
    unique_name,
)

PARTITIONS = 6
TOTAL_RECORDS = 100_000


@pytest.mark.timeout(900)
def test_all_codecs_100k_records_two_clients(floe):
    topic = unique_name("rt")
    create_topic(floe.bootstrap, topic, PARTITIONS)
    rng = random.Random(20261130)
    per_codec = TOTAL_RECORDS // len(CODECS)
    now = int(time.time() * 1000)
    all_recs = []
    for codec in CODECS:
        recs = make_records(rng, per_codec, PARTITIONS, tag=codec, ts_base=now - 600_000)
        t0 = time.monotonic()
        produce(floe.bootstrap, topic, recs, {"compression.type": codec, "acks": "all"})
        print(f"produced {len(recs)} records with {codec} in {time.monotonic() - t0:.1f}s")
        check_order_per_partition(recs)
        all_recs += recs
    assert len(all_recs) == TOTAL_RECORDS

    t0 = time.monotonic()
    got = consume_confluent(floe.bootstrap, topic, PARTITIONS, timeout=300)
    print(f"confluent-kafka read {sum(map(len, got.values()))} records in {time.monotonic() - t0:.1f}s")
    assert_records_match(all_recs, got, PARTITIONS, "confluent-kafka")

    t0 = time.monotonic()
    got2 = consume_kafka_python(floe.bootstrap, topic, PARTITIONS, timeout=400)
    print(f"kafka-python read {sum(map(len, got2.values()))} records in {time.monotonic() - t0:.1f}s")
    assert_records_match(all_recs, got2, PARTITIONS, "kafka-python")


@pytest.mark.timeout(180)
def test_log_append_time_topic(floe):
    topic = unique_name("lat")
    create_topic(floe.bootstrap, topic, 2, config={"message.timestamp.type": "LogAppendTime"})
    rng = random.Random(7)
    producer_ts = int(time.time() * 1000) - 30 * 60 * 1000  # 30 min ago: clearly not append time
    recs = []
    for codec in ("none", "zstd"):
        recs += make_records(rng, 500, 2, tag=codec, ts_base=producer_ts)
    t0 = int(time.time() * 1000)
    produce(floe.bootstrap, topic, recs[:500], {"compression.type": "none"})
    produce(floe.bootstrap, topic, recs[500:], {"compression.type": "zstd"})
    t1 = int(time.time() * 1000)
    # 1 s of slack for clock granularity
    lo, hi = t0 - 1000, t1 + 1000

    for client, got in (("confluent-kafka", consume_confluent(floe.bootstrap, topic, 2)),
                        ("kafka-python", consume_kafka_python(floe.bootstrap, topic, 2))):
        # keys/values/headers/offsets still exact; timestamps checked below
        assert_records_match(recs, got, 2, client, ts_type=2)
        for p, msgs in got.items():
            for off, _k, _v, _h, (ts_type, ts) in msgs:
                assert ts_type == 2, f"[{client}] p{p}@{off}: timestamp type {ts_type}, want LogAppendTime (2)"
                assert lo <= ts <= hi, (
                    f"[{client}] p{p}@{off}: timestamp {ts} outside produce window [{lo}, {hi}] "
                    f"(producer timestamps were ~{producer_ts})")


def _kcat(*args, input=None, timeout=30):
    r = subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)
    assert r.returncode == 0, f"kcat {' '.join(args)} exited {r.returncode}\nstdout: {r.stdout[-2000:]!r}\nstderr: {r.stderr[-2000:]!r}"
    return r


@pytest.mark.timeout(120)
def test_kcat_metadata_produce_consume(floe):
    topic = unique_name("kcat")
    b = floe.bootstrap
    lines = [f"line {i} {'x' * (i % 50)}" for i in range(200)] + ["last line"]
    payload = ("\n".join(lines) + "\n").encode()
    # produce to partition 0 (the topic is auto-created by the producer's Metadata request)
    _kcat("-b", b, "-P", "-t", topic, "-p", "0", input=payload)

    md = _kcat("-b", b, "-L").stdout.decode()
    assert "broker" in md and str(floe.kafka_port) in md, f"kcat -L shows no broker on our port:\n{md}"
    assert f'topic "{topic}"' in md, f"kcat -L does not list {topic}:\n{md}"
    assert "127.0.0.1" in md and "0.0.0.0" not in md, f"advertised address wrong:\n{md}"

    out = _kcat("-b", b, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q").stdout.decode()
    got = out.split("\n")[:-1]
    want = lines
    assert got == want, f"kcat read {len(got)} lines, wrote {len(want)}; first diff at " \
        f"{next((i for i, (a, c) in enumerate(zip(got, want)) if a != c), min(len(got), len(want)))}"

    # keyed produce with -K and read back with offsets/keys in a format string
    _kcat("-b", b, "-P", "-t", topic, "-p", "0", "-K", ":", input=b"k1:v1\nk2:v2\n")
    out = _kcat("-b", b, "-C", "-t", topic, "-p", "0", "-o", str(len(want)), "-e", "-q",
                "-f", "%o %k %s\n").stdout.decode()
    assert out.splitlines() == [f"{len(want)} k1 v1", f"{len(want) + 1} k2 v2"], out
