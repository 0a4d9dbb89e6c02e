//! One producer: a librdkafka instance on its own thread, sending records at its share of the
//! rate until the run ends; latency is from `send` to the delivery report.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};

use super::stats::{Stats, wall_micros};

/// The schema registry's framing: magic byte 0 and a 4-byte schema id.
pub(crate) const SCHEMA_FRAMING_BYTES: usize = 5;
use super::{KeyDistribution, Payload, RunArgs};

/// Longest wait for outstanding deliveries at the end.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(60);
/// Timeout of transactional calls (init, commit).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(60);
/// Delivery-report events served while waiting less than a millisecond for the next send.
const DELIVERY_EVENTS_PER_WAIT: usize = 8;
/// Random bytes each producer draws its record values from.
const PAYLOAD_POOL_BYTES: usize = 16 * 1024 * 1024;

/// Each topic with its partition count, as the cluster reports them.
pub(super) fn partition_counts(
    bootstrap: &str,
    settings: &[(String, String)],
    topics: &[String],
) -> anyhow::Result<Vec<(String, i32)>> {
    let client: BaseConsumer = super::client_config(bootstrap, settings).create().context("metadata client")?;
    let mut counts = Vec::with_capacity(topics.len());
    for topic in topics {
        let metadata = client
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .with_context(|| format!("metadata of {topic}"))?;
        let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len());
        if partitions == 0 {
            bail!("topic {topic} has no partitions");
        }
        counts.push((topic.clone(), i32::try_from(partitions)?));
    }
    Ok(counts)
}

/// Counts delivery reports into the shared [`Stats`].
struct Deliveries(Arc<Stats>);

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    /// When the record was sent, and its key and value bytes.
    type DeliveryOpaque = Box<(Instant, u64)>;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: Box<(Instant, u64)>) {
        let (sent, bytes) = *opaque;
        match result {
            Ok(_) => self.0.delivered(bytes, sent),
            Err((e, _)) => self.0.error(format!("produce: {e}")),
        }
    }
}

/// Chooses record keys.
enum Keys {
    None,
    Sequential {
        count: u64,
    },
    Uniform {
        count: u64,
    },
    /// Cumulative probabilities of keys 0..N.
    Zipf {
        cdf: Vec<f64>,
    },
}

impl Keys {
    fn new(args: &RunArgs) -> Self {
        match (args.keys, args.key_distribution) {
            (0, _) => Keys::None,
            (count, KeyDistribution::Sequential) => Keys::Sequential { count },
            (count, KeyDistribution::Uniform) => Keys::Uniform { count },
            (count, KeyDistribution::Zipf) => Keys::zipf(count),
        }
    }

    /// Key k drawn with probability proportional to 1/(k+1).
    fn zipf(count: u64) -> Self {
        let mut cdf: Vec<f64> = (1..=count).map(|k| 1.0 / k as f64).collect();
        let mut sum = 0.0;
        for p in &mut cdf {
            sum += *p;
            *p = sum;
        }
        cdf.iter_mut().for_each(|p| *p /= sum);
        Keys::Zipf { cdf }
    }

    fn next(&self, seq: u64, rng: &mut XorShift) -> Option<u64> {
        match self {
            Keys::None => None,
            Keys::Sequential { count } => Some(seq % count),
            Keys::Uniform { count } => Some(rng.next() % count),
            Keys::Zipf { cdf } => {
                let u = rng.unit();
                Some(cdf.partition_point(|p| *p < u).min(cdf.len().saturating_sub(1)) as u64)
            }
        }
    }
}

/// A small fast generator for payload bytes and key choices; not for anything secret.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

pub(super) fn run(
    args: &RunArgs,
    index: usize,
    stats: &Arc<Stats>,
    topics: &[(String, i32)],
    end: Instant,
) -> anyhow::Result<()> {
    let result = produce_until(args, index, stats, topics, end);
    if let Err(e) = &result {
        // One failed producer ends the whole run rather than skewing it quietly.
        stats.error(format!("producer: {e:#}"));
        stats.stop.store(true, Ordering::Relaxed);
    }
    result
}

