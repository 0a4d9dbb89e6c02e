//! TxnOffsetCommit: offsets committed with a transaction, visible when it commits.

use super::*;
use floe_metadata::state::stored::each_into;

/// From this version TxnOffsetCommit adds its group to the transaction itself.
const IMPLICIT_GROUP_TXN_OFFSET_COMMIT_VERSION: i16 = 5;

pub(in crate::kafka) async fn txn_offset_commit(
    agent: &Agent,
    version: i16,
    request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    let mut offsets = Vec::new();
    let mut order = Vec::new();
    for topic in &request.topics {
        for p in &topic.partitions {
            order.push((topic.name.clone(), p.partition_index));
            offsets.push(OffsetCommit {
                topic: topic.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(ToString::to_string).unwrap_or_default(),
            });
        }
    }
    // Before KIP-447 (v3) requests carry no member: generation -1 skips the member checks.
    let member = MemberRef {
        group_id: request.group_id.to_string(),
        generation: if version >= 3 { request.generation_id } else { -1 },
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.map(|i| i.to_string()),
    };
    let transaction = TxnRef {
        transactional_id: request.transactional_id.to_string(),
        producer: ProducerIdEpoch { producer_id: request.producer_id.0, producer_epoch: request.producer_epoch },
    };
    if version >= IMPLICIT_GROUP_TXN_OFFSET_COMMIT_VERSION {
        // Transaction version 2 sends no AddOffsetsToTxn: the group joins the transaction here. A
        // refusal is left to the commit below, which names it for every partition.
        let command = Command::AddOffsetsToTxn {
            transactional_id: transaction.transactional_id.clone(),
            producer: transaction.producer,
            group_id: member.group_id.clone(),
            now_ms: now_ms(),
        };
        if let Err(e) = agent.metadata.propose(command).await {
            tracing::debug!(error = %e, "implicit AddOffsetsToTxn refused; the commit will say why");
        }
    }
    let answer = agent
        .metadata
        .group_request(GroupRequest::TxnCommitOffsets { member, transaction, offsets: each_into(offsets) })
        .await;
    // PRODUCER_FENCED exists for TxnOffsetCommit from v3 (KIP-588).
    let fenced_to_epoch = |code: i16| {
        if version < 3 && code == ResponseError::ProducerFenced.code() {
            ResponseError::InvalidProducerEpoch.code()
        } else {
            code
        }
    };
    let codes: Vec<i16> = match answer {
        Ok(GroupResponse::CommitOffsets(Ok(results))) => {
            results.iter().map(|r| r.as_ref().err().map_or(0, |e| fenced_to_epoch(for_group(e).code()))).collect()
        }
        Ok(GroupResponse::CommitOffsets(Err(e))) | Err(e) => vec![fenced_to_epoch(for_group(&e).code()); order.len()],
        Ok(_) => vec![ResponseError::CoordinatorNotAvailable.code(); order.len()],
    };
    let mut topics: Vec<TxnOffsetCommitResponseTopic> = Vec::new();
    for ((name, partition), code) in order.into_iter().zip(codes) {
        let entry = TxnOffsetCommitResponsePartition::default().with_partition_index(partition).with_error_code(code);
        match topics.last_mut() {
            Some(t) if t.name == name => t.partitions.push(entry),
            _ => topics.push(TxnOffsetCommitResponseTopic::default().with_name(name).with_partitions(vec![entry])),
        }
    }
    TxnOffsetCommitResponse::default().with_topics(topics)
}

fn txn_offset_commit_refusals(
    topics: impl Iterator<Item = RefusedTopic>,
    error: i16,
) -> Vec<TxnOffsetCommitResponseTopic> {
    topics
        .map(|t| {
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| TxnOffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(error));
            TxnOffsetCommitResponseTopic::default().with_name(TopicName(t.name)).with_partitions(partitions.collect())
        })
        .collect()
}

impl KafkaApi for TxnOffsetCommitRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move {
            ResponseKind::TxnOffsetCommit(txn_offset_commit(&agent, version, self).await)
        })
    }
}

impl Resources for TxnOffsetCommitRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), TxnOffsetCommitResponse> {
        let walked = walk
            .one(Op::Write, Res::TransactionalId, &mut self.transactional_id.0)
            .and_then(|()| walk.one(Op::Read, Res::Group, &mut self.group_id.0));
        if let Err(refusal) = walked {
            let topics = self.topics.iter().map(|t| RefusedTopic {
                name: t.name.0.clone(),
                id: uuid::Uuid::nil(),
                partitions: t.partitions.iter().map(|p| p.partition_index).collect(),
                within: None,
            });
            let answer = TxnOffsetCommitResponse::default();
            return Err(answer.with_topics(txn_offset_commit_refusals(topics, refusal.error)));
        }
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::name(&mut t.name.0),
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut TxnOffsetCommitResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut TxnOffsetCommitResponse, refused: Refused) {
        let topics = txn_offset_commit_refusals(refused.topics.into_iter(), code::TOPIC_AUTHORIZATION_FAILED);
        response.topics.extend(topics);
    }
}
