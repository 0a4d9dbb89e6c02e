//! Consumer groups as the replicated state keeps them: each group's last completed membership
//! (so a new coordinator after a leader change resumes it) and its committed offsets.
//!
//! Who may commit, and rebalancing, are the coordinator's business (`crate::groups`); the state
//! machine checks only what keeps the state sound: sizes, known partitions, emptiness on delete.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::State;
use crate::command::{CommandError, Outcome};
use crate::limits::{GROUP_COUNT_MAX, GROUP_ID_BYTES_MAX, GROUP_MEMBER_BYTES_MAX, GROUP_MEMBERS_MAX};

/// Kafka's `offsets.retention.minutes` default: offsets of a group empty for 7 days expire.
pub const OFFSETS_RETENTION_MS_DEFAULT: i64 = 7 * 24 * 60 * 60 * 1000;
/// Kafka's `offset.metadata.max.bytes` default.
pub const OFFSET_METADATA_BYTES_MAX: usize = 4096;

/// A group: its membership as of the last completed rebalance and its committed offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupRecord {
    pub membership: GroupMembership,
    /// Committed offsets by topic name and partition.
    pub offsets: GroupOffsets,
    /// When the group last became empty (no members), for offset retention; `None` while it has
    /// members.
    pub empty_since_ms: Option<i64>,
}

/// A group's committed offsets, by topic name then partition.
///
/// Each topic's offsets are shared (`Arc`) between the state and its copies: a copy taken under
/// the state's lock (a Raft snapshot's, a change stream's, the archive's) copies one pointer per
/// topic rather than every partition's offset, and a topic committed to while a copy lives is
/// copied once. The topic's name is kept once, not once per partition. No topic is kept without
/// an offset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupOffsets {
    topics: BTreeMap<String, Arc<BTreeMap<i32, CommittedOffset>>>,
}

impl GroupOffsets {
    pub fn get(&self, topic: &str, partition: i32) -> Option<&CommittedOffset> {
        self.topics.get(topic)?.get(&partition)
    }

    pub fn insert(&mut self, topic: String, partition: i32, offset: CommittedOffset) {
        Arc::make_mut(self.topics.entry(topic).or_default()).insert(partition, offset);
    }

    pub fn remove(&mut self, topic: &str, partition: i32) {
        let Some(partitions) = self.topics.get_mut(topic) else { return };
        if partitions.contains_key(&partition) {
            Arc::make_mut(partitions).remove(&partition);
            if partitions.is_empty() {
                self.topics.remove(topic);
            }
        }
    }

    /// Drops every offset of `topic`.
    pub fn remove_topic(&mut self, topic: &str) {
        self.topics.remove(topic);
    }

    /// Keeps the offsets `keep` says yes to; a topic whose offsets all stay is not copied.
    pub fn retain(&mut self, keep: impl Fn(&str, i32, &CommittedOffset) -> bool) {
        self.topics.retain(|topic, partitions| {
            if partitions.iter().all(|(p, o)| keep(topic, *p, o)) {
                return true;
            }
            Arc::make_mut(partitions).retain(|p, o| keep(topic, *p, o));
            !partitions.is_empty()
        });
    }

    pub fn clear(&mut self) {
        self.topics.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// How many partitions have an offset.
    pub fn len(&self) -> usize {
        self.topics.values().map(|partitions| partitions.len()).sum()
    }

    /// Every (topic, partition) with an offset, by topic name then partition.
    pub fn keys(&self) -> impl Iterator<Item = (&str, i32)> {
        self.iter().map(|(topic, partition, _)| (topic, partition))
    }

    /// Every offset with its topic and partition, by topic name then partition.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i32, &CommittedOffset)> {
        self.topics.iter().flat_map(|(topic, partitions)| partitions.iter().map(move |(p, o)| (topic.as_str(), *p, o)))
    }

    /// The offsets by (topic, partition), copying only topics a copy of the state still shares.
    pub(crate) fn into_entries(self) -> impl Iterator<Item = ((String, i32), CommittedOffset)> {
        self.topics.into_iter().flat_map(|(topic, partitions)| {
            Arc::unwrap_or_clone(partitions).into_iter().map(move |(p, o)| ((topic.clone(), p), o))
        })
    }
}

impl FromIterator<((String, i32), CommittedOffset)> for GroupOffsets {
    fn from_iter<I: IntoIterator<Item = ((String, i32), CommittedOffset)>>(entries: I) -> Self {
        let mut offsets = Self::default();
        for ((topic, partition), offset) in entries {
            offsets.insert(topic, partition, offset);
        }
        offsets
    }
}

