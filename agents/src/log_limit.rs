//! Log lines the world can cause, bounded. A call site that logs once per connection or
//! request lets a client write as many lines as it opens connections or sends requests (a
//! 15-second HTTP/2 rapid-reset flood wrote 48,000 warnings).
//! [`log_limited!`](crate::log_limited!) logs like `tracing::event!`, at most
//! [`LOG_LINES_BURST`] lines at once per call site and then one per [`LOG_LINE_INTERVAL`]; the
//! first line written after dropped ones carries `suppressed = N`, the number of similar lines
//! dropped since the last one written. The `floe` binary puts other crates' warnings and errors
//! under the same limit, per call site (`h2` warns once per connection that resets too many
//! streams).

use std::sync::Mutex;
use std::time::Instant;

use floe_metadata::locks::MutexRecovery;

use crate::limits::{LOG_LINE_INTERVAL, LOG_LINES_BURST};

/// One call site's budget of lines: a token bucket of [`LOG_LINES_BURST`] lines, one earned
/// back per [`LOG_LINE_INTERVAL`]. Made in a `static`, one per call site, by
/// [`log_limited!`](crate::log_limited!).
#[derive(Debug)]
pub struct LogLimit {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Lines that may be written now.
    lines: u32,
    /// When `lines` was last topped up; `None` before the first line.
    refilled: Option<Instant>,
    /// Lines dropped since the last one written.
    suppressed: u64,
}

impl LogLimit {
    pub const fn new() -> Self {
        Self { bucket: Mutex::new(Bucket { lines: LOG_LINES_BURST, refilled: None, suppressed: 0 }) }
    }

    /// Whether a line may be written at `now`: `Some(n)`, where `n` lines were dropped since
    /// the last one written, or `None`, and this one is counted as dropped.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        // A panic elsewhere leaves a bucket whose counts are still usable.
        let mut bucket = self.bucket.lock_recovered();
        let refilled = *bucket.refilled.get_or_insert(now);
        let earned = now.saturating_duration_since(refilled).as_nanos() / LOG_LINE_INTERVAL.as_nanos();
        if earned > 0 {
            let earned = u32::try_from(earned).unwrap_or(u32::MAX);
            bucket.lines = bucket.lines.saturating_add(earned).min(LOG_LINES_BURST);
            // A full bucket earns nothing while it stays full.
            let full = bucket.lines == LOG_LINES_BURST;
            bucket.refilled = Some(if full { now } else { refilled + LOG_LINE_INTERVAL * earned });
        }
        if bucket.lines == 0 {
            bucket.suppressed += 1;
            return None;
        }
        bucket.lines -= 1;
        Some(std::mem::take(&mut bucket.suppressed))
    }
}

impl Default for LogLimit {
    fn default() -> Self {
        Self::new()
    }
}

/// `tracing::event!` for a line a client can cause once per connection or request: limited per
/// call site ([`LogLimit`]), with `suppressed = N` on the first line written after `N` were
/// dropped. The caller depends on `tracing`.
///
/// ```ignore
/// floe_agent::log_limited!(tracing::Level::WARN, %peer, "operator API request without the operator token");
/// ```
#[macro_export]
macro_rules! log_limited {
    ($level:expr, $($arg:tt)+) => {{
        static LIMIT: $crate::log_limit::LogLimit = $crate::log_limit::LogLimit::new();
        match LIMIT.admit(::std::time::Instant::now()) {
            ::std::option::Option::Some(0) => ::tracing::event!($level, $($arg)+),
            ::std::option::Option::Some(suppressed) => ::tracing::event!($level, suppressed, $($arg)+),
            ::std::option::Option::None => {}
        }
    }};
}

#[cfg(test)]
mod tests;
