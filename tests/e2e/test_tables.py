"""Table topics: a topic with floe.table.enable=true also lands in an Iceberg table of Parquet
files, served by Floe's REST catalog under /iceberg. Read here with pyiceberg (through the
catalog) and duckdb (the Parquet files directly), and compared with what Kafka consumers read."""

import base64
import json
import random
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import FLOE_BIN, consume_confluent, create_topic, metric_sum, unique_name, wait_until
from test_auth import PASSWORD, admin_tenants

pytest.importorskip("pyiceberg")
import duckdb  # noqa: E402
from confluent_kafka import Producer  # noqa: E402
from pyiceberg.catalog import load_catalog  # noqa: E402
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError  # noqa: E402

TABLE = {"floe.table.enable": "true", "floe.table.commit.interval.ms": "1000"}


def catalog(floe, token=None, **extra):
    properties = {"type": "rest", "uri": f"{floe.http_url}/iceberg", **extra}
    if token:
        properties["token"] = token
    return load_catalog("floe", **properties)


def rows_of(table) -> list[tuple]:
    """(partition, offset, key, value, headers) of every row, sorted."""
    data = table.scan().to_arrow().to_pylist()
    return sorted((r["_partition"], r["_offset"], r["_key"], r["_value"],
                   tuple((h["key"], h["value"]) for h in r["_headers"] or [])) for r in data)


def consumed_rows(bootstrap, topic, partitions) -> list[tuple]:
    got = consume_confluent(bootstrap, topic, partitions)
    out = []
    for partition, records in got.items():
        for offset, key, value, headers, _ts in records:
            out.append((partition, offset, key, value, tuple((k, v) for k, v in headers or [])))
    return sorted(out)


def wait_for_rows(load, count, timeout=60):
    """Reloads the table until it holds `count` rows; the table."""
    holder = {}

    def full():
        table = load()
        holder["table"] = table
        return table.current_snapshot() is not None and \
            int(table.current_snapshot().summary["total-records"]) >= count

    wait_until(full, timeout, f"a table of {count} rows", interval=0.5)
    return holder["table"]


