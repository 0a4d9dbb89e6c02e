"""Fixtures and shared helpers for Floe's end-to-end tests with real Kafka clients.

Every wait is bounded and every process started here is killed at teardown,
whether the test passed or not. When a test fails, the tail of each floe
process's stderr log is attached to the failure report.

Shared helpers (produce/consume/compare) live here too; test modules import
them with ``from conftest import ...`` (pytest's default prepend import mode
puts this directory on sys.path).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import pytest

FLOE_BIN = os.environ.get("FLOE_BIN", "/var/tmp/floe-target/debug/floe")
READY_TIMEOUT_S = float(os.environ.get("FLOE_READY_TIMEOUT", "20"))
DEFAULT_TEST_TIMEOUT_S = int(os.environ.get("FLOE_TEST_TIMEOUT", "300"))

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


# --------------------------------------------------------------------------
# pytest plumbing: default per-test timeout, floe log tails on failure, the serial pass
#
# scripts/test.sh runs the suite in two passes: most tests in parallel (pytest-xdist, `-n`), then
# the tests marked `serial` one at a time with nothing else running. A test is marked serial when
# it asserts a latency, throughput or time budget that neighbours on a 2-core machine would eat
# into, or when it floods the machine (thousands of sockets) and would slow its neighbours.


def pytest_addoption(parser):
    parser.addoption(
        "--e2e-pass", choices=("all", "parallel", "serial"), default="all",
        help="Floe e2e: run every test (all, the default), only those not marked serial (parallel), "
             "or only those marked serial (serial)")


def pytest_configure(config):
    # kafka-python 3.0 uses importlib.resources' legacy API on every schema load
    config.addinivalue_line("filterwarnings", "ignore:read_text is deprecated:DeprecationWarning")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")
    config.addinivalue_line(
        "markers", "serial: needs the machine to itself (timing, throughput or a flood); "
                   "scripts/test.sh runs these after the parallel pass, one at a time")
    config.addinivalue_line(
        "markers", "long: takes 20 s or more; run first, so the parallel pass does not end with "
                   "one worker busy and the others idle")


def pytest_report_header(config):
    workers = getattr(config.option, "numprocesses", None)
    if workers and config.getoption("--e2e-pass") == "all":
        return ["note: tests marked serial run beside others here; scripts/test.sh runs them apart "
                "(--e2e-pass parallel, then --e2e-pass serial without -n)"]
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT_S))
    which = config.getoption("--e2e-pass")
    if which != "all":
        keep, drop = [], []
        for item in items:
            serial = item.get_closest_marker("serial") is not None
            (keep if serial == (which == "serial") else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    # Workers take tests in this order: the long ones first (a stable sort keeps the rest as is).
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for proc in getattr(item, "_floe_procs", []):
            rep.sections.append((f"floe stderr tail ({proc.name}: {proc.log_path})", proc.tail(80)))
        for name, path in getattr(item, "_aux_logs", []):
            rep.sections.append((f"{name} log tail ({path})", _tail_file(path, 40)))


def _tail_file(path: Path, n: int) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])


# --------------------------------------------------------------------------
# ports and waiting


def _port_block() -> list[int]:
    """The ports this process may hand out: a block of its own, below the kernel's ephemeral range.

    A port is handed out free and bound later by the process it is given to. Asking the kernel
    for one (bind to port 0) draws from the ephemeral range, where another pytest-xdist worker
    could be handed the same port meanwhile, or a client's connect() could take it. Below that
    range only listeners asked for bind, so each worker (PYTEST_XDIST_WORKER gwN of
    PYTEST_XDIST_WORKER_COUNT) takes its own slice and never meets another's ports."""
    lo, hi = 20000, 32767  # Linux's ephemeral range starts at 32768 unless set otherwise
    try:
        ephemeral_lo = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        # A machine whose range starts lower keeps these ports: the bind below still checks each.
        if ephemeral_lo - 1 - lo >= 2000:
            hi = min(hi, ephemeral_lo - 1)
    except (OSError, ValueError, IndexError):
        pass
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker[2:]) if worker[2:].isdigit() else 0
    count = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1), index + 1)
    size = (hi - lo + 1) // count
    block = list(range(lo + index * size, lo + (index + 1) * size))
    # Start at a random place: runs one after another (the parallel pass, then the serial one over
    # the whole range) then seldom reuse each other's recent ports, which may be in TIME_WAIT.
    start = int.from_bytes(os.urandom(2), "big") % len(block)
    return block[start:] + block[:start]


