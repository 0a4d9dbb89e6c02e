"""Bad input on raw sockets: each gets the Kafka error a client expects (or the
connection is closed), the server keeps serving everyone else, and never dies.

Requests are hand-encoded here (big-endian Kafka framing) so the tests do not
depend on any client library's protocol code."""

import socket
import struct
import time

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


# Stays end to end: what protects the process is its allocator (src/alloc.rs), a property of the
# floe binary, not of the agent a test process starts in-process (where the same bytes abort).
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
