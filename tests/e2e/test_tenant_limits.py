"""Limits that keep one tenant (or one API key, or one client address) from using up what every
tenant shares.

- HTTP requests in flight are counted per API key (`--http-requests-in-flight-per-key`), per
  tenant (`--http-requests-in-flight-per-tenant`) and, for requests without a key, per client
  address (`--http-requests-in-flight-per-ip`). A request past its limit gets 429 with
  Retry-After and a JSON error; other keys, tenants and addresses are served, and /healthz,
  /readyz and /metrics never refused. Long-polls are what hold requests open here: one key
  opening more than its share cannot make the agent look unhealthy, as it once did by filling
  the agent-wide limit.
- The cluster-wide tables (ACLs, topics, consumer groups, transactional ids, producer ids) have a
  per-tenant limit, the default or what `floe admin tenants set-quotas` sets: past it, the
  tenant's create fails (POLICY_VIOLATION, or a per-binding CreateAcls error), while another
  tenant goes on creating.

The long-polls are raw sockets with a hand-written HTTP/1.1 request, so each one really holds
its own connection and request, and only the answers the server sends at once are read.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import selectors
import socket
import time
from dataclasses import dataclass, field

import pytest
import requests

from conftest import unique_name, wait_until
from test_auth import PASSWORD, admin_tenants

# Linux: leave the port to connect(), so many sockets bound to one address do not exhaust
# bind()'s port search.
IP_BIND_ADDRESS_NO_PORT = getattr(socket, "IP_BIND_ADDRESS_NO_PORT", 24)
# A long-poll that the server holds for this long stays open through every check of a test.
LONG_POLL_MS = 30_000
# Refusals are decided before any handler runs; this is ample time for all of them to arrive.
PROMPT_S = 3.0
OPEN_PATHS = ("/healthz", "/readyz", "/metrics")


# --------------------------------------------------------------------------
# raw HTTP/1.1


@dataclass
class Answer:
    status: int  # 0: closed by the server without a complete response
    headers: dict = field(default_factory=dict)
    body: bytes = b""

    def json(self):
        return json.loads(self.body)


def _dechunk(data: bytes):
    """The body of a complete chunked encoding, or None while more is to come."""
    out, at = b"", 0
    while True:
        eol = data.find(b"\r\n", at)
        if eol < 0:
            return None
        size = int(data[at:eol].split(b";")[0], 16)
        if size == 0:
            return out
        if len(data) < eol + 2 + size + 2:
            return None
        out += data[eol + 2:eol + 2 + size]
        at = eol + 2 + size + 2


def parse_response(data: bytes):
    """The Answer in `data`, or None while it is incomplete."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    lines = data[:end].decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    rest = data[end + 4:]
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(rest)
        return None if body is None else Answer(status, headers, body)
    length = int(headers.get("content-length", "0"))
    return Answer(status, headers, rest[:length]) if len(rest) >= length else None


def request_bytes(port: int, path: str, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}Accept: application/json\r\n\r\n".encode()


