//! The admin APIs as an admin client drives them: CreateTopics, DeleteTopics, CreatePartitions,
//! DescribeConfigs, IncrementalAlterConfigs, AlterConfigs and DescribeCluster, each answered per
//! topic or resource with the error code the client reports.

use std::collections::BTreeMap;

use floe_testing::{CREATE_TOPICS_VERSION, KafkaClient, METADATA_VERSION, TestAgent, TestOptions, record_batch};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_request::{
    AlterConfigsResource as ReplacedResource, AlterableConfig as ReplacedConfig,
};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    AlterConfigsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

const DELETE_TOPICS_VERSION: i16 = 6;
const CREATE_PARTITIONS_VERSION: i16 = 3;
const DESCRIBE_CONFIGS_VERSION: i16 = 4;
const INCREMENTAL_ALTER_CONFIGS_VERSION: i16 = 1;
const ALTER_CONFIGS_VERSION: i16 = 2;
const DESCRIBE_CLUSTER_VERSION: i16 = 1;

/// Config resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// IncrementalAlterConfigs operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
/// DescribeConfigs sources.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// Kafka's default `retention.ms`, seven days.
const RETENTION_MS_DEFAULT: &str = "604800000";

/// CreateTopics answers each topic on its own. With `validate_only` a good topic is answered
/// without error and not created, and an existing one TOPIC_ALREADY_EXISTS (36); created, it is
/// listed with its partitions, and created again it is 36. Names Kafka refuses (characters
/// outside `[a-zA-Z0-9._-]`, over 249 bytes, `.` and `..`) are INVALID_TOPIC_EXCEPTION (17), a
/// partition count of 0 INVALID_PARTITIONS (37) with nothing created, and -1 partitions and
/// replication factor take the defaults (one partition). A good and a bad topic in one request
/// get their own answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_topics_answers_each_topic_with_its_own_error() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();

    let answers = create(&mut kafka, vec![topic("checked", 3, 1, &[])], true).await;
    assert_eq!(answers["checked"], 0, "validate_only: {answers:?}");
    assert!(!listed(&mut kafka).await.contains_key("checked"), "validate_only created the topic");

    assert_eq!(create(&mut kafka, vec![topic("made", 3, 1, &[])], false).await["made"], 0);
    assert_eq!(listed(&mut kafka).await.get("made"), Some(&vec![0, 1, 2]));
    let exists = ResponseError::TopicAlreadyExists.code();
    assert_eq!(create(&mut kafka, vec![topic("made", 3, 1, &[])], false).await["made"], exists);
    assert_eq!(create(&mut kafka, vec![topic("made", 1, 1, &[])], true).await["made"], exists, "validate_only");

    let long = "a".repeat(250);
    for name in ["bad name!", long.as_str(), ".", "..", "sl/ash", "ü-topic"] {
        let answers = create(&mut kafka, vec![topic(name, 1, 1, &[])], false).await;
        assert_eq!(answers[name], ResponseError::InvalidTopicException.code(), "topic name {name:?}");
    }
    let answers = create(&mut kafka, vec![topic("no-partitions", 0, 1, &[])], false).await;
    assert_eq!(answers["no-partitions"], ResponseError::InvalidPartitions.code());

    assert_eq!(create(&mut kafka, vec![topic("defaults", -1, -1, &[])], false).await["defaults"], 0);
    let answers = create(&mut kafka, vec![topic("one-of-two", 2, 1, &[]), topic("bad name?", 1, 1, &[])], false).await;
    assert_eq!(answers["one-of-two"], 0, "{answers:?}");
    assert_eq!(answers["bad name?"], ResponseError::InvalidTopicException.code(), "{answers:?}");

    let topics = listed(&mut kafka).await;
    assert_eq!(topics.get("defaults"), Some(&vec![0]), "num.partitions is 1");
    assert_eq!(topics.get("one-of-two"), Some(&vec![0, 1]));
    assert!(!topics.contains_key("no-partitions") && !topics.contains_key("bad name?"), "{topics:?}");
    floe.shutdown().await;
}

