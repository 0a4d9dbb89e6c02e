"""An object store that misbehaves (--test-object-store-faults): PUTs that fail, PUTs refused
with 503 SlowDown, PUTs that stored the object but lost the answer, GETs that fail. Idempotent
producers still get every record in exactly once at its acknowledged offset, reads retry
through failed GETs, and the objects whose answer was lost are found and deleted as orphans."""

from __future__ import annotations

import random

from conftest import (assert_records_match, consume_confluent, consume_kafka_python, create_topic,
                      make_records, produce, unique_name, wait_until)
from test_hot_tier import metrics

FAULTS = "put-error=0.1,put-lost-ack=0.1,slowdown=0.05,get-error=0.1"


def injected(floe, kind: str) -> float:
    return metrics(floe).get(f'floe_object_store_injected_faults_total{{kind="{kind}"}}', 0.0)


def orphans_deleted(floe) -> float:
    return metrics(floe).get('floe_gc_objects_deleted_total{reason="orphan"}', 0.0)


def test_acknowledged_records_survive_a_faulty_store(floe_factory):
    floe = floe_factory.new(
        extra_args=["--test-object-store-faults", FAULTS, "--gc-interval-secs", "1", "--orphan-grace-secs", "8"],
        flush_interval_ms=20)
    topic, partitions = unique_name("faults"), 4
    create_topic(floe.bootstrap, topic, partitions)
    recs = make_records(random.Random(7), 3000, partitions, "faulty", ts_base=1_700_000_000_000)
    produce(floe.bootstrap, topic, recs, conf={"enable.idempotence": True, "linger.ms": 2,
                                               "batch.num.messages": 50})
    for kind in ("put_error", "put_lost_ack", "slowdown"):
        assert injected(floe, kind) > 0, f"no {kind} was injected: the test proves nothing"
    # Every acknowledged record exactly once, at its offset, in order, in both clients.
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent")
    assert_records_match(recs, consume_kafka_python(floe.bootstrap, topic, partitions), partitions, "kafka-python")

    # Cold reads (the restart empties the memory-only cache) retry through failed GETs.
    lost_acks = injected(floe, "put_lost_ack")
    orphans_deleted_before = orphans_deleted(floe)  # counters start again at the restart
    floe.restart(hard=False)
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent, cold")
    assert injected(floe, "get_error") > 0, "no GET failed: the cold read proves nothing"

    # Objects stored without their answer were never committed: garbage collection finds them
    # as orphans after the grace and deletes them, and nothing else (the last read still matches).
    wait_until(lambda: orphans_deleted_before + orphans_deleted(floe) >= lost_acks, 60,
               f"{lost_acks:.0f} orphans deleted")
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent, after gc")
