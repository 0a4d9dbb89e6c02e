"""Exactly-once: idempotent producers, transactions, read_committed and the transaction admin views.

- An idempotent producer writing through two agents while one is SIGKILLed: nothing duplicated,
  nothing lost, order kept per partition, every acknowledged record at its acknowledged offset.
- A transactional consume-transform-produce loop SIGKILLed at random points and restarted: the
  output holds every input record exactly once and the group's offsets reach the input's end.
- Aborted transactions are invisible to read_committed (confluent-kafka and kafka-python) and
  visible to read_uncommitted; ListOffsets with read_committed answers the last stable offset.
- A second producer with the same transactional.id fences the first and aborts its transaction.
- A dead producer's open transaction holds the last stable offset back until
  transaction.timeout.ms aborts it.
- `floe admin transactions list/abort`, and ListTransactions, DescribeTransactions and
  DescribeProducers through kafka-python's admin client.

The shape of `floe admin transactions list --json` is known only to `parse_transactions_json`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import FLOE_BIN, RawKafka, Rec, admin, consume_confluent, create_topic, produce, unique_name, wait_until

HELPERS = Path(__file__).parent / "helpers"
CTP_LOOP = HELPERS / "ctp_loop.py"
TXN_HOLD = HELPERS / "txn_hold.py"


# --------------------------------------------------------------------------
# helper processes


class Helper:
    """A helper script in its own process (so it can be SIGKILLed), printing JSON lines."""

    def __init__(self, node, log_dir: Path, name: str, script: Path, *args: str):
        self.name = name
        self.log = log_dir / f"{name}.stderr.log"
        aux = getattr(node, "_aux_logs", [])
        aux.append((name, self.log))
        node._aux_logs = aux
        with open(self.log, "ab") as err:
            self.p = subprocess.Popen([sys.executable, str(script), *args], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.p.stdout:
            try:
                self.events.append(json.loads(line))
            except ValueError:
                self.events.append({"unparsed": line.rstrip()})

    def alive(self) -> bool:
        return self.p.poll() is None

    def describe(self) -> str:
        rc = self.p.poll()
        state = "running" if rc is None else f"exited with {rc}"
        tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-20:]) if self.log.exists() else ""
        return f"{self.name} {state}; last events {self.events[-5:]}; stderr tail:\n{tail}"

    def wait_for(self, key: str, timeout: float) -> dict:
        """The first event carrying `key`; fails at once if the helper exits or reports an error."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in list(self.events):
                if key in ev:
                    return ev
                if "error" in ev or "fatal" in ev:
                    raise AssertionError(f"{self.name} failed before {key!r}: {self.describe()}")
            if not self.alive():
                self._reader.join(2)
                if any(key in ev for ev in self.events):
                    continue
                raise AssertionError(f"{self.name} exited before {key!r}: {self.describe()}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name}: no {key!r} event within {timeout}s; {self.describe()}")

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, sig)
            except (ProcessLookupError, PermissionError):
                self.p.send_signal(sig)
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait(5)


@pytest.fixture
def spawn(request, tmp_path):
    """Start helper processes; every one still running is SIGKILLed at teardown."""
    started: list[Helper] = []

    def start(name: str, script: Path, *args: str) -> Helper:
        h = Helper(request.node, tmp_path, f"{name}-{len(started)}", script, *args)
        started.append(h)
        return h

    try:
        yield start
    finally:
        for h in started:
            try:
                h.kill()
            except Exception:  # noqa: BLE001 - keep killing the others
                pass


# --------------------------------------------------------------------------
# `floe admin transactions`


def floe_txn_cli(metadata: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([FLOE_BIN, "admin", "transactions", "--metadata", metadata, *args],
                          capture_output=True, text=True, timeout=30)


def parse_transactions_json(text: str) -> dict[str, dict]:
    """`floe admin transactions list --json` by transactional id.

    Expected: a JSON array of {transactional_id, producer_id, producer_epoch, state ("Empty",
    "Ongoing", "CompleteCommit", "CompleteAbort"), timeout_ms, partitions: [{topic, partition}],
    start_ms}. Partitions become a set of (topic, partition)."""
    out = {}
    for row in json.loads(text):
        out[row["transactional_id"]] = {
            "producer_id": row["producer_id"],
            "producer_epoch": row["producer_epoch"],
            "state": row["state"],
            "timeout_ms": row["timeout_ms"],
            "partitions": {(p["topic"], p["partition"]) for p in row["partitions"]},
            "start_ms": row.get("start_ms"),
        }
    return out


def cli_transactions(metadata: str) -> dict[str, dict]:
    out = floe_txn_cli(metadata, "--json", "list")
    assert out.returncode == 0, f"floe admin transactions list --json failed ({out.returncode}): {out.stderr}"
    try:
        return parse_transactions_json(out.stdout)
    except (ValueError, KeyError, TypeError) as e:
        raise AssertionError(f"unexpected output of floe admin transactions list --json ({e!r}):\n{out.stdout}")


def metadata_addr(floe) -> str:
    return f"127.0.0.1:{floe.metadata_port}"


# --------------------------------------------------------------------------
# clients


FENCED_CODES = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "_FENCED")


