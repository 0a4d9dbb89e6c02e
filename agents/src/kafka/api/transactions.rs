//! Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and the admin views DescribeProducers,
//! ListTransactions and DescribeTransactions.
//!
//! Every agent is every transactional id's coordinator (FindCoordinator key type 1 names the
//! agent asked): the state lives in the metadata state machine, so each request is one command
//! (TxnOffsetCommit goes through the group coordinator, which checks the member first).

use floe_metadata::groups::{GroupRequest, GroupResponse, MemberRef, TxnRef};
use floe_metadata::{Command, CommandError, NodeError, OffsetCommit, Outcome, ProducerIdEpoch, State, TxnState};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState as DescribedTransaction};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedTransaction;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse, ListTransactionsRequest,
    ListTransactionsResponse, ProducerId, TopicName, TransactionalId, TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::code;
use super::super::error_code::{for_command, for_group};
use super::super::resources::{AnswerWalk, Op, Refusal, Refused, RefusedTopic, Res, Resources, TopicRef, Walk};
use super::str_bytes;
use crate::Agent;
use crate::limits::ADMIN_LIST_MAX;
use crate::produce::PartitionAppend;
use floe_metadata::now_ms;
use floe_storage::TopicPartition;
use kafka_protocol::messages::ResponseKind;

/// The error code for a refused transaction command. PRODUCER_FENCED exists on the wire from
/// `fenced_since`; older clients get INVALID_PRODUCER_EPOCH for it, as Kafka answers them. A
/// metadata service without quorum is a coordinator that is not available (retriable).
fn txn_error(error: &NodeError, version: i16, fenced_since: i16) -> i16 {
    match error {
        NodeError::Rejected(CommandError::ProducerFenced) if version < fenced_since => {
            ResponseError::InvalidProducerEpoch.code()
        }
        NodeError::Rejected(e) => for_command(e).code(),
        NodeError::Unavailable(why) => {
            tracing::warn!(why = %why, "transaction coordinator not available");
            ResponseError::CoordinatorNotAvailable.code()
        }
    }
}

/// From this Produce version a client of transaction version 2 (KIP-890) sends no
/// AddPartitionsToTxn: a transactional batch adds its partition to the transaction itself.
pub(in crate::kafka) const IMPLICIT_PARTITIONS_PRODUCE_VERSION: i16 = 12;
/// From this version EndTxn bumps the producer's epoch and answers with it (transaction version 2).
const EPOCH_BUMPING_END_TXN_VERSION: i16 = 5;
/// From this version TxnOffsetCommit adds its group to the transaction itself.
const IMPLICIT_GROUP_TXN_OFFSET_COMMIT_VERSION: i16 = 5;

fn unexpected(outcome: &Outcome) -> i16 {
    tracing::error!(?outcome, "transaction command answered with an unexpected outcome");
    ResponseError::UnknownServerError.code()
}

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

/// A partition the implicit AddPartitionsToTxn did not add: its batches are refused with this
/// code and message instead of being appended.
pub(in crate::kafka) type NotAdded = (TopicPartition, i16, String);

/// Transaction version 2: adds the partitions of a Produce's transactional batches to their
/// transaction before they are appended, as a Kafka broker does for such a client. Partitions
/// already in the ongoing transaction cost nothing. The partitions it could not add, with why:
/// a refusal as the coordinator's error, and a metadata service without quorum as the
/// retriable NOT_ENOUGH_REPLICAS (Kafka's answer when it cannot verify a transaction).
pub(in crate::kafka) async fn add_produced_partitions(
    agent: &Agent,
    transactional_id: &str,
    appends: &[PartitionAppend],
) -> Vec<NotAdded> {
    let (producer, partitions) = {
        let state = agent.metadata.read();
        let txn = state.transactions.get(transactional_id);
        let mut producer = None;
        let mut partitions = Vec::new();
        for append in appends {
            let Some(p) = append.producer.filter(|p| p.transactional) else { continue };
            let key = (append.topic_partition.topic_id, append.topic_partition.partition);
            let added = txn.is_some_and(|t| {
                t.producer_id == p.producer_id
                    && t.producer_epoch == p.producer_epoch
                    && t.state == TxnState::Ongoing
                    && t.partitions.contains(&key)
            });
            if !added && producer.is_none_or(|q: ProducerIdEpoch| q.producer_id == p.producer_id) {
                producer = Some(ProducerIdEpoch { producer_id: p.producer_id, producer_epoch: p.producer_epoch });
                partitions.push(key);
            }
        }
        (producer, partitions)
    };
    let Some(producer) = producer else { return Vec::new() };
    let command = Command::AddPartitionsToTxn {
        transactional_id: transactional_id.to_owned(),
        producer,
        partitions: partitions.clone(),
        now_ms: now_ms(),
    };
    let partition = |(topic_id, partition): (uuid::Uuid, i32)| TopicPartition { topic_id, partition };
    let all = |code: i16, message: String| partitions.iter().map(|p| (partition(*p), code, message.clone())).collect();
    match agent.metadata.propose(command).await {
        Ok(Outcome::PartitionsAdded(results)) => partitions
            .iter()
            .zip(results)
            .filter_map(|(p, result)| result.err().map(|e| (partition(*p), for_command(&e).code(), e.to_string())))
            .collect(),
        Ok(other) => all(unexpected(&other), "the transaction coordinator answered unexpectedly".into()),
        Err(NodeError::Rejected(e)) => all(for_command(&e).code(), e.to_string()),
        Err(NodeError::Unavailable(why)) => {
            all(ResponseError::NotEnoughReplicas.code(), format!("cannot add the partition to the transaction: {why}"))
        }
    }
}

