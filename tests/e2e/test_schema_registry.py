"""The schema registry every agent serves under /schema-registry (issue 24), driven by
confluent-kafka's own registry client and Avro serializers, unmodified.

What this covers: registering (same schema, same id, in every subject), reads by id, subject and
version, lookups, compatibility levels refusing what breaks readers (409) and the verbose check,
soft and permanent deletes with their error codes, modes, ids that survive a restart, Avro
records produced through Kafka with AvroSerializer and read back with AvroDeserializer, and two
tenants with the same subject name kept apart, and topics that validate records' schemas at
produce; JSON Schemas with the JSON serializers; Protobuf with the Protobuf serializers.
Schema-aware HTTP produce and `format=json` reads are in test_schema_http.py.
"""

import json

import pytest
import requests

from conftest import unique_name, wait_until
from test_auth import PASSWORD, admin_tenants

pytest.importorskip("fastavro")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import (  # noqa: E402
    ConfigCompatibilityLevel, Schema, SchemaRegistryClient, ServerConfig)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.error import SchemaRegistryError  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402


def user_v1():
    return {"type": "record", "name": "User", "namespace": "floe.test",
            "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}


def with_field(schema, field):
    s = json.loads(json.dumps(schema))
    s["fields"].append(field)
    return s


def registry(floe, **conf):
    return SchemaRegistryClient({"url": floe.http_url + "/schema-registry", **conf})


def read_raw(floe, topic, n, key=False, messages=False):
    """The first `n` values (keys) of `topic`, as bytes, read from the start by a new group
    (`messages`: the whole messages, headers included)."""
    consumer = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": unique_name("g"),
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        def read_all():
            m = consumer.poll(1)
            if m is not None and m.error() is None:
                got.append(m if messages else m.key() if key else m.value())
            return len(got) >= n
        wait_until(read_all, 60, f"{n} records of {topic} read back")
    finally:
        consumer.close()
    return got[:n]


def error_code(call):
    with pytest.raises(SchemaRegistryError) as e:
        call()
    return e.value.http_status_code, e.value.error_code


def test_a_registry_client_registers_reads_evolves_and_deletes(floe):
    sr = registry(floe)
    subject = unique_name("users") + "-value"
    v1 = Schema(json.dumps(user_v1()), "AVRO")
    schema_id = sr.register_schema(subject, v1)
    # The same schema, written differently, is the same id; in another subject too.
    spaced = Schema(json.dumps(user_v1(), indent=2, sort_keys=True), "AVRO")
    assert sr.register_schema(subject, spaced) == schema_id
    assert sr.register_schema(subject + "-copy", v1) == schema_id
    assert json.loads(sr.get_schema(schema_id).schema_str)["name"] == "User"
    latest = sr.get_latest_version(subject)
    assert (latest.schema_id, latest.version, latest.subject) == (schema_id, 1, subject)
    assert sr.lookup_schema(subject, v1).version == 1
    assert sorted(sr.get_subjects()) == sorted([subject, subject + "-copy"])
    assert sr.get_versions(subject) == [1]
    listed = requests.get(f"{floe.http_url}/schema-registry/schemas", params={"subjectPrefix": subject},
                          timeout=10).json()
    assert [(s["subject"], s["version"], s["id"]) for s in listed] == [(subject, 1, schema_id),
                                                                      (subject + "-copy", 1, schema_id)], listed
    paged = requests.get(f"{floe.http_url}/schema-registry/schemas",
                         params={"subjectPrefix": subject, "offset": 1, "limit": 5}, timeout=10).json()
    assert [s["subject"] for s in paged] == [subject + "-copy"], paged

    # BACKWARD (the default): a new field needs a default.
    no_default = Schema(json.dumps(with_field(user_v1(), {"name": "email", "type": "string"})), "AVRO")
    assert error_code(lambda: sr.register_schema(subject, no_default)) == (409, 409)
    assert sr.test_compatibility(subject, no_default) is False
    verbose = requests.post(f"{floe.http_url}/schema-registry/compatibility/subjects/{subject}/versions/latest",
                            params={"verbose": "true"}, json={"schema": no_default.schema_str}, timeout=10).json()
    assert verbose["is_compatible"] is False
    assert any("READER_FIELD_MISSING_DEFAULT_VALUE" in m for m in verbose["messages"]), verbose
    with_default = Schema(json.dumps(with_field(user_v1(), {"name": "email", "type": "string", "default": ""})),
                          "AVRO")
    v2_id = sr.register_schema(subject, with_default)
    assert v2_id != schema_id and sr.get_versions(subject) == [1, 2]
    # FORWARD: removing a field without a default breaks old readers; NONE takes anything.
    sr.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.FORWARD))
    assert sr.get_config(subject).compatibility_level == ConfigCompatibilityLevel.FORWARD
    dropped = Schema(json.dumps({**user_v1(), "fields": [{"name": "name", "type": "string"}]}), "AVRO")
    assert error_code(lambda: sr.register_schema(subject, dropped)) == (409, 409)
    sr.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    assert sr.register_schema(subject, Schema('"string"', "AVRO")) > v2_id
    bad = requests.put(f"{floe.http_url}/schema-registry/config/{subject}", json={"compatibility": "SIDEWAYS"},
                       timeout=10)
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42203)

    # Errors carry the registry's codes.
    assert error_code(lambda: sr.get_schema(999999)) == (404, 40403)
    assert error_code(lambda: sr.get_latest_version("nope-value")) == (404, 40401)
    assert error_code(lambda: sr.get_version(subject, 42)) == (404, 40402)
    assert error_code(lambda: sr.register_schema(subject, Schema('{"type":"nope"}', "AVRO"))) == (422, 42201)
    assert error_code(lambda: sr.register_schema(subject, Schema('{}', "PROTOBUF"))) == (422, 42201)
    # An alias that is not an Avro name: the Avro library panicked on it and the request got no
    # answer (found by the registry_body fuzz target).
    bad_alias = '{"type":"record","name":"R","aliases":["A: "],"fields":[]}'
    assert error_code(lambda: sr.register_schema(subject, Schema(bad_alias, "AVRO"))) == (422, 42201)

    # Deletes: soft first, then permanent; ids are not reused.
    assert error_code(lambda: sr.delete_subject(subject, permanent=True)) == (404, 40405)
    assert sr.delete_subject(subject) == [1, 2, 3]
    assert error_code(lambda: sr.delete_subject(subject)) == (404, 40404)
    assert subject not in sr.get_subjects()
    assert sr.delete_subject(subject, permanent=True) == [1, 2, 3]
    assert sr.get_schema(schema_id)  # still used by the copy subject

    # READONLY refuses changes.
    r = requests.put(f"{floe.http_url}/schema-registry/mode/{subject}-copy", json={"mode": "READONLY"}, timeout=10)
    assert r.status_code == 200 and r.json() == {"mode": "READONLY"}
    assert error_code(lambda: sr.register_schema(subject + "-copy", with_default)) == (422, 42205)

    # Everything survives a restart.
    floe.restart()
    sr = registry(floe)
    assert json.loads(sr.get_schema(schema_id).schema_str)["name"] == "User"
    assert sr.get_latest_version(subject + "-copy").schema_id == schema_id


