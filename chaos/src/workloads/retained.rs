//! Topics whose log start moves while they are written and read. On `chaos-retained`
//! DeleteRecords cuts each partition every few seconds to a point below its high watermark. On
//! `chaos-retention-time` and `chaos-retention-size` the metadata leader's retention duty drops
//! whole index entries (flush chunks, or the runs compaction merged them into) once they are
//! older than `retention.ms` or the partition holds `retention.bytes` without them; the run sets
//! the cluster's `log.retention.check.interval.ms` so the duty looks every few seconds. An
//! idempotent producer writes each topic (stamped values on the retention topics, so their age is
//! in the history), and a reader reads every topic from its log start every few seconds. Every
//! read is kept for `check::retained`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use rdkafka::admin::{AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication};
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
/// How often the reader reads every topic.
const READ_EVERY: Duration = Duration::from_secs(5);

pub(crate) const RETENTION_TIME_TOPIC: &str = "chaos-retention-time";
pub(crate) const RETENTION_SIZE_TOPIC: &str = "chaos-retention-size";
pub(crate) const RETENTION_PARTITIONS: i32 = 2;
/// `retention.ms` of the time topic: a few seconds, so entries expire all through a 90 s run,
/// and every record is gone soon after the writers stop.
pub(crate) const RETENTION_MS: i64 = 6_000;
/// `retention.bytes` of the size topic: at a stamped record's ~100 stored bytes (one batch each
/// at these rates) about 40 records per partition, 3 s of writes, so size removes entries before
/// anything there is old.
pub(crate) const RETENTION_BYTES: i64 = 4_096;
/// The cluster's `log.retention.check.interval.ms` for the run (Kafka's default is 5 minutes,
/// longer than a CI run).
pub(crate) const RETENTION_CHECK_INTERVAL_MS: u64 = 2_000;
const _: () = assert!((RETENTION_CHECK_INTERVAL_MS as i64) < RETENTION_MS);

/// A topic whose log start moves, and what moves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogStartTopic {
    pub(crate) topic: &'static str,
    pub(crate) partitions: i32,
    /// Its `retention.ms` and `retention.bytes`, when set to remove records during a run.
    pub(crate) retention_ms: Option<i64>,
    pub(crate) retention_bytes: Option<i64>,
}

/// Every topic the reader reads. The DeleteRecords topic keeps Kafka's default retention (a
/// week): only its cuts move its log start.
pub(crate) const LOG_START_TOPICS: [LogStartTopic; 3] = [
    LogStartTopic { topic: RETAINED_TOPIC, partitions: RETAINED_PARTITIONS, retention_ms: None, retention_bytes: None },
    LogStartTopic {
        topic: RETENTION_TIME_TOPIC,
        partitions: RETENTION_PARTITIONS,
        retention_ms: Some(RETENTION_MS),
        retention_bytes: None,
    },
    LogStartTopic {
        topic: RETENTION_SIZE_TOPIC,
        partitions: RETENTION_PARTITIONS,
        retention_ms: None,
        retention_bytes: Some(RETENTION_BYTES),
    },
];

impl LogStartTopic {
    /// The topic's settings by name.
    pub(crate) fn named(topic: &str) -> Option<Self> {
        LOG_START_TOPICS.iter().find(|t| t.topic == topic).copied()
    }

    /// The configs it is created with: each retention limit said out loud, `-1` where unset, so a
    /// cluster-wide default cannot add the other one.
    fn configs(&self) -> Vec<(&'static str, String)> {
        if self.retention_ms.is_none() && self.retention_bytes.is_none() {
            return Vec::new();
        }
        vec![
            ("cleanup.policy", "delete".to_owned()),
            ("retention.ms", self.retention_ms.unwrap_or(-1).to_string()),
            ("retention.bytes", self.retention_bytes.unwrap_or(-1).to_string()),
        ]
    }
}

/// A topic to create: its name, partitions and configs.
pub(crate) type TopicToCreate = (&'static str, i32, Vec<(&'static str, String)>);

/// Topics to create for the retention workload, with their configs.
pub(crate) fn retention_topics() -> Vec<TopicToCreate> {
    LOG_START_TOPICS
        .iter()
        .filter(|t| t.retention_ms.is_some() || t.retention_bytes.is_some())
        .map(|t| (t.topic, t.partitions, t.configs()))
        .collect()
}

/// A [`NewTopic`] for one of [`retention_topics`], borrowing its configs.
pub(crate) fn new_topic<'a>(topic: &'a str, partitions: i32, configs: &'a [(&'static str, String)]) -> NewTopic<'a> {
    configs
        .iter()
        .fold(NewTopic::new(topic, partitions, TopicReplication::Fixed(-1)), |new, (name, value)| new.set(name, value))
}

