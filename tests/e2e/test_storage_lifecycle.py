"""Storage lifecycle against a real `floe dev`: retention by time and by size advancing the log
start offset, consumers with old committed offsets resetting, and garbage collection deleting
unreferenced objects and orphans (an agent that died between PUT and commit) and nothing else."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from conftest import admin, create_topic, metric_sum, unique_name, wait_until, watermarks

T = 30


def set_broker_configs(bootstrap: str, **configs: str):
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)
    a = admin(bootstrap)
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)


def set_topic_configs(bootstrap: str, topic: str, **configs: str):
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    res = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    a = admin(bootstrap)
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)


def segment_files(objects: Path) -> set[str]:
    d = objects / "segments"
    return {p.name for p in d.glob("*.seg")} if d.exists() else set()


def produce_values(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> dict[bytes, tuple[int, int]]:
    """Produces (partition, value) pairs and flushes; returns value -> (partition, offset)."""
    acked: dict[bytes, tuple[int, int]] = {}
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    for partition, value in values:
        p.produce(topic, value=value, partition=partition, on_delivery=cb)
    assert p.flush(60) == 0, "records left unacknowledged"
    assert not errors, f"produce failed: {errors[:3]}"
    return acked


def read_partition(bootstrap: str, topic: str, partition: int, offset: int, until: int, timeout: float = 30) -> list:
    """Reads `partition` from `offset` up to (not including) offset `until`."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("reader"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, partition, offset)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while (not got or got[-1].offset() < until - 1) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.append(m)
    finally:
        c.close()
    return got


def test_retention_by_time_deletes_old_records_and_their_objects(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=["--gc-interval-secs", "1"])
    set_broker_configs(floe.bootstrap, log_retention_check_interval_ms="300", log_segment_delete_delay_ms="0")
    topic = unique_name("ret-time")
    create_topic(floe.bootstrap, topic, 2, config={"retention.ms": "3000"})
    keep = unique_name("ret-keep")
    create_topic(floe.bootstrap, keep, 1)

    produce_values(floe.bootstrap, keep, [(0, f"keep-{i}".encode()) for i in range(20)])
    kept_objects = segment_files(objects)
    produce_values(floe.bootstrap, topic, [(i % 2, f"old-{i}".encode()) for i in range(200)])
    expiring_objects = segment_files(objects) - kept_objects
    assert expiring_objects, "producing wrote no segment objects"
    assert watermarks(floe.bootstrap, topic, 2) == {0: (0, 100), 1: (0, 100)}

    # A group commits offset 50 on partition 0, then retention removes everything below 100.
    group = unique_name("ret-group")
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 50)], asynchronous=False)
    c.close()

    wait_until(lambda: watermarks(floe.bootstrap, topic, 2) == {0: (100, 100), 1: (100, 100)}, 30,
               "retention.ms=3000 to move both log start offsets to the end")
    # The objects holding only the expired topic's records go; the kept topic's stay readable.
    wait_until(lambda: not (segment_files(objects) & expiring_objects), 30,
               "garbage collection to delete the expired topic's objects")
    assert kept_objects <= segment_files(objects), "an object still referenced was deleted"
    assert metric_sum(floe, 'floe_gc_objects_deleted_total{reason="unreferenced"}') >= len(expiring_objects)
    keep_read = read_partition(floe.bootstrap, keep, 0, 0, 20)
    assert [m.value() for m in keep_read] == [f"keep-{i}".encode() for i in range(20)], "another topic lost records"

    # New records, kept now (retention off), are what the old committed offset resets to.
    set_topic_configs(floe.bootstrap, topic, retention_ms="-1")
    produce_values(floe.bootstrap, topic, [(0, f"new-{i}".encode()) for i in range(5)])
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0)])  # from the committed offset 50: out of range now
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append((m.offset(), m.value()))
    c.close()
    assert got == [(100 + i, f"new-{i}".encode()) for i in range(5)], \
        f"a consumer below the log start resets to the earliest offset: {got}"
    # Reading below the log start is OFFSET_OUT_OF_RANGE (the reset above relied on it).
    low = read_partition(floe.bootstrap, topic, 0, 0, 101, timeout=10)
    assert low and low[0].offset() == 100, f"offset 0 reset to the log start 100: {[m.offset() for m in low]}"


def test_retention_by_size_keeps_at_least_retention_bytes(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=["--gc-interval-secs", "1"])
    set_broker_configs(floe.bootstrap, log_retention_check_interval_ms="300", log_segment_delete_delay_ms="0")
    topic = unique_name("ret-size")
    create_topic(floe.bootstrap, topic, 1, config={"retention.bytes": "30000"})
    acked = {}
    # Ten flushes of ten 1 KiB records: ten index entries of about 10 KiB each.
    for flush in range(10):
        acked.update(produce_values(floe.bootstrap, topic, [(0, f"{flush:02d}-{i:02d}-".encode() + b"x" * 1000)
                                                            for i in range(10)]))
    wait_until(lambda: watermarks(floe.bootstrap, topic, 1)[0][0] > 0, 30, "retention.bytes to advance the log start")
    time.sleep(1)  # another retention pass changes nothing more
    low, high = watermarks(floe.bootstrap, topic, 1)[0]
    assert high == 100
    kept = read_partition(floe.bootstrap, topic, 0, low, high)
    kept_bytes = sum(len(m.value()) for m in kept)
    assert low > 0 and kept_bytes >= 30000 - 2000, f"kept {kept_bytes} bytes from offset {low}"
    assert low >= 60, f"about three flushes hold 30000 bytes; the log starts at {low}"
    by_offset = {off: v for v, (_, off) in acked.items()}
    assert [m.value() for m in kept] == [by_offset[o] for o in range(low, high)], "kept records changed"


