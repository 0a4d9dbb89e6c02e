use bytes::{Bytes, BytesMut};
use kafka_protocol::records::Compression;

use super::*;
use crate::record_batch::tests::encode_batch;

const POLICY: TopicPolicy = TopicPolicy {
    max_message_bytes: 1_048_588,
    log_append_time: false,
    compacted: false,
    timestamp_before_max_ms: i64::MAX,
    timestamp_after_max_ms: i64::MAX,
};

fn check(records: Bytes, policy: &TopicPolicy, expected: Result<usize, ProduceError>) {
    let got = partition_records(Some(&records), policy, 5, None, None).map(|b| b.batches.len());
    assert_eq!(got, expected);
}

#[test]
fn accepts_well_formed_batches_of_every_codec() {
    for c in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let mut two = BytesMut::from(&encode_batch(3, c)[..]);
        two.extend_from_slice(&encode_batch(1, c));
        check(two.freeze(), &POLICY, Ok(2));
    }
}

#[test]
fn rejects_bad_batches_with_the_reason() {
    let good = encode_batch(3, Compression::None);
    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    check(Bytes::from(corrupt), &POLICY, Err(ProduceError::CorruptBatch(BatchError::CrcMismatch)));

    let small = TopicPolicy { max_message_bytes: 10, ..POLICY };
    check(good.clone(), &small, Err(ProduceError::BatchTooLarge { bytes: good.len(), max: 10 }));

    let mut magic1 = good.to_vec();
    magic1[16] = 1;
    check(Bytes::from(magic1), &POLICY, Err(ProduceError::CorruptBatch(BatchError::UnsupportedMagic(1))));

    check(
        good.slice(..good.len() - 1),
        &POLICY,
        Err(ProduceError::CorruptBatch(BatchError::Truncated { needed: good.len(), available: good.len() - 1 })),
    );
    assert!(matches!(partition_records(None, &POLICY, 0, None, None), Err(ProduceError::InvalidRecord(_))));
}

#[test]
fn log_append_time_topics_stamp_the_batch() {
    let policy = TopicPolicy { log_append_time: true, ..POLICY };
    let batches = partition_records(Some(&encode_batch(2, Compression::Snappy)), &policy, 777, None, None)
        .expect("valid")
        .batches;
    let header = BatchHeader::parse(&batches[0].bytes).expect("parses");
    assert_eq!(header.max_timestamp, 777);
    assert_ne!(header.attributes & crate::record_batch::ATTRIBUTE_LOG_APPEND_TIME, 0);
    assert!(crate::record_batch::crc_matches(&batches[0].bytes, &header));
}

#[test]
fn record_counts_must_fit_the_batch() {
    // Claim far more records than an uncompressed batch can hold; fix the CRC so only the count
    // is wrong.
    let mut forged = encode_batch(3, Compression::None).to_vec();
    forged[57..61].copy_from_slice(&1_000i32.to_be_bytes());
    forged[23..27].copy_from_slice(&999i32.to_be_bytes());
    let crc = crc32c::crc32c(&forged[21..]);
    forged[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(
        partition_records(Some(&Bytes::from(forged)), &POLICY, 0, None, None),
        Err(ProduceError::InvalidRecord(_))
    ));
    // A count that fits but is one more than the records: found by the one walk a check makes.
    let mut forged = encode_batch(3, Compression::None).to_vec();
    forged[57..61].copy_from_slice(&4i32.to_be_bytes());
    forged[23..27].copy_from_slice(&3i32.to_be_bytes());
    let crc = crc32c::crc32c(&forged[21..]);
    forged[17..21].copy_from_slice(&crc.to_be_bytes());
    let compacted = TopicPolicy { compacted: true, ..POLICY };
    let refused = partition_records(Some(&Bytes::from(forged)), &compacted, 0, None, None);
    assert!(
        matches!(&refused, Err(ProduceError::InvalidRecord(m)) if m.contains("claims 4 records and holds 3")),
        "{refused:?}"
    );
}

