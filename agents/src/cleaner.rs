//! Key compaction of `cleanup.policy=compact` topics (Kafka's log cleaner): the latest record per
//! key is kept at its original offset, older ones go, tombstones go `delete.retention.ms` after
//! the pass that first kept them (KIP-534's delete horizon), aborted transactions' records go, and batches are rewritten in the
//! topic's `compression.type` when it names a codec.
//!
//! A partition is due when the part of it compaction may touch holds dirty bytes (entries
//! no earlier pass wrote) reaching `min.cleanable.dirty.ratio` of that part, or a dirty entry
//! older than `max.compaction.lag.ms`. That part ends before the last stable offset, before
//! entries younger than `min.compaction.lag.ms`, and before the log's last entry (so a consumer
//! always finds a batch at or after any offset). The pass reads the part twice through the block
//! cache: once to find each key's latest offset, once to write what stays into one new object,
//! then proposes [`Command::CleanKeys`], a compare-and-set on the entries it read. The state
//! forgets the aborted range of each abort marker the pass drops, so read_committed readers are
//! never told of a range whose marker they cannot read; that is safe because the same pass drops
//! the range's records (a pass starts at the log start, so it reads all of them).
//!
//! Run by the storage-job agent after the small-chunk compaction of each round.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use floe_metadata::{
    AbortedTransaction, CleanedData, CleanedEntry, CleanedRange, Command, EntryData, IndexEntry, NodeError, State,
    TopicId, TxnMarker,
};
use floe_storage::segment::ChunkStats;
use floe_storage::{SegmentKey, SegmentWriter, TopicPartition};

use crate::Agent;
use crate::fetch::{ObjectAt, batches_with_offsets, entry_bytes};
use crate::limits::{
    BATCH_DECOMPRESSED_BYTES_MAX, CLEANED_CHUNK_BYTES_MAX, CLEANER_KEY_BYTES_MAX, CLEANER_RANGE_BYTES_MAX,
};
use crate::record_batch::records::{self, RecordView};
use crate::record_batch::{self, ATTRIBUTE_TRANSACTIONAL, BatchHeader};

/// A compacted topic's cleaning configs.
#[derive(Clone, Copy, Debug)]
struct CleanPolicy {
    min_lag_ms: i64,
    max_lag_ms: i64,
    dirty_ratio: f64,
    delete_retention_ms: i64,
    /// The codec `compression.type` asks for; `None` for `producer`.
    codec: Option<i16>,
}

/// One partition's range to clean: the entries (with their objects) from the log start.
#[derive(Debug)]
struct Range {
    topic_id: TopicId,
    partition: i32,
    policy: CleanPolicy,
    entries: Vec<(IndexEntry, ObjectAt)>,
    aborted: Vec<AbortedTransaction>,
}

fn policy(state: &State, topic: &floe_metadata::Topic) -> Option<CleanPolicy> {
    let value = |name: &str| state.topic_config_value(topic, name);
    if !value("cleanup.policy")?.split(',').any(|p| p.trim() == "compact") {
        return None;
    }
    let long = |name: &str, default: i64| value(name).and_then(|v| v.parse().ok()).unwrap_or(default);
    let codec = value("compression.type").and_then(records::codec_for);
    Some(CleanPolicy {
        min_lag_ms: long("min.compaction.lag.ms", 0),
        max_lag_ms: long("max.compaction.lag.ms", i64::MAX),
        dirty_ratio: value("min.cleanable.dirty.ratio").and_then(|v| v.parse().ok()).unwrap_or(0.5),
        delete_retention_ms: long("delete.retention.ms", 86_400_000),
        codec,
    })
}

