//! Waiting reads (Kafka Fetch long-polls, HTTP reads with `wait_ms`, event streams) are woken
//! only when a partition they wait on moves: its log end, log start, last stable offset or
//! leader epoch changes, or it goes away. Woken by every applied change instead, a tenant's idle
//! long-polls would each read their partitions again at every commit of every other tenant.
//!
//! One task per agent ([`run`]) compares, after each batch of applied changes, the partitions
//! someone waits on with what they were; its cost per change is one lookup per such partition,
//! however many requests wait on it.

use std::sync::{Arc, Mutex, Weak};

use floe_metadata::locks::MutexRecovery;
use floe_metadata::{JournalPosition, State, TopicId};
use rustc_hash::FxHashMap;
use tokio::sync::Notify;

/// What a waiting read of a partition can be woken by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    next_offset: i64,
    log_start_offset: i64,
    last_stable_offset: i64,
    leader_epoch: i32,
}

impl Mark {
    /// The partition as a read answered it.
    pub fn of_read(read: &super::PartitionRead) -> Self {
        Mark {
            next_offset: read.high_watermark,
            log_start_offset: read.log_start_offset,
            last_stable_offset: read.last_stable_offset,
            leader_epoch: read.leader_epoch,
        }
    }

    /// The partition as the state holds it.
    pub fn of_partition(p: &floe_metadata::Partition) -> Self {
        Mark {
            next_offset: p.next_offset,
            log_start_offset: p.log_start_offset,
            last_stable_offset: p.last_stable_offset(),
            leader_epoch: p.leader_epoch,
        }
    }

    /// The high watermark (the log's end).
    pub fn high_watermark(&self) -> i64 {
        self.next_offset
    }
}

fn mark(partition: Option<&floe_metadata::Partition>) -> Option<Mark> {
    partition.map(Mark::of_partition)
}

/// One watched partition: how it was when last compared, and who waits on it.
#[derive(Debug)]
struct Watched {
    mark: Option<Mark>,
    /// Usually one (the consumer of the partition): a vector beats a map for so few.
    waiters: Vec<(u64, Arc<Wake>)>,
    /// Without waiters at the last compare of every partition. A consumer waits on the same
    /// partitions Fetch after Fetch, so an entry without waiters is kept until the next compare
    /// of all (at least [`ALL_COMPARED_EVERY`] compares): the next wait on it then allocates
    /// nothing.
    idle: bool,
}

/// Compares (about one per applied batch of changes) between two that look at every watched
/// partition rather than at those the state's journal lists as changed.
const ALL_COMPARED_EVERY: u32 = 64;

/// Watched partitions by topic, then partition: a compare looks each topic up once. Hashed with
/// a fast unkeyed hash: topic ids are the cluster's own, and a client cannot make a Fetch wait
/// on a partition the state does not hold (the read answers it with an error at once).
#[derive(Debug, Default)]
struct Registry {
    topics: FxHashMap<TopicId, FxHashMap<i32, Watched>>,
    next_waiter: u64,
    /// How far compares have read the state's journal of changed partitions.
    read_to: Option<JournalPosition>,
    /// Compares since the last that looked at every watched partition.
    compares_since_all: u32,
}

/// Partitions a waiter is told moved, past which it is told only that many did.
const MOVED_LISTED_MAX: usize = 4096;

/// How a waiter is woken: the permit, and which of its partitions moved since it last looked.
#[derive(Debug, Default)]
struct Wake {
    notify: Notify,
    moved: Mutex<Moved>,
}

#[derive(Debug, Default)]
struct Moved {
    partitions: Vec<(TopicId, i32)>,
    /// More moved than [`MOVED_LISTED_MAX`]: the waiter looks at all of its partitions again.
    overflowed: bool,
}

impl Wake {
    fn moved(&self, topic_id: TopicId, partition: i32) {
        let mut moved = self.moved.lock_recovered();
        if moved.partitions.len() < MOVED_LISTED_MAX {
            moved.partitions.push((topic_id, partition));
        } else {
            moved.overflowed = true;
        }
    }
}

