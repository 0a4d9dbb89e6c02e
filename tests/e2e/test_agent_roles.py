"""Agent roles and agent groups (`floe agent --roles`, `--agent-group`): partition leaders,
coordinators and KIP-392 read replicas follow the roles of the agent a client reached, only jobs
agents run the storage jobs, and every client still reads everything."""

import random
import time

import pytest
import requests

from conftest import (Cluster, consume_confluent, consume_kafka_python, create_topic, make_records, produce,
                      unique_name, wait_until)
from conftest import agent_metric as metric


def profiles(cluster, a) -> dict[int, tuple[str, str]]:
    """Agent a's view of every live agent: {id: (roles, agent group)}."""
    body = requests.get(f"{cluster.http_url(a)}/v1/cluster", timeout=5).json()
    return {x["agent_id"]: (x["roles"], x["agent_group"]) for x in body.get("agents", [])}


def leaders(bootstrap, topic, client_id="roles-test"):
    """The partition leaders and the brokers of one agent's Metadata v12 answer, over a raw socket:
    a client library may send its Metadata request to another broker than the one bootstrapped."""
    import uuid
    from helpers.kafka_wire import Writer, call
    body = Writer().array([topic], lambda w, t: w.uuid(uuid.UUID(int=0)).string(t).tags())
    r = call(bootstrap, 3, 12, body.boolean(False).boolean(False).tags(), client_id=client_id)
    r.i32()  # throttle

    def broker(r):
        node, _host, _port, _rack = r.i32(), r.string(), r.i32(), r.string()
        r.tags()
        return node

    def partition(r):
        _error, _index, leader, _epoch = r.i16(), r.i32(), r.i32(), r.i32()
        r.array(lambda r: r.i32()), r.array(lambda r: r.i32()), r.array(lambda r: r.i32())
        r.tags()
        return leader

    def one_topic(r):
        error, _name, _id, _internal = r.i16(), r.string(), r.uuid(), r.i8()
        got = r.array(partition)
        r.i32()  # authorized operations
        r.tags()
        assert error == 0, error
        return got

    brokers = r.array(broker)
    r.string(), r.i32()  # cluster id, controller
    (partitions,) = r.array(one_topic)
    return set(partitions), set(brokers)


def coordinator(bootstrap, key_type, key):
    """FindCoordinator v4 for one key: the node id named."""
    from helpers.kafka_wire import Writer, call
    body = Writer().i8(key_type).array([key], lambda w, k: w.string(k)).tags()
    r = call(bootstrap, 10, 4, body)
    r.i32()  # throttle

    def one(r):
        got = (r.string(), r.i32(), r.string(), r.i32(), r.i16(), r.string())
        r.tags()
        return got
    (k, node, _host, _port, error, message), = r.array(one)
    assert error == 0, (error, message)
    return node


@pytest.fixture
def split(request, tmp_path):
    """Agent 1 produces, agent 2 fetches and runs the jobs; both in zone a."""
    roles = {1: "produce", 2: "fetch,jobs"}
    c = Cluster(tmp_path, agent_args=lambda a: ["--roles", roles[a]], zones=("a", "a"))
    request.node._aux_logs = [(p.name, p.log) for p in [*c.meta.values(), *c.agents.values()]]
    try:
        c.start()
        # The roles count once every metadata node applies format 9 and the agents said theirs.
        want = {1: ("produce", ""), 2: ("fetch,jobs", "")}
        for a in (1, 2):
            wait_until(lambda a=a: profiles(c, a) == want, 30, f"agent {a} seeing both agents' roles")
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(240)
def test_roles_steer_leaders_coordinators_and_read_replicas(split):
    c = split
    topic = unique_name("roles")
    create_topic(c.bootstrap(1), topic, 8)
    # Producers bootstrapped to the produce agent are led there, consumers at the fetch agent there.
    assert leaders(c.bootstrap(1), topic) == ({1}, {1, 2})
    assert leaders(c.bootstrap(2), topic) == ({2}, {1, 2})
    # Groups are coordinated by fetch agents, transactions by produce agents, whoever is asked.
    for via in (1, 2):
        assert coordinator(c.bootstrap(via), 0, unique_name("g")) == 2
        assert coordinator(c.bootstrap(via), 1, unique_name("txn")) == 1

    recs = make_records(random.Random(28), 400, 8, "roles", int(time.time() * 1000))
    produce(c.bootstrap(1), topic, recs)
    out_before = {a: metric(c, a, "floe_broker_topic_bytes_out_total") for a in (1, 2)}
    # A Fetch from a rack the fetch agent serves, sent to the produce agent, names the fetch
    # agent its preferred read replica (KIP-392) and carries no records.
    assert preferred_read_replica(c.bootstrap(1), topic, rack="a") == (2, 0)
    assert metric(c, 1, "floe_fetch_read_replica_redirects_total") >= 1
    # librdkafka with client.rack reads every record from the fetch agent: redirected there, or
    # led there by a Metadata answer of the fetch agent (which it also reaches as the group's
    # coordinator), as it chooses.
    got = consume_confluent_rack(c.bootstrap(1), topic, 8, rack="a")
    assert sum(len(v) for v in got.values()) == 400
    moved = {a: metric(c, a, "floe_broker_topic_bytes_out_total") - out_before[a] for a in (1, 2)}
    assert moved[1] == 0 and moved[2] > 0, f"record bytes served per agent: {moved}"
    # A client that names no rack (kafka-python) is served by the agent it asks, redirects or not.
    got = consume_kafka_python(c.bootstrap(1), topic, 8, timeout=120)
    assert sum(len(v) for v in got.values()) == 400
    # Only the jobs agent bids for the job lease: the produce agent never runs garbage collection.
    wait_until(lambda: metric(c, 2, "floe_agent_job_runner") == 1, 30, "the jobs agent running the jobs")
    assert metric(c, 1, "floe_agent_job_runner") == 0