def test_raw_table_holds_exactly_what_consumers_read(floe):
    topic = unique_name("sales.orders")
    create_topic(floe.bootstrap, topic, partitions=3, config={**TABLE, "floe.table.partition.by": "hour"})
    rng = random.Random(7)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    for i in range(3000):
        key = None if i % 7 == 0 else f"k{i}".encode()
        value = None if i % 11 == 0 else rng.randbytes(rng.randint(0, 120))
        headers = [("i", str(i).encode()), ("empty", None)] if i % 3 == 0 else None
        producer.produce(topic, key=key, value=value, headers=headers, partition=i % 3)
    producer.flush()
    # A transaction aborted: consumers (read_committed) never see its records, nor does the table.
    txn = Producer({"bootstrap.servers": floe.bootstrap, "transactional.id": unique_name("txn")})
    txn.init_transactions()
    txn.begin_transaction()
    for i in range(50):
        txn.produce(topic, value=b"aborted", partition=i % 3)
    txn.abort_transaction()
    for i in range(30):
        producer.produce(topic, value=b"after", partition=i % 3)
    producer.flush()

    expected = consumed_rows(floe.bootstrap, topic, 3)
    assert len(expected) == 3030
    namespace, name = topic.rsplit(".", 1)
    cat = catalog(floe)
    assert (namespace,) in cat.list_namespaces()
    assert (namespace, name) in cat.list_tables(namespace)
    table = wait_for_rows(lambda: cat.load_table(f"{namespace}.{name}"), len(expected))
    assert rows_of(table) == expected
    assert not any(r[3] == b"aborted" for r in rows_of(table))

    # duckdb reads the live data files directly and agrees.
    files = [p.removeprefix("file://") for p in table.inspect.files().column("file_path").to_pylist()]
    count, low, high = duckdb.sql(
        f"select count(*), min(_offset), max(_offset) from read_parquet({files!r})").fetchall()[0]
    assert (count, low, high) == (len(expected), 0, max(r[1] for r in expected))
    assert table.metadata.format_version == 2
    assert metric_sum(floe, "floe_table_lag_records") == 0
    listed = subprocess.run([FLOE_BIN, "admin", "tables", "--metadata", f"127.0.0.1:{floe.metadata_port}", "--json"],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    [view] = [v for v in json.loads(listed.stdout) if v["topic"] == topic]
    assert view["lag_records"] == 0 and view["version"] >= 1, view
    assert view["metadata_location"] == table.metadata_location, view
    # Partitioned by the hour of the record timestamp: each file holds one hour.
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("_timestamp_hour", "hour")]
    for entry in table.inspect.files().to_pylist():
        hours = duckdb.sql(f"select distinct epoch(_timestamp)::bigint // 3600 from "
                           f"read_parquet('{entry['file_path'].removeprefix('file://')}')").fetchall()
        assert hours == [(entry["partition"]["_timestamp_hour"],)], (hours, entry["partition"])
    assert table.metadata.properties["write.parquet.compression-codec"] == "zstd"

    # Writes are refused: the catalog lists only read endpoints, so pyiceberg does not send
    # them, and the server answers them 403.
    with pytest.raises(NotImplementedError):
        cat.drop_table(f"{namespace}.{name}")
    dropped = requests.delete(f"{floe.http_url}/iceberg/v1/namespaces/{namespace}/tables/{name}", timeout=10)
    assert dropped.status_code == 403, dropped.text
    denied = requests.post(f"{floe.http_url}/iceberg/v1/namespaces", json={"namespace": ["x"]}, timeout=10)
    assert denied.status_code == 403 and denied.json()["error"]["type"] == "ForbiddenException", denied.text
    with pytest.raises(NoSuchTableError):
        cat.load_table(f"{namespace}.missing")
    with pytest.raises(NoSuchNamespaceError):
        cat.list_tables("nowhere")


@pytest.mark.long
def test_sigkill_between_files_and_commit_leaves_no_gap_and_no_duplicate(floe_factory, tmp_path):
    """The agent is killed at random moments while the table job writes files and commits
    (a 1.5 s pause sits between the two), under a steady producer. The table ends up holding
    each consumed record once, and the files of commits that never landed are deleted."""
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tables-kill", object_store=f"file://{objects}", extra_args=[
        "--test-table-commit-delay-ms", "1500", "--orphan-grace-secs", "4", "--gc-interval-secs", "1"])
    topic = unique_name("events")
    create_topic(floe.bootstrap, topic, partitions=2, config=TABLE)
    rng = random.Random(11)
    cat = catalog(floe)

    def pending_files() -> bool:
        """Whether data files exist that the table's current metadata does not list: a
        commit is between its files and its commit."""
        try:
            current = cat.load_table(f"default.{topic}")
        except NoSuchTableError:
            return False
        listed = set(current.inspect.files().column("file_path").to_pylist()) if current.current_snapshot() else set()
        on_disk = {f"file://{p}" for p in Path(current.metadata.location.removeprefix("file://")).rglob("*.parquet")}
        return bool(on_disk - listed)

    sent = 0
    for round_ in range(5):
        producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 2, "enable.idempotence": True})
        for _ in range(400):
            producer.produce(topic, key=f"k{sent}".encode(), value=f"v{sent}".encode(), partition=sent % 2)
            sent += 1
        assert producer.flush(30) == 0
        if round_ % 2 == 1:
            # Right between a commit's files and its commit (the table exists by then).
            wait_until(pending_files, 20, "a table commit with its files written", interval=0.05)
        else:
            time.sleep(rng.uniform(0.2, 2.5))
        floe.kill()
        floe.start()
    expected = consumed_rows(floe.bootstrap, topic, 2)
    assert len(expected) == sent
    table = wait_for_rows(lambda: cat.load_table(f"default.{topic}"), sent, timeout=90)
    got = rows_of(table)
    assert len(got) == len(set((r[0], r[1]) for r in got)), "a row appears twice"
    assert got == expected
    commits = [s for s in table.metadata.snapshots]
    assert len(commits) >= 2, commits

    # Files no metadata refers to (written by commits the kills cut off) are collected.
    table_dir = Path(table.metadata.location.removeprefix("file://"))

    def only_reachable():
        current = cat.load_table(f"default.{topic}")
        live = {current.metadata_location}
        live |= {entry.metadata_file for entry in current.metadata.metadata_log}
        for snapshot in current.metadata.snapshots:
            live.add(snapshot.manifest_list)
            for manifest in snapshot.manifests(current.io):
                live.add(manifest.manifest_path)
        live |= set(current.inspect.all_files().column("file_path").to_pylist())
        on_disk = {f"file://{p}" for p in table_dir.rglob("*") if p.is_file()}
        return on_disk == live

    wait_until(only_reachable, 60, "only reachable table files left", interval=1)
    assert "deleted a table file no metadata refers to" in floe.log_path.read_text(errors="replace"), \
        "no commit was cut off between its files and its commit"