def test_avro_records_round_trip_through_kafka_with_the_stock_serializers(floe):
    sr = registry(floe)
    topic = unique_name("avro")
    schema = json.dumps(with_field(user_v1(), {"name": "tags", "type": {"type": "array", "items": "string"},
                                               "default": []}))
    serializer = AvroSerializer(sr, schema)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    sent = [{"name": f"user-{i}", "age": i, "tags": [str(i)] * (i % 3)} for i in range(300)]
    for value in sent:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(60) == 0
    # The serializer registered under the topic's value subject.
    assert sr.get_latest_version(f"{topic}-value").version == 1

    deserializer = AvroDeserializer(registry(floe))
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert [deserializer(v, ctx) for v in read_raw(floe, topic, len(sent))] == sent


def tenant_key(floe, tenant):
    """Creates `tenant` with a user and an API key; the key as `KEYID:SECRET`."""
    admin_tenants(floe, "create", tenant)
    admin_tenants(floe, "add-user", "--tenant", tenant, f"{tenant}-user", "--password-stdin", stdin=PASSWORD + "\n")
    token = json.loads(admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", f"{tenant}-user"))
    return token["token"].replace(".", ":", 1)


def test_two_tenants_with_the_same_subject_stay_apart(floe_factory, tmp_path):
    """Also: --schema-registry-addr serves the same registries at the root of a port of its own,
    behind the same API keys."""
    from conftest import free_port
    objects = tmp_path / "objects"
    objects.mkdir()
    root_port = free_port()
    floe = floe_factory.new("floe-sr-tenants", object_store=f"file://{objects}",
                            extra_args=["--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key",
                                        "--schema-registry-addr", f"127.0.0.1:{root_port}"])
    root_clients = {}
    clients = {}
    for tenant in ("acme", "globex"):
        key = tenant_key(floe, tenant)
        clients[tenant] = registry(floe, **{"basic.auth.user.info": key})
        root_clients[tenant] = SchemaRegistryClient({"url": f"http://127.0.0.1:{root_port}",
                                                     "basic.auth.user.info": key})
    acme, globex = clients["acme"], clients["globex"]
    acme_id = acme.register_schema("orders-value", Schema('"string"', "AVRO"))
    acme.register_schema("orders-value", Schema('["null","string"]', "AVRO"))
    # Globex's registry is its own: no subjects, ids from 1, its own versions.
    assert globex.get_subjects() == []
    assert error_code(lambda: globex.get_latest_version("orders-value")) == (404, 40401)
    assert error_code(lambda: globex.get_schema(acme_id + 1)) == (404, 40403)
    assert globex.register_schema("orders-value", Schema('"long"', "AVRO")) == 1
    assert globex.get_versions("orders-value") == [1]
    assert acme.get_versions("orders-value") == [1, 2]
    # Without a key: 401.
    assert requests.get(f"{floe.http_url}/schema-registry/subjects", timeout=10).status_code == 401
    # The registry at the root of its own port: the same registries, the same keys.
    assert root_clients["acme"].get_versions("orders-value") == [1, 2]
    assert root_clients["globex"].get_latest_version("orders-value").schema_id == 1
    assert root_clients["acme"].register_schema("root-value", Schema('"int"', "AVRO")) > acme_id
    assert sorted(acme.get_subjects()) == ["orders-value", "root-value"]
    assert requests.get(f"http://127.0.0.1:{root_port}/subjects", timeout=10).status_code == 401
    assert requests.get(f"http://127.0.0.1:{root_port}/v3/clusters", timeout=10).status_code in (401, 404), \
        "only the registry is served there"


@pytest.mark.timeout(300)
def test_a_tenant_fills_only_its_share_of_the_registry(floe_factory, tmp_path):
    """A tenant may hold a tenth of the registry's 256 MiB of schemas (and of its 100,000
    schemas): past it a registration is refused with 42205 naming the limit, while another
    tenant goes on registering; a hard delete gives the room back."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-sr-limits", object_store=f"file://{objects}",
                            extra_args=["--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key"])
    acme, globex = (registry(floe, **{"basic.auth.user.info": tenant_key(floe, t)}) for t in ("acme", "globex"))

    def big(i):
        # About 1,000,000 bytes of text each, kept whole (a default is part of the schema).
        return Schema(json.dumps({"type": "record", "name": f"Big{i}", "fields": [
            {"name": "pad", "type": "string", "default": f"{i:08d}" + "x" * 999_000}]}), "AVRO")

    share = 256 * 1024 * 1024 // 10
    registered = 0
    while True:
        try:
            acme.register_schema(f"big-{registered}", big(registered))
            registered += 1
        except SchemaRegistryError as e:
            assert (e.http_status_code, e.error_code) == (422, 42205), e
            assert str(share) in e.error_message, e.error_message
            break
        assert registered * 999_000 <= share, f"{registered} schemas of about 1 MB each and no refusal"
    assert registered >= share // 1_000_000 - 1, registered
    # The other tenant's registry is untouched by acme's being full.
    for i in range(3):
        globex.register_schema(f"big-{i}", big(i))
    # A hard delete frees acme's room.
    acme.delete_subject("big-0")
    acme.delete_subject("big-0", permanent=True)
    acme.register_schema(f"big-{registered}", big(registered))
    assert error_code(lambda: acme.register_schema("one-more", big(registered + 1))) == (422, 42205)


def send_batch(bootstrap, topic, records, **conf):
    """Sends `records` ((key, value)) to partition 0 as one batch of one request; each record's
    delivery error name ("" when written), in order."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "batch.num.messages": len(records),
                  "message.timeout.ms": 20000, **conf})
    # Connected first: records queued before the connection is up may go out in smaller batches.
    p.list_topics(topic, timeout=10)
    results = {}
    for i, (key, value) in enumerate(records):
        p.produce(topic, key=key, value=value, partition=0,
                  on_delivery=lambda err, msg, i=i: results.__setitem__(i, err.name() if err else ""))
    p.flush(30)
    return [results.get(i, "undelivered") for i in range(len(records))]


