//! ACLs on the Kafka listener (`crate::access`): before a request is scoped to its tenant and
//! dispatched, every resource it names is checked with the operation Kafka's brokers check for
//! that API, by the name the client uses.
//!
//! - A refused topic, group or transactional id in a request that names several is taken out of
//!   the request and answered with its authorization error next to the handler's answer for the
//!   rest, as Kafka answers per resource.
//! - A request about one resource (JoinGroup, EndTxn, ...) is answered whole with the error.
//! - Listings (Metadata for all topics, ListGroups, ListTransactions, OffsetFetch of all topics)
//!   leave out what the client may not describe.
//!
//! The handlers know nothing of ACLs: this is the only place on the Kafka side that checks them.

use floe_metadata::acl::{AclOperation as Op, AclResourceType as Res};
use floe_metadata::{Namespace, State};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::error_code::code;
use crate::access::Access;

/// DescribeConfigs/AlterConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

/// A topic taken out of a request, to be answered with TOPIC_AUTHORIZATION_FAILED.
#[derive(Debug)]
struct RefusedTopic {
    name: StrBytes,
    id: Uuid,
    partitions: Vec<i32>,
    /// The group it was asked for, in an OffsetFetch of several groups.
    group: Option<GroupId>,
}

/// A group, transactional id, coordinator key or config resource taken out of a request.
#[derive(Debug)]
struct RefusedName {
    name: StrBytes,
    /// The error it is answered with.
    error: i16,
    /// For a config resource, its type.
    resource_type: i8,
}

fn refused_name(name: StrBytes, error: i16) -> RefusedName {
    RefusedName { name, error, resource_type: 0 }
}

/// What was taken out of a request, and how its answer must be completed.
#[derive(Debug, Default)]
pub(super) struct Refused {
    topics: Vec<RefusedTopic>,
    names: Vec<RefusedName>,
    /// The answer lists resources; leave out those the client may not describe.
    filter: bool,
}

impl Refused {
    fn is_empty(&self) -> bool {
        self.topics.is_empty() && self.names.is_empty() && !self.filter
    }
}

struct Check<'a> {
    access: &'a Access,
    state: &'a State,
    ns: Option<&'a Namespace>,
}

impl Check<'_> {
    fn may(&self, operation: Op, resource_type: Res, name: &str) -> bool {
        self.access.allows(self.state, operation, resource_type, name)
    }

    fn cluster(&self, operation: Op) -> bool {
        self.access.allows_cluster(self.state, operation)
    }

    /// The name a client uses for a topic it named by `name` or, when that is empty, by `id`;
    /// `None` for an id this client cannot know (left for the handler to answer unknown).
    fn topic_name(&self, name: &str, id: Uuid) -> Option<String> {
        if !name.is_empty() {
            return Some(name.to_owned());
        }
        let stored = &self.state.topics.get(&id)?.name;
        match self.ns {
            Some(ns) => ns.unscope(stored).map(str::to_owned),
            None => Some(stored.clone()),
        }
    }

    fn topic(&self, operation: Op, name: &str, id: Uuid) -> bool {
        self.topic_name(name, id).is_none_or(|n| self.may(operation, Res::Topic, &n))
    }
}

/// Takes the items `allowed` refuses out of `items` and returns them.
fn take_refused<T>(items: &mut Vec<T>, allowed: impl Fn(&T) -> bool) -> Vec<T> {
    let (kept, refused) = std::mem::take(items).into_iter().partition(|item| allowed(item));
    *items = kept;
    refused
}

fn refused_topic(name: &TopicName, id: Uuid, partitions: Vec<i32>) -> RefusedTopic {
    RefusedTopic { name: name.0.clone(), id, partitions, group: None }
}

