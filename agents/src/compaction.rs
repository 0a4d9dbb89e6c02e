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

use bytes::Bytes;
use floe_metadata::limits::{COMPACTED_OBJECT_ENTRIES_MAX, COMPACTED_OBJECT_RUNS_MAX, COMPACTION_RUN_ENTRIES_MAX};
use floe_metadata::{
    Command, CompactedChunk, CompactedObject, CompactedRun, EntryData, NodeError, ObjectId, Outcome, State, TopicId,
};
use floe_storage::segment::ChunkStats;
use floe_storage::{ChunkRef, JobBlocks, SegmentKey, SegmentWriter, TopicPartition};

use crate::Agent;
use crate::limits::COMPACTION_BATCH_BYTES_MAX;
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
    /// Index entries in the whole state past which every stretch of two or more small entries
    /// is compacted, `min_run` or not: at thousands of partitions each partition waits long for
    /// `min_run` entries while the state holds millions (about 125 bytes each, in every
    /// metadata node and agent).
    pub crowded_entries: usize,
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

impl Run {
    fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| u64::from(e.byte_len)).sum()
    }
}

/// What a compaction commit did: runs swapped, and runs whose partition changed meanwhile.
struct Swapped {
    swapped: u64,
    conflicts: u64,
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
    /// Written by an earlier compaction rather than by a flush.
    compacted: bool,
}

/// Runs until `stop` (or the agent is dropped); a run in progress is finished.
pub(crate) async fn run(agent: Weak<Agent>, config: CompactionConfig, stop: CancellationToken) {
    while sleep_unless_stopped(&stop, config.interval).await {
        let Some(agent) = agent.upgrade() else { return };
        if !crate::gc::is_job_runner(&agent).await {
            continue;
        }
        round(&agent, &config).await;
        crate::cleaner::clean_due_partitions(&agent).await;
    }
}

/// One round: every run found is merged, a batch of objects at a time.
pub async fn round(agent: &Agent, config: &CompactionConfig) {
    let (runs, shared) = {
        let state = agent.metadata.read();
        (find_runs(&state, config), state.applies_format(14))
    };
    let job = JobBlocks::default();
    for batch in batches_of(objects_of(runs, shared, config.target_object_bytes), COMPACTION_BATCH_BYTES_MAX) {
        let inputs = read_batch(agent, &batch, &job).await;
        for (object, input) in batch.into_iter().zip(inputs) {
            let count = object.len() as u64;
            let compacted = match input {
                Ok(input) => compact(agent, object, input, shared).await,
                Err(e) => Err(e),
            };
            match compacted {
                Ok(Swapped { swapped, conflicts }) => {
                    crate::metrics::COMPACTIONS.with_label_values(&["ok"]).inc_by(swapped);
                    crate::metrics::COMPACTIONS.with_label_values(&["failed"]).inc_by(conflicts);
                }
                Err(e) => {
                    crate::metrics::COMPACTIONS.with_label_values(&["failed"]).inc_by(count);
                    tracing::debug!(error = %e, "compaction not committed");
                }
            }
        }
    }
}

/// The objects a round writes: runs of many partitions share one object up to the target size
/// once every metadata node applies format 14 (`shared`), so a round costs a PUT and a metadata
/// commit per few MiB whatever the partitions; before that, one object per run.
fn objects_of(runs: Vec<Run>, shared: bool, target_object_bytes: u64) -> Vec<Vec<Run>> {
    let mut objects: Vec<Vec<Run>> = Vec::new();
    let (mut bytes, mut entries) = (0u64, 0usize);
    for run in runs {
        let (run_bytes, run_entries) = (run.bytes(), run.entries.len());
        match objects.last_mut() {
            Some(last)
                if shared
                    && bytes + run_bytes <= target_object_bytes
                    && last.len() < COMPACTED_OBJECT_RUNS_MAX
                    && entries + run_entries <= COMPACTED_OBJECT_ENTRIES_MAX =>
            {
                bytes += run_bytes;
                entries += run_entries;
                last.push(run);
            }
            _ => {
                (bytes, entries) = (run_bytes, run_entries);
                objects.push(vec![run]);
            }
        }
    }
    objects
}

/// The objects of a round in batches of at most `batch_bytes_max` of runs (one object at least),
/// each read as a whole before any of its objects is written ([`read_batch`]).
fn batches_of(objects: Vec<Vec<Run>>, batch_bytes_max: u64) -> Vec<Vec<Vec<Run>>> {
    let mut batches: Vec<Vec<Vec<Run>>> = Vec::new();
    let mut bytes = 0u64;
    for object in objects {
        let object_bytes: u64 = object.iter().map(Run::bytes).sum();
        match batches.last_mut() {
            Some(last) if bytes + object_bytes <= batch_bytes_max => {
                bytes += object_bytes;
                last.push(object);
            }
            _ => {
                bytes = object_bytes;
                batches.push(vec![object]);
            }
        }
    }
    batches
}

