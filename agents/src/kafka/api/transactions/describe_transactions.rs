//! DescribeTransactions: a transaction's state, timeout and partitions.

use super::*;

pub(in crate::kafka) fn describe_transactions(
    agent: &Agent,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let state = agent.metadata.read();
    let described = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            let Some(t) = state.transactions.get(id.as_str()) else {
                return DescribedTransaction::default()
                    .with_transactional_id(id)
                    .with_error_code(ResponseError::TransactionalIdNotFound.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1);
            };
            let mut topics: Vec<TopicData> = Vec::new();
            for (topic_id, partition) in &t.partitions {
                let Some(name) = state.topics.get(topic_id).map(|t| t.name.clone()) else { continue };
                match topics.last_mut() {
                    Some(d) if d.topic.as_str() == name => d.partitions.push(*partition),
                    _ => topics.push(
                        TopicData::default().with_topic(TopicName(str_bytes(name))).with_partitions(vec![*partition]),
                    ),
                }
            }
            let started = if t.state == TxnState::Ongoing { t.started_ms } else { -1 };
            DescribedTransaction::default()
                .with_transactional_id(id)
                .with_transaction_state(str_bytes(t.state.name()))
                .with_transaction_timeout_ms(t.timeout_ms)
                .with_transaction_start_time_ms(started)
                .with_producer_id(ProducerId(t.producer_id))
                .with_producer_epoch(t.producer_epoch)
                .with_topics(topics)
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(described)
}

impl KafkaApi for DescribeTransactionsRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeTransactions(describe_transactions(&agent, self)) })
    }
}

impl Resources for DescribeTransactionsRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeTransactionsResponse> {
        walk.names(&mut self.transactional_ids, Op::Describe, Res::TransactionalId, |t| &mut t.0);
        Ok(())
    }

    fn walk_answer(response: &mut DescribeTransactionsResponse, walk: &AnswerWalk<'_>) {
        for state in &mut response.transaction_states {
            walk.name(&mut state.transactional_id.0);
            walk.names(&mut state.topics, |t| &mut t.topic.0);
        }
    }

    fn answer_refused(response: &mut DescribeTransactionsResponse, refused: Refused) {
        response.transaction_states.extend(refused.names.into_iter().map(|n| {
            DescribedTransaction::default().with_transactional_id(TransactionalId(n.name)).with_error_code(n.error)
        }));
    }
}