def end_offset(bootstrap, topic):
    from confluent_kafka import TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_name("g")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


@pytest.mark.timeout(180)
def test_schema_guids_in_headers_are_validated_and_read_back(floe):
    """Confluent's GUID framing: a serializer with `header_schema_id_serializer` puts magic byte 1
    and the schema's GUID (from the registration's answer) in the `__value_schema_id` header and
    leaves the value unframed; the stock deserializer finds the schema by
    `GET /schemas/guids/{guid}`. Validation (id and full) takes such records, refuses a GUID
    that names nothing and a value that is not the schema's; `format=json` reads decode them.
    Before, registrations answered no GUID, so the serializer failed ("Schema GUID is not set")."""
    from conftest import create_topic
    from confluent_kafka.schema_registry import header_schema_id_serializer
    from test_schema_http import read_http_json

    sr = registry(floe)
    topic = unique_name("guids")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true",
                                                  "floe.schema.validation.mode": "full"})
    serialize = AvroSerializer(sr, json.dumps(user_v1()), conf={"schema.id.serializer": header_schema_id_serializer})
    headers = []
    ctx = SerializationContext(topic, MessageField.VALUE, headers)
    # (The stock deserializer wants more than 5 bytes even when the header names the schema.)
    value = serialize({"name": "ada lovelace", "age": 36}, ctx)
    assert [h[0] for h in headers] == ["__value_schema_id"] and headers[0][1][0] == 1, headers
    guid = str(__import__("uuid").UUID(bytes=headers[0][1][1:17]))
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.guid == guid, (latest.guid, guid)
    by_guid = requests.get(f"{floe.http_url}/schema-registry/schemas/guids/{guid}", timeout=10).json()
    assert by_guid["id"] == latest.schema_id and json.loads(by_guid["schema"]) == json.loads(latest.schema.schema_str)
    other = "00000000-0000-8000-8000-000000000000"
    assert requests.get(f"{floe.http_url}/schema-registry/schemas/guids/{other}", timeout=10).json()[
        "error_code"] == 40403

    bad_guid = [(h[0], b"\x01" + bytes(16)) for h in headers]
    p = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 1000})
    # Connected first: records queued before the connection is up may go out in smaller batches.
    p.list_topics(topic, timeout=10)
    results = {}
    for i, (v, hs) in enumerate([(value, headers), (value, bad_guid), (b"\xff" * 3, headers), (value, headers)]):
        p.produce(topic, value=v, headers=hs, partition=0,
                  on_delivery=lambda err, msg, i=i: results.__setitem__(i, err.name() if err else ""))
    p.flush(30)
    # The batch is refused whole; librdkafka names its good records _INVALID_DIFFERENT_RECORD.
    assert [results[i] for i in range(4)] == ["_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD",
                                              "_INVALID_DIFFERENT_RECORD"], results
    for i in range(3):
        p.produce(topic, value=value, headers=headers, partition=0,
                  on_delivery=lambda err, msg, i=i: results.__setitem__(10 + i, err.name() if err else ""))
    p.flush(30)
    assert [results[10 + i] for i in range(3)] == ["", "", ""], results
    # Two schema headers: Java's clients read the last, Python's the first, so neither is checked.
    p.produce(topic, value=value, headers=headers + bad_guid, partition=0,
              on_delivery=lambda err, msg: results.__setitem__("twice", err.name() if err else ""))
    p.flush(30)
    assert results["twice"] == "INVALID_RECORD", results

    got = read_raw(floe, topic, 3, messages=True)
    deserialize = AvroDeserializer(registry(floe))
    for m in got:
        assert deserialize(m.value(), SerializationContext(topic, MessageField.VALUE, m.headers())) == \
            {"name": "ada lovelace", "age": 36}
    shown = read_http_json(floe, topic)
    assert shown[0]["value"]["schema_id"] == latest.schema_id and shown[0]["value"]["data"] == {"name": "ada lovelace", "age": 36}


