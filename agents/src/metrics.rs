//! Agent metrics, registered in the process-wide Prometheus registry. Names follow Kafka's
//! (`BrokerTopicMetrics` bytes and messages in and out, request counts and times by API).

use std::sync::LazyLock;

use prometheus::{
    Histogram, HistogramVec, IntCounterVec, exponential_buckets, register_histogram, register_histogram_vec,
    register_int_counter_vec,
};

/// Kafka requests handled, by API.
pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_kafka_requests_total", "Kafka requests handled, by API", &["api"]).expect("unique")
});
/// Time from a request being read to its response being written, by API.
pub static REQUEST_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "floe_kafka_request_duration_seconds",
        "Time from reading a Kafka request to writing its response, by API",
        &["api"],
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});
/// Record batch bytes accepted by Produce, by topic (Kafka's BytesInPerSec).
pub static BYTES_IN: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_bytes_in_total", "Produced bytes committed, by topic", &["topic"])
        .expect("unique")
});
/// Records accepted by Produce, by topic (Kafka's MessagesInPerSec).
pub static MESSAGES_IN: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_messages_in_total", "Produced records committed, by topic", &["topic"])
        .expect("unique")
});
/// Record bytes returned by Fetch, by topic (Kafka's BytesOutPerSec).
pub static BYTES_OUT: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_bytes_out_total", "Fetched bytes, by topic", &["topic"])
        .expect("unique")
});
/// Bytes of each flushed segment object.
pub static FLUSH_SEGMENT_BYTES: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_flush_segment_bytes",
        "Size of each flushed segment object",
        exponential_buckets(1024.0, 4.0, 12).expect("valid buckets")
    )
    .expect("unique")
});
/// Time from a flush being taken to its commit being answered (upload + commit).
pub static FLUSH_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_flush_duration_seconds",
        "Time from taking a flush to its commit completing (upload and metadata commit)",
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});
