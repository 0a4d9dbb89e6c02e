//! AddPartitionsToTxn: partitions join a transaction (and, from v4, brokers verify
//! several transactions at once).

use super::*;

pub(in crate::kafka) async fn add_partitions_to_txn(
    agent: &Agent,
    version: i16,
    request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    if version <= 3 {
        let producer = ProducerIdEpoch {
            producer_id: request.v3_and_below_producer_id.0,
            producer_epoch: request.v3_and_below_producer_epoch,
        };
        let id = request.v3_and_below_transactional_id.to_string();
        let results = add_partitions(agent, version, &id, producer, &request.v3_and_below_topics, false).await;
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results);
    }
    // Version 4 batches transactions (a broker's verification requests, usually verify-only).
    let mut results = Vec::with_capacity(request.transactions.len());
    for txn in request.transactions {
        let producer = ProducerIdEpoch { producer_id: txn.producer_id.0, producer_epoch: txn.producer_epoch };
        let id = txn.transactional_id.to_string();
        let topic_results = add_partitions(agent, version, &id, producer, &txn.topics, txn.verify_only).await;
        results.push(
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id)
                .with_topic_results(topic_results),
        );
    }
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

fn txn_topic_result(
    name: kafka_protocol::protocol::StrBytes,
    partitions: &[i32],
    error: i16,
) -> AddPartitionsToTxnTopicResult {
    let results = partitions.iter().map(|p| {
        AddPartitionsToTxnPartitionResult::default().with_partition_index(*p).with_partition_error_code(error)
    });
    AddPartitionsToTxnTopicResult::default().with_name(TopicName(name)).with_results_by_partition(results.collect())
}

impl KafkaApi for AddPartitionsToTxnRequest {
    const VERSIONS: (i16, i16) = (0, 5);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, version| async move {
            ResponseKind::AddPartitionsToTxn(add_partitions_to_txn(&agent, version, self).await)
        })
    }
}

impl Resources for AddPartitionsToTxnRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), AddPartitionsToTxnResponse> {
        if version < 4 {
            let txn = walk.one(Op::Write, Res::TransactionalId, &mut self.v3_and_below_transactional_id.0);
            let topics = self.v3_and_below_topics.iter_mut();
            let topic_errors: Vec<Option<i16>> =
                topics.map(|t| walk.one(Op::Write, Res::Topic, &mut t.name.0).err().map(|r| r.error)).collect();
            if txn.is_ok() && topic_errors.iter().all(Option::is_none) {
                return Ok(());
            }
            // Kafka fails the refused topics and does not attempt the others.
            let results = self.v3_and_below_topics.iter().zip(topic_errors).map(|(t, topic_error)| {
                let error = match (txn, topic_error) {
                    (Err(refusal), _) => refusal.error,
                    (Ok(()), Some(error)) => error,
                    (Ok(()), None) => code::OPERATION_NOT_ATTEMPTED,
                };
                txn_topic_result(t.name.0.clone(), &t.partitions, error)
            });
            return Err(AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results.collect()));
        }
        // Brokers verifying transactions: each transaction answered on its own.
        let mut kept = Vec::with_capacity(self.transactions.len());
        for mut txn in std::mem::take(&mut self.transactions) {
            let refusal = walk.one(Op::Write, Res::TransactionalId, &mut txn.transactional_id.0).err().or_else(|| {
                txn.topics
                    .iter_mut()
                    .find_map(|t: &mut AddPartitionsToTxnTopic| walk.one(Op::Write, Res::Topic, &mut t.name.0).err())
            });
            match refusal {
                None => kept.push(txn),
                Some(refusal) => {
                    let topics = txn.topics.into_iter().map(|t| (t.name.0, t.partitions));
                    walk.refused_item(txn.transactional_id.0, refusal, topics);
                }
            }
        }
        self.transactions = kept;
        Ok(())
    }

    fn walk_answer(response: &mut AddPartitionsToTxnResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.results_by_topic_v3_and_below, |t| &mut t.name.0);
        for result in &mut response.results_by_transaction {
            walk.name(&mut result.transactional_id.0);
            walk.names(&mut result.topic_results, |t| &mut t.name.0);
        }
    }

    fn answer_refused(response: &mut AddPartitionsToTxnResponse, refused: Refused) {
        for n in refused.names {
            let within = refused.topics.iter().filter(|t| t.within.as_ref() == Some(&n.name));
            let results = within.map(|t| txn_topic_result(t.name.clone(), &t.partitions, n.error)).collect();
            response.results_by_transaction.push(
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(TransactionalId(n.name))
                    .with_topic_results(results),
            );
        }
    }
}
