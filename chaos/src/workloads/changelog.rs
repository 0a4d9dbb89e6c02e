//! A state store's changelog, kept as Kafka Streams keeps one: a compacted topic with a short
//! `delete.retention.ms`, written by a transactional producer whose id every incarnation reuses
//! (it aborts some transactions on purpose, then commits new values of the same keys) and by an
//! idempotent producer of keys of its own. While the cleaner runs, a restorer reads the topic
//! from offset 0 with both isolation levels every few seconds, as a store restore does; every
//! read is kept for the reference model in `check::changelog`. The same two writers also write
//! the table topic ([`Keyed`], `workloads::table`).
//!
//! A value names its version (`v{N}`): the transaction's number, or the idempotent producer's
//! sequence. Each writer's versions of a key only go up, so the model needs no server offsets.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, FutureRecord, Producer};
use tokio::task::JoinSet;

use super::Stop;
use super::produce::idempotent_producer;
use super::transactions::{TxnProducer, transactional_producer};
use crate::history::{Event, History, Outcome};

pub(crate) const CHANGELOG_TOPIC: &str = "chaos-changelog";
pub(crate) const CHANGELOG_PARTITIONS: i32 = 2;
/// A compacted topic the two writers write: where, under which transactional id (every
/// incarnation of the transactional writer reuses it, as a Kafka Streams task does), and how
/// long the transactional writer pauses between transactions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Keyed {
    pub(crate) topic: &'static str,
    pub(crate) partitions: i32,
    pub(crate) transactional_id: &'static str,
    pub(crate) txn_pause: Duration,
}

/// The changelog.
pub(crate) const CHANGELOG: Keyed = Keyed {
    topic: CHANGELOG_TOPIC,
    partitions: CHANGELOG_PARTITIONS,
    transactional_id: "chaos-changelog",
    txn_pause: TXN_PAUSE,
};
/// Compacted; tombstones and transaction markers go 2 s after the pass that kept them, and any
/// dirty byte is worth a pass, so the cleaner runs all through a short run.
pub(crate) const CHANGELOG_CONFIGS: [(&str, &str); 3] =
    [("cleanup.policy", "compact"), ("delete.retention.ms", "2000"), ("min.cleanable.dirty.ratio", "0.01")];
/// Keys per partition for each writer: few, so every key is rewritten and cleaned often.
const KEYS_PER_PARTITION: u64 = 6;
/// Keys a transaction writes in each partition.
const KEYS_PER_TXN: u64 = 3;
/// One transaction in this many is aborted on purpose, after its records were sent.
const ABORT_ONE_IN: u32 = 3;
/// Every this many transactions the producer is made anew under the same id, as a task restart.
const RESTART_EVERY: u64 = 25;
const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(30);
const TXN_PAUSE: Duration = Duration::from_millis(100);
/// How often the restorer reads the whole topic.
const RESTORE_EVERY: Duration = Duration::from_secs(5);

pub(crate) fn txn_key(partition: i32, n: u64) -> String {
    format!("t{partition}-{n}")
}

/// Whether `key` is one the transactional writer writes.
pub(crate) fn is_txn_key(key: &str) -> bool {
    key.starts_with('t')
}

pub(crate) fn idempotent_key(partition: i32, n: u64) -> String {
    format!("i{partition}-{n}")
}

pub(crate) fn value(version: u64) -> String {
    format!("v{version}")
}

pub(crate) fn version(value: &str) -> Option<u64> {
    value.strip_prefix('v')?.parse().ok()
}

/// One read of the whole topic from offset 0: when it started (run time) and, per partition,
/// `(offset, key, value)` in the order read.
#[derive(Clone, Debug)]
pub(crate) struct Restore {
    pub(crate) read_committed: bool,
    pub(crate) started_ms: u64,
    pub(crate) records: Vec<Vec<(i64, String, String)>>,
}

pub(crate) type Restores = Arc<Mutex<Vec<Restore>>>;

/// Writes `writes` to `topic` in one transaction at `version`, then commits it, or aborts it
/// when `abort`.
fn transact(producer: &TxnProducer, topic: &str, writes: &[(i32, String)], version: u64, abort: bool) -> Outcome {
    let payload = value(version);
    let attempt = || -> Result<(), KafkaError> {
        producer.begin_transaction()?;
        for (partition, key) in writes {
            let mut record = BaseRecord::<str, str>::to(topic).key(key).payload(&payload).partition(*partition);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        record = back;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err((e, _)) => return Err(e),
                }
            }
        }
        if abort {
            // The records reach the log before the abort, as a task's do when it fails mid-way.
            producer.flush(TXN_CALL_TIMEOUT)?;
            return producer.abort_transaction(TXN_CALL_TIMEOUT);
        }
        producer.commit_transaction(TXN_CALL_TIMEOUT)
    };
    match attempt() {
        Ok(()) if abort => Outcome::Aborted,
        Ok(()) => Outcome::Committed,
        Err(e) => {
            let abortable = matches!(&e, KafkaError::Transaction(inner) if inner.txn_requires_abort());
            if abortable && producer.abort_transaction(TXN_CALL_TIMEOUT).is_ok() {
                Outcome::Aborted
            } else {
                Outcome::Unknown
            }
        }
    }
}