/// `batch` as producer `producer_id` (epoch 1) would send it from `base_sequence`.
fn with_producer(batch: &Bytes, producer_id: i64, base_sequence: i32, transactional: bool) -> Bytes {
    let mut b = batch.to_vec();
    b[43..51].copy_from_slice(&producer_id.to_be_bytes());
    b[51..53].copy_from_slice(&1i16.to_be_bytes());
    b[53..57].copy_from_slice(&base_sequence.to_be_bytes());
    if transactional {
        let attributes = i16::from_be_bytes([b[21], b[22]]) | crate::record_batch::ATTRIBUTE_TRANSACTIONAL;
        b[21..23].copy_from_slice(&attributes.to_be_bytes());
    }
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}

#[test]
fn a_partitions_batches_come_from_one_producer() {
    let batch = encode_batch(2, Compression::None);
    let mut two = BytesMut::from(&with_producer(&batch, 5, 0, false)[..]);
    two.extend_from_slice(&with_producer(&batch, 5, 2, false));
    let accepted = partition_records(Some(&two.freeze()), &POLICY, 0, None, None).expect("one producer");
    assert_eq!(accepted.producer, Some(ChunkProducer { producer_id: 5, producer_epoch: 1, transactional: false }));
    assert_eq!(accepted.batches.iter().map(|b| b.base_sequence).collect::<Vec<_>>(), vec![0, 2]);

    let mut mixed = BytesMut::from(&with_producer(&batch, 5, 0, false)[..]);
    mixed.extend_from_slice(&batch);
    assert!(matches!(
        partition_records(Some(&mixed.freeze()), &POLICY, 0, None, None),
        Err(ProduceError::InvalidRecord(_))
    ));

    let txn = with_producer(&batch, 5, 0, true);
    assert_eq!(
        partition_records(Some(&txn), &POLICY, 0, None, None).map(|b| b.producer),
        Err(ProduceError::TransactionalIdRequired)
    );
    assert!(
        partition_records(Some(&txn), &POLICY, 0, Some("t"), None)
            .is_ok_and(|b| b.producer.is_some_and(|p| p.transactional))
    );
    let negative_sequence = with_producer(&batch, 5, -1, false);
    assert!(matches!(
        partition_records(Some(&negative_sequence), &POLICY, 0, None, None),
        Err(ProduceError::InvalidRecord(_))
    ));
}

#[test]
fn a_compacted_topic_refuses_keyless_records_in_any_codec() {
    let compacted = TopicPolicy { compacted: true, ..POLICY };
    for c in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        check(encode_batch(3, c), &compacted, Ok(1));
        let mut keyless =
            kafka_protocol::records::RecordBatchDecoder::decode(&mut encode_batch(3, c)).expect("decodes").records;
        keyless[1].key = None;
        let mut batch = BytesMut::new();
        kafka_protocol::records::RecordBatchEncoder::encode(
            &mut batch,
            &keyless,
            &kafka_protocol::records::RecordEncodeOptions { version: 2, compression: c },
        )
        .expect("encodes");
        check(batch.clone().freeze(), &POLICY, Ok(1));
        let refused = partition_records(Some(&batch.freeze()), &compacted, 5, None, None);
        let Err(ProduceError::RecordsRefused { why: RecordRefusal::NoKey, records }) = refused else {
            panic!("{c:?}: {refused:?}");
        };
        assert_eq!(records.iter().map(|r| r.batch_index).collect::<Vec<_>>(), vec![1], "{c:?}: only the keyless one");
        assert!(records[0].message.contains("without a key"));
    }
}

/// A batch of `encode_batch`'s records with these timestamps.
fn with_timestamps(stamps: &[i64], compression: Compression) -> Bytes {
    let mut records = kafka_protocol::records::RecordBatchDecoder::decode(&mut encode_batch(stamps.len(), compression))
        .expect("decodes")
        .records;
    for (r, at) in records.iter_mut().zip(stamps) {
        r.timestamp = *at;
    }
    let mut batch = BytesMut::new();
    let options = kafka_protocol::records::RecordEncodeOptions { version: 2, compression };
    kafka_protocol::records::RecordBatchEncoder::encode(&mut batch, &records, &options).expect("encodes");
    batch.freeze()
}

