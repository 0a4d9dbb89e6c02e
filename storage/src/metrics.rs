//! Object-store traffic counters, registered in the process-wide Prometheus registry. Counters
//! by outcome start with both outcomes at zero, so a rate of errors is 0, not missing, until the
//! first error.

use std::sync::LazyLock;

use prometheus::{
    HistogramVec, IntCounter, IntCounterVec, IntGauge, exponential_buckets, register_histogram_vec,
    register_int_counter, register_int_counter_vec, register_int_gauge,
};

/// `counter` with its `ok` and `error` series made.
fn with_outcomes(counter: IntCounterVec) -> IntCounterVec {
    for outcome in ["ok", "error"] {
        counter.with_label_values(&[outcome]);
    }
    counter
}

/// PUT requests by outcome (`ok`, `error`).
pub static OBJECT_PUTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    with_outcomes(
        register_int_counter_vec!(
            "floe_object_store_put_requests_total",
            "Segment PUT requests by outcome",
            &["outcome"]
        )
        .expect("metric names are unique"),
    )
});
/// Segment PUT requests dropped unanswered: the losing attempt of a hedged PUT. Requests sent
/// are these plus the answered ones (`floe_object_store_put_requests_total`).
pub static OBJECT_PUTS_ABANDONED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_object_store_put_abandoned_total",
        "Segment PUT requests dropped unanswered (the losing attempt of a hedged PUT)"
    )
    .expect("unique")
});
/// Hedged segment PUTs by which attempt landed (`won`: the hedge, `lost`: the first).
pub static PUT_HEDGES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let hedges = register_int_counter_vec!(
        "floe_object_store_put_hedges_total",
        "Segment PUTs sent a second time for being slow, by whether the second attempt landed first",
        &["result"]
    )
    .expect("metric names are unique");
    for result in ["won", "lost"] {
        hedges.with_label_values(&[result]);
    }
    hedges
});
/// Bytes written by successful PUTs.
pub static OBJECT_PUT_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_object_store_put_bytes_total", "Bytes written to the object store").expect("unique")
});
/// Ranged GET requests by outcome.
pub static OBJECT_GETS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    with_outcomes(
        register_int_counter_vec!(
            "floe_object_store_get_requests_total",
            "Ranged GET requests by outcome",
            &["outcome"]
        )
        .expect("metric names are unique"),
    )
});
/// DELETE requests by outcome (garbage collection).
pub static OBJECT_DELETES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    with_outcomes(
        register_int_counter_vec!(
            "floe_object_store_delete_requests_total",
            "Segment DELETE requests by outcome",
            &["outcome"]
        )
        .expect("metric names are unique"),
    )
});
/// LIST requests (garbage collection looking for orphans).
pub static OBJECT_LISTS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_object_store_list_requests_total", "Segment listings").expect("unique")
});
/// Bytes read by successful GETs.
pub static OBJECT_GET_BYTES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_object_store_get_bytes_total", "Bytes read from the object store").expect("unique")
});
/// Bytes the block cache's memory tier holds, as it weighs them (keys and block bytes), set after
/// each insert.
pub static BLOCK_CACHE_MEMORY_BYTES: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("floe_block_cache_memory_bytes", "Bytes the block cache holds in memory (keys and blocks)")
        .expect("unique")
});
/// Blocks chunk reads asked the block cache for (hits are these minus the `miss` GETs).
pub static BLOCK_READS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_block_cache_reads_total", "Blocks read through the block cache").expect("unique")
});
/// Blocks read from the object store, by cause (`miss`: a read needed it; `prefetch`; `peer`:
/// another agent of the zone asked this one, the block's owner; `job`: a background job read it,
/// outside the hot tier).
pub static BLOCK_GETS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let gets = register_int_counter_vec!(
        "floe_block_cache_object_gets_total",
        "Blocks read from the object store by the block cache, by cause",
        &["cause"]
    )
    .expect("metric names are unique");
    for cause in ["miss", "prefetch", "peer", "job"] {
        gets.with_label_values(&[cause]);
    }
    gets
});
/// Footers the block cache read for their objects' block checksums (one ranged GET each, two
/// for a long footer): once per object and agent, unless the object's end came with a block.
pub static FOOTER_GETS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_block_cache_footer_gets_total",
        "Footers read by the block cache for their objects' block checksums"
    )
    .expect("unique")
});
/// Blocks that failed their checksum, by where they came from (`store`: against the object's
/// footer, nothing cached; `disk`: the disk tier's copy, dropped and read from the store;
/// `peer`: an owner's answer, refused and read from the store).
pub static BLOCK_CHECKSUM_MISMATCHES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let mismatches = register_int_counter_vec!(
        "floe_block_cache_checksum_mismatches_total",
        "Blocks that failed their checksum, by source",
        &["source"]
    )
    .expect("metric names are unique");
    for source in ["store", "disk", "peer"] {
        mismatches.with_label_values(&[source]);
    }
    mismatches
});
/// Object-store request latency by operation (`put`, `get`, `head`, `list`, `delete`, `copy`,
/// `put_multipart`); a GET until its body is read. Buckets from 1 ms to about 33 s.
pub static OBJECT_REQUEST_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "floe_object_store_request_duration_seconds",
        "Object-store request latency by operation",
        &["operation"],
        exponential_buckets(0.001, 2.0, 16).expect("valid buckets")
    )
    .expect("metric names are unique")
});

/// Registers every metric here now, at zero, rather than at its first use: a dashboard or an
/// alert on a rate sees 0 from the start instead of no series.
pub fn register() {
    for counter in
        [&OBJECT_PUT_BYTES, &OBJECT_PUTS_ABANDONED, &OBJECT_LISTS, &OBJECT_GET_BYTES, &BLOCK_READS, &FOOTER_GETS]
    {
        LazyLock::force(counter);
    }
    for counter in [&OBJECT_PUTS, &PUT_HEDGES, &OBJECT_GETS, &OBJECT_DELETES, &BLOCK_GETS, &BLOCK_CHECKSUM_MISMATCHES] {
        LazyLock::force(counter);
    }
    LazyLock::force(&OBJECT_REQUEST_SECONDS);
}
