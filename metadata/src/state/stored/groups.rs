//! How today's format stores groups: their memberships, members and committed offsets. Each type is
//! the in-memory type of the same name in [`crate::state`], field for field in the order encoded;
//! commands carry these layouts too. The conversions below name every field, so a change to the in-
//! memory type compiles only once they say how it is stored. A change to a type here is a format
//! change: a new format version, a mirror of the old layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stored_layout;

use crate::state::GroupKind;

/// [`crate::state::CommitStamp`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitStamp {
    pub origin: u64,
    pub seq: u64,
}

stored_layout!(CommitStamp <=> crate::state::CommitStamp { origin, seq });

/// [`crate::state::CommittedOffset`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommittedOffset {
    pub(crate) offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) metadata: String,
    pub(crate) commit_time_ms: i64,
    pub(crate) stamps: Vec<CommitStamp>,
}

stored_layout!(CommittedOffset <=> crate::state::CommittedOffset { offset, leader_epoch, metadata, commit_time_ms, stamps });

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

stored_layout!(GroupMembership <=> crate::state::GroupMembership { kind, protocol_type, generation, protocol, leader, members });

/// [`crate::state::GroupRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GroupRecord {
    pub(crate) membership: GroupMembership,
    pub(crate) offsets: BTreeMap<(String, i32), CommittedOffset>,
    pub(crate) empty_since_ms: Option<i64>,
}

stored_layout!(GroupRecord <=> crate::state::GroupRecord { membership, offsets, empty_since_ms });

impl super::Restate<BTreeMap<(String, i32), CommittedOffset>> for crate::state::GroupOffsets {
    fn restate(self) -> BTreeMap<(String, i32), CommittedOffset> {
        self.into_entries().map(|(key, offset)| (key, offset.into())).collect()
    }
}

// Written one offset at a time, in the stored map's order (by topic, then partition).
impl super::WriteStored for crate::state::GroupOffsets {
    fn write_stored<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut out = serializer.serialize_map(Some(self.len()))?;
        for (topic, partition, offset) in self.iter() {
            out.serialize_entry(&(topic, partition), &super::AsStored(offset))?;
        }
        out.end()
    }
}

impl super::Restate<crate::state::GroupOffsets> for BTreeMap<(String, i32), CommittedOffset> {
    fn restate(self) -> crate::state::GroupOffsets {
        self.into_iter().map(|(key, offset)| (key, offset.into())).collect()
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

stored_layout!(MemberRecord <=> crate::state::MemberRecord { member_id, instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms, subscription, assignment, member_epoch, rack_id });

/// [`crate::state::OffsetCommit`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

stored_layout!(OffsetCommit <=> crate::state::OffsetCommit { topic, partition, offset, leader_epoch, metadata });
