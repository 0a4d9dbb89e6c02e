//! Share group APIs (KIP-932): ShareGroupHeartbeat is forwarded to the group coordinator on the
//! metadata leader; ShareFetch and ShareAcknowledge keep their share session on this agent,
//! send acknowledgements and acquisitions to the coordinator as one [`ShareWork`], and read the
//! acquired records like a fetch.

mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod share_group_offsets;

use floe_metadata::groups::{GroupError, GroupRequest, GroupResponse, ShareWork, ShareWorkResult};
use floe_metadata::{AckBatch, ShareAck, TopicId};
use kafka_protocol::ResponseError;

use std::collections::BTreeMap;

use super::super::error_code::for_group;
use crate::Agent;
use crate::share_sessions::{SHARE_SESSION_PARTITIONS_MAX, SharePartitionRef, ShareSessionError};

/// Group configs, which fall back to broker configs (`floe.share.isolation.level`,
/// `group.share.record.lock.duration.ms`) when the group sets none.
const ISOLATION_LEVEL: &str = "share.isolation.level";
const LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// Records one ShareFetch acquires per partition when the request does not say.
const MAX_RECORDS_DEFAULT: i32 = 500;

/// Whether share group `group` (its stored id) reads committed records only.
fn read_committed(agent: &Agent, group: &str) -> bool {
    agent.metadata.read().group_config(group, ISOLATION_LEVEL) == Some("read_committed")
}

/// How long share group `group` holds the records it acquires.
fn lock_duration_ms(agent: &Agent, group: &str) -> i32 {
    let state = agent.metadata.read();
    state.group_config_i64(group, LOCK_DURATION_MS).and_then(|v| i32::try_from(v).ok()).unwrap_or(30_000)
}

fn for_session(error: ShareSessionError) -> i16 {
    match error {
        ShareSessionError::NotFound => ResponseError::ShareSessionNotFound.code(),
        ShareSessionError::InvalidEpoch { .. } => ResponseError::InvalidShareSessionEpoch.code(),
        ShareSessionError::LimitReached => ResponseError::ShareSessionLimitReached.code(),
        ShareSessionError::TooManyPartitions => ResponseError::InvalidRequest.code(),
    }
}

/// Acknowledgement batches one request may carry, over all its partitions: bounds the
/// metadata entry it becomes.
const ACK_BATCHES_MAX: usize = 10_000;

/// A partition's acknowledgement batches from the wire: each batch's types apply one to the
/// whole range, or one per offset. `None` when they do not fit the range, name no known type,
/// or take more than `budget` batches (which they use up).
fn ack_batches<'a>(
    batches: impl IntoIterator<Item = (i64, i64, &'a [i8])>,
    budget: &mut usize,
) -> Option<Vec<AckBatch>> {
    let mut out: Vec<AckBatch> = Vec::new();
    for (first, last, types) in batches {
        if first > last || first < 0 {
            return None;
        }
        match types {
            [one] => out.push(AckBatch { first, last, ack: ShareAck::from_wire(*one)? }),
            many if i64::try_from(many.len()).ok() == last.checked_sub(first)?.checked_add(1) => {
                for (offset, t) in (first..=last).zip(many) {
                    let ack = ShareAck::from_wire(*t)?;
                    match out.last_mut() {
                        Some(b) if b.ack == ack && b.last.checked_add(1) == Some(offset) => b.last = offset,
                        _ => out.push(AckBatch { first: offset, last: offset, ack }),
                    }
                    if out.len() > *budget {
                        return None;
                    }
                }
            }
            _ => return None,
        }
        if out.len() > *budget {
            return None;
        }
    }
    *budget -= out.len();
    Some(out)
}

/// A request's acknowledgements, after the session's owed gaps.
struct Acknowledgements {
    /// The gaps, one entry per partition, then the request's partitions that parsed.
    work: Vec<(TopicId, i32, Vec<AckBatch>)>,
    gaps: usize,
    acked: Vec<SharePartitionRef>,
    /// Partitions answered without asking the coordinator, with their error code.
    refused: Vec<(SharePartitionRef, i16)>,
}