/// The partitions waiting reads wait on, on this agent.
#[derive(Debug, Default)]
pub struct PartitionWakeups {
    registry: Mutex<Registry>,
}

impl PartitionWakeups {
    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock_recovered()
    }

    /// Registers a waiting read of `partitions` as they are in `state` (which the read must not
    /// be older than): [`Waiter::woken`] returns once any of them moves from there.
    pub fn wait_on(self: &Arc<Self>, state: &State, partitions: impl IntoIterator<Item = (TopicId, i32)>) -> Waiter {
        self.register(state, partitions.into_iter().map(|(topic, partition)| (topic, partition, None)))
    }

    /// Registers a waiting read of partitions as the read saw them (`Mark::of_read`), however
    /// `state` has moved since: a partition that is no longer as seen wakes the waiter at once,
    /// so the caller need not read again after registering.
    pub fn wait_on_seen(
        self: &Arc<Self>,
        state: &State,
        partitions: impl IntoIterator<Item = (TopicId, i32, Mark)>,
    ) -> Waiter {
        self.register(state, partitions.into_iter().map(|(topic, partition, seen)| (topic, partition, Some(seen))))
    }

    fn register(
        self: &Arc<Self>,
        state: &State,
        partitions: impl IntoIterator<Item = (TopicId, i32, Option<Mark>)>,
    ) -> Waiter {
        let wake = Arc::new(Wake::default());
        let mut registry = self.registry();
        let id = registry.next_waiter;
        registry.next_waiter += 1;
        let mut watched = Vec::new();
        let mut moved = false;
        for (topic_id, partition, seen) in partitions {
            let in_topic = registry.topics.entry(topic_id).or_default();
            let entry = in_topic.entry(partition).or_insert_with(|| Watched {
                mark: mark(state.partition(topic_id, partition)),
                waiters: Vec::new(),
                idle: false,
            });
            entry.idle = false;
            if seen.is_some_and(|seen| entry.mark != Some(seen)) {
                moved = true;
                wake.moved(topic_id, partition);
            }
            if !entry.waiters.iter().any(|(w, _)| *w == id) {
                entry.waiters.push((id, wake.clone()));
                watched.push((topic_id, partition));
            }
        }
        crate::metrics::LONG_POLL_PARTITIONS_REGISTERED.inc_by(watched.len() as u64);
        if moved {
            // Stored as a permit: the first `woken` returns at once.
            wake.notify.notify_one();
        }
        let mut bits: FxHashMap<TopicId, Vec<u64>> = FxHashMap::default();
        for &(topic_id, partition) in &watched {
            // Partition numbers are the state's (a read found them), never negative.
            let Ok(at) = usize::try_from(partition) else { continue };
            let words = bits.entry(topic_id).or_default();
            if words.len() <= at / 64 {
                words.resize(at / 64 + 1, 0);
            }
            words[at / 64] |= 1 << (at % 64);
        }
        Waiter { id, partitions: watched, bits, wake, wakeups: Arc::downgrade(self) }
    }

    /// Wakes the waiters of every watched partition that moved in `state`. Looks at the
    /// partitions the state's journal lists as changed since the last compare when it can (a
    /// flush changes a few hundred of 10,000 watched), at all of them otherwise and every
    /// [`ALL_COMPARED_EVERY`] compares, forgetting then the entries left without waiters.
    pub(crate) fn compare(&self, state: &State) {
        let mut registry = self.registry();
        let changed = registry.read_to.and_then(|at| state.changed.since(at));
        registry.read_to = Some(state.changed.position());
        registry.compares_since_all += 1;
        match changed {
            Some(changed) if registry.compares_since_all < ALL_COMPARED_EVERY => {
                let mut in_topic: Option<(TopicId, Option<&floe_metadata::Topic>)> = None;
                for &(topic_id, partition) in changed {
                    let Some(watched) = registry.topics.get_mut(&topic_id).and_then(|t| t.get_mut(&partition)) else {
                        continue;
                    };
                    let topic = match in_topic {
                        Some((id, topic)) if id == topic_id => topic,
                        _ => {
                            let topic = state.topics.get(&topic_id);
                            in_topic = Some((topic_id, topic));
                            topic
                        }
                    };
                    watched.compare(topic_id, partition, topic);
                }
                #[cfg(debug_assertions)]
                registry.check_compared(state);
            }
            _ => {
                registry.compares_since_all = 0;
                registry.compare_all(state);
            }
        }
    }

    /// Partitions watched now, for tests.
    #[cfg(test)]
    fn watched(&self) -> usize {
        self.registry().topics.values().map(FxHashMap::len).sum()
    }
}

