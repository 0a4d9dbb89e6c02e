//! EndTxn: commits or aborts a transaction (writing its markers).

use super::*;

/// From this version EndTxn bumps the producer's epoch and answers with it (transaction version 2).
const EPOCH_BUMPING_END_TXN_VERSION: i16 = 5;

pub(in crate::kafka) async fn end_txn(agent: &Agent, version: i16, request: EndTxnRequest) -> EndTxnResponse {
    let (transactional_id, commit) = (request.transactional_id.to_string(), request.committed);
    let producer = ProducerIdEpoch { producer_id: request.producer_id.0, producer_epoch: request.producer_epoch };
    let command = if version >= EPOCH_BUMPING_END_TXN_VERSION {
        Command::EndTxnV2 { transactional_id, producer, commit, now_ms: now_ms() }
    } else {
        Command::EndTxn { transactional_id, producer, commit, now_ms: now_ms() }
    };
    let response = EndTxnResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    match agent.metadata.propose(command).await {
        Ok(Outcome::Done) => response,
        // Transaction version 2: the epoch (or producer id) the producer uses from now on.
        Ok(Outcome::ProducerId(next)) => {
            response.with_producer_id(ProducerId(next.producer_id)).with_producer_epoch(next.producer_epoch)
        }
        Ok(other) => response.with_error_code(unexpected(&other)),
        Err(e) => response.with_error_code(txn_error(&e, version, 2)),
    }
}

impl KafkaApi for EndTxnRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move { ResponseKind::EndTxn(end_txn(&agent, version, self).await) })
    }
}

impl Resources for EndTxnRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), EndTxnResponse> {
        let refused = |refusal: Refusal| EndTxnResponse::default().with_error_code(refusal.error);
        walk.one(Op::Write, Res::TransactionalId, &mut self.transactional_id.0).map_err(refused)
    }

    fn walk_answer(_response: &mut EndTxnResponse, _walk: &AnswerWalk<'_>) {}
}
