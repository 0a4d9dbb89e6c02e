//! How today's format stores topics, partitions, their index entries and the segment objects they
//! point into. Each type is the in-memory type of the same name in [`crate::state`], field for
//! field in the order encoded; commands carry these layouts too. The conversions below name every
//! field, so a change to the in-memory type compiles only once they say how it is stored. A change
//! to a type here is a format change: a new format version, a mirror of the old layout and a golden
//! file.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::{Restate, restate_via_from, stored_layout};

use super::AbortedTransaction;
use crate::state::{ObjectId, TopicId};

/// [`crate::state::EntryData`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum EntryData {
    Chunk {
        object_id: ObjectId,
        byte_start: u64,
        byte_len: u32,
        crc32c: u32,
    },
    Marker(TxnMarker),
    CleanedChunk {
        object_id: ObjectId,
        byte_start: u64,
        byte_len: u32,
        crc32c: u32,
    },
    Removed,
    CleanedChunkWithTombstones {
        object_id: ObjectId,
        byte_start: u64,
        byte_len: u32,
        crc32c: u32,
        delete_horizon_ms: i64,
    },
}

impl From<crate::state::EntryData> for EntryData {
    fn from(entry_data: crate::state::EntryData) -> Self {
        match entry_data {
            crate::state::EntryData::Chunk { object_id, byte_start, byte_len, crc32c } => {
                Self::Chunk { object_id, byte_start, byte_len, crc32c }
            }
            crate::state::EntryData::Marker(marker) => Self::Marker(marker.into()),
            crate::state::EntryData::CleanedChunk { object_id, byte_start, byte_len, crc32c } => {
                Self::CleanedChunk { object_id, byte_start, byte_len, crc32c }
            }
            crate::state::EntryData::Removed => Self::Removed,
            crate::state::EntryData::CleanedChunkWithTombstones {
                object_id,
                byte_start,
                byte_len,
                crc32c,
                delete_horizon_ms,
            } => Self::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, delete_horizon_ms },
        }
    }
}

impl From<EntryData> for crate::state::EntryData {
    fn from(entry_data: EntryData) -> Self {
        match entry_data {
            EntryData::Chunk { object_id, byte_start, byte_len, crc32c } => {
                Self::Chunk { object_id, byte_start, byte_len, crc32c }
            }
            EntryData::Marker(marker) => Self::Marker(marker.into()),
            EntryData::CleanedChunk { object_id, byte_start, byte_len, crc32c } => {
                Self::CleanedChunk { object_id, byte_start, byte_len, crc32c }
            }
            EntryData::Removed => Self::Removed,
            EntryData::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, delete_horizon_ms } => {
                Self::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, delete_horizon_ms }
            }
        }
    }
}

restate_via_from!(EntryData <=> crate::state::EntryData);

/// [`crate::state::IndexEntry`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) timestamp_max: i64,
    pub(crate) data: EntryData,
}

stored_layout!(IndexEntry <=> crate::state::IndexEntry { base_offset, last_offset, timestamp_max, data });

/// [`crate::state::ObjectRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ObjectRecord {
    pub(crate) key: String,
    pub(crate) object_bytes: u64,
    pub(crate) reference_count: u64,
}

stored_layout!(ObjectRecord <=> crate::state::ObjectRecord { key, object_bytes, reference_count });

/// [`crate::state::Partition`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Partition {
    pub(crate) next_offset: i64,
    pub(crate) log_start_offset: i64,
    pub(crate) leader_epoch: i32,
    pub(crate) index: VecDeque<IndexEntry>,
    pub(crate) index_bytes: u64,
    pub(crate) open_transactions: BTreeMap<i64, i64>,
    pub(crate) aborted_transactions: VecDeque<AbortedTransaction>,
}

stored_layout!(by field: Partition <=> crate::state::Partition { next_offset, log_start_offset, leader_epoch, index, index_bytes, open_transactions, aborted_transactions });

// A topic's partitions are shared in memory (copied on write) and stored each whole.
impl Restate<std::sync::Arc<crate::state::Partition>> for Partition {
    fn restate(self) -> std::sync::Arc<crate::state::Partition> {
        std::sync::Arc::new(self.into())
    }
}

impl Restate<Partition> for std::sync::Arc<crate::state::Partition> {
    fn restate(self) -> Partition {
        std::sync::Arc::unwrap_or_clone(self).into()
    }
}

/// [`crate::state::Topic`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Topic {
    pub(crate) name: String,
    pub(crate) topic_id: TopicId,
    pub(crate) configs: BTreeMap<String, String>,
    pub(crate) partitions: Vec<Partition>,
}

stored_layout!(by field: Topic <=> crate::state::Topic { name, topic_id, configs, partitions });

/// [`crate::state::TxnMarker`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

stored_layout!(TxnMarker <=> crate::state::TxnMarker { producer_id, producer_epoch, commit });
