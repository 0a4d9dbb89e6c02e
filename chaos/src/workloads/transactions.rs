//! A consume-transform-produce loop with librdkafka transactions: it reads the input topic with
//! `read_committed`, writes `out-INPUT|tTXN` to the same partition of the output topic, and adds
//! its consumer offsets to each transaction. After an abort, or a commit whose outcome is unknown,
//! it rewinds to the group's committed offsets, so each input must appear in the output once.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::{Stop, TXN_GROUP, TXN_INPUT_TOPIC, TXN_OUTPUT_TOPIC, Traced, client};
use crate::history::{Event, History};

const RECORDS_PER_TXN_MAX: usize = 20;
/// How long a transaction collects input before it commits what it has.
const COLLECT_FOR: Duration = Duration::from_millis(200);
const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A transaction not finished after this long is taken as hung in the client and its producer
/// abandoned, as after an unknown outcome. librdkafka 2.12 can wait without end in
/// `send_offsets_to_transaction` when the group coordinator it cached dropped out of Metadata
/// (librdkafka issue 5511: the coordinator request waits for a state change of a broker whose
/// thread is gone); every call it makes has its own timeout well under this.
const TXN_HANG_AFTER: Duration = Duration::from_secs(120);

pub(crate) fn output_value(input: &str, txn: u64) -> String {
    format!("out-{input}|t{txn}")
}

/// `(input value, transaction)` of an output value.
pub(crate) fn parse_output(value: &str) -> Option<(&str, u64)> {
    let (input, txn) = value.strip_prefix("out-")?.rsplit_once("|t")?;
    Some((input, txn.parse().ok()?))
}

/// Threaded: its own thread serves delivery reports and log lines as they come, so the trace's
/// times are when librdkafka logged, not when a later call happened to poll.
pub(crate) type TxnProducer = ThreadedProducer<Traced>;

/// A transactional producer of `transactional_id`, its transactions settled (the previous
/// incarnation fenced), retrying `init_transactions` for up to 300 s.
pub(crate) fn transactional_producer(
    bootstrap: &str,
    transactional_id: &str,
    history: &Arc<History>,
    trace: &Path,
) -> anyhow::Result<TxnProducer> {
    let producer: TxnProducer = client(bootstrap)
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "20000")
        .set("linger.ms", "5")
        .set("debug", Traced::DEBUG)
        .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug)
        .create_with_context(Traced::create(history.clone(), trace)?)
        .context("transactional producer")?;
    // init_transactions fences the previous incarnation and settles its open transaction.
    let started = Instant::now();
    loop {
        match producer.init_transactions(TXN_CALL_TIMEOUT) {
            Ok(()) => return Ok(producer),
            Err(e) if started.elapsed() < Duration::from_secs(300) => {
                history.note(format!("init_transactions: {e}; retrying"));
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return Err(e).context("init_transactions for 300 s"),
        }
    }
}

fn txn_error(e: &KafkaError) -> Option<&RDKafkaError> {
    match e {
        KafkaError::Transaction(inner) => Some(inner),
        _ => None,
    }
}

/// Seeks every assigned partition back to the group's committed offset.
fn rewind(consumer: &BaseConsumer<Traced>) -> anyhow::Result<()> {
    let committed = consumer.committed(TXN_CALL_TIMEOUT)?;
    for element in committed.elements() {
        // A partition whose offset could not be read (UNSTABLE_OFFSET_COMMIT while the metadata
        // leader cannot confirm it) is not "no offset": starting it over would transform its
        // inputs twice.
        element.error().with_context(|| format!("committed offset of partition {}", element.partition()))?;
        let offset = match element.offset() {
            Offset::Offset(o) => Offset::Offset(o),
            _ => Offset::Beginning,
        };
        consumer.seek(element.topic(), element.partition(), offset, TXN_CALL_TIMEOUT)?;
    }
    Ok(())
}

fn send(producer: &TxnProducer, partition: i32, value: &str) -> Result<(), KafkaError> {
    let mut record = BaseRecord::<(), str>::to(TXN_OUTPUT_TOPIC).payload(value).partition(partition);
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err((e, _)) => return Err(e),
        }
    }
}

/// What one transaction's commit came to.
enum Outcome {
    Committed,
    Aborted(String),
    Unknown(String),
    /// Not returned within [`TXN_HANG_AFTER`]; the call goes on in a thread of its own.
    Hung,
}

/// [`transact`] on a thread of its own, given up on after [`TXN_HANG_AFTER`]: the hung call keeps
/// its thread and its producer, which the next incarnation fences.
fn transact_or_abandon(
    producer: &Arc<TxnProducer>,
    group: rdkafka::consumer::ConsumerGroupMetadata,
    batch: Arc<Vec<(i32, i64, String)>>,
    txn: u64,
) -> Outcome {
    let (answer, outcome) = std::sync::mpsc::channel();
    let producer = producer.clone();
    std::thread::spawn(move || {
        // The receiver is gone only once the call was given up on.
        let _ = answer.send(transact(&producer, &group, &batch, txn));
    });
    outcome.recv_timeout(TXN_HANG_AFTER).unwrap_or(Outcome::Hung)
}

