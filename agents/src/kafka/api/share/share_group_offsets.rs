//! The share group offset APIs (KIP-932): DescribeShareGroupOffsets (each share partition's
//! start offset), and, for a share group without members, AlterShareGroupOffsets and
//! DeleteShareGroupOffsets.

use std::collections::BTreeMap;

use floe_metadata::groups::{GroupError, GroupRequest, GroupResponse};
use kafka_protocol::messages::alter_share_group_offsets_response::{
    AlterShareGroupOffsetsResponsePartition, AlterShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse, DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, GroupId,
    ResponseKind, TopicName,
};

use super::super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::super::error_code::{code, for_group};
use super::super::super::resources::{AnswerWalk, Op, Refusal, Refused, Res, Resources, TopicRef, Walk};
use super::super::str_bytes;
use crate::Agent;

async fn ask(agent: &Agent, request: GroupRequest) -> Result<GroupResponse, GroupError> {
    agent.metadata.group_request(request).await
}

fn other_kind() -> GroupError {
    GroupError::CoordinatorNotAvailable("answered another request's kind".into())
}

async fn describe(agent: &Agent, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse {
    let asked: Vec<(String, floe_metadata::AskedPartitions)> = request
        .groups
        .iter()
        .map(|g| {
            let topics = g
                .topics
                .as_ref()
                .map(|ts| ts.iter().map(|t| (t.topic_name.to_string(), t.partitions.clone())).collect());
            (g.group_id.to_string(), topics)
        })
        .collect();
    let ids: Vec<String> = asked.iter().map(|(id, _)| id.clone()).collect();
    let answers = match ask(agent, GroupRequest::ShareOffsets(asked)).await {
        Ok(GroupResponse::ShareOffsets(groups)) => groups,
        Ok(_) => ids.iter().map(|_| Err(other_kind())).collect(),
        Err(e) => ids.iter().map(|_| Err(e.clone())).collect(),
    };
    let groups = ids
        .into_iter()
        .zip(answers)
        .map(|(id, answer)| {
            let group = DescribeShareGroupOffsetsResponseGroup::default().with_group_id(GroupId(str_bytes(id)));
            match answer {
                Err(e) => {
                    group.with_error_code(for_group(&e).code()).with_error_message(Some(str_bytes(e.to_string())))
                }
                Ok(rows) => {
                    let mut topics: BTreeMap<String, DescribeShareGroupOffsetsResponseTopic> = BTreeMap::new();
                    for row in rows {
                        let topic = topics.entry(row.topic.clone()).or_insert_with(|| {
                            DescribeShareGroupOffsetsResponseTopic::default()
                                .with_topic_name(TopicName(str_bytes(row.topic.clone())))
                                .with_topic_id(row.topic_id)
                        });
                        let partition = DescribeShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(row.partition)
                            .with_start_offset(row.start_offset)
                            .with_leader_epoch(-1);
                        let partition = if row.log_end < 0 {
                            partition.with_error_code(code::UNKNOWN_TOPIC_OR_PARTITION)
                        } else {
                            partition
                        };
                        topic.partitions.push(partition);
                    }
                    group.with_topics(topics.into_values().collect())
                }
            }
        })
        .collect();
    DescribeShareGroupOffsetsResponse::default().with_groups(groups)
}

impl KafkaApi for DescribeShareGroupOffsetsRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeShareGroupOffsets(describe(&agent, self).await) })
    }
}

impl Resources for DescribeShareGroupOffsetsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeShareGroupOffsetsResponse> {
        use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic as Topic;
        walk.names(&mut self.groups, Op::Describe, Res::Group, |g| &mut g.group_id.0);
        for group in &mut self.groups {
            match group.topics.as_mut() {
                None => walk.listing(),
                Some(topics) => walk.within(group.group_id.0.clone(), |walk| {
                    walk.topics(
                        topics,
                        Op::Describe,
                        |t: &mut Topic| TopicRef::name(&mut t.topic_name.0),
                        |t| t.partitions.clone(),
                    )
                }),
            }
        }
        Ok(())
    }

    fn walk_answer(response: &mut DescribeShareGroupOffsetsResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            walk.described(&mut group.topics, Res::Topic, |t| &mut t.topic_name.0);
        }
    }

    fn answer_refused(response: &mut DescribeShareGroupOffsetsResponse, refused: Refused) {
        response.groups.extend(refused.names.into_iter().map(|n| {
            DescribeShareGroupOffsetsResponseGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)
        }));
        for t in refused.topics {
            let partition = |p| {
                DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_start_offset(-1)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            };
            let answer = DescribeShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect());
            if let Some(g) = response.groups.iter_mut().find(|g| Some(&g.group_id.0) == t.within.as_ref()) {
                g.topics.push(answer);
            }
        }
    }
}

