use bytes::{Bytes, BytesMut};
use kafka_protocol::records::Compression;

use super::*;
use crate::record_batch::tests::encode_batch;

const POLICY: TopicPolicy = TopicPolicy { max_message_bytes: 1_048_588, log_append_time: false };

fn check(records: Bytes, policy: &TopicPolicy, expected: Result<usize, ProduceError>) {
    let got = partition_records(Some(&records), policy, 5).map(|b| b.len());
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
    assert!(matches!(partition_records(None, &POLICY, 0), Err(ProduceError::InvalidRecord(_))));
}

#[test]
fn log_append_time_topics_stamp_the_batch() {
    let policy = TopicPolicy { log_append_time: true, ..POLICY };
    let batches = partition_records(Some(&encode_batch(2, Compression::Snappy)), &policy, 777).expect("valid");
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
    assert!(matches!(partition_records(Some(&Bytes::from(forged)), &POLICY, 0), Err(ProduceError::InvalidRecord(_))));
}
