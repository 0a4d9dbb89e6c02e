//! Compaction: runs of small chunks of one partition (each flush writes one chunk per partition
//! into a shared multi-partition object) are copied, byte for byte (or rewritten in the topic's
//! `compression.type` when it names a codec), into one larger per-partition object, and metadata swaps the index entries with a compare-and-set
//! ([`Command::CompactChunks`]). Fewer, larger objects make catch-up reads cheaper (fewer GETs)
//! and let garbage collection delete the small objects once every partition in them is
//! compacted or expired.
//!
//! Run by the same single agent as garbage collection, one run at a time, so no object is in
//! two jobs at once; a run that loses a race (retention, another compactor) leaves an orphan
//! object that garbage collection deletes.

use std::sync::Weak;

use floe_metadata::tasks::sleep_unless_stopped;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use bytes::BytesMut;
use floe_metadata::{Command, CompactedRun, EntryData, NodeError, ObjectId, State, TopicId};
use floe_storage::segment::ChunkStats;
use floe_storage::{ChunkRef, SegmentKey, SegmentWriter, TopicPartition};

use crate::Agent;
use crate::record_batch::records;

/// What counts as small, and how big a compacted object gets.
#[derive(Clone, Copy, Debug)]
pub struct CompactionConfig {
    /// Pause between rounds.
    pub interval: Duration,
    /// Entries smaller than this are merged.
    pub small_chunk_bytes: u64,
    /// Fewest small entries in a row worth a new object.
    pub min_run: usize,
    /// Largest object a compaction writes.
    pub target_object_bytes: u64,
}

/// One run to compact: a partition and its consecutive small entries.
#[derive(Debug)]
struct Run {
    topic_id: TopicId,
    partition: i32,
    entries: Vec<RunEntry>,
    /// The topic's `compression.type` codec, which batches are rewritten in.
    codec: Option<i16>,
}

/// A small chunk entry of a run, without its object's key: a round over thousands of partitions
/// plans millions of them under the state's read lock, so the plan copies no strings, and each
/// run looks its keys up when it is compacted.
#[derive(Clone, Copy, Debug)]
struct RunEntry {
    base_offset: i64,
    last_offset: i64,
    object_id: ObjectId,
    byte_start: u64,
    byte_len: u32,
    crc32c: u32,
}

/// Runs until `stop` (or the agent is dropped); a run in progress is finished.
pub(crate) async fn run(agent: Weak<Agent>, config: CompactionConfig, stop: CancellationToken) {
    while sleep_unless_stopped(&stop, config.interval).await {
        let Some(agent) = agent.upgrade() else { return };
        if !crate::gc::is_job_runner(&agent).await {
            continue;
        }
        let runs = find_runs(&agent.metadata.read(), &config);
        for run in runs {
            match compact(&agent, run).await {
                Ok(()) => crate::metrics::COMPACTIONS.with_label_values(&["ok"]).inc(),
                Err(e) => {
                    crate::metrics::COMPACTIONS.with_label_values(&["failed"]).inc();
                    tracing::debug!(error = %e, "compaction run not committed");
                }
            }
        }
        crate::cleaner::clean_due_partitions(&agent).await;
    }
}

/// Up to one run per partition: the first stretch of consecutive small chunk entries (markers
/// end a stretch, the target object size caps it) that holds at least `min_run` chunks written
/// by flushes, or reaches the small-chunk size. Earlier compactions' outputs join a run but do
/// not count toward `min_run`, so a byte is rewritten again only to reach the size.
fn find_runs(state: &State, config: &CompactionConfig) -> Vec<Run> {
    let mut runs = Vec::new();
    for (topic_id, topic) in &state.topics {
        // Key compaction rewrites compacted topics whole; merging their chunks first would
        // only copy the bytes twice.
        if state.topic_config_value(topic, "cleanup.policy").is_some_and(|p| p.contains("compact")) {
            continue;
        }
        let codec = state.topic_config_value(topic, "compression.type").and_then(records::codec_for);
        for (index, log) in topic.partitions.iter().enumerate() {
            let mut current: Vec<RunEntry> = Vec::new();
            let mut bytes = 0u64;
            let mut fresh = 0usize;
            let qualifies = |fresh: usize, bytes: u64, len: usize| {
                len >= 2 && (fresh >= config.min_run || bytes >= config.small_chunk_bytes)
            };
            for entry in log.entries_from(log.log_start_offset) {
                let small = match entry.data {
                    EntryData::Chunk { object_id, byte_start, byte_len, crc32c }
                        if u64::from(byte_len) < config.small_chunk_bytes
                            && bytes + u64::from(byte_len) <= config.target_object_bytes =>
                    {
                        state.objects.get(&object_id).map(|o| {
                            let entry = RunEntry {
                                base_offset: entry.base_offset,
                                last_offset: entry.last_offset,
                                object_id,
                                byte_start,
                                byte_len,
                                crc32c,
                            };
                            (entry, SegmentKey::stored_is_compacted(&o.key))
                        })
                    }
                    _ => None,
                };
                match small {
                    Some((item, compacted)) => {
                        bytes += u64::from(item.byte_len);
                        if !compacted {
                            fresh += 1;
                        }
                        current.push(item);
                    }
                    None if qualifies(fresh, bytes, current.len()) => break,
                    None => {
                        current.clear();
                        bytes = 0;
                        fresh = 0;
                    }
                }
            }
            if qualifies(fresh, bytes, current.len()) {
                let partition = i32::try_from(index).unwrap_or(i32::MAX);
                runs.push(Run { topic_id: *topic_id, partition, entries: current, codec });
            }
        }
    }
    runs
}