impl Acknowledgements {
    /// `partitions`: each partition's batches as (first, last, types) from the wire; `known`:
    /// whether a topic id names a topic.
    fn parse<'a, B>(
        gaps: &[(SharePartitionRef, i64, i64)],
        partitions: impl IntoIterator<Item = (TopicId, i32, B)>,
        known: impl Fn(TopicId) -> bool,
    ) -> Self
    where
        B: IntoIterator<Item = (i64, i64, &'a [i8])>,
    {
        let mut by_partition: BTreeMap<SharePartitionRef, Vec<AckBatch>> = BTreeMap::new();
        for ((t, p), first, last) in gaps {
            by_partition.entry((*t, *p)).or_default().push(AckBatch { first: *first, last: *last, ack: ShareAck::Gap });
        }
        let gaps = by_partition.len();
        let mut acks = Self {
            work: by_partition.into_iter().map(|((t, p), b)| (t, p, b)).collect(),
            gaps,
            acked: Vec::new(),
            refused: Vec::new(),
        };
        let mut budget = ACK_BATCHES_MAX;
        for (topic_id, partition, batches) in partitions {
            let at = (topic_id, partition);
            if acks.acked.len() + acks.refused.len() >= SHARE_SESSION_PARTITIONS_MAX {
                acks.refused.push((at, ResponseError::InvalidRequest.code()));
            } else if !known(topic_id) {
                acks.refused.push((at, ResponseError::UnknownTopicId.code()));
            } else {
                match ack_batches(batches, &mut budget) {
                    Some(batches) => {
                        acks.work.push((topic_id, partition, batches));
                        acks.acked.push(at);
                    }
                    None => acks.refused.push((at, ResponseError::InvalidRequest.code())),
                }
            }
        }
        acks
    }

    /// Each acknowledged partition's error code, from the coordinator's results in order.
    fn codes(&self, results: &[Result<(), GroupError>]) -> BTreeMap<SharePartitionRef, i16> {
        let mut codes: BTreeMap<SharePartitionRef, i16> = self.refused.iter().copied().collect();
        for (i, p) in self.acked.iter().enumerate() {
            let code = results.get(self.gaps + i).map_or(0, |r| r.as_ref().err().map_or(0, |e| for_group(e).code()));
            codes.insert(*p, code);
        }
        codes
    }

    /// The owed gaps, to keep owing when the request failed.
    fn gaps(&self) -> Vec<(SharePartitionRef, i64, i64)> {
        self.work[..self.gaps]
            .iter()
            .flat_map(|(t, p, batches)| batches.iter().map(move |b| ((*t, *p), b.first, b.last)))
            .collect()
    }
}

/// Who sends a share request: its session's owner, and what it may read (checked again for the
/// session's partitions at every request, as ACLs may have changed since they were added).
struct Caller {
    owner: String,
    access: Option<crate::access::Access>,
    namespace: Option<floe_metadata::Namespace>,
}

impl Caller {
    fn of(cx: &super::super::dispatch::Context<'_>) -> Self {
        let principal = cx.caller.principal;
        Self {
            owner: principal.map(|p| format!("{}/{}", p.tenant, p.user)).unwrap_or_default(),
            access: cx.caller.access.cloned(),
            namespace: principal.map(|p| p.namespace.clone()),
        }
    }

    /// Whether `topic_id` names a topic the caller can know: one of its tenant's. Another
    /// tenant's is as unknown as an id no topic has.
    fn knows(&self, state: &floe_metadata::State, topic_id: TopicId) -> bool {
        state.topics.get(&topic_id).is_some_and(|t| self.namespace.as_ref().is_none_or(|ns| ns.owns(&t.name)))
    }

    /// The id a request acts on for `topic_id`, which the member's share session holds as the
    /// client sent it: the same id, or for another tenant's topic a fresh id no topic has, so
    /// the coordinator and the read answer it exactly as an id that exists nowhere. Fresh at
    /// every request, as the `resources` walk gives other requests' ids their aliases.
    fn acting_id(&self, state: &floe_metadata::State, topic_id: TopicId) -> TopicId {
        let theirs = state.topics.contains_key(&topic_id) && !self.knows(state, topic_id);
        if theirs { super::super::resources::unknown_topic_id(state, |_| false) } else { topic_id }
    }

    /// Whether the caller may read `topic_id` (an unknown id is left for the handler to answer).
    fn may_read(&self, state: &floe_metadata::State, topic_id: TopicId) -> bool {
        let Some(topic) = state.topics.get(&topic_id) else { return true };
        let name = match &self.namespace {
            Some(ns) => match ns.unscope(&topic.name) {
                Some(name) => name,
                None => return false,
            },
            None => topic.name.as_str(),
        };
        self.access.as_ref().is_none_or(|a| {
            a.allows(state, floe_metadata::acl::AclOperation::Read, floe_metadata::acl::AclResourceType::Topic, name)
        })
    }
}

