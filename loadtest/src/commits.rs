//! Metadata commit workload: many concurrent proposers sending one-chunk segment commits, as
//! agents do after each flush, through the same client agents use (proposals go to any node, and
//! return once the local mirror has applied them). Reports commits/s, latency percentiles, and
//! the longest gap between two successful commits (the failover time when a leader is killed
//! during the run).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use floe_metadata::{BatchSummary, ChunkCommit, Command, Metadata, Outcome, RemoteMetadata, SegmentCommit};
use hdrhistogram::Histogram;

#[derive(Debug, clap::Args)]
pub(crate) struct CommitsArgs {
    /// Metadata nodes: HOST:PORT[,HOST:PORT...].
    #[arg(long, value_delimiter = ',', required = true)]
    metadata: Vec<String>,
    /// Concurrent proposers (agents commit in flush order, so think of one per agent).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Partitions of the benchmark topic; each commit names one.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
    /// Mutual TLS to the metadata port (an agent's certificate, its key, the cluster CA), as
    /// `floe agent --metadata-tls-cert/-key/-ca`.
    #[arg(long, num_args = 3, value_names = ["CERT", "KEY", "CA"])]
    metadata_tls: Option<Vec<std::path::PathBuf>>,
}

#[derive(Debug, Default)]
struct Tally {
    ok: AtomicU64,
    errors: AtomicU64,
    last_ok: Mutex<Option<Instant>>,
    longest_gap: Mutex<Duration>,
}

pub(crate) fn run(args: CommitsArgs) -> anyhow::Result<()> {
    if !(1..=4096).contains(&args.concurrency) || !(1..=3600).contains(&args.duration_secs) {
        bail!("--concurrency must be 1..=4096 and --duration-secs 1..=3600");
    }
    if let Some([cert, key, ca]) = args.metadata_tls.as_deref() {
        let files = floe_metadata::tls::TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() };
        floe_metadata::tls::install(floe_metadata::tls::MetadataTls::load(&files)?)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let remote = RemoteMetadata::connect(args.metadata.clone()).await.map_err(|e| anyhow!("connect: {e}"))?;
        let metadata = Metadata::Remote(remote);
        let name = format!("bench-commits-{}", uuid::Uuid::new_v4().simple());
        let topic_id = uuid::Uuid::new_v4();
        let create =
            Command::CreateTopic { name, topic_id, partition_count: args.partitions, configs: Default::default() };
        match metadata.propose(create).await {
            Ok(Outcome::TopicCreated { .. }) => {}
            other => bail!("creating the benchmark topic: {other:?}"),
        }
        let tally = Arc::new(Tally::default());
        let histogram = Arc::new(Mutex::new(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?));
        let end = Instant::now() + Duration::from_secs(args.duration_secs);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for worker in 0..args.concurrency {
            let (metadata, tally, histogram) = (metadata.clone(), tally.clone(), histogram.clone());
            let partitions = args.partitions;
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < end {
                    let commit = SegmentCommit {
                        key: format!("segments/bench-{}.seg", uuid::Uuid::now_v7().simple()),
                        object_bytes: 1024,
                        chunks: vec![ChunkCommit {
                            topic_id,
                            partition: ((worker as u64 + n) % partitions as u64) as i32,
                            byte_start: 0,
                            byte_len: 1000,
                            crc32c: 0,
                            batches: vec![BatchSummary { offset_count: 10, timestamp_max: 0, base_sequence: -1 }],
                            producer: None,
                            uncompressed_bytes: 1000,
                        }],
                    };
                    n += 1;
                    let sent = Instant::now();
                    match metadata.propose(Command::CommitSegment(commit)).await {
                        Ok(_) => {
                            let now = Instant::now();
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut h) = histogram.lock() {
                                let _ = h.record(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX).max(1));
                            }
                            if let (Ok(mut last), Ok(mut gap)) = (tally.last_ok.lock(), tally.longest_gap.lock()) {
                                if let Some(previous) = *last {
                                    *gap = (*gap).max(now.saturating_duration_since(previous));
                                }
                                *last = Some(now);
                            }
                        }
                        Err(_) => {
                            tally.errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        }
        let mut last = 0;
        while Instant::now() < end {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let ok = tally.ok.load(Ordering::Relaxed);
            eprintln!("[{:>3.0}s] {} commits/s", started.elapsed().as_secs_f64(), ok - last);
            last = ok;
        }
        for task in tasks {
            let _ = task.await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let h = histogram.lock().map_err(|_| anyhow!("poisoned"))?;
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
        let gap = tally.longest_gap.lock().map_err(|_| anyhow!("poisoned"))?.as_secs_f64() * 1000.0;
        let ok = tally.ok.load(Ordering::Relaxed);
        let report = serde_json::json!({
            "workload": "commits",
            "metadata": args.metadata,
            "concurrency": args.concurrency,
            "seconds": seconds,
            "commits": ok,
            "errors": tally.errors.load(Ordering::Relaxed),
            "commits_per_second": ok as f64 / seconds,
            "latency_ms": { "p50": ms(0.5), "p99": ms(0.99), "max": h.max() as f64 / 1000.0 },
            "longest_gap_ms": gap,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        Ok(())
    })
}