/// A chunk of a run to read: where it lies and where its bytes go.
struct ChunkRead {
    object_id: ObjectId,
    chunk: ChunkRef,
    object_bytes: u64,
    /// The output object, and the chunk's place in its buffer.
    output: usize,
    at: usize,
}

/// Chunk reads between two yields to the runtime: most come from the hot tier's memory without
/// waiting, and a batch is tens of thousands of them, which would hold a worker thread (and the
/// produce requests queued on it) for the whole batch.
const READS_PER_YIELD: usize = 256;

/// Adjacent chunks of one object read together at most: a read is held whole until its
/// chunks are copied out (flush objects hold up to a few thousand chunks).
const CHUNKS_PER_READ_MAX: usize = 1024;

/// The bytes of every run of `batch`'s objects (one buffer per object, a slice per run, its
/// chunks in offset order), or why an object's runs could not be read. Chunks are read in the
/// order they lie in their objects, not run by run: at thousands of partitions every flush object
/// holds a chunk of many runs, and read partition by partition each object was read again for
/// every partition once the job's blocks ([`JobBlocks`], shared by the round) no longer held it:
/// 285 MiB/s of GETs to write 12 MiB/s at 10,000 partitions (issue 53). Sorted, each block is
/// read once per batch.
async fn read_batch(agent: &Agent, batch: &[Vec<Run>], job: &JobBlocks) -> Vec<Result<Vec<Bytes>, String>> {
    let mut failed: Vec<Option<String>> = vec![None; batch.len()];
    let mut reads = Vec::new();
    {
        let state = agent.metadata.read();
        for (output, runs) in batch.iter().enumerate() {
            let mut at = 0usize;
            for e in runs.iter().flat_map(|r| &r.entries) {
                let Some(object) = state.objects.get(&e.object_id) else {
                    failed[output] = Some("an object of the run is gone".into());
                    break;
                };
                let key = SegmentKey::from_stored(object.key.clone());
                let chunk = ChunkRef { key, byte_start: e.byte_start, byte_len: e.byte_len, crc32c: e.crc32c };
                reads.push(ChunkRead { object_id: e.object_id, chunk, object_bytes: object.object_bytes, output, at });
                at += e.byte_len as usize;
            }
        }
    }
    reads.sort_unstable_by_key(|r| (r.object_id, r.chunk.byte_start));
    let mut buffers: Vec<Vec<u8>> =
        batch.iter().map(|runs| vec![0; runs.iter().map(Run::bytes).sum::<u64>() as usize]).collect();
    // Adjacent chunks of one object are read in one go (at 10,000 partitions a flush object
    // holds hundreds of one-record chunks, and a block lookup each was a tenth of the agent),
    // then each is checked against its own CRC-32C; one that fails is read alone, which falls
    // back to a ranged GET of it as any chunk read does.
    let groups = reads.chunk_by(|a, b| {
        a.object_id == b.object_id && a.chunk.byte_start + u64::from(a.chunk.byte_len) == b.chunk.byte_start
    });
    let mut group_reads = 0usize;
    for group in groups.flat_map(|g| g.chunks(CHUNKS_PER_READ_MAX)) {
        group_reads += 1;
        if group_reads.is_multiple_of(READS_PER_YIELD) {
            tokio::task::yield_now().await;
        }
        let (first, last) = (&group[0], &group[group.len() - 1]);
        let range = first.chunk.byte_start..last.chunk.byte_start + u64::from(last.chunk.byte_len);
        let together = match group.len() {
            1 => None,
            _ => agent
                .cache
                .read_range_for_job(&agent.store, &first.chunk.key, range.clone(), first.object_bytes, job)
                .await
                .ok(),
        };
        for read in group {
            if failed[read.output].is_some() {
                continue;
            }
            let at = (read.chunk.byte_start - range.start) as usize;
            let part = together
                .as_ref()
                .and_then(|bytes| bytes.get(at..at + read.chunk.byte_len as usize))
                .filter(|part| crc32c::crc32c(part) == read.chunk.crc32c);
            let alone;
            let data = match part {
                Some(part) => part,
                None => match agent.cache.read_chunk_for_job(&agent.store, &read.chunk, read.object_bytes, job).await {
                    Ok(data) => {
                        alone = data;
                        &alone[..]
                    }
                    Err(e) => {
                        failed[read.output] = Some(e.to_string());
                        continue;
                    }
                },
            };
            match buffers[read.output].get_mut(read.at..read.at + data.len()) {
                Some(slot) if data.len() == read.chunk.byte_len as usize => slot.copy_from_slice(data),
                _ => failed[read.output] = Some("a chunk read is not its entry's length".into()),
            }
        }
    }
    buffers
        .into_iter()
        .zip(failed)
        .zip(batch)
        .map(|((buffer, failed), runs)| match failed {
            Some(e) => Err(e),
            None => {
                let buffer = Bytes::from(buffer);
                let mut at = 0usize;
                Ok(runs
                    .iter()
                    .map(|run| {
                        let len = run.bytes() as usize;
                        at += len;
                        buffer.slice(at - len..at)
                    })
                    .collect())
            }
        })
        .collect()
}

