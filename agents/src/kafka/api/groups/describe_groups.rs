//! DescribeGroups: classic groups, their members and assignments.

use super::*;

pub(in crate::kafka) async fn describe(agent: &Agent, request: DescribeGroupsRequest) -> DescribeGroupsResponse {
    let ids: Vec<String> = request.groups.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::Describe(ids.clone()), |r| match r {
        GroupResponse::Describe(groups) => Some(groups),
        _ => None,
    })
    .await;
    let groups = match result {
        Err(e) => ids
            .into_iter()
            .map(|id| {
                DescribedGroup::default().with_group_id(GroupId(str_bytes(id))).with_error_code(for_group(&e).code())
            })
            .collect(),
        Ok(groups) => groups
            .into_iter()
            .map(|g| match g {
                Err((id, e)) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(id)))
                    .with_error_code(for_group(&e).code()),
                Ok(g) => DescribedGroup::default()
                    .with_group_id(GroupId(str_bytes(g.group_id)))
                    .with_group_state(str_bytes(g.state))
                    .with_protocol_type(str_bytes(g.protocol_type))
                    .with_protocol_data(str_bytes(g.protocol))
                    .with_members(
                        g.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(m.instance_id.map(str_bytes))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_member_metadata(m.metadata.into())
                                    .with_member_assignment(m.assignment.into())
                            })
                            .collect(),
                    ),
            })
            .collect(),
    };
    DescribeGroupsResponse::default().with_groups(groups)
}

impl KafkaApi for DescribeGroupsRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeGroups(describe(&agent, self).await) })
    }
}

impl Resources for DescribeGroupsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeGroupsResponse> {
        walk.names(&mut self.groups, Op::Describe, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut DescribeGroupsResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            if let Some(ns) = walk.namespace()
                && group.protocol_type.as_str() == "consumer"
            {
                group.members.iter_mut().for_each(|m| unscope_consumer_protocol(ns, m));
            }
        }
    }

    fn answer_refused(response: &mut DescribeGroupsResponse, refused: Refused) {
        response.groups.extend(
            refused
                .names
                .into_iter()
                .map(|n| DescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}

/// A KIP-848 group described through DescribeGroups carries the subscription and assignment the
/// coordinator encoded, with stored topic names; a classic member's are its client's own bytes
/// (names as the client knows them, and possibly user data), left as they are.
fn unscope_consumer_protocol(ns: &floe_metadata::Namespace, member: &mut DescribedGroupMember) {
    use floe_metadata::groups::{assigned_partitions, encode_assignment, encode_subscription, subscribed_topics};
    let topics = subscribed_topics(&member.member_metadata);
    if topics.iter().any(|t| ns.owns(t)) {
        let shown: Vec<String> = topics.iter().map(|t| ns.unscope(t).unwrap_or(t).to_owned()).collect();
        member.member_metadata = encode_subscription(&shown).into();
    }
    let assigned = assigned_partitions(&member.member_assignment);
    if assigned.iter().any(|(t, _)| ns.owns(t)) {
        let shown: Vec<(String, Vec<i32>)> =
            assigned.into_iter().map(|(t, p)| (ns.unscope(&t).unwrap_or(&t).to_owned(), p)).collect();
        member.member_assignment = encode_assignment(&shown).into();
    }
}
