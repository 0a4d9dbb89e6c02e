//! Transactions through the protocol's own requests: InitProducerId, AddPartitionsToTxn (or, in
//! transaction version 2, the transactional batches themselves), TxnOffsetCommit and EndTxn;
//! what read_committed Fetch and ListOffsets see of them (the last stable offset and the aborted
//! transactions a consumer filters by); and fencing by a newer producer of the same id.

use std::collections::HashSet;

use bytes::Bytes;
use floe_agent::record_batch::build::BatchProducer;
use floe_testing::{
    FETCH_VERSION, KafkaClient, LIST_OFFSETS_VERSION, PRODUCE_VERSION, TestAgent, TestOptions, decode_records,
    fetch_request, list_offsets_request, partition_answer, produce_request, transactional_batch,
};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, EndTxnRequest, GroupId, OffsetFetchRequest, ProducerId, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;

/// Produce v12: a transactional batch adds its partition to the transaction (KIP-890).
const PRODUCE_TXN_V2_VERSION: i16 = 12;
/// EndTxn v5 bumps the epoch and answers it (transaction version 2); v3 does not.
const END_TXN_V2_VERSION: i16 = 5;
const END_TXN_V1_VERSION: i16 = 3;
/// TxnOffsetCommit v5: adds the group to the transaction itself.
const TXN_OFFSET_COMMIT_VERSION: i16 = 5;
/// AddPartitionsToTxn v3: a client's request (v4 on are brokers' batched ones).
const ADD_PARTITIONS_TO_TXN_VERSION: i16 = 3;
/// OffsetFetch v7: one group, with `require_stable`.
const OFFSET_FETCH_VERSION: i16 = 7;
/// Fetch and ListOffsets isolation levels.
const READ_UNCOMMITTED: i8 = 0;
const READ_COMMITTED: i8 = 1;
/// ListOffsets' timestamp for the end of the log (at read_committed, the last stable offset).
const LATEST: i64 = -1;
/// The codes a fenced producer's requests get, by the version it speaks: INVALID_PRODUCER_EPOCH
/// (47) or PRODUCER_FENCED (90).
const FENCED: [i16; 2] = [47, 90];

