//! The JSON report a run writes, and reads back for `compare`. Field names are part of the
//! interface scripts rely on; `format` changes when they do.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Written into every report; `compare` refuses files without it.
pub(crate) const REPORT_FORMAT: &str = "floe-loadtest-report/1";
/// Largest report `compare` reads.
const REPORT_BYTES_MAX: u64 = 64 * 1024 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Report {
    pub format: String,
    pub started_unix_ms: u64,
    pub machine: Machine,
    /// The run's settings, as given on the command line (defaults filled in).
    pub config: serde_json::Value,
    pub warmup_seconds: f64,
    /// From the end of the warm-up to the end of the run: the rates divide by this.
    pub measured_seconds: f64,
    pub produce: Option<ProduceSummary>,
    pub consume: Option<ConsumeSummary>,
    /// Failed deliveries and consumer errors, by kind.
    pub errors: BTreeMap<String, u64>,
    /// One sample per second from the start, warm-up included (and marked).
    pub timeline: Vec<Sample>,
    /// Object-store requests and agent CPU per GiB, when the target exposes Floe's metrics.
    pub cost: Option<Cost>,
    pub generator: Generator,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Machine {
    pub cores: usize,
    pub hostname: String,
}

/// What one side moved. In the JSON these fields sit directly in `produce` and `consume`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Throughput {
    /// Records after the warm-up (acknowledged, or received).
    pub records: u64,
    /// Key and value bytes of those records.
    pub bytes: u64,
    pub records_per_second: f64,
    pub mb_per_second: f64,
    /// Every record, warm-up included: for producers, what the topic gained.
    pub records_total: u64,
    pub bytes_total: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProduceSummary {
    #[serde(flatten)]
    pub throughput: Throughput,
    /// From send to delivery report.
    pub latency_ms: Percentiles,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ConsumeSummary {
    #[serde(flatten)]
    pub throughput: Throughput,
    /// Consume-only runs from the log start: whether every partition was read to the end
    /// offset it had when the run began.
    pub caught_up: Option<bool>,
    /// From the producer's send (a timestamp in the payload) to the consumer's receipt; only
    /// when this run produced what it consumed.
    pub end_to_end_latency_ms: Option<Percentiles>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    /// From a histogram of microseconds.
    pub(crate) fn from_micros(h: &Histogram<u64>) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        Self {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// One second of the run.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Sample {
    /// Seconds since the start, at the end of this second.
    pub t: f64,
    pub warmup: bool,
    pub produced_records: u64,
    pub produce_mb_per_second: f64,
    pub consumed_records: u64,
    pub consume_mb_per_second: f64,
    pub produce_p50_ms: Option<f64>,
    pub produce_p99_ms: Option<f64>,
    pub end_to_end_p50_ms: Option<f64>,
    pub end_to_end_p99_ms: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Cost {
    pub metrics_urls: Vec<String>,
    /// Bytes this run produced and consumed (warm-up included, as the counters are).
    pub gib_produced: f64,
    pub gib_consumed: f64,
    /// Counter increases over the whole run, summed over the agents scraped.
    pub object_store_put_requests: f64,
    pub object_store_put_bytes: f64,
    pub object_store_get_requests: f64,
    pub object_store_get_bytes: f64,
    pub object_store_other_requests: f64,
    pub puts_per_gib_produced: Option<f64>,
    pub put_bytes_per_byte_produced: Option<f64>,
    pub gets_per_gib_consumed: Option<f64>,
    pub get_bytes_per_byte_consumed: Option<f64>,
    /// CPU of the scraped processes (a `floe dev` process holds the metadata node too).
    pub agent_cpu_seconds: Option<f64>,
    /// Per GiB moved: produced plus consumed.
    pub agent_cpu_seconds_per_gib: Option<f64>,
    /// At the prices below (list prices of a large cloud's standard object storage and a vCPU;
    /// override with --price-*), per GiB moved. Storage at rest is not included.
    pub usd_per_gib: Option<f64>,
    pub prices: Prices,
    /// What table topics' conversion cost over the run, when the table job converted any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tables: Option<TableCost>,
}

/// The table job's share: its object requests (table files only; the topic reads it makes go
/// through the block cache and count above) and time, per GiB of records converted.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TableCost {
    /// Record bytes (as stored) the job read and converted.
    pub gib_converted: f64,
    pub put_requests: f64,
    pub get_requests: f64,
    pub puts_per_gib_converted: f64,
    pub gets_per_gib_converted: f64,
    /// Table file bytes written per record byte converted.
    pub bytes_written_per_byte_converted: f64,
    /// Wall seconds of the job's commits per GiB: an upper bound of its CPU (one task does
    /// the reading, encoding and writing; its waits on the object store are included).
    pub job_seconds_per_gib_converted: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Prices {
    pub usd_per_1000_puts: f64,
    pub usd_per_1000_gets: f64,
    pub usd_per_vcpu_hour: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Generator {
    /// CPU the load generator itself used (all its threads, librdkafka's included).
    pub cpu_seconds: Option<f64>,
    pub cpu_seconds_per_gib: Option<f64>,
}

impl Report {
    pub(crate) fn read(path: &Path) -> anyhow::Result<Self> {
        let size = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?.len();
        if size > REPORT_BYTES_MAX {
            bail!("{}: {size} bytes is larger than any report ({REPORT_BYTES_MAX})", path.display());
        }
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(REPORT_FORMAT) => {}
            Some(other) => bail!("{}: report format {other:?}, this tool reads {REPORT_FORMAT:?}", path.display()),
            None => bail!("{} is not a floe-loadtest report (no \"format\" field)", path.display()),
        }
        serde_json::from_value(value).with_context(|| format!("{}: malformed report", path.display()))
    }

    pub(crate) fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
    }
}
