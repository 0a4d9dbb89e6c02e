//! Offsets: sequencing committed segments, the log start offset, object references.
//!
//! From format 12 a segment object key is committed at most once, and not after its deadline:
//! [`SEGMENT_COMMIT_WINDOW_MS`] after the key was drawn (the time in its UUIDv7), measured on
//! the leader's clock as every replica knows it ([`State::leader_time_floor_ms`]). A key stays
//! in `State::recent_commits` until its deadline has passed, past the answers kept for retries
//! if need be, so that a late copy of its commit (held by a paused node or a retransmit queue)
//! is refused rather than sequenced again; after the deadline the deadline itself refuses it.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::transactions::Admission;
use super::{EntryData, IndexEntry, ObjectId, ObjectRecord, Partition, State, TopicId};
use crate::command::{CommandError, CommittedChunk, Outcome, SegmentCommit};
use crate::limits::{
    CHUNK_BATCH_COUNT_MAX, COMMIT_CHUNK_COUNT_MAX, PARTITION_OFFSET_MAX, RECENT_COMMIT_CHUNKS_MAX,
    RECENT_COMMIT_KEYS_MAX, RECENT_COMMITS_MAX, SEGMENT_COMMIT_WINDOW_MS,
};

/// A segment commit's answer as [`State::recent_commits`] keeps it: the base offset of each
/// chunk when every chunk was appended (nearly always), 8 bytes a chunk where a `Result` takes
/// 48, else the results as given. With thousands of partitions a commit holds hundreds of
/// chunks, and up to a million chunks' answers are kept. Stored as the list of results either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitAnswer {
    Appended(Box<[i64]>),
    Mixed(Box<[CommittedChunk]>),
}

impl CommitAnswer {
    pub fn new(chunks: Vec<CommittedChunk>) -> Self {
        match chunks.iter().map(|c| c.as_ref().ok().copied()).collect::<Option<Box<[i64]>>>() {
            Some(offsets) => Self::Appended(offsets),
            None => Self::Mixed(chunks.into_boxed_slice()),
        }
    }

    /// The answer of a held key (its commit's answer dropped, `remember_commit`).
    fn held() -> Self {
        Self::Appended(Box::default())
    }

    /// Chunks answered.
    pub fn len(&self) -> usize {
        match self {
            Self::Appended(offsets) => offsets.len(),
            Self::Mixed(chunks) => chunks.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn chunks(&self) -> Vec<CommittedChunk> {
        match self {
            Self::Appended(offsets) => offsets.iter().map(|&o| Ok(o)).collect(),
            Self::Mixed(chunks) => chunks.to_vec(),
        }
    }
}

impl super::stored::Restate<Vec<CommittedChunk>> for CommitAnswer {
    fn restate(self) -> Vec<CommittedChunk> {
        match self {
            Self::Appended(offsets) => offsets.iter().map(|&o| Ok(o)).collect(),
            Self::Mixed(chunks) => chunks.into_vec(),
        }
    }
}

impl super::stored::WriteStored for CommitAnswer {
    fn write_stored<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Appended(offsets) => serializer.collect_seq(offsets.iter().map(|&o| CommittedChunk::Ok(o))),
            Self::Mixed(chunks) => serializer.collect_seq(chunks.iter()),
        }
    }
}

impl super::stored::Restate<CommitAnswer> for Vec<CommittedChunk> {
    fn restate(self) -> CommitAnswer {
        CommitAnswer::new(self)
    }
}

/// The directory of segment object keys (`floe_storage::keys::SEGMENTS_DIR`), with its slash.
const SEGMENT_KEY_PREFIX: &str = "segments/";

/// When an agent drew a segment object key, in ms since the epoch by its clock. Agents' keys
/// are `segments/<UUIDv7>.seg` (`floe_storage::SegmentKey::generate`: the UUID in lowercase hex
/// without dashes), and a UUIDv7 opens with the milliseconds it was drawn at, so these keys also
/// sort by that time. `None` for a key of any other shape (tests', the simulation's): its commit
/// has no deadline and is remembered only while its answer is.
pub(super) fn segment_key_drawn_ms(key: &str) -> Option<i64> {
    let uuid = key.strip_prefix(SEGMENT_KEY_PREFIX)?.strip_suffix(".seg")?.as_bytes();
    if uuid.len() != 32 || !uuid.iter().all(|&b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) || uuid[12] != b'7' {
        return None;
    }
    let drawn_ms = std::str::from_utf8(&uuid[..12]).ok()?;
    i64::from_str_radix(drawn_ms, 16).ok()
}