/// The transactional writer of `keyed`, until `stop`; blocking, so on a thread.
pub(crate) fn run_transactional(
    bootstrap: String,
    keyed: Keyed,
    stop: Stop,
    history: Arc<History>,
    trace: &Path,
) -> anyhow::Result<()> {
    let mut rng = fastrand::Rng::with_seed(u64::from(std::process::id()));
    let mut producer = transactional_producer(&bootstrap, keyed.transactional_id, &history, trace)?;
    let mut txn = 0u64;
    while !stop.is_set() {
        txn += 1;
        let start = rng.u64(0..KEYS_PER_PARTITION);
        let writes: Vec<(i32, String)> = (0..keyed.partitions)
            .flat_map(|p| (0..KEYS_PER_TXN).map(move |i| (p, txn_key(p, (start + i) % KEYS_PER_PARTITION))))
            .collect();
        let outcome = transact(&producer, keyed.topic, &writes, txn, rng.u32(0..ABORT_ONE_IN) == 0);
        for (partition, key) in writes {
            history.push(Event::KeyWritten { topic: keyed.topic.into(), partition, key, version: txn, outcome });
        }
        if outcome == Outcome::Unknown || txn.is_multiple_of(RESTART_EVERY) {
            // The same transactional id again: the new incarnation fences the old one and settles
            // its open transaction.
            producer = transactional_producer(&bootstrap, keyed.transactional_id, &history, trace)?;
        }
        std::thread::sleep(keyed.txn_pause);
    }
    Ok(())
}

/// The idempotent writer of keys of its own to `keyed`'s topic, `per_second` records, until
/// `stop`.
pub(crate) async fn run_idempotent(
    bootstrap: String,
    keyed: Keyed,
    per_second: u32,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    let producer = idempotent_producer(&bootstrap)?;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut reports = JoinSet::new();
    let mut seq = 0u64;
    while !stop.is_set() {
        tick.tick().await;
        while reports.try_join_next().is_some() {}
        let partitions = keyed.partitions.max(1) as u64;
        let partition = (seq % partitions) as i32;
        let key = idempotent_key(partition, (seq / partitions) % KEYS_PER_PARTITION);
        let payload = value(seq);
        let record = FutureRecord::to(keyed.topic).key(&key).payload(&payload).partition(partition);
        let Ok(delivery) = producer.send_result(record) else {
            continue;
        };
        let (history, version) = (history.clone(), seq);
        seq += 1;
        reports.spawn(async move {
            let outcome = match delivery.await {
                Ok(Ok(_)) => Outcome::Committed,
                _ => Outcome::Unknown,
            };
            history.push(Event::KeyWritten { topic: keyed.topic.into(), partition, key, version, outcome });
        });
    }
    while reports.join_next().await.is_some() {}
    Ok(())
}

/// Reads the whole topic from offset 0 with one isolation level, as a store restore does.
pub(crate) fn restore(bootstrap: &str, read_committed: bool, history: &History) -> anyhow::Result<Restore> {
    let started_ms = history.now_ms();
    let mut records = vec![Vec::new(); CHANGELOG_PARTITIONS as usize];
    crate::check::read_each(bootstrap, CHANGELOG_TOPIC, CHANGELOG_PARTITIONS, read_committed, |m| {
        use rdkafka::Message;
        let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
        if let Some(partition) = records.get_mut(m.partition() as usize) {
            partition.push((m.offset(), text(m.key()), text(m.payload())));
        }
    })?;
    Ok(Restore { read_committed, started_ms, records })
}

/// Restores with both isolation levels every few seconds until `stop`; a read that fails under
/// faults is noted and tried again next time.
pub(crate) fn run_restorer(
    bootstrap: String,
    stop: Stop,
    history: Arc<History>,
    restores: Restores,
) -> anyhow::Result<()> {
    while !stop.is_set() {
        for read_committed in [true, false] {
            match restore(&bootstrap, read_committed, &history) {
                Ok(read) => restores.lock().unwrap_or_else(|p| p.into_inner()).push(read),
                Err(e) => history.note(format!("changelog restore (read_committed {read_committed}): {e:#}")),
            }
        }
        stop.wait(RESTORE_EVERY);
    }
    Ok(())
}
