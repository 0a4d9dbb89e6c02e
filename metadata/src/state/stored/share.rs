//! How today's format stores share partitions and their in-flight records. Each type is the in-
//! memory type of the same name in [`crate::state`], field for field in the order encoded; commands
//! carry these layouts too. The conversions below name every field, so a change to the in-memory
//! type compiles only once they say how it is stored. A change to a type here is a format change: a
//! new format version, a mirror of the old layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// [`crate::state::InFlight`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InFlight {
    pub(crate) last: i64,
    pub(crate) delivery_count: i16,
    pub(crate) state: RecordState,
}

impl From<crate::state::InFlight> for InFlight {
    fn from(in_flight: crate::state::InFlight) -> Self {
        let crate::state::InFlight { last, delivery_count, state } = in_flight;
        Self { last, delivery_count, state: state.into() }
    }
}

impl From<InFlight> for crate::state::InFlight {
    fn from(in_flight: InFlight) -> Self {
        let InFlight { last, delivery_count, state } = in_flight;
        Self { last, delivery_count, state: state.into() }
    }
}

/// [`crate::state::RecordState`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum RecordState {
    Available,
    Acquired { member: String, lock_until_ms: i64 },
    Acknowledged,
    Archived,
}

impl From<crate::state::RecordState> for RecordState {
    fn from(record_state: crate::state::RecordState) -> Self {
        match record_state {
            crate::state::RecordState::Available => Self::Available,
            crate::state::RecordState::Acquired { member, lock_until_ms } => Self::Acquired { member, lock_until_ms },
            crate::state::RecordState::Acknowledged => Self::Acknowledged,
            crate::state::RecordState::Archived => Self::Archived,
        }
    }
}

impl From<RecordState> for crate::state::RecordState {
    fn from(record_state: RecordState) -> Self {
        match record_state {
            RecordState::Available => Self::Available,
            RecordState::Acquired { member, lock_until_ms } => Self::Acquired { member, lock_until_ms },
            RecordState::Acknowledged => Self::Acknowledged,
            RecordState::Archived => Self::Archived,
        }
    }
}

/// [`crate::state::SharePartition`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SharePartition {
    pub(crate) start_offset: i64,
    pub(crate) end_offset: i64,
    pub(crate) ranges: BTreeMap<i64, InFlight>,
    pub(crate) lock_deadline_ms: Option<i64>,
    pub(crate) delivery_limit: i16,
}

impl From<crate::state::SharePartition> for SharePartition {
    fn from(share_partition: crate::state::SharePartition) -> Self {
        let crate::state::SharePartition { start_offset, end_offset, ranges, lock_deadline_ms, delivery_limit } =
            share_partition;
        Self {
            start_offset,
            end_offset,
            ranges: ranges.into_iter().map(|(key, value)| (key, value.into())).collect(),
            lock_deadline_ms,
            delivery_limit,
        }
    }
}

impl From<SharePartition> for crate::state::SharePartition {
    fn from(share_partition: SharePartition) -> Self {
        let SharePartition { start_offset, end_offset, ranges, lock_deadline_ms, delivery_limit } = share_partition;
        Self {
            start_offset,
            end_offset,
            ranges: ranges.into_iter().map(|(key, value)| (key, value.into())).collect(),
            lock_deadline_ms,
            delivery_limit,
        }
    }
}
