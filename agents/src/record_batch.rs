//! Kafka record batch v2 headers: parsing, checking and stamping, without decompressing.
//!
//! | bytes  | field                | covered by CRC |
//! |--------|----------------------|----------------|
//! | 0..8   | baseOffset           | no             |
//! | 8..12  | batchLength          | no             |
//! | 12..16 | partitionLeaderEpoch | no             |
//! | 16     | magic (2)            | no             |
//! | 17..21 | crc (CRC-32C)        | -              |
//! | 21..23 | attributes           | yes            |
//! | 23..27 | lastOffsetDelta      | yes            |
//! | 27..35 | baseTimestamp        | yes            |
//! | 35..43 | maxTimestamp         | yes            |
//! | 43..51 | producerId           | yes            |
//! | 51..53 | producerEpoch        | yes            |
//! | 53..57 | baseSequence         | yes            |
//! | 57..61 | recordCount          | yes            |
//!
//! All integers are big-endian. Because baseOffset and partitionLeaderEpoch lie outside the CRC,
//! the fetch path stamps them without touching the checksum.

use bytes::{Bytes, BytesMut};

/// Bytes before the first record.
pub const HEADER_BYTES: usize = 61;
/// Bytes of the `baseOffset` and `batchLength` fields, which `batchLength` does not count.
pub const LOG_OVERHEAD_BYTES: usize = 12;
pub(crate) const CRC_START: usize = 21;

pub const ATTRIBUTE_COMPRESSION_MASK: i16 = 0x07;
pub const ATTRIBUTE_LOG_APPEND_TIME: i16 = 0x08;
pub const ATTRIBUTE_TRANSACTIONAL: i16 = 0x10;
pub const ATTRIBUTE_CONTROL: i16 = 0x20;
/// KIP-534: the batch's base timestamp is its delete horizon, the time after which key
/// compaction may drop its tombstones; record timestamps are still base plus delta.
pub const ATTRIBUTE_DELETE_HORIZON: i16 = 0x40;

/// The header fields of one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    /// As stored: 0 from producers; the real offset in batches written by key compaction.
    pub base_offset: i64,
    /// Whole batch, including the 12 bytes of log overhead.
    pub batch_bytes: usize,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

/// Why bytes are not a well-formed batch.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    #[error("record batch truncated: {needed} bytes needed, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("record batch length {0} is invalid")]
    InvalidLength(i32),
    #[error("record batch magic {0} is not supported; only v2 batches are accepted")]
    UnsupportedMagic(i8),
    #[error("record batch CRC mismatch")]
    CrcMismatch,
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

impl BatchHeader {
    /// Parses the header at the start of `bytes`, which must hold the whole batch; checks only
    /// lengths and magic.
    pub fn parse(bytes: &[u8]) -> Result<Self, BatchError> {
        let header = Self::parse_header(bytes)?;
        if bytes.len() < header.batch_bytes {
            return Err(BatchError::Truncated { needed: header.batch_bytes, available: bytes.len() });
        }
        Ok(header)
    }

    /// Parses a header from its first [`HEADER_BYTES`] bytes alone (the batch may continue
    /// beyond `bytes`); checks the length field and magic.
    pub fn parse_header(bytes: &[u8]) -> Result<Self, BatchError> {
        if bytes.len() < HEADER_BYTES {
            return Err(BatchError::Truncated { needed: HEADER_BYTES, available: bytes.len() });
        }
        let batch_length = be_i32(bytes, 8);
        let batch_bytes = usize::try_from(batch_length)
            .ok()
            .map(|l| l + LOG_OVERHEAD_BYTES)
            .filter(|b| *b >= HEADER_BYTES)
            .ok_or(BatchError::InvalidLength(batch_length))?;
        let magic = bytes[16] as i8;
        if magic != 2 {
            return Err(BatchError::UnsupportedMagic(magic));
        }
        Ok(Self {
            base_offset: be_i64(bytes, 0),
            batch_bytes,
            magic,
            crc: u32::from_be_bytes([bytes[17], bytes[18], bytes[19], bytes[20]]),
            attributes: be_i16(bytes, 21),
            last_offset_delta: be_i32(bytes, 23),
            base_timestamp: be_i64(bytes, 27),
            max_timestamp: be_i64(bytes, 35),
            producer_id: be_i64(bytes, 43),
            producer_epoch: be_i16(bytes, 51),
            base_sequence: be_i32(bytes, 53),
            record_count: be_i32(bytes, 57),
        })
    }

