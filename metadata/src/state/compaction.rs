//! Compaction commits: a run of small index entries becomes one entry in a new per-partition
//! object. The swap is a compare-and-set on the run, so a concurrent produce commit (which only
//! appends) is never lost, retention racing the compactor makes the swap fail harmlessly, and
//! readers see either the old entries or the new one, never a gap. Offsets do not change; the
//! bytes may (batches rewritten in the topic's `compression.type`).

use super::{EntryData, IndexEntry, ObjectRecord, State};
use crate::command::{CommandError, CompactedRun, Outcome};
use crate::limits::COMPACTION_RUN_ENTRIES_MAX;

impl State {
    pub(super) fn compact_chunks(&mut self, run: CompactedRun) -> Result<Outcome, CommandError> {
        if run.replaced.len() < 2 || run.replaced.len() > COMPACTION_RUN_ENTRIES_MAX || run.key.is_empty() {
            return Err(CommandError::InvalidCommit(format!(
                "a compaction replaces 2..={COMPACTION_RUN_ENTRIES_MAX} entries with a named object"
            )));
        }
        let end = run.byte_start.checked_add(u64::from(run.byte_len));
        if end.is_none_or(|end| end > run.object_bytes) {
            return Err(CommandError::InvalidCommit("compacted chunk outside its object".into()));
        }
        if self.object_key_taken(&run.key) {
            return Err(CommandError::InvalidCommit("compacted object key already indexed".into()));
        }
        let object_id = self.next_object_id;
        let log = self.partition_mut(run.topic_id, run.partition).ok_or(CommandError::UnknownTopicOrPartition)?;
        let first = run.replaced[0].0;
        let at = log.index.partition_point(|e| e.base_offset < first);
        let current = log.index.range(at..).take(run.replaced.len());
        let mut bytes = 0u64;
        let mut timestamp_max = i64::MIN;
        let mut matched = 0;
        for (entry, (base, last, object)) in current.zip(&run.replaced) {
            let same = entry.base_offset == *base
                && entry.last_offset == *last
                && matches!(entry.data, EntryData::Chunk { object_id, .. } if object_id == *object);
            if !same {
                return Err(CommandError::CompactionConflict);
            }
            bytes += entry.stored_bytes();
            timestamp_max = timestamp_max.max(entry.timestamp_max);
            matched += 1;
        }
        if matched != run.replaced.len() || at >= log.index.len() {
            return Err(CommandError::CompactionConflict);
        }
        let last_offset = run.replaced[run.replaced.len() - 1].1;
        // The size changes when compaction recompressed the batches (`compression.type`).
        log.index_bytes = log.index_bytes - bytes + u64::from(run.byte_len);
        let replaced: Vec<IndexEntry> = log.index.drain(at..at + run.replaced.len()).collect();
        log.index.insert(
            at,
            IndexEntry {
                base_offset: first,
                last_offset,
                timestamp_max,
                data: EntryData::Chunk {
                    object_id,
                    byte_start: run.byte_start,
                    byte_len: run.byte_len,
                    crc32c: run.crc32c,
                },
            },
        );
        for id in replaced.iter().filter_map(IndexEntry::object_id) {
            self.release_object(id);
        }
        self.objects
            .insert(object_id, ObjectRecord { key: run.key, object_bytes: run.object_bytes, reference_count: 1 });
        self.next_object_id += 1;
        Ok(Outcome::Done)
    }

    /// Whether an object with this key is listed (a compactor's retried or duplicate commit).
    pub(super) fn object_key_taken(&self, key: &str) -> bool {
        self.objects.values().any(|o| o.key == key)
    }
}

#[cfg(test)]
pub(super) mod tests;