def tenant_key(floe, tenant):
    admin_tenants(floe, "create", tenant)
    admin_tenants(floe, "add-user", "--tenant", tenant, f"{tenant}-user", "--password-stdin", stdin=PASSWORD + "\n")
    token = json.loads(admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", f"{tenant}-user"))
    return token["token"]


def test_a_tenant_sees_and_loads_only_its_own_tables(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tables-tenants", object_store=f"file://{objects}",
                            extra_args=["--http-require-api-key", "--auth-failures-per-minute", "0"])
    keys = {tenant: tenant_key(floe, tenant) for tenant in ("acme", "globex")}
    for tenant, key in keys.items():
        headers = {"Authorization": f"Bearer {key}"}
        cluster_id = requests.get(f"{floe.http_url}/v3/clusters", headers=headers, timeout=10).json()["data"][0][
            "cluster_id"]
        base = f"{floe.http_url}/v3/clusters/{cluster_id}"
        body = {"topic_name": f"{tenant}.orders", "partitions_count": 1,
                "configs": [{"name": k, "value": v} for k, v in TABLE.items()]}
        created = requests.post(f"{base}/topics", json=body, headers=headers, timeout=30)
        assert created.status_code == 201, created.text
        for i in range(5):
            value = base64.b64encode(f"{tenant}-{i}".encode()).decode()
            r = requests.post(f"{base}/topics/{tenant}.orders/records", headers=headers, timeout=30,
                              json={"value": {"type": "BINARY", "data": value}})
            assert r.status_code == 200, r.text

    acme = catalog(floe, keys["acme"])
    table = wait_for_rows(lambda: acme.load_table("acme.orders"), 5)
    assert {r[3] for r in rows_of(table)} == {f"acme-{i}".encode() for i in range(5)}
    assert acme.list_namespaces() == [("acme",)]
    with pytest.raises(NoSuchTableError):
        acme.load_table("globex.orders")
    with pytest.raises(NoSuchNamespaceError):
        acme.list_tables("globex")
    globex_path = f"{floe.http_url}/iceberg/v1/namespaces/globex/tables/orders"
    assert requests.head(globex_path, headers={"Authorization": f"Bearer {keys['acme']}"}, timeout=10).status_code == 404
    assert requests.get(globex_path, timeout=10).status_code == 401, "no key"

    # OAuth2 client credentials (Spark's and Trino's `credential`) with the key's id and secret.
    key_id, secret = keys["globex"].removeprefix("fk_").split(".", 1)
    globex = catalog(floe, credential=f"{key_id}:{secret}")
    table = wait_for_rows(lambda: globex.load_table("globex.orders"), 5)
    assert {r[3] for r in rows_of(table)} == {f"globex-{i}".encode() for i in range(5)}
    wrong = requests.post(f"{floe.http_url}/iceberg/v1/oauth/tokens", timeout=10, data={
        "grant_type": "client_credentials", "client_id": key_id, "client_secret": "0" * len(secret)})
    assert wrong.status_code == 401, wrong.text
    # A body that is not a token request is a 400 with the OAuth2 error JSON, not plain text.
    for body, content_type in [("client_id=x", "application/x-www-form-urlencoded"), ("{}", "application/json")]:
        bad = requests.post(f"{floe.http_url}/iceberg/v1/oauth/tokens", data=body, timeout=10,
                            headers={"Content-Type": content_type})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_request", (bad.status_code, bad.text)


ORDER_V1 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "int"},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}]}], "default": None},
]}
# Adds an optional field and widens qty from int to long: both compatible.
ORDER_V2 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "qty", "type": "long"},
    {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "ship", "type": ["null", {"type": "record", "name": "Ship", "fields": [
        {"name": "city", "type": "string"}]}], "default": None},
    {"name": "note", "type": ["null", "string"], "default": None},
]}