#[test]
fn records_with_timestamps_out_of_bounds_are_named() {
    let now = 1_000_000_000_000i64;
    let bounded = TopicPolicy { timestamp_before_max_ms: 60_000, timestamp_after_max_ms: 1_000, ..POLICY };
    // Two batches of the partition: the second's records are numbered after the first's.
    let mut two = BytesMut::from(&with_timestamps(&[now; 3], Compression::None)[..]);
    two.extend_from_slice(&with_timestamps(&[now - 10, now - 120_000, now, now + 5_000], Compression::Lz4));
    let two = two.freeze();
    // Within the bounds, nothing is decompressed or refused.
    assert!(partition_records(Some(&two), &POLICY, now, None, None).is_ok());
    let refused = partition_records(Some(&two), &bounded, now, None, None);
    let Err(ProduceError::RecordsRefused { why: RecordRefusal::Timestamp, records }) = refused else {
        panic!("{refused:?}");
    };
    let named: Vec<i32> = records.iter().map(|r| r.batch_index).collect();
    assert_eq!(named, vec![4, 6], "the second batch's records 1 and 3, after the first's 3");
    assert!(records[0].message.contains("before.max.ms") && records[1].message.contains("after.max.ms"));
    // LogAppendTime topics take any timestamp: it is replaced.
    let appended = TopicPolicy { log_append_time: true, ..bounded };
    assert!(partition_records(Some(&two), &appended, now, None, None).is_ok());
}

#[test]
fn refusals_are_named_up_to_a_bound_and_their_messages_are_short() {
    // Two batches of 800 keyless records: 1,000 named, and checking stops there.
    let compacted = TopicPolicy { compacted: true, ..POLICY };
    let keyless = |n: usize| {
        let mut records = kafka_protocol::records::RecordBatchDecoder::decode(&mut encode_batch(n, Compression::Zstd))
            .expect("decodes")
            .records;
        records.iter_mut().for_each(|r| r.key = None);
        let mut batch = BytesMut::new();
        kafka_protocol::records::RecordBatchEncoder::encode(
            &mut batch,
            &records,
            &kafka_protocol::records::RecordEncodeOptions { version: 2, compression: Compression::Zstd },
        )
        .expect("encodes");
        batch
    };
    let mut two = keyless(800);
    two.extend_from_slice(&keyless(800));
    let Err(ProduceError::RecordsRefused { records, .. }) =
        partition_records(Some(&two.freeze()), &compacted, 5, None, None)
    else {
        panic!("refused");
    };
    assert_eq!(records.len(), RECORD_ERRORS_NAMED_MAX);
    assert_eq!(records.last().map(|r| r.batch_index), Some(999));

    // A long reason (a JSON Schema error quoting a large record) is cut.
    let batch = encode_batch(2, Compression::None);
    let header = crate::record_batch::split(&batch).next().expect("one batch").expect("parses").0;
    let records = BatchRecords::new(&header, &batch);
    let place = Place { first_index: 0, room: 10 };
    let Err(ProduceError::RecordsRefused { records, .. }) =
        refuse_records(&records, place, RecordRefusal::Schema, |_| Some("é".repeat(10_000)))
    else {
        panic!("refused");
    };
    assert!(records.iter().all(|r| r.message.len() <= RECORD_ERROR_MESSAGE_BYTES_MAX + '…'.len_utf8()));
    // With no room left, nothing is checked.
    let none = Place { first_index: 0, room: 0 };
    assert_eq!(refuse_records(&records_of(&batch, &header), none, RecordRefusal::Schema, |_| Some("x".into())), Ok(()));
}

fn records_of<'a>(batch: &'a Bytes, header: &'a BatchHeader) -> BatchRecords<'a> {
    BatchRecords::new(header, batch)
}
