//! Produce, and what ListOffsets and Fetch see of it afterwards.

use std::time::Duration;

use bytes::Bytes;
use floe_testing::{
    PRODUCE_VERSION, TestAgent, TestOptions, partition_answer, produce_request, record_batch, split_batches,
};
use kafka_protocol::messages::ProduceRequest;

/// An acks=0 Produce is never answered: the next response on the connection is the next
/// request's. Its records are appended all the same: the log end offset reaches them and a Fetch
/// returns them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_with_acks_0_is_not_answered_and_its_records_are_appended() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("events", 1).await;
    assert!(kafka.produce("events", 0, record_batch(&["a", "b", "c"]), 0).await.is_none());
    // `end_offset` checks that the answer it reads is its own, not one to the Produce.
    let end = kafka.end_offset("events", 0).await;
    assert!(end == 0 || end == 3, "the batch is committed whole or not yet: {end}");
    let appended = async {
        while kafka.end_offset("events", 0).await != 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), appended).await.expect("the acks=0 records are committed");
    let fetched = kafka.fetch("events", 0, 0).await;
    assert_eq!(fetched.error_code, 0);
    let batches = split_batches(fetched.records.as_ref());
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert_eq!((batches[0].0.base_offset, batches[0].0.record_count), (0, 3));
    floe.shutdown().await;
}

/// Two acks=-1 Produce requests pipelined on one connection are answered in the order sent,
/// with offsets in that order (the flush order), and a Fetch at each base offset returns that
/// batch as it was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_produces_get_offsets_in_send_order_and_fetch_returns_their_bytes() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("orders", 1).await;
    let (first, second) = (record_batch(&["o1", "o2"]), record_batch(&["o3"]));
    // Both sent before either answer is read.
    let sent = [
        kafka.send(&produce_request("orders", 0, first.clone(), -1), PRODUCE_VERSION).await,
        kafka.send(&produce_request("orders", 0, second.clone(), -1), PRODUCE_VERSION).await,
    ];
    let mut answered = Vec::new();
    let mut base_offsets = Vec::new();
    for _ in sent {
        let (correlation_id, response) = kafka.recv::<ProduceRequest>(PRODUCE_VERSION).await;
        let answer = partition_answer(response);
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        answered.push(correlation_id);
        base_offsets.push(answer.base_offset);
    }
    assert_eq!(answered, sent.to_vec(), "answered in the order sent");
    assert_eq!(base_offsets, vec![0, 2], "offsets in the order sent");
    assert_eq!(kafka.end_offset("orders", 0).await, 3);
    for (batch, base_offset) in [(&first, base_offsets[0]), (&second, base_offsets[1])] {
        let fetched = kafka.fetch("orders", 0, base_offset).await;
        assert_eq!((fetched.error_code, fetched.high_watermark), (0, 3));
        let served = split_batches(fetched.records.as_ref())
            .into_iter()
            .find(|(header, _)| header.base_offset == base_offset)
            .map(|(_, served)| served)
            .expect("the batch is served at its base offset");
        assert_same_batch(batch, &served, base_offset);
    }
    floe.shutdown().await;
}

/// `served` is `sent` as the fetch path serves it: `base_offset` stamped in bytes 0..8 and the
/// leader epoch in 12..16, both outside the CRC, every other byte as sent.
fn assert_same_batch(sent: &Bytes, served: &Bytes, base_offset: i64) {
    assert_eq!(served.len(), sent.len(), "the batch is served whole");
    assert_eq!(served[..8], base_offset.to_be_bytes(), "base offset");
    assert_eq!(served[8..12], sent[8..12], "batch length");
    assert_eq!(served[16..], sent[16..], "magic, CRC, attributes and records");
}

/// A producer may pipeline thousands of requests on one connection while flushes are slow:
/// librdkafka sends a request per partition batch, so at 2,000 partitions on S3 timing some
/// 4,000 are waiting at once. With 1,024 in flight the agent stopped reading (about 8,000
/// requests a second under `s3-standard`, p99 3.5 s): here the sends did not finish while the
/// first PUTs were held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_pipelined_produce_requests_are_read_while_flushes_are_slow() {
    const REQUESTS: usize = 2_000;
    let floe = TestAgent::start(TestOptions { object_store_faults: true, ..TestOptions::default() }).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("events", 1).await;
    // 16 MiB of batches: more than 1,024 requests and the connection's 4 MiB duplex hold.
    let value = "v".repeat(8 * 1024);
    let request = produce_request("events", 0, record_batch(&[value.as_str()]), 1);
    floe.set_faults("slow-put=1,slow-put-ms=4000");
    let sent = async {
        for _ in 0..REQUESTS {
            kafka.send(&request, PRODUCE_VERSION).await;
        }
    };
    let read = tokio::time::timeout(Duration::from_secs(3), sent).await;
    floe.set_faults("");
    assert!(read.is_ok(), "the agent stopped reading before every request was in flight");
    for expected in 0..REQUESTS {
        let (_, response) = kafka.recv::<ProduceRequest>(PRODUCE_VERSION).await;
        let answer = partition_answer(response);
        assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
        assert_eq!(answer.base_offset, expected as i64);
    }
    floe.shutdown().await;
}
