"""Links (issue 29): a source cluster (a second Floe, `floe dev`) mirrored into a Floe cluster with
identical offsets.

- While producers write keys, headers, five codecs, idempotent batches and transactions (one
  aborted) into the source, a link mirrors the matching topics; the agent running the link is
  SIGKILLed twice. At the end every partition holds the same batches at the same offsets on both
  sides (compared batch by batch over raw Fetch requests; only partitionLeaderEpoch, which each
  cluster stamps itself, is left out), read_committed consumers see the same records, and the
  copied group offsets match.
- A mirror topic refuses producers, naming the link, until the link is promoted; then it takes
  writes after the source's offsets. Failback over the operator API (`POST
  /v1/admin/links/NAME/reverse`) makes the old primary mirror the promoted side, cut back to the
  fork offsets (its writes the mirror never saw are dropped).
- A tenant's link (`--tenant`, `--acls`) between two clusters with SASL and ACLs: mirror topics
  land in the tenant's namespace under the source's names; a source topic past the tenant's
  partition quota is named in the link's error and nothing of it is created, while the others
  mirror; the source's ACLs on mirrored topics and groups are copied (a user reads with them
  alone) and follow deletions; failback with `floe admin links reverse` into the source's tenant.
- An unreachable source and wrong credentials show as the link's error in its status; a source
  that accepts connections and never answers holds up only its own link.
"""

import json
import struct
import subprocess
import time
import uuid

import pytest
import requests
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conftest import FLOE_BIN, create_topic, unique_name, wait_until
from helpers.kafka_wire import Writer, call

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def links_cli(cluster, *args, stdin=None, check=True):
    return links_at(cluster.metadata_addrs, *args, stdin=stdin, check=check)


def links_at(metadata, *args, stdin=None, check=True):
    """`floe admin links` against the metadata nodes `metadata` (HOST:PORT[,...])."""
    out = subprocess.run([FLOE_BIN, "admin", "links", "--metadata", metadata, *args],
                         input=stdin, capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def status(cluster, name):
    return json.loads(links_cli(cluster, "status", name).stdout)


def raw_batches(bootstrap, topic, partition, end):
    """Every batch of a partition up to `end`, over Fetch v12 read_uncommitted: (base offset,
    the batch without partitionLeaderEpoch)."""
    batches, offset = [], 0
    deadline = time.monotonic() + 60
    while offset < end:
        assert time.monotonic() < deadline, f"{topic}-{partition}: stuck at offset {offset} of {end}"
        # replica id, max wait, min bytes, max bytes, isolation (read_uncommitted), session, epoch
        body = Writer().i32(-1).i32(100).i32(1).i32(16 << 20).i8(0).i32(0).i32(-1)
        # One topic of one partition: current leader epoch, offset, last fetched epoch, log start, max bytes.
        body.uvarint(2).string(topic).uvarint(2)
        body.i32(partition).i32(-1).i64(offset).i32(-1).i64(-1).i32(8 << 20).tags().tags()
        body.uvarint(1).string("").tags()  # no forgotten topics, no rack
        r = call(bootstrap, 1, 12, body)
        r.i32(), r.i16(), r.i32()  # throttle, error, session
        records = None

        def partition_data(r):
            nonlocal records
            index, error = r.i32(), r.i16()
            r.i64(), r.i64(), r.i64()  # high watermark, last stable, log start
            r.array(lambda r: (r.i64(), r.i64(), r.tags()))
            r.i32()  # preferred read replica
            data = r.bytes()
            r.tags()
            assert error == 0, f"{topic}-{index}: error {error}"
            records = data or b""

        r.array(lambda r: (r.string(), r.array(partition_data), r.tags()))
        at = 0
        while at + 61 <= len(records):
            (base,) = struct.unpack_from(">q", records, at)
            (length,) = struct.unpack_from(">i", records, at + 8)
            whole = records[at:at + 12 + length]
            if len(whole) < 12 + length:
                break
            (delta,) = struct.unpack_from(">i", whole, 23)
            if base + delta >= offset:
                batches.append((base, whole[:12] + whole[16:]))
            offset = max(offset, base + delta + 1)
            at += 12 + length
    return batches


def high_watermarks(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "hw-" + uuid.uuid4().hex})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)]
    finally:
        c.close()