/// Makes the metadata leader look for records past retention every
/// [`RETENTION_CHECK_INTERVAL_MS`]: `log.retention.check.interval.ms` is a cluster-wide dynamic
/// broker config there, read on every tick of the leader's duties. Any agent takes the cluster's
/// broker configs under its own id; agent 1 is asked. AlterConfigs replaces the whole set of
/// dynamic broker configs, and nothing else in a run sets one. A tenant may alter no broker
/// config, so the hostile-tenant mode cannot call this.
pub(crate) async fn set_retention_check_interval(bootstrap: &str) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> = client(bootstrap).create().context("retention admin")?;
    let interval = RETENTION_CHECK_INTERVAL_MS.to_string();
    let config = AlterConfig::new(ResourceSpecifier::Broker(1)).set("log.retention.check.interval.ms", &interval);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin.alter_configs([&config], &options).await? {
        if let Err((_, code)) = result {
            bail!("setting log.retention.check.interval.ms: {code}");
        }
    }
    Ok(())
}

/// One read of every partition of a topic from its log start to the high watermark it had when
/// the read began, with when it began and ended (run time, and wall time for the ages of stamped
/// records) and the high watermarks asked after it ended.
#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub(crate) topic: &'static str,
    pub(crate) started_ms: u64,
    pub(crate) ended_ms: u64,
    pub(crate) ended_unix_ms: i64,
    /// Per partition, at least what it held at any time during the read (high watermarks only
    /// grow on these topics): the bound the size rule counts records after an offset against.
    pub(crate) ends: Vec<i64>,
    pub(crate) records: Vec<Vec<(i64, String)>>,
}

pub(crate) type Reads = Arc<Mutex<Vec<Read>>>;

/// The producer of the DeleteRecords topic: `produce::run` with values `kept-0-SEQ`.
pub(crate) fn producer_spec(per_second: u32) -> ProduceSpec {
    ProduceSpec {
        topic: RETAINED_TOPIC,
        partitions: RETAINED_PARTITIONS,
        prefix: "kept",
        id: 0,
        per_second,
        stamped: false,
    }
}

pub(crate) async fn run_producer(
    bootstrap: String,
    per_second: u32,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    produce::run(bootstrap, producer_spec(per_second), stop, history).await
}

/// The producer of a retention topic: stamped values `aged-0-SEQ@MS`.
pub(crate) fn retention_producer_spec(topic: &'static str, per_second: u32) -> ProduceSpec {
    ProduceSpec { topic, partitions: RETENTION_PARTITIONS, prefix: "aged", id: 0, per_second, stamped: true }
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

/// Reads every topic of [`LOG_START_TOPICS`] from its log start until `stop`, every
/// [`READ_EVERY`]; a read that fails under faults is noted and tried again.
pub(crate) fn run_reader(bootstrap: String, stop: Stop, history: Arc<History>, reads: Reads) -> anyhow::Result<()> {
    while !stop.is_set() {
        for t in LOG_START_TOPICS {
            match read(&bootstrap, t, &history) {
                Ok(r) => reads.lock().unwrap_or_else(|p| p.into_inner()).push(r),
                Err(e) => history.note(format!("reading {}: {e:#}", t.topic)),
            }
        }
        stop.wait(READ_EVERY);
    }
    Ok(())
}

/// One read of a whole topic from its log start.
pub(crate) fn read(bootstrap: &str, t: LogStartTopic, history: &History) -> anyhow::Result<Read> {
    let started_ms = history.now_ms();
    let mut records = vec![Vec::new(); t.partitions as usize];
    crate::check::read_each(bootstrap, t.topic, t.partitions, false, |m| {
        use rdkafka::Message;
        if let Some(partition) = records.get_mut(m.partition() as usize) {
            partition.push((m.offset(), String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned()));
        }
    })?;
    let (ended_ms, ended_unix_ms) = (history.now_ms(), super::unix_ms());
    let ends = crate::check::end_offsets(bootstrap, t.topic, t.partitions, false)?;
    Ok(Read { topic: t.topic, started_ms, ended_ms, ended_unix_ms, ends, records })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_topics_state_both_limits() {
        let topics = retention_topics();
        assert_eq!(topics.len(), 2);
        let time = &topics.iter().find(|t| t.0 == RETENTION_TIME_TOPIC).expect("time topic").2;
        assert!(time.contains(&("retention.ms", RETENTION_MS.to_string())));
        assert!(time.contains(&("retention.bytes", "-1".to_owned())));
        let size = &topics.iter().find(|t| t.0 == RETENTION_SIZE_TOPIC).expect("size topic").2;
        assert!(size.contains(&("retention.bytes", RETENTION_BYTES.to_string())));
        assert!(size.contains(&("retention.ms", "-1".to_owned())));
    }
}
