//! The flush buffer against a one-node metadata cluster and an in-memory object store whose
//! faults a test switches on and off through a fault file (as `--test-object-store-faults @PATH`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use floe_metadata::{ChunkProducer, Command, Metadata, MetadataNode, MetadataNodeConfig, Outcome, ProducerIdEpoch};
use floe_storage::{BlockCache, BlockCacheConfig, FaultSource, ObjectStoreConfig, SegmentStore, TopicPartition};

use super::{AppendError, AppendResult, FlushBuffer, Pipeline, Ticket};
use crate::agent::FlushConfig;
use crate::produce::{PartitionAppend, ValidatedBatch};

/// Records (and offsets, and sequences) of each request.
const RECORDS: i32 = 5;

/// A flush buffer over a faulty store, committing to a metadata node of its own.
struct Harness {
    node: MetadataNode,
    buffer: FlushBuffer,
    dir: PathBuf,
    /// The store reads it every half second.
    fault_file: PathBuf,
    /// The idempotent producer and the partition it writes.
    producer: ChunkProducer,
    partition: TopicPartition,
    /// Where plain batches find out whether PUTs work.
    probe: TopicPartition,
}

impl Harness {
    /// A topic of two partitions and one idempotent producer; the store starts with the faults
    /// `spec`.
    async fn start(spec: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("floe-flush-buffer-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let addr = format!("127.0.0.1:{port}");
        let node = MetadataNode::start(MetadataNodeConfig {
            node_id: 1,
            listen_addr: addr.clone(),
            data_dir: dir.join("metadata"),
            peers: [(1, addr)].into_iter().collect(),
            join: false,
            clock: floe_metadata::clock::Clock::system(),
        })
        .await
        .expect("node starts");
        node.wait_for_leader(Duration::from_secs(10)).await.expect("leader");
        node.ensure_initialized().await.expect("init");
        let topic_id = uuid::Uuid::new_v4();
        let topic = Command::CreateTopic { name: "t".into(), topic_id, partition_count: 2, configs: BTreeMap::new() };
        node.propose(topic).await.expect("topic");
        let init = Command::InitProducerId {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            expected: None,
            now_ms: floe_metadata::now_ms(),
            tenant: None,
        };
        let Ok(Outcome::ProducerId(ProducerIdEpoch { producer_id, producer_epoch })) = node.propose(init).await else {
            panic!("no producer id");
        };
        let fault_file = dir.join("faults");
        std::fs::write(&fault_file, spec).expect("fault file");
        let store = SegmentStore::open(&ObjectStoreConfig {
            url: "memory://".into(),
            faults: Some(FaultSource::File(fault_file.clone())),
            ..ObjectStoreConfig::default()
        })
        .expect("store");
        let cache = BlockCache::open(&BlockCacheConfig { memory_bytes: 16 << 20, disk: None }).await.expect("cache");
        let flush = FlushConfig {
            flush_bytes: 1 << 20,
            flush_interval: Duration::from_millis(5),
            buffer_bytes_max: 64 << 20,
            uploads_in_flight_max: 4,
            adaptive: false,
            min_flush_interval: Duration::ZERO,
        };
        let pipeline = Pipeline { flush, commit_deadline: Duration::from_secs(60), fault: None };
        let buffer = FlushBuffer::start(pipeline, Metadata::Local(node.clone()), store, cache);
        Self {
            node,
            buffer,
            dir,
            fault_file,
            producer: ChunkProducer { producer_id, producer_epoch, transactional: false },
            partition: TopicPartition { topic_id, partition: 0 },
            probe: TopicPartition { topic_id, partition: 1 },
        }
    }

    /// Sends the producer's request of records from `first_sequence`; answered through the ticket.
    async fn send(&self, first_sequence: i32) -> Ticket {
        let append = PartitionAppend {
            topic_partition: self.partition,
            batches: vec![batch(first_sequence)],
            producer: Some(self.producer),
        };
        self.buffer.append(vec![append]).await.expect("buffer open")
    }

    /// Sends the producer's request of records from `first_sequence` and waits for its answer.
    async fn produce(&self, first_sequence: i32) -> AppendResult {
        answer(self.send(first_sequence).await).await
    }

    fn set_faults(&self, spec: &str) {
        std::fs::write(&self.fault_file, spec).expect("fault file");
    }

    /// Switches the store's faults off and waits until a plain batch is committed.
    async fn faults_off(&self) {
        self.set_faults("");
        let committed = async {
            loop {
                let append = PartitionAppend { topic_partition: self.probe, batches: vec![batch(-1)], producer: None };
                let ticket = self.buffer.append(vec![append]).await.expect("buffer open");
                if answer(ticket).await.is_ok() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), committed).await.expect("PUTs work again");
    }

    async fn stop(self) {
        self.buffer.close_and_drain().await;
        self.node.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A batch of [`RECORDS`] records from sequence `base_sequence` (-1: a plain batch).
fn batch(base_sequence: i32) -> ValidatedBatch {
    let now_ms = floe_metadata::now_ms();
    ValidatedBatch {
        bytes: Bytes::from_static(&[0_u8; 64]),
        offset_count: RECORDS.unsigned_abs(),
        record_count: RECORDS.unsigned_abs(),
        timestamp_min: now_ms,
        timestamp_max: now_ms,
        base_sequence,
        uncompressed_bytes: 64,
    }
}

/// The answer for a request of one partition.
async fn answer(ticket: Ticket) -> AppendResult {
    ticket.committed().await.into_iter().next().expect("the partition is answered")
}

/// Object-store requests made to hang by injected faults so far, in this process.
fn injected_timeouts() -> f64 {
    prometheus::gather()
        .iter()
        .filter(|family| family.name() == "floe_object_store_injected_faults_total")
        .flat_map(|family| family.get_metric().to_vec())
        .filter(|metric| metric.get_label().iter().any(|l| l.name() == "kind" && l.value() == "timeout"))
        .map(|metric| metric.get_counter().get_value())
        .sum()
}

/// Issue 51, finding 3, with the producer's next request arriving after its first one failed
/// (sent before the client heard of the failure). Metadata holds no sequences of the producer on
/// the partition, so it would take sequences 5–9 at offset 0, and then refuse the retry of 0–4
/// for the gap ever after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_request_is_not_committed_after_its_earlier_one_failed() {
    let h = Harness::start("put-error=1").await;
    let first = h.produce(0).await;
    assert!(matches!(first, Err(AppendError::Storage(_))), "{first:?}");
    h.faults_off().await;
    // Held back (`AppendError::EarlierSequenceFailed`, retriable) rather than committed.
    let second = h.produce(RECORDS).await;
    assert!(second.is_err(), "committed after the producer's earlier request failed: {second:?}");
    // The client sends both again, in order, and they land in order.
    assert_eq!(h.produce(0).await.ok(), Some(0), "the first request's retry");
    assert_eq!(h.produce(RECORDS).await.ok(), Some(i64::from(RECORDS)), "the second request's retry");
    h.stop().await;
}

/// The finding as it was seen: the producer's second request sits in a later flush, uploaded
/// while the first flush's PUT hangs, and reaches the commit only after that PUT failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_behind_a_failed_one_does_not_commit_the_same_producers_later_records() {
    // Every PUT hangs 4 s and then fails, until the faults are switched off.
    let h = Harness::start("timeout=1,timeout-ms=4000").await;
    let hung_before = injected_timeouts();
    let first = h.send(0).await;
    let hung = async {
        while injected_timeouts() <= hung_before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), hung).await.expect("the first flush's PUT hangs");
    h.set_faults("");
    // Long enough for the store to read its fault file again, well short of the hang.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let second = h.send(RECORDS).await;
    let first = answer(first).await;
    assert!(matches!(first, Err(AppendError::Storage(_))), "{first:?}");
    // Never committed. (Held back, or failed on its own had its PUT still met the fault.)
    let second = answer(second).await;
    assert!(second.is_err(), "committed ahead of the failed first request: {second:?}");
    h.faults_off().await;
    assert_eq!(h.produce(0).await.ok(), Some(0), "the first request's retry");
    assert_eq!(h.produce(RECORDS).await.ok(), Some(i64::from(RECORDS)), "the second request's retry");
    h.stop().await;
}
