"""ACLs with `--authorizer`: bindings made with Kafka's CreateAcls (confluent-kafka and
kafka-python admin clients) decide what each user of a tenant may do, on the Kafka listener and
over HTTP alike; a tenant's ACLs are its own.

- A user with no ACL can do nothing: produce, consume, list topics, join a group, start a
  transaction, describe or create ACLs are all refused with the Kafka authorization errors, and
  over HTTP with 403; nothing is written.
- Granted Write on a prefix and Read on one topic and group, the same user produces (idempotent)
  and consumes exactly what it may, and sees only those topics in listings; a DENY wins.
- DeleteAcls takes the rights away again.
- Schema registry subjects are a resource of their own (SUBJECT, managed over HTTP's
  /v3/clusters/{id}/acls since Kafka's protocol has no code for it): without an ACL a user sees
  no subject and reads, registers or configures none, over the registry API and through HTTP
  produce with a schema; granted Read and Write on some, exactly those.
"""

from __future__ import annotations

import json
import time

import pytest
import requests

from test_auth import PASSWORD, admin_tenants

SUPER = "root"


@pytest.fixture
def guarded(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-acls", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256,PLAIN", "--http-require-api-key", "--auth-failures-per-minute", "0",
        "--authorizer", "--super-users", f"{SUPER},{SUPER}2"])
    floe.keys = {}
    for tenant, users in {"acme": [SUPER, "alice", "bob"], "globex": [f"{SUPER}2"]}.items():
        admin_tenants(floe, "create", tenant)
        for user in users:
            admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    for user in ("alice", SUPER):
        out = admin_tenants(floe, "create-api-key", "--tenant", "acme", "--user", user)
        floe.keys[user] = json.loads(out)["token"]
    return floe


def conf(floe, user):
    return {"bootstrap.servers": floe.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": PASSWORD}


def admin(floe, user):
    from confluent_kafka.admin import AdminClient
    return AdminClient(conf(floe, user))


def binding(resource_type, name, user, operation, permission="ALLOW", pattern="LITERAL"):
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)
    return AclBinding(getattr(ResourceType, resource_type), name, getattr(ResourcePatternType, pattern),
                      f"User:{user}", "*", getattr(AclOperation, operation), getattr(AclPermissionType, permission))


def produce(floe, user, topic, values):
    """Delivery errors by value: None for delivered."""
    from confluent_kafka import KafkaException, Producer
    p = Producer({**conf(floe, user), "enable.idempotence": True, "message.timeout.ms": 15000})
    results = {}

    def report(err, msg):
        results[msg.value().decode()] = err

    try:
        for v in values:
            p.produce(topic, value=v.encode(), on_delivery=report)
        p.flush(30)
    except KafkaException as e:
        # A refused producer id is fatal to an idempotent producer: nothing it holds is sent.
        return {v: results.get(v, e.args[0]) for v in values}
    return results


