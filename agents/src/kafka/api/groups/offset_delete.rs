//! OffsetDelete: a group's committed offsets of partitions it no longer consumes.

use super::*;

pub(in crate::kafka) async fn offset_delete(agent: &Agent, request: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let order: Vec<(TopicName, i32)> =
        request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition_index))).collect();
    let partitions = order.iter().map(|(t, p)| (t.to_string(), *p)).collect();
    let group_id = request.group_id.to_string();
    let result = ask(agent, GroupRequest::DeleteOffsets { group_id, partitions }, |r| match r {
        GroupResponse::DeleteOffsets(result) => Some(result),
        _ => None,
    })
    .await
    .and_then(|r| r);
    let results = match result {
        Err(e) => return OffsetDeleteResponse::default().with_error_code(for_group(&e).code()),
        Ok(results) => results,
    };
    let mut topics: Vec<OffsetDeleteResponseTopic> = Vec::new();
    for ((name, partition), r) in order.into_iter().zip(results) {
        let entry =
            OffsetDeleteResponsePartition::default().with_partition_index(partition).with_error_code(error_code(&r));
        match topics.last_mut() {
            Some(t) if t.name == name => t.partitions.push(entry),
            _ => topics.push(OffsetDeleteResponseTopic::default().with_name(name).with_partitions(vec![entry])),
        }
    }
    OffsetDeleteResponse::default().with_topics(topics)
}

impl KafkaApi for OffsetDeleteRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::OffsetDelete(offset_delete(&agent, self).await) })
    }
}

impl Resources for OffsetDeleteRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), OffsetDeleteResponse> {
        let refused = |refusal: Refusal| OffsetDeleteResponse::default().with_error_code(refusal.error);
        walk.one(Op::Delete, Res::Group, &mut self.group_id.0).map_err(refused)?;
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::name(&mut t.name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut OffsetDeleteResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut OffsetDeleteResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                OffsetDeleteResponsePartition::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            };
            OffsetDeleteResponseTopic::default()
                .with_name(TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
