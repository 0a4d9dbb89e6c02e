//! CreateTopics, DeleteTopics, CreatePartitions.

mod create_partitions;
mod create_topics;
mod delete_topics;

use std::collections::{BTreeMap, HashMap};

use floe_metadata::{Command, CommandError, NodeError, Outcome, TopicId, validate_topic_name};
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::{self, code};
use super::super::resources::{AnswerWalk, Op, Refused, Resources, TopicRef, Walk};
use super::configs;
use crate::Agent;
use crate::limits::CREATE_TOPICS_COUNT_MAX;

use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;

/// Creates a topic with validated configs; shared by CreateTopics and auto-creation.
pub(super) async fn create(
    agent: &Agent,
    name: &str,
    partition_count: i32,
    configs: BTreeMap<String, String>,
) -> Result<TopicId, NodeError> {
    let command =
        Command::CreateTopic { name: name.to_owned(), topic_id: uuid::Uuid::new_v4(), partition_count, configs };
    match agent.metadata.propose(command).await? {
        Outcome::TopicCreated { topic_id } => Ok(topic_id),
        other => Err(NodeError::Unavailable(format!("unexpected outcome {other:?}"))),
    }
}

/// A per-topic failure: error code and message.
type Failure = (i16, String);

fn fail(code: i16, message: impl Into<String>) -> Failure {
    (code, message.into())
}

fn node_failure(e: &NodeError) -> Failure {
    (error_code::for_node(e).code(), e.to_string())
}
