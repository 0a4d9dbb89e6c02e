"""Consumer groups with real clients: assignment, failover of a SIGKILLed member, committed
offsets, static membership, kafka-python groups and the admin APIs."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import admin, create_topic, produce, Rec, unique_name, wait_until

HELPER = os.path.join(os.path.dirname(__file__), "helpers", "group_consumer.py")


def no_initial_delay(bootstrap):
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigEntry, AlterConfigOpType, ResourceType
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("group.initial.rebalance.delay.ms", "0", incremental_operation=AlterConfigOpType.SET)])
    for f in a.incremental_alter_configs([res]).values():
        f.result(10)


class Member:
    """A group_consumer.py process and the events it printed."""

    def __init__(self, bootstrap, group, topic, *extra):
        self.p = subprocess.Popen([sys.executable, HELPER, "--bootstrap", bootstrap, "--group", group,
                                   "--topic", topic, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        self.assigned, self.revoked, self.records = [], [], []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            ev = json.loads(line)
            if "assigned" in ev:
                self.assigned.append(ev["assigned"])
            elif "revoked" in ev:
                self.revoked.append(ev["revoked"])
            else:
                self.records.append(tuple(ev["record"]))

    def current(self):
        return self.assigned[-1] if self.assigned else None

    def kill(self, sig=signal.SIGKILL):
        self.p.send_signal(sig)
        self.p.wait(30)


def records(n, partitions, tag):
    return [Rec(partition=i % partitions, key=None, value=f"{tag}-{i}".encode(), headers=None, timestamp=None)
            for i in range(n)]


@pytest.mark.timeout(180)
def test_three_members_share_partitions_and_a_killed_ones_move(floe):
    no_initial_delay(floe.bootstrap)
    topic, group = unique_name("grp"), unique_name("g")
    create_topic(floe.bootstrap, topic, 12)
    members = [Member(floe.bootstrap, group, topic, "--commit") for _ in range(3)]
    try:
        def settled():
            cur = [m.current() for m in members]
            return all(c is not None for c in cur) and sorted(sum(cur, [])) == list(range(12))
        wait_until(settled, 60, "an assignment of all 12 partitions over 3 members")
        sizes = sorted(len(m.current()) for m in members)
        assert sizes == [4, 4, 4], f"uneven assignment {[m.current() for m in members]}"

        sent = records(600, 12, "a")
        produce(floe.bootstrap, topic, sent)
        wait_until(lambda: len({r[2] for m in members for r in m.records}) == 600, 60, "600 records consumed")

        members[2].kill()
        survivors = members[:2]
        wait_until(lambda: sorted(sum((m.current() or [] for m in survivors), [])) == list(range(12)), 60,
                   "the killed member's partitions moved to the survivors")
        more = records(300, 12, "b")
        produce(floe.bootstrap, topic, more)
        wait_until(lambda: len({r[2] for m in survivors for r in m.records if r[2].startswith("b-")}) == 300, 60,
                   "records after the kill consumed")
    finally:
        for m in members:
            if m.p.poll() is None:
                m.kill(signal.SIGTERM)

    # Every record was consumed at least once, and a restarted member resumes after the commits.
    seen = {r[2] for m in members for r in m.records}
    assert seen >= {r.value.decode() for r in sent + more}
    again = Member(floe.bootstrap, group, topic)
    try:
        wait_until(lambda: again.current() == list(range(12)), 60, "the restarted member owns everything")
        # A record produced now is read after anything the member would wrongly re-read first.
        produce(floe.bootstrap, topic, [Rec(partition=p, key=None, value=f"sentinel-{p}".encode(), headers=None,
                                            timestamp=None) for p in range(12)])
        wait_until(lambda: len(again.records) >= 12, 60, "the sentinels consumed")
        assert sorted(r[2] for r in again.records) == sorted(f"sentinel-{p}" for p in range(12)), \
            f"committed records consumed again: {again.records[:5]}"
    finally:
        again.kill(signal.SIGTERM)


@pytest.mark.timeout(120)
def test_a_static_member_restarts_without_a_rebalance(floe):
    no_initial_delay(floe.bootstrap)
    topic, group = unique_name("static"), unique_name("g")
    create_topic(floe.bootstrap, topic, 4)
    a = Member(floe.bootstrap, group, topic, "--instance-id", "a", "--session-ms", "20000")
    b = Member(floe.bootstrap, group, topic, "--instance-id", "b", "--session-ms", "20000")
    try:
        wait_until(lambda: a.current() and b.current() and sorted(a.current() + b.current()) == [0, 1, 2, 3], 60,
                   "two static members share the partitions")
        before = (list(a.assigned), b.current())
        b.kill()
        b2 = Member(floe.bootstrap, group, topic, "--instance-id", "b", "--session-ms", "20000")
        wait_until(lambda: b2.current() is not None, 30, "the restarted static member is assigned")
        assert b2.current() == before[1], "the static member got a different assignment"
        time.sleep(2)
        assert a.assigned == before[0], "the other member saw a rebalance"
        b2.kill(signal.SIGTERM)
    finally:
        for m in (a, b):
            if m.p.poll() is None:
                m.kill(signal.SIGTERM)


@pytest.mark.timeout(120)
def test_kafka_python_group_consumes_everything_once_with_commits(floe):
    from kafka import KafkaConsumer
    no_initial_delay(floe.bootstrap)
    topic, group = unique_name("kp"), unique_name("g")
    create_topic(floe.bootstrap, topic, 4)
    produce(floe.bootstrap, topic, records(400, 4, "kp"))
    got, stop = queue.Queue(), threading.Event()

    def run():
        c = KafkaConsumer(topic, bootstrap_servers=floe.bootstrap, group_id=group, auto_offset_reset="earliest",
                          enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=500)
        while not stop.is_set():
            for tp, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    got.put(m.value)
                c.commit()
        c.close()

    threads = [threading.Thread(target=run, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    values = []
    deadline = time.time() + 60
    while len(values) < 400 and time.time() < deadline:
        try:
            values.append(got.get(timeout=1))
        except queue.Empty:
            pass
    stop.set()
    for t in threads:
        t.join(30)
    assert len(values) == 400 and len(set(values)) == 400, f"{len(values)} values, {len(set(values))} distinct"

    from confluent_kafka import TopicPartition
    a = admin(floe.bootstrap)
    offsets = a.list_consumer_group_offsets([__import__("confluent_kafka").ConsumerGroupTopicPartitions(group)])
    committed = {tp.partition: tp.offset for tp in offsets[group].result(10).topic_partitions}
    assert committed == {0: 100, 1: 100, 2: 100, 3: 100}, committed
    assert TopicPartition


@pytest.mark.timeout(60)
def test_group_admin_apis(floe):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition, Consumer
    topic, group = unique_name("adm"), unique_name("g")
    create_topic(floe.bootstrap, topic, 2)
    # An assign-mode consumer commits with generation -1.
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 5, "meta-0", leader_epoch=3), TopicPartition(topic, 1, 7)],
             asynchronous=False)
    got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    assert [(tp.partition, tp.offset, tp.metadata, tp.leader_epoch) for tp in got] == \
        [(0, 5, "meta-0", 3), (1, 7, None, None)], "offset, metadata and leader epoch round-trip"
    c.close()
    a = admin(floe.bootstrap)
    listed = a.list_consumer_groups().result(10)
    assert group in [g.group_id for g in listed.valid]
    desc = a.describe_consumer_groups([group])[group].result(10)
    assert str(desc.state).endswith("EMPTY"), desc.state
    a.delete_consumer_groups([group])[group].result(10)
    c2 = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group})
    after = c2.committed([TopicPartition(topic, 0)], timeout=10)
    assert after[0].offset < 0, "offsets survived the group's deletion"
    c2.close()
    assert ConsumerGroupTopicPartitions


@pytest.mark.timeout(120)
def test_cooperative_sticky_rebalance_keeps_unaffected_partitions(floe):
    no_initial_delay(floe.bootstrap)
    topic, group = unique_name("coop"), unique_name("g")
    create_topic(floe.bootstrap, topic, 6)
    coop = ("--strategy", "cooperative-sticky")
    a, b = Member(floe.bootstrap, group, topic, *coop), Member(floe.bootstrap, group, topic, *coop)
    members = [a, b]
    try:
        wait_until(lambda: a.current() and b.current() and sorted(a.current() + b.current()) == list(range(6)), 60,
                   "two members share 6 partitions")
        first = {id(m): set(m.current()) for m in members}
        revokes_before = {id(m): len(m.revoked) for m in members}
        c = Member(floe.bootstrap, group, topic, *coop)
        members.append(c)

        def spread():
            cur = [m.current() or [] for m in members]
            return sorted(sum(cur, [])) == list(range(6)) and sorted(len(x) for x in cur) == [2, 2, 2]
        wait_until(spread, 60, "three members with 2 partitions each")
        for m in (a, b):
            kept = set(m.current())
            assert kept <= first[id(m)], "a member was given partitions that moved needlessly"
            revoked = set(sum(m.revoked[revokes_before[id(m)]:], []))
            assert revoked == first[id(m)] - kept, f"revoked {revoked}, but only {first[id(m)] - kept} moved"
    finally:
        for m in members:
            if m.p.poll() is None:
                m.kill(signal.SIGTERM)


@pytest.mark.timeout(60)
def test_lag_is_exported_and_described(floe):
    import re
    import urllib.request
    from confluent_kafka import Consumer, TopicPartition
    from conftest import FLOE_BIN
    topic, group = unique_name("lag"), unique_name("g")
    create_topic(floe.bootstrap, topic, 2)
    produce(floe.bootstrap, topic, records(20, 2, "lag"))  # 10 records per partition
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 10)], asynchronous=False)
    c.close()

    body = urllib.request.urlopen(f"http://127.0.0.1:{floe.http_port}/metrics", timeout=10).read().decode()
    lag = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        rf'floe_consumer_group_lag{{group="{group}",partition="(\d+)",topic="{topic}"}} (\d+)', body)}
    assert lag == {0: 7, 1: 0}, f"lag series: {lag}"

    out = subprocess.run([FLOE_BIN, "admin", "groups", "--metadata", f"127.0.0.1:{floe.metadata_port}", "--json",
                          "describe", group], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    view = json.loads(out.stdout)
    assert view["state"] == "Empty"
    rows = {(r["topic"], r["partition"]): (r["committed_offset"], r["log_end_offset"], r["lag"])
            for r in view["partitions"]}
    assert rows == {(topic, 0): (3, 10, 7), (topic, 1): (10, 10, 0)}, rows
    listed = subprocess.run([FLOE_BIN, "admin", "groups", "--metadata", f"127.0.0.1:{floe.metadata_port}", "list"],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0 and group in listed.stdout, listed.stdout + listed.stderr


def broker_configs(bootstrap, **configs):
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigEntry, AlterConfigOpType, ResourceType
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(k.replace("_", "."), str(v), incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()])
    for f in a.incremental_alter_configs([res]).values():
        f.result(10)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_kip848_consumer_protocol_join_assign_leave(floe, assignor):
    """group.protocol=consumer: the coordinator assigns (uniform or range); members join, split the
    partitions without overlap, consume and commit; when one leaves the other takes everything."""
    broker_configs(floe.bootstrap, **{"group.consumer.heartbeat.interval.ms": 300})
    topic, group = unique_name("k848"), unique_name("g")
    create_topic(floe.bootstrap, topic, 6)
    args = ("--protocol", "consumer", "--remote-assignor", assignor, "--commit")
    a = Member(floe.bootstrap, group, topic, *args)
    b = Member(floe.bootstrap, group, topic, *args)
    try:
        def split():
            ca, cb = a.current() or [], b.current() or []
            return len(ca) == 3 and len(cb) == 3 and sorted(ca + cb) == list(range(6))
        wait_until(split, 60, f"two members with 3 partitions each ({assignor})")
        if assignor == "range":
            assert sorted([a.current(), b.current()]) == [[0, 1, 2], [3, 4, 5]], "range gives contiguous ranges"
        produce(floe.bootstrap, topic, records(300, 6, "k848"))
        wait_until(lambda: len({r[2] for m in (a, b) for r in m.records}) == 300, 60, "300 records consumed")
        seen = [r[:2] for m in (a, b) for r in m.records]
        assert len(seen) == len(set(seen)), "a record was consumed by both members"

        a_client = admin(floe.bootstrap)
        desc = a_client.describe_consumer_groups([group])[group].result(10)
        assert len(desc.members) == 2 and str(desc.type).endswith("CONSUMER"), (desc.members, desc.type)
        owned = sorted(p.partition for m in desc.members for p in m.assignment.topic_partitions)
        assert owned == list(range(6)), f"described assignment {owned}"

        b.kill(signal.SIGTERM)  # a clean close leaves the group (member epoch -1)
        wait_until(lambda: a.current() == list(range(6)), 60, "the remaining member owns all partitions")
        produce(floe.bootstrap, topic, records(60, 6, "after"))
        wait_until(lambda: len({r[2] for r in a.records if r[2].startswith("after-")}) == 60, 60,
                   "records after the leave consumed")
    finally:
        for m in (a, b):
            if m.p.poll() is None:
                m.kill(signal.SIGTERM)


@pytest.mark.timeout(120)
def test_kip848_static_member_restart_keeps_its_partitions(floe):
    broker_configs(floe.bootstrap, **{"group.consumer.heartbeat.interval.ms": 300})
    topic, group = unique_name("k848s"), unique_name("g")
    create_topic(floe.bootstrap, topic, 4)
    args = ("--protocol", "consumer")
    a = Member(floe.bootstrap, group, topic, *args, "--instance-id", "a")
    b = Member(floe.bootstrap, group, topic, *args, "--instance-id", "b")
    try:
        wait_until(lambda: len(a.current() or []) == 2 and len(b.current() or []) == 2, 60, "2 + 2 partitions")
        a_before, b_before = a.current(), b.current()
        a_events = len(a.assigned) + len(a.revoked)
        b.kill(signal.SIGTERM)  # a static member's clean close keeps its place (epoch -2)
        # Five heartbeat intervals: had b left for good, a would have been handed its partitions.
        time.sleep(1.5)
        b2 = Member(floe.bootstrap, group, topic, *args, "--instance-id", "b")
        wait_until(lambda: b2.current() is not None, 30, "the restarted static member is assigned")
        assert b2.current() == b_before, f"the static member got {b2.current()}, had {b_before}"
        assert a.current() == a_before and len(a.assigned) + len(a.revoked) == a_events, \
            "the other member's assignment moved"
        b2.kill(signal.SIGTERM)
    finally:
        for m in (a, b):
            if m.p.poll() is None:
                m.kill(signal.SIGTERM)


def pipelined_commits(bootstrap, topic, group, n, on_consumed=None, timeout=120, pause=0.0):
    """Consumes `n` records of partition 0 as a group member and commits each one asynchronously
    right after it is read (librdkafka pipelines these on the coordinator connection). Returns
    the offsets the commit callbacks reported committed, the failures they reported, and what
    `committed()` answers once the last commit was acknowledged. `pause` spreads the commits out
    in time (seconds after each)."""
    from confluent_kafka import Consumer, TopicPartition
    acked, failed = [], []

    def on_commit(err, partitions):
        if err is not None:
            failed.append(str(err))
            return
        for tp in partitions:
            (failed.append(str(tp.error)) if tp.error else acked.append(tp.offset))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "on_commit": on_commit, "session.timeout.ms": 30000,
                  "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500})
    try:
        c.subscribe([topic])
        consumed, deadline = 0, time.monotonic() + timeout
        while consumed < n and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None or msg.error():
                continue
            c.commit(message=msg, asynchronous=True)
            consumed += 1
            if pause:
                time.sleep(pause)
            if on_consumed:
                on_consumed(consumed)
        assert consumed == n, f"consumed {consumed} of {n}"
        # A commit may fail while the coordinator moves (the caller is told); as an application
        # committing on shutdown would, the last offset is committed again until it is taken.
        settle = time.monotonic() + 5
        while n not in acked and time.monotonic() < deadline:
            c.poll(0.1)
            if time.monotonic() > settle:
                c.commit(offsets=[TopicPartition(topic, 0, n)], asynchronous=True)
                settle = time.monotonic() + 5
        assert n in acked, f"the last commit ({n}) was never acknowledged; failures {failed[:5]}"
        got = c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()
    return acked, failed, got


@pytest.mark.timeout(180)
def test_pipelined_async_commits_leave_the_last_offset_committed(floe):
    """Issue 32, finding 2: 1,000 asynchronous commits of increasing offsets, pipelined on one
    connection, must be applied in the order they were sent: `committed()` then returns the last
    one, for this member and for another client."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from kafka import KafkaAdminClient
    no_initial_delay(floe.bootstrap)
    topic, group, n = unique_name("acommit"), unique_name("g"), 1000
    create_topic(floe.bootstrap, topic, 1)
    produce(floe.bootstrap, topic, records(n, 1, "ac"))
    acked, failed, got = pipelined_commits(floe.bootstrap, topic, group, n)
    assert not failed, f"commits failed: {failed[:5]}"
    assert acked == sorted(acked), f"commits were acknowledged out of order: {acked[:20]}..."
    assert got == n, f"committed() answered {got} after the commit of {n} was acknowledged"
    a = admin(floe.bootstrap)
    listed = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    assert [tp.offset for tp in listed[group].result(10).topic_partitions] == [n]
    kp = KafkaAdminClient(bootstrap_servers=floe.bootstrap)
    try:
        offsets = kp.list_group_offsets(group)[group]
    finally:
        kp.close()
    assert {tp.partition: meta.offset for tp, meta in offsets.items()} == {0: n}, offsets