_ports = iter(_port_block())


def free_port() -> int:
    """A currently free TCP port from this process's block (see _port_block), never handed out
    twice in this run."""
    for port in _ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                # Every address, so a port some test bound on 127.0.0.2 or 0.0.0.0 counts as taken.
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port left in this process's block")


def wait_until(pred: Callable[[], bool], timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    last_exc = None
    while time.monotonic() < deadline:
        try:
            if pred():
                return
        except Exception as e:  # noqa: BLE001 - report the last one
            last_exc = e
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


# --------------------------------------------------------------------------
# the floe process


class FloeProcess:
    """One `floe dev` process. Ports and data dir stay fixed across restarts."""

    def __init__(
        self,
        workdir: Path,
        name: str = "floe",
        object_store: Optional[str] = None,
        s3_endpoint: Optional[str] = None,
        extra_args: Iterable[str] = (),
        env: Optional[dict] = None,
        flush_interval_ms: Optional[int] = None,
        flush_bytes: Optional[int] = None,
    ):
        self.name = name
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / f"{name}-data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / f"{name}.stderr.log"
        self.kafka_port = free_port()
        self.http_port = free_port()
        self.metadata_port = free_port()
        self.object_store = object_store
        self.s3_endpoint = s3_endpoint
        self.extra_args = list(extra_args)
        self.flush_interval_ms = flush_interval_ms
        self.flush_bytes = flush_bytes
        self.env = dict(os.environ)
        self.env.setdefault("RUST_BACKTRACE", "1")
        if env:
            self.env.update(env)
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    # -- addresses
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def args(self) -> list[str]:
        a = [
            FLOE_BIN, "dev",
            "--data-dir", str(self.data_dir),
            "--kafka-addr", f"127.0.0.1:{self.kafka_port}",
            "--http-addr", f"127.0.0.1:{self.http_port}",
            "--metadata-addr", f"127.0.0.1:{self.metadata_port}",
        ]
        if self.object_store:
            a += ["--object-store", self.object_store]
        if self.s3_endpoint:
            a += ["--s3-endpoint", self.s3_endpoint]
        if self.flush_interval_ms is not None:
            a += ["--flush-interval-ms", str(self.flush_interval_ms)]
        if self.flush_bytes is not None:
            a += ["--flush-bytes", str(self.flush_bytes)]
        return a + self.extra_args

    # -- lifecycle
    def start(self, timeout: float = READY_TIMEOUT_S) -> "FloeProcess":
        assert self.proc is None or self.proc.poll() is not None, "floe already running"
        if not os.access(FLOE_BIN, os.X_OK):
            pytest.fail(f"FLOE_BIN={FLOE_BIN} is not an executable (build it, or set FLOE_BIN)")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')}: {' '.join(self.args())}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.args(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                env=self.env, start_new_session=True,
            )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = READY_TIMEOUT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {rc} before its Kafka port was ready\n"
                    f"--- stderr tail ---\n{self.tail(60)}"
                )
            if port_open(self.kafka_port):
                return
            time.sleep(0.05)
        raise TimeoutError(
            f"{self.name} did not accept connections on {self.bootstrap} within {timeout}s\n"
            f"--- stderr tail ---\n{self.tail(60)}"
        )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15) -> Optional[int]:
        """SIGTERM, then SIGKILL if it does not exit within `timeout`."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self):
        """SIGKILL the process (and its process group) and reap it."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass

    def restart(self, hard: bool = True, timeout: float = READY_TIMEOUT_S) -> "FloeProcess":
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start(timeout)

    def tail(self, n: int = 60) -> str:
        return _tail_file(self.log_path, n)


