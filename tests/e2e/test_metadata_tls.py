"""The metadata port's mutual TLS (issue 23, finding 7): only certificates of the cluster CA are
answered, and each role may do only its part (peers replicate, agents serve clients, operators
manage tenants and membership). Certificates come from scripts/metadata-certs.sh, the commands
docs/SECURITY.md documents."""
import json
import os
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import (FLOE_BIN, Cluster, Proc, create_topic, free_port, port_open, produce, consume_confluent, Rec,
                      wait_until)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOMAIN = "floe-test"
OPERATOR_TOKEN = "operator-token-" + "x" * 24
# Request::Subscribe in the metadata protocol: a 4-byte length, then postcard's variant index.
SUBSCRIBE = struct.pack(">I", 1) + bytes([6])


def make_certs(out, *args, domain=DOMAIN):
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "metadata-certs.sh"), str(out), domain, *args],
                   check=True, capture_output=True, timeout=120)
    return str(out)


def tls_args(certs, name):
    return ["--metadata-tls-cert", f"{certs}/{name}.pem", "--metadata-tls-key", f"{certs}/{name}-key.pem",
            "--metadata-tls-ca", f"{certs}/ca.pem"]


def stranger_subscribe(port) -> bytes:
    """What a client without a certificate reads after asking for the change stream (the whole
    state: every tenant's SCRAM keys and API-key hashes)."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(SUBSCRIBE)
        s.settimeout(3)
        try:
            while len(got) < 1 << 20:
                chunk = s.recv(65536)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, ConnectionResetError):
            pass
    return got


def admin(certs, name, *args, metadata):
    cmd = [FLOE_BIN, "admin", *(tls_args(certs, name) if name else []), *args[:1], "--metadata", metadata, *args[1:]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.timeout(120)
def test_a_metadata_node_reachable_from_the_network_will_not_serve_plaintext(tmp_path):
    """Found: the metadata port answered anyone. A stranger's Subscribe got the whole state, with
    every tenant's SCRAM stored and server keys. Listening beyond loopback without TLS is now
    refused unless --metadata-allow-plaintext says so."""
    port = free_port()
    node = Proc("plain", ["metadata", "--node-id", "1", "--metadata-addr", f"0.0.0.0:{port}",
                          "--peers", f"1=0.0.0.0:{port}", "--data-dir", str(tmp_path / "m")], str(tmp_path))
    node.start()
    try:
        deadline = time.monotonic() + 10
        while node.alive() and time.monotonic() < deadline:
            if port_open(port):
                leaked = stranger_subscribe(port)
                pytest.fail(f"a node on 0.0.0.0 served plaintext: a stranger's Subscribe read {len(leaked)} bytes")
            time.sleep(0.1)
        assert not node.alive(), "the node neither served nor exited"
        assert node.p.returncode != 0
        log = open(node.log).read()
        assert "--metadata-tls-cert" in log, log[-2000:]
    finally:
        node.kill()


@pytest.fixture
def tls_cluster(request, tmp_path):
    """Three metadata nodes and two agents, every metadata connection on mutual TLS."""
    certs = make_certs(tmp_path / "certs", "--peer", "1=127.0.0.1", "--peer", "2=127.0.0.1", "--peer", "3=127.0.0.1",
                       "--agent", "1", "--agent", "2", "--operator", "alice")
    token_file = tmp_path / "operator-token"
    token_file.write_text(OPERATOR_TOKEN)
    token = ["--operator-token-file", str(token_file)]
    c = Cluster(tmp_path, meta_args=lambda i: [*token, *tls_args(certs, f"peer-{i}")],
                agent_args=lambda a: [*token, *tls_args(certs, f"agent-{a}")])
    c.certs, c.addrs = certs, c.metadata_addrs
    request.node._aux_logs = getattr(request.node, "_aux_logs", []) + [
        (p.name, Path(p.log)) for p in [*c.meta.values(), *c.agents.values()]]
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.mark.timeout(240)
def test_metadata_mutual_tls_answers_the_cluster_ca_only_and_each_role_its_part(tls_cluster, tmp_path):
    c = tls_cluster
    one = f"127.0.0.1:{c.meta_ports[1]}"
    # The data plane works across agents: Raft, proposals and the change stream are all on TLS.
    topic = "tls-topic"
    create_topic(f"127.0.0.1:{c.kafka_ports[1]}", topic, 2)
    recs = [Rec(partition=i % 2, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=None, timestamp=None)
            for i in range(200)]
    produce(f"127.0.0.1:{c.kafka_ports[1]}", topic, recs)
    got = consume_confluent(f"127.0.0.1:{c.kafka_ports[2]}", topic, 2, timeout=60)
    assert sum(len(v) for v in got.values()) == 200

    # Strangers get nothing: no certificate, or one of another CA.
    leaked = stranger_subscribe(c.meta_ports[1])
    assert b"SCRAM" not in leaked and len(leaked) < 64, f"a client without a certificate read {len(leaked)} bytes"
    plain = admin(None, None, "cluster", metadata=one)
    assert plain.returncode != 0 and "metadata-tls-cert" in plain.stderr, plain.stderr
    other = make_certs(tmp_path / "other-ca", "--operator", "mallory")
    foreign = admin(other, "operator-mallory", "cluster", metadata=one)
    assert foreign.returncode != 0, foreign.stdout
    wrong_domain = make_certs(tmp_path / "other-domain", "--operator", "mallory", domain="elsewhere")
    # Same file names, but a CA of its own and another trust domain: refused either way.
    assert admin(wrong_domain, "operator-mallory", "cluster", metadata=one).returncode != 0

    # An agent's certificate serves clients; it may not manage tenants or change the voters.
    refused = admin(c.certs, "agent-2", "tenants", "create", "evil", metadata=c.addrs)
    assert refused.returncode != 0 and "not authorized" in refused.stderr, refused.stderr
    voters = admin(c.certs, "agent-2", "add-metadata-node", "--node-id", "9", "--addr", "127.0.0.1:1", metadata=one)
    assert voters.returncode != 0 and "does not allow" in voters.stderr, voters.stderr
    # An operator's may.
    made = admin(c.certs, "operator-alice", "tenants", "create", "acme", metadata=c.addrs)
    assert made.returncode == 0, made.stderr
    status = admin(c.certs, "operator-alice", "cluster", metadata=one)
    assert status.returncode == 0 and len(json.loads(status.stdout)["voters"]) == 3, status.stderr

    # The HTTP operator API on an agent relays the operator token with its commands.
    req = urllib.request.Request(f"http://127.0.0.1:{c.http_ports[1]}/v1/admin/tenants", method="POST",
                                 data=json.dumps({"name": "globex"}).encode(),
                                 headers={"Authorization": f"Bearer {OPERATOR_TOKEN}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status in (200, 201), r.read()
    listed = json.loads(admin(c.certs, "operator-alice", "tenants", "list", metadata=c.addrs).stdout)
    assert {t["tenant"] for t in listed} >= {"acme", "globex"}, listed


class HandshakeFlood:
    """Keeps `count` connections to the metadata port open that send nothing, spread over
    `sources`: each one the server closes is opened again at once, as an attacker would."""

    def __init__(self, port: int, count: int, sources: list[str]):
        import resource
        import selectors
        import threading
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < count + 1024:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(count + 1024, hard), hard))
        self.port, self.sources, self.count = port, sources, count
        self.selector = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open_one(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_IP, 24, 1)  # IP_BIND_ADDRESS_NO_PORT: many sockets, one address
        s.bind((self.sources[self.opened % len(self.sources)], 0))
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.selector.register(s, 1)  # EVENT_READ: the server closing it
        self.opened += 1

    def run(self):
        for _ in range(self.count):
            self.open_one()
        while not self.stop.is_set():
            for key, _ in self.selector.select(timeout=0.2):
                self.selector.unregister(key.fileobj)
                key.fileobj.close()
                self.open_one()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()


# Serial: a flood of 6,000 connections, each reopened as soon as the node closes it, loads the
# machine, and the operator's commands must still get through meanwhile.
@pytest.mark.serial
@pytest.mark.timeout(240)
def test_unfinished_handshakes_cannot_keep_an_operator_out_of_the_metadata_port(tls_cluster):
    """Issue 23, finding 7 (continued): a node served 4,096 connections and counted those still
    in their TLS handshake, so connections that send nothing could hold every slot. Handshakes
    now hold places of their own, at most 32 per source address and 512 in all (past that the
    oldest is given up), and only authenticated connections take one of the served slots. On
    these machines a flood gets only about 3,000 connections established at once, below the old
    4,096, so this test does not fail on the old code: it guards the new bound."""
    c = tls_cluster
    one = f"127.0.0.1:{c.meta_ports[1]}"
    with HandshakeFlood(c.meta_ports[1], 6000, [f"127.0.0.{i}" for i in range(2, 10)]) as flood:
        time.sleep(8)  # past the 5 s handshake timeout: the flood reopens what the node closed
        answers = []
        for _ in range(5):
            started = time.monotonic()
            status = admin(c.certs, "operator-alice", "cluster", metadata=one)
            answers.append((status.returncode, round(time.monotonic() - started, 2), status.stderr.strip()[-160:]))
            time.sleep(1)
        print(f"{flood.opened} connections opened by the flood; operator commands: {answers}")
    assert all(code == 0 for code, _, _ in answers), f"an operator was kept out: {answers}"


def ask_block(port, certs, name, key, object_bytes, index):
    """One request of the agent-to-agent block protocol (version 1) over TLS, presenting `name`'s
    certificate (none: no certificate): (status, body), or None when the agent hung up."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False  # agents' certificates name no address: the chain is what counts
    ctx.load_verify_locations(f"{certs}/ca.pem")
    if name:
        ctx.load_cert_chain(f"{certs}/{name}.pem", f"{certs}/{name}-key.pem")
    body = bytes([1]) + len(key).to_bytes(2, "big") + key.encode() + object_bytes.to_bytes(8, "big") \
        + index.to_bytes(8, "big")

    def exactly(s, n):
        got = b""
        while len(got) < n:
            chunk = s.recv(n - len(got))
            if not chunk:
                return None
            got += chunk
        return got
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(raw) as s:
            s.sendall(len(body).to_bytes(4, "big") + body)
            head = exactly(s, 5)
            if head is None:
                return None
            return head[0], exactly(s, int.from_bytes(head[1:], "big"))
    except (ssl.SSLError, OSError):
        return None


