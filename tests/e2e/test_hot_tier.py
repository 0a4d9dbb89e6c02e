"""The hot tier (block cache) in front of the object store, measured with Floe's own metrics:
tail reads of what the agent just wrote cost no GET; several consumer groups reading the same
cold data cost about one read of it; a disk tier keeps its blocks across a clean restart, and a
block damaged on that disk is never served."""

from __future__ import annotations

import mmap
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import create_topic, scrape_metrics as metrics, unique_name

RECORD = 10_000  # bytes per record value


def gets(floe) -> tuple[float, float]:
    """(GET requests, GET bytes) the agent made to the object store so far."""
    m = metrics(floe)
    return m.get('floe_object_store_get_requests_total{outcome="ok"}', 0.0), m.get("floe_object_store_get_bytes_total", 0.0)


def produce(bootstrap: str, topic: str, partitions: int, count: int):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"})
    payload = b"v" * RECORD
    errors = []
    for i in range(count):
        p.produce(topic, value=payload, key=str(i).encode(), partition=i % partitions,
                  on_delivery=lambda e, m: errors.append(e) if e else None)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(120) == 0 and not errors, f"produce failed: {errors[:3]}"


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, group: str, timeout: float = 120,
                value: bytes | None = None) -> int:
    """Reads `count` records from offset 0; with `value`, every record must carry it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 8 * 1024 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while seen < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                assert value is None or m.value() == value, f"record {m.partition()}/{m.offset()} was altered"
                seen += 1
    finally:
        c.close()
    assert seen == count, f"group {group} read {seen} of {count} records"
    return seen


def test_tail_reads_of_what_the_agent_wrote_cost_no_get(floe):
    topic = unique_name("hot-tail")
    create_topic(floe.bootstrap, topic, 4)
    before = gets(floe)
    produce(floe.bootstrap, topic, 4, 2000)  # about 20 MB
    consume_all(floe.bootstrap, topic, 4, 2000, unique_name("tail"))
    after = gets(floe)
    assert after == before, f"tail reads made object GETs: {before} -> {after}"


def test_three_groups_reading_cold_data_cost_about_one_read(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}")
    topic = unique_name("hot-cold")
    create_topic(floe.bootstrap, topic, 4)
    count = 6000  # about 60 MB
    produce(floe.bootstrap, topic, 4, count)
    data_bytes = count * RECORD
    floe.restart(hard=True)  # the writer's cached copy is gone: the data is cold
    before = gets(floe)
    for g in range(3):
        consume_all(floe.bootstrap, topic, 4, count, unique_name(f"cold-{g}"))
    requests, read = (a - b for a, b in zip(gets(floe), before))
    print(f"3 groups read {data_bytes / 1e6:.1f} MB of records with {requests:.0f} GETs of {read / 1e6:.1f} MB")
    assert read < 1.5 * data_bytes, f"three groups read {read / data_bytes:.2f}x the data from the object store"
    assert read >= 0.9 * data_bytes, f"the first group must have read the data once ({read} bytes)"
    assert requests <= data_bytes / (4 * 2**20) + 40, f"{requests:.0f} GETs: blocks of 4 MiB expected"


def written_with_a_disk_tier(floe_factory, tmp_path, prefix: str):
    """A `floe dev` with a disk tier that wrote 1000 records to a 2-partition topic and was then
    stopped with SIGTERM, so its memory blocks went to the disk tier: (floe, topic, cache dir)."""
    objects = tmp_path / "objects"
    cache_dir = tmp_path / "cache"
    floe = floe_factory.new("floe", object_store=f"file://{objects}",
                            extra_args=["--cache-dir", str(cache_dir), "--cache-disk-bytes", str(512 * 2**20)])
    topic = unique_name(prefix)
    create_topic(floe.bootstrap, topic, 2)
    produce(floe.bootstrap, topic, 2, 1000)
    floe.stop()
    return floe, topic, cache_dir


def test_the_disk_tier_keeps_its_blocks_across_a_clean_restart(floe_factory, tmp_path):
    floe, topic, _ = written_with_a_disk_tier(floe_factory, tmp_path, "hot-disk")
    floe.start()
    before = gets(floe)
    consume_all(floe.bootstrap, topic, 2, 1000, unique_name("disk"))
    after = gets(floe)
    assert after == before, f"reads after a restart went to the object store: {before} -> {after}"


def damage(cache_dir) -> int:
    """Flips one byte of a record value about every MiB across the disk tier's files; returns
    how many were flipped."""
    pattern, flipped = b"v" * RECORD, 0
    for path in (p for p in cache_dir.rglob("*") if p.is_file() and p.stat().st_size > 0):
        with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as data:
            at = data.find(pattern)
            while at >= 0:
                data[at + RECORD // 2] = ord("w")
                flipped += 1
                at = data.find(pattern, at + 2**20)
    return flipped


def test_a_damaged_block_on_the_disk_tier_is_never_served(floe_factory, tmp_path):
    floe, topic, cache_dir = written_with_a_disk_tier(floe_factory, tmp_path, "hot-damaged")
    flipped = damage(cache_dir)
    assert flipped > 0, "no record bytes found in the disk tier"
    floe.start()
    before = gets(floe)
    # A damaged entry fails foyer's own checksum and reads as a miss; past that, blocks read back
    # from disk are checked batch by batch (unlike the writer's own copy; see the storage unit
    # test `only_blocks_this_agent_wrote_count_as_written_here...`). Either way the block is read
    # again from the object store, never served.
    consume_all(floe.bootstrap, topic, 2, 1000, unique_name("damaged"), value=b"v" * RECORD)
    requests = gets(floe)[0] - before[0]
    print(f"flipped {flipped} bytes in the disk tier; {requests:.0f} GETs to read around them")
    assert requests > 0, "damaged blocks must be read again from the object store"