def test_orphan_objects_are_deleted_after_the_grace_and_nothing_else(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}")
    topic = unique_name("orphan")
    create_topic(floe.bootstrap, topic, 1)
    acked = produce_values(floe.bootstrap, topic, [(0, f"before-{i}".encode()) for i in range(10)])
    committed_objects = segment_files(objects)

    # The agent dies between PUT and commit: the producer hears nothing; the object stays behind.
    floe.stop()
    floe.extra_args = ["--fault", "exit-before-commit"]
    floe.start()
    p = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 0, "message.timeout.ms": 5000, "retries": 0})
    outcome = []
    p.produce(topic, value=b"never-acknowledged", partition=0, on_delivery=lambda e, m: outcome.append(e))
    p.flush(10)
    wait_until(lambda: not floe.alive(), 20, "the agent to exit between PUT and commit")
    assert floe.proc.returncode == 86, f"exit code {floe.proc.returncode}"
    assert not outcome or outcome[0] is not None, "the record was acknowledged although never committed"
    orphans = segment_files(objects) - committed_objects
    assert len(orphans) == 1, f"expected one orphan object, found {orphans}"

    floe.extra_args = ["--gc-interval-secs", "1", "--orphan-grace-secs", "4"]
    floe.start()
    acked.update(produce_values(floe.bootstrap, topic, [(0, f"after-{i}".encode()) for i in range(10)]))
    wait_until(lambda: not (segment_files(objects) & orphans), 30, "the orphan to be deleted after its grace")
    assert committed_objects <= segment_files(objects), "a committed object was deleted"
    assert metric_sum(floe, 'floe_gc_objects_deleted_total{reason="orphan"}') == 1
    got = read_partition(floe.bootstrap, topic, 0, 0, 20)
    assert sorted(m.value() for m in got) == sorted(acked), "acknowledged records lost"
    assert b"never-acknowledged" not in {m.value() for m in got}


def test_compaction_merges_small_objects_while_producers_and_consumers_run(floe_factory, tmp_path):
    import threading

    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=[
        "--compaction-interval-secs", "1", "--compaction-min-run", "4", "--gc-interval-secs", "1"])
    set_broker_configs(floe.bootstrap, log_segment_delete_delay_ms="0")
    topic = unique_name("compact-objects")
    create_topic(floe.bootstrap, topic, 2)

    # Sixty flushes of a few records each: sixty small two-partition objects. Compaction may
    # already replace some while the later ones are written, so every object seen counts.
    acked: dict[bytes, tuple[int, int]] = {}
    small_objects: set[str] = set()
    for flush in range(60):
        acked.update(produce_values(floe.bootstrap, topic, [(p, f"f{flush:02d}-p{p}-{i}".encode())
                                                            for p in (0, 1) for i in range(3)]))
        small_objects |= {o for o in segment_files(objects) if not o.endswith(".compacted.seg")}
    assert len(small_objects) >= 60, f"expected one object per flush, found {len(small_objects)}"

    # Producers and a consumer keep running while compaction and garbage collection work.
    stop = threading.Event()
    live_acked: dict[bytes, tuple[int, int]] = {}
    failures: list[BaseException] = []

    def keep_producing():
        n = 0
        try:
            while not stop.is_set():
                live_acked.update(produce_values(floe.bootstrap, topic, [(n % 2, f"live-{n}".encode())]))
                n += 1
                time.sleep(0.05)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    t = threading.Thread(target=keep_producing, daemon=True)
    t.start()
    try:
        wait_until(lambda: metric_sum(floe, 'floe_compaction_runs_total{outcome="ok"}') >= 2, 60,
                   "compaction of both partitions")
        wait_until(lambda: len(segment_files(objects) & small_objects) <= 4, 60,
                   "garbage collection to delete the small objects compaction replaced")
    finally:
        stop.set()
        t.join(30)
    assert not failures, f"producing during compaction failed: {failures[0]!r}"
    # Both partitions' runs of a round share one object (format 14): fewer objects than runs,
    # counted once no round is between its PUT and its commit.
    def compaction_counts():
        return (metric_sum(floe, "floe_compaction_objects_total"),
                metric_sum(floe, 'floe_compaction_runs_total{outcome="ok"}'))
    settled = []
    wait_until(lambda: settled.append(compaction_counts()) or settled[-2:] == [settled[-1]] * 2, 30,
               "compaction to settle", interval=1.5)
    compacted_objects, runs = settled[-1]
    assert 1 <= compacted_objects < runs, f"{compacted_objects} compacted objects for {runs} runs"
    remaining = segment_files(objects)
    print(f"{len(small_objects)} objects before compaction, {len(remaining)} after (live writes included)")
    acked.update(live_acked)
    for partition in (0, 1):
        expected = sorted((off, v) for v, (p, off) in acked.items() if p == partition)
        got = read_partition(floe.bootstrap, topic, partition, 0, expected[-1][0] + 1)
        assert [(m.offset(), m.value()) for m in got] == expected, f"partition {partition} changed by compaction"
