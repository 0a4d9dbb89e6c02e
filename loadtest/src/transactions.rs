//! Transactions workload: one librdkafka transactional producer runs small transactions back to
//! back (begin, N records round-robin over the partitions, commit); the commit latency measured
//! runs from the commit call (flush, then `commit_transaction`) until every record is
//! acknowledged and the commit markers are written.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::run::ensure_topics;

/// Most records one transaction may hold.
const RECORDS_PER_TXN_MAX: usize = 100_000;
/// Largest record the generator will build.
const RECORD_BYTES_MAX: usize = 1024 * 1024;
/// Longest run.
const DURATION_MAX: Duration = Duration::from_secs(3600);
/// How long one commit may take before the run fails.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, clap::Args)]
pub(crate) struct TransactionsArgs {
    /// Kafka bootstrap address.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap: String,
    /// Topic (created with --partitions if absent).
    #[arg(long, default_value = "loadtest-txn")]
    topic: String,
    #[arg(long, default_value_t = 4)]
    partitions: i32,
    /// Records in each transaction (spread round-robin over the partitions).
    #[arg(long, default_value_t = 10)]
    records_per_txn: usize,
    /// Bytes of each record value.
    #[arg(long, default_value_t = 1024)]
    record_bytes: usize,
    /// Seconds to run after the warm-up.
    #[arg(long, default_value_t = 20)]
    duration_secs: u64,
    /// Seconds of warm-up excluded from the results.
    #[arg(long, default_value_t = 3)]
    warmup_secs: u64,
    /// The producer's `transactional.id` (a fresh one per run by default).
    #[arg(long)]
    transactional_id: Option<String>,
}

pub(crate) fn run(args: TransactionsArgs) -> anyhow::Result<()> {
    if args.records_per_txn == 0 || args.records_per_txn > RECORDS_PER_TXN_MAX {
        bail!("--records-per-txn must be in 1..={RECORDS_PER_TXN_MAX}");
    }
    if args.record_bytes == 0 || args.record_bytes > RECORD_BYTES_MAX {
        bail!("--record-bytes must be in 1..={RECORD_BYTES_MAX}");
    }
    if args.partitions < 1 {
        bail!("--partitions must be at least 1");
    }
    let duration = Duration::from_secs(args.duration_secs);
    if duration.is_zero() || duration > DURATION_MAX {
        bail!("--duration-secs must be in 1..={}", DURATION_MAX.as_secs());
    }
    ensure_topics(&args.bootstrap, &[], std::slice::from_ref(&args.topic), args.partitions)?;
    let transactional_id =
        args.transactional_id.clone().unwrap_or_else(|| format!("loadtest-{}", uuid::Uuid::new_v4()));
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &args.bootstrap)
        .set("transactional.id", &transactional_id)
        .set("linger.ms", "0")
        .create()
        .context("producer")?;
    producer.init_transactions(COMMIT_TIMEOUT).context("init_transactions")?;

    let payload: Vec<u8> = (0..args.record_bytes).map(|i| (i * 31 % 251) as u8).collect();
    let mut commit_us = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let mut txn_us = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let start = Instant::now();
    let warmup_end = start + Duration::from_secs(args.warmup_secs);
    let end = warmup_end + duration;
    let (mut committed, mut measured_txns) = (0u64, 0u64);
    let mut next_report = start + Duration::from_secs(1);
    let mut last_committed = 0u64;
    let mut sent = 0u64;
    while Instant::now() < end {
        let began = Instant::now();
        producer.begin_transaction().context("begin_transaction")?;
        for _ in 0..args.records_per_txn {
            let partition = (sent % args.partitions as u64) as i32;
            let mut record = BaseRecord::<(), [u8]>::to(&args.topic).payload(&payload[..]).partition(partition);
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((e, back)) => {
                        if !matches!(e.rdkafka_error_code(), Some(rdkafka::types::RDKafkaErrorCode::QueueFull)) {
                            bail!("send failed: {e}");
                        }
                        record = back;
                        producer.poll(Duration::from_millis(1));
                    }
                }
            }
            sent += 1;
        }
        let committing = Instant::now();
        // The rdkafka crate's flush (inside commit_transaction) polls in 100 ms steps; waiting
        // for the delivery reports here first keeps that from adding up to 100 ms per commit.
        while producer.in_flight_count() > 0 {
            if committing.elapsed() > COMMIT_TIMEOUT {
                bail!("records of a transaction not acknowledged within {COMMIT_TIMEOUT:?}");
            }
            producer.poll(Duration::from_millis(1));
        }
        producer.commit_transaction(COMMIT_TIMEOUT).context("commit_transaction")?;
        committed += 1;
        if began >= warmup_end {
            measured_txns += 1;
            let _ = commit_us.record(u64::try_from(committing.elapsed().as_micros()).unwrap_or(u64::MAX).max(1));
            let _ = txn_us.record(u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX).max(1));
        }
        if Instant::now() >= next_report {
            eprintln!(
                "[{:>4.0}s] {} txn/s  p99 commit so far {:.1} ms{}",
                start.elapsed().as_secs_f64(),
                committed - last_committed,
                commit_us.value_at_quantile(0.99) as f64 / 1000.0,
                if began >= warmup_end { "" } else { "  (warm-up)" }
            );
            last_committed = committed;
            next_report += Duration::from_secs(1);
        }
    }
    let measured = duration.as_secs_f64();
    let ms = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    let report = serde_json::json!({
        "workload": "transactions",
        "bootstrap": args.bootstrap,
        "topic": args.topic,
        "partitions": args.partitions,
        "records_per_txn": args.records_per_txn,
        "record_bytes": args.record_bytes,
        "measured_seconds": measured,
        "transactions": measured_txns,
        "transactions_per_second": measured_txns as f64 / measured,
        "records_per_second": (measured_txns * args.records_per_txn as u64) as f64 / measured,
        "commit_latency_ms": { "p50": ms(&commit_us, 0.5), "p90": ms(&commit_us, 0.9), "p99": ms(&commit_us, 0.99), "max": commit_us.max() as f64 / 1000.0 },
        "transaction_latency_ms": { "p50": ms(&txn_us, 0.5), "p99": ms(&txn_us, 0.99), "max": txn_us.max() as f64 / 1000.0 },
    });
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
