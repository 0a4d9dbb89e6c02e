//! Share groups' partitions (KIP-932) as the replicated state keeps them: for each (group,
//! topic, partition), the share-partition start offset, the end of what was ever acquired, and
//! every offset in between in one of four states with its delivery count.
//!
//! Acquisition locks live here too (member and deadline), so a new metadata leader knows who
//! holds what and delivery counts stay exact across failovers. The coordinator gathers the
//! acquisitions and acknowledgements of many ShareFetch requests into one
//! [`crate::Command::ShareUpdate`], so a Raft entry carries many acknowledgements.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{State, TopicId};
use crate::command::{CommandError, Outcome};
use crate::limits::{GROUP_ID_BYTES_MAX, GROUP_NAME_BYTES_MAX};

/// Share partitions the cluster holds (each bounded by its in-flight records).
pub(crate) const SHARE_PARTITIONS_MAX: usize = 100_000;
/// Share partitions one share group holds; a tenant's together are bounded by its share of
/// the cluster's ([`super::TenantTable::SharePartitions`]).
pub(crate) const GROUP_SHARE_PARTITIONS_MAX: usize = 10_000;
/// Operations in one `ShareUpdate`.
pub const SHARE_OPS_MAX: usize = 10_000;
/// Weight of one `ShareUpdate` ([`ShareOp::weight`]: an operation and its batches or ranges),
/// so an entry stays a few megabytes whatever its requests carried.
pub const SHARE_UPDATE_WEIGHT_MAX: usize = 100_000;
/// Acknowledgement batches in one operation.
pub(crate) const SHARE_ACK_BATCHES_MAX: usize = 10_000;
/// Highest `group.share.partition.max.record.locks` (Kafka's bound too): also bounds the
/// ranges one share partition keeps.
pub const SHARE_RECORD_LOCKS_MAX: i64 = 10_000;

/// (share group id, topic id, partition).
pub type SharePartitionKey = (String, TopicId, i32);

/// One share partition's records between its start and end offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharePartition {
    /// Every offset below is acknowledged or archived (KIP-932's SPSO).
    pub start_offset: i64,
    /// Offsets from here on were never acquired (SPEO).
    pub end_offset: i64,
    /// Ranges by first offset, tiling `start_offset..end_offset`.
    pub ranges: BTreeMap<i64, InFlight>,
    /// The earliest acquisition lock deadline among the ranges, if any is acquired.
    pub lock_deadline_ms: Option<i64>,
    /// Deliveries after which a released or expired record is archived: the group's setting
    /// at its last acquisition.
    pub delivery_limit: i16,
}

/// Offsets `first..=last` (the map key is `first`) sharing a state and delivery count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlight {
    pub last: i64,
    /// Times these records were acquired.
    pub delivery_count: i16,
    pub state: RecordState,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired { member: String, lock_until_ms: i64 },
    Acknowledged,
    Archived,
}

impl RecordState {
    fn is_done(&self) -> bool {
        matches!(self, Self::Acknowledged | Self::Archived)
    }
}

/// How a consumer acknowledges records (the wire's AcknowledgeType).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShareAck {
    /// Offsets without a deliverable record (markers, compacted gaps): archived.
    Gap,
    Accept,
    /// Back to available, for another delivery (archived once at the delivery limit).
    Release,
    Reject,
}

impl ShareAck {
    /// From the wire's AcknowledgeType (0 gap, 1 accept, 2 release, 3 reject).
    pub fn from_wire(code: i8) -> Option<Self> {
        Some(match code {
            0 => Self::Gap,
            1 => Self::Accept,
            2 => Self::Release,
            3 => Self::Reject,
            _ => return None,
        })
    }
}

/// The group settings an acquisition applies, read by the coordinator from the dynamic configs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareSettings {
    pub lock_duration_ms: i64,
    /// Deliveries after which a released or expired record is archived.
    pub delivery_limit: i16,
    /// Most records between the start and end offsets (`group.share.partition.max.record.locks`).
    pub max_in_flight: i64,
    /// Where a share partition first starts: the log start (`earliest`) or end (`latest`).
    pub start_at_earliest: bool,
}

