//! Reads one partition from an offset, and finds records by timestamp.

use bytes::{Bytes, BytesMut};
use floe_metadata::{AbortedTransaction, EntryData, IndexEntry, Partition, State, TopicId};
use floe_storage::{ChunkRef, LastBlock, ReadChunkError, SegmentKey};
use kafka_protocol::records::{RecordBatchDecoder, TimestampType};

use crate::Agent;
use crate::limits::{FETCH_EMPTY_ROUNDS_MAX, FETCH_PARTITION_ENTRIES_MAX, FETCH_PREFETCH_CHUNKS_MAX};
use crate::record_batch::{self, BatchHeader};

/// Why a partition read failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("offset {offset} is outside {log_start_offset}..={high_watermark}")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, high_watermark: i64 },
    /// Past the end of this agent's copy of the log, which may lag the metadata leader's (just
    /// restarted, or cut off for a while): the client asks again rather than reset its position.
    #[error("offset {offset} is past the log end this agent knows ({known_end}); it may not have caught up yet")]
    OffsetNotAvailable { offset: i64, known_end: i64 },
    #[error("leader epoch {requested} is newer than the partition's {current}")]
    UnknownLeaderEpoch { requested: i32, current: i32 },
    #[error("leader epoch {requested} is older than the partition's {current}")]
    FencedLeaderEpoch { requested: i32, current: i32 },
    #[error("reading chunk: {0}")]
    Storage(#[from] ReadChunkError),
    #[error("stored batch is malformed: {0}")]
    CorruptStoredBatch(String),
}

/// How much one partition read may return.
#[derive(Clone, Copy, Debug)]
pub struct ReadLimits {
    /// Bytes the records may take.
    pub max_bytes: usize,
    /// Return the first batch even if it is larger than `max_bytes`, so a consumer can always
    /// make progress (set for the first partition with data in a response).
    pub must_return_first: bool,
    /// Read only below the last stable offset, and list the aborted transactions read.
    pub read_committed: bool,
}

/// What a partition read found.
#[derive(Debug, Default)]
pub struct PartitionRead {
    pub records: Bytes,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub log_start_offset: i64,
    pub leader_epoch: i32,
    /// For read_committed: aborted transactions overlapping what was read.
    pub aborted_transactions: Vec<AbortedTransaction>,
    /// Where a reader that wants everything goes on: after the last batch read, or past
    /// stretches without batches (markers, compacted-away ranges) up to the read's end.
    pub next_offset: i64,
}

/// Where an entry's object is: its key and size (markers have none).
pub(crate) type ObjectAt = Option<(SegmentKey, u64)>;

/// The index entries to read (with their object; none for markers), copied out so no lock is
/// held across I/O.
struct Plan {
    entries: Vec<(IndexEntry, ObjectAt)>,
    high_watermark: i64,
    last_stable_offset: i64,
    /// Reads stop before this offset: the high watermark, or the LSO for read_committed.
    read_end: i64,
    log_start_offset: i64,
    leader_epoch: i32,
    aborted_transactions: Vec<AbortedTransaction>,
    /// Bytes of the planned entries: at least what the read returns from them.
    bytes: usize,
}

