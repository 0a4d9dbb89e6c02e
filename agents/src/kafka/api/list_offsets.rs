//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4), latest
//! tiered (-5), and by timestamp, looking inside batches for the exact record.

use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::{self, code};
use super::super::resources::{AnswerWalk, Op, Refused, Resources, TopicRef, Walk};
use crate::Agent;
use crate::fetch::records_at_timestamp;
use kafka_protocol::messages::ResponseKind;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const READ_COMMITTED: i8 = 1;

pub(in crate::kafka) async fn handle(agent: &Agent, version: i16, request: ListOffsetsRequest) -> ListOffsetsResponse {
    let read_committed = request.isolation_level == READ_COMMITTED;
    // The ends of a log must be at least what any client was acknowledged before asking (a
    // write, a DeleteRecords), as on a Kafka leader (KIP-207: ListOffsets never goes back): this
    // agent's mirror may lag a commit another agent acknowledged, so it catches up with the
    // metadata leader first. A restore that reads to the end it was told would otherwise stop
    // short of acknowledged records (seen by the changelog workload of `floe chaos` during a
    // leader failover).
    let asks_ends = request.topics.iter().flat_map(|t| &t.partitions).any(|p| asks_an_end(p.timestamp));
    let ends_known = !asks_ends || agent.metadata.catch_up().await.is_ok();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in topic.partitions {
            let response = ListOffsetsPartitionResponse::default().with_partition_index(p.partition_index);
            let answer = if !ends_known && asks_an_end(p.timestamp) {
                // Retriable: the client asks again once a metadata leader answers.
                Err(code::OFFSET_NOT_AVAILABLE)
            } else {
                lookup(
                    agent,
                    topic.name.as_str(),
                    p.partition_index,
                    p.current_leader_epoch,
                    p.timestamp,
                    read_committed,
                )
                .await
            };
            partitions.push(match answer {
                Ok((offset, timestamp, leader_epoch)) => {
                    // Leader epochs exist on the wire from v4.
                    let response = response.with_offset(offset).with_timestamp(timestamp);
                    if version >= 4 { response.with_leader_epoch(leader_epoch) } else { response }
                }
                Err(error) => response.with_error_code(error).with_offset(-1).with_timestamp(-1),
            });
        }
        topics.push(ListOffsetsTopicResponse::default().with_name(topic.name).with_partitions(partitions));
    }
    ListOffsetsResponse::default().with_topics(topics)
}

/// Whether `target` asks for one of the log's ends, which acknowledgements move.
fn asks_an_end(target: i64) -> bool {
    matches!(target, LATEST | LATEST_TIERED | EARLIEST | EARLIEST_LOCAL)
}

/// Returns (offset, timestamp, leader epoch) or an error code.
async fn lookup(
    agent: &Agent,
    topic: &str,
    partition: i32,
    current_leader_epoch: i32,
    target: i64,
    read_committed: bool,
) -> Result<(i64, i64, i32), i16> {
    let (topic_id, high_watermark, last_stable_offset, log_start_offset, leader_epoch) = {
        let state = agent.metadata.read();
        let t = state.topic_by_name(topic).ok_or(code::UNKNOWN_TOPIC_OR_PARTITION)?;
        let p = state.partition(t.topic_id, partition).ok_or(code::UNKNOWN_TOPIC_OR_PARTITION)?;
        (t.topic_id, p.next_offset, p.last_stable_offset(), p.log_start_offset, p.leader_epoch)
    };
    if current_leader_epoch >= 0 && current_leader_epoch != leader_epoch {
        return Err(if current_leader_epoch > leader_epoch {
            code::UNKNOWN_LEADER_EPOCH
        } else {
            code::FENCED_LEADER_EPOCH
        });
    }
    match target {
        LATEST if read_committed => Ok((last_stable_offset, -1, leader_epoch)),
        LATEST => Ok((high_watermark, -1, leader_epoch)),
        EARLIEST | EARLIEST_LOCAL => Ok((log_start_offset, -1, leader_epoch)),
        // Everything committed is in object storage: the last committed record is "tiered".
        LATEST_TIERED => Ok((high_watermark - 1, -1, leader_epoch)),
        t if t >= 0 || t == MAX_TIMESTAMP => match records_at_timestamp(agent, topic_id, partition, t).await {
            Ok(Some(hit)) => Ok((hit.offset, hit.timestamp, hit.leader_epoch)),
            Ok(None) => Ok((-1, -1, leader_epoch)),
            Err(e) => Err(error_code::for_fetch(&e).code()),
        },
        _ => Err(code::INVALID_REQUEST),
    }
}

impl KafkaApi for ListOffsetsRequest {
    const VERSIONS: (i16, i16) = (1, 10);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::ListOffsets(handle(&agent, version, self).await) })
    }
}

impl Resources for ListOffsetsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ListOffsetsResponse> {
        walk.topics(
            &mut self.topics,
            Op::Describe,
            |t| TopicRef::name(&mut t.name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut ListOffsetsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut ListOffsetsResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                ListOffsetsPartitionResponse::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_offset(-1)
            };
            ListOffsetsTopicResponse::default()
                .with_name(kafka_protocol::messages::TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