/// A topic created as Kafka Connect, Streams or Debezium create theirs (replication factor 3,
/// configs Floe has no use for) is created, and DescribeConfigs reports each config it was given
/// with its value and the source DYNAMIC_TOPIC_CONFIG (1), and the others from a default source.
/// A config value of the wrong type or outside its choices is INVALID_CONFIG (40), and that topic
/// is not created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_keeps_the_configs_it_was_created_with_and_bad_values_are_invalid_config() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "3600000"),
        ("min.insync.replicas", "2"),
        ("retention.ms", "86400000"),
        ("segment.bytes", "104857600"),
    ];
    assert_eq!(create(&mut kafka, vec![topic("connect-offsets", 2, 3, &configs)], false).await["connect-offsets"], 0);
    let described = describe(&mut kafka, TOPIC, "connect-offsets").await.expect("the topic is described");
    for (name, value) in configs {
        let (described_value, source) = described.get(name).unwrap_or_else(|| panic!("{name} is described"));
        assert_eq!(described_value.as_deref(), Some(value), "{name}");
        assert_eq!(*source, DYNAMIC_TOPIC_CONFIG, "{name}");
    }
    let (_, source) = &described["max.message.bytes"];
    assert!([DEFAULT_CONFIG, STATIC_BROKER_CONFIG].contains(source), "max.message.bytes from source {source}");

    let invalid = ResponseError::InvalidConfig.code();
    for (name, value) in [("retention.ms", "not-a-number"), ("cleanup.policy", "sometimes")] {
        let answers = create(&mut kafka, vec![topic("misconfigured", 1, 1, &[(name, value)])], false).await;
        assert_eq!(answers["misconfigured"], invalid, "{name}={value}");
    }
    assert!(!listed(&mut kafka).await.contains_key("misconfigured"));
    floe.shutdown().await;
}

/// IncrementalAlterConfigs SET and DELETE change only the configs named: a set value is
/// reported from the topic, a deleted one from its default, the others as they were. An
/// invalid value is INVALID_CONFIG (40) and changes nothing. The legacy AlterConfigs replaces
/// the topic's whole set of configs: one it does not name goes back to its default. Configs of
/// an unknown topic are UNKNOWN_TOPIC_OR_PARTITION (3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incremental_alter_configs_changes_the_configs_named_and_alter_configs_replaces_them_all() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    let configs = [("cleanup.policy", "compact"), ("segment.ms", "3600000")];
    assert_eq!(create(&mut kafka, vec![topic("tuned", 1, 1, &configs)], false).await["tuned"], 0);
    let described = describe(&mut kafka, TOPIC, "tuned").await.expect("described");
    assert_eq!(described["retention.ms"].0.as_deref(), Some(RETENTION_MS_DEFAULT));
    assert_eq!(described["cleanup.policy"].0.as_deref(), Some("compact"));

    let changes = [("retention.ms", SET, Some("3600000")), ("segment.ms", DELETE, None)];
    assert_eq!(incremental_alter(&mut kafka, TOPIC, "tuned", &changes).await, 0);
    let described = describe(&mut kafka, TOPIC, "tuned").await.expect("described");
    assert_eq!(described["retention.ms"], (Some("3600000".to_owned()), DYNAMIC_TOPIC_CONFIG));
    assert_ne!(described["segment.ms"].1, DYNAMIC_TOPIC_CONFIG, "deleted: {:?}", described["segment.ms"]);
    assert_eq!(described["cleanup.policy"], (Some("compact".to_owned()), DYNAMIC_TOPIC_CONFIG), "untouched");

    let invalid = incremental_alter(&mut kafka, TOPIC, "tuned", &[("retention.ms", SET, Some("abc"))]).await;
    assert_eq!(invalid, ResponseError::InvalidConfig.code());
    let described = describe(&mut kafka, TOPIC, "tuned").await.expect("described");
    assert_eq!(described["retention.ms"].0.as_deref(), Some("3600000"), "the invalid SET changed nothing");

    let resource = ReplacedResource::default()
        .with_resource_type(TOPIC)
        .with_resource_name(StrBytes::from_static_str("tuned"))
        .with_configs(vec![
            ReplacedConfig::default()
                .with_name(StrBytes::from_static_str("retention.ms"))
                .with_value(Some(StrBytes::from_static_str("7200000"))),
        ]);
    let replaced =
        kafka.call(&AlterConfigsRequest::default().with_resources(vec![resource]), ALTER_CONFIGS_VERSION).await;
    assert_eq!(replaced.responses[0].error_code, 0, "{:?}", replaced.responses[0].error_message);
    let described = describe(&mut kafka, TOPIC, "tuned").await.expect("described");
    assert_eq!(described["retention.ms"], (Some("7200000".to_owned()), DYNAMIC_TOPIC_CONFIG));
    let (policy, source) = &described["cleanup.policy"];
    assert_eq!(policy.as_deref(), Some("delete"), "AlterConfigs reset the override it did not name");
    assert_ne!(*source, DYNAMIC_TOPIC_CONFIG);

    let unknown = describe(&mut kafka, TOPIC, "missing").await;
    assert_eq!(unknown.err(), Some(ResponseError::UnknownTopicOrPartition.code()));
    floe.shutdown().await;
}

