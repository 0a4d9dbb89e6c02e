"""Produce/consume round trips with real clients: confluent-kafka (librdkafka),
kafka-python (independent pure-Python implementation) and kcat."""

import json
import random
import subprocess
import time

import pytest
import requests

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


def send_one_batch(bootstrap: str, topic: str, records: list[tuple]) -> list[str]:
    """Sends `records` ((key, value, timestamp ms or None)) as one batch of one request; each
    record's delivery error name ("" when written), in order."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.num.messages": len(records),
                  "message.timeout.ms": 20000})
    # Connected first: records queued before the connection is up may go out in smaller batches.
    p.list_topics(topic, timeout=10)
    results: dict[int, str] = {}
    for i, (key, value, ts) in enumerate(records):
        extra = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, key=key, value=value, partition=0,
                  on_delivery=lambda err, msg, i=i: results.__setitem__(i, err.name() if err else ""), **extra)
    p.flush(30)
    return [results.get(i, "undelivered") for i in range(len(records))]


@pytest.mark.timeout(120)
def test_refused_records_are_named_and_the_others_may_be_sent_again(floe):
    """Issue 32, item 1 (KIP-467): a batch is refused whole for some of its records, and the
    Produce answer (v8+) names them in record_errors: librdkafka fails exactly those with the
    refusal and the others with _INVALID_DIFFERENT_RECORD, which the application may send again.
    The partition's error is INVALID_RECORD for a keyless record on a compacted topic and
    INVALID_TIMESTAMP for a timestamp outside message.timestamp.before/after.max.ms. Before, every record of
    the batch failed with INVALID_RECORD, and timestamp bounds were not enforced at all."""
    from confluent_kafka import Consumer, TopicPartition
    compacted, bounded = unique_name("kip467c"), unique_name("kip467t")
    create_topic(floe.bootstrap, compacted, 1, config={"cleanup.policy": "compact"})
    create_topic(floe.bootstrap, bounded, 1, config={"message.timestamp.before.max.ms": "60000",
                                                      "message.timestamp.after.max.ms": "60000"})
    keyless = [(None if i % 10 == 3 else f"k{i}".encode(), f"v{i}".encode(), None) for i in range(100)]
    got = send_one_batch(floe.bootstrap, compacted, keyless)
    assert [i for i, e in enumerate(got) if e == "INVALID_RECORD"] == [i for i in range(100) if i % 10 == 3], got
    assert all(e == "_INVALID_DIFFERENT_RECORD" for i, e in enumerate(got) if i % 10 != 3), got

    now = int(time.time() * 1000)
    stamps = [now - 2 * 3600_000 if i in (2, 7) else now + 3600_000 if i == 11 else now for i in range(20)]
    got = send_one_batch(floe.bootstrap, bounded, [(b"k", f"t{i}".encode(), ts) for i, ts in enumerate(stamps)])
    # librdkafka fails the records a response names with INVALID_RECORD, whatever the
    # partition's error; kafka-python, which ignores record_errors, shows that error.
    assert [i for i, e in enumerate(got) if e == "INVALID_RECORD"] == [2, 7, 11], got
    assert all(e == "_INVALID_DIFFERENT_RECORD" for i, e in enumerate(got) if i not in (2, 7, 11)), got
    from kafka import KafkaProducer
    from kafka.errors import InvalidTimestampError
    kp = KafkaProducer(bootstrap_servers=floe.bootstrap, retries=0)
    try:
        future = kp.send(bounded, value=b"old", partition=0, timestamp_ms=now - 2 * 3600_000)
        with pytest.raises(InvalidTimestampError):
            future.get(timeout=20)
    finally:
        kp.close()
    # Sent again, the others are written; nothing of the refused batches was.
    again = [(b"k", f"t{i}".encode(), now) for i in range(20) if i not in (2, 7, 11)]
    assert send_one_batch(floe.bootstrap, bounded, again) == [""] * 17
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": unique_name("g")})
    try:
        assert c.get_watermark_offsets(TopicPartition(bounded, 0), timeout=10) == (0, 17)
        assert c.get_watermark_offsets(TopicPartition(compacted, 0), timeout=10) == (0, 0)
    finally:
        c.close()

    # Over HTTP, each record has its own answer: the out-of-bounds one is refused, not the rest.
    cluster = requests.get(f"{floe.http_url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    body = "\n".join(json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": f"h{i}"},
                                 **({"timestamp": now - 3 * 3600_000} if i == 1 else {})}) for i in range(3))
    r = requests.post(f"{floe.http_url}/v3/clusters/{cluster}/topics/{bounded}/records", data=body,
                      headers={"Content-Type": "application/json"}, timeout=10)
    answers = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert [a.get("error_code") for a in answers] == [200, 422, 200], answers
    assert "message.timestamp.before.max.ms" in answers[1]["message"], answers[1]


def test_adaptive_flush_sends_a_lone_record_without_waiting_for_the_interval(floe_factory):
    """The low-latency mode (issue 28): with --flush-adaptive a lone record is flushed as soon as
    no other flush is in flight, not when --flush-interval-ms has passed; without it, it waits
    for the interval. Checked with a 3 s interval, so the two differ by seconds."""
    from confluent_kafka import Producer

    def ack_seconds(floe) -> list[float]:
        create_topic(floe.bootstrap, "lone", partitions=1)
        producer = Producer({"bootstrap.servers": floe.bootstrap, "acks": "all", "linger.ms": 0})
        producer.list_topics("lone", timeout=10)
        took = []
        for i in range(3):
            done = []
            began = time.monotonic()
            producer.produce("lone", value=f"v{i}".encode(), on_delivery=lambda err, msg: done.append(err))
            producer.flush(30)
            assert done == [None], done
            took.append(time.monotonic() - began)
        return took

    adaptive = ack_seconds(floe_factory.new("adaptive", flush_interval_ms=3000, extra_args=["--flush-adaptive"]))
    interval = ack_seconds(floe_factory.new("interval", flush_interval_ms=3000))
    print(f"lone record acknowledged after {adaptive} s (adaptive) and {interval} s (interval)")
    assert max(adaptive) < 1.5, adaptive
    assert min(interval) > 2.0, interval