/// One change to share partitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShareOp {
    /// Locks up to `max_records` records for `member`: released ones first, then new ones below
    /// the high watermark (the last stable offset for read_committed).
    Acquire { key: SharePartitionKey, member: String, max_records: i64, read_committed: bool, settings: ShareSettings },
    /// All batches or none: each must lie in records `member` holds locked.
    Acknowledge { key: SharePartitionKey, member: String, batches: Vec<AckBatch> },
    /// Records acquired but never sent (the response had no room): available again with the
    /// delivery count they had.
    ReturnUnsent { key: SharePartitionKey, member: String, ranges: Vec<(i64, i64)> },
    /// A member that left or closed its session: its locks end now.
    ReleaseMember { group_id: String, member: String },
    /// Ends every lock whose deadline passed.
    ExpireLocks,
    /// A deleted share group's partitions.
    DeleteGroup { group_id: String },
    /// AlterShareGroupOffsets: the partition starts again at `offset`, nothing in flight.
    SetStartOffset { key: SharePartitionKey, offset: i64 },
    /// DeleteShareGroupOffsets: the group's state of every partition of a topic.
    DeleteTopicState { group_id: String, topic_id: TopicId },
    /// A share partition not read before starts at `offset`, within the log (format 8: the
    /// group's `share.auto.offset.reset` is `by_duration:`); one that exists is left as it is.
    StartAt { key: SharePartitionKey, offset: i64 },
}

impl ShareOp {
    /// What the operation adds to an entry: one, plus its batches or ranges.
    pub fn weight(&self) -> usize {
        1 + match self {
            Self::Acknowledge { batches, .. } => batches.len(),
            Self::ReturnUnsent { ranges, .. } => ranges.len(),
            _ => 0,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckBatch {
    pub first: i64,
    pub last: i64,
    pub ack: ShareAck,
}

/// How far a share group is behind on one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareLag {
    pub topic: String,
    pub topic_id: TopicId,
    pub partition: i32,
    pub start_offset: i64,
    pub log_end: i64,
    /// Records between the start offset and the log end not yet acknowledged or archived.
    pub lag: i64,
}

/// Records locked for a member by one acquisition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquiredRange {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
}

fn released(count: i16, delivery_limit: i16) -> RecordState {
    if count >= delivery_limit { RecordState::Archived } else { RecordState::Available }
}

impl SharePartition {
    fn starting_at(offset: i64) -> Self {
        Self { start_offset: offset, end_offset: offset, ..Self::default() }
    }

    /// Makes a range begin at `at` when `at` falls inside one.
    fn split(&mut self, at: i64) {
        let Some((&first, range)) = self.ranges.range(..at).next_back() else { return };
        if range.last < at {
            return;
        }
        let mut tail = range.clone();
        if let Some(head) = self.ranges.get_mut(&first) {
            head.last = at - 1;
        }
        tail.last = tail.last.max(at);
        self.ranges.insert(at, tail);
    }

    /// The ranges overlapping `first..=last`, split at both ends.
    fn isolate(&mut self, first: i64, last: i64) -> Vec<i64> {
        self.split(first);
        self.split(last + 1);
        self.ranges.range(first..=last).map(|(f, _)| *f).collect()
    }

    /// Merges neighbours that agree, drops finished ranges at the front, and refreshes the
    /// lock deadline.
    fn normalize(&mut self) {
        let mut merged: BTreeMap<i64, InFlight> = BTreeMap::new();
        for (first, range) in std::mem::take(&mut self.ranges) {
            if let Some((_, prev)) = merged.iter_mut().next_back()
                && prev.last + 1 == first
                && prev.delivery_count == range.delivery_count
                && prev.state == range.state
            {
                prev.last = range.last;
                continue;
            }
            merged.insert(first, range);
        }
        while let Some(entry) = merged.first_entry() {
            if !entry.get().state.is_done() {
                break;
            }
            self.start_offset = entry.get().last + 1;
            entry.remove();
        }
        if merged.is_empty() {
            self.start_offset = self.end_offset;
        }
        self.ranges = merged;
        self.lock_deadline_ms = self
            .ranges
            .values()
            .filter_map(|r| match r.state {
                RecordState::Acquired { lock_until_ms, .. } => Some(lock_until_ms),
                _ => None,
            })
            .min();
    }

    /// Drops what lies below the log start (retention or DeleteRecords removed it).
    fn follow_log_start(&mut self, log_start: i64) {
        if self.start_offset >= log_start {
            return;
        }
        self.split(log_start);
        self.ranges.retain(|first, _| *first >= log_start);
        self.start_offset = log_start;
        self.end_offset = self.end_offset.max(log_start);
    }