def test_avro_table_has_typed_columns_evolves_and_keeps_undecodable_records_aside(floe):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = unique_name("shop.orders")
    create_topic(floe.bootstrap, topic, partitions=2, config=TABLE)
    sr = SchemaRegistryClient({"url": floe.http_url + "/schema-registry"})
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    ctx = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(sr, json.dumps(ORDER_V1))
    sent = {}
    for i in range(200):
        order = {"id": i, "qty": i % 7, "when": 1_700_000_000_000 + i, "tags": [f"t{i % 3}"] * (i % 3),
                 "ship": {"city": f"c{i}"} if i % 2 else None}
        producer.produce(topic, key=f"o{i}".encode(), value=v1(order, ctx), partition=i % 2)
        sent[i] = order
    producer.produce(topic, key=b"gone", value=None, partition=0)
    producer.produce(topic, key=b"junk", value=b"not an avro record", partition=1)
    producer.flush()
    v2 = AvroSerializer(sr, json.dumps(ORDER_V2))
    for i in range(200, 300):
        order = {"id": i, "qty": 5_000_000_000 + i, "when": 1_700_000_000_000 + i, "tags": [], "ship": None,
                 "note": f"n{i}"}
        producer.produce(topic, key=f"o{i}".encode(), value=v2(order, ctx), partition=i % 2)
        sent[i] = order
    producer.flush()

    # What a Kafka consumer reads, decoded with the registry.
    consumed = consume_confluent(floe.bootstrap, topic, 2)
    deserialize = AvroDeserializer(sr)
    expected = {}
    for partition, records in consumed.items():
        for offset, key, value, _headers, _ts in records:
            if value is None or value.startswith(b"not"):
                continue
            expected[(partition, offset)] = deserialize(value, ctx)
    assert len(expected) == 300

    namespace, name = topic.rsplit(".", 1)
    cat = catalog(floe)
    table = wait_for_rows(lambda: cat.load_table(f"{namespace}.{name}"), 301)
    schema = table.schema()
    assert str(schema.find_field("qty").field_type) == "long", schema
    assert str(schema.find_field("when").field_type) == "timestamptz", schema
    assert str(schema.find_field("ship").field_type).startswith("struct"), schema
    assert len(table.metadata.schemas) >= 2, "the table evolved"
    rows = {(r["_partition"], r["_offset"]): r for r in table.scan().to_arrow().to_pylist()}
    assert len(rows) == 301, "300 orders and the tombstone"
    for at, order in expected.items():
        row = rows[at]
        assert (row["id"], row["qty"], row["tags"] or []) == (order["id"], order["qty"], order["tags"]), (row, order)
        assert row["when"] == order["when"], (row, order)  # the deserializer reads timestamp-millis as a datetime
        assert row["ship"] == order["ship"], (row, order)
        assert row["note"] == order.get("note"), (row, order)
    tombstone = [r for r in rows.values() if r["_key"] == b"gone"]
    assert len(tombstone) == 1 and tombstone[0]["id"] is None

    # The record that does not decode is in the dead-letter table, with why.
    dead = wait_for_rows(lambda: cat.load_table(f"{namespace}.{name}__dlq"), 1).scan().to_arrow().to_pylist()
    assert [(r["_key"], r["_value"]) for r in dead] == [(b"junk", b"not an avro record")]
    assert "framing" in dead[0]["_error"], dead[0]

    files = [p.removeprefix("file://") for p in table.inspect.files().column("file_path").to_pylist()]
    (count,) = duckdb.sql(f"select count(*) from read_parquet({files!r}, union_by_name=true)").fetchall()[0]
    assert count == 301

    # A version the table cannot evolve to is refused at registration, even where the
    # subject's compatibility level would let it through.
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError
    sr.set_compatibility(subject_name=f"{topic}-value", level="NONE")
    v3 = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "qty", "type": "string"}]}
    with pytest.raises(SchemaRegistryError) as refused:
        sr.register_schema(f"{topic}-value", Schema(json.dumps(v3), "AVRO"))
    assert refused.value.http_status_code == 409 and "Iceberg" in refused.value.error_message, refused.value