/// Begins, writes `batch` transformed, adds the offsets, commits; aborts where that is allowed.
fn transact(
    producer: &TxnProducer,
    group: &rdkafka::consumer::ConsumerGroupMetadata,
    batch: &[(i32, i64, String)],
    txn: u64,
) -> Outcome {
    let attempt = || -> Result<(), KafkaError> {
        producer.begin_transaction()?;
        let mut offsets = TopicPartitionList::new();
        for (partition, offset, input) in batch {
            send(producer, *partition, &output_value(input, txn))?;
            offsets.add_partition_offset(TXN_INPUT_TOPIC, *partition, Offset::Offset(offset + 1))?;
        }
        producer.send_offsets_to_transaction(&offsets, group, TXN_CALL_TIMEOUT)?;
        producer.commit_transaction(TXN_CALL_TIMEOUT)
    };
    let error = match attempt() {
        Ok(()) => return Outcome::Committed,
        Err(e) => e,
    };
    let abortable = txn_error(&error).is_some_and(RDKafkaError::txn_requires_abort);
    if abortable && producer.abort_transaction(TXN_CALL_TIMEOUT).is_ok() {
        return Outcome::Aborted(error.to_string());
    }
    Outcome::Unknown(error.to_string())
}

/// The input offsets of `batch` per partition as contiguous (partition, first, last) ranges.
fn input_ranges(batch: &[(i32, i64, String)]) -> Vec<(i32, i64, i64)> {
    let mut ranges: Vec<(i32, i64, i64)> = Vec::new();
    for &(partition, offset, _) in batch {
        match ranges.iter_mut().rev().find(|r| r.0 == partition) {
            Some(range) if range.2 + 1 == offset => range.2 = offset,
            _ => ranges.push((partition, offset, offset)),
        }
    }
    ranges
}

/// Runs the loop until `stop`; blocking (librdkafka's transaction calls are), so on a thread.
/// The clients' debug logs go to `trace`.
pub(crate) fn run(bootstrap: String, stop: Stop, history: Arc<History>, trace: &Path) -> anyhow::Result<()> {
    let consumer: BaseConsumer<Traced> = client(&bootstrap)
        .set("group.id", TXN_GROUP)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "10000")
        .set("debug", Traced::DEBUG)
        .set_log_level(rdkafka::config::RDKafkaLogLevel::Debug)
        .create_with_context(Traced::create(history.clone(), trace)?)
        .context("transform consumer")?;
    consumer.subscribe(&[TXN_INPUT_TOPIC])?;
    let id = format!("chaos-transform-{}", std::process::id());
    let mut producer = Arc::new(transactional_producer(&bootstrap, &id, &history, trace)?);
    let mut txn = 0u64;
    while !stop.is_set() {
        let mut batch = Vec::new();
        let collecting = Instant::now();
        while batch.len() < RECORDS_PER_TXN_MAX && collecting.elapsed() < COLLECT_FOR {
            match consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                    batch.push((m.partition(), m.offset(), value));
                }
                Some(Err(e)) => history.note(format!("transform consumer: {e}")),
                None => {}
            }
        }
        let Some(group) = consumer.group_metadata() else { continue };
        if batch.is_empty() {
            continue;
        }
        txn += 1;
        let records = batch.len();
        let batch = Arc::new(batch);
        match transact_or_abandon(&producer, group, batch.clone(), txn) {
            Outcome::Committed => history.push(Event::TxnCommitted { txn, records, inputs: input_ranges(&batch) }),
            Outcome::Aborted(reason) => {
                history.push(Event::TxnAborted { txn, records, reason });
                rewind_until_done(&consumer, &stop, &history);
            }
            outcome @ (Outcome::Unknown(_) | Outcome::Hung) => {
                let error = match outcome {
                    Outcome::Unknown(error) => error,
                    _ => {
                        let hung = format!("no answer in {} s: producer abandoned", TXN_HANG_AFTER.as_secs());
                        history.note(format!("transaction {txn}: {hung} (see transform-client.log)"));
                        hung
                    }
                };
                history.push(Event::TxnUnknown { txn, records, error });
                // A new incarnation settles the old one's transaction before going on.
                producer = Arc::new(transactional_producer(&bootstrap, &id, &history, trace)?);
                rewind_until_done(&consumer, &stop, &history);
            }
        }
    }
    Ok(())
}

fn rewind_until_done(consumer: &BaseConsumer<Traced>, stop: &Stop, history: &History) {
    while let Err(e) = rewind(consumer) {
        history.note(format!("rewinding the transform consumer: {e}; retrying"));
        if stop.is_set() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}
