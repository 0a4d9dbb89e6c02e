"""Compacted topics (`cleanup.policy=compact`) against a real `floe dev`: a topic fed like a
Debezium table (inserts, updates, deletes as tombstones, a committed and an aborted
transaction), compacted while it is read, must afterwards give a consumer from offset 0 exactly
the latest value per key at its original offset; tombstones stay for `delete.retention.ms` after
the pass that first kept them (KIP-534), however old their timestamps, and then go without new
writes; keyless records are refused; `compression.type` rewrites the stored batches."""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from conftest import create_topic, metric_sum, unique_name, wait_until, watermarks
from test_storage_lifecycle import read_partition, set_broker_configs, set_topic_configs

PARTITIONS = 2
KEYS = 120


def produce_round(bootstrap: str, topic: str, changes: list[tuple[bytes, bytes | None]], compression: str,
                  acked: dict, timestamp_ms: int = 0) -> None:
    """Produces (key, value-or-tombstone) pairs in one flush, at `timestamp_ms` if given; records
    each ack in `acked` as key -> (partition, offset, value)."""
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.key()] = (msg.partition(), msg.offset(), msg.value())

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "compression.type": compression,
                  "enable.idempotence": True})
    for key, value in changes:
        p.produce(topic, key=key, value=value, on_delivery=cb, timestamp=timestamp_ms)
    assert p.flush(60) == 0, "records left unacknowledged"
    assert not errors, f"produce failed: {errors[:3]}"


def transaction(bootstrap: str, topic: str, changes: list[tuple[bytes, bytes]], commit: bool, acked: dict) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("table-txn"), "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    offsets = {}

    def cb(err, msg):
        assert err is None, err
        offsets[msg.key()] = (msg.partition(), msg.offset(), msg.value())

    for key, value in changes:
        p.produce(topic, key=key, value=value, on_delivery=cb)
    p.flush(30)
    if commit:
        p.commit_transaction(30)
        acked.update(offsets)
    else:
        p.abort_transaction(30)


def heartbeat(bootstrap: str, topic: str, value: bytes, partitions: int, acked: dict) -> None:
    """One record per partition, flushed last: the log's last entry is never compacted, so a
    heartbeat row ends each partition (as Debezium's heartbeats do)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in range(partitions):
        key = f"heartbeat-{partition}".encode()
        p.produce(topic, key=key, value=value, partition=partition,
                  on_delivery=lambda err, msg: acked.__setitem__(msg.key(), (msg.partition(), msg.offset(), msg.value())))
    assert p.flush(30) == 0


def without_heartbeats(table: dict) -> dict:
    """Rows other than heartbeats. The latest heartbeat sits in the uncompacted last entry, so
    the one before it may still be there too (as in Kafka's active segment)."""
    return {p: [r for r in rows if not r[1].startswith(b"heartbeat-")] for p, rows in table.items()}


def table_state(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, list]:
    """Every partition read from offset 0 to its high watermark (read_committed):
    partition -> [(offset, key, value)]."""
    out = {}
    for partition, (_, high) in watermarks(bootstrap, topic, partitions).items():
        got = read_partition(bootstrap, topic, partition, 0, high) if high > 0 else []
        out[partition] = [(m.offset(), m.key(), m.value()) for m in got]
    return out


def kafka_python_state(bootstrap: str, topic: str) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed",
                      consumer_timeout_ms=3000)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        c.assign(tps)
        c.seek_to_beginning()
        ends = c.end_offsets(tps)
        out = {p: [] for p in range(PARTITIONS)}
        while any(c.position(tp) < ends[tp] for tp in tps):
            batch = c.poll(timeout_ms=1000)
            if not batch:
                continue
            for tp, msgs in batch.items():
                out[tp.partition] += [(m.offset, m.key, m.value) for m in msgs]
        return out
    finally:
        c.close()


def expected_table(acked: dict, keep_tombstones: bool) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
    out = {p: [] for p in range(PARTITIONS)}
    for key, (partition, offset, value) in acked.items():
        if value is not None or keep_tombstones:
            out[partition].append((offset, key, value))
    return {p: sorted(rows) for p, rows in out.items()}


