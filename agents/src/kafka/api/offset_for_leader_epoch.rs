//! OffsetForLeaderEpoch: the end offset of a leader epoch, which clients use to detect log
//! truncation after a leader change. A Floe partition's log is never truncated; its epoch only
//! grows, so every epoch up to the current one ends at the log end offset.
//!
//! That end must be the leader's, not a lagging mirror's: a client whose position is past the
//! end it is told takes it for truncation and seeks back to it (librdkafka does so silently), so
//! the mirror catches up with the metadata leader first, and while it cannot, every partition is
//! answered OFFSET_NOT_AVAILABLE, which clients retry.

use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::code;
use super::super::resources::{AnswerWalk, Op, Refused, Resources, TopicRef, Walk};
use crate::Agent;
use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};

pub(in crate::kafka) async fn handle(
    agent: &Agent,
    request: OffsetForLeaderEpochRequest,
) -> OffsetForLeaderEpochResponse {
    if let Err(e) = agent.metadata.catch_up().await {
        tracing::debug!(error = %e, "OffsetForLeaderEpoch: the mirror cannot catch up with the metadata leader");
        return unavailable(request);
    }
    let state = agent.metadata.read();
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let t = state.topic_by_name(topic.topic.as_str());
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result =
                        EpochEndOffset::default().with_partition(p.partition).with_leader_epoch(-1).with_end_offset(-1);
                    let Some(log) = t.and_then(|t| state.partition(t.topic_id, p.partition)) else {
                        return result.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION);
                    };
                    if p.current_leader_epoch >= 0 && p.current_leader_epoch != log.leader_epoch {
                        let error = if p.current_leader_epoch > log.leader_epoch {
                            code::UNKNOWN_LEADER_EPOCH
                        } else {
                            code::FENCED_LEADER_EPOCH
                        };
                        return result.with_error_code(error);
                    }
                    if p.leader_epoch < 0 || p.leader_epoch > log.leader_epoch {
                        // An epoch this partition never had: Kafka answers "undefined".
                        return result;
                    }
                    result.with_leader_epoch(p.leader_epoch).with_end_offset(log.next_offset)
                })
                .collect();
            OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

/// Every partition of `request` answered OFFSET_NOT_AVAILABLE.
fn unavailable(request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1)
                        .with_error_code(code::OFFSET_NOT_AVAILABLE)
                })
                .collect();
            OffsetForLeaderTopicResult::default().with_topic(topic.topic).with_partitions(partitions)
        })
        .collect();
    OffsetForLeaderEpochResponse::default().with_topics(topics)
}

impl KafkaApi for OffsetForLeaderEpochRequest {
    const VERSIONS: (i16, i16) = (2, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::OffsetForLeaderEpoch(handle(&agent, self).await) })
    }
}

impl Resources for OffsetForLeaderEpochRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetForLeaderEpochResponse> {
        walk.topics(
            &mut self.topics,
            Op::Describe,
            |t| TopicRef::name(&mut t.topic.0),
            |t| t.partitions.iter().map(|p| p.partition).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut OffsetForLeaderEpochResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.topic.0);
    }

    fn answer_refused(response: &mut OffsetForLeaderEpochResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                EpochEndOffset::default()
                    .with_partition(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_end_offset(-1)
                    .with_leader_epoch(-1)
            };
            OffsetForLeaderTopicResult::default()
                .with_topic(kafka_protocol::messages::TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
