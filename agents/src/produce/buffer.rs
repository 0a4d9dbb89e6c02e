//! The flush buffer: one in-memory buffer shared by every connection and partition.
//!
//! Memory is bounded by `buffer_bytes_max`, which counts batches from the moment they are
//! appended until their producers are answered (buffered, uploading and committing alike):
//! [`FlushBuffer::append`] waits for room rather than grow, which stops the connection from
//! reading further requests. A flush happens when `flush_bytes` are buffered or the oldest batch
//! is `flush_interval` old; with `adaptive`, also as soon as no flush is in flight (none started
//! and not yet answered) and `min_flush_interval` passed since the last one started, so an idle
//! agent flushes a lone batch at once and a busy one lets batches grow while the previous flush
//! is on its way. Each flush becomes one segment object; uploads run in parallel (up to
//! `uploads_in_flight_max`), but commits are proposed strictly in flush order, so requests
//! pipelined on one connection get offsets in the order they were sent. A failed flush commits
//! nothing while the flushes behind it still commit, so a producer's chunk behind its own failed
//! one is held back and answered retriably (`produce::holds`): a producer with no sequences on a
//! partition yet must not get its later records committed without the earlier ones.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::BytesMut;
use floe_metadata::locks::MutexRecovery;
use floe_metadata::{BatchSummary, ChunkCommit, Command, CommandError, Metadata, NodeError, Outcome, SegmentCommit};
use floe_storage::segment::ChunkStats;
use floe_storage::{
    BlockCache, BlockChecksums, PutSegmentError, SegmentKey, SegmentStore, SegmentWriter, TopicPartition,
};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::PartitionAppend;
use super::holds::{ChunkFate, ProducerChunk, SequenceHolds, sequenced};
use crate::agent::{Fault, FlushConfig};

/// Memory is accounted in units of this many bytes, so a semaphore's `u32` permits can cover
/// any buffer size.
const PERMIT_BYTES: usize = 1024;

/// The outcome for one [`PartitionAppend`]: the offset its first batch was given.
pub type AppendResult = Result<i64, AppendError>;

/// Why appended batches were not committed. Nothing of them is visible to consumers.
#[derive(Clone, Debug, thiserror::Error)]
pub enum AppendError {
    /// The segment upload failed; retriable.
    #[error("object store: {0}")]
    Storage(String),
    /// No metadata node answered the commit in time: it may still have been committed (a node
    /// may have logged it before it was cut off); retriable, and a retry is deduplicated.
    #[error("metadata unavailable: {0}")]
    MetadataUnavailable(String),
    /// The metadata service refused the chunk (its topic was deleted meanwhile, say).
    #[error(transparent)]
    Rejected(#[from] CommandError),
    /// An earlier chunk of the same producer and partition failed before metadata decided on
    /// it, and metadata holds no sequences of the producer there yet: committed now, this one
    /// would leave a gap the earlier one's retry could never fill. Retriable; nothing of it was
    /// committed.
    #[error("an earlier request of this producer to the partition failed and must be committed first")]
    EarlierSequenceFailed,
    #[error("agent is shutting down")]
    ShuttingDown,
}

/// Handle to the buffer; cheap to clone.
#[derive(Clone, Debug)]
pub struct FlushBuffer {
    shared: Arc<Shared>,
}

/// Resolves once the appended batches are committed (or failed).
#[derive(Debug)]
pub struct Ticket(oneshot::Receiver<Vec<AppendResult>>);

impl Ticket {
    pub async fn committed(self) -> Vec<AppendResult> {
        // A dropped sender means the pipeline stopped before answering: nothing was acknowledged.
        self.0.await.unwrap_or_default()
    }
}

#[derive(Debug)]
struct Shared {
    config: FlushConfig,
    pending: Mutex<Pending>,
    wake: Notify,
    memory: Arc<Semaphore>,
    memory_permits: u32,
    drained: watch::Sender<bool>,
}

#[derive(Debug, Default)]
struct Pending {
    appends: Vec<Append>,
    bytes: usize,
    oldest: Option<Instant>,
    closed: bool,
    /// Flushes started and not yet answered.
    in_flight: usize,
    /// When the last flush started.
    last_flush: Option<Instant>,
}

#[derive(Debug)]
struct Append {
    partitions: Vec<PartitionAppend>,
    reply: oneshot::Sender<Vec<AppendResult>>,
    /// Released when the reply is sent: the batches' memory is then free.
    _memory: OwnedSemaphorePermit,
}

/// One flush on its way from upload to commit.
struct FlushJob {
    started: Instant,
    commit: SegmentCommit,
    upload: JoinHandle<Result<(), PutSegmentError>>,
    key: SegmentKey,
    /// The object's bytes and block checksums, for the cache once the upload succeeded.
    parts: Vec<bytes::Bytes>,
    blocks: BlockChecksums,
    /// Where each append's partition went, by chunk.
    routes: Vec<Route>,
    appends: Vec<Append>,
}

impl FlushBuffer {
    /// Starts the flusher and committer tasks.
    pub fn start(pipeline: Pipeline, metadata: Metadata, store: SegmentStore, cache: BlockCache) -> Self {
        let Pipeline { flush: config, commit_deadline, fault } = pipeline;
        let memory_permits = u32::try_from(config.buffer_bytes_max.div_ceil(PERMIT_BYTES)).unwrap_or(u32::MAX).max(1);
        let (drained, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            memory: Arc::new(Semaphore::new(memory_permits as usize)),
            memory_permits,
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
            drained,
            config,
        });
        let (jobs, job_queue) = mpsc::channel(shared.config.uploads_in_flight_max.max(1));
        tokio::spawn(run_flusher(shared.clone(), jobs, store));
        let committer = Committer { metadata, cache, commit_deadline, fault };
        tokio::spawn(run_committer(shared.clone(), job_queue, committer));
        Self { shared }
    }

