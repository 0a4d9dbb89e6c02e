//! Requests a Kafka client gets wrong, or makes of what does not exist: each partition is
//! answered with the error code the client acts on, and nothing of it is written.

use bytes::Bytes;
use floe_testing::{LIST_OFFSETS_VERSION, TestAgent, TestOptions, decode_records, list_offsets_request, record_batch};
use kafka_protocol::ResponseError;

/// Where a v2 batch's CRC-32C is (bytes 17..21; it covers bytes 21 to the end).
const CRC_AT: usize = 17;

/// A Produce to a topic that does not exist (the harness does not create topics on use), or to
/// a partition the topic does not have, is answered UNKNOWN_TOPIC_OR_PARTITION (3) with no
/// offset; the topic is not created by it and the topic that exists gets no record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_to_an_unknown_topic_or_partition_is_unknown_topic_or_partition() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("known", 1).await;
    for (topic, partition) in [("missing", 0), ("known", 7), ("known", -1)] {
        let answer = kafka.produce(topic, partition, record_batch(&["lost"]), -1).await.expect("answered");
        assert_eq!(answer.error_code, ResponseError::UnknownTopicOrPartition.code(), "{topic}-{partition}");
        assert_eq!(answer.error_code, 3);
        assert_eq!((answer.index, answer.base_offset), (partition, -1), "{topic}-{partition}");
    }
    assert_eq!(kafka.end_offset("known", 0).await, 0, "nothing was appended");
    // ListOffsets of the missing topic: still unknown, so the Produce did not create it.
    let response = kafka.call(&list_offsets_request("missing", 0, -1), LIST_OFFSETS_VERSION).await;
    let answer = response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    assert_eq!(answer.error_code, 3, "the topic was not created by the Produce");
    floe.shutdown().await;
}

/// A batch whose CRC-32C does not match its bytes, whether the CRC field or a byte it covers
/// was changed, is answered CORRUPT_MESSAGE (2) and not appended: the next good batch takes the
/// offset after the last good one, and a Fetch returns the good records only. The connection
/// serves on after each refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_with_a_wrong_crc_is_corrupt_message_and_is_not_appended() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("ledger", 1).await;
    let first = kafka.produce("ledger", 0, record_batch(&["first"]), -1).await.expect("answered");
    assert_eq!((first.error_code, first.base_offset), (0, 0), "{:?}", first.error_message);

    let wrong_crc = flip_byte(record_batch(&["corrupt"]), CRC_AT);
    let changed_value = {
        let batch = record_batch(&["corrupt"]);
        // The value's last byte: the record's headers count (one byte, 0) follows it.
        let at = batch.len() - 2;
        flip_byte(batch, at)
    };
    for (what, batch) in [("CRC field changed", wrong_crc), ("a value byte changed", changed_value)] {
        let refused = kafka.produce("ledger", 0, batch, -1).await.expect("answered");
        assert_eq!(refused.error_code, ResponseError::CorruptMessage.code(), "{what}: {:?}", refused.error_message);
        assert_eq!(refused.error_code, 2, "{what}");
        assert_eq!(refused.base_offset, -1, "{what}");
        let message = refused.error_message.as_deref().unwrap_or_default();
        assert!(message.contains("CRC"), "{what}: {message}");
    }
    assert_eq!(kafka.end_offset("ledger", 0).await, 1, "the corrupt batches took no offsets");

    let after = kafka.produce("ledger", 0, record_batch(&["after"]), -1).await.expect("answered");
    assert_eq!((after.error_code, after.base_offset), (0, 1), "{:?}", after.error_message);
    let fetched = kafka.fetch("ledger", 0, 0).await;
    assert_eq!((fetched.error_code, fetched.high_watermark), (0, 2));
    let stored: Vec<(i64, Option<Bytes>)> =
        decode_records(fetched.records.as_ref()).into_iter().map(|r| (r.offset, r.value)).collect();
    assert_eq!(stored, vec![(0, Some(Bytes::from_static(b"first"))), (1, Some(Bytes::from_static(b"after")))]);
    floe.shutdown().await;
}

/// A Fetch at the high watermark is answered with no records and no error (a consumer at the
/// end waits there); one past it is OFFSET_OUT_OF_RANGE (1), on which a consumer resets its
/// position, with the high watermark -1 as Kafka answers an error. A Fetch of a topic or
/// partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION (3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_past_the_high_watermark_is_offset_out_of_range() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("events", 1).await;
    let produced = kafka.produce("events", 0, record_batch(&["a", "b", "c"]), -1).await.expect("answered");
    assert_eq!((produced.error_code, produced.base_offset), (0, 0), "{:?}", produced.error_message);

    let at_end = kafka.fetch("events", 0, 3).await;
    assert_eq!((at_end.error_code, at_end.high_watermark), (0, 3));
    assert!(at_end.records.as_ref().is_none_or(|records| records.is_empty()), "nothing at the high watermark");

    let past_end = kafka.fetch("events", 0, 4).await;
    assert_eq!(past_end.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!(past_end.error_code, 1);
    assert_eq!(past_end.high_watermark, -1);

    for (topic, partition) in [("missing", 0), ("events", 2)] {
        let unknown = kafka.fetch(topic, partition, 0).await;
        assert_eq!(unknown.error_code, 3, "{topic}-{partition}");
    }
    floe.shutdown().await;
}

/// `batch` with the byte at `at` inverted.
fn flip_byte(batch: Bytes, at: usize) -> Bytes {
    let mut bytes = batch.to_vec();
    bytes[at] ^= 0xff;
    Bytes::from(bytes)
}
