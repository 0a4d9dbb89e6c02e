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
//! alone is verified too. From format 2 so does every block of the data section
//! ([`BlockChecksums`]), and a block read alone is verified as well. A segment is never modified
//! after its PUT.

pub mod footer;
pub mod trailer;
mod writer;

#[cfg(test)]
mod tests;

pub use footer::{BlockChecksums, SegmentFooter};
pub use writer::{ChunkStats, SegmentObject, SegmentWriter};

use crate::SegmentKey;
use crate::limits::FOOTER_BYTES_MAX;
use trailer::{SegmentTrailer, TRAILER_BYTES};

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

/// What the last bytes of an object say about its footer ([`footer_at_end`]).
#[derive(Debug)]
pub(crate) enum FooterAtEnd {
    /// The footer lies within the bytes, and was decoded and checked.
    Within(SegmentFooter),
    /// The footer starts at `footer_start`, before the bytes; the trailer was decoded.
    Before { footer_start: u64, trailer: SegmentTrailer },
    /// The bytes are too few to hold the trailer.
    NoTrailer,
}

/// Decodes the trailer, and the footer when it lies within them, from `end`: the last bytes of an
/// object `object_bytes` long. Never panics: every length comes from untrusted bytes.
pub(crate) fn footer_at_end(end: &[u8], object_bytes: u64) -> Result<FooterAtEnd, String> {
    let end_start = object_bytes
        .checked_sub(end.len() as u64)
        .ok_or_else(|| format!("{} bytes at the end of an object of {object_bytes}", end.len()))?;
    let Some(trailer_at) = end.len().checked_sub(TRAILER_BYTES) else {
        return Ok(FooterAtEnd::NoTrailer);
    };
    let trailer = SegmentTrailer::decode(&end[trailer_at..])?;
    let footer_bytes = u64::from(trailer.footer_bytes);
    if footer_bytes > FOOTER_BYTES_MAX {
        return Err(format!("footer of {footer_bytes} bytes exceeds the limit"));
    }
    let trailer_start = end_start + trailer_at as u64;
    let footer_start = trailer_start
        .checked_sub(footer_bytes)
        .ok_or_else(|| format!("footer of {footer_bytes} bytes does not fit in the object"))?;
    if footer_start < end_start {
        return Ok(FooterAtEnd::Before { footer_start, trailer });
    }
    let footer = &end[(footer_start - end_start) as usize..trailer_at];
    Ok(FooterAtEnd::Within(SegmentFooter::decode(footer, &trailer, footer_start)?))
}