@dataclass
class _Tracker:
    node: object
    workdir: Path
    procs: list = field(default_factory=list)

    def new(self, name: str = "floe", start: bool = True, **kw) -> FloeProcess:
        p = FloeProcess(self.workdir, name=name, **kw)
        self.procs.append(p)
        self.node._floe_procs = self.procs  # for failure reports
        if start:
            p.start()
        return p

    def cleanup(self):
        for p in self.procs:
            try:
                p.kill()
            except Exception:  # noqa: BLE001
                pass


@pytest.fixture
def floe_factory(request, tmp_path):
    """Start any number of floe processes; all are killed at teardown."""
    t = _Tracker(request.node, tmp_path)
    try:
        yield t
    finally:
        t.cleanup()


@pytest.fixture
def floe(floe_factory, tmp_path) -> FloeProcess:
    """A running `floe dev` with a file:// object store under tmp_path."""
    objects = tmp_path / "objects"
    objects.mkdir()
    return floe_factory.new("floe", object_store=f"file://{objects}")


# --------------------------------------------------------------------------
# moto (S3) server

S3_ENV = {
    "AWS_ACCESS_KEY_ID": "floe-test",
    "AWS_SECRET_ACCESS_KEY": "floe-test-secret",
    "AWS_REGION": "us-east-1",
}


@dataclass
class MotoServer:
    endpoint: str
    bucket: str
    proc: subprocess.Popen
    log_path: Path

    def s3(self):
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=S3_ENV["AWS_REGION"],
            aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        )

    def list_keys(self, prefix: str = "") -> list[str]:
        s3 = self.s3()
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys += [o["Key"] for o in page.get("Contents", [])]
        return keys


def _moto_server_bin() -> str:
    cand = Path(sys.executable).parent / "moto_server"
    if cand.exists():
        return str(cand)
    found = shutil.which("moto_server")
    if not found:
        pytest.fail("moto_server not found (run `bash scripts/test.sh --deps-only`)")
    return found


@pytest.fixture
def moto(request, tmp_path):
    """A moto S3 server on a free port with one bucket created; killed after."""
    import urllib.request

    port = free_port()
    log_path = tmp_path / "moto.log"
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [_moto_server_bin(), "-H", "127.0.0.1", "-p", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        env={**os.environ, **S3_ENV},
    )
    aux = getattr(request.node, "_aux_logs", [])
    aux.append(("moto", log_path))
    request.node._aux_logs = aux
    endpoint = f"http://127.0.0.1:{port}"
    try:
        def ready():
            if proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {proc.returncode}: {_tail_file(log_path, 20)}")
            with urllib.request.urlopen(endpoint + "/", timeout=1) as r:
                return r.status < 500

        wait_until(ready, 20, "moto_server to answer HTTP", interval=0.1)
        server = MotoServer(endpoint=endpoint, bucket=unique_name("floe-test"), proc=proc, log_path=log_path)
        server.s3().create_bucket(Bucket=server.bucket)
        yield server
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        log.close()


@pytest.fixture
def floe_s3(floe_factory, moto) -> FloeProcess:
    """A running `floe dev` whose object store is s3://BUCKET/floe on moto."""
    p = floe_factory.new(
        "floe-s3", object_store=f"s3://{moto.bucket}/floe", s3_endpoint=moto.endpoint, env=S3_ENV,
    )
    p.moto = moto
    return p


# --------------------------------------------------------------------------
# Kafka client helpers (confluent-kafka and kafka-python)


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})


class RawKafka:
    """One connection speaking requests built with kafka-python's protocol classes."""

    def __init__(self, bootstrap: str):
        from kafka.protocol.parser import KafkaProtocol

        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=15)
        self.parser = KafkaProtocol(client_id="e2e-raw")

    def call(self, request, version: int):
        request.API_VERSION = version
        self.parser.send_request(request)
        self.sock.sendall(self.parser.send_bytes())
        while True:
            data = self.sock.recv(1 << 20)
            assert data, "connection closed"
            got = self.parser.receive_bytes(data)
            if got:
                return got[0][1]

    def close(self):
        self.sock.close()


