//! Table topics (format 5): per topic, which offsets its Iceberg table holds and where the
//! table's current metadata file is. A table job publishes a snapshot and moves the offsets in
//! one command ([`crate::Command::CommitTableSnapshot`]), so a crash between writing files and
//! committing leaves only unreferenced files, never a gap or a duplicate row.

use serde::{Deserialize, Serialize};

use super::{State, Topic, TopicId};
use crate::command::{CommandError, Outcome};
use crate::limits::{TABLE_GENERATIONS_MAX, TABLE_LOCATION_BYTES_MAX};

/// A topic's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableRecord {
    /// The Iceberg table's `table-uuid`; also names its prefix in the bucket.
    pub table_uuid: [u8; 16],
    /// Commits so far: the compare-and-set token every writer of the table proposes against.
    pub version: u64,
    /// Absolute URI of the table's current metadata JSON.
    pub metadata_location: String,
    /// The dead-letter table's current metadata JSON, once a record failed to decode.
    pub dead_letter_location: Option<String>,
    /// Per partition, the first offset not yet in the table (missing: 0).
    pub offsets: Vec<i64>,
    /// When the last commit was proposed (proposer's clock, ms).
    pub committed_ms: i64,
    /// Earlier generations, oldest first (a schema the table could not evolve to, under
    /// `floe.table.schema.incompatible=new-table`); still readable, no longer written.
    pub retired: Vec<RetiredTable>,
}

/// A table generation that was replaced by a new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetiredTable {
    pub table_uuid: [u8; 16],
    pub metadata_location: String,
    /// 1 for the first generation, and so on: the table is listed as `<name>__v<generation>`.
    pub generation: u32,
}

/// One partition's offsets a table commit adds: `[from, to)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRange {
    pub partition: i32,
    pub from: i64,
    pub to: i64,
}

/// A new snapshot of a topic's table, with the offsets it adds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableCommit {
    pub topic_id: TopicId,
    pub table_uuid: [u8; 16],
    /// The table's version the writer started from; 0 creates the table's record.
    pub base_version: u64,
    pub metadata_location: String,
    pub dead_letter_location: Option<String>,
    /// Each partition at most once. Merges, expiry and schema changes carry none but still
    /// move the version.
    pub ranges: Vec<TableRange>,
    /// The current table becomes a retired generation and `table_uuid` starts the next one.
    pub new_generation: bool,
    pub now_ms: i64,
}

fn conflict(why: impl Into<String>) -> Result<Outcome, CommandError> {
    Err(CommandError::TableConflict(why.into()))
}

impl State {
    /// Whether `topic` has `floe.table.enable=true`.
    pub fn table_enabled(&self, topic: &Topic) -> bool {
        self.topic_config_value(topic, "floe.table.enable").is_some_and(|value| value.eq_ignore_ascii_case("true"))
    }

    /// The first offset of the partition its table does not hold yet, if the topic is a table
    /// topic: retention and key compaction stop before it, so nothing expires or is cleaned
    /// before the table has it.
    pub fn table_hold(&self, topic_id: TopicId, partition: i32) -> Option<i64> {
        let topic = self.topics.get(&topic_id)?;
        if !self.table_enabled(topic) {
            return None;
        }
        let index = usize::try_from(partition).ok()?;
        let log = topic.partitions.get(index)?;
        let committed = self.tables.get(&topic_id).and_then(|table| table.offsets.get(index)).copied().unwrap_or(0);
        Some(committed.max(log.log_start_offset))
    }

    pub(super) fn commit_table_snapshot(&mut self, commit: TableCommit) -> Result<Outcome, CommandError> {
        let Some(topic) = self.topics.get(&commit.topic_id) else {
            return Err(CommandError::UnknownTopicOrPartition);
        };
        let locations = std::iter::once(&commit.metadata_location).chain(&commit.dead_letter_location);
        if locations.clone().any(|location| location.is_empty() || location.len() > TABLE_LOCATION_BYTES_MAX) {
            return Err(CommandError::InvalidCommit(format!(
                "a table metadata location must have 1 to {TABLE_LOCATION_BYTES_MAX} bytes"
            )));
        }
        let current = self.tables.get(&commit.topic_id);
        match current {
            None if commit.base_version != 0 => return conflict("the table has no commits yet"),
            None if commit.new_generation => return conflict("no table generation to retire"),
            Some(table) if table.version != commit.base_version => {
                return conflict(format!("the table is at version {}, not {}", table.version, commit.base_version));
            }
            Some(table) if commit.new_generation == (table.table_uuid == commit.table_uuid) => {
                return conflict("a new generation needs a new table id, and only a new generation may have one");
            }
            Some(table) if commit.new_generation && table.retired.len() >= TABLE_GENERATIONS_MAX => {
                return Err(CommandError::LimitReached(format!(
                    "a table keeps at most {TABLE_GENERATIONS_MAX} retired generations"
                )));
            }
            _ => {}
        }
        let offsets = current.map(|table| table.offsets.as_slice()).unwrap_or_default();
        let mut seen = Vec::with_capacity(commit.ranges.len());
        for range in &commit.ranges {
            let index = usize::try_from(range.partition).map_err(|_| CommandError::UnknownTopicOrPartition)?;
            let log = topic.partitions.get(index).ok_or(CommandError::UnknownTopicOrPartition)?;
            if seen.contains(&range.partition) {
                return Err(CommandError::InvalidCommit(format!("partition {} listed twice", range.partition)));
            }
            seen.push(range.partition);
            let from = offsets.get(index).copied().unwrap_or(0).max(log.log_start_offset);
            if range.from != from {
                return conflict(format!("partition {} continues at {from}, not {}", range.partition, range.from));
            }
            if range.to < range.from || range.to > log.last_stable_offset() {
                return Err(CommandError::InvalidCommit(format!(
                    "partition {} range [{}, {}) is past its last stable offset {}",
                    range.partition,
                    range.from,
                    range.to,
                    log.last_stable_offset()
                )));
            }
        }

        let partition_count = topic.partitions.len();
        let table = self.tables.entry(commit.topic_id).or_insert_with(|| TableRecord {
            table_uuid: commit.table_uuid,
            version: 0,
            metadata_location: String::new(),
            dead_letter_location: None,
            offsets: Vec::new(),
            committed_ms: commit.now_ms,
            retired: Vec::new(),
        });
        if commit.new_generation {
            let generation = table.retired.last().map_or(1, |last| last.generation + 1);
            table.retired.push(RetiredTable {
                table_uuid: table.table_uuid,
                metadata_location: std::mem::take(&mut table.metadata_location),
                generation,
            });
            table.table_uuid = commit.table_uuid;
            table.dead_letter_location = None;
        }
        if table.offsets.len() < partition_count {
            table.offsets.resize(partition_count, 0);
        }
        for range in &commit.ranges {
            let slot = &mut table.offsets[range.partition as usize];
            assert!(range.to >= *slot, "a table's offsets never move back");
            *slot = range.to;
        }
        table.version += 1;
        table.metadata_location = commit.metadata_location;
        if commit.dead_letter_location.is_some() {
            table.dead_letter_location = commit.dead_letter_location;
        }
        table.committed_ms = table.committed_ms.max(commit.now_ms);
        self.meter_table_ranges(commit.topic_id, &commit.ranges);
        Ok(Outcome::Done)
    }
}

#[cfg(test)]
mod tests;