/// Every run of each partition: stretches of consecutive small chunk entries (markers and big
/// chunks end a stretch, the target object size cuts it) that hold at least `min_run` chunks
/// written by flushes, or reach the small-chunk size. Earlier compactions' outputs join a run
/// but do not count toward `min_run`, so a byte is rewritten again only to reach the size.
/// Every run, not the first one only: a partition written faster than one target object per
/// round would otherwise gain index entries for as long as it is written.
fn find_runs(state: &State, config: &CompactionConfig) -> Vec<Run> {
    let entries: usize = state.topics.values().flat_map(|t| &t.partitions).map(|p| p.index.len()).sum();
    let min_run = if entries > config.crowded_entries { 2 } else { config.min_run };
    let mut runs = Vec::new();
    for (topic_id, topic) in &state.topics {
        // Key compaction rewrites compacted topics whole; merging their chunks first would
        // only copy the bytes twice.
        if state.topic_config_value(topic, "cleanup.policy").is_some_and(|p| p.contains("compact")) {
            continue;
        }
        let codec = state.topic_config_value(topic, "compression.type").and_then(records::codec_for);
        for (index, log) in topic.partitions.iter().enumerate() {
            let partition = i32::try_from(index).unwrap_or(i32::MAX);
            let mut stretch = Stretch::default();
            for entry in log.entries_from(log.log_start_offset) {
                let small = match entry.data {
                    EntryData::Chunk { object_id, byte_start, byte_len, crc32c }
                        if u64::from(byte_len) < config.small_chunk_bytes =>
                    {
                        state.objects.get(&object_id).map(|o| RunEntry {
                            base_offset: entry.base_offset,
                            last_offset: entry.last_offset,
                            object_id,
                            byte_start,
                            byte_len,
                            crc32c,
                            compacted: SegmentKey::stored_is_compacted(&o.key),
                        })
                    }
                    _ => None,
                };
                match small {
                    Some(item) => {
                        // A run holds at most the target size and as many entries as one
                        // compaction may replace (metadata refuses more).
                        if stretch.bytes + u64::from(item.byte_len) > config.target_object_bytes
                            || stretch.entries.len() >= COMPACTION_RUN_ENTRIES_MAX
                        {
                            stretch.end(min_run, config, *topic_id, partition, codec, &mut runs);
                        }
                        stretch.push(item);
                    }
                    None => stretch.end(min_run, config, *topic_id, partition, codec, &mut runs),
                }
            }
            stretch.end(min_run, config, *topic_id, partition, codec, &mut runs);
        }
    }
    runs
}

/// How many merged chunks of one size become one chunk: a merged chunk is merged again once
/// three times its bytes follow it. With 2 (merged again with its own size), a partition written
/// slowly rewrote each byte log2(1 MiB / a round's bytes) times on its way to the small-chunk
/// size: about five at 2,000 partitions sharing 4 MB/s (27 KB a round), where compaction wrote
/// 12 MiB/s within two minutes; with 4, half as many, for up to three chunks of each size in the
/// partition's index.
const MERGE_FAN_IN: u64 = 4;

/// Consecutive small chunk entries of one partition, gathered into a run.
#[derive(Default)]
struct Stretch {
    entries: Vec<RunEntry>,
    bytes: u64,
}

impl Stretch {
    fn push(&mut self, entry: RunEntry) {
        self.bytes += u64::from(entry.byte_len);
        self.entries.push(entry);
    }

