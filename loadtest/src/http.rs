//! HTTP produce workload against Floe's REST v3 endpoint: C concurrent clients each send
//! requests back to back (one record each, a bulk NDJSON body, or several records in one
//! request), and the run reports records/s, request latency and the agent's CPU per record
//! (from its `/metrics`), so the figure can be read per core.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::cost::{MetricsSnapshot, own_cpu_seconds};

const CONCURRENCY_MAX: usize = 1024;
const RECORDS_PER_REQUEST_MAX: usize = 100_000;
const RECORD_BYTES_MAX: usize = 1024 * 1024;
const DURATION_MAX: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Mode {
    /// One record per request to `/records`.
    Single,
    /// `--records-per-request` records as NDJSON to `/records:bulk`.
    Bulk,
    /// `--records-per-request` records as concatenated JSON to `/records` (one delivery
    /// report per record).
    Multi,
}

#[derive(Debug, clap::Args)]
pub(crate) struct HttpArgs {
    /// The agent's HTTP address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    url: String,
    /// Topic (created with --partitions if absent).
    #[arg(long, default_value = "loadtest-http")]
    topic: String,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    #[arg(long, value_enum, default_value = "bulk")]
    mode: Mode,
    /// Records per request in bulk and multi modes.
    #[arg(long, default_value_t = 1000)]
    records_per_request: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Bytes of each record value (text, sent as a STRING).
    #[arg(long, default_value_t = 100)]
    record_bytes: usize,
    /// Distinct keys (murmur2-partitioned); 0 sends keyless records.
    #[arg(long, default_value_t = 1000)]
    keys: u64,
    /// Seconds to run after the warm-up.
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Seconds of warm-up excluded from the results.
    #[arg(long, default_value_t = 2)]
    warmup_secs: u64,
    /// Write the summary as JSON here too.
    #[arg(long)]
    output: Option<std::path::PathBuf>,
}

/// Counts shared by the clients; only requests that finish after the warm-up count.
#[derive(Debug, Default)]
struct Tally {
    records: AtomicU64,
    requests: AtomicU64,
    errors: AtomicU64,
}