def committed_records(bootstrap, topic, partitions, expect):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-" + uuid.uuid4().hex,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + 90
    while len(got) < expect and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got.append((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ())))
    c.close()
    return sorted(got)


@pytest.mark.timeout(600)
def test_a_link_mirrors_every_batch_at_its_offset_through_agent_kills_and_promotes(cluster, floe_factory, tmp_path):
    operator = "operator-" + uuid.uuid4().hex
    (tmp_path / "operator-token").write_text(operator + "\n")
    source = floe_factory.new("source", object_store=f"file://{tmp_path}/source-objects",
                              extra_args=["--operator-token-file", str(tmp_path / "operator-token")])
    topic, skipped, partitions = unique_name("orders"), unique_name("private"), 3
    create_topic(source.bootstrap, topic, partitions, config={"retention.ms": "86400000"})
    create_topic(source.bootstrap, skipped, 1)
    links_cli(cluster, "create", "--name", "east", "--source-bootstrap", source.bootstrap,
              "--topics", "orders.*", "--groups", "app-.*")

    produced = 0

    def produce(conf, n, tag):
        nonlocal produced
        p = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 5, **conf})
        for i in range(n):
            p.produce(topic, key=f"{tag}-{i % 17}".encode(), value=f"{tag}-{i}-".encode() * (1 + i % 5),
                      headers=[("tag", tag.encode()), ("i", str(i).encode())])
            p.poll(0)
        assert p.flush(60) == 0
        produced += n

    runner = cluster.agents[1]
    for round_, codec in enumerate(CODECS):
        produce({"compression.type": codec, "enable.idempotence": True}, 300, codec)
        if round_ in (1, 3):
            # The agent running the link (the lowest id of the jobs role) dies mid-stream.
            runner.kill()
            time.sleep(1)
            runner.start()
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "mirror-txn", "linger.ms": 5})
    txn.init_transactions(30)
    for commit, n in ((True, 40), (False, 25), (True, 30)):
        txn.begin_transaction()
        for i in range(n):
            txn.produce(topic, key=f"t{i}".encode(), value=f"txn-{commit}-{i}".encode())
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    txn.flush(30)

    # A consumer group of the source, whose offsets the link copies.
    group = "app-" + uuid.uuid4().hex[:8]
    c = Consumer({"bootstrap.servers": source.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 500 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    c.commit(asynchronous=False)
    source_offsets = {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, p) for p in range(partitions)], 15)}
    c.close()

    source_ends = high_watermarks(source.bootstrap, topic, partitions)
    wait_until(lambda: high_watermarks(cluster.bootstrap(2), topic, partitions) == source_ends, 180,
               f"the mirror reaching the source's log ends {source_ends}")
    batches = markers = 0
    for p in range(partitions):
        here = raw_batches(cluster.bootstrap(2), topic, p, source_ends[p])
        there = raw_batches(source.bootstrap, topic, p, source_ends[p])
        assert [b[0] for b in here] == [b[0] for b in there], f"partition {p}: batch offsets differ"
        assert here == there, f"partition {p}: batch bytes differ"
        batches += len(there)
        # Attributes sit at byte 21 of a batch, 17 once partitionLeaderEpoch is cut out.
        markers += sum(1 for _, b in there if struct.unpack_from(">h", b, 17)[0] & 0x20)
    assert batches > 20 and markers >= 3, f"{batches} batches, {markers} transaction markers compared"
    expect = produced + 70
    mirrored = committed_records(cluster.bootstrap(2), topic, partitions, expect)
    assert len(mirrored) == expect, f"{len(mirrored)} committed records read, {expect} written"
    assert mirrored == committed_records(source.bootstrap, topic, partitions, expect)
    topics_here = [t["topic"] for t in status(cluster, "east")["topics"]]
    assert topics_here == [topic], f"only matching topics are mirrored: {topics_here}"

    def group_offsets_copied():
        c = Consumer({"bootstrap.servers": cluster.bootstrap(2), "group.id": group})
        try:
            got = c.committed([TopicPartition(topic, p) for p in range(partitions)], 15)
            return {tp.partition: tp.offset for tp in got} == source_offsets
        finally:
            c.close()
    wait_until(group_offsets_copied, 60, f"group {group}'s offsets copied: {source_offsets}")
    link = status(cluster, "east")
    assert link["lag"] == 0 and link["error"] is None, link

    # Producers are refused, with the link named, until it is promoted.
    errors = []
    p = Producer({"bootstrap.servers": cluster.bootstrap(1), "retries": 0})
    p.produce(topic, value=b"not yet", on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.INVALID_REQUEST, errors
    promoted = json.loads(links_cli(cluster, "promote", "east").stdout)
    assert promoted["state"] == "promoted"
    assert promoted["promoted"]["fork_offsets"][topic] == source_ends
    delivered = []
    p.produce(topic, partition=0, value=b"now", on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    p.flush(30)
    assert delivered == [(None, source_ends[0])], delivered

    # Failback. The old primary took writes the mirror never saw (lost to the failover); a link
    # back from the promoted side cuts them off at the fork offsets and catches up.
    lost = Producer({"bootstrap.servers": source.bootstrap})
    for i in range(10):
        lost.produce(topic, partition=1, value=f"never mirrored {i}".encode())
    assert lost.flush(30) == 0
    # Over the old primary's operator API, with the fork offsets the promoted side shows.
    reverse = f"{source.http_url}/v1/admin/links/back/reverse"
    op = {"Authorization": f"Bearer {operator}"}
    fork_offsets = status(cluster, "east")["promoted"]["fork_offsets"]
    bad = requests.post(reverse, headers=op, timeout=30,
                        json={"link": {"source_bootstrap": cluster.bootstrap(1), "topics": ".*"},
                              "fork_offsets": fork_offsets})
    assert bad.status_code == 400 and "topics" in bad.json()["message"], bad.text
    assert requests.post(reverse, json={"link": {"source_bootstrap": cluster.bootstrap(1)},
                                        "fork_offsets": fork_offsets}, timeout=30).status_code == 401
    r = requests.post(reverse, headers=op, timeout=30,
                      json={"link": {"source_bootstrap": cluster.bootstrap(1)}, "fork_offsets": fork_offsets})
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "mirroring" and r.json()["topics_pattern"].replace("\\", "") == topic, r.json()
    new_ends = high_watermarks(cluster.bootstrap(2), topic, partitions)
    wait_until(lambda: high_watermarks(source.bootstrap, topic, partitions) == new_ends, 120,
               f"the old primary back at the new primary's log ends {new_ends}")
    for p in range(partitions):
        assert raw_batches(source.bootstrap, topic, p, new_ends[p]) == \
            raw_batches(cluster.bootstrap(2), topic, p, new_ends[p]), f"partition {p} after failback"
    refused = []
    lost.produce(topic, value=b"a mirror again", on_delivery=lambda err, msg: refused.append(err))
    lost.flush(30)
    assert refused and refused[0] is not None, "the old primary is a mirror now"
    links_cli(cluster, "delete", "east")


@pytest.mark.timeout(240)
def test_an_unreachable_source_and_wrong_credentials_show_in_the_links_status(cluster, floe_factory, tmp_path):
    from conftest import free_port
    links_cli(cluster, "create", "--name", "nowhere", "--source-bootstrap", f"127.0.0.1:{free_port()}",
              "--topics", ".*")

    def error_of(name, needle):
        return needle in (status(cluster, name).get("error") or "")
    wait_until(lambda: error_of("nowhere", "connect"), 60, "the unreachable source reported")
    assert status(cluster, "nowhere")["topics"] == []

    password = "correct horse battery staple"
    source = floe_factory.new("secured", object_store=f"file://{tmp_path}/secured-objects",
                              extra_args=["--sasl-mechanisms", "SCRAM-SHA-512", "--auth-failures-per-minute", "0"])
    tenants = [FLOE_BIN, "admin", "tenants", "--metadata", f"127.0.0.1:{source.metadata_port}"]
    subprocess.run([*tenants, "create", "acme"], check=True, capture_output=True, timeout=30)
    subprocess.run([*tenants, "add-user", "--tenant", "acme", "alice", "--password-stdin"], input=password + "\n",
                   check=True, capture_output=True, text=True, timeout=30)
    links_cli(cluster, "create", "--name", "wrong", "--source-bootstrap", source.bootstrap, "--topics", ".*",
              "--source-sasl-mechanism", "SCRAM-SHA-512", "--source-sasl-username", "alice", stdin="not it\n")
    wait_until(lambda: error_of("wrong", "authentication"), 60, "refused credentials reported")
    # With the right password the same link mirrors the tenant's topic.
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
            "sasl.password": password}
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": source.bootstrap, **sasl})
    admin.create_topics([NewTopic("acme-events", num_partitions=1, replication_factor=1)])["acme-events"].result(30)
    p = Producer({"bootstrap.servers": source.bootstrap, **sasl})
    for i in range(10):
        p.produce("acme-events", value=str(i).encode())
    assert p.flush(30) == 0
    links_cli(cluster, "create", "--name", "wrong", "--source-bootstrap", source.bootstrap, "--topics", ".*",
              "--source-sasl-mechanism", "SCRAM-SHA-512", "--source-sasl-username", "alice", stdin=password + "\n")
    wait_until(lambda: high_watermarks(cluster.bootstrap(1), "acme-events", 1) == [10], 90, "mirrored over SCRAM")
    assert status(cluster, "wrong")["error"] is None
    bad = links_cli(cluster, "create", "--name", "bad", "--source-bootstrap", source.bootstrap, "--topics", "(",
                    check=False)
    assert bad.returncode != 0 and "pattern" in bad.stderr


@pytest.mark.timeout(300)
def test_a_tenant_link_copies_acls_and_keeps_to_the_tenants_quotas(floe_factory, tmp_path):
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                       ResourcePatternType, ResourceType)
    from test_acls import binding, conf, consume
    from test_auth import PASSWORD, admin_tenants

    secured = ["--sasl-mechanisms", "SCRAM-SHA-256", "--auth-failures-per-minute", "0", "--authorizer",
               "--super-users", "root"]
    source = floe_factory.new("acl-source", object_store=f"file://{tmp_path}/source-objects", extra_args=secured)
    dest = floe_factory.new("acl-dest", object_store=f"file://{tmp_path}/dest-objects", extra_args=secured)
    for floe, tenant, users in ((source, "src", ["root"]), (dest, "acme", ["root", "bob"])):
        admin_tenants(floe, "create", tenant)
        for user in users:
            admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    admin_tenants(dest, "set-quotas", "--tenant", "acme", "--partitions", "4")

    source_admin = AdminClient(conf(source, "root"))
    created = source_admin.create_topics([NewTopic("t-small", num_partitions=2, replication_factor=1),
                                          NewTopic("t-big", num_partitions=8, replication_factor=1),
                                          NewTopic("other", num_partitions=1, replication_factor=1)])
    for f in created.values():
        f.result(30)
    p = Producer(conf(source, "root"))
    for i in range(20):
        p.produce("t-small", value=f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    copied = [binding("TOPIC", "t-small", "bob", "READ"), binding("TOPIC", "t-", "bob", "DESCRIBE", pattern="PREFIXED"),
              binding("GROUP", "t-app", "bob", "READ")]
    for f in source_admin.create_acls([*copied, binding("TOPIC", "other", "bob", "READ")]).values():
        f.result(30)

    dest_meta, source_meta = f"127.0.0.1:{dest.metadata_port}", f"127.0.0.1:{source.metadata_port}"
    sasl_root = ["--source-sasl-mechanism", "SCRAM-SHA-256", "--source-sasl-username", "root"]
    links_at(dest_meta, "create", "--name", "acme-in", "--source-bootstrap", source.bootstrap, "--topics", "t-.*",
             "--groups", "t-.*", "--tenant", "acme", "--acls", *sasl_root, stdin=PASSWORD + "\n")

    def link():
        return json.loads(links_at(dest_meta, "status", "acme-in").stdout)

    def watermarks(floe, topic, partitions=2):
        c = Consumer({**conf(floe, "root"), "group.id": "hw-" + uuid.uuid4().hex})
        try:
            return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1] for p in range(partitions)]
        finally:
            c.close()

    wait_until(lambda: "t-big" in (link()["error"] or "") and [t["topic"] for t in link()["topics"]] == ["t-small"],
               60, "t-big refused by acme's partition quota while t-small is mirrored")
    error = link()["error"]
    assert "quota" in error and "acme" in error, error
    assert link()["tenant"] == "acme" and link()["acls"] is True
    # The tenant sees the source's names, and nothing of the refused topic.
    dest_admin = AdminClient(conf(dest, "root"))
    listed = dest_admin.list_topics(timeout=15).topics
    assert "t-small" in listed and "t-big" not in listed and "other" not in listed, sorted(listed)
    wait_until(lambda: watermarks(dest, "t-small") == [10, 10], 60, "t-small mirrored into acme")

    def key(b):
        return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)

    def acls_here():
        every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                 AclPermissionType.ANY)
        return sorted(map(key, dest_admin.describe_acls(every).result(30)))
    wait_until(lambda: acls_here() == sorted(map(key, copied)), 60, "the source's ACLs on t-* copied into acme")
    # The destination's authorizer closes what no ACL names: bob reads with the copied ACLs alone.
    got, errors = consume(dest, "bob", "t-small", "t-app", 20)
    assert len(got) == 20 and not errors, (len(got), errors)
    # A binding removed at the source goes here too.
    for f in source_admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "t-small", ResourcePatternType.LITERAL,
                                                        None, None, AclOperation.ANY,
                                                        AclPermissionType.ANY)]).values():
        f.result(30)
    wait_until(lambda: acls_here() == sorted(map(key, copied[1:])), 60, "a removed source ACL removed here")

    # Failover to acme, writes there, then failback with the CLI into the source's tenant.
    assert json.loads(links_at(dest_meta, "promote", "acme-in").stdout)["promoted"]["fork_offsets"] == \
        {"t-small": [10, 10]}
    p = Producer(conf(dest, "root"))
    for i in range(6):
        p.produce("t-small", value=f"after-{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    links_at(source_meta, "reverse", "--name", "back", "--promoted-link", "acme-in", "--promoted-metadata", dest_meta,
             "--source-bootstrap", dest.bootstrap, "--tenant", "src", *sasl_root, stdin=PASSWORD + "\n")
    wait_until(lambda: watermarks(source, "t-small") == [13, 13], 90, "the old primary caught up in tenant src")
    c = Consumer({**conf(source, "root"), "group.id": "check-" + uuid.uuid4().hex, "enable.auto.commit": False})
    c.assign([TopicPartition("t-small", p, 10) for p in range(2)])
    values, deadline = set(), time.monotonic() + 30
    while len(values) < 6 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            values.add(m.value().decode())
    c.close()
    assert values == {f"after-{i}" for i in range(6)}, values
    back = json.loads(links_at(source_meta, "status", "back").stdout)
    assert back["tenant"] == "src" and back["error"] is None and back["lag"] == 0, back


