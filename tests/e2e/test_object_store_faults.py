"""An object store that misbehaves (--test-object-store-faults): PUTs that fail, PUTs refused
with 503 SlowDown, PUTs that stored the object but lost the answer, GETs that fail. Idempotent
producers still get every record in exactly once at its acknowledged offset, reads retry
through failed GETs, and the objects whose answer was lost are found and deleted as orphans."""

from __future__ import annotations

import random

from conftest import (assert_records_match, consume_confluent, consume_kafka_python, create_topic,
                      make_records, produce, unique_name, wait_until)
from conftest import scrape_metrics as metrics

FAULTS = "put-error=0.1,put-lost-ack=0.1,slowdown=0.05,get-error=0.3"


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
    # Rounds of records until every PUT fault has happened at least once (each round is a few
    # dozen flushes; ten rounds make missing one about a 1-in-30,000 chance).
    rng, recs = random.Random(7), []
    kinds = ("put_error", "put_lost_ack", "slowdown")
    for round_ in range(10):
        batch = make_records(rng, 1000, partitions, f"faulty{round_}", ts_base=1_700_000_000_000)
        produce(floe.bootstrap, topic, batch, conf={"enable.idempotence": True, "linger.ms": 2,
                                                    "batch.num.messages": 50})
        recs += batch
        if all(injected(floe, kind) > 0 for kind in kinds):
            break
    counts = {kind: injected(floe, kind) for kind in kinds}
    print(f"faults injected while producing {len(recs)} records: {counts}")
    for kind, count in counts.items():
        assert count > 0, f"no {kind} was injected: the test proves nothing"
    # Every acknowledged record exactly once, at its offset, in order, in both clients.
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent")
    assert_records_match(recs, consume_kafka_python(floe.bootstrap, topic, partitions), partitions, "kafka-python")

    # Cold reads (a restart empties the memory-only cache) retry through failed GETs; read again
    # after another restart until some GET has failed (a read is a few dozen GETs).
    lost_acks = injected(floe, "put_lost_ack")
    orphans_deleted_before = 0.0  # counters start again at each restart
    for _ in range(4):
        orphans_deleted_before += orphans_deleted(floe)
        floe.restart(hard=False)
        assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent, cold")
        get_errors = injected(floe, "get_error")
        if get_errors > 0:
            break
    print(f"GET errors injected during the cold read: {get_errors}")
    assert get_errors > 0, "no GET failed: the cold reads prove nothing"

    # Objects stored without their answer were never committed: garbage collection finds them
    # as orphans after the grace and deletes them, and nothing else (the last read still matches).
    wait_until(lambda: orphans_deleted_before + orphans_deleted(floe) >= lost_acks, 60,
               f"{lost_acks:.0f} orphans deleted")
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent, after gc")
