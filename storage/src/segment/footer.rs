//! The segment footer: the index of chunks inside one segment object and, from format 2, the
//! checksum of every block of its data section.
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
//!
//! From format 2 the block checksums follow the entries ([`BlockChecksums`]):
//!
//! | bytes            | field                                          |
//! |------------------|------------------------------------------------|
//! | 0..4             | `block_bytes` u32: the blocks' size            |
//! | 4..8             | `block_count` u32: `ceil(data bytes / block_bytes)` |
//! | 8..8 + 4 × count | CRC-32C of each block, in order                |
//!
//! Block `i` is bytes `i × block_bytes .. min((i + 1) × block_bytes, data bytes)` of the object:
//! the data section only, since the footer cannot hold its own checksum (the trailer does).

use super::trailer::SegmentTrailer;
use super::{ChunkEntry, TopicPartition};
use crate::limits::{SEGMENT_CHECKSUM_BLOCK_BYTES_MIN, SEGMENT_CHUNK_COUNT_MAX};

pub const FOOTER_HEADER_BYTES: usize = 4;
pub const CHUNK_ENTRY_BYTES: usize = 60;
/// Bytes of the block checksums' header (`block_bytes`, `block_count`), format 2.
pub const BLOCK_CHECKSUMS_HEADER_BYTES: usize = 8;

/// All chunks of one segment, in the order they appear in the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentFooter {
    pub chunks: Vec<ChunkEntry>,
    /// The data section's block checksums: present from format 2, absent in format 1 objects.
    pub blocks: Option<BlockChecksums>,
}

/// The CRC-32C of every `block_bytes`-aligned block of a segment's data section (format 2), so a
/// block read alone is checked against what its writer computed. The block cache reads blocks of
/// [`crate::BLOCK_BYTES`], and the writer records that size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockChecksums {
    pub block_bytes: u32,
    /// Bytes of the data section, which the last block ends with. Not encoded: the footer's
    /// position in the object gives it.
    pub data_bytes: u64,
    pub crc32c: Vec<u32>,
}

impl BlockChecksums {
    /// The checksum of block `index` and how many of its first bytes it covers (the last block of
    /// the data section ends before the footer); `None` past the data section.
    pub fn block(&self, index: u64) -> Option<(u32, u64)> {
        let crc32c = *self.crc32c.get(usize::try_from(index).ok()?)?;
        let block_bytes = u64::from(self.block_bytes);
        let covered = self.data_bytes.saturating_sub(index.saturating_mul(block_bytes)).min(block_bytes);
        Some((crc32c, covered))
    }
}

impl SegmentFooter {
    /// The footer's bytes: with block checksums, format 2's layout; without, format 1's.
    pub fn encode(&self) -> Vec<u8> {
        let block_table = self.blocks.as_ref().map_or(0, |b| BLOCK_CHECKSUMS_HEADER_BYTES + 4 * b.crc32c.len());
        let mut out = Vec::with_capacity(FOOTER_HEADER_BYTES + self.chunks.len() * CHUNK_ENTRY_BYTES + block_table);
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
        if let Some(blocks) = &self.blocks {
            let block_count = u32::try_from(blocks.crc32c.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&blocks.block_bytes.to_le_bytes());
            out.extend_from_slice(&block_count.to_le_bytes());
            for crc in &blocks.crc32c {
                out.extend_from_slice(&crc.to_le_bytes());
            }
        }
        out
    }

    /// Decodes a footer and checks it against its trailer and the object's size. Never panics:
    /// every length comes from untrusted bytes and is checked before use.
    pub fn decode(footer: &[u8], trailer: &SegmentTrailer, data_bytes: u64) -> Result<Self, String> {
        if crc32c::crc32c(footer) != trailer.footer_crc32c {
            return Err("footer checksum mismatch".to_owned());
        }
        let (count, rest) =
            footer.split_first_chunk::<4>().ok_or_else(|| "footer shorter than its header".to_owned())?;
        let chunk_count = u32::from_le_bytes(*count);
        if chunk_count != trailer.chunk_count {
            return Err(format!("footer lists {chunk_count} chunks, trailer says {}", trailer.chunk_count));
        }
        if chunk_count > SEGMENT_CHUNK_COUNT_MAX {
            return Err(format!("{chunk_count} chunks exceeds the limit of {SEGMENT_CHUNK_COUNT_MAX}"));
        }
        let entries_bytes = chunk_count as usize * CHUNK_ENTRY_BYTES;
        let Some((mut entries, block_table)) = rest.split_at_checked(entries_bytes) else {
            return Err(format!("footer of {} bytes cannot hold {chunk_count} chunks", footer.len()));
        };
        let blocks = match trailer.format_version {
            1 if block_table.is_empty() => None,
            1 => return Err(format!("footer of {} bytes cannot hold {chunk_count} chunks", footer.len())),
            2 => Some(decode_block_checksums(block_table, data_bytes)?),
            other => return Err(format!("unknown segment format version {other}")),
        };
        let mut chunks = Vec::with_capacity(chunk_count as usize);
        let mut expected_start = 0u64;
        while let Some((entry, tail)) = entries.split_first_chunk::<CHUNK_ENTRY_BYTES>() {
            entries = tail;
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
        Ok(Self { chunks, blocks })
    }
}

/// Format 2's block checksums, after the chunk entries.
fn decode_block_checksums(table: &[u8], data_bytes: u64) -> Result<BlockChecksums, String> {
    let (head, mut rest) = table
        .split_first_chunk::<BLOCK_CHECKSUMS_HEADER_BYTES>()
        .ok_or_else(|| "footer ends before its block checksums".to_owned())?;
    let block_bytes = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let block_count = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if block_bytes < SEGMENT_CHECKSUM_BLOCK_BYTES_MIN {
        return Err(format!("blocks of {block_bytes} bytes are below the limit of {SEGMENT_CHECKSUM_BLOCK_BYTES_MIN}"));
    }
    let expected_count = data_bytes.div_ceil(u64::from(block_bytes));
    if u64::from(block_count) != expected_count {
        return Err(format!("{block_count} block checksums for {expected_count} blocks of {block_bytes} bytes"));
    }
    if rest.len() as u64 != u64::from(block_count) * 4 {
        return Err(format!("{} bytes of block checksums where {block_count} were listed", rest.len()));
    }
    let mut crc32c = Vec::with_capacity(block_count as usize);
    while let Some((crc, tail)) = rest.split_first_chunk::<4>() {
        rest = tail;
        crc32c.push(u32::from_le_bytes(*crc));
    }
    Ok(BlockChecksums { block_bytes, data_bytes, crc32c })
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
