//! Fetch beyond the plain read: long polls (`max_wait_ms`, `min_bytes`), the log start that
//! DeleteRecords moves, and incremental fetch sessions (KIP-227).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_testing::{
    FETCH_VERSION, KafkaClient, LIST_OFFSETS_VERSION, PRODUCE_VERSION, TestAgent, TestOptions, decode_records,
    fetch_request, list_offsets_request, produce_request_to, record_batch,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{CreateAclsRequest, DeleteRecordsRequest, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::transactions::{TxnProducer, aborted_transactions, consumed};

/// DeleteRecords v2: flexible.
const DELETE_RECORDS_VERSION: i16 = 2;
/// CreateAcls v3: flexible.
const CREATE_ACLS_VERSION: i16 = 3;
/// Fetch v16: topics by id, as Kafka 4 consumers send it.
const FETCH_BY_ID_VERSION: i16 = 16;
/// Longest wait for an event a test polls for.
const EVENT_WAIT: Duration = Duration::from_secs(10);
/// Session errors of a Fetch as a whole.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;
/// Fetch's isolation level that reads committed records only.
const READ_COMMITTED: i8 = 1;

/// A Fetch at the high watermark is answered after `max_wait_ms` with no records and no error;
/// one that finds records, but fewer bytes than `min_bytes`, also waits `max_wait_ms` and is
/// then answered with what there is; one that finds `min_bytes` is answered at once, whatever
/// its `max_wait_ms`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_waits_max_wait_for_min_bytes_and_no_longer() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("slow", 1).await;
    let produced = kafka.produce("slow", 0, record_batch(&["only"]), -1).await.expect("answered");
    assert_eq!((produced.error_code, produced.base_offset), (0, 0), "{:?}", produced.error_message);
    let max_wait = Duration::from_millis(400);
    let wait_ms = i32::try_from(max_wait.as_millis()).expect("a short wait");

    let at_end = fetch_request("slow", 0, 1).with_max_wait_ms(wait_ms).with_min_bytes(1);
    let (waited, answer) = timed_fetch(&mut kafka, &at_end).await;
    assert!(waited >= max_wait, "answered after {waited:?}, before max_wait_ms");
    assert_eq!((answer.error_code, answer.high_watermark), (0, 1));
    assert!(answer.records.as_ref().is_none_or(|records| records.is_empty()), "nothing at the high watermark");

    let short_of_min = fetch_request("slow", 0, 0).with_max_wait_ms(wait_ms).with_min_bytes(1 << 20);
    let (waited, answer) = timed_fetch(&mut kafka, &short_of_min).await;
    assert!(waited >= max_wait, "answered after {waited:?}, before max_wait_ms");
    assert_eq!(values(&answer), vec![(0, Bytes::from_static(b"only"))], "what there is, after the wait");

    let enough = fetch_request("slow", 0, 0).with_max_wait_ms(20_000).with_min_bytes(1);
    let (waited, answer) = timed_fetch(&mut kafka, &enough).await;
    assert!(waited < Duration::from_secs(10), "min_bytes were there, yet it waited {waited:?}");
    assert_eq!(values(&answer), vec![(0, Bytes::from_static(b"only"))]);
    floe.shutdown().await;
}

/// A Fetch waiting at the end of an empty partition (20 s `max_wait_ms`) is answered as soon as
/// a Produce on another connection commits a record there, with that record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_fetch_is_answered_as_soon_as_a_produce_commits() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut consumer = floe.kafka();
    let mut producer = floe.kafka();
    consumer.create_topic("awaited", 1).await;
    let started = Instant::now();
    let sent =
        consumer.send(&fetch_request("awaited", 0, 0).with_max_wait_ms(20_000).with_min_bytes(1), FETCH_VERSION).await;
    // The Produce is to wake the Fetch, not to be there when it first reads.
    floe.wait_for_long_poll().await;
    let produced = producer.produce("awaited", 0, record_batch(&["wake"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);

    let (answered, response) = consumer.recv::<FetchRequest>(FETCH_VERSION).await;
    assert_eq!(answered, sent);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(10), "answered after {waited:?}, not at the commit");
    let answer = response.responses.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    assert_eq!((answer.error_code, answer.high_watermark), (0, 1));
    assert_eq!(values(&answer), vec![(0, Bytes::from_static(b"wake"))]);
    floe.shutdown().await;
}

