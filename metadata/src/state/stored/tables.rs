//! How today's format stores table topics and retired tables. Each type is the in-memory type of
//! the same name in [`crate::state`], field for field in the order encoded; commands carry these
//! layouts too. The conversions below name every field, so a change to the in-memory type compiles
//! only once they say how it is stored. A change to a type here is a format change: a new format
//! version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

/// [`crate::state::RetiredTable`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RetiredTable {
    pub(crate) table_uuid: [u8; 16],
    pub(crate) metadata_location: String,
    pub(crate) generation: u32,
}

stored_layout!(RetiredTable <=> crate::state::RetiredTable { table_uuid, metadata_location, generation });

/// [`crate::state::TableRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TableRecord {
    pub(crate) table_uuid: [u8; 16],
    pub(crate) version: u64,
    pub(crate) metadata_location: String,
    pub(crate) dead_letter_location: Option<String>,
    pub(crate) offsets: Vec<i64>,
    pub(crate) committed_ms: i64,
    pub(crate) retired: Vec<RetiredTable>,
}

stored_layout!(TableRecord <=> crate::state::TableRecord { table_uuid, version, metadata_location, dead_letter_location, offsets, committed_ms, retired });
