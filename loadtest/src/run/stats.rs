//! What producers and consumers count, shared by their threads, and the per-second timeline the
//! main thread samples from it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;

use crate::report::{Sample, Throughput};

/// Largest latency recorded (one hour, in microseconds); longer ones count as this.
const LATENCY_US_MAX: u64 = 3_600_000_000;
/// Distinct error kinds kept; further kinds are counted under "other".
const ERROR_KINDS_MAX: usize = 100;

pub(super) fn histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("constant bounds are valid")
}

/// Wall-clock microseconds since the Unix epoch: what producers write into payloads and
/// consumers subtract from, so it works across processes on one clock.
pub(super) fn wall_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

struct Latency {
    /// Since the last timeline sample.
    interval: Histogram<u64>,
    /// After the warm-up.
    total: Histogram<u64>,
}

/// Counters of one side (producing or consuming).
pub(super) struct Side {
    /// After the warm-up.
    pub(super) records: AtomicU64,
    pub(super) bytes: AtomicU64,
    /// From the start.
    pub(super) records_total: AtomicU64,
    pub(super) bytes_total: AtomicU64,
    /// Nanoseconds from the base instant to the first measured event (`u64::MAX` before it): a
    /// catch-up read's window starts there, not at the group join before it.
    first_event_ns: AtomicU64,
    /// Nanoseconds from the base instant to the last measured event: the measured window's end.
    last_event_ns: AtomicU64,
    latency: Mutex<Latency>,
}

impl Side {
    fn new() -> Self {
        Self {
            records: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            records_total: AtomicU64::new(0),
            bytes_total: AtomicU64::new(0),
            first_event_ns: AtomicU64::new(u64::MAX),
            last_event_ns: AtomicU64::new(0),
            latency: Mutex::new(Latency { interval: histogram(), total: histogram() }),
        }
    }

    /// The counters, as rates over `seconds` measured.
    pub(super) fn throughput(&self, seconds: f64) -> Throughput {
        let (records, bytes) = (self.records.load(Ordering::Relaxed), self.bytes.load(Ordering::Relaxed));
        let per_second = |n: u64| if seconds > 0.0 { n as f64 / seconds } else { 0.0 };
        Throughput {
            records,
            bytes,
            records_per_second: per_second(records),
            mb_per_second: per_second(bytes) / 1e6,
            records_total: self.records_total.load(Ordering::Relaxed),
            bytes_total: self.bytes_total.load(Ordering::Relaxed),
        }
    }

    pub(super) fn latency_total(&self) -> Histogram<u64> {
        self.latency.lock().map(|l| l.total.clone()).unwrap_or_else(|_| histogram())
    }
}

struct Timeline {
    samples: Vec<Sample>,
    next_at: Instant,
    last_produced: (u64, u64),
    last_consumed: (u64, u64),
}

pub(super) struct Stats {
    base: Instant,
    base_wall_us: u64,
    /// Nanoseconds from `base` to the start of the run proper (after consumers were assigned).
    start_ns: AtomicU64,
    warmup: Duration,
    pub(super) produced: Side,
    pub(super) consumed: Side,
    /// Records consumed that were sent after the warm-up: the drain is done when these reach
    /// the records produced after it.
    consumed_sent_after_warmup: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    /// Records producers have taken from the `--records` budget.
    pub(super) claimed: AtomicU64,
    /// Set when producers and consumers should stop.
    pub(super) stop: AtomicBool,
    timeline: Mutex<Timeline>,
}

impl Stats {
    pub(super) fn new(base: Instant, warmup: Duration, base_wall: SystemTime) -> anyhow::Result<Self> {
        Ok(Self {
            base,
            base_wall_us: base_wall.duration_since(UNIX_EPOCH)?.as_micros() as u64,
            start_ns: AtomicU64::new(0),
            warmup,
            produced: Side::new(),
            consumed: Side::new(),
            consumed_sent_after_warmup: AtomicU64::new(0),
            errors: Mutex::new(BTreeMap::new()),
            claimed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            timeline: Mutex::new(Timeline {
                samples: Vec::new(),
                next_at: base + Duration::from_secs(1),
                last_produced: (0, 0),
                last_consumed: (0, 0),
            }),
        })
    }

    pub(super) fn start(&self) -> Instant {
        self.base + Duration::from_nanos(self.start_ns.load(Ordering::Relaxed))
    }

    /// Starts the clock again: warm-up, duration and timeline count from now.
    pub(super) fn restart(&self) {
        let now = Instant::now();
        self.start_ns.store(now.duration_since(self.base).as_nanos() as u64, Ordering::Relaxed);
        if let Ok(mut t) = self.timeline.lock() {
            t.next_at = now + Duration::from_secs(1);
            t.last_produced = (
                self.produced.records_total.load(Ordering::Relaxed),
                self.produced.bytes_total.load(Ordering::Relaxed),
            );
            t.last_consumed = (
                self.consumed.records_total.load(Ordering::Relaxed),
                self.consumed.bytes_total.load(Ordering::Relaxed),
            );
        }
    }

    pub(super) fn warmup_end(&self) -> Instant {
        self.start() + self.warmup
    }

    fn warmup_end_wall_us(&self) -> u64 {
        let start = self.start_ns.load(Ordering::Relaxed) / 1000;
        self.base_wall_us + start + self.warmup.as_micros() as u64
    }

