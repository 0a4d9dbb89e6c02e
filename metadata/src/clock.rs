//! Protocol time as the metadata node reads it: group sessions, rebalance and pending-member
//! deadlines, and the `now_ms` of the commands the leader's duties propose (retention,
//! transaction timeouts, offset expiry, usage minutes). The group coordinator and the leader's
//! duties read it only through the node's [`Clock`], so a test or a simulation can move it at
//! will. I/O deadlines (proposals, connections) stay on Tokio's clock, which a paused runtime
//! makes virtual.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The node's clock: the system's, one that moves only when told, or Tokio's.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    manual: Option<Arc<ManualTime>>,
    /// Tokio's clock from this instant, standing for this wall time then: virtual time in a
    /// paused runtime (the simulation).
    tokio: Option<(tokio::time::Instant, i64)>,
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
        Self { manual: Some(Arc::new(time)), tokio: None }
    }

    /// Tokio's clock, standing at `epoch_ms` (wall time) now: it moves with a paused runtime's
    /// virtual time.
    pub fn tokio(epoch_ms: i64) -> Self {
        Self { manual: None, tokio: Some((tokio::time::Instant::now(), epoch_ms)) }
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
        match (&self.manual, self.tokio) {
            (Some(time), _) => time.started + Duration::from_millis(time.elapsed_ms.load(Ordering::SeqCst)),
            (None, Some(_)) => tokio::time::Instant::now().into_std(),
            (None, None) => Instant::now(),
        }
    }

    /// Wall time in milliseconds since the Unix epoch, as commands carry it.
    pub fn now_ms(&self) -> i64 {
        match (&self.manual, self.tokio) {
            (Some(time), _) => {
                let elapsed = i64::try_from(time.elapsed_ms.load(Ordering::SeqCst)).unwrap_or(i64::MAX);
                time.epoch_ms.saturating_add(elapsed)
            }
            (None, Some((started, epoch_ms))) => {
                let elapsed = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
                epoch_ms.saturating_add(elapsed)
            }
            (None, None) => crate::now_ms(),
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

    #[tokio::test(start_paused = true)]
    async fn a_tokio_clock_moves_with_virtual_time() {
        let clock = Clock::tokio(1_000);
        let at = clock.now();
        tokio::time::sleep(Duration::from_secs(90)).await;
        assert_eq!(clock.now() - at, Duration::from_secs(90));
        assert_eq!(clock.now_ms(), 91_000);
    }
}
