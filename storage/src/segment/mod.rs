//! The segment object: Floe's unit of storage.
//!
//! A *segment* is one immutable object written by one flush. It holds many partitions' record
//! batches, byte for byte as producers sent them, grouped into one *chunk* per partition:
//!
//! ```text
//! +---------+---------+-----+---------+----------------+-----------------+
//! | chunk 0 | chunk 1 | ... | chunk N | SegmentFooter  | SegmentTrailer  |
//! +---------+---------+-----+---------+----------------+-----------------+
//! ```
//!
//! The footer lists every chunk ([`ChunkEntry`]); the fixed-size trailer at the very end gives
//! the footer's length, its checksum, the format version and a magic number, so a reader can
//! find the footer with one ranged read and detect truncation or corruption. Every chunk also
//! carries its own CRC-32C, recorded in the footer and in the metadata index, so a chunk read
//! alone is verified too. A segment is never modified after its PUT.

pub mod footer;
pub mod trailer;
mod writer;

#[cfg(test)]
mod tests;

pub use footer::SegmentFooter;
pub use writer::{ChunkStats, SegmentObject, SegmentWriter};

use crate::SegmentKey;

/// A partition as storage names it: the topic's UUID (names can be reused, ids cannot) and the
/// partition index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic_id: uuid::Uuid,
    pub partition: i32,
}

/// One partition's slice of a segment, as listed in the footer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkEntry {
    pub topic_partition: TopicPartition,
    /// Position of the chunk's first byte within the object.
    pub byte_start: u64,
    pub byte_len: u32,
    /// CRC-32C (Castagnoli) of the chunk's bytes.
    pub crc32c: u32,
    pub batch_count: u32,
    pub record_count: u32,
    /// Smallest and largest record timestamps in the chunk, in milliseconds since the epoch.
    pub timestamp_min: i64,
    pub timestamp_max: i64,
}

/// Everything needed to read one chunk back and check it: what the metadata index stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRef {
    pub key: SegmentKey,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
}
