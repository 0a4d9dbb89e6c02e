//! Idempotent and transactional producers: InitProducerId, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit, EndTxn, and the admin views DescribeProducers,
//! ListTransactions and DescribeTransactions.
//!
//! Every agent is every transactional id's coordinator (FindCoordinator key type 1 names the
//! agent asked): the state lives in the metadata state machine, so each request is one command
//! (TxnOffsetCommit goes through the group coordinator, which checks the member first).

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod describe_producers;
mod describe_transactions;
mod end_txn;
mod init_producer_id;
mod list_transactions;
mod txn_offset_commit;

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
            crate::log_limited!(tracing::Level::WARN, why = %why, "transaction coordinator not available");
            ResponseError::CoordinatorNotAvailable.code()
        }
    }
}

/// From this Produce version a client of transaction version 2 (KIP-890) sends no
/// AddPartitionsToTxn: a transactional batch adds its partition to the transaction itself.
pub(in crate::kafka) const IMPLICIT_PARTITIONS_PRODUCE_VERSION: i16 = 12;

fn unexpected(outcome: &Outcome) -> i16 {
    crate::log_limited!(tracing::Level::ERROR, ?outcome, "transaction command answered with an unexpected outcome");
    ResponseError::UnknownServerError.code()
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
