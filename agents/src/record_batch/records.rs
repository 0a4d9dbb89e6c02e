//! The records inside a v2 batch: decompression with a bound on the output (a small compressed
//! batch can expand to gigabytes), walking records without copying them, and rebuilding a batch
//! from some of its records, possibly in another codec (key compaction, `compression.type`).
//!
//! Record layout (varints are zigzag): length varint, attributes i8, timestampDelta varlong,
//! offsetDelta varint, keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
//! header count varint, headers.

use std::io::Read;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};

use super::build::put_varint;
use super::{
    ATTRIBUTE_COMPRESSION_MASK, ATTRIBUTE_DELETE_HORIZON, BatchHeader, CRC_START, HEADER_BYTES, LOG_OVERHEAD_BYTES,
};

/// Why the records of a batch could not be read or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordsError {
    #[error("compression codec {0} is not supported")]
    UnsupportedCompression(i16),
    #[error("records do not decompress: {0}")]
    Decompress(String),
    #[error("records decompress to more than {max} bytes")]
    TooLarge { max: usize },
    #[error("malformed record: {0}")]
    Malformed(&'static str),
    #[error("records do not compress: {0}")]
    Compress(String),
}

/// One record, borrowed from the decompressed records of its batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView {
    /// The whole record, length prefix included, as stored.
    pub bytes: Bytes,
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Bytes>,
    /// `None` is a null value: a tombstone in a compacted topic.
    pub value: Option<Bytes>,
    /// The header section as stored (count, then each name and value); see [`RecordView::headers`].
    pub headers: Bytes,
}

impl RecordView {
    /// The record's headers in order (a name may repeat); fails on a malformed header section.
    pub fn headers(&self) -> Result<Vec<(Bytes, Option<Bytes>)>, RecordsError> {
        let bytes = &self.headers;
        let end = bytes.len();
        let mut at = 0;
        let count = varint(bytes, &mut at)?;
        // Each header takes at least two bytes, which bounds what a forged count can allocate.
        if count < 0 || count as u64 > (end as u64) / 2 {
            return Err(RecordsError::Malformed("header count"));
        }
        let mut headers = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let name = match length(bytes, &mut at, end)? {
                Some(n) => bytes.slice(at..at + n),
                None => return Err(RecordsError::Malformed("null header name")),
            };
            at += name.len();
            let value = length(bytes, &mut at, end)?.map(|n| {
                let value = bytes.slice(at..at + n);
                at += n;
                value
            });
            headers.push((name, value));
        }
        Ok(headers)
    }
}

/// The records of a batch, decompressed; fails rather than producing more than `max_bytes`.
pub fn decompress(header: &BatchHeader, batch: &Bytes, max_bytes: usize) -> Result<Bytes, RecordsError> {
    let payload = batch.slice(HEADER_BYTES..header.batch_bytes);
    let bounded = |reader: &mut dyn Read| -> Result<Bytes, RecordsError> {
        // Room for the usual ratio up front: growing by doubling copied every batch several
        // times. Pages not written are not touched, so a generous guess costs little.
        let mut out = Vec::with_capacity(payload.len().saturating_mul(4).max(4096).min(max_bytes));
        reader.take(max_bytes as u64 + 1).read_to_end(&mut out).map_err(|e| RecordsError::Decompress(e.to_string()))?;
        if out.len() > max_bytes {
            return Err(RecordsError::TooLarge { max: max_bytes });
        }
        Ok(out.into())
    };
    match header.compression() {
        0 if payload.len() > max_bytes => Err(RecordsError::TooLarge { max: max_bytes }),
        0 => Ok(payload),
        1 => bounded(&mut flate2::read::GzDecoder::new(&payload[..])),
        2 => snappy(&payload, max_bytes),
        3 => bounded(&mut lz4::Decoder::new(&payload[..]).map_err(|e| RecordsError::Decompress(e.to_string()))?),
        4 => bounded(
            &mut zstd::stream::read::Decoder::new(&payload[..]).map_err(|e| RecordsError::Decompress(e.to_string()))?,
        ),
        other => Err(RecordsError::UnsupportedCompression(other)),
    }
}