/// The partitions due for cleaning at `now_ms`, each with the range a pass may rewrite.
fn due_ranges(state: &State, now_ms: i64) -> Vec<Range> {
    let mut due = Vec::new();
    for (topic_id, topic) in &state.topics {
        let Some(policy) = policy(state, topic) else { continue };
        for (index, log) in topic.partitions.iter().enumerate() {
            // Nothing its table does not hold yet is cleaned (table topics).
            let partition = i32::try_from(index).unwrap_or(i32::MAX);
            let hold = state.table_hold(*topic_id, partition);
            let stable = hold.map_or(log.last_stable_offset(), |hold| hold.min(log.last_stable_offset()));
            let Some(last_entry) = log.index.back() else { continue };
            let (mut total, mut dirty, mut overdue, mut horizon_passed) = (0u64, 0u64, false, false);
            let mut entries = Vec::new();
            for entry in log.entries_from(log.log_start_offset) {
                let young = now_ms.saturating_sub(entry.timestamp_max) < policy.min_lag_ms;
                if entry.base_offset == last_entry.base_offset
                    || entry.last_offset >= stable
                    || young
                    || total + entry.stored_bytes() > CLEANER_RANGE_BYTES_MAX
                    || entries.len() >= floe_metadata::limits::CLEANED_RANGE_ENTRIES_MAX
                {
                    break;
                }
                total += entry.stored_bytes();
                if matches!(entry.data, EntryData::Chunk { .. }) {
                    dirty += entry.stored_bytes();
                    overdue |= now_ms.saturating_sub(entry.timestamp_max) > policy.max_lag_ms;
                }
                horizon_passed |= entry.delete_horizon_ms().is_some_and(|h| now_ms > h);
                let object = entry.chunk().and_then(|c| state.objects.get(&c.object_id));
                let at = object.map(|o| (SegmentKey::from_stored(o.key.clone()), o.object_bytes));
                entries.push((entry.clone(), at));
            }
            let ratio_reached = total > 0 && dirty as f64 / total as f64 >= policy.dirty_ratio;
            // Tombstones past their delete horizon are due even with nothing new written.
            if (dirty > 0 && (ratio_reached || overdue)) || horizon_passed {
                due.push(Range {
                    topic_id: *topic_id,
                    partition,
                    policy,
                    entries,
                    aborted: log.aborted_transactions.iter().copied().collect(),
                });
            }
        }
    }
    due
}

/// Cleans every due partition, one at a time.
pub(crate) async fn clean_due_partitions(agent: &Agent) {
    let ranges = due_ranges(&agent.metadata.read(), floe_metadata::now_ms());
    for range in ranges {
        let partition = range.partition;
        match clean(agent, range).await {
            Ok(kept) => {
                crate::metrics::KEY_COMPACTIONS.with_label_values(&["ok"]).inc();
                tracing::debug!(partition, kept, "key-compacted a partition");
            }
            Err(e) => {
                crate::metrics::KEY_COMPACTIONS.with_label_values(&["failed"]).inc();
                tracing::debug!(partition, error = %e, "key compaction not committed");
            }
        }
    }
}

fn is_aborted(aborted: &[AbortedTransaction], header: &BatchHeader, base: i64) -> bool {
    header.attributes & ATTRIBUTE_TRANSACTIONAL != 0
        && aborted
            .iter()
            .any(|a| a.producer_id == header.producer_id && a.first_offset <= base && base <= a.last_offset)
}

/// Each batch of the range that counts (not aborted), with its base offset and records.
async fn for_each_batch(
    agent: &Agent,
    range: &Range,
    entry: &IndexEntry,
    object: &ObjectAt,
    mut visit: impl FnMut(i64, &BatchHeader, &Bytes, Vec<RecordView>) -> Result<(), String>,
) -> Result<(), String> {
    let chunk = entry_bytes(agent, entry, object.clone()).await.map_err(|e| e.to_string())?;
    for part in batches_with_offsets(&chunk, entry) {
        let (base, header, batch) = part.map_err(|e| e.to_string())?;
        if header.is_control() || is_aborted(&range.aborted, &header, base) {
            continue;
        }
        let payload = records::decompress(&header, &batch, BATCH_DECOMPRESSED_BYTES_MAX).map_err(|e| e.to_string())?;
        let views = records::records(&payload).collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())?;
        visit(base, &header, &batch, views)?;
    }
    Ok(())
}

