"""Bad input on raw sockets: each gets the Kafka error a client expects (or the
connection is closed), the server keeps serving everyone else, and never dies.

Requests are hand-encoded here (big-endian Kafka framing) so the tests do not
depend on any client library's protocol code."""

import os
import socket
import struct
import threading
import time

import pytest

from conftest import Rec, confluent_consumer, consume_confluent, create_topic, produce, unique_name, wait_until

API_PRODUCE, API_METADATA, API_VERSIONS = 0, 3, 18
NONE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION, MESSAGE_TOO_LARGE, UNSUPPORTED_VERSION = 0, 2, 3, 10, 35
IO_TIMEOUT = 10.0


# --------------------------------------------------------------------------
# tiny Kafka wire helper

def i8(v): return struct.pack(">b", v)
def i16(v): return struct.pack(">h", v)
def i32(v): return struct.pack(">i", v)
def u32(v): return struct.pack(">I", v)
def i64(v): return struct.pack(">q", v)


def string(s):  # non-flexible nullable string
    if s is None:
        return i16(-1)
    b = s.encode()
    return i16(len(b)) + b


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):  # zigzag
    return uvarint((n << 1) ^ (n >> 63))


def compact_string(s):
    if s is None:
        return uvarint(0)
    b = s.encode()
    return uvarint(len(b) + 1) + b


def compact_bytes(b):
    if b is None:
        return uvarint(0)
    return uvarint(len(b) + 1) + b


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_CRC_T = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC_T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # standard check value