async fn compact(agent: &Agent, run: Run) -> Result<(), String> {
    let chunks = {
        let state = agent.metadata.read();
        run.entries
            .iter()
            .map(|e| {
                let object = state.objects.get(&e.object_id).ok_or("an object of the run is gone")?;
                let key = SegmentKey::from_stored(object.key.clone());
                let chunk = ChunkRef { key, byte_start: e.byte_start, byte_len: e.byte_len, crc32c: e.crc32c };
                Ok((chunk, object.object_bytes))
            })
            .collect::<Result<Vec<_>, String>>()?
    };
    let mut bytes = BytesMut::new();
    for (chunk, object_bytes) in &chunks {
        let data = agent.cache.read_chunk(&agent.store, chunk, *object_bytes).await.map_err(|e| e.to_string())?;
        bytes.extend_from_slice(&data);
    }
    let bytes = bytes.freeze();
    let read = bytes.len() as u64;
    let mut stats = ChunkStats { batch_count: 0, record_count: 0, timestamp_min: i64::MAX, timestamp_max: i64::MIN };
    let mut batches = Vec::new();
    for batch in crate::record_batch::split(&bytes) {
        let (header, batch) = batch.map_err(|e| e.to_string())?;
        // Rewritten batches keep lastOffsetDelta, so offsets still follow from the entry's base.
        batches.push(match run.codec {
            Some(codec) => records::recompress(&header, &batch, codec).map_err(|e| e.to_string())?,
            None => batch,
        });
        stats.batch_count += 1;
        stats.record_count += u32::try_from(header.record_count).unwrap_or(0);
        stats.timestamp_min = stats.timestamp_min.min(header.first_timestamp());
        stats.timestamp_max = stats.timestamp_max.max(header.max_timestamp);
    }
    let mut writer = SegmentWriter::new();
    let tp = TopicPartition { topic_id: run.topic_id, partition: run.partition };
    let entry = *writer.push_chunk(tp, batches, stats);
    let object = writer.finish();
    let (object_bytes, blocks) = (object.object_bytes, object.blocks.clone());
    let parts: Vec<bytes::Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate_compacted();
    agent.store.put_segment(&key, object).await.map_err(|e| e.to_string())?;
    crate::metrics::COMPACTION_BYTES.with_label_values(&["read"]).inc_by(read);
    crate::metrics::COMPACTION_BYTES.with_label_values(&["written"]).inc_by(object_bytes);
    agent.cache.insert_object(&key, &parts, &blocks, floe_storage::WrittenTier::Disk);
    let command = Command::CompactChunks(CompactedRun {
        topic_id: run.topic_id,
        partition: run.partition,
        replaced: run.entries.iter().map(|e| (e.base_offset, e.last_offset, e.object_id)).collect(),
        key: key.as_str().to_owned(),
        object_bytes,
        byte_start: entry.byte_start,
        byte_len: entry.byte_len,
        crc32c: entry.crc32c,
    });
    match agent.metadata.propose(command).await {
        Ok(_) => {
            tracing::debug!(
                partition = run.partition,
                entries = run.entries.len(),
                bytes = read,
                "compacted a run of small chunks"
            );
            Ok(())
        }
        Err(NodeError::Rejected(e)) => Err(e.to_string()),
        Err(NodeError::Unavailable(e)) => Err(e),
    }
}