def scrape_metrics(floe) -> dict[str, float]:
    """The agent's /metrics as {series with labels: value}."""
    import urllib.request

    text = urllib.request.urlopen(f"{floe.http_url}/metrics", timeout=5).read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def agent_metrics(cluster, a) -> dict[str, float]:
    """Agent a's /metrics in a Cluster, as {series with labels: value}."""
    import urllib.request

    text = urllib.request.urlopen(f"{cluster.http_url(a)}/metrics", timeout=5).read().decode()
    series = (line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {name: float(value) for name, value in series}


def agent_metric(cluster, a, name: str, labels: str = "") -> float:
    """The sum of metric `name`'s series on agent a whose labels contain `labels`."""
    return sum(v for k, v in agent_metrics(cluster, a).items()
               if (k == name or k.startswith(name + "{")) and labels in k)


def metric_sum(floe, name: str) -> float:
    """The sum of every series of metric `name`, or of the one series `name` names with labels."""
    return sum(v for k, v in scrape_metrics(floe).items() if k == name or k.startswith(name + "{"))


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: Optional[dict] = None,
                 replication_factor: int = 1, timeout: float = 20):
    from confluent_kafka.admin import NewTopic

    a = admin(bootstrap)
    fut = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})],
        request_timeout=timeout,
    )[name]
    fut.result(timeout=timeout)
    # visible in metadata (without triggering auto creation: list all topics)
    def visible():
        md = a.list_topics(timeout=5)
        t = md.topics.get(name)
        return t is not None and t.error is None and len(t.partitions) == partitions

    wait_until(visible, timeout, f"topic {name} with {partitions} partitions in metadata")


@dataclass
class Rec:
    """One record as produced: what we expect to read back."""
    partition: int
    key: Optional[bytes]
    value: Optional[bytes]
    headers: Optional[list]  # list of (str, bytes|None) or None
    timestamp: Optional[int]  # ms, CreateTime
    offset: int = -1  # from the delivery report


def make_records(rng, n: int, partitions: int, tag: str, ts_base: int, value_size=(0, 300)) -> list[Rec]:
    """Deterministic records with keys, headers, null keys/values and explicit timestamps."""
    recs = []
    for i in range(n):
        key = None if i % 7 == 3 else f"{tag}-k{i}".encode()
        if i % 11 == 5:
            value = None
        elif i % 13 == 6:
            value = b""
        else:
            value = rng.randbytes(rng.randint(*value_size))
        if i % 5 == 0:
            headers = None
        else:
            headers = [("idx", str(i).encode()), ("tag", tag.encode())]
            if i % 3 == 0:
                headers.append(("bin", rng.randbytes(rng.randint(1, 20))))
            if i % 17 == 4:
                headers.append(("idx", b"duplicate-key"))
            if i % 19 == 2:
                headers.append(("nullv", None))
        recs.append(Rec(partition=i % partitions, key=key, value=value, headers=headers,
                        timestamp=ts_base + i))
    return recs


def produce(bootstrap: str, topic: str, recs: list[Rec], conf: Optional[dict] = None, timeout: float = 120):
    """Produce with confluent-kafka; fill in each Rec's offset from its delivery report.

    Raises with a clear message if any delivery failed."""
    from confluent_kafka import Producer

    c = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
         "enable.idempotence": False, "message.timeout.ms": int(timeout * 1000)}
    c.update(conf or {})
    p = Producer(c)
    errors = []

    def cb_for(rec):
        def cb(err, msg):
            if err is not None:
                errors.append((rec, err))
            else:
                rec.offset = msg.offset()
                if msg.partition() != rec.partition:
                    errors.append((rec, f"delivered to partition {msg.partition()}"))
        return cb

    deadline = time.monotonic() + timeout
    for r in recs:
        kw = dict(topic=topic, partition=r.partition, key=r.key, value=r.value, on_delivery=cb_for(r))
        if r.headers is not None:
            kw["headers"] = r.headers
        if r.timestamp is not None:
            kw["timestamp"] = r.timestamp
        while True:
            try:
                p.produce(**kw)
                break
            except BufferError:
                p.poll(0.05)
                if time.monotonic() > deadline:
                    raise TimeoutError("producer queue stayed full")
        p.poll(0)
    remaining = p.flush(max(1.0, deadline - time.monotonic()))
    assert remaining == 0, f"{remaining} messages still undelivered after flush timeout"
    assert not errors, f"{len(errors)} delivery failures, first: {errors[:3]}"
    return recs