    /// Ends the locks matching `ends` (by member and deadline).
    fn release_where(&mut self, ends: impl Fn(&str, i64) -> bool) -> bool {
        let delivery_limit = self.delivery_limit;
        let mut changed = false;
        for range in self.ranges.values_mut() {
            if let RecordState::Acquired { member, lock_until_ms } = &range.state
                && ends(member, *lock_until_ms)
            {
                range.state = released(range.delivery_count, delivery_limit);
                changed = true;
            }
        }
        changed
    }

    fn acquire(
        &mut self,
        member: &str,
        max_records: i64,
        stable_end: i64,
        now_ms: i64,
        settings: &ShareSettings,
    ) -> Vec<AcquiredRange> {
        let lock = RecordState::Acquired {
            member: member.to_owned(),
            lock_until_ms: now_ms.saturating_add(settings.lock_duration_ms),
        };
        let mut budget = max_records;
        let mut out = Vec::new();
        let available: Vec<i64> =
            self.ranges.iter().filter(|(_, r)| r.state == RecordState::Available).map(|(first, _)| *first).collect();
        for first in available {
            if budget <= 0 {
                break;
            }
            let Some(range) = self.ranges.get(&first) else { continue };
            let last = range.last.min(first + budget - 1);
            self.split(last + 1);
            let Some(range) = self.ranges.get_mut(&first) else { continue };
            range.delivery_count = range.delivery_count.saturating_add(1);
            range.state = lock.clone();
            out.push(AcquiredRange { first, last, delivery_count: range.delivery_count });
            budget -= last - first + 1;
        }
        let room = (self.start_offset + settings.max_in_flight - self.end_offset).max(0);
        let new = budget.min(stable_end - self.end_offset).min(room);
        if new > 0 {
            let first = self.end_offset;
            let last = first + new - 1;
            self.ranges.insert(first, InFlight { last, delivery_count: 1, state: lock });
            self.end_offset = last + 1;
            out.push(AcquiredRange { first, last, delivery_count: 1 });
        }
        out
    }

    fn acknowledge(&mut self, member: &str, batches: &[AckBatch], now_ms: i64) -> Result<(), CommandError> {
        let delivery_limit = self.delivery_limit;
        let invalid = |why: String| Err(CommandError::InvalidRecordState(why));
        let mut sorted = batches.to_vec();
        sorted.sort_by_key(|b| b.first);
        let mut previous_last = i64::MIN;
        for b in &sorted {
            if b.first > b.last || b.first <= previous_last {
                return invalid(format!("acknowledgement batches {}..={} overlap or are reversed", b.first, b.last));
            }
            previous_last = b.last;
            if b.first < self.start_offset || b.last >= self.end_offset {
                return invalid(format!("offsets {}..={} are not in flight", b.first, b.last));
            }
            let holds = |r: &InFlight| matches!(&r.state, RecordState::Acquired { member: m, lock_until_ms } if m == member && *lock_until_ms > now_ms);
            let before = self.ranges.range(..b.first).next_back().filter(|(_, r)| r.last >= b.first);
            if !before.into_iter().chain(self.ranges.range(b.first..=b.last)).all(|(_, r)| holds(r)) {
                return invalid(format!("offsets {}..={} are not locked by this member", b.first, b.last));
            }
        }
        for b in sorted {
            for first in self.isolate(b.first, b.last) {
                let Some(range) = self.ranges.get_mut(&first) else { continue };
                range.state = match b.ack {
                    ShareAck::Accept => RecordState::Acknowledged,
                    ShareAck::Gap | ShareAck::Reject => RecordState::Archived,
                    ShareAck::Release => released(range.delivery_count, delivery_limit),
                };
            }
        }
        Ok(())
    }

    fn return_unsent(&mut self, member: &str, ranges: &[(i64, i64)]) {
        for &(first, last) in ranges {
            // Only what is in flight; the rest of a range is not this partition's to return.
            let (first, last) = (first.max(self.start_offset), last.min(self.end_offset - 1));
            if first > last {
                continue;
            }
            for at in self.isolate(first, last) {
                let Some(range) = self.ranges.get_mut(&at) else { continue };
                if matches!(&range.state, RecordState::Acquired { member: m, .. } if m == member) {
                    range.delivery_count = range.delivery_count.saturating_sub(1).max(0);
                    range.state = RecordState::Available;
                }
            }
        }
    }