fn produce_until(
    args: &RunArgs,
    index: usize,
    stats: &Arc<Stats>,
    topics: &[(String, i32)],
    end: Instant,
) -> anyhow::Result<()> {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.bootstrap)
        .set("acks", &args.acks)
        .set("compression.type", &args.compression)
        .set("linger.ms", args.linger_ms.to_string())
        .set("batch.size", args.batch_bytes.to_string())
        .set("queue.buffering.max.kbytes", "1048576")
        .set("queue.buffering.max.messages", "1000000")
        // Transactions need an idempotent producer.
        .set("enable.idempotence", (args.idempotence || args.transaction_records > 0).to_string())
        .set("message.max.bytes", args.request_bytes.to_string());
    let transactional = args.transaction_records > 0;
    if transactional {
        config.set("transactional.id", format!("floe-loadtest-{}-{index}", uuid::Uuid::new_v4()));
    }
    for (key, value) in args.client_config.iter().chain(&args.producer_config) {
        config.set(key, value);
    }
    let producer: BaseProducer<Deliveries> =
        config.create_with_context(Deliveries(stats.clone())).context("creating a producer")?;
    if transactional {
        producer.init_transactions(TRANSACTION_TIMEOUT).context("init_transactions")?;
        producer.begin_transaction().context("begin_transaction")?;
    }
    let mut source = RecordSource::new(args, index, topics);
    let rate = args.rate as f64 / args.producers as f64;
    let start = stats.start();
    let mut sent = 0u64;
    let mut in_transaction = 0u64;
    while Instant::now() < end && !stats.stop.load(Ordering::Relaxed) {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(sent as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                if wait >= Duration::from_millis(1) {
                    producer.poll(Duration::from_millis(1));
                } else {
                    // librdkafka's poll timeout is whole milliseconds, so a shorter one would
                    // spin; serve the delivery reports waiting (one per call), then sleep.
                    for _ in 0..DELIVERY_EVENTS_PER_WAIT {
                        producer.poll(Duration::ZERO);
                    }
                    std::thread::sleep(wait);
                }
                continue;
            }
        }
        if let Some(limit) = args.records
            && stats.claimed.fetch_add(1, Ordering::Relaxed) >= limit
        {
            break;
        }
        let next = source.next();
        let (topic, partition) = locate(topics, next.slot);
        let (key_text, payload) = (next.key, next.value);
        let bytes = (payload.len() + key_text.as_ref().map_or(0, String::len)) as u64;
        let mut record =
            BaseRecord::with_opaque_to(topic, Box::new((Instant::now(), bytes))).payload(payload).partition(partition);
        if let Some(k) = &key_text {
            record = record.key(k.as_str());
        }
        loop {
            match producer.send::<str, [u8]>(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    producer.poll(Duration::from_millis(1));
                    record = back;
                }
                Err((e, _)) => bail!("send failed: {e}"),
            }
        }
        sent += 1;
        if sent.is_multiple_of(64) {
            producer.poll(Duration::ZERO);
        }
        if transactional {
            in_transaction += 1;
            if in_transaction == args.transaction_records {
                producer.commit_transaction(TRANSACTION_TIMEOUT).context("commit_transaction")?;
                producer.begin_transaction().context("begin_transaction")?;
                in_transaction = 0;
            }
        }
    }
    if transactional {
        producer.commit_transaction(TRANSACTION_TIMEOUT).context("commit_transaction")?;
    }
    producer.flush(FLUSH_TIMEOUT).context("flushing")?;
    Ok(())
}

/// The records one producer sends: which partition slot each goes to, its key and its value.
pub(super) struct RecordSource {
    rng: XorShift,
    keys: Keys,
    /// Partitions over all topics.
    slots: u64,
    seq: u64,
    pool: Vec<u8>,
    value: Vec<u8>,
    schema_id: Option<i32>,
}

/// One record drawn from a [`RecordSource`].
pub(super) struct NextRecord<'a> {
    /// Its partition among all topics' (see [`locate`]).
    pub(super) slot: u64,
    pub(super) key: Option<String>,
    /// Valid until the next draw.
    pub(super) value: &'a [u8],
}