@pytest.mark.timeout(180)
def test_topics_with_schema_validation_refuse_records_without_a_registered_schema(floe):
    """Broker-side validation (Confluent Server's confluent.value.schema.validation and
    confluent.key.schema.validation): each non-null value (key) must carry the registry's framing
    naming a schema registered as a live version of the topic's subject; refused records are
    named (KIP-467) with INVALID_RECORD and the others may be sent again. Before, the configs were
    unknown and every record was written."""
    from confluent_kafka.admin import AdminClient
    from conftest import create_topic
    from confluent_kafka.schema_registry import topic_record_subject_name_strategy

    sr = registry(floe)
    topic, loose = unique_name("validated"), unique_name("loose")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true"})
    create_topic(floe.bootstrap, loose, 1)
    ser = AvroSerializer(sr, json.dumps(user_v1()))
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = [ser({"name": f"u{i}", "age": i}, ctx) for i in range(20)]
    other_id = sr.register_schema("elsewhere-value", Schema('"string"', "AVRO"))
    bad = {3: b"not avro at all", 7: b"\x01" + good[7][1:], 11: b"\x00" + (99999).to_bytes(4, "big") + good[11][5:],
           15: b"\x00" + other_id.to_bytes(4, "big") + b"\x02x"}
    sent = [(b"k", bad.get(i, v)) for i, v in enumerate(good)]
    for codec in ["none", "zstd", "lz4"]:
        got = send_batch(floe.bootstrap, topic, sent, **{"compression.type": codec})
        assert [i for i, e in enumerate(got) if e == "INVALID_RECORD"] == sorted(bad), (codec, got)
        assert all(e == "_INVALID_DIFFERENT_RECORD" for i, e in enumerate(got) if i not in bad), (codec, got)
    assert end_offset(floe.bootstrap, topic) == 0, "nothing of a refused batch is written"
    # The others, sent again, are written; a tombstone (null value) carries no schema and passes.
    assert send_batch(floe.bootstrap, topic, [s for i, s in enumerate(sent) if i not in bad] + [(b"k", None)]) \
        == [""] * 17
    assert end_offset(floe.bootstrap, topic) == 17
    # A topic without the config takes anything.
    assert send_batch(floe.bootstrap, loose, [(None, b"raw")]) == [""]

    # The setting is an ordinary topic config: described, and switched off at runtime.
    admin = AdminClient({"bootstrap.servers": floe.bootstrap})
    from confluent_kafka.admin import ConfigResource
    described = admin.describe_configs([ConfigResource("topic", topic)])
    configs = list(described.values())[0].result(timeout=10)
    assert configs["confluent.value.schema.validation"].value == "true"
    assert configs["floe.schema.validation.mode"].value == "id"

    # Full mode decodes the payload too: a truncated datum passes the id check, not full.
    full = unique_name("full")
    create_topic(floe.bootstrap, full, 1, config={"confluent.value.schema.validation": "true",
                                                 "floe.schema.validation.mode": "full"})
    sr.register_schema(f"{full}-value", Schema(json.dumps(user_v1()), "AVRO"))
    truncated = good[0][:-1]
    assert send_batch(floe.bootstrap, topic, [(b"k", truncated)]) == [""], "id mode does not decode"
    assert send_batch(floe.bootstrap, full, [(b"k", good[1]), (b"k", truncated), (b"k", good[2] + b"!")]) \
        == ["_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD"]
    assert send_batch(floe.bootstrap, full, [(b"k", good[1])]) == [""]

    # Keys too, with the TopicRecordNameStrategy: the subject is {topic}-{record full name}.
    keyed = unique_name("keyed")
    create_topic(floe.bootstrap, keyed, 1, config={
        "confluent.key.schema.validation": "true",
        "confluent.key.subject.name.strategy": "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"})
    key_ser = AvroSerializer(sr, json.dumps(user_v1()), conf={"subject.name.strategy": topic_record_subject_name_strategy})
    key = key_ser({"name": "k", "age": 1}, SerializationContext(keyed, MessageField.KEY))
    assert sr.get_latest_version(f"{keyed}-floe.test.User").version == 1
    # An id of a schema that names no record has no subject under this strategy. (Two refused
    # records: with one, librdkafka 2.16 reports INVALID_RECORD for the whole batch.)
    assert send_batch(floe.bootstrap, keyed, [(key, b"any value"), (bad[15], b"v"), (b"raw", b"v")]) \
        == ["_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD"]
    assert send_batch(floe.bootstrap, keyed, [(key, b"any value")]) == [""]

    # Over HTTP, each record has its own answer, naming why.
    import base64
    cluster = requests.get(f"{floe.http_url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    body = "\n".join(json.dumps({"partition_id": 0, "value": v}) for v in [
        {"type": "BINARY", "data": base64.b64encode(good[0]).decode()},
        {"type": "STRING", "data": "plain text"},
        {"type": "BINARY", "data": base64.b64encode(bad[11]).decode()}])
    r = requests.post(f"{floe.http_url}/v3/clusters/{cluster}/topics/{topic}/records", data=body,
                      headers={"Content-Type": "application/json"}, timeout=10)
    answers = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    assert [a.get("error_code") for a in answers] == [200, 422, 422], answers
    assert "framing" in answers[1]["message"] and "99999" in answers[2]["message"], answers


