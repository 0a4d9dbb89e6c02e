//! The workload: producers and consumers on threads of their own (librdkafka instances), a
//! sampler that keeps a per-second timeline, and the report at the end.

mod consumer;
mod per_broker;
mod producer;
mod stats;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;

use crate::cost::{self, MetricsSnapshot};
use crate::report::{ConsumeSummary, Generator, Machine, Percentiles, ProduceSummary, REPORT_FORMAT, Report};
use stats::Stats;

/// Largest record the generator builds.
const RECORD_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Longest run, warm-up included.
const DURATION_MAX: Duration = Duration::from_secs(24 * 3600);
const PRODUCERS_MAX: usize = 256;
const CONSUMERS_MAX: usize = 256;
const TOPICS_MAX: usize = 1000;
const PARTITIONS_MAX: i32 = 10_000;
/// Most distinct keys (the Zipf table holds one f64 per key).
const KEYS_MAX: u64 = 10_000_000;
/// Longest wait for consumers to be assigned their partitions before producing starts.
const ASSIGNMENT_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KeyDistribution {
    /// Keys in turn: 0, 1, ..., N-1, 0, ...
    Sequential,
    /// Each key equally likely.
    Uniform,
    /// A few keys hot, most cold (Zipf, exponent 1).
    Zipf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Payload {
    Random,
    Text,
}

/// How producers build their requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ProducerKind {
    /// librdkafka: one Produce request per partition batch.
    Librdkafka,
    /// One Produce request per broker carrying every partition's open batch, as the Java
    /// client sends (plaintext, uncompressed, not idempotent).
    PerBroker,
}

/// How consumers fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ConsumerKind {
    /// librdkafka in the run's consumer group: every fetch names every partition.
    Librdkafka,
    /// Partitions assigned in turn (no group), one fetch per broker in an incremental fetch
    /// session, as the Java consumer's fetcher sends (plaintext, uncompressed).
    PerBroker,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Isolation {
    ReadCommitted,
    ReadUncommitted,
}