/// A generation of a group, stored when its rebalance completes (and when it becomes empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupMembership {
    pub kind: GroupKind,
    /// Empty for groups that only ever stored offsets (assign-mode consumers).
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberRecord>,
}

/// Which group protocol a group's members speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupKind {
    /// JoinGroup/SyncGroup; `generation` is the generation, member metadata is opaque.
    #[default]
    Classic,
    /// KIP-848 ConsumerGroupHeartbeat; `generation` is the group epoch, `protocol` the
    /// assignor, and each member's subscription and assignment use the consumer protocol's
    /// encodings (the assignment includes partitions still being revoked).
    Consumer,
    /// KIP-932 ShareGroupHeartbeat; `generation` is the group epoch, each member's subscription
    /// and assignment use the consumer protocol's encodings. The records' states are
    /// `State::share_partitions`.
    Share,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
    /// Consumer groups: the member's epoch. Classic groups: 0.
    pub member_epoch: i32,
    pub rack_id: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_time_ms: i64,
    /// The last commit stamp applied here from each of the latest few origins (oldest first).
    pub stamps: Vec<CommitStamp>,
}

/// Which request an offset commit came from: `seq` grows with every commit a process sends, and
/// `origin` names the process. A request retried after an answer was lost (or held in a
/// network queue) can reach the metadata leader after a newer commit from the same process;
/// its stamp is not newer than the one applied, so it is skipped rather than move the
/// offset back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStamp {
    pub origin: u64,
    pub seq: u64,
}

/// Origins remembered per partition: a member moving between agents leaves a trail this long.
pub(super) const COMMIT_ORIGINS_MAX: usize = 4;

/// How far a group's committed offset trails a partition's log end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub log_end: i64,
    pub lag: i64,
}

/// One partition's committed offset as OffsetFetch reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchedOffset {
    pub partition: i32,
    /// -1 when the group has no committed offset for the partition.
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    /// Stable offsets were asked for and an open transaction has committed one for the
    /// partition: the client must ask again later (UNSTABLE_OFFSET_COMMIT).
    pub unstable: bool,
}

/// The partitions an OffsetFetch asks for, by topic name; `None` asks for every partition the
/// group has an offset for.
pub type AskedPartitions = Option<Vec<(String, Vec<i32>)>>;

/// One partition's offset in an offset commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

pub(super) fn validate_group_id(group_id: &str) -> Result<(), CommandError> {
    if group_id.is_empty() || group_id.len() > GROUP_ID_BYTES_MAX {
        return Err(CommandError::InvalidGroup(format!("group ids are 1 to {GROUP_ID_BYTES_MAX} bytes")));
    }
    Ok(())
}

impl State {
    fn group_entry(&mut self, group_id: &str) -> Result<&mut GroupRecord, CommandError> {
        validate_group_id(group_id)?;
        if !self.groups.contains_key(group_id) {
            if self.groups.len() >= GROUP_COUNT_MAX {
                return Err(CommandError::LimitReached(format!("at most {GROUP_COUNT_MAX} groups")));
            }
            if let Some(tenant) = self.owning_tenant(group_id) {
                self.check_table_quota(tenant, super::TenantTable::Groups)?;
            }
        }
        Ok(self.groups.entry(group_id.to_owned()).or_default())
    }

    pub(super) fn store_group(
        &mut self,
        group_id: &str,
        membership: GroupMembership,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        if membership.members.len() > GROUP_MEMBERS_MAX {
            return Err(CommandError::InvalidGroup(format!("more than {GROUP_MEMBERS_MAX} members")));
        }
        let too_big = |m: &MemberRecord| {
            m.subscription.len() + m.assignment.len() + m.member_id.len() + m.client_id.len() > GROUP_MEMBER_BYTES_MAX
        };
        if membership.members.iter().any(too_big) {
            return Err(CommandError::InvalidGroup(format!("a member over {GROUP_MEMBER_BYTES_MAX} bytes")));
        }
        let group = self.group_entry(group_id)?;
        if membership.generation < group.membership.generation {
            return Err(CommandError::InvalidGroup(format!(
                "generation {} is older than the stored {}",
                membership.generation, group.membership.generation
            )));
        }
        group.empty_since_ms = match (membership.members.is_empty(), group.empty_since_ms) {
            (false, _) => None,
            (true, Some(since)) => Some(since),
            (true, None) => Some(now_ms),
        };
        group.membership = membership;
        Ok(Outcome::Done)
    }