@pytest.mark.timeout(240)
def test_agents_share_blocks_over_mutual_tls_and_nobody_else_reads_them(tmp_path):
    """Fetch agents with peer listeners (`--peer-addr`) ask each other for blocks on the metadata
    identities' mutual TLS: an agent's certificate gets a block; an operator's, another CA's or
    none gets nothing."""
    certs = make_certs(tmp_path / "certs", "--peer", "1=127.0.0.1", "--peer", "2=127.0.0.1", "--peer", "3=127.0.0.1",
                       "--agent", "1", "--agent", "2", "--operator", "alice")
    peer_ports = {1: free_port(), 2: free_port()}
    c = Cluster(tmp_path, meta_args=lambda i: tls_args(certs, f"peer-{i}"), zones=("a", "a"),
                agent_args=lambda a: [*tls_args(certs, f"agent-{a}"), "--peer-addr", f"127.0.0.1:{peer_ports[a]}",
                                      # A consumer reaching agent 2 reads everything through it.
                                      *(["--agent-group", "readers"] if a == 2 else [])])
    try:
        c.start()

        def peers_known(a):
            with urllib.request.urlopen(f"http://127.0.0.1:{c.http_ports[a]}/v1/cluster", timeout=5) as r:
                body = json.loads(r.read())
            return body.get("metadata_format", 0) >= 10 and all(x.get("peer_listener") for x in body["agents"])
        for a in (1, 2):
            wait_until(lambda a=a: peers_known(a), 30, f"agent {a} seeing both peer listeners")
        topic = "peer-blocks"
        create_topic(c.bootstrap(1), topic, 4)
        # A produce call per round, so at least 12 objects: each block's owner is one of the two
        # agents by hash, and with a couple of objects all of them were agent 2's often enough to
        # fail CI (agent 2 then asked nobody).
        recs = []
        for _ in range(12):
            batch = [Rec(partition=i % 4, key=None, value=os.urandom(1024), headers=None, timestamp=None)
                     for i in range(512)]
            produce(c.bootstrap(1), topic, batch)
            recs += batch
        # Agent 2 reads what agent 1 wrote: the blocks agent 1 owns come from its cache over TLS.
        got = consume_confluent(c.bootstrap(2), topic, 4, timeout=120)
        assert sum(len(v) for v in got.values()) == len(recs)

        def metric(a, series):
            text = urllib.request.urlopen(f"http://127.0.0.1:{c.http_ports[a]}/metrics", timeout=5).read().decode()
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(series))
        assert metric(2, 'floe_block_peer_asks_total{result="served"}') > 0
        assert metric(1, 'floe_block_peer_requests_total{outcome="served"}') > 0

        root = tmp_path / "objects"
        key, size = next((str(p.relative_to(root)), p.stat().st_size) for p in root.glob("segments/*.seg"))
        status, body = ask_block(peer_ports[1], certs, "agent-2", key, size, 0)
        assert status == 0 and len(body) == min(size, 4 << 20)
        assert body == (root / key).read_bytes()[:len(body)]
        # Not a segment's key: refused, nothing read.
        assert ask_block(peer_ports[1], certs, "agent-2", "tables/x.parquet", size, 0)[0] == 1
        other = make_certs(tmp_path / "other-ca", "--agent", "1")
        for who, name in ((certs, "operator-alice"), (other, "agent-1"), (certs, None)):
            assert ask_block(peer_ports[1], who, name, key, size, 0) is None, name
    finally:
        c.stop()
