//! InitProducerId: a producer id and epoch for an idempotent or transactional producer,
//! bound to the caller's tenant.

use super::*;

pub(in crate::kafka) async fn init_producer_id(
    agent: &Agent,
    version: i16,
    request: InitProducerIdRequest,
    tenant: Option<String>,
) -> InitProducerIdResponse {
    let transactional_id = request.transactional_id.map(|t| t.to_string()).filter(|t| !t.is_empty());
    let expected = (version >= 3 && request.producer_id.0 >= 0)
        .then_some(ProducerIdEpoch { producer_id: request.producer_id.0, producer_epoch: request.producer_epoch });
    let command = Command::InitProducerId {
        transactional_id,
        transaction_timeout_ms: request.transaction_timeout_ms,
        expected,
        now_ms: now_ms(),
        tenant,
    };
    let response = InitProducerIdResponse::default().with_producer_id(ProducerId(-1)).with_producer_epoch(-1);
    match agent.metadata.propose(command).await {
        Ok(Outcome::ProducerId(p)) => {
            response.with_producer_id(ProducerId(p.producer_id)).with_producer_epoch(p.producer_epoch)
        }
        Ok(other) => response.with_error_code(unexpected(&other)),
        Err(e) => response.with_error_code(txn_error(&e, version, 4)),
    }
}

impl KafkaApi for InitProducerIdRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        let tenant = cx.caller.tenant.map(str::to_owned);
        cx.later(move |agent, version| async move {
            ResponseKind::InitProducerId(init_producer_id(&agent, version, self, tenant).await)
        })
    }
}

impl Resources for InitProducerIdRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), InitProducerIdResponse> {
        let refused = |refusal: Refusal| {
            let answer = InitProducerIdResponse::default().with_error_code(refusal.error);
            answer.with_producer_id(ProducerId(-1)).with_producer_epoch(-1)
        };
        match self.transactional_id.as_mut() {
            Some(id) => walk.one(Op::Write, Res::TransactionalId, &mut id.0).map_err(refused),
            // An idempotent producer needs IdempotentWrite on the cluster or Write on some topic.
            None => walk.cluster_or_some(Op::IdempotentWrite, Op::Write, Res::Topic).map_err(refused),
        }
    }

    fn walk_answer(_response: &mut InitProducerIdResponse, _walk: &AnswerWalk<'_>) {}
}