    pub(super) fn commit_offsets(
        &mut self,
        group_id: &str,
        offsets: Vec<OffsetCommit>,
        stamp: Option<CommitStamp>,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        let results = self.check_offset_commits(&offsets);
        let group = self.group_entry(group_id)?;
        if group.membership.members.is_empty() && group.empty_since_ms.is_none() {
            group.empty_since_ms = Some(now_ms);
        }
        for (commit, result) in offsets.into_iter().zip(&results) {
            if result.is_err() {
                continue;
            }
            let mut stamps =
                group.offsets.get(&commit.topic, commit.partition).map(|c| c.stamps.clone()).unwrap_or_default();
            if let Some(stamp) = stamp {
                // Superseded by a newer commit from the same process: answered as done, since
                // the newer one is what a commit in request order would have left.
                if stamps.iter().any(|s| s.origin == stamp.origin && s.seq >= stamp.seq) {
                    continue;
                }
                stamps.retain(|s| s.origin != stamp.origin);
                stamps.push(stamp);
                if stamps.len() > COMMIT_ORIGINS_MAX {
                    stamps.remove(0);
                }
            }
            let committed = CommittedOffset {
                offset: commit.offset,
                leader_epoch: commit.leader_epoch,
                metadata: commit.metadata,
                commit_time_ms: now_ms,
                stamps,
            };
            group.offsets.insert(commit.topic, commit.partition, committed);
        }
        Ok(Outcome::OffsetsCommitted(results))
    }

    /// Per offset, whether it may be stored: its partition exists and its metadata fits.
    pub(super) fn check_offset_commits(&self, offsets: &[OffsetCommit]) -> Vec<Result<(), CommandError>> {
        offsets
            .iter()
            .map(|o| {
                if o.metadata.len() > OFFSET_METADATA_BYTES_MAX {
                    return Err(CommandError::OffsetMetadataTooLarge);
                }
                let known = self
                    .topic_by_name(&o.topic)
                    .is_some_and(|t| usize::try_from(o.partition).is_ok_and(|p| p < t.partitions.len()));
                if known { Ok(()) } else { Err(CommandError::UnknownTopicOrPartition) }
            })
            .collect()
    }

    pub(super) fn delete_group(&mut self, group_id: &str) -> Result<Outcome, CommandError> {
        let group = self.groups.get(group_id).ok_or(CommandError::GroupNotFound)?;
        if !group.membership.members.is_empty() {
            return Err(CommandError::GroupNotEmpty);
        }
        self.groups.remove(group_id);
        self.group_configs.remove(group_id);
        Ok(Outcome::Done)
    }

    pub(super) fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Outcome, CommandError> {
        let group = self.groups.get_mut(group_id).ok_or(CommandError::GroupNotFound)?;
        for (topic, partition) in partitions {
            group.offsets.remove(&topic, partition);
        }
        Ok(Outcome::Done)
    }

    /// Drops offsets past retention (KIP-211): a group with members keeps all of them; an empty
    /// group with a protocol loses them all once it has been empty for the retention time; a
    /// group that only stores offsets loses each one retention after its commit. Groups left with
    /// no members and no offsets are removed.
    pub(super) fn expire_offsets(&mut self, now_ms: i64) -> Result<Outcome, CommandError> {
        let retention = self
            .broker_configs
            .get("offsets.retention.minutes")
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(OFFSETS_RETENTION_MS_DEFAULT, |minutes| minutes.saturating_mul(60_000));
        for group in self.groups.values_mut() {
            if !group.membership.members.is_empty() {
                continue;
            }
            let expired = |base: i64| now_ms.saturating_sub(base) >= retention;
            if group.membership.protocol_type.is_empty() {
                group.offsets.retain(|_, _, o| !expired(o.commit_time_ms));
            } else if group.empty_since_ms.is_some_and(expired) {
                group.offsets.clear();
            }
        }
        self.groups.retain(|_, g| !g.membership.members.is_empty() || !g.offsets.is_empty());
        Ok(Outcome::Done)
    }

