"""Tenant isolation beyond names: producer ids and authenticated sessions.

- Producer ids are allocated cluster-wide, one after another, so a tenant can guess the ids of
  another tenant's producers. A producer id belongs to the tenant whose InitProducerId created
  it: a batch naming another tenant's producer id is refused with UNKNOWN_PRODUCER_ID or
  INVALID_PRODUCER_ID_MAPPING, and an InitProducerId bump (KIP-360) naming one is not granted,
  so neither can fence another tenant's idempotent producer. Within a tenant Kafka's rules hold.
- Deleting a user or a tenant ends its sessions: its open Kafka connections stop being served
  within a few seconds, its API keys get 401, and a tenant created again under the same name
  is not reachable from a connection authenticated in the deleted one.
- Another tenant's topic id is answered exactly as an id no topic has (UNKNOWN_TOPIC_ID, the id
  echoed) by every API that takes topic ids, so a leaked id cannot be confirmed as someone's.

The attacker's requests are encoded by hand on raw sockets: no client library would send a
batch for a producer id it was not given, and a raw socket cannot reconnect (and so
re-authenticate) behind the test's back.
"""

from __future__ import annotations

import json
import struct
import time
import uuid

import pytest
import requests

from conftest import wait_until
from test_auth import PASSWORD, admin_tenants
from test_bad_input import crc32c, uvarint, varint
from test_hardening import Conn, Reader, kbytes, kstring, scram_login

USERS = {"acme": "alice", "globex": "bob"}
API_PRODUCE, API_METADATA, API_INIT_PRODUCER_ID = 0, 3, 22
INVALID_PRODUCER_ID_MAPPING, UNKNOWN_PRODUCER_ID = 49, 59
PRODUCER_ID_REFUSALS = (INVALID_PRODUCER_ID_MAPPING, UNKNOWN_PRODUCER_ID)
FORGED_EPOCH = 32000
# Ids are handed out from 0 (or 1) upwards: the victim's is well inside this range.
TARGET_IDS = range(0, 21)


# --------------------------------------------------------------------------
# wire encoding: varints, CRC-32C, RecordBatch v2

# A wrong checksum would make every batch CORRUPT_MESSAGE, which the assertions on refused
# batches must not mistake for the server refusing a producer id.
assert crc32c(b"123456789") == 0xE3069283


def record_batch(producer_id: int, producer_epoch: int, base_sequence: int, value: bytes) -> bytes:
    """One idempotent (non-transactional) batch of one record with a null key."""
    now = int(time.time() * 1000)
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(len(value)) + value + varint(0)
    record = varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, 0, now, now, producer_id, producer_epoch, base_sequence, 1) + record
    after_length = struct.pack(">ibI", -1, 2, crc32c(after_crc)) + after_crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def read_uvarint(r: Reader) -> int:
    shift = value = 0
    while True:
        byte = r.data[r.at]
        r.at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7


def read_i8(r: Reader) -> int:
    (v,) = struct.unpack_from(">b", r.data, r.at)
    r.at += 1
    return v


# --------------------------------------------------------------------------
# requests on a raw connection


def plain_login(conn: Conn, user: str, password: str = PASSWORD):
    assert conn.sasl_handshake("PLAIN") == 0
    code, message, _ = conn.sasl_authenticate(f"\0{user}\0{password}".encode())
    assert code == 0, f"PLAIN as {user}: {code} {message}"


def produce(conn: Conn, topic: str, batch: bytes) -> int:
    """Produce v7 (non-flexible) with acks=all; the partition's error code."""
    body = (kstring(None) + struct.pack(">hi", -1, 10_000) + struct.pack(">i", 1) + kstring(topic)
            + struct.pack(">ii", 1, 0) + kbytes(batch))
    r = conn.call(API_PRODUCE, 7, body)
    assert r.i32() == 1
    assert r.string() == topic
    assert r.i32() == 1
    assert r.i32() == 0
    return r.i16()