@pytest.mark.long
def test_a_table_topic_keeps_the_latest_value_per_key(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=[
        "--compaction-interval-secs", "1", "--gc-interval-secs", "1"])
    set_broker_configs(floe.bootstrap, log_segment_delete_delay_ms="0")
    topic = unique_name("table")
    create_topic(floe.bootstrap, topic, PARTITIONS, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "3600000"})
    rng = random.Random(7)
    keys = [f"row-{i:04d}".encode() for i in range(KEYS)]
    acked: dict[bytes, tuple[int, int, bytes | None]] = {}

    # Snapshot, then rounds of updates and deletes in mixed codecs, one flush each.
    produce_round(floe.bootstrap, topic, [(k, b"v0-" + k) for k in keys], "none", acked)
    for r in range(1, 9):
        changes = [(k, f"v{r}-".encode() + k) for k in rng.sample(keys, 40)]
        changes += [(k, None) for k in rng.sample(keys, 6)]
        produce_round(floe.bootstrap, topic, changes, ["none", "lz4", "zstd", "gzip", "snappy"][r % 5], acked)
    # Deletes stamped two days ago: kept an hour from the pass that first sees them, not dropped
    # for being older than delete.retention.ms already.
    two_days_ago = int(time.time() * 1000) - 2 * 86_400_000
    produce_round(floe.bootstrap, topic, [(k, None) for k in rng.sample(keys, 6)], "lz4", acked, two_days_ago)
    # A committed transaction's updates count; an aborted one's never appear nor win.
    transaction(floe.bootstrap, topic, [(k, b"committed-" + k) for k in keys[:10]], True, acked)
    transaction(floe.bootstrap, topic, [(k, b"aborted-" + k) for k in keys[10:20]], False, acked)
    heartbeat(floe.bootstrap, topic, b"hb", PARTITIONS, acked)
    produced = KEYS + 8 * 46 + 6 + 20 + PARTITIONS

    # Keyless records are refused with INVALID_RECORD and nothing is written.
    errors = []
    p = Producer({"bootstrap.servers": floe.bootstrap, "acks": "all", "retries": 0})
    p.produce(topic, value=b"no key", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD], errors

    # Passes run every second while data arrives; wait until one has covered everything.
    want = without_heartbeats(expected_table(acked, keep_tombstones=True))
    wait_until(lambda: without_heartbeats(table_state(floe.bootstrap, topic)) == want, 90,
               "a consumer from offset 0 to see exactly the latest record per key, at its offset")
    assert without_heartbeats(kafka_python_state(floe.bootstrap, topic)) == want, "kafka-python disagrees"
    got = table_state(floe.bootstrap, topic)
    after = sum(len(rows) for rows in got.values())
    print(f"records produced {produced}, readable after compaction {after}")
    assert after < produced / 3
    assert metric_sum(floe, 'floe_key_compaction_runs_total{outcome="ok"}') >= PARTITIONS
    assert not any(v is not None and v.startswith(b"aborted-") for rows in got.values() for _, _, v in rows)

    # New deletes under a 20 s delete.retention.ms: the first pass keeps them and writes their
    # horizon; once it passes, a pass runs though nothing new is written, and drops them. The
    # earlier tombstones keep the hour their first pass gave them.
    set_topic_configs(floe.bootstrap, topic, delete_retention_ms="20000")
    live = [k for k in keys if acked[k][2] is not None]
    late_deletes = rng.sample(live, 6)
    produce_round(floe.bootstrap, topic, [(k, None) for k in late_deletes], "zstd", acked)
    produce_round(floe.bootstrap, topic, [(k, b"final-" + k) for k in live[:4] if k not in late_deletes], "none", acked)
    heartbeat(floe.bootstrap, topic, b"hb2", PARTITIONS, acked)
    want = without_heartbeats(expected_table(acked, keep_tombstones=True))
    wait_until(lambda: without_heartbeats(table_state(floe.bootstrap, topic)) == want, 18,
               "the new tombstones to be kept by the pass that first sees them")
    gone = set(late_deletes)
    want = {p: [r for r in rows if r[1] not in gone] for p, rows in want.items()}
    wait_until(lambda: without_heartbeats(table_state(floe.bootstrap, topic)) == want, 90,
               "tombstones past their delete horizon to be gone, and only those")
    assert without_heartbeats(kafka_python_state(floe.bootstrap, topic)) == want, "kafka-python disagrees"
    for partition, rows in table_state(floe.bootstrap, topic).items():
        assert (f"heartbeat-{partition}".encode(), b"hb2") in [(k, v) for _, k, v in rows]


def batch_codecs(segment: Path) -> list[int]:
    """The codec of every record batch in a segment object (chunks start at byte 0 and the
    batches of all chunks lie back to back before the footer)."""
    data = segment.read_bytes()
    at, codecs = 0, []
    while at + 61 <= len(data) and data[at + 16] == 2:
        (length,) = struct.unpack(">i", data[at + 8:at + 12])
        (attributes,) = struct.unpack(">h", data[at + 21:at + 23])
        if length < 49 or at + 12 + length > len(data):
            break
        codecs.append(attributes & 0x07)
        at += 12 + length
    return codecs