/// CreatePartitions from 2 to 5 lists partitions 0 to 4 at once, and the new partition 4 takes
/// a record at offset 0; asking for fewer partitions than the topic has is INVALID_PARTITIONS
/// (37).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_adds_partitions_and_refuses_to_remove_any() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("growing", 2).await;
    assert_eq!(create_partitions(&mut kafka, "growing", 5).await, 0);
    assert_eq!(listed(&mut kafka).await.get("growing"), Some(&vec![0, 1, 2, 3, 4]));
    let produced = kafka.produce("growing", 4, record_batch(&["in new partition"]), -1).await.expect("answered");
    assert_eq!((produced.error_code, produced.base_offset), (0, 0), "{:?}", produced.error_message);
    assert_eq!(kafka.end_offset("growing", 4).await, 1);

    assert_eq!(create_partitions(&mut kafka, "growing", 3).await, ResponseError::InvalidPartitions.code());
    assert_eq!(listed(&mut kafka).await.get("growing").map(Vec::len), Some(5));
    floe.shutdown().await;
}

/// A deleted topic leaves Metadata at once, and deleting it again is UNKNOWN_TOPIC_OR_PARTITION
/// (3). Created again under its name it is another topic: a new id, the partition count asked
/// for, and an empty log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_created_again_after_its_deletion_is_new_and_empty() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("reborn", 2).await;
    let produced = kafka.produce("reborn", 1, record_batch(&["old"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    let old_id = kafka.topic_id("reborn").await;

    assert_eq!(delete_topic(&mut kafka, "reborn").await, 0);
    assert!(!listed(&mut kafka).await.contains_key("reborn"), "deleted topics leave Metadata");
    assert_eq!(delete_topic(&mut kafka, "reborn").await, ResponseError::UnknownTopicOrPartition.code());

    kafka.create_topic("reborn", 1).await;
    assert_ne!(kafka.topic_id("reborn").await, old_id, "a new topic id");
    assert_eq!(listed(&mut kafka).await.get("reborn"), Some(&vec![0]));
    assert_eq!(kafka.end_offset("reborn", 0).await, 0, "the old records are gone");
    floe.shutdown().await;
}

/// DescribeCluster names the cluster, as Metadata does, and the agent as a broker at its
/// advertised address (127.0.0.1:9092 in the harness), which is also the controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_cluster_names_the_cluster_and_the_agent_as_broker_and_controller() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    let cluster = kafka.call(&DescribeClusterRequest::default(), DESCRIBE_CLUSTER_VERSION).await;
    assert_eq!(cluster.error_code, 0, "{:?}", cluster.error_message);
    assert!(!cluster.cluster_id.is_empty());
    assert_eq!(cluster.cluster_id.as_str(), floe.cluster_id());
    let brokers: Vec<(i32, &str, i32)> =
        cluster.brokers.iter().map(|b| (b.broker_id.0, b.host.as_str(), b.port)).collect();
    assert!(brokers.iter().any(|(_, host, port)| (*host, *port) == ("127.0.0.1", 9092)), "{brokers:?}");
    assert!(brokers.iter().any(|(id, ..)| *id == cluster.controller_id.0), "controller {:?}", cluster.controller_id);

    let metadata = kafka.call(&MetadataRequest::default().with_topics(None), METADATA_VERSION).await;
    assert_eq!(metadata.cluster_id.as_deref(), Some(cluster.cluster_id.as_str()));
    floe.shutdown().await;
}

/// Cluster-wide dynamic broker configs: the agent's own settings are STATIC_BROKER_CONFIG (4);
/// a SET `log.retention.ms` is DYNAMIC_DEFAULT_BROKER_CONFIG (3) and becomes the `retention.ms`
/// of a topic without its own, reported from that source. A wrong type, a static config and an
/// unknown name are INVALID_CONFIG (40). A dynamic `message.max.bytes` bounds the batches of
/// topics without their own `max.message.bytes` (MESSAGE_TOO_LARGE, 10), and DELETE restores the
/// defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_broker_configs_are_checked_and_become_the_topics_defaults() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("follower", 1).await;
    let broker = describe(&mut kafka, BROKER, "1").await.expect("broker 1 is described");
    assert_eq!(broker["num.partitions"], (Some("1".to_owned()), STATIC_BROKER_CONFIG));
    assert!(broker.contains_key("log.retention.ms") && broker.contains_key("message.max.bytes"));

    assert_eq!(incremental_alter(&mut kafka, BROKER, "1", &[("log.retention.ms", SET, Some("3600000"))]).await, 0);
    let broker = describe(&mut kafka, BROKER, "1").await.expect("described");
    assert_eq!(broker["log.retention.ms"], (Some("3600000".to_owned()), DYNAMIC_DEFAULT_BROKER_CONFIG));
    let topic = describe(&mut kafka, TOPIC, "follower").await.expect("described");
    assert_eq!(topic["retention.ms"], (Some("3600000".to_owned()), DYNAMIC_DEFAULT_BROKER_CONFIG), "follows");

    for (name, value) in [("log.retention.ms", "soon"), ("num.partitions", "3"), ("no.such.config", "1")] {
        let refused = incremental_alter(&mut kafka, BROKER, "1", &[(name, SET, Some(value))]).await;
        assert_eq!(refused, ResponseError::InvalidConfig.code(), "{name}={value}");
    }

    assert_eq!(incremental_alter(&mut kafka, BROKER, "1", &[("message.max.bytes", SET, Some("2000"))]).await, 0);
    let large = "x".repeat(5000);
    let refused = kafka.produce("follower", 0, record_batch(&[large.as_str()]), -1).await.expect("answered");
    assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code(), "{:?}", refused.error_message);

    let reset = [("message.max.bytes", DELETE, None), ("log.retention.ms", DELETE, None)];
    assert_eq!(incremental_alter(&mut kafka, BROKER, "1", &reset).await, 0);
    let topic = describe(&mut kafka, TOPIC, "follower").await.expect("described");
    assert_eq!(topic["retention.ms"].0.as_deref(), Some(RETENTION_MS_DEFAULT));
    let accepted = kafka.produce("follower", 0, record_batch(&[large.as_str()]), -1).await.expect("answered");
    assert_eq!((accepted.error_code, accepted.base_offset), (0, 0), "{:?}", accepted.error_message);
    floe.shutdown().await;
}

