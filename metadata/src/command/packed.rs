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

use std::cell::Cell;
use std::sync::Arc;

use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{BatchSummary, ChunkCommit, ChunkProducer, SegmentCommit};
use crate::state::TopicId;

/// Segment commits grouped into one entry, encoded packed. Shared, not copied, when the entry is:
/// a write is cloned per try and per apply, and at 10,000 partitions a copy of its few hundred
/// chunks each time was 3 % of the agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedCommits(pub Arc<[SegmentCommit]>);

/// The encoded layout (format 13).
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PackedCommitsV13 {
    /// Every topic the chunks name, once, in order of first appearance.
    topics: Vec<TopicId>,
    commits: Vec<PackedSegmentV13>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct PackedSegmentV13 {
    key: String,
    object_bytes: u64,
    chunks: Vec<PackedChunkV13>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
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
    /// Writes the layout of [`PackedCommitsV13`] straight from the commits, with nothing built
    /// per chunk in between (a vector of batches per chunk was most of the cost of encoding).
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut topics: Vec<TopicId> = Vec::new();
        // An entry may name thousands of topics (a group of commits from a cluster of small
        // topics): a map, so encoding stays linear in the chunks.
        let mut positions: std::collections::HashMap<TopicId, u32> = std::collections::HashMap::new();
        for chunk in self.0.iter().flat_map(|commit| &commit.chunks) {
            positions.entry(chunk.topic_id).or_insert_with(|| {
                topics.push(chunk.topic_id);
                (topics.len() - 1) as u32
            });
        }
        let timestamp = Cell::new(0i64);
        let commits = Commits { commits: &self.0, positions: &positions, timestamp: &timestamp };
        PackedCommitsOut { topics: &topics, commits }.serialize(s)
    }
}

/// [`PackedCommitsV13`] as written, borrowing the commits.
#[derive(Serialize)]
struct PackedCommitsOut<'a> {
    topics: &'a [TopicId],
    commits: Commits<'a>,
}

/// What encoding carries from one chunk to the next: topics' positions, and the timestamp
/// the next batch's is written against.
struct Commits<'a> {
    commits: &'a [SegmentCommit],
    positions: &'a std::collections::HashMap<TopicId, u32>,
    timestamp: &'a Cell<i64>,
}

impl Serialize for Commits<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.commits.len()))?;
        for commit in self.commits {
            let chunks = Chunks { chunks: &commit.chunks, positions: self.positions, timestamp: self.timestamp };
            seq.serialize_element(&PackedSegmentOut { key: &commit.key, object_bytes: commit.object_bytes, chunks })?;
        }
        seq.end()
    }
}

/// [`PackedSegmentV13`] as written.
#[derive(Serialize)]
struct PackedSegmentOut<'a> {
    key: &'a str,
    object_bytes: u64,
    chunks: Chunks<'a>,
}

struct Chunks<'a> {
    chunks: &'a [ChunkCommit],
    positions: &'a std::collections::HashMap<TopicId, u32>,
    timestamp: &'a Cell<i64>,
}

impl Serialize for Chunks<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.chunks.len()))?;
        let mut end = 0u64;
        for chunk in self.chunks {
            let topic = self
                .positions
                .get(&chunk.topic_id)
                .copied()
                .ok_or_else(|| serde::ser::Error::custom(format!("topic {} has no position", chunk.topic_id)))?;
            let byte_gap = chunk.byte_start.wrapping_sub(end) as i64;
            end = chunk.byte_start.wrapping_add(u64::from(chunk.byte_len));
            seq.serialize_element(&PackedChunkOut {
                topic,
                partition: chunk.partition,
                byte_gap,
                byte_len: chunk.byte_len,
                crc32c: chunk.crc32c.to_le_bytes(),
                batches: Batches { batches: &chunk.batches, timestamp: self.timestamp },
                producer: chunk.producer,
                uncompressed_excess: (chunk.uncompressed_bytes as i64).wrapping_sub(i64::from(chunk.byte_len)),
            })?;
        }
        seq.end()
    }
}

/// [`PackedChunkV13`] as written.
#[derive(Serialize)]
struct PackedChunkOut<'a> {
    topic: u32,
    partition: i32,
    byte_gap: i64,
    byte_len: u32,
    crc32c: [u8; 4],
    batches: Batches<'a>,
    producer: Option<ChunkProducer>,
    uncompressed_excess: i64,
}

struct Batches<'a> {
    batches: &'a [BatchSummary],
    timestamp: &'a Cell<i64>,
}

impl Serialize for Batches<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.batches.len()))?;
        for b in self.batches {
            let timestamp_delta = b.timestamp_max.wrapping_sub(self.timestamp.replace(b.timestamp_max));
            seq.serialize_element(&PackedBatchV13 {
                offset_count: b.offset_count,
                timestamp_delta,
                base_sequence: b.base_sequence,
            })?;
        }
        seq.end()
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
        Ok(Self(out.into()))
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
            let command = Command::CommitSegmentsPacked(PackedCommits(commits.into()));
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
        let packed =
            postcard::to_allocvec(&Command::CommitSegmentsPacked(PackedCommits(commits.into()))).expect("encode");
        let per_chunk = |bytes: &[u8]| bytes.len() as f64 / 300.0;
        assert!(
            packed.len() * 2 < plain.len(),
            "packed {:.1} B per chunk against {:.1} plain",
            per_chunk(&packed),
            per_chunk(&plain)
        );
        assert!(per_chunk(&packed) < 18.0, "packed {:.1} B per chunk", per_chunk(&packed));
    }

    /// Encoding writes exactly format 13's bytes: the packed commit of the golden log of format
    /// 13, encoded again, is found as it is in the file.
    #[test]
    fn the_golden_packed_commit_encodes_to_its_bytes() {
        let golden = crate::state::tests::golden_dir().join("commands-v13.cmds");
        let file = std::fs::read(golden).expect("the golden command file");
        let log = crate::archive::decode_log(&file).expect("format 13 commands decode");
        let packed = log.iter().find(|(_, c)| matches!(c, Command::CommitSegmentsPacked(_))).expect("a packed commit");
        let bytes = postcard::to_allocvec(&packed.1).expect("encode");
        assert!(bytes.len() > 40, "a commit of two segments: {} bytes", bytes.len());
        assert!(file.windows(bytes.len()).any(|w| w == bytes.as_slice()), "encoded otherwise than format 13 wrote it");
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
