//! ShareGroupDescribe (KIP-932): share groups with their members and assignments.

use floe_metadata::groups::{GroupRequest, GroupResponse};
use kafka_protocol::messages::share_group_describe_response::{Assignment, DescribedGroup, Member, TopicPartitions};
use kafka_protocol::messages::{
    GroupId, ResponseKind, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};

use super::super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::super::error_code::for_group;
use super::super::super::resources::{AnswerWalk, Op, Refused, Res, Resources, Walk};
use super::super::str_bytes;
use crate::Agent;

async fn describe(agent: &Agent, request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse {
    let ids: Vec<String> = request.group_ids.iter().map(|g| g.to_string()).collect();
    let described = match agent.metadata.group_request(GroupRequest::ShareDescribe(ids.clone())).await {
        Ok(GroupResponse::ShareDescribe(groups)) => groups,
        Ok(_) => {
            let e = floe_metadata::groups::GroupError::CoordinatorNotAvailable("answered another kind".into());
            ids.into_iter().map(|id| Err((id, e.clone()))).collect()
        }
        Err(e) => ids.into_iter().map(|id| Err((id, e.clone()))).collect(),
    };
    let groups = described
        .into_iter()
        .map(|g| match g {
            Err((id, e)) => DescribedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(str_bytes(e.to_string()))),
            Ok(g) => DescribedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_group_state(str_bytes(g.state))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(g.assignor))
                .with_members(
                    g.members
                        .into_iter()
                        .map(|m| {
                            let assignment = Assignment::default().with_topic_partitions(
                                m.assignment
                                    .into_iter()
                                    .map(|(id, name, ps)| {
                                        TopicPartitions::default()
                                            .with_topic_id(id)
                                            .with_topic_name(TopicName(str_bytes(name)))
                                            .with_partitions(ps)
                                    })
                                    .collect(),
                            );
                            Member::default()
                                .with_member_id(str_bytes(m.member_id))
                                .with_rack_id(m.rack_id.map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topics.into_iter().map(|t| TopicName(str_bytes(t))).collect(),
                                )
                                .with_assignment(assignment)
                        })
                        .collect(),
                ),
        })
        .collect();
    ShareGroupDescribeResponse::default().with_groups(groups)
}

impl KafkaApi for ShareGroupDescribeRequest {
    const VERSIONS: (i16, i16) = (1, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::ShareGroupDescribe(describe(&agent, self).await) })
    }
}

impl Resources for ShareGroupDescribeRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ShareGroupDescribeResponse> {
        walk.names(&mut self.group_ids, Op::Describe, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut ShareGroupDescribeResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            for member in &mut group.members {
                walk.names(&mut member.subscribed_topic_names, |t| &mut t.0);
                walk.names(&mut member.assignment.topic_partitions, |t| &mut t.topic_name.0);
            }
        }
    }

    fn answer_refused(response: &mut ShareGroupDescribeResponse, refused: Refused) {
        response.groups.extend(
            refused
                .names
                .into_iter()
                .map(|n| DescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}
