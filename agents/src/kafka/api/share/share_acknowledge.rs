//! ShareAcknowledge (KIP-932): acknowledgements outside a ShareFetch, in the member's share
//! session; epoch -1 also closes the session and releases what the member still holds.

use std::collections::BTreeMap;

use floe_metadata::TopicId;
use floe_metadata::groups::ShareWork;
use kafka_protocol::messages::share_acknowledge_response::{PartitionData, ShareAcknowledgeTopicResponse};
use kafka_protocol::messages::{ResponseKind, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::protocol::StrBytes;

use super::super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::super::error_code::{code, for_group};
use super::super::super::resources::{AnswerWalk, Op, Refusal, Refused, Res, Resources, TopicRef, Walk};
use super::{Acknowledgements, Caller, for_session, send_work};
use crate::Agent;

async fn share_acknowledge(
    agent: &Agent,
    request: ShareAcknowledgeRequest,
    caller: Caller,
) -> ShareAcknowledgeResponse {
    let answer = ShareAcknowledgeResponse::default();
    let (Some(group), Some(member)) = (request.group_id.as_ref(), request.member_id.as_ref()) else {
        return answer
            .with_error_code(code::INVALID_REQUEST)
            .with_error_message(Some(StrBytes::from_static_str("a share acknowledgement names its group and member")));
    };
    let (group, member) = (group.to_string(), member.to_string());
    if request.share_session_epoch == 0 {
        return answer
            .with_error_code(for_session(crate::share_sessions::ShareSessionError::InvalidEpoch { found: 0 }));
    }
    let turn = match agent.share_sessions.turn(&caller.owner, (&group, &member), request.share_session_epoch, [], []) {
        Ok(turn) => turn,
        Err(e) => {
            return answer
                .with_error_code(for_session(e))
                .with_error_message(Some(super::super::str_bytes(e.to_string())));
        }
    };
    let acks = {
        let state = agent.metadata.read();
        Acknowledgements::parse(
            &turn.gaps,
            request.topics.iter().flat_map(|t| {
                t.partitions.iter().map(|p| {
                    let batches = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types[..]));
                    (t.topic_id, p.partition_index, batches)
                })
            }),
            |t| caller.knows(&state, t),
        )
    };
    let work = ShareWork {
        group_id: group,
        member_id: member,
        acknowledgements: acks.work.clone(),
        release_all: turn.closing,
        ..ShareWork::default()
    };
    let result = match send_work(agent, work, &acks).await {
        Ok(result) => result,
        Err(e) => {
            return answer
                .with_error_code(for_group(&e).code())
                .with_error_message(Some(super::super::str_bytes(e.to_string())));
        }
    };
    let codes = acks.codes(&result.acknowledged);
    let mut by_topic: BTreeMap<TopicId, Vec<PartitionData>> = BTreeMap::new();
    for ((t, p), code) in codes {
        by_topic.entry(t).or_default().push(PartitionData::default().with_partition_index(p).with_error_code(code));
    }
    answer.with_responses(
        by_topic
            .into_iter()
            .map(|(topic_id, partitions)| {
                ShareAcknowledgeTopicResponse::default().with_topic_id(topic_id).with_partitions(partitions)
            })
            .collect(),
    )
}

impl KafkaApi for ShareAcknowledgeRequest {
    const VERSIONS: (i16, i16) = (1, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        let caller = Caller::of(&cx);
        cx.later(move |agent, _| async move {
            ResponseKind::ShareAcknowledge(share_acknowledge(&agent, self, caller).await)
        })
    }
}

impl Resources for ShareAcknowledgeRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ShareAcknowledgeResponse> {
        let refused = |refusal: Refusal| ShareAcknowledgeResponse::default().with_error_code(refusal.error);
        if let Some(group) = self.group_id.as_mut() {
            walk.one(Op::Read, Res::Group, &mut group.0).map_err(refused)?;
        }
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef { name: None, id: Some(&mut t.topic_id) },
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut ShareAcknowledgeResponse, walk: &AnswerWalk<'_>) {
        walk.topic_ids(&mut response.responses, |t| &mut t.topic_id);
    }

    fn answer_refused(response: &mut ShareAcknowledgeResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            let partition =
                |p| PartitionData::default().with_partition_index(p).with_error_code(code::TOPIC_AUTHORIZATION_FAILED);
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(t.id)
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