def preferred_read_replica(bootstrap, topic, rack):
    """Fetch v12 of partition 0 from offset 0 with `rack`, over a raw socket: the preferred read
    replica named and the record bytes answered."""
    from helpers.kafka_wire import Writer, call

    def partition(w, p):
        # partition, current leader epoch, fetch offset, last fetched epoch, log start, max bytes
        w.i32(p).i32(-1).i64(0).i32(-1).i64(-1).i32(1 << 20).tags()

    def one_topic(w, t):
        w.string(t).array([0], partition).tags()

    # replica id, max wait, min bytes, max bytes, isolation, session id and epoch
    body = Writer().i32(-1).i32(100).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1)
    body.array([topic], one_topic).array([], lambda w, x: None).string(rack).tags()
    r = call(bootstrap, 1, 12, body)
    r.i32(), r.i16(), r.i32()  # throttle, error, session id

    def read_partition(r):
        _index, error, _hw, _lso, _start = r.i32(), r.i16(), r.i64(), r.i64(), r.i64()
        r.array(lambda r: (r.i64(), r.i64(), r.tags()))  # aborted transactions
        replica, records = r.i32(), r.bytes()
        r.tags()
        assert error == 0, error
        return replica, len(records or b"")

    def read_topic(r):
        _name, parts = r.string(), r.array(read_partition)
        r.tags()
        return parts

    ((answer,),) = r.array(read_topic)
    return answer


def consume_confluent_rack(bootstrap, topic, partitions, rack):
    """consume_confluent with client.rack set."""
    import conftest
    original = conftest.confluent_consumer

    def with_rack(b, extra=None):
        return original(b, {**(extra or {}), "client.rack": rack})
    conftest.confluent_consumer = with_rack
    try:
        return consume_confluent(bootstrap, topic, partitions)
    finally:
        conftest.confluent_consumer = original


@pytest.mark.timeout(180)
def test_agent_groups_keep_their_clients(tmp_path, request):
    """Two agent groups sharing one metadata cluster: each group's clients are told of its own
    agents only, and both read the same topics."""
    groups = {1: "blue", 2: "green"}
    c = Cluster(tmp_path, agent_args=lambda a: ["--agent-group", groups[a]], zones=("a", "a"))
    request.node._aux_logs = [(p.name, p.log) for p in [*c.meta.values(), *c.agents.values()]]
    try:
        c.start()
        want = {1: ("produce,fetch,jobs", "blue"), 2: ("produce,fetch,jobs", "green")}
        wait_until(lambda: profiles(c, 1) == want, 30, "both agents' groups applied")
        topic = unique_name("groups")
        create_topic(c.bootstrap(1), topic, 4)
        wait_until(lambda: leaders(c.bootstrap(1), topic) == ({1}, {1}), 20, "blue clients see blue agents")
        wait_until(lambda: leaders(c.bootstrap(2), topic) == ({2}, {2}), 20, "green clients see green agents")
        recs = make_records(random.Random(5), 100, 4, "groups", int(time.time() * 1000))
        produce(c.bootstrap(1), topic, recs)
        assert sum(len(v) for v in consume_confluent(c.bootstrap(2), topic, 4).values()) == 100
    finally:
        c.stop()
