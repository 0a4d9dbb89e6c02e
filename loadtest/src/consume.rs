//! Consume workload: one librdkafka consumer reads a topic's partitions from their log start to
//! the high watermarks seen at the start (a catch-up read) and reports bytes per second.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};

/// Longest run.
const TIMEOUT_MAX: Duration = Duration::from_secs(3600);

#[derive(Debug, clap::Args)]
pub(crate) struct ConsumeArgs {
    /// Kafka bootstrap address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    #[arg(long, default_value = "loadtest")]
    topic: String,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

pub(crate) fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(args.timeout_secs);
    if timeout.is_zero() || timeout > TIMEOUT_MAX {
        bail!("--timeout-secs must be in 1..={}", TIMEOUT_MAX.as_secs());
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .set("group.id", format!("floe-loadtest-{}", uuid::Uuid::new_v4()))
        .set("enable.auto.commit", "false")
        .set("fetch.max.bytes", "52428800")
        .set("max.partition.fetch.bytes", "10485760")
        .set("queued.max.messages.kbytes", "262144")
        .create()
        .context("consumer")?;
    let metadata = consumer.fetch_metadata(Some(&args.topic), Duration::from_secs(10)).context("metadata")?;
    let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len());
    if partitions == 0 {
        bail!("topic {} has no partitions", args.topic);
    }
    let mut ends = Vec::with_capacity(partitions);
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions as i32 {
        let (low, high) = consumer.fetch_watermarks(&args.topic, p, Duration::from_secs(10))?;
        ends.push(high);
        if high > low {
            assignment.add_partition_offset(&args.topic, p, Offset::Offset(low))?;
        }
    }
    consumer.assign(&assignment)?;
    let start = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    let mut done = vec![false; partitions];
    for (p, d) in done.iter_mut().enumerate() {
        *d = assignment.find_partition(&args.topic, p as i32).is_none();
    }
    let mut next_report = start + Duration::from_secs(1);
    let mut last_bytes = 0u64;
    while !done.iter().all(|d| *d) {
        if start.elapsed() > timeout {
            bail!("not caught up within {timeout:?}: {records} records read");
        }
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.context("fetch")?;
            records += 1;
            bytes += message.payload_len() as u64 + message.key().map_or(0, |k| k.len() as u64);
            let p = message.partition() as usize;
            if message.offset() + 1 >= ends[p] {
                done[p] = true;
            }
        }
        if Instant::now() >= next_report {
            eprintln!("[{:>4.0}s] {:.1} MB/s", start.elapsed().as_secs_f64(), (bytes - last_bytes) as f64 / 1e6);
            last_bytes = bytes;
            next_report += Duration::from_secs(1);
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    let report = serde_json::json!({
        "workload": "consume",
        "bootstrap": args.bootstrap,
        "topic": args.topic,
        "partitions": partitions,
        "records": records,
        "bytes": bytes,
        "seconds": seconds,
        "mb_per_second": bytes as f64 / seconds / 1e6,
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
