"""Admin APIs through confluent-kafka's AdminClient: CreateTopics, DescribeConfigs,
(Incremental)AlterConfigs, CreatePartitions, DeleteRecords, DeleteTopics,
DescribeCluster, and auto topic creation."""

import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from conftest import Rec, admin, confluent_consumer, create_topic, produce, unique_name, wait_until, watermarks

TOPIC_ALREADY_EXISTS = 36
INVALID_TOPIC_EXCEPTION = 17
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_CONFIG = 40
UNKNOWN_TOPIC_OR_PARTITION = 3

T = 20  # seconds, for every admin call


def _err_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), f"expected KafkaException, got {exc!r}"
    return exc.args[0].code()


def _create(a, *topics, validate_only=False):
    futs = a.create_topics(list(topics), validate_only=validate_only, request_timeout=T)
    out = {}
    for name, f in futs.items():
        try:
            f.result(timeout=T)
            out[name] = 0
        except KafkaException as e:
            out[name] = (_err_code(e), str(e))
    return out


def _all_topics(a):
    # list all topics (no topic argument: never triggers auto-creation)
    return a.list_topics(timeout=T).topics


def _src(entry) -> int:
    s = entry.source
    return s.value if hasattr(s, "value") else int(s)


def _describe(a, topic):
    res = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([res], request_timeout=T)[res].result(timeout=T)


