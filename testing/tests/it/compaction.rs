//! Compaction of many partitions' small chunks: what a round reads and what it leaves readable.

use floe_testing::{TestAgent, TestOptions, decode_records, partition_answer, produce_request_to, record_batch};

/// GETs of blocks a background job read from the object store.
const JOB_GETS: &str = "floe_block_cache_object_gets_total{cause=\"job\"}";
/// Blocks read through the block cache, from whichever tier.
const BLOCK_READS: &str = "floe_block_cache_reads_total";
const PARTITIONS: i32 = 64;
/// Flushes, each one object holding a chunk of every partition: more than the job's 32 MiB of
/// blocks hold (64 × 768 KiB).
const FLUSHES: usize = 64;
const CHUNK_BYTES: usize = 12 * 1024;

/// Issue 53. Every flush object holds a chunk of each of 64 partitions, and the hot tier is too
/// small to keep them, so a compaction round reads them from the object store. Read run by run
/// (partition by partition), the round read every object again for each partition once the job's
/// blocks no longer held it: 64 × 64 GETs for 64 objects. Read in the order the chunks lie in
/// their objects, each object is read once, and every partition's records are still there, in
/// order, in one entry. The adjacent chunks of an object are read together: a block read per
/// object, not one per chunk (at 10,000 partitions those lookups were a tenth of the agent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compaction_round_reads_each_object_shared_by_many_partitions_once() {
    let floe = TestAgent::start(TestOptions { cache_memory_bytes: Some(1 << 20), ..TestOptions::default() }).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("wide", PARTITIONS).await;
    for flush in 0..FLUSHES {
        let value = format!("{flush:04}").repeat(CHUNK_BYTES / 4);
        let batches = (0..PARTITIONS).map(|partition| (partition, record_batch(&[value.as_str()]))).collect();
        // Each request is answered once its flush is committed, so each is a flush of its own.
        let response = kafka.call(&produce_request_to("wide", batches, -1), floe_testing::PRODUCE_VERSION).await;
        assert_eq!(partition_answer(response).error_code, 0, "flush {flush}");
    }
    let entries = || -> Vec<usize> {
        let state = floe.agent.metadata.read();
        state.topics.values().flat_map(|t| &t.partitions).map(|p| p.index.len()).collect()
    };
    assert!(entries().iter().all(|&n| n == FLUSHES), "one entry per flush: {:?}", entries());

    let (gets_before, block_reads_before) = (floe.metric(JOB_GETS).await, floe.metric(BLOCK_READS).await);
    floe_agent::compaction::round(&floe.agent, &floe.agent.config.compaction).await;
    let gets = floe.metric(JOB_GETS).await - gets_before;
    let block_reads = floe.metric(BLOCK_READS).await - block_reads_before;

    assert!(entries().iter().all(|&n| n == 1), "every partition's run merged into one entry: {:?}", entries());
    assert!(gets <= FLUSHES as f64, "{gets} GETs for {FLUSHES} objects");
    assert!(block_reads <= 2.0 * FLUSHES as f64, "{block_reads} block reads for {FLUSHES} objects of one block");
    for partition in [0, PARTITIONS / 2, PARTITIONS - 1] {
        let read = kafka.fetch("wide", partition, 0).await;
        let values: Vec<String> = decode_records(read.records.as_ref())
            .iter()
            .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).chars().take(4).collect())
            .collect();
        let expected: Vec<String> = (0..FLUSHES).map(|flush| format!("{flush:04}")).collect();
        assert_eq!(values, expected, "partition {partition}'s records after compaction");
    }
    floe.shutdown().await;
}
