//! The packed form of grouped segment commits (format 13, [`Command::CommitSegmentsPacked`]).
//!
//! In memory it is the same `Vec<SegmentCommit>` as [`Command::CommitSegments`]; only the
//! encoding differs. At many partitions almost every chunk holds one small batch, and the plain
//! form spends about 41 bytes on it, 17 of them on the topic's UUID. Here each topic is written
//! once per entry and chunks name it by position, a chunk's start is written as its distance from
//! the end of the chunk before (0 when they are contiguous, as flushes lay them out), timestamps
//! as the change from the batch before, the uncompressed size as the excess over the stored one,
//! and the CRC in four fixed bytes: about 16 bytes per one-batch chunk. Every value round-trips
//! exactly, whatever the commit holds (wrapping arithmetic on the deltas).
//!
//! [`Command::CommitSegmentsPacked`]: super::Command::CommitSegmentsPacked
//! [`Command::CommitSegments`]: super::Command::CommitSegments

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{BatchSummary, ChunkCommit, ChunkProducer, SegmentCommit};
use crate::state::TopicId;

/// Segment commits grouped into one entry, encoded packed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedCommits(pub Vec<SegmentCommit>);

/// The encoded layout (format 13).
#[derive(Serialize, Deserialize)]
struct PackedCommitsV13 {
    /// Every topic the chunks name, once, in order of first appearance.
    topics: Vec<TopicId>,
    commits: Vec<PackedSegmentV13>,
}

#[derive(Serialize, Deserialize)]
struct PackedSegmentV13 {
    key: String,
    object_bytes: u64,
    chunks: Vec<PackedChunkV13>,
}

#[derive(Serialize, Deserialize)]
struct PackedChunkV13 {
    /// Position in [`PackedCommitsV13::topics`].
    topic: u32,
    partition: i32,
    /// `byte_start` minus the end of the segment's chunk before (of 0 for the first).
    byte_gap: i64,
    byte_len: u32,
    crc32c: [u8; 4],
    batches: Vec<PackedBatchV13>,
    producer: Option<ChunkProducer>,
    /// `uncompressed_bytes` minus `byte_len`.
    uncompressed_excess: i64,
}

#[derive(Serialize, Deserialize)]
struct PackedBatchV13 {
    offset_count: u32,
    /// `timestamp_max` minus the one of the batch before in the entry (of 0 for the first).
    timestamp_delta: i64,
    base_sequence: i32,
}

