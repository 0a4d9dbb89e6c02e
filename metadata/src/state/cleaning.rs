//! Key compaction commits (`cleanup.policy=compact`): a range of a partition rewritten with the
//! latest record per key becomes new entries tiling the same offsets: chunks whose batches
//! carry their own offsets, kept markers, and removed stretches. Like [`super::compaction`], the
//! swap is a compare-and-set on the replaced entries. The state machine checks the shape (tiling,
//! bounds, markers unchanged, range below the last stable offset, the log's last entry left
//! alone so a consumer always finds a batch at or after any offset); which records a range
//! keeps is the compactor's business.
//!
//! An aborted range goes with its marker, as in Kafka's cleaner: a read_committed client told of
//! a range whose abort marker it never reads skips every later batch of that producer. So a
//! compacted partition lists no more aborted ranges than it keeps abort markers (index entries,
//! or control batches in a mirror topic's chunks), and the compactor drops them at the latest
//! once they are older than `delete.retention.ms`: a client aborting in a loop cannot grow the
//! list for good.

use super::{EntryData, IndexEntry, ObjectRecord, Partition, State};
use crate::command::{CleanedData, CleanedRange, CommandError, Outcome};
use crate::limits::CLEANED_RANGE_ENTRIES_MAX;

impl State {
    pub(super) fn clean_keys(&mut self, range: CleanedRange) -> Result<Outcome, CommandError> {
        let invalid = |why: &str| Err(CommandError::InvalidCommit(format!("key compaction: {why}")));
        let (Some(first), Some(last)) = (range.replaced.first(), range.replaced.last()) else {
            return invalid("no entries replaced");
        };
        let (first, last) = (first.0, last.1);
        if range.replaced.len() > CLEANED_RANGE_ENTRIES_MAX || range.entries.len() > CLEANED_RANGE_ENTRIES_MAX {
            return invalid("too many entries");
        }
        let mut next = first;
        let mut chunks = 0u64;
        let mut bytes = 0u64;
        for entry in &range.entries {
            if entry.base_offset != next || entry.last_offset < entry.base_offset {
                return invalid("entries do not tile the replaced offsets");
            }
            next = entry.last_offset + 1;
            if let CleanedData::Chunk { byte_start, byte_len, .. }
            | CleanedData::ChunkWithTombstones { byte_start, byte_len, .. } = entry.data
            {
                let end = byte_start.checked_add(u64::from(byte_len));
                if range.object.as_ref().is_none_or(|(_, size)| end.is_none_or(|end| end > *size)) {
                    return invalid("chunk outside its object");
                }
                chunks += 1;
                bytes += u64::from(byte_len);
            }
        }
        if next != last + 1 {
            return invalid("entries do not tile the replaced offsets");
        }
        match &range.object {
            Some(_) if chunks == 0 => return invalid("an object no entry refers to"),
            Some((key, _)) if key.is_empty() || self.object_key_taken(key) => {
                return invalid("object key empty or already indexed");
            }
            _ => {}
        }
        let object_id = self.next_object_id;
        let table_hold = self.table_hold(range.topic_id, range.partition);
        // Aborted ranges go with their markers from format 12: a replica of an older binary keeps them.
        let forget_aborts = self.applies_format(12);
        let log = self.partition_mut(range.topic_id, range.partition).ok_or(CommandError::UnknownTopicOrPartition)?;
        if last >= log.last_stable_offset() {
            return invalid("range reaches the last stable offset");
        }
        if table_hold.is_some_and(|hold| last >= hold) {
            return invalid("range reaches records its table does not hold yet");
        }
        let at = log.index.partition_point(|e| e.base_offset < first);
        if at + range.replaced.len() >= log.index.len() {
            // Also covers a shorter index: the log's last entry is never replaced.
            return Err(CommandError::CompactionConflict);
        }
        let current = log.index.range(at..at + range.replaced.len());
        for (entry, (base, last, object)) in current.zip(&range.replaced) {
            if (entry.base_offset, entry.last_offset, entry.object_id()) != (*base, *last, *object) {
                return Err(CommandError::CompactionConflict);
            }
        }
        for kept in &range.entries {
            if let CleanedData::Marker(marker) = kept.data {
                let before = log.index.range(at..at + range.replaced.len()).find(|e| e.base_offset == kept.base_offset);
                if kept.last_offset != kept.base_offset
                    || before.is_none_or(|e| e.data != EntryData::Marker(marker.into()))
                {
                    return invalid("a marker that was not in the range");
                }
            }
        }
        // In offset order, since the entries tile the range.
        let kept_markers: Vec<i64> =
            range.entries.iter().filter(|e| matches!(e.data, CleanedData::Marker(_))).map(|e| e.base_offset).collect();
        let entries = range.entries.into_iter().map(|e| IndexEntry {
            base_offset: e.base_offset,
            last_offset: e.last_offset,
            timestamp_max: e.timestamp_max,
            data: match e.data {
                CleanedData::Chunk { byte_start, byte_len, crc32c } => {
                    EntryData::CleanedChunk { object_id, byte_start, byte_len, crc32c }
                }
                CleanedData::ChunkWithTombstones { byte_start, byte_len, crc32c, delete_horizon_ms } => {
                    EntryData::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, delete_horizon_ms }
                }
                CleanedData::Marker(marker) => EntryData::Marker(marker.into()),
                CleanedData::Removed => EntryData::Removed,
            },
        });
        let mut tail = log.index.split_off(at + range.replaced.len());
        let replaced: Vec<IndexEntry> = log.index.drain(at..).collect();
        log.index.extend(entries);
        log.index.append(&mut tail);
        let replaced_bytes: u64 = replaced.iter().map(IndexEntry::stored_bytes).sum();
        log.index_bytes = log.index_bytes - replaced_bytes + bytes;
        if forget_aborts {
            log.forget_aborts_without_markers(first, last, &kept_markers);
        }
        for id in replaced.iter().filter_map(IndexEntry::object_id) {
            self.release_object(id);
        }
        if let Some((key, object_bytes)) = range.object {
            self.objects.insert(object_id, ObjectRecord { key, object_bytes, reference_count: chunks });
            self.next_object_id += 1;
        }
        Ok(Outcome::Done)
    }
}

impl Partition {
    /// Forgets the aborted ranges whose marker a key compaction of offsets `first..=last` did
    /// not keep (`kept_markers`: the kept markers' offsets, ascending). The compactor drops an
    /// aborted transaction's records in the pass that drops its marker; a range that began
    /// before `first` and at or after the log start has records the pass never read, so it
    /// stays listed and they stay hidden (the compactor's passes start at the log start).
    fn forget_aborts_without_markers(&mut self, first: i64, last: i64, kept_markers: &[i64]) {
        let log_start_offset = self.log_start_offset;
        self.aborted_transactions.retain(|a| {
            let marker_dropped =
                (first..=last).contains(&a.last_offset) && kept_markers.binary_search(&a.last_offset).is_err();
            !(marker_dropped && a.first_offset.max(log_start_offset) >= first)
        });
    }
}

#[cfg(test)]
mod tests;