fn plan(
    agent: &Agent,
    topic_id: TopicId,
    partition: i32,
    offset: i64,
    current_leader_epoch: i32,
    limits: ReadLimits,
    caught_up: bool,
) -> Result<Plan, FetchError> {
    let state = agent.metadata.read();
    let log = state.partition(topic_id, partition).ok_or(FetchError::UnknownTopicOrPartition)?;
    if current_leader_epoch >= 0 && current_leader_epoch != log.leader_epoch {
        return Err(if current_leader_epoch > log.leader_epoch {
            FetchError::UnknownLeaderEpoch { requested: current_leader_epoch, current: log.leader_epoch }
        } else {
            FetchError::FencedLeaderEpoch { requested: current_leader_epoch, current: log.leader_epoch }
        });
    }
    if offset > log.next_offset && !caught_up && !agent.metadata.is_leader() {
        return Err(FetchError::OffsetNotAvailable { offset, known_end: log.next_offset });
    }
    if offset < log.log_start_offset || offset > log.next_offset {
        return Err(FetchError::OffsetOutOfRange {
            offset,
            log_start_offset: log.log_start_offset,
            high_watermark: log.next_offset,
        });
    }
    let last_stable_offset = log.last_stable_offset();
    let read_end = if limits.read_committed { last_stable_offset } else { log.next_offset };
    let mut entries = Vec::new();
    let mut bytes = 0usize;
    for entry in log.entries_from(offset).take(FETCH_PARTITION_ENTRIES_MAX) {
        if entry.base_offset >= read_end || (!entries.is_empty() && bytes >= limits.max_bytes) {
            break;
        }
        let key = match (&entry.data, entry.chunk()) {
            (_, Some(chunk)) => {
                bytes += chunk.byte_len as usize;
                let object = state
                    .objects
                    .get(&chunk.object_id)
                    .ok_or_else(|| FetchError::CorruptStoredBatch("index names an unknown object".into()))?;
                Some((SegmentKey::from_stored(object.key.clone()), object.object_bytes))
            }
            (EntryData::Marker(_), None) => {
                bytes += record_batch::CONTROL_BATCH_BYTES;
                None
            }
            (_, None) => None,
        };
        entries.push((entry.clone(), key));
    }
    let aborted_transactions = if limits.read_committed {
        aborted_overlapping(log, offset, entries.last().map_or(offset, |(e, _)| e.last_offset))
    } else {
        Vec::new()
    };
    Ok(Plan {
        entries,
        high_watermark: log.next_offset,
        last_stable_offset,
        read_end,
        log_start_offset: log.log_start_offset,
        leader_epoch: log.leader_epoch,
        aborted_transactions,
        bytes,
    })
}

/// The batches of an index entry: its chunk's bytes, or the control batch of a marker.
pub(crate) async fn entry_bytes(agent: &Agent, entry: &IndexEntry, object: ObjectAt) -> Result<Bytes, FetchError> {
    match (&entry.data, entry.chunk(), object) {
        (_, Some(chunk), Some((key, object_bytes))) => {
            let chunk = ChunkRef { key, byte_start: chunk.byte_start, byte_len: chunk.byte_len, crc32c: chunk.crc32c };
            Ok(agent.cache.read_chunk(&agent.store, &chunk, object_bytes).await?)
        }
        (EntryData::Marker(marker), ..) => Ok(record_batch::control_batch(marker, entry.timestamp_max)),
        (EntryData::Removed, ..) => Ok(Bytes::new()),
        (_, Some(_), None) | (_, None, _) => Err(FetchError::CorruptStoredBatch("chunk without an object".into())),
    }
}

/// Walks the batches of an entry's bytes with their offsets: written into key-compacted
/// batches, otherwise counted from the entry's base offset. The bytes come from `entry_bytes`,
/// checked whole against the chunk's CRC-32C, which covers every header and stored base offset.
pub(crate) fn batches_with_offsets<'a>(
    chunk: &'a Bytes,
    entry: &IndexEntry,
) -> impl Iterator<Item = Result<(i64, BatchHeader, Bytes), FetchError>> + 'a {
    let offsets_in_batches = entry.chunk().is_some_and(|c| c.offsets_in_batches);
    let mut next_base = entry.base_offset;
    record_batch::split(chunk).map(move |part| {
        let (header, batch) = part.map_err(|e| FetchError::CorruptStoredBatch(e.to_string()))?;
        let base = if offsets_in_batches { header.base_offset } else { next_base };
        next_base += header.offset_count();
        Ok((base, header, batch))
    })
}

/// Where a partition read puts the batches it takes, and which it wants.
struct Sink {
    out: BytesMut,
    offset: i64,
    /// The offset after the last batch taken (`offset` before any).
    taken_end: i64,
    read_end: i64,
    limits: ReadLimits,
    leader_epoch: i32,
}

enum Want {
    /// Entirely below the fetch offset.
    Skip,
    Take,
    /// Past the read's end, or over its size: the read is done.
    Stop,
}

impl Sink {
    fn want(&self, base: i64, header: &BatchHeader) -> Want {
        let first = self.out.is_empty() && self.limits.must_return_first;
        if base + header.offset_count() <= self.offset {
            Want::Skip
        } else if base >= self.read_end || (!first && self.out.len() + header.batch_bytes > self.limits.max_bytes) {
            Want::Stop
        } else {
            Want::Take
        }
    }

    fn push(&mut self, batch: &[u8], base: i64, header: &BatchHeader) {
        let start = self.out.len();
        self.out.extend_from_slice(batch);
        record_batch::stamp(&mut self.out[start..], base, self.leader_epoch);
        self.taken_end = self.taken_end.max(base + header.offset_count());
    }
}

