"""Rolling upgrade and downgrade under load (issue 30).

A 3-node metadata cluster and 2 agents start from the previous version's binary
(tests/upgrade/previous-version, built by scripts/build-previous.sh and named by
FLOE_PREVIOUS_BIN). While an idempotent producer, a transactional producer and a consumer group
run, each process is stopped with SIGTERM and started again on the same data from today's binary:
the metadata followers first, then the leader, then the agents, so for a while every mix of old
and new talks to each other. Then one metadata node and one agent go back to the previous binary
(a downgrade within one version), and the load runs on.

A release that changes the metadata format (`floe --version` names it) is rolled out as
docs/OPERATIONS.md says: agents first (a new agent reads an older node's change stream, an old
agent cannot read a newer one), then the metadata nodes. Going back is then refused rather than
done: a previous-version metadata node stops with an error naming the format it cannot read, and
a previous-version agent never serves and logs why; both are checked, then go back to today's
binary.

At the end nothing acknowledged is lost: every acknowledged record is at its offset with its
value, once; every committed transaction is visible to a read_committed consumer and nothing of
an aborted one is; the group's committed offsets are within the log. No client saw a fatal or
non-retriable error. After every step the load made progress, so no step stopped the service.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

import pytest

from conftest import FLOE_BIN, Cluster, unique_name, wait_until

PREVIOUS_BIN = os.environ.get("FLOE_PREVIOUS_BIN", "")
PARTITIONS = 4
# Records each step must see acknowledged before the next one, and transactions committed.
PROGRESS_RECORDS = 300
PROGRESS_TRANSACTIONS = 3


class Load:
    """The clients that run through the upgrade, each on its own thread."""

    def __init__(self, bootstrap: str, topic: str, txn_topic: str):
        from confluent_kafka import Consumer, Producer

        self.topic, self.txn_topic = topic, txn_topic
        self.stop = threading.Event()
        self.errors: list[tuple[str, str]] = []
        self.acked: dict[tuple[int, int], bytes] = {}
        self.committed_txns: list[list[bytes]] = []
        self.aborted_txns: list[list[bytes]] = []
        self.consumed = 0
        self.consume_notes: list[str] = []

        def fatal_only(who):
            return lambda e: self.errors.append((who, str(e))) if e.fatal() else None

        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                                  "message.timeout.ms": 120000, "error_cb": fatal_only("producer")})
        self.txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("upgrade-txn"),
                             "transaction.timeout.ms": 60000, "message.timeout.ms": 60000,
                             "error_cb": fatal_only("transactional producer")})
        self.group = unique_name("upgrade-group")
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": self.group,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": True,
                                  "auto.commit.interval.ms": 500, "error_cb": fatal_only("consumer")})
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._produce, self._transact, self._consume)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(180)
        assert not any(t.is_alive() for t in self.threads), "a client thread did not finish"

    def _produce(self):
        def on_delivery(err, msg):
            if err is not None:
                self.errors.append(("delivery", str(err)))
            else:
                self.acked[(msg.partition(), msg.offset())] = msg.value()

        i = 0
        while not self.stop.is_set():
            self.producer.produce(self.topic, key=str(i % 64).encode(), value=f"v{i}".encode(),
                                  on_delivery=on_delivery)
            self.producer.poll(0)
            i += 1
            if i % 50 == 0:
                time.sleep(0.05)  # about 1,000 records a second
        if self.producer.flush(120) != 0:
            self.errors.append(("producer", "records still unacknowledged after 120 s"))

    def _transact(self):
        """Transactions of 10 records; every fifth is aborted on purpose. A retriable error is
        retried; an abortable one aborts the transaction (recorded, since the test expects none)."""
        from confluent_kafka import KafkaException

        try:
            self.txn.init_transactions(60)
        except KafkaException as e:
            self.errors.append(("init_transactions", str(e)))
            return
        n = 0
        while not self.stop.is_set():
            values = [f"t{n}-{j}".encode() for j in range(10)]
            abort = n % 5 == 4
            n += 1
            try:
                self.txn.begin_transaction()
                for j, v in enumerate(values):
                    self.txn.produce(self.txn_topic, key=str(j).encode(), value=v)
                self._retrying(self.txn.abort_transaction if abort else self.txn.commit_transaction)
                (self.aborted_txns if abort else self.committed_txns).append(values)
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(("transaction", str(err)))
                if err.fatal():
                    return
                if err.txn_requires_abort():
                    self._retrying(self.txn.abort_transaction)
                    self.aborted_txns.append(values)
            time.sleep(0.1)

    @staticmethod
    def _retrying(call):
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + 120
        while True:
            try:
                return call(30)
            except KafkaException as e:
                if not e.args[0].retriable() or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _consume(self):
        self.consumer.subscribe([self.topic])
        while not self.stop.is_set():
            msg = self.consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                self.consume_notes.append(str(msg.error()))
                if not (msg.error().retriable() or msg.error().code() < 0):
                    self.errors.append(("consume", str(msg.error())))
                continue
            self.consumed += 1
        self.consumer.close()

    def wait_progress(self, what: str, timeout: float = 90):
        """Waits until records were acknowledged, transactions committed and records consumed by
        the group since now."""
        records, txns, consumed = len(self.acked), len(self.committed_txns), self.consumed
        wait_until(lambda: len(self.acked) >= records + PROGRESS_RECORDS
                   and len(self.committed_txns) >= txns + PROGRESS_TRANSACTIONS
                   and self.consumed >= consumed + PROGRESS_RECORDS,
                   timeout, f"the load going on after {what}")
        assert not self.errors, f"client errors after {what}: {self.errors[:5]}"


def replace(cluster: Cluster, proc, binary: str, ready):
    """Stops `proc` with SIGTERM and starts it again on the same data from `binary`."""
    code = proc.terminate(60)
    assert code == 0, f"{proc.name} exited with {code} on SIGTERM:\n{proc.tail()}"
    proc.bin = binary
    proc.start()
    ready()


def metadata_caught_up(cluster: Cluster, node: int):
    """Node `node` is back: it knows the leader and has applied what the leader had applied when
    it came back."""
    leader = cluster.leader()
    target = (cluster.status(leader) or {}).get("applied_index") or 0

    def caught_up():
        s = cluster.status(node)
        return bool(s and s["leader"] and (s.get("applied_index") or 0) >= target)

    wait_until(caught_up, 60, f"metadata node {node} caught up")


def format_of(binary: str) -> int | None:
    """The metadata format `binary` writes, from `floe --version` (None if it does not say)."""
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"metadata format (\d+)", out)
    return int(found.group(1)) if found else None


def formats(cluster: Cluster) -> dict[int, int]:
    status = cluster.status(cluster.leader())
    return {int(i): v.get("format", -1) for i, v in (status or {}).get("versions", {}).items()}


def since_start(proc) -> str:
    """`proc`'s log since it was last started."""
    with open(proc.log, errors="replace") as f:
        text = f.read()
    return text[text.rfind("===== start"):]


