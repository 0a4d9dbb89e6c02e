"""Admin APIs through confluent-kafka's AdminClient: CreateTopics, DescribeConfigs,
(Incremental)AlterConfigs, CreatePartitions, DeleteRecords, DeleteTopics,
DescribeCluster, and auto topic creation."""

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from conftest import Rec, admin, confluent_consumer, create_topic, produce, unique_name

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
