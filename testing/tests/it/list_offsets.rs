//! ListOffsets: the log's ends and the offset of a time, as consumers look them up to start
//! from earliest, latest or a timestamp.

use bytes::Bytes;
use floe_agent::record_batch::BatchHeader;
use floe_agent::record_batch::build::{NewRecord, build_batch};
use floe_testing::{KafkaClient, LIST_OFFSETS_VERSION, TestAgent, TestOptions, list_offsets_request, record_batch};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;

/// ListOffsets' timestamp for the log end offset (the high watermark).
const LATEST: i64 = -1;
/// ListOffsets' timestamp for the log start offset.
const EARLIEST: i64 = -2;
/// ListOffsets' timestamp for the record with the largest timestamp (KIP-734).
const MAX_TIMESTAMP: i64 = -3;
/// Records per partition in the by-timestamp test.
const RECORD_COUNT: usize = 400;
/// Compression codec ids of a batch's attributes.
const UNCOMPRESSED: i16 = 0;
const LZ4: i16 = 3;

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

/// Lookups by timestamp find the first record, in offset order, whose timestamp is at or after
/// the target, looking inside batches and across them, compressed or not: partition 0 holds 400
/// records 10 ms apart, uncompressed; partition 1 (lz4) holds runs of three equal timestamps
/// with one outlier far ahead in the middle, so the first record at or after a target may sit
/// past later records with smaller timestamps. Records go in batches of at most 37, in requests
/// of 100, as a lingering producer sends them. Each answer gives that record's timestamp; past
/// every record it is -1. Earliest is 0, latest 400, and the max timestamp (-3) is the outlier
/// in partition 1 and the last record in partition 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_timestamp_finds_the_first_record_at_or_after_it_inside_and_across_batches() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("stamped", 2).await;
    let base = floe_metadata::now_ms() - 3_600_000 + 123;
    let steady: Vec<i64> = (0..RECORD_COUNT as i64).map(|i| base + 10 * i).collect();
    let mut bunched: Vec<i64> = (0..RECORD_COUNT as i64).map(|i| base + 10 * (i / 3)).collect();
    let outlier = RECORD_COUNT / 2 + 7;
    bunched[outlier] = base + 50_000_000;
    for (partition, timestamps, codec) in [(0, &steady, UNCOMPRESSED), (1, &bunched, LZ4)] {
        produce_stamped(&mut kafka, "stamped", partition, timestamps, codec).await;
    }

    for (partition, timestamps) in [(0, &steady), (1, &bunched)] {
        let mut wrong = Vec::new();
        for target in targets(base, timestamps) {
            let found = list_offset(&mut kafka, "stamped", partition, target).await;
            assert_eq!(found.error_code, 0, "partition {partition}, timestamp {target}");
            let want = timestamps.iter().position(|t| *t >= target);
            let expected = want.map_or((-1, -1), |offset| (offset as i64, timestamps[offset]));
            if (found.offset, found.timestamp) != expected {
                wrong.push((target - base, (found.offset, found.timestamp), expected));
            }
        }
        assert!(wrong.is_empty(), "partition {partition}: (target - base, found, expected) {wrong:?}");

        let earliest = list_offset(&mut kafka, "stamped", partition, EARLIEST).await;
        let latest = list_offset(&mut kafka, "stamped", partition, LATEST).await;
        assert_eq!((earliest.offset, latest.offset), (0, RECORD_COUNT as i64), "partition {partition}");
        let max = list_offset(&mut kafka, "stamped", partition, MAX_TIMESTAMP).await;
        let newest = timestamps.iter().copied().max().expect("records");
        let first_newest = timestamps.iter().position(|t| *t == newest).expect("records") as i64;
        assert_eq!((max.error_code, max.offset, max.timestamp), (0, first_newest, newest), "partition {partition}");
    }
    assert_eq!(list_offset(&mut kafka, "stamped", 1, MAX_TIMESTAMP).await.offset, outlier as i64);
    floe.shutdown().await;
}

/// Produces one record per timestamp (`k{i}`/`v{i}`) to `partition` in requests of 100 records
/// holding batches of at most 37, compressed with `codec`; checks they take offsets 0 onwards.
async fn produce_stamped(kafka: &mut KafkaClient, topic: &str, partition: i32, timestamps: &[i64], codec: i16) {
    let records: Vec<NewRecord> = timestamps
        .iter()
        .enumerate()
        .map(|(i, &timestamp)| NewRecord {
            timestamp,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("v{i}"))),
            ..NewRecord::default()
        })
        .collect();
    let mut next_offset = 0;
    for request in records.chunks(100) {
        let mut batches: Vec<u8> = Vec::new();
        for batch in request.chunks(37) {
            batches.extend_from_slice(&build_batch(batch, None, codec).expect("a batch"));
        }
        let produced = kafka.produce(topic, partition, Bytes::from(batches), -1).await.expect("answered");
        assert_eq!((produced.error_code, produced.base_offset), (0, next_offset), "{:?}", produced.error_message);
        next_offset += request.len() as i64;
    }
}

/// The targets the e2e test looked up: around the first record, inside and between batches, at
/// and past the largest and the last timestamps, and around every 41st record.
fn targets(base: i64, timestamps: &[i64]) -> Vec<i64> {
    let newest = timestamps.iter().copied().max().expect("records");
    let last = *timestamps.last().expect("records");
    let middle = timestamps[timestamps.len() / 2];
    let mut targets = vec![
        base - 1000,
        base,
        base + 1,
        base + 5,
        base + 10 * 37,
        base + 10 * 37 + 9,
        base + 10 * 150 - 1,
        newest,
        newest + 1,
        last,
        last + 1,
        middle,
    ];
    for t in timestamps.iter().step_by(41) {
        targets.extend([t - 1, *t, t + 1]);
    }
    targets.sort_unstable();
    targets.dedup();
    targets
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
