//! Per-source limiting of failed authentication: after `max_failures` failures from one address
//! within a window, that address is refused without its credentials being checked until the
//! window ends. Shared by the Kafka listener's SASL and the HTTP API's keys, so guessing is
//! slowed across both. Time is passed in, so the limiter is testable without sleeping.
//!
//! A SCRAM exchange abandoned half-way counts a tenth of a failure: it tests no password, and
//! real clients leave them whenever they are torn down mid-exchange (librdkafka does, destroying
//! a client or dropping a bootstrap connection). At a full failure each, a victim's own clients
//! under the hostile-tenant chaos locked their address out; at a tenth a user-name prober is
//! still held to ten times the failure limit.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use floe_metadata::locks::MutexRecovery;

/// Tenths of a failure: what a wrong credential and an abandoned exchange each count.
const FAILURE_TENTHS: u32 = 10;
const ABANDONED_TENTHS: u32 = 1;

/// Addresses tracked at once; past it, windows that have ended are dropped, then the oldest.
const SOURCES_MAX: usize = 65_536;

#[derive(Debug)]
pub struct FailureLimiter {
    max_failures: u32,
    window: Duration,
    /// Per address: when its window began and its failures in it, in tenths.
    sources: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl FailureLimiter {
    /// `max_failures` of 0 turns limiting off.
    pub fn new(max_failures: u32, window: Duration) -> Self {
        Self { max_failures, window, sources: Mutex::new(HashMap::new()) }
    }

    /// How long `source` must wait before it may try again, if it is blocked now.
    pub fn blocked(&self, source: IpAddr, now: Instant) -> Option<Duration> {
        if self.max_failures == 0 {
            return None;
        }
        let sources = self.sources.lock_recovered();
        let &(start, failures) = sources.get(&source)?;
        let ends = start + self.window;
        (failures >= self.max_failures.saturating_mul(FAILURE_TENTHS) && now < ends).then(|| ends - now)
    }

    /// Counts a failed authentication from `source`.
    pub fn record_failure(&self, source: IpAddr, now: Instant) {
        self.record(source, now, FAILURE_TENTHS);
    }

    /// Counts an authentication exchange `source` left before its last step.
    pub fn record_abandoned(&self, source: IpAddr, now: Instant) {
        self.record(source, now, ABANDONED_TENTHS);
    }

    fn record(&self, source: IpAddr, now: Instant, tenths: u32) {
        if self.max_failures == 0 {
            return;
        }
        let mut sources = self.sources.lock_recovered();
        if sources.len() >= SOURCES_MAX && !sources.contains_key(&source) {
            sources.retain(|_, (start, _)| now < *start + self.window);
            if sources.len() >= SOURCES_MAX
                && let Some(oldest) = sources.iter().min_by_key(|(_, (start, _))| *start).map(|(ip, _)| *ip)
            {
                sources.remove(&oldest);
            }
        }
        let entry = sources.entry(source).or_insert((now, 0));
        if now >= entry.0 + self.window {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(tenths);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_blocked_after_its_failures_until_the_window_ends() {
        let limiter = FailureLimiter::new(3, Duration::from_secs(60));
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().expect("ip"), "10.0.0.2".parse().expect("ip"));
        let t0 = Instant::now();
        for i in 0..3 {
            assert_eq!(limiter.blocked(a, t0), None, "failure {i} is not blocked yet");
            limiter.record_failure(a, t0);
        }
        assert_eq!(limiter.blocked(a, t0 + Duration::from_secs(10)), Some(Duration::from_secs(50)));
        assert_eq!(limiter.blocked(b, t0), None, "other sources are not affected");
        assert_eq!(limiter.blocked(a, t0 + Duration::from_secs(60)), None, "the window ended");
        limiter.record_failure(a, t0 + Duration::from_secs(61));
        assert_eq!(limiter.blocked(a, t0 + Duration::from_secs(61)), None, "a new window starts at one failure");
    }

    #[test]
    fn an_abandoned_exchange_counts_a_tenth_of_a_failure() {
        let limiter = FailureLimiter::new(2, Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        let now = Instant::now();
        for i in 0..19 {
            limiter.record_abandoned(ip, now);
            assert_eq!(limiter.blocked(ip, now), None, "{} abandoned exchanges are under two failures", i + 1);
        }
        limiter.record_abandoned(ip, now);
        assert!(limiter.blocked(ip, now).is_some(), "twenty make two failures");
        let other: IpAddr = "10.0.0.2".parse().expect("ip");
        limiter.record_failure(other, now);
        limiter.record_abandoned(other, now);
        assert_eq!(limiter.blocked(other, now), None);
        limiter.record_failure(other, now);
        assert!(limiter.blocked(other, now).is_some());
    }

    #[test]
    fn zero_turns_it_off_and_the_table_is_bounded() {
        let off = FailureLimiter::new(0, Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.1".parse().expect("ip");
        let now = Instant::now();
        for _ in 0..10 {
            off.record_failure(ip, now);
        }
        assert_eq!(off.blocked(ip, now), None);
        let limiter = FailureLimiter::new(1, Duration::from_secs(60));
        for i in 0..(SOURCES_MAX as u32 + 10) {
            limiter.record_failure(IpAddr::from(i.to_be_bytes()), now);
        }
        assert!(limiter.sources.lock().expect("lock").len() <= SOURCES_MAX);
    }
}
