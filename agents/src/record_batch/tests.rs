use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use proptest::prelude::*;

use super::*;

/// Encodes `count` records as one batch with `compression`, as a producer would.
pub(crate) fn encode_batch(count: usize, compression: Compression) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder keeps records in one batch while offset - sequence is constant; this
            // gives base sequence -1, as a non-idempotent producer sends.
            sequence: i as i32 - 1,
            timestamp: 1_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: (i % 3 != 0).then(|| Bytes::from(format!("value-{i}"))),
            headers: [(StrBytes::from_static_str("h"), Some(Bytes::from_static(b"x")))].into_iter().collect(),
        })
        .collect();
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &records, &RecordEncodeOptions { version: 2, compression }).expect("encodes");
    out.freeze()
}

#[test]
fn parses_the_header_of_every_codec() {
    for compression in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
    {
        let batch = encode_batch(5, compression);
        let header = BatchHeader::parse(&batch).expect("parses");
        assert_eq!(header.batch_bytes, batch.len());
        assert_eq!(header.record_count, 5);
        assert_eq!(header.offset_count(), 5);
        assert_eq!(header.max_timestamp, 1_004);
        assert!(crc_matches(&batch, &header));
    }
}

#[test]
fn a_flipped_bit_under_the_crc_is_detected_and_stamping_keeps_the_crc_valid() {
    let batch = encode_batch(3, Compression::None);
    let header = BatchHeader::parse(&batch).expect("parses");
    for at in 21..batch.len() {
        let mut damaged = batch.to_vec();
        damaged[at] ^= 0x01;
        assert!(!crc_matches(&damaged, &header), "flip at {at} went unnoticed");
    }
    let mut stamped = batch.to_vec();
    stamp(&mut stamped, 42, 7);
    assert!(crc_matches(&stamped, &header));
    let decoded = RecordBatchDecoder::decode(&mut Bytes::from(stamped)).expect("decodes");
    assert_eq!(decoded.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![42, 43, 44]);
}

#[test]
fn log_append_time_rewrites_the_timestamp_type_and_crc() {
    let batch = encode_batch(2, Compression::Lz4);
    let header = BatchHeader::parse(&batch).expect("parses");
    let rewritten = set_log_append_time(&batch, &header, 99_999);
    let new_header = BatchHeader::parse(&rewritten).expect("parses");
    assert!(crc_matches(&rewritten, &new_header));
    let decoded = RecordBatchDecoder::decode(&mut rewritten.clone()).expect("decodes");
    // Consumers take every record's timestamp from maxTimestamp when the type bit is set.
    assert!(decoded.records.iter().all(|r| r.timestamp_type == TimestampType::LogAppend));
    assert_eq!(new_header.max_timestamp, 99_999);
}

#[test]
fn splits_concatenated_batches_and_stops_at_garbage() {
    let a = encode_batch(1, Compression::None);
    let b = encode_batch(2, Compression::Gzip);
    let mut both = BytesMut::from(&a[..]);
    both.extend_from_slice(&b);
    let parts: Vec<_> = split(&both.clone().freeze()).collect::<Result<_, _>>().expect("splits");
    assert_eq!(parts.len(), 2);
    both.extend_from_slice(&[0u8; 5]);
    let parts: Vec<_> = split(&both.freeze()).collect();
    assert!(matches!(parts.last(), Some(Err(BatchError::Truncated { .. }))));
}

proptest! {
    #[test]
    fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let bytes = Bytes::from(bytes);
        for (header, batch) in split(&bytes).flatten() {
            let _ = crc_matches(&batch, &header);
        }
    }
}

#[test]
fn control_batches_decode_as_kafka_transaction_markers() {
    for commit in [false, true] {
        let marker = floe_metadata::TxnMarker { producer_id: 7, producer_epoch: 3, commit };
        let batch = control_batch(&marker, 1_234);
        assert_eq!(batch.len(), CONTROL_BATCH_BYTES);
        let header = BatchHeader::parse(&batch).expect("parses");
        assert!(crc_matches(&batch, &header), "CRC covers the marker");
        assert!(header.is_control());
        let mut stamped = BytesMut::from(&batch[..]);
        stamp(&mut stamped, 42, 0);
        let records = RecordBatchDecoder::decode(&mut stamped.freeze()).expect("decodes").records;
        assert_eq!(records.len(), 1);
        let r = &records[0];
        assert!(r.control && r.transactional);
        assert_eq!((r.offset, r.producer_id, r.producer_epoch, r.timestamp), (42, 7, 3, 1_234));
        // Key: version 0, type (0 abort, 1 commit); value: version 0, coordinator epoch 0.
        assert_eq!(r.key.as_deref(), Some(&[0, 0, 0, u8::from(commit)][..]));
        assert_eq!(r.value.as_deref(), Some(&[0u8; 6][..]));
    }
}