/// Appends the batches of one entry the read wants; false once the read is done. A chunk is
/// walked header by header through the block cache, so only the blocks up to the last batch
/// taken are loaded, and each batch taken from blocks read back from storage is checked against
/// its own CRC.
///
/// The headers of skipped batches, and in cleaned chunks the base offsets written into batches
/// (outside the batch CRC), decide the offsets of what is returned without a CRC of their own.
/// For objects of segment format 2 the block checksum covers them: the block cache checks every
/// block against its object's footer (from the store), or the checksum kept or named with it
/// (disk tier, peer), before a view sees it. Objects of format 1 have no block checksums; for
/// them the walk checks what it can cheaply: a batch spans at least one offset and never starts
/// before the previous one ended.
async fn read_entry(
    agent: &Agent,
    entry: &IndexEntry,
    object: &ObjectAt,
    sink: &mut Sink,
    held: &mut LastBlock,
) -> Result<bool, FetchError> {
    let (Some(chunk), Some((key, object_bytes))) = (entry.chunk(), object) else {
        // A marker's built control batch, or nothing for a removed stretch.
        let bytes = entry_bytes(agent, entry, object.clone()).await?;
        for part in batches_with_offsets(&bytes, entry) {
            let (base, header, batch) = part?;
            match sink.want(base, &header) {
                Want::Skip => {}
                Want::Take => sink.push(&batch, base, &header),
                Want::Stop => return Ok(false),
            }
        }
        return Ok(true);
    };
    let chunk_ref =
        ChunkRef { key: key.clone(), byte_start: chunk.byte_start, byte_len: chunk.byte_len, crc32c: chunk.crc32c };
    let mut view = agent.cache.view_holding(&agent.store, chunk_ref, *object_bytes, held);
    let (mut at, mut next_base) = (0u64, entry.base_offset);
    // Where the previous batch's offsets ended: the next batch starts there or later.
    let mut previous_end = i64::MIN;
    while at < view.len() {
        let head = view.slice(at..(at + record_batch::HEADER_BYTES as u64).min(view.len())).await?;
        let header = BatchHeader::parse_header(&head).map_err(|e| FetchError::CorruptStoredBatch(e.to_string()))?;
        let end = at + header.batch_bytes as u64;
        let base = if chunk.offsets_in_batches { header.base_offset } else { next_base };
        if header.last_offset_delta < 0 || base < previous_end {
            return Err(FetchError::CorruptStoredBatch(format!(
                "a batch at offset {base} (last offset delta {}) where {previous_end} or later was due, in {key}",
                header.last_offset_delta
            )));
        }
        previous_end = base.saturating_add(header.offset_count());
        next_base += header.offset_count();
        match sink.want(base, &header) {
            Want::Skip => {}
            Want::Take => {
                let batch = view.slice(at..end).await?;
                // Bytes this agent wrote were checked at produce (or built by its compaction) and
                // never left its memory.
                if !view.written_here(at..end) && !record_batch::crc_matches(&batch, &header) {
                    return Err(view.damaged().into());
                }
                sink.push(&batch, base, &header);
            }
            Want::Stop => {
                view.hold(held);
                return Ok(false);
            }
        }
        at = end;
    }
    view.hold(held);
    Ok(true)
}

/// The answer to a read at the partition's end (where a caught-up consumer asks): its offsets and
/// no records, found under the caller's guard without a plan, I/O or a lock of its own. A Fetch
/// of thousands of partitions is mostly such reads. `None` when the read has something else to
/// say (records, an error): [`read_partition`] gives that, and its answer at the end is this one.
pub fn read_at_end(
    state: &State,
    topic_id: TopicId,
    partition: i32,
    offset: i64,
    current_leader_epoch: i32,
    read_committed: bool,
) -> Option<PartitionRead> {
    let log = state.partition(topic_id, partition)?;
    let last_stable_offset = log.last_stable_offset();
    let read_end = if read_committed { last_stable_offset } else { log.next_offset };
    let epoch_matches = current_leader_epoch < 0 || current_leader_epoch == log.leader_epoch;
    if !epoch_matches || offset != read_end || offset < log.log_start_offset {
        return None;
    }
    Some(PartitionRead {
        records: Bytes::new(),
        high_watermark: log.next_offset,
        last_stable_offset,
        log_start_offset: log.log_start_offset,
        leader_epoch: log.leader_epoch,
        aborted_transactions: if read_committed { aborted_overlapping(log, offset, offset) } else { Vec::new() },
        next_offset: offset,
    })
}