def test_a_schema_registered_through_one_agent_is_read_at_once_through_another_and_survives_kills(cluster):
    from conftest import port_open

    def client(a):
        return SchemaRegistryClient({"url": cluster.http_url(a) + "/schema-registry"})

    ids = []
    for i in range(20):
        subject = f"s{i}-value"
        ids.append(client(1).register_schema(subject, Schema(json.dumps(with_field(
            user_v1(), {"name": f"f{i}", "type": "int", "default": i})), "AVRO")))
        # Read through the other agent straight away: its mirror catches up on a miss.
        assert client(2).get_schema(ids[-1]).schema_str
        assert client(2).get_latest_version(subject).schema_id == ids[-1]
    assert ids == list(range(1, 21))
    # A record naming a schema registered through agent 1 a moment ago is accepted by agent 2
    # (topic with schema validation, HTTP produce so that agent 2 is the one that validates).
    import base64
    from conftest import create_topic
    topic = unique_name("validated")
    create_topic(cluster.bootstrap(1), topic, 1, config={"confluent.value.schema.validation": "true"})
    client(1).set_config(f"{topic}-value", ServerConfig(compatibility=ConfigCompatibilityLevel.NONE))
    cluster_id = requests.get(f"{cluster.http_url(2)}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
    for i in range(5):
        schema = {"type": "record", "name": "R", "fields": [{"name": f"f{i}", "type": "string"}]}
        schema_id = client(1).register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
        framed = b"\x00" + schema_id.to_bytes(4, "big") + b"\x02x"
        r = requests.post(f"{cluster.http_url(2)}/v3/clusters/{cluster_id}/topics/{topic}/records",
                          json={"partition_id": 0, "value": {"type": "BINARY", "data": base64.b64encode(framed).decode()}},
                          timeout=30)
        assert r.status_code == 200 and r.json().get("error_code") == 200, r.text
    leader = cluster.leader()
    cluster.meta[leader].kill()
    cluster.agents[1].kill()
    cluster.leader(exclude=(leader,))
    # Registrations go on through the surviving agent, with the next id.
    new_id = client(2).register_schema("after-value", Schema('"string"', "AVRO"))
    assert new_id == schema_id + 1
    cluster.meta[leader].start()
    cluster.agents[1].start()
    wait_until(lambda: port_open(cluster.http_ports[1]), 30, "agent 1 back")
    for i, schema_id in enumerate(ids):
        assert client(1).get_latest_version(f"s{i}-value").schema_id == schema_id
    assert client(1).get_schema(new_id).schema_str == '"string"'


def person(closed=False, **extra_properties):
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
              "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0},
                             **extra_properties},
              "required": ["name"]}
    if closed:
        schema["additionalProperties"] = False
    return json.dumps(schema)