pub(crate) fn run(args: HttpArgs) -> anyhow::Result<()> {
    if args.concurrency == 0 || args.concurrency > CONCURRENCY_MAX {
        bail!("--concurrency must be in 1..={CONCURRENCY_MAX}");
    }
    if args.records_per_request == 0 || args.records_per_request > RECORDS_PER_REQUEST_MAX {
        bail!("--records-per-request must be in 1..={RECORDS_PER_REQUEST_MAX}");
    }
    if args.record_bytes > RECORD_BYTES_MAX {
        bail!("--record-bytes must be at most {RECORD_BYTES_MAX}");
    }
    let duration = Duration::from_secs(args.duration_secs);
    if duration.is_zero() || duration > DURATION_MAX {
        bail!("--duration-secs must be in 1..={}", DURATION_MAX.as_secs());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(drive(args, duration))
}

async fn drive(args: HttpArgs, duration: Duration) -> anyhow::Result<()> {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(60)).build()?;
    let base = args.url.trim_end_matches('/').to_owned();
    let clusters: serde_json::Value =
        serde_json::from_slice(&client.get(format!("{base}/v3/clusters")).send().await?.bytes().await?)
            .context("GET /v3/clusters")?;
    let cluster_id = clusters["data"][0]["cluster_id"].as_str().context("no cluster id")?.to_owned();
    let topics = format!("{base}/v3/clusters/{cluster_id}/topics");
    let created = client
        .post(&topics)
        .header("content-type", "application/json")
        .body(json!({ "topic_name": args.topic, "partitions_count": args.partitions }).to_string())
        .send()
        .await?;
    if !(created.status().is_success() || created.status() == reqwest::StatusCode::CONFLICT) {
        bail!("creating {}: {}", args.topic, created.text().await.unwrap_or_default());
    }
    let (path, content_type, per_request) = match args.mode {
        Mode::Single => ("records", "application/json", 1),
        Mode::Bulk => ("records:bulk", "application/x-ndjson", args.records_per_request),
        Mode::Multi => ("records", "application/json", args.records_per_request),
    };
    let url = format!("{topics}/{}/{path}", args.topic);
    let value = "x".repeat(args.record_bytes);
    let body = move |seed: u64| -> Vec<u8> {
        let mut out = Vec::with_capacity(per_request * (args.record_bytes + 80));
        for i in 0..per_request as u64 {
            let record = if args.keys == 0 {
                json!({ "value": { "type": "STRING", "data": value } })
            } else {
                let key = format!("key-{}", (seed.wrapping_mul(7919) + i) % args.keys);
                json!({ "key": { "type": "STRING", "data": key }, "value": { "type": "STRING", "data": value } })
            };
            out.extend_from_slice(record.to_string().as_bytes());
            out.push(b'\n');
        }
        out
    };

    let metrics_url = vec![format!("{base}/metrics")];
    let tally = Arc::new(Tally::default());
    let start = Instant::now();
    let warmup_end = start + Duration::from_secs(args.warmup_secs);
    let end = warmup_end + duration;
    let mut clients = Vec::new();
    for c in 0..args.concurrency {
        let (client, url, tally, body) = (client.clone(), url.clone(), tally.clone(), body.clone());
        clients.push(tokio::spawn(async move {
            let mut latency = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("valid bounds");
            let mut seed = c as u64 * 1_000_003;
            while Instant::now() < end {
                seed += 1;
                let sent = Instant::now();
                let response = client.post(&url).header("content-type", content_type).body(body(seed)).send().await;
                let ok = match response {
                    Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                    _ => false,
                };
                if sent >= warmup_end {
                    let _ = latency.record(sent.elapsed().as_micros() as u64);
                    if ok {
                        tally.records.fetch_add(per_request as u64, Ordering::Relaxed);
                        tally.requests.fetch_add(1, Ordering::Relaxed);
                    } else {
                        tally.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            latency
        }));
    }
    tokio::time::sleep_until(warmup_end.into()).await;
    let before = tokio::task::spawn_blocking({
        let urls = metrics_url.clone();
        move || MetricsSnapshot::scrape(&urls)
    })
    .await??;
    let own_before = own_cpu_seconds();
    let mut last = 0;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = tally.records.load(Ordering::Relaxed);
        eprintln!(
            "[{:>4.0}s] {:>9} records/s, {} errors",
            warmup_end.elapsed().as_secs_f64(),
            now - last,
            tally.errors.load(Ordering::Relaxed)
        );
        last = now;
    }
    let after = tokio::task::spawn_blocking(move || MetricsSnapshot::scrape(&metrics_url)).await??;
    let own_cpu = own_cpu_seconds().zip(own_before).map(|(a, b)| a - b);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    for c in clients {
        latency.add(c.await?)?;
    }
    let seconds = duration.as_secs_f64();
    let records = tally.records.load(Ordering::Relaxed) as f64;
    let agent_cpu =
        before.zip(after).map(|(b, a)| a.total("process_cpu_seconds_total") - b.total("process_cpu_seconds_total"));
    let ms = |q: f64| latency.value_at_quantile(q) as f64 / 1000.0;
    let summary = json!({
        "format": "floe-loadtest-http/1",
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "records_per_request": per_request,
        "concurrency": args.concurrency,
        "record_bytes": args.record_bytes,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "seconds": seconds,
        "records_per_sec": records / seconds,
        "requests_per_sec": tally.requests.load(Ordering::Relaxed) as f64 / seconds,
        "errors": tally.errors.load(Ordering::Relaxed),
        "latency_ms": { "p50": ms(0.5), "p90": ms(0.9), "p99": ms(0.99), "max": latency.max() as f64 / 1000.0 },
        "agent_cpu_seconds": agent_cpu,
        "records_per_agent_cpu_second": agent_cpu.filter(|c| *c > 0.0).map(|c| records / c),
        "generator_cpu_seconds": own_cpu,
    });
    let text = serde_json::to_string_pretty(&summary)?;
    println!("{text}");
    if let Some(path) = &args.output {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