@pytest.mark.timeout(240)
def test_a_source_that_never_answers_does_not_hold_up_other_links(cluster, floe_factory, tmp_path):
    """Found in review: the links took their rounds in turn, so a source that accepts connections
    and never answers held every other link for its request timeout (30 s) each attempt."""
    import socket
    import threading

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held = []

    def accept_and_say_nothing():
        while True:
            try:
                conn, _ = silent.accept()
            except OSError:
                return
            held.append(conn)
    threading.Thread(target=accept_and_say_nothing, daemon=True).start()
    try:
        source = floe_factory.new("lively", object_store=f"file://{tmp_path}/lively-objects")
        topic = unique_name("lively")
        create_topic(source.bootstrap, topic, 1)
        links_cli(cluster, "create", "--name", "silent", "--source-bootstrap", f"127.0.0.1:{silent.getsockname()[1]}",
                  "--topics", ".*")
        time.sleep(1)  # the silent link's first round is waiting on its source
        links_cli(cluster, "create", "--name", "lively", "--source-bootstrap", source.bootstrap, "--topics", topic)
        p = Producer({"bootstrap.servers": source.bootstrap})
        for i in range(4):
            for j in range(10):
                p.produce(topic, value=f"{i}-{j}".encode())
            assert p.flush(30) == 0
            # Mirrored in well under a second when alone; the silent source's connection attempts
            # take 10 s each.
            wait_until(lambda i=i: high_watermarks(cluster.bootstrap(1), topic, 1) == [10 * (i + 1)], 5,
                       f"round {i} mirrored while the other link's source says nothing")
            time.sleep(1)
    finally:
        silent.close()
        for conn in held:
            conn.close()
