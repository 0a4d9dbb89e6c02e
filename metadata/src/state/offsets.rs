//! Offsets: sequencing committed segments, the log start offset, object references.

use super::transactions::Admission;
use super::{EntryData, IndexEntry, ObjectId, ObjectRecord, Partition, State, TopicId};
use crate::command::{CommandError, Outcome, SegmentCommit};
use crate::limits::{CHUNK_BATCH_COUNT_MAX, COMMIT_CHUNK_COUNT_MAX, PARTITION_OFFSET_MAX, RECENT_COMMITS_MAX};

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
        self.topics.get_mut(&topic_id)?.partitions.get_mut(index)
    }

    pub(super) fn commit_segment(&mut self, commit: SegmentCommit) -> Result<Outcome, CommandError> {
        validate_commit(&commit)?;
        if let Some(chunks) = self.recent_commits.get(&commit.key) {
            return Ok(Outcome::SegmentCommitted { chunks: chunks.clone() });
        }
        let key = commit.key.clone();
        let object_id = self.next_object_id;
        let mut reference_count = 0u64;
        let mut results = Vec::with_capacity(commit.chunks.len());
        for chunk in commit.chunks {
            if self.partition(chunk.topic_id, chunk.partition).is_none() {
                results.push(Err(CommandError::UnknownTopicOrPartition));
                continue;
            }
            if let Err(e) = self.refuse_mirror(chunk.topic_id) {
                results.push(Err(e));
                continue;
            }
            if let Some(producer) = chunk.producer {
                match self.admit_producer_chunk(&chunk, producer) {
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
                self.record_producer_chunk(&chunk, producer, base_offset, last_offset, timestamp_max);
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
                ObjectRecord { key: commit.key, object_bytes: commit.object_bytes, reference_count },
            );
            self.next_object_id += 1;
        }
        self.remember_commit(key, results.clone());
        Ok(Outcome::SegmentCommitted { chunks: results })
    }

    fn remember_commit(&mut self, key: String, chunks: Vec<crate::command::CommittedChunk>) {
        self.recent_commits.insert(key.clone(), chunks);
        self.recent_commit_keys.push_back(key);
        while self.recent_commit_keys.len() > RECENT_COMMITS_MAX {
            if let Some(old) = self.recent_commit_keys.pop_front() {
                self.recent_commits.remove(&old);
            }
        }
        assert_eq!(self.recent_commits.len(), self.recent_commit_keys.len(), "keys are never reused");
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