/// Checks `request` for `access`. `Ok`: what was taken out of it, for [`complete`]; `Err`: the
/// whole answer.
pub(super) fn request(
    access: &Access,
    ns: Option<&Namespace>,
    state: &State,
    version: i16,
    request: &mut RequestKind,
) -> Result<Refused, Box<ResponseKind>> {
    let check = Check { access, state, ns };
    let mut refused = Refused::default();
    let group_error = |g: &GroupId, op| !check.may(op, Res::Group, g.as_str());
    let txn_error = |t: &TransactionalId| !check.may(Op::Write, Res::TransactionalId, t.as_str());
    let whole = |response: ResponseKind| Err(Box::new(response));
    const GROUP: i16 = code::GROUP_AUTHORIZATION_FAILED;
    const TXN: i16 = code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    match request {
        RequestKind::Produce(r) => {
            if r.transactional_id.as_ref().is_some_and(txn_error) {
                let topics = r.topic_data.iter().map(|t| {
                    let partitions = t.partition_data.iter().map(|p| p.index).collect();
                    refused_topic(&t.name, t.topic_id, partitions)
                });
                let answer = produce_refusals(topics.collect(), TXN);
                return whole(ResponseKind::Produce(ProduceResponse::default().with_responses(answer)));
            }
            for t in take_refused(&mut r.topic_data, |t| check.topic(Op::Write, &t.name, t.topic_id)) {
                let partitions = t.partition_data.iter().map(|p| p.index).collect();
                refused.topics.push(refused_topic(&t.name, t.topic_id, partitions));
            }
        }
        RequestKind::Fetch(r) => {
            for t in take_refused(&mut r.topics, |t| check.topic(Op::Read, &t.topic, t.topic_id)) {
                let partitions = t.partitions.iter().map(|p| p.partition).collect();
                refused.topics.push(refused_topic(&t.topic, t.topic_id, partitions));
            }
            if r.topics.is_empty() && !refused.topics.is_empty() {
                // Nothing left to wait for: answer now rather than after max_wait_ms.
                let mut answer = ResponseKind::Fetch(FetchResponse::default());
                complete(access, ns, state, refused, &mut answer);
                return whole(answer);
            }
        }
        RequestKind::ListOffsets(r) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Describe, Res::Topic, &t.name)) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), partitions));
            }
        }
        RequestKind::Metadata(r) => match r.topics.as_mut() {
            None => refused.filter = true,
            Some(topics) => {
                let described = |t: &metadata_request::MetadataRequestTopic| {
                    check.topic(Op::Describe, t.name.as_ref().map_or("", |n| n.as_str()), t.topic_id)
                };
                for t in take_refused(topics, described) {
                    let name = t.name.map_or_else(StrBytes::default, |n| n.0);
                    refused.topics.push(RefusedTopic { name, id: t.topic_id, partitions: vec![], group: None });
                }
                // Auto-creation needs Create on the cluster or on each topic it would create.
                if r.allow_auto_topic_creation && !check.cluster(Op::Create) {
                    let creatable = |t: &metadata_request::MetadataRequestTopic| {
                        t.name.as_ref().is_some_and(|n| check.may(Op::Create, Res::Topic, n))
                    };
                    r.allow_auto_topic_creation = topics.iter().all(creatable);
                }
            }
        },
        RequestKind::CreateTopics(r) if !check.cluster(Op::Create) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Create, Res::Topic, &t.name)) {
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), vec![]));
            }
        }
        RequestKind::DeleteTopics(r) => {
            for t in take_refused(&mut r.topics, |t| {
                check.topic(Op::Delete, t.name.as_ref().map_or("", |n| n.as_str()), t.topic_id)
            }) {
                let name = check.topic_name(t.name.as_ref().map_or("", |n| n.as_str()), t.topic_id).unwrap_or_default();
                refused.topics.push(RefusedTopic {
                    name: name.into(),
                    id: t.topic_id,
                    partitions: vec![],
                    group: None,
                });
            }
            for name in take_refused(&mut r.topic_names, |t| check.may(Op::Delete, Res::Topic, t)) {
                refused.topics.push(refused_topic(&name, Uuid::nil(), vec![]));
            }
        }
        RequestKind::DeleteRecords(r) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Delete, Res::Topic, &t.name)) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), partitions));
            }
        }
        RequestKind::OffsetForLeaderEpoch(r) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Describe, Res::Topic, &t.topic)) {
                let partitions = t.partitions.iter().map(|p| p.partition).collect();
                refused.topics.push(refused_topic(&t.topic, Uuid::nil(), partitions));
            }
        }
        RequestKind::CreatePartitions(r) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Alter, Res::Topic, &t.name)) {
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), vec![]));
            }
        }
        RequestKind::DescribeConfigs(r) => {
            let allowed = |t: i8, name: &str| config_allowed(&check, Op::DescribeConfigs, t, name);
            for c in take_refused(&mut r.resources, |c| allowed(c.resource_type, &c.resource_name)) {
                refused.names.push(config_refusal(c.resource_type, c.resource_name));
            }
        }
        RequestKind::AlterConfigs(r) => {
            let allowed = |t: i8, name: &str| config_allowed(&check, Op::AlterConfigs, t, name);
            for c in take_refused(&mut r.resources, |c| allowed(c.resource_type, &c.resource_name)) {
                refused.names.push(config_refusal(c.resource_type, c.resource_name));
            }
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            let allowed = |t: i8, name: &str| config_allowed(&check, Op::AlterConfigs, t, name);
            for c in take_refused(&mut r.resources, |c| allowed(c.resource_type, &c.resource_name)) {
                refused.names.push(config_refusal(c.resource_type, c.resource_name));
            }
        }
        RequestKind::DescribeCluster(_) if !check.cluster(Op::Describe) => {
            let answer = DescribeClusterResponse::default().with_error_code(code::CLUSTER_AUTHORIZATION_FAILED);
            return whole(ResponseKind::DescribeCluster(answer));
        }
        RequestKind::FindCoordinator(r) => {
            let (resource_type, error) = match r.key_type {
                1 => (Res::TransactionalId, TXN),
                _ => (Res::Group, GROUP),
            };
            if version < 4 {
                if !check.may(Op::Describe, resource_type, &r.key) {
                    let answer = FindCoordinatorResponse::default().with_error_code(error).with_node_id(BrokerId(-1));
                    return whole(ResponseKind::FindCoordinator(answer.with_port(-1)));
                }
            } else {
                // The handler answers every key at once; refused keys are answered here.
                for key in take_refused(&mut r.coordinator_keys, |k| check.may(Op::Describe, resource_type, k)) {
                    refused.names.push(refused_name(key, error));
                }
            }
        }
        RequestKind::JoinGroup(r) if group_error(&r.group_id, Op::Read) => {
            return whole(ResponseKind::JoinGroup(JoinGroupResponse::default().with_error_code(GROUP)));
        }
        RequestKind::SyncGroup(r) if group_error(&r.group_id, Op::Read) => {
            return whole(ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(GROUP)));
        }
        RequestKind::Heartbeat(r) if group_error(&r.group_id, Op::Read) => {
            return whole(ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(GROUP)));
        }
        RequestKind::LeaveGroup(r) if group_error(&r.group_id, Op::Read) => {
            return whole(ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(GROUP)));
        }
        RequestKind::OffsetCommit(r) => {
            if group_error(&r.group_id, Op::Read) {
                let topics = r.topics.iter().map(|t| {
                    let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                    refused_topic(&t.name, t.topic_id, partitions)
                });
                let answer = OffsetCommitResponse::default().with_topics(offset_commit_refusals(topics, GROUP));
                return whole(ResponseKind::OffsetCommit(answer));
            }
            for t in take_refused(&mut r.topics, |t| check.may(Op::Read, Res::Topic, &t.name)) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                refused.topics.push(refused_topic(&t.name, t.topic_id, partitions));
            }
        }
        RequestKind::OffsetFetch(r) => {
            if version < 8 {
                if group_error(&r.group_id, Op::Describe) {
                    return whole(ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_error_code(GROUP)));
                }
                match r.topics.as_mut() {
                    None => refused.filter = true,
                    Some(topics) => {
                        for t in take_refused(topics, |t| check.may(Op::Describe, Res::Topic, &t.name)) {
                            refused.topics.push(refused_topic(&t.name, Uuid::nil(), t.partition_indexes));
                        }
                    }
                }
            } else {
                for g in take_refused(&mut r.groups, |g| !group_error(&g.group_id, Op::Describe)) {
                    refused.names.push(refused_name(g.group_id.0, GROUP));
                }
                for g in &mut r.groups {
                    match g.topics.as_mut() {
                        None => refused.filter = true,
                        Some(topics) => {
                            for t in take_refused(topics, |t| check.may(Op::Describe, Res::Topic, &t.name)) {
                                let mut topic = refused_topic(&t.name, Uuid::nil(), t.partition_indexes);
                                topic.group = Some(g.group_id.clone());
                                refused.topics.push(topic);
                            }
                        }
                    }
                }
            }
        }
        RequestKind::ListGroups(_) => refused.filter = !check.cluster(Op::Describe),
        RequestKind::DescribeGroups(r) => {
            for g in take_refused(&mut r.groups, |g| !group_error(g, Op::Describe)) {
                refused.names.push(refused_name(g.0, GROUP));
            }
        }
        RequestKind::DeleteGroups(r) => {
            for g in take_refused(&mut r.groups_names, |g| !group_error(g, Op::Delete)) {
                refused.names.push(refused_name(g.0, GROUP));
            }
        }
        RequestKind::OffsetDelete(r) => {
            if group_error(&r.group_id, Op::Delete) {
                return whole(ResponseKind::OffsetDelete(OffsetDeleteResponse::default().with_error_code(GROUP)));
            }
            for t in take_refused(&mut r.topics, |t| check.may(Op::Read, Res::Topic, &t.name)) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), partitions));
            }
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            let error = if group_error(&r.group_id, Op::Read) {
                Some(GROUP)
            } else {
                let subscribed = r.subscribed_topic_names.iter().flatten();
                subscribed
                    .into_iter()
                    .any(|t| !check.may(Op::Describe, Res::Topic, t))
                    .then_some(code::TOPIC_AUTHORIZATION_FAILED)
            };
            if let Some(error) = error {
                let answer = ConsumerGroupHeartbeatResponse::default().with_error_code(error);
                return whole(ResponseKind::ConsumerGroupHeartbeat(answer));
            }
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            for g in take_refused(&mut r.group_ids, |g| !group_error(g, Op::Describe)) {
                refused.names.push(refused_name(g.0, GROUP));
            }
        }
        RequestKind::InitProducerId(r) => {
            let error = match &r.transactional_id {
                Some(t) => txn_error(t).then_some(TXN),
                // An idempotent producer needs IdempotentWrite on the cluster or Write on some topic.
                None => (!check.cluster(Op::IdempotentWrite) && !access.allows_some(state, Op::Write, Res::Topic))
                    .then_some(code::CLUSTER_AUTHORIZATION_FAILED),
            };
            if let Some(error) = error {
                let answer = InitProducerIdResponse::default().with_error_code(error).with_producer_id(ProducerId(-1));
                return whole(ResponseKind::InitProducerId(answer.with_producer_epoch(-1)));
            }
        }
        RequestKind::AddPartitionsToTxn(r) => {
            if version < 4 {
                let txn_refused = txn_error(&r.v3_and_below_transactional_id);
                let topic_refused = |t: &add_partitions_to_txn_request::AddPartitionsToTxnTopic| {
                    !check.may(Op::Write, Res::Topic, &t.name)
                };
                if txn_refused || r.v3_and_below_topics.iter().any(topic_refused) {
                    // Kafka fails the refused topics and does not attempt the others.
                    let results = r.v3_and_below_topics.iter().map(|t| {
                        let error = match () {
                            () if txn_refused => TXN,
                            () if topic_refused(t) => code::TOPIC_AUTHORIZATION_FAILED,
                            () => code::OPERATION_NOT_ATTEMPTED,
                        };
                        txn_topic_result(&t.name, &t.partitions, error)
                    });
                    let answer =
                        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results.collect());
                    return whole(ResponseKind::AddPartitionsToTxn(answer));
                }
            } else {
                // Brokers verifying transactions: each transaction answered on its own.
                let allowed = |t: &add_partitions_to_txn_request::AddPartitionsToTxnTransaction| {
                    !txn_error(&t.transactional_id)
                        && t.topics.iter().all(|t| check.may(Op::Write, Res::Topic, &t.name))
                };
                for txn in take_refused(&mut r.transactions, allowed) {
                    let error = if txn_error(&txn.transactional_id) { TXN } else { code::TOPIC_AUTHORIZATION_FAILED };
                    refused.names.push(refused_name(txn.transactional_id.0.clone(), error));
                    for t in txn.topics {
                        let mut topic = refused_topic(&t.name, Uuid::nil(), t.partitions);
                        topic.group = Some(GroupId(txn.transactional_id.0.clone()));
                        refused.topics.push(topic);
                    }
                }
            }
        }
        RequestKind::AddOffsetsToTxn(r) => {
            let error = if txn_error(&r.transactional_id) {
                Some(TXN)
            } else {
                group_error(&r.group_id, Op::Read).then_some(GROUP)
            };
            if let Some(error) = error {
                return whole(ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(error)));
            }
        }
        RequestKind::TxnOffsetCommit(r) => {
            let error = if txn_error(&r.transactional_id) {
                Some(TXN)
            } else {
                group_error(&r.group_id, Op::Read).then_some(GROUP)
            };
            if let Some(error) = error {
                let topics = r.topics.iter().map(|t| {
                    let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                    refused_topic(&t.name, Uuid::nil(), partitions)
                });
                let answer = TxnOffsetCommitResponse::default().with_topics(txn_offset_commit_refusals(topics, error));
                return whole(ResponseKind::TxnOffsetCommit(answer));
            }
            for t in take_refused(&mut r.topics, |t| check.may(Op::Read, Res::Topic, &t.name)) {
                let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), partitions));
            }
        }
        RequestKind::EndTxn(r) if txn_error(&r.transactional_id) => {
            return whole(ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(TXN)));
        }
        RequestKind::DescribeProducers(r) => {
            for t in take_refused(&mut r.topics, |t| check.may(Op::Read, Res::Topic, &t.name)) {
                refused.topics.push(refused_topic(&t.name, Uuid::nil(), t.partition_indexes));
            }
        }
        RequestKind::ListTransactions(_) => refused.filter = true,
        RequestKind::DescribeTransactions(r) => {
            let described = |t: &TransactionalId| check.may(Op::Describe, Res::TransactionalId, t);
            for t in take_refused(&mut r.transactional_ids, described) {
                refused.names.push(refused_name(t.0, TXN));
            }
        }
        // ApiVersions names nothing; the SASL, SCRAM and ACL APIs check their caller themselves.
        _ => {}
    }
    Ok(refused)
}