def confluent_consumer(bootstrap: str, extra: Optional[dict] = None):
    from confluent_kafka import Consumer

    c = {
        "bootstrap.servers": bootstrap,
        # confluent-kafka insists on a group.id; we never subscribe (no groups in Floe yet)
        "group.id": unique_name("e2e-assign-only"),
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",
        "enable.partition.eof": False,
        "fetch.wait.max.ms": 100,
    }
    c.update(extra or {})
    return Consumer(c)


def watermarks(bootstrap: str, topic: str, partitions: int, timeout: float = 10) -> dict[int, tuple[int, int]]:
    from confluent_kafka import TopicPartition

    c = confluent_consumer(bootstrap)
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout) for p in range(partitions)}
    finally:
        c.close()


def consume_confluent(bootstrap: str, topic: str, partitions: int, timeout: float = 120,
                      start: Optional[dict] = None) -> dict[int, list[tuple]]:
    """Read every partition from its start to its high watermark with assign().

    Returns {partition: [(offset, key, value, headers, (ts_type, ts)), ...]}."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    hw = watermarks(bootstrap, topic, partitions)
    c = confluent_consumer(bootstrap)
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, (start or {}).get(p, OFFSET_BEGINNING)) for p in range(partitions)])
        pending = {p for p in range(partitions) if hw[p][1] > hw[p][0]}
        nxt = {p: None for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                got = {p: (len(out[p]), hw[p]) for p in pending}
                raise TimeoutError(f"consume_confluent timed out; partitions pending (read, watermarks): {got}")
            msgs = c.consume(num_messages=10000, timeout=0.5)
            for m in msgs:
                if m.error():
                    raise AssertionError(f"consumer error on {m.topic()}[{m.partition()}]: {m.error()}")
                p = m.partition()
                out[p].append((m.offset(), m.key(), m.value(), m.headers(), m.timestamp()))
                if m.offset() >= hw[p][1] - 1:
                    pending.discard(p)
        return out
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, partitions: int, timeout: float = 180) -> dict[int, list[tuple]]:
    """Same as consume_confluent but with kafka-python (independent implementation).

    Returns {partition: [(offset, key, value, headers, (ts_type, ts)), ...]} with
    ts_type mapped to confluent's constants (1 CreateTime, 2 LogAppendTime)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", client_id="e2e-kafka-python",
        request_timeout_ms=30000, fetch_max_wait_ms=100,
    )
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        ends = c.end_offsets(tps)
        c.seek_to_beginning(*tps)
        pending = {tp.partition for tp in tps if ends[tp] > 0}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"kafka-python consume timed out; pending {sorted(pending)}; "
                                   f"read {({p: len(v) for p, v in out.items()})}, ends {ends}")
            batches = c.poll(timeout_ms=500, max_records=10000)
            for tp, msgs in batches.items():
                for m in msgs:
                    hdrs = list(m.headers) if m.headers else None
                    out[tp.partition].append((m.offset, m.key, m.value, hdrs, (m.timestamp_type + 1, m.timestamp)))
                    if m.offset >= ends[TopicPartition(topic, tp.partition)] - 1:
                        pending.discard(tp.partition)
        return out
    finally:
        c.close()


def expected_by_partition(recs: list[Rec], partitions: int) -> dict[int, list[Rec]]:
    exp: dict[int, list[Rec]] = {p: [] for p in range(partitions)}
    for r in recs:
        exp[r.partition].append(r)
    for p in exp:
        exp[p].sort(key=lambda r: r.offset)
    return exp


