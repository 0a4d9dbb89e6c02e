//! Requests a Kafka client gets wrong, or makes of what does not exist: each partition is
//! answered with the error code the client acts on, and nothing of it is written. Bytes no
//! client sends close their own connection, and no other.

use std::time::Duration;

use bytes::Bytes;
use floe_testing::{
    CREATE_TOPICS_VERSION, KafkaClient, LIST_OFFSETS_VERSION, TestAgent, TestOptions, decode_records,
    list_offsets_request, partition_answer, produce_request, record_batch,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, CreateTopicsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Where a v2 batch's CRC-32C is (bytes 17..21; it covers bytes 21 to the end).
const CRC_AT: usize = 17;
/// Produce v3, the oldest the agent serves: not flexible, no error messages.
const PRODUCE_V3: i16 = 3;
/// Metadata v4, the first with `allow_auto_topic_creation`.
const METADATA_V4: i16 = 4;
/// Longest wait for the agent to close a connection it must close.
const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// A Produce to a topic that does not exist (the harness does not create topics on use), or to
/// a partition the topic does not have, is answered UNKNOWN_TOPIC_OR_PARTITION (3) with no
/// offset; the topic is not created by it and the topic that exists gets no record. Metadata
/// with auto-creation off (Metadata v4, as consumers ask) answers the missing topic
/// UNKNOWN_TOPIC_OR_PARTITION too and does not create it.
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
    // Metadata with auto-creation off, as a consumer asks: unknown, and not created by asking.
    let missing = MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_static_str("missing"))));
    let request = MetadataRequest::default().with_topics(Some(vec![missing])).with_allow_auto_topic_creation(false);
    let metadata = kafka.call(&request, METADATA_V4).await;
    assert_eq!(
        metadata.topics.iter().map(|t| t.error_code).collect::<Vec<_>>(),
        vec![3],
        "Metadata of the missing topic"
    );
    // ListOffsets of the missing topic: still unknown, so the Produce did not create it.
    let response = kafka.call(&list_offsets_request("missing", 0, -1), LIST_OFFSETS_VERSION).await;
    let answer = response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    assert_eq!(answer.error_code, 3, "the topic was not created by the Produce");
    floe.shutdown().await;
}

/// A batch whose CRC-32C does not match its bytes, whether the CRC field or a byte it covers
/// was changed, is answered CORRUPT_MESSAGE (2) and not appended: the next good batch takes the
/// offset after the last good one, and a Fetch returns the good records only. Produce v3 and v9
/// alike. The connection serves on after each refusal.
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
    // Produce v3 refuses it alike (its answer has no message).
    let request = produce_request("ledger", 0, flip_byte(record_batch(&["corrupt"]), CRC_AT), -1);
    let refused = partition_answer(kafka.call(&request, PRODUCE_V3).await);
    assert_eq!((refused.error_code, refused.base_offset), (2, -1), "Produce v3");
    assert_eq!(kafka.end_offset("ledger", 0).await, 1, "the corrupt batches took no offsets");

    let after = kafka.produce("ledger", 0, record_batch(&["after"]), -1).await.expect("answered");
    assert_eq!((after.error_code, after.base_offset), (0, 1), "{:?}", after.error_message);
    let request = produce_request("ledger", 0, record_batch(&["after v3"]), -1);
    let after_v3 = partition_answer(kafka.call(&request, PRODUCE_V3).await);
    assert_eq!((after_v3.error_code, after_v3.base_offset), (0, 2), "a good batch in Produce v3");
    let fetched = kafka.fetch("ledger", 0, 0).await;
    assert_eq!((fetched.error_code, fetched.high_watermark), (0, 3));
    let stored: Vec<(i64, Option<Bytes>)> =
        decode_records(fetched.records.as_ref()).into_iter().map(|r| (r.offset, r.value)).collect();
    let expected: Vec<(i64, Option<Bytes>)> = [(0, "first"), (1, "after"), (2, "after v3")]
        .into_iter()
        .map(|(offset, value)| (offset, Some(Bytes::from_static(value.as_bytes()))))
        .collect();
    assert_eq!(stored, expected);
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