    /// Adds one request's accepted batches; waits while the buffer is full.
    pub async fn append(&self, partitions: Vec<PartitionAppend>) -> Result<Ticket, AppendError> {
        let bytes: usize = partitions.iter().flat_map(|p| &p.batches).map(|b| b.bytes.len()).sum();
        let permits =
            u32::try_from(bytes.div_ceil(PERMIT_BYTES)).unwrap_or(u32::MAX).clamp(1, self.shared.memory_permits);
        let memory =
            self.shared.memory.clone().acquire_many_owned(permits).await.map_err(|_| AppendError::ShuttingDown)?;
        let (reply, answer) = oneshot::channel();
        let mut pending = self.shared.pending.lock_recovered();
        if pending.closed {
            return Err(AppendError::ShuttingDown);
        }
        let was_empty = pending.appends.is_empty();
        pending.appends.push(Append { partitions, reply, _memory: memory });
        pending.bytes += bytes;
        pending.oldest.get_or_insert_with(Instant::now);
        let full = pending.bytes >= self.shared.config.flush_bytes;
        drop(pending);
        if was_empty || full {
            self.shared.wake.notify_one();
        }
        Ok(Ticket(answer))
    }

    /// The fraction of the buffer's memory held by batches not yet answered.
    pub fn fill(&self) -> f64 {
        let free = self.shared.memory.available_permits() as f64;
        (1.0 - free / f64::from(self.shared.memory_permits)).clamp(0.0, 1.0)
    }

    /// Refuses new appends, flushes what is buffered and waits until it is all answered.
    pub async fn close_and_drain(&self) {
        self.shared.pending.lock_recovered().closed = true;
        self.shared.wake.notify_one();
        let mut drained = self.shared.drained.subscribe();
        let _ = drained.wait_for(|d| *d).await;
    }
}

enum Next {
    Wait(Option<Instant>),
    Flush(Vec<Append>),
    Stop,
}