    /// Checks the tiling; a replica that breaks it stops rather than drift.
    fn assert_sound(&self) {
        assert!(self.start_offset <= self.end_offset, "share partition start after its end");
        let mut next = self.start_offset;
        for (first, range) in &self.ranges {
            assert_eq!(*first, next, "share partition ranges leave a gap or overlap");
            assert!(range.last >= *first, "a share partition range ends before it starts");
            next = range.last + 1;
        }
        assert_eq!(next, self.end_offset, "share partition ranges do not reach its end");
        assert!(self.ranges.first_key_value().is_none_or(|(_, r)| !r.state.is_done()), "finished range at the start");
    }
}

/// Share partitions counted once per command, as new ones are admitted: per group, and per
/// tenant with its limit.
#[derive(Default)]
struct ShareCounts {
    per_group: BTreeMap<String, usize>,
    per_tenant: BTreeMap<String, (u64, u64)>,
}

fn validate_names(group_id: &str, member: &str) -> Result<(), CommandError> {
    if group_id.is_empty() || group_id.len() > GROUP_ID_BYTES_MAX || member.len() > GROUP_NAME_BYTES_MAX {
        return Err(CommandError::InvalidGroup("share group id or member id empty or over the limit".into()));
    }
    Ok(())
}

impl State {
    /// Applies a `ShareUpdate`: each operation on its own, answered in order.
    pub(super) fn share_update(&mut self, now_ms: i64, ops: Vec<ShareOp>) -> Result<Outcome, CommandError> {
        if ops.len() > SHARE_OPS_MAX || ops.iter().map(ShareOp::weight).sum::<usize>() > SHARE_UPDATE_WEIGHT_MAX {
            return Err(CommandError::LimitReached(format!(
                "more than {SHARE_OPS_MAX} share operations or {SHARE_UPDATE_WEIGHT_MAX} batches"
            )));
        }
        let mut counts = ShareCounts::default();
        let results = ops.into_iter().map(|op| self.share_op(now_ms, op, &mut counts)).collect();
        Ok(Outcome::ShareUpdated(results))
    }

    /// Admits a new share partition `key` within the cluster's, its group's and its tenant's
    /// limits; one that exists needs nothing.
    fn admit_share_partition(&self, key: &SharePartitionKey, counts: &mut ShareCounts) -> Result<(), CommandError> {
        if self.share_partitions.contains_key(key) {
            return Ok(());
        }
        if self.share_partitions.len() >= SHARE_PARTITIONS_MAX {
            return Err(CommandError::LimitReached(format!("{SHARE_PARTITIONS_MAX} share partitions")));
        }
        let held = match counts.per_group.get_mut(&key.0) {
            Some(held) => held,
            None => {
                let counted = self.share_partitions_of(&key.0).count();
                counts.per_group.entry(key.0.clone()).or_insert(counted)
            }
        };
        if *held >= GROUP_SHARE_PARTITIONS_MAX {
            return Err(CommandError::LimitReached(format!(
                "{GROUP_SHARE_PARTITIONS_MAX} share partitions in one share group"
            )));
        }
        // The tenant's share of share partitions (format 8).
        if let Some((tenant, record)) =
            crate::namespace::key_of(&key.0).and_then(|k| self.tenant_of_key(k)).filter(|_| self.applies_format(8))
        {
            let (used, max) = match counts.per_tenant.get_mut(tenant) {
                Some(counted) => counted,
                None => {
                    let used = self.share_partitions_in(&record.namespace(tenant)).count() as u64;
                    let max = record.quotas.table_limit(super::TenantTable::SharePartitions);
                    counts.per_tenant.entry(tenant.to_owned()).or_insert((used, max))
                }
            };
            if *used >= *max {
                return Err(CommandError::QuotaExceeded(format!(
                    "tenant {tenant:?} may have {max} share partitions; it has {used}"
                )));
            }
            *used += 1;
        }
        *held += 1;
        Ok(())
    }

