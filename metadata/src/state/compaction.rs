//! Compaction commits: a run of small index entries becomes one entry in a new object. The swap
//! is a compare-and-set on the run, so a concurrent produce commit (which only appends) is never
//! lost, retention racing the compactor makes the swap fail harmlessly, and readers see either
//! the old entries or the new one, never a gap. Offsets do not change; the bytes may (batches
//! rewritten in the topic's `compression.type`).
//!
//! Two commands: [`CompactedRun`], one partition's run in an object of its own, each replaced
//! entry listed; and (format 14) [`CompactedObject`], the runs of many partitions in one object,
//! each run named by its offsets, entry count and the sum of its entries' object ids.

use super::{EntryData, IndexEntry, ObjectId, ObjectRecord, State, TopicId};
use crate::command::{CommandError, CompactedObject, CompactedRun, Outcome};
use crate::limits::{COMPACTED_OBJECT_ENTRIES_MAX, COMPACTED_OBJECT_RUNS_MAX, COMPACTION_RUN_ENTRIES_MAX};

/// The entries a run replaces, as the compactor read them.
enum Replaced<'a> {
    /// Each one: (base offset, last offset, object).
    Listed(&'a [(i64, i64, ObjectId)]),
    /// From `base_offset` to `last_offset`, `entries` chunk entries whose object ids sum
    /// (wrapping) to `objects_sum`.
    Summed { base_offset: i64, last_offset: i64, entries: usize, objects_sum: u64 },
}

impl Replaced<'_> {
    fn entries(&self) -> usize {
        match self {
            Replaced::Listed(listed) => listed.len(),
            Replaced::Summed { entries, .. } => *entries,
        }
    }

    fn base_offset(&self) -> i64 {
        match self {
            Replaced::Listed(listed) => listed.first().map_or(i64::MIN, |e| e.0),
            Replaced::Summed { base_offset, .. } => *base_offset,
        }
    }
}

/// The new chunk a run becomes.
struct NewChunk {
    object_id: ObjectId,
    byte_start: u64,
    byte_len: u32,
    crc32c: u32,
}

fn valid_chunk(byte_start: u64, byte_len: u32, object_bytes: u64) -> Result<(), CommandError> {
    let end = byte_start.checked_add(u64::from(byte_len));
    if end.is_none_or(|end| end > object_bytes) {
        return Err(CommandError::InvalidCommit("compacted chunk outside its object".into()));
    }
    Ok(())
}

fn valid_run_length(entries: usize) -> Result<(), CommandError> {
    if !(2..=COMPACTION_RUN_ENTRIES_MAX).contains(&entries) {
        return Err(CommandError::InvalidCommit(format!(
            "a compaction replaces 2..={COMPACTION_RUN_ENTRIES_MAX} entries of a partition"
        )));
    }
    Ok(())
}

impl State {
    pub(super) fn compact_chunks(&mut self, run: CompactedRun) -> Result<Outcome, CommandError> {
        valid_run_length(run.replaced.len())?;
        if run.key.is_empty() {
            return Err(CommandError::InvalidCommit("a compaction names its object".into()));
        }
        valid_chunk(run.byte_start, run.byte_len, run.object_bytes)?;
        if self.object_key_taken(&run.key) {
            return Err(CommandError::InvalidCommit("compacted object key already indexed".into()));
        }
        let object_id = self.next_object_id;
        let chunk = NewChunk { object_id, byte_start: run.byte_start, byte_len: run.byte_len, crc32c: run.crc32c };
        self.swap_run(run.topic_id, run.partition, &Replaced::Listed(&run.replaced), chunk)?;
        self.objects
            .insert(object_id, ObjectRecord { key: run.key, object_bytes: run.object_bytes, reference_count: 1 });
        self.next_object_id += 1;
        Ok(Outcome::Done)
    }