#[derive(Debug, Clone, clap::Args, serde::Serialize)]
pub(crate) struct RunArgs {
    /// Kafka bootstrap address(es): HOST:PORT[,HOST:PORT...].
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(crate) bootstrap: String,
    /// Topic name; with --topics N > 1, topics are NAME-0 ... NAME-(N-1). Created if absent.
    #[arg(long, default_value = "loadtest")]
    pub(crate) topic: String,
    /// Number of topics.
    #[arg(long, default_value_t = 1)]
    pub(crate) topics: usize,
    /// Partitions of each topic created by the run (existing topics keep theirs).
    #[arg(long, default_value_t = 8)]
    pub(crate) partitions: i32,
    /// How long to run after the warm-up: 10s, 2m, 1h.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub(crate) duration: Duration,
    /// Run from the start excluded from the results (producers and consumers are running).
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    #[serde(serialize_with = "as_seconds")]
    pub(crate) warmup: Duration,
    /// Stop after this many records are produced (warm-up included), or, for a consume-only
    /// run, consumed; --duration still caps the run.
    #[arg(long)]
    pub(crate) records: Option<u64>,
    /// Producer instances, each with its own connections and thread.
    #[arg(long, default_value_t = 1)]
    pub(crate) producers: usize,
    /// What producers are: librdkafka (a request per partition batch; with thousands of
    /// partitions a request per record), or per-broker (one request per broker with every
    /// partition's batch, the Java client's shape).
    #[arg(long, value_enum, default_value_t = ProducerKind::Librdkafka)]
    pub(crate) producer_kind: ProducerKind,
    /// Consumer instances, all in one consumer group, each with its own thread.
    #[arg(long, default_value_t = 1)]
    pub(crate) consumers: usize,
    /// What consumers are: librdkafka in a consumer group (every fetch names every partition),
    /// or per-broker (partitions assigned in turn, incremental fetch sessions, the Java
    /// consumer's shape).
    #[arg(long, value_enum, default_value_t = ConsumerKind::Librdkafka)]
    pub(crate) consumer_kind: ConsumerKind,
    /// Consumer group id (default: a new group per run).
    #[arg(long)]
    pub(crate) group: Option<String>,
    /// Consumers start at the log start (a catch-up read) instead of the end. Without
    /// producers, the run ends when every partition is read to the end it had at the start.
    #[arg(long)]
    pub(crate) from_start: bool,
    /// Consumers' isolation level.
    #[arg(long, value_enum, default_value_t = Isolation::ReadCommitted)]
    pub(crate) isolation: Isolation,
    /// Bytes of each record value; their first 8 bytes carry the send time for end-to-end
    /// latency.
    #[arg(long, default_value_t = 1024)]
    pub(crate) record_bytes: usize,
    /// Values start with the schema registry's framing (magic byte 0 and this schema id), the
    /// send time after it, so topics with schema id validation take them.
    #[arg(long)]
    pub(crate) schema_id: Option<i32>,
    /// What values hold: random bytes (incompressible) or text (words, compressing about as
    /// well as logs do).
    #[arg(long, value_enum, default_value_t = Payload::Random)]
    pub(crate) payload: Payload,
    /// Distinct record keys (0: records without keys, spread round-robin over partitions).
    /// Key k always goes to the same partition.
    #[arg(long, default_value_t = 0)]
    pub(crate) keys: u64,
    /// How keys are chosen.
    #[arg(long, value_enum, default_value_t = KeyDistribution::Sequential)]
    pub(crate) key_distribution: KeyDistribution,
    /// Records per second over all producers (0: as fast as the endpoint takes them).
    #[arg(long, default_value_t = 0)]
    pub(crate) rate: u64,
    /// acks: 0, 1 or all.
    #[arg(long, default_value = "all", value_parser = ["0", "1", "all", "-1"])]
    pub(crate) acks: String,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(long, default_value = "none", value_parser = ["none", "gzip", "snappy", "lz4", "zstd"])]
    pub(crate) compression: String,
    #[arg(long, default_value_t = 5)]
    pub(crate) linger_ms: u64,
    /// Largest batch per partition (librdkafka batch.size).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) batch_bytes: usize,
    /// Largest produce request (librdkafka message.max.bytes).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) request_bytes: usize,
    /// Idempotent producers (enable.idempotence=true).
    #[arg(long)]
    pub(crate) idempotence: bool,
    /// Transactional producers committing every N records (0: not transactional); implies
    /// --idempotence.
    #[arg(long, default_value_t = 0)]
    pub(crate) transaction_records: u64,
    /// librdkafka settings for every client of the run (admin, producers, consumers), such as
    /// `security.protocol=SASL_SSL`, `sasl.mechanism`, `sasl.username`, `ssl.ca.location`:
    /// KEY=VALUE, repeatable.
    #[arg(long = "client-config", value_parser = parse_setting)]
    pub(crate) client_config: Vec<(String, String)>,
    /// Extra librdkafka producer settings: KEY=VALUE, repeatable.
    #[arg(long = "producer-config", value_parser = parse_setting)]
    pub(crate) producer_config: Vec<(String, String)>,
    /// Extra librdkafka consumer settings: KEY=VALUE, repeatable.
    #[arg(long = "consumer-config", value_parser = parse_setting)]
    pub(crate) consumer_config: Vec<(String, String)>,
    /// Write the JSON report here (default: print it on stdout).
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Write an SVG plot of throughput and latency over time here (default: next to --output,
    /// with .svg).
    #[arg(long)]
    pub(crate) plot: Option<PathBuf>,
    /// Floe's Prometheus endpoint(s) for the cost view, one per agent: URL, repeatable
    /// (default: try http://BOOTSTRAP-HOST:8080/metrics and use it if it is Floe's).
    #[arg(long = "metrics")]
    pub(crate) metrics: Vec<String>,
    /// Price of 1000 PUT requests for the cost view, in USD.
    #[arg(long, default_value_t = 0.005)]
    pub(crate) price_per_1000_puts: f64,
    /// Price of 1000 GET requests, in USD.
    #[arg(long, default_value_t = 0.0004)]
    pub(crate) price_per_1000_gets: f64,
    /// Price of one vCPU for an hour, in USD.
    #[arg(long, default_value_t = 0.04)]
    pub(crate) price_per_vcpu_hour: f64,
    /// No progress line.
    #[arg(long)]
    pub(crate) quiet: bool,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    // A bare number is seconds, as in the flags this replaces.
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    humantime::parse_duration(text).map_err(|e| format!("{e} (examples: 500ms, 10s, 2m, 1h)"))
}

