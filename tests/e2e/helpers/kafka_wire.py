"""A small encoder and decoder of Kafka's flexible request and response formats (compact
strings and arrays, tagged fields), for APIs no Python client here speaks yet (the share group
admin APIs). Written from the protocol's rules, independently of Floe's Rust codec."""

import socket
import struct
import uuid


class Writer:
    def __init__(self):
        self.out = bytearray()

    def i8(self, v): self.out += struct.pack(">b", v); return self
    def i16(self, v): self.out += struct.pack(">h", v); return self
    def i32(self, v): self.out += struct.pack(">i", v); return self
    def i64(self, v): self.out += struct.pack(">q", v); return self
    def boolean(self, v): return self.i8(1 if v else 0)

    def uvarint(self, v):
        while v >= 0x80:
            self.out.append((v & 0x7F) | 0x80)
            v >>= 7
        self.out.append(v)
        return self

    def string(self, s):
        """A compact string; None is null."""
        if s is None:
            return self.uvarint(0)
        b = s.encode()
        self.uvarint(len(b) + 1)
        self.out += b
        return self

    def array(self, items, each):
        """A compact array; None is null."""
        if items is None:
            return self.uvarint(0)
        self.uvarint(len(items) + 1)
        for item in items:
            each(self, item)
        return self

    def tags(self):
        return self.uvarint(0)

    def uuid(self, v):
        self.out += v.bytes
        return self


class Reader:
    def __init__(self, data: bytes):
        self.data, self.at = data, 0

    def _take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.at)[0]
        self.at += struct.calcsize(fmt)
        return v

    def i8(self): return self._take(">b")
    def i16(self): return self._take(">h")
    def i32(self): return self._take(">i")
    def i64(self): return self._take(">q")

    def uvarint(self):
        shift, v = 0, 0
        while True:
            b = self.data[self.at]
            self.at += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7

    def string(self):
        n = self.uvarint()
        if n == 0:
            return None
        s = self.data[self.at:self.at + n - 1].decode()
        self.at += n - 1
        return s

    def uuid(self):
        v = uuid.UUID(bytes=bytes(self.data[self.at:self.at + 16]))
        self.at += 16
        return v

    def bytes(self):
        """Compact (nullable) bytes."""
        n = self.uvarint()
        if n == 0:
            return None
        b = bytes(self.data[self.at:self.at + n - 1])
        self.at += n - 1
        return b

    def array(self, each):
        n = self.uvarint()
        return None if n == 0 else [each(self) for _ in range(n - 1)]

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.at += self.uvarint()


def call(bootstrap: str, api_key: int, version: int, body: Writer, correlation: int = 7,
         client_id: str = "e2e-wire") -> Reader:
    """Sends one request with header v2 and returns a Reader past the response header v1."""
    header = Writer().i16(api_key).i16(version).i32(correlation)
    client = client_id.encode()
    header.out += struct.pack(">h", len(client)) + client
    header.tags()
    payload = bytes(header.out) + bytes(body.out)
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", _recv(s, 4))[0]
        r = Reader(_recv(s, size))
    assert r.i32() == correlation
    r.tags()
    return r


def _recv(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return bytes(out)