    fn share_op(
        &mut self,
        now_ms: i64,
        op: ShareOp,
        counts: &mut ShareCounts,
    ) -> Result<Vec<AcquiredRange>, CommandError> {
        match op {
            ShareOp::Acquire { key, member, max_records, read_committed, settings } => {
                validate_names(&key.0, &member)?;
                let log = self.partition(key.1, key.2).ok_or(CommandError::UnknownTopicOrPartition)?;
                let stable_end = if read_committed { log.last_stable_offset() } else { log.next_offset };
                let (log_start, log_end) = (log.log_start_offset, log.next_offset);
                self.admit_share_partition(&key, counts)?;
                let settings = ShareSettings {
                    max_in_flight: settings.max_in_flight.clamp(1, SHARE_RECORD_LOCKS_MAX),
                    delivery_limit: settings.delivery_limit.max(1),
                    ..settings
                };
                let share = self.share_partitions.entry(key).or_insert_with(|| {
                    SharePartition::starting_at(if settings.start_at_earliest { log_start } else { log_end })
                });
                share.delivery_limit = settings.delivery_limit;
                share.follow_log_start(log_start);
                share.release_where(|_, until| until <= now_ms);
                share.normalize();
                let acquired = share.acquire(&member, max_records.max(0), stable_end, now_ms, &settings);
                share.normalize();
                share.assert_sound();
                Ok(acquired)
            }
            ShareOp::Acknowledge { key, member, batches } => {
                if batches.len() > SHARE_ACK_BATCHES_MAX {
                    return Err(CommandError::LimitReached(format!("more than {SHARE_ACK_BATCHES_MAX} batches")));
                }
                let share = self
                    .share_partitions
                    .get_mut(&key)
                    .ok_or_else(|| CommandError::InvalidRecordState("nothing of this partition was acquired".into()))?;
                share.acknowledge(&member, &batches, now_ms)?;
                share.normalize();
                share.assert_sound();
                Ok(Vec::new())
            }
            ShareOp::ReturnUnsent { key, member, ranges } => {
                if let Some(share) = self.share_partitions.get_mut(&key) {
                    share.return_unsent(&member, &ranges);
                    share.normalize();
                    share.assert_sound();
                }
                Ok(Vec::new())
            }
            ShareOp::ReleaseMember { group_id, member } => {
                for (_, share) in self.share_partitions_mut(&group_id) {
                    if share.release_where(|m, _| m == member) {
                        share.normalize();
                        share.assert_sound();
                    }
                }
                Ok(Vec::new())
            }
            ShareOp::ExpireLocks => {
                for share in self.share_partitions.values_mut() {
                    if share.lock_deadline_ms.is_some_and(|d| d <= now_ms) {
                        share.release_where(|_, until| until <= now_ms);
                        share.normalize();
                        share.assert_sound();
                    }
                }
                Ok(Vec::new())
            }
            ShareOp::DeleteGroup { group_id } => {
                self.share_partitions.retain(|(g, _, _), _| *g != group_id);
                Ok(Vec::new())
            }
            ShareOp::SetStartOffset { key, offset } => {
                validate_names(&key.0, "")?;
                self.check_share_group_idle(&key.0)?;
                let log = self.partition(key.1, key.2).ok_or(CommandError::UnknownTopicOrPartition)?;
                if offset < log.log_start_offset || offset > log.next_offset {
                    return Err(CommandError::OffsetOutOfRange {
                        offset,
                        log_start_offset: log.log_start_offset,
                        high_watermark: log.next_offset,
                    });
                }
                self.admit_share_partition(&key, counts)?;
                let limit = self.share_partitions.get(&key).map_or(1, |s| s.delivery_limit);
                self.share_partitions
                    .insert(key, SharePartition { delivery_limit: limit, ..SharePartition::starting_at(offset) });
                Ok(Vec::new())
            }
            ShareOp::DeleteTopicState { group_id, topic_id } => {
                self.check_share_group_idle(&group_id)?;
                self.share_partitions.retain(|(g, t, _), _| !(*g == group_id && *t == topic_id));
                Ok(Vec::new())
            }
            ShareOp::StartAt { key, offset } => {
                validate_names(&key.0, "")?;
                if !self.applies_format(8) {
                    return Err(CommandError::InvalidCommit("a start offset by time needs format 8".into()));
                }
                let log = self.partition(key.1, key.2).ok_or(CommandError::UnknownTopicOrPartition)?;
                let offset = offset.clamp(log.log_start_offset, log.next_offset);
                if !self.share_partitions.contains_key(&key) {
                    self.admit_share_partition(&key, counts)?;
                    self.share_partitions
                        .insert(key, SharePartition { delivery_limit: 1, ..SharePartition::starting_at(offset) });
                }
                Ok(Vec::new())
            }
        }
    }

