//! ConsumerGroupDescribe (KIP-848): groups with their members' current and target
//! assignments.

use super::*;

pub(in crate::kafka) async fn consumer_describe(
    agent: &Agent,
    version: i16,
    request: ConsumerGroupDescribeRequest,
) -> ConsumerGroupDescribeResponse {
    let ids: Vec<String> = request.group_ids.iter().map(|g| g.to_string()).collect();
    let result = ask(agent, GroupRequest::ConsumerDescribe(ids.clone()), |r| match r {
        GroupResponse::ConsumerDescribe(groups) => Some(groups),
        _ => None,
    })
    .await;
    let described: Vec<Result<_, (String, GroupError)>> = match result {
        Ok(groups) => groups,
        Err(e) => ids.into_iter().map(|id| Err((id, e.clone()))).collect(),
    };
    let assignment = |partitions: Vec<(uuid::Uuid, String, Vec<i32>)>| {
        DescribeAssignment::default().with_topic_partitions(
            partitions
                .into_iter()
                .map(|(id, name, ps)| {
                    DescribeTopicPartitions::default()
                        .with_topic_id(id)
                        .with_topic_name(TopicName(str_bytes(name)))
                        .with_partitions(ps)
                })
                .collect(),
        )
    };
    let groups = described
        .into_iter()
        .map(|g| match g {
            Err((id, e)) => ConsumerDescribedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(str_bytes(e.to_string()))),
            Ok(g) => ConsumerDescribedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_group_state(str_bytes(g.state))
                .with_group_epoch(g.epoch)
                .with_assignment_epoch(g.assignment_epoch)
                .with_assignor_name(str_bytes(g.assignor))
                .with_members(
                    g.members
                        .into_iter()
                        .map(|m| {
                            let member = ConsumerDescribedMember::default()
                                .with_member_id(str_bytes(m.member_id))
                                .with_instance_id(m.instance_id.map(str_bytes))
                                .with_rack_id(m.rack_id.map(str_bytes))
                                .with_member_epoch(m.member_epoch)
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed_topics.into_iter().map(|t| TopicName(str_bytes(t))).collect(),
                                )
                                .with_assignment(assignment(m.assignment))
                                .with_target_assignment(assignment(m.target_assignment));
                            // KIP-1099 member type: 1 = consumer protocol.
                            if version >= 1 { member.with_member_type(1) } else { member }
                        })
                        .collect(),
                ),
        })
        .collect();
    ConsumerGroupDescribeResponse::default().with_groups(groups)
}

impl KafkaApi for ConsumerGroupDescribeRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move {
            ResponseKind::ConsumerGroupDescribe(consumer_describe(&agent, version, self).await)
        })
    }
}

impl Resources for ConsumerGroupDescribeRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ConsumerGroupDescribeResponse> {
        walk.names(&mut self.group_ids, Op::Describe, Res::Group, |g| &mut g.0);
        Ok(())
    }

    fn walk_answer(response: &mut ConsumerGroupDescribeResponse, walk: &AnswerWalk<'_>) {
        for group in &mut response.groups {
            walk.name(&mut group.group_id.0);
            for member in &mut group.members {
                walk.names(&mut member.subscribed_topic_names, |t| &mut t.0);
                walk.names(&mut member.assignment.topic_partitions, |t| &mut t.topic_name.0);
                walk.names(&mut member.target_assignment.topic_partitions, |t| &mut t.topic_name.0);
            }
        }
    }

    fn answer_refused(response: &mut ConsumerGroupDescribeResponse, refused: Refused) {
        response.groups.extend(
            refused
                .names
                .into_iter()
                .map(|n| ConsumerDescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)),
        );
    }
}
