//! Produce workload: librdkafka producers sending fixed-size records round-robin over a topic's
//! partitions; latency is measured from `send` to the delivery report.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};

/// Largest record the generator will build.
const RECORD_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Longest run.
const DURATION_MAX: Duration = Duration::from_secs(3600);
/// Most producers one run starts.
const PRODUCERS_MAX: usize = 256;

#[derive(Debug, clap::Args)]
pub(crate) struct ProduceArgs {
    /// Kafka bootstrap address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Topic (created with --partitions if absent).
    #[arg(long, default_value = "loadtest")]
    topic: String,
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Bytes of each record value.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Seconds to run after the warm-up.
    #[arg(long, default_value_t = 20)]
    duration_secs: u64,
    /// Seconds of warm-up excluded from the results.
    #[arg(long, default_value_t = 3)]
    warmup_secs: u64,
    /// acks: 0, 1 or all.
    #[arg(long, default_value = "all")]
    acks: String,
    #[arg(long, default_value = "none")]
    compression: String,
    #[arg(long, default_value_t = 5)]
    linger_ms: u64,
    /// Records per second (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Idempotent producer (`enable.idempotence=true`): sequence-checked, deduplicated retries.
    #[arg(long)]
    idempotence: bool,
    /// Producers, each with its own connections (librdkafka instances), sharing `--rate`.
    #[arg(long, default_value_t = 1)]
    producers: usize,
    /// Largest produce request (librdkafka `message.max.bytes`). An idempotent producer keeps at
    /// most 5 requests in flight, so on a high-latency endpoint this bounds its throughput.
    #[arg(long, default_value_t = 1_000_000)]
    request_bytes: usize,
    /// Distinct record keys, cycled (each key always to the same partition), as a table's
    /// updates would be; 0 sends records without keys, round-robin over partitions.
    #[arg(long, default_value_t = 0)]
    keys: u64,
}

/// Delivery counts shared by every producer; the histogram holds produce latency in
/// microseconds.
struct Stats {
    /// Records sent before this (the warm-up) are not measured.
    measuring_since: Instant,
    latency_us: Mutex<Histogram<u64>>,
    acked: AtomicU64,
    errors: AtomicU64,
    /// Every acknowledged record, warm-up included: for the progress line.
    delivered: AtomicU64,
}