def record_batch(records, base_ts=None, corrupt_crc=False):
    """Uncompressed record batch v2. records: list of (key, value) bytes/None."""
    base_ts = base_ts if base_ts is not None else int(time.time() * 1000)
    body = bytearray()
    for i, (k, v) in enumerate(records):
        r = bytearray()
        r += i8(0)  # attributes
        r += varint(0)  # timestamp delta
        r += varint(i)  # offset delta
        r += varint(-1) if k is None else varint(len(k)) + k
        r += varint(-1) if v is None else varint(len(v)) + v
        r += varint(0)  # headers
        body += varint(len(r)) + r
    after_crc = (
        i16(0)  # attributes: no compression, CreateTime
        + i32(len(records) - 1)  # lastOffsetDelta
        + i64(base_ts) + i64(base_ts)
        + i64(-1) + i16(-1) + i32(-1)  # producer id/epoch, base sequence
        + i32(len(records)) + bytes(body)
    )
    crc = crc32c(after_crc)
    if corrupt_crc:
        crc ^= 0xDEADBEEF
    after_len = i32(-1) + i8(2) + u32(crc) + after_crc  # partitionLeaderEpoch, magic, crc
    return i64(0) + i32(len(after_len)) + after_len


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT)
        self.corr = 0

    def close(self):
        self.sock.close()

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def request(self, api_key, version, body: bytes, flexible_header=False, client_id="e2e-raw"):
        self.corr += 1
        hdr = i16(api_key) + i16(version) + i32(self.corr) + string(client_id)
        if flexible_header:
            hdr += uvarint(0)  # tagged fields
        payload = hdr + body
        self.sock.sendall(i32(len(payload)) + payload)
        return self.corr

    def _recv_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)}/{n} bytes")
            buf += chunk
        return bytes(buf)

    def response(self, corr, flexible_header=False) -> bytes:
        (size,) = struct.unpack(">i", self._recv_exact(4))
        assert 4 <= size < 64 << 20, f"bad response size {size}"
        data = self._recv_exact(size)
        (got_corr,) = struct.unpack(">i", data[:4])
        assert got_corr == corr, f"correlation id {got_corr}, want {corr}"
        rest = data[4:]
        if flexible_header:
            assert rest[0] == 0, "unexpected tagged fields in response header"
            rest = rest[1:]
        return rest

    def is_closed_by_peer(self, timeout=IO_TIMEOUT) -> bool:
        """True if the server closes the connection (EOF/RST) within timeout."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                # any bytes the server sends before closing are fine; keep reading
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False


class Reader:
    def __init__(self, data):
        self.d, self.i = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.i)
        self.i += struct.calcsize(fmt)
        return v[0]

    def i16(self): return self.take(">h")
    def i32(self): return self.take(">i")
    def i64(self): return self.take(">q")

    def string(self):
        n = self.i16()
        if n < 0:
            return None
        s = self.d[self.i:self.i + n].decode()
        self.i += n
        return s

    def uvarint(self):
        shift = n = 0
        while True:
            b = self.d[self.i]
            self.i += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7

    def compact_string(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        s = self.d[self.i:self.i + n].decode()
        self.i += n
        return s

    def skip_tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.i += self.uvarint()

    def done(self):
        return self.i == len(self.d)


def api_versions_v0(port):
    c = Conn(port)
    try:
        corr = c.request(API_VERSIONS, 0, b"")
        r = Reader(c.response(corr))
        err = r.i16()
        apis = {}
        for _ in range(r.i32()):
            k, lo, hi = r.i16(), r.i16(), r.i16()
            apis[k] = (lo, hi)
        return err, apis, r.done()
    finally:
        c.close()


def assert_server_healthy(floe, what):
    assert floe.alive(), f"floe died after {what}\n{floe.tail(40)}"
    err, apis, _ = api_versions_v0(floe.kafka_port)
    assert err == NONE and API_PRODUCE in apis, f"ApiVersions v0 after {what}: error {err}, apis {apis}"


def produce_v3(conn, topic, partition, batch, acks=-1):
    body = (string(None) + i16(acks) + i32(10000) + i32(1) + string(topic)
            + i32(1) + i32(partition) + i32(len(batch)) + batch)
    corr = conn.request(API_PRODUCE, 3, body)
    r = Reader(conn.response(corr))
    assert r.i32() == 1
    name = r.string()
    assert r.i32() == 1
    p, err, base = r.i32(), r.i16(), r.i64()
    r.i64()  # log_append_time
    r.i32()  # throttle
    assert name == topic and p == partition, f"response for {name}[{p}], asked {topic}[{partition}]"
    return err, base


def produce_v9(conn, topic, partition, batch, acks=-1):
    body = (compact_string(None) + i16(acks) + i32(10000)
            + uvarint(2) + compact_string(topic)
            + uvarint(2) + i32(partition) + compact_bytes(batch) + uvarint(0)  # partition tags
            + uvarint(0)  # topic tags
            + uvarint(0))  # request tags
    corr = conn.request(API_PRODUCE, 9, body, flexible_header=True)
    r = Reader(conn.response(corr, flexible_header=True))
    assert r.uvarint() - 1 == 1
    name = r.compact_string()
    assert r.uvarint() - 1 == 1
    p, err, base = r.i32(), r.i16(), r.i64()
    r.i64()  # log_append_time
    r.i64()  # log_start_offset
    record_errors = []
    for _ in range(r.uvarint() - 1):
        record_errors.append((r.i32(), r.compact_string()))
        r.skip_tags()
    msg = r.compact_string()
    assert name == topic and p == partition
    return err, base, msg, record_errors


# --------------------------------------------------------------------------
# tests


def test_api_versions_unsupported_version_fallback(floe):
    c = Conn(floe.kafka_port)
    try:
        # a client newer than the server: ApiVersions v99 with a v3-style (flexible) header and body
        body = compact_string("e2e-raw") + compact_string("1.0") + uvarint(0)
        corr = c.request(API_VERSIONS, 99, body, flexible_header=True)
        # the response always uses response header v0, and the body is v0-shaped
        r = Reader(c.response(corr, flexible_header=False))
        err = r.i16()
        assert err == UNSUPPORTED_VERSION, f"error_code {err}, want UNSUPPORTED_VERSION (35)"
        n = r.i32()
        apis = {}
        for _ in range(n):
            k, lo, hi = r.i16(), r.i16(), r.i16()
            apis[k] = (lo, hi)
        assert r.done(), f"v0 body has {len(r.d) - r.i} trailing bytes (throttle_time/tagged fields are not v0)"
        assert API_VERSIONS in apis and apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3, \
            f"ApiVersions range {apis.get(API_VERSIONS)}"
        for k in (API_PRODUCE, 1, 2, API_METADATA):
            assert k in apis, f"api {k} missing from fallback list {sorted(apis)}"
    finally:
        c.close()
    # the client then retries with v3 on a new connection
    c = Conn(floe.kafka_port)
    try:
        corr = c.request(API_VERSIONS, 3, compact_string("e2e-raw") + compact_string("1.0") + uvarint(0),
                         flexible_header=True)
        r = Reader(c.response(corr, flexible_header=False))  # ApiVersions: header v0 even when flexible
        assert r.i16() == NONE
    finally:
        c.close()
    assert_server_healthy(floe, "ApiVersions v99")


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::garbage_closes_only_the_connection_it_came_on;
# delete this test once that Rust test passes.
def test_garbage_closes_only_that_connection(floe):
    topic = unique_name("bad-garbage")
    create_topic(floe.bootstrap, topic, 1)
    stop = threading.Event()
    produced: list[bytes] = []
    consumed: list[bytes] = []
    errors: list = []

    def good_client():
        """One long-lived producer and one long-lived consumer, working throughout."""
        from confluent_kafka import Producer, TopicPartition

        p = Producer({"bootstrap.servers": floe.bootstrap, "acks": "all", "linger.ms": 2})
        c = confluent_consumer(floe.bootstrap)

        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                produced.append(msg.value())

        def drain(t):
            for m in c.consume(num_messages=1000, timeout=t):
                if m.error():
                    errors.append(m.error())
                else:
                    consumed.append(m.value())

        try:
            c.assign([TopicPartition(topic, 0, 0)])
            i = 0
            while not stop.is_set():
                for _ in range(20):
                    p.produce(topic, value=f"ok-{i}".encode(), partition=0, on_delivery=cb)
                    i += 1
                if p.flush(15) != 0:
                    errors.append("producer flush timed out")
                    return
                drain(0.1)
            deadline = time.monotonic() + 30
            while len(consumed) < len(produced) and time.monotonic() < deadline:
                drain(0.2)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            c.close()

    t = threading.Thread(target=good_client, daemon=True)
    t.start()
    try:
        wait_until(lambda: len(produced) >= 100 or errors or not t.is_alive(), 30, "the good client to get going")
        rnd = bytes((i * 131 + 7) % 256 for i in range(4096))  # deterministic "random" bytes
        trunc_body = i16(API_PRODUCE) + i16(3) + i32(1) + string("x") + i16(0x7FFF) + rnd[:50]
        garbage = [
            ("unknown api key", i32(64) + i16(0x7A7A) + i16(0) + i32(1) + rnd[:56]),
            ("known api, truncated body", i32(len(trunc_body)) + trunc_body),
            ("negative length", i32(-17) + rnd[:64]),
            ("api key -1 and noise", i32(4000) + i16(-1) + rnd[:3998]),
            ("http request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\x00" * 4000),
        ]
        for what, data in garbage:
            c = Conn(floe.kafka_port)
            try:
                try:
                    c.send_raw(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                assert c.is_closed_by_peer(), f"{what}: connection not closed within {IO_TIMEOUT}s"
            finally:
                c.close()
            assert_server_healthy(floe, what)
        # the good client keeps making progress afterwards
        n0 = len(produced)
        wait_until(lambda: len(produced) >= n0 + 100 or errors or not t.is_alive(), 30,
                   "the good client to make progress after the garbage")
    finally:
        stop.set()
        t.join(60)
    assert not errors, f"the concurrent well-behaved client failed: {errors[0]!r}"
    assert len(produced) >= 200, f"the concurrent client made little progress ({len(produced)} acked)"
    assert consumed == produced, \
        f"the concurrent consumer read {len(consumed)} records, {len(produced)} were acknowledged (or order differs)"


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::garbage_closes_only_the_connection_it_came_on (its "200 MiB frame" case);
# delete this test once that Rust test passes.
def test_oversized_frame_closes_connection(floe):
    c = Conn(floe.kafka_port)
    try:
        try:
            c.send_raw(i32(200 * 1024 * 1024) + i16(API_VERSIONS) + i16(0) + i32(1) + b"x" * 1000)
        except (BrokenPipeError, ConnectionResetError):
            pass
        t0 = time.monotonic()
        assert c.is_closed_by_peer(), "200 MiB frame header: connection not closed"
        assert time.monotonic() - t0 < IO_TIMEOUT
    finally:
        c.close()
    assert_server_healthy(floe, "oversized frame")


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::a_batch_with_a_wrong_crc_is_corrupt_message_and_is_not_appended;
# delete this test once that Rust test passes.
def test_produce_crc_corrupted_batch(floe):
    topic = unique_name("bad-crc")
    create_topic(floe.bootstrap, topic, 1)
    c = Conn(floe.kafka_port)
    try:
        # positive control: the hand-built batch is valid
        err, base = produce_v3(c, topic, 0, record_batch([(b"k0", b"valid v3")]))
        assert (err, base) == (NONE, 0), f"valid batch v3: error {err} base {base}"
        err, base, msg, _ = produce_v9(c, topic, 0, record_batch([(b"k1", b"valid v9"), (None, b"x")]))
        assert (err, base) == (NONE, 1), f"valid batch v9: error {err} base {base} ({msg})"

        err, _, msg, _ = produce_v9(c, topic, 0, record_batch([(b"k", b"corrupt")], corrupt_crc=True))
        assert err == CORRUPT_MESSAGE, f"Produce v9 with bad CRC: error {err} ({msg}), want CORRUPT_MESSAGE (2)"
        err, _ = produce_v3(c, topic, 0, record_batch([(b"k", b"corrupt")], corrupt_crc=True))
        assert err == CORRUPT_MESSAGE, f"Produce v3 with bad CRC: error {err}, want 2"

        # flip one byte inside the records (CRC stays the old one)
        b = bytearray(record_batch([(b"key", b"value-to-flip")]))
        b[-3] ^= 0x01
        err, _ = produce_v3(c, topic, 0, bytes(b))
        assert err == CORRUPT_MESSAGE, f"flipped payload byte: error {err}, want 2"

        # the same connection is still usable afterwards
        err, base = produce_v3(c, topic, 0, record_batch([(b"k2", b"after")]))
        assert (err, base) == (NONE, 3), f"valid batch after corrupt ones: error {err} base {base}"
    finally:
        c.close()
    got = consume_confluent(floe.bootstrap, topic, 1, timeout=30)
    assert [m[2] for m in got[0]] == [b"valid v3", b"valid v9", b"x", b"after"], \
        f"log holds {[m[2] for m in got[0]]}; corrupt batches must not be stored"
    assert_server_healthy(floe, "CRC-corrupted batches")


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::a_batch_over_max_message_bytes_is_message_too_large;
# delete this test once that Rust test passes.
def test_produce_batch_over_max_message_bytes(floe):
    topic = unique_name("bad-big")
    create_topic(floe.bootstrap, topic, 1, config={"max.message.bytes": "2048"})
    c = Conn(floe.kafka_port)
    try:
        err, base = produce_v3(c, topic, 0, record_batch([(b"k", b"small")]))
        assert (err, base) == (NONE, 0), f"small batch: error {err}"
        err, _ = produce_v3(c, topic, 0, record_batch([(b"k", os.urandom(8192))]))
        assert err == MESSAGE_TOO_LARGE, f"8 KiB batch on max.message.bytes=2048: error {err}, want 10"
        err, base = produce_v3(c, topic, 0, record_batch([(b"k", b"small again")]))
        assert (err, base) == (NONE, 1), f"after too-large: error {err} base {base}"
    finally:
        c.close()
    # a real client gets the error too
    with pytest.raises(AssertionError, match="delivery failures"):
        produce(floe.bootstrap, topic, [Rec(0, b"k", os.urandom(8192), None, None)], timeout=20)
    assert_server_healthy(floe, "oversized batch")


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::produce_to_an_unknown_topic_or_partition_is_unknown_topic_or_partition;
# delete this test once that Rust test passes.
def test_unknown_topic_and_partition(floe):
    topic = unique_name("bad-known")
    create_topic(floe.bootstrap, topic, 1)
    missing = unique_name("bad-missing")
    c = Conn(floe.kafka_port)
    try:
        # Metadata v4 with allow_auto_topic_creation=false
        corr = c.request(API_METADATA, 4, i32(1) + string(missing) + b"\x00")
        r = Reader(c.response(corr))
        r.i32()  # throttle
        for _ in range(r.i32()):
            r.i32(); r.string(); r.i32(); r.string()
        r.string()  # cluster id
        r.i32()  # controller
        assert r.i32() == 1
        err, name = r.i16(), r.string()
        assert (err, name) == (UNKNOWN_TOPIC_OR_PARTITION, missing), \
            f"Metadata(auto-create off) for unknown topic: error {err}, want 3"

        err, _ = produce_v3(c, missing, 0, record_batch([(None, b"v")]))
        assert err == UNKNOWN_TOPIC_OR_PARTITION, f"produce to unknown topic: error {err}, want 3"
        err, _ = produce_v3(c, topic, 7, record_batch([(None, b"v")]))
        assert err == UNKNOWN_TOPIC_OR_PARTITION, f"produce to unknown partition 7: error {err}, want 3"
    finally:
        c.close()
    a_md = confluent_consumer(floe.bootstrap)
    try:
        assert missing not in a_md.list_topics(timeout=10).topics, "produce/metadata auto-created the topic"
    finally:
        a_md.close()
    assert_server_healthy(floe, "unknown topic/partition")


# PORTED (issue 54): fully replaced by testing/tests/it/bad_input.rs::hostile_array_lengths_close_the_connection_and_nothing_else;
# delete this test once that Rust test passes.
def test_hostile_array_lengths_do_not_take_the_server_down(floe):
    """A few bytes claiming 2^31 array elements (or a batch claiming a billion records) must cost
    only the sender's connection: the codec pre-allocates from such length prefixes."""
    hostile = [
        ("Metadata v1, topics array of 2^31-1", 3, 1, i32(0x7FFFFFFF), False),
        ("Produce v3, topic array of 2^31-1", 0, 3, string(None) + i16(-1) + i32(1000) + i32(0x7FFFFFFF), False),
        ("Fetch v4, topics array of 2^31-1", 1, 4, i32(-1) + i32(100) + i32(1) + i32(1 << 20) + i8(0) + i32(0x7FFFFFFF), False),
        # flexible: CreateTopics v5 with a compact array length of 2^32-1
        ("CreateTopics v5, compact array of 2^32-2", 19, 5, uvarint(0xFFFFFFFF), True),
    ]
    for what, api, version, body, flexible in hostile:
        c = Conn(floe.kafka_port)
        try:
            c.request(api, version, body, flexible_header=flexible)
            assert c.is_closed_by_peer(), f"{what}: connection not closed"
        finally:
            c.close()
        assert_server_healthy(floe, what)
