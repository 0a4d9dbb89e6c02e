//! The segment footer: the index of chunks inside one segment object.
//!
//! Layout (little-endian): `chunk_count: u32`, then `chunk_count` entries of
//! [`CHUNK_ENTRY_BYTES`] each:
//!
//! | bytes  | field           |
//! |--------|-----------------|
//! | 0..16  | topic id (UUID) |
//! | 16..20 | partition i32   |
//! | 20..28 | byte_start u64  |
//! | 28..32 | byte_len u32    |
//! | 32..36 | crc32c u32      |
//! | 36..40 | batch_count u32 |
//! | 40..44 | record_count u32|
//! | 44..52 | timestamp_min i64 |
//! | 52..60 | timestamp_max i64 |

use super::trailer::SegmentTrailer;
use super::{ChunkEntry, TopicPartition};
use crate::limits::SEGMENT_CHUNK_COUNT_MAX;

pub const FOOTER_HEADER_BYTES: usize = 4;
pub const CHUNK_ENTRY_BYTES: usize = 60;

/// All chunks of one segment, in the order they appear in the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFooter {
    pub chunks: Vec<ChunkEntry>,
}

impl SegmentFooter {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_HEADER_BYTES + self.chunks.len() * CHUNK_ENTRY_BYTES);
        let chunk_count = u32::try_from(self.chunks.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&chunk_count.to_le_bytes());
        for c in &self.chunks {
            out.extend_from_slice(c.topic_partition.topic_id.as_bytes());
            out.extend_from_slice(&c.topic_partition.partition.to_le_bytes());
            out.extend_from_slice(&c.byte_start.to_le_bytes());
            out.extend_from_slice(&c.byte_len.to_le_bytes());
            out.extend_from_slice(&c.crc32c.to_le_bytes());
            out.extend_from_slice(&c.batch_count.to_le_bytes());
            out.extend_from_slice(&c.record_count.to_le_bytes());
            out.extend_from_slice(&c.timestamp_min.to_le_bytes());
            out.extend_from_slice(&c.timestamp_max.to_le_bytes());
        }
        out
    }

    /// Decodes a footer and checks it against its trailer and the object's size. Never panics:
    /// every length comes from untrusted bytes and is checked before use.
    pub fn decode(footer: &[u8], trailer: &SegmentTrailer, data_bytes: u64) -> Result<Self, String> {
        if crc32c::crc32c(footer) != trailer.footer_crc32c {
            return Err("footer checksum mismatch".to_owned());
        }
        let (count, mut rest) =
            footer.split_first_chunk::<4>().ok_or_else(|| "footer shorter than its header".to_owned())?;
        let chunk_count = u32::from_le_bytes(*count);
        if chunk_count != trailer.chunk_count {
            return Err(format!("footer lists {chunk_count} chunks, trailer says {}", trailer.chunk_count));
        }
        if chunk_count > SEGMENT_CHUNK_COUNT_MAX {
            return Err(format!("{chunk_count} chunks exceeds the limit of {SEGMENT_CHUNK_COUNT_MAX}"));
        }
        if rest.len() != chunk_count as usize * CHUNK_ENTRY_BYTES {
            return Err(format!("footer of {} bytes cannot hold {chunk_count} chunks", footer.len()));
        }
        let mut chunks = Vec::with_capacity(chunk_count as usize);
        let mut expected_start = 0u64;
        while let Some((entry, tail)) = rest.split_first_chunk::<CHUNK_ENTRY_BYTES>() {
            rest = tail;
            let c = decode_entry(entry);
            // Chunks are laid out back to back from byte 0, so any gap, overlap or overrun is
            // corruption rather than a layout choice.
            if c.byte_start != expected_start {
                return Err(format!("chunk at byte {} where {expected_start} was expected", c.byte_start));
            }
            expected_start = c.byte_start + u64::from(c.byte_len);
            chunks.push(c);
        }
        if expected_start != data_bytes {
            return Err(format!("chunks cover {expected_start} bytes but the data section has {data_bytes}"));
        }
        Ok(Self { chunks })
    }
}

fn decode_entry(b: &[u8; CHUNK_ENTRY_BYTES]) -> ChunkEntry {
    let mut at = 0usize;
    let mut take = |n: usize| {
        let s = &b[at..at + n];
        at += n;
        s
    };
    let mut topic_id = [0u8; 16];
    topic_id.copy_from_slice(take(16));
    let i32_le = |s: &[u8]| i32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let u32_le = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
    let u64_le = |s: &[u8]| u64::from_le_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
    let partition = i32_le(take(4));
    let byte_start = u64_le(take(8));
    let byte_len = u32_le(take(4));
    let crc32c = u32_le(take(4));
    let batch_count = u32_le(take(4));
    let record_count = u32_le(take(4));
    let timestamp_min = u64_le(take(8)) as i64;
    let timestamp_max = u64_le(take(8)) as i64;
    ChunkEntry {
        topic_partition: TopicPartition { topic_id: uuid::Uuid::from_bytes(topic_id), partition },
        byte_start,
        byte_len,
        crc32c,
        batch_count,
        record_count,
        timestamp_min,
        timestamp_max,
    }
}
