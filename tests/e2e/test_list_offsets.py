"""ListOffsets: by timestamp (looking inside batches), earliest/latest, max-timestamp (-3)."""

import time

import pytest
from confluent_kafka import TopicPartition

from conftest import Rec, confluent_consumer, create_topic, produce, unique_name

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
