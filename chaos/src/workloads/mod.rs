//! The workloads that run while faults are injected. Each records what it was told in the
//! history: an acknowledged offset, a failure, a transaction's outcome, a committed offset.

pub(crate) mod changelog;
pub(crate) mod groups;
pub(crate) mod hostile;
pub(crate) mod http;
pub(crate) mod produce;
pub(crate) mod registry;
pub(crate) mod retained;
pub(crate) mod table;
pub(crate) mod transactions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rdkafka::config::ClientConfig;

/// How the HTTP workloads retry a request through the next agent: each try's timeout, the
/// pause between tries, and how long until its outcome counts as unknown.
pub(crate) const HTTP_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);
pub(crate) const HTTP_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(250);
pub(crate) const HTTP_GIVE_UP_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// Set when the workloads should finish what they started and return.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Sleeps `wait` on this thread, or less once the stop is set.
    pub(crate) fn wait(&self, wait: std::time::Duration) {
        let from = std::time::Instant::now();
        while !self.is_set() && from.elapsed() < wait {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// Who the workloads act as on a cluster that requires authentication (`--hostile-tenant`).
#[derive(Clone, Debug)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) api_key: String,
}

static CREDENTIALS: std::sync::OnceLock<Credentials> = std::sync::OnceLock::new();

/// Makes every Kafka client and HTTP client made from now on authenticate as `credentials`.
pub(crate) fn act_as(credentials: Credentials) {
    let _ = CREDENTIALS.set(credentials);
}

/// The run's API key, if it has one (the Iceberg catalog takes it as a bearer token).
pub(crate) fn api_key() -> Option<String> {
    CREDENTIALS.get().map(|c| c.api_key.clone())
}

/// Wall time in ms since the Unix epoch: what record timestamps and the metadata leader's
/// retention are measured in (every process of a run reads the same clock).
pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// An HTTP client carrying the run's API key, if it has one.
pub(crate) fn http_client() -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder();
    if let Some(c) = CREDENTIALS.get() {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {}", c.api_key).parse()?);
        builder = builder.default_headers(headers);
    }
    Ok(builder.build()?)
}

/// Settings every client of the harness shares.
pub(crate) fn client(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    if let Some(c) = CREDENTIALS.get() {
        config
            .set("security.protocol", "SASL_PLAINTEXT")
            .set("sasl.mechanism", "SCRAM-SHA-256")
            .set("sasl.username", &c.user)
            .set("sasl.password", &c.password);
    }
    config
        .set("bootstrap.servers", bootstrap)
        // Faults come and go within seconds; find new coordinators and leaders quickly.
        .set("reconnect.backoff.max.ms", "1000")
        .set("retry.backoff.max.ms", "1000")
        .set("topic.metadata.refresh.interval.ms", "5000");
    config
}

/// A client context that keeps librdkafka's warnings (offset resets, a partition moved to
/// another broker) in the history as notes, where the checker's context shows them, and writes
/// every line, debug ones included, to a file: the transform's transaction calls have stalled
/// for minutes in long runs, and only the client's own account of its coordinator requests
/// shows where.
pub(crate) struct Traced {
    history: Arc<crate::history::History>,
    file: std::sync::Mutex<std::io::LineWriter<std::fs::File>>,
}

impl Traced {
    /// Librdkafka's debug contexts worth keeping for transactions and their group.
    pub(crate) const DEBUG: &'static str = "eos,cgrp,broker";

    pub(crate) fn create(history: Arc<crate::history::History>, path: &std::path::Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        Ok(Self { history, file: std::sync::Mutex::new(std::io::LineWriter::new(file)) })
    }
}

impl rdkafka::ClientContext for Traced {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel::{Alert, Critical, Emerg, Error, Warning};
        use std::io::Write;
        if matches!(level, Emerg | Alert | Critical | Error | Warning) {
            self.history.note(format!("librdkafka {fac}: {message}"));
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // A full disk loses trace lines, not the run.
        let _ = writeln!(file, "{} {fac} {message}", self.history.now_ms());
    }
}

impl rdkafka::consumer::ConsumerContext for Traced {}

impl rdkafka::producer::ProducerContext for Traced {
    type DeliveryOpaque = ();
    fn delivery(&self, _: &rdkafka::producer::DeliveryResult<'_>, _: Self::DeliveryOpaque) {}
}

/// Topics of a run and their partition counts.
pub(crate) const IDEMPOTENT_TOPIC: &str = "chaos-idempotent";
pub(crate) const IDEMPOTENT_PARTITIONS: i32 = 6;
pub(crate) const HTTP_TOPIC: &str = "chaos-http";
pub(crate) const HTTP_PARTITIONS: i32 = 3;
pub(crate) const TXN_INPUT_TOPIC: &str = "chaos-txn-input";
pub(crate) const TXN_OUTPUT_TOPIC: &str = "chaos-txn-output";
pub(crate) const TXN_PARTITIONS: i32 = 3;
/// Where recovery is probed: a record written and read through each agent.
pub(crate) const PROBE_TOPIC: &str = "chaos-probe";
/// The consume-transform-produce loop's group.
pub(crate) const TXN_GROUP: &str = "chaos-transform";
/// The group of plain consumers reading the idempotent topic.
pub(crate) const READER_GROUP: &str = "chaos-readers";
/// The group whose one consumer is closed and made anew every few seconds
/// ([`groups::restarting_member`]), reading the time-retention topic.
pub(crate) const RESTART_GROUP: &str = "chaos-restarts";