    /// The share partitions of every share group in namespace `ns`.
    pub(super) fn share_partitions_in<'a>(
        &'a self,
        ns: &'a crate::namespace::Namespace,
    ) -> impl Iterator<Item = (&'a SharePartitionKey, &'a SharePartition)> + 'a {
        let from = (ns.prefix().to_owned(), TopicId::nil(), i32::MIN);
        self.share_partitions.range(from..).take_while(move |((g, _, _), _)| ns.owns(g))
    }

    fn share_partitions_mut<'a>(
        &'a mut self,
        group_id: &'a str,
    ) -> impl Iterator<Item = (&'a SharePartitionKey, &'a mut SharePartition)> + 'a {
        let from = (group_id.to_owned(), TopicId::nil(), i32::MIN);
        self.share_partitions.range_mut(from..).take_while(move |((g, _, _), _)| g == group_id)
    }

    /// Offsets of a share group are changed only while it has no members and holds no lock
    /// (checked here too, as a member may join between the coordinator's check and this).
    fn check_share_group_idle(&self, group_id: &str) -> Result<(), CommandError> {
        let members = self.groups.get(group_id).is_some_and(|g| !g.membership.members.is_empty());
        let locked = self.share_partitions_of(group_id).any(|(_, s)| s.lock_deadline_ms.is_some());
        if members || locked {
            return Err(CommandError::GroupNotEmpty);
        }
        Ok(())
    }

    /// A share group's partitions, in key order.
    pub fn share_partitions_of<'a>(
        &'a self,
        group_id: &'a str,
    ) -> impl Iterator<Item = (&'a SharePartitionKey, &'a SharePartition)> + 'a {
        let from = (group_id.to_owned(), TopicId::nil(), i32::MIN);
        self.share_partitions.range(from..).take_while(move |((g, _, _), _)| g == group_id)
    }

    /// Each share partition of `group_id` with its start offset and the records not yet
    /// acknowledged (from the start to the high watermark, less those finished in flight).
    pub fn share_lag(&self, group_id: &str) -> Vec<ShareLag> {
        self.share_partitions_of(group_id)
            .filter_map(|((_, topic_id, partition), share)| {
                let topic = self.topics.get(topic_id)?;
                let log_end = self.partition(*topic_id, *partition)?.next_offset;
                let done: i64 =
                    share.ranges.iter().filter(|(_, r)| r.state.is_done()).map(|(first, r)| r.last - first + 1).sum();
                Some(ShareLag {
                    topic: topic.name.clone(),
                    topic_id: *topic_id,
                    partition: *partition,
                    start_offset: share.start_offset,
                    log_end,
                    lag: (log_end - share.start_offset - done).max(0),
                })
            })
            .collect()
    }

    /// Whether an `Acquire` of `key` with these settings would take nothing and change nothing
    /// at `now_ms`: the share partition exists, follows the log start, holds no available
    /// record and no lock past its deadline, and has no new record it may take. The coordinator
    /// then answers it without a Raft entry, so idle share consumers write nothing.
    pub fn acquires_nothing(
        &self,
        key: &SharePartitionKey,
        read_committed: bool,
        settings: &ShareSettings,
        now_ms: i64,
    ) -> bool {
        let (Some(share), Some(log)) = (self.share_partitions.get(key), self.partition(key.1, key.2)) else {
            return false;
        };
        let stable_end = if read_committed { log.last_stable_offset() } else { log.next_offset };
        let room = share.start_offset + settings.max_in_flight.clamp(1, SHARE_RECORD_LOCKS_MAX) - share.end_offset;
        share.start_offset >= log.log_start_offset
            && share.delivery_limit == settings.delivery_limit.max(1)
            && share.lock_deadline_ms.is_none_or(|d| d > now_ms)
            && !share.ranges.values().any(|r| r.state == RecordState::Available)
            && (share.end_offset >= stable_end || room <= 0)
    }

    /// Whether an acquisition lock has passed its deadline (the leader then expires them).
    pub fn share_locks_due(&self, now_ms: i64) -> bool {
        self.share_partitions.values().any(|s| s.lock_deadline_ms.is_some_and(|d| d <= now_ms))
    }

    /// Forgets share partitions of a deleted topic.
    pub(super) fn forget_topic_share_partitions(&mut self, topic_id: TopicId) {
        self.share_partitions.retain(|(_, t, _), _| *t != topic_id);
    }
}

#[cfg(test)]
mod tests;