@pytest.mark.timeout(180)
def test_json_schemas_evolve_validate_and_round_trip_with_the_stock_serializers(floe):
    """JSON Schema (issue 24): registered by confluent-kafka's JSONSerializer, read back by id by
    JSONDeserializer, evolved under Confluent's rules (a property added to an open content model
    is incompatible, to a closed one it is not), references by name, no remote $ref, and checked
    record by record on a topic with full schema validation."""
    from conftest import create_topic
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    sr = registry(floe)
    assert "JSON" in requests.get(f"{floe.http_url}/schema-registry/schemas/types", timeout=10).json()
    topic = unique_name("people")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true",
                                                  "floe.schema.validation.mode": "full"})
    serializer = JSONSerializer(person(), sr)
    ctx = SerializationContext(topic, MessageField.VALUE)
    sent = [{"name": f"p{i}", "age": i} for i in range(200)]
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    for value in sent:
        producer.produce(topic, value=serializer(value, ctx))
    assert producer.flush(60) == 0
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "JSON" and latest.version == 1
    # The same schema written differently is the same id.
    respaced = json.dumps(json.loads(person()), indent=3, sort_keys=True)
    assert sr.register_schema(f"{topic}-value", Schema(respaced, "JSON")) == latest.schema_id

    deserializer = JSONDeserializer(None, schema_registry_client=registry(floe))
    assert [deserializer(v, ctx) for v in read_raw(floe, topic, len(sent))] == sent

    # Full validation: documents the schema refuses are named, the others may be sent again.
    framed = lambda doc: b"\x00" + latest.schema_id.to_bytes(4, "big") + doc  # noqa: E731
    batch = [(None, framed(b'{"name":"ok"}')), (None, framed(b'{"age":3}')), (None, framed(b'{"name":"x","age":-1}')),
             (None, framed(b"not json"))]
    assert send_batch(floe.bootstrap, topic, batch) == \
        ["_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD", "INVALID_RECORD"]

    # Evolution under BACKWARD: a new property on an open content model may already have been
    # written with any value, so it is refused; on a closed model an optional one is fine.
    open_v2 = Schema(person(email={"type": "string"}), "JSON")
    assert error_code(lambda: sr.register_schema(f"{topic}-value", open_v2)) == (409, 409)
    verbose = requests.post(f"{floe.http_url}/schema-registry/compatibility/subjects/{topic}-value/versions/latest",
                            params={"verbose": "true"}, json={"schema": open_v2.schema_str, "schemaType": "JSON"},
                            timeout=10).json()
    assert any("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in m for m in verbose["messages"]), verbose
    closed = unique_name("closed") + "-value"
    sr.register_schema(closed, Schema(person(closed=True), "JSON"))
    assert sr.register_schema(closed, Schema(person(closed=True, email={"type": "string"}), "JSON")) > 0
    narrowed = Schema(person(closed=True, email={"type": "string"}).replace('"minimum": 0', '"minimum": 18'), "JSON")
    assert error_code(lambda: sr.register_schema(closed, narrowed)) == (409, 409)
    # A JSON schema is never compatible with an Avro one.
    assert error_code(lambda: sr.register_schema(closed, Schema('"string"', "AVRO"))) == (409, 409)

    # References by name; a remote $ref is never fetched; invalid JSON Schemas are refused.
    from confluent_kafka.schema_registry import SchemaReference
    address = json.dumps({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    sr.register_schema("address", Schema(address, "JSON"))
    order = json.dumps({"type": "object", "properties": {"ship_to": {"$ref": "address.json"}}})
    order_id = sr.register_schema("order-value", Schema(order, "JSON", [SchemaReference("address.json", "address", 1)]))
    assert sr.get_schema(order_id).references[0].name == "address.json"
    assert error_code(lambda: sr.register_schema("order2-value", Schema(order, "JSON"))) == (422, 42201)
    remote = json.dumps({"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/x.json"}}})
    assert error_code(lambda: sr.register_schema("remote-value", Schema(remote, "JSON"))) == (422, 42201)
    assert error_code(lambda: sr.register_schema("bad-value", Schema('{"type": "no-such-type"}', "JSON"))) \
        == (422, 42201)


def protobuf_classes():
    """Message classes for two .proto files (order.proto imports common.proto and the well-known
    timestamp.proto), built from descriptors: no protoc here."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    common = descriptor_pb2.FileDescriptorProto(name="common.proto", package="floe.common", syntax="proto3")
    money = common.message_type.add(name="Money")
    money.field.add(name="cents", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    money.field.add(name="currency", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(common)
    order_file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="floe.shop", syntax="proto3",
                                                    dependency=["common.proto", "google/protobuf/timestamp.proto"])
    order = order_file.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".floe.common.Money", label=F.LABEL_OPTIONAL)
    order.field.add(name="at", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                    label=F.LABEL_OPTIONAL)
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="lines", number=4, type=F.TYPE_MESSAGE, type_name=".floe.shop.Order.Line",
                    label=F.LABEL_REPEATED)
    pool.Add(order_file)
    get = message_factory.GetMessageClass
    return get(pool.FindMessageTypeByName("floe.shop.Order")), get(pool.FindMessageTypeByName("floe.shop.Order.Line"))


@pytest.mark.timeout(120)
def test_protobuf_schemas_import_google_type_and_confluent_files_without_registering_them(floe):
    """confluent-kafka's ProtobufSerializer never registers `google/type/` and `confluent/`
    imports (its built-ins), so the registry must know them: a message with a google.type.Date,
    a google.type.Money and a confluent.type.Decimal (through the public import of
    confluent/types/decimal.proto) registers, round-trips, and is checked in full validation.
    Before, the registration failed with 42201 (import not found)."""
    from conftest import create_topic
    from confluent_kafka.schema_registry.confluent.types import decimal_pb2  # noqa: F401 (loads the file)
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.type import date_pb2, money_pb2  # noqa: F401 (load the files into the default pool)

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(
        name=f"{unique_name('invoice')}.proto", package="floe.billing", syntax="proto3",
        dependency=["google/type/date.proto", "google/type/money.proto", "confluent/types/decimal.proto"])
    invoice = file.message_type.add(name="Invoice")
    invoice.field.add(name="due", number=1, type=F.TYPE_MESSAGE, type_name=".google.type.Date", label=F.LABEL_OPTIONAL)
    invoice.field.add(name="total", number=2, type=F.TYPE_MESSAGE, type_name=".google.type.Money",
                      label=F.LABEL_OPTIONAL)
    invoice.field.add(name="rate", number=3, type=F.TYPE_MESSAGE, type_name=".confluent.type.Decimal",
                      label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.Default()
    pool.Add(file)
    Invoice = message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.billing.Invoice"))

    sr = registry(floe)
    topic = unique_name("invoices")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true",
                                                  "floe.schema.validation.mode": "full"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    serialize = ProtobufSerializer(Invoice, sr, {"use.deprecated.format": False})
    sent = Invoice()
    sent.due.year, sent.due.month, sent.due.day = 2026, 12, 3
    sent.total.currency_code, sent.total.units = "EUR", 42
    sent.rate.value, sent.rate.precision, sent.rate.scale = b"\x01\x02", 5, 2
    producer = Producer({"bootstrap.servers": floe.bootstrap})
    producer.produce(topic, value=serialize(sent, ctx))
    assert producer.flush(30) == 0
    assert not any(s.startswith(("google/", "confluent/")) for s in sr.get_subjects()), sr.get_subjects()
    got = ProtobufDeserializer(Invoice, {"use.deprecated.format": False}, registry(floe))(read_raw(floe, topic, 1)[0], ctx)
    assert got == sent


@pytest.mark.timeout(180)
def test_protobuf_schemas_register_with_their_imports_and_round_trip_with_the_stock_serializers(floe):
    """Protobuf (issue 24): confluent-kafka's ProtobufSerializer registers the imported file under
    its own subject and the schema as a base64 descriptor (the well-known timestamp.proto is not
    registered: the registry knows it); records of a nested message carry message indexes; the
    ProtobufDeserializer reads them back through format=serialized; text and descriptor
    registrations of one file share an id; compatibility follows Confluent's Protobuf rules; and a
    topic with full validation refuses payloads that are not the schema's messages."""
    import base64
    from google.protobuf import descriptor_pb2
    from conftest import create_topic
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    Order, Line = protobuf_classes()
    sr = registry(floe)
    topic = unique_name("orders")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true",
                                                  "floe.schema.validation.mode": "full"})
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = ProtobufSerializer(Order, sr, {"use.deprecated.format": False})
    lines = ProtobufSerializer(Line, sr, {"use.deprecated.format": False})
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    sent_orders = []
    for i in range(100):
        o = Order(id=f"o{i}", lines=[Line(sku=f"s{i}")])
        o.total.cents, o.total.currency = i * 100, "EUR"
        o.at.seconds = 1_700_000_000 + i
        sent_orders.append(o)
        producer.produce(topic, value=orders(o, ctx))
    sent_lines = [Line(sku=f"line-{i}") for i in range(50)]
    for line in sent_lines:
        producer.produce(topic, value=lines(line, ctx))
    assert producer.flush(60) == 0

    assert "common.proto" in sr.get_subjects(), "the import is registered under its file name"
    assert not any(s.startswith("google/") for s in sr.get_subjects()), "well-known files are not registered"
    latest = sr.get_latest_version(f"{topic}-value")
    assert latest.schema.schema_type == "PROTOBUF" and latest.version == 1
    assert [r.name for r in latest.schema.references] == ["common.proto"]
    text = requests.get(f"{floe.http_url}/schema-registry/schemas/ids/{latest.schema_id}", timeout=10).json()["schema"]
    assert text.startswith('syntax = "proto3";') and "message Order" in text, text
    serialized = requests.get(f"{floe.http_url}/schema-registry/schemas/ids/{latest.schema_id}",
                              params={"format": "serialized"}, timeout=10).json()["schema"]
    fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized))
    assert [m.name for m in fdp.message_type] == ["Order"] and list(fdp.dependency)[0] == "common.proto"
    # The same file registered as .proto text is the same schema.
    refs = latest.schema.references
    assert sr.register_schema(f"{topic}-value", Schema(text, "PROTOBUF", refs)) == latest.schema_id

    order_de = ProtobufDeserializer(Order, {"use.deprecated.format": False}, registry(floe))
    line_de = ProtobufDeserializer(Line, {"use.deprecated.format": False}, registry(floe))
    raw = read_raw(floe, topic, len(sent_orders) + len(sent_lines))
    assert [order_de(v, ctx) for v in raw[:len(sent_orders)]] == sent_orders
    assert [line_de(v, ctx) for v in raw[len(sent_orders):]] == sent_lines

    # BACKWARD: a field's scalar kind changed across wire groups is refused, a field added is not.
    changed = text.replace("string id = 1;", "double id = 1;")
    assert changed != text
    assert error_code(lambda: sr.register_schema(f"{topic}-value", Schema(changed, "PROTOBUF", refs))) == (409, 409)
    added = text.replace("string id = 1;", "string id = 1;\n  string note = 9;")
    assert sr.register_schema(f"{topic}-value", Schema(added, "PROTOBUF", refs)) != latest.schema_id
    assert error_code(lambda: sr.register_schema("broken-value", Schema("message {", "PROTOBUF"))) == (422, 42201)

    # Full validation: the message indexes must name a message, and the bytes must be one.
    framed = lambda rest: b"\x00" + latest.schema_id.to_bytes(4, "big") + rest  # noqa: E731
    good = orders(sent_orders[0], ctx)
    assert send_batch(floe.bootstrap, topic, [(None, good), (None, framed(b"\x02\x0a")), (None, framed(b"\x00\xff\xff"))]) \
        == ["_INVALID_DIFFERENT_RECORD", "INVALID_RECORD", "INVALID_RECORD"]


