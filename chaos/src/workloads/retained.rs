//! A topic whose log start moves while it is written and read: an idempotent producer writes
//! unique values, DeleteRecords cuts each partition every few seconds to a point below its high
//! watermark, and a reader reads the whole topic from its log start every few seconds. Every
//! read is kept for `check::retained`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::produce::{self, ProduceSpec};
use super::{Stop, client};
use crate::history::{Event, History};

pub(crate) const RETAINED_TOPIC: &str = "chaos-retained";
pub(crate) const RETAINED_PARTITIONS: i32 = 2;
/// How often each partition is cut, and how far below its high watermark.
const DELETE_EVERY: Duration = Duration::from_secs(4);
const DELETE_BELOW_END: i64 = 50;
/// How often the reader reads the whole topic.
const READ_EVERY: Duration = Duration::from_secs(5);

/// One read of every partition from its log start to the high watermark it had when the read
/// began, with when it began and ended (run time).
#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
    pub(crate) records: Vec<Vec<(i64, String)>>,
}

pub(crate) type Reads = Arc<Mutex<Vec<Read>>>;

/// The producer of the topic: `produce::run` with values `kept-0-SEQ`.
pub(crate) fn producer_spec(per_second: u32) -> ProduceSpec {
    ProduceSpec { topic: RETAINED_TOPIC, partitions: RETAINED_PARTITIONS, prefix: "kept", id: 0, per_second }
}

pub(crate) async fn run_producer(
    bootstrap: String,
    per_second: u32,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    produce::run(bootstrap, producer_spec(per_second), stop, history).await
}

/// Cuts each partition to [`DELETE_BELOW_END`] below its high watermark every
/// [`DELETE_EVERY`] until `stop`; each request is in the history before it is sent, each
/// answer after.
pub(crate) async fn run_deleter(bootstrap: String, stop: Stop, history: Arc<History>) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client(&bootstrap).create().context("retained admin")?;
    let watermarks: BaseConsumer = client(&bootstrap).create().context("retained watermarks")?;
    let watermarks = Arc::new(watermarks);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    while !stop.is_set() {
        tokio::time::sleep(DELETE_EVERY).await;
        for partition in 0..RETAINED_PARTITIONS {
            let consumer = watermarks.clone();
            let ends = tokio::task::spawn_blocking(move || {
                consumer.fetch_watermarks(RETAINED_TOPIC, partition, Duration::from_secs(10))
            })
            .await?;
            let Ok((_, high)) = ends else { continue };
            let before = high - DELETE_BELOW_END;
            if before <= 0 {
                continue;
            }
            let mut offsets = TopicPartitionList::new();
            offsets.add_partition_offset(RETAINED_TOPIC, partition, Offset::Offset(before))?;
            history.push(Event::DeleteRecordsSent { topic: RETAINED_TOPIC.into(), partition, before });
            let done = match admin.delete_records(&offsets, &options).await {
                Ok(list) => list.elements().first().is_some_and(|e| e.error().is_ok()),
                Err(_) => false,
            };
            if done {
                history.push(Event::RecordsDeleted { topic: RETAINED_TOPIC.into(), partition, before });
            }
        }
    }
    Ok(())
}

/// Reads the whole topic from its log start until `stop`, every [`READ_EVERY`], and once more
/// after it; a read that fails under faults is noted and tried again.
pub(crate) fn run_reader(bootstrap: String, stop: Stop, history: Arc<History>, reads: Reads) -> anyhow::Result<()> {
    while !stop.is_set() {
        match read(&bootstrap, &history) {
            Ok(r) => reads.lock().unwrap_or_else(|p| p.into_inner()).push(r),
            Err(e) => history.note(format!("reading {RETAINED_TOPIC}: {e:#}")),
        }
        stop.wait(READ_EVERY);
    }
    Ok(())
}

/// One read of the whole topic from its log start.
pub(crate) fn read(bootstrap: &str, history: &History) -> anyhow::Result<Read> {
    let started_ms = history.now_ms();
    let mut records = vec![Vec::new(); RETAINED_PARTITIONS as usize];
    crate::check::read_each(bootstrap, RETAINED_TOPIC, RETAINED_PARTITIONS, false, |m| {
        use rdkafka::Message;
        if let Some(partition) = records.get_mut(m.partition() as usize) {
            partition.push((m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()));
        }
    })?;
    Ok(Read { started_ms, ended_ms: history.now_ms(), records })
}