/// A batch larger than its topic's `max.message.bytes` (2048 here) is MESSAGE_TOO_LARGE (10) and
/// takes no offset: the small batches before and after it get offsets 0 and 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_max_message_bytes_is_message_too_large() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    let config = CreatableTopicConfig::default()
        .with_name(StrBytes::from_static_str("max.message.bytes"))
        .with_value(Some(StrBytes::from_static_str("2048")));
    let topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("bounded")))
        .with_num_partitions(1)
        .with_replication_factor(-1)
        .with_configs(vec![config]);
    let created = kafka.call(&CreateTopicsRequest::default().with_topics(vec![topic]), CREATE_TOPICS_VERSION).await;
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0].error_message);

    let small = kafka.produce("bounded", 0, record_batch(&["small"]), -1).await.expect("answered");
    assert_eq!((small.error_code, small.base_offset), (0, 0), "{:?}", small.error_message);
    let large = "x".repeat(8192);
    let refused = kafka.produce("bounded", 0, record_batch(&[large.as_str()]), -1).await.expect("answered");
    assert_eq!(refused.error_code, ResponseError::MessageTooLarge.code(), "{:?}", refused.error_message);
    assert_eq!((refused.error_code, refused.base_offset), (10, -1));
    let again = kafka.produce("bounded", 0, record_batch(&["small again"]), -1).await.expect("answered");
    assert_eq!((again.error_code, again.base_offset), (0, 1), "{:?}", again.error_message);
    floe.shutdown().await;
}

/// Input no Kafka client sends (an unknown API key, a known one with a truncated body, a
/// negative length, API key -1 with noise, an HTTP request, a 200 MiB frame) closes that
/// connection and no other: a producer connected throughout keeps getting its records appended,
/// in order, and a new connection is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_closes_only_the_connection_it_came_on() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut good = floe.kafka();
    good.create_topic("steady", 1).await;
    let noise = noise(4096);
    let truncated_produce = bytes_of(&[
        &0i16.to_be_bytes(), // Produce
        &3i16.to_be_bytes(), // v3
        &1i32.to_be_bytes(), // correlation id
        &1i16.to_be_bytes(), // client id: "x"
        b"x",
        &0x7fffi16.to_be_bytes(), // a transactional id of 32767 bytes, of which 50 follow
        &noise[..50],
    ]);
    let garbage: Vec<(&str, Vec<u8>)> = vec![
        (
            "unknown API key",
            bytes_of(&[
                &64i32.to_be_bytes(),
                &0x7a7ai16.to_be_bytes(),
                &0i16.to_be_bytes(),
                &1i32.to_be_bytes(),
                &noise[..56],
            ]),
        ),
        ("known API, truncated body", bytes_of(&[&(truncated_produce.len() as i32).to_be_bytes(), &truncated_produce])),
        ("negative length", bytes_of(&[&(-17i32).to_be_bytes(), &noise[..64]])),
        ("API key -1 and noise", bytes_of(&[&4000i32.to_be_bytes(), &(-1i16).to_be_bytes(), &noise[..3998]])),
        ("HTTP request", bytes_of(&[b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[0u8; 4000]])),
        (
            "200 MiB frame",
            bytes_of(&[
                &(200i32 << 20).to_be_bytes(),
                &18i16.to_be_bytes(),
                &0i16.to_be_bytes(),
                &1i32.to_be_bytes(),
                &[b'x'; 1000],
            ]),
        ),
    ];
    for (offset, (what, bytes)) in (0i64..).zip(garbage) {
        let mut bad = floe.kafka();
        // The agent may close the connection before it has read everything.
        let _ = bad.write_bytes(&bytes).await;
        assert!(bad.closed_by_peer(CLOSE_WAIT).await, "{what}: the connection is not closed");
        let value = format!("ok-{offset}");
        let produced = good.produce("steady", 0, record_batch(&[value.as_str()]), -1).await.expect("answered");
        assert_eq!((produced.error_code, produced.base_offset), (0, offset), "after {what}");
        assert_answers(&floe, what).await;
    }
    let fetched = good.fetch("steady", 0, 0).await;
    let values: Vec<Option<Bytes>> = decode_records(fetched.records.as_ref()).into_iter().map(|r| r.value).collect();
    let expected: Vec<Option<Bytes>> = (0..6).map(|i| Some(Bytes::from(format!("ok-{i}")))).collect();
    assert_eq!(values, expected);
    floe.shutdown().await;
}

/// Checks a new connection is answered (ApiVersions v0, which any client can read).
async fn assert_answers(floe: &TestAgent, after: &str) {
    let mut fresh: KafkaClient = floe.kafka();
    let response = fresh.call(&ApiVersionsRequest::default(), 0).await;
    assert_eq!(response.error_code, 0, "ApiVersions after {after}");
    assert!(response.api_keys.iter().any(|api| api.api_key == ApiKey::Produce as i16), "after {after}");
}

/// `parts` one after another.
fn bytes_of(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// `len` bytes that look random, the same each run.
fn noise(len: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 131 + 7) % 256) as u8).collect()
}

/// `batch` with the byte at `at` inverted.
fn flip_byte(batch: Bytes, at: usize) -> Bytes {
    let mut bytes = batch.to_vec();
    bytes[at] ^= 0xff;
    Bytes::from(bytes)
}
