//! ListTransactions: transactional ids with their states, filtered as asked.

use super::*;

pub(in crate::kafka) fn list_transactions(agent: &Agent, request: ListTransactionsRequest) -> ListTransactionsResponse {
    const KNOWN: [&str; 4] = ["Empty", "Ongoing", "CompleteCommit", "CompleteAbort"];
    // Kafka also knows these states; Floe never enters them (ending a transaction is atomic).
    const NEVER: [&str; 4] = ["PrepareCommit", "PrepareAbort", "PrepareEpochFence", "Dead"];
    let unknown: Vec<_> = request
        .state_filters
        .iter()
        .filter(|s| !KNOWN.contains(&s.as_str()) && !NEVER.contains(&s.as_str()))
        .cloned()
        .collect();
    let now = now_ms();
    let state = agent.metadata.read();
    let listed = state
        .transactions
        .iter()
        .filter(|(_, t)| {
            request.state_filters.is_empty() || request.state_filters.iter().any(|s| s.as_str() == t.state.name())
        })
        .filter(|(_, t)| {
            request.producer_id_filters.is_empty() || request.producer_id_filters.contains(&ProducerId(t.producer_id))
        })
        // v1 (KIP-994): only transactions running longer than the filter.
        .filter(|(_, t)| {
            request.duration_filter < 0
                || (t.state == TxnState::Ongoing && now - t.started_ms >= request.duration_filter)
        })
        .take(ADMIN_LIST_MAX)
        .map(|(id, t)| {
            ListedTransaction::default()
                .with_transactional_id(TransactionalId(str_bytes(id.clone())))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state.name()))
        })
        .collect();
    ListTransactionsResponse::default().with_unknown_state_filters(unknown).with_transaction_states(listed)
}

impl KafkaApi for ListTransactionsRequest {
    const VERSIONS: (i16, i16) = (0, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::ListTransactions(list_transactions(&agent, self)) })
    }
}

impl Resources for ListTransactionsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ListTransactionsResponse> {
        walk.listing();
        Ok(())
    }

    fn walk_answer(response: &mut ListTransactionsResponse, walk: &AnswerWalk<'_>) {
        walk.listed(&mut response.transaction_states, Res::TransactionalId, |t| Some(&mut t.transactional_id.0));
    }
}