/// DeleteRecords up to offset 7 of a partition holding 0 to 19 answers low watermark 7, which
/// becomes the log start: ListOffsets earliest is 7 (latest stays 20), a Fetch from 7 returns
/// records 7 to 19 and names log start 7, and a Fetch below it is OFFSET_OUT_OF_RANGE (1), on
/// which a consumer resets to the earliest. The log start never moves back, a DeleteRecords past
/// the high watermark is OFFSET_OUT_OF_RANGE, and one of an unknown topic
/// UNKNOWN_TOPIC_OR_PARTITION (3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start_and_a_fetch_below_it_is_out_of_range() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("trimmed", 1).await;
    let sent: Vec<String> = (0..20).map(|i| format!("v{i}")).collect();
    let batch: Vec<&str> = sent.iter().map(String::as_str).collect();
    let produced = kafka.produce("trimmed", 0, record_batch(&batch), -1).await.expect("answered");
    assert_eq!((produced.error_code, produced.base_offset), (0, 0), "{:?}", produced.error_message);

    assert_eq!(delete_records(&mut kafka, "trimmed", 7).await, (0, 7));
    let earliest = kafka.call(&list_offsets_request("trimmed", 0, -2), LIST_OFFSETS_VERSION).await;
    let earliest = earliest.topics[0].partitions[0].offset;
    assert_eq!((earliest, kafka.end_offset("trimmed", 0).await), (7, 20), "the watermarks");

    let fetched = kafka.fetch("trimmed", 0, 7).await;
    assert_eq!((fetched.error_code, fetched.high_watermark, fetched.log_start_offset), (0, 20, 7));
    // The batch holding offset 7 may be served whole: a consumer skips what is before its
    // position.
    let read: Vec<(i64, Bytes)> = values(&fetched).into_iter().filter(|(offset, _)| *offset >= 7).collect();
    let expected: Vec<(i64, Bytes)> = (7..20).map(|i: i64| (i, Bytes::from(format!("v{i}")))).collect();
    assert_eq!(read, expected);

    let below = kafka.fetch("trimmed", 0, 6).await;
    assert_eq!(below.error_code, ResponseError::OffsetOutOfRange.code());
    assert_eq!(below.error_code, 1);

    assert_eq!(delete_records(&mut kafka, "trimmed", 3).await, (0, 7), "the log start never moves back");
    let (error_code, _) = delete_records(&mut kafka, "trimmed", 21).await;
    assert_eq!(error_code, ResponseError::OffsetOutOfRange.code(), "past the high watermark");
    let (error_code, _) = delete_records(&mut kafka, "missing", 1).await;
    assert_eq!(error_code, ResponseError::UnknownTopicOrPartition.code());
    floe.shutdown().await;
}