impl Watched {
    /// Wakes the waiters if the partition (of `topic`, if the state still holds it) moved since
    /// the last compare.
    fn compare(&mut self, topic_id: TopicId, partition: i32, topic: Option<&floe_metadata::Topic>) {
        let now =
            mark(topic.and_then(|t| usize::try_from(partition).ok().and_then(|i| t.partitions.get(i).map(|p| &**p))));
        if now != self.mark {
            self.mark = now;
            for (_, wake) in &self.waiters {
                wake.moved(topic_id, partition);
                // Stores a permit if the waiter is between reads, so no wakeup is lost.
                wake.notify.notify_one();
            }
        }
    }
}

impl Registry {
    /// Compares every watched partition, and forgets entries without waiters at this compare
    /// and the one of all before.
    fn compare_all(&mut self, state: &State) {
        self.topics.retain(|topic_id, partitions| {
            let topic = state.topics.get(topic_id);
            partitions.retain(|partition, watched| {
                if watched.waiters.is_empty() {
                    if watched.idle {
                        return false;
                    }
                    watched.idle = true;
                }
                watched.compare(*topic_id, *partition, topic);
                true
            });
            !partitions.is_empty()
        });
    }

    /// In debug builds (every test), that a compare by the journal left no watched partition
    /// moved: a change the journal does not list would leave a fetch waiting its whole
    /// `max_wait_ms`.
    #[cfg(debug_assertions)]
    fn check_compared(&self, state: &State) {
        for (topic_id, partitions) in &self.topics {
            for (partition, watched) in partitions {
                let now = mark(state.partition(*topic_id, *partition));
                assert!(
                    now == watched.mark,
                    "partition {topic_id}/{partition} changed unlisted by the state's journal"
                );
            }
        }
    }
}

/// A registered waiting read; unregistered when dropped.
#[derive(Debug)]
pub struct Waiter {
    id: u64,
    /// Grouped by topic, as registered.
    partitions: Vec<(TopicId, i32)>,
    /// The same partitions as one bit per partition number, by topic: whether a later read's
    /// partitions are all registered, in whatever order it names them.
    bits: FxHashMap<TopicId, Vec<u64>>,
    wake: Arc<Wake>,
    wakeups: Weak<PartitionWakeups>,
}

impl Waiter {
    /// Returns once a partition waited on has moved since registration or the last wakeup.
    pub async fn woken(&self) {
        let _waiting = Waiting::start();
        self.wake.notify.notified().await;
    }

    /// Takes the moves so far and the wakeup they stored, for a waiter kept from one read to the
    /// next (a fetch session's): what they name is looked at anew (`None`: too many to list, so
    /// all may have moved). A move after this wakes it as usual. The wakeup goes first: a move
    /// between the two is then listed here and may wake it once for nothing, never the reverse
    /// (listed nowhere, or taken here with its wakeup left to wake nobody's read of it).
    pub fn take_moves(&self) -> Option<Vec<(TopicId, i32)>> {
        use futures::FutureExt;
        // A stored permit is taken by the first poll; without one, nothing waits.
        let _ = self.wake.notify.notified().now_or_never();
        self.take_moved()
    }

    /// Whether this waiter watches `partitions` (in any order) and as many partitions as they
    /// number: then it watches those and no others, unless they name one twice (then it watches
    /// a few more, which only wake it for nothing).
    pub fn watches(&self, partitions: impl ExactSizeIterator<Item = (TopicId, i32)>) -> bool {
        if partitions.len() != self.partitions.len() {
            return false;
        }
        let mut topic: Option<(TopicId, &[u64])> = None;
        for (topic_id, partition) in partitions {
            let words = match topic {
                Some((id, words)) if id == topic_id => words,
                _ => {
                    let words = self.bits.get(&topic_id).map_or(&[][..], Vec::as_slice);
                    topic = Some((topic_id, words));
                    words
                }
            };
            let Ok(at) = usize::try_from(partition) else { return false };
            if words.get(at / 64).is_none_or(|word| word & (1 << (at % 64)) == 0) {
                return false;
            }
        }
        true
    }

