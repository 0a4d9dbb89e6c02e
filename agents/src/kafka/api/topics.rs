//! CreateTopics, DeleteTopics, CreatePartitions.

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

pub(in crate::kafka) async fn create_topics(
    agent: &Agent,
    version: i16,
    request: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let too_many = request.topics.len() > CREATE_TOPICS_COUNT_MAX;
    let mut seen: HashMap<String, usize> = HashMap::new();
    for t in &request.topics {
        *seen.entry(t.name.as_str().to_owned()).or_default() += 1;
    }
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.as_str().to_owned();
        let result = CreatableTopicResult::default().with_name(topic.name.clone());
        let checked = if too_many {
            Err(fail(code::INVALID_REQUEST, format!("at most {CREATE_TOPICS_COUNT_MAX} topics per request")))
        } else if seen.get(&name).copied().unwrap_or(0) > 1 {
            Err(fail(code::INVALID_REQUEST, "topic named more than once in the request"))
        } else {
            check_creatable(agent, &topic)
        };
        let outcome = match checked {
            Err(failure) => Err(failure),
            Ok((partition_count, configs)) if request.validate_only => {
                if agent.metadata.read().topic_by_name(&name).is_some() {
                    Err(fail(code::TOPIC_ALREADY_EXISTS, format!("topic {name} already exists")))
                } else {
                    Ok((None, partition_count, configs))
                }
            }
            Ok((partition_count, configs)) => match create(agent, &name, partition_count, configs.clone()).await {
                Ok(topic_id) => Ok((Some(topic_id), partition_count, configs)),
                Err(e) => Err(node_failure(&e)),
            },
        };
        results.push(match outcome {
            Ok((topic_id, partition_count, configs)) => {
                let listing = (version >= 5).then(|| {
                    configs::topic_listing(&configs, &agent.metadata.read().broker_configs.clone(), None, false, false)
                        .into_iter()
                        .map(|c| {
                            CreatableTopicConfigs::default()
                                .with_name(c.name)
                                .with_value(c.value)
                                .with_read_only(c.read_only)
                                .with_config_source(c.config_source)
                                .with_is_sensitive(c.is_sensitive)
                        })
                        .collect()
                });
                result
                    .with_topic_id(topic_id.unwrap_or_default())
                    .with_num_partitions(partition_count)
                    .with_replication_factor(1)
                    .with_configs(listing)
            }
            Err((error, message)) => result
                .with_error_code(error)
                .with_error_message(Some(StrBytes::from_string(message)))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_configs(None),
        });
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// Checks one CreatableTopic; returns the partition count and the normalized configs.
fn check_creatable(
    agent: &Agent,
    topic: &kafka_protocol::messages::create_topics_request::CreatableTopic,
) -> Result<(i32, BTreeMap<String, String>), Failure> {
    validate_topic_name(topic.name.as_str()).map_err(|e| fail(code::INVALID_TOPIC_EXCEPTION, e.to_string()))?;
    let partition_count = if topic.assignments.is_empty() {
        match topic.num_partitions {
            -1 => agent.config.default_partition_count,
            n if n >= 1 => n,
            n => {
                return Err(fail(
                    error_code::for_command(&CommandError::InvalidPartitions { count: n, reason: String::new() })
                        .code(),
                    format!("invalid partition count {n}"),
                ));
            }
        }
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err(fail(
                code::INVALID_REQUEST,
                "with replica assignments, num_partitions and replication_factor must be -1",
            ));
        }
        i32::try_from(topic.assignments.len()).map_err(|_| fail(code::INVALID_REQUEST, "too many assignments"))?
    };
    // Durability comes from the object store, so any replication factor is accepted; 0 and
    // values below -1 are invalid in Kafka too.
    if topic.replication_factor == 0 || topic.replication_factor < -1 {
        return Err(fail(
            code::INVALID_REPLICATION_FACTOR,
            format!("invalid replication factor {}", topic.replication_factor),
        ));
    }
    let mut configs = BTreeMap::new();
    for config in &topic.configs {
        let name = config.name.as_str();
        let Some(value) = config.value.as_ref() else {
            return Err(fail(code::INVALID_CONFIG, format!("config {name} has a null value")));
        };
        let value = floe_metadata::config::validate_topic_config(name, value.as_str())
            .map_err(|e| fail(code::INVALID_CONFIG, e.to_string()))?;
        configs.insert(name.to_owned(), value);
    }
    Ok((partition_count, configs))
}

