"""Schema-aware HTTP produce and reads (issue 24): a device sends JSON with a schema id, a
subject, a version, a schema type or a schema's text, and the agent writes what a Confluent
serializer would write, so confluent-kafka's stock deserializers read it through Kafka; data that
does not fit the schema is refused with 422 naming the place in it; `format=json` reads decode
records with their schema. Before, every schema field was refused with 422."""

import json

import pytest
import requests

from conftest import create_topic, unique_name
from test_schema_registry import person, read_raw, registry, user_v1, with_field

pytest.importorskip("fastavro")

from confluent_kafka.schema_registry import Schema  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402


def cluster_id(floe):
    return requests.get(f"{floe.http_url}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]


def post_records(floe, topic, records):
    """Each record's answer (one per line) from a produce of `records` to partition 0."""
    body = "\n".join(json.dumps({"partition_id": 0, **r}) for r in records)
    r = requests.post(f"{floe.http_url}/v3/clusters/{cluster_id(floe)}/topics/{topic}/records", data=body,
                      headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code in (200, 422), r.text
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


def read_kafka(floe, topic, n, deserializer, field=MessageField.VALUE):
    ctx = SerializationContext(topic, field)
    return [deserializer(v, ctx) for v in read_raw(floe, topic, n, key=field == MessageField.KEY)]


def read_http_json(floe, topic):
    r = requests.get(f"{floe.http_url}/v3/clusters/{cluster_id(floe)}/topics/{topic}/partitions/0/records",
                     params={"offset": "earliest", "format": "json"}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["records"]


@pytest.mark.timeout(180)
def test_devices_send_avro_as_json_and_stock_deserializers_read_it(floe):
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    sr = registry(floe)
    topic = unique_name("device-avro")
    create_topic(floe.bootstrap, topic, 1, config={"confluent.value.schema.validation": "true"})
    schema = with_field(user_v1(), {"name": "email", "type": ["null", "string"], "default": None})
    schema_id = sr.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
    answers = post_records(floe, topic, [
        {"value": {"schema_id": schema_id, "data": {"name": "a", "age": 1}}},
        # The subject's latest version, for a type alone; a union value wrapped or not.
        {"value": {"type": "AVRO", "data": {"name": "b", "age": 2, "email": "b@example.com"}}},
        {"value": {"subject": f"{topic}-value", "schema_version": 1,
                   "data": {"name": "c", "age": 3, "email": {"string": "c@example.com"}}}},
        {"value": {"schema_id": schema_id, "data": {"name": "d", "age": "old"}}},
        {"value": {"schema_id": 99999, "data": {"name": "e", "age": 5}}},
        {"value": {"type": "PROTOBUF", "schema_id": schema_id, "data": {}}},
        {"value": {"type": "BINARY", "schema_id": schema_id, "data": "AA=="}},
    ])
    assert [a["error_code"] for a in answers] == [200, 200, 200, 422, 422, 422, 422], answers
    assert "/age" in answers[3]["message"] and "integer" in answers[3]["message"], answers[3]
    assert "99999 not found" in answers[4]["message"], answers[4]
    assert "PROTOBUF" in answers[5]["message"] and "AVRO" in answers[5]["message"], answers[5]
    assert answers[0]["value"] == {"type": "AVRO", "size": answers[0]["value"]["size"], "schema_id": schema_id,
                                   "subject": f"{topic}-value", "schema_version": 1}, answers[0]

    want = [{"name": "a", "age": 1, "email": None}, {"name": "b", "age": 2, "email": "b@example.com"},
            {"name": "c", "age": 3, "email": "c@example.com"}]
    assert read_kafka(floe, topic, 3, AvroDeserializer(registry(floe))) == want
    # Over HTTP with format=json: Avro's JSON encoding (unions wrapped), with the schema id.
    shown = [r["value"] for r in read_http_json(floe, topic)]
    assert [(v["type"], v["schema_id"]) for v in shown] == [("AVRO", schema_id)] * 3
    assert [v["data"]["email"] for v in shown] == [None, {"string": "b@example.com"}, {"string": "c@example.com"}]

    # A key given as a schema's text is registered under the topic's key subject; records:bulk too.
    bulk = "\n".join(json.dumps({"partition_id": 0, "key": {"type": "AVRO", "schema": '"string"', "data": k},
                                 "value": {"schema_id": schema_id, "data": {"name": k, "age": 9}}})
                     for k in ["k1", "k2"])
    r = requests.post(f"{floe.http_url}/v3/clusters/{cluster_id(floe)}/topics/{topic}/records:bulk", data=bulk,
                      headers={"Content-Type": "application/x-ndjson"}, timeout=30)
    assert r.status_code == 200 and r.json()["error_count"] == 0, r.text
    key_version = sr.get_latest_version(f"{topic}-key")
    assert key_version.version == 1 and json.loads(key_version.schema.schema_str) == "string"
    keys = read_kafka(floe, topic, 5, AvroDeserializer(registry(floe)), field=MessageField.KEY)
    assert keys[3:] == ["k1", "k2"]


@pytest.mark.timeout(180)
def test_devices_send_json_schema_and_protobuf_data_as_json(floe):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    sr = registry(floe)
    people = unique_name("device-json")
    create_topic(floe.bootstrap, people, 1)
    sr.register_schema(f"{people}-value", Schema(person(closed=True), "JSON"))
    answers = post_records(floe, people, [
        {"value": {"type": "JSONSCHEMA", "data": {"name": "ada", "age": 36}}},
        {"value": {"type": "JSONSCHEMA", "data": {"name": "bob", "age": -1}}},
        {"value": {"type": "JSONSCHEMA", "data": {"name": "eve", "extra": True}}},
    ])
    assert [a["error_code"] for a in answers] == [200, 422, 422], answers
    assert "/age" in answers[1]["message"], answers[1]
    got = read_kafka(floe, people, 1, JSONDeserializer(None, schema_registry_client=registry(floe)))
    assert got == [{"name": "ada", "age": 36}]

    readings = unique_name("device-proto")
    create_topic(floe.bootstrap, readings, 1)
    text = 'syntax = "proto3";\npackage floe.dev;\nmessage Reading { string device = 1; double celsius = 2; ' \
           'repeated string tags = 3; }\n'
    answers = post_records(floe, readings, [
        {"value": {"type": "PROTOBUF", "schema": text, "data": {"device": "d1", "celsius": 21.5, "tags": ["a"]}}},
        {"value": {"type": "PROTOBUF", "data": {"device": "d2", "celsius": -3}}},
        {"value": {"type": "PROTOBUF", "data": {"device": "d3", "celsius": "warm"}}},
        {"value": {"type": "PROTOBUF", "data": {"device": "d4", "humidity": 3}}},
    ])
    assert [a["error_code"] for a in answers] == [200, 200, 422, 422], answers
    assert "/celsius" in answers[2]["message"] and "humidity" in answers[3]["message"], answers
    assert sr.get_latest_version(f"{readings}-value").schema.schema_type == "PROTOBUF"

    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="reading.proto", package="floe.dev", syntax="proto3")
    message = file.message_type.add(name="Reading")
    message.field.add(name="device", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="celsius", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    pool.Add(file)
    Reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.dev.Reading"))
    got = read_kafka(floe, readings, 2, ProtobufDeserializer(Reading, {"use.deprecated.format": False}))
    assert [(m.device, m.celsius, list(m.tags)) for m in got] == [("d1", 21.5, ["a"]), ("d2", -3.0, [])]
    shown = [r["value"] for r in read_http_json(floe, readings)]
    assert shown[0]["type"] == "PROTOBUF" and shown[0]["data"] == {"device": "d1", "celsius": 21.5, "tags": ["a"]}


@pytest.mark.timeout(120)
def test_devices_name_which_protobuf_message_they_send(floe):
    """`message_name` picks a message other than the schema's first (nested ones too); the
    message indexes written with it let the stock deserializer and `format=json` reads find it."""
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    sr = registry(floe)
    topic = unique_name("device-proto-messages")
    create_topic(floe.bootstrap, topic, 1)
    text = 'syntax = "proto3";\npackage floe.dev;\nmessage Reading { string device = 1; double celsius = 2; }\n' \
           'message Alert { string device = 1; Level level = 2; message Level { int32 n = 1; } }\n'
    schema_id = sr.register_schema(f"{topic}-value", Schema(text, "PROTOBUF"))
    answers = post_records(floe, topic, [
        {"value": {"schema_id": schema_id, "message_name": "floe.dev.Alert",
                   "data": {"device": "d1", "level": {"n": 3}}}},
        {"value": {"schema_id": schema_id, "message_name": "floe.dev.Alert.Level", "data": {"n": 7}}},
        {"value": {"schema_id": schema_id, "message_name": "floe.dev.Nope", "data": {}}},
        {"value": {"schema_id": schema_id, "message_name": "floe.dev.Alert", "data": {"celsius": 1}}},
    ])
    assert [a["error_code"] for a in answers] == [200, 200, 422, 422], answers
    assert "floe.dev.Nope" in answers[2]["message"], answers[2]
    # A name the schema does not define is refused before it names a subject to register under.
    answers = post_records(floe, topic, [
        {"value": {"type": "PROTOBUF", "schema": text, "message_name": "floe.dev.Nope",
                   "subject_name_strategy": "RECORD_NAME", "data": {}}},
    ])
    assert answers[0]["error_code"] == 422 and "floe.dev.Nope" in answers[0]["message"], answers
    assert "floe.dev.Nope" not in sr.get_subjects()

    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name="alerts.proto", package="floe.dev", syntax="proto3")
    reading = file.message_type.add(name="Reading")
    reading.field.add(name="device", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    alert = file.message_type.add(name="Alert")
    alert.field.add(name="device", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    alert.field.add(name="level", number=2, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".floe.dev.Alert.Level")
    level = alert.nested_type.add(name="Level")
    level.field.add(name="n", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    pool.Add(file)
    Alert = message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.dev.Alert"))
    Level = message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.dev.Alert.Level"))
    raw = read_raw(floe, topic, 2)
    # Message indexes after the 5-byte framing: [1] is count 1 then 1; [1, 0] count 2, 1, 0
    # (zigzag varints).
    assert raw[0][5:7] == b"\x02\x02" and raw[1][5:8] == b"\x04\x02\x00", raw
    ctx = SerializationContext(topic, MessageField.VALUE)
    got = ProtobufDeserializer(Alert, {"use.deprecated.format": False})(raw[0], ctx)
    assert (got.device, got.level.n) == ("d1", 3)
    assert ProtobufDeserializer(Level, {"use.deprecated.format": False})(raw[1], ctx).n == 7
    shown = [r["value"]["data"] for r in read_http_json(floe, topic)]
    assert shown == [{"device": "d1", "level": {"n": 3}}, {"n": 7}], shown