    /// Whether this waiter watches `partition` of `topic_id`.
    pub fn watches_one(&self, topic_id: TopicId, partition: i32) -> bool {
        let (Some(words), Ok(at)) = (self.bits.get(&topic_id), usize::try_from(partition)) else { return false };
        words.get(at / 64).is_some_and(|word| word & (1 << (at % 64)) != 0)
    }

    /// The partitions that moved since registration or the last call (a partition may be named
    /// more than once); `None` when too many did to list, so that all may have.
    pub fn take_moved(&self) -> Option<Vec<(TopicId, i32)>> {
        let mut moved = self.wake.moved.lock_recovered();
        let Moved { partitions, overflowed } = std::mem::take(&mut *moved);
        (!overflowed).then_some(partitions)
    }
}

/// Returns once any of `waiters` was woken (as [`Waiter::woken`]), counted as one read waiting;
/// never without waiters.
pub async fn any_woken(waiters: &[Arc<Waiter>]) {
    if waiters.is_empty() {
        return std::future::pending().await;
    }
    let _waiting = Waiting::start();
    futures::future::select_all(waiters.iter().map(|w| Box::pin(w.wake.notify.notified()))).await;
}

/// One read waiting in [`Waiter::woken`], counted while it waits: a waiter may be kept
/// registered between reads (a fetch session's), when nothing waits on it.
struct Waiting;

impl Waiting {
    fn start() -> Self {
        crate::metrics::LONG_POLLS_WAITING.inc();
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        crate::metrics::LONG_POLLS_WAITING.dec();
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let Some(wakeups) = self.wakeups.upgrade() else { return };
        let mut registry = wakeups.registry();
        for group in self.partitions.chunk_by(|a, b| a.0 == b.0) {
            let Some(in_topic) = registry.topics.get_mut(&group[0].0) else { continue };
            for (_, partition) in group {
                if let Some(watched) = in_topic.get_mut(partition) {
                    watched.waiters.retain(|(w, _)| *w != self.id);
                }
            }
        }
    }
}