pub(in crate::kafka) async fn delete_topics(
    agent: &Agent,
    version: i16,
    request: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v6 names topics by name or id; older versions by name only.
    let targets: Vec<(Option<String>, TopicId)> = if version >= 6 {
        request.topics.iter().map(|t| (t.name.as_ref().map(|n| n.as_str().to_owned()), t.topic_id)).collect()
    } else {
        request.topic_names.iter().map(|n| (Some(n.as_str().to_owned()), TopicId::nil())).collect()
    };
    let mut responses = Vec::with_capacity(targets.len());
    for (name, topic_id) in targets {
        let resolved = {
            let state = agent.metadata.read();
            match &name {
                Some(name) => state.topic_by_name(name).map(|t| (t.name.clone(), t.topic_id)),
                None => state.topics.get(&topic_id).map(|t| (t.name.clone(), t.topic_id)),
            }
        };
        let result = DeletableTopicResult::default()
            .with_name(name.clone().map(|n| TopicName(super::str_bytes(n))))
            .with_topic_id(topic_id);
        responses.push(match resolved {
            None => {
                let error = if name.is_some() { code::UNKNOWN_TOPIC_OR_PARTITION } else { code::UNKNOWN_TOPIC_ID };
                result.with_error_code(error)
            }
            Some((name, topic_id)) => match agent.metadata.propose(Command::DeleteTopic { name: name.clone() }).await {
                Ok(_) => result.with_name(Some(TopicName(super::str_bytes(name)))).with_topic_id(topic_id),
                Err(e) => {
                    let (error, message) = node_failure(&e);
                    result.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
                }
            },
        });
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub(in crate::kafka) async fn create_partitions(
    agent: &Agent,
    request: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let name = topic.name.as_str().to_owned();
        let current = agent.metadata.read().topic_by_name(&name).map(|t| t.partitions.len());
        let outcome = match current {
            None => Err(fail(code::UNKNOWN_TOPIC_OR_PARTITION, format!("unknown topic {name}"))),
            Some(current) if topic.count as i64 <= current as i64 => Err(fail(
                error_code::for_command(&CommandError::InvalidPartitions { count: topic.count, reason: String::new() })
                    .code(),
                format!("topic has {current} partitions; the count can only grow"),
            )),
            Some(current)
                if topic
                    .assignments
                    .as_ref()
                    .is_some_and(|a| a.len() as i64 != i64::from(topic.count) - current as i64) =>
            {
                Err(fail(
                    kafka_protocol::ResponseError::InvalidReplicaAssignment.code(),
                    "one assignment is needed per new partition",
                ))
            }
            Some(_) if request.validate_only => Ok(()),
            Some(_) => agent
                .metadata
                .propose(Command::CreatePartitions { name: name.clone(), partition_count: topic.count })
                .await
                .map(|_| ())
                .map_err(|e| node_failure(&e)),
        };
        let result = CreatePartitionsTopicResult::default().with_name(topic.name);
        results.push(match outcome {
            Ok(()) => result,
            Err((error, message)) => {
                result.with_error_code(error).with_error_message(Some(StrBytes::from_string(message)))
            }
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

impl KafkaApi for CreateTopicsRequest {
    const VERSIONS: (i16, i16) = (2, 7);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, version| async move { ResponseKind::CreateTopics(create_topics(&agent, version, self).await) },
        )
    }
}

impl Resources for CreateTopicsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), CreateTopicsResponse> {
        walk.topics_or_cluster(&mut self.topics, Op::Create, |t| TopicRef::name(&mut t.name.0), |_| vec![]);
        Ok(())
    }

    fn walk_answer(response: &mut CreateTopicsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut CreateTopicsResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            CreatableTopicResult::default()
                .with_name(TopicName(t.name))
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        }));
    }
}

impl KafkaApi for DeleteTopicsRequest {
    const VERSIONS: (i16, i16) = (1, 6);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(
            move |agent, version| async move { ResponseKind::DeleteTopics(delete_topics(&agent, version, self).await) },
        )
    }
}

impl Resources for DeleteTopicsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteTopicsResponse> {
        walk.topics(
            &mut self.topics,
            Op::Delete,
            |t| TopicRef { name: t.name.as_mut().map(|n| &mut n.0), id: Some(&mut t.topic_id) },
            |_| vec![],
        );
        walk.topics(&mut self.topic_names, Op::Delete, |t| TopicRef::name(&mut t.0), |_| vec![]);
        Ok(())
    }

    fn walk_answer(response: &mut DeleteTopicsResponse, walk: &AnswerWalk<'_>) {
        response.responses.iter_mut().filter_map(|t| t.name.as_mut()).for_each(|n| walk.name(&mut n.0));
    }

    fn answer_refused(response: &mut DeleteTopicsResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            DeletableTopicResult::default()
                .with_name((!t.name.is_empty()).then_some(TopicName(t.name)))
                .with_topic_id(t.id)
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
        }));
    }
}

impl KafkaApi for CreatePartitionsRequest {
    const VERSIONS: (i16, i16) = (0, 3);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::CreatePartitions(create_partitions(&agent, self).await) })
    }
}

impl Resources for CreatePartitionsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), CreatePartitionsResponse> {
        walk.topics(&mut self.topics, Op::Alter, |t| TopicRef::name(&mut t.name.0), |_| vec![]);
        Ok(())
    }

    fn walk_answer(response: &mut CreatePartitionsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.results, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut CreatePartitionsResponse, refused: Refused) {
        response.results.extend(refused.topics.into_iter().map(|t| {
            CreatePartitionsTopicResult::default()
                .with_name(TopicName(t.name))
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
        }));
    }
}
