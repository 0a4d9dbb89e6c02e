//! Limits of the storage layer, each with the reason for its value.

/// Largest segment object a flush may write. Flushes default to 8 MiB; this leaves room for
/// operators who raise `flush_bytes` while keeping one PUT well under S3's 5 GiB single-PUT cap.
pub const SEGMENT_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Most chunks (partition slices) in one segment footer: bounds the footer a reader will decode.
pub const SEGMENT_CHUNK_COUNT_MAX: u32 = 1_000_000;

/// Smallest block a footer's block checksums may cover (format 2): bounds their table by the
/// object's size, at 4 bytes per 64 KiB. Writers use the block cache's blocks, far larger.
pub const SEGMENT_CHECKSUM_BLOCK_BYTES_MIN: u32 = 64 * 1024;

/// Largest footer a reader accepts; derived from the chunk and block limits so they cannot
/// disagree.
pub const FOOTER_BYTES_MAX: u64 = crate::segment::footer::FOOTER_HEADER_BYTES as u64
    + SEGMENT_CHUNK_COUNT_MAX as u64 * crate::segment::footer::CHUNK_ENTRY_BYTES as u64
    + crate::segment::footer::BLOCK_CHECKSUMS_HEADER_BYTES as u64
    + SEGMENT_BYTES_MAX.div_ceil(SEGMENT_CHECKSUM_BLOCK_BYTES_MIN as u64) * 4;

/// Bytes a footer read asks for at the end of an object: the trailer and, for up to about a
/// thousand chunks, the whole footer, with one GET. A longer footer costs a second.
pub const FOOTER_READ_BYTES: u64 = 64 * 1024;

const _: () = assert!(FOOTER_BYTES_MAX < SEGMENT_BYTES_MAX);
const _: () = assert!(crate::cache::BLOCK_BYTES >= SEGMENT_CHECKSUM_BLOCK_BYTES_MIN as u64);
const _: () = assert!(crate::cache::BLOCK_BYTES <= u32::MAX as u64);
const _: () = assert!(FOOTER_READ_BYTES >= crate::segment::trailer::TRAILER_BYTES as u64);