impl Serialize for PackedCommits {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut topics: Vec<TopicId> = Vec::new();
        // An entry may name thousands of topics (a group of commits from a cluster of small
        // topics): a map, so encoding stays linear in the chunks.
        let mut positions: std::collections::HashMap<TopicId, u32> = std::collections::HashMap::new();
        let mut timestamp = 0i64;
        let commits = self
            .0
            .iter()
            .map(|commit| {
                let mut end = 0u64;
                let chunks = commit
                    .chunks
                    .iter()
                    .map(|chunk| {
                        let topic = *positions.entry(chunk.topic_id).or_insert_with(|| {
                            topics.push(chunk.topic_id);
                            (topics.len() - 1) as u32
                        });
                        let byte_gap = chunk.byte_start.wrapping_sub(end) as i64;
                        end = chunk.byte_start.wrapping_add(u64::from(chunk.byte_len));
                        let batches = chunk
                            .batches
                            .iter()
                            .map(|b| {
                                let timestamp_delta = b.timestamp_max.wrapping_sub(timestamp);
                                timestamp = b.timestamp_max;
                                PackedBatchV13 {
                                    offset_count: b.offset_count,
                                    timestamp_delta,
                                    base_sequence: b.base_sequence,
                                }
                            })
                            .collect();
                        PackedChunkV13 {
                            topic,
                            partition: chunk.partition,
                            byte_gap,
                            byte_len: chunk.byte_len,
                            crc32c: chunk.crc32c.to_le_bytes(),
                            batches,
                            producer: chunk.producer,
                            uncompressed_excess: (chunk.uncompressed_bytes as i64)
                                .wrapping_sub(i64::from(chunk.byte_len)),
                        }
                    })
                    .collect();
                PackedSegmentV13 { key: commit.key.clone(), object_bytes: commit.object_bytes, chunks }
            })
            .collect();
        PackedCommitsV13 { topics, commits }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for PackedCommits {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let PackedCommitsV13 { topics, commits } = PackedCommitsV13::deserialize(d)?;
        let mut timestamp = 0i64;
        let mut out = Vec::with_capacity(commits.len());
        for PackedSegmentV13 { key, object_bytes, chunks: packed } in commits {
            let mut end = 0u64;
            let mut chunks = Vec::with_capacity(packed.len());
            for chunk in packed {
                let topic_id =
                    usize::try_from(chunk.topic).ok().and_then(|at| topics.get(at)).copied().ok_or_else(|| {
                        serde::de::Error::custom(format!("chunk names topic {} of {}", chunk.topic, topics.len()))
                    })?;
                let byte_start = end.wrapping_add(chunk.byte_gap as u64);
                end = byte_start.wrapping_add(u64::from(chunk.byte_len));
                let batches = chunk
                    .batches
                    .into_iter()
                    .map(|b| {
                        timestamp = timestamp.wrapping_add(b.timestamp_delta);
                        BatchSummary {
                            offset_count: b.offset_count,
                            timestamp_max: timestamp,
                            base_sequence: b.base_sequence,
                        }
                    })
                    .collect();
                chunks.push(ChunkCommit {
                    topic_id,
                    partition: chunk.partition,
                    byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: u32::from_le_bytes(chunk.crc32c),
                    batches,
                    producer: chunk.producer,
                    uncompressed_bytes: i64::from(chunk.byte_len).wrapping_add(chunk.uncompressed_excess) as u64,
                });
            }
            out.push(SegmentCommit { key, object_bytes, chunks });
        }
        Ok(Self(out))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::command::Command;

    fn arb_commits() -> impl Strategy<Value = Vec<SegmentCommit>> {
        let batch =
            (any::<u32>(), any::<i64>(), any::<i32>()).prop_map(|(offset_count, timestamp_max, base_sequence)| {
                BatchSummary { offset_count, timestamp_max, base_sequence }
            });
        let producer = proptest::option::of((any::<i64>(), any::<i16>(), any::<bool>()).prop_map(
            |(producer_id, producer_epoch, transactional)| ChunkProducer { producer_id, producer_epoch, transactional },
        ));
        let chunk = (
            0u128..4,
            any::<i32>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(batch, 0..4),
            producer,
            any::<u64>(),
        )
            .prop_map(
                |(topic, partition, byte_start, byte_len, crc32c, batches, producer, uncompressed_bytes)| ChunkCommit {
                    topic_id: uuid::Uuid::from_u128(topic),
                    partition,
                    byte_start,
                    byte_len,
                    crc32c,
                    batches,
                    producer,
                    uncompressed_bytes,
                },
            );
        let commit = (".{0,12}", any::<u64>(), proptest::collection::vec(chunk, 0..6))
            .prop_map(|(key, object_bytes, chunks)| SegmentCommit { key, object_bytes, chunks });
        proptest::collection::vec(commit, 0..5)
    }

    proptest! {
        /// Whatever a commit holds (chunks out of order or overlapping, any timestamps and
        /// sizes), the packed form reads back as exactly what was written.
        #[test]
        fn packed_commits_read_back_as_written(commits in arb_commits()) {
            let command = Command::CommitSegmentsPacked(PackedCommits(commits));
            let bytes = postcard::to_allocvec(&command).expect("encode");
            let read: Command = postcard::from_bytes(&bytes).expect("decode");
            prop_assert_eq!(read, command);
        }
    }

    /// The shape of a flush at 2,000 partitions: one record per chunk, contiguous chunks.
    fn flush_of_single_record_chunks(key: &str, chunks: u32) -> SegmentCommit {
        let topic_id = uuid::Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0001);
        let chunks: Vec<_> = (0..chunks)
            .map(|i| ChunkCommit {
                topic_id,
                partition: (i * 7 % 2000) as i32,
                byte_start: u64::from(i) * 270,
                byte_len: 270,
                crc32c: 0x9e37_79b9u32.wrapping_mul(i + 1),
                batches: vec![BatchSummary {
                    offset_count: 1,
                    timestamp_max: 1_796_582_450_839 + i64::from(i / 40),
                    base_sequence: -1,
                }],
                producer: None,
                uncompressed_bytes: 270,
            })
            .collect();
        SegmentCommit { key: key.into(), object_bytes: u64::from(270 * chunks.len() as u32 + 60), chunks }
    }

    /// The reason for the format: the same commits in under half the bytes.
    #[test]
    fn a_flush_of_one_record_chunks_packs_into_under_half_the_bytes() {
        let commits: Vec<_> = (0..3)
            .map(|i| flush_of_single_record_chunks(&format!("segments/0/0001796582450839-{i:04}"), 100))
            .collect();
        let plain = postcard::to_allocvec(&Command::CommitSegments(commits.clone())).expect("encode");
        let packed = postcard::to_allocvec(&Command::CommitSegmentsPacked(PackedCommits(commits))).expect("encode");
        let per_chunk = |bytes: &[u8]| bytes.len() as f64 / 300.0;
        assert!(
            packed.len() * 2 < plain.len(),
            "packed {:.1} B per chunk against {:.1} plain",
            per_chunk(&packed),
            per_chunk(&plain)
        );
        assert!(per_chunk(&packed) < 18.0, "packed {:.1} B per chunk", per_chunk(&packed));
    }

    #[test]
    fn a_chunk_naming_a_topic_the_entry_does_not_list_is_refused() {
        let wire = PackedCommitsV13 {
            topics: vec![],
            commits: vec![PackedSegmentV13 {
                key: "k".into(),
                object_bytes: 1,
                chunks: vec![PackedChunkV13 {
                    topic: 0,
                    partition: 0,
                    byte_gap: 0,
                    byte_len: 1,
                    crc32c: [0; 4],
                    batches: vec![],
                    producer: None,
                    uncompressed_excess: 0,
                }],
            }],
        };
        let bytes = postcard::to_allocvec(&wire).expect("encode");
        postcard::from_bytes::<PackedCommits>(&bytes).expect_err("a topic outside the entry's list is refused");
    }
}
