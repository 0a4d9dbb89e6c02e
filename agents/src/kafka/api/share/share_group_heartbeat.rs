//! ShareGroupHeartbeat (KIP-932): joins, keeps and leaves a member of a share group; the
//! coordinator assigns partitions, several members to one when they outnumber the partitions.

use floe_metadata::groups::{GroupRequest, GroupResponse, ShareHeartbeat};
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ResponseKind, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse};

use super::super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::super::error_code::for_group;
use super::super::super::resources::{AnswerWalk, Op, Refusal, Res, Resources, Walk};
use super::super::groups::Client;
use super::super::str_bytes;
use crate::Agent;

async fn heartbeat(agent: &Agent, request: ShareGroupHeartbeatRequest, client: Client) -> ShareGroupHeartbeatResponse {
    let heartbeat = ShareHeartbeat {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        rack_id: request.rack_id.map(|r| r.to_string()),
        subscribed_topics: request.subscribed_topic_names.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        client_id: client.client_id,
        client_host: client.host,
    };
    let result = match agent.metadata.group_request(GroupRequest::ShareHeartbeat(heartbeat)).await {
        Ok(GroupResponse::ShareHeartbeat(result)) => result,
        Ok(_) => Err(floe_metadata::groups::GroupError::CoordinatorNotAvailable("answered another kind".into())),
        Err(e) => Err(e),
    };
    match result {
        Err(e) => ShareGroupHeartbeatResponse::default()
            .with_error_code(for_group(&e).code())
            .with_error_message(Some(str_bytes(e.to_string()))),
        Ok(answer) => ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|partitions| {
                Assignment::default().with_topic_partitions(
                    partitions
                        .into_iter()
                        .map(|(topic_id, partitions)| {
                            TopicPartitions::default().with_topic_id(topic_id).with_partitions(partitions)
                        })
                        .collect(),
                )
            })),
    }
}

impl KafkaApi for ShareGroupHeartbeatRequest {
    const VERSIONS: (i16, i16) = (1, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        let client = cx.client();
        cx.later(
            move |agent, _| async move { ResponseKind::ShareGroupHeartbeat(heartbeat(&agent, self, client).await) },
        )
    }
}

impl Resources for ShareGroupHeartbeatRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ShareGroupHeartbeatResponse> {
        let refused = |refusal: Refusal| ShareGroupHeartbeatResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)?;
        for topic in self.subscribed_topic_names.iter_mut().flatten() {
            walk.one(Op::Describe, Res::Topic, &mut topic.0).map_err(refused)?;
        }
        Ok(())
    }

    fn walk_answer(_response: &mut ShareGroupHeartbeatResponse, _walk: &AnswerWalk<'_>) {}
}
