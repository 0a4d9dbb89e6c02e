"""Share groups (KIP-932, issue 31) with librdkafka's share consumer (confluent-kafka's
ShareConsumer): consumers sharing one partition, acknowledgement by record (accept, release,
reject), redelivery with delivery counts, lock expiry after a consumer is SIGKILLed, the
delivery limit, a consumer group beside a share group, and acknowledgements surviving a SIGKILL
of the metadata leader and agent."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from conftest import FLOE_BIN, create_topic, scrape_metrics, unique_name, wait_until

HOLDER = os.path.join(os.path.dirname(__file__), "helpers", "share_holder.py")


def set_broker_configs(bootstrap: str, configs: dict):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()]
    for f in a.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)]).values():
        f.result(10)


def produce_values(bootstrap: str, topic: str, n: int, tag: str = "r"):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=f"{tag}-{i}".encode())
    assert p.flush(30) == 0, "records left unacknowledged"


def share_consumer(bootstrap: str, group: str, topic: str):
    from confluent_kafka import ShareConsumer

    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"})
    c.subscribe([topic])
    return c


def poll_records(consumer, timeout: float = 1.0):
    return [m for m in consumer.poll(timeout) or [] if not m.error()]


def start_earliest(bootstrap: str, **extra):
    set_broker_configs(bootstrap, {"floe.share.auto.offset.reset": "earliest", **extra})


def test_four_share_consumers_split_one_partition_and_each_record_is_delivered_once(floe):
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    start_earliest(bootstrap)
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    total = 3000
    produce_values(bootstrap, topic, total)
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def work(i: int):
        c = share_consumer(bootstrap, group, topic)
        try:
            while not stop.is_set():
                messages = poll_records(c, 0.5)
                for m in messages:
                    with lock:
                        seen.setdefault(m.offset(), []).append(i)
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if messages:
                    c.commit_sync()
                    time.sleep(0.05)  # so that no one consumer takes everything
        finally:
            c.close()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(seen) >= total, 90, f"{total} records delivered")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert sorted(seen) == list(range(total)), "every offset delivered"
    twice = {o: who for o, who in seen.items() if len(who) > 1}
    assert not twice, f"accepted records delivered again: {list(twice.items())[:5]}"
    consumers = {who[0] for who in seen.values()}
    assert len(consumers) >= 2, f"one partition shared by several consumers, not only {consumers}"


def test_release_redelivers_with_a_higher_count_and_reject_archives(floe):
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    start_earliest(bootstrap)
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 10)
    c = share_consumer(bootstrap, group, topic)
    deliveries: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (len(deliveries) == 10 and 2 in deliveries
                                                  and len(deliveries[2]) == 2):
            for m in poll_records(c):
                deliveries.setdefault(m.offset(), []).append(m.delivery_count())
                first = len(deliveries[m.offset()]) == 1
                if m.offset() == 2 and first:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                elif m.offset() == 5:
                    c.acknowledge(m, AcknowledgeType.REJECT)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        # A while longer: nothing rejected or accepted comes back.
        end = time.monotonic() + 3
        while time.monotonic() < end:
            for m in poll_records(c, 0.5):
                deliveries.setdefault(m.offset(), []).append(m.delivery_count())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    assert deliveries.get(2) == [1, 2], f"the released record came back once, counted: {deliveries}"
    assert deliveries.get(5) == [1], f"the rejected record was delivered once: {deliveries}"
    assert all(counts == [1] for o, counts in deliveries.items() if o != 2), deliveries


def test_a_killed_consumers_records_are_redelivered_after_the_lock(floe):
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    start_earliest(bootstrap, **{"group.share.record.lock.duration.ms": "2000"})
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 20)
    holder = subprocess.Popen([sys.executable, HOLDER, "--bootstrap", bootstrap, "--group", group, "--topic", topic],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = holder.stdout.readline()
        held = json.loads(line)["offsets"]
        assert held, "the holder took records"
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        killed_at = time.monotonic()
        c = share_consumer(bootstrap, group, topic)
        got: dict[int, int] = {}
        first_redelivery = None
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(got) < 20:
                for m in poll_records(c):
                    got[m.offset()] = m.delivery_count()
                    if m.offset() in held and first_redelivery is None:
                        first_redelivery = time.monotonic() - killed_at
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
        finally:
            c.close()
    finally:
        if holder.poll() is None:
            holder.kill()
    assert sorted(got) == list(range(20)), f"every record delivered to the survivor: {sorted(got)}"
    assert all(got[o] == 2 for o in held), f"held records redelivered as second deliveries: {got}"
    assert first_redelivery is not None and first_redelivery >= 1.0, \
        f"redelivered only after the lock passed ({first_redelivery} s after the kill)"


def test_the_delivery_limit_archives_a_poison_record(floe):
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    start_earliest(bootstrap, **{"group.share.delivery.count.limit": "3"})
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 5)
    c = share_consumer(bootstrap, group, topic)
    poison: list[int] = []
    accepted = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for m in poll_records(c, 0.5):
                if m.offset() == 0:
                    poison.append(m.delivery_count())
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    accepted.add(m.offset())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
            if len(poison) >= 3 and len(accepted) == 4:
                # A few more rounds to see it is not delivered a fourth time.
                end = time.monotonic() + 2
                while time.monotonic() < end:
                    for m in poll_records(c, 0.5):
                        poison.append(m.delivery_count()) if m.offset() == 0 else None
                        c.acknowledge(m, AcknowledgeType.ACCEPT)
                    c.commit_sync()
                break
    finally:
        c.close()
    assert poison == [1, 2, 3], f"the poison record was delivered up to the limit, then archived: {poison}"
    assert accepted == {1, 2, 3, 4}


@pytest.mark.long
def test_a_consumer_group_and_a_share_group_read_the_same_topic_apart(floe):
    from confluent_kafka import AcknowledgeType, Consumer

    bootstrap = floe.bootstrap
    start_earliest(bootstrap)
    topic = unique_name("queue")
    create_topic(bootstrap, topic, 2)
    produce_values(bootstrap, topic, 200)
    group_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("classic"),
                               "auto.offset.reset": "earliest"})
    group_consumer.subscribe([topic])
    share = share_consumer(bootstrap, unique_name("workers"), topic)
    by_group, by_share = set(), set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (len(by_group) < 200 or len(by_share) < 200):
            m = group_consumer.poll(0.2)
            if m is not None and not m.error():
                by_group.add(m.value())
            for m in poll_records(share, 0.2):
                by_share.add(m.value())
                share.acknowledge(m, AcknowledgeType.ACCEPT)
            share.commit_sync()
    finally:
        group_consumer.close()
        share.close()
    assert len(by_group) == 200 and len(by_share) == 200, (len(by_group), len(by_share))


def test_read_committed_share_groups_skip_aborted_transactions_and_markers(floe):
    """With floe.share.isolation.level=read_committed a share group gets committed records only;
    aborted records and transaction markers are archived, so nothing is left unacknowledged."""
    from confluent_kafka import Producer

    bootstrap = floe.bootstrap
    start_earliest(bootstrap, **{"floe.share.isolation.level": "read_committed"})
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("txn")})
    p.init_transactions(30)
    for tag, commit in (("a", True), ("b", False), ("c", True)):
        p.begin_transaction()
        for i in range(5):
            p.produce(topic, value=f"{tag}-{i}".encode())
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    got = accept_rest(bootstrap, group, topic, 10)
    # a-0..4 at offsets 0-4, a marker, b-0..4 (aborted) at 6-10, a marker, c-0..4 at 12-16.
    assert sorted(got) == [*range(0, 5), *range(12, 17)], f"the committed records only: {sorted(got)}"
    # The aborted batch's offsets and the 3 markers are archived: the group has nothing left.
    key = f'floe_share_group_lag{{group="{group}",partition="0",topic="{topic}"}}'
    wait_until(lambda: scrape_metrics(floe).get(key) == 0, 15, "no share lag left")


def accept_some(bootstrap: str, group: str, topic: str, n: int) -> set:
    """Accepts the first `n` records delivered (releasing the rest) and closes: the offsets."""
    from confluent_kafka import AcknowledgeType

    c = share_consumer(bootstrap, group, topic)
    accepted = set()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(accepted) < n:
            messages = poll_records(c)
            for m in messages:
                if len(accepted) < n:
                    accepted.add(m.offset())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                else:
                    c.acknowledge(m, AcknowledgeType.RELEASE)
            if messages:
                c.commit_sync()
    finally:
        c.close()
    assert len(accepted) == n
    return accepted


def accept_rest(bootstrap: str, group: str, topic: str, expected: int, timeout: float = 90) -> dict:
    """Accepts what is delivered until `expected` records came, and 2 s more: offset -> count."""
    from confluent_kafka import AcknowledgeType

    c = share_consumer(bootstrap, group, topic)
    got = {}
    try:
        deadline = time.monotonic() + timeout
        settle = None
        while time.monotonic() < (settle or deadline):
            for m in poll_records(c, 0.5):
                got[m.offset()] = m.delivery_count()
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
            if settle is None and len(got) >= expected:
                settle = time.monotonic() + 2
    finally:
        c.close()
    return got


def test_acknowledgements_survive_a_sigkill_of_metadata_and_agent(floe):
    """`floe dev` is the metadata leader and the agent in one process: SIGKILL it after half the
    records are accepted; after the restart only the others are delivered."""
    bootstrap = floe.bootstrap
    start_earliest(bootstrap)
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 100)
    accepted = accept_some(bootstrap, group, topic, 50)
    floe.kill()
    floe.start()
    again = accept_rest(floe.bootstrap, group, topic, 50)
    assert not (set(again) & accepted), f"accepted records delivered again: {sorted(set(again) & accepted)[:10]}"
    assert set(again) | accepted == set(range(100)), "no unacknowledged record lost"


def test_acknowledgements_survive_a_sigkill_of_the_metadata_leader_and_an_agent(cluster):
    """Three metadata nodes and two agents: the metadata leader and the agent the consumer used
    are SIGKILLed after half the records are accepted; a consumer through the other agent gets
    exactly the others."""
    first = cluster.bootstrap(1)
    start_earliest(first)
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(first, topic, 1)
    produce_values(first, topic, 200)
    accepted = accept_some(first, group, topic, 100)
    leader = cluster.leader()
    cluster.meta[leader].kill()
    cluster.agents[1].kill()
    cluster.leader(exclude=(leader,))
    again = accept_rest(cluster.bootstrap(2), group, topic, 100)
    assert not (set(again) & accepted), f"accepted records delivered again: {sorted(set(again) & accepted)[:10]}"
    assert set(again) | accepted == set(range(200)), f"unacknowledged records lost: {len(again)} after the kill"


def _share_describe(bootstrap, group):
    from helpers.kafka_wire import Writer, call

    body = Writer().array([group], Writer.string).boolean(False).tags()
    r = call(bootstrap, 77, 1, body)
    r.i32()

    def topic_partitions(r):
        t = {"id": r.uuid(), "name": r.string(), "partitions": r.array(Reader.i32)}
        r.tags()
        return t

    def member(r):
        m = {"member_id": r.string(), "rack": r.string(), "epoch": r.i32(), "client_id": r.string(),
             "host": r.string(), "subscribed": r.array(Reader.string)}
        m["assignment"] = r.array(topic_partitions)
        r.tags()
        r.tags()
        return m

    def described(r):
        g = {"error": r.i16(), "message": r.string(), "group_id": r.string(), "state": r.string(),
             "epoch": r.i32(), "assignment_epoch": r.i32(), "assignor": r.string(), "members": r.array(member),
             "operations": r.i32()}
        r.tags()
        return g

    from helpers.kafka_wire import Reader
    return r.array(described)[0]


def _share_offsets(bootstrap, group, topics=None):
    from helpers.kafka_wire import Reader, Writer, call

    def topic(w, t):
        w.string(t[0]).array(t[1], Writer.i32).tags()

    def group_entry(w, g):
        w.string(g).array(topics, topic).tags()

    r = call(bootstrap, 90, 0, Writer().array([group], group_entry).tags())
    r.i32()

    def partition(r):
        p = {"partition": r.i32(), "start_offset": r.i64(), "leader_epoch": r.i32(), "error": r.i16(),
             "message": r.string()}
        r.tags()
        return p

    def topic_answer(r):
        t = {"name": r.string(), "id": r.uuid(), "partitions": r.array(partition)}
        r.tags()
        return t

    def group_answer(r):
        g = {"group_id": r.string(), "topics": r.array(topic_answer), "error": r.i16(), "message": r.string()}
        r.tags()
        return g

    return r.array(group_answer)[0]


def _alter_share_offsets(bootstrap, group, topic, partition, offset):
    from helpers.kafka_wire import Reader, Writer, call

    def partition_entry(w, p):
        w.i32(p[0]).i64(p[1]).tags()

    def topic_entry(w, t):
        w.string(t).array([(partition, offset)], partition_entry).tags()

    r = call(bootstrap, 91, 0, Writer().string(group).array([topic], topic_entry).tags())
    r.i32()
    top = {"error": r.i16(), "message": r.string()}

    def partition_answer(r):
        p = {"partition": r.i32(), "error": r.i16(), "message": r.string()}
        r.tags()
        return p

    def topic_answer(r):
        t = {"name": r.string(), "id": r.uuid(), "partitions": r.array(partition_answer)}
        r.tags()
        return t

    top["responses"] = r.array(topic_answer)
    return top


def _delete_share_offsets(bootstrap, group, topic):
    from helpers.kafka_wire import Writer, call

    r = call(bootstrap, 92, 0, Writer().string(group).array([topic], lambda w, t: w.string(t).tags()).tags())
    r.i32()
    top = {"error": r.i16(), "message": r.string()}

    def topic_answer(r):
        t = {"name": r.string(), "id": r.uuid(), "error": r.i16(), "message": r.string()}
        r.tags()
        return t

    top["responses"] = r.array(topic_answer)
    return top


def _list_groups(bootstrap, types):
    """ListGroups v5 with a types filter (confluent-kafka has no share type to ask for)."""
    from helpers.kafka_wire import Writer, call

    r = call(bootstrap, 16, 5, Writer().array([], Writer.string).array(types, Writer.string).tags())
    r.i32()
    assert r.i16() == 0

    def listed(r):
        g = (r.string(), r.string(), r.string(), r.string())
        r.tags()
        return g

    return r.array(listed)


def test_share_group_admin_apis_describe_alter_and_delete(floe):
    """ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets and
    DeleteShareGroupOffsets, spoken with an encoder of our own; ListGroups lists the group as a
    share group."""
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    start_earliest(bootstrap)
    topic, group = unique_name("queue"), unique_name("workers")
    create_topic(bootstrap, topic, 2)
    produce_values(bootstrap, topic, 40)
    c = share_consumer(bootstrap, group, topic)
    got = 0
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and got < 40:
            for m in poll_records(c):
                got += 1
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        described = _share_describe(bootstrap, group)
        assert described["error"] == 0 and described["state"] == "Stable", described
        assert described["assignor"] == "simple" and len(described["members"]) == 1, described
        member = described["members"][0]
        assert member["subscribed"] == [topic]
        assert sorted(p for t in member["assignment"] for p in t["partitions"]) == [0, 1], member
        # Alter needs an empty group.
        busy = _alter_share_offsets(bootstrap, group, topic, 0, 0)
        assert busy["error"] == 68, f"NON_EMPTY_GROUP while a member is in: {busy}"
    finally:
        c.close()
    assert got == 40
    listed = _list_groups(bootstrap, ["share"])
    assert (group, "share", "share") in {(g, p, t) for g, p, _, t in listed}, listed
    assert group not in {g for g, _, _, _ in _list_groups(bootstrap, ["consumer", "classic"])}

    def offsets_at_end():
        o = _share_offsets(bootstrap, group)
        starts = {p["partition"]: p["start_offset"] for t in (o["topics"] or []) for p in t["partitions"]}
        return starts if o["error"] == 0 and len(starts) == 2 else None

    wait_until(lambda: offsets_at_end() is not None, 30, "share offsets of both partitions")
    starts = offsets_at_end()
    assert sum(starts.values()) == 40, f"every record accepted, so the starts are the log ends: {starts}"

    # The member left (its session timed out or it closed): alter moves partition 0 back.
    def alter_back():
        return _alter_share_offsets(bootstrap, group, topic, 0, 0)["error"] == 0
    wait_until(alter_back, 60, "the share group empty, so its offsets can be altered")
    assert _share_offsets(bootstrap, group, [(topic, [0])])["topics"][0]["partitions"][0]["start_offset"] == 0
    # /metrics: partition 0's records are all unacknowledged again, partition 1's none.
    def share_lag():
        series = scrape_metrics(floe)
        return {p: series.get(f'floe_share_group_lag{{group="{group}",partition="{p}",topic="{topic}"}}')
                for p in (0, 1)}
    wait_until(lambda: share_lag() == {0: starts[0], 1: 0}, 10, f"share lag {starts[0]} and 0 in /metrics")
    # `floe admin groups describe` shows the same.
    out = subprocess.run([FLOE_BIN, "admin", "groups", "--metadata", f"127.0.0.1:{floe.metadata_port}", "--json",
                          "describe", group], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert view["protocol_type"] == "share" and view["protocol"] == "simple", view
    rows = {r["partition"]: (r["committed_offset"], r["lag"]) for r in view["partitions"]}
    assert rows == {0: (0, starts[0]), 1: (starts[1], 0)}, rows
    # And the HTTP group endpoints.
    import requests
    base = f"{floe.http_url}/v3/clusters"
    cluster_id = requests.get(base, timeout=10).json()["data"][0]["cluster_id"]
    listed = requests.get(f"{base}/{cluster_id}/consumer-groups", timeout=10).json()["data"]
    assert any(g["consumer_group_id"] == group and g["type"] == "share" for g in listed), listed
    described = requests.get(f"{base}/{cluster_id}/consumer-groups/{group}", timeout=10).json()
    assert described["protocol_type"] == "share" and described["total_lag"] == starts[0], described
    assert {(l["partition_id"], l["current_offset"]) for l in described["lags"]} == {(0, 0), (1, starts[1])}
    out_of_range = _alter_share_offsets(bootstrap, group, topic, 0, 10_000)
    assert out_of_range["responses"][0]["partitions"][0]["error"] != 0, out_of_range

    c = share_consumer(bootstrap, group, topic)
    again = set()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(again) < starts[0]:
            for m in poll_records(c):
                if m.partition() == 0:
                    again.add(m.offset())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    assert again == set(range(starts[0])), "partition 0 read again from offset 0"

    def deleted():
        d = _delete_share_offsets(bootstrap, group, topic)
        return d["error"] == 0 and d["responses"][0]["error"] == 0
    wait_until(deleted, 60, "the share group's offsets of the topic deleted")
    assert not (_share_offsets(bootstrap, group)["topics"] or []), "no share partitions left"
    assert _share_describe(bootstrap, unique_name("nobody"))["error"] == 69, "GROUP_ID_NOT_FOUND"


def alter_group_configs(bootstrap: str, group: str, configs: dict, conf: dict | None = None):
    """IncrementalAlterConfigs on the GROUP resource, as `kafka-configs --entity-type groups`
    sends it: SET each value, DELETE where the value is None."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap, **(conf or {})})
    entries = [ConfigEntry(k, v if v is not None else "",
                           incremental_operation=AlterConfigOpType.SET if v is not None else AlterConfigOpType.DELETE)
               for k, v in configs.items()]
    for f in a.incremental_alter_configs([ConfigResource(ResourceType.GROUP, group,
                                                         incremental_configs=entries)]).values():
        f.result(10)