    /// Format 14: each run is swapped on its own; a run whose partition changed since the
    /// compactor read it (retention, a deleted topic) is skipped, and the object is referenced by
    /// the runs swapped (listed only if one was: otherwise garbage collection deletes it).
    pub(super) fn compact_runs(&mut self, object: CompactedObject) -> Result<Outcome, CommandError> {
        if !self.applies_format(14) {
            return Err(CommandError::InvalidCommit(
                "compacted objects of several partitions need every metadata node on format 14".into(),
            ));
        }
        if object.key.is_empty() || object.runs.is_empty() || object.runs.len() > COMPACTED_OBJECT_RUNS_MAX {
            return Err(CommandError::InvalidCommit(format!(
                "a compacted object is named and holds 1..={COMPACTED_OBJECT_RUNS_MAX} runs"
            )));
        }
        let mut entries = 0usize;
        for run in &object.runs {
            let run_entries = usize::try_from(run.entries).unwrap_or(usize::MAX);
            valid_run_length(run_entries)?;
            valid_chunk(run.byte_start, run.byte_len, object.object_bytes)?;
            entries = entries.saturating_add(run_entries);
        }
        if entries > COMPACTED_OBJECT_ENTRIES_MAX {
            return Err(CommandError::InvalidCommit(format!(
                "a compacted object replaces at most {COMPACTED_OBJECT_ENTRIES_MAX} entries in all"
            )));
        }
        if self.object_key_taken(&object.key) {
            return Err(CommandError::InvalidCommit("compacted object key already indexed".into()));
        }
        let object_id = self.next_object_id;
        let (mut swapped, mut conflicts) = (0u32, 0u32);
        for run in &object.runs {
            let replaced = Replaced::Summed {
                base_offset: run.base_offset,
                last_offset: run.last_offset,
                entries: usize::try_from(run.entries).unwrap_or(usize::MAX),
                objects_sum: run.objects_sum,
            };
            let chunk = NewChunk { object_id, byte_start: run.byte_start, byte_len: run.byte_len, crc32c: run.crc32c };
            match self.swap_run(run.topic_id, run.partition, &replaced, chunk) {
                Ok(()) => swapped += 1,
                Err(_) => conflicts += 1,
            }
        }
        if swapped > 0 {
            let record = ObjectRecord {
                key: object.key,
                object_bytes: object.object_bytes,
                reference_count: u64::from(swapped),
            };
            self.objects.insert(object_id, record);
            self.next_object_id += 1;
        }
        Ok(Outcome::RunsCompacted { swapped, conflicts })
    }

    /// Swaps `replaced` in a partition's index for one entry holding `chunk`, and releases the
    /// replaced entries' objects; [`CommandError::CompactionConflict`] (changing nothing) unless
    /// the index still holds exactly that run of chunk entries.
    fn swap_run(
        &mut self,
        topic_id: TopicId,
        partition: i32,
        replaced: &Replaced<'_>,
        chunk: NewChunk,
    ) -> Result<(), CommandError> {
        let log = self.partition_mut(topic_id, partition).ok_or(CommandError::UnknownTopicOrPartition)?;
        let first = replaced.base_offset();
        let at = log.index.partition_point(|e| e.base_offset < first);
        let count = replaced.entries();
        if at.checked_add(count).is_none_or(|end| end > log.index.len()) {
            return Err(CommandError::CompactionConflict);
        }
        let mut bytes = 0u64;
        let mut timestamp_max = i64::MIN;
        let mut objects_sum = 0u64;
        for (i, entry) in log.index.range(at..at + count).enumerate() {
            let EntryData::Chunk { object_id, .. } = entry.data else {
                return Err(CommandError::CompactionConflict);
            };
            if let Replaced::Listed(listed) = replaced {
                let (base, last, object) = listed[i];
                if entry.base_offset != base || entry.last_offset != last || object_id != object {
                    return Err(CommandError::CompactionConflict);
                }
            }
            objects_sum = objects_sum.wrapping_add(object_id);
            bytes += entry.stored_bytes();
            timestamp_max = timestamp_max.max(entry.timestamp_max);
        }
        let last_offset = log.index[at + count - 1].last_offset;
        if let Replaced::Summed { base_offset, last_offset: last, objects_sum: sum, .. } = *replaced
            && (log.index[at].base_offset != base_offset || last_offset != last || objects_sum != sum)
        {
            return Err(CommandError::CompactionConflict);
        }
        // The size changes when compaction recompressed the batches (`compression.type`).
        log.index_bytes = log.index_bytes - bytes + u64::from(chunk.byte_len);
        let gone: Vec<IndexEntry> = log.index.drain(at..at + count).collect();
        log.index.insert(
            at,
            IndexEntry {
                base_offset: first,
                last_offset,
                timestamp_max,
                data: EntryData::Chunk {
                    object_id: chunk.object_id,
                    byte_start: chunk.byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: chunk.crc32c,
                },
            },
        );
        for id in gone.iter().filter_map(IndexEntry::object_id) {
            self.release_object(id);
        }
        Ok(())
    }

    /// Whether an object with this key is listed (a compactor's retried or duplicate commit).
    pub(super) fn object_key_taken(&self, key: &str) -> bool {
        self.objects.values().any(|o| o.key == key)
    }
}

#[cfg(test)]
pub(super) mod tests;