def new_socket(source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        s.bind((source, 0))
    except BaseException:
        s.close()
        raise
    return s


def send_get(port: int, path: str, token: str | None = None, source: str = "127.0.0.1") -> socket.socket:
    """A connection from `source` carrying one GET, sent whole; its answer is not read here."""
    s = new_socket(source)
    try:
        s.settimeout(10)
        s.connect(("127.0.0.1", port))
        s.sendall(request_bytes(port, path, token))
        s.setblocking(False)
        return s
    except BaseException:
        s.close()
        raise


def send_gets(port: int, path: str, token: str | None, count: int, source: str = "127.0.0.1",
              batch: int = 64, pause: float = 0.02, timeout: float = 20) -> list[socket.socket]:
    """`count` connections, each carrying one GET. The listener's accept queue holds 128: a
    faster burst of connects overflows it and the kernel drops SYNs, retried only a second
    later. So connects go out a batch at a time (in parallel within one), with a pause for the
    server to accept them."""
    socks: list[socket.socket] = []
    deadline = time.monotonic() + timeout
    request = request_bytes(port, path, token)
    try:
        while len(socks) < count:
            sel = selectors.DefaultSelector()
            try:
                for _ in range(min(batch, count - len(socks))):
                    s = new_socket(source)
                    socks.append(s)
                    s.setblocking(False)
                    err = s.connect_ex(("127.0.0.1", port))
                    if err not in (0, errno.EINPROGRESS):
                        raise OSError(err, os.strerror(err))
                    sel.register(s, selectors.EVENT_WRITE)
                while sel.get_map():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"{len(sel.get_map())} connects still pending after {timeout}s")
                    for key, _ in sel.select(timeout=min(left, 0.5)):
                        s = key.fileobj
                        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            raise OSError(err, f"connect: {os.strerror(err)}")
                        sel.unregister(s)
                        # A few hundred bytes into an empty send buffer: sent whole at once.
                        assert s.send(request) == len(request)
            finally:
                sel.close()
            time.sleep(pause)
    except BaseException:
        close_all(socks)
        raise
    return socks


def collect(socks: list[socket.socket], within: float, stop_when_all: bool = False) -> dict[int, Answer]:
    """Answers that arrive within `within` seconds, by index into `socks`. Without
    `stop_when_all` it always waits the whole time: the sockets left out were held that long."""
    sel = selectors.DefaultSelector()
    bufs = {}
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
        bufs[i] = b""
    answers: dict[int, Answer] = {}
    deadline = time.monotonic() + within
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or (stop_when_all and len(answers) == len(socks)):
                break
            for key, _ in sel.select(timeout=min(left, 0.5)):
                i = key.data
                try:
                    data = socks[i].recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    answers[i] = parse_response(bufs[i]) or Answer(0)
                    sel.unregister(socks[i])
                    continue
                bufs[i] += data
                answer = parse_response(bufs[i])
                if answer is not None:
                    answers[i] = answer
                    sel.unregister(socks[i])
    finally:
        sel.close()
    return answers


def close_all(socks):
    for s in socks:
        try:
            s.close()
        except OSError:
            pass