def _norm_headers(h):
    if not h:
        return []
    return [(k if isinstance(k, str) else k.decode(), v) for k, v in h]


def assert_records_match(recs: list[Rec], got: dict[int, list[tuple]], partitions: int, client: str,
                         ts_type: int = 1):
    """Byte-for-byte comparison of consumed records against produced ones."""
    exp = expected_by_partition(recs, partitions)
    for p in range(partitions):
        e, g = exp[p], got[p]
        assert len(g) == len(e), f"[{client}] partition {p}: read {len(g)} records, produced {len(e)}"
        offs = [x[0] for x in g]
        assert offs == list(range(len(g))), (
            f"[{client}] partition {p}: offsets not contiguous from 0 (first bad at "
            f"{next(i for i, o in enumerate(offs) if o != i)})")
        for r, (off, key, value, headers, ts) in zip(e, g):
            where = f"[{client}] partition {p} offset {off}"
            assert off == r.offset, f"{where}: delivery report said offset {r.offset}"
            assert key == r.key, f"{where}: key {key!r} != produced {r.key!r}"
            assert value == r.value, f"{where}: value differs (len {None if value is None else len(value)} vs {None if r.value is None else len(r.value)})"
            assert _norm_headers(headers) == _norm_headers(r.headers), f"{where}: headers {headers!r} != {r.headers!r}"
            if ts_type == 1:
                assert ts == (1, r.timestamp), f"{where}: timestamp {ts} != (CreateTime=1, {r.timestamp})"


def check_order_per_partition(recs: list[Rec]):
    """Records sent to one partition (in this order, by one producer) got increasing offsets."""
    last: dict[int, int] = {}
    for i, r in enumerate(recs):
        assert r.offset >= 0, f"record {i} has no delivery offset"
        assert r.offset > last.get(r.partition, -1), (
            f"record {i} to partition {r.partition} got offset {r.offset} <= previous {last.get(r.partition)}")
        last[r.partition] = r.offset


# --------------------------------------------------------------------------
# a cluster of separate processes: 3 `floe metadata` nodes and 2 `floe agent`s


