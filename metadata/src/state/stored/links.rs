//! How today's format stores cluster links: what an operator set and whether they still mirror.
//! Each type is the in-memory type of the same name in [`crate::state`], field for field in the
//! order encoded; commands carry these layouts too. The conversions below name every field, so a
//! change to the in-memory type compiles only once they say how it is stored. A change to a type
//! here is a format change: a new format version, a mirror of the old layout and a golden file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{restate_via_from, stored_layout};

use crate::state::TopicId;

/// [`crate::state::LinkConfig`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    pub bootstrap: String,
    pub tls: bool,
    pub tls_ca_pem: Option<String>,
    pub sasl: Option<LinkSasl>,
    pub topics: String,
    pub groups: Option<String>,
    pub sync_configs: bool,
    pub tenant: Option<String>,
    pub acls: bool,
}

stored_layout!(LinkConfig <=> crate::state::LinkConfig { bootstrap, tls, tls_ca_pem, sasl, topics, groups, sync_configs, tenant, acls });

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

stored_layout!(LinkRecord <=> crate::state::LinkRecord { config, created_ms, state, source_ends, error, reported_ms, deleted_at_source });

/// [`crate::state::LinkSasl`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkSasl {
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

stored_layout!(LinkSasl <=> crate::state::LinkSasl { mechanism, username, password });

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

restate_via_from!(LinkState <=> crate::state::LinkState);