def statuses(answers: dict[int, Answer]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for a in answers.values():
        counts[a.status] = counts.get(a.status, 0) + 1
    return counts


def assert_refusal(answer: Answer, what: str):
    assert answer.status == 429, f"{what}: {answer.status} {answer.body[:300]!r}"
    assert "retry-after" in answer.headers, f"{what}: 429 without Retry-After: {answer.headers}"
    assert int(answer.headers["retry-after"]) >= 1, f"{what}: Retry-After {answer.headers['retry-after']!r}"
    assert answer.headers.get("content-type", "").startswith("application/json"), f"{what}: {answer.headers}"
    body = answer.json()
    assert body["error_code"] == 429 and body["message"], f"{what}: {body}"


# --------------------------------------------------------------------------
# the HTTP API as tenants' keys see it


def start_with_keys(floe_factory, tmp_path, name, extra_args, keys):
    """floe dev requiring API keys, with `keys` {key name: tenant} made for one user per tenant."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new(name, object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key", *extra_args])
    users = {}
    for tenant in dict.fromkeys(keys.values()):
        users[tenant] = f"{tenant}-user"
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, users[tenant], "--password-stdin", stdin=PASSWORD + "\n")
    floe.keys = {}
    for key, tenant in keys.items():
        out = admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", users[tenant])
        floe.keys[key] = json.loads(out)["token"]
    first = next(iter(floe.keys.values()))
    # 503 until the agent's metadata mirror has the cluster.
    wait_until(lambda: requests.get(f"{floe.http_url}/v3/clusters", headers=bearer(first), timeout=10).status_code == 200,
               30, "cluster id")
    floe.cluster_id = requests.get(f"{floe.http_url}/v3/clusters", headers=bearer(first), timeout=10).json()["data"][0]["cluster_id"]
    return floe


def bearer(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


def v3(floe, path):
    return f"/v3/clusters/{floe.cluster_id}{path}"


def create_http_topic(floe, token, topic):
    r = requests.post(floe.http_url + v3(floe, "/topics"), headers=bearer(token),
                      json={"topic_name": topic, "partitions_count": 1}, timeout=30)
    assert r.status_code == 201, r.text


def long_poll_path(floe, topic, wait_ms=LONG_POLL_MS):
    return v3(floe, f"/topics/{topic}/partitions/0/records?offset=latest&wait_ms={wait_ms}")


def check_raw_long_poll(floe, topic, token=None):
    """The hand-written request is one the server takes: a short long-poll waits, then 200."""
    started = time.monotonic()
    s = send_get(floe.http_port, long_poll_path(floe, topic, wait_ms=500), token)
    try:
        answer = collect([s], 10, stop_when_all=True).get(0)
    finally:
        s.close()
    assert answer is not None and answer.status == 200, answer
    assert time.monotonic() - started >= 0.4, "the long-poll did not wait"
    assert answer.json()["records"] == [], answer.body


def open_paths_answer(floe):
    for path in OPEN_PATHS:
        r = requests.get(floe.http_url + path, timeout=10)
        assert r.status_code == 200, f"{path}: {r.status_code} {r.text[:300]}"


def open_long_polls(floe, topic, token, count, source="127.0.0.1"):
    return send_gets(floe.http_port, long_poll_path(floe, topic), token, count, source)


def refused_and_held(socks, what):
    """Indexes of the requests answered at once (each must be a proper 429) and of those held."""
    answers = collect(socks, PROMPT_S)
    for i, a in answers.items():
        assert_refusal(a, f"{what}, request {i}")
    held = [i for i in range(len(socks)) if i not in answers]
    return sorted(answers), held


@pytest.mark.long
@pytest.mark.timeout(90)
def test_http_requests_in_flight_are_limited_per_key_and_per_tenant(floe_factory, tmp_path):
    """Caps of 40 per key and 60 per tenant: acme's k1 opens 45 long-polls (5 refused), k2 then
    25 (the tenant has room for 20 more); globex, /healthz and /readyz are served meanwhile.
    When the long-polls end, their slots are free again."""
    floe = start_with_keys(floe_factory, tmp_path, "floe-http-limits",
                           ["--http-requests-in-flight-per-key", "40", "--http-requests-in-flight-per-tenant", "60"],
                           {"k1": "acme", "k2": "acme", "globex": "globex"})
    keys = floe.keys
    create_http_topic(floe, keys["k1"], "idle")
    create_http_topic(floe, keys["globex"], "idle")
    check_raw_long_poll(floe, "idle", keys["k1"])

    k1 = open_long_polls(floe, "idle", keys["k1"], 45)
    k2 = []
    try:
        k1_refused, k1_held = refused_and_held(k1, "k1")
        assert (len(k1_refused), len(k1_held)) == (5, 40), (
            f"k1 (cap 40): {len(k1_refused)} of 45 long-polls refused at once, {len(k1_held)} held")

        # k1's refused requests hold nothing: the tenant has 40 in flight, room for 20 more.
        k2 = open_long_polls(floe, "idle", keys["k2"], 25)
        k2_refused, k2_held = refused_and_held(k2, "k2")
        assert (len(k2_refused), len(k2_held)) == (5, 20), (
            f"k2 (tenant cap 60, 40 held by k1): {len(k2_refused)} of 25 refused at once, {len(k2_held)} held")

        # Any request past the cap is refused, not only long-polls.
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["k1"]), timeout=10)
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1, r.text
        assert r.json()["error_code"] == 429, r.text

        # Another tenant is served, long-polls included.
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["globex"]), timeout=10)
        assert r.status_code == 200, r.text
        r = requests.get(floe.http_url + long_poll_path(floe, "idle", wait_ms=200), headers=bearer(keys["globex"]),
                         timeout=10)
        assert r.status_code == 200, r.text
        open_paths_answer(floe)

        # The held long-polls run their course and free their slots.
        held = [k1[i] for i in k1_held] + [k2[i] for i in k2_held]
        done = collect(held, LONG_POLL_MS / 1000 + 15, stop_when_all=True)
        assert statuses(done) == {200: 60}, f"held long-polls ended with {statuses(done)} (of 60)"
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["k1"]), timeout=10)
        assert r.status_code == 200, r.text
    finally:
        close_all(k1 + k2)


@pytest.mark.timeout(90)
def test_one_key_with_many_long_polls_does_not_make_the_agent_unhealthy(floe_factory, tmp_path):
    """The original attack, with the default limits: one key opens 1,100 long-polls. Past its
    1,000 the rest get 429; /healthz and /readyz stay 200 and another tenant is served."""
    floe = start_with_keys(floe_factory, tmp_path, "floe-http-flood", [],
                           {"k1": "acme", "other": "acme", "globex": "globex"})
    keys = floe.keys
    create_http_topic(floe, keys["k1"], "idle")
    check_raw_long_poll(floe, "idle", keys["k1"])

    socks = open_long_polls(floe, "idle", keys["k1"], 1100)
    try:
        refused, held = refused_and_held(socks, "k1")
        assert (len(refused), len(held)) == (100, 1000), (
            f"one key (default cap 1,000): {len(refused)} of 1,100 long-polls refused at once, {len(held)} held")
        open_paths_answer(floe)
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["globex"]), timeout=10)
        assert r.status_code == 200, r.text
        # The tenant's cap (4,000 by default) leaves its other keys room.
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["other"]), timeout=10)
        assert r.status_code == 200, r.text
        r = requests.get(floe.http_url + v3(floe, "/topics"), headers=bearer(keys["k1"]), timeout=10)
        assert r.status_code == 429, r.text
        # Still held: nothing above answered or closed them.
        assert not collect([socks[i] for i in held], 0.2), "held long-polls ended early"
    finally:
        close_all(socks)


@pytest.mark.timeout(90)
def test_requests_without_a_key_are_limited_per_client_address(floe_factory, tmp_path):
    """Without API keys, 20 requests in flight per address: 25 long-polls from 127.0.0.1 leave 5
    refused; 127.0.0.2 is served, and /healthz, /readyz and /metrics (keyless, from the full
    address) are never refused."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-http-per-ip", object_store=f"file://{objects}",
                            extra_args=["--http-requests-in-flight-per-ip", "20"])
    wait_until(lambda: requests.get(f"{floe.http_url}/v3/clusters", timeout=10).status_code == 200, 30, "cluster id")
    floe.cluster_id = requests.get(f"{floe.http_url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    create_http_topic(floe, None, "idle")
    check_raw_long_poll(floe, "idle")

    socks = open_long_polls(floe, "idle", None, 25)
    try:
        refused, held = refused_and_held(socks, "127.0.0.1")
        assert (len(refused), len(held)) == (5, 20), (
            f"one address (cap 20): {len(refused)} of 25 long-polls refused at once, {len(held)} held")
        open_paths_answer(floe)
        s = send_get(floe.http_port, v3(floe, "/topics"), source="127.0.0.2")
        try:
            other = collect([s], 10, stop_when_all=True).get(0)
        finally:
            s.close()
        assert other is not None and other.status == 200, other
        r = requests.get(floe.http_url + v3(floe, "/topics"), timeout=10)
        assert_refusal(Answer(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content),
                       "another request from 127.0.0.1")
    finally:
        close_all(socks)


# --------------------------------------------------------------------------
# per-tenant limits on the cluster-wide tables

SUPERS = {"acme": "root", "globex": "root2"}


@pytest.fixture
def guarded(floe_factory, tmp_path):
    """Tenants acme and globex, each with a super user (user names are cluster-wide, hence two)."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tables", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256", "--auth-failures-per-minute", "0",
        "--authorizer", "--super-users", ",".join(SUPERS.values())])
    for tenant, user in SUPERS.items():
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    return floe


def conf(floe, tenant):
    return {"bootstrap.servers": floe.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": SUPERS[tenant], "sasl.password": PASSWORD}


def kafka_admin(floe, tenant):
    from confluent_kafka.admin import AdminClient
    return AdminClient(conf(floe, tenant))


def binding(name, principal="User:alice"):
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType
    return AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, principal, "*", AclOperation.READ,
                      AclPermissionType.ALLOW)


def every_acl():
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def create_topics(a, names):
    """{name: None or the KafkaError} of one CreateTopics request."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic
    out = {}
    for name, future in a.create_topics([NewTopic(n, 1) for n in names], request_timeout=30).items():
        try:
            future.result(30)
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def fill(floe, tenant, topic, count=3):
    from confluent_kafka import Producer
    p = Producer({**conf(floe, tenant), "enable.idempotence": False})
    for i in range(count):
        p.produce(topic, value=f"{tenant}-{i}".encode())
    assert p.flush(30) == 0


def commit(floe, tenant, group, topic, offset):
    """None, or the error of an assign-mode commit of `offset` for `group`."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer({**conf(floe, tenant), "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        try:
            parts = c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
        except KafkaException as e:
            return e.args[0]
        errors = [p.error for p in parts if p.error is not None]
        return errors[0] if errors else None
    finally:
        c.close()


def init_transactional(floe, tenant, txn_id, timeout=20):
    """The producer, or the KafkaError its init_transactions raised."""
    from confluent_kafka import KafkaException, Producer
    p = Producer({**conf(floe, tenant), "transactional.id": txn_id})
    try:
        p.init_transactions(timeout)
        return p
    except KafkaException as e:
        return e.args[0]


@pytest.mark.timeout(90)
def test_a_tenant_cannot_fill_the_acl_table(guarded):
    """By default a tenant has 1,000 ACL bindings: acme's first 1,000 are made, the 1,001st is
    refused with a reason, and globex still creates its own."""
    from confluent_kafka import KafkaException

    acme = kafka_admin(guarded, "acme")
    bindings = [binding(f"topic-{i:04d}") for i in range(1001)]
    for start in range(0, 1000, 100):
        for future in acme.create_acls(bindings[start:start + 100], request_timeout=30).values():
            future.result(30)
    assert len(acme.describe_acls(every_acl()).result(30)) == 1000

    (future,) = acme.create_acls([bindings[1000]], request_timeout=30).values()
    with pytest.raises(KafkaException) as refused:
        future.result(30)
    err = refused.value.args[0]
    assert err.code() != 0 and re.search(r"quota|limit", err.str(), re.I), err
    assert len(acme.describe_acls(every_acl()).result(30)) == 1000

    globex = kafka_admin(guarded, "globex")
    (future,) = globex.create_acls([binding("topic-0000", "User:bob")], request_timeout=30).values()
    future.result(30)
    assert len(globex.describe_acls(every_acl()).result(30)) == 1


@pytest.mark.timeout(90)
def test_topics_groups_and_transactional_ids_are_limited_per_tenant(guarded):
    """acme may have 3 topics, 2 groups and 2 transactional ids: one more of each is refused
    (POLICY_VIOLATION), what it already has keeps working, and globex, with the same names and
    more of them, is not held back."""
    from confluent_kafka import KafkaError, Producer

    admin_tenants(guarded, "set-quotas", "--tenant", "acme", "--topics", "3", "--groups", "2",
                  "--transactional-ids", "2")
    acme, globex = kafka_admin(guarded, "acme"), kafka_admin(guarded, "globex")

    # Topics.
    assert create_topics(acme, ["t1", "t2"]) == {"t1": None, "t2": None}
    assert create_topics(acme, ["t3"]) == {"t3": None}
    refused = create_topics(acme, ["t4"])["t4"]
    assert refused is not None and refused.code() == KafkaError.POLICY_VIOLATION, refused
    assert create_topics(globex, ["t1", "t2", "t3", "t4", "t5"]) == {f"t{i}": None for i in range(1, 6)}
    listed = {t for t in acme.list_topics(timeout=10).topics if not t.startswith("__")}
    assert listed == {"t1", "t2", "t3"}, listed

    # Consumer groups: the third group's commit is refused, further commits of the first two are not.
    for tenant in SUPERS:
        fill(guarded, tenant, "t1")
    assert commit(guarded, "acme", "g1", "t1", 1) is None
    assert commit(guarded, "acme", "g2", "t1", 2) is None
    refused = commit(guarded, "acme", "g3", "t1", 3)
    assert refused is not None and refused.code() == KafkaError.POLICY_VIOLATION, refused
    assert commit(guarded, "acme", "g1", "t1", 3) is None, "a group acme has is not a new one"
    for group in ("g1", "g2", "g3", "g4"):
        assert commit(guarded, "globex", group, "t1", 2) is None, f"globex {group}"
    groups = sorted(g.group_id for g in acme.list_consumer_groups().result(30).valid)
    assert groups == ["g1", "g2"], groups

    # Transactional ids: the third id's InitProducerId is refused, a known id's is not.
    p1, p2 = init_transactional(guarded, "acme", "x1"), init_transactional(guarded, "acme", "x2")
    assert isinstance(p1, Producer) and isinstance(p2, Producer), (p1, p2)
    refused = init_transactional(guarded, "acme", "x3", timeout=6)
    assert isinstance(refused, KafkaError) and refused.code() == KafkaError.POLICY_VIOLATION, refused
    again = init_transactional(guarded, "acme", "x1")  # fences p1
    assert isinstance(again, Producer), f"re-initializing acme's own x1: {again}"
    again.begin_transaction()
    again.produce("t2", value=b"in a transaction")
    again.commit_transaction(30)
    for txn in ("x1", "x2", "x3", "x4"):
        p = init_transactional(guarded, "globex", txn)
        assert isinstance(p, Producer), f"globex {txn}: {p}"


@pytest.mark.timeout(90)
def test_producer_ids_are_limited_per_tenant(guarded):
    """acme may hold 5 producer ids: five idempotent producers get one and deliver, the sixth's
    InitProducerId is refused (POLICY_VIOLATION, which librdkafka retries until its records time
    out); globex's producers all get ids."""
    from confluent_kafka import Producer

    admin_tenants(guarded, "set-quotas", "--tenant", "acme", "--producer-ids", "5")
    for tenant in SUPERS:
        assert create_topics(kafka_admin(guarded, tenant), ["ids"]) == {"ids": None}

    class Lines(logging.Handler):
        def __init__(self):
            super().__init__()
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    def idempotent(tenant, n):
        """(producer, delivery error or None, librdkafka's log lines) for one record."""
        lines = Lines()
        logger = logging.getLogger(unique_name(f"rdkafka-{tenant}-{n}"))
        logger.addHandler(lines)
        logger.propagate = False
        p = Producer({**conf(guarded, tenant), "enable.idempotence": True, "message.timeout.ms": 6000,
                      "logger": logger})
        delivered = []
        p.produce("ids", value=f"{tenant}-{n}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        p.flush(20)
        assert len(delivered) == 1, f"{tenant} producer {n}: no delivery report"
        return p, delivered[0], lines.lines

    kept = []  # alive to the end: their ids are in use
    for n in range(5):
        p, err, _ = idempotent("acme", n)
        assert err is None, f"acme producer {n}: {err}"
        kept.append(p)
    p, err, lines = idempotent("acme", 5)
    kept.append(p)
    assert err is not None, "acme's sixth idempotent producer delivered past its 5 producer ids"
    assert any("PID" in line and "Policy violation" in line for line in lines), lines[-10:]
    for n in range(7):
        p, err, _ = idempotent("globex", n)
        assert err is None, f"globex producer {n}: {err}"
        kept.append(p)