/// A topic for CreateTopics: `partition_count` and `replication_factor` as given (-1: the
/// default), with `configs`.
fn topic(name: &str, partition_count: i32, replication_factor: i16, configs: &[(&str, &str)]) -> CreatableTopic {
    let configs = configs
        .iter()
        .map(|&(name, value)| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_string(name.to_owned()))
                .with_value(Some(StrBytes::from_string(value.to_owned())))
        })
        .collect();
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partition_count)
        .with_replication_factor(replication_factor)
        .with_configs(configs)
}

/// CreateTopics of `topics`: each topic's error code, by name.
async fn create(kafka: &mut KafkaClient, topics: Vec<CreatableTopic>, validate_only: bool) -> BTreeMap<String, i16> {
    let request =
        CreateTopicsRequest::default().with_topics(topics).with_timeout_ms(30_000).with_validate_only(validate_only);
    let response = kafka.call(&request, CREATE_TOPICS_VERSION).await;
    response.topics.into_iter().map(|t| (t.name.0.to_string(), t.error_code)).collect()
}

/// Every topic Metadata lists (asking for all, which creates nothing), with its partitions.
async fn listed(kafka: &mut KafkaClient) -> BTreeMap<String, Vec<i32>> {
    let request = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
    let response = kafka.call(&request, METADATA_VERSION).await;
    response
        .topics
        .into_iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t| {
            let mut partitions: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            partitions.sort_unstable();
            Some((t.name?.0.to_string(), partitions))
        })
        .collect()
}

