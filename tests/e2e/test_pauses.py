"""An agent paused (SIGSTOP, then SIGCONT) while an idempotent producer sends, for longer than
the producer's request timeout: when it resumes, every acknowledged record is there exactly once
at its offset, in order, in both clients."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from conftest import (assert_records_match, consume_confluent, consume_kafka_python, create_topic,
                      make_records, produce, unique_name)


def test_a_pause_longer_than_the_request_timeout(floe):
    topic, partitions = unique_name("pause"), 3
    create_topic(floe.bootstrap, topic, partitions)
    recs = make_records(random.Random(11), 20000, partitions, "pause", ts_base=1_700_000_000_000,
                        value_size=(1000, 5000))
    failures: list[BaseException] = []

    def producing():
        try:
            produce(floe.bootstrap, topic, recs, conf={"enable.idempotence": True, "request.timeout.ms": 1500,
                                                       "linger.ms": 5}, timeout=180)
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    producer = threading.Thread(target=producing)
    producer.start()
    time.sleep(0.5)
    assert producer.is_alive(), "the producer finished before the pause: the test proves nothing"
    os.kill(floe.proc.pid, signal.SIGSTOP)
    time.sleep(4)  # well past request.timeout.ms
    os.kill(floe.proc.pid, signal.SIGCONT)
    producer.join(240)
    assert not producer.is_alive(), "producer did not finish"
    assert not failures, f"producing failed: {failures[0]!r}"
    assert all(r.offset is not None for r in recs)
    assert_records_match(recs, consume_confluent(floe.bootstrap, topic, partitions), partitions, "confluent")
    assert_records_match(recs, consume_kafka_python(floe.bootstrap, topic, partitions), partitions, "kafka-python")