/// Why a segment commit of `key` is not applied although an earlier copy of it may have been.
fn refused(key: &str, why: String) -> CommandError {
    CommandError::SegmentCommitRefused { key: key.to_owned(), why }
}

/// Checks a commit as a whole before anything changes.
fn validate_commit(commit: &SegmentCommit) -> Result<(), CommandError> {
    let invalid = |reason: String| Err(CommandError::InvalidCommit(reason));
    if commit.key.is_empty() {
        return invalid("empty object key".to_owned());
    }
    if commit.chunks.is_empty() || commit.chunks.len() > COMMIT_CHUNK_COUNT_MAX {
        return invalid(format!("{} chunks; 1..={COMMIT_CHUNK_COUNT_MAX} allowed", commit.chunks.len()));
    }
    for chunk in &commit.chunks {
        if chunk.batches.is_empty() || chunk.batches.len() > CHUNK_BATCH_COUNT_MAX {
            return invalid(format!("chunk with {} batches; 1..={CHUNK_BATCH_COUNT_MAX} allowed", chunk.batches.len()));
        }
        if chunk.batches.iter().any(|b| b.offset_count == 0) {
            return invalid("a batch occupies no offsets".to_owned());
        }
        if let Some(producer) = chunk.producer
            && (producer.producer_id < 0 || producer.producer_epoch < 0)
        {
            return invalid(format!("producer id {} epoch {}", producer.producer_id, producer.producer_epoch));
        }
        let end = chunk.byte_start.checked_add(u64::from(chunk.byte_len));
        if end.is_none_or(|end| end > commit.object_bytes) || chunk.byte_len == 0 {
            return invalid(format!("chunk bytes {}+{} outside the object", chunk.byte_start, chunk.byte_len));
        }
    }
    Ok(())
}

impl State {
    pub(super) fn partition_mut(&mut self, topic_id: TopicId, partition: i32) -> Option<&mut Partition> {
        let index = usize::try_from(partition).ok()?;
        let log = self.topics.get_mut(&topic_id)?.partitions.get_mut(index)?;
        self.changed.partition(topic_id, partition);
        Some(std::sync::Arc::make_mut(log))
    }

    /// Grouped commits, each applied as [`State::commit_segment`] would be, in order.
    pub(super) fn commit_segments(&mut self, commits: &[SegmentCommit]) -> Result<Outcome, CommandError> {
        if commits.len() > crate::limits::COMMIT_GROUP_MAX {
            return Err(CommandError::InvalidCommit(format!(
                "more than {} grouped commits",
                crate::limits::COMMIT_GROUP_MAX
            )));
        }
        Ok(Outcome::SegmentsCommitted(commits.iter().map(|c| self.commit_segment(c)).collect()))
    }

