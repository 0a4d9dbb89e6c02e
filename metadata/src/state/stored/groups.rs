//! How today's format stores groups: their memberships, members and committed offsets. Each type is
//! the in-memory type of the same name in [`crate::state`], field for field in the order encoded;
//! commands carry these layouts too. The conversions below name every field, so a change to the in-
//! memory type compiles only once they say how it is stored. A change to a type here is a format
//! change: a new format version, a mirror of the old layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::GroupKind;

/// [`crate::state::CommitStamp`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitStamp {
    pub origin: u64,
    pub seq: u64,
}

impl From<crate::state::CommitStamp> for CommitStamp {
    fn from(commit_stamp: crate::state::CommitStamp) -> Self {
        let crate::state::CommitStamp { origin, seq } = commit_stamp;
        Self { origin, seq }
    }
}

impl From<CommitStamp> for crate::state::CommitStamp {
    fn from(commit_stamp: CommitStamp) -> Self {
        let CommitStamp { origin, seq } = commit_stamp;
        Self { origin, seq }
    }
}

/// [`crate::state::CommittedOffset`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommittedOffset {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_time_ms: i64,
    pub(crate) stamps: Vec<CommitStamp>,
}

impl From<crate::state::CommittedOffset> for CommittedOffset {
    fn from(committed_offset: crate::state::CommittedOffset) -> Self {
        let crate::state::CommittedOffset { offset, leader_epoch, metadata, commit_time_ms, stamps } = committed_offset;
        Self { offset, leader_epoch, metadata, commit_time_ms, stamps: stamps.into_iter().map(Into::into).collect() }
    }
}

impl From<CommittedOffset> for crate::state::CommittedOffset {
    fn from(committed_offset: CommittedOffset) -> Self {
        let CommittedOffset { offset, leader_epoch, metadata, commit_time_ms, stamps } = committed_offset;
        Self { offset, leader_epoch, metadata, commit_time_ms, stamps: stamps.into_iter().map(Into::into).collect() }
    }
}

/// [`crate::state::GroupMembership`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMembership {
    pub kind: GroupKind,
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberRecord>,
}

impl From<crate::state::GroupMembership> for GroupMembership {
    fn from(group_membership: crate::state::GroupMembership) -> Self {
        let crate::state::GroupMembership { kind, protocol_type, generation, protocol, leader, members } =
            group_membership;
        Self {
            kind,
            protocol_type,
            generation,
            protocol,
            leader,
            members: members.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<GroupMembership> for crate::state::GroupMembership {
    fn from(group_membership: GroupMembership) -> Self {
        let GroupMembership { kind, protocol_type, generation, protocol, leader, members } = group_membership;
        Self {
            kind,
            protocol_type,
            generation,
            protocol,
            leader,
            members: members.into_iter().map(Into::into).collect(),
        }
    }
}

/// [`crate::state::GroupRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupRecord {
    pub(crate) membership: GroupMembership,
    pub(crate) offsets: BTreeMap<(String, i32), CommittedOffset>,
    pub(crate) empty_since_ms: Option<i64>,
}

impl From<crate::state::GroupRecord> for GroupRecord {
    fn from(group_record: crate::state::GroupRecord) -> Self {
        let crate::state::GroupRecord { membership, offsets, empty_since_ms } = group_record;
        Self {
            membership: membership.into(),
            offsets: offsets.into_iter().map(|(key, value)| (key, value.into())).collect(),
            empty_since_ms,
        }
    }
}

impl From<GroupRecord> for crate::state::GroupRecord {
    fn from(group_record: GroupRecord) -> Self {
        let GroupRecord { membership, offsets, empty_since_ms } = group_record;
        Self {
            membership: membership.into(),
            offsets: offsets.into_iter().map(|(key, value)| (key, value.into())).collect(),
            empty_since_ms,
        }
    }
}

/// [`crate::state::MemberRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
}

impl From<crate::state::MemberRecord> for MemberRecord {
    fn from(member_record: crate::state::MemberRecord) -> Self {
        let crate::state::MemberRecord {
            member_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            subscription,
            assignment,
            member_epoch,
            rack_id,
        } = member_record;
        Self {
            member_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            subscription,
            assignment,
            member_epoch,
            rack_id,
        }
    }
}

impl From<MemberRecord> for crate::state::MemberRecord {
    fn from(member_record: MemberRecord) -> Self {
        let MemberRecord {
            member_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            subscription,
            assignment,
            member_epoch,
            rack_id,
        } = member_record;
        Self {
            member_id,
            instance_id,
            client_id,
            client_host,
            session_timeout_ms,
            rebalance_timeout_ms,
            subscription,
            assignment,
            member_epoch,
            rack_id,
        }
    }
}

/// [`crate::state::OffsetCommit`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

impl From<crate::state::OffsetCommit> for OffsetCommit {
    fn from(offset_commit: crate::state::OffsetCommit) -> Self {
        let crate::state::OffsetCommit { topic, partition, offset, leader_epoch, metadata } = offset_commit;
        Self { topic, partition, offset, leader_epoch, metadata }
    }
}

impl From<OffsetCommit> for crate::state::OffsetCommit {
    fn from(offset_commit: OffsetCommit) -> Self {
        let OffsetCommit { topic, partition, offset, leader_epoch, metadata } = offset_commit;
        Self { topic, partition, offset, leader_epoch, metadata }
    }
}
