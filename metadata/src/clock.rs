//! Protocol time as the metadata node reads it: group sessions, rebalance and pending-member
//! deadlines, and the `now_ms` of the commands the leader's duties propose (retention,
//! transaction timeouts, offset expiry, usage minutes). The group coordinator and the leader's
//! duties read it only through the node's [`Clock`], so a test or a simulation can move it at
//! will. I/O deadlines (proposals, connections) stay on Tokio's clock, which a paused runtime
//! makes virtual.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The node's clock: the system's, or one that moves only when told.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<ManualTime>>,
}

#[derive(Debug)]
struct ManualTime {
    started: Instant,
    epoch_ms: i64,
    elapsed_ms: AtomicU64,
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock standing at `epoch_ms` (wall time) that moves only by [`Clock::advance`]. Clones
    /// share it.
    pub fn manual(epoch_ms: i64) -> Self {
        let time = ManualTime { started: Instant::now(), epoch_ms, elapsed_ms: AtomicU64::new(0) };
        Self { manual: Some(Arc::new(time)) }
    }

    /// Moves a manual clock forward by `by`; the system clock moves by itself and ignores it.
    pub fn advance(&self, by: Duration) {
        if let Some(time) = &self.manual {
            let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
            time.elapsed_ms.fetch_add(by, Ordering::SeqCst);
        }
    }

    /// The monotonic now, for deadlines.
    pub fn now(&self) -> Instant {
        match &self.manual {
            None => Instant::now(),
            Some(time) => time.started + Duration::from_millis(time.elapsed_ms.load(Ordering::SeqCst)),
        }
    }

    /// Wall time in milliseconds since the Unix epoch, as commands carry it.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            None => crate::now_ms(),
            Some(time) => {
                let elapsed = i64::try_from(time.elapsed_ms.load(Ordering::SeqCst)).unwrap_or(i64::MAX);
                time.epoch_ms.saturating_add(elapsed)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = Clock::manual(1_000);
        let (at, shared) = (clock.now(), clock.clone());
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!((clock.now(), clock.now_ms()), (at, 1_000));
        shared.advance(Duration::from_secs(3));
        assert_eq!(clock.now() - at, Duration::from_secs(3));
        assert_eq!(clock.now_ms(), 4_000);
    }
}
