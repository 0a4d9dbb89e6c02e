//! AddOffsetsToTxn: a group's offsets join a transaction.

use super::*;

pub(in crate::kafka) async fn add_offsets_to_txn(
    agent: &Agent,
    version: i16,
    request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    let command = Command::AddOffsetsToTxn {
        transactional_id: request.transactional_id.to_string(),
        producer: ProducerIdEpoch { producer_id: request.producer_id.0, producer_epoch: request.producer_epoch },
        group_id: request.group_id.to_string(),
        now_ms: now_ms(),
    };
    let code = match agent.metadata.propose(command).await {
        Ok(Outcome::Done) => 0,
        Ok(other) => unexpected(&other),
        Err(e) => txn_error(&e, version, 2),
    };
    AddOffsetsToTxnResponse::default().with_error_code(code)
}

impl KafkaApi for AddOffsetsToTxnRequest {
    const VERSIONS: (i16, i16) = (0, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move {
            ResponseKind::AddOffsetsToTxn(add_offsets_to_txn(&agent, version, self).await)
        })
    }
}

impl Resources for AddOffsetsToTxnRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), AddOffsetsToTxnResponse> {
        let refused = |refusal: Refusal| AddOffsetsToTxnResponse::default().with_error_code(refusal.error);
        walk.one(Op::Write, Res::TransactionalId, &mut self.transactional_id.0).map_err(refused)?;
        walk.one(Op::Read, Res::Group, &mut self.group_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut AddOffsetsToTxnResponse, _walk: &AnswerWalk<'_>) {}
}