/// Compares the watched partitions after every batch of changes the agent's state applies,
/// until the agent is gone.
pub(crate) async fn run(agent: Weak<crate::Agent>) {
    let Some(mut changes) = agent.upgrade().map(|a| a.metadata.subscribe()) else { return };
    while changes.changed().await.is_ok() {
        let Some(agent) = agent.upgrade() else { return };
        agent.wakeups.compare(&agent.metadata.read());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use floe_metadata::Command;

    use super::*;

    fn state_with_two_topics() -> State {
        let mut state = State::default();
        for (i, name) in ["quiet", "busy"].into_iter().enumerate() {
            let create = Command::CreateTopic {
                name: name.into(),
                topic_id: TopicId::from_u128(i as u128 + 1),
                partition_count: 1,
                configs: Default::default(),
            };
            state.apply(i as u64 + 1, create).expect("topic");
        }
        state
    }

    /// Moves the partition's end outside `State::apply`, whose journal would have listed it: as
    /// for a state replaced, a new journal makes the next compare look at every partition.
    fn set_log_end(state: &mut State, topic_id: TopicId, end: i64) {
        std::sync::Arc::make_mut(&mut state.topics.get_mut(&topic_id).expect("topic").partitions[0]).next_offset = end;
        state.changed = Default::default();
    }

    async fn woken_within(waiter: &Waiter, ms: u64) -> bool {
        tokio::time::timeout(Duration::from_millis(ms), waiter.woken()).await.is_ok()
    }

    #[tokio::test]
    async fn a_waiter_wakes_only_when_its_own_partition_moves() {
        let (quiet, busy) = (TopicId::from_u128(1), TopicId::from_u128(2));
        let mut state = state_with_two_topics();
        let wakeups = Arc::new(PartitionWakeups::default());
        let waiter = wakeups.wait_on(&state, [(quiet, 0)]);
        let other = wakeups.wait_on(&state, [(busy, 0), (quiet, 0)]);
        assert_eq!(wakeups.watched(), 2);

        // Another partition moves: only the waiter on it wakes.
        set_log_end(&mut state, busy, 5);
        wakeups.compare(&state);
        assert!(!woken_within(&waiter, 50).await, "woken by a partition it does not wait on");
        assert!(woken_within(&other, 50).await);
        assert_eq!(other.take_moved(), Some(vec![(busy, 0)]), "told which partition moved");
        assert_eq!((other.take_moved(), waiter.take_moved()), (Some(vec![]), Some(vec![])));

        // Its own moves (compared before it waits: the permit is kept).
        set_log_end(&mut state, quiet, 1);
        wakeups.compare(&state);
        assert!(woken_within(&waiter, 50).await);
        // Nothing moved since: no second wakeup.
        wakeups.compare(&state);
        assert!(!woken_within(&waiter, 50).await);

        // Deleted: that wakes it too.
        state.apply(10, Command::DeleteTopic { name: "quiet".into() }).expect("delete");
        wakeups.compare(&state);
        assert!(woken_within(&waiter, 50).await);

        drop(waiter);
        drop(other);
        assert_eq!(wakeups.watched(), 2, "kept a while for the next wait");
        for _ in 0..=2 * ALL_COMPARED_EVERY {
            wakeups.compare(&state);
        }
        assert_eq!(wakeups.watched(), 0, "dropped waiters leave nothing behind");
    }

    /// A kept waiter serves a later read of the same partitions in any order, not one naming a
    /// partition it does not watch or fewer partitions than it does.
    #[test]
    fn a_waiter_watches_its_partitions_in_any_order() {
        let (quiet, busy) = (TopicId::from_u128(1), TopicId::from_u128(2));
        let state = state_with_two_topics();
        let wakeups = Arc::new(PartitionWakeups::default());
        let waiter = wakeups.wait_on(&state, [(quiet, 0), (busy, 0)]);
        assert!(waiter.watches([(busy, 0), (quiet, 0)].into_iter()));
        assert!(!waiter.watches([(quiet, 0)].into_iter()), "fewer");
        assert!(!waiter.watches([(quiet, 0), (busy, 1)].into_iter()), "one it does not watch");
        assert!(!waiter.watches([(quiet, 0), (TopicId::from_u128(3), 0)].into_iter()), "another topic");
        assert!(!waiter.watches([(quiet, 0), (busy, -1)].into_iter()), "a negative partition");
    }

    /// A Fetch registers against what its read saw, not what the state holds by then: a move in
    /// between wakes it at once (it no longer reads again after registering to catch one).
    #[tokio::test]
    async fn a_move_between_the_read_and_the_registration_wakes_at_once() {
        let quiet = TopicId::from_u128(1);
        let mut state = state_with_two_topics();
        let wakeups = Arc::new(PartitionWakeups::default());
        let seen = mark(state.partition(quiet, 0)).expect("partition");

        let unmoved = wakeups.wait_on_seen(&state, [(quiet, 0, seen)]);
        assert!(!woken_within(&unmoved, 50).await, "nothing moved since the read");

        // Moved after the read; the registry's entry (kept by the first waiter) is compared anew.
        set_log_end(&mut state, quiet, 3);
        wakeups.compare(&state);
        assert!(woken_within(&unmoved, 50).await);
        let late = wakeups.wait_on_seen(&state, [(quiet, 0, seen)]);
        assert!(woken_within(&late, 50).await, "registered after a move it did not read");

        // A new entry takes its mark from the state, which has moved past the read.
        drop((unmoved, late));
        for _ in 0..=2 * ALL_COMPARED_EVERY {
            wakeups.compare(&state);
        }
        assert_eq!(wakeups.watched(), 0);
        let fresh = wakeups.wait_on_seen(&state, [(quiet, 0, seen)]);
        assert!(woken_within(&fresh, 50).await);
    }
}
