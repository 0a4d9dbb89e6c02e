//! New v2 batches from records that did not arrive as Kafka batches (the HTTP produce API).
//! What a Kafka producer would send: offsets 0..n, the first record's timestamp as the base,
//! CRC-32C over everything from the attributes on.

use bytes::{BufMut, Bytes, BytesMut};

use super::records::{RecordsError, compress};
use super::{CRC_START, HEADER_BYTES, LOG_OVERHEAD_BYTES};

/// One record to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewRecord {
    /// Milliseconds since the epoch (CreateTime).
    pub timestamp: i64,
    pub key: Option<Bytes>,
    /// `None` is a tombstone.
    pub value: Option<Bytes>,
    /// In order; Kafka allows a name more than once.
    pub headers: Vec<(String, Option<Bytes>)>,
}

impl NewRecord {
    /// Bytes the record takes in an uncompressed batch, give or take its varints: for limits.
    pub fn approximate_bytes(&self) -> usize {
        let field = |b: &Option<Bytes>| b.as_ref().map_or(0, Bytes::len) + 5;
        self.headers.iter().map(|(name, value)| name.len() + 5 + field(value)).sum::<usize>()
            + field(&self.key)
            + field(&self.value)
            + 25
    }
}

/// The producer fields a batch carries: an idempotent producer's id, epoch and the sequence of
/// its first record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
}

/// A batch of `records` (at least one) compressed with `codec` (0 none, 1 gzip, 2 snappy, 3 lz4,
/// 4 zstd).
pub fn build_batch(records: &[NewRecord], producer: Option<BatchProducer>, codec: i16) -> Result<Bytes, RecordsError> {
    let (Some(first), Ok(count)) = (records.first(), i32::try_from(records.len())) else {
        return Err(RecordsError::Compress("a batch holds 1 to i32::MAX records".into()));
    };
    let base_timestamp = first.timestamp;
    let max_timestamp = records.iter().map(|r| r.timestamp).max().unwrap_or(base_timestamp);
    let mut raw = BytesMut::with_capacity(records.iter().map(NewRecord::approximate_bytes).sum());
    let mut body = BytesMut::new();
    for (offset_delta, record) in records.iter().enumerate() {
        body.clear();
        body.put_u8(0); // attributes: unused in v2 records
        put_varint(&mut body, record.timestamp.wrapping_sub(base_timestamp));
        put_varint(&mut body, offset_delta as i64);
        put_bytes(&mut body, record.key.as_deref());
        put_bytes(&mut body, record.value.as_deref());
        put_varint(&mut body, record.headers.len() as i64);
        for (name, value) in &record.headers {
            put_bytes(&mut body, Some(name.as_bytes()));
            put_bytes(&mut body, value.as_deref());
        }
        put_varint(&mut raw, body.len() as i64);
        raw.extend_from_slice(&body);
    }
    let payload = compress(codec, &raw)?;
    let batch_length = i32::try_from(HEADER_BYTES - LOG_OVERHEAD_BYTES + payload.len())
        .map_err(|_| RecordsError::Compress("batch too large".into()))?;
    let producer = producer.unwrap_or(BatchProducer { producer_id: -1, producer_epoch: -1, base_sequence: -1 });
    let mut out = BytesMut::with_capacity(HEADER_BYTES + payload.len());
    out.put_i64(0);
    out.put_i32(batch_length);
    out.put_i32(-1); // partitionLeaderEpoch, stamped when served
    out.put_i8(2);
    out.put_u32(0); // CRC, below
    out.put_i16(codec);
    out.put_i32(count - 1);
    out.put_i64(base_timestamp);
    out.put_i64(max_timestamp);
    out.put_i64(producer.producer_id);
    out.put_i16(producer.producer_epoch);
    out.put_i32(producer.base_sequence);
    out.put_i32(count);
    out.extend_from_slice(&payload);
    let crc = crc32c::crc32c(&out[CRC_START..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    Ok(out.freeze())
}

pub(super) fn put_varint(out: &mut BytesMut, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.put_u8((zigzag as u8 & 0x7f) | 0x80);
        zigzag >>= 7;
    }
    out.put_u8(zigzag as u8);
}

fn put_bytes(out: &mut BytesMut, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i64);
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::RecordBatchDecoder;

    use super::*;
    use crate::record_batch::{BatchHeader, crc_matches};

    fn sample(n: usize) -> Vec<NewRecord> {
        (0..n)
            .map(|i| NewRecord {
                // Timestamps out of order: deltas may be negative.
                timestamp: 1_700_000_000_000 + (i as i64 % 3) * 1000 - 500,
                key: (i % 4 != 0).then(|| Bytes::from(format!("key-{i}"))),
                value: (i % 5 != 4).then(|| Bytes::from(vec![i as u8; i * 37])),
                headers: (0..i % 3)
                    .map(|h| (format!("h{h}"), (h != 1).then(|| Bytes::from(format!("v{h}")))))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn kafka_decoders_read_back_every_field_in_every_codec() {
        let records = sample(40);
        for codec in 0..=4 {
            let producer = BatchProducer { producer_id: 7, producer_epoch: 2, base_sequence: 100 };
            let batch = build_batch(&records, Some(producer), codec).expect("builds");
            let header = BatchHeader::parse(&batch).expect("parses");
            assert!(crc_matches(&batch, &header), "codec {codec}");
            assert_eq!((header.record_count, header.last_offset_delta, header.compression()), (40, 39, codec));
            assert_eq!((header.producer_id, header.producer_epoch, header.base_sequence), (7, 2, 100));
            assert_eq!(header.max_timestamp, 1_700_000_001_500);
            let mut bytes = batch.clone();
            let decoded = RecordBatchDecoder::decode(&mut bytes).expect("kafka-protocol decodes it");
            assert_eq!(decoded.records.len(), 40);
            for (i, (got, want)) in decoded.records.iter().zip(&records).enumerate() {
                assert_eq!(got.offset, i as i64);
                assert_eq!(got.timestamp, want.timestamp);
                assert_eq!(got.key, want.key);
                assert_eq!(got.value, want.value);
                assert_eq!(got.sequence, 100 + i as i32);
                let headers: Vec<(String, Option<Bytes>)> =
                    got.headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
                assert_eq!(headers, want.headers);
            }
        }
    }

    #[test]
    fn repeated_header_names_are_kept() {
        let record = NewRecord {
            timestamp: 1,
            key: None,
            value: Some(Bytes::from_static(b"v")),
            headers: vec![("a".into(), Some(Bytes::from_static(b"1"))), ("a".into(), Some(Bytes::from_static(b"2")))],
        };
        let batch = build_batch(&[record], None, 0).expect("builds");
        let header = BatchHeader::parse(&batch).expect("parses");
        let payload = super::super::records::decompress(&header, &batch, 1 << 20).expect("uncompressed");
        let views: Vec<_> = super::super::records::records(&payload).collect::<Result<_, _>>().expect("walks");
        let headers = views[0].headers().expect("headers parse");
        let one = |b: &'static [u8]| (Bytes::from_static(b"a"), Some(Bytes::from_static(b)));
        assert_eq!(headers, vec![one(b"1"), one(b"2")]);
        assert!(build_batch(&[], None, 0).is_err());
    }
}