def test_normalize_gives_reordered_writings_of_a_schema_one_id(floe):
    """`normalize=true` (Confluent's, as the registry client's `normalize.schemas` sends it, or a
    subject's config): a Protobuf schema with its fields, oneof and imports written in another
    order, and an Avro schema with its aliases in another order, get the id of the first."""
    client = registry(floe)
    proto_a = ('syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\nimport "google/protobuf/duration.proto";\n'
               "message Trip { string id = 1; google.protobuf.Timestamp at = 2; "
               "oneof fare { int64 cents = 3; string voucher = 4; } google.protobuf.Duration took = 5; }\n")
    proto_b = ('syntax = "proto3";\nimport "google/protobuf/duration.proto";\nimport "google/protobuf/timestamp.proto";\n'
               "message Trip { google.protobuf.Duration took = 5; oneof fare { string voucher = 4; int64 cents = 3; } "
               "google.protobuf.Timestamp at = 2; string id = 1; }\n")
    subject = unique_name("trips-value")
    first = client.register_schema(subject, Schema(proto_a, "PROTOBUF"), normalize_schemas=True)
    assert client.register_schema(subject, Schema(proto_b, "PROTOBUF"), normalize_schemas=True) == first
    assert client.lookup_schema(subject, Schema(proto_b, "PROTOBUF"), normalize_schemas=True).schema_id == first
    # Without normalizing, the other writing is another schema.
    other = unique_name("trips-value")
    plain = client.register_schema(other, Schema(proto_a, "PROTOBUF"))
    assert client.register_schema(other, Schema(proto_b, "PROTOBUF")) != plain

    # A subject whose config says normalize does it without being asked.
    avro_a = {"type": "record", "name": "Ride", "aliases": ["Trip", "Journey"], "fields": [{"name": "id", "type": "string"}]}
    avro_b = dict(avro_a, aliases=["Journey", "Trip"])
    subject = unique_name("rides-value")
    # (This client's ServerConfig has no normalize field: the REST call it would make.)
    answer = requests.put(f"{floe.http_url}/schema-registry/config/{subject}",
                          json={"compatibility": "BACKWARD", "normalize": True}, timeout=10)
    assert answer.status_code == 200, answer.text
    first = client.register_schema(subject, Schema(json.dumps(avro_a), "AVRO"))
    assert client.register_schema(subject, Schema(json.dumps(avro_b), "AVRO")) == first
