//! Object store failures as a Kafka client sees them.

use floe_testing::{TestAgent, TestOptions, record_batch};
use kafka_protocol::ResponseError;

/// A Produce whose segment PUT fails is answered KAFKA_STORAGE_ERROR (56, retriable, "not
/// persisted") and nothing of it becomes visible: the high watermark stays, a Fetch there finds
/// nothing, and the next Produce that succeeds takes the offset the failed one never had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_put_is_a_storage_error_and_leaves_the_log_as_it_was() {
    let floe = TestAgent::start(TestOptions { object_store_faults: true, ..TestOptions::default() }).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("payments", 1).await;
    let before = kafka.produce("payments", 0, record_batch(&["p1"]), -1).await.expect("answered");
    assert_eq!((before.error_code, before.base_offset), (0, 0), "{:?}", before.error_message);

    floe.set_faults("put-error=1");
    let failed = kafka.produce("payments", 0, record_batch(&["p2"]), -1).await.expect("answered");
    assert_eq!(failed.error_code, ResponseError::KafkaStorageError.code(), "{:?}", failed.error_message);
    assert_eq!(failed.error_code, 56);
    assert_eq!(failed.base_offset, -1);
    assert_eq!(kafka.end_offset("payments", 0).await, 1, "the high watermark did not move");
    let fetched = kafka.fetch("payments", 0, 1).await;
    assert_eq!((fetched.error_code, fetched.high_watermark), (0, 1));
    assert!(fetched.records.as_ref().is_none_or(|records| records.is_empty()), "nothing past the high watermark");

    floe.set_faults("");
    let after = kafka.produce("payments", 0, record_batch(&["p3"]), -1).await.expect("answered");
    assert_eq!((after.error_code, after.base_offset), (0, 1), "the failed Produce took no offsets");
    floe.shutdown().await;
}
