//! DeleteRecords: advances a partition's log start offset.

use floe_metadata::{Command, Outcome};
use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::{self, code};
use super::super::resources::{AnswerWalk, Op, Refused, Resources, TopicRef, Walk};
use crate::Agent;
use kafka_protocol::messages::ResponseKind;

pub(in crate::kafka) async fn handle(agent: &Agent, request: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let topic_id = agent.metadata.read().topic_by_name(topic.name.as_str()).map(|t| t.topic_id);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let result =
                DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index).with_low_watermark(-1);
            let Some(topic_id) = topic_id else {
                partitions.push(result.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            let command = Command::DeleteRecords { topic_id, partition: p.partition_index, offset: p.offset };
            partitions.push(match agent.metadata.propose(command).await {
                Ok(Outcome::LogStartOffset { offset }) => result.with_low_watermark(offset),
                Ok(_) => result.with_error_code(kafka_protocol::ResponseError::UnknownServerError.code()),
                Err(e) => result.with_error_code(error_code::for_node(&e).code()),
            });
        }
        topics.push(DeleteRecordsTopicResult::default().with_name(topic.name).with_partitions(partitions));
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

impl KafkaApi for DeleteRecordsRequest {
    const VERSIONS: (i16, i16) = (0, 2);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DeleteRecords(handle(&agent, self).await) })
    }
}

impl Resources for DeleteRecordsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteRecordsResponse> {
        walk.topics(
            &mut self.topics,
            Op::Delete,
            |t| TopicRef::name(&mut t.name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut DeleteRecordsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut DeleteRecordsResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                DeleteRecordsPartitionResult::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_low_watermark(-1)
            };
            DeleteRecordsTopicResult::default()
                .with_name(kafka_protocol::messages::TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
