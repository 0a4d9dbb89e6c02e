//! How today's format stores table topics and retired tables. Each type is the in-memory type of
//! the same name in [`crate::state`], field for field in the order encoded; commands carry these
//! layouts too. The conversions below name every field, so a change to the in-memory type compiles
//! only once they say how it is stored. A change to a type here is a format change: a new format
//! version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

/// [`crate::state::RetiredTable`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RetiredTable {
    pub(crate) table_uuid: [u8; 16],
    pub(crate) metadata_location: String,
    pub(crate) generation: u32,
}

impl From<crate::state::RetiredTable> for RetiredTable {
    fn from(retired_table: crate::state::RetiredTable) -> Self {
        let crate::state::RetiredTable { table_uuid, metadata_location, generation } = retired_table;
        Self { table_uuid, metadata_location, generation }
    }
}

impl From<RetiredTable> for crate::state::RetiredTable {
    fn from(retired_table: RetiredTable) -> Self {
        let RetiredTable { table_uuid, metadata_location, generation } = retired_table;
        Self { table_uuid, metadata_location, generation }
    }
}

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

impl From<crate::state::TableRecord> for TableRecord {
    fn from(table_record: crate::state::TableRecord) -> Self {
        let crate::state::TableRecord {
            table_uuid,
            version,
            metadata_location,
            dead_letter_location,
            offsets,
            committed_ms,
            retired,
        } = table_record;
        Self {
            table_uuid,
            version,
            metadata_location,
            dead_letter_location,
            offsets,
            committed_ms,
            retired: retired.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<TableRecord> for crate::state::TableRecord {
    fn from(table_record: TableRecord) -> Self {
        let TableRecord {
            table_uuid,
            version,
            metadata_location,
            dead_letter_location,
            offsets,
            committed_ms,
            retired,
        } = table_record;
        Self {
            table_uuid,
            version,
            metadata_location,
            dead_letter_location,
            offsets,
            committed_ms,
            retired: retired.into_iter().map(Into::into).collect(),
        }
    }
}