fn parse_setting(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

fn as_seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl RunArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if self.producers == 0 && self.consumers == 0 {
            bail!("nothing to run: --producers and --consumers are both 0");
        }
        if self.producers > PRODUCERS_MAX || self.consumers > CONSUMERS_MAX {
            bail!("--producers must be at most {PRODUCERS_MAX} and --consumers at most {CONSUMERS_MAX}");
        }
        if !(1..=TOPICS_MAX).contains(&self.topics) {
            bail!("--topics must be in 1..={TOPICS_MAX}");
        }
        if !(1..=PARTITIONS_MAX).contains(&self.partitions) {
            bail!("--partitions must be in 1..={PARTITIONS_MAX}");
        }
        if self.duration.is_zero() || self.duration + self.warmup > DURATION_MAX {
            bail!(
                "--duration must be positive and --duration plus --warmup at most {}h",
                DURATION_MAX.as_secs() / 3600
            );
        }
        if self.records == Some(0) {
            bail!("--records must be positive");
        }
        if self.record_bytes == 0 || self.record_bytes > RECORD_BYTES_MAX {
            bail!("--record-bytes must be in 1..={RECORD_BYTES_MAX}");
        }
        if self.keys > KEYS_MAX {
            bail!("--keys must be at most {KEYS_MAX}");
        }
        if self.transaction_records > 0 && self.acks != "all" && self.acks != "-1" {
            bail!("transactional producers need --acks all");
        }
        if self.producers == 0 && (self.rate > 0 || self.transaction_records > 0) {
            bail!("--rate and --transaction-records need producers");
        }
        per_broker::check(self)?;
        for price in [self.price_per_1000_puts, self.price_per_1000_gets, self.price_per_vcpu_hour] {
            if !(0.0..1e6).contains(&price) {
                bail!("prices must be in 0..1000000");
            }
        }
        Ok(())
    }

    pub(crate) fn topic_names(&self) -> Vec<String> {
        if self.topics == 1 {
            vec![self.topic.clone()]
        } else {
            (0..self.topics).map(|i| format!("{}-{i}", self.topic)).collect()
        }
    }
}

/// Creates each topic with `partitions` unless it exists.
/// A librdkafka configuration for `bootstrap` with `settings` applied.
pub(crate) fn client_config(bootstrap: &str, settings: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in settings {
        config.set(key, value);
    }
    config
}

pub(crate) fn ensure_topics(
    bootstrap: &str,
    settings: &[(String, String)],
    topics: &[String],
    partitions: i32,
) -> anyhow::Result<()> {
    let admin: AdminClient<DefaultClientContext> =
        client_config(bootstrap, settings).create().context("admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let new: Vec<_> = topics.iter().map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(-1))).collect();
    let results = runtime
        .block_on(admin.create_topics(&new, &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)))))
        .with_context(|| format!("creating topics on {bootstrap}"))?;
    for result in results {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating topic {name}: {code}"),
        }
    }
    Ok(())
}