    fn now_ns(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// A delivery report for a record of `bytes` sent at `sent`.
    pub(super) fn delivered(&self, bytes: u64, sent: Instant) {
        let side = &self.produced;
        side.records_total.fetch_add(1, Ordering::Relaxed);
        side.bytes_total.fetch_add(bytes, Ordering::Relaxed);
        let us = (sent.elapsed().as_micros() as u64).clamp(1, LATENCY_US_MAX);
        let measured = sent >= self.warmup_end();
        if measured {
            side.records.fetch_add(1, Ordering::Relaxed);
            side.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.measured_event(side);
        }
        if let Ok(mut l) = side.latency.lock() {
            l.interval.saturating_record(us);
            if measured {
                l.total.saturating_record(us);
            }
        }
    }

    /// A record of `bytes` received; `sent_wall_us` is the send time its payload carries, when
    /// this run produced it.
    pub(super) fn received(&self, bytes: u64, sent_wall_us: Option<u64>) {
        let side = &self.consumed;
        side.records_total.fetch_add(1, Ordering::Relaxed);
        side.bytes_total.fetch_add(bytes, Ordering::Relaxed);
        if Instant::now() >= self.warmup_end() {
            side.records.fetch_add(1, Ordering::Relaxed);
            side.bytes.fetch_add(bytes, Ordering::Relaxed);
            self.measured_event(side);
        }
        let Some(sent) = sent_wall_us else { return };
        let us = wall_micros().saturating_sub(sent).clamp(1, LATENCY_US_MAX);
        let measured = sent >= self.warmup_end_wall_us();
        if measured {
            self.consumed_sent_after_warmup.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(mut l) = side.latency.lock() {
            l.interval.saturating_record(us);
            if measured {
                l.total.saturating_record(us);
            }
        }
    }

    /// Every record produced after the warm-up has been consumed (when payloads carry send
    /// times; otherwise every record produced at all).
    pub(super) fn consumed_everything_produced(&self) -> bool {
        let produced = self.produced.records.load(Ordering::Relaxed);
        if self.consumed_sent_after_warmup.load(Ordering::Relaxed) >= produced && produced > 0 {
            return true;
        }
        self.consumed.records_total.load(Ordering::Relaxed) >= self.produced.records_total.load(Ordering::Relaxed)
    }

    pub(super) fn error(&self, kind: String) {
        if let Ok(mut errors) = self.errors.lock() {
            let kind =
                if errors.len() < ERROR_KINDS_MAX || errors.contains_key(&kind) { kind } else { "other".to_owned() };
            *errors.entry(kind).or_default() += 1;
        }
    }

    pub(super) fn errors(&self) -> BTreeMap<String, u64> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// From the end of the warm-up, or the first measured event if later (a catch-up read's
    /// consumer first joins its group), to the last.
    fn measured_seconds(&self, side: &Side) -> f64 {
        let end = side.last_event_ns.load(Ordering::Relaxed);
        let warmup_end = self.warmup_end().duration_since(self.base).as_nanos() as u64;
        let first = side.first_event_ns.load(Ordering::Relaxed);
        let from = if first == u64::MAX { warmup_end } else { warmup_end.max(first) };
        end.saturating_sub(from) as f64 / 1e9
    }

    fn measured_event(&self, side: &Side) {
        let now = self.now_ns();
        side.first_event_ns.fetch_min(now, Ordering::Relaxed);
        side.last_event_ns.fetch_max(now, Ordering::Relaxed);
    }

    pub(super) fn produce_measured_seconds(&self) -> f64 {
        self.measured_seconds(&self.produced)
    }

    pub(super) fn consume_measured_seconds(&self) -> f64 {
        self.measured_seconds(&self.consumed)
    }

    pub(super) fn next_sample_at(&self) -> Instant {
        self.timeline.lock().map_or_else(|_| Instant::now(), |t| t.next_at)
    }

    /// Closes the current second of the timeline.
    pub(super) fn sample(&self) -> Sample {
        let quantile = |h: &Histogram<u64>, q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0);
        let take = |side: &Side| {
            side.latency.lock().map_or((None, None), |mut l| {
                let q = (quantile(&l.interval, 0.5), quantile(&l.interval, 0.99));
                l.interval.reset();
                q
            })
        };
        let (produce_p50_ms, produce_p99_ms) = take(&self.produced);
        let (end_to_end_p50_ms, end_to_end_p99_ms) = take(&self.consumed);
        let produced =
            (self.produced.records_total.load(Ordering::Relaxed), self.produced.bytes_total.load(Ordering::Relaxed));
        let consumed =
            (self.consumed.records_total.load(Ordering::Relaxed), self.consumed.bytes_total.load(Ordering::Relaxed));
        let Ok(mut t) = self.timeline.lock() else {
            return Sample::default();
        };
        let at = t.next_at;
        let sample = Sample {
            t: at.duration_since(self.start()).as_secs_f64().round(),
            warmup: at <= self.warmup_end(),
            produced_records: produced.0 - t.last_produced.0,
            produce_mb_per_second: (produced.1 - t.last_produced.1) as f64 / 1e6,
            consumed_records: consumed.0 - t.last_consumed.0,
            consume_mb_per_second: (consumed.1 - t.last_consumed.1) as f64 / 1e6,
            produce_p50_ms,
            produce_p99_ms,
            end_to_end_p50_ms,
            end_to_end_p99_ms,
        };
        t.last_produced = produced;
        t.last_consumed = consumed;
        t.next_at += Duration::from_secs(1);
        t.samples.push(sample.clone());
        sample
    }

    pub(super) fn timeline(&self) -> Vec<Sample> {
        self.timeline.lock().map(|t| t.samples.clone()).unwrap_or_default()
    }
}