/// Resolves topic names to (id, partition) pairs; None for an unknown topic.
fn resolve(state: &State, topics: &[AddPartitionsToTxnTopic]) -> Vec<(TopicName, i32, Option<uuid::Uuid>)> {
    topics
        .iter()
        .flat_map(|t| {
            let id = state.topic_by_name(t.name.as_str()).map(|t| t.topic_id);
            t.partitions.iter().map(move |p| (t.name.clone(), *p, id))
        })
        .collect()
}

fn topic_results(codes: Vec<(TopicName, i32, i16)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (name, partition, code) in codes {
        let entry = AddPartitionsToTxnPartitionResult::default()
            .with_partition_index(partition)
            .with_partition_error_code(code);
        match out.last_mut() {
            Some(t) if t.name == name => t.results_by_partition.push(entry),
            _ => out
                .push(AddPartitionsToTxnTopicResult::default().with_name(name).with_results_by_partition(vec![entry])),
        }
    }
    out
}

/// Adds one transaction's partitions (or, `verify_only`, checks they were added).
async fn add_partitions(
    agent: &Agent,
    version: i16,
    transactional_id: &str,
    producer: ProducerIdEpoch,
    topics: &[AddPartitionsToTxnTopic],
    verify_only: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    let resolved = resolve(&agent.metadata.read(), topics);
    if verify_only {
        let state = agent.metadata.read();
        let txn = state.transactions.get(transactional_id).filter(|t| {
            t.producer_id == producer.producer_id
                && t.producer_epoch == producer.producer_epoch
                && t.state == TxnState::Ongoing
        });
        return topic_results(
            resolved
                .into_iter()
                .map(|(name, partition, id)| {
                    let added = id.is_some_and(|id| txn.is_some_and(|t| t.partitions.contains(&(id, partition))));
                    let code = if added { 0 } else { ResponseError::InvalidTxnState.code() };
                    (name, partition, code)
                })
                .collect(),
        );
    }
    if resolved.iter().any(|(_, _, id)| id.is_none()) {
        let codes = resolved.into_iter().map(|(name, partition, id)| {
            let error = if id.is_some() {
                ResponseError::OperationNotAttempted
            } else {
                ResponseError::UnknownTopicOrPartition
            };
            (name, partition, error.code())
        });
        return topic_results(codes.collect());
    }
    let partitions = resolved.iter().filter_map(|(_, p, id)| id.map(|id| (id, *p))).collect();
    let command = Command::AddPartitionsToTxn {
        transactional_id: transactional_id.to_owned(),
        producer,
        partitions,
        now_ms: now_ms(),
    };
    let codes: Vec<i16> = match agent.metadata.propose(command).await {
        Ok(Outcome::PartitionsAdded(results)) => {
            results.iter().map(|r| r.as_ref().err().map_or(0, |e| for_command(e).code())).collect()
        }
        Ok(other) => vec![unexpected(&other); resolved.len()],
        Err(e) => vec![txn_error(&e, version, 2); resolved.len()],
    };
    topic_results(resolved.into_iter().zip(codes).map(|((name, partition, _), code)| (name, partition, code)).collect())
}

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
    let answer = agent.metadata.group_request(GroupRequest::TxnCommitOffsets { member, transaction, offsets }).await;
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