/// Whether a config resource may be described or altered: a topic by its own ACLs, a broker
/// (or its loggers) through the cluster's.
fn config_allowed(check: &Check<'_>, operation: Op, resource_type: i8, name: &str) -> bool {
    if resource_type == RESOURCE_TOPIC { check.may(operation, Res::Topic, name) } else { check.cluster(operation) }
}

fn produce_refusals(topics: Vec<RefusedTopic>, error: i16) -> Vec<produce_response::TopicProduceResponse> {
    use produce_response::{PartitionProduceResponse, TopicProduceResponse};
    let partition =
        |p: i32| PartitionProduceResponse::default().with_index(p).with_error_code(error).with_base_offset(-1);
    topics
        .into_iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(TopicName(t.name))
                .with_topic_id(t.id)
                .with_partition_responses(t.partitions.into_iter().map(partition).collect())
        })
        .collect()
}

fn offset_commit_refusals(
    topics: impl Iterator<Item = RefusedTopic>,
    error: i16,
) -> Vec<offset_commit_response::OffsetCommitResponseTopic> {
    use offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
    topics
        .map(|t| {
            let partitions = t.partitions.into_iter();
            OffsetCommitResponseTopic::default().with_name(TopicName(t.name)).with_topic_id(t.id).with_partitions(
                partitions
                    .map(|p| OffsetCommitResponsePartition::default().with_partition_index(p).with_error_code(error))
                    .collect(),
            )
        })
        .collect()
}