/// Takes the buffer when it is due and starts its upload. Runs until the buffer is closed and
/// empty.
async fn run_flusher(shared: Arc<Shared>, jobs: mpsc::Sender<FlushJob>, store: SegmentStore) {
    loop {
        let next = {
            let mut pending = shared.pending.lock_recovered();
            match pending.oldest {
                None if pending.closed => Next::Stop,
                None => Next::Wait(None),
                Some(oldest) => {
                    let mut due = oldest + shared.config.flush_interval;
                    if shared.config.adaptive && pending.in_flight == 0 {
                        let earliest = pending.last_flush.map_or(oldest, |at| at + shared.config.min_flush_interval);
                        due = due.min(earliest.max(oldest));
                    }
                    let now = Instant::now();
                    if pending.closed || pending.bytes >= shared.config.flush_bytes || now >= due {
                        crate::metrics::FLUSH_AGE_SECONDS.observe(oldest.elapsed().as_secs_f64());
                        pending.bytes = 0;
                        pending.oldest = None;
                        pending.in_flight += 1;
                        pending.last_flush = Some(now);
                        Next::Flush(std::mem::take(&mut pending.appends))
                    } else {
                        Next::Wait(Some(due))
                    }
                }
            }
        };
        match next {
            Next::Stop => return,
            Next::Wait(None) => shared.wake.notified().await,
            Next::Wait(Some(due)) => {
                tokio::select! {
                    () = tokio::time::sleep_until(due.into()) => {}
                    () = shared.wake.notified() => {}
                }
            }
            Next::Flush(appends) => {
                let job = start_upload(appends, &store);
                if jobs.send(job).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// An appended partition's place in a flush: (append, partition within it).
type AppendAt = (usize, usize);

/// Where one partition of one append went in a flush: its chunk, and the offsets before its
/// first batch in that chunk.
#[derive(Clone, Copy, Debug)]
struct Route {
    chunk: usize,
    append: usize,
    partition: usize,
    offsets_before: i64,
}

/// Groups the flush by partition into one segment object and starts its upload.
fn start_upload(appends: Vec<Append>, store: &SegmentStore) -> FlushJob {
    // Plain batches share one chunk per partition; each producer's append gets its own chunk
    // (keyed by its position), so metadata can deduplicate or refuse it alone. One list sorted by
    // chunk, appends in order within one, rather than a map of lists: at 10,000 partitions a
    // flush is hundreds of chunks of one append each, and each list was an allocation.
    let mut placed: Vec<((TopicPartition, Option<AppendAt>), AppendAt)> = appends
        .iter()
        .enumerate()
        .flat_map(|(a, append)| {
            append.partitions.iter().enumerate().map(move |(p, part)| {
                let own_chunk = part.producer.is_some().then_some((a, p));
                ((part.topic_partition, own_chunk), (a, p))
            })
        })
        .collect();
    placed.sort_unstable();
    // Counted first: grown one push at a time, the lists below were copied over and over (2 %
    // of the agent at 10,000 partitions).
    let chunk_count = placed.chunk_by(|x, y| x.0 == y.0).count();
    let key = SegmentKey::generate();
    let mut writer = SegmentWriter::with_chunks(chunk_count);
    let mut chunks = Vec::with_capacity(chunk_count);
    let mut routes = Vec::with_capacity(placed.len());
    // Every chunk's bytes in one buffer, in object order: no buffer grows by copying, and the hot
    // tier takes its blocks from it without copying them again (`insert_object`).
    let data_bytes = appends.iter().flat_map(|a| &a.partitions).flat_map(|p| &p.batches).map(|b| b.bytes.len()).sum();
    let mut data = BytesMut::with_capacity(data_bytes);
    let mut pending = Vec::with_capacity(chunk_count);
    for chunk in placed.chunk_by(|x, y| x.0 == y.0) {
        let (topic_partition, own_chunk) = chunk[0].0;
        let producer = own_chunk.and_then(|(a, p)| appends[a].partitions[p].producer);
        let chunk_start = data.len();
        let mut batches =
            Vec::with_capacity(chunk.iter().map(|&(_, (a, p))| appends[a].partitions[p].batches.len()).sum());
        let mut offsets_before = 0i64;
        let mut uncompressed_bytes = 0u64;
        let mut stats =
            ChunkStats { batch_count: 0, record_count: 0, timestamp_min: i64::MAX, timestamp_max: i64::MIN };
        for &(_, (a, p)) in chunk {
            routes.push(Route { chunk: pending.len(), append: a, partition: p, offsets_before });
            for batch in &appends[a].partitions[p].batches {
                data.extend_from_slice(&batch.bytes);
                batches.push(BatchSummary {
                    offset_count: batch.offset_count,
                    timestamp_max: batch.timestamp_max,
                    base_sequence: batch.base_sequence,
                });
                offsets_before += i64::from(batch.offset_count);
                uncompressed_bytes += batch.uncompressed_bytes;
                stats.batch_count += 1;
                stats.record_count += batch.record_count;
                stats.timestamp_min = stats.timestamp_min.min(batch.timestamp_min);
                stats.timestamp_max = stats.timestamp_max.max(batch.timestamp_max);
            }
        }
        pending.push((topic_partition, chunk_start..data.len(), stats, batches, producer, uncompressed_bytes));
    }
    let data = data.freeze();
    for (topic_partition, range, stats, batches, producer, uncompressed_bytes) in pending {
        let entry = *writer.push_chunk(topic_partition, [data.slice(range)], stats);
        chunks.push(ChunkCommit {
            topic_id: topic_partition.topic_id,
            partition: topic_partition.partition,
            byte_start: entry.byte_start,
            byte_len: entry.byte_len,
            crc32c: entry.crc32c,
            batches,
            producer,
            uncompressed_bytes,
        });
    }
    let object = writer.finish();
    crate::metrics::FLUSH_SEGMENT_BYTES.observe(object.object_bytes as f64);
    let commit = SegmentCommit { key: key.as_str().to_owned(), object_bytes: object.object_bytes, chunks };
    // The object is the chunks, in push order from byte 0, then footer and trailer.
    let parts: Vec<bytes::Bytes> =
        std::iter::once(data).chain(object.payload.iter().skip(commit.chunks.len()).cloned()).collect();
    let blocks = object.blocks.clone();
    let (store, upload_key) = (store.clone(), key.clone());
    let upload = tokio::spawn(async move { store.put_segment(&upload_key, object).await });
    FlushJob { started: Instant::now(), commit, upload, key, parts, blocks, routes, appends }
}

/// How the flush buffer writes and commits.
#[derive(Clone, Debug)]
pub struct Pipeline {
    pub flush: FlushConfig,
    /// A flush not committed this long after it started is failed instead: garbage collection
    /// may delete an uncommitted object once it is twice as old.
    pub commit_deadline: std::time::Duration,
    pub fault: Option<Fault>,
}

/// What the committer task holds.
struct Committer {
    metadata: Metadata,
    cache: BlockCache,
    commit_deadline: std::time::Duration,
    fault: Option<Fault>,
}

/// Commits uploaded flushes one at a time, in flush order, and answers their producers.
async fn run_committer(shared: Arc<Shared>, mut jobs: mpsc::Receiver<FlushJob>, committer: Committer) {
    let Committer { metadata, cache, commit_deadline, fault } = committer;
    let mut holds = SequenceHolds::default();
    while let Some(job) = jobs.recv().await {
        let FlushJob { started, commit, upload, key, parts, blocks, routes, appends } = job;
        let chunk_count = commit.chunks.len();
        let producer_chunks: Vec<Option<ProducerChunk>> = commit.chunks.iter().map(ProducerChunk::of).collect();
        let results = match upload.await {
            Ok(Ok(())) if started.elapsed() > commit_deadline => {
                tracing::warn!(key = %commit.key, "flush not committed within its deadline; failing it");
                // Never proposed, so certainly not committed.
                undecided(AppendError::Storage("flush not committed within its deadline".into()), chunk_count)
            }
            Ok(Ok(())) => {
                if fault == Some(Fault::ExitBeforeCommit) {
                    tracing::error!(key = %commit.key, "fault injection: exiting between PUT and commit");
                    std::process::exit(86);
                }
                cache.insert_object(&key, &parts, &blocks, floe_storage::WrittenTier::Memory);
                let held = {
                    let state = metadata.read();
                    holds.held(&producer_chunks, |chunk| sequenced(&state, chunk), Instant::now())
                };
                commit_unheld(&metadata, commit, &held).await
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "segment upload failed");
                undecided(AppendError::Storage(e.to_string()), chunk_count)
            }
            Err(e) => undecided(AppendError::Storage(format!("upload task failed: {e}")), chunk_count),
        };
        let (outcomes, fates): (Vec<AppendResult>, Vec<ChunkFate>) = results.into_iter().unzip();
        // Before anyone is answered: a retry must find the hold its failure set.
        {
            let state = metadata.read();
            holds.settle(&producer_chunks, &fates, |chunk| sequenced(&state, chunk), Instant::now());
        }
        let mut replies: Vec<Vec<AppendResult>> =
            appends.iter().map(|a| vec![Err(AppendError::ShuttingDown); a.partitions.len()]).collect();
        for route in &routes {
            if let Some(outcome) = outcomes.get(route.chunk) {
                replies[route.append][route.partition] =
                    outcome.clone().map(|base_offset| base_offset + route.offsets_before);
            }
        }
        crate::metrics::FLUSH_SECONDS.observe(started.elapsed().as_secs_f64());
        for (append, reply) in appends.into_iter().zip(replies) {
            let _ = append.reply.send(reply);
        }
        // The flush is answered: in adaptive mode the next one may start now.
        let mut pending = shared.pending.lock_recovered();
        pending.in_flight = pending.in_flight.saturating_sub(1);
        let flush_now = shared.config.adaptive && pending.in_flight == 0 && pending.oldest.is_some();
        drop(pending);
        if flush_now {
            shared.wake.notify_one();
        }
    }
    shared.drained.send_replace(true);
}

/// Proposes the flush's chunks that are not held back (`held`, one per chunk) as one commit and
/// answers the held ones without proposing them; per chunk, its answer and fate. With every
/// chunk held nothing is proposed, and garbage collection deletes the object as an orphan.
async fn commit_unheld(
    metadata: &Metadata,
    mut commit: SegmentCommit,
    held: &[bool],
) -> Vec<(AppendResult, ChunkFate)> {
    let is_held = |index: usize| held.get(index).copied().unwrap_or(false);
    let chunk_count = commit.chunks.len();
    let held_count = (0..chunk_count).filter(|i| is_held(*i)).count();
    if held_count > 0 {
        crate::metrics::FLUSH_HELD_CHUNKS.inc_by(held_count as u64);
        tracing::debug!(key = %commit.key, held_count, "chunks held behind an earlier failed chunk of their producer");
    }
    let chunks = std::mem::take(&mut commit.chunks);
    commit.chunks = chunks.into_iter().enumerate().filter(|(i, _)| !is_held(*i)).map(|(_, chunk)| chunk).collect();
    let proposed = if commit.chunks.is_empty() { Vec::new() } else { propose_commit(metadata, commit).await };
    let mut proposed = proposed.into_iter();
    (0..chunk_count)
        .map(|i| {
            if is_held(i) {
                return (Err(AppendError::EarlierSequenceFailed), ChunkFate::Held);
            }
            proposed.next().unwrap_or_else(|| {
                let missing = AppendError::MetadataUnavailable("commit answered fewer chunks than proposed".into());
                (Err(missing), ChunkFate::Undecided)
            })
        })
        .collect()
}

/// Proposes one commit; per chunk, its answer and fate.
async fn propose_commit(metadata: &Metadata, commit: SegmentCommit) -> Vec<(AppendResult, ChunkFate)> {
    let chunk_count = commit.chunks.len();
    match metadata.propose(Command::CommitSegment(commit)).await {
        Ok(Outcome::SegmentCommitted { chunks }) => chunks
            .into_iter()
            .map(|chunk| match chunk {
                Ok(base_offset) => (Ok(base_offset), ChunkFate::Committed),
                Err(e) => (Err(AppendError::Rejected(e)), ChunkFate::Refused),
            })
            .collect(),
        Ok(other) => {
            tracing::error!(?other, "commit answered with an unexpected outcome");
            undecided(AppendError::MetadataUnavailable("unexpected commit outcome".into()), chunk_count)
        }
        Err(NodeError::Rejected(e)) => undecided(AppendError::Rejected(e), chunk_count),
        Err(NodeError::Unavailable(e)) => undecided(AppendError::MetadataUnavailable(e), chunk_count),
    }
}

/// Every chunk of a flush failed alike, before metadata decided on any.
fn undecided(error: AppendError, chunk_count: usize) -> Vec<(AppendResult, ChunkFate)> {
    vec![(Err(error), ChunkFate::Undecided); chunk_count]
}

#[cfg(test)]
mod tests;