/// Transactions that aborted at or after `offset` and began at or before `read_to`.
fn aborted_overlapping(log: &Partition, offset: i64, read_to: i64) -> Vec<AbortedTransaction> {
    let from = log.aborted_transactions.partition_point(|a| a.last_offset < offset);
    log.aborted_transactions.range(from..).filter(|a| a.first_offset <= read_to).copied().collect()
}

/// Reads whole batches of one partition starting with the batch that holds `offset`; `held`
/// keeps a block from one read to the next, for a caller reading many partitions.
pub async fn read_partition(
    agent: &Agent,
    topic_id: TopicId,
    partition: i32,
    offset: i64,
    current_leader_epoch: i32,
    limits: ReadLimits,
    held: &mut LastBlock,
) -> Result<PartitionRead, FetchError> {
    let mut out = BytesMut::new();
    let mut from = offset;
    let mut rounds = 0;
    let mut caught_up = false;
    loop {
        let plan = match plan(agent, topic_id, partition, from, current_leader_epoch, limits, caught_up) {
            // A position past the end of this agent's copy: the consumer read further through
            // another agent, or is truly past the log. Once the copy has caught up with the
            // metadata leader the end is the log's, and past it is out of range; while it cannot
            // catch up the answer stays retriable, not a reset.
            Err(FetchError::OffsetNotAvailable { .. }) if !caught_up && agent.metadata.catch_up().await.is_ok() => {
                caught_up = true;
                continue;
            }
            planned => planned?,
        };
        let covered_to = plan.entries.last().map(|(e, _)| e.last_offset);
        // Consecutive chunks are in different objects, as a rule: the blocks of the next ones
        // load while one is read (a window of them), not one GET after another.
        let prefetch = |(entry, object): &(IndexEntry, ObjectAt)| {
            if let (Some(chunk), Some((key, object_bytes))) = (entry.chunk(), object) {
                agent.cache.prefetch(&agent.store, key, *object_bytes, chunk.byte_start);
            }
        };
        plan.entries.iter().skip(1).take(FETCH_PREFETCH_CHUNKS_MAX).for_each(prefetch);
        // Room for the whole read up front: growing a megabyte buffer by doubling copies it
        // over and over.
        out.reserve(plan.bytes.min(limits.max_bytes));
        let mut sink =
            Sink { out, offset, taken_end: offset, read_end: plan.read_end, limits, leader_epoch: plan.leader_epoch };
        let mut stopped = false;
        for (i, (entry, object)) in plan.entries.iter().enumerate() {
            if let Some(ahead) = plan.entries.get(i + 1 + FETCH_PREFETCH_CHUNKS_MAX) {
                prefetch(ahead);
            }
            if !read_entry(agent, entry, object, &mut sink, held).await? {
                stopped = true;
                break;
            }
        }
        // Stopped early: after what was taken. Otherwise every planned entry was walked, so the
        // read covered up to the last one (or to its end), batches or not.
        let next_offset = if stopped {
            sink.taken_end
        } else {
            covered_to.map_or(from, |to| (to + 1).min(plan.read_end)).max(sink.taken_end)
        };
        out = sink.out;
        rounds += 1;
        // Key compaction leaves stretches without batches; a read that found only those goes
        // on, so a consumer inside one gets the next batch rather than nothing forever.
        let more = covered_to.filter(|to| out.is_empty() && to + 1 < plan.read_end && rounds < FETCH_EMPTY_ROUNDS_MAX);
        match more {
            Some(to) => from = to + 1,
            None => {
                return Ok(PartitionRead {
                    records: out.freeze(),
                    high_watermark: plan.high_watermark,
                    last_stable_offset: plan.last_stable_offset,
                    log_start_offset: plan.log_start_offset,
                    leader_epoch: plan.leader_epoch,
                    aborted_transactions: plan.aborted_transactions,
                    next_offset,
                });
            }
        }
    }
}

/// A record found by timestamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampHit {
    pub offset: i64,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

