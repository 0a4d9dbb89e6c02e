//! The order in which a group's membership reaches Raft.
//!
//! The coordinator changes a group under its table lock and writes the new membership
//! (`StoreGroup`) after releasing the lock, so that one slow Raft write does not stall every
//! group. Two changes made one after the other could then be proposed the other way round: the
//! older write is refused (`StoreGroup` keeps generations monotonic) and its member is told the
//! coordinator is unavailable, or, with an equal generation, it overwrites the newer membership,
//! which a new leader would then resume from. So each change takes a turn while the lock is held,
//! and a turn's write starts once the group's earlier turns are written or given up.
//!
//! A change that needs no write of its own may still rest on earlier changes whose writes are
//! under way: its answer waits for them ([`WriteBarrier`]) and is not given if one failed, since
//! the member would then act on a membership no new leader would know.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::locks::MutexRecovery;

/// Below this many groups with a turn record, the records are not swept.
const SWEEP_FLOOR: usize = 1024;

#[derive(Default)]
struct Progress {
    /// Turns handed out.
    issued: u64,
    /// Every turn below this one is over.
    done: u64,
    /// Turns over while an earlier one was not.
    over_early: BTreeSet<u64>,
    /// Turns whose write failed, so far.
    failed: u64,
}

impl Progress {
    fn busy(&self) -> bool {
        self.done < self.issued
    }
}

/// A group's [`Progress`] and its waiters. A `Notify` wakes waiters in the order they came (a
/// `watch` channel spreads them over slots it picks at random), so a simulation's seed replays.
#[derive(Default)]
struct SharedProgress {
    progress: Mutex<Progress>,
    changed: Notify,
}

impl SharedProgress {
    fn borrow(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock_recovered()
    }

    fn send_modify(&self, change: impl FnOnce(&mut Progress)) {
        change(&mut self.borrow());
        self.changed.notify_waiters();
    }

    /// Waits until `ready` holds; what `read` takes from the progress then.
    async fn wait_for<T>(&self, ready: impl Fn(&Progress) -> bool, read: impl Fn(&Progress) -> T) -> T {
        loop {
            let notified = self.changed.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a change in between is not missed.
            notified.as_mut().enable();
            {
                let progress = self.borrow();
                if ready(&progress) {
                    return read(&progress);
                }
            }
            notified.await;
        }
    }
}

/// The turns of every group (held with the coordinator's tables).
#[derive(Default)]
pub(super) struct WriteTurns {
    groups: HashMap<String, Arc<SharedProgress>>,
    sweep_at: usize,
}

impl WriteTurns {
    /// The next turn of `group_id`'s writes; call it under the lock the change was made under.
    pub(super) fn take(&mut self, group_id: &str) -> WriteTurn {
        if self.groups.len() >= self.sweep_at.max(SWEEP_FLOOR) {
            self.groups.retain(|_, progress| progress.borrow().busy());
            self.sweep_at = self.groups.len() * 2;
        }
        let progress = self.groups.entry(group_id.to_owned()).or_default().clone();
        let mut turn = 0;
        progress.send_modify(|p| {
            turn = p.issued;
            p.issued += 1;
        });
        WriteTurn { turn, progress }
    }

    /// What a change made now, needing no write of its own, waits for before it is answered:
    /// the writes of `group_id` under way.
    pub(super) fn barrier(&self, group_id: &str) -> WriteBarrier {
        let progress = self.groups.get(group_id).cloned();
        let (upto, failed) = progress.as_ref().map_or((0, 0), |p| {
            let p = p.borrow();
            (p.issued, p.failed)
        });
        WriteBarrier { upto, failed, progress }
    }

    /// Whether a write of `group_id` is waiting or under way: the live group must stay in memory
    /// until it lands, since the stored state does not show it yet.
    pub(super) fn busy(&self, group_id: &str) -> bool {
        self.groups.get(group_id).is_some_and(|p| p.borrow().busy())
    }
}

/// One write's place in its group's order; dropping it (written, failed or abandoned) lets the
/// next one go.
pub(super) struct WriteTurn {
    turn: u64,
    progress: Arc<SharedProgress>,
}

impl WriteTurn {
    /// Waits until every earlier write of the group is over.
    pub(super) async fn wait(&self) {
        self.progress.wait_for(|p| p.done >= self.turn, |_| ()).await;
    }

    /// Ends the turn with its write failed.
    pub(super) fn failed(self) {
        self.progress.send_modify(|p| p.failed += 1);
    }
}

/// The writes of a group under way when a change needing none was made.
pub(super) struct WriteBarrier {
    upto: u64,
    failed: u64,
    progress: Option<Arc<SharedProgress>>,
}

impl WriteBarrier {
    /// Waits until those writes are over; `false` if a write of the group failed meanwhile.
    pub(super) async fn passed(self) -> bool {
        let Some(progress) = self.progress else { return true };
        progress.wait_for(|p| p.done >= self.upto, |p| p.failed == self.failed).await
    }
}

impl Drop for WriteTurn {
    fn drop(&mut self) {
        let turn = self.turn;
        self.progress.send_modify(|p| {
            p.over_early.insert(turn);
            while p.over_early.remove(&p.done) {
                p.done += 1;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_go_in_the_order_taken_even_when_one_is_given_up() {
        let mut turns = WriteTurns::default();
        let (first, second, third) = (turns.take("g"), turns.take("g"), turns.take("g"));
        let other = turns.take("h");
        // Another group's first turn does not wait for this one's.
        tokio::time::timeout(std::time::Duration::from_secs(1), other.wait()).await.expect("h goes at once");
        let waiting = tokio::spawn(async move {
            third.wait().await;
        });
        drop(second); // given up before its turn came
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the third waits for the first");
        assert!(turns.busy("g"));
        first.wait().await;
        drop(first);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("the third goes once the first is over")
            .expect("task");
        assert!(!turns.busy("g"), "every turn of g is over");
    }

    #[tokio::test]
    async fn a_barrier_waits_for_earlier_writes_and_fails_if_one_failed() {
        let mut turns = WriteTurns::default();
        assert!(turns.barrier("g").passed().await, "nothing under way");
        let (first, second) = (turns.take("g"), turns.take("g"));
        let barrier = turns.barrier("g");
        let later = turns.take("g");
        let waiting = tokio::spawn(barrier.passed());
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "the barrier waits for the second write");
        second.failed();
        assert!(!waiting.await.expect("task"), "an earlier write failed");
        drop(later);
        assert!(turns.barrier("g").passed().await, "a barrier taken after the failure passes");
    }
}