/// The output of a pass: entries tiling the range and the chunks of the new object.
#[derive(Default)]
struct Output {
    entries: Vec<CleanedEntry>,
    writer: SegmentWriter,
    /// Batches of the chunk being filled: bytes, first offset, stats.
    open: Vec<Bytes>,
    open_bytes: usize,
    open_stats: Option<ChunkStats>,
    open_last_offset: i64,
    /// The earliest delete horizon of the open chunk's batches that hold tombstones.
    open_horizon: Option<i64>,
    /// The first offset no entry covers yet.
    next: i64,
    tp: Option<TopicPartition>,
    kept_records: u64,
}

impl Output {
    /// `tombstone_horizon`: the batch's delete horizon if it holds tombstones.
    fn push_batch(
        &mut self,
        batch: Bytes,
        header: &BatchHeader,
        base: i64,
        records: u32,
        tombstone_horizon: Option<i64>,
    ) {
        if self.open_bytes + batch.len() > CLEANED_CHUNK_BYTES_MAX {
            self.close_chunk();
        }
        let stats = self.open_stats.get_or_insert(ChunkStats {
            batch_count: 0,
            record_count: 0,
            timestamp_min: i64::MAX,
            timestamp_max: i64::MIN,
        });
        stats.batch_count += 1;
        stats.record_count += records;
        stats.timestamp_min = stats.timestamp_min.min(header.first_timestamp());
        stats.timestamp_max = stats.timestamp_max.max(header.max_timestamp);
        self.open_bytes += batch.len();
        self.open.push(batch);
        self.open_last_offset = base + header.offset_count() - 1;
        if let Some(horizon) = tombstone_horizon {
            self.open_horizon = Some(self.open_horizon.map_or(horizon, |open| open.min(horizon)));
        }
        self.kept_records += u64::from(records);
    }

    fn close_chunk(&mut self) {
        let (Some(stats), Some(tp)) = (self.open_stats.take(), self.tp) else { return };
        let chunk = *self.writer.push_chunk(tp, std::mem::take(&mut self.open), stats);
        self.open_bytes = 0;
        let (byte_start, byte_len, crc32c) = (chunk.byte_start, chunk.byte_len, chunk.crc32c);
        let data = match self.open_horizon.take() {
            None => CleanedData::Chunk { byte_start, byte_len, crc32c },
            Some(delete_horizon_ms) => {
                CleanedData::ChunkWithTombstones { byte_start, byte_len, crc32c, delete_horizon_ms }
            }
        };
        self.entries.push(CleanedEntry {
            base_offset: self.next,
            last_offset: self.open_last_offset,
            timestamp_max: stats.timestamp_max,
            data,
        });
        self.next = self.open_last_offset + 1;
    }

    /// Covers offsets up to `end` (exclusive) that hold nothing: the previous chunk stretches
    /// over them, or a removed entry does.
    fn cover_to(&mut self, end: i64, timestamp: i64) {
        if self.next >= end {
            return;
        }
        match self.entries.last_mut() {
            Some(CleanedEntry {
                data: CleanedData::Chunk { .. } | CleanedData::ChunkWithTombstones { .. },
                last_offset,
                ..
            }) => *last_offset = end - 1,
            _ => self.entries.push(CleanedEntry {
                base_offset: self.next,
                last_offset: end - 1,
                timestamp_max: timestamp,
                data: CleanedData::Removed,
            }),
        }
        self.next = end;
    }

    fn push_marker(&mut self, offset: i64, timestamp: i64, marker: TxnMarker) {
        self.close_chunk();
        self.cover_to(offset, timestamp);
        self.entries.push(CleanedEntry {
            base_offset: offset,
            last_offset: offset,
            timestamp_max: timestamp,
            data: CleanedData::Marker(marker.into()),
        });
        self.next = offset + 1;
    }
}

