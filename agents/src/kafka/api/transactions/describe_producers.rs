//! DescribeProducers: the active producers of partitions.

use super::*;

pub(in crate::kafka) fn describe_producers(
    agent: &Agent,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let state = agent.metadata.read();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            let topic_id = state.topic_by_name(t.name.as_str()).map(|t| t.topic_id);
            let partitions = t
                .partition_indexes
                .into_iter()
                .map(|index| {
                    let response = PartitionResponse::default().with_partition_index(index);
                    let Some(log) = topic_id.and_then(|id| state.partition(id, index)) else {
                        return response.with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    };
                    let Some(topic_id) = topic_id else { return response };
                    let producers = state
                        .producers
                        .iter()
                        .filter_map(|(producer_id, record)| {
                            let last = record.partitions.get(&(topic_id, index))?.recent.back()?;
                            let txn_start = log.open_transactions.get(producer_id).copied().unwrap_or(-1);
                            Some(
                                ProducerState::default()
                                    .with_producer_id(ProducerId(*producer_id))
                                    .with_producer_epoch(i32::from(record.epoch))
                                    .with_last_sequence(last.last_sequence)
                                    .with_last_timestamp(last.timestamp_max)
                                    .with_coordinator_epoch(0)
                                    .with_current_txn_start_offset(txn_start),
                            )
                        })
                        .take(ADMIN_LIST_MAX)
                        .collect();
                    response.with_active_producers(producers)
                })
                .collect();
            TopicResponse::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

impl KafkaApi for DescribeProducersRequest {
    const VERSIONS: (i16, i16) = (0, 0);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeProducers(describe_producers(&agent, self)) })
    }
}

impl Resources for DescribeProducersRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeProducersResponse> {
        walk.topics(&mut self.topics, Op::Read, |t| TopicRef::name(&mut t.name.0), |t| t.partition_indexes.clone());
        Ok(())
    }

    fn walk_answer(response: &mut DescribeProducersResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.topics, |t| &mut t.name.0);
    }

    fn answer_refused(response: &mut DescribeProducersResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                PartitionResponse::default().with_partition_index(p).with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
            };
            TopicResponse::default()
                .with_name(TopicName(t.name))
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
