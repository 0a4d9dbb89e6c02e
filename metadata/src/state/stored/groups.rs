//! How today's format stores group records and their committed offsets. Each type is the in-memory
//! type of the same name in [`crate::state`], field for field in the order encoded; the conversions
//! below name every field, so a change to the in-memory type compiles only once they say how it is
//! stored. A change to a type here is a format change: a new format version, a mirror of the old
//! layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::{CommitStamp, GroupMembership};

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
        Self { offset, leader_epoch, metadata, commit_time_ms, stamps }
    }
}

impl From<CommittedOffset> for crate::state::CommittedOffset {
    fn from(committed_offset: CommittedOffset) -> Self {
        let CommittedOffset { offset, leader_epoch, metadata, commit_time_ms, stamps } = committed_offset;
        Self { offset, leader_epoch, metadata, commit_time_ms, stamps }
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
            membership,
            offsets: offsets.into_iter().map(|(key, value)| (key, value.into())).collect(),
            empty_since_ms,
        }
    }
}

impl From<GroupRecord> for crate::state::GroupRecord {
    fn from(group_record: GroupRecord) -> Self {
        let GroupRecord { membership, offsets, empty_since_ms } = group_record;
        Self {
            membership,
            offsets: offsets.into_iter().map(|(key, value)| (key, value.into())).collect(),
            empty_since_ms,
        }
    }
}