def txn_producer(bootstrap: str, txn_id: str, timeout_ms: int = 10000):
    """A confluent-kafka transactional producer after init_transactions."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                  "transaction.timeout.ms": timeout_ms, "linger.ms": 5})
    p.init_transactions(30)
    return p


def send(p, topic: str, values: dict[int, list[bytes]]) -> dict[bytes, tuple[int, int]]:
    """Produce {partition: [value, ...]} and wait for every delivery: {value: (partition, offset)}."""
    acked, errors = {}, []

    def cb(err, msg):
        if err is not None:
            errors.append((msg.value(), err))
        else:
            acked[msg.value()] = (msg.partition(), msg.offset())

    for partition, vals in values.items():
        for v in vals:
            p.produce(topic, value=v, partition=partition, on_delivery=cb)
    remaining = p.flush(30)
    assert remaining == 0, f"{remaining} records without a delivery report after 30 s"
    assert not errors, f"delivery failed: {errors[:3]}"
    return acked


def batch(tag: str, partitions: int, n: int) -> dict[int, list[bytes]]:
    return {p: [f"{tag}-{p}-{i}".encode() for i in range(n)] for p in range(partitions)}


def end_offsets(bootstrap: str, topic: str, partitions: int, committed: bool) -> dict[int, int]:
    """ListOffsets(latest) with an isolation level (confluent AdminClient): the last stable offset
    for read_committed, the high watermark for read_uncommitted."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    a = admin(bootstrap)  # must outlive the futures
    futs = a.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                          isolation_level=level, request_timeout=15)
    return {tp.partition: f.result(20).offset for tp, f in futs.items()}


def end_offsets_kafka_python(bootstrap: str, topic: str, partitions: int, committed: bool) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level="read_committed" if committed else "read_uncommitted",
                      request_timeout_ms=30000, client_id="e2e-kafka-python")
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)], timeout_ms=20000)
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        c.close()


def read_confluent(bootstrap: str, topic: str, partitions: int, isolation: str,
                   timeout: float = 60) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition from the beginning to its end for this isolation level (the partition EOF
    librdkafka signals: the last stable offset for read_committed, the high watermark otherwise).
    Returns {partition: [(offset, value), ...]}."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique_name("e2e-read"), "enable.auto.commit": False,
        "isolation.level": isolation, "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    })
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{isolation} read of {topic} timed out; at end: {sorted(at_end)}, "
                                   f"read {({p: len(v) for p, v in out.items()})}")
            for m in c.consume(num_messages=10000, timeout=0.5):
                if m.error():
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise AssertionError(f"consumer error on {m.topic()}[{m.partition()}]: {m.error()}")
                out[m.partition()].append((m.offset(), m.value()))
        return out
    finally:
        c.close()