impl RecordSource {
    pub(super) fn new(args: &RunArgs, index: usize, topics: &[(String, i32)]) -> Self {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9));
        // Each value is a different stretch of a random pool, so batches do not compress by
        // repeating one value; the pool is larger than any codec's window over one batch.
        let pool = payload_pool(args.payload, PAYLOAD_POOL_BYTES + args.record_bytes, &mut rng);
        Self {
            rng,
            keys: Keys::new(args),
            slots: topics.iter().map(|(_, p)| *p as u64).sum(),
            // Producers start on different partitions so they do not move in lockstep.
            seq: index as u64,
            pool,
            value: vec![0u8; args.record_bytes],
            schema_id: args.schema_id,
        }
    }

    pub(super) fn next(&mut self) -> NextRecord<'_> {
        let key = self.keys.next(self.seq, &mut self.rng);
        let slot = key.unwrap_or(self.seq) % self.slots.max(1);
        self.seq += 1;
        let from = (self.rng.next() % PAYLOAD_POOL_BYTES as u64) as usize;
        let len = self.value.len();
        self.value.copy_from_slice(&self.pool[from..from + len]);
        let framing = match self.schema_id {
            Some(id) if len >= SCHEMA_FRAMING_BYTES => {
                self.value[0] = 0;
                self.value[1..SCHEMA_FRAMING_BYTES].copy_from_slice(&id.to_be_bytes());
                SCHEMA_FRAMING_BYTES
            }
            _ => 0,
        };
        if len >= framing + 8 {
            self.value[framing..framing + 8].copy_from_slice(&wall_micros().to_be_bytes());
        }
        NextRecord { slot, key: key.map(|k| format!("key-{k:012}")), value: &self.value }
    }
}

/// Words text values are made of: a log line's vocabulary, small enough that text compresses.
const WORDS: [&str; 32] = [
    "GET",
    "POST",
    "/api/v1/orders",
    "/api/v1/users",
    "200",
    "404",
    "500",
    "user_id",
    "order_id",
    "latency_ms",
    "INFO",
    "WARN",
    "ERROR",
    "request",
    "completed",
    "started",
    "session",
    "checkout",
    "payment",
    "cart",
    "timeout",
    "retry",
    "region=eu-west-1",
    "region=us-east-1",
    "status",
    "ok",
    "true",
    "false",
    "{",
    "}",
    "\"",
    "=",
];

/// `bytes` bytes values are cut from: random, or words and numbers separated by spaces.
fn payload_pool(payload: Payload, bytes: usize, rng: &mut XorShift) -> Vec<u8> {
    match payload {
        Payload::Random => (0..bytes).map(|_| (rng.next() >> 24) as u8).collect(),
        Payload::Text => {
            let mut pool = Vec::with_capacity(bytes + 32);
            while pool.len() < bytes {
                let r = rng.next();
                if r.is_multiple_of(4) {
                    pool.extend_from_slice((r >> 8 & 0xffff).to_string().as_bytes());
                } else {
                    pool.extend_from_slice(WORDS[(r >> 8) as usize % WORDS.len()].as_bytes());
                }
                pool.push(if r >> 40 & 7 == 0 { b'\n' } else { b' ' });
            }
            pool.truncate(bytes);
            pool
        }
    }
}

/// The topic and partition of slot `slot` in 0..(sum of partitions): topics in turn, so
/// consecutive slots spread over topics first.
pub(super) fn locate(topics: &[(String, i32)], slot: u64) -> (&str, i32) {
    let n = topics.len() as u64;
    let (topic, partitions) = &topics[(slot % n) as usize];
    (topic.as_str(), ((slot / n) % *partitions as u64) as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_partition_of_every_topic() {
        let topics = vec![("a".to_owned(), 3), ("b".to_owned(), 3)];
        let mut seen: Vec<_> = (0..6).map(|s| locate(&topics, s)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 6);
    }

    #[test]
    fn text_compresses_and_random_does_not() {
        let ratio = |payload| {
            let pool = payload_pool(payload, 1 << 20, &mut XorShift(1));
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut encoder, &pool).expect("in memory");
            pool.len() as f64 / encoder.finish().expect("in memory").len() as f64
        };
        let (text, random) = (ratio(Payload::Text), ratio(Payload::Random));
        assert!(text > 2.5, "{text}");
        assert!(random < 1.01, "{random}");
    }

    #[test]
    fn zipf_keys_favour_the_first() {
        let keys = Keys::zipf(100);
        let mut rng = XorShift(42);
        let mut counts = [0u32; 100];
        for _ in 0..100_000 {
            counts[keys.next(0, &mut rng).unwrap_or(0) as usize] += 1;
        }
        // Key 0 carries 1/H(100) ≈ 19 % of the draws, key 99 about 0.2 %.
        assert!((17_000..21_500).contains(&counts[0]), "{}", counts[0]);
        assert!(counts[99] < 500, "{}", counts[99]);
    }
}