/// Finds, for `target >= 0`, the earliest record whose timestamp is at least `target`; for
/// `target == -3` (KIP-734), the record with the largest timestamp. Looks inside batches.
pub async fn records_at_timestamp(
    agent: &Agent,
    topic_id: TopicId,
    partition: i32,
    target: i64,
) -> Result<Option<TimestampHit>, FetchError> {
    let (candidates, log_start_offset, leader_epoch) = {
        let state = agent.metadata.read();
        let log = state.partition(topic_id, partition).ok_or(FetchError::UnknownTopicOrPartition)?;
        let entries: Vec<&IndexEntry> = if target == -3 {
            log.entry_with_max_timestamp().into_iter().collect()
        } else {
            // Timestamps need not grow with offsets: every entry reaching the target may hold an
            // earlier match than the first one, so they are all candidates, in offset order.
            log.data_entries().filter(|e| e.timestamp_max >= target).collect()
        };
        let mut candidates = Vec::with_capacity(entries.len());
        for e in entries {
            let object = e
                .object_id()
                .and_then(|id| state.objects.get(&id))
                .ok_or_else(|| FetchError::CorruptStoredBatch("index names an unknown object".into()))?;
            candidates.push((e.clone(), Some((SegmentKey::from_stored(object.key.clone()), object.object_bytes))));
        }
        (candidates, log.log_start_offset, log.leader_epoch)
    };
    let want_max = target == -3;
    let mut best: Option<TimestampHit> = None;
    for (entry, key) in candidates {
        let chunk = entry_bytes(agent, &entry, key).await?;
        for part in batches_with_offsets(&chunk, &entry) {
            let (base, header, batch) = part?;
            if header.max_timestamp < target && !want_max {
                continue;
            }
            let mut stamped = BytesMut::from(&batch[..]);
            record_batch::stamp(&mut stamped, base, leader_epoch);
            let records = RecordBatchDecoder::decode(&mut stamped.freeze())
                .map_err(|e| FetchError::CorruptStoredBatch(e.to_string()))?
                .records;
            for r in records {
                if r.offset < log_start_offset {
                    continue;
                }
                let timestamp =
                    if r.timestamp_type == TimestampType::LogAppend { header.max_timestamp } else { r.timestamp };
                let better = match best {
                    None => want_max || timestamp >= target,
                    Some(b) if want_max => timestamp > b.timestamp,
                    Some(b) => timestamp >= target && r.offset < b.offset,
                };
                if better {
                    best = Some(TimestampHit { offset: r.offset, timestamp, leader_epoch });
                }
            }
        }
        // Candidates come in offset order, so the first one with a match holds the earliest.
        if best.is_some() && !want_max {
            break;
        }
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use floe_metadata::Command;

    use super::*;

    /// A topic of one partition whose log runs from 3 to 10, with a transaction open from 7.
    fn state() -> (State, TopicId) {
        let topic_id = TopicId::from_u128(1);
        let mut state = State::default();
        let create =
            Command::CreateTopic { name: "t".into(), topic_id, partition_count: 1, configs: Default::default() };
        state.apply(1, create).expect("topic");
        let log = std::sync::Arc::make_mut(&mut state.topics.get_mut(&topic_id).expect("topic").partitions[0]);
        (log.log_start_offset, log.next_offset) = (3, 10);
        log.open_transactions.insert(42, 7);
        (state, topic_id)
    }

    #[test]
    fn only_a_read_at_the_end_is_answered_without_a_plan() {
        let (state, topic) = state();
        let epoch = state.partition(topic, 0).expect("partition").leader_epoch;
        let at_end = read_at_end(&state, topic, 0, 10, epoch, false).expect("read_uncommitted at the log end");
        assert_eq!(
            (at_end.records.len(), at_end.high_watermark, at_end.last_stable_offset, at_end.log_start_offset),
            (0, 10, 7, 3)
        );
        assert_eq!(at_end.next_offset, 10);
        assert!(read_at_end(&state, topic, 0, 10, -1, false).is_some(), "no epoch named");
        // read_committed ends at the last stable offset.
        assert!(read_at_end(&state, topic, 0, 7, epoch, true).is_some());
        assert!(read_at_end(&state, topic, 0, 10, epoch, true).is_none(), "past the LSO, not at the read's end");
        // Anything else goes the whole way: data to read, out of range, a wrong epoch, no partition.
        for offset in [0, 3, 9, 11] {
            assert!(read_at_end(&state, topic, 0, offset, epoch, false).is_none(), "offset {offset}");
        }
        assert!(read_at_end(&state, topic, 0, 10, epoch + 1, false).is_none());
        assert!(read_at_end(&state, topic, 1, 10, epoch, false).is_none());
        assert!(read_at_end(&state, TopicId::from_u128(2), 0, 10, epoch, false).is_none());
    }
}
