//! CreatePartitions: more partitions for a topic (never fewer).

use super::*;

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