def test_protobuf_table_has_typed_columns(floe):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    F = descriptor_pb2.FieldDescriptorProto
    pool = descriptor_pool.DescriptorPool()
    file = descriptor_pb2.FileDescriptorProto(name=f"{unique_name('reading')}.proto", package="floe.dev",
                                              syntax="proto3")
    kind = file.enum_type.add(name="Kind")
    kind.value.add(name="UNKNOWN", number=0)
    kind.value.add(name="HOT", number=1)
    place = file.message_type.add(name="Place")
    place.field.add(name="city", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message = file.message_type.add(name="Reading")
    message.field.add(name="device", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    message.field.add(name="celsius", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=F.TYPE_STRING, label=F.LABEL_REPEATED)
    message.field.add(name="count", number=4, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    message.field.add(name="kind", number=5, type=F.TYPE_ENUM, type_name=".floe.dev.Kind", label=F.LABEL_OPTIONAL)
    message.field.add(name="place", number=6, type=F.TYPE_MESSAGE, type_name=".floe.dev.Place",
                      label=F.LABEL_OPTIONAL)
    pool.Add(file)
    Reading = message_factory.GetMessageClass(pool.FindMessageTypeByName("floe.dev.Reading"))

    topic = unique_name("iot.readings")
    create_topic(floe.bootstrap, topic, partitions=2, config=TABLE)
    sr = SchemaRegistryClient({"url": floe.http_url + "/schema-registry"})
    serialize = ProtobufSerializer(Reading, sr, {"use.deprecated.format": False})
    ctx = SerializationContext(topic, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    for i in range(150):
        reading = Reading(device=f"d{i}", celsius=i / 4, tags=[f"t{j}" for j in range(i % 3)], count=i * 1_000_000_000,
                          kind=i % 2)
        if i % 5:
            reading.place.city = f"c{i}"
        producer.produce(topic, key=f"k{i}".encode(), value=serialize(reading, ctx), partition=i % 2)
    producer.flush()

    deserialize = ProtobufDeserializer(Reading, {"use.deprecated.format": False})
    expected = {}
    for partition, records in consume_confluent(floe.bootstrap, topic, 2).items():
        for offset, _key, value, _headers, _ts in records:
            expected[(partition, offset)] = deserialize(value, ctx)
    assert len(expected) == 150

    namespace, name = topic.rsplit(".", 1)
    cat = catalog(floe)
    table = wait_for_rows(lambda: cat.load_table(f"{namespace}.{name}"), 150)
    assert str(table.schema().find_field("count").field_type) == "long"
    rows = {(r["_partition"], r["_offset"]): r for r in table.scan().to_arrow().to_pylist()}
    assert rows.keys() == expected.keys()
    for at, reading in expected.items():
        row = rows[at]
        assert (row["device"], row["celsius"], row["tags"], row["count"]) == \
            (reading.device, reading.celsius, list(reading.tags), reading.count), row
        assert row["kind"] == ("HOT" if reading.kind == 1 else "UNKNOWN"), row
        assert row["place"] == ({"city": reading.place.city} if reading.HasField("place") else None), row


def test_table_on_s3_reads_through_the_catalog_config(floe_s3):
    """On an s3:// store the catalog hands out the S3 endpoint and region (never credentials):
    pyiceberg reads the Parquet files from the S3-compatible server with its own keys."""
    from conftest import S3_ENV

    floe = floe_s3
    topic = unique_name("s3.events")
    create_topic(floe.bootstrap, topic, partitions=2, config=TABLE)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 5})
    for i in range(500):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2)
    producer.flush()
    expected = consumed_rows(floe.bootstrap, topic, 2)
    cat = catalog(floe, **{"s3.access-key-id": S3_ENV["AWS_ACCESS_KEY_ID"],
                           "s3.secret-access-key": S3_ENV["AWS_SECRET_ACCESS_KEY"]})
    namespace, name = topic.rsplit(".", 1)
    table = wait_for_rows(lambda: cat.load_table(f"{namespace}.{name}"), len(expected))
    assert table.metadata_location.startswith(f"s3://{floe.moto.bucket}/floe/tables/"), table.metadata_location
    assert rows_of(table) == expected
    loaded = requests.get(f"{floe.http_url}/iceberg/v1/namespaces/{namespace}/tables/{name}", timeout=10).json()
    assert loaded["config"]["s3.endpoint"] == floe.moto.endpoint, loaded["config"]
    assert not any("secret" in key or "access-key" in key for key in loaded["config"]), loaded["config"]
    assert any(k.startswith("floe/tables/") and k.endswith(".parquet") for k in floe.moto.list_keys("floe/tables/"))


@pytest.mark.long
def test_small_files_and_manifests_merge_and_snapshots_expire_with_retention(floe):
    """Many small commits: small files are merged into larger ones, the manifest list stays
    bounded (merged past 16), snapshots older than retention.ms expire, and every record is
    still in the table once retention has deleted it from the topic (retention waits for the
    table)."""
    config = {**TABLE, "floe.table.commit.interval.ms": "150", "retention.ms": "3000",
              "floe.table.target.file.bytes": "1048576"}
    # Small records make small files (merged); 300 KB per commit makes files over a quarter
    # of the target (kept, their manifests merged).
    small, large = unique_name("small"), unique_name("large")
    for topic in (small, large):
        create_topic(floe.bootstrap, topic, partitions=1, config=config)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 1, "compression.type": "none"})
    produced = {small: [], large: []}
    rng = random.Random(3)
    cat = catalog(floe)
    for round_ in range(30):
        for i in range(10):
            value = f"r{round_}-{i}".encode()
            producer.produce(small, value=value, partition=0)
            produced[small].append(value)
            value = rng.randbytes(30_000)
            producer.produce(large, value=value, partition=0)
            produced[large].append(value)
        producer.flush()
        # Each round is its own commit, however slow the machine: merging needs more than 16
        # manifests, which a timed sleep did not guarantee on a loaded 2-core CI run.
        for topic, values in produced.items():
            wait_for_rows(lambda: cat.load_table(f"default.{topic}"), len(values), timeout=30)
    for topic, values in produced.items():
        table = wait_for_rows(lambda: cat.load_table(f"default.{topic}"), len(values), timeout=60)
        assert sorted(r[3] for r in rows_of(table)) == sorted(values)
        manifests = table.current_snapshot().manifests(table.io)
        assert len(manifests) <= 16, (topic, len(manifests))
    assert metric_sum(floe, "floe_table_files_merged_total") >= 8
    assert metric_sum(floe, "floe_table_manifest_merges_total") >= 1
    small_table = cat.load_table(f"default.{small}")
    assert int(small_table.current_snapshot().summary["total-data-files"]) < 20, small_table.current_snapshot()
    assert any(s.summary.operation.value == "replace" for s in small_table.metadata.snapshots)
    time.sleep(3.5)
    # One more commit expires what is older than retention.ms.
    producer.produce(small, value=b"last", partition=0)
    producer.flush()
    table = wait_for_rows(lambda: cat.load_table(f"default.{small}"), len(produced[small]) + 1)
    assert len(table.metadata.snapshots) < 10, [s.timestamp_ms for s in table.metadata.snapshots]
    assert sorted(r[3] for r in rows_of(table)) == sorted(produced[small] + [b"last"])