def init_producer_id(conn: Conn, producer_id: int, producer_epoch: int) -> tuple[int, int, int]:
    """InitProducerId v4 without a transactional id: (error code, producer id, epoch). With an
    id and epoch it is the KIP-360 bump an idempotent producer asks for to reset its sequences.
    v2+ is flexible: request header v2 and response header v1 carry tagged fields."""
    conn.correlation_id += 1
    body = b"\x00" + struct.pack(">iqh", 60_000, producer_id, producer_epoch) + b"\x00"
    payload = (struct.pack(">hhi", API_INIT_PRODUCER_ID, 4, conn.correlation_id) + kstring("e2e-isolation")
               + b"\x00" + body)
    conn.sock.sendall(struct.pack(">i", len(payload)) + payload)
    r = conn.response(conn.correlation_id)
    read_uvarint(r)  # response header tagged fields
    r.i32()  # throttle_time_ms
    code = r.i16()
    return code, r.i64(), r.i16()


def metadata(conn: Conn, topic: str) -> dict[str, int]:
    """Metadata v4 for one topic, without auto-creation: {topic name: error code}."""
    r = conn.call(API_METADATA, 4, struct.pack(">i", 1) + kstring(topic) + b"\x00")
    r.i32()  # throttle_time_ms
    for _ in range(r.i32()):
        r.i32(), r.string(), r.i32(), r.string()
    r.string()  # cluster_id
    r.i32()  # controller_id
    topics = {}
    for _ in range(r.i32()):
        code, name = r.i16(), r.string()
        read_i8(r)  # is_internal
        for _ in range(r.i32()):
            r.i16(), r.i32(), r.i32()
            for _ in range(r.i32()):
                r.i32()
            for _ in range(r.i32()):
                r.i32()
        topics[name] = code
    return topics


def serves(conn: Conn, topic: str) -> bool:
    """Whether `conn` still answers a Metadata request naming `topic` with the topic, no error.
    A closed, reset or silent connection, or an error answer, is a refusal."""
    try:
        return metadata(conn, topic).get(topic) == 0
    except (OSError, ConnectionError, AssertionError, struct.error, IndexError):
        return False


# --------------------------------------------------------------------------
# setup


@pytest.fixture
def secured(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-isolation", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN", "--http-require-api-key"])
    for tenant, user in USERS.items():
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    return floe