/// Transaction version 2, with requests crafted as a Kafka 4 client sends them (neither
/// librdkafka 2.16 nor kafka-python speaks it). A transactional Produce v12 adds its partition
/// and TxnOffsetCommit v5 its group, with no AddPartitionsToTxn or AddOffsetsToTxn. EndTxn v5
/// ends the transaction with the next epoch, and its retry (the answer lost) gets the same
/// answer. A late write of the ended transaction is fenced. The next transaction runs on the
/// new epoch from sequence 0 and is aborted; ending with a stale epoch is refused. A
/// read_committed read then finds the committed records only, and the group's offset as
/// committed in the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_version_2_bump_the_epoch_per_transaction_and_add_partitions_and_groups_themselves() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("tv2", 2).await;
    let txn = "tv2-txn";
    let (producer_id, epoch) = kafka.init_producer_id(Some(txn)).await;
    let batch = |values: &[&str], producer_epoch: i16, base_sequence: i32| {
        transactional_batch(values, BatchProducer { producer_id, producer_epoch, base_sequence })
    };

    let written = txn_produce(&mut kafka, txn, "tv2", 0, batch(&["a", "b"], epoch, 0), PRODUCE_TXN_V2_VERSION).await;
    assert_eq!(written, (0, 0), "partition 0 joins the transaction with its first batch");
    let offsets = TxnOffsetCommitRequest::default()
        .with_transactional_id(transactional_id(txn))
        .with_group_id(GroupId(StrBytes::from_static_str("tv2-group")))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_group_instance_id(None)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default().with_name(topic_name("tv2")).with_partitions(vec![
                TxnOffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(2)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(StrBytes::from_static_str(""))),
            ])]);
    let committed = kafka.call(&offsets, TXN_OFFSET_COMMIT_VERSION).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0, "the group joins the transaction");

    let ended = end_txn(&mut kafka, txn, producer_id, epoch, true, END_TXN_V2_VERSION).await;
    assert_eq!(ended, (0, producer_id, epoch + 1), "committed, with the next epoch");
    let retried = end_txn(&mut kafka, txn, producer_id, epoch, true, END_TXN_V2_VERSION).await;
    assert_eq!(retried, (0, producer_id, epoch + 1), "a retried EndTxn gets the same answer");
    let late = txn_produce(&mut kafka, txn, "tv2", 0, batch(&["late"], epoch, 2), PRODUCE_TXN_V2_VERSION).await;
    assert!(FENCED.contains(&late.0), "a late write of the ended transaction: {late:?}");

    let next = epoch + 1;
    let aborted = txn_produce(&mut kafka, txn, "tv2", 1, batch(&["aborted"], next, 0), PRODUCE_TXN_V2_VERSION).await;
    assert_eq!(aborted, (0, 0), "the new epoch starts its sequences at 0");
    let ended = end_txn(&mut kafka, txn, producer_id, next, false, END_TXN_V2_VERSION).await;
    assert_eq!(ended, (0, producer_id, next + 1), "aborted, with the next epoch");
    let stale = end_txn(&mut kafka, txn, producer_id, epoch, false, END_TXN_V2_VERSION).await;
    assert!(FENCED.contains(&stale.0), "ending with a stale epoch: {stale:?}");

    let first = read(&mut kafka, "tv2", 0, READ_COMMITTED).await;
    assert_eq!(consumed(&first), vec![(0, "a".to_owned()), (1, "b".to_owned())]);
    let second = read(&mut kafka, "tv2", 1, READ_COMMITTED).await;
    assert_eq!(aborted_transactions(&second), vec![(producer_id, 0)]);
    assert!(consumed(&second).is_empty(), "{:?}", consumed(&second));

    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("tv2-group")))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default().with_name(topic_name("tv2")).with_partition_indexes(vec![0]),
        ]))
        .with_require_stable(true);
    let fetched = kafka.call(&request, OFFSET_FETCH_VERSION).await;
    assert_eq!(fetched.error_code, 0);
    let partition = &fetched.topics[0].partitions[0];
    assert_eq!((partition.error_code, partition.committed_offset), (0, 2), "the group's offset, committed");
    floe.shutdown().await;
}