def table_view(floe, topic):
    """The topic's line of `floe admin tables --json`."""
    listed = subprocess.run([FLOE_BIN, "admin", "tables", "--metadata", f"127.0.0.1:{floe.metadata_port}", "--json"],
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    return next((v for v in json.loads(listed.stdout) if v["topic"] == topic), None)


def test_compacted_topic_becomes_an_upsert_table_with_one_row_per_key(floe):
    """A compacted topic's table holds the latest value of each key: updates replace the key's
    row (a position delete of the old one), tombstones remove it. Across many small commits
    (merged as they pile up) and an agent SIGKILL (the job rereads where each key's row is from
    the table's files), pyiceberg and duckdb (applying the delete files itself) see exactly
    the latest value per key."""
    topic = unique_name("customers")
    create_topic(floe.bootstrap, topic, partitions=2, config={
        **TABLE, "cleanup.policy": "compact", "floe.table.commit.interval.ms": "150",
        "floe.table.target.file.bytes": "1048576"})
    rng = random.Random(5)
    latest = {}
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 2})

    def send(i, value):
        key = f"c{i}".encode()
        producer.produce(topic, key=key, value=value, partition=i % 2)
        if value is None:
            latest.pop((i % 2, key), None)
        else:
            latest[(i % 2, key)] = value

    for i in range(300):
        send(i, f"v0-{i}".encode())
    assert producer.flush(30) == 0
    for round_ in range(14):
        # Some keys change twice in a round (one commit), some are deleted and come back.
        for _ in range(60):
            i = rng.randrange(300)
            send(i, None if rng.random() < 0.2 else f"v{round_ + 1}-{i}-{rng.random()}".encode())
        assert producer.flush(30) == 0
        time.sleep(0.3)
        if round_ == 7:
            floe.kill()
            floe.start()
            producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 2})
    wait_until(lambda: (table_view(floe, topic) or {}).get("lag_records") == 0, 60, "the table caught up",
               interval=0.5)

    cat = catalog(floe)
    table = cat.load_table(f"default.{topic}")
    assert table.metadata.properties["floe.table.mode"] == "upsert"
    rows = table.scan().to_arrow().to_pylist()
    got = {(r["_partition"], r["_key"]): r["_value"] for r in rows}
    assert len(got) == len(rows), "a key has two rows"
    assert got == latest
    operations = {s.summary.operation.value for s in table.metadata.snapshots}
    assert {"overwrite", "replace"} <= operations, operations
    assert int(table.current_snapshot().summary["total-position-deletes"]) > 0
    assert metric_sum(floe, "floe_table_rows_deleted_total") > 0

    # duckdb: the data files minus the rows the position delete files name.
    entries = table.inspect.files().to_pylist()
    local = lambda path: path.removeprefix("file://")  # noqa: E731
    data = [local(e["file_path"]) for e in entries if e["content"] == 0]
    deletes = [local(e["file_path"]) for e in entries if e["content"] == 1]
    assert deletes, "no position delete files"
    (live,) = duckdb.sql(
        f"select count(*) from read_parquet({data!r}, filename=true, file_row_number=true) d "
        f"anti join read_parquet({deletes!r}) x "
        f"on replace(x.file_path, 'file://', '') = d.filename and x.pos = d.file_row_number").fetchall()[0]
    assert live == len(latest)