class Proc:
    """One floe process with its log file; can be SIGKILLed and started again."""

    def __init__(self, name, args, log_dir, bin=None):
        """`bin`: the floe executable (FLOE_BIN unless given; the upgrade test swaps it)."""
        self.name, self.args, self.log = name, args, os.path.join(log_dir, f"{name}.log")
        self.bin = bin or FLOE_BIN
        self.p = None

    def start(self):
        with open(self.log, "a") as log:
            log.write(f"===== start at {time.strftime('%H:%M:%S')}: {self.bin} {' '.join(self.args)}\n")
        self.p = subprocess.Popen([self.bin, *self.args], stdout=subprocess.DEVNULL, stderr=open(self.log, "a"))

    def terminate(self, timeout=30) -> int:
        """SIGTERM, and the exit code once the process is gone."""
        self.p.send_signal(signal.SIGTERM)
        return self.p.wait(timeout)

    def kill(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait(10)

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def tail(self, n=30):
        try:
            return "".join(open(self.log).readlines()[-n:])
        except OSError:
            return ""


class Cluster:
    """Metadata nodes 1-3 (Raft voters) and agents 1-2 (zones a and b; more with `zones`) on
    loopback, sharing a file:// object store under the test's tmp dir."""

    def __init__(self, tmp, meta_args=lambda i: [], agent_args=lambda a: [], bin=None, zones=("a", "b")):
        """`meta_args(i)` and `agent_args(a)`: extra flags of metadata node i and agent a; `bin`:
        the floe executable every process starts with (FLOE_BIN unless given); `zones`: the zone
        of each agent, agent 1's first (one agent per entry)."""
        self.tmp = str(tmp)
        self.meta_ports = {i: free_port() for i in (1, 2, 3)}
        peers = ",".join(f"{i}=127.0.0.1:{p}" for i, p in self.meta_ports.items())
        self.meta = {
            i: Proc(f"metadata{i}", ["metadata", "--node-id", str(i), "--metadata-addr", f"127.0.0.1:{p}",
                                    "--data-dir", os.path.join(self.tmp, f"m{i}"), "--peers", peers,
                                    "--object-store", f"file://{self.tmp}/objects", *meta_args(i)], self.tmp, bin)
            for i, p in self.meta_ports.items()
        }
        addrs = ",".join(f"127.0.0.1:{p}" for p in self.meta_ports.values())
        self.kafka_ports = {a: free_port() for a in range(1, len(zones) + 1)}
        self.http_ports = {a: free_port() for a in self.kafka_ports}
        self.agents = {
            a: Proc(f"agent{a}", ["agent", "--metadata", addrs, "--object-store", f"file://{self.tmp}/objects",
                                  "--kafka-addr", f"127.0.0.1:{kp}", "--http-addr", f"127.0.0.1:{self.http_ports[a]}",
                                  "--node-id", str(a), "--zone", zones[a - 1],
                                  "--cache-dir", os.path.join(self.tmp, f"cache{a}"), *agent_args(a)], self.tmp, bin)
            for a, kp in self.kafka_ports.items()
        }

    def bootstrap(self, a):
        return f"127.0.0.1:{self.kafka_ports[a]}"

    def http_url(self, a) -> str:
        return f"http://127.0.0.1:{self.http_ports[a]}"

    @property
    def metadata_addrs(self) -> str:
        """Every metadata node, as `floe admin ... --metadata` takes them."""
        return ",".join(f"127.0.0.1:{p}" for p in self.meta_ports.values())

    def start(self):
        for p in [*self.meta.values(), *self.agents.values()]:
            if not os.access(p.bin, os.X_OK):
                pytest.fail(f"{p.bin} is not an executable (build it, or set FLOE_BIN)")
        for m in self.meta.values():
            m.start()
        for a, agent in self.agents.items():
            agent.start()
        for a in self.agents:
            wait_until(lambda a=a: port_open(self.kafka_ports[a]), 30, f"agent {a} listening")
        # An agent serves clients only once its first heartbeat is committed, and then gives the
        # other agents' mirrors 250 ms to apply it (test_cluster.py tests that). On a loaded
        # machine a mirror can be later than that, so tests also start only once every agent
        # sees every other (each agent's /v1/cluster lists the agents its Metadata would).
        want = sorted(self.agents)

        def sees_all(a):
            import requests
            try:
                r = requests.get(f"{self.http_url(a)}/v1/cluster", timeout=5)
            except requests.RequestException:
                return True  # HTTP over TLS or not served: nothing to wait on here
            return r.status_code != 200 or sorted(r.json().get("live_agent_ids", want)) == want
        for a in self.agents:
            wait_until(lambda a=a: sees_all(a), 30, f"agent {a} seeing every agent")

    def status(self, node):
        out = subprocess.run([FLOE_BIN, "admin", "cluster", "--metadata", f"127.0.0.1:{self.meta_ports[node]}"],
                             capture_output=True, text=True, timeout=10)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def leader(self, exclude=()):
        found = []

        def ask():
            for i, m in self.meta.items():
                if i in exclude or not m.alive():
                    continue
                s = self.status(i)
                if s and s["leader"] and s["leader"] not in exclude and self.meta[s["leader"]].alive():
                    found.append(s["leader"])
                    return True
            return False

        wait_until(ask, 30, "a metadata leader")
        return found[-1]

    def stop(self):
        for p in [*self.agents.values(), *self.meta.values()]:
            p.kill()

    def logs(self):
        return "\n".join(f"--- {p.name} ---\n{p.tail()}" for p in [*self.meta.values(), *self.agents.values()])


@pytest.fixture
def cluster(request, tmp_path):
    """A started Cluster; every process is SIGKILLed at teardown and, when the test fails, each
    process's log tail is attached to the report."""
    c = Cluster(tmp_path)
    aux = getattr(request.node, "_aux_logs", [])
    aux += [(p.name, Path(p.log)) for p in [*c.meta.values(), *c.agents.values()]]
    request.node._aux_logs = aux
    try:
        c.start()
        yield c
    finally:
        c.stop()