def client_conf(floe, user: str) -> dict:
    return {"bootstrap.servers": floe.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": PASSWORD}


def create_topic(floe, user: str, topic: str):
    from confluent_kafka.admin import AdminClient, NewTopic

    a = AdminClient(client_conf(floe, user))  # must outlive the future
    a.create_topics([NewTopic(topic, 1)])[topic].result(30)
    wait_until(lambda: topic in a.list_topics(timeout=5).topics, 15, f"{topic} visible to {user}")


def login(floe, user: str, mechanism: str = "SCRAM-SHA-256") -> Conn:
    conn = Conn(floe.kafka_port)
    assert scram_login(conn, user, PASSWORD, mechanism) == (0, None)
    return conn


class Victim:
    """globex's idempotent confluent-kafka producer (acks=all) on its topic `ledger`."""

    def __init__(self, floe):
        from confluent_kafka import Producer

        self.floe = floe
        self.fatal = []
        self.sent: list[bytes] = []
        self.producer = Producer({**client_conf(floe, "bob"), "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 15_000,
                                  "error_cb": lambda e: e.fatal() and self.fatal.append(e)})

    def send(self, prefix: str, count: int = 20) -> list:
        """Produces `count` records; what went wrong (failed deliveries, fatal errors)."""
        from confluent_kafka import KafkaException

        failures = []
        for i in range(count):
            value = f"{prefix}-{i}".encode()
            try:
                self.producer.produce("ledger", value=value, partition=0,
                                      on_delivery=lambda err, msg: err is not None and failures.append(err))
                self.sent.append(value)
            except KafkaException as e:
                failures.append(e.args[0])
        left = self.producer.flush(25)
        if left:
            failures.append(f"{left} records undelivered after 25 s")
        return failures + self.fatal

    def stored(self) -> list[bytes]:
        """What globex reads back from `ledger`, from the start."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({**client_conf(self.floe, "bob"), "group.id": "isolation-check",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("ledger", 0, OFFSET_BEGINNING)])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < len(self.sent) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        c.close()
        return got


@pytest.fixture
def victim(secured):
    v = Victim(secured)
    try:
        yield v
    finally:
        # Left open, a producer whose server is gone retries (and logs) for the rest of the run.
        v.producer.purge()
        v.producer.close()


def high_watermark(floe, user: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**client_conf(floe, user), "group.id": "isolation-watermark"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


# --------------------------------------------------------------------------
# 1. producer ids belong to their tenant


@pytest.mark.timeout(60)
def test_forged_batches_cannot_fence_another_tenants_idempotent_producer(secured, victim):
    create_topic(secured, "bob", "ledger")
    create_topic(secured, "alice", "forged")
    failures = victim.send("before")
    assert not failures, f"globex's producer failed before any attack: {failures[:3]}"

    with Conn(secured.kafka_port) as attacker:
        plain_login(attacker, "alice")
        code, own_id, own_epoch = init_producer_id(attacker, -1, -1)
        assert code == 0, f"acme's own InitProducerId: error {code}"
        # Within its tenant Kafka's rules hold. This also proves the batches are well formed.
        code = produce(attacker, "forged", record_batch(own_id, own_epoch, 0, b"acme's own"))
        assert code == 0, f"acme's batch with its own producer id {own_id}: error {code}"
        answers = {pid: produce(attacker, "forged", record_batch(pid, FORGED_EPOCH, 0, b"forged"))
                   for pid in range(max(TARGET_IDS.stop, own_id + 1)) if pid != own_id}

    failures = victim.send("after")
    accepted = sorted(pid for pid, code in answers.items() if code == 0)
    assert not failures, (
        f"globex's idempotent producer lost records after acme sent batches at epoch {FORGED_EPOCH} naming "
        f"producer ids it does not own (acme's own id is {own_id}; accepted for ids {accepted}): {failures[:3]}")
    wrong = {pid: code for pid, code in answers.items() if code not in PRODUCER_ID_REFUSALS}
    assert not wrong, (
        f"batches naming producer ids acme does not own were answered {wrong}, expected "
        f"UNKNOWN_PRODUCER_ID ({UNKNOWN_PRODUCER_ID}) or INVALID_PRODUCER_ID_MAPPING ({INVALID_PRODUCER_ID_MAPPING})")
    assert victim.stored() == victim.sent, "globex's records are not all there, in order, once each"
    assert high_watermark(secured, "alice", "forged") == 1, "a refused batch was written"


@pytest.mark.timeout(60)
def test_another_tenants_producer_epoch_cannot_be_bumped(secured, victim):
    create_topic(secured, "bob", "ledger")
    create_topic(secured, "alice", "forged")
    failures = victim.send("before")
    assert not failures, f"globex's producer failed before any attack: {failures[:3]}"

    with Conn(secured.kafka_port) as attacker:
        plain_login(attacker, "alice")
        code, own_id, own_epoch = init_producer_id(attacker, -1, -1)
        assert code == 0, f"acme's own InitProducerId: error {code}"
        # Only ids allocated before acme's first are known to belong to someone else: a bump
        # naming a free id may be answered with that id newly allocated to acme, as Kafka (which
        # gives an idempotent producer a fresh id on every InitProducerId) would.
        foreign = range(own_id)
        # librdkafka's idempotent producer starts at epoch 0.
        answers = {pid: init_producer_id(attacker, pid, 0) for pid in TARGET_IDS if pid != own_id}
        # Within its tenant the bump works, and the producer id and epoch it answers write.
        code, bumped_id, bumped_epoch = init_producer_id(attacker, own_id, own_epoch)
        assert code == 0, f"acme bumping its own producer id {own_id}: error {code}"
        assert (bumped_id, bumped_epoch) != (own_id, own_epoch)
        code = produce(attacker, "forged", record_batch(bumped_id, bumped_epoch, 0, b"acme's own"))
        assert code == 0, f"acme's batch after bumping its own producer: error {code}"

    failures = victim.send("after")
    granted = {pid: answer for pid, answer in answers.items()
               if pid in foreign and answer[0] == 0 and answer[1] == pid}
    assert not failures, (
        f"globex's idempotent producer lost records after acme sent InitProducerId bumps naming producer ids "
        f"allocated before its own ({own_id}); granted (error, id, epoch): {granted}: {failures[:3]}")
    assert not granted, f"acme was granted new epochs of producer ids it does not own: {granted}"
    assert victim.stored() == victim.sent, "globex's records are not all there, in order, once each"


# --------------------------------------------------------------------------
# 2. deleting users and tenants ends their sessions


def served_for(conn: Conn, topic: str, seconds: float) -> int:
    """How many Metadata requests `conn` answered normally in `seconds`, stopping at the
    first it did not."""
    conn.sock.settimeout(3.0)
    answered = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not serves(conn, topic):
            return answered
        answered += 1
        time.sleep(0.2)
    return answered


def api_key(floe, tenant: str, user: str) -> str:
    return json.loads(admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", user))["token"]


@pytest.mark.timeout(60)
def test_deleting_a_user_ends_its_sessions(secured):
    create_topic(secured, "alice", "alice-topic")
    create_topic(secured, "bob", "bob-topic")
    http = requests.Session()  # one keep-alive connection: the key is checked on each request
    http.headers["Authorization"] = f"Bearer {api_key(secured, 'acme', 'alice')}"
    clusters = f"{secured.http_url}/v3/clusters"
    assert http.get(clusters, timeout=10).status_code == 200
    alice, bob = login(secured, "alice", "SCRAM-SHA-512"), login(secured, "bob")
    try:
        assert serves(alice, "alice-topic") and serves(bob, "bob-topic")

        admin_tenants(secured, "delete-user", "alice")
        deleted = time.monotonic()
        served = served_for(alice, "alice-topic", 5.0)
        if serves(alice, "alice-topic"):
            pytest.fail(f"alice's connection still answered Metadata {time.monotonic() - deleted:.1f} s after "
                        f"`floe admin tenants delete-user alice` ({served} answers since)")
        assert serves(bob, "bob-topic"), "another tenant's session was ended by deleting alice"
    finally:
        alice.close()
        bob.close()
    wait_until(lambda: http.get(clusters, timeout=10).status_code == 401, 5, "alice's API key refused")
    with Conn(secured.kafka_port) as again:
        assert scram_login(again, "alice", PASSWORD)[0] != 0, "a deleted user authenticated"


@pytest.mark.timeout(60)
def test_a_tenant_created_again_is_not_reachable_from_the_deleted_ones_sessions(secured):
    create_topic(secured, "alice", "secret-old")
    create_topic(secured, "bob", "bob-topic")
    old_key = api_key(secured, "acme", "alice")
    alice, bob = login(secured, "alice"), login(secured, "bob")
    try:
        assert serves(alice, "secret-old") and serves(bob, "bob-topic")

        admin_tenants(secured, "delete", "acme")
        # At once, as a new customer given the freed name would be: the old session must not
        # land in the new namespace even before it is closed.
        admin_tenants(secured, "create", "acme")
        admin_tenants(secured, "add-user", "--tenant", "acme", "carol", "--password-stdin", stdin=PASSWORD + "\n")
        create_topic(secured, "carol", "secret-new")

        served = served_for(alice, "secret-new", 3.0)
        assert served == 0, (
            f"a connection authenticated as alice of the deleted tenant acme answered {served} Metadata requests "
            "with the new tenant acme's topic secret-new")
        assert serves(bob, "bob-topic"), "another tenant's session was ended by deleting acme"
    finally:
        alice.close()
        bob.close()
    r = requests.get(f"{secured.http_url}/v3/clusters", headers={"Authorization": f"Bearer {old_key}"}, timeout=10)
    assert r.status_code == 401, f"the deleted tenant's API key: {r.status_code} {r.text[:200]}"


@pytest.mark.timeout(90)
def test_a_tenant_created_again_does_not_inherit_the_deleted_ones_producer_ids(secured):
    """Namespaces are keyed by a tenant id that is never reused: the producer ids a deleted
    tenant left count toward nobody's share, and belong to nobody. Before, they stayed bound to
    the tenant's name, so a new tenant given the name started with the old one's count."""
    from confluent_kafka import Producer

    alice = login(secured, "alice")
    try:
        for _ in range(3):
            code, producer_id, _ = init_producer_id(alice, -1, -1)
            assert code == 0 and producer_id >= 0, code
    finally:
        alice.close()
    admin_tenants(secured, "delete", "acme")
    admin_tenants(secured, "create", "acme")
    admin_tenants(secured, "set-quotas", "--tenant", "acme", "--producer-ids", "3")
    admin_tenants(secured, "add-user", "--tenant", "acme", "carol", "--password-stdin", stdin=PASSWORD + "\n")
    create_topic(secured, "carol", "fresh")
    # The new customer's idempotent producer needs one producer id of its own three.
    producer = Producer({**client_conf(secured, "carol"), "enable.idempotence": True, "message.timeout.ms": 20_000})
    delivered = []
    producer.produce("fresh", b"first", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None], (
        f"the new tenant acme, with a share of 3 producer ids and none used, could not produce: {delivered}")
    tenants = json.loads(admin_tenants(secured, "list"))
    ids = {t["tenant"]: t["id"] for t in tenants}
    assert ids["acme"] > max(ids["globex"], 0), f"the new acme has a new id: {ids}"


@pytest.mark.timeout(90)
def test_one_api_key_over_its_own_quota_is_held_back_and_its_tenants_other_keys_are_not(secured):
    """A provider with a fleet of devices under one tenant gives each its key and holds each key
    to its own rate, within the tenant's."""
    admin_tenants(secured, "add-user", "--tenant", "acme", "device", "--password-stdin", stdin=PASSWORD + "\n")
    created = [json.loads(admin_tenants(secured, "create-api-key", "--tenant", "acme", "--user", "device"))
               for _ in range(2)]
    (noisy_id, noisy), (_, quiet) = [(k["key_id"], k["token"]) for k in created]
    admin_tenants(secured, "set-api-key-quotas", noisy_id, "--requests-per-sec", "5")
    listed = json.loads(admin_tenants(secured, "list"))
    keys = {k["key_id"]: k for t in listed for k in t["api_keys"]}
    assert keys[noisy_id]["quotas"]["requests_per_sec"] == 5, keys[noisy_id]

    def statuses(token: str, n: int) -> list[int]:
        with requests.Session() as http:
            http.headers["Authorization"] = f"Bearer {token}"
            return [http.get(f"{secured.http_url}/v3/clusters", timeout=10).status_code for _ in range(n)]

    seen: dict[str, list[int]] = {}

    def held_back() -> bool:
        seen["noisy"] = statuses(noisy, 40)
        return 429 in seen["noisy"]

    # The key's quota reaches agents with the metadata change stream.
    wait_until(held_back, 15, "the noisy key held to 5 requests/s")
    assert set(seen["noisy"]) <= {200, 429}, seen["noisy"]
    r = requests.get(f"{secured.http_url}/v3/clusters", headers={"Authorization": f"Bearer {noisy}"}, timeout=10)
    if r.status_code == 429:
        assert "API key over its requests quota" in r.json()["message"], r.text
        assert int(r.headers["Retry-After"]) >= 1
    quiet_statuses = statuses(quiet, 40)
    assert quiet_statuses == [200] * 40, f"another key of the same tenant was held back: {quiet_statuses}"
    # Without a quota of its own, the key is free again.
    admin_tenants(secured, "set-api-key-quotas", noisy_id)
    wait_until(lambda: statuses(noisy, 40) == [200] * 40, 15, "the noisy key without a quota of its own")


def long_poll_reads(floe) -> dict[str, float]:
    """floe_long_poll_reads_total by listener, from the agent's /metrics."""
    text = requests.get(f"{floe.http_url}/metrics", timeout=10).text
    reads = {"kafka": 0.0, "http": 0.0}
    for line in text.splitlines():
        if line.startswith("floe_long_poll_reads_total{"):
            labels, value = line.rsplit(" ", 1)
            for listener in reads:
                if f'listener="{listener}"' in labels:
                    reads[listener] = float(value)
    return reads


@pytest.mark.long
@pytest.mark.timeout(120)
def test_one_tenants_waiting_reads_cost_nothing_while_another_tenant_writes(secured):
    """Found by `floe chaos --hostile-tenant`: every waiting read (a Kafka Fetch long-poll, an
    HTTP read with wait_ms, an event stream) was woken by every change anywhere in the cluster
    and read its partitions again, so one tenant's idle long-polls cost work in proportion to
    another tenant's writes (1,100 long-polls per agent took the other tenant's produce p99 from
    0.65 s to 2.4 s and halved its throughput). A waiting read now wakes only when a partition
    it waits on moves."""
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(secured, "alice", "quiet")
    create_topic(secured, "bob", "busy")
    token = api_key(secured, "acme", "alice")
    headers = {"Authorization": f"Bearer {token}"}
    cluster = requests.get(f"{secured.http_url}/v3/clusters", headers=headers, timeout=10).json()["data"][0]["cluster_id"]
    url = (f"{secured.http_url}/v3/clusters/{cluster}/topics/quiet/partitions/0/records"
           "?offset=latest&wait_ms=20000")
    waiting_http, waiting_kafka = 100, 10
    answers: list[int] = []

    def long_poll():
        answers.append(requests.get(url, headers=headers, timeout=40).status_code)

    polls = [threading.Thread(target=long_poll) for _ in range(waiting_http)]
    consumers = []
    for i in range(waiting_kafka):
        c = Consumer({**client_conf(secured, "alice"), "group.id": f"quiet-{i}", "fetch.wait.max.ms": 20000,
                      "fetch.min.bytes": 1, "enable.auto.commit": False})
        c.assign([TopicPartition("quiet", 0, -1)])  # the end: nothing to read
        consumers.append(c)
    stop = threading.Event()

    def consume(c):
        while not stop.is_set():
            c.poll(0.2)

    pollers = [threading.Thread(target=consume, args=(c,)) for c in consumers]
    try:
        for t in polls + pollers:
            t.start()
        time.sleep(3)  # every read is waiting now
        before = long_poll_reads(secured)
        producer = Producer({**client_conf(secured, "bob"), "linger.ms": 0})
        for i in range(60):
            producer.produce("busy", f"v{i}".encode())
            producer.flush(10)  # one commit each
        time.sleep(1)
        after = long_poll_reads(secured)
    finally:
        stop.set()
        for t in pollers:
            t.join(10)
        for c in consumers:
            c.close()
    for t in polls:
        t.join(40)
    woken = {listener: after[listener] - before[listener] for listener in after}
    assert woken["http"] <= 2 * waiting_http and woken["kafka"] <= 3 * waiting_kafka, (
        f"while tenant globex made 60 commits, tenant acme's {waiting_http} HTTP long-polls and {waiting_kafka} Kafka "
        f"fetches on a partition nobody wrote were read again {woken} times")
    assert answers == [200] * waiting_http, answers


@pytest.mark.timeout(120)
def test_one_tenant_cannot_hold_every_kafka_connection_of_an_agent(floe_factory, tmp_path):
    """Proven connections are never closed to make room, and per-address limits do not bind a
    tenant with many addresses: its users could hold every place of the listener, and then
    nobody else could connect. Each tenant now holds at most --max-connections-per-tenant
    authenticated connections; past it, SaslAuthenticate is refused."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tenant-connections", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256", "--max-connections", "40", "--max-connections-per-tenant", "20",
        "--auth-failures-per-minute", "0"])
    for tenant, user in USERS.items():
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    held = []
    try:
        for i in range(20):
            conn = Conn(floe.kafka_port)
            held.append(conn)
            assert scram_login(conn, "alice", PASSWORD) == (0, None), f"alice's connection {i + 1} of 20"
        with Conn(floe.kafka_port) as over:
            code, message = scram_login(over, "alice", PASSWORD)
            assert code != 0 and "connections" in (message or ""), (code, message)
        with Conn(floe.kafka_port) as other:
            assert scram_login(other, "bob", PASSWORD) == (0, None), "another tenant was kept out"
        held.pop().close()

        def logs_in(user: str) -> bool:
            with Conn(floe.kafka_port) as conn:
                return scram_login(conn, user, PASSWORD)[0] == 0

        # The closed connection's place comes back once the agent sees it closed.
        wait_until(lambda: logs_in("alice"), 10, "a place of alice's tenant given back")
    finally:
        for conn in held:
            conn.close()


# --------------------------------------------------------------------------
# 3. another tenant's topic id is as unknown as an id no topic has
#
# Flexible versions (request header v2, response header v1, compact encodings), encoded with
# helpers.kafka_wire on a raw connection that authenticated first.

API_DELETE_TOPICS, API_FETCH = 20, 1
UNKNOWN_TOPIC_ID = 100
NIL_ID = uuid.UUID(int=0)


def flexible_call(conn: Conn, api_key: int, version: int, body):
    """One flexible request on `conn`: a helpers.kafka_wire Reader past the response header."""
    from helpers.kafka_wire import Reader as WireReader, Writer

    conn.correlation_id += 1
    header = Writer().i16(api_key).i16(version).i32(conn.correlation_id)
    header.out += kstring("e2e-isolation")
    header.tags()
    payload = bytes(header.out) + bytes(body.out)
    conn.sock.sendall(struct.pack(">i", len(payload)) + payload)
    r = conn.response(conn.correlation_id)
    wire = WireReader(r.data)
    wire.at = r.at
    wire.tags()
    return wire


def metadata_v12(conn: Conn, topic_id: uuid.UUID = NIL_ID, name: str | None = None) -> list[tuple]:
    """Metadata v12 naming one topic by id or name, without auto-creation:
    [(topic id, error code, name, partition count)]."""
    from helpers.kafka_wire import Writer

    body = Writer().array([(topic_id, name)], lambda w, t: w.uuid(t[0]).string(t[1]).tags())
    body.boolean(False).boolean(False).tags()
    r = flexible_call(conn, API_METADATA, 12, body)
    r.i32()  # throttle_time_ms
    r.array(lambda r: (r.i32(), r.string(), r.i32(), r.string(), r.tags()))  # brokers
    r.string()  # cluster_id
    r.i32()  # controller_id

    def partition(r):
        r.i16(), r.i32(), r.i32(), r.i32()
        for _ in range(3):  # replicas, in-sync replicas, offline replicas
            r.array(lambda r: r.i32())
        r.tags()

    def topic(r):
        code, name, topic_id = r.i16(), r.string(), r.uuid()
        r.i8()  # is_internal
        partitions = r.array(partition) or []
        r.i32()  # topic_authorized_operations
        r.tags()
        return topic_id, code, name, len(partitions)

    return r.array(topic)


def fetch_v13(conn: Conn, topic_id: uuid.UUID) -> list[tuple]:
    """Fetch v13 of partition 0 of one topic by id, without a session or a wait:
    [(topic id, top-level error code, [(partition, error code)])]."""
    from helpers.kafka_wire import Writer

    def partition(w, index):
        # partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
        # partition_max_bytes
        w.i32(index).i32(-1).i64(0).i32(-1).i64(-1).i32(1 << 20).tags()

    # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
    body = Writer().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1)
    body.array([topic_id], lambda w, t: w.uuid(t).array([0], partition).tags())
    body.array([], None).string("").tags()  # no forgotten topics, no rack
    r = flexible_call(conn, API_FETCH, 13, body)
    r.i32()  # throttle_time_ms
    error = r.i16()
    r.i32()  # session_id

    def partition_answer(r):
        index, code = r.i32(), r.i16()
        r.i64(), r.i64(), r.i64()  # high watermark, last stable offset, log start offset
        r.array(lambda r: (r.i64(), r.i64(), r.tags()))  # aborted transactions
        r.i32()  # preferred_read_replica
        r.bytes()  # records
        r.tags()
        return index, code

    def topic(r):
        topic_id, partitions = r.uuid(), r.array(partition_answer)
        r.tags()
        return topic_id, error, partitions

    return r.array(topic)


def produce_v13(conn: Conn, topic_id: uuid.UUID) -> list[tuple]:
    """Produce v13 (acks=all) of one batch to partition 0 of one topic by id:
    [(topic id, [(partition, error code, error message)])]."""
    from helpers.kafka_wire import Writer

    batch = record_batch(-1, -1, -1, b"probe")

    def partition(w, index):
        w.i32(index).uvarint(len(batch) + 1)
        w.out += batch
        w.tags()

    body = Writer().string(None).i16(-1).i32(10_000)
    body.array([topic_id], lambda w, t: w.uuid(t).array([0], partition).tags()).tags()
    r = flexible_call(conn, API_PRODUCE, 13, body)

    def partition_answer(r):
        index, code = r.i32(), r.i16()
        r.i64(), r.i64(), r.i64()  # base offset, log append time, log start offset
        r.array(lambda r: (r.i32(), r.string(), r.tags()))  # record errors
        message = r.string()
        r.tags()
        return index, code, message

    def topic(r):
        topic_id, partitions = r.uuid(), r.array(partition_answer)
        r.tags()
        return topic_id, partitions

    return r.array(topic)


def delete_topics_v6(conn: Conn, topic_id: uuid.UUID) -> list[tuple]:
    """DeleteTopics v6 of one topic by id: [(topic id, name, error code, error message)]."""
    from helpers.kafka_wire import Writer

    body = Writer().array([topic_id], lambda w, t: w.string(None).uuid(t).tags()).i32(10_000).tags()
    r = flexible_call(conn, API_DELETE_TOPICS, 6, body)
    r.i32()  # throttle_time_ms

    def result(r):
        name, topic_id, code, message = r.string(), r.uuid(), r.i16(), r.string()
        r.tags()
        return topic_id, name, code, message

    return r.array(result)


@pytest.mark.timeout(60)
def test_another_tenants_topic_id_is_answered_as_an_unknown_one(secured):
    """Issue 52: Metadata v12, Fetch v13, Produce v13 and DeleteTopics v6 naming globex's topic
    by id answered acme with the nil id, while an id no topic has was echoed back: a leaked id
    could be confirmed as someone's. Each API must answer both alike, each with its own id."""
    create_topic(secured, "bob", "ledger")
    with login(secured, "bob") as owner:
        [(theirs, code, name, partitions)] = metadata_v12(owner, name="ledger")
    assert (code, name, partitions) == (0, "ledger", 1) and theirs != NIL_ID
    nowhere = uuid.uuid4()

    # Each probe with the error codes its answer for one topic carries.
    probes = {
        metadata_v12: lambda t: [t[1]],
        fetch_v13: lambda t: [t[1]] + [code for _, code in t[2]],
        produce_v13: lambda t: [code for _, code, _ in t[1]],
        delete_topics_v6: lambda t: [t[2]],
    }
    with login(secured, "alice") as prober:
        for probe, codes in probes.items():
            answers = {}
            for sent in (theirs, nowhere):
                topics = probe(prober, sent)
                assert [t[0] for t in topics] == [sent], (
                    f"{probe.__name__} naming {'globex' if sent == theirs else 'no'} topic's id {sent} was "
                    f"answered for ids {[str(t[0]) for t in topics]}")
                answers[sent] = [t[1:] for t in topics]
            assert answers[theirs] == answers[nowhere], (
                f"{probe.__name__} answers globex's topic id otherwise than an unknown one: "
                f"{answers[theirs]} against {answers[nowhere]}")
            assert UNKNOWN_TOPIC_ID in codes(topics[0]), f"{probe.__name__} answered {topics}"

    with login(secured, "bob") as owner:
        [(_, code, name, _)] = metadata_v12(owner, name="ledger")
    assert (code, name) == (0, "ledger"), "acme's DeleteTopics by id reached globex's topic"
