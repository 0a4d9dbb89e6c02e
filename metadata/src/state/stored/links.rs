//! How today's format stores links and whether they still mirror. Each type is the in-memory type
//! of the same name in [`crate::state`], field for field in the order encoded; the conversions
//! below name every field, so a change to the in-memory type compiles only once they say how it is
//! stored. A change to a type here is a format change: a new format version, a mirror of the old
//! layout and a golden file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::state::{LinkConfig, TopicId};

/// [`crate::state::LinkRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LinkRecord {
    pub(crate) config: LinkConfig,
    pub(crate) created_ms: i64,
    pub(crate) state: LinkState,
    pub(crate) source_ends: BTreeMap<(TopicId, i32), i64>,
    pub(crate) error: Option<String>,
    pub(crate) reported_ms: i64,
    pub(crate) deleted_at_source: BTreeSet<String>,
}

impl From<crate::state::LinkRecord> for LinkRecord {
    fn from(link_record: crate::state::LinkRecord) -> Self {
        let crate::state::LinkRecord { config, created_ms, state, source_ends, error, reported_ms, deleted_at_source } =
            link_record;
        Self { config, created_ms, state: state.into(), source_ends, error, reported_ms, deleted_at_source }
    }
}

impl From<LinkRecord> for crate::state::LinkRecord {
    fn from(link_record: LinkRecord) -> Self {
        let LinkRecord { config, created_ms, state, source_ends, error, reported_ms, deleted_at_source } = link_record;
        Self { config, created_ms, state: state.into(), source_ends, error, reported_ms, deleted_at_source }
    }
}

/// [`crate::state::LinkState`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum LinkState {
    Mirroring,
    Promoted { at_ms: i64, fork_offsets: BTreeMap<String, Vec<i64>> },
}

impl From<crate::state::LinkState> for LinkState {
    fn from(link_state: crate::state::LinkState) -> Self {
        match link_state {
            crate::state::LinkState::Mirroring => Self::Mirroring,
            crate::state::LinkState::Promoted { at_ms, fork_offsets } => Self::Promoted { at_ms, fork_offsets },
        }
    }
}

impl From<LinkState> for crate::state::LinkState {
    fn from(link_state: LinkState) -> Self {
        match link_state {
            LinkState::Mirroring => Self::Mirroring,
            LinkState::Promoted { at_ms, fork_offsets } => Self::Promoted { at_ms, fork_offsets },
        }
    }
}
