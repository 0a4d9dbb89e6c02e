//! How today's format stores share partitions and their in-flight records. Each type is the in-
//! memory type of the same name in [`crate::state`], field for field in the order encoded; commands
//! carry these layouts too. The conversions below name every field, so a change to the in-memory
//! type compiles only once they say how it is stored. A change to a type here is a format change: a
//! new format version, a mirror of the old layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{restate_via_from, stored_layout};

/// [`crate::state::InFlight`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InFlight {
    pub(crate) last: i64,
    pub(crate) delivery_count: i16,
    pub(crate) state: RecordState,
}

stored_layout!(InFlight <=> crate::state::InFlight { last, delivery_count, state });

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

restate_via_from!(RecordState <=> crate::state::RecordState);

/// [`crate::state::SharePartition`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SharePartition {
    pub(crate) start_offset: i64,
    pub(crate) end_offset: i64,
    pub(crate) ranges: BTreeMap<i64, InFlight>,
    pub(crate) lock_deadline_ms: Option<i64>,
    pub(crate) delivery_limit: i16,
}

stored_layout!(SharePartition <=> crate::state::SharePartition { start_offset, end_offset, ranges, lock_deadline_ms, delivery_limit });