/// Bytes of the batch with its records uncompressed (usage metering). Sizes the codec's frame
/// states are taken as stated: gzip's trailer, snappy's block lengths, the content size of an
/// lz4 or zstd frame that carries one; frames without one are decompressed to count (into a
/// scratch buffer, bounded by `max_bytes`). An unreadable payload counts as stored.
pub fn uncompressed_len(header: &BatchHeader, batch: &[u8], max_bytes: usize) -> u64 {
    let stored = header.batch_bytes as u64;
    let Some(payload) = batch.get(HEADER_BYTES..header.batch_bytes) else { return stored };
    let records = match header.compression() {
        0 => return stored,
        1 => payload
            .len()
            .checked_sub(4)
            .and_then(|at| payload.get(at..))
            .map(|t| u64::from(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))),
        2 => snappy_len(payload),
        3 => lz4_content_size(payload).or_else(|| counted(lz4::Decoder::new(payload).ok()?, max_bytes)),
        4 => zstd_content_size(payload)
            .or_else(|| counted(zstd::stream::read::Decoder::with_buffer(payload).ok()?, max_bytes)),
        _ => None,
    };
    records.map_or(stored, |len| HEADER_BYTES as u64 + len)
}

/// Bytes a reader yields, read through a scratch buffer; `None` past `max_bytes` or on an error.
fn counted(mut reader: impl Read, max_bytes: usize) -> Option<u64> {
    let mut scratch = [0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        match reader.read(&mut scratch) {
            Ok(0) => return Some(total),
            Ok(n) => total += n as u64,
            Err(_) => return None,
        }
        if total > max_bytes as u64 {
            return None;
        }
    }
}

/// Sum of the stated lengths of a raw or framed snappy payload's blocks.
fn snappy_len(payload: &[u8]) -> Option<u64> {
    if !payload.starts_with(SNAPPY_FRAMING_MAGIC) {
        return snap::raw::decompress_len(payload).ok().map(|n| n as u64);
    }
    let mut rest = payload.get(SNAPPY_FRAMING_HEADER_BYTES..)?;
    let mut total = 0u64;
    while !rest.is_empty() {
        let (len, tail) = rest.split_at_checked(4)?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (compressed, tail) = tail.split_at_checked(len)?;
        total += snap::raw::decompress_len(compressed).ok()? as u64;
        rest = tail;
    }
    Some(total)
}

/// The content size an lz4 frame states (its FLG byte's content-size bit), if it does.
fn lz4_content_size(payload: &[u8]) -> Option<u64> {
    const MAGIC: [u8; 4] = 0x184D_2204u32.to_le_bytes();
    let flags = *payload.get(4)?;
    if payload.get(..4)? != MAGIC || flags & 0x08 == 0 {
        return None;
    }
    let size = payload.get(6..14)?;
    Some(u64::from_le_bytes(size.try_into().ok()?))
}

/// The content size a zstd payload's frames state, if it is one frame that states it.
fn zstd_content_size(payload: &[u8]) -> Option<u64> {
    let frame = zstd::zstd_safe::find_frame_compressed_size(payload).ok()?;
    if frame != payload.len() {
        return None;
    }
    zstd::zstd_safe::get_frame_content_size(payload).ok().flatten()
}

/// The framing Java clients write around snappy blocks; clients may also send raw snappy.
const SNAPPY_FRAMING_MAGIC: &[u8] = b"\x82SNAPPY\x00";
const SNAPPY_FRAMING_HEADER_BYTES: usize = 16;

