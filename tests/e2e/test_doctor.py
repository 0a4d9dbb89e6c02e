"""`floe doctor` (issue 26) against a real S3-compatible server (moto), and against a small proxy
in front of it that plays a store Floe must not trust: one whose bucket policy denies DELETE, and
one that ignores conditional writes (it drops `If-None-Match`). Each time the doctor names the
failing check with its fix and exits non-zero; on the plain bucket it passes. With `--metadata` it
also checks the metadata cluster of a running `floe dev`.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import FLOE_BIN, S3_ENV, free_port


def doctor(endpoint, bucket, *extra):
    out = subprocess.run([FLOE_BIN, "doctor", "--object-store", f"s3://{bucket}/floe", "--s3-endpoint", endpoint,
                          "--samples", "2", "--json", *extra],
                         capture_output=True, text=True, timeout=120, env={**__import__("os").environ, **S3_ENV})
    report = json.loads(out.stdout) if out.stdout.strip().startswith("{") else None
    assert report is not None, out.stderr
    return out.returncode, {c["check"]: c for c in report["checks"]}


class StoreDouble(ThreadingHTTPServer):
    """Forwards S3 requests to moto, except for what `mode` changes."""

    def __init__(self, upstream_port: int, mode: str):
        super().__init__(("127.0.0.1", free_port()), Forward)
        self.upstream_port, self.mode = upstream_port, mode

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.server.mode == "deny-delete" and self.command == "DELETE":
            error = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code>'
                     b"<Message>Access Denied</Message></Error>")
            self.send_response(403)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        if self.server.mode == "ignore-conditions":
            headers = {k: v for k, v in headers.items() if k.lower() != "if-none-match"}
        upstream = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=30)
        upstream.request(self.command, self.path, body=body, headers=headers)
        answer = upstream.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "server", "date"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        upstream.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward


@pytest.fixture
def double(moto):
    servers = []

    def start(mode):
        server = StoreDouble(int(moto.endpoint.rsplit(":", 1)[1]), mode)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server
    yield start
    for s in servers:
        s.shutdown()


def test_a_plain_bucket_passes_with_warnings_for_its_settings(moto):
    code, checks = doctor(moto.endpoint, moto.bucket)
    assert code == 0, checks
    for name in ("credentials", "region", "put", "get", "list", "delete", "conditional create",
                 "latency 4 KiB", "latency 8 MiB", "request cost per GiB"):
        assert checks[name]["status"] == "pass", checks[name]
    # No lifecycle rule for incomplete uploads on a fresh bucket: a warning with the fix.
    assert checks["multipart lifecycle"]["status"] == "warn"
    assert "AbortIncompleteMultipartUpload" in checks["multipart lifecycle"]["fix"]
    assert "128 PUTs" in checks["request cost per GiB"]["detail"]

    moto.s3().put_bucket_lifecycle_configuration(Bucket=moto.bucket, LifecycleConfiguration={"Rules": [{
        "ID": "uploads", "Status": "Enabled", "Filter": {"Prefix": ""},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}]})
    moto.s3().put_bucket_versioning(Bucket=moto.bucket, VersioningConfiguration={"Status": "Enabled"})
    code, checks = doctor(moto.endpoint, moto.bucket)
    assert code == 0
    assert checks["multipart lifecycle"]["status"] == "pass"
    assert checks["versioning"]["status"] == "warn" and "NoncurrentVersionExpiration" in checks["versioning"]["fix"]


def test_a_policy_denying_delete_fails_the_delete_check(moto, double):
    store = double("deny-delete")
    code, checks = doctor(store.endpoint, moto.bucket)
    assert code == 1
    assert checks["delete"]["status"] == "fail" and "AccessDenied" in checks["delete"]["detail"]
    assert "s3:DeleteObject" in checks["delete"]["fix"]
    assert checks["put"]["status"] == "pass"


def test_a_store_ignoring_conditional_writes_fails(moto, double):
    store = double("ignore-conditions")
    code, checks = doctor(store.endpoint, moto.bucket)
    assert code == 1
    assert checks["conditional create"]["status"] == "fail"
    assert "ignores If-None-Match" in checks["conditional create"]["detail"]


def test_the_metadata_cluster_is_checked_too(moto, floe):
    code, checks = doctor(moto.endpoint, moto.bucket, "--metadata", f"127.0.0.1:{floe.metadata_port}")
    assert code == 0, checks
    assert checks["metadata quorum"]["status"] == "pass" and "leader node 1" in checks["metadata quorum"]["detail"]
    assert checks["metadata clocks"]["status"] == "pass"
    assert checks["agent clocks"]["status"] == "pass", checks["agent clocks"]
    down = free_port()
    code, checks = doctor(moto.endpoint, moto.bucket, "--metadata", f"127.0.0.1:{down}")
    assert code == 1 and checks["metadata node"]["status"] == "fail"