/// DescribeConfigs of one resource: each config's value and source, or the resource's error.
async fn describe(
    kafka: &mut KafkaClient,
    resource_type: i8,
    name: &str,
) -> Result<BTreeMap<String, (Option<String>, i8)>, i16> {
    let resource = DescribeConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.to_owned()))
        .with_configuration_keys(None);
    let request = DescribeConfigsRequest::default().with_resources(vec![resource]);
    let response = kafka.call(&request, DESCRIBE_CONFIGS_VERSION).await;
    let result = response.results.into_iter().next().expect("the resource is answered");
    if result.error_code != 0 {
        return Err(result.error_code);
    }
    Ok(result
        .configs
        .into_iter()
        .map(|c| (c.name.to_string(), (c.value.map(|v| v.to_string()), c.config_source)))
        .collect())
}

/// IncrementalAlterConfigs of one resource with `changes` (name, operation, value): the
/// resource's error code.
async fn incremental_alter(
    kafka: &mut KafkaClient,
    resource_type: i8,
    name: &str,
    changes: &[(&str, i8, Option<&str>)],
) -> i16 {
    let configs = changes
        .iter()
        .map(|&(config, operation, value)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(config.to_owned()))
                .with_config_operation(operation)
                .with_value(value.map(|v| StrBytes::from_string(v.to_owned())))
        })
        .collect();
    let resource = AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.to_owned()))
        .with_configs(configs);
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![resource]);
    let response = kafka.call(&request, INCREMENTAL_ALTER_CONFIGS_VERSION).await;
    response.responses.first().expect("the resource is answered").error_code
}

/// CreatePartitions of `topic` to `count` partitions: the topic's error code.
async fn create_partitions(kafka: &mut KafkaClient, topic: &str, count: i32) -> i16 {
    let wanted = CreatePartitionsTopic::default().with_name(topic_name(topic)).with_count(count).with_assignments(None);
    let request = CreatePartitionsRequest::default().with_topics(vec![wanted]).with_timeout_ms(30_000);
    let response = kafka.call(&request, CREATE_PARTITIONS_VERSION).await;
    response.results.first().expect("the topic is answered").error_code
}

/// DeleteTopics of `topic` by name: its error code.
async fn delete_topic(kafka: &mut KafkaClient, topic: &str) -> i16 {
    let named = DeleteTopicState::default().with_name(Some(topic_name(topic)));
    let request = DeleteTopicsRequest::default().with_topics(vec![named]).with_timeout_ms(30_000);
    let response = kafka.call(&request, DELETE_TOPICS_VERSION).await;
    response.responses.first().expect("the topic is answered").error_code
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