    /// The committed offsets of `group` for the partitions `asked`, by topic in the order asked;
    /// -1 for partitions without one.
    pub fn committed_offsets(
        &self,
        group: &str,
        asked: AskedPartitions,
        require_stable: bool,
    ) -> Vec<(String, Vec<FetchedOffset>)> {
        let record = self.groups.get(group);
        let topics = asked.unwrap_or_else(|| {
            let mut all: Vec<(String, Vec<i32>)> = Vec::new();
            for (topic, partition) in record.map(|g| g.offsets.keys()).into_iter().flatten() {
                match all.last_mut() {
                    Some((name, partitions)) if name == topic => partitions.push(partition),
                    _ => all.push((topic.to_owned(), vec![partition])),
                }
            }
            all
        });
        let fetch = |topic: &str, partition: i32| {
            if require_stable && self.has_pending_txn_offset(group, topic, partition) {
                return FetchedOffset {
                    partition,
                    offset: -1,
                    leader_epoch: -1,
                    metadata: String::new(),
                    unstable: true,
                };
            }
            match record.and_then(|g| g.offsets.get(topic, partition)) {
                Some(o) => FetchedOffset {
                    partition,
                    offset: o.offset,
                    leader_epoch: o.leader_epoch,
                    metadata: o.metadata.clone(),
                    unstable: false,
                },
                None => {
                    FetchedOffset { partition, offset: -1, leader_epoch: -1, metadata: String::new(), unstable: false }
                }
            }
        };
        topics
            .into_iter()
            .map(|(topic, partitions)| {
                let fetched = partitions.into_iter().map(|p| fetch(&topic, p)).collect();
                (topic, fetched)
            })
            .collect()
    }

    /// Each committed offset of `group` with its partition's log end offset and the lag between
    /// them (never negative; a deleted partition's offsets are already gone).
    pub fn group_lag(&self, group: &str) -> Vec<PartitionLag> {
        let Some(record) = self.groups.get(group) else { return Vec::new() };
        record
            .offsets
            .iter()
            .filter_map(|(topic, partition, committed)| {
                let topic_id = self.topic_by_name(topic)?.topic_id;
                let log_end = self.partition(topic_id, partition)?.next_offset;
                Some(PartitionLag {
                    topic: topic.to_owned(),
                    partition,
                    committed: committed.offset,
                    log_end,
                    lag: log_end.saturating_sub(committed.offset).max(0),
                })
            })
            .collect()
    }

    /// A deleted topic's committed offsets go with it.
    pub(super) fn forget_topic_offsets(&mut self, topic: &str) {
        for group in self.groups.values_mut() {
            group.offsets.remove_topic(topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(offset: i64) -> CommittedOffset {
        CommittedOffset { offset, ..CommittedOffset::default() }
    }

    #[test]
    fn a_copy_keeps_its_offsets_while_the_group_commits_to_one_topic() {
        let mut offsets: GroupOffsets =
            [(("a".to_owned(), 0), at(1)), (("b".to_owned(), 0), at(1))].into_iter().collect();
        let copy = offsets.clone();
        offsets.insert("a".into(), 0, at(2));
        assert_eq!((offsets.get("a", 0).map(|o| o.offset), copy.get("a", 0).map(|o| o.offset)), (Some(2), Some(1)));
        assert!(Arc::ptr_eq(&offsets.topics["b"], &copy.topics["b"]), "the topic not committed to is shared");
        offsets.retain(|_, _, _| true);
        assert!(Arc::ptr_eq(&offsets.topics["b"], &copy.topics["b"]), "a retain that removes nothing copies nothing");
        offsets.retain(|topic, _, _| topic != "b");
        assert!(copy.get("b", 0).is_some() && offsets.get("b", 0).is_none());
    }

    #[test]
    fn offsets_read_back_by_topic_then_partition_and_no_topic_is_kept_empty() {
        let entries = [(("b", 0), 5), (("a", 1), 4), (("a", 0), 3)];
        let mut offsets: GroupOffsets = entries.iter().map(|((t, p), o)| (((*t).to_owned(), *p), at(*o))).collect();
        assert_eq!(offsets.keys().collect::<Vec<_>>(), [("a", 0), ("a", 1), ("b", 0)]);
        assert_eq!(offsets.len(), 3);
        let again: GroupOffsets = offsets.clone().into_entries().collect();
        assert_eq!(again, offsets, "entries rebuild the same offsets");
        offsets.remove("a", 0);
        offsets.remove("a", 7);
        offsets.remove("a", 1);
        assert!(!offsets.topics.contains_key("a"), "a topic without offsets is dropped");
        offsets.retain(|_, _, o| o.offset != 5);
        assert_eq!((offsets.is_empty(), offsets.len()), (true, 0));
    }
}
