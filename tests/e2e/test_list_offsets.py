"""ListOffsets: by timestamp (looking inside batches), earliest/latest, max-timestamp (-3)."""

import time

import pytest
from confluent_kafka import TopicPartition

from conftest import Rec, admin, confluent_consumer, create_topic, produce, unique_name, watermarks

N = 400


def _expected_offset(timestamps, target):
    """Offset of the first record whose timestamp is >= target, or -1."""
    for off, ts in enumerate(timestamps):
        if ts >= target:
            return off
    return -1


def _produce_chunks(bootstrap, topic, partition, timestamps, codec):
    """Produce in a few chunks: records of one chunk share batches (linger), chunks
    are separate batches/flushes, so lookups must look inside and across batches."""
    recs = [Rec(partition=partition, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=None, timestamp=ts)
            for i, ts in enumerate(timestamps)]
    chunk = 100
    for i in range(0, len(recs), chunk):
        produce(bootstrap, topic, recs[i:i + chunk],
                {"linger.ms": 200, "batch.num.messages": 37, "compression.type": codec})
    assert [r.offset for r in recs] == list(range(len(recs))), "offsets not 0..N-1 in produce order"
    return recs


@pytest.fixture
def ts_topic(floe):
    topic = unique_name("lo")
    create_topic(floe.bootstrap, topic, 2)
    base = int(time.time() * 1000) - 3_600_000 + 123
    # partition 0: strictly increasing timestamps with gaps of 10 ms
    ts0 = [base + 10 * i for i in range(N)]
    # partition 1: increasing with one outlier (the max timestamp) in the middle and duplicates
    ts1 = [base + 10 * (i // 3) for i in range(N)]
    ts1[N // 2 + 7] = base + 50_000_000
    _produce_chunks(floe.bootstrap, topic, 0, ts0, "none")
    _produce_chunks(floe.bootstrap, topic, 1, ts1, "lz4")
    return floe, topic, base, {0: ts0, 1: ts1}


def _targets(base, ts):
    t = [base - 1000, base, base + 1, base + 5, base + 10 * 37, base + 10 * 37 + 9, base + 10 * 150 - 1,
         max(ts), max(ts) + 1, ts[-1], ts[-1] + 1, ts[N // 2]]
    t += [x + d for x in ts[::41] for d in (-1, 0, 1)]
    return sorted(set(t))


# PORTED (issue 54): fully replaced by testing/tests/it/list_offsets.rs::by_timestamp_finds_the_first_record_at_or_after_it_inside_and_across_batches;
# delete this test once that Rust test passes.
def test_offsets_for_times_inside_batches(ts_topic):
    floe, topic, base, tss = ts_topic
    c = confluent_consumer(floe.bootstrap)
    try:
        for p, ts in tss.items():
            targets = _targets(base, ts)
            bad = []
            for t in targets:
                # one lookup per call: a ListOffsets request names each partition at most once
                (r,) = c.offsets_for_times([TopicPartition(topic, p, t)], timeout=15)
                want = _expected_offset(ts, t)
                assert r.error is None, f"p{p} ts {t}: error {r.error}"
                got = r.offset if r.offset >= 0 else -1
                if got != want:
                    bad.append((t - base, got, want))
            assert not bad, f"partition {p}: (target-base, got, want) mismatches: {bad[:10]} ({len(bad)} total)"
    finally:
        c.close()


# PORTED (issue 54): fully replaced by testing/tests/it/list_offsets.rs::by_timestamp_finds_the_first_record_at_or_after_it_inside_and_across_batches;
# delete this test once that Rust test passes.
def test_watermarks(ts_topic):
    floe, topic, _base, _ = ts_topic
    wm = watermarks(floe.bootstrap, topic, 2)
    assert wm == {0: (0, N), 1: (0, N)}, f"watermarks {wm}, want (0, {N}) on both partitions"


# PORTED (issue 54): fully replaced by testing/tests/it/list_offsets.rs::by_timestamp_finds_the_first_record_at_or_after_it_inside_and_across_batches;
# delete this test once that Rust test passes.
def test_admin_list_offsets_specs(ts_topic):
    from confluent_kafka.admin import OffsetSpec

    floe, topic, base, tss = ts_topic
    a = admin(floe.bootstrap)
    specs = {}
    for p in (0, 1):
        specs[(p, "earliest")] = OffsetSpec.earliest()
        specs[(p, "latest")] = OffsetSpec.latest()
        specs[(p, "ts")] = OffsetSpec.for_timestamp(base + 10 * 100 + 1)
    # max_timestamp (-3, KIP-734) exists in confluent-kafka >= 2.3
    has_max = hasattr(OffsetSpec, "max_timestamp")
    if has_max:
        for p in (0, 1):
            specs[(p, "max")] = OffsetSpec.max_timestamp()

    results = {}
    for (p, kind), spec in specs.items():
        # one call per spec: a dict keyed by TopicPartition cannot hold two specs for one partition
        fut = a.list_offsets({TopicPartition(topic, p): spec}, request_timeout=15)
        (info,) = [f.result(timeout=15) for f in fut.values()]
        results[(p, kind)] = info

    for p, ts in tss.items():
        assert results[(p, "earliest")].offset == 0, f"p{p} earliest {results[(p, 'earliest')]}"
        assert results[(p, "latest")].offset == N, f"p{p} latest {results[(p, 'latest')]}"
        want = _expected_offset(ts, base + 10 * 100 + 1)
        r = results[(p, "ts")]
        assert r.offset == want, f"p{p} for_timestamp: offset {r.offset}, want {want}"
        assert r.timestamp == ts[want], f"p{p} for_timestamp: timestamp {r.timestamp}, want {ts[want]}"
        if has_max:
            r = results[(p, "max")]
            want = ts.index(max(ts)) if p == 1 else N - 1
            assert r.offset == want, f"p{p} max_timestamp: offset {r.offset}, want {want}"
            assert r.timestamp == max(ts), f"p{p} max_timestamp: timestamp {r.timestamp}, want {max(ts)}"


# PORTED (issue 54): fully replaced by testing/tests/it/list_offsets.rs::earliest_latest_and_by_timestamp_follow_what_was_produced;
# delete this test once that Rust test passes.
def test_list_offsets_empty_topic(floe):
    topic = unique_name("lo-empty")
    create_topic(floe.bootstrap, topic, 1)
    assert watermarks(floe.bootstrap, topic, 1) == {0: (0, 0)}
    c = confluent_consumer(floe.bootstrap)
    try:
        (r,) = c.offsets_for_times([TopicPartition(topic, 0, int(time.time() * 1000))], timeout=15)
        assert r.error is None and r.offset < 0, f"by-timestamp on empty partition: {r} (want offset -1)"
    finally:
        c.close()