/// Sends `work` to the coordinator; a member the coordinator does not know loses its session
/// here, and owed gaps of a request that failed stay owed.
async fn send_work(agent: &Agent, work: ShareWork, acks: &Acknowledgements) -> Result<ShareWorkResult, GroupError> {
    let (group, member) = (work.group_id.clone(), work.member_id.clone());
    let result = share_work(agent, work).await;
    match &result {
        Err(GroupError::UnknownMemberId | GroupError::GroupIdNotFound) => agent.share_sessions.forget(&group, &member),
        Err(_) => agent.share_sessions.owe_gaps(&group, &member, acks.gaps()),
        Ok(_) => {}
    }
    result
}

/// Sends `work` to the coordinator.
async fn share_work(agent: &Agent, work: ShareWork) -> Result<ShareWorkResult, GroupError> {
    let response = agent.metadata.group_request(GroupRequest::ShareWork(work)).await?;
    match response {
        GroupResponse::ShareWork(result) => result,
        _ => Err(GroupError::CoordinatorNotAvailable("answered another request's kind".into())),
    }
}

#[cfg(test)]
mod tests {
    use floe_metadata::{Command, Namespace, State};

    use super::*;

    /// Issue 52: a share session holds the ids its client sent, and another tenant's was
    /// refused as a topic the caller may not read (TOPIC_AUTHORIZATION_FAILED) where an id no
    /// topic has went to the coordinator and came back unknown: the two were told apart. Now the
    /// request acts on another tenant's id as on an unknown one.
    #[test]
    fn another_tenants_topic_id_is_acted_on_as_an_unknown_one() {
        let (mine, theirs, nowhere) = (TopicId::from_u128(0x11), TopicId::from_u128(0x22), TopicId::from_u128(0x33));
        let mut state = State::default();
        let _ = state.apply(1, Command::InitCluster { cluster_id: "c".into() });
        for (index, tenant) in [(2, "acme"), (3, "globex")] {
            state.apply(index, Command::CreateTenant { name: tenant.into(), now_ms: 0 }).expect("tenant");
        }
        for (index, (name, topic_id)) in [(4, ("acme#1~orders", mine)), (5, ("globex#2~orders", theirs))] {
            let create =
                Command::CreateTopic { name: name.into(), topic_id, partition_count: 1, configs: Default::default() };
            state.apply(index, create).expect("topic created");
        }
        let caller = Caller { owner: "acme/alice".into(), access: None, namespace: Some(Namespace::of("acme#1")) };
        assert!(caller.knows(&state, mine));
        assert!(!caller.knows(&state, theirs), "acknowledgements of it are answered UNKNOWN_TOPIC_ID");
        assert!(!caller.knows(&state, nowhere));
        assert_eq!(caller.acting_id(&state, mine), mine);
        assert_eq!(caller.acting_id(&state, nowhere), nowhere);
        let acted = caller.acting_id(&state, theirs);
        assert!(!state.topics.contains_key(&acted), "the coordinator and the read find no topic for it");
        assert!(caller.may_read(&state, acted), "it goes to the coordinator, as an unknown id does");
        assert!(caller.may_read(&state, nowhere));
    }

    #[test]
    fn acknowledgement_types_apply_to_a_range_or_offset_by_offset() {
        let budget = &mut ACK_BATCHES_MAX.clone();
        let whole = ack_batches([(5, 9, &[1i8][..])], budget).expect("valid");
        assert_eq!(whole, [AckBatch { first: 5, last: 9, ack: ShareAck::Accept }]);
        let each = ack_batches([(0, 3, &[1i8, 1, 2, 3][..])], budget).expect("valid");
        assert_eq!(
            each,
            [
                AckBatch { first: 0, last: 1, ack: ShareAck::Accept },
                AckBatch { first: 2, last: 2, ack: ShareAck::Release },
                AckBatch { first: 3, last: 3, ack: ShareAck::Reject },
            ]
        );
        assert_eq!(*budget, ACK_BATCHES_MAX - 4);
        assert!(ack_batches([(0, 3, &[1i8, 1][..])], budget).is_none(), "two types for four offsets");
        assert!(ack_batches([(0, 0, &[4i8][..])], budget).is_none(), "no such type");
        assert!(ack_batches([(3, 2, &[1i8][..])], budget).is_none(), "reversed");
        assert!(ack_batches([(0, i64::MAX, &[1i8, 1][..])], budget).is_none(), "a range too long to count");
        let alternating: Vec<i8> = (0..20).map(|i| 1 + (i % 2)).collect();
        assert!(ack_batches([(0, 19, &alternating[..])], &mut 10).is_none(), "more batches than the budget");
    }
}