def refused_downgrade(proc, what: str, refused):
    """Starts `proc` from the previous binary on data today's wrote: `refused()` must see it
    refuse the newer format; then `proc` runs today's binary again."""
    code = proc.terminate(60)
    assert code == 0, f"{proc.name} exited with {code} on SIGTERM:\n{proc.tail()}"
    proc.bin = PREVIOUS_BIN
    proc.start()
    wait_until(refused, 60, f"{what} refusing the newer format")
    proc.kill()
    proc.bin = FLOE_BIN
    proc.start()


def protocols(cluster: Cluster) -> dict[int, int]:
    """Each metadata node's protocol version, as `floe admin cluster` reports it (0: before Hello)."""
    status = cluster.status(cluster.leader())
    assert status and "versions" in status, f"no versions in {status}"
    return {int(i): v.get("protocol", -1) for i, v in status["versions"].items()}


def read_all(bootstrap: str, topic: str, isolation: str) -> list:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("upgrade-check"),
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": True})
    ends = {}
    for p in range(PARTITIONS):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got, done = [], {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + 120
    while len(done) < PARTITIONS and time.monotonic() < deadline:
        msg = consumer.poll(1)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                done.add(msg.partition())
            continue
        got.append((msg.partition(), msg.offset(), msg.value()))
    consumer.close()
    assert len(done) == PARTITIONS, f"{topic}: read to the end of {sorted(done)} only"
    return got


def test_rolling_upgrade_and_downgrade_under_load(tmp_path, request):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    if not (PREVIOUS_BIN and os.access(PREVIOUS_BIN, os.X_OK)):
        pytest.fail("FLOE_PREVIOUS_BIN must name the previous version's floe: "
                    "FLOE_PREVIOUS_BIN=$(bash scripts/build-previous.sh | tail -1)")
    cluster = Cluster(tmp_path, bin=PREVIOUS_BIN)
    request.node._aux_logs = [(p.name, p.log) for p in [*cluster.meta.values(), *cluster.agents.values()]]
    load = None
    try:
        cluster.start()
        bootstrap = f"{cluster.bootstrap(1)},{cluster.bootstrap(2)}"
        topic, txn_topic = unique_name("upgrade"), unique_name("upgrade-txn")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for name, f in admin.create_topics([NewTopic(topic, PARTITIONS), NewTopic(txn_topic, PARTITIONS)]).items():
            f.result(30)

        load = Load(bootstrap, topic, txn_topic)
        load.start()
        load.wait_progress("the start, on the previous version")

        # `floe admin cluster` shows each node's protocol while the upgrade runs (the previous
        # version's may be 0, before Hello).
        old = set(protocols(cluster).values())
        assert len(old) == 1, f"the previous version's nodes differ: {protocols(cluster)}"
        old = old.pop()
        new = None
        steps = []
        old_format = set(formats(cluster).values())
        assert len(old_format) == 1, f"the previous version's nodes differ: {formats(cluster)}"
        old_format = old_format.pop()
        format_changes = (format_of(FLOE_BIN) or old_format) > old_format

        def upgrade_agents():
            for a, agent in cluster.agents.items():
                replace(cluster, agent, FLOE_BIN, lambda a=a: wait_until(
                    lambda: _port_serves(cluster, a), 60, f"agent {a} serving"))
                steps.append(f"agent {a} upgraded")
                load.wait_progress(steps[-1])

        def group_config_error():
            """Error code of setting a group config (format 8 and on), 0 when it is taken."""
            from confluent_kafka import KafkaException
            from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                               ResourceType)
            entry = ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET)
            a = AdminClient({"bootstrap.servers": bootstrap})  # must outlive the future
            try:
                for f in a.incremental_alter_configs(
                        [ConfigResource(ResourceType.GROUP, "upgraded", incremental_configs=[entry])]).values():
                    f.result(10)
                return 0
            except KafkaException as e:
                return e.args[0].code()

        if format_changes:
            upgrade_agents()
            if old_format < 8:
                # The new agents do not propose what the old nodes could not read.
                assert group_config_error() == 40, "a group config taken while the nodes run format " + str(old_format)
        leader = cluster.leader()
        upgraded = set()
        for node in [*(i for i in cluster.meta if i != leader), leader]:
            replace(cluster, cluster.meta[node], FLOE_BIN, lambda node=node: metadata_caught_up(cluster, node))
            upgraded.add(node)
            steps.append(f"metadata {node} upgraded")
            load.wait_progress(steps[-1])
            now = protocols(cluster)
            new = now[node]
            assert new >= old and now == {i: new if i in upgraded else old for i in cluster.meta}, (steps[-1], now)
        if not format_changes:
            upgrade_agents()
        if format_changes and old_format < 8:
            # Every node runs the new format: the leader raises the cluster's, and its rules apply.
            wait_until(lambda: group_config_error() == 0, 60, "the cluster to take up format 8")
        if format_changes:
            new_format = format_of(FLOE_BIN)

            def applied():
                import requests
                body = requests.get(f"{cluster.http_url(1)}/v1/cluster", timeout=5).json()
                return body.get("metadata_format") == new_format
            wait_until(applied, 60, f"the cluster to apply format {new_format}")
            steps.append("the cluster applies the new format")

        follower = next(i for i in cluster.meta if i != cluster.leader())
        if format_changes:
            # Across a format change, going back is refused, not done.
            node = cluster.meta[follower]
            # It stops, naming the format of the log it cannot read.
            refused_downgrade(node, f"metadata {follower}", lambda: not node.alive() and node.p.returncode != 0
                              and re.search(r"format \d+, newer than|is format \d+, and this Floe reads up to", since_start(node)))
            metadata_caught_up(cluster, follower)
            steps.append(f"metadata {follower} refused the downgrade")
            load.wait_progress(steps[-1])
            # The agent (from the Hello's format, in releases that check it) or else the metadata
            # nodes refuse its change stream, saying why; it never serves.
            refusal = f"reads metadata formats up to {old_format} "
            before = sum(since_start(m).count(refusal) for m in cluster.meta.values())
            agent = cluster.agents[2]

            def agent_refused():
                said = "cannot read the metadata format the node writes" in since_start(agent) or sum(
                    since_start(m).count(refusal) for m in cluster.meta.values()) > before
                return said and not _port_serves(cluster, 2)
            refused_downgrade(agent, "agent 2", agent_refused)
            wait_until(lambda: _port_serves(cluster, 2), 60, "agent 2 serving again")
            steps.append("agent 2 refused the downgrade")
            load.wait_progress(steps[-1])
        else:
            # Downgrade within one version: a follower and an agent go back to the previous binary.
            replace(cluster, cluster.meta[follower], PREVIOUS_BIN, lambda: metadata_caught_up(cluster, follower))
            steps.append(f"metadata {follower} downgraded")
            load.wait_progress(steps[-1])
            assert protocols(cluster) == {i: old if i == follower else new for i in cluster.meta}, steps[-1]
            replace(cluster, cluster.agents[2], PREVIOUS_BIN, lambda: wait_until(
                lambda: _port_serves(cluster, 2), 60, "agent 2 serving"))
            steps.append("agent 2 downgraded")
            load.wait_progress(steps[-1])

        load.finish()
        assert not load.errors, f"client errors: {load.errors[:10]}"

        # Every acknowledged record at its offset, once.
        got = read_all(bootstrap, topic, "read_uncommitted")
        at = {(p, o): v for p, o, v in got}
        lost = [(k, v) for k, v in load.acked.items() if at.get(k) != v]
        assert not lost, f"{len(lost)} of {len(load.acked)} acknowledged records lost or changed: {lost[:5]}"
        values = [v for _, _, v in got]
        assert len(values) == len(set(values)), "a record was written twice"

        # Committed transactions whole, aborted ones invisible, under read_committed.
        seen = {v for _, _, v in read_all(bootstrap, txn_topic, "read_committed")}
        committed = {v for t in load.committed_txns for v in t}
        aborted = {v for t in load.aborted_txns for v in t}
        assert committed <= seen, f"{len(committed - seen)} records of committed transactions missing"
        assert not (aborted & seen), f"{len(aborted & seen)} records of aborted transactions visible"
        assert seen <= committed | aborted

        # The group's commits survived the upgrade and are within the log.
        check = Consumer({"bootstrap.servers": bootstrap, "group.id": load.group, "enable.auto.commit": False})
        commits = check.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        ends = {p: check.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                for p in range(PARTITIONS)}
        check.close()
        assert load.consumed > 0, f"the group consumed nothing: {load.consume_notes[:10]}"
        assert any(c.offset > 0 for c in commits), f"the group committed nothing ({load.consumed} consumed): {commits}"
        assert all(c.offset <= ends[c.partition] for c in commits), f"commits {commits} past the ends {ends}"
        print(f"upgrade: {len(load.acked)} records acknowledged, {len(load.committed_txns)} transactions "
              f"committed and {len(load.aborted_txns)} aborted, {load.consumed} consumed; steps: {steps}")
        assert load.consumed > 0
    finally:
        if load is not None:
            load.stop.set()
        cluster.stop()


def _port_serves(cluster: Cluster, a: int) -> bool:
    import requests

    try:
        return requests.get(f"{cluster.http_url(a)}/v1/cluster", timeout=5).status_code == 200
    except requests.RequestException:
        return False
