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
    let (floe, mut kafka) = wide_topic_of_flushes().await;
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

/// Topic `wide` of [`PARTITIONS`] partitions written by [`FLUSHES`] flushes, each one object holding
/// a chunk of every partition, on an agent whose hot tier is too small to keep them.
async fn wide_topic_of_flushes() -> (TestAgent, floe_testing::KafkaClient) {
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
    (floe, kafka)
}

/// A chunk whose bytes no longer match the CRC-32C its commit recorded, inside an object whose
/// other chunks a round reads together with it. The damage keeps the block's own CRC-32C (four
/// bytes of the next chunk changed to match), so the block cache accepts the block and only the
/// chunks' own sums can catch it: each is checked on its slice of the read, read alone, fails
/// again, and the round copies none of it. Both partitions keep their entries and the records
/// after the damage still read, while runs written to other objects merge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_chunk_read_with_its_neighbours_is_never_copied_by_compaction() {
    let (floe, mut kafka) = wide_topic_of_flushes().await;
    // The first flush's object, long gone from the 1 MiB hot tier: partition 5's batch gets
    // another leader epoch (outside the batch's own CRC), partition 6's chunk pays for the
    // block's CRC-32C, and the object is written again as it was otherwise.
    const DAMAGED: i32 = 5;
    let (key, object_bytes) = {
        let state = floe.agent.metadata.read();
        let topic = state.topic_by_name("wide").expect("topic");
        let object_id = match topic.partitions[DAMAGED as usize].index.front().map(|e| &e.data) {
            Some(floe_metadata::EntryData::Chunk { object_id, .. }) => *object_id,
            other => panic!("partition {DAMAGED}'s first entry: {other:?}"),
        };
        let object = &state.objects[&object_id];
        (floe_storage::SegmentKey::from_stored(object.key.clone()), object.object_bytes)
    };
    let store = &floe.agent.store;
    let footer = store.read_footer(&key).await.expect("footer");
    let chunk_of = |partition| footer.chunks.iter().find(|c| c.topic_partition.partition == partition).expect("chunk");
    let (damaged, payer) = (chunk_of(DAMAGED), chunk_of(DAMAGED + 1));
    assert_eq!(damaged.byte_start + u64::from(damaged.byte_len), payer.byte_start, "adjacent chunks");
    let mut bytes = store.get_range(&key, 0..object_bytes).await.expect("the object").to_vec();
    let data_bytes = footer.blocks.as_ref().expect("format 2").data_bytes as usize;
    let crc_before = crc32c::crc32c(&bytes[..data_bytes]);
    damage_keeping_crc(&mut bytes[..data_bytes], damaged.byte_start as usize + 12, payer.byte_start as usize);
    assert_eq!(crc32c::crc32c(&bytes[..data_bytes]), crc_before, "the block's CRC-32C still holds");
    store.delete_segment(&key).await.expect("delete");
    let object = floe_storage::segment::SegmentObject {
        payload: bytes::Bytes::from(bytes).into(),
        chunks: footer.chunks.clone(),
        blocks: footer.blocks.clone().expect("format 2"),
        object_bytes,
    };
    store.put_segment(&key, object).await.expect("put the damaged copy");

    let failed = "floe_compaction_runs_total{outcome=\"failed\"}";
    let failed_before = floe.metric(failed).await;
    floe_agent::compaction::round(&floe.agent, &floe.agent.config.compaction).await;
    assert!(floe.metric(failed).await > failed_before, "the damaged chunks' output failed");
    let entries: Vec<usize> = {
        let state = floe.agent.metadata.read();
        let topic = state.topic_by_name("wide").expect("topic");
        topic.partitions.iter().map(|p| p.index.len()).collect()
    };
    for partition in [DAMAGED, DAMAGED + 1] {
        assert_eq!(entries[partition as usize], FLUSHES, "nothing of partition {partition} merged: {entries:?}");
        let read = kafka.fetch("wide", partition, 1).await;
        let first = decode_records(read.records.as_ref()).first().and_then(|r| r.value.clone()).expect("a record");
        assert!(first.starts_with(b"0001"), "partition {partition}'s records after the damaged one still read");
    }
    assert!(entries.iter().filter(|&&n| n == 1).count() > 0, "runs in other objects merged: {entries:?}");
    floe.shutdown().await;
}

/// Flips bits of byte `at` of `data`, and then those of the four bytes from `fix` that leave the
/// CRC-32C of the whole as it was (a CRC is linear: solved over GF(2)).
fn damage_keeping_crc(data: &mut [u8], at: usize, fix: usize) {
    let zeros = vec![0u8; data.len()];
    let zero_crc = crc32c::crc32c(&zeros);
    let effect = |position: usize, bits: u8| {
        let mut v = zeros.clone();
        v[position] = bits;
        crc32c::crc32c(&v) ^ zero_crc
    };
    // A basis of what flipping each of the 32 bits at `fix` does, by its highest bit, with the
    // bits that make it.
    let mut basis: [Option<(u32, u32)>; 32] = [None; 32];
    for bit in 0..32u32 {
        let (mut value, mut made_of) = (effect(fix + (bit / 8) as usize, 1 << (bit % 8)), 1u32 << bit);
        while value != 0 {
            let top = 31 - value.leading_zeros() as usize;
            match basis[top] {
                Some((b, m)) => (value, made_of) = (value ^ b, made_of ^ m),
                None => {
                    basis[top] = Some((value, made_of));
                    break;
                }
            }
        }
    }
    let (mut left, mut flips) = (effect(at, 0x55), 0u32);
    while left != 0 {
        let (b, m) = basis[31 - left.leading_zeros() as usize].expect("32 adjacent bits span every CRC");
        (left, flips) = (left ^ b, flips ^ m);
    }
    data[at] ^= 0x55;
    for bit in 0..32 {
        if flips >> bit & 1 == 1 {
            data[fix + bit / 8] ^= 1 << (bit % 8);
        }
    }
}