def read_kafka_python(bootstrap: str, topic: str, partitions: int, isolation: str,
                      timeout: float = 60) -> dict[int, list[tuple[int, bytes]]]:
    """The same with kafka-python (an independent implementation of aborted-transaction
    filtering): reads until each position reaches the end offset of this isolation level."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      isolation_level=isolation, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                      request_timeout_ms=30000, client_id="e2e-kafka-python")
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps, timeout_ms=20000)
        c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while True:
            pending = [tp for tp in tps if c.position(tp, timeout_ms=10000) < ends[tp]]
            if not pending:
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python {isolation} read of {topic} timed out; positions "
                                   f"{({tp.partition: c.position(tp) for tp in pending})}, ends {ends}")
            for tp, msgs in c.poll(timeout_ms=500, max_records=10000).items():
                out[tp.partition] += [(m.offset, m.value) for m in msgs]
    finally:
        c.close()


def values(got: dict[int, list[tuple[int, bytes]]]) -> dict[int, list[bytes]]:
    return {p: [v for _, v in msgs] for p, msgs in got.items()}


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    req = [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])]
    a = admin(bootstrap)  # must outlive the future
    result = a.list_consumer_group_offsets(req, request_timeout=10)[group].result(15)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.error is None}


# --------------------------------------------------------------------------
# 1. idempotent producer across an agent SIGKILL


@pytest.mark.timeout(240)
def test_idempotent_producer_survives_agent_and_metadata_leader_sigkills(cluster):
    """enable.idempotence through both agents; the agent leading most partitions is SIGKILLed
    mid-run and stays down. Metadata then lists only the survivor, the producer moves there and
    resends what it had in flight with the same sequences: Floe must store each record once.
    Then the metadata leader is SIGKILLed too: sequence state survives the failover."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    partitions = 6
    topic = unique_name("idem")
    both = f"{cluster.bootstrap(1)},{cluster.bootstrap(2)}"
    create_topic(cluster.bootstrap(1), topic, partitions)
    md_client = AdminClient({"bootstrap.servers": both})

    def leaders():
        md = md_client.list_topics(topic, timeout=10)
        return {p: md.topics[topic].partitions[p].leader for p in range(partitions)}

    wait_until(lambda: len(md_client.list_topics(timeout=10).brokers) == 2, 30, "both agents listed as brokers")
    lead = leaders()
    victim = max((1, 2), key=lambda a: sum(1 for b in lead.values() if b == a))
    survivor = 3 - victim
    victim_partitions = sorted(p for p, b in lead.items() if b == victim)

    sent = {p: 0 for p in range(partitions)}  # values enqueued per partition: "P:00000000", ...
    acked: dict[bytes, tuple[int, int]] = {}
    acked_max = {p: -1 for p in range(partitions)}  # highest value index acknowledged per partition
    failed: list = []
    client_errors: list = []  # librdkafka's error callback: the cause of a fatal error
    stop = threading.Event()
    errors: list[BaseException] = []

    def cb(err, msg):
        if err is not None:
            failed.append((msg.value(), str(err)))
            return
        acked[msg.value()] = (msg.partition(), msg.offset())
        idx = int(msg.value().split(b":")[1])
        acked_max[msg.partition()] = max(acked_max[msg.partition()], idx)

    def run():
        try:
            p = Producer({
                "bootstrap.servers": both, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                # long enough for the killed agent's session (10 s) to lapse and its partitions to move
                "message.timeout.ms": 90000, "request.timeout.ms": 10000,
                # librdkafka refreshes metadata on its own only every 5 min once a broker is merely
                # unreachable (its partitions still have a leader); a short interval finds the move
                "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                "error_cb": lambda e: client_errors.append(e),
            })
            n = 0
            while not stop.is_set():
                if len(p) > 1000:
                    p.poll(0.05)
                    continue
                for _ in range(20):
                    part = n % partitions
                    try:
                        p.produce(topic, value=f"{part}:{sent[part]:08d}".encode(), partition=part, on_delivery=cb)
                    except BufferError:
                        break
                    sent[part] += 1
                    n += 1
                p.poll(0.005)
            remaining = p.flush(120)
            if remaining:
                errors.append(AssertionError(f"{remaining} records without a delivery report after 120 s"))
        except BaseException as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    t = threading.Thread(target=run, name="idempotent-producer", daemon=True)
    t.start()
    try:
        wait_until(lambda: len(acked) >= 500 or errors, 60, "500 acknowledged records before the kill")
        at_kill = dict(sent)
        cluster.agents[victim].kill()
        killed_at = time.monotonic()
        print(f"killed agent {victim} (leading partitions {victim_partitions}) with {len(acked)} acknowledged")
        # Records enqueued after the kill are acknowledged in every partition, the killed agent's too.
        wait_until(lambda: errors or all(acked_max[p] >= at_kill[p] for p in range(partitions)), 90,
                   f"records enqueued after the kill acknowledged in every partition (acked {acked_max}, "
                   f"enqueued at kill {at_kill})")
        print(f"every partition written through agent {survivor} {time.monotonic() - killed_at:.1f}s after the kill")
        # Then the metadata leader: producer ids and sequences are replicated state, so the
        # producer's retries through the failover are still deduplicated and in order.
        leader = cluster.leader()
        at_failover = dict(sent)
        cluster.meta[leader].kill()
        print(f"killed metadata leader {leader} with {len(acked)} acknowledged")
        wait_until(lambda: errors or all(acked_max[p] >= at_failover[p] for p in range(partitions)), 60,
                   f"records enqueued after the metadata leader kill acknowledged (acked {acked_max}, "
                   f"enqueued at kill {at_failover})")
        time.sleep(1)
    finally:
        stop.set()
        t.join(150)
    assert not t.is_alive(), "the producer thread did not finish"
    fatal = [e for e in client_errors if e.fatal()]
    assert not errors, f"producer failed: {errors[0]!r}; fatal client errors: {fatal[:3]}"
    assert not failed, f"{len(failed)} records failed although an idempotent producer retries; first: {failed[:3]}"
    assert len(acked) == sum(sent.values()), f"{sum(sent.values())} enqueued, {len(acked)} acknowledged"
    assert all(acked_max[p] >= at_kill[p] for p in victim_partitions)

    got = consume_confluent(cluster.bootstrap(survivor), topic, partitions, timeout=120)
    for p in range(partitions):
        offsets = [m[0] for m in got[p]]
        vals = [m[2] for m in got[p]]
        expected = [f"{p}:{i:08d}".encode() for i in range(sent[p])]
        assert offsets == list(range(len(offsets))), f"partition {p}: offsets are not contiguous from 0"
        dups = sorted(v for v, c in Counter(vals).items() if c > 1)
        assert not dups, f"partition {p}: {len(dups)} values stored more than once, e.g. {dups[:5]}"
        missing = sorted(set(expected) - set(vals))
        assert not missing, f"partition {p}: {len(missing)} acknowledged values missing (gaps), e.g. {missing[:5]}"
        strangers = sorted(set(vals) - set(expected))
        assert not strangers, f"partition {p}: values never produced: {strangers[:5]}"
        if vals != expected:
            i = next(i for i, (a, b) in enumerate(zip(vals, expected)) if a != b)
            raise AssertionError(f"partition {p}: order not kept at offset {i}: read {vals[i]!r}, produced {expected[i]!r}")
        moved = [(v, acked[v], (p, off)) for off, v in zip(offsets, vals) if acked[v] != (p, off)]
        assert not moved, f"partition {p}: {len(moved)} records not at their acknowledged offset, e.g. {moved[:3]}"
    print(f"{sum(sent.values())} records, each stored once, in order, at its acknowledged offset")


# --------------------------------------------------------------------------
# 2. consume-transform-produce across SIGKILLs