def applied_index(floe) -> int:
    from conftest import FLOE_BIN
    out = subprocess.run([FLOE_BIN, "admin", "cluster", "--metadata", f"127.0.0.1:{floe.metadata_port}"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["applied_index"]


@pytest.mark.timeout(180)
def test_pipelined_commits_are_merged_into_few_metadata_proposals(floe):
    """A member committing after every record must not fall behind: one metadata proposal per
    OffsetCommit let a connection's queue grow to its in-flight limit, and commits the client had
    sent long before were read after those it sent again on its next connection, moving the
    offset back (seen in the fault harness). Commits queued behind a proposal join the next."""
    no_initial_delay(floe.bootstrap)
    topic, group, n = unique_name("merge"), unique_name("g"), 2000
    create_topic(floe.bootstrap, topic, 1)
    produce(floe.bootstrap, topic, records(n, 1, "mc"))
    before = applied_index(floe)
    acked, failed, got = pipelined_commits(floe.bootstrap, topic, group, n)
    entries = applied_index(floe) - before
    assert not failed, f"commits failed: {failed[:5]}"
    assert acked == sorted(acked) and got == n, (acked[-5:], got)
    assert entries < n // 2, f"{n} pipelined commits took {entries} metadata log entries"


def close_static_members(floe, group):
    """Two static members (group.instance.id, 5 s sessions) of `group` share a topic's partitions,
    then close, which for static members sends no LeaveGroup."""
    from confluent_kafka import Consumer
    # Kafka's default minimum session (6 s) would refuse a 5 s one with INVALID_SESSION_TIMEOUT.
    broker_configs(floe.bootstrap, **{"group.min.session.timeout.ms": 1000, "group.initial.rebalance.delay.ms": 0})
    topic = unique_name("static-close")
    create_topic(floe.bootstrap, topic, 2)
    consumers = []
    for instance in ("a", "b"):
        c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "group.instance.id": instance,
                      "session.timeout.ms": 5000, "heartbeat.interval.ms": 500, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        consumers.append(c)

    def shared():
        for c in consumers:
            c.poll(0.1)
        return sorted(p.partition for c in consumers for p in c.assignment()) == [0, 1]
    wait_until(shared, 60, "two static members sharing the partitions")
    a = admin(floe.bootstrap)  # kept: a dropped client never answers its futures
    desc = a.describe_consumer_groups([group])[group].result(10)
    assert len(desc.members) == 2, desc.members
    for c in consumers:
        c.close()


@pytest.mark.timeout(120)
def test_closed_static_members_expire_at_their_session_timeout(floe):
    """Soon after static members with 5 s sessions closed, their sessions have ended them and
    DeleteGroups succeeds, as on Kafka. A session runs from the heartbeat the coordinator last
    handled, which a loaded machine (tests run side by side) may handle a little late: the
    delete is tried from 6 s and must succeed by 10 s."""
    from confluent_kafka import KafkaError, KafkaException
    group = unique_name("g")
    close_static_members(floe, group)
    closed = time.monotonic()
    time.sleep(6)
    a = admin(floe.bootstrap)
    while True:
        try:
            a.delete_consumer_groups([group])[group].result(10)
            return
        except KafkaException as e:
            if e.args[0].code() != KafkaError.NON_EMPTY_GROUP or time.monotonic() - closed > 10:
                raise
        time.sleep(0.5)


@pytest.mark.timeout(120)
def test_static_members_closed_across_a_restart_expire(floe):
    """A restarted node runs the sessions of the stored groups' members: static members that
    closed while it was down end a session after it is back, and the group can be deleted. It
    used to take a stored group live only when a request named it, so DeleteGroups answered
    NON_EMPTY_GROUP for good."""
    group = unique_name("g")
    close_static_members(floe, group)
    floe.restart()
    a = admin(floe.bootstrap)

    def deleted():
        a.delete_consumer_groups([group])[group].result(10)
        return True
    # A 5 s session from the new leader's start, with room for the first requests after a restart.
    wait_until(deleted, 15, "the group deletable a session after the restart", interval=0.5)