    pub(super) fn commit_segment(&mut self, commit: &SegmentCommit) -> Result<Outcome, CommandError> {
        validate_commit(commit)?;
        if let Some(chunks) = self.recent_commits.get(&commit.key) {
            if chunks.is_empty() {
                return Err(refused(&commit.key, "it was committed before; its offsets are no longer kept".into()));
            }
            return Ok(Outcome::SegmentCommitted { chunks: chunks.chunks() });
        }
        if self.applies_format(12) {
            self.admit_segment_key(&commit.key)?;
        }
        let key = commit.key.clone();
        let object_id = self.next_object_id;
        let mut reference_count = 0u64;
        let mut results = Vec::with_capacity(commit.chunks.len());
        for chunk in &commit.chunks {
            if self.partition(chunk.topic_id, chunk.partition).is_none() {
                results.push(Err(CommandError::UnknownTopicOrPartition));
                continue;
            }
            if let Err(e) = self.refuse_mirror(chunk.topic_id) {
                results.push(Err(e));
                continue;
            }
            if let Some(producer) = chunk.producer {
                match self.admit_producer_chunk(chunk, producer) {
                    Ok(Admission::Append) => {}
                    Ok(Admission::Duplicate(base_offset)) => {
                        results.push(Ok(base_offset));
                        continue;
                    }
                    Err(e) => {
                        results.push(Err(e));
                        continue;
                    }
                }
            }
            let Some(partition) = self.partition_mut(chunk.topic_id, chunk.partition) else {
                unreachable!("the partition was found above");
            };
            let offset_count: i64 = chunk.batches.iter().map(|b| i64::from(b.offset_count)).sum();
            let timestamp_max = chunk.batches.iter().map(|b| b.timestamp_max).max().unwrap_or(i64::MIN);
            assert!(offset_count > 0, "validate_commit rejects empty chunks");
            let base_offset = partition.next_offset;
            // Commits come over the network: a flood of huge offset counts must not overflow.
            if base_offset.checked_add(offset_count).is_none_or(|end| end > PARTITION_OFFSET_MAX) {
                results.push(Err(CommandError::LimitReached(format!("partition offsets past {PARTITION_OFFSET_MAX}"))));
                continue;
            }
            let last_offset = base_offset + offset_count - 1;
            assert!(partition.log_start_offset <= base_offset);
            assert!(partition.index.back().is_none_or(|e| e.last_offset + 1 == base_offset), "index stays contiguous");
            partition.index.push_back(IndexEntry {
                base_offset,
                last_offset,
                timestamp_max,
                data: EntryData::Chunk {
                    object_id,
                    byte_start: chunk.byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: chunk.crc32c,
                },
            });
            partition.next_offset = last_offset + 1;
            partition.index_bytes += u64::from(chunk.byte_len);
            reference_count += 1;
            if let Some(producer) = chunk.producer {
                self.record_producer_chunk(chunk, producer, base_offset, last_offset, timestamp_max);
            }
            if let Some(topic) = self.topics.get(&chunk.topic_id) {
                self.usage.add_open(
                    super::tenant_of_stored_name(&topic.name),
                    [
                        (super::Meter::ProducedBytes, u64::from(chunk.byte_len)),
                        (super::Meter::ProducedUncompressedBytes, chunk.uncompressed_bytes),
                        (super::Meter::ProducedRecords, offset_count as u64),
                    ],
                );
            }
            results.push(Ok(base_offset));
        }
        if reference_count > 0 {
            self.objects.insert(
                object_id,
                ObjectRecord { key: key.clone(), object_bytes: commit.object_bytes, reference_count },
            );
            self.next_object_id += 1;
        }
        self.remember_commit(key, CommitAnswer::new(results.clone()));
        Ok(Outcome::SegmentCommitted { chunks: results })
    }

    /// The latest time the leader's clock is known to have reached, the same on every replica:
    /// the end of the last usage minute closed (`CloseUsageMinute`, which the leader's duties
    /// propose stamped with the leader's clock as each minute passes, so while they run this is
    /// less than a minute behind it). Never moves back. `None` before the first close.
    pub fn leader_time_floor_ms(&self) -> Option<i64> {
        self.usage.closed_through_ms.map(|closed| closed.saturating_add(super::MINUTE_MS))
    }

    /// Whether a commit of `key` is past its deadline: the key was drawn over
    /// [`SEGMENT_COMMIT_WINDOW_MS`] before [`State::leader_time_floor_ms`].
    fn segment_key_expired(&self, key: &str) -> bool {
        match (segment_key_drawn_ms(key), self.leader_time_floor_ms()) {
            (Some(drawn_ms), Some(floor_ms)) => floor_ms > drawn_ms.saturating_add(SEGMENT_COMMIT_WINDOW_MS),
            _ => false,
        }
    }

    /// Format 12's admission of a key the state does not hold. Past its deadline a commit is
    /// refused: an earlier copy may have been applied and its key forgotten since, or its object
    /// collected as an orphan. With [`RECENT_COMMIT_KEYS_MAX`] keys held it is refused too,
    /// rather than a key forgotten before its deadline.
    fn admit_segment_key(&self, key: &str) -> Result<(), CommandError> {
        if self.segment_key_expired(key) {
            let window_secs = SEGMENT_COMMIT_WINDOW_MS / 1000;
            return Err(refused(key, format!("its key was drawn over {window_secs} s before the leader's time")));
        }
        if self.recent_commits.len() >= RECENT_COMMIT_KEYS_MAX {
            return Err(refused(key, format!("{RECENT_COMMIT_KEYS_MAX} keys are held until their deadlines pass")));
        }
        Ok(())
    }

    /// Remembers a commit's answer under its key. Answers are dropped oldest first past
    /// [`RECENT_COMMITS_MAX`] commits and, from format 15, past [`RECENT_COMMIT_CHUNKS_MAX`]
    /// chunks answered (the newest answer always stays). A key whose answer is dropped is
    /// forgotten with it, except from format 12 a key with a drawn time ([`segment_key_drawn_ms`])
    /// before its deadline: that one is held with an empty answer (no commit is answered so)
    /// until [`State::forget_expired_commit_keys`].
    fn remember_commit(&mut self, key: String, chunks: CommitAnswer) {
        assert!(!chunks.is_empty(), "validate_commit rejects commits without chunks: an empty answer marks a held key");
        self.recent_commit_chunks += chunks.len();
        let known = self.recent_commits.insert(key.clone(), chunks);
        assert!(known.is_none(), "a key is applied once: a known key is answered or refused");
        self.recent_commit_keys.push_back(key);
        let chunk_bound = self.applies_format(15);
        while self.recent_commit_keys.len() > RECENT_COMMITS_MAX
            || (chunk_bound
                && self.recent_commit_keys.len() > 1
                && self.recent_commit_chunks > RECENT_COMMIT_CHUNKS_MAX)
        {
            self.drop_oldest_answer();
        }
        assert!(self.recent_commit_keys.len() <= self.recent_commits.len(), "every key with an answer is remembered");
    }