fn txn_offset_commit_refusals(
    topics: impl Iterator<Item = RefusedTopic>,
    error: i16,
) -> Vec<txn_offset_commit_response::TxnOffsetCommitResponseTopic> {
    use txn_offset_commit_response::{TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic};
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

fn txn_topic_result(
    name: &TopicName,
    partitions: &[i32],
    error: i16,
) -> add_partitions_to_txn_response::AddPartitionsToTxnTopicResult {
    use add_partitions_to_txn_response::{AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult};
    let results = partitions.iter().map(|p| {
        AddPartitionsToTxnPartitionResult::default().with_partition_index(*p).with_partition_error_code(error)
    });
    AddPartitionsToTxnTopicResult::default().with_name(name.clone()).with_results_by_partition(results.collect())
}

/// Completes the handler's answer (already in the client's names): refused resources answered
/// with their authorization errors, and listings without what the client may not describe.
pub(super) fn complete(
    access: &Access,
    ns: Option<&Namespace>,
    state: &State,
    refused: Refused,
    response: &mut ResponseKind,
) {
    if refused.is_empty() {
        return;
    }
    let check = Check { access, state, ns };
    let describes = |resource_type, name: &str| check.may(Op::Describe, resource_type, name);
    const TOPIC: i16 = code::TOPIC_AUTHORIZATION_FAILED;
    let Refused { topics, names, filter } = refused;
    match response {
        ResponseKind::Produce(r) => r.responses.extend(produce_refusals(topics, TOPIC)),
        ResponseKind::Fetch(r) => {
            use fetch_response::{FetchableTopicResponse, PartitionData};
            r.responses.extend(topics.into_iter().map(|t| {
                let partition =
                    |p| PartitionData::default().with_partition_index(p).with_error_code(TOPIC).with_high_watermark(-1);
                FetchableTopicResponse::default()
                    .with_topic(TopicName(t.name))
                    .with_topic_id(t.id)
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::ListOffsets(r) => {
            use list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
            r.topics.extend(topics.into_iter().map(|t| {
                let partition = |p| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(p)
                        .with_error_code(TOPIC)
                        .with_offset(-1)
                };
                ListOffsetsTopicResponse::default()
                    .with_name(TopicName(t.name))
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::Metadata(r) => {
            if filter {
                r.topics.retain(|t| t.name.as_ref().is_none_or(|n| describes(Res::Topic, n)));
            }
            r.topics.extend(topics.into_iter().map(|t| {
                metadata_response::MetadataResponseTopic::default()
                    .with_error_code(TOPIC)
                    .with_name((!t.name.is_empty()).then_some(TopicName(t.name)))
                    .with_topic_id(t.id)
            }));
        }
        ResponseKind::CreateTopics(r) => r.topics.extend(topics.into_iter().map(|t| {
            create_topics_response::CreatableTopicResult::default()
                .with_name(TopicName(t.name))
                .with_error_code(TOPIC)
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        })),
        ResponseKind::DeleteTopics(r) => r.responses.extend(topics.into_iter().map(|t| {
            delete_topics_response::DeletableTopicResult::default()
                .with_name((!t.name.is_empty()).then_some(TopicName(t.name)))
                .with_topic_id(t.id)
                .with_error_code(TOPIC)
        })),
        ResponseKind::DeleteRecords(r) => {
            use delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
            r.topics.extend(topics.into_iter().map(|t| {
                let partition = |p| {
                    DeleteRecordsPartitionResult::default()
                        .with_partition_index(p)
                        .with_error_code(TOPIC)
                        .with_low_watermark(-1)
                };
                DeleteRecordsTopicResult::default()
                    .with_name(TopicName(t.name))
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::OffsetForLeaderEpoch(r) => {
            use offset_for_leader_epoch_response::{EpochEndOffset, OffsetForLeaderTopicResult};
            r.topics.extend(topics.into_iter().map(|t| {
                let partition = |p| {
                    EpochEndOffset::default()
                        .with_partition(p)
                        .with_error_code(TOPIC)
                        .with_end_offset(-1)
                        .with_leader_epoch(-1)
                };
                OffsetForLeaderTopicResult::default()
                    .with_topic(TopicName(t.name))
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::CreatePartitions(r) => r.results.extend(topics.into_iter().map(|t| {
            create_partitions_response::CreatePartitionsTopicResult::default()
                .with_name(TopicName(t.name))
                .with_error_code(TOPIC)
        })),
        ResponseKind::DescribeConfigs(r) => r.results.extend(names.into_iter().map(|n| {
            describe_configs_response::DescribeConfigsResult::default()
                .with_error_code(n.error)
                .with_resource_type(n.resource_type)
                .with_resource_name(n.name)
        })),
        ResponseKind::AlterConfigs(r) => r.responses.extend(names.into_iter().map(|n| {
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(n.error)
                .with_resource_type(n.resource_type)
                .with_resource_name(n.name)
        })),
        ResponseKind::IncrementalAlterConfigs(r) => r.responses.extend(names.into_iter().map(|n| {
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(n.error)
                .with_resource_type(n.resource_type)
                .with_resource_name(n.name)
        })),
        ResponseKind::FindCoordinator(r) => r.coordinators.extend(names.into_iter().map(|n| {
            find_coordinator_response::Coordinator::default()
                .with_key(n.name)
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(n.error)
        })),
        ResponseKind::OffsetCommit(r) => r.topics.extend(offset_commit_refusals(topics.into_iter(), TOPIC)),
        ResponseKind::OffsetFetch(r) => {
            use offset_fetch_response::*;
            if filter {
                r.topics.retain(|t| describes(Res::Topic, &t.name));
                r.groups.iter_mut().for_each(|g| g.topics.retain(|t| describes(Res::Topic, &t.name)));
            }
            r.groups.extend(
                names.into_iter().map(|n| {
                    OffsetFetchResponseGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)
                }),
            );
            for t in topics {
                let partition = |p| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_error_code(TOPIC)
                };
                match t.group {
                    Some(group) => {
                        let refused = OffsetFetchResponseTopics::default()
                            .with_name(TopicName(t.name))
                            .with_partitions(t.partitions.into_iter().map(partition).collect());
                        if let Some(g) = r.groups.iter_mut().find(|g| g.group_id == group) {
                            g.topics.push(refused);
                        }
                    }
                    None => {
                        let partitions = t.partitions.into_iter().map(|p| {
                            OffsetFetchResponsePartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(-1)
                                .with_error_code(TOPIC)
                        });
                        let refused = OffsetFetchResponseTopic::default()
                            .with_name(TopicName(t.name))
                            .with_partitions(partitions.collect());
                        r.topics.push(refused);
                    }
                }
            }
        }
        ResponseKind::ListGroups(r) => r.groups.retain(|g| describes(Res::Group, &g.group_id)),
        ResponseKind::DescribeGroups(r) => r.groups.extend(names.into_iter().map(|n| {
            describe_groups_response::DescribedGroup::default().with_group_id(GroupId(n.name)).with_error_code(n.error)
        })),
        ResponseKind::DeleteGroups(r) => r.results.extend(names.into_iter().map(|n| {
            delete_groups_response::DeletableGroupResult::default()
                .with_group_id(GroupId(n.name))
                .with_error_code(n.error)
        })),
        ResponseKind::OffsetDelete(r) => {
            use offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
            r.topics.extend(topics.into_iter().map(|t| {
                let partition =
                    |p| OffsetDeleteResponsePartition::default().with_partition_index(p).with_error_code(TOPIC);
                OffsetDeleteResponseTopic::default()
                    .with_name(TopicName(t.name))
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::ConsumerGroupDescribe(r) => r.groups.extend(names.into_iter().map(|n| {
            consumer_group_describe_response::DescribedGroup::default()
                .with_group_id(GroupId(n.name))
                .with_error_code(n.error)
        })),
        ResponseKind::AddPartitionsToTxn(r) => {
            use add_partitions_to_txn_response::AddPartitionsToTxnResult;
            for n in names {
                let id = TransactionalId(n.name);
                let refused_here = topics.iter().filter(|t| t.group.as_ref().is_some_and(|g| g.0 == id.0));
                let results = refused_here
                    .map(|t| txn_topic_result(&TopicName(t.name.clone()), &t.partitions, n.error))
                    .collect();
                r.results_by_transaction
                    .push(AddPartitionsToTxnResult::default().with_transactional_id(id).with_topic_results(results));
            }
        }
        ResponseKind::TxnOffsetCommit(r) => r.topics.extend(txn_offset_commit_refusals(topics.into_iter(), TOPIC)),
        ResponseKind::DescribeProducers(r) => {
            use describe_producers_response::{PartitionResponse, TopicResponse};
            r.topics.extend(topics.into_iter().map(|t| {
                let partition = |p| PartitionResponse::default().with_partition_index(p).with_error_code(TOPIC);
                TopicResponse::default()
                    .with_name(TopicName(t.name))
                    .with_partitions(t.partitions.into_iter().map(partition).collect())
            }));
        }
        ResponseKind::ListTransactions(r) => {
            r.transaction_states.retain(|t| describes(Res::TransactionalId, &t.transactional_id));
        }
        ResponseKind::DescribeTransactions(r) => r.transaction_states.extend(names.into_iter().map(|n| {
            describe_transactions_response::TransactionState::default()
                .with_transactional_id(TransactionalId(n.name))
                .with_error_code(n.error)
        })),
        _ => {}
    }
}

fn config_refusal(resource_type: i8, name: StrBytes) -> RefusedName {
    let error = if resource_type == RESOURCE_TOPIC {
        code::TOPIC_AUTHORIZATION_FAILED
    } else {
        code::CLUSTER_AUTHORIZATION_FAILED
    };
    RefusedName { name, error, resource_type }
}

#[cfg(test)]
mod tests {
    use floe_metadata::Command;
    use floe_metadata::acl::{AclBinding, AclPatternType, AclPermission};
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::list_groups_response::ListedGroup;

    use super::*;
    use crate::access::AuthorizerConfig;

    fn name(s: &str) -> StrBytes {
        StrBytes::from_string(s.into())
    }

    fn allow(resource_type: Res, resource: &str, operation: Op) -> AclBinding {
        AclBinding {
            resource_type,
            resource_name: resource.into(),
            pattern_type: AclPatternType::Literal,
            principal: "User:alice".into(),
            host: "*".into(),
            operation,
            permission: AclPermission::Allow,
        }
    }

    /// A state where alice of tenant acme may read `orders` and group `billing`, and nothing else.
    fn setup() -> (State, Access) {
        let mut state = State::default();
        state.apply(1, Command::CreateTenant { name: "acme".into(), now_ms: 0 }).expect("tenant");
        let bindings = vec![allow(Res::Topic, "orders", Op::Read), allow(Res::Group, "billing", Op::Read)];
        state.apply(2, Command::CreateAcls { tenant: "acme".into(), bindings }).expect("acls");
        let access = Access::with(&AuthorizerConfig::default(), &[], Some("alice"), Some("acme"), [10, 0, 0, 1].into());
        (state, access)
    }

    /// Alice's namespace, as her session holds it.
    fn ns(state: &State) -> Namespace {
        state.tenant_namespace("acme").expect("acme")
    }

    fn fetch_topic(topic: &str) -> FetchTopic {
        FetchTopic::default().with_topic(TopicName(name(topic))).with_partitions(vec![
            FetchPartition::default().with_partition(0),
            FetchPartition::default().with_partition(1),
        ])
    }

    #[test]
    fn a_refused_topic_is_taken_out_and_answered_next_to_the_rest() {
        let (state, access) = setup();
        let mut fetch = RequestKind::Fetch(
            FetchRequest::default().with_topics(vec![fetch_topic("orders"), fetch_topic("payments")]),
        );
        let refused = request(&access, Some(&ns(&state)), &state, 12, &mut fetch).expect("served");
        let RequestKind::Fetch(served) = &fetch else { unreachable!() };
        assert_eq!(served.topics.len(), 1);
        assert_eq!(served.topics[0].topic.as_str(), "orders");
        // The handler answers orders; payments is added with its error, per partition.
        let answered = fetch_response::FetchableTopicResponse::default().with_topic(TopicName(name("orders")));
        let mut response = ResponseKind::Fetch(FetchResponse::default().with_responses(vec![answered]));
        complete(&access, Some(&ns(&state)), &state, refused, &mut response);
        let ResponseKind::Fetch(response) = response else { unreachable!() };
        assert_eq!(response.responses.len(), 2);
        let payments = &response.responses[1];
        assert_eq!(payments.topic.as_str(), "payments");
        let errors: Vec<i16> = payments.partitions.iter().map(|p| p.error_code).collect();
        assert_eq!(errors, vec![code::TOPIC_AUTHORIZATION_FAILED; 2]);
    }

    #[test]
    fn a_fetch_of_only_refused_topics_is_answered_at_once() {
        let (state, access) = setup();
        let mut fetch = RequestKind::Fetch(
            FetchRequest::default().with_max_wait_ms(30_000).with_topics(vec![fetch_topic("payments")]),
        );
        let answer = request(&access, Some(&ns(&state)), &state, 12, &mut fetch).expect_err("nothing left to serve");
        let ResponseKind::Fetch(response) = *answer else { panic!("a fetch answer") };
        assert_eq!(response.responses[0].partitions[0].error_code, code::TOPIC_AUTHORIZATION_FAILED);
    }

    #[test]
    fn single_resource_requests_are_refused_whole() {
        let (state, access) = setup();
        let join =
            |group: &str| RequestKind::JoinGroup(JoinGroupRequest::default().with_group_id(GroupId(name(group))));
        assert!(request(&access, Some(&ns(&state)), &state, 9, &mut join("billing")).is_ok());
        let answer = request(&access, Some(&ns(&state)), &state, 9, &mut join("audit")).expect_err("refused");
        let ResponseKind::JoinGroup(response) = *answer else { panic!("a join answer") };
        assert_eq!(response.error_code, code::GROUP_AUTHORIZATION_FAILED);

        // An idempotent producer needs Write somewhere; alice may only read.
        let mut init = RequestKind::InitProducerId(InitProducerIdRequest::default().with_transactional_id(None));
        let answer = request(&access, Some(&ns(&state)), &state, 4, &mut init).expect_err("refused");
        let ResponseKind::InitProducerId(response) = *answer else { panic!("an init answer") };
        assert_eq!(response.error_code, code::CLUSTER_AUTHORIZATION_FAILED);
    }

    #[test]
    fn listings_leave_out_what_cannot_be_described() {
        let (state, access) = setup();
        let mut list = RequestKind::ListGroups(ListGroupsRequest::default());
        let refused = request(&access, Some(&ns(&state)), &state, 4, &mut list).expect("served");
        let groups = ["billing", "audit"].map(|g| ListedGroup::default().with_group_id(GroupId(name(g))));
        let mut response = ResponseKind::ListGroups(ListGroupsResponse::default().with_groups(groups.to_vec()));
        complete(&access, Some(&ns(&state)), &state, refused, &mut response);
        let ResponseKind::ListGroups(response) = response else { unreachable!() };
        let listed: Vec<&str> = response.groups.iter().map(|g| g.group_id.as_str()).collect();
        assert_eq!(listed, vec!["billing"]);
    }

    #[test]
    fn super_users_pass_every_check() {
        let (state, _) = setup();
        let root = Access::with(
            &AuthorizerConfig::default(),
            &["root".into()],
            Some("root"),
            Some("acme"),
            [10, 0, 0, 1].into(),
        );
        let mut fetch = RequestKind::Fetch(FetchRequest::default().with_topics(vec![fetch_topic("payments")]));
        let refused = request(&root, None, &state, 12, &mut fetch).expect("served");
        assert!(refused.is_empty());
    }
}
