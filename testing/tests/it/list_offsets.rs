//! ListOffsets: the log's ends and the offset of a time, as consumers look them up to start
//! from earliest, latest or a timestamp.

use floe_agent::record_batch::BatchHeader;
use floe_testing::{KafkaClient, LIST_OFFSETS_VERSION, TestAgent, TestOptions, list_offsets_request, record_batch};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;

/// ListOffsets' timestamp for the log end offset (the high watermark).
const LATEST: i64 = -1;
/// ListOffsets' timestamp for the log start offset.
const EARLIEST: i64 = -2;

/// On an empty partition earliest and latest are both 0 and a timestamp finds no record (offset
/// -1). After a Produce of three records earliest stays 0, latest is 3, and a timestamp at or
/// before the records' finds the first of them with its timestamp, one after them none. A
/// partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION (3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn earliest_latest_and_by_timestamp_follow_what_was_produced() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("clicks", 1).await;
    let now = floe_metadata::now_ms();
    for (what, timestamp) in [("earliest", EARLIEST), ("latest", LATEST)] {
        let answer = list_offset(&mut kafka, "clicks", 0, timestamp).await;
        assert_eq!((answer.error_code, answer.offset), (0, 0), "{what} of an empty partition");
    }
    let none = list_offset(&mut kafka, "clicks", 0, now).await;
    assert_eq!((none.error_code, none.offset, none.timestamp), (0, -1, -1), "a timestamp in an empty partition");

    let batch = record_batch(&["c1", "c2", "c3"]);
    let stamped = BatchHeader::parse(&batch).expect("a v2 batch").base_timestamp;
    let produced = kafka.produce("clicks", 0, batch, -1).await.expect("answered");
    assert_eq!((produced.error_code, produced.base_offset), (0, 0), "{:?}", produced.error_message);

    let earliest = list_offset(&mut kafka, "clicks", 0, EARLIEST).await;
    assert_eq!((earliest.error_code, earliest.offset), (0, 0));
    let latest = list_offset(&mut kafka, "clicks", 0, LATEST).await;
    assert_eq!((latest.error_code, latest.offset), (0, 3));
    for target in [0, stamped] {
        let found = list_offset(&mut kafka, "clicks", 0, target).await;
        assert_eq!((found.error_code, found.offset, found.timestamp), (0, 0, stamped), "timestamp {target}");
    }
    let after = list_offset(&mut kafka, "clicks", 0, stamped + 1).await;
    assert_eq!((after.error_code, after.offset, after.timestamp), (0, -1, -1), "a timestamp after every record");

    let unknown = list_offset(&mut kafka, "clicks", 5, LATEST).await;
    assert_eq!((unknown.error_code, unknown.offset), (3, -1));
    floe.shutdown().await;
}

/// ListOffsets of one partition at `timestamp` (-1 latest, -2 earliest, or milliseconds).
async fn list_offset(
    kafka: &mut KafkaClient,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> ListOffsetsPartitionResponse {
    let response = kafka.call(&list_offsets_request(topic, partition, timestamp), LIST_OFFSETS_VERSION).await;
    response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered")
}
