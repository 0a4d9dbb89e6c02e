//! ConsumerGroupHeartbeat (KIP-848): joins, keeps and leaves a member of a group the
//! coordinator assigns itself.

use super::*;

pub(in crate::kafka) async fn consumer_heartbeat(
    agent: &Agent,
    request: ConsumerGroupHeartbeatRequest,
    client: Client,
) -> ConsumerGroupHeartbeatResponse {
    let heartbeat = ConsumerHeartbeat {
        group_id: request.group_id.to_string(),
        member_id: request.member_id.to_string(),
        member_epoch: request.member_epoch,
        instance_id: opt(request.instance_id),
        rack_id: opt(request.rack_id),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topics: request.subscribed_topic_names.map(|ts| ts.iter().map(|t| t.to_string()).collect()),
        subscribed_regex: opt(request.subscribed_topic_regex),
        server_assignor: opt(request.server_assignor),
        owned: request.topic_partitions.map(|ts| ts.into_iter().map(|t| (t.topic_id, t.partitions)).collect()),
        client_id: client.client_id,
        client_host: client.host,
    };
    tracing::debug!(?heartbeat, "consumer group heartbeat");
    let result = ask(agent, GroupRequest::ConsumerHeartbeat(heartbeat), |r| match r {
        GroupResponse::ConsumerHeartbeat(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    tracing::debug!(?result, "consumer group heartbeat answered");
    match result {
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(for_group(&e).code())
            .with_error_message(Some(str_bytes(e.to_string()))),
        Ok(answer) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(answer.member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(answer.heartbeat_interval_ms)
            .with_assignment(answer.assignment.map(|partitions| {
                HeartbeatAssignment::default().with_topic_partitions(
                    partitions
                        .into_iter()
                        .map(|(topic_id, partitions)| {
                            HeartbeatTopicPartitions::default().with_topic_id(topic_id).with_partitions(partitions)
                        })
                        .collect(),
                )
            })),
    }
}

impl KafkaApi for ConsumerGroupHeartbeatRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        let client = cx.client();
        cx.later(move |agent, _| async move {
            ResponseKind::ConsumerGroupHeartbeat(consumer_heartbeat(&agent, self, client).await)
        })
    }
}

impl Resources for ConsumerGroupHeartbeatRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ConsumerGroupHeartbeatResponse> {
        let refused = |refusal: Refusal| ConsumerGroupHeartbeatResponse::default().with_error_code(refusal.error);
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)?;
        for topic in self.subscribed_topic_names.iter_mut().flatten() {
            walk.one(Op::Describe, Res::Topic, &mut topic.0).map_err(refused)?;
        }
        for owned in self.topic_partitions.iter_mut().flatten() {
            walk.mention(TopicRef { name: None, id: Some(&mut owned.topic_id) });
        }
        Ok(())
    }

    fn walk_answer(_response: &mut ConsumerGroupHeartbeatResponse, _walk: &AnswerWalk<'_>) {}
}