    /// Ends the stretch: a run if it is worth one, else dropped. An earlier compaction's output
    /// stays out of the run until what would join it is [`MERGE_FAN_IN`] - 1 times its size, so
    /// merged chunks grow by that factor: a byte is rewritten about log4(small-chunk size / run
    /// size) times, not once per round, and a partition keeps at most a few chunks of each size.
    fn end(
        &mut self,
        min_run: usize,
        config: &CompactionConfig,
        topic_id: TopicId,
        partition: i32,
        codec: Option<i16>,
        runs: &mut Vec<Run>,
    ) {
        let Stretch { mut entries, mut bytes } = std::mem::take(self);
        let mut skip = 0;
        for entry in &entries {
            let rest = bytes - u64::from(entry.byte_len);
            if !entry.compacted || u64::from(entry.byte_len) * (MERGE_FAN_IN - 1) <= rest {
                break;
            }
            bytes = rest;
            skip += 1;
        }
        entries.drain(..skip);
        let fresh = entries.iter().filter(|e| !e.compacted).count();
        let worth = fresh >= min_run || bytes >= config.small_chunk_bytes;
        if entries.len() >= 2 && worth {
            runs.push(Run { topic_id, partition, entries, codec });
        }
    }
}

/// Writes `runs` (their bytes read by [`read_batch`], one buffer a run) into one new object, each
/// run one chunk, and commits the swap: one [`Command::CompactRuns`] for all of them when
/// `shared`, else (one run) [`Command::CompactChunks`].
async fn compact(agent: &Agent, runs: Vec<Run>, inputs: Vec<Bytes>, shared: bool) -> Result<Swapped, String> {
    let mut writer = SegmentWriter::new();
    let mut read = 0u64;
    let mut written = Vec::with_capacity(runs.len());
    for (run, bytes) in runs.iter().zip(&inputs) {
        read += bytes.len() as u64;
        let mut stats =
            ChunkStats { batch_count: 0, record_count: 0, timestamp_min: i64::MAX, timestamp_max: i64::MIN };
        let mut batches = Vec::new();
        for batch in crate::record_batch::split(bytes) {
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
        let tp = TopicPartition { topic_id: run.topic_id, partition: run.partition };
        written.push(*writer.push_chunk(tp, batches, stats));
    }
    let object = writer.finish();
    let (object_bytes, blocks) = (object.object_bytes, object.blocks.clone());
    let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate_compacted();
    agent.store.put_segment(&key, object).await.map_err(|e| e.to_string())?;
    crate::metrics::COMPACTION_OBJECTS.inc();
    crate::metrics::COMPACTION_BYTES.with_label_values(&["read"]).inc_by(read);
    crate::metrics::COMPACTION_BYTES.with_label_values(&["written"]).inc_by(object_bytes);
    agent.cache.insert_object(&key, &parts, &blocks, floe_storage::WrittenTier::Disk);
    let command = if shared {
        Command::CompactRuns(CompactedObject {
            key: key.as_str().to_owned(),
            object_bytes,
            runs: runs
                .iter()
                .zip(&written)
                .map(|(run, chunk)| CompactedChunk {
                    topic_id: run.topic_id,
                    partition: run.partition,
                    base_offset: run.entries.first().map_or(0, |e| e.base_offset),
                    last_offset: run.entries.last().map_or(0, |e| e.last_offset),
                    entries: u32::try_from(run.entries.len()).unwrap_or(u32::MAX),
                    objects_sum: run.entries.iter().fold(0u64, |sum, e| sum.wrapping_add(e.object_id)),
                    byte_start: chunk.byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: chunk.crc32c,
                })
                .collect(),
        })
    } else {
        let [run] = runs.as_slice() else { return Err("one run per object before format 14".into()) };
        let [chunk] = written.as_slice() else { return Err("one chunk per run".into()) };
        Command::CompactChunks(CompactedRun {
            topic_id: run.topic_id,
            partition: run.partition,
            replaced: run.entries.iter().map(|e| (e.base_offset, e.last_offset, e.object_id)).collect(),
            key: key.as_str().to_owned(),
            object_bytes,
            byte_start: chunk.byte_start,
            byte_len: chunk.byte_len,
            crc32c: chunk.crc32c,
        })
    };
    let swapped = match agent.metadata.propose(command).await {
        Ok(Outcome::RunsCompacted { swapped, conflicts }) => {
            Swapped { swapped: u64::from(swapped), conflicts: u64::from(conflicts) }
        }
        Ok(_) => Swapped { swapped: 1, conflicts: 0 },
        Err(NodeError::Rejected(e)) => return Err(e.to_string()),
        Err(NodeError::Unavailable(e)) => return Err(e),
    };
    tracing::debug!(runs = runs.len(), swapped = swapped.swapped, bytes = read, "compacted runs of small chunks");
    Ok(swapped)
}

#[cfg(test)]
mod tests;