def _topic_id(a, topic):
    from confluent_kafka import TopicCollection

    d = a.describe_topics(TopicCollection([topic]), request_timeout=T)[topic].result(timeout=T)
    return str(d.topic_id)


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::create_topics_answers_each_topic_with_its_own_error;
# delete this test once that Rust test passes.
def test_create_topics_variants(floe):
    a = admin(floe.bootstrap)
    good = unique_name("adm")
    vo = unique_name("adm-vo")

    # validate_only: success reported, topic not created
    r = _create(a, NewTopic(vo, num_partitions=3, replication_factor=1), validate_only=True)
    assert r[vo] == 0, f"validate_only create failed: {r}"
    assert vo not in _all_topics(a), "validate_only=True created the topic"

    r = _create(a, NewTopic(good, num_partitions=3, replication_factor=1))
    assert r[good] == 0, f"create failed: {r}"
    wait_until(lambda: good in _all_topics(a) and len(_all_topics(a)[good].partitions) == 3, T,
               "new topic in metadata with 3 partitions")

    r = _create(a, NewTopic(good, num_partitions=3, replication_factor=1))
    assert isinstance(r[good], tuple) and r[good][0] == TOPIC_ALREADY_EXISTS, f"second create: {r}, want 36"

    # same, but validate_only also reports the conflict
    r = _create(a, NewTopic(good, num_partitions=1, replication_factor=1), validate_only=True)
    assert isinstance(r[good], tuple) and r[good][0] == TOPIC_ALREADY_EXISTS, f"validate_only dup: {r}"

    for bad in ("bad name!", "a" * 250, ".", "..", "sl/ash", "ü-topic"):
        r = _create(a, NewTopic(bad, num_partitions=1, replication_factor=1))
        assert isinstance(r[bad], tuple) and r[bad][0] == INVALID_TOPIC_EXCEPTION, \
            f"topic name {bad!r}: got {r[bad]}, want INVALID_TOPIC_EXCEPTION (17)"

    for parts in (0,):  # librdkafka itself rejects values below -1
        name = unique_name("adm-badp")
        r = _create(a, NewTopic(name, num_partitions=parts, replication_factor=1))
        assert isinstance(r[name], tuple) and r[name][0] == INVALID_PARTITIONS, \
            f"num_partitions={parts}: got {r[name]}, want INVALID_PARTITIONS (37)"
        assert name not in _all_topics(a)

    # defaults: -1 partitions / -1 replication factor
    dflt = unique_name("adm-dflt")
    r = _create(a, NewTopic(dflt, num_partitions=-1, replication_factor=-1))
    assert r[dflt] == 0, f"create with -1/-1 defaults: {r}"
    wait_until(lambda: dflt in _all_topics(a), T, "default topic visible")
    assert len(_all_topics(a)[dflt].partitions) == 1, "num.partitions default should be 1"

    # many topics in one request: per-topic results
    ok2, bad2 = unique_name("adm-multi"), "bad name?"
    r = _create(a, NewTopic(ok2, 2, 1), NewTopic(bad2, 1, 1))
    assert r[ok2] == 0 and r[bad2][0] == INVALID_TOPIC_EXCEPTION, f"per-topic results: {r}"


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::a_topic_keeps_the_configs_it_was_created_with_and_bad_values_are_invalid_config;
# delete this test once that Rust test passes.
def test_create_topic_with_connect_style_configs(floe):
    """Kafka Connect / Streams / Debezium style: RF 3 and configs that have no meaning in Floe."""
    a = admin(floe.bootstrap)
    name = unique_name("adm-cfg")
    cfg = {"cleanup.policy": "compact", "segment.ms": "3600000", "min.insync.replicas": "2",
           "retention.ms": "86400000", "segment.bytes": "104857600"}
    r = _create(a, NewTopic(name, num_partitions=2, replication_factor=3, config=cfg))
    assert r[name] == 0, f"create with RF 3 and configs failed: {r}"
    desc = _describe(a, name)
    for k, v in cfg.items():
        assert k in desc, f"{k} missing from DescribeConfigs"
        assert desc[k].value == v, f"{k}: value {desc[k].value!r}, want {v!r}"
        assert _src(desc[k]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, \
            f"{k}: source {desc[k].source}, want DYNAMIC_TOPIC_CONFIG"
    # a default config is reported with a default source
    assert "max.message.bytes" in desc, f"max.message.bytes missing; got {sorted(desc)[:40]}"
    assert _src(desc["max.message.bytes"]) in (ConfigSource.DEFAULT_CONFIG.value, ConfigSource.STATIC_BROKER_CONFIG.value), \
        f"max.message.bytes source {_src(desc['max.message.bytes'])}"
    assert desc["max.message.bytes"].is_default or _src(desc["max.message.bytes"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    # invalid config value → INVALID_CONFIG
    bad = unique_name("adm-badcfg")
    r = _create(a, NewTopic(bad, 1, 1, config={"retention.ms": "not-a-number"}))
    assert isinstance(r[bad], tuple) and r[bad][0] == INVALID_CONFIG, f"bad retention.ms: {r[bad]}, want 40"
    r = _create(a, NewTopic(bad, 1, 1, config={"cleanup.policy": "sometimes"}))
    assert isinstance(r[bad], tuple) and r[bad][0] == INVALID_CONFIG, f"bad cleanup.policy: {r[bad]}, want 40"
    assert bad not in _all_topics(a)


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::incremental_alter_configs_changes_the_configs_named_and_alter_configs_replaces_them_all;
# delete this test once that Rust test passes.
def test_describe_and_alter_configs(floe):
    a = admin(floe.bootstrap)
    name = unique_name("adm-alter")
    create_topic(floe.bootstrap, name, 1, config={"cleanup.policy": "compact", "segment.ms": "3600000"})
    desc = _describe(a, name)
    assert desc["retention.ms"].value == "604800000", f"default retention.ms {desc['retention.ms'].value}"
    assert desc["cleanup.policy"].value == "compact"

    # incremental: SET one, DELETE another
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("segment.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ])
    a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
    desc = _describe(a, name)
    assert desc["retention.ms"].value == "3600000", f"after SET: retention.ms {desc['retention.ms'].value}"
    assert _src(desc["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert _src(desc["segment.ms"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, \
        f"after DELETE: segment.ms still a topic override ({desc['segment.ms'].value})"
    assert desc["cleanup.policy"].value == "compact", "incremental alter touched an unrelated config"

    # incremental with an invalid value → INVALID_CONFIG, nothing changed
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
        ConfigEntry("retention.ms", "abc", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as ei:
        a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
    assert _err_code(ei.value) == INVALID_CONFIG, f"invalid SET: {ei.value}"
    assert _describe(a, name)["retention.ms"].value == "3600000"

    # legacy AlterConfigs replaces the whole set of topic overrides
    res = ConfigResource(ResourceType.TOPIC, name, set_config={"retention.ms": "7200000"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # deprecated in the client, still used by tools
        a.alter_configs([res], request_timeout=T)[res].result(timeout=T)
    desc = _describe(a, name)
    assert desc["retention.ms"].value == "7200000", f"after AlterConfigs: {desc['retention.ms'].value}"
    assert desc["cleanup.policy"].value == "delete" and _src(desc["cleanup.policy"]) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value, \
        f"AlterConfigs should reset unlisted overrides; cleanup.policy={desc['cleanup.policy'].value} source={_src(desc['cleanup.policy'])}"

    # unknown topic
    res = ConfigResource(ResourceType.TOPIC, unique_name("nope"))
    with pytest.raises(KafkaException) as ei:
        a.describe_configs([res], request_timeout=T)[res].result(timeout=T)
    assert _err_code(ei.value) == UNKNOWN_TOPIC_OR_PARTITION, f"describe unknown topic: {ei.value}"


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::create_partitions_adds_partitions_and_refuses_to_remove_any;
# delete this test once that Rust test passes.
def test_create_partitions(floe):
    a = admin(floe.bootstrap)
    name = unique_name("adm-parts")
    create_topic(floe.bootstrap, name, 2)
    a.create_partitions([NewPartitions(name, 5)], request_timeout=T)[name].result(timeout=T)
    # visible at once (no waiting loop)
    parts = _all_topics(a)[name].partitions
    assert sorted(parts) == [0, 1, 2, 3, 4], f"after CreatePartitions: partitions {sorted(parts)}"
    recs = [Rec(partition=4, key=b"k", value=b"in new partition", headers=None, timestamp=None)]
    produce(floe.bootstrap, name, recs)
    assert recs[0].offset == 0
    assert watermarks(floe.bootstrap, name, 5)[4] == (0, 1)

    # decreasing the count is an error
    with pytest.raises(KafkaException) as ei:
        a.create_partitions([NewPartitions(name, 3)], request_timeout=T)[name].result(timeout=T)
    assert _err_code(ei.value) == INVALID_PARTITIONS, f"shrink partitions: {ei.value}"


# PORTED (issue 54): fully replaced by testing/tests/it/fetch.rs::delete_records_moves_the_log_start_and_a_fetch_below_it_is_out_of_range;
# delete this test once that Rust test passes.
def test_delete_records_moves_low_watermark(floe):
    a = admin(floe.bootstrap)
    name = unique_name("adm-delrec")
    create_topic(floe.bootstrap, name, 1)
    recs = [Rec(partition=0, key=None, value=f"v{i}".encode(), headers=None, timestamp=None) for i in range(20)]
    produce(floe.bootstrap, name, recs)
    fut = a.delete_records([TopicPartition(name, 0, 7)], request_timeout=T)
    (res,) = [f.result(timeout=T) for f in fut.values()]
    assert res.low_watermark == 7, f"DeleteRecords low watermark {res.low_watermark}, want 7"
    assert watermarks(floe.bootstrap, name, 1)[0] == (7, 20)

    from conftest import consume_confluent
    got = consume_confluent(floe.bootstrap, name, 1, timeout=30)
    assert [m[0] for m in got[0]] == list(range(7, 20)), f"read offsets {[m[0] for m in got[0]]}"
    assert got[0][0][2] == b"v7"


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::a_topic_created_again_after_its_deletion_is_new_and_empty;
# delete this test once that Rust test passes.
def test_delete_topic_and_recreate(floe):
    a = admin(floe.bootstrap)
    name = unique_name("adm-del")
    create_topic(floe.bootstrap, name, 2)
    produce(floe.bootstrap, name, [Rec(partition=1, key=None, value=b"old", headers=None, timestamp=None)])
    old_id = _topic_id(a, name)
    a.delete_topics([name], request_timeout=T)[name].result(timeout=T)
    wait_until(lambda: name not in _all_topics(a), T, "deleted topic to leave metadata")

    with pytest.raises(KafkaException) as ei:
        a.delete_topics([name], request_timeout=T)[name].result(timeout=T)
    assert _err_code(ei.value) == UNKNOWN_TOPIC_OR_PARTITION, f"delete twice: {ei.value}"

    # recreate (retry briefly in case deletion is still finishing)
    deadline = time.monotonic() + T
    while True:
        r = _create(a, NewTopic(name, num_partitions=1, replication_factor=1))
        if r[name] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r[name] == 0, f"recreate after delete: {r}"
    wait_until(lambda: name in _all_topics(a), T, "recreated topic in metadata")
    new_id = _topic_id(a, name)
    assert new_id != old_id, f"recreated topic kept its id {old_id}"
    assert len(_all_topics(a)[name].partitions) == 1
    assert watermarks(floe.bootstrap, name, 1)[0] == (0, 0), "recreated topic still has old data"


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::describe_cluster_names_the_cluster_and_the_agent_as_broker_and_controller;
# delete this test once that Rust test passes.
def test_describe_cluster(floe):
    a = admin(floe.bootstrap)
    d = a.describe_cluster(request_timeout=T).result(timeout=T)
    assert d.cluster_id, f"empty cluster id: {d}"
    assert d.nodes, "no nodes"
    assert any(n.host == "127.0.0.1" and n.port == floe.kafka_port for n in d.nodes), \
        f"nodes {[(n.id, n.host, n.port) for n in d.nodes]} do not include 127.0.0.1:{floe.kafka_port}"
    assert d.controller is not None and d.controller.id in {n.id for n in d.nodes}, f"controller {d.controller}"
    md = a.list_topics(timeout=T)
    assert md.cluster_id == d.cluster_id, f"Metadata cluster id {md.cluster_id} != DescribeCluster {d.cluster_id}"


def test_auto_create_on_metadata(floe):
    """A producer to an unknown topic auto-creates it with num.partitions (default 1)."""
    a = admin(floe.bootstrap)
    name = unique_name("adm-auto")
    recs = [Rec(partition=0, key=b"k", value=b"v", headers=None, timestamp=None)]
    produce(floe.bootstrap, name, recs, timeout=30)
    md = _all_topics(a)
    assert name in md, "auto-created topic not listed"
    assert len(md[name].partitions) == 1, f"auto-created with {len(md[name].partitions)} partitions"
    c = confluent_consumer(floe.bootstrap)
    try:
        # a consumer's Metadata request must not create topics (allow.auto.create.topics=false)
        other = unique_name("adm-noauto")
        c.list_topics(other, timeout=10)
    finally:
        c.close()
    assert other not in _all_topics(a), "Metadata with allow_auto_topic_creation=false created a topic"


# PORTED (issue 54): fully replaced by testing/tests/it/admin.rs::dynamic_broker_configs_are_checked_and_become_the_topics_defaults;
# delete this test once that Rust test passes.
def test_dynamic_broker_configs(floe):
    """Cluster-wide dynamic broker configs: type-checked, reported as DYNAMIC_DEFAULT_BROKER_CONFIG,
    supplying topic defaults through their broker synonyms; static ones are refused."""
    a = admin(floe.bootstrap)
    name = unique_name("adm-broker")
    create_topic(floe.bootstrap, name, 1)

    broker = ConfigResource(ResourceType.BROKER, "1")
    desc = a.describe_configs([broker], request_timeout=T)[broker].result(timeout=T)
    assert desc["num.partitions"].value == "1" and _src(desc["num.partitions"]) == ConfigSource.STATIC_BROKER_CONFIG.value
    assert "log.retention.ms" in desc and "message.max.bytes" in desc

    default = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([default], request_timeout=T)[default].result(timeout=T)
    desc = a.describe_configs([broker], request_timeout=T)[broker].result(timeout=T)
    assert desc["log.retention.ms"].value == "3600000"
    assert _src(desc["log.retention.ms"]) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    topic = _describe(a, name)
    assert topic["retention.ms"].value == "3600000", f"topic default follows the broker default: {topic['retention.ms'].value}"
    assert _src(topic["retention.ms"]) == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    for bad in [("log.retention.ms", "soon"), ("num.partitions", "3"), ("no.such.config", "1")]:
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(bad[0], bad[1], incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as ei:
            a.incremental_alter_configs([res], request_timeout=T)[res].result(timeout=T)
        assert _err_code(ei.value) == INVALID_CONFIG, f"{bad}: {ei.value}"

    # a dynamic message.max.bytes applies to topics without their own max.message.bytes
    small = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("message.max.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([small], request_timeout=T)[small].result(timeout=T)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": floe.bootstrap, "message.max.bytes": 1000000, "linger.ms": 0})
    errors = []
    p.produce(name, value=b"x" * 5000, partition=0, on_delivery=lambda err, _m: errors.append(err))
    p.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == 10, f"expected MSG_SIZE_TOO_LARGE, got {errors}"

    # DELETE restores the defaults
    reset = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("message.max.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("log.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)])
    a.incremental_alter_configs([reset], request_timeout=T)[reset].result(timeout=T)
    assert _describe(a, name)["retention.ms"].value == "604800000"


def test_alter_configs_takes_back_what_describe_configs_reports(floe):
    """Issue 32 item 3: every Kafka 4.x broker config is known, so the non-incremental AlterConfigs
    a tool sends with the dynamic values DescribeConfigs gave it is accepted, not refused as
    "unknown config"."""
    a = admin(floe.bootstrap)
    broker = ConfigResource(ResourceType.BROKER, "1")
    described = a.describe_configs([broker], request_timeout=T)[broker].result(timeout=T)
    tsv = Path(__file__).resolve().parents[2] / "metadata/src/config/kafka-4.1/broker.tsv"
    kafka_names = {line.split("\t")[0] for line in tsv.read_text().splitlines()[1:]}
    assert kafka_names <= set(described), f"not described: {sorted(kafka_names - set(described))[:10]}"

    relogin = ConfigResource(ResourceType.BROKER, "1", set_config={"sasl.kerberos.min.time.before.relogin": "61000"})
    a.alter_configs([relogin], request_timeout=T)[relogin].result(timeout=T)
    after = a.describe_configs([broker], request_timeout=T)[broker].result(timeout=T)
    assert after["sasl.kerberos.min.time.before.relogin"].value == "61000"

    dynamic = {name: e.value for name, e in described.items()
               if not e.is_read_only and not e.is_sensitive and e.value is not None}
    assert len(dynamic) > 80, len(dynamic)
    everything = ConfigResource(ResourceType.BROKER, "1", set_config=dynamic)
    a.alter_configs([everything], request_timeout=T)[everything].result(timeout=T)
    after = a.describe_configs([broker], request_timeout=T)[broker].result(timeout=T)
    changed = {name: (value, after[name].value) for name, value in dynamic.items() if after[name].value != value}
    assert not changed, changed