    /// Drops the oldest kept answer; its key is held while a copy of its commit could still be
    /// admitted (see [`State::remember_commit`]).
    fn drop_oldest_answer(&mut self) {
        let Some(old) = self.recent_commit_keys.pop_front() else { return };
        let held = self.applies_format(12) && segment_key_drawn_ms(&old).is_some() && !self.segment_key_expired(&old);
        let answer = if held {
            self.recent_commits.get_mut(&old).map(|answer| std::mem::replace(answer, CommitAnswer::held()))
        } else {
            self.recent_commits.remove(&old)
        };
        let answer = answer.expect("every key with an answer is remembered");
        self.recent_commit_chunks -= answer.len();
    }

    /// Forgets the keys whose deadline has passed, as the leader's time moves on: from now on
    /// their deadline refuses any copy. Before format 15 only held keys (remembered without
    /// their answers) go; from format 15 kept answers go too, since their agents gave up on
    /// those commits a minute before at the latest. Keys with a drawn time sort by it, so the
    /// search stops at the first one still in time.
    pub(super) fn forget_expired_commit_keys(&mut self) {
        if !self.applies_format(12) {
            return;
        }
        let Some(floor_ms) = self.leader_time_floor_ms() else { return };
        let answers_too = self.applies_format(15);
        let expired: Vec<String> = self
            .recent_commits
            .range::<str, _>((Bound::Included(SEGMENT_KEY_PREFIX), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(SEGMENT_KEY_PREFIX))
            .filter_map(|(key, answer)| segment_key_drawn_ms(key).map(|drawn_ms| (key, answer, drawn_ms)))
            .take_while(|(_, _, drawn_ms)| floor_ms > drawn_ms.saturating_add(SEGMENT_COMMIT_WINDOW_MS))
            .filter(|(_, answer, _)| answers_too || answer.is_empty())
            .map(|(key, _, _)| key.clone())
            .collect();
        let mut answered = BTreeSet::new();
        for key in expired {
            if let Some(answer) = self.recent_commits.remove(&key)
                && !answer.is_empty()
            {
                self.recent_commit_chunks -= answer.len();
                answered.insert(key);
            }
        }
        if !answered.is_empty() {
            self.recent_commit_keys.retain(|key| !answered.contains(key));
        }
    }

    pub(super) fn delete_records(
        &mut self,
        topic_id: TopicId,
        partition: i32,
        offset: i64,
    ) -> Result<Outcome, CommandError> {
        let log = self.partition_mut(topic_id, partition).ok_or(CommandError::UnknownTopicOrPartition)?;
        let offset = if offset == -1 { log.next_offset } else { offset };
        if offset < 0 || offset > log.next_offset {
            return Err(CommandError::OffsetOutOfRange {
                offset,
                log_start_offset: log.log_start_offset,
                high_watermark: log.next_offset,
            });
        }
        log.log_start_offset = log.log_start_offset.max(offset);
        let log_start_offset = log.log_start_offset;
        let mut released = Vec::new();
        while log.index.front().is_some_and(|e| e.last_offset < log_start_offset) {
            if let Some(entry) = log.index.pop_front() {
                log.index_bytes -= entry.stored_bytes();
                released.extend(entry.object_id());
            }
        }
        while log.aborted_transactions.front().is_some_and(|a| a.last_offset < log_start_offset) {
            log.aborted_transactions.pop_front();
        }
        assert!(log.log_start_offset <= log.next_offset);
        for object_id in released {
            self.release_object(object_id);
        }
        Ok(Outcome::LogStartOffset { offset: log_start_offset })
    }

    /// Drops one index reference to an object. Objects with no references stay listed (with a
    /// count of zero) so garbage collection can find and delete them.
    pub(super) fn release_object(&mut self, object_id: ObjectId) {
        let object = self.objects.get_mut(&object_id).expect("every indexed object is listed");
        assert!(object.reference_count > 0, "references are released once");
        object.reference_count -= 1;
    }
}