/// One pass over a range; returns how many records stayed.
async fn clean(agent: &Agent, range: Range) -> Result<u64, String> {
    let now_ms = floe_metadata::now_ms();
    let policy = range.policy;
    // Pass 1: each key's latest offset. The map is bounded; a range with more keys is cut at
    // the entry where the bound was reached and the rest waits for the next pass.
    let mut latest: HashMap<Bytes, i64> = HashMap::new();
    let mut key_bytes = 0usize;
    let mut usable = 0usize;
    for (entry, object) in &range.entries {
        if key_bytes > CLEANER_KEY_BYTES_MAX {
            break;
        }
        if entry.chunk().is_some() {
            for_each_batch(agent, &range, entry, object, |base, _, _, views| {
                for view in views {
                    let Some(key) = view.key else { continue };
                    let offset = base + i64::from(view.offset_delta);
                    key_bytes += key.len() + 48;
                    // A copy, so the map does not keep whole decompressed batches alive.
                    latest.insert(Bytes::copy_from_slice(&key), offset);
                }
                Ok(())
            })
            .await?;
        }
        usable += 1;
    }
    let entries = &range.entries[..usable];
    let (Some((first, _)), Some((last, _))) = (entries.first(), entries.last()) else {
        return Ok(0);
    };
    let tp = TopicPartition { topic_id: range.topic_id, partition: range.partition };
    let mut out = Output { next: first.base_offset, tp: Some(tp), ..Output::default() };
    // Pass 2: keep each key's latest record, unless it is a tombstone past its retention.
    for (entry, object) in entries {
        if let EntryData::Marker(marker) = entry.data {
            if now_ms.saturating_sub(entry.timestamp_max) <= policy.delete_retention_ms {
                out.push_marker(entry.base_offset, entry.timestamp_max, marker);
            }
            continue;
        }
        if entry.chunk().is_none() {
            continue;
        }
        // Only a horizon a pass wrote counts: a producer may set the attribute bit on its own.
        let cleaned_before = entry.chunk().is_some_and(|c| c.offsets_in_batches);
        let mut kept_batches = Vec::new();
        for_each_batch(agent, &range, entry, object, |base, header, batch, views| {
            // KIP-534: a tombstone stays for `delete.retention.ms` after the pass that first
            // kept it (which writes that horizon into its batch), not after its own timestamp,
            // so a consumer reading the log from the start sees it however old it was.
            let horizon = header.delete_horizon().filter(|_| cleaned_before);
            let expired = horizon.is_some_and(|h| now_ms > h);
            let total = views.len();
            let kept: Vec<RecordView> = views
                .into_iter()
                .filter(|v| {
                    let offset = base + i64::from(v.offset_delta);
                    let newest = v.key.as_ref().is_some_and(|k| latest.get(k) == Some(&offset));
                    newest && !(v.value.is_none() && expired)
                })
                .collect();
            if kept.is_empty() {
                return Ok(());
            }
            let tombstones = kept.iter().any(|v| v.value.is_none());
            let new_horizon =
                (tombstones && horizon.is_none()).then(|| now_ms.saturating_add(policy.delete_retention_ms));
            let codec = policy.codec.unwrap_or(header.compression());
            let count = u32::try_from(kept.len()).unwrap_or(u32::MAX);
            let rebuilt = if kept.len() == total && codec == header.compression() && new_horizon.is_none() {
                let mut same = BytesMut::from(&batch[..]);
                record_batch::stamp(&mut same, base, -1);
                same.freeze()
            } else {
                records::rebuild(header, batch, base, &kept, codec, new_horizon).map_err(|e| e.to_string())?
            };
            let tombstone_horizon = if tombstones { new_horizon.or(horizon) } else { None };
            kept_batches.push((rebuilt, *header, base, count, tombstone_horizon));
            Ok(())
        })
        .await?;
        for (batch, header, base, count, tombstone_horizon) in kept_batches {
            out.push_batch(batch, &header, base, count, tombstone_horizon);
        }
    }
    out.close_chunk();
    out.cover_to(last.last_offset + 1, last.timestamp_max);
    let kept = out.kept_records;
    let object = if out.writer.data_bytes() > 0 {
        let object = out.writer.finish();
        let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
        let (object_bytes, blocks) = (object.object_bytes, object.blocks.clone());
        let key = SegmentKey::generate_compacted();
        agent.store.put_segment(&key, object).await.map_err(|e| e.to_string())?;
        crate::metrics::COMPACTION_BYTES.with_label_values(&["written"]).inc_by(object_bytes);
        agent.cache.insert_object(&key, &parts, &blocks, floe_storage::WrittenTier::Disk);
        Some((key.as_str().to_owned(), object_bytes))
    } else {
        None
    };
    let read: u64 = entries.iter().map(|(e, _)| e.stored_bytes()).sum();
    crate::metrics::COMPACTION_BYTES.with_label_values(&["read"]).inc_by(read);
    let command = Command::CleanKeys(CleanedRange {
        topic_id: range.topic_id,
        partition: range.partition,
        replaced: entries.iter().map(|(e, _)| (e.base_offset, e.last_offset, e.object_id())).collect(),
        object,
        entries: out.entries,
    });
    match agent.metadata.propose(command).await {
        Ok(_) => Ok(kept),
        Err(NodeError::Rejected(e)) => Err(e.to_string()),
        Err(NodeError::Unavailable(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use floe_metadata::{Partition, Topic};

    use super::*;

    const NOW: i64 = 1_000_000;

    /// A compacted topic with one partition: a cleaned entry (with tombstones whose horizon is
    /// `horizon`, if any), then the log's last entry, which is never cleaned.
    fn compacted_state(horizon: Option<i64>) -> State {
        let (object_id, byte_start, byte_len, crc32c) = (1, 0, 100, 7);
        let cleaned = match horizon {
            Some(delete_horizon_ms) => {
                EntryData::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, delete_horizon_ms }
            }
            None => EntryData::CleanedChunk { object_id, byte_start, byte_len, crc32c },
        };
        let last = EntryData::Chunk { object_id, byte_start: 100, byte_len: 50, crc32c };
        let entry = |base_offset, last_offset, data| IndexEntry { base_offset, last_offset, timestamp_max: 10, data };
        let partition = Partition {
            next_offset: 20,
            index: VecDeque::from([entry(0, 9, cleaned), entry(10, 19, last)]),
            index_bytes: 150,
            ..Partition::default()
        };
        let configs = BTreeMap::from([("cleanup.policy".to_owned(), "compact".to_owned())]);
        let topic_id = TopicId::from_u128(1);
        let topic = Topic { name: "table".into(), topic_id, configs, partitions: vec![partition.into()] };
        let mut state = State::default();
        state.topics.insert(topic_id, topic);
        let object = floe_metadata::ObjectRecord { key: "o".into(), object_bytes: 150, reference_count: 2 };
        state.objects.insert(object_id, object);
        state
    }

    #[test]
    fn a_clean_log_is_due_again_only_once_a_tombstone_horizon_passes() {
        assert!(due_ranges(&compacted_state(None), NOW).is_empty(), "nothing dirty, no tombstones");
        assert!(due_ranges(&compacted_state(Some(NOW + 1)), NOW).is_empty(), "horizon not reached");
        let due = due_ranges(&compacted_state(Some(NOW - 1)), NOW);
        assert_eq!(due.len(), 1, "horizon passed with nothing new written");
        assert_eq!(due[0].entries.len(), 1, "the last entry stays out of the pass");
    }
}