/// Snappy states each block's decompressed length up front, so the bound is checked before
/// anything is allocated.
fn snappy(payload: &[u8], max_bytes: usize) -> Result<Bytes, RecordsError> {
    let err = |e: snap::Error| RecordsError::Decompress(e.to_string());
    let mut out = Vec::new();
    let block = |compressed: &[u8], out: &mut Vec<u8>| -> Result<(), RecordsError> {
        let len = snap::raw::decompress_len(compressed).map_err(err)?;
        if out.len() + len > max_bytes {
            return Err(RecordsError::TooLarge { max: max_bytes });
        }
        let start = out.len();
        out.resize(start + len, 0);
        snap::raw::Decoder::new().decompress(compressed, &mut out[start..]).map_err(err)?;
        Ok(())
    };
    if !payload.starts_with(SNAPPY_FRAMING_MAGIC) {
        block(payload, &mut out)?;
        return Ok(out.into());
    }
    let mut rest = payload.get(SNAPPY_FRAMING_HEADER_BYTES..).ok_or(RecordsError::Malformed("snappy framing"))?;
    while !rest.is_empty() {
        let (len, tail) = rest.split_at_checked(4).ok_or(RecordsError::Malformed("snappy block length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let (compressed, tail) = tail.split_at_checked(len).ok_or(RecordsError::Malformed("snappy block"))?;
        block(compressed, &mut out)?;
        rest = tail;
    }
    Ok(out.into())
}

/// The batch codec a topic's `compression.type` asks for; `None` for `producer` (keep the
/// client's codec).
pub fn codec_for(compression_type: &str) -> Option<i16> {
    match compression_type {
        "uncompressed" => Some(0),
        "gzip" => Some(1),
        "snappy" => Some(2),
        "lz4" => Some(3),
        "zstd" => Some(4),
        _ => None,
    }
}

/// `batch` in `codec` (all its records, offsets and CRC-covered fields unchanged), or `batch`
/// itself when it already is.
pub fn recompress(header: &BatchHeader, batch: &Bytes, codec: i16) -> Result<Bytes, RecordsError> {
    if header.compression() == codec {
        return Ok(batch.clone());
    }
    let payload = decompress(header, batch, crate::limits::BATCH_DECOMPRESSED_BYTES_MAX)?;
    let views = records(&payload).collect::<Result<Vec<_>, _>>()?;
    rebuild(header, batch, header.base_offset, &views, codec, None)
}

/// Compresses records with a batch codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
pub fn compress(codec: i16, records: &[u8]) -> Result<Bytes, RecordsError> {
    let mut out = BytesMut::new();
    let fill = |tmp: &mut BytesMut| {
        tmp.extend_from_slice(records);
        Ok(())
    };
    let done = match codec {
        0 => return Ok(Bytes::copy_from_slice(records)),
        1 => Gzip::compress(&mut out, fill),
        2 => Snappy::compress(&mut out, fill),
        3 => Lz4::compress(&mut out, fill),
        4 => Zstd::compress(&mut out, fill),
        other => return Err(RecordsError::UnsupportedCompression(other)),
    };
    done.map_err(|e| RecordsError::Compress(e.to_string()))?;
    Ok(out.freeze())
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<i64, RecordsError> {
    // Most fields of small records are one byte: read those without the loop.
    if let Some(&byte) = bytes.get(*at)
        && byte < 0x80
    {
        *at += 1;
        return Ok(i64::from(byte >> 1) ^ -i64::from(byte & 1));
    }
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *bytes.get(*at).ok_or(RecordsError::Malformed("truncated varint"))?;
        *at += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(RecordsError::Malformed("varint longer than 10 bytes"))
}

/// A length field: -1 (null) or a length that fits in what remains.
fn length(bytes: &[u8], at: &mut usize, end: usize) -> Result<Option<usize>, RecordsError> {
    match varint(bytes, at)? {
        -1 => Ok(None),
        n if n >= 0 && (n as u64) <= (end.saturating_sub(*at)) as u64 => Ok(Some(n as usize)),
        _ => Err(RecordsError::Malformed("field length")),
    }
}

/// Walks the decompressed records of a batch; stops at the first malformed one.
pub fn records(records: &Bytes) -> impl Iterator<Item = Result<RecordView, RecordsError>> + '_ {
    record_spans(records).map(|span| {
        span.map(|s| RecordView {
            bytes: records.slice(s.whole),
            offset_delta: s.offset_delta,
            timestamp_delta: s.timestamp_delta,
            key: s.key.map(|r| records.slice(r)),
            value: s.value.map(|r| records.slice(r)),
            headers: records.slice(s.headers),
        })
    })
}

/// A record's fields, borrowed: what produce-time checks read, without counting references.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'a> {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// The record's headers as stored (a count, then each name and value).
    pub headers: &'a [u8],
}

/// A header looked up by name among a record's stored headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header<'a> {
    /// No header of that name (or the headers do not parse).
    Absent,
    /// Exactly one, with this value (`None`: null).
    One(Option<&'a [u8]>),
    /// More than one: readers disagree on which counts (Java's clients take the last, Python's
    /// the first), so a check must not pick one.
    Repeated,
}

/// The header named `name` among a record's stored `headers`, borrowed.
pub fn header<'a>(headers: &'a [u8], name: &[u8]) -> Header<'a> {
    let end = headers.len();
    let mut at = 0;
    let Ok(count) = varint(headers, &mut at) else { return Header::Absent };
    let mut found = Header::Absent;
    for _ in 0..count {
        let Ok(Some(this)) = length(headers, &mut at, end) else { return Header::Absent };
        let this_name = &headers[at..at + this];
        at += this;
        let Ok(value) = length(headers, &mut at, end).map(|n| {
            n.map(|n| {
                let value = &headers[at..at + n];
                at += n;
                value
            })
        }) else {
            return Header::Absent;
        };
        if this_name == name {
            found = match found {
                Header::Absent => Header::One(value),
                _ => Header::Repeated,
            };
        }
    }
    found
}

/// [`records`], borrowing each record's fields.
pub fn record_refs(records: &[u8]) -> impl Iterator<Item = Result<RecordRef<'_>, RecordsError>> + '_ {
    record_spans(records).map(|span| {
        span.map(|s| RecordRef {
            offset_delta: s.offset_delta,
            timestamp_delta: s.timestamp_delta,
            key: s.key.map(|r| &records[r]),
            value: s.value.map(|r| &records[r]),
            headers: &records[s.headers],
        })
    })
}

