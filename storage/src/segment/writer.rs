//! Builds a segment object from chunks, without copying batch bytes.

use bytes::Bytes;
use object_store::PutPayload;

use super::footer::BlockChecksums;
use super::trailer::{FORMAT_VERSION, SegmentTrailer};
use super::{ChunkEntry, SegmentFooter, TopicPartition};
use crate::cache::BLOCK_BYTES;

/// Counts the caller knows about a chunk's batches; storage does not parse Kafka batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkStats {
    pub batch_count: u32,
    pub record_count: u32,
    pub timestamp_min: i64,
    pub timestamp_max: i64,
}

/// Accumulates chunks for one segment object. Call [`SegmentWriter::push_chunk`] once per
/// partition, then [`SegmentWriter::finish`].
#[derive(Debug, Default)]
pub struct SegmentWriter {
    parts: Vec<Bytes>,
    chunks: Vec<ChunkEntry>,
    data_bytes: u64,
    /// CRC-32C of each [`BLOCK_BYTES`] block of the data pushed so far; the last may be partial.
    block_crc32c: Vec<u32>,
}

/// A finished, not yet uploaded, segment object.
#[derive(Debug)]
pub struct SegmentObject {
    pub payload: PutPayload,
    pub chunks: Vec<ChunkEntry>,
    /// The data section's block checksums, as the footer lists them: the block cache keeps them
    /// with the writer's copy of the blocks (`BlockCache::insert_object`).
    pub blocks: BlockChecksums,
    pub object_bytes: u64,
}

impl SegmentWriter {
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer with room for `chunks` chunks: a flush at 10,000 partitions pushes hundreds,
    /// and growing the lists one push at a time copied them over and over.
    pub fn with_chunks(chunks: usize) -> Self {
        Self { parts: Vec::with_capacity(chunks + 2), chunks: Vec::with_capacity(chunks), ..Self::default() }
    }

    /// Bytes of chunk data pushed so far (footer and trailer excluded).
    pub fn data_bytes(&self) -> u64 {
        self.data_bytes
    }

    /// Appends one partition's batches, in order, as one chunk. A chunk is limited to
    /// `u32::MAX` bytes by its footer entry; flushes are far smaller (see `limits`), and a
    /// larger chunk is a caller bug, so it is asserted.
    pub fn push_chunk(
        &mut self,
        topic_partition: TopicPartition,
        batches: impl IntoIterator<Item = Bytes>,
        stats: ChunkStats,
    ) -> &ChunkEntry {
        let mut crc = 0u32;
        let mut chunk_bytes = 0u64;
        for batch in batches {
            crc = crc32c::crc32c_append(crc, &batch);
            sum_blocks(&mut self.block_crc32c, self.data_bytes + chunk_bytes, &batch);
            chunk_bytes += batch.len() as u64;
            self.parts.push(batch);
        }
        let byte_len = u32::try_from(chunk_bytes).expect("a chunk is bounded by the flush size, far below 4 GiB");
        self.chunks.push(ChunkEntry {
            topic_partition,
            byte_start: self.data_bytes,
            byte_len,
            crc32c: crc,
            batch_count: stats.batch_count,
            record_count: stats.record_count,
            timestamp_min: stats.timestamp_min,
            timestamp_max: stats.timestamp_max,
        });
        self.data_bytes += chunk_bytes;
        self.chunks.last().expect("just pushed")
    }

    /// Appends footer and trailer.
    pub fn finish(mut self) -> SegmentObject {
        let blocks = BlockChecksums {
            block_bytes: u32::try_from(BLOCK_BYTES).expect("asserted in limits"),
            data_bytes: self.data_bytes,
            crc32c: self.block_crc32c,
        };
        let footer = SegmentFooter { chunks: self.chunks, blocks: Some(blocks.clone()) };
        let footer_bytes = footer.encode();
        let trailer = SegmentTrailer {
            footer_bytes: u32::try_from(footer_bytes.len()).expect("footer is bounded by SEGMENT_CHUNK_COUNT_MAX"),
            footer_crc32c: crc32c::crc32c(&footer_bytes),
            chunk_count: u32::try_from(footer.chunks.len()).expect("bounded as above"),
            format_version: FORMAT_VERSION,
        };
        // The check at write time pairs with the one every reader makes.
        debug_assert_eq!(
            SegmentFooter::decode(&footer_bytes, &trailer, self.data_bytes).as_ref(),
            Ok(&footer),
            "a freshly encoded footer must decode to itself"
        );
        let object_bytes = self.data_bytes + footer_bytes.len() as u64 + super::trailer::TRAILER_BYTES as u64;
        self.parts.push(Bytes::from(footer_bytes));
        self.parts.push(Bytes::copy_from_slice(&trailer.encode()));
        SegmentObject { payload: PutPayload::from_iter(self.parts), chunks: footer.chunks, blocks, object_bytes }
    }
}

/// Adds `bytes`, which start at byte `position` of the data section, to the checksums of the
/// blocks they fall in. A second pass over the bytes, besides the chunk's: combining CRCs instead
/// costs more per batch than hardware CRC-32C costs per kilobyte.
fn sum_blocks(block_crc32c: &mut Vec<u32>, mut position: u64, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        let in_block = position % BLOCK_BYTES;
        if in_block == 0 {
            block_crc32c.push(0);
        }
        let take = usize::try_from(BLOCK_BYTES - in_block).unwrap_or(usize::MAX).min(bytes.len());
        let crc = block_crc32c.last_mut().expect("pushed at the block's first byte");
        *crc = crc32c::crc32c_append(*crc, &bytes[..take]);
        position += take as u64;
        bytes = &bytes[take..];
    }
}
