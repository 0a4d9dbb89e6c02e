"""One GET per block per zone (`floe agent --peer-addr`): fetch agents of a zone ask each block's
owner among them instead of the object store, so three consumer groups reading cold data through
three agents cost about one GET per block; no byte crosses zones for clients that state theirs;
and when an owner is SIGKILLed its askers read from the store with no error reaching a client."""

import math
import os
import random
import threading
import time

import pytest
import requests
from kafka.record._crc32c import crc as crc32c

from conftest import Cluster, Rec, create_topic, free_port, produce, unique_name, wait_until
from conftest import agent_metric as metric
from conftest import agent_metrics as metrics

BLOCK = 4 * 1024 * 1024
TAIL_WITH_PREVIOUS = 1024 * 1024
FETCHERS = (2, 3, 4)
PARTITIONS = 8
RECORD = 1024


def owner_blocks(size: int) -> list[int]:
    """The blocks of an object that have an owner of their own (a small last block goes with the one
    before it, as `floe_storage::owner_block` says)."""
    count = -(-size // BLOCK)
    last_small = count > 1 and size - (count - 1) * BLOCK <= TAIL_WITH_PREVIOUS
    return list(range(count - 1 if last_small else count))


def segment_objects(c) -> dict[str, int]:
    """Every segment object in the store: {key: size}."""
    root = os.path.join(c.tmp, "objects")
    out = {}
    for d, _, files in os.walk(os.path.join(root, "segments")):
        for f in files:
            path = os.path.join(d, f)
            out[os.path.relpath(path, root)] = os.path.getsize(path)
    return out


def owner(key: str, block: int, agents) -> int:
    """The owner agent of a block, as `block_peers::block_owner` picks it (rendezvous hashing)."""
    mask = (1 << 64) - 1

    def score(agent_id):
        h = crc32c(key.encode() + b"#" + block.to_bytes(8, "big")) ^ ((agent_id * 0x9E3779B97F4A7C15) & mask)
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & mask
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & mask
        return h ^ (h >> 33)
    return max(agents, key=lambda a: (score(a), a))


@pytest.fixture
def zone(request, tmp_path):
    """Agent 1 produces and runs the jobs; agents 2-4 fetch, each in an agent group of its own (so a
    consumer that reaches one reads everything through it), with peer listeners on 127.0.0.2-4."""
    peer_ports = {a: free_port() for a in FETCHERS}

    def args(a):
        if a == 1:
            # Large objects, and no compaction rewriting them while the GETs are counted.
            return ["--roles", "produce,jobs", "--flush-bytes", str(8 * 1024 * 1024), "--flush-interval-ms", "1000",
                    "--compaction-interval-secs", "3600"]
        return ["--roles", "fetch", "--agent-group", f"g{a}", "--peer-addr", f"127.0.0.{a}:{peer_ports[a]}"]
    c = Cluster(tmp_path, agent_args=args, zones=("a",) * 4)
    request.node._aux_logs = [(p.name, p.log) for p in [*c.meta.values(), *c.agents.values()]]
    try:
        c.start()

        def peers_known(a):
            body = requests.get(f"{c.http_url(a)}/v1/cluster", timeout=5).json()
            listeners = {x["agent_id"] for x in body.get("agents", []) if x.get("peer_listener")}
            return body.get("metadata_format", 0) >= 10 and listeners == set(FETCHERS)
        for a in FETCHERS:
            wait_until(lambda a=a: peers_known(a), 30, f"agent {a} seeing every peer listener")
        yield c
    finally:
        c.stop()


def produce_topic(c, topic, mib, seed):
    rng = random.Random(seed)
    create_topic(c.bootstrap(1), topic, PARTITIONS)
    count = mib * 1024 * 1024 // RECORD
    recs = [Rec(partition=i % PARTITIONS, key=None, value=rng.randbytes(RECORD), headers=None, timestamp=None)
            for i in range(count)]
    produce(c.bootstrap(1), topic, recs, conf={"linger.ms": 50, "batch.size": 1_000_000, "compression.type": "none"})
    return count


def read_all(c, a, topic, count, errors, subscribe=True, timeout=180):
    """Reads `count` records of `topic` through agent a (stating zone a) as a consumer group of its
    own (subscribe) or by assignment; every error event goes to `errors`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    consumer = Consumer({
        "bootstrap.servers": c.bootstrap(a), "group.id": unique_name(f"peers-{a}"), "client.id": "floe_az=a",
        "client.rack": "a", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "error_cb": lambda e: errors.append((a, str(e))),
    })
    got = 0
    try:
        if subscribe:
            consumer.subscribe([topic])
        else:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error():
                    errors.append((a, str(m.error())))
                else:
                    got += 1
    finally:
        consumer.close()
    return got


def read_through(c, agents, topic, count, subscribe=True, timeout=180):
    """One reader through each of `agents` at once (read_all): ({agent: records read}, errors)."""
    errors, counts = [], {}
    threads = [threading.Thread(target=lambda a=a: counts.__setitem__(
        a, read_all(c, a, topic, count, errors, subscribe=subscribe, timeout=timeout))) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts, errors


# Serial: an ask its owner does not answer within 1.5 s falls back to the store, and at most 2 may,
# while three groups read 32 MiB cold through three agents at once.
@pytest.mark.serial
@pytest.mark.timeout(420)
def test_three_groups_through_three_agents_cost_one_get_per_block_and_a_killed_owner_costs_no_error(zone):
    c = zone
    topic, later = unique_name("peers"), unique_name("peers-later")
    count = produce_topic(c, topic, 32, seed=1)
    objects = segment_objects(c)
    later_count = produce_topic(c, later, 16, seed=2)
    gets_before = sum(metric(c, a, "floe_object_store_get_requests_total") for a in FETCHERS)
    footers_before = sum(metric(c, a, "floe_block_cache_footer_gets_total") for a in FETCHERS)

    # Three consumer groups, one through each fetch agent, read the first topic cold at once.
    counts, errors = read_through(c, FETCHERS, topic, count)
    assert counts == {a: count for a in FETCHERS}, counts
    assert not errors, errors[:5]

    # Every block of the objects written so far held some of the topic's records; each was read
    # from the store about once, not once per agent.
    distinct = sum(len(owner_blocks(size)) for size in objects.values())
    gets = sum(metric(c, a, "floe_object_store_get_requests_total") for a in FETCHERS) - gets_before
    # An agent reading an object's blocks from the store reads its footer once for the block
    # checksums (segment format 2), unless a block it reads reaches the object's end.
    footers = sum(metric(c, a, "floe_block_cache_footer_gets_total") for a in FETCHERS) - footers_before
    gets -= footers
    served = sum(metric(c, a, "floe_block_peer_asks_total", 'result="served"') for a in FETCHERS)
    # An ask the owner did not answer in time is read from the store instead, by design: on a
    # loaded 2-core machine one may time out. Such a GET is counted as a fallback; no other GET
    # may repeat a block.
    fallbacks = sum(metric(c, a, "floe_block_peer_asks_total", f'result="{r}"') for a in FETCHERS
                    for r in ("timeout", "error", "owner_down", "owner_unavailable", "refused", "wrong_length", "wrong_block",
                              "unsupported"))
    print(f"{len(objects)} objects, {distinct} blocks with an owner, {gets:.0f} block GETs and {footers:.0f} "
          f"footer GETs by 3 agents, {served:.0f} blocks from owners, {fallbacks:.0f} asks fell back to the store")
    assert footers <= len(objects) * len(FETCHERS), f"{footers} footer GETs for {len(objects)} objects"
    # About once: 10 % more, rounded up (one GET in 8 blocks; a CI run on 2 loaded cores saw 9).
    assert gets <= math.ceil(1.1 * distinct) + fallbacks, f"{gets} GETs for {distinct} blocks, {fallbacks} fallbacks"
    assert fallbacks <= 2, f"{fallbacks} asks fell back"
    assert served > 0
    for a in FETCHERS:
        zones = {k: v for k, v in metrics(c, a).items() if k.startswith("floe_fetch_zone_bytes_total{")}
        assert zones and all('client_zone="a"' in k and 'agent_zone="a"' in k for k in zones), zones

    # The owner of most of the later topic's blocks is SIGKILLed; the other two agents, which
    # still count it live for its session, read that topic at once, by assignment: no error, all
    # records, and the blocks it owned read from the store instead.
    later_blocks = [(k, b) for k, size in segment_objects(c).items() if k not in objects for b in owner_blocks(size)]
    owned = {a: sum(owner(k, b, FETCHERS) == a for k, b in later_blocks) for a in FETCHERS}
    killed = max(owned, key=owned.get)
    readers = [a for a in FETCHERS if a != killed]
    c.agents[killed].kill()
    counts, errors = read_through(c, readers, later, later_count, subscribe=False)
    assert counts == {a: later_count for a in readers}, counts
    assert not errors, errors[:5]
    fell_back = sum(metric(c, a, "floe_block_peer_asks_total", f'result="{r}"')
                    for a in readers for r in ("owner_down", "error", "timeout"))
    print(f"agent {killed} owned {owned[killed]} of {len(later_blocks)} later blocks; {fell_back:.0f} asks fell back")
    assert fell_back > 0


@pytest.mark.timeout(180)
def test_a_cold_read_across_many_small_objects_loads_the_next_ones_ahead(floe_factory, tmp_path):
    """Found by bench_block_peers.py --tail: a reader that is not the writer read the chunks of a
    partition one GET after another, so with an object every 10 ms and 20 ms GETs a tail consumer
    fell 8 s behind. The blocks of the next chunks now load while one is read. Objects here are
    one block each, so before the fix nothing was ever prefetched."""
    from conftest import consume_confluent, scrape_metrics
    floe = floe_factory.new("floe", object_store=f"file://{tmp_path / 'objects'}", flush_interval_ms=5)
    topic = unique_name("cold")
    create_topic(floe.bootstrap, topic, 2)
    rng = random.Random(3)
    for round_ in range(40):  # a flush, and an object, per round
        produce(floe.bootstrap, topic, [Rec(partition=i % 2, key=None, value=rng.randbytes(512), headers=None,
                                            timestamp=None) for i in range(20)])
    assert len(segment_objects_under(tmp_path / "objects")) >= 30
    floe.restart()  # a reader with nothing in memory
    got = consume_confluent(floe.bootstrap, topic, 2, timeout=60)
    assert sum(len(v) for v in got.values()) == 40 * 20
    metrics = scrape_metrics(floe)
    ahead = metrics.get('floe_block_cache_object_gets_total{cause="prefetch"}', 0)
    missed = metrics.get('floe_block_cache_object_gets_total{cause="miss"}', 0)
    assert ahead > missed, f"{ahead} blocks loaded ahead, {missed} waited for"


def segment_objects_under(root) -> list[str]:
    return [f for _, _, files in os.walk(os.path.join(root, "segments")) for f in files]


@pytest.mark.timeout(60)
def test_a_peer_listener_beyond_loopback_needs_tls_or_an_explicit_plaintext_flag(tmp_path):
    """Found in review: an agent without metadata TLS served its peer listener in plaintext on any
    address, so whoever reached it could read segment blocks. Now it refuses to start, as a
    metadata node on a non-loopback address does, unless --peer-allow-plaintext says so."""
    import subprocess

    from conftest import FLOE_BIN
    args = [FLOE_BIN, "agent", "--metadata", f"127.0.0.1:{free_port()}", "--object-store",
            f"file://{tmp_path}/objects", "--kafka-addr", f"127.0.0.1:{free_port()}",
            "--http-addr", f"127.0.0.1:{free_port()}", "--peer-addr", f"0.0.0.0:{free_port()}"]
    try:
        run = subprocess.run(args, capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail("an agent with a plaintext peer listener on 0.0.0.0 started")
    assert run.returncode != 0 and "--peer-allow-plaintext" in run.stderr, run.stderr[-2000:]
