//! Errors of the storage layer, shaped by what the caller can do about them.

use crate::SegmentKey;

/// A failure talking to the object store. Callers treat it as retriable.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object store: {0}")]
    ObjectStore(#[from] object_store::Error),
    #[error("local file system: {0}")]
    Io(#[from] std::io::Error),
    #[error("invalid object store URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
}

/// Writing a segment object failed; nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum PutSegmentError {
    #[error("segment {key} already exists: keys are never reused")]
    KeyExists { key: SegmentKey },
    #[error("segment of {bytes} bytes exceeds the limit of {max} bytes")]
    TooLarge { bytes: u64, max: u64 },
    #[error(transparent)]
    Io(#[from] StorageError),
}

/// Reading one chunk back failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadChunkError {
    /// The bytes do not match the checksum recorded at write time: drop any cached copy and
    /// re-read; if it persists the object is damaged.
    #[error("chunk {byte_start}+{byte_len} of {key}: checksum mismatch")]
    ChecksumMismatch { key: String, byte_start: u64, byte_len: u32 },
    /// The object is shorter than the index says.
    #[error("chunk {byte_start}+{byte_len} of {key}: object is truncated ({got} bytes read)")]
    Truncated { key: String, byte_start: u64, byte_len: u32, got: usize },
    /// A block read from the object store does not match the checksum its object's footer
    /// records (format 2): nothing was cached. The chunks in it may still be whole; a whole-chunk
    /// read falls back to the chunk's own checksum.
    #[error("block {index} of {key}: checksum mismatch with the object's footer")]
    BlockChecksumMismatch { key: String, index: u64 },
    /// The object's footer, which holds its block checksums, is damaged.
    #[error("footer of {key}: {reason}")]
    CorruptFooter { key: String, reason: String },
    #[error(transparent)]
    Io(#[from] StorageError),
}

/// Reading a segment's footer failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadFooterError {
    #[error("segment {key}: {reason}")]
    Corrupt { key: String, reason: String },
    #[error(transparent)]
    Io(#[from] StorageError),
}