    pub fn compression(&self) -> i16 {
        self.attributes & ATTRIBUTE_COMPRESSION_MASK
    }

    pub fn is_control(&self) -> bool {
        self.attributes & ATTRIBUTE_CONTROL != 0
    }

    /// When key compaction may drop the batch's tombstones, once a pass has set it (KIP-534).
    pub fn delete_horizon(&self) -> Option<i64> {
        (self.attributes & ATTRIBUTE_DELETE_HORIZON != 0).then_some(self.base_timestamp)
    }

    /// The timestamp of the first record, which the header holds unless a delete horizon took
    /// its place; then the batch's max timestamp stands in.
    pub fn first_timestamp(&self) -> i64 {
        if self.delete_horizon().is_some() { self.max_timestamp } else { self.base_timestamp }
    }

    /// Offsets the batch occupies.
    pub fn offset_count(&self) -> i64 {
        i64::from(self.last_offset_delta) + 1
    }
}

/// Checks the CRC-32C of a whole batch whose header was parsed.
pub fn crc_matches(batch: &[u8], header: &BatchHeader) -> bool {
    crc32c::crc32c(&batch[CRC_START..header.batch_bytes]) == header.crc
}

/// Splits concatenated batches, checking each header's length and magic.
pub fn split(records: &Bytes) -> impl Iterator<Item = Result<(BatchHeader, Bytes), BatchError>> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if at >= records.len() {
            return None;
        }
        match BatchHeader::parse(&records[at..]) {
            Ok(header) => {
                let batch = records.slice(at..at + header.batch_bytes);
                at += header.batch_bytes;
                Some(Ok((header, batch)))
            }
            Err(e) => {
                at = records.len();
                Some(Err(e))
            }
        }
    })
}

/// Writes the offset and leader epoch a batch is served with (outside the CRC).
pub fn stamp(batch: &mut [u8], base_offset: i64, partition_leader_epoch: i32) {
    batch[0..8].copy_from_slice(&base_offset.to_be_bytes());
    batch[12..16].copy_from_slice(&partition_leader_epoch.to_be_bytes());
}

/// Turns a batch into a LogAppendTime batch: sets the timestamp-type bit and `maxTimestamp`, both
/// covered by the CRC, so the CRC is recomputed.
pub fn set_log_append_time(batch: &Bytes, header: &BatchHeader, timestamp: i64) -> Bytes {
    let mut out = BytesMut::from(&batch[..]);
    let attributes = header.attributes | ATTRIBUTE_LOG_APPEND_TIME;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[35..43].copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..header.batch_bytes]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

/// Bytes of a transaction marker's control batch: the header and one 17-byte record.
pub const CONTROL_BATCH_BYTES: usize = HEADER_BYTES + CONTROL_RECORD.len();

/// The record of a control batch, for a commit: length 16, attributes, timestamp delta, offset
/// delta, key (4 bytes: version 0, type), value (6 bytes: version 0, coordinator epoch 0), no
/// headers. Varints are zigzag-encoded. Byte 8 is the type: 0 abort, 1 commit.
const CONTROL_RECORD: [u8; 17] = [0x20, 0, 0, 0, 0x08, 0, 0, 0, 1, 0x0c, 0, 0, 0, 0, 0, 0, 0];
const CONTROL_RECORD_TYPE_AT: usize = 8;

/// The control batch of a transaction marker (offset and leader epoch are stamped when served).
pub fn control_batch(marker: &floe_metadata::TxnMarker, timestamp: i64) -> Bytes {
    let mut out = BytesMut::with_capacity(CONTROL_BATCH_BYTES);
    out.extend_from_slice(&0i64.to_be_bytes());
    out.extend_from_slice(&((CONTROL_BATCH_BYTES - LOG_OVERHEAD_BYTES) as i32).to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&[2]);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(ATTRIBUTE_CONTROL | ATTRIBUTE_TRANSACTIONAL).to_be_bytes());
    out.extend_from_slice(&0i32.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&timestamp.to_be_bytes());
    out.extend_from_slice(&marker.producer_id.to_be_bytes());
    out.extend_from_slice(&marker.producer_epoch.to_be_bytes());
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut record = CONTROL_RECORD;
    record[CONTROL_RECORD_TYPE_AT] = u8::from(marker.commit);
    out.extend_from_slice(&record);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out.freeze()
}

pub mod build;
pub mod records;

#[cfg(test)]
pub(crate) mod tests;
