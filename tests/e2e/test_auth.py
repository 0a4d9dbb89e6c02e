"""Authentication: SASL on the Kafka listener and API keys on the HTTP API.

- A user created with `floe admin tenants add-user` produces and consumes with PLAIN,
  SCRAM-SHA-256 and SCRAM-SHA-512, through confluent-kafka and kafka-python, re-authenticating
  (KIP-368) as its session lifetime runs out.
- A wrong password and an unknown user are refused alike and write nothing; a client that does
  not authenticate is disconnected before any other request is served.
- HTTP requests need a valid API key (Bearer or Basic); missing, wrong, expired and deleted keys
  get 401, while /healthz, /readyz and /metrics stay open.
- Tenants, users and API keys are managed over the operator API (`/v1/admin`) with the operator
  token, and what it creates works on both listeners; without the token nothing is served.
- Super users (`--super-users`) describe and alter SCRAM credentials with Kafka's admin APIs,
  within their own tenant; other users are refused.
- Failed authentication is limited per source address across both listeners: past the limit,
  even a correct key or password is refused unchecked (429 with Retry-After over HTTP).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest
import requests

from conftest import FLOE_BIN, unique_name, wait_until

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PASSWORD = "correct horse battery staple"


def admin_tenants(floe, *args, stdin=None):
    out = subprocess.run([FLOE_BIN, "admin", "tenants", "--metadata", f"127.0.0.1:{floe.metadata_port}", *args],
                         input=stdin, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.fixture
def secured(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-auth", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", ",".join(MECHANISMS), "--sasl-session-lifetime-ms", "3000", "--http-require-api-key",
        # These tests fail on purpose many times from one address; the limit has its own test.
        "--auth-failures-per-minute", "0"])
    admin_tenants(floe, "create", "acme")
    admin_tenants(floe, "add-user", "--tenant", "acme", "alice", "--password-stdin", stdin=PASSWORD + "\n")
    return floe


def wrong(token: str) -> str:
    """The token with its last character changed (to a different one, whatever it was)."""
    return token[:-1] + ("1" if token.endswith("0") else "0")


def auth_count(floe, result: str) -> float:
    metrics = requests.get(f"{floe.http_url}/metrics", timeout=10).text
    line = [m for m in metrics.splitlines() if m.startswith(f'floe_kafka_authentications_total{{result="{result}"}}')]
    return float(line[0].split()[-1]) if line else 0.0


def confluent_conf(floe, mechanism, user="alice", password=PASSWORD):
    return {"bootstrap.servers": floe.bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


@pytest.mark.long
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_each_mechanism_works_with_both_clients_and_reauthenticates(secured, mechanism):
    from confluent_kafka import Consumer, Producer
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = unique_name("auth")
    conf = confluent_conf(secured, mechanism)
    p = Producer({**conf, "linger.ms": 0})
    sent = []
    # Longer than two session lifetimes: librdkafka must re-authenticate to go on.
    deadline = time.monotonic() + 7
    i = 0
    while time.monotonic() < deadline:
        p.produce(topic, value=f"c{i}".encode(), on_delivery=lambda err, msg: sent.append(err))
        p.flush(10)
        i += 1
        time.sleep(0.2)
    assert sent and all(e is None for e in sent), sent[:3]
    # Re-authentication happened on the open connections: more successful authentications than
    # connections (bootstrap and broker), and none was closed for an expired session.
    assert auth_count(secured, "ok") >= 4
    assert "SASL session expired" not in secured.tail(10_000)

    kp = KafkaProducer(bootstrap_servers=secured.bootstrap, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=PASSWORD)
    for j in range(5):
        kp.send(topic, value=f"k{j}".encode()).get(timeout=30)
    kp.close()

    c = Consumer({**conf, "group.id": unique_name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) + 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert sorted(got) == sorted([f"c{n}".encode() for n in range(len(sent))] + [f"k{j}".encode() for j in range(5)])

    kc = KafkaConsumer(bootstrap_servers=secured.bootstrap, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password=PASSWORD,
                       auto_offset_reset="earliest", consumer_timeout_ms=10000)
    kc.assign([TopicPartition(topic, 0)])
    assert len([m for m in kc]) == len(got)
    kc.close()


@pytest.mark.long
def test_wrong_passwords_unknown_users_and_anonymous_clients_are_refused(secured):
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient

    topic = unique_name("auth-denied")
    errors = {}
    for who, user, password in (("wrong password", "alice", "guess"), ("unknown user", "mallory", PASSWORD)):
        for mechanism in MECHANISMS:
            seen = []
            p = Producer({**confluent_conf(secured, mechanism, user, password), "message.timeout.ms": 3000,
                          "error_cb": lambda e, seen=seen: seen.append(e)})
            delivered = []
            p.produce(topic, value=b"must not be written", on_delivery=lambda err, msg: delivered.append(err))
            p.flush(8)
            assert delivered and delivered[0] is not None, f"{who}/{mechanism} was delivered"
            auth_errors = [str(e) for e in seen if "uthentication" in str(e)]
            assert auth_errors, f"{who}/{mechanism}: no authentication error in {seen}"
            errors[(who, mechanism)] = auth_errors[0]
    # The server's message is the same whatever was wrong.
    for mechanism in MECHANISMS:
        assert "invalid username or password" in errors[("wrong password", mechanism)]
        assert "invalid username or password" in errors[("unknown user", mechanism)]

    anonymous = AdminClient({"bootstrap.servers": secured.bootstrap})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=3)

    ok = AdminClient(confluent_conf(secured, "SCRAM-SHA-512"))
    assert topic not in ok.list_topics(timeout=10).topics, "a refused client wrote or created nothing"
    assert auth_count(secured, "failed") >= 6


def test_http_requests_need_a_valid_api_key(secured):
    created = json.loads(admin_tenants(secured, "create-api-key", "--tenant", "acme", "--user", "alice"))
    token, key_id = created["token"], created["key_id"]
    short = json.loads(admin_tenants(secured, "create-api-key", "--tenant", "acme", "--user", "alice",
                                     "--expires-in-secs", "1"))
    bearer = lambda t: {"Authorization": f"Bearer {t}"}
    secret = token.split(".", 1)[1]
    basic = {"Authorization": "Basic " + base64.b64encode(f"{key_id}:{secret}".encode()).decode()}

    base = secured.http_url
    assert requests.get(f"{base}/v3/clusters", timeout=10).status_code == 401
    r = requests.get(f"{base}/v3/clusters", headers=bearer(wrong(token)), timeout=10)
    assert r.status_code == 401 and r.json()["error_code"] == 401 and "WWW-Authenticate" in r.headers
    assert requests.get(f"{base}/v3/clusters", headers=bearer("fk_nope.nope"), timeout=10).status_code == 401
    cluster = requests.get(f"{base}/v3/clusters", headers=bearer(token), timeout=10)
    assert cluster.status_code == 200
    cluster_id = cluster.json()["data"][0]["cluster_id"]
    r = requests.post(f"{base}/v3/clusters/{cluster_id}/topics", headers=basic, json={"topic_name": "keyed"}, timeout=10)
    assert r.status_code == 201, r.text
    r = requests.post(f"{base}/v3/clusters/{cluster_id}/topics/keyed/records", headers=bearer(token),
                      json={"value": {"data": "hello"}}, timeout=10)
    assert r.status_code == 200, r.text
    for open_path in ("/healthz", "/readyz", "/metrics"):
        assert requests.get(f"{base}{open_path}", timeout=10).status_code == 200, open_path
    # The API description names this cluster: like /v3, it needs a key.
    assert requests.get(f"{base}/openapi.json", timeout=10).status_code == 401
    assert requests.get(f"{base}/openapi.json", headers=bearer(token), timeout=10).status_code == 200
    # No --operator-token-file: the operator API is not served at all.
    assert requests.get(f"{base}/v1/admin/tenants", headers=bearer(token), timeout=10).status_code == 404

    time.sleep(1.5)
    assert requests.get(f"{base}/v3/clusters", headers=bearer(short["token"]), timeout=10).status_code == 401
    admin_tenants(secured, "delete-api-key", key_id)
    wait_until(lambda: requests.get(f"{base}/v3/clusters", headers=bearer(token), timeout=10).status_code == 401,
               10, "deleted key refused")


def test_tenants_users_and_keys_are_managed_over_the_operator_api(floe_factory, tmp_path):
    from confluent_kafka import Producer

    objects = tmp_path / "objects"
    objects.mkdir()
    operator = "operator-" + "x7" * 16
    token_file = tmp_path / "operator-token"
    token_file.write_text(operator + "\n")
    floe = floe_factory.new("floe-operator", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key", "--operator-token-file", str(token_file),
        "--auth-failures-per-minute", "0", "--http-metrics-access", "operator"])
    admin = f"{floe.http_url}/v1/admin"
    op = {"Authorization": f"Bearer {operator}"}

    # A shared endpoint's metrics name every tenant's topics and groups: the operator's only.
    assert requests.get(f"{floe.http_url}/metrics", timeout=10).status_code == 401
    r = requests.get(f"{floe.http_url}/metrics", headers=op, timeout=10)
    assert r.status_code == 200 and "process_threads" in r.text, r.status_code
    assert requests.get(f"{floe.http_url}/healthz", timeout=10).status_code == 200

    assert requests.get(f"{admin}/tenants", timeout=10).status_code == 401
    assert requests.get(f"{admin}/tenants", headers={"Authorization": "Bearer " + "y" * 40}, timeout=10).status_code == 401
    r = requests.post(f"{admin}/tenants", headers=op, json={"name": "acme"}, timeout=10)
    assert r.status_code == 201, r.text
    assert requests.post(f"{admin}/tenants", headers=op, json={"name": "acme"}, timeout=10).status_code == 409
    r = requests.put(f"{admin}/tenants/acme/users/alice", headers=op, json={"password": PASSWORD}, timeout=30)
    assert r.status_code == 204, r.text
    assert requests.put(f"{admin}/tenants/nope/users/bob", headers=op, json={"password": PASSWORD},
                        timeout=30).status_code == 404
    for bad, status in (({"password": ""}, 422), ({"password": PASSWORD, "mechanisms": ["MD5"]}, 422),
                        ({"password": PASSWORD, "role": "root"}, 422)):
        r = requests.put(f"{admin}/tenants/acme/users/carol", headers=op, json=bad, timeout=30)
        assert r.status_code == status and "error_code" in r.json(), (bad, r.status_code, r.text)
    r = requests.put(f"{admin}/tenants/acme/users/carol", headers={**op, "Content-Type": "application/json"},
                     data="{not json", timeout=30)
    assert r.status_code == 400, r.text

    # The user it created produces over SASL/SCRAM; the key it created opens the HTTP API.
    delivered = []
    p = Producer(confluent_conf(floe, "SCRAM-SHA-256"))
    p.produce(unique_name("operator"), value=b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(15)
    assert delivered == [None], delivered
    r = requests.post(f"{admin}/tenants/acme/api-keys", headers=op, json={"user": "alice"}, timeout=10)
    assert r.status_code == 201, r.text
    key = r.json()
    assert requests.get(f"{floe.http_url}/v3/clusters", headers={"Authorization": f"Bearer {key['token']}"},
                        timeout=10).status_code == 200
    listing = requests.get(f"{admin}/tenants", headers=op, timeout=10)
    assert listing.status_code == 200
    (acme,) = listing.json()["tenants"]
    assert acme["tenant"] == "acme" and [u["user"] for u in acme["users"]] == ["alice"]
    assert [k["key_id"] for k in acme["api_keys"]] == [key["key_id"]]
    assert key["token"].split(".", 1)[1] not in listing.text, "secrets are never listed"

    assert requests.delete(f"{admin}/api-keys/{key['key_id']}", headers=op, timeout=10).status_code == 204
    wait_until(lambda: requests.get(f"{floe.http_url}/v3/clusters", headers={"Authorization": f"Bearer {key['token']}"},
                                    timeout=10).status_code == 401, 10, "deleted key refused")
    assert requests.delete(f"{admin}/users/alice", headers=op, timeout=10).status_code == 204
    assert requests.delete(f"{admin}/tenants/acme", headers=op, timeout=10).status_code == 204
    assert requests.get(f"{admin}/tenants", headers=op, timeout=10).json() == {"tenants": []}


def test_super_users_manage_scram_credentials_of_their_tenant_over_kafka(floe_factory, tmp_path):
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialDeletion, UserScramCredentialUpsertion)

    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-scram-admin", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512", "--super-users", "root", "--auth-failures-per-minute", "0"])
    for tenant in ("acme", "other"):
        admin_tenants(floe, "create", tenant)
    for tenant, user in (("acme", "root"), ("acme", "alice"), ("other", "bob")):
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
    root = AdminClient(confluent_conf(floe, "SCRAM-SHA-512", user="root"))

    described = root.describe_user_scram_credentials().result(30)
    assert sorted(described) == ["alice", "root"], f"another tenant's user is visible: {described}"
    assert sorted(i.mechanism for i in described["alice"].scram_credential_infos) == [
        ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]

    sha256 = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    futures = root.alter_user_scram_credentials([
        UserScramCredentialUpsertion("carol", sha256, b"carol's password"),
        UserScramCredentialUpsertion("bob", sha256, b"taken over"),
    ])
    futures["carol"].result(30)
    with pytest.raises(KafkaException, match="UNACCEPTABLE_CREDENTIAL|cannot be set"):
        futures["bob"].result(30)

    delivered = []
    p = Producer(confluent_conf(floe, "SCRAM-SHA-256", user="carol", password="carol's password"))
    p.produce(unique_name("carol"), value=b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(15)
    assert delivered == [None], delivered

    root.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])["carol"].result(30)
    with pytest.raises(KafkaException, match="RESOURCE_NOT_FOUND|not"):
        root.describe_user_scram_credentials(["carol"])["carol"].result(30)

    alice = AdminClient(confluent_conf(floe, "SCRAM-SHA-256", user="alice"))
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED|super users"):
        alice.describe_user_scram_credentials().result(30)
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED|super users"):
        alice.describe_user_scram_credentials(["root"])["root"].result(30)
    futures = alice.alter_user_scram_credentials([UserScramCredentialUpsertion("mallory", sha256, b"x" * 12)])
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED|super users"):
        futures["mallory"].result(30)


def test_failed_authentication_is_limited_per_source(floe_factory, tmp_path):
    from confluent_kafka import Producer

    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-auth-limit", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key", "--auth-failures-per-minute", "3"])
    admin_tenants(floe, "create", "acme")
    admin_tenants(floe, "add-user", "--tenant", "acme", "alice", "--password-stdin", stdin=PASSWORD + "\n")
    token = json.loads(admin_tenants(floe, "create-api-key", "--tenant", "acme", "--user", "alice"))["token"]
    url = f"{floe.http_url}/v3/clusters"
    good = {"Authorization": f"Bearer {token}"}
    assert requests.get(url, headers=good, timeout=10).status_code == 200

    for _ in range(3):
        r = requests.get(url, headers={"Authorization": f"Bearer {wrong(token)}"}, timeout=10)
        assert r.status_code == 401, r.text
    # The fourth attempt from this address is refused without its (valid) key being checked.
    r = requests.get(url, headers=good, timeout=10)
    assert r.status_code == 429, r.text
    assert "too many failed authentications" in r.json()["message"]
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert requests.get(f"{floe.http_url}/healthz", timeout=10).status_code == 200, "open paths stay open"

    # The Kafka listener shares the count: the right password is refused too, with the reason.
    seen = []
    p = Producer({**confluent_conf(floe, "SCRAM-SHA-256"), "message.timeout.ms": 3000,
                  "error_cb": lambda e: seen.append(str(e))})
    delivered = []
    p.produce(unique_name("limited"), value=b"x", on_delivery=lambda err, msg: delivered.append(err))
    p.flush(8)
    assert delivered and delivered[0] is not None, "delivered while the source was blocked"
    assert any("too many failed authentications" in e for e in seen), seen


def self_signed(tmp_path):
    """A certificate for 127.0.0.1 and localhost and its key, as PEM files."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "floe-test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def test_both_listeners_over_tls(floe_factory, tmp_path):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaProducer

    cert, key = self_signed(tmp_path)
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tls", object_store=f"file://{objects}", extra_args=[
        "--tls-cert", str(cert), "--tls-key", str(key), "--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key"])
    admin_tenants(floe, "create", "acme")
    admin_tenants(floe, "add-user", "--tenant", "acme", "alice", "--password-stdin", stdin=PASSWORD + "\n")
    conf = {**confluent_conf(floe, "SCRAM-SHA-256"), "security.protocol": "SASL_SSL", "ssl.ca.location": str(cert)}
    topic = unique_name("tls")
    p = Producer(conf)
    delivered = []
    for i in range(20):
        p.produce(topic, value=f"v{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    p.flush(30)
    assert len(delivered) == 20 and all(e is None for e in delivered), delivered[:3]
    kp = KafkaProducer(bootstrap_servers=floe.bootstrap, security_protocol="SASL_SSL", ssl_cafile=str(cert),
                       sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice", sasl_plain_password=PASSWORD)
    kp.send(topic, value=b"kafka-python").get(timeout=30)
    kp.close()
    c = Consumer({**conf, "group.id": unique_name("g"), "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 21 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert len(got) == 21

    # A client speaking plaintext to the TLS listener gets nowhere.
    from confluent_kafka import KafkaException
    with pytest.raises(KafkaException):
        AdminClient({**confluent_conf(floe, "SCRAM-SHA-256")}).list_topics(timeout=3)

    token = json.loads(admin_tenants(floe, "create-api-key", "--tenant", "acme", "--user", "alice"))["token"]
    https = floe.http_url.replace("http://", "https://")
    r = requests.get(f"{https}/v3/clusters", headers={"Authorization": f"Bearer {token}"}, verify=str(cert), timeout=10)
    assert r.status_code == 200, r.text
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{floe.http_url}/healthz", timeout=5)
