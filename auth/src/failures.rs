//! Per-source limiting of failed authentication: after `max_failures` failures from one address
//! within a window, that address is refused without its credentials being checked until the
//! window ends. Shared by the Kafka listener's SASL and the HTTP API's keys, so guessing is
//! slowed across both. Time is passed in, so the limiter is testable without sleeping.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at once; past it, windows that have ended are dropped, then the oldest.
const SOURCES_MAX: usize = 65_536;

#[derive(Debug)]
pub struct FailureLimiter {
    max_failures: u32,
    window: Duration,
    /// Per address: when its window began and its failures in it.
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
        let sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
        let &(start, failures) = sources.get(&source)?;
        let ends = start + self.window;
        (failures >= self.max_failures && now < ends).then(|| ends - now)
    }

    /// Counts a failed authentication from `source`.
    pub fn record_failure(&self, source: IpAddr, now: Instant) {
        if self.max_failures == 0 {
            return;
        }
        let mut sources = self.sources.lock().unwrap_or_else(|p| p.into_inner());
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
        entry.1 = entry.1.saturating_add(1);
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