pub(crate) fn run(args: RunArgs) -> anyhow::Result<()> {
    args.validate()?;
    let topics = args.topic_names();
    ensure_topics(&args.bootstrap, &args.client_config, &topics, args.partitions)?;
    let partitions = producer::partition_counts(&args.bootstrap, &args.client_config, &topics)?;
    let metrics_urls = cost::metrics_urls(&args.bootstrap, &args.metrics)?;
    let metrics_before = MetricsSnapshot::scrape(&metrics_urls)?;
    let generator_cpu_before = cost::own_cpu_seconds();

    let started_wall = SystemTime::now();
    let start = Instant::now();
    let stats = Arc::new(Stats::new(start, args.warmup, started_wall)?);
    let args = Arc::new(args);
    let partitions = Arc::new(partitions);

    // Consumers first: when they start at the end, producing waits until they hold every
    // partition, so the first measured records are not skipped.
    let consumer_plan = Arc::new(consumer::Plan::new(&args, &partitions)?);
    let consumers: Vec<_> = (0..args.consumers)
        .map(|i| {
            let (args, stats, plan, partitions) =
                (args.clone(), stats.clone(), consumer_plan.clone(), partitions.clone());
            std::thread::Builder::new().name(format!("consumer-{i}")).spawn(move || match args.consumer_kind {
                ConsumerKind::Librdkafka => consumer::run(&args, i, &stats, &plan),
                ConsumerKind::PerBroker => per_broker::consume(args, i, stats, plan, partitions),
            })
        })
        .collect::<Result<_, _>>()?;
    if args.consumers > 0 && args.producers > 0 && !args.from_start {
        let deadline = Instant::now() + ASSIGNMENT_WAIT;
        while consumer_plan.assigned.load(Ordering::Relaxed) < consumer_plan.partitions_total {
            if Instant::now() > deadline {
                stats.stop.store(true, Ordering::Relaxed);
                bail!("consumers were not assigned every partition within {ASSIGNMENT_WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    // The clock restarts once consumers are in place: warm-up and duration count from here.
    stats.restart();
    let end = stats.start() + args.warmup + args.duration;
    let producers: Vec<_> = (0..args.producers)
        .map(|i| {
            let (args, stats, partitions) = (args.clone(), stats.clone(), partitions.clone());
            std::thread::Builder::new().name(format!("producer-{i}")).spawn(move || match args.producer_kind {
                ProducerKind::Librdkafka => producer::run(&args, i, &stats, &partitions, end),
                ProducerKind::PerBroker => per_broker::produce(&args, i, &stats, &partitions, end),
            })
        })
        .collect::<Result<_, _>>()?;

    let progress = Progress::new(args.quiet);
    let mut producers_done = args.producers == 0;
    let mut drain_deadline: Option<Instant> = None;
    loop {
        let next = stats.next_sample_at();
        std::thread::sleep(next.saturating_duration_since(Instant::now()).min(Duration::from_millis(100)));
        if Instant::now() >= next {
            let sample = stats.sample();
            progress.show(&sample, args.producers > 0, args.consumers > 0);
        }
        if !producers_done && producers.iter().all(|p| p.is_finished()) {
            producers_done = true;
        }
        let now = Instant::now();
        if args.consumers == 0 {
            if producers_done {
                break;
            }
            continue;
        }
        if consumer_plan.finished(&stats) || now >= end + consumer::DRAIN_MAX {
            break;
        }
        if producers_done && args.producers > 0 {
            // Consumers keep reading what was produced, up to a drain limit.
            let deadline = *drain_deadline.get_or_insert(now + consumer::DRAIN_MAX);
            if stats.consumed_everything_produced() || now >= deadline {
                break;
            }
        } else if args.producers == 0 && now >= end {
            break;
        }
    }
    stats.stop.store(true, Ordering::Relaxed);
    progress.finish();
    for producer in producers {
        producer.join().map_err(|_| anyhow::anyhow!("a producer thread panicked"))??;
    }
    for consumer in consumers {
        consumer.join().map_err(|_| anyhow::anyhow!("a consumer thread panicked"))??;
    }

    let metrics_after = MetricsSnapshot::scrape(&metrics_urls)?;
    let generator_cpu = cost::own_cpu_seconds().zip(generator_cpu_before).map(|(after, before)| after - before);
    let cost = match (metrics_before, metrics_after) {
        (Some(before), Some(after)) => Some((metrics_urls, before, after)),
        _ => None,
    };
    let report = build_report(&args, &stats, &consumer_plan, started_wall, generator_cpu, cost)?;
    match &args.output {
        Some(path) => {
            report.write(path)?;
            eprintln!("report written to {}", path.display());
        }
        None => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    let plot = args.plot.clone().or_else(|| args.output.as_ref().map(|p| p.with_extension("svg")));
    if let Some(path) = plot {
        crate::plot::write(&path, &[("", &report)])?;
        eprintln!("plot written to {}", path.display());
    }
    Ok(())
}

fn build_report(
    args: &RunArgs,
    stats: &Stats,
    plan: &consumer::Plan,
    started_wall: SystemTime,
    generator_cpu: Option<f64>,
    scrapes: Option<(Vec<String>, MetricsSnapshot, MetricsSnapshot)>,
) -> anyhow::Result<Report> {
    let produce_seconds = stats.produce_measured_seconds();
    let consume_seconds = stats.consume_measured_seconds();
    let produce = (args.producers > 0).then(|| ProduceSummary {
        throughput: stats.produced.throughput(produce_seconds),
        latency_ms: Percentiles::from_micros(&stats.produced.latency_total()),
    });
    let consume = (args.consumers > 0).then(|| {
        let e2e = stats.consumed.latency_total();
        ConsumeSummary {
            throughput: stats.consumed.throughput(consume_seconds),
            caught_up: (args.producers == 0 && args.from_start).then(|| plan.caught_up()),
            end_to_end_latency_ms: (args.producers > 0 && !e2e.is_empty()).then(|| Percentiles::from_micros(&e2e)),
        }
    });
    let gib_produced = stats.produced.bytes_total.load(Ordering::Relaxed) as f64 / f64::from(1u32 << 30);
    let gib_consumed = stats.consumed.bytes_total.load(Ordering::Relaxed) as f64 / f64::from(1u32 << 30);
    let gib_moved = gib_produced + gib_consumed;
    let cost = scrapes.map(|(urls, before, after)| {
        crate::report::Cost::between(args, urls, &before, &after, gib_produced, gib_consumed)
    });
    Ok(Report {
        format: REPORT_FORMAT.to_owned(),
        started_unix_ms: started_wall.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        machine: Machine {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            hostname: std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_owned(),
        },
        config: serde_json::to_value(args)?,
        warmup_seconds: args.warmup.as_secs_f64(),
        measured_seconds: produce_seconds.max(consume_seconds),
        produce,
        consume,
        errors: stats.errors(),
        timeline: stats.timeline(),
        cost,
        generator: Generator {
            cpu_seconds: generator_cpu,
            cpu_seconds_per_gib: generator_cpu.filter(|_| gib_moved > 0.0).map(|cpu| cpu / gib_moved),
        },
    })
}

/// The live progress line: rewritten in place on a terminal, a line per second otherwise.
struct Progress {
    quiet: bool,
    terminal: bool,
}

impl Progress {
    fn new(quiet: bool) -> Self {
        Self { quiet, terminal: std::io::stderr().is_terminal() }
    }

    fn show(&self, s: &crate::report::Sample, producing: bool, consuming: bool) {
        if self.quiet {
            return;
        }
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        let mut line = format!("[{:>5.0}s]", s.t);
        if producing {
            line += &format!(
                " produce {:>9} rec/s {:>7.1} MB/s p99 {:>6} ms",
                s.produced_records,
                s.produce_mb_per_second,
                ms(s.produce_p99_ms)
            );
        }
        if consuming {
            line += &format!(" | consume {:>9} rec/s {:>7.1} MB/s", s.consumed_records, s.consume_mb_per_second);
            if producing {
                line += &format!(" e2e p99 {:>6} ms", ms(s.end_to_end_p99_ms));
            }
        }
        if s.warmup {
            line += "  (warm-up)";
        }
        if self.terminal {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if self.terminal && !self.quiet {
            eprintln!();
        }
    }
}
