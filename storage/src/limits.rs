//! Limits of the storage layer, each with the reason for its value.

/// Largest segment object a flush may write. Flushes default to 8 MiB; this leaves room for
/// operators who raise `flush_bytes` while keeping one PUT well under S3's 5 GiB single-PUT cap.
pub const SEGMENT_BYTES_MAX: u64 = 1024 * 1024 * 1024;

/// Most chunks (partition slices) in one segment footer: bounds the footer a reader will decode.
pub const SEGMENT_CHUNK_COUNT_MAX: u32 = 1_000_000;

/// Largest footer a reader accepts; derived from the chunk limit so the two cannot disagree.
pub const FOOTER_BYTES_MAX: u64 = crate::segment::footer::FOOTER_HEADER_BYTES as u64
    + SEGMENT_CHUNK_COUNT_MAX as u64 * crate::segment::footer::CHUNK_ENTRY_BYTES as u64;

const _: () = assert!(FOOTER_BYTES_MAX < SEGMENT_BYTES_MAX);
