"""Table topics: a topic with floe.table.enable=true also lands in an Iceberg table of Parquet
files, served by Floe's REST catalog under /iceberg. Read here with pyiceberg (through the
catalog) and duckdb (the Parquet files directly), and compared with what Kafka consumers read."""

import base64
import random
import threading
import time
from pathlib import Path

import pytest
import requests

from conftest import consume_confluent, create_topic, unique_name, wait_until
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
    create_topic(floe.bootstrap, topic, partitions=3, config=TABLE)
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
        if round_ % 2 == 0:
            # Right between a commit's files and its commit.
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
    import json
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