/// One producer's librdkafka context: counts its delivery reports into the shared [`Stats`].
struct Deliveries(Arc<Stats>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = Box<Instant>;

    fn delivery(&self, result: &DeliveryResult<'_>, sent: Box<Instant>) {
        let stats = &self.0;
        if result.is_ok() {
            stats.delivered.fetch_add(1, Ordering::Relaxed);
        }
        if *sent < stats.measuring_since {
            return;
        }
        match result {
            Ok(_) => {
                stats.acked.fetch_add(1, Ordering::Relaxed);
                let us = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                if let Ok(mut h) = stats.latency_us.lock() {
                    let _ = h.record(us.max(1));
                }
            }
            Err(_) => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Creates `topic` with `partitions` unless it exists.
pub(crate) fn ensure_topic(bootstrap: &str, topic: &str, partitions: i32) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().context("admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let topic = NewTopic::new(topic, partitions, TopicReplication::Fixed(-1));
    let results = runtime.block_on(admin.create_topics([&topic], &AdminOptions::new()))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating topic {name}: {code}"),
        }
    }
    Ok(())
}

pub(crate) fn run(args: ProduceArgs) -> anyhow::Result<()> {
    if args.record_bytes == 0 || args.record_bytes > RECORD_BYTES_MAX {
        bail!("--record-bytes must be in 1..={RECORD_BYTES_MAX}");
    }
    if args.partitions < 1 {
        bail!("--partitions must be at least 1");
    }
    if args.producers == 0 || args.producers > PRODUCERS_MAX {
        bail!("--producers must be in 1..={PRODUCERS_MAX}");
    }
    let duration = Duration::from_secs(args.duration_secs);
    if duration.is_zero() || duration > DURATION_MAX {
        bail!("--duration-secs must be in 1..={}", DURATION_MAX.as_secs());
    }
    ensure_topic(&args.bootstrap, &args.topic, args.partitions)?;
    let start = Instant::now();
    let warmup_end = start + Duration::from_secs(args.warmup_secs);
    let stats = Arc::new(Stats {
        measuring_since: warmup_end,
        latency_us: Mutex::new(Histogram::new_with_bounds(1, 600_000_000, 3)?),
        acked: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        delivered: AtomicU64::new(0),
    });
    let end = warmup_end + duration;
    let args = Arc::new(args);
    let producers: Vec<_> = (0..args.producers)
        .map(|i| {
            let (args, stats) = (args.clone(), stats.clone());
            std::thread::Builder::new()
                .name(format!("producer-{i}"))
                .spawn(move || produce_until(&args, i, stats, start, end))
        })
        .collect::<Result<_, _>>()?;
    // Progress, once a second, until the run ends.
    let mut last_acked = 0u64;
    let mut next_report = start + Duration::from_secs(1);
    while next_report < end {
        std::thread::sleep(next_report.saturating_duration_since(Instant::now()));
        let acked = stats.delivered.load(Ordering::Relaxed);
        let rate = acked - last_acked;
        let p99 = stats.latency_us.lock().map_or(0, |h| h.value_at_quantile(0.99));
        eprintln!(
            "[{:>4.0}s] {} acked/s  {:.1} MB/s  p99 so far {:.1} ms{}",
            start.elapsed().as_secs_f64(),
            rate,
            (rate * args.record_bytes as u64) as f64 / 1e6,
            p99 as f64 / 1000.0,
            if Instant::now() >= warmup_end { "" } else { "  (warm-up)" }
        );
        last_acked = acked;
        next_report += Duration::from_secs(1);
    }
    for producer in producers {
        producer.join().map_err(|_| anyhow::anyhow!("a producer thread panicked"))??;
    }
    let measured = duration.as_secs_f64();
    let acked = stats.acked.load(Ordering::Relaxed);
    let errors = stats.errors.load(Ordering::Relaxed);
    let h = stats.latency_us.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let report = serde_json::json!({
        "workload": "produce",
        "bootstrap": args.bootstrap,
        "topic": args.topic,
        "partitions": args.partitions,
        "producers": args.producers,
        "record_bytes": args.record_bytes,
        "acks": args.acks,
        "compression": args.compression,
        "idempotence": args.idempotence,
        "request_bytes": args.request_bytes,
        "measured_seconds": measured,
        "records_acked": acked,
        "errors": errors,
        "records_per_second": acked as f64 / measured,
        "mb_per_second": (acked * args.record_bytes as u64) as f64 / measured / 1e6,
        "latency_ms": { "p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "p999": ms(0.999), "max": h.max() as f64 / 1000.0 },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// One producer's loop: sends until `end` (at its share of `--rate`), then flushes.
fn produce_until(
    args: &ProduceArgs,
    index: usize,
    stats: Arc<Stats>,
    start: Instant,
    end: Instant,
) -> anyhow::Result<()> {
    let producer: BaseProducer<Deliveries> = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .set("acks", &args.acks)
        .set("compression.type", &args.compression)
        .set("linger.ms", args.linger_ms.to_string())
        .set("batch.size", "1000000")
        .set("queue.buffering.max.kbytes", "1048576")
        .set("queue.buffering.max.messages", "1000000")
        .set("enable.idempotence", args.idempotence.to_string())
        .set("message.max.bytes", args.request_bytes.to_string())
        .create_with_context(Deliveries(stats))
        .context("producer")?;
    let payload: Vec<u8> = (0..args.record_bytes).map(|i| (i * 31 % 251) as u8).collect();
    let rate = args.rate as f64 / args.producers as f64;
    // Producers start on different partitions so they do not move in lockstep.
    let mut sent = index as u64;
    let first = sent;
    while Instant::now() < end {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64((sent - first) as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                producer.poll(wait.min(Duration::from_millis(1)));
                continue;
            }
        }
        let (partition, key) = if args.keys > 0 {
            let key = sent % args.keys;
            ((key % args.partitions as u64) as i32, Some(format!("key-{key:012}")))
        } else {
            ((sent % args.partitions as u64) as i32, None)
        };
        let record =
            BaseRecord::with_opaque_to(&args.topic, Box::new(Instant::now())).payload(&payload).partition(partition);
        let record = match &key {
            Some(key) => record.key(key.as_str()),
            None => record,
        };
        match producer.send::<str, _>(record) {
            Ok(()) => sent += 1,
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                producer.poll(Duration::from_millis(1));
            }
            Err((e, _)) => bail!("send failed: {e}"),
        }
        if sent.is_multiple_of(64) {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).context("flushing")?;
    Ok(())
}
