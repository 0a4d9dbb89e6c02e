"""The s3:// object store (moto server) gives the same results as file://."""

import copy
import random
import time

import pytest

from conftest import (
    CODECS,
    S3_ENV,
    assert_records_match,
    consume_confluent,
    create_topic,
    make_records,
    metric_sum,
    produce,
)

PARTITIONS = 6
PER_CODEC = 2000


def _workload():
    rng = random.Random(424242)
    ts = int(time.time() * 1000) - 300_000
    return {codec: make_records(rng, PER_CODEC, PARTITIONS, tag=codec, ts_base=ts) for codec in CODECS}


def _run(floe, topic, workload):
    create_topic(floe.bootstrap, topic, PARTITIONS)
    recs = []
    for codec, rs in workload.items():
        rs = copy.deepcopy(rs)
        produce(floe.bootstrap, topic, rs, {"compression.type": codec})
        recs += rs
    got = consume_confluent(floe.bootstrap, topic, PARTITIONS, timeout=180)
    assert_records_match(recs, got, PARTITIONS, f"confluent-kafka via {floe.name}")
    return recs, got


@pytest.mark.timeout(600)
def test_s3_matches_file(floe_factory, floe_s3, tmp_path):
    moto = floe_s3.moto
    assert not moto.list_keys(), "bucket not empty before the test"
    objects = tmp_path / "objects"
    objects.mkdir()
    floe_file = floe_factory.new("floe-file", object_store=f"file://{objects}")

    workload = _workload()
    topic = "same-name-on-both"
    recs_file, got_file = _run(floe_file, topic, workload)
    recs_s3, got_s3 = _run(floe_s3, topic, workload)

    assert [(r.partition, r.offset) for r in recs_file] == [(r.partition, r.offset) for r in recs_s3], \
        "file:// and s3:// assigned different offsets to the same produce sequence"
    for p in range(PARTITIONS):
        assert got_file[p] == got_s3[p], f"partition {p}: records read from file:// and s3:// differ"

    keys = moto.list_keys()
    assert keys, "floe with s3:// wrote no objects to the bucket"
    assert all(k.startswith("floe/") for k in keys), f"objects outside the s3://bucket/floe prefix: {keys[:5]}"
    print(f"{len(keys)} objects in s3://{moto.bucket}/floe/")

    # restart on the same data dir: records are read back from S3 after the restart too
    floe_s3.restart(hard=True)
    again = consume_confluent(floe_s3.bootstrap, topic, PARTITIONS, timeout=180)
    for p in range(PARTITIONS):
        assert again[p] == got_s3[p], f"partition {p}: differs after restart of the s3:// floe"


def test_s3_floe_starts_and_serves(floe_s3):
    """Smoke test: floe on s3:// starts, creates a topic and round-trips one record."""
    from conftest import Rec
    create_topic(floe_s3.bootstrap, "smoke", 1)
    recs = [Rec(partition=0, key=b"k", value=b"v", headers=[("h", b"1")], timestamp=int(time.time() * 1000))]
    produce(floe_s3.bootstrap, "smoke", recs, timeout=30)
    got = consume_confluent(floe_s3.bootstrap, "smoke", 1, timeout=30)
    assert_records_match(recs, got, 1, "confluent-kafka via s3")
    assert floe_s3.moto.list_keys(), "no object written to the bucket"


def _ack_seconds(producer, topic, count, start):
    """Produces `count` records one at a time; the seconds each took to be acknowledged."""
    seconds = []
    for i in range(start, start + count):
        began = time.monotonic()
        producer.produce(topic, value=b"v%d" % i, partition=0)
        assert producer.flush(30) == 0, f"record {i} not acknowledged"
        seconds.append(time.monotonic() - began)
    return seconds


# Serial: every one of 40 acknowledgements must come within 2.5 s, through moto.
@pytest.mark.serial
@pytest.mark.timeout(240)
def test_slow_puts_are_hedged_at_s3_defaults(floe_factory, moto, tmp_path):
    """Issue 28: at the s3:// defaults a segment PUT slower than nine in ten recent ones is sent
    again, so an object store's slow tail does not become produce latency. Every 10th PUT waits
    5 s (a deterministic fault); with hedging no acknowledgement waits for one, and without it
    (`--hedge-puts=false`, the control) each slow PUT holds its record for 5 s."""
    from confluent_kafka import Producer

    faults = tmp_path / "faults"
    slow = "slow-put-every=10,slow-put-ms=5000"

    def start(name, *extra):
        return floe_factory.new(
            name, object_store=f"s3://{moto.bucket}/{name}", s3_endpoint=moto.endpoint, env=S3_ENV,
            extra_args=["--test-object-store-faults", f"@{faults}", *extra],
        )

    def faults_on(floe):
        faults.write_text(slow)
        # The agent reads the fault file every 0.5 s.
        time.sleep(1.5)

    hedged = start("hedged")
    create_topic(hedged.bootstrap, "t", 1)
    producer = Producer({"bootstrap.servers": hedged.bootstrap, "linger.ms": 0, "acks": "all"})
    # Twenty PUTs of a size teach the agent that size's usual time; only then does it hedge.
    _ack_seconds(producer, "t", 30, 0)
    faults_on(hedged)
    seconds = _ack_seconds(producer, "t", 40, 30)
    injected = metric_sum(hedged, "floe_object_store_injected_faults_total")
    won = metric_sum(hedged, 'floe_object_store_put_hedges_total{result="won"}')
    print(f"hedged: slowest ack {max(seconds):.2f} s, {injected:.0f} slow PUTs, {won:.0f} hedges won")
    assert injected >= 3, "the fault did not make PUTs slow"
    assert max(seconds) < 2.5, f"an acknowledgement waited for a slow PUT: {sorted(seconds)[-5:]}"
    assert won >= injected - 1, f"{won} hedges won for {injected} slow PUTs"
    got = consume_confluent(hedged.bootstrap, "t", 1, timeout=60)
    assert [r[2] for r in got[0]] == [b"v%d" % i for i in range(70)], "records lost or reordered"

    faults.unlink()
    control = start("control", "--hedge-puts=false")
    create_topic(control.bootstrap, "t", 1)
    producer = Producer({"bootstrap.servers": control.bootstrap, "linger.ms": 0, "acks": "all"})
    _ack_seconds(producer, "t", 5, 0)
    faults_on(control)
    seconds = _ack_seconds(producer, "t", 20, 5)
    print(f"control: slowest ack {max(seconds):.2f} s")
    assert max(seconds) >= 4.5, "without hedging a slow PUT must hold its record: the fault did not bite"