def test_compression_type_rewrites_stored_batches(floe_factory, tmp_path):
    """Both kinds of compaction store batches in the topic's compression.type: key compaction
    of a compacted topic and the merging of small chunks of a delete topic."""
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=[
        "--compaction-interval-secs", "1", "--compaction-min-run", "4"])
    table, log = unique_name("zstd-table"), unique_name("zstd-log")
    create_topic(floe.bootstrap, table, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "compression.type": "zstd"})
    create_topic(floe.bootstrap, log, 1, config={"compression.type": "zstd"})
    acked: dict = {}
    logged: dict = {}
    for r in range(6):
        produce_round(floe.bootstrap, table, [(f"k{i}".encode(), f"value {r} {i} ".encode() * 20)
                                              for i in range(50)], "none", acked)
        produce_round(floe.bootstrap, log, [(f"r{r}-{i}".encode(), f"line {r} {i} ".encode() * 20)
                                            for i in range(50)], "gzip", logged)
    heartbeat(floe.bootstrap, table, b"hb", 1, acked)
    want = expected_table(acked, keep_tombstones=True)
    wait_until(lambda: table_state(floe.bootstrap, table, 1) == {0: want[0]}, 90, "key compaction")
    wait_until(lambda: metric_sum(floe, 'floe_compaction_runs_total{outcome="ok"}') >= 1, 60, "merge compaction")
    compacted = list((objects / "segments").glob("*.compacted.seg"))
    codecs = [c for seg in compacted for c in batch_codecs(seg)]
    assert len(compacted) >= 2 and set(codecs) == {4}, f"stored batches should all be zstd, found codecs {codecs}"
    assert table_state(floe.bootstrap, log, 1) == {0: sorted((o, k, v) for k, (_, o, v) in logged.items())}


def uncommitted_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value of partition 0 of `topic` read with read_uncommitted."""
    from confluent_kafka import Consumer, TopicPartition

    _, high = watermarks(bootstrap, topic, 1)[0]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("raw"), "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    c.assign([TopicPartition(topic, 0, 0)])
    got, deadline = [], time.monotonic() + 30
    try:
        while (not got or got[-1][0] < high - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    return [v for _, v in got]


def test_a_restore_after_an_abort_reads_the_commit_that_followed(floe_factory, tmp_path):
    """A Kafka Streams changelog: one transactional id aborts updates of some keys, then commits
    new values of the same keys. Once the cleaner dropped the aborted records and, past
    `delete.retention.ms`, the abort marker, a read_committed restore from offset 0 must still see
    the committed values (issue 51, finding 1: the aborted range stayed listed without its marker,
    and clients skipped every later batch of that producer)."""
    floe = floe_factory.new("floe", object_store=f"file://{tmp_path / 'objects'}", extra_args=[
        "--compaction-interval-secs", "1", "--gc-interval-secs", "1"])
    topic = unique_name("changelog")
    create_topic(floe.bootstrap, topic, 1, config={
        "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "2000"})
    keys = [f"store-key-{i}".encode() for i in range(5)]
    p = Producer({"bootstrap.servers": floe.bootstrap, "transactional.id": unique_name("streams-task"),
                  "linger.ms": 5})
    p.init_transactions(30)
    for commit, prefix in [(False, b"aborted-"), (True, b"committed-")]:
        p.begin_transaction()
        for k in keys:
            p.produce(topic, key=k, value=prefix + k, partition=0)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    acked: dict = {}
    heartbeat(floe.bootstrap, topic, b"hb", 1, acked)

    # The cleaner drops the aborted records, then the abort marker once it is 2 s old; two more
    # passes after that (each due after a new write) leave no doubt that it is gone.
    wait_until(lambda: not any(v.startswith(b"aborted-") for v in uncommitted_values(floe.bootstrap, topic)), 60,
               "the cleaner to drop the aborted records")
    time.sleep(2.5)
    for n in range(2):
        runs = metric_sum(floe, 'floe_key_compaction_runs_total{outcome="ok"}')
        heartbeat(floe.bootstrap, topic, f"hb{n}".encode(), 1, acked)
        wait_until(lambda: metric_sum(floe, 'floe_key_compaction_runs_total{outcome="ok"}') > runs, 60,
                   "a cleaner pass past delete.retention.ms")

    want = sorted(b"committed-" + k for k in keys)
    rows = [v for _, k, v in table_state(floe.bootstrap, topic, 1)[0] if not k.startswith(b"heartbeat-")]
    assert sorted(rows) == want, f"librdkafka (read_committed) restored {rows}"
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=floe.bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning()
        end = c.end_offsets([tp])[tp]
        got = []
        deadline = time.monotonic() + 30
        while c.position(tp) < end and time.monotonic() < deadline:
            for msgs in c.poll(timeout_ms=500).values():
                got += [m.value for m in msgs if not m.key.startswith(b"heartbeat-")]
    finally:
        c.close()
    assert sorted(got) == want, f"kafka-python (read_committed) restored {got}"