def describe_group_configs(bootstrap: str, group: str, conf: dict | None = None) -> dict:
    """DescribeConfigs of a GROUP resource: name -> (value, source)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    a = AdminClient({"bootstrap.servers": bootstrap, **(conf or {})})
    for f in a.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values():
        return {name: (e.value, getattr(e.source, "value", e.source)) for name, e in f.result(10).items()}
    raise AssertionError("no answer")


def _heartbeat_interval(bootstrap: str, group: str, topic: str, share: bool) -> int:
    """Joins `group` with ShareGroupHeartbeat v1 (`share`) or ConsumerGroupHeartbeat v0 and
    leaves it: the heartbeat interval the coordinator gave."""
    from helpers.kafka_wire import Writer, call

    member = str(uuid.uuid4())

    def heartbeat(epoch, topics):
        w = Writer().string(group).string(member).i32(epoch)
        if share:  # rack, topics
            body = w.string(None).array(topics, Writer.string).tags()
        else:  # instance, rack, rebalance timeout, topics, assignor, owned partitions
            body = (w.string(None).string(None).i32(30_000).array(topics, Writer.string).string(None)
                    .array(None, Writer.string).tags())
        r = call(bootstrap, 76 if share else 68, 1 if share else 0, body)
        r.i32()
        error, message = r.i16(), r.string()
        assert error == 0, (error, message)
        r.string()
        return r.i32(), r.i32()

    epoch, interval = heartbeat(0, [topic])
    heartbeat(-1, None)
    return interval


def test_group_configs_set_one_groups_start_lock_and_heartbeat_within_the_broker_bounds(floe):
    """Kafka's GROUP config resource: share.auto.offset.reset, share.record.lock.duration.ms and
    the heartbeat intervals set for one group apply to it alone, are described with source
    GROUP_CONFIG, and are refused outside the bounds the broker configs set."""
    from confluent_kafka import AcknowledgeType, KafkaException
    from confluent_kafka.admin import ConfigSource

    bootstrap = floe.bootstrap
    topic = unique_name("queue")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 5, "old")
    configured, plain = unique_name("configured"), unique_name("plain")

    # Kafka's bounds hold by default: 2 s is under group.share.min.record.lock.duration.ms.
    try:
        alter_group_configs(bootstrap, configured, {"share.record.lock.duration.ms": "2000"})
        raise AssertionError("a lock duration under the broker's minimum was accepted")
    except KafkaException as e:
        assert "group.share.min.record.lock.duration.ms" in str(e), e
    set_broker_configs(bootstrap, {"group.share.min.record.lock.duration.ms": "1000"})
    alter_group_configs(bootstrap, configured, {"share.auto.offset.reset": "earliest",
                                                "share.record.lock.duration.ms": "2000",
                                                "share.heartbeat.interval.ms": "7000"})
    described = describe_group_configs(bootstrap, configured)
    assert described["share.record.lock.duration.ms"] == ("2000", ConfigSource.GROUP_CONFIG.value), described
    assert described["share.auto.offset.reset"][0] == "earliest", described
    assert described["share.session.timeout.ms"] == ("45000", ConfigSource.DEFAULT_CONFIG.value), described
    assert describe_group_configs(bootstrap, plain)["share.auto.offset.reset"][0] == "latest"

    # share.auto.offset.reset: the configured group reads the records written before it
    # started; the plain one starts at the log end (Kafka's default, latest).
    def first_records(group, want):
        c = share_consumer(bootstrap, group, topic)
        got = []
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and len(got) < want:
                for m in poll_records(c):
                    got.append(m.value().decode())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
                if group == plain and not got:
                    produce_values(bootstrap, topic, 1, "new")
        finally:
            c.close()
        return got

    assert first_records(configured, 5)[:5] == [f"old-{i}" for i in range(5)]
    assert all(v.startswith("new") for v in first_records(plain, 1)), "the plain group started at the end"

    # share.record.lock.duration.ms: records a SIGKILLed consumer held come back after 2 s,
    # not the 30 s the cluster's default would take.
    produce_values(bootstrap, topic, 10, "held")
    holder = subprocess.Popen([sys.executable, HOLDER, "--bootstrap", bootstrap, "--group", configured,
                               "--topic", topic], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        held = json.loads(holder.stdout.readline())["offsets"]
        assert held, "the holder took records"
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        killed_at = time.monotonic()
        c = share_consumer(bootstrap, configured, topic)
        redelivered_after = None
        try:
            while time.monotonic() - killed_at < 20 and redelivered_after is None:
                for m in poll_records(c, 0.5):
                    if m.offset() in held and redelivered_after is None:
                        redelivered_after = time.monotonic() - killed_at
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                c.commit_sync()
        finally:
            c.close()
    finally:
        if holder.poll() is None:
            holder.kill()
    assert redelivered_after is not None and 1.0 <= redelivered_after < 15, \
        f"held records redelivered after the group's 2 s lock, not 30 s: {redelivered_after}"

    # Heartbeat intervals: the configured groups get theirs, others the broker's.
    assert _heartbeat_interval(bootstrap, configured, topic, share=True) == 7000
    assert _heartbeat_interval(bootstrap, plain, topic, share=True) == 5000
    consumers = unique_name("consumers")
    alter_group_configs(bootstrap, consumers, {"consumer.heartbeat.interval.ms": "6000"})
    assert _heartbeat_interval(bootstrap, consumers, topic, share=False) == 6000
    assert _heartbeat_interval(bootstrap, unique_name("other"), topic, share=False) == 5000

    # DELETE goes back to the broker's value; unknown names and bad values are refused.
    alter_group_configs(bootstrap, configured, {"share.heartbeat.interval.ms": None})
    assert _heartbeat_interval(bootstrap, configured, topic, share=True) == 5000
    out = subprocess.run([FLOE_BIN, "admin", "groups", "--metadata", f"127.0.0.1:{floe.metadata_port}", "--json",
                          "describe", configured], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["configs"] == {"share.auto.offset.reset": "earliest",
                                                 "share.record.lock.duration.ms": "2000"}, out.stdout
    for bad in ({"retention.ms": "1000"}, {"share.auto.offset.reset": "by_duration:-PT1H"},
                {"share.isolation.level": "serializable"}, {"consumer.session.timeout.ms": "1000"}):
        try:
            alter_group_configs(bootstrap, configured, bad)
            raise AssertionError(f"{bad} was accepted")
        except KafkaException as e:
            assert e.args[0].code() == 40, f"INVALID_CONFIG for {bad}: {e}"  # noqa: PLR2004


def test_share_auto_offset_reset_by_duration_starts_at_records_that_recent(floe):
    """share.auto.offset.reset=by_duration:PT... starts a share group at the records written in
    that window before it first read the partition, not at the log start or end."""
    from confluent_kafka import AcknowledgeType

    bootstrap = floe.bootstrap
    topic, group = unique_name("queue"), unique_name("recent")
    create_topic(bootstrap, topic, 1)
    produce_values(bootstrap, topic, 5, "old")
    time.sleep(12)
    produce_values(bootstrap, topic, 5, "recent")
    alter_group_configs(bootstrap, group, {"share.auto.offset.reset": "by_duration:PT6S"})
    c = share_consumer(bootstrap, group, topic)
    got = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < 5:
            for m in poll_records(c):
                got.append(m.value().decode())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
    finally:
        c.close()
    assert got == [f"recent-{i}" for i in range(5)], got


def _raw_share_fetch(bootstrap: str, group: str, topic: str) -> list[tuple[int, int]]:
    """Joins `group` with ShareGroupHeartbeat v1 and opens a share session with one ShareFetch
    v1 of the assigned partition: the acquired ranges it answers, merged where adjacent."""
    from helpers.kafka_wire import Reader, Writer, call

    member = str(uuid.uuid4())
    body = Writer().string(group).string(member).i32(0).string(None).array([topic], Writer.string).tags()
    r = call(bootstrap, 76, 1, body)
    r.i32()
    assert r.i16() == 0
    r.string(), r.string(), r.i32(), r.i32()
    assert r.i8() == 1, "an assignment on joining"

    def assigned(r):
        t = (r.uuid(), r.array(Reader.i32))
        r.tags()
        return t

    topic_id, partitions = r.array(assigned)[0]
    assert partitions == [0]

    def topic_entry(w, t):
        w.uuid(t).array([0], lambda w, p: w.i32(p).array([], Writer.i8).tags()).tags()

    body = (Writer().string(group).string(member).i32(0).i32(2000).i32(1).i32(1 << 20).i32(500).i32(500)
            .array([topic_id], topic_entry).array([], Writer.i8).tags())
    r = call(bootstrap, 78, 1, body)
    r.i32()
    assert r.i16() == 0, r.string()
    r.string(), r.i32()
    ranges = []

    def acquired(r):
        ranges.append((r.i64(), r.i64()))
        r.i16()
        r.tags()

    def partition(r):
        r.i32()
        assert r.i16() == 0, r.string()
        r.string(), r.i16(), r.string(), r.i32(), r.i32()
        r.tags()
        r.bytes()
        r.array(acquired)
        r.tags()

    r.array(lambda r: (r.uuid(), r.array(partition), r.tags()))
    merged = []
    for first, last in sorted(ranges):
        if merged and merged[-1][1] + 1 == first:
            merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return merged


def test_offsets_key_compaction_emptied_inside_a_batch_are_not_left_locked(floe_factory, tmp_path):
    """A compacted topic whose first batch lost records inside it: a share group reads every
    record left once, and the emptied offsets are archived with the acknowledgements, so the
    share-partition start reaches the log end at once rather than after the lock (30 s)."""
    from confluent_kafka import AcknowledgeType, Producer

    from test_storage_lifecycle import read_partition, set_broker_configs as set_brokers

    objects = tmp_path / "objects"
    floe = floe_factory.new("floe", object_store=f"file://{objects}", extra_args=["--compaction-interval-secs", "1"])
    bootstrap = floe.bootstrap
    set_brokers(bootstrap, log_segment_delete_delay_ms="0")
    topic, group = unique_name("table"), unique_name("workers")
    create_topic(bootstrap, topic, 1, config={"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})

    def produce(pairs):
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50})
        for k, v in pairs:
            p.produce(topic, key=k.encode(), value=v.encode())
        assert p.flush(30) == 0

    produce([(f"k{i}", f"v0-{i}") for i in range(20)])  # one batch, offsets 0-19
    updated = [1, 2, 5, 6, 7]
    produce([(f"k{i}", f"v1-{i}") for i in updated])  # offsets 20-24
    produce([("heartbeat", "hb")])  # offset 25: the last entry is never compacted
    survivors = [i for i in range(20) if i not in updated] + list(range(20, 26))

    def compacted():
        return [m.offset() for m in read_partition(bootstrap, topic, 0, 0, 26, timeout=5)] == survivors
    wait_until(compacted, 90, "key compaction to empty offsets 1, 2 and 5-7 inside the first batch")

    # The offsets acquired for a member are those holding records: the emptied ones are not
    # handed to the client as acquired (a client that does not acknowledge them as gaps would
    # leave them locked until the lock passes, delivery after delivery).
    raw_group = unique_name("raw")
    alter_group_configs(bootstrap, raw_group, {"share.auto.offset.reset": "earliest"})
    acquired = _raw_share_fetch(bootstrap, raw_group, topic)
    assert acquired == [(0, 0), (3, 4), (8, 25)], acquired

    alter_group_configs(bootstrap, group, {"share.auto.offset.reset": "earliest"})
    c = share_consumer(bootstrap, group, topic)
    got = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got) < len(survivors):
            for m in poll_records(c):
                got.append(m.offset())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
        assert sorted(got) == survivors, f"each record left delivered once: {got}"

        def start():
            o = _share_offsets(bootstrap, group)
            return [p["start_offset"] for t in (o["topics"] or []) for p in t["partitions"]]
        # One more round trip carries the archived gaps.
        end = time.monotonic() + 8
        while time.monotonic() < end and start() != [26]:
            poll_records(c, 0.5)
            c.commit_sync()
        assert start() == [26], f"the start offset reached the log end, no offset left locked: {start()}"
    finally:
        c.close()