/// Where a record's parts are in the decompressed records.
struct RecordSpan {
    whole: std::ops::Range<usize>,
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<std::ops::Range<usize>>,
    value: Option<std::ops::Range<usize>>,
    headers: std::ops::Range<usize>,
}

fn record_spans(records: &[u8]) -> impl Iterator<Item = Result<RecordSpan, RecordsError>> + '_ {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        if at >= records.len() {
            return None;
        }
        let next = record_span(records, at);
        match &next {
            Ok(span) => at = span.whole.end,
            Err(_) => at = records.len(),
        }
        Some(next)
    })
}

fn record_span(bytes: &[u8], start: usize) -> Result<RecordSpan, RecordsError> {
    let mut at = start;
    let len = varint(bytes, &mut at)?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| at.checked_add(len))
        .filter(|end| *end <= bytes.len())
        .ok_or(RecordsError::Malformed("record length"))?;
    at += 1; // attributes
    let timestamp_delta = varint(bytes, &mut at)?;
    let offset_delta = i32::try_from(varint(bytes, &mut at)?).map_err(|_| RecordsError::Malformed("offset delta"))?;
    let field = |at: &mut usize| -> Result<Option<std::ops::Range<usize>>, RecordsError> {
        Ok(length(bytes, at, end)?.map(|n| {
            let range = *at..*at + n;
            *at += n;
            range
        }))
    };
    let key = field(&mut at)?;
    let value = field(&mut at)?;
    if at > end {
        return Err(RecordsError::Malformed("record fields overrun its length"));
    }
    Ok(RecordSpan { whole: start..end, offset_delta, timestamp_delta, key, value, headers: at..end })
}

/// A batch holding `kept` (records of `batch`, in order) in `codec`, served at `base_offset`.
/// The header keeps its producer fields and `lastOffsetDelta`, so every kept record keeps its
/// offset; the length, count, codec and CRC are recomputed. With `delete_horizon` (KIP-534) the
/// base timestamp becomes that horizon and each record's timestamp delta is rewritten against
/// it, so every record keeps its timestamp; otherwise the base timestamp and records stay.
pub fn rebuild(
    header: &BatchHeader,
    batch: &Bytes,
    base_offset: i64,
    kept: &[RecordView],
    codec: i16,
    delete_horizon: Option<i64>,
) -> Result<Bytes, RecordsError> {
    let mut raw = BytesMut::with_capacity(kept.iter().map(|r| r.bytes.len() + 8).sum());
    for record in kept {
        match delete_horizon {
            None => raw.extend_from_slice(&record.bytes),
            Some(horizon) => {
                let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
                put_retimed(&mut raw, record, timestamp.wrapping_sub(horizon))?;
            }
        }
    }
    let payload = compress(codec, &raw)?;
    let mut out = BytesMut::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(&batch[..HEADER_BYTES]);
    out.extend_from_slice(&payload);
    let batch_length =
        i32::try_from(out.len() - LOG_OVERHEAD_BYTES).map_err(|_| RecordsError::Compress("batch too large".into()))?;
    let count = i32::try_from(kept.len()).map_err(|_| RecordsError::Compress("too many records".into()))?;
    let mut attributes = (header.attributes & !ATTRIBUTE_COMPRESSION_MASK) | codec;
    if let Some(horizon) = delete_horizon {
        attributes |= ATTRIBUTE_DELETE_HORIZON;
        out[27..35].copy_from_slice(&horizon.to_be_bytes());
    }
    out[0..8].copy_from_slice(&base_offset.to_be_bytes());
    out[8..12].copy_from_slice(&batch_length.to_be_bytes());
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    out[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

/// Writes `record` with a new timestamp delta; every other field is copied as stored.
fn put_retimed(out: &mut BytesMut, record: &RecordView, timestamp_delta: i64) -> Result<(), RecordsError> {
    let bytes = &record.bytes;
    let mut at = 0;
    varint(bytes, &mut at)?;
    let attributes = *bytes.get(at).ok_or(RecordsError::Malformed("record attributes"))?;
    at += 1;
    varint(bytes, &mut at)?;
    let rest = &bytes[at..];
    let mut head = BytesMut::with_capacity(11);
    head.put_u8(attributes);
    put_varint(&mut head, timestamp_delta);
    let length = i64::try_from(head.len() + rest.len()).map_err(|_| RecordsError::Malformed("record length"))?;
    put_varint(out, length);
    out.extend_from_slice(&head);
    out.extend_from_slice(rest);
    Ok(())
}

#[cfg(test)]
mod tests;
