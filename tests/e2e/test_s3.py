"""The s3:// object store (moto server) gives the same results as file://."""

import copy
import random
import time

import pytest

from conftest import (
    CODECS,
    assert_records_match,
    consume_confluent,
    create_topic,
    make_records,
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