def consume(floe, user, topic, group, expected):
    """Values read, and the errors the consumer reported."""
    from confluent_kafka import Consumer
    c = Consumer({**conf(floe, user), "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got, errors = [], []
    deadline = time.monotonic() + 20
    # Expecting nothing, it waits for the error that says why.
    while time.monotonic() < deadline and (len(got) < expected or (expected == 0 and not errors)):
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error())
        else:
            got.append(m.value().decode())
    if got:
        c.commit(asynchronous=False)
    c.close()
    return got, errors


def watermarks(floe, topic):
    """High watermarks of `topic`'s two partitions, as the super user sees them."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({**conf(floe, SUPER), "group.id": "watermarks"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(2)]
    finally:
        c.close()


def kafka_python_describe(floe, user, principal=None):
    """(bindings, error) of DescribeAcls for `principal` (any when None), asked by `user`."""
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                             ResourcePatternFilter, ResourceType)
    client = KafkaAdminClient(bootstrap_servers=floe.bootstrap, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=PASSWORD)
    try:
        pattern = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
        return client.describe_acls(ACLFilter(principal=principal, host=None, operation=ACLOperation.ANY,
                                              permission_type=ACLPermissionType.ANY, resource_pattern=pattern))
    except Exception as e:  # kafka-python raises some errors instead of returning them
        return [], e
    finally:
        client.close()


def http(floe, method, path, user="alice", **kwargs):
    headers = {"Authorization": f"Bearer {floe.keys[user]}", **kwargs.pop("headers", {})}
    clusters = requests.get(f"{floe.http_url}/v3/clusters", headers=headers, timeout=10).json()
    cluster_id = clusters["data"][0]["cluster_id"]
    return requests.request(method, f"{floe.http_url}/v3/clusters/{cluster_id}{path}", headers=headers,
                            timeout=30, **kwargs)


def test_acls_decide_what_each_user_may_do_over_kafka_and_http(guarded):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AclBindingFilter, NewTopic, ResourcePatternType, ResourceType, AclOperation, \
        AclPermissionType

    root = admin(guarded, SUPER)
    for topic in ("orders", "payments"):
        root.create_topics([NewTopic(topic, 2)])[topic].result(30)

    # Without ACLs alice can do nothing, not even see the topics.
    alice = admin(guarded, "alice")
    assert not {"orders", "payments"} & set(alice.list_topics(timeout=10).topics)
    refused = produce(guarded, "alice", "orders", ["no-1"])
    assert refused["no-1"] is not None, refused
    assert refused["no-1"].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED), \
        refused
    with pytest.raises(KafkaException) as denied:
        alice.create_topics([NewTopic("alices", 1)])["alices"].result(30)
    assert denied.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    # librdkafka drops DescribeAcls' top-level error; kafka-python shows it.
    assert alice.describe_acls(everything).result(30) == []
    assert kafka_python_describe(guarded, "alice")[1].errno == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    created = alice.create_acls([binding("TOPIC", "orders", "alice", "READ")])
    with pytest.raises(KafkaException) as denied:
        list(created.values())[0].result(30)
    assert denied.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    r = http(guarded, "POST", "/topics/orders/records", json={"value": {"type": "STRING", "data": "no"}})
    assert r.status_code == 403 and r.json()["error_code"] == 403, r.text

    # The super user grants: Write on every topic starting "ord", Read on orders and group
    # billing, and an explicit DENY of Read on payments that beats a wildcard allow.
    grants = [
        binding("TOPIC", "ord", "alice", "WRITE", pattern="PREFIXED"),
        binding("TOPIC", "orders", "alice", "READ"),
        binding("GROUP", "billing", "alice", "READ"),
        binding("TOPIC", "*", "alice", "DESCRIBE"),
        binding("TOPIC", "payments", "alice", "READ", permission="DENY"),
    ]
    for future in root.create_acls(grants).values():
        future.result(30)

    # kafka-python, an independent client, describes the same bindings.
    acls, error = kafka_python_describe(guarded, SUPER, "User:alice")
    assert error.errno == 0, error
    described = sorted((a.resource_pattern.resource_type.name, a.resource_pattern.resource_name,
                        a.resource_pattern.pattern_type.name, a.operation.name, a.permission_type.name) for a in acls)
    assert described == sorted([
        ("TOPIC", "ord", "PREFIXED", "WRITE", "ALLOW"), ("TOPIC", "orders", "LITERAL", "READ", "ALLOW"),
        ("GROUP", "billing", "LITERAL", "READ", "ALLOW"), ("TOPIC", "*", "LITERAL", "DESCRIBE", "ALLOW"),
        ("TOPIC", "payments", "LITERAL", "READ", "DENY")]), described

    # Now alice writes orders (an idempotent producer: Write on some topic suffices) but not payments.
    values = [f"v-{i}" for i in range(30)]
    delivered = produce(guarded, "alice", "orders", values)
    assert all(err is None for err in delivered.values()) and len(delivered) == 30, delivered
    refused = produce(guarded, "alice", "payments", ["p-1"])
    assert refused["p-1"] is not None and refused["p-1"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    r = http(guarded, "POST", "/topics/orders/records", json={"value": {"type": "STRING", "data": "over-http"}})
    assert r.status_code == 200, r.text
    r = http(guarded, "POST", "/topics/payments/records", json={"value": {"type": "STRING", "data": "no"}})
    assert r.status_code == 403, r.text

    # She reads orders in group billing; payments is denied though Describe lists it.
    got, errors = consume(guarded, "alice", "orders", "billing", 31)
    assert sorted(got) == sorted(values + ["over-http"]), (got, errors)
    got, errors = consume(guarded, "alice", "payments", "billing", 0)
    assert not got and any(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors), errors
    got, errors = consume(guarded, "alice", "orders", "other-group", 0)
    assert not got and any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in errors), errors
    assert {"orders", "payments"} <= set(alice.list_topics(timeout=10).topics)
    r = http(guarded, "GET", "/topics/payments/partitions/0/records", params={"offset": "earliest"})
    assert r.status_code == 403, r.text
    r = http(guarded, "GET", "/topics/orders/partitions/0/records", params={"offset": "earliest"})
    assert r.status_code == 200, r.text

    # bob has no ACLs: he still sees nothing, and payments holds nothing alice sent.
    bob = admin(guarded, "bob")
    assert not {"orders", "payments"} & set(bob.list_topics(timeout=10).topics)
    assert watermarks(guarded, "payments") == [0, 0]
    assert sum(watermarks(guarded, "orders")) == 31

    # Transactions need Write on their transactional id.
    from confluent_kafka import Producer
    with pytest.raises(KafkaException) as denied:
        Producer({**conf(guarded, "alice"), "transactional.id": "alice-txn"}).init_transactions(20)
    assert denied.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    # Another tenant's super user sees none of acme's bindings.
    assert admin(guarded, f"{SUPER}2").describe_acls(everything).result(30) == []
    assert len(root.describe_acls(everything).result(30)) == 5

    # DeleteAcls with a filter takes alice's Write away; her produce is refused again.
    write_filter = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:alice", None,
                                    AclOperation.WRITE, AclPermissionType.ANY)
    deleted = root.delete_acls([write_filter])[write_filter].result(30)
    assert [(d.name, d.resource_pattern_type) for d in deleted] == [("ord", ResourcePatternType.PREFIXED)], deleted
    before = watermarks(guarded, "orders")
    refused = produce(guarded, "alice", "orders", ["late"])
    assert refused["late"] is not None, refused
    assert watermarks(guarded, "orders") == before
    r = http(guarded, "POST", "/topics/orders/records", json={"value": {"type": "STRING", "data": "x"}})
    assert r.status_code == 403, r.text


def registry_call(floe, method, path, user="alice", **kwargs):
    headers = {"Authorization": f"Bearer {floe.keys[user]}", **kwargs.pop("headers", {})}
    return requests.request(method, f"{floe.http_url}/schema-registry{path}", headers=headers, timeout=30, **kwargs)


def test_registry_subjects_are_authorized_by_subject_acls(guarded):
    """Before, any key of a tenant could read, register and configure every subject of it."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, NewTopic, \
        ResourcePatternType, ResourceType

    user_schema = json.dumps({"type": "record", "name": "U", "fields": [{"name": "n", "type": "string"}]})
    ids = {}
    for subject, schema in (("orders-value", user_schema), ("secret-value", '"string"')):
        r = registry_call(guarded, "POST", f"/subjects/{subject}/versions", user=SUPER, json={"schema": schema})
        assert r.status_code == 200, r.text
        ids[subject] = r.json()["id"]
    secret_id = ids["secret-value"]

    # No subject ACL: alice sees and does nothing in the registry.
    assert registry_call(guarded, "GET", "/subjects").json() == []
    for method, path, body in [("GET", "/subjects/orders-value/versions", None),
                               ("GET", "/subjects/orders-value/versions/latest", None),
                               ("GET", f"/schemas/ids/{ids['orders-value']}", None),
                               ("POST", "/subjects/orders-value/versions", {"schema": '"long"'}),
                               ("PUT", "/config/orders-value", {"compatibility": "NONE"}),
                               ("PUT", "/config", {"compatibility": "NONE"}),
                               ("DELETE", "/subjects/orders-value", None)]:
        r = registry_call(guarded, method, path, json=body)
        assert (r.status_code, r.json().get("error_code")) == (403, 40301), (method, path, r.text)
    assert http(guarded, "GET", "/acls").status_code == 403, "listing ACLs needs Describe on the cluster"

    # root grants Read and Write on the orders subjects (a prefix), over HTTP.
    for operation in ("READ", "WRITE"):
        r = http(guarded, "POST", "/acls", user=SUPER, json={
            "resource_type": "SUBJECT", "resource_name": "orders-", "pattern_type": "PREFIXED",
            "principal": "User:alice", "host": "*", "operation": operation, "permission": "ALLOW"})
        assert r.status_code == 201, r.text
    listed = http(guarded, "GET", "/acls", user=SUPER, params={"resource_type": "SUBJECT"}).json()["data"]
    assert sorted(a["operation"] for a in listed) == ["READ", "WRITE"], listed
    assert registry_call(guarded, "GET", "/subjects").json() == ["orders-value"]
    assert registry_call(guarded, "GET", f"/schemas/ids/{ids['orders-value']}").status_code == 200
    assert registry_call(guarded, "GET", f"/schemas/ids/{secret_id}").status_code == 403
    r = registry_call(guarded, "POST", "/subjects/orders-value/versions",
                      json={"schema": json.dumps({"type": "record", "name": "U", "fields": [
                          {"name": "n", "type": "string"}, {"name": "m", "type": "int", "default": 0}]})})
    assert r.status_code == 200, r.text
    assert registry_call(guarded, "POST", "/subjects/secret-value/versions",
                         json={"schema": '"long"'}).status_code == 403
    assert registry_call(guarded, "PUT", "/config/orders-value", json={"compatibility": "NONE"}).status_code == 403

    # HTTP produce with a schema is authorized the same way.
    root = admin(guarded, SUPER)
    root.create_topics([NewTopic("readings", 1)])["readings"].result(30)
    for created in root.create_acls([binding("TOPIC", "readings", "alice", "WRITE")]).values():
        created.result(30)
    ok = http(guarded, "POST", "/topics/readings/records",
              json={"value": {"subject": "orders-value", "data": {"n": "x", "m": 1}}})
    assert ok.status_code == 200, ok.text
    refused = http(guarded, "POST", "/topics/readings/records",
                   json={"value": {"schema_id": secret_id, "data": "x"}})
    assert refused.status_code == 422 and "not authorized" in refused.json()["message"], refused.text

    # Kafka's DescribeAcls and DeleteAcls of any type stand for Kafka's types: subject ACLs
    # are neither shown to Kafka clients nor deleted by them.
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    shown = root.describe_acls(everything).result(30)
    assert [b.name for b in shown] == ["readings"], shown
    root.delete_acls([everything])[everything].result(30)
    assert len(http(guarded, "GET", "/acls", user=SUPER).json()["data"]) == 2

    # Deleting them over HTTP takes alice's rights away again.
    assert http(guarded, "DELETE", "/acls", user=SUPER).status_code == 400, "a bare DELETE names what it deletes"
    gone = http(guarded, "DELETE", "/acls", user=SUPER, params={
        "resource_type": "SUBJECT", "pattern_type": "ANY", "operation": "ANY", "permission": "ANY"}).json()["data"]
    assert len(gone) == 2, gone
    assert registry_call(guarded, "GET", "/subjects").json() == []


def metadata_request(floe, user, request):
    """The answer to one Metadata `request` of a fixed version (kafka-python's encoding), sent
    as `user`."""
    from kafka.admin import KafkaAdminClient
    client = KafkaAdminClient(bootstrap_servers=floe.bootstrap, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username=user, sasl_plain_password=PASSWORD)

    async def send():
        return await client._manager.send(request)

    try:
        return client._manager.run(send)
    finally:
        client.close()


def test_old_metadata_versions_neither_list_nor_create_what_acls_forbid(guarded):
    """Found in review (failed before the fix): Metadata v0's empty list asks for every topic and
    was not filtered by ACLs, and Metadata v0-v3 (which cannot refuse auto-creation) created
    topics for a user without Create."""
    from confluent_kafka.admin import NewTopic
    from kafka.protocol.metadata import MetadataRequest
    floe = guarded
    root = admin(floe, SUPER)
    for f in root.create_topics([NewTopic(t, 1) for t in ("visible", "hidden")]).values():
        f.result(30)
    acls = [binding("TOPIC", "visible", "alice", "DESCRIBE"), binding("TOPIC", "alice-", "alice", "DESCRIBE",
                                                                      pattern="PREFIXED")]
    for f in root.create_acls(acls).values():
        f.result(30)
    listed = [t.name for t in metadata_request(floe, "alice", MetadataRequest[0](topics=[])).topics]
    assert listed == ["visible"], listed
    for version in (1, 3):
        topic = f"alice-new-v{version}"
        asked = MetadataRequest[version](topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
        answer = metadata_request(floe, "alice", asked)
        # UNKNOWN_TOPIC_OR_PARTITION: Create is refused, so nothing was created.
        assert [(t.name, t.error_code) for t in answer.topics] == [(topic, 3)], answer
        assert topic not in root.list_topics(timeout=10).topics


def test_group_configs_need_describe_and_alter_configs_on_the_group(guarded):
    """Describing a group's configs needs DescribeConfigs on the group, altering them
    AlterConfigs: without, GROUP_AUTHORIZATION_FAILED, and nothing changes."""
    from confluent_kafka import KafkaException
    from test_share_groups import alter_group_configs, describe_group_configs

    floe = guarded
    root = admin(floe, SUPER)

    def refused(call):
        try:
            call()
        except KafkaException as e:
            return e.args[0].code() == 30  # GROUP_AUTHORIZATION_FAILED  # noqa: PLR2004
        return False

    alice = conf(floe, "alice")
    assert refused(lambda: describe_group_configs(floe.bootstrap, "workers", alice))
    assert refused(lambda: alter_group_configs(floe.bootstrap, "workers", {"share.isolation.level": "read_committed"},
                                               alice))
    for f in root.create_acls([binding("GROUP", "workers", "alice", "DESCRIBE_CONFIGS")]).values():
        f.result(10)
    assert describe_group_configs(floe.bootstrap, "workers", alice)["share.isolation.level"][0] == "read_uncommitted"
    assert refused(lambda: alter_group_configs(floe.bootstrap, "workers", {"share.isolation.level": "read_committed"},
                                               alice))
    for f in root.create_acls([binding("GROUP", "workers", "alice", "ALTER_CONFIGS")]).values():
        f.result(10)
    alter_group_configs(floe.bootstrap, "workers", {"share.isolation.level": "read_committed"}, alice)
    assert describe_group_configs(floe.bootstrap, "workers", alice)["share.isolation.level"][0] == "read_committed"


def test_share_groups_need_read_on_the_group_and_the_topic(guarded):
    """A share consumer reads only with Read on its share group and on the topic, as a
    consumer group member does: without the group ACL it gets nothing and hears why."""
    import threading

    from confluent_kafka import AcknowledgeType, ShareConsumer
    from confluent_kafka.admin import NewTopic

    floe = guarded
    root = admin(floe, SUPER)
    for f in root.create_topics([NewTopic("jobs", 1)]).values():
        f.result(30)
    for f in root.create_acls([binding("TOPIC", "jobs", "alice", "READ")]).values():
        f.result(10)

    def share_read(group, expected):
        errors = []
        c = ShareConsumer({**conf(floe, "alice"), "group.id": group, "share.acknowledgement.mode": "explicit",
                           "error_cb": lambda e: errors.append(e)})
        c.subscribe(["jobs"])
        got = []
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline and (len(got) < expected or (expected == 0 and not errors)):
                try:
                    messages = c.poll(0.5) or []
                except Exception as e:  # the client raises what the broker refused
                    errors.append(e)
                    messages = []
                for m in messages:
                    if m.error():
                        errors.append(m.error())
                        continue
                    got.append(m.value().decode())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if messages:
                    c.commit_sync()
        finally:
            c.close()
        return got, errors

    got, errors = share_read("workers", 0)
    assert not got and any("GROUP_AUTHORIZATION" in str(e).upper() or "AUTHORIZ" in str(e).upper()
                           for e in errors), errors
    for f in root.create_acls([binding("GROUP", "workers", "alice", "READ")]).values():
        f.result(10)
    # The share group starts at the log end: the records come after it first fetched.
    def produce_later():
        time.sleep(4)
        assert all(err is None for err in produce(floe, SUPER, "jobs", ["a", "b", "c"]).values())

    t = threading.Thread(target=produce_later)
    t.start()
    c_got, errors = share_read("workers", 3)
    t.join()
    assert sorted(c_got) == ["a", "b", "c"], (c_got, errors)
