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
use crate::share_sessions::{SharePartitionRef, ShareSessionError};

/// Where share groups read committed records only (Kafka's per-group `share.isolation.level`,
/// cluster-wide here).
const ISOLATION_LEVEL: &str = "floe.share.isolation.level";
const LOCK_DURATION_MS: &str = "group.share.record.lock.duration.ms";
/// Records one ShareFetch acquires per partition when the request does not say.
const MAX_RECORDS_DEFAULT: i32 = 500;

fn read_committed(agent: &Agent) -> bool {
    agent.metadata.read().broker_configs.get(ISOLATION_LEVEL).is_some_and(|v| v == "read_committed")
}

fn lock_duration_ms(agent: &Agent) -> i32 {
    agent.metadata.read().broker_config_i64(LOCK_DURATION_MS).and_then(|v| i32::try_from(v).ok()).unwrap_or(30_000)
}

fn for_session(error: ShareSessionError) -> i16 {
    match error {
        ShareSessionError::NotFound => ResponseError::ShareSessionNotFound.code(),
        ShareSessionError::InvalidEpoch { .. } => ResponseError::InvalidShareSessionEpoch.code(),
        ShareSessionError::LimitReached => ResponseError::ShareSessionLimitReached.code(),
        ShareSessionError::TooManyPartitions => ResponseError::InvalidRequest.code(),
    }
}

/// A partition's acknowledgement batches from the wire: each batch's types apply one to the
/// whole range, or one per offset. `None` when they do not fit the range or name no known type.
fn ack_batches<'a>(batches: impl IntoIterator<Item = (i64, i64, &'a [i8])>) -> Option<Vec<AckBatch>> {
    let mut out = Vec::new();
    for (first, last, types) in batches {
        if first > last || first < 0 {
            return None;
        }
        match types {
            [one] => out.push(AckBatch { first, last, ack: ShareAck::from_wire(*one)? }),
            many if i64::try_from(many.len()).ok() == Some(last - first + 1) => {
                for (offset, t) in (first..=last).zip(many) {
                    let ack = ShareAck::from_wire(*t)?;
                    match out.last_mut() {
                        Some(b) if b.ack == ack && b.last + 1 == offset => b.last = offset,
                        _ => out.push(AckBatch { first: offset, last: offset, ack }),
                    }
                }
            }
            _ => return None,
        }
        if out.len() > floe_metadata::SHARE_OPS_MAX {
            return None;
        }
    }
    Some(out)
}

/// A request's acknowledgements, after the session's owed gaps.
struct Acknowledgements {
    /// Gaps first, then the request's partitions that parsed.
    work: Vec<(TopicId, i32, Vec<AckBatch>)>,
    gaps: usize,
    acked: Vec<SharePartitionRef>,
    /// Partitions whose batches do not parse: INVALID_REQUEST.
    bad: Vec<SharePartitionRef>,
}

impl Acknowledgements {
    /// `partitions`: each partition's batches as (first, last, types) from the wire.
    fn parse<'a, B>(
        gaps: &[(SharePartitionRef, i64, i64)],
        partitions: impl IntoIterator<Item = (TopicId, i32, B)>,
    ) -> Self
    where
        B: IntoIterator<Item = (i64, i64, &'a [i8])>,
    {
        let mut acks = Self { work: gap_acks(gaps), gaps: gaps.len(), acked: Vec::new(), bad: Vec::new() };
        for (topic_id, partition, batches) in partitions {
            match ack_batches(batches) {
                Some(batches) => {
                    acks.work.push((topic_id, partition, batches));
                    acks.acked.push((topic_id, partition));
                }
                None => acks.bad.push((topic_id, partition)),
            }
        }
        acks
    }

    /// Each acknowledged partition's error code, from the coordinator's results in order.
    fn codes(&self, results: &[Result<(), GroupError>]) -> BTreeMap<SharePartitionRef, i16> {
        let mut codes: BTreeMap<SharePartitionRef, i16> =
            self.bad.iter().map(|p| (*p, ResponseError::InvalidRequest.code())).collect();
        for (i, p) in self.acked.iter().enumerate() {
            let code = results.get(self.gaps + i).map_or(0, |r| r.as_ref().err().map_or(0, |e| for_group(e).code()));
            codes.insert(*p, code);
        }
        codes
    }
}

/// Sends `work` to the coordinator.
async fn share_work(agent: &Agent, work: ShareWork) -> Result<ShareWorkResult, GroupError> {
    let response = agent.metadata.group_request(GroupRequest::ShareWork(work)).await?;
    match response {
        GroupResponse::ShareWork(result) => result,
        _ => Err(GroupError::CoordinatorNotAvailable("answered another request's kind".into())),
    }
}

/// Gaps owed by the session, as acknowledgements that archive them.
fn gap_acks(gaps: &[((TopicId, i32), i64, i64)]) -> Vec<(TopicId, i32, Vec<AckBatch>)> {
    gaps.iter()
        .map(|((t, p), first, last)| (*t, *p, vec![AckBatch { first: *first, last: *last, ack: ShareAck::Gap }]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acknowledgement_types_apply_to_a_range_or_offset_by_offset() {
        let whole = ack_batches([(5, 9, &[1i8][..])]).expect("valid");
        assert_eq!(whole, [AckBatch { first: 5, last: 9, ack: ShareAck::Accept }]);
        let each = ack_batches([(0, 3, &[1i8, 1, 2, 3][..])]).expect("valid");
        assert_eq!(
            each,
            [
                AckBatch { first: 0, last: 1, ack: ShareAck::Accept },
                AckBatch { first: 2, last: 2, ack: ShareAck::Release },
                AckBatch { first: 3, last: 3, ack: ShareAck::Reject },
            ]
        );
        assert!(ack_batches([(0, 3, &[1i8, 1][..])]).is_none(), "two types for four offsets");
        assert!(ack_batches([(0, 0, &[4i8][..])]).is_none(), "no such type");
        assert!(ack_batches([(3, 2, &[1i8][..])]).is_none(), "reversed");
    }
}