/// Issue 32 item 5: each answer Kafka gives to a crafted session request. A full Fetch with
/// epoch 0 opens a session and answers every partition; the next epoch with nothing new
/// answers nothing. The same epoch again or a later one is INVALID_FETCH_SESSION_EPOCH (71),
/// topic ids in a session opened with names FETCH_SESSION_TOPIC_ID_ERROR (106), and another
/// connection's use of the session FETCH_SESSION_ID_NOT_FOUND (70) (nor can it close it).
/// Records in partitions 0 and 1 with 0 forgotten answer 1 only; a moved position, nothing;
/// partition 0 back, it alone, once. Epoch -1 closes the session and answers in full. A
/// session by topic id (v16) answers the partition that moved, named by id. A connection's
/// sessions go with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crafted_session_requests_get_the_answers_kafka_gives() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut raw = floe.kafka();
    let mut other = floe.kafka();
    raw.create_topic("sessions", 3).await;
    let topic_id = raw.topic_id("sessions").await;
    let session = |version: i16, id: i32, epoch: i32, partitions: &[(i32, i64)], forget: &[i32]| {
        (session_fetch("sessions", topic_id, id, epoch, partitions, forget), version)
    };
    let everything = [(0, 0), (1, 0), (2, 0)];

    let (request, version) = session(FETCH_VERSION, 0, 0, &everything, &[]);
    let opened = raw.call(&request, version).await;
    assert_eq!(opened.error_code, 0);
    let id = opened.session_id;
    assert!(id > 0, "a full fetch with epoch 0 opens a session");
    assert_eq!(answered(&opened).into_keys().collect::<Vec<_>>(), vec![0, 1, 2]);

    let (request, version) = session(FETCH_VERSION, id, 1, &[], &[]);
    let idle = raw.call(&request, version).await;
    assert_eq!((idle.error_code, idle.session_id), (0, id));
    assert!(answered(&idle).is_empty(), "nothing new: {:?}", answered(&idle));

    for (what, version, epoch, error_code) in [
        ("the same epoch again", FETCH_VERSION, 1, INVALID_FETCH_SESSION_EPOCH),
        ("a later epoch", FETCH_VERSION, 9, INVALID_FETCH_SESSION_EPOCH),
        ("topic ids in a session by name", FETCH_BY_ID_VERSION, 2, FETCH_SESSION_TOPIC_ID_ERROR),
    ] {
        let (request, version) = session(version, id, epoch, &[], &[]);
        assert_eq!(raw.call(&request, version).await.error_code, error_code, "{what}");
    }
    let (request, version) = session(FETCH_VERSION, id, 2, &[], &[]);
    assert_eq!(other.call(&request, version).await.error_code, FETCH_SESSION_ID_NOT_FOUND, "another connection's");
    let (request, version) = session(FETCH_VERSION, id, -1, &everything, &[]);
    assert_eq!(other.call(&request, version).await.error_code, 0, "answered without a session");

    for partition in [0, 1] {
        let produced = other.produce("sessions", partition, record_batch(&["news"]), -1).await.expect("answered");
        assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    }
    let (request, version) = session(FETCH_VERSION, id, 2, &[], &[0]);
    let moved = raw.call(&request, version).await;
    assert_eq!((moved.error_code, moved.session_id), (0, id), "the other connection did not close it");
    let news = answered(&moved);
    assert_eq!(news.keys().copied().collect::<Vec<_>>(), vec![1], "partition 0 is forgotten: {news:?}");
    assert!(news[&1].1 == 1 && news[&1].2 > 0, "partition 1's record: {news:?}");

    let (request, version) = session(FETCH_VERSION, id, 3, &[(1, 1)], &[]);
    assert!(answered(&raw.call(&request, version).await).is_empty(), "partition 1 moved on: nothing new");
    let (request, version) = session(FETCH_VERSION, id, 4, &[(0, 1)], &[]);
    let back = answered(&raw.call(&request, version).await);
    assert_eq!(back, BTreeMap::from([(0, (0, 1, 0))]), "partition 0 back, from the offset given");
    let (request, version) = session(FETCH_VERSION, id, 5, &[], &[]);
    assert!(answered(&raw.call(&request, version).await).is_empty());

    let (request, version) = session(FETCH_VERSION, id, -1, &everything, &[]);
    let closed = raw.call(&request, version).await;
    assert_eq!((closed.error_code, closed.session_id), (0, 0));
    assert_eq!(answered(&closed).into_keys().collect::<Vec<_>>(), vec![0, 1, 2], "answered in full");
    let (request, version) = session(FETCH_VERSION, id, 6, &[], &[]);
    assert_eq!(raw.call(&request, version).await.error_code, FETCH_SESSION_ID_NOT_FOUND);

    // By topic id, from offsets past what 0 and 1 hold: only new records move a partition.
    let (request, version) = session(FETCH_BY_ID_VERSION, 0, 0, &[(0, 1), (1, 1), (2, 0)], &[]);
    let by_id = raw.call(&request, version).await;
    let id = by_id.session_id;
    assert!(id > 0 && by_id.error_code == 0);
    assert_eq!(answered(&by_id).into_keys().collect::<Vec<_>>(), vec![0, 1, 2]);
    let produced = other.produce("sessions", 2, record_batch(&["news"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    let (request, version) = session(FETCH_BY_ID_VERSION, id, 1, &[], &[]);
    let moved = raw.call(&request, version).await;
    assert_eq!(answered(&moved).into_keys().collect::<Vec<_>>(), vec![2]);
    assert_eq!(moved.responses[0].topic_id, topic_id, "named by id");
    let (request, version) = session(FETCH_VERSION, id, 2, &[], &[]);
    assert_eq!(raw.call(&request, version).await.error_code, FETCH_SESSION_TOPIC_ID_ERROR);

    drop((raw, other));
    // Each connection's end closes its sessions (the handler's drop guard runs as its task ends).
    let closed = async {
        while !format!("{:?}", floe.agent.fetch_sessions).ends_with("sessions: 0 }") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(EVENT_WAIT, closed).await.expect("sessions closed with their connections");
    floe.shutdown().await;
}

/// Issue 53: a session's fetch reads only the partitions that moved since its last answer (at
/// 10,000 partitions, reading all of them each fetch was a quarter of the agent's CPU) and still
/// answers what Kafka answers. Over 200 partitions of one record each: a full fetch answers all;
/// with every position past its record the next answers nothing and reads none (each left out
/// as unchanged); a record in partition 7 is answered alone after a read of it alone; a long
/// poll over the whole session is woken by a record in partition 42 long before its
/// `max_wait_ms` and then looks at partition 42 alone; a partition forgotten and added again is
/// answered again though nothing moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_fetch_reads_only_the_partitions_that_moved() {
    const PARTITIONS: i32 = 200;
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut raw = floe.kafka();
    raw.create_topic("moved", PARTITIONS).await;
    let topic_id = raw.topic_id("moved").await;
    let batches = (0..PARTITIONS).map(|p| (p, record_batch(&["first"]))).collect();
    let produced = raw.call(&produce_request_to("moved", batches, -1), PRODUCE_VERSION).await;
    assert!(produced.responses.iter().flat_map(|t| &t.partition_responses).all(|p| p.error_code == 0));
    let session = |id: i32, epoch: i32, partitions: &[(i32, i64)], forget: &[i32]| {
        session_fetch("moved", topic_id, id, epoch, partitions, forget)
    };
    let counter = |path: &str| format!("floe_fetch_partition_reads_total{{path=\"{path}\"}}");
    let reads = || async {
        let (at_end, planned) = (counter("at_end"), counter("planned"));
        (floe.metric(&at_end).await + floe.metric(&planned).await, floe.metric(&counter("unchanged")).await)
    };
    let all_at = |offset: i64| (0..PARTITIONS).map(|p| (p, offset)).collect::<Vec<_>>();

    let opened = raw.call(&session(0, 0, &all_at(0), &[]), FETCH_VERSION).await;
    let id = opened.session_id;
    assert_eq!(answered(&opened).len(), PARTITIONS as usize, "a full fetch answers every partition");
    assert!(answered(&opened).values().all(|&(error, hwm, bytes)| error == 0 && hwm == 1 && bytes > 0));

    let before = reads().await;
    let caught_up = raw.call(&session(id, 1, &all_at(1), &[]), FETCH_VERSION).await;
    let (read, left_out) = reads().await;
    assert!(answered(&caught_up).is_empty(), "nothing new: {:?}", answered(&caught_up));
    assert_eq!((read - before.0, left_out - before.1), (0.0, f64::from(PARTITIONS)), "none read");

    let produced = raw.produce("moved", 7, record_batch(&["news"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    let before = reads().await;
    let news = answered(&raw.call(&session(id, 2, &[], &[]), FETCH_VERSION).await);
    let (read, left_out) = reads().await;
    assert_eq!(news.keys().copied().collect::<Vec<_>>(), vec![7], "{news:?}");
    assert!(news[&7].1 == 2 && news[&7].2 > 0, "partition 7's record: {news:?}");
    assert_eq!((read - before.0, left_out - before.1), (1.0, f64::from(PARTITIONS - 1)), "partition 7 alone read");
    let moved_on = raw.call(&session(id, 3, &[(7, 2)], &[]), FETCH_VERSION).await;
    assert!(answered(&moved_on).is_empty(), "partition 7 read on: {:?}", answered(&moved_on));

    let mut producer = floe.kafka();
    let settled_series = counter("settled");
    let settled = || floe.metric(&settled_series);
    let (before, settled_before) = (reads().await, settled().await);
    let started = Instant::now();
    let sent = raw.send(&session(id, 4, &[], &[]).with_max_wait_ms(10_000), FETCH_VERSION).await;
    // The record is to wake the poll, not to be there when it first reads.
    floe.wait_for_long_poll().await;
    let produced = producer.produce("moved", 42, record_batch(&["late"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    let (answered_id, long_poll) = raw.recv::<FetchRequest>(FETCH_VERSION).await;
    assert_eq!(answered_id, sent);
    let waited = started.elapsed();
    let (after, settled_after) = (reads().await, settled().await);
    // The first pass looks at all 200; once woken, the poll reads the partition that moved and
    // leaves the other 199 out unseen.
    assert_eq!(after.0 - before.0, 1.0, "partition 42 alone read");
    assert_eq!((after.1 - before.1, settled_after - settled_before), (f64::from(PARTITIONS), 199.0));
    let late = answered(&long_poll);
    assert_eq!(late.keys().copied().collect::<Vec<_>>(), vec![42], "{late:?}");
    assert!(waited < Duration::from_secs(5), "woken by partition 42 after {waited:?}");

    let forgot = raw.call(&session(id, 5, &[(42, 2)], &[3]), FETCH_VERSION).await;
    assert!(answered(&forgot).is_empty(), "partition 42 read on, 3 forgotten: {:?}", answered(&forgot));
    let back = answered(&raw.call(&session(id, 6, &[(3, 1)], &[]), FETCH_VERSION).await);
    assert_eq!(back, BTreeMap::from([(3, (0, 1, 0))]), "partition 3 added again is answered again");
    floe.shutdown().await;
}

/// Issue 53: a session's long polls register its partitions to be woken once, not per fetch
/// (at 10,000 partitions registering and unregistering them each fetch was a tenth of the
/// agent), and the kept registration loses no wakeup: a long poll is woken by a move after it
/// began to wait, a move between two fetches is answered by the next one's first read, a poll
/// that finds nothing waits its `max_wait_ms`, and a change of the session's partitions
/// registers them anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_registers_its_partitions_to_be_woken_once() {
    const PARTITIONS: i32 = 50;
    const REGISTERED: &str = "floe_long_poll_partitions_registered_total";
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut consumer = floe.kafka();
    let mut producer = floe.kafka();
    consumer.create_topic("kept", PARTITIONS).await;
    let topic_id = consumer.topic_id("kept").await;
    let batches = (0..PARTITIONS).map(|p| (p, record_batch(&["first"]))).collect();
    let produced = consumer.call(&produce_request_to("kept", batches, -1), PRODUCE_VERSION).await;
    assert!(produced.responses.iter().flat_map(|t| &t.partition_responses).all(|p| p.error_code == 0));
    let all_at = |offset: i64| (0..PARTITIONS).map(|p| (p, offset)).collect::<Vec<_>>();
    let opened = consumer.call(&session_fetch("kept", topic_id, 0, 0, &all_at(0), &[]), FETCH_VERSION).await;
    let id = opened.session_id;
    assert_eq!(answered(&opened).len(), PARTITIONS as usize);
    let poll = |epoch: i32, partitions: &[(i32, i64)], forget: &[i32], wait_ms: i32| {
        session_fetch("kept", topic_id, id, epoch, partitions, forget).with_max_wait_ms(wait_ms).with_min_bytes(1)
    };
    let registered = || floe.metric(REGISTERED);

    let before = registered().await;
    let first =
        long_poll_woken_by(&floe, &mut consumer, &mut producer, &poll(1, &all_at(1), &[], 10_000), ("kept", 7)).await;
    assert_eq!(first.keys().copied().collect::<Vec<_>>(), vec![7], "{first:?}");
    assert_eq!(registered().await - before, f64::from(PARTITIONS), "the session's partitions registered");

    // Moved between two fetches: the next fetch's first read finds it, without waiting.
    produce(&mut producer, "kept", 9).await;
    let before = registered().await;
    let between = answered(&consumer.call(&poll(2, &[(7, 2)], &[], 10_000), FETCH_VERSION).await);
    assert_eq!(between.keys().copied().collect::<Vec<_>>(), vec![9], "{between:?}");
    let again =
        long_poll_woken_by(&floe, &mut consumer, &mut producer, &poll(3, &[(9, 2)], &[], 10_000), ("kept", 11)).await;
    assert_eq!(again.keys().copied().collect::<Vec<_>>(), vec![11], "woken by the kept registration: {again:?}");
    let started = Instant::now();
    let nothing = consumer.call(&poll(4, &[(11, 2)], &[], 300), FETCH_VERSION).await;
    assert!(answered(&nothing).is_empty() && started.elapsed() >= Duration::from_millis(300), "waited for nothing");
    assert_eq!(registered().await - before, 0.0, "nothing registered again");

    // Partition 0 forgotten: the 49 left are registered anew.
    let forgot = consumer.call(&poll(5, &[], &[0], 0), FETCH_VERSION).await;
    assert!(answered(&forgot).is_empty(), "{:?}", answered(&forgot));
    let before = registered().await;
    let after = long_poll_woken_by(&floe, &mut consumer, &mut producer, &poll(6, &[], &[], 10_000), ("kept", 13)).await;
    assert_eq!(after.keys().copied().collect::<Vec<_>>(), vec![13], "{after:?}");
    assert_eq!(registered().await - before, f64::from(PARTITIONS - 1));
    floe.shutdown().await;
}

/// Issue 53: a session by topic id leaves the partitions its answers left out as told and unmoved
/// (quiet ones) out of the request the handler reads, so a fetch costs the partitions that moved,
/// not a loop over all of them, and loses no wakeup doing so. Over 200 partitions: once a long
/// poll has registered the session's waiter and every partition is read to its end, a fetch
/// names none of them (all quiet) and reads none; a quiet partition that moves during a long
/// poll is read and answered by that poll, long before its `max_wait_ms`; one that moves
/// between two fetches is answered by the next, without waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_by_topic_id_leaves_quiet_partitions_out_and_loses_no_wakeup() {
    const PARTITIONS: i32 = 200;
    let floe = TestAgent::start(TestOptions::default()).await;
    let (mut consumer, mut producer) = (floe.kafka(), floe.kafka());
    let (topic_id, id) = all_quiet_session(&floe, &mut consumer, &mut producer, "quiet", PARTITIONS).await;
    let poll = |epoch: i32, partitions: &[(i32, i64)], wait_ms: i32| {
        session_fetch("quiet", topic_id, id, epoch, partitions, &[]).with_max_wait_ms(wait_ms).with_min_bytes(1)
    };
    let reads = || async {
        let counter = |path: &str| format!("floe_fetch_partition_reads_total{{path=\"{path}\"}}");
        floe.metric(&counter("at_end")).await + floe.metric(&counter("planned")).await
    };

    // A quiet partition moves during a long poll: the session's waiter wakes it, and it reads
    // the partition though its request did not name it.
    let before = reads().await;
    let late = by_id_poll_woken_by(&floe, &mut consumer, &mut producer, &poll(5, &[], 10_000), ("quiet", 42)).await;
    assert_eq!(late.keys().copied().collect::<Vec<_>>(), vec![42], "{late:?}");
    assert!(late[&42].1 == 2 && late[&42].2 > 0, "partition 42's record: {late:?}");
    assert_eq!(reads().await - before, 1.0, "partition 42 alone read");

    // Moved between two fetches: the next one reads it and answers at once.
    let read_on = consumer.call(&poll(6, &[(42, 2)], 0), FETCH_BY_ID_VERSION).await;
    assert!(answered(&read_on).is_empty(), "{:?}", answered(&read_on));
    produce(&mut producer, "quiet", 9).await;
    let before = reads().await;
    let started = Instant::now();
    let between = consumer.call(&poll(7, &[], 10_000), FETCH_BY_ID_VERSION).await;
    assert_eq!(answered(&between).keys().copied().collect::<Vec<_>>(), vec![9], "{:?}", answered(&between));
    assert!(started.elapsed() < Duration::from_secs(5), "answered after {:?}", started.elapsed());
    assert_eq!(reads().await - before, 1.0, "partition 9 alone read");
    floe.shutdown().await;
}

/// Issue 53: quiet partitions are not in the request the authorizer checks, so a change of ACLs
/// makes every partition of the session read (and authorized) again, as Kafka checks each fetch
/// of a session in full: a DENY of Read on the topic is answered with
/// TOPIC_AUTHORIZATION_FAILED for all 50 partitions at the next fetch, quiet ones too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_change_makes_a_session_authorize_its_quiet_partitions_again() {
    const PARTITIONS: i32 = 50;
    const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    let floe = TestAgent::start(TestOptions { authorizer: true, ..TestOptions::default() }).await;
    let (mut consumer, mut producer) = (floe.kafka(), floe.kafka());
    let (topic_id, id) = all_quiet_session(&floe, &mut consumer, &mut producer, "guarded", PARTITIONS).await;
    let poll = |epoch: i32| session_fetch("guarded", topic_id, id, epoch, &[], &[]);

    let deny = AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(StrBytes::from_static_str("guarded"))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(StrBytes::from_static_str("User:ANONYMOUS"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(3) // READ
        .with_permission_type(2); // DENY
    let created = consumer.call(&CreateAclsRequest::default().with_creations(vec![deny]), CREATE_ACLS_VERSION).await;
    assert!(created.results.iter().all(|r| r.error_code == 0), "{:?}", created.results);
    let refused = answered(&consumer.call(&poll(5), FETCH_BY_ID_VERSION).await);
    assert_eq!(refused.len(), PARTITIONS as usize, "every partition of the session: {refused:?}");
    assert!(
        refused.values().all(|&(error, _, bytes)| error == TOPIC_AUTHORIZATION_FAILED && bytes == 0),
        "{refused:?}"
    );
    floe.shutdown().await;
}

/// A partition whose next batch is larger than its `partition_max_bytes` is answered only as
/// the first partition with records in an answer (KIP-74). Kafka moves partitions that returned
/// records to the back of the session, so such a partition comes first in turn; kept in place,
/// a busy partition ahead of it starves it for as long as it is busy. Partition 0 gets a small
/// record before each fetch, partition 1 holds one 4 KB batch and a limit of 1 KB: partition 1
/// is answered within a few fetches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_whose_batch_passes_its_limit_is_not_starved_by_a_busy_one() {
    const PARTITION_MAX_BYTES: i32 = 1024;
    let floe = TestAgent::start(TestOptions::default()).await;
    let (mut consumer, mut producer) = (floe.kafka(), floe.kafka());
    consumer.create_topic("fair", 2).await;
    let topic_id = consumer.topic_id("fair").await;
    let big: Vec<String> = (0..40).map(|i| format!("{i:0>100}")).collect();
    let big: Vec<&str> = big.iter().map(String::as_str).collect();
    let produced = producer.produce("fair", 1, record_batch(&big), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    let limited = |mut request: FetchRequest| {
        for p in request.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.partition_max_bytes = PARTITION_MAX_BYTES;
        }
        request
    };
    produce(&mut producer, "fair", 0).await;
    let opened =
        consumer.call(&limited(session_fetch("fair", topic_id, 0, 0, &[(0, 0), (1, 0)], &[])), FETCH_VERSION).await;
    let id = opened.session_id;
    let first = answered(&opened);
    assert!(first[&0].2 > 0 && first[&1].2 == 0, "partition 0 first, partition 1 over its limit: {first:?}");
    let mut position = 1;
    for epoch in 1..=4 {
        produce(&mut producer, "fair", 0).await;
        let request = limited(session_fetch("fair", topic_id, id, epoch, &[(0, position)], &[]));
        let answer = answered(&consumer.call(&request, FETCH_VERSION).await);
        if answer.get(&1).is_some_and(|&(error, _, bytes)| error == 0 && bytes > PARTITION_MAX_BYTES as usize) {
            floe.shutdown().await;
            return;
        }
        if answer.get(&0).is_some_and(|&(_, _, bytes)| bytes > 0) {
            position += 1;
        }
    }
    panic!("partition 1 was never answered while partition 0 was busy");
}

/// Creates `topic` with `partitions` partitions of one record each and brings a session by
/// topic id over all of them to where each is quiet: a full fetch, a long poll that registers
/// the session's waiter (woken by a record in partition 7), partition 7 read on, and a fetch
/// that leaves it out too. Checks that the next fetch (epoch 4) names none and reads none; the
/// topic's id and the session's, whose next epoch is 5.
async fn all_quiet_session(
    floe: &TestAgent,
    consumer: &mut KafkaClient,
    producer: &mut KafkaClient,
    topic: &str,
    partitions: i32,
) -> (uuid::Uuid, i32) {
    consumer.create_topic(topic, partitions).await;
    let batches = (0..partitions).map(|p| (p, record_batch(&["first"]))).collect();
    let produced = consumer.call(&produce_request_to(topic, batches, -1), PRODUCE_VERSION).await;
    assert!(produced.responses.iter().flat_map(|t| &t.partition_responses).all(|p| p.error_code == 0));
    let topic_id = consumer.topic_id(topic).await;
    let all_at = |offset: i64| (0..partitions).map(|p| (p, offset)).collect::<Vec<_>>();
    let opened = consumer.call(&session_fetch(topic, topic_id, 0, 0, &all_at(0), &[]), FETCH_BY_ID_VERSION).await;
    let id = opened.session_id;
    assert_eq!(answered(&opened).len(), partitions as usize, "a full fetch answers every partition");
    let poll = |epoch: i32, named: &[(i32, i64)], wait_ms: i32| {
        session_fetch(topic, topic_id, id, epoch, named, &[]).with_max_wait_ms(wait_ms).with_min_bytes(1)
    };
    let woken = by_id_poll_woken_by(floe, consumer, producer, &poll(1, &all_at(1), 10_000), (topic, 7)).await;
    assert_eq!(woken.keys().copied().collect::<Vec<_>>(), vec![7], "{woken:?}");
    for (epoch, named) in [(2, vec![(7, 2)]), (3, vec![])] {
        let quiet = consumer.call(&poll(epoch, &named, 0), FETCH_BY_ID_VERSION).await;
        assert!(answered(&quiet).is_empty(), "{:?}", answered(&quiet));
    }
    let counter = |path: &str| format!("floe_fetch_partition_reads_total{{path=\"{path}\"}}");
    let series = [counter("at_end"), counter("planned"), counter("quiet")];
    let mut before = Vec::new();
    for s in &series {
        before.push(floe.metric(s).await);
    }
    let idle = consumer.call(&poll(4, &[], 0), FETCH_BY_ID_VERSION).await;
    assert!(answered(&idle).is_empty(), "{:?}", answered(&idle));
    let mut moved = Vec::new();
    for (s, before) in series.iter().zip(before) {
        moved.push(floe.metric(s).await - before);
    }
    assert_eq!(moved, vec![0.0, 0.0, f64::from(partitions)], "all quiet, none read");
    (topic_id, id)
}

/// Sends a session's long poll by topic id, produces a record to `partition` once it waits, and
/// returns its answer, which must come within 5 s.
async fn by_id_poll_woken_by(
    floe: &TestAgent,
    consumer: &mut KafkaClient,
    producer: &mut KafkaClient,
    request: &FetchRequest,
    (topic, partition): (&str, i32),
) -> BTreeMap<i32, (i16, i64, usize)> {
    let started = Instant::now();
    let sent = consumer.send(request, FETCH_BY_ID_VERSION).await;
    floe.wait_for_long_poll().await;
    produce(producer, topic, partition).await;
    let (answered_id, answer) = consumer.recv::<FetchRequest>(FETCH_BY_ID_VERSION).await;
    assert_eq!(answered_id, sent);
    assert!(started.elapsed() < Duration::from_secs(5), "woken after {:?}", started.elapsed());
    answered(&answer)
}

/// Where a fetch session meets transactions and DeleteRecords: a read_committed session leaves
/// out what it told, yet is told what Kafka's sessions tell (a partition is answered when its
/// high watermark, last stable offset or log start moved, or it has records). An open
/// transaction's three records in each of two partitions are answered as a high watermark of 3
/// with nothing readable (last stable offset 0), then not again while nothing moves; a long poll
/// is woken by the commit and reads the records; an aborted transaction is named as such; a
/// DeleteRecords of partition 0 to its end is answered for partition 0 alone, with its new log
/// start. By name (v12) and by topic id (v16), where both partitions are quiet (left out of the
/// request) when the abort and the DeleteRecords land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_committed_session_is_told_of_commits_aborts_and_a_moved_log_start() {
    read_committed_session_told_of_moves(FETCH_VERSION).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_committed_session_by_topic_id_is_told_of_moves_of_quiet_partitions() {
    read_committed_session_told_of_moves(FETCH_BY_ID_VERSION).await;
}

async fn read_committed_session_told_of_moves(version: i16) {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut consumer = floe.kafka();
    let mut producer = floe.kafka();
    consumer.create_topic("txn-session", 2).await;
    let topic_id = consumer.topic_id("txn-session").await;
    let mut txn = TxnProducer::init(&mut producer, "txn-session", 2).await;
    let session = |id: i32, epoch: i32, partitions: &[(i32, i64)]| {
        session_fetch("txn-session", topic_id, id, epoch, partitions, &[]).with_isolation_level(READ_COMMITTED)
    };
    let both_at = |offset: i64| [(0, offset), (1, offset)];

    assert_eq!(txn.write(&mut producer, "txn-session", "A", 3).await, vec![0, 0]);
    let opened = consumer.call(&session(0, 0, &both_at(0)), version).await;
    let id = opened.session_id;
    let open = partitions(&opened);
    assert_eq!(open.len(), 2, "a full fetch answers both");
    for answer in open.values() {
        let watermarks = (answer.error_code, answer.high_watermark, answer.last_stable_offset);
        assert_eq!(watermarks, (0, 3, 0), "the open transaction holds the last stable offset");
        assert!(consumed(answer).is_empty(), "nothing readable: {:?}", consumed(answer));
    }
    let quiet = consumer.call(&session(id, 1, &[]), version).await;
    assert!(partitions(&quiet).is_empty(), "nothing moved: {:?}", partitions(&quiet).keys());

    let started = Instant::now();
    let sent = consumer.send(&session(id, 2, &[]).with_max_wait_ms(10_000).with_min_bytes(1), version).await;
    floe.wait_for_long_poll().await;
    assert_eq!(txn.end(&mut producer, true).await, 0, "A committed");
    let (answered_id, committed) = consumer.recv::<FetchRequest>(version).await;
    assert_eq!(answered_id, sent);
    assert!(started.elapsed() < Duration::from_secs(5), "woken by the commit after {:?}", started.elapsed());
    let committed = partitions(&committed);
    assert_eq!(committed.keys().copied().collect::<Vec<_>>(), vec![0, 1], "both partitions' records");
    for (partition, answer) in &committed {
        assert_eq!((answer.high_watermark, answer.last_stable_offset), (4, 4), "past the commit's marker");
        let expected: Vec<(i64, String)> = (0..3).map(|i| (i, format!("A-{partition}-{i}"))).collect();
        assert_eq!(consumed(answer), expected);
    }
    let read_on = consumer.call(&session(id, 3, &both_at(4)), version).await;
    assert!(partitions(&read_on).is_empty(), "both read to the end: {:?}", partitions(&read_on).keys());
    // Left out as told, then left out of the request (by topic id: the long poll above kept
    // the session's waiter).
    idle_fetch(&floe, &mut consumer, &session(id, 4, &[]), version).await;
    let quiet = if version >= 13 { 2.0 } else { 0.0 };
    let left_out = idle_fetch(&floe, &mut consumer, &session(id, 5, &[]), version).await;
    assert_eq!(left_out, quiet, "partitions left out of the request");

    assert_eq!(txn.write(&mut producer, "txn-session", "B", 3).await, vec![4, 4]);
    assert_eq!(txn.end(&mut producer, false).await, 0, "B aborted");
    let aborted = partitions(&consumer.call(&session(id, 6, &[]), version).await);
    assert_eq!(aborted.len(), 2, "both moved");
    for answer in aborted.values() {
        assert_eq!((answer.high_watermark, answer.last_stable_offset), (8, 8));
        assert_eq!(aborted_transactions(answer), vec![(txn.producer_id, 4)], "B named as aborted");
        assert!(consumed(answer).is_empty(), "an aborted transaction is not consumed: {:?}", consumed(answer));
    }
    let read_on = consumer.call(&session(id, 7, &both_at(8)), version).await;
    assert!(partitions(&read_on).is_empty(), "both read to the end: {:?}", partitions(&read_on).keys());
    idle_fetch(&floe, &mut consumer, &session(id, 8, &[]), version).await;
    let left_out = idle_fetch(&floe, &mut consumer, &session(id, 9, &[]), version).await;
    assert_eq!(left_out, quiet, "partitions left out of the request");

    assert_eq!(delete_records(&mut producer, "txn-session", 8).await, (0, 8));
    let trimmed = partitions(&consumer.call(&session(id, 10, &[]), version).await);
    assert_eq!(trimmed.keys().copied().collect::<Vec<_>>(), vec![0], "the partition whose log start moved");
    let answer = &trimmed[&0];
    assert_eq!((answer.error_code, answer.high_watermark, answer.log_start_offset), (0, 8, 8));
    let again = consumer.call(&session(id, 11, &[]), version).await;
    assert!(partitions(&again).is_empty(), "told of the log start once: {:?}", partitions(&again).keys());
    floe.shutdown().await;
}

/// Sends a session fetch that must answer nothing; the partitions it left out of its request as
/// quiet.
async fn idle_fetch(floe: &TestAgent, consumer: &mut KafkaClient, request: &FetchRequest, version: i16) -> f64 {
    let series = "floe_fetch_partition_reads_total{path=\"quiet\"}";
    let before = floe.metric(series).await;
    let idle = consumer.call(request, version).await;
    assert!(partitions(&idle).is_empty(), "nothing moved: {:?}", partitions(&idle).keys());
    floe.metric(series).await - before
}

/// A client that pipelines large fetches and reads no answers holds a bounded share of the
/// agent: once its unanswered requests hold `CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX` (each
/// fetch counting the 55 MiB its answer may grow to), no more of them are read, and every
/// answer still comes once the client reads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_reading_no_answers_has_no_more_fetches_read_past_its_bytes_in_flight() {
    const FETCHES: usize = 64;
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("big", 1).await;
    let value = "v".repeat(384 * 1024);
    for _ in 0..2 {
        let produced = kafka.produce("big", 0, record_batch(&[value.as_str()]), -1).await.expect("answered");
        assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
    }
    let reads = || async {
        floe.metric("floe_fetch_partition_reads_total{path=\"planned\"}").await
            + floe.metric("floe_fetch_partition_reads_total{path=\"at_end\"}").await
    };
    let before = reads().await;
    // Each answer is 768 KiB (both batches) and asks for up to i32::MAX bytes; the duplex
    // holds 4 MiB of answers before the agent's writer waits for this client.
    let request = fetch_request("big", 0, 0);
    for _ in 0..FETCHES {
        kafka.send(&request, FETCH_VERSION).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let read = reads().await - before;
    assert!(read < 16.0, "{read} of {FETCHES} fetches read while their answers wait unread");
    for _ in 0..FETCHES {
        let (_, response) = kafka.recv::<FetchRequest>(FETCH_VERSION).await;
        let partition = response.responses.into_iter().flat_map(|t| t.partitions).next().expect("answered");
        assert_eq!(partition.error_code, 0);
        assert_eq!(decode_records(partition.records.as_ref()).len(), 2, "both batches, every time");
    }
    floe.shutdown().await;
}

/// Sends the long poll `request` and, once it waits, produces a record to `partition` of its
/// `topic`: the partitions the answer names (it must come well before its `max_wait_ms`).
async fn long_poll_woken_by(
    floe: &TestAgent,
    consumer: &mut KafkaClient,
    producer: &mut KafkaClient,
    request: &FetchRequest,
    (topic, partition): (&str, i32),
) -> BTreeMap<i32, (i16, i64, usize)> {
    let started = Instant::now();
    let sent = consumer.send(request, FETCH_VERSION).await;
    floe.wait_for_long_poll().await;
    produce(producer, topic, partition).await;
    let (answered_id, answer) = consumer.recv::<FetchRequest>(FETCH_VERSION).await;
    assert_eq!(answered_id, sent);
    assert!(started.elapsed() < Duration::from_secs(5), "woken after {:?}", started.elapsed());
    answered(&answer)
}

/// Produces one record to `partition` of `topic`.
async fn produce(producer: &mut KafkaClient, topic: &str, partition: i32) {
    let produced = producer.produce(topic, partition, record_batch(&["news"]), -1).await.expect("answered");
    assert_eq!(produced.error_code, 0, "{:?}", produced.error_message);
}

/// Sends `request` and returns how long its answer took and the one partition it names.
async fn timed_fetch(kafka: &mut KafkaClient, request: &FetchRequest) -> (Duration, PartitionData) {
    let started = Instant::now();
    let response = kafka.call(request, FETCH_VERSION).await;
    let waited = started.elapsed();
    assert_eq!(response.error_code, 0);
    (waited, response.responses.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered"))
}

/// The offsets and values of a partition's records in a Fetch answer.
fn values(partition: &PartitionData) -> Vec<(i64, Bytes)> {
    decode_records(partition.records.as_ref()).into_iter().map(|r| (r.offset, r.value.unwrap_or_default())).collect()
}

/// DeleteRecords of one partition-0 below `offset`: the error code and low watermark answered.
async fn delete_records(kafka: &mut KafkaClient, topic: &str, offset: i64) -> (i16, i64) {
    let partition = DeleteRecordsPartition::default().with_partition_index(0).with_offset(offset);
    let topic = DeleteRecordsTopic::default().with_name(topic_name(topic)).with_partitions(vec![partition]);
    let request = DeleteRecordsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
    let response = kafka.call(&request, DELETE_RECORDS_VERSION).await;
    let answer = response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
    (answer.error_code, answer.low_watermark)
}

/// A Fetch of session `id` at `epoch` naming `partitions` (partition, offset) of `topic`, which
/// waits for nothing, and forgetting the partitions `forget`.
fn session_fetch(
    topic: &str,
    topic_id: uuid::Uuid,
    id: i32,
    epoch: i32,
    partitions: &[(i32, i64)],
    forget: &[i32],
) -> FetchRequest {
    let wanted: Vec<FetchPartition> = partitions
        .iter()
        .map(|&(partition, offset)| {
            FetchPartition::default()
                .with_partition(partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)
        })
        .collect();
    let topics = if wanted.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default().with_topic(topic_name(topic)).with_topic_id(topic_id).with_partitions(wanted)]
    };
    let forgotten = if forget.is_empty() {
        Vec::new()
    } else {
        vec![
            ForgottenTopic::default()
                .with_topic(topic_name(topic))
                .with_topic_id(topic_id)
                .with_partitions(forget.to_vec()),
        ]
    };
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 24)
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

/// Each partition a Fetch answer names, by partition index.
fn partitions(response: &FetchResponse) -> BTreeMap<i32, PartitionData> {
    response.responses.iter().flat_map(|t| &t.partitions).map(|p| (p.partition_index, p.clone())).collect()
}

/// Each partition a Fetch answer names: its error code, high watermark and record bytes.
fn answered(response: &FetchResponse) -> BTreeMap<i32, (i16, i64, usize)> {
    response
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition_index, (p.error_code, p.high_watermark, p.records.as_ref().map_or(0, Bytes::len))))
        .collect()
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}