/// In transaction version 1 (AddPartitionsToTxn, EndTxn v3), as librdkafka 2.16 writes: a
/// committed transaction A, an aborted B and a committed C of 10 records in each of two
/// partitions, each followed by one marker, end at offset 33, and with none open the last stable
/// offset is the high watermark. A read_committed Fetch names B as an aborted transaction, so
/// its consumer reads A then C at their offsets; read_uncommitted gets no such list and reads A,
/// B and C. An open transaction D holds the last stable offset at its first offset (ListOffsets
/// and Fetch at read_committed), where a read_committed read stops, while the high watermark is
/// past it; once D commits both are past its marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_transactions_are_named_to_read_committed_and_an_open_one_holds_the_last_stable_offset() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("visible", 2).await;
    let mut producer = TxnProducer::init(&mut kafka, "visible-txn", 2).await;

    let a = producer.write(&mut kafka, "visible", "A", 10).await;
    assert_eq!(producer.end(&mut kafka, true).await, 0);
    let b = producer.write(&mut kafka, "visible", "B", 10).await;
    assert_eq!(producer.end(&mut kafka, false).await, 0);
    let c = producer.write(&mut kafka, "visible", "C", 10).await;
    assert_eq!(producer.end(&mut kafka, true).await, 0);
    assert_eq!((a, b, c), (vec![0, 0], vec![11, 11], vec![22, 22]), "one marker after each transaction");

    for partition in [0, 1] {
        let ends = (
            end_offset(&mut kafka, "visible", partition, READ_UNCOMMITTED).await,
            end_offset(&mut kafka, "visible", partition, READ_COMMITTED).await,
        );
        assert_eq!(ends, (33, 33), "partition {partition}: high watermark and last stable offset");
        let committed = read(&mut kafka, "visible", partition, READ_COMMITTED).await;
        assert_eq!(aborted_transactions(&committed), vec![(producer.producer_id, 11)], "partition {partition}");
        let expected: Vec<(i64, String)> = (0..10)
            .map(|i| (i, format!("A-{partition}-{i}")))
            .chain((0..10).map(|i| (22 + i, format!("C-{partition}-{i}"))))
            .collect();
        assert_eq!(consumed(&committed), expected, "partition {partition} at read_committed");
        let uncommitted = read(&mut kafka, "visible", partition, READ_UNCOMMITTED).await;
        assert_eq!(uncommitted.aborted_transactions, None, "partition {partition} at read_uncommitted");
        let values: Vec<String> = consumed(&uncommitted).into_iter().map(|(_, value)| value).collect();
        assert_eq!(values, values_of(&["A", "B", "C"], partition, 10), "partition {partition} at read_uncommitted");
    }

    let d = producer.write(&mut kafka, "visible", "D", 5).await;
    assert_eq!(d, vec![33, 33], "D starts right after C's marker");
    for partition in [0, 1] {
        let ends = (
            end_offset(&mut kafka, "visible", partition, READ_UNCOMMITTED).await,
            end_offset(&mut kafka, "visible", partition, READ_COMMITTED).await,
        );
        assert_eq!(ends, (38, 33), "partition {partition}: D open holds the last stable offset at its start");
        let committed = read(&mut kafka, "visible", partition, READ_COMMITTED).await;
        assert_eq!((committed.high_watermark, committed.last_stable_offset), (38, 33), "partition {partition}");
        let values: Vec<String> = consumed(&committed).into_iter().map(|(_, value)| value).collect();
        assert_eq!(values, values_of(&["A", "C"], partition, 10), "partition {partition}: D is not visible");
        let uncommitted = read(&mut kafka, "visible", partition, READ_UNCOMMITTED).await;
        assert_eq!(consumed(&uncommitted).len(), 35, "partition {partition}: read_uncommitted sees D");
    }
    assert_eq!(producer.end(&mut kafka, true).await, 0);
    for partition in [0, 1] {
        let ends = (
            end_offset(&mut kafka, "visible", partition, READ_UNCOMMITTED).await,
            end_offset(&mut kafka, "visible", partition, READ_COMMITTED).await,
        );
        assert_eq!(ends, (39, 39), "partition {partition}: D committed");
    }
    floe.shutdown().await;
}

/// A second InitProducerId of the same transactional id fences the first producer: its open
/// transaction is aborted at once (its marker taken, the last stable offset at the high
/// watermark), and its later write and its commit are refused as fenced, with nothing
/// appended. The new producer's transaction commits; read_committed finds its records only,
/// read_uncommitted the fenced producer's aborted ones before them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_producer_with_the_same_transactional_id_fences_the_first() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("zombie", 1).await;
    let mut zombie = TxnProducer::init(&mut kafka, "zombie-txn", 1).await;
    assert_eq!(zombie.write(&mut kafka, "zombie", "zombie", 5).await, vec![0]);
    assert_eq!(end_offset(&mut kafka, "zombie", 0, READ_COMMITTED).await, 0, "the open transaction holds it");

    let mut successor = TxnProducer::init(&mut kafka, "zombie-txn", 1).await;
    assert!(
        (successor.producer_id, successor.producer_epoch) != (zombie.producer_id, zombie.producer_epoch),
        "a new epoch (or id) for the successor"
    );
    for isolation in [READ_UNCOMMITTED, READ_COMMITTED] {
        assert_eq!(end_offset(&mut kafka, "zombie", 0, isolation).await, 6, "aborted: 5 records and a marker");
    }

    let producer = BatchProducer {
        producer_id: zombie.producer_id,
        producer_epoch: zombie.producer_epoch,
        base_sequence: zombie.sequences[0],
    };
    let late = txn_produce(
        &mut kafka,
        zombie.transactional_id,
        "zombie",
        0,
        transactional_batch(&["zombie-late"], producer),
        PRODUCE_VERSION,
    )
    .await;
    assert!(FENCED.contains(&late.0), "the fenced producer's write: {late:?}");
    assert!(FENCED.contains(&zombie.end(&mut kafka, true).await), "the fenced producer's commit");
    assert_eq!(end_offset(&mut kafka, "zombie", 0, READ_UNCOMMITTED).await, 6, "nothing of the fenced producer");

    assert_eq!(successor.write(&mut kafka, "zombie", "successor", 5).await, vec![6]);
    assert_eq!(successor.end(&mut kafka, true).await, 0);
    let committed = read(&mut kafka, "zombie", 0, READ_COMMITTED).await;
    let values: Vec<String> = consumed(&committed).into_iter().map(|(_, value)| value).collect();
    assert_eq!(values, values_of(&["successor"], 0, 5));
    let uncommitted = read(&mut kafka, "zombie", 0, READ_UNCOMMITTED).await;
    let values: Vec<String> = consumed(&uncommitted).into_iter().map(|(_, value)| value).collect();
    assert_eq!(values, values_of(&["zombie", "successor"], 0, 5), "never the fenced write");
    floe.shutdown().await;
}