async fn alter(agent: &Agent, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse {
    let offsets: Vec<(String, i32, i64)> = request
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_name.to_string(), p.partition_index, p.start_offset)))
        .collect();
    let asked = GroupRequest::AlterShareOffsets { group_id: request.group_id.to_string(), offsets: offsets.clone() };
    let results = match ask(agent, asked).await {
        Ok(GroupResponse::AlterShareOffsets(results)) => results,
        Ok(_) => Err(other_kind()),
        Err(e) => Err(e),
    };
    let results = match results {
        Ok(results) => results,
        Err(e) => {
            return AlterShareGroupOffsetsResponse::default()
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(str_bytes(e.to_string())));
        }
    };
    let state = agent.metadata.read();
    let mut topics: BTreeMap<String, AlterShareGroupOffsetsResponseTopic> = BTreeMap::new();
    for ((topic, partition, _), result) in offsets.into_iter().zip(results) {
        let entry = topics.entry(topic.clone()).or_insert_with(|| {
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(str_bytes(topic.clone())))
                .with_topic_id(state.topic_by_name(&topic).map(|t| t.topic_id).unwrap_or_default())
        });
        let answer = AlterShareGroupOffsetsResponsePartition::default().with_partition_index(partition);
        entry.partitions.push(match result {
            Ok(()) => answer,
            Err(e) => answer.with_error_code(for_group(&e).code()).with_error_message(Some(str_bytes(e.to_string()))),
        });
    }
    AlterShareGroupOffsetsResponse::default().with_responses(topics.into_values().collect())
}

impl KafkaApi for AlterShareGroupOffsetsRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::AlterShareGroupOffsets(alter(&agent, self).await) })
    }
}

impl Resources for AlterShareGroupOffsetsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), AlterShareGroupOffsetsResponse> {
        use kafka_protocol::messages::alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic as Topic;
        let refused = |refusal: Refusal| AlterShareGroupOffsetsResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)?;
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t: &mut Topic| TopicRef::name(&mut t.topic_name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut AlterShareGroupOffsetsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.responses, |t| &mut t.topic_name.0);
    }

    fn answer_refused(response: &mut AlterShareGroupOffsetsResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                AlterShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            };
            AlterShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}

async fn delete(agent: &Agent, request: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse {
    let topics: Vec<String> = request.topics.iter().map(|t| t.topic_name.to_string()).collect();
    let asked = GroupRequest::DeleteShareOffsets { group_id: request.group_id.to_string(), topics: topics.clone() };
    let results = match ask(agent, asked).await {
        Ok(GroupResponse::DeleteShareOffsets(results)) => results,
        Ok(_) => Err(other_kind()),
        Err(e) => Err(e),
    };
    let results = match results {
        Ok(results) => results,
        Err(e) => {
            return DeleteShareGroupOffsetsResponse::default()
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(str_bytes(e.to_string())));
        }
    };
    let state = agent.metadata.read();
    let responses = topics
        .into_iter()
        .zip(results)
        .map(|(topic, result)| {
            let answer = DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_id(state.topic_by_name(&topic).map(|t| t.topic_id).unwrap_or_default())
                .with_topic_name(TopicName(str_bytes(topic)));
            match result {
                Ok(()) => answer,
                Err(e) => {
                    answer.with_error_code(for_group(&e).code()).with_error_message(Some(str_bytes(e.to_string())))
                }
            }
        })
        .collect();
    DeleteShareGroupOffsetsResponse::default().with_responses(responses)
}

impl KafkaApi for DeleteShareGroupOffsetsRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DeleteShareGroupOffsets(delete(&agent, self).await) })
    }
}

impl Resources for DeleteShareGroupOffsetsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DeleteShareGroupOffsetsResponse> {
        use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic as Topic;
        let refused = |refusal: Refusal| DeleteShareGroupOffsetsResponse::default().with_error_code(refusal.error);
        walk.one(Op::Delete, Res::Group, &mut self.group_id.0).map_err(refused)?;
        walk.topics(&mut self.topics, Op::Read, |t: &mut Topic| TopicRef::name(&mut t.topic_name.0), |_| Vec::new());
        Ok(())
    }

    fn walk_answer(response: &mut DeleteShareGroupOffsetsResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.responses, |t| &mut t.topic_name.0);
    }

    fn answer_refused(response: &mut DeleteShareGroupOffsetsResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            DeleteShareGroupOffsetsResponseTopic::default()
                .with_topic_name(TopicName(t.name))
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
        }));
    }
}
