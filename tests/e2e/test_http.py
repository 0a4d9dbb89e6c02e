"""The HTTP API (gateway/): edge clients produce over HTTP and Kafka clients read exactly that.

- Records produced over HTTP in every shape (single, streamed over a chunked body with each
  report arriving before the body ends, NDJSON bulk with gzip and zstd bodies, retried under an
  Idempotency-Key) are read back byte-exact and once by confluent-kafka and kafka-python.
- Raw bytes (application/octet-stream, and Floe's length-prefixed framing of many records) are
  read back as sent.
- Keys land in the partition confluent-kafka's murmur2 partitioner picks.
- A request retried under the same Idempotency-Key through another agent gets the original
  offsets and writes nothing; a different body under that key is refused.
- Bad requests get the right status and a JSON body, and write nothing.
- Reads: a long-poll woken by a Kafka producer, Server-Sent Event streams of a partition (resumed
  with Last-Event-ID) and of a topic, read_committed leaving out an aborted transaction.
- Admin: topics created, altered and deleted over HTTP are what Kafka's admin client sees;
  offsets committed over HTTP are where a Kafka consumer of that group starts.
- schemathesis finds no server error and no response that breaks /openapi.json.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import random
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import requests
import zstandard

from conftest import (
    consume_confluent,
    consume_kafka_python,
    create_topic,
    unique_name,
    wait_until,
    watermarks,
)

JSON = {"Content-Type": "application/json"}
NDJSON = {"Content-Type": "application/x-ndjson"}


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


class Api:
    """The REST v3 paths of one agent."""

    def __init__(self, base: str):
        self.base = base
        # 503 until the agent's metadata mirror has the cluster.
        wait_until(lambda: requests.get(f"{base}/v3/clusters", timeout=10).status_code == 200, 30, "cluster id")
        self.cluster_id = requests.get(f"{base}/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]

    def url(self, path: str) -> str:
        return f"{self.base}/v3/clusters/{self.cluster_id}{path}"

    def records(self, topic: str) -> str:
        return self.url(f"/topics/{topic}/records")

    def create_topic(self, name: str, partitions: int, configs: dict | None = None):
        body = {"topic_name": name, "partitions_count": partitions,
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}
        r = requests.post(self.url("/topics"), json=body, timeout=30)
        assert r.status_code == 201, r.text
        return r.json()


def record(i: int, rng: random.Random, partition: int | None = None) -> tuple[dict, tuple]:
    """An HTTP record and what a Kafka client should read back: (key, value, headers, timestamp)."""
    key = None if i % 5 == 0 else f"key-{i}".encode()
    value = rng.randbytes(rng.randint(0, 200))
    headers = [("idx", str(i).encode())]
    if i % 3 == 0:
        headers.append(("idx", b"again"))  # a repeated header name is kept
    if i % 7 == 0:
        headers.append(("null", None))
    ts = 1_700_000_000_000 + i
    body = {
        "key": None if key is None else {"type": "BINARY", "data": b64(key)},
        "value": {"type": "BINARY", "data": b64(value)},
        "headers": [{"name": n, "value": None if v is None else b64(v)} for n, v in headers],
        "timestamp": ts,
    }
    if partition is not None:
        body["partition_id"] = partition
    return body, (key, value, headers, ts)


def stream_records(url: str, bodies: list[dict]) -> list[dict]:
    """POSTs records over a chunked body one at a time, reading each delivery report before
    sending the next record: the reports must arrive while the request is still open."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    path = "/" + url.split("//")[1].split("/", 1)[1]
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()

    def chunk(data: bytes):
        conn.send(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    reports = []
    chunk(json.dumps(bodies[0]).encode())
    response = conn.getresponse()
    assert response.status == 200, response.read()
    reports.append(json.loads(response.readline()))
    for body in bodies[1:]:
        chunk(json.dumps(body).encode())
        reports.append(json.loads(response.readline()))
    conn.send(b"0\r\n\r\n")
    assert response.read().strip() == b"", "nothing after the last report"
    conn.close()
    return reports


def read_back(bootstrap: str, topic: str, partitions: int) -> dict:
    """Both Kafka clients' view of the topic, as {(partition, offset): (key, value, headers, ts)}."""
    views = []
    for client, consume in (("confluent", consume_confluent), ("kafka-python", consume_kafka_python)):
        got = {}
        for p, msgs in consume(bootstrap, topic, partitions).items():
            for offset, key, value, headers, (_, ts) in msgs:
                assert (p, offset) not in got, f"{client}: offset {p}/{offset} read twice"
                got[(p, offset)] = (key, value, [(n, v) for n, v in headers or []], ts)
        views.append(got)
    assert views[0] == views[1], "confluent-kafka and kafka-python disagree"
    return views[0]


def test_http_records_in_every_shape_are_read_back_byte_exact_once(floe):
    api = Api(floe.http_url)
    topic = unique_name("http")
    api.create_topic(topic, 4)
    rng = random.Random(7)
    expected = {}  # (partition, offset) -> (key, value, headers, ts)

    def note(report, want):
        assert report["error_code"] == 200, report
        where = (report["partition_id"], report["offset"])
        assert where not in expected, f"two records reported at {where}"
        expected[where] = want

    # Single records: each answered with its own report.
    for i in range(10):
        body, want = record(i, rng)
        r = requests.post(api.records(topic), json=body, timeout=30)
        assert r.status_code == 200, r.text
        note(r.json(), want)
    # JSON and STRING data, a null value.
    r = requests.post(api.records(topic), headers=JSON, timeout=30, data=json.dumps({
        "partition_id": 1, "key": {"type": "STRING", "data": "sk"}, "value": {"type": "JSON", "data": {"a": [1, 2]}},
        "timestamp": "2026-01-02T03:04:05.678Z"}))
    note(r.json(), (b"sk", b'{"a":[1,2]}', [], 1767323045678))
    r = requests.post(api.records(topic), json={"partition_id": 2, "key": {"type": "STRING", "data": "t"},
                                                 "value": None, "timestamp": 5}, timeout=30)
    note(r.json(), (b"t", None, [], 5))

    # A stream: each report arrives before the next record is sent.
    bodies, wants = zip(*(record(100 + i, rng) for i in range(5)))
    reports = stream_records(api.records(topic), list(bodies))
    for report, want in zip(reports, wants):
        note(report, want)

    # Bulk NDJSON, gzip and zstd.
    for encode, encoding in ((gzip.compress, "gzip"), (zstandard.ZstdCompressor().compress, "zstd")):
        bodies, wants = zip(*(record(1000 + i, rng) for i in range(500)))
        ndjson = "\n".join(json.dumps(b) for b in bodies).encode()
        r = requests.post(api.records(topic) + ":bulk", data=encode(ndjson), timeout=60,
                          headers={**NDJSON, "Content-Encoding": encoding})
        assert r.status_code == 200, r.text
        out = r.json()
        assert (out["record_count"], out["error_count"]) == (500, 0), out
        for p, o, want in zip(out["partition_ids"], out["offsets"], wants):
            note({"error_code": 200, "partition_id": p, "offset": o}, want)

    # Idempotency-Key: a retry gets the same offsets and writes nothing.
    bodies, wants = zip(*(record(5000 + i, rng) for i in range(20)))
    ndjson = "\n".join(json.dumps(b) for b in bodies)
    key_headers = {**NDJSON, "Idempotency-Key": unique_name("req")}
    first = requests.post(api.records(topic) + ":bulk", data=ndjson, headers=key_headers, timeout=30).json()
    retry = requests.post(api.records(topic) + ":bulk", data=ndjson, headers=key_headers, timeout=30).json()
    assert (retry["partition_ids"], retry["offsets"]) == (first["partition_ids"], first["offsets"])
    for p, o, want in zip(first["partition_ids"], first["offsets"], wants):
        note({"error_code": 200, "partition_id": p, "offset": o}, want)
    other = requests.post(api.records(topic) + ":bulk", data=ndjson + "\n{}", headers=key_headers, timeout=30)
    assert other.status_code == 422 and "Idempotency-Key" in other.json()["message"], other.text

    got = read_back(floe.bootstrap, topic, 4)
    assert got == expected


def framed(records: list[tuple]) -> bytes:
    """Floe's length-prefixed framing (application/vnd.floe.records+binary) of
    (partition, timestamp, key, value, headers) tuples; -1 and None mean absent."""
    import struct

    def sized(b):
        return struct.pack(">i", -1) if b is None else struct.pack(">i", len(b)) + b
    out = b"\x01"
    for partition, ts, key, value, headers in records:
        body = struct.pack(">iq", partition, ts) + sized(key) + sized(value) + struct.pack(">H", len(headers))
        for name, v in headers:
            body += struct.pack(">H", len(name)) + name.encode() + sized(v)
        out += struct.pack(">I", len(body)) + body
    return out


def test_raw_bytes_are_produced_without_base64(floe):
    """Devices send values as raw bytes: one record per application/octet-stream body (key,
    partition, timestamp from the query, headers from Floe-Record-Header), or many in Floe's
    length-prefixed framing; Kafka clients read exactly those bytes. An Idempotency-Key retry is
    written once; a record whose fields do not fit its length is refused alone."""
    api = Api(floe.http_url)
    topic = unique_name("http-raw")
    api.create_topic(topic, 3)
    raw = bytes(range(256)) * 4
    r = requests.post(api.records(topic), data=raw, params={"partition_id": 1, "key": "dev-7", "timestamp": 1_700_000_000_123},
                      headers={"Content-Type": "application/octet-stream",
                               "Floe-Record-Header": "trace=t-1", "Idempotency-Key": "raw-1"}, timeout=30)
    assert r.status_code == 200, r.text
    first = r.json()
    assert (first["partition_id"], first["value"]) == (1, {"type": "BINARY", "size": 1024}), first
    again = requests.post(api.records(topic), data=raw,
                          params={"partition_id": 1, "key": "dev-7", "timestamp": 1_700_000_000_123},
                          headers={"Content-Type": "application/octet-stream",
                                   "Floe-Record-Header": "trace=t-1", "Idempotency-Key": "raw-1"}, timeout=30)
    assert again.json()["offset"] == first["offset"], "a retry is answered with the original offset"
    changed = requests.post(api.records(topic), data=raw, params={"partition_id": 1, "key": "dev-8"},
                            headers={"Content-Type": "application/octet-stream", "Idempotency-Key": "raw-1"},
                            timeout=30)
    assert changed.status_code == 422, changed.text

    cut = framed([(0, 1, b"k", b"v", [])])
    cut = cut[:1] + (int.from_bytes(cut[1:5], "big") - 1).to_bytes(4, "big") + cut[5:-1]
    body = framed([(2, 1_700_000_000_456, None, b"\x00\xff", [("h", b"\x01"), ("n", None)]),
                   (-1, -1, b"dev-9", None, [])]) + cut[1:]
    lines = requests.post(api.records(topic), data=body,
                          headers={"Content-Type": "application/vnd.floe.records+binary"}, timeout=30)
    answers = [json.loads(line) for line in lines.text.splitlines()]
    assert [a["error_code"] for a in answers] == [200, 200, 422], answers
    assert "runs past its length" in answers[2]["message"], answers[2]
    assert requests.post(api.records(topic), data=b"\x02", timeout=30,
                         headers={"Content-Type": "application/vnd.floe.records+binary"}).status_code == 400
    assert requests.post(api.records(topic), data=raw, params={"nope": 1}, timeout=30,
                         headers={"Content-Type": "application/octet-stream"}).status_code == 400

    got = read_back(floe.bootstrap, topic, 3)
    assert got[(1, first["offset"])] == (b"dev-7", raw, [("trace", b"t-1")], 1_700_000_000_123)
    framed_first = next(v for (p, _), v in got.items() if p == 2)
    assert framed_first == (None, b"\x00\xff", [("h", b"\x01"), ("n", None)], 1_700_000_000_456)
    assert sum(1 for v in got.values() if v[:2] == (b"dev-9", None)) == 1
    assert len(got) == 3


def test_keys_land_where_kafka_clients_put_them(floe):
    from confluent_kafka import Producer

    api = Api(floe.http_url)
    topic = unique_name("http-keys")
    api.create_topic(topic, 7)
    keys = [f"user-{i}".encode() for i in range(200)] + [b"", b"a", b"abc", b"\xff\x00\x01"]
    kafka_partition = {}
    p = Producer({"bootstrap.servers": floe.bootstrap, "partitioner": "murmur2_random"})
    for k in keys:
        p.produce(topic, key=k, value=b"kafka",
                  on_delivery=lambda err, msg, k=k: kafka_partition.__setitem__(k, msg.partition()))
    assert p.flush(30) == 0
    ndjson = "\n".join(json.dumps({"key": {"type": "BINARY", "data": b64(k)}, "value": {"data": "http"}}) for k in keys)
    out = requests.post(api.records(topic) + ":bulk", data=ndjson, headers=NDJSON, timeout=30).json()
    http_partition = dict(zip(keys, out["partition_ids"]))
    assert http_partition == kafka_partition
    assert len(set(http_partition.values())) == 7, "keys spread over every partition"


def test_an_idempotent_retry_through_another_agent_is_written_once(cluster):
    cluster.leader()
    a1, a2 = Api(cluster.http_url(1)), Api(cluster.http_url(2))
    topic = unique_name("http-idem")
    a1.create_topic(topic, 3)
    wait_until(lambda: requests.get(a2.url(f"/topics/{topic}"), timeout=5).status_code == 200, 20, "topic on agent 2")
    rng = random.Random(3)
    bodies = [record(i, rng)[0] for i in range(30)]
    body = "".join(json.dumps(b) for b in bodies)
    headers = {**JSON, "Idempotency-Key": "order-4711"}
    first = requests.post(a1.records(topic), data=body, headers=headers, timeout=30)
    retry = requests.post(a2.records(topic), data=body, headers=headers, timeout=30)
    assert first.status_code == retry.status_code == 200
    parse = lambda r: [(x["partition_id"], x["offset"]) for x in map(json.loads, r.text.splitlines())]
    assert parse(first) == parse(retry)
    assert len(parse(first)) == 30
    marks = watermarks(cluster.bootstrap(1), topic, 3)
    assert sum(hi - lo for lo, hi in marks.values()) == 30, f"written once: {marks}"
    other = requests.post(a2.records(topic), data=body[:-1] + " }", headers=headers, timeout=30)
    assert other.status_code == 422


def test_bad_requests_get_a_json_error_and_write_nothing(floe):
    api = Api(floe.http_url)
    topic = unique_name("http-bad")
    api.create_topic(topic, 2, {"max.message.bytes": "2000"})
    compacted = unique_name("http-compacted")
    api.create_topic(compacted, 1, {"cleanup.policy": "compact"})
    ok = {"value": {"type": "STRING", "data": "fine"}}
    cases = [
        ("not JSON", api.records(topic), JSON, b'{"value": ', 400),
        ("unknown topic", api.records("nope"), JSON, json.dumps(ok), 404),
        ("unknown cluster", api.records(topic).replace(api.cluster_id, "other"), JSON, json.dumps(ok), 404),
        ("unknown partition", api.records(topic), JSON, json.dumps({**ok, "partition_id": 9}), 404),
        ("too large", api.records(topic), JSON, json.dumps({"value": {"type": "STRING", "data": "x" * 5000}}), 413),
        ("wrong media type", api.records(topic), {"Content-Type": "text/plain"}, json.dumps(ok), 415),
        ("unknown encoding", api.records(topic), {**JSON, "Content-Encoding": "br"}, json.dumps(ok), 415),
        ("bad gzip", api.records(topic), {**JSON, "Content-Encoding": "gzip"}, b"not gzip", 400),
        ("bad base64", api.records(topic), JSON, json.dumps({"value": {"type": "BINARY", "data": "!!"}}), 422),
        ("unknown field", api.records(topic), JSON, json.dumps({**ok, "colour": "red"}), 422),
        ("schema registry", api.records(topic), JSON, json.dumps({"value": {"schema_id": 1, "data": {}}}), 422),
        ("bad timestamp", api.records(topic), JSON, json.dumps({**ok, "timestamp": "yesterday"}), 422),
        ("keyless on compacted", api.records(compacted), JSON, json.dumps(ok), 422),
        ("empty body", api.records(topic), JSON, b"", 400),
        ("empty bulk", api.records(topic) + ":bulk", NDJSON, b"\n", 400),
        ("bad key header", api.records(topic), {**JSON, "Idempotency-Key": "has space"}, json.dumps(ok), 400),
        ("bad read offset", api.url(f"/topics/{topic}/partitions/0/records?offset=soon"), None, None, 400),
        ("offset past the end", api.url(f"/topics/{topic}/partitions/0/records?offset=99"), None, None, 416),
        ("wait too long", api.url(f"/topics/{topic}/partitions/0/records?wait_ms=30001"), None, None, 400),
        ("partition not a number", api.url(f"/topics/{topic}/partitions/x/records"), None, None, 400),
        ("wrong method", api.url(f"/topics/{topic}/records:bulk"), None, None, 405),
        ("no such endpoint", api.url("/nothing"), None, None, 404),
    ]
    for what, url, headers, body, status in cases:
        r = requests.post(url, data=body, headers=headers, timeout=30) if headers else requests.get(url, timeout=30)
        assert r.status_code == status, f"{what}: {r.status_code} {r.text}"
        assert r.headers["content-type"].startswith("application/json"), what
        assert r.json()["error_code"] == status and r.json()["message"], what
    # Over the limit on records in one request.
    many = "\n".join('{"value":{"data":1}}' for _ in range(100_001))
    r = requests.post(api.records(topic) + ":bulk", data=many, headers=NDJSON, timeout=60)
    assert r.status_code == 413, r.text
    assert watermarks(floe.bootstrap, topic, 2) == {0: (0, 0), 1: (0, 0)}
    assert watermarks(floe.bootstrap, compacted, 1) == {0: (0, 0)}
    # In a stream of several records, each bad one gets its own error and the rest are written.
    body = json.dumps(ok) + json.dumps({"value": {"type": "BINARY", "data": "!!"}}) + json.dumps(ok)
    r = requests.post(api.records(topic), data=body, headers=JSON, timeout=30)
    codes = [json.loads(line)["error_code"] for line in r.text.splitlines()]
    assert (r.status_code, codes) == (200, [200, 422, 200])


def test_reads_long_polls_and_event_streams(floe):
    from confluent_kafka import Producer

    api = Api(floe.http_url)
    topic = unique_name("http-read")
    api.create_topic(topic, 2)
    producer = Producer({"bootstrap.servers": floe.bootstrap, "linger.ms": 0})

    # A long-poll at the end of partition 0 is woken by a Kafka producer.
    def produce_later():
        time.sleep(1.0)
        producer.produce(topic, partition=0, key=b"k0", value=b"v0", headers=[("h", b"1"), ("h", b"2")])
        producer.flush(10)

    threading.Thread(target=produce_later).start()
    started = time.monotonic()
    r = requests.get(api.url(f"/topics/{topic}/partitions/0/records?offset=latest&wait_ms=20000&format=string"),
                     timeout=30)
    waited = time.monotonic() - started
    assert r.status_code == 200, r.text
    out = r.json()
    assert 0.5 < waited < 15, waited
    assert [(x["offset"], x["key"], x["value"]) for x in out["records"]] == [
        (0, {"type": "STRING", "data": "k0"}, {"type": "STRING", "data": "v0"})]
    assert out["records"][0]["headers"] == [{"name": "h", "value": b64(b"1")}, {"name": "h", "value": b64(b"2")}]
    assert out["next_offset"] == 1 and out["high_watermark"] == 1

    # More records, then a partition stream from the start, resumed after the second event.
    for i in range(1, 6):
        producer.produce(topic, partition=0, key=f"k{i}".encode(), value=f"v{i}".encode())
    producer.flush(10)

    def events(url, headers=None, want=1):
        seen = []
        with requests.get(url, headers=headers or {}, stream=True, timeout=30) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            event = {}
            for line in r.iter_lines(decode_unicode=True):
                if line == "":
                    if event.get("event") == "record":
                        seen.append(event)
                    event = {}
                    if len(seen) >= want:
                        return seen
                elif not line.startswith(":"):
                    name, _, value = line.partition(": ")
                    event[name] = value
        return seen

    follow = api.url(f"/topics/{topic}/partitions/0/records:follow?offset=earliest&format=string")
    first = events(follow, want=6)
    assert [e["id"] for e in first] == [str(i) for i in range(6)]
    assert [json.loads(e["data"])["value"]["data"] for e in first] == [f"v{i}" for i in range(6)]
    resumed = events(follow, headers={"Last-Event-ID": "1"}, want=4)
    assert [e["id"] for e in resumed] == ["2", "3", "4", "5"]

    # A topic stream sees records as they are committed, from every partition.
    seen = []
    t = threading.Thread(target=lambda: seen.extend(events(api.url(f"/topics/{topic}/records:follow"), want=2)))
    t.start()
    time.sleep(1.0)
    producer.produce(topic, partition=1, value=b"late-1")
    producer.produce(topic, partition=0, value=b"late-0")
    producer.flush(10)
    t.join(30)
    assert sorted(e["id"] for e in seen) == ["0:6", "1:0"]

    # read_committed leaves an aborted transaction out; read_uncommitted shows it.
    txn = Producer({"bootstrap.servers": floe.bootstrap, "transactional.id": unique_name("tx")})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, partition=1, value=b"aborted")
    txn.flush(10)
    txn.abort_transaction(30)
    producer.produce(topic, partition=1, value=b"after")
    producer.flush(10)
    read = lambda isolation: [
        base64.b64decode(x["value"]["data"]) for x in requests.get(
            api.url(f"/topics/{topic}/partitions/1/records?offset=0&isolation={isolation}"), timeout=30).json()["records"]]
    assert read("read_committed") == [b"late-1", b"after"]
    assert read("read_uncommitted") == [b"late-1", b"aborted", b"after"]