/// A transactional producer speaking transaction version 1, writing to partitions 0.. of one
/// topic; it keeps its sequence per partition across transactions, as the epoch stays.
pub(crate) struct TxnProducer {
    transactional_id: &'static str,
    pub(crate) producer_id: i64,
    producer_epoch: i16,
    /// The next sequence, per partition.
    sequences: Vec<i32>,
}

impl TxnProducer {
    pub(crate) async fn init(kafka: &mut KafkaClient, transactional_id: &'static str, partition_count: usize) -> Self {
        let (producer_id, producer_epoch) = kafka.init_producer_id(Some(transactional_id)).await;
        Self { transactional_id, producer_id, producer_epoch, sequences: vec![0; partition_count] }
    }

    /// Adds every partition to the transaction, then writes `count` records `{tag}-{p}-{i}` to
    /// each partition `p` in one batch; the batches' base offsets, by partition.
    pub(crate) async fn write(&mut self, kafka: &mut KafkaClient, topic: &str, tag: &str, count: i32) -> Vec<i64> {
        let partitions: Vec<i32> = (0..self.sequences.len() as i32).collect();
        let request = AddPartitionsToTxnRequest::default()
            .with_v3_and_below_transactional_id(transactional_id(self.transactional_id))
            .with_v3_and_below_producer_id(ProducerId(self.producer_id))
            .with_v3_and_below_producer_epoch(self.producer_epoch)
            .with_v3_and_below_topics(vec![
                AddPartitionsToTxnTopic::default().with_name(topic_name(topic)).with_partitions(partitions.clone()),
            ]);
        let added = kafka.call(&request, ADD_PARTITIONS_TO_TXN_VERSION).await;
        for result in added.results_by_topic_v3_and_below.iter().flat_map(|t| &t.results_by_partition) {
            assert_eq!(result.partition_error_code, 0, "AddPartitionsToTxn of partition {}", result.partition_index);
        }
        let mut base_offsets = Vec::new();
        for partition in partitions {
            let values: Vec<String> = (0..count).map(|i| format!("{tag}-{partition}-{i}")).collect();
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            let index = partition as usize;
            let producer = BatchProducer {
                producer_id: self.producer_id,
                producer_epoch: self.producer_epoch,
                base_sequence: self.sequences[index],
            };
            let batch = transactional_batch(&values, producer);
            let (error_code, base_offset) =
                txn_produce(kafka, self.transactional_id, topic, partition, batch, PRODUCE_VERSION).await;
            assert_eq!(error_code, 0, "{tag} to partition {partition}");
            self.sequences[index] += count;
            base_offsets.push(base_offset);
        }
        base_offsets
    }

