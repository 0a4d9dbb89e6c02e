//! CreateTopics: each topic's name, partitions and configs checked, then the topic created (or
//! only checked, with `validate_only`); answered topic by topic.

use super::*;

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