def test_admin_and_group_offsets_agree_with_kafka_clients(floe):
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import ConfigResource

    from conftest import admin

    api = Api(floe.http_url)
    topic = unique_name("http-admin")
    created = api.create_topic(topic, 3, {"retention.ms": "3600000"})
    assert created["partitions_count"] == 3
    assert requests.post(api.url("/topics"), json={"topic_name": topic}, timeout=10).status_code == 409
    md = admin(floe.bootstrap).list_topics(timeout=10)
    assert len(md.topics[topic].partitions) == 3
    listed = [t["topic_name"] for t in requests.get(api.url("/topics"), timeout=10).json()["data"]]
    assert topic in listed

    r = requests.post(api.url(f"/topics/{topic}/configs:alter"), timeout=10,
                      json={"data": [{"name": "cleanup.policy", "value": "compact"},
                                     {"name": "retention.ms", "operation": "DELETE"}]})
    assert r.status_code == 204, r.text
    configs = {c["name"]: c for c in requests.get(api.url(f"/topics/{topic}/configs"), timeout=10).json()["data"]}
    assert configs["cleanup.policy"]["value"] == "compact" and not configs["cleanup.policy"]["is_default"]
    assert configs["retention.ms"]["is_default"]
    resource = ConfigResource("topic", topic)
    kafka_admin = admin(floe.bootstrap)  # kept alive until its futures resolve
    kafka_view = kafka_admin.describe_configs([resource])[resource].result(10)
    assert kafka_view["cleanup.policy"].value == "compact"

    # Offsets committed over HTTP are where a Kafka consumer of the group starts.
    body = "\n".join(json.dumps({"partition_id": 0, "key": {"type": "STRING", "data": f"k{i}"},
                                 "value": {"type": "STRING", "data": f"v{i}"}}) for i in range(10))
    assert requests.post(api.records(topic) + ":bulk", data=body, headers=NDJSON, timeout=30).status_code == 200
    group = unique_name("http-group")
    r = requests.post(api.url(f"/consumer-groups/{group}/offsets"), timeout=10,
                      json={"offsets": [{"topic_name": topic, "partition_id": 0, "offset": 7}]})
    assert r.status_code == 200 and r.json()["offsets"][0]["error_code"] == 200, r.text
    offsets = requests.get(api.url(f"/consumer-groups/{group}/offsets"), timeout=10).json()["offsets"]
    assert offsets == [{"topic_name": topic, "partition_id": 0, "offset": 7, "metadata": "", "lag": 3}]
    c = Consumer({"bootstrap.servers": floe.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == 7
        c.assign([TopicPartition(topic, 0, committed[0].offset)])
        m = c.poll(20)
        assert m is not None and not m.error() and (m.offset(), m.value()) == (7, b"v7")
    finally:
        c.close()
    groups = [g["consumer_group_id"] for g in requests.get(api.url("/consumer-groups"), timeout=10).json()["data"]]
    assert group in groups
    described = requests.get(api.url(f"/consumer-groups/{group}"), timeout=10).json()
    assert described["total_lag"] == 3, described

    assert requests.delete(api.url(f"/topics/{topic}"), timeout=10).status_code == 204
    assert requests.get(api.url(f"/topics/{topic}"), timeout=10).status_code == 404
    wait_until(lambda: topic not in admin(floe.bootstrap).list_topics(timeout=10).topics, 10, "topic gone")


@pytest.mark.long
@pytest.mark.timeout(600)
def test_schemathesis_finds_no_server_errors_or_schema_violations(floe, tmp_path):
    api = Api(floe.http_url)
    api.create_topic("st", 2)
    body = "\n".join(json.dumps({"value": {"type": "STRING", "data": f"v{i}"}}) for i in range(20))
    requests.post(api.records("st") + ":bulk", data=body, headers=NDJSON, timeout=30)
    schemathesis = Path(os.environ.get("VIRTUAL_ENV", Path(__file__).parents[2] / ".venv")) / "bin" / "schemathesis"
    # Event streams never end, so they are left out; positive_data_acceptance is left out because
    # a schema cannot say which config values, base64 texts or gzip bodies are valid. A read may
    # long-poll for up to 30 s (`wait_ms`), so responses may take that long (the default limit,
    # 10 s, failed runs that drew a long wait_ms).
    for attempt in range(3):
        run = subprocess.run(
            [str(schemathesis), "run", f"{floe.http_url}/openapi.json", "--exclude-path-regex", "follow",
             "--checks", "all", "--exclude-checks", "positive_data_acceptance", "--max-examples", "40",
             "--request-timeout", "40", "--max-response-time", "35", "--workers", "2", "--seed", "1", "--no-color",
             "--report", "junit", "--report-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=560, cwd=tmp_path,
        )
        # CPython 3.11's ast module sometimes fails inside hypothesis while it describes a
        # strategy ("AST constructor recursion depth mismatch"): the tool crashed, nothing was
        # found about the server, so it runs again.
        if "AST constructor recursion depth mismatch" not in run.stdout:
            break
    tail = run.stdout[-6000:]
    assert run.returncode == 0, tail
    # "N failed" counts failures; warnings such as "Authentication failed: ..." (operations
    # that only ever answer 403, like the catalog's refused writes) are not.
    assert "passed" in tail and not re.search(r"\b\d+ failed\b", tail.split("SUMMARY")[-1]), tail
    assert floe.alive()


def test_browsers_may_call_from_configured_origins_only(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-cors", object_store=f"file://{objects}",
                            extra_args=["--http-cors-origin", "https://app.example"])
    api = Api(floe.http_url)
    api.create_topic("web", 1)
    preflight = lambda origin: requests.options(api.records("web"), timeout=10, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,idempotency-key"})
    allowed = preflight("https://app.example")
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "idempotency-key" in allowed.headers["access-control-allow-headers"].lower()
    assert "access-control-allow-origin" not in preflight("https://evil.example").headers
    r = requests.post(api.records("web"), json={"value": {"data": 1}}, headers={"Origin": "https://app.example"},
                      timeout=10)
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