    /// Commits or aborts the transaction (EndTxn v3); the error code.
    pub(crate) async fn end(&self, kafka: &mut KafkaClient, commit: bool) -> i16 {
        end_txn(kafka, self.transactional_id, self.producer_id, self.producer_epoch, commit, END_TXN_V1_VERSION).await.0
    }
}

/// A Produce of `batch` to one partition under `txn`: the error code and base offset.
async fn txn_produce(
    kafka: &mut KafkaClient,
    txn: &str,
    topic: &str,
    partition: i32,
    batch: Bytes,
    version: i16,
) -> (i16, i64) {
    let request = produce_request(topic, partition, batch, -1).with_transactional_id(Some(transactional_id(txn)));
    let answer = partition_answer(kafka.call(&request, version).await);
    (answer.error_code, answer.base_offset)
}

/// EndTxn: the error code, and the producer id and epoch answered (from v5; -1 before).
async fn end_txn(
    kafka: &mut KafkaClient,
    txn: &str,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    version: i16,
) -> (i16, i64, i16) {
    let request = EndTxnRequest::default()
        .with_transactional_id(transactional_id(txn))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(producer_epoch)
        .with_committed(commit);
    let answer = kafka.call(&request, version).await;
    (answer.error_code, answer.producer_id.0, answer.producer_epoch)
}

/// A Fetch of one partition from offset 0 at `isolation`; panics on an error.
async fn read(kafka: &mut KafkaClient, topic: &str, partition: i32, isolation: i8) -> PartitionData {
    let request = fetch_request(topic, partition, 0).with_isolation_level(isolation);
    let response = kafka.call(&request, FETCH_VERSION).await;
    assert_eq!(response.error_code, 0);
    let answer = response.responses.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    assert_eq!(answer.error_code, 0, "Fetch of {topic}-{partition}");
    answer
}

/// ListOffsets latest at `isolation`: the high watermark, or at read_committed the last stable
/// offset.
async fn end_offset(kafka: &mut KafkaClient, topic: &str, partition: i32, isolation: i8) -> i64 {
    let request = list_offsets_request(topic, partition, LATEST).with_isolation_level(isolation);
    let response = kafka.call(&request, LIST_OFFSETS_VERSION).await;
    let answer = response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    assert_eq!(answer.error_code, 0, "ListOffsets of {topic}-{partition}");
    answer.offset
}

/// The (producer id, first offset) of each aborted transaction a Fetch answer names.
pub(crate) fn aborted_transactions(partition: &PartitionData) -> Vec<(i64, i64)> {
    partition.aborted_transactions.iter().flatten().map(|a| (a.producer_id.0, a.first_offset)).collect()
}

/// The records a consumer returns from one partition's Fetch answer, with their offsets, as
/// Kafka's consumers filter them: never a control record (a marker), and none of an aborted
/// transaction the answer names, from its first offset to its producer's next marker (only
/// read_committed answers name any).
pub(crate) fn consumed(partition: &PartitionData) -> Vec<(i64, String)> {
    let mut aborted: Vec<(i64, i64)> =
        aborted_transactions(partition).into_iter().map(|(p, first)| (first, p)).collect();
    aborted.sort_unstable();
    let mut aborted = aborted.into_iter().peekable();
    let mut aborting = HashSet::new();
    let mut consumed = Vec::new();
    for record in decode_records(partition.records.as_ref()) {
        while let Some((_, producer_id)) = aborted.next_if(|(first_offset, _)| *first_offset <= record.offset) {
            aborting.insert(producer_id);
        }
        if record.control {
            aborting.remove(&record.producer_id);
        } else if !(record.transactional && aborting.contains(&record.producer_id)) {
            let value = record.value.unwrap_or_default();
            consumed.push((record.offset, String::from_utf8_lossy(&value).into_owned()));
        }
    }
    consumed
}

/// The values `TxnProducer::write` wrote to `partition` for each of `tags`, in order.
fn values_of(tags: &[&str], partition: i32, count: i32) -> Vec<String> {
    tags.iter().flat_map(|tag| (0..count).map(move |i| format!("{tag}-{partition}-{i}"))).collect()
}

fn transactional_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_owned()))
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
