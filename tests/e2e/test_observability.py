"""Metrics, alert rules and the Grafana dashboard against a real Prometheus.

A 3-node metadata cluster (serving /metrics on --metrics-addr) and 2 agents run a load with
everything the dashboard shows: a tenant with produce and storage quotas (throttled), a consumer
group with lag, a committed transaction, HTTP calls. A real Prometheus scrapes every process
each second with deploy/prometheus/rules.yml loaded, and every query of
deploy/grafana/floe.json, and every recording rule, must return data."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from conftest import FLOE_BIN, Cluster, free_port, port_open, wait_until

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "floe.json"
PASSWORD = "observability-secret"
# The dashboard's rate window, as Grafana would pick it for a 1 s scrape.
RATE_WINDOW = "20s"
ARTIFACTS = Path(os.environ.get("FLOE_TEST_ARTIFACTS", "/tmp/floe-e2e-artifacts")) / "observability"


def admin_tenants(cluster, *args, stdin=None):
    out = subprocess.run([FLOE_BIN, "admin", "tenants", "--metadata", cluster.metadata_addrs, *args],
                         input=stdin, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def kafka_conf(cluster, agent=1):
    return {"bootstrap.servers": cluster.bootstrap(agent), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "ops", "sasl.password": PASSWORD}


class Prometheus:
    def __init__(self, tmp: Path, agents: list[str], metadata: list[str]):
        self.port = free_port()
        self.dir = tmp / "prometheus"
        self.dir.mkdir()
        shutil.copy(RULES, self.dir / "rules.yml")
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yml"],
            "scrape_configs": [
                {"job_name": "floe-agents", "static_configs": [{"targets": agents}]},
                {"job_name": "floe-metadata", "static_configs": [{"targets": metadata}]},
            ],
        }
        (self.dir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = open(self.dir / "prometheus.log", "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={self.dir / 'prometheus.yml'}", f"--storage.tsdb.path={self.dir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(lambda: self.ready(), 30, "prometheus ready")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def ready(self):
        try:
            return requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def query(self, expr: str) -> list:
        r = requests.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        assert r.status_code == 200, f"{expr}: {r.text}"
        body = r.json()
        assert body["status"] == "success", f"{expr}: {body}"
        return body["data"]["result"]

    def targets_up(self) -> dict:
        return {t["scrapeUrl"]: t["health"] for t in requests.get(f"{self.url}/api/v1/targets", timeout=5)
                .json()["data"]["activeTargets"]}

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def has_data(result: list) -> bool:
    """A vector or scalar with at least one number (NaN, from a quantile of nothing, is not data)."""
    values = [r["value"][1] for r in result] if isinstance(result, list) else []
    return any(v not in ("NaN", "+Inf", "-Inf") for v in values)


class Load:
    """Keeps producing (through the throttling quota) and HTTP polling until stopped."""

    def __init__(self, cluster):
        self.cluster, self.stopped, self.errors = cluster, threading.Event(), []
        self.threads = [threading.Thread(target=self.produce, daemon=True),
                        threading.Thread(target=self.consume, daemon=True),
                        threading.Thread(target=self.http, daemon=True)]
        for t in self.threads:
            t.start()

    def produce(self):
        from confluent_kafka import Producer
        try:
            p = Producer({**kafka_conf(self.cluster), "linger.ms": 5})
            i = 0
            while not self.stopped.is_set():
                try:
                    p.produce("orders", key=str(i % 50).encode(), value=b"x" * 400)
                except BufferError:
                    # The quota holds the producer back; its queue is full until it catches up.
                    p.poll(0.1)
                    continue
                i += 1
                if i % 50 == 0:
                    p.poll(0)
                    time.sleep(0.01)
            # What the quota still holds back is not waited for: nothing reads it, and at the
            # quota's 40 kB/s a full queue took the 30 s this flush allowed (half the test).
            p.purge()
            p.flush(5)
        except Exception as e:  # noqa: BLE001
            self.errors.append(e)

    def consume(self):
        """Reads through the block cache all along, so its hit ratio has a rate to show."""
        from confluent_kafka import Consumer
        try:
            c = Consumer({**kafka_conf(self.cluster, 2), "group.id": "live-readers", "auto.offset.reset": "earliest"})
            c.subscribe(["orders"])
            while not self.stopped.is_set():
                c.poll(0.5)
            c.close()
        except Exception as e:  # noqa: BLE001
            self.errors.append(e)

    def http(self):
        while not self.stopped.is_set():
            for a in (1, 2):
                try:
                    requests.get(f"{self.cluster.http_url(a)}/v1/cluster", timeout=5)
                except requests.RequestException as e:
                    self.errors.append(e)
            time.sleep(0.2)

    def stop(self):
        self.stopped.set()
        for t in self.threads:
            t.join(60)


@pytest.fixture
def observed(tmp_path):
    if not shutil.which("prometheus"):
        pytest.fail("prometheus is not installed (scripts/test.sh installs it)")
    metrics_ports = {i: free_port() for i in (1, 2, 3)}
    cluster = Cluster(
        tmp_path,
        meta_args=lambda i: ["--metrics-addr", f"127.0.0.1:{metrics_ports[i]}"],
        agent_args=lambda a: ["--sasl-mechanisms", "SCRAM-SHA-256", "--auth-failures-per-minute", "0",
                              "--flush-interval-ms", "100"],
    )
    prometheus = None
    try:
        cluster.start()
        for i, port in metrics_ports.items():
            wait_until(lambda port=port: port_open(port), 30, f"metadata {i} metrics listener")
        prometheus = Prometheus(
            tmp_path, [f"127.0.0.1:{cluster.http_ports[a]}" for a in (1, 2)],
            [f"127.0.0.1:{p}" for p in metrics_ports.values()])
        yield cluster, prometheus
    finally:
        if prometheus:
            prometheus.stop()
        cluster.stop()


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["expr"].replace("$__rate_interval", RATE_WINDOW))
            for p in dashboard["panels"] for t in p.get("targets", [])]


def test_the_dashboard_file_is_what_its_generator_writes():
    sys.path.insert(0, str(DASHBOARD.parent))
    try:
        import dashboard  # noqa: PLC0415
    finally:
        sys.path.pop(0)
    assert DASHBOARD.read_text() == dashboard.render(), "run python3 deploy/grafana/dashboard.py"


# Serial: the agents' produce p99 must stay in the 256 ms histogram bucket or below (utilization
# < 1), with 5 floe processes, Prometheus and Chromium of its own.
@pytest.mark.serial
@pytest.mark.timeout(300)
def test_every_dashboard_query_and_recording_rule_returns_data(observed):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, prometheus = observed
    started = time.time()
    admin_tenants(cluster, "create", "acme")
    admin_tenants(cluster, "add-user", "--tenant", "acme", "ops", "--password-stdin", stdin=PASSWORD + "\n")
    admin_tenants(cluster, "set-quotas", "--tenant", "acme", "--produce-bytes-per-sec", "40000",
                  "--storage-bytes", "50000000")
    admin = AdminClient(kafka_conf(cluster))
    for future in admin.create_topics([NewTopic("orders", 3)], request_timeout=30).values():
        future.result(30)

    # A committed transaction, and a group that read some records, committed and left (lag).
    txn = Producer({**kafka_conf(cluster), "transactional.id": "billing-txn"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("orders", value=b"in a transaction")
    txn.commit_transaction(30)
    load = Load(cluster)
    try:
        consumer = Consumer({**kafka_conf(cluster, 2), "group.id": "billing", "auto.offset.reset": "earliest",
                             "enable.auto.commit": False})
        consumer.subscribe(["orders"])
        got, deadline = 0, time.monotonic() + 60
        while got < 200 and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is not None and msg.error() is None:
                got += 1
        assert got >= 200, f"consumed {got}"
        consumer.commit(asynchronous=False)
        consumer.close()

        # Every process is scraped.
        wait_until(lambda: list(prometheus.targets_up().values()).count("up") == 5, 30, "5 targets up")
        queries = dashboard_queries()
        with open(RULES) as f:
            recorded = [r["record"] for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "record" in r]
        # The utilization and pool gauges are sampled every 10 s; give every series time to appear.
        missing = []

        def all_have_data():
            missing.clear()
            for title, expr in queries:
                if not has_data(prometheus.query(expr)):
                    missing.append(f"{title}: {expr}")
            for name in recorded:
                if not has_data(prometheus.query(name)):
                    missing.append(f"recording rule {name}")
            return not missing

        try:
            wait_until(all_have_data, 90, "every query to return data", interval=2)
        except TimeoutError:
            pytest.fail("queries without data:\n" + "\n".join(missing))
        assert len(queries) >= 40
        # A tenant held back by its quota is not the agents' latency: the autoscaling signal
        # must not ask for agents because one tenant produces past its share.
        latency = prometheus.query('max(floe_agent_utilization_component{component="produce_latency"})')
        assert has_data(latency) and float(latency[0]["value"][1]) < 1, latency
        # The throttled tenant is seen by the alert rule's expression.
        throttled = prometheus.query('sum by (tenant) (rate(floe_quota_throttle_seconds_total[1m])) > 0')
        assert {r["metric"]["tenant"] for r in throttled} >= {"acme"}, prometheus.query(
            "floe_quota_throttle_seconds_total")
        # A picture of the dashboard over this load (docs/images/dashboard.png is one).
        from helpers.dashboard_png import render
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        render(json.loads(DASHBOARD.read_text()), prometheus.url, started, time.time(), RATE_WINDOW,
               ARTIFACTS / "dashboard.png")
    finally:
        load.stop()
    assert not load.errors, load.errors[:3]
