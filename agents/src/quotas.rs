//! Rate quotas (Kafka's `producer_byte_rate` and `consumer_byte_rate`, and a request rate) per
//! tenant, and per HTTP API key within its tenant's. A quota is cluster-wide; each agent enforces an equal share of it among the
//! live agents, since clients spread over agents and no agent sees another's traffic. Bytes are
//! charged after they are used, as Kafka does: a client past its share is answered late, by the
//! time it takes the share to pay back the excess, with that time in `throttle_time_ms`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use floe_metadata::State;
use floe_metadata::locks::MutexRecovery;

/// Which byte rate a charge counts against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaKind {
    Produce,
    Fetch,
    /// Requests rather than bytes: each request counts one.
    Requests,
}

impl QuotaKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::Produce => "produce",
            Self::Fetch => "fetch",
            Self::Requests => "requests",
        }
    }
}

/// The longest a client is held back at once: below every client's request timeout.
pub const THROTTLE_MAX: Duration = Duration::from_secs(10);
/// How long past bursts are remembered: a tenant idle this long may send a second's worth of
/// its share at once.
const BURST: Duration = Duration::from_secs(1);
/// An agent whose heartbeat is older than this no longer counts toward the share.
const LIVE_AGENT_HEARTBEAT_MS: i64 = 30_000;

/// A token bucket that may go into debt: `tokens` below zero is bytes used ahead of the rate.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Who a quota holds back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuotaHolder<'a> {
    Tenant(&'a str),
    /// An HTTP API key, by id: its quotas apply on top of its tenant's.
    ApiKey(&'a str),
}

/// Every quota holder's buckets on this agent: tenants', and API keys' that have quotas of
/// their own (at most `API_KEY_COUNT_MAX`).
#[derive(Debug, Default)]
pub struct QuotaBuckets {
    buckets: Mutex<HashMap<(bool, String, QuotaKind), Bucket>>,
}

fn bucket_key(holder: QuotaHolder<'_>, kind: QuotaKind) -> (bool, String, QuotaKind) {
    match holder {
        QuotaHolder::Tenant(name) => (false, name.to_owned(), kind),
        QuotaHolder::ApiKey(id) => (true, id.to_owned(), kind),
    }
}

impl QuotaBuckets {
    /// This agent's share of `holder`'s `kind` quota in bytes (or requests) per second, if it
    /// has one.
    pub fn share(state: &State, holder: QuotaHolder<'_>, kind: QuotaKind) -> Option<f64> {
        let rate = match holder {
            QuotaHolder::Tenant(tenant) => {
                let quotas = state.tenants.get(tenant)?.quotas;
                match kind {
                    QuotaKind::Produce => quotas.produce_bytes_per_sec,
                    QuotaKind::Fetch => quotas.fetch_bytes_per_sec,
                    QuotaKind::Requests => quotas.requests_per_sec,
                }
            }
            QuotaHolder::ApiKey(id) => {
                let quotas = state.api_key_quotas.get(id)?;
                match kind {
                    QuotaKind::Produce => quotas.produce_bytes_per_sec,
                    QuotaKind::Fetch => quotas.fetch_bytes_per_sec,
                    QuotaKind::Requests => quotas.requests_per_sec,
                }
            }
        }?;
        let now_ms = floe_metadata::now_ms();
        let live = state.agents.values().filter(|a| now_ms - a.last_heartbeat_ms < LIVE_AGENT_HEARTBEAT_MS).count();
        Some(rate as f64 / live.max(1) as f64)
    }

    /// Counts `bytes` against the holder's share (`rate` bytes per second) and returns how long
    /// its client must now wait: zero within the quota, at most [`THROTTLE_MAX`].
    pub fn charge(&self, holder: QuotaHolder<'_>, kind: QuotaKind, rate: f64, bytes: u64, now: Instant) -> Duration {
        let mut buckets = self.buckets.lock_recovered();
        let bucket = buckets.entry(bucket_key(holder, kind)).or_insert(Bucket { tokens: rate, at: now });
        refill(bucket, rate, now);
        // Debt past the longest hold is forgiven: one huge request costs its client that hold,
        // not hours.
        bucket.tokens = (bucket.tokens - bytes as f64).max(-rate * THROTTLE_MAX.as_secs_f64());
        let throttle = debt(bucket, rate);
        // Per tenant only: a fleet's keys would be too many labels.
        if let (false, QuotaHolder::Tenant(tenant)) = (throttle.is_zero(), holder) {
            crate::metrics::QUOTA_THROTTLE_SECONDS
                .with_label_values(&[crate::metrics::TENANT_LABELS.label(tenant), kind.name()])
                .inc_by(throttle.as_secs_f64());
        }
        throttle
    }

    /// How long the holder must still wait before using its share again, without charging.
    pub fn pending(&self, holder: QuotaHolder<'_>, kind: QuotaKind, rate: f64, now: Instant) -> Duration {
        let mut buckets = self.buckets.lock_recovered();
        match buckets.get_mut(&bucket_key(holder, kind)) {
            Some(bucket) => {
                refill(bucket, rate, now);
                debt(bucket, rate)
            }
            None => Duration::ZERO,
        }
    }
}

fn refill(bucket: &mut Bucket, rate: f64, now: Instant) {
    let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
    bucket.tokens = (bucket.tokens + elapsed * rate).min(rate * BURST.as_secs_f64());
    bucket.at = now;
}

fn debt(bucket: &Bucket, rate: f64) -> Duration {
    if bucket.tokens >= 0.0 || rate <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(-bucket.tokens / rate).min(THROTTLE_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_past_its_rate_waits_for_the_excess_and_others_do_not() {
        let throttle = QuotaBuckets::default();
        let start = Instant::now();
        // 1,000 bytes/s: the first second's worth passes, the next 500 bytes cost half a second.
        assert_eq!(throttle.charge(QuotaHolder::Tenant("a"), QuotaKind::Produce, 1000.0, 1000, start), Duration::ZERO);
        let wait = throttle.charge(QuotaHolder::Tenant("a"), QuotaKind::Produce, 1000.0, 500, start);
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(
            throttle.pending(QuotaHolder::Tenant("a"), QuotaKind::Produce, 1000.0, start + Duration::from_millis(250)),
            Duration::from_millis(250)
        );
        assert_eq!(
            throttle.pending(QuotaHolder::Tenant("a"), QuotaKind::Produce, 1000.0, start + wait),
            Duration::ZERO
        );
        // Another tenant, an API key of the same name, and the same tenant's fetch quota, are
        // untouched.
        assert_eq!(throttle.charge(QuotaHolder::ApiKey("a"), QuotaKind::Produce, 1000.0, 1000, start), Duration::ZERO);
        assert_eq!(throttle.charge(QuotaHolder::Tenant("b"), QuotaKind::Produce, 1000.0, 1000, start), Duration::ZERO);
        assert_eq!(throttle.charge(QuotaHolder::Tenant("a"), QuotaKind::Fetch, 1000.0, 1000, start), Duration::ZERO);
        // A huge excess is capped below client timeouts.
        assert_eq!(throttle.charge(QuotaHolder::Tenant("a"), QuotaKind::Produce, 1000.0, 1 << 30, start), THROTTLE_MAX);
        // Idle time refills at most one second's worth.
        let later = start + Duration::from_secs(3600);
        assert_eq!(throttle.charge(QuotaHolder::Tenant("b"), QuotaKind::Produce, 1000.0, 1000, later), Duration::ZERO);
        assert!(!throttle.charge(QuotaHolder::Tenant("b"), QuotaKind::Produce, 1000.0, 1, later).is_zero());
    }
}
