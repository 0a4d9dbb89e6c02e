"""Tenants as virtual clusters: a tenant's topics, groups and transactional ids live in its own
namespace, on the Kafka listener and over HTTP.

- Two tenants use the same topic name, group id and transactional id at once: each sees only
  its own records (confluent-kafka and kafka-python), its own committed offsets, its own topic
  and group listings, and neither fences the other's transactional producer.
- A client of one tenant tries every Kafka admin API and the HTTP API on another tenant's topic
  and group, by plain name and by the stored `TENANT~NAME`: each is answered as if they did not
  exist (or refused), and the other tenant's data, partitions, configs and offsets are unchanged.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time

import pytest
import requests

from conftest import FLOE_BIN, unique_name, wait_until
from test_auth import PASSWORD, admin_tenants

TENANTS = {"acme": "alice", "globex": "bob"}


@pytest.fixture
def tenants(floe_factory, tmp_path):
    objects = tmp_path / "objects"
    objects.mkdir()
    floe = floe_factory.new("floe-tenancy", object_store=f"file://{objects}", extra_args=[
        "--sasl-mechanisms", "PLAIN,SCRAM-SHA-256", "--http-require-api-key", "--auth-failures-per-minute", "0"])
    floe.keys = {}
    for tenant, user in TENANTS.items():
        admin_tenants(floe, "create", tenant)
        admin_tenants(floe, "add-user", "--tenant", tenant, user, "--password-stdin", stdin=PASSWORD + "\n")
        out = admin_tenants(floe, "create-api-key", "--tenant", tenant, "--user", user)
        floe.keys[tenant] = json.loads(out)["token"]
    return floe


def conf(floe, tenant):
    return {"bootstrap.servers": floe.bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": TENANTS[tenant], "sasl.password": PASSWORD}


def admin(floe, tenant):
    from confluent_kafka.admin import AdminClient
    return AdminClient(conf(floe, tenant))


def create(floe, tenant, topic, partitions=2):
    from confluent_kafka.admin import NewTopic
    a = admin(floe, tenant)  # must outlive the future
    a.create_topics([NewTopic(topic, partitions)])[topic].result(30)


def consume(floe, tenant, topic, group, expected):
    from confluent_kafka import Consumer
    c = Consumer({**conf(floe, tenant), "group.id": group, "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    # Anything beyond what was expected would show here.
    end = time.monotonic() + 2
    while time.monotonic() < end:
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.commit(asynchronous=False)
    c.close()
    return got


@pytest.mark.long
def test_two_tenants_with_the_same_names_see_only_their_own(tenants):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    topic, group, txn = "orders", "billing", "orders-writer"
    for tenant in TENANTS:
        create(tenants, tenant, topic)
    # Same transactional id in both tenants: if they shared it, bob's init would fence alice.
    producers = {t: Producer({**conf(tenants, t), "transactional.id": txn}) for t in TENANTS}
    for p in producers.values():
        p.init_transactions(30)
    for tenant, p in producers.items():
        p.begin_transaction()
        for i in range(20):
            p.produce(topic, value=f"{tenant}-{i}".encode(), partition=i % 2)
        p.commit_transaction(30)

    for tenant in TENANTS:
        got = consume(tenants, tenant, topic, group, 20)
        assert sorted(got) == sorted(f"{tenant}-{i}" for i in range(20)), f"{tenant} read {got}"

        kc = KafkaConsumer(bootstrap_servers=tenants.bootstrap, security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_plain_username=TENANTS[tenant],
                           sasl_plain_password=PASSWORD, auto_offset_reset="earliest", consumer_timeout_ms=5000,
                           isolation_level="read_committed")
        kc.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        values = sorted(m.value.decode() for m in kc)
        kc.close()
        assert values == sorted(f"{tenant}-{i}" for i in range(20)), f"kafka-python as {tenant}: {values}"

        a = admin(tenants, tenant)
        names = set(a.list_topics(timeout=10).topics)
        assert topic in names and not any("~" in n for n in names), names
        groups = [g.group_id for g in a.list_consumer_groups().result(10).valid]
        assert groups.count(group) == 1 and not any("~" in g for g in groups), groups
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KTP
        req = [ConsumerGroupTopicPartitions(group, [KTP(topic, 0), KTP(topic, 1)])]
        offsets = a.list_consumer_group_offsets(req)[group].result(10).topic_partitions
        # 10 records and a commit marker in each partition.
        assert sorted(tp.offset for tp in offsets) == [11, 11], offsets

    # The same names over HTTP: each key reads its own tenant's records.
    for tenant in TENANTS:
        headers = {"Authorization": f"Bearer {tenants.keys[tenant]}"}
        cluster = requests.get(f"{tenants.http_url}/v3/clusters", headers=headers, timeout=10).json()
        cluster_id = cluster["data"][0]["cluster_id"]
        base = f"{tenants.http_url}/v3/clusters/{cluster_id}"
        listed = requests.get(f"{base}/topics", headers=headers, timeout=10)
        assert listed.status_code == 200, listed.text
        assert [t["topic_name"] for t in listed.json()["data"]] == [topic], listed.text
        read = requests.get(f"{base}/topics/{topic}/partitions/0/records", params={"offset": 0},
                            headers=headers, timeout=10)
        assert read.status_code == 200, read.text
        body = read.json()
        values = [base64.b64decode(r["value"]["data"]).decode() for r in body["records"] if r.get("value")]
        assert values and all(v.startswith(tenant) for v in values), body
        assert body["topic_name"] == topic, body
        offsets = requests.get(f"{base}/consumer-groups/{group}/offsets", headers=headers, timeout=10)
        assert offsets.status_code == 200, offsets.text
        assert {o["topic_name"] for o in offsets.json()["offsets"]} == {topic}, offsets.text


def test_cross_tenant_attempts_are_denied(tenants):
    from confluent_kafka import (ConsumerGroupTopicPartitions, KafkaException, Producer,
                                 TopicPartition as KTP)
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       OffsetSpec, ResourceType)

    secret, bob_group = unique_name("secret"), unique_name("bobs")
    create(tenants, "globex", secret, partitions=1)
    p = Producer(conf(tenants, "globex"))
    for i in range(5):
        p.produce(secret, value=f"bob-{i}".encode())
    p.flush(30)
    assert len(consume(tenants, "globex", secret, bob_group, 5)) == 5

    alice = admin(tenants, "acme")

    def fails(future, *codes):
        with pytest.raises(KafkaException) as e:
            future.result(15)
        assert e.value.args[0].name() in codes, e.value.args[0]

    for name in (secret, f"globex~{secret}"):
        assert name not in alice.list_topics(timeout=10).topics
        fails(alice.describe_configs([ConfigResource(ResourceType.TOPIC, name)])[ConfigResource(ResourceType.TOPIC, name)],
              "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION")
        res = ConfigResource(ResourceType.TOPIC, name,
                             incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
        fails(alice.incremental_alter_configs([res])[res], "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION")
        fails(alice.delete_topics([name])[name], "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION")
        fails(alice.create_partitions([NewPartitions(name, 3)])[name], "UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION")
        # librdkafka looks up the partition's leader first: not finding the topic, it answers itself.
        unseen = ("UNKNOWN_TOPIC_OR_PART", "INVALID_TOPIC_EXCEPTION", "_NOENT", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION")
        fails(list(alice.delete_records([KTP(name, 0, 3)]).values())[0], *unseen)
        fails(list(alice.list_offsets({KTP(name, 0): OffsetSpec.latest()}).values())[0], *unseen)

    broker_id = str(next(iter(alice.list_topics(timeout=10).brokers)))
    broker = ConfigResource(ResourceType.BROKER, broker_id,
                            incremental_configs=[ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    fails(alice.incremental_alter_configs([broker])[broker], "CLUSTER_AUTHORIZATION_FAILED")

    for group in (bob_group, f"globex~{bob_group}"):
        assert group not in [g.group_id for g in alice.list_consumer_groups().result(10).valid]
        described = alice.describe_consumer_groups([group])[group]
        try:
            desc = described.result(10)
            assert not desc.members and desc.state.name in ("DEAD", "EMPTY"), desc
        except KafkaException as e:
            assert e.args[0].name() == "GROUP_ID_NOT_FOUND", e
        req = [ConsumerGroupTopicPartitions(group, [KTP(secret, 0)])]
        offsets = alice.list_consumer_group_offsets(req)[group].result(10).topic_partitions
        assert all(tp.offset < 0 for tp in offsets), offsets
        fails(alice.delete_consumer_groups([group])[group], "GROUP_ID_NOT_FOUND")

    # Producing to the other tenant's stored name is refused; to its plain name it creates (at
    # most) alice's own topic, and bob's is untouched.
    ap = Producer({**conf(tenants, "acme"), "message.timeout.ms": 5000})
    errors = []
    ap.produce(f"globex~{secret}", value=b"intruder", on_delivery=lambda err, msg: errors.append(err))
    ap.flush(10)
    assert errors and errors[0] is not None, errors

    # HTTP, with alice's key: bob's topic and group are not there.
    headers = {"Authorization": f"Bearer {tenants.keys['acme']}"}
    cluster_id = requests.get(f"{tenants.http_url}/v3/clusters", headers=headers, timeout=10).json()["data"][0]["cluster_id"]
    base = f"{tenants.http_url}/v3/clusters/{cluster_id}"
    for name in (secret, f"globex~{secret}"):
        for method, path in (("GET", f"/topics/{name}"), ("GET", f"/topics/{name}/partitions"),
                             ("GET", f"/topics/{name}/configs"), ("DELETE", f"/topics/{name}"),
                             ("GET", f"/topics/{name}/partitions/0/records?offset=0")):
            r = requests.request(method, base + path, headers=headers, timeout=10)
            assert r.status_code in (400, 404), (method, path, r.status_code, r.text)
        r = requests.post(f"{base}/topics/{name}/records", headers=headers, timeout=10,
                          json={"value": {"type": "STRING", "data": "intruder"}})
        assert r.status_code in (400, 404), r.text
    assert secret not in [t["topic_name"] for t in requests.get(f"{base}/topics", headers=headers, timeout=10).json()["data"]]
    r = requests.get(f"{base}/consumer-groups/{bob_group}/offsets", headers=headers, timeout=10)
    assert r.status_code == 404, r.text
    assert bob_group not in [g["consumer_group_id"] for g in
                             requests.get(f"{base}/consumer-groups", headers=headers, timeout=10).json()["data"]]

    # Bob's topic, configs, partitions and group are as he left them.
    bob = admin(tenants, "globex")
    assert len(bob.list_topics(timeout=10).topics[secret].partitions) == 1
    res = ConfigResource(ResourceType.TOPIC, secret)
    retention = bob.describe_configs([res])[res].result(10)["retention.ms"].value
    assert retention != "1", retention
    req = [ConsumerGroupTopicPartitions(bob_group, [KTP(secret, 0)])]
    assert [tp.offset for tp in bob.list_consumer_group_offsets(req)[bob_group].result(10).topic_partitions] == [5]
    wait_until(lambda: sorted(consume(tenants, "globex", secret, unique_name("check"), 5)) ==
               [f"bob-{i}" for i in range(5)], 30, "bob's records intact")


def throttle_seconds(floe, tenant, quota):
    metrics = requests.get(f"{floe.http_url}/metrics", timeout=10).text
    prefix = f'floe_quota_throttle_seconds_total{{quota="{quota}",tenant="{tenant}"}}'
    lines = [m for m in metrics.splitlines() if m.startswith(prefix)]
    return float(lines[0].split()[-1]) if lines else 0.0


# Serial: an unthrottled tenant producing flat out must reach 3 times the throttled one's bytes
# with a median latency under 0.5 s; neighbours on the same cores would take that throughput.
@pytest.mark.serial
def test_quotas_hold_a_tenant_to_its_rates_and_partitions_without_slowing_another(tenants):
    """acme may produce 200 kB/s and fetch 100 kB/s; globex has no byte quotas but 3
    partitions. Both produce flat out at once: acme is held to its rate (throttle_time_ms,
    responses held back), globex's records keep a low latency; acme's consumer reads at its
    fetch rate; HTTP requests past the quota get 429; globex cannot pass 3 partitions."""
    import threading

    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import NewPartitions, NewTopic

    produce_rate, fetch_rate = 200_000, 100_000
    admin_tenants(tenants, "set-quotas", "--tenant", "acme", "--produce-bytes-per-sec", str(produce_rate),
                  "--fetch-bytes-per-sec", str(fetch_rate))
    admin_tenants(tenants, "set-quotas", "--tenant", "globex", "--partitions", "3")
    listed = {t["tenant"]: t["quotas"] for t in json.loads(admin_tenants(tenants, "list"))}
    assert listed["acme"]["produce_bytes_per_sec"] == produce_rate and listed["globex"]["partitions"] == 3, listed

    for tenant in TENANTS:
        create(tenants, tenant, "load", partitions=1)
    value = b"x" * 1000
    seconds = 6.0
    results = {}

    def flat_out(tenant):
        p = Producer({**conf(tenants, tenant), "linger.ms": 5, "queue.buffering.max.kbytes": 65536})
        latencies, sent = [], [0]
        end = time.monotonic() + seconds
        start = time.monotonic()
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                p.produce("load", value=value, on_delivery=lambda err, msg, t0=t0: err is None and latencies.append(time.monotonic() - t0))
                sent[0] += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        delivered_in_window = len(latencies)
        window = time.monotonic() - start
        # What is still queued or in flight would drain at acme's quota for a minute: drop it
        # (the records sent may still be written; none is counted as delivered).
        p.purge()
        p.flush(30)
        results[tenant] = (delivered_in_window, window, sorted(latencies))

    threads = [threading.Thread(target=flat_out, args=(t,)) for t in TENANTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    acme_n, acme_window, acme_delivered = results["acme"]
    globex_n, _, globex_latency = results["globex"]
    acme_rate = acme_n * len(value) / acme_window
    # One second of burst, then the rate.
    assert acme_rate <= 1.5 * produce_rate * (seconds + 1) / seconds, f"acme produced {acme_rate:.0f} B/s"
    assert acme_rate >= 0.3 * produce_rate, f"acme produced only {acme_rate:.0f} B/s"
    assert throttle_seconds(tenants, "acme", "produce") > 0
    assert globex_n * len(value) >= 3 * acme_n * len(value), (globex_n, acme_n)
    median = globex_latency[len(globex_latency) // 2]
    assert median < 0.5, f"globex's median produce latency {median:.3f} s while acme was throttled"
    assert throttle_seconds(tenants, "globex", "produce") == 0

    # Fetch: reading acme's records back takes about bytes / rate.
    c = Consumer({**conf(tenants, "acme"), "group.id": unique_name("reader"), "auto.offset.reset": "earliest"})
    c.subscribe(["load"])
    wanted, got, start = min(600, len(acme_delivered)), 0, time.monotonic()
    while got < wanted and time.monotonic() - start < 60:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    took = time.monotonic() - start
    c.close()
    assert got >= wanted, got
    assert took >= 0.5 * (wanted * len(value) / fetch_rate - 1), f"read {got} kB in {took:.1f} s"
    assert throttle_seconds(tenants, "acme", "fetch") > 0

    # HTTP shares the buckets: a 2 MB bulk request puts acme 10 s in debt; the next is refused.
    headers = {"Authorization": f"Bearer {tenants.keys['acme']}", "Content-Type": "application/x-ndjson"}
    cluster_id = requests.get(f"{tenants.http_url}/v3/clusters", headers=headers, timeout=10).json()["data"][0]["cluster_id"]
    url = f"{tenants.http_url}/v3/clusters/{cluster_id}/topics/load/records:bulk"
    line = json.dumps({"value": {"type": "STRING", "data": "y" * 1000}}) + "\n"
    first = requests.post(url, data=line * 2000, headers=headers, timeout=60)
    assert first.status_code in (200, 429), first.text
    refused = requests.post(url, data=line, headers=headers, timeout=30)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1, refused.text
    assert refused.json()["error_code"] == 429
    other = {**headers, "Authorization": f"Bearer {tenants.keys['globex']}"}
    assert requests.post(url, data=line, headers=other, timeout=30).status_code == 200

    # Partitions: globex has 1; 2 more fit, a third does not.
    g = admin(tenants, "globex")
    g.create_topics([NewTopic("two", 2)])["two"].result(30)
    with pytest.raises(KafkaException) as e:
        g.create_topics([NewTopic("more", 1)])["more"].result(30)
    assert e.value.args[0].name() == "POLICY_VIOLATION", e.value.args[0]
    with pytest.raises(KafkaException) as e:
        g.create_partitions([NewPartitions("two", 3)])["two"].result(30)
    assert e.value.args[0].name() == "POLICY_VIOLATION", e.value.args[0]


def test_storage_and_request_rate_quotas(tenants):
    """acme may store 50 kB and make 20 requests a second. Past the storage quota its produce is
    refused (POLICY_VIOLATION on Kafka, 429 over HTTP) while globex writes on; deleting the
    topic frees the space. A burst of HTTP requests past the request rate gets 429s, and a
    Kafka client past it is held back; globex is untouched."""
    from confluent_kafka import KafkaError, Producer

    admin_tenants(tenants, "set-quotas", "--tenant", "acme", "--storage-bytes", "50000",
                  "--requests-per-sec", "20")
    for tenant in TENANTS:
        create(tenants, tenant, "store", partitions=1)

    def produce(tenant, count):
        p = Producer({**conf(tenants, tenant), "linger.ms": 0, "batch.num.messages": 1})
        errors = []
        for i in range(count):
            p.produce("store", value=b"z" * 1000, on_delivery=lambda err, msg: errors.append(err))
            p.flush(30)
        return errors

    # 1 kB records one flush at a time: past 50 kB stored, the next are refused.
    errors = produce("acme", 80)
    accepted = next(i for i, e in enumerate(errors) if e is not None)
    assert 40 <= accepted <= 50, errors
    assert all(e is not None and e.code() == KafkaError.POLICY_VIOLATION for e in errors[accepted:]), errors
    stored = {t["tenant"]: t["quotas"] for t in json.loads(admin_tenants(tenants, "list"))}["acme"]["stored_bytes"]
    assert 50_000 <= stored < 60_000, stored
    assert all(e is None for e in produce("globex", 80)), "globex has no storage quota"

    headers = {"Authorization": f"Bearer {tenants.keys['acme']}"}
    cluster_id = requests.get(f"{tenants.http_url}/v3/clusters", headers=headers, timeout=10).json()["data"][0]["cluster_id"]
    base = f"{tenants.http_url}/v3/clusters/{cluster_id}"
    time.sleep(1.5)  # the request bucket refills
    r = requests.post(f"{base}/topics/store/records", json={"value": {"type": "STRING", "data": "x"}},
                      headers=headers, timeout=30)
    assert r.status_code == 429 and "storage" in r.json()["message"], r.text

    # Deleting the topic frees the space.
    a = admin(tenants, "acme")  # must outlive the future
    a.delete_topics(["store"])["store"].result(30)
    create(tenants, "acme", "store", partitions=1)
    assert all(e is None for e in produce("acme", 5))

    # Request rate: 60 quick listings, about a second's worth (20) then 429s; globex never.
    time.sleep(1.5)
    statuses = [requests.get(f"{base}/topics", headers=headers, timeout=30).status_code for _ in range(60)]
    assert statuses.count(200) >= 15 and statuses.count(429) >= 20, statuses
    other = {"Authorization": f"Bearer {tenants.keys['globex']}"}
    assert all(requests.get(f"{base}/topics", headers=other, timeout=30).status_code == 200 for _ in range(60))

    # Kafka: 100 metadata requests from acme take about 100 / 20 s, held back by the quota.
    from confluent_kafka.admin import AdminClient
    a = AdminClient(conf(tenants, "acme"))
    start = time.monotonic()
    for _ in range(100):
        a.list_topics(topic="store", timeout=30)
    took = time.monotonic() - start
    assert took >= 2.5, f"100 requests in {took:.1f} s past a 20/s quota"
    assert throttle_seconds(tenants, "acme", "requests") > 0


def test_each_tenant_names_the_browser_origins_its_keys_serve(tenants):
    """acme lets https://app.acme.test call the API from a browser; globex lists nothing. A
    preflight (which carries no key) from acme's origin is allowed, one from elsewhere is not; an
    actual request from acme's origin gets CORS headers with acme's key, not with globex's."""
    admin_tenants(tenants, "set-cors", "--tenant", "acme", "--origin", "https://app.acme.test")
    listed = {t["tenant"]: t["cors_origins"] for t in json.loads(admin_tenants(tenants, "list"))}
    assert listed == {"acme": ["https://app.acme.test"], "globex": []}, listed
    bad = subprocess.run([FLOE_BIN, "admin", "tenants", "--metadata", f"127.0.0.1:{tenants.metadata_port}",
                          "set-cors", "--tenant", "acme", "--origin", "app.acme.test/path"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode != 0 and "origin" in bad.stderr, bad

    key = {t: {"Authorization": f"Bearer {tenants.keys[t]}"} for t in TENANTS}
    cluster_id = requests.get(f"{tenants.http_url}/v3/clusters", headers=key["acme"], timeout=10).json()["data"][0]["cluster_id"]
    url = f"{tenants.http_url}/v3/clusters/{cluster_id}/topics"
    allowed = "access-control-allow-origin"

    def preflight(origin):
        return requests.options(url, headers={"Origin": origin, "Access-Control-Request-Method": "GET",
                                              "Access-Control-Request-Headers": "authorization"}, timeout=10)

    assert preflight("https://app.acme.test").headers.get(allowed) == "https://app.acme.test"
    assert allowed not in preflight("https://evil.test").headers
    from_acme = {"Origin": "https://app.acme.test"}
    r = requests.get(url, headers={**key["acme"], **from_acme}, timeout=10)
    assert r.status_code == 200 and r.headers.get(allowed) == "https://app.acme.test", r.headers
    r = requests.get(url, headers={**key["globex"], **from_acme}, timeout=10)
    assert r.status_code == 200 and allowed not in r.headers, r.headers


def test_share_groups_of_two_tenants_with_the_same_names_stay_apart(tenants):
    """Both tenants run share group `workers` on topic `jobs`: each share consumer gets its own
    tenant's records only."""
    from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

    floe = tenants
    consumers = {}
    for tenant in TENANTS:
        create(floe, tenant, "jobs", partitions=1)
        c = ShareConsumer({**conf(floe, tenant), "group.id": "workers", "share.acknowledgement.mode": "explicit"})
        c.subscribe(["jobs"])
        consumers[tenant] = c
    # A share group starts at the log end (share.auto.offset.reset=latest): poll until each
    # has fetched once, then produce.
    end = time.monotonic() + 4
    while time.monotonic() < end:
        for c in consumers.values():
            c.poll(0.2)
    for tenant in TENANTS:
        p = Producer(conf(floe, tenant))
        for i in range(10):
            p.produce("jobs", value=f"{tenant}-{i}".encode())
        assert p.flush(30) == 0
    got = {t: [] for t in TENANTS}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(len(v) < 10 for v in got.values()):
        for tenant, c in consumers.items():
            for m in c.poll(0.3) or []:
                if not m.error():
                    got[tenant].append(m.value().decode())
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync()
    for c in consumers.values():
        c.close()
    for tenant in TENANTS:
        assert sorted(got[tenant]) == sorted(f"{tenant}-{i}" for i in range(10)), got


def test_group_configs_belong_to_the_tenant_that_set_them(tenants):
    """acme sets a config on its group `workers`: globex's `workers` keeps the default, globex
    cannot reach acme's by the stored name, and neither may alter the cluster's configs."""
    from confluent_kafka import KafkaException
    from test_share_groups import alter_group_configs, describe_group_configs

    floe = tenants
    alter_group_configs(floe.bootstrap, "workers", {"share.auto.offset.reset": "earliest"}, conf(floe, "acme"))
    reset = lambda tenant, group: describe_group_configs(floe.bootstrap, group, conf(floe, tenant))[  # noqa: E731
        "share.auto.offset.reset"][0]
    assert reset("acme", "workers") == "earliest"
    assert reset("globex", "workers") == "latest"
    assert reset("globex", "acme~workers") == "latest", "the stored name is just another name in globex"
    alter_group_configs(floe.bootstrap, "acme~workers", {"share.auto.offset.reset": "latest"}, conf(floe, "globex"))
    assert reset("acme", "workers") == "earliest", "globex's change landed in its own namespace"
    try:
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
        a = AdminClient(conf(floe, "acme"))
        entry = ConfigEntry("group.share.min.record.lock.duration.ms", "1000",
                            incremental_operation=AlterConfigOpType.SET)
        for f in a.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "1",
                                                             incremental_configs=[entry])]).values():
            f.result(10)
        raise AssertionError("a tenant altered a broker config")
    except KafkaException as e:
        assert e.args[0].code() == 31, e  # CLUSTER_AUTHORIZATION_FAILED  # noqa: PLR2004