@pytest.mark.timeout(240)
def test_consume_transform_produce_is_exactly_once_across_sigkills(floe, spawn):
    """helpers/ctp_loop.py reads an input topic (read_committed) and writes each record transformed
    to an output topic, one transaction per poll batch that also commits the group's offsets. It
    is SIGKILLed 3-4 times at random points and restarted; a restart's init_transactions fences
    the killed loop and aborts its open transaction (transaction.timeout.ms is only a backstop)."""
    from test_groups import no_initial_delay

    seed = int(os.environ.get("FLOE_TXN_SEED", random.randrange(1 << 30)))
    print(f"consume-transform-produce seed {seed} (set FLOE_TXN_SEED to replay)")
    rng = random.Random(seed)
    no_initial_delay(floe.bootstrap)
    partitions, n = 4, 2000
    inp, out = unique_name("ctp-in"), unique_name("ctp-out")
    group, txn_id = unique_name("ctp-g"), unique_name("ctp-txn")
    create_topic(floe.bootstrap, inp, partitions)
    create_topic(floe.bootstrap, out, partitions)
    produce(floe.bootstrap, inp, [Rec(partition=i % partitions, key=f"k{i}".encode(), value=f"in-{i:06d}".encode(),
                                      headers=None, timestamp=None) for i in range(n)])
    ends = end_offsets(floe.bootstrap, inp, partitions, committed=False)
    assert ends == {p: n // partitions for p in range(partitions)}, ends

    args = ("--bootstrap", floe.bootstrap, "--group", group, "--input", inp, "--output", out,
            "--txn-id", txn_id, "--txn-timeout-ms", "10000", "--batch", "10", "--pause-ms", "50")
    runs: list[Helper] = []

    def reported():
        """Records the loops said they committed (a kill between commit and print loses a few)."""
        return sum(ev["committed"] for h in runs for ev in list(h.events) if "committed" in ev)

    at_kills = []
    for _ in range(rng.randint(3, 4)):
        h = spawn("ctp", CTP_LOOP, *args)
        runs.append(h)
        h.wait_for("ready", 60)
        time.sleep(rng.uniform(0.5, 3.0))
        assert h.alive(), f"the loop exited by itself: {h.describe()}"
        h.kill()
        at_kills.append(reported())
    print(f"killed the loop {len(at_kills)} times with {at_kills} records reported committed")

    last = spawn("ctp", CTP_LOOP, *args)
    runs.append(last)
    deadline = time.monotonic() + 120
    committed = {}
    while committed != ends:
        assert last.alive(), f"the restarted loop exited: {last.describe()}"
        assert time.monotonic() < deadline, (
            f"the group's committed offsets {committed} did not reach the input's end {ends} within 120 s; "
            f"{reported()} records reported committed; {last.describe()}")
        time.sleep(0.5)
        try:
            committed = group_offsets(floe.bootstrap, group, inp, partitions)
        except Exception as e:  # noqa: BLE001 - retried until the deadline
            print(f"list_consumer_group_offsets: {e!r}")
    last.kill(signal.SIGTERM)

    assert any(k < n for k in at_kills), (
        f"every kill came after the whole input was processed ({at_kills}); the test proved nothing")
    aborted = [ev["aborted"] for h in runs for ev in h.events if "aborted" in ev]
    assert not aborted, f"the loops hit abortable errors (none expected without a fault of Floe): {aborted[:3]}"

    def transform(v: bytes) -> bytes:
        return b"out-" + v[len(b"in-"):]

    inputs = values(read_confluent(floe.bootstrap, inp, partitions, "read_committed"))
    expected = {p: [transform(v) for v in vs] for p, vs in inputs.items()}
    got = values(read_confluent(floe.bootstrap, out, partitions, "read_committed"))
    want_all, got_all = Counter(v for vs in expected.values() for v in vs), Counter(v for vs in got.values() for v in vs)
    dups = sorted(v for v, c in got_all.items() if c > 1)
    assert not dups, f"{len(dups)} input records were written to the output more than once, e.g. {dups[:5]}"
    missing = sorted(set(want_all) - set(got_all))
    assert not missing, f"{len(missing)} input records are missing from the output, e.g. {missing[:5]}"
    assert got_all == want_all, f"output differs from the transformed input: extra {sorted(set(got_all) - set(want_all))[:5]}"
    for p in range(partitions):
        assert got[p] == expected[p], f"output partition {p} is not the transformed input partition {p} in order"
    kp = values(read_kafka_python(floe.bootstrap, out, partitions, "read_committed"))
    assert kp == got, "kafka-python (read_committed) reads another output than confluent-kafka"
    uncommitted = sum(len(v) for v in values(read_confluent(floe.bootstrap, out, partitions, "read_uncommitted")).values())
    print(f"output: {n} committed records, {uncommitted - n} more in aborted transactions")
    assert group_offsets(floe.bootstrap, group, inp, partitions) == ends


# --------------------------------------------------------------------------
# 3. read_committed vs read_uncommitted, and the last stable offset


@pytest.mark.timeout(120)
def test_aborted_transactions_are_invisible_to_read_committed(floe):
    partitions = 2
    topic = unique_name("txn-vis")
    create_topic(floe.bootstrap, topic, partitions)
    p = txn_producer(floe.bootstrap, unique_name("vis"))
    a, b, c = batch("A", partitions, 10), batch("B", partitions, 10), batch("C", partitions, 10)
    p.begin_transaction()
    at = send(p, topic, a)
    p.commit_transaction(30)
    p.begin_transaction()
    at.update(send(p, topic, b))
    p.abort_transaction(30)
    p.begin_transaction()
    at.update(send(p, topic, c))
    p.commit_transaction(30)

    for part in range(partitions):
        offs = {tag: [at[v][1] for v in batch_[part]] for tag, batch_ in (("A", a), ("B", b), ("C", c))}
        assert offs["A"] == list(range(10)), f"partition {part}: A at {offs['A']}"
        assert offs["B"][0] == offs["A"][-1] + 2, f"partition {part}: one commit marker between A and B: {offs}"
        assert offs["C"][0] == offs["B"][-1] + 2, f"partition {part}: one abort marker between B and C: {offs}"
    hw = end_offsets(floe.bootstrap, topic, partitions, committed=False)
    lso = end_offsets(floe.bootstrap, topic, partitions, committed=True)
    assert hw == {q: 33 for q in range(partitions)}, f"high watermarks {hw}: 30 records and 3 markers per partition"
    assert lso == hw, f"no transaction is open, yet the last stable offsets {lso} differ from the high watermarks {hw}"

    rc = read_confluent(floe.bootstrap, topic, partitions, "read_committed")
    ru = read_confluent(floe.bootstrap, topic, partitions, "read_uncommitted")
    for part in range(partitions):
        assert values(rc)[part] == a[part] + c[part], (
            f"read_committed partition {part}: expected A then C, got {values(rc)[part]}")
        assert [o for o, _ in rc[part]] == [at[v][1] for v in a[part] + c[part]], "read_committed offsets"
        assert values(ru)[part] == a[part] + b[part] + c[part], (
            f"read_uncommitted partition {part}: expected A, B, C, got {values(ru)[part]}")
    kp_rc = read_kafka_python(floe.bootstrap, topic, partitions, "read_committed")
    assert kp_rc == rc, f"kafka-python read_committed disagrees with confluent-kafka: {values(kp_rc)}"
    kp_ru = read_kafka_python(floe.bootstrap, topic, partitions, "read_uncommitted")
    assert kp_ru == ru, "kafka-python read_uncommitted disagrees with confluent-kafka"

    # An open transaction holds the last stable offset at its first offset in each partition.
    d = batch("D", partitions, 5)
    p.begin_transaction()
    at.update(send(p, topic, d))
    first_d = {q: at[d[q][0]][1] for q in range(partitions)}
    assert first_d == hw, f"D starts at {first_d}, right after the previous marker {hw}"
    lso = end_offsets(floe.bootstrap, topic, partitions, committed=True)
    hw = end_offsets(floe.bootstrap, topic, partitions, committed=False)
    assert lso == first_d, f"read_committed ListOffsets {lso}: should be the open transaction's first offsets {first_d}"
    assert hw == {q: first_d[q] + 5 for q in range(partitions)}, f"read_uncommitted ListOffsets {hw}: the high watermark"
    kp_lso = end_offsets_kafka_python(floe.bootstrap, topic, partitions, committed=True)
    kp_hw = end_offsets_kafka_python(floe.bootstrap, topic, partitions, committed=False)
    assert (kp_lso, kp_hw) == (lso, hw), f"kafka-python end offsets {kp_lso} / {kp_hw} differ from {lso} / {hw}"
    rc_open = read_confluent(floe.bootstrap, topic, partitions, "read_committed")
    assert rc_open == rc, f"read_committed with D open: {values(rc_open)} (D must not be visible)"
    assert read_kafka_python(floe.bootstrap, topic, partitions, "read_committed") == rc, "kafka-python saw D while open"
    ru_open = values(read_confluent(floe.bootstrap, topic, partitions, "read_uncommitted"))
    assert ru_open == {q: a[q] + b[q] + c[q] + d[q] for q in range(partitions)}, "read_uncommitted sees D while open"

    p.commit_transaction(30)
    lso = end_offsets(floe.bootstrap, topic, partitions, committed=True)
    hw = end_offsets(floe.bootstrap, topic, partitions, committed=False)
    assert lso == hw == {q: first_d[q] + 6 for q in range(partitions)}, f"after committing D: LSO {lso}, HW {hw}"
    assert values(read_confluent(floe.bootstrap, topic, partitions, "read_committed")) == \
        {q: a[q] + c[q] + d[q] for q in range(partitions)}, "read_committed after D committed"


# --------------------------------------------------------------------------
# 4. zombie fencing


@pytest.mark.timeout(120)
def test_a_second_producer_with_the_same_transactional_id_fences_the_first(floe):
    from confluent_kafka import KafkaError, KafkaException

    topic = unique_name("zombie")
    create_topic(floe.bootstrap, topic, 1)
    txn_id = unique_name("zombie-txn")
    p1 = txn_producer(floe.bootstrap, txn_id)
    p1.begin_transaction()
    zombie = [f"zombie-{i}".encode() for i in range(5)]
    send(p1, topic, {0: zombie})
    assert end_offsets(floe.bootstrap, topic, 1, committed=True) == {0: 0}, "P1's open transaction holds the LSO at 0"

    p2 = txn_producer(floe.bootstrap, txn_id)  # fences P1 and aborts its open transaction
    lso = end_offsets(floe.bootstrap, topic, 1, committed=True)
    hw = end_offsets(floe.bootstrap, topic, 1, committed=False)
    assert lso == hw == {0: 6}, f"after P2's init_transactions P1's transaction should be aborted: LSO {lso}, HW {hw}"

    def kafka_error_of(exc):
        # librdkafka's fatal error may surface while a delivery callback runs, wrapped in a
        # SystemError whose context is the KafkaException.
        while exc is not None:
            if isinstance(exc, KafkaException):
                return exc.args[0]
            exc = exc.__cause__ or exc.__context__
        return None

    late_acks, late_errors, fenced = [], [], None
    try:
        p1.produce(topic, value=b"zombie-late", partition=0,
                   on_delivery=lambda e, m: late_errors.append(e) if e else late_acks.append(m.offset()))
        p1.flush(15)
    except Exception as e:  # noqa: BLE001 - inspected below
        fenced = kafka_error_of(e)
        assert fenced is not None, f"unexpected error from the fenced producer's write: {e!r}"
    try:
        p1.commit_transaction(15)
    except Exception as e:  # noqa: BLE001 - inspected below
        fenced = kafka_error_of(e) or fenced
        assert fenced is not None, f"unexpected error from the fenced producer's commit: {e!r}"
    assert not late_acks, f"the fenced producer's write was acknowledged at offset {late_acks}"
    assert fenced is not None, f"the fenced producer committed its transaction (delivery errors {late_errors})"
    fenced_codes = {getattr(KafkaError, name) for name in FENCED_CODES}
    assert fenced.fatal() or fenced.code() in fenced_codes, (
        f"expected a fatal or fenced error for the zombie, got {fenced} (code {fenced.name()}, fatal {fenced.fatal()})")

    good = [f"p2-{i}".encode() for i in range(5)]
    p2.begin_transaction()
    send(p2, topic, {0: good})
    p2.commit_transaction(30)

    rc = values(read_confluent(floe.bootstrap, topic, 1, "read_committed"))
    assert rc == {0: good}, f"read_committed should hold only P2's records, got {rc}"
    assert values(read_kafka_python(floe.bootstrap, topic, 1, "read_committed")) == rc, "kafka-python disagrees"
    ru = values(read_confluent(floe.bootstrap, topic, 1, "read_uncommitted"))
    assert ru == {0: zombie + good}, f"read_uncommitted: P1's aborted records then P2's, never the fenced write: {ru}"


# --------------------------------------------------------------------------
# 5. a dead producer's transaction times out


# Serial: the open transaction is checked (other writes, a committed transaction, the CLI, a
# read_committed read) within its 6 s timeout, before it is aborted.
@pytest.mark.serial
@pytest.mark.timeout(120)
def test_a_dead_producers_transaction_is_aborted_by_its_timeout(floe, spawn):
    timeout_ms = 6000
    topic = unique_name("dead")
    create_topic(floe.bootstrap, topic, 1)
    meta = metadata_addr(floe)
    before = [f"before-{i}".encode() for i in range(5)]
    produce(floe.bootstrap, topic, [Rec(0, None, v, None, None) for v in before])

    txn_id = unique_name("dead-txn")
    h = spawn("txn-hold", TXN_HOLD, "--bootstrap", floe.bootstrap, "--topic", topic, "--txn-id", txn_id,
              "--txn-timeout-ms", str(timeout_ms), "--partitions", "0", "--count", "5", "--prefix", "dead")
    dead = h.wait_for("produced", 60)["produced"]
    opened = time.monotonic()
    h.kill()
    first_dead = min(off for _, off, _ in dead)
    assert first_dead == len(before), f"the dead producer's records start at {first_dead}"

    # Later writes by others: non-transactional, and a committed transaction.
    after = [f"after-{i}".encode() for i in range(5)]
    produce(floe.bootstrap, topic, [Rec(0, None, v, None, None) for v in after])
    other = [f"other-{i}".encode() for i in range(5)]
    p = txn_producer(floe.bootstrap, unique_name("other-txn"))
    p.begin_transaction()
    send(p, topic, {0: other})
    p.commit_transaction(30)

    lso = end_offsets(floe.bootstrap, topic, 1, committed=True)
    elapsed = time.monotonic() - opened
    assert lso == {0: first_dead}, (
        f"read_committed end offset {lso} should be held at the open transaction's first offset {first_dead} "
        f"({elapsed:.1f}s after it was opened; transaction.timeout.ms is {timeout_ms})")
    listed = cli_transactions(meta)
    assert txn_id in listed, f"{txn_id} not listed by floe admin transactions list: {sorted(listed)}"
    open_view = listed[txn_id]
    assert open_view["state"] == "Ongoing", f"the dead producer's transaction should still be Ongoing: {open_view}"
    assert open_view["partitions"] == {(topic, 0)}, open_view
    assert open_view["timeout_ms"] == timeout_ms, open_view
    rc = values(read_confluent(floe.bootstrap, topic, 1, "read_committed"))
    elapsed = time.monotonic() - opened
    assert rc == {0: before}, (
        f"while the dead transaction is open read_committed must stop at it ({elapsed:.1f}s after it opened): {rc}")

    def aborted():
        return end_offsets(floe.bootstrap, topic, 1, committed=True) == end_offsets(floe.bootstrap, topic, 1, committed=False)

    wait_until(aborted, 30, f"the dead producer's transaction to be aborted after its {timeout_ms} ms timeout "
                            "(LSO reaching the high watermark)", interval=0.2)
    print(f"aborted {time.monotonic() - opened:.1f}s after the producer was killed")

    rc = values(read_confluent(floe.bootstrap, topic, 1, "read_committed"))
    assert rc == {0: before + after + other}, f"read_committed after the abort: {rc}"
    assert values(read_kafka_python(floe.bootstrap, topic, 1, "read_committed")) == rc, "kafka-python disagrees"
    ru = values(read_confluent(floe.bootstrap, topic, 1, "read_uncommitted"))
    assert ru == {0: before + [v.encode() for _, _, v in sorted(dead)] + after + other}, f"read_uncommitted: {ru}"

    now = cli_transactions(meta).get(txn_id)
    if now is not None:
        assert now["state"] != "Ongoing", f"the timed-out transaction is still listed as Ongoing: {now}"
        assert (now["producer_id"], now["producer_epoch"]) != (open_view["producer_id"], open_view["producer_epoch"]), (
            f"the timeout abort should bump the epoch (fencing the dead producer): before {open_view}, after {now}")

    # The dead producer's successor starts cleanly with the same transactional.id.
    revived = txn_producer(floe.bootstrap, txn_id, timeout_ms=timeout_ms)
    revived.begin_transaction()
    send(revived, topic, {0: [b"revived"]})
    revived.commit_transaction(30)
    assert values(read_confluent(floe.bootstrap, topic, 1, "read_committed"))[0][-1] == b"revived"


# --------------------------------------------------------------------------
# 6. admin: floe admin transactions, and the Kafka admin APIs


def open_transaction(floe, spawn, topic: str, txn_id: str, partitions: int, count: int = 3) -> dict[int, int]:
    """Leaves a transaction open (helpers/txn_hold.py, 60 s timeout) with `count` records in each
    partition; returns each partition's first offset of it."""
    h = spawn("txn-hold", TXN_HOLD, "--bootstrap", floe.bootstrap, "--topic", topic, "--txn-id", txn_id,
              "--txn-timeout-ms", "60000", "--partitions", ",".join(str(p) for p in range(partitions)),
              "--count", str(count), "--prefix", "stuck")
    produced = h.wait_for("produced", 60)["produced"]
    return {p: min(off for q, off, _ in produced if q == p) for p in range(partitions)}


@pytest.mark.timeout(120)
def test_admin_cli_lists_and_aborts_an_open_transaction(floe, spawn):
    partitions = 2
    topic = unique_name("stuck")
    create_topic(floe.bootstrap, topic, partitions)
    meta = metadata_addr(floe)
    txn_id = unique_name("stuck-txn")
    started_ms = time.time() * 1000
    first = open_transaction(floe, spawn, topic, txn_id, partitions)
    after = batch("after", partitions, 4)
    produce(floe.bootstrap, topic, [Rec(q, None, v, None, None) for q in range(partitions) for v in after[q]])

    listed = cli_transactions(meta)
    assert txn_id in listed, f"{txn_id} not listed by floe admin transactions list: {sorted(listed)}"
    t = listed[txn_id]
    assert t["state"] == "Ongoing", t
    assert t["producer_id"] >= 0 and t["producer_epoch"] >= 0, t
    assert t["partitions"] == {(topic, q) for q in range(partitions)}, t
    assert t["timeout_ms"] == 60000, t
    if t["start_ms"] is not None:
        assert started_ms - 5000 <= t["start_ms"] <= time.time() * 1000 + 5000, f"start_ms {t['start_ms']} is not now"
    assert end_offsets(floe.bootstrap, topic, partitions, committed=True) == first, "the open transaction holds the LSO"

    out = floe_txn_cli(meta, "abort", txn_id)
    assert out.returncode == 0, f"floe admin transactions abort failed ({out.returncode}): {out.stderr}"

    def lso_moved():
        return end_offsets(floe.bootstrap, topic, partitions, committed=True) == \
            end_offsets(floe.bootstrap, topic, partitions, committed=False)

    wait_until(lso_moved, 15, "the last stable offset to pass the aborted transaction", interval=0.2)
    rc = values(read_confluent(floe.bootstrap, topic, partitions, "read_committed"))
    assert rc == after, f"read_committed after the abort should hold only the later records: {rc}"
    now = cli_transactions(meta).get(txn_id)
    if now is not None:
        assert now["state"] != "Ongoing", f"still Ongoing after floe admin transactions abort: {now}"

    missing = floe_txn_cli(meta, "abort", unique_name("no-such-txn"))
    assert missing.returncode != 0, f"aborting an unknown transactional id succeeded: {missing.stdout}"


@pytest.mark.timeout(120)
def test_list_describe_transactions_and_describe_producers(floe, spawn):
    """ListTransactions, DescribeTransactions and DescribeProducers. confluent-kafka 2.16's
    AdminClient has none of them (no list_transactions, describe_transactions or
    describe_producers), so this uses kafka-python's KafkaAdminClient."""
    from confluent_kafka import Producer
    from kafka import TopicPartition as KTP
    from kafka.admin import KafkaAdminClient, TransactionState

    partitions = 2
    topic = unique_name("txn-admin")
    create_topic(floe.bootstrap, topic, partitions)
    txn_id = unique_name("described")
    first = open_transaction(floe, spawn, topic, txn_id, partitions, count=3)
    # An idempotent, non-transactional producer in partition 0 too.
    idem = Producer({"bootstrap.servers": floe.bootstrap, "enable.idempotence": True, "linger.ms": 5})
    send(idem, topic, {0: [f"idem-{i}".encode() for i in range(5)]})
    listed = cli_transactions(metadata_addr(floe))
    assert txn_id in listed, f"{txn_id} not listed by floe admin transactions list: {sorted(listed)}"
    cli = listed[txn_id]

    ka = KafkaAdminClient(bootstrap_servers=floe.bootstrap, request_timeout_ms=30000, client_id="e2e-kafka-python")
    try:
        listings = [t for ts in ka.list_transactions().values() for t in ts]
        mine = [t for t in listings if t.transactional_id == txn_id]
        assert len(mine) == 1, f"ListTransactions: {txn_id} listed {len(mine)} times in {listings}"
        assert mine[0].state == TransactionState.ONGOING, mine[0]
        assert mine[0].producer_id == cli["producer_id"], f"ListTransactions {mine[0]} vs floe admin {cli}"
        ongoing = {t.transactional_id for ts in ka.list_transactions(state_filters=["Ongoing"]).values() for t in ts}
        assert txn_id in ongoing, f"state filter Ongoing: {ongoing}"
        done = {t.transactional_id for ts in ka.list_transactions(state_filters=["CompleteCommit"]).values() for t in ts}
        assert txn_id not in done, "state filter CompleteCommit lists an Ongoing transaction"

        desc = ka.describe_transactions([txn_id])[txn_id]
        assert desc.state == TransactionState.ONGOING, desc
        assert (desc.producer_id, desc.producer_epoch) == (cli["producer_id"], cli["producer_epoch"]), (desc, cli)
        assert desc.transaction_timeout_ms == 60000, desc
        assert desc.topic_partitions == {KTP(topic, q) for q in range(partitions)}, desc
        assert abs(desc.transaction_start_time_ms - time.time() * 1000) < 60000, desc

        states = ka.describe_producers([KTP(topic, q) for q in range(partitions)])
        for q in range(partitions):
            active = {s.producer_id: s for s in states[KTP(topic, q)].active_producers}
            assert desc.producer_id in active, f"partition {q}: DescribeProducers {active} lacks {desc.producer_id}"
            s = active[desc.producer_id]
            assert s.producer_epoch == desc.producer_epoch, s
            assert s.last_sequence == 2, f"partition {q}: 3 records in the transaction, last sequence {s.last_sequence}"
            assert s.current_transaction_start_offset == first[q], (
                f"partition {q}: transaction start offset {s.current_transaction_start_offset}, expected {first[q]}")
        others = [s for s in states[KTP(topic, 0)].active_producers if s.producer_id != desc.producer_id]
        assert len(others) == 1, f"partition 0: expected the idempotent producer besides the transaction: {others}"
        assert others[0].last_sequence == 4 and others[0].current_transaction_start_offset == -1, others[0]
        assert [s.producer_id for s in states[KTP(topic, 1)].active_producers] == [desc.producer_id], \
            "partition 1 has only the transactional producer"

        unknown = unique_name("no-such-txn")
        with pytest.raises(Exception) as e:
            ka.describe_transactions([unknown])
        assert type(e.value).__name__ == "TransactionalIdNotFoundError", (
            f"describing an unknown transactional id should fail with TRANSACTIONAL_ID_NOT_FOUND: {e.value!r}")
    finally:
        ka.close()


# --------------------------------------------------------------------------
# transactions version 2 (KIP-890 part 2), with requests crafted through kafka-python's protocol
# classes: no client installed here speaks it (librdkafka 2.16 and kafka-python 3.0 do not).

INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = 47, 90


def txn_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=1, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=sequence, batch_size=1 << 20)
    now = int(time.time() * 1000)
    for offset, value in enumerate(values):
        builder.append(offset, now, None, value, [])
    return bytes(builder.build())


def txn_produce(raw: RawKafka, transactional_id: str, topic: str, partition: int, batch: bytes) -> int:
    from kafka.protocol.producer import ProduceRequest

    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=30000, topic_data=[
        data(name=topic, partition_data=[data.PartitionProduceData(index=partition, records=batch)])])
    response = raw.call(request, 12)
    return response.responses[0].partition_responses[0].error_code


def end_txn(raw: RawKafka, transactional_id: str, producer_id: int, epoch: int, commit: bool):
    from kafka.protocol.producer import EndTxnRequest

    request = EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                            committed=commit)
    answer = raw.call(request, 5)
    return answer.error_code, answer.producer_id, answer.producer_epoch
