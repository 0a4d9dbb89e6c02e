//! One consumer: a librdkafka instance in the run's consumer group on its own thread. It reads
//! until told to stop, counting records and, for records this run produced, end-to-end latency.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

use super::stats::Stats;
use super::{Isolation, RunArgs};

/// Longest the consumers keep reading after the producers finish, for records still on the way.
pub(super) const DRAIN_MAX: Duration = Duration::from_secs(15);
/// How often a consumer looks at its assignment and positions.
const CHECK_EVERY: Duration = Duration::from_millis(250);

/// What the consumers share: the partitions to read and, for a catch-up read, where each ends.
pub(super) struct Plan {
    group: String,
    topics: Vec<String>,
    pub(super) partitions_total: usize,
    /// Partitions assigned to some consumer of this run (summed over consumers).
    pub(super) assigned: AtomicUsize,
    /// Catch-up reads: each partition's end offset when the run began, and whether it has been
    /// read up to it.
    ends: Mutex<HashMap<(String, i32), (i64, bool)>>,
    catch_up: bool,
    /// Consume-only runs with --records: stop after this many.
    records: Option<u64>,
}

impl Plan {
    pub(super) fn new(args: &RunArgs, partitions: &[(String, i32)]) -> anyhow::Result<Self> {
        let catch_up = args.producers == 0 && args.from_start && args.consumers > 0;
        let mut ends = HashMap::new();
        if catch_up {
            let client: BaseConsumer =
                super::client_config(&args.bootstrap, &args.client_config).create().context("watermark client")?;
            for (topic, count) in partitions {
                for p in 0..*count {
                    let (low, high) = client
                        .fetch_watermarks(topic, p, Duration::from_secs(30))
                        .with_context(|| format!("end offset of {topic}/{p}"))?;
                    ends.insert((topic.clone(), p), (high, high <= low));
                }
            }
        }
        Ok(Self {
            group: args.group.clone().unwrap_or_else(|| format!("floe-loadtest-{}", uuid::Uuid::new_v4())),
            topics: partitions.iter().map(|(t, _)| t.clone()).collect(),
            partitions_total: partitions.iter().map(|(_, p)| *p as usize).sum(),
            assigned: AtomicUsize::new(0),
            ends: Mutex::new(ends),
            catch_up,
            records: args.records.filter(|_| args.producers == 0),
        })
    }

    /// A catch-up read has reached every partition's end, or the `--records` budget is read.
    pub(super) fn finished(&self, stats: &Stats) -> bool {
        if let Some(limit) = self.records
            && stats.consumed.records_total.load(Ordering::Relaxed) >= limit
        {
            return true;
        }
        self.catch_up && self.caught_up()
    }

    pub(super) fn caught_up(&self) -> bool {
        self.ends.lock().is_ok_and(|ends| ends.values().all(|(_, done)| *done))
    }

    /// Marks `topic`/`partition` read when `position` reached its end offset (catch-up reads).
    pub(super) fn reached_at(&self, topic: &str, partition: i32, position: i64) {
        if !self.catch_up {
            return;
        }
        let Ok(mut ends) = self.ends.lock() else { return };
        if let Some((end, done)) = ends.get_mut(&(topic.to_owned(), partition))
            && position >= *end
        {
            *done = true;
        }
    }

    /// Marks partitions whose read position reached their end offset.
    fn reached(&self, positions: &TopicPartitionList) {
        let Ok(mut ends) = self.ends.lock() else { return };
        for element in positions.elements() {
            if let (Offset::Offset(position), Some((end, done))) =
                (element.offset(), ends.get_mut(&(element.topic().to_owned(), element.partition())))
                && position >= *end
            {
                *done = true;
            }
        }
    }
}

pub(super) fn run(args: &RunArgs, index: usize, stats: &Stats, plan: &Plan) -> anyhow::Result<()> {
    let result = consume_until_stopped(args, stats, plan);
    if let Err(e) = &result {
        stats.error(format!("consumer {index}: {e:#}"));
    }
    result
}

fn consume_until_stopped(args: &RunArgs, stats: &Stats, plan: &Plan) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.bootstrap)
        .set("group.id", &plan.group)
        .set("enable.auto.commit", "true")
        .set("auto.offset.reset", if args.from_start { "earliest" } else { "latest" })
        .set(
            "isolation.level",
            match args.isolation {
                Isolation::ReadCommitted => "read_committed",
                Isolation::ReadUncommitted => "read_uncommitted",
            },
        )
        // Fetch sizes stay librdkafka's defaults (1 MiB per partition): with 10 MiB the client
        // spent half its time faulting in each response's fresh buffer and catch-up reads of
        // the hot tier measured half as fast (docs/BENCHMARKS.md).
        .set("enable.partition.eof", "true");
    for (key, value) in args.client_config.iter().chain(&args.consumer_config) {
        config.set(key, value);
    }
    let consumer: BaseConsumer = config.create().context("creating a consumer")?;
    let topics: Vec<&str> = plan.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).context("subscribing")?;
    let at = if args.schema_id.is_some() { super::producer::SCHEMA_FRAMING_BYTES } else { 0 };
    let carries_send_time = args.producers > 0 && args.record_bytes >= at + 8;
    let mut assigned = 0usize;
    let mut next_check = std::time::Instant::now();
    let mut eof_since_check = false;
    while !stats.stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(50)) {
            Some(Ok(message)) => {
                let payload = message.payload().unwrap_or_default();
                let bytes = (payload.len() + message.key().map_or(0, <[u8]>::len)) as u64;
                let sent = carries_send_time
                    .then(|| payload.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_be_bytes))
                    .flatten();
                stats.received(bytes, sent);
            }
            Some(Err(KafkaError::PartitionEOF(_))) => eof_since_check = true,
            Some(Err(e)) => stats.error(format!("consume: {e}")),
            None => {}
        }
        let now = std::time::Instant::now();
        if now >= next_check {
            next_check = now + CHECK_EVERY;
            let assignment = consumer.assignment().context("assignment")?;
            let count = assignment.count();
            if count != assigned {
                // Keep the shared sum current through rebalances.
                plan.assigned.fetch_add(count, Ordering::Relaxed);
                plan.assigned.fetch_sub(assigned, Ordering::Relaxed);
                assigned = count;
            }
            if plan.catch_up && (eof_since_check || count > 0) {
                plan.reached(&consumer.position().context("positions")?);
                eof_since_check = false;
            }
        }
    }
    plan.assigned.fetch_sub(assigned, Ordering::Relaxed);
    Ok(())
}
