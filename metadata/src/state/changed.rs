//! The partitions the applied commands changed, newest last: a reader that follows the state
//! (an agent's wakeups of waiting fetches) looks at those after each batch of changes instead of
//! comparing every partition it watches, 10,000 of them for one consumer of a large topic. It
//! also counts changes of who may read what (ACLs), for a reader that skips partitions it
//! authorized before (an agent's fetch sessions).
//!
//! Not part of the state: never stored, never compared, and a copy of the state starts a
//! journal of its own, which a reader of the old one cannot follow: it looks at everything once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use super::TopicId;

/// Changes listed one by one; a reader further behind looks at everything. A flush at 10,000
/// partitions changes a few hundred, and a reader reads after each batch applied.
const CHANGED_PARTITIONS_LISTED_MAX: usize = 65_536;

/// Journal ids, process-wide: unique per journal, so a reader notices a replaced state. Not a
/// replicated value: no two replicas need agree on it.
static NEXT_JOURNAL: AtomicU64 = AtomicU64::new(1);

/// The journal of changed partitions of one [`super::State`].
#[derive(Debug)]
pub struct ChangedPartitions {
    journal: u64,
    /// Changes recorded since the journal began; `recent` lists the last of them.
    recorded: u64,
    recent: VecDeque<(TopicId, i32)>,
    /// `recorded` after the last change not listed partition by partition (a topic created or
    /// deleted, partitions added, all of a topic's partitions changed at once).
    everything_at: u64,
    /// Changes of ACLs (created, deleted, a tenant's deleted with it).
    access: u64,
}

/// How far a reader has read a journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JournalPosition {
    journal: u64,
    recorded: u64,
    access: u64,
}

impl ChangedPartitions {
    pub(super) fn partition(&mut self, topic_id: TopicId, partition: i32) {
        if self.recent.len() == CHANGED_PARTITIONS_LISTED_MAX {
            self.recent.pop_front();
        }
        self.recent.push_back((topic_id, partition));
        self.recorded += 1;
    }

    /// A change a reader must look at every partition for.
    pub(super) fn everything(&mut self) {
        self.recorded += 1;
        self.everything_at = self.recorded;
    }

    /// A change of who may read what: a reader that authorized partitions before must again.
    pub(super) fn access(&mut self) {
        self.access += 1;
    }

    /// Where the journal is now.
    pub fn position(&self) -> JournalPosition {
        JournalPosition { journal: self.journal, recorded: self.recorded, access: self.access }
    }

    /// Whether ACLs may have changed since `read_to`: they did, or the journal is another
    /// state's.
    pub fn access_changed_since(&self, read_to: JournalPosition) -> bool {
        read_to.journal != self.journal || read_to.access != self.access
    }

    /// The partitions changed since `read_to` (a partition may be named more than once), or
    /// `None` when the reader must look at all of them: the journal is another state's, a
    /// change since was not listed, or the listed ones since were dropped.
    pub fn since(&self, read_to: JournalPosition) -> Option<impl Iterator<Item = &(TopicId, i32)>> {
        if read_to.journal != self.journal || read_to.recorded < self.everything_at || read_to.recorded > self.recorded
        {
            return None;
        }
        let behind = usize::try_from(self.recorded - read_to.recorded).ok()?;
        let skip = self.recent.len().checked_sub(behind)?;
        Some(self.recent.iter().skip(skip))
    }
}

impl Default for ChangedPartitions {
    /// A new journal: a reader of any other looks at everything.
    fn default() -> Self {
        Self {
            journal: NEXT_JOURNAL.fetch_add(1, Ordering::Relaxed),
            recorded: 0,
            recent: VecDeque::new(),
            everything_at: 0,
            access: 0,
        }
    }
}

impl Clone for ChangedPartitions {
    /// A copy of the state starts its own journal.
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for ChangedPartitions {
    /// Not part of the state: two states are equal whatever their journals.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ChangedPartitions {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_the_changes_since_its_position_or_is_told_to_look_at_everything() {
        let topic = TopicId::from_u128(1);
        let mut journal = ChangedPartitions::default();
        let start = journal.position();
        journal.partition(topic, 3);
        journal.partition(topic, 4);
        let listed = |at| journal.since(at).map(|c| c.map(|&(_, p)| p).collect::<Vec<_>>());
        assert_eq!(listed(start), Some(vec![3, 4]));
        let read = journal.position();
        assert_eq!(listed(read), Some(vec![]), "nothing since");

        journal.partition(topic, 5);
        assert_eq!(journal.since(read).map(|c| c.count()), Some(1));
        journal.everything();
        assert!(journal.since(read).is_none(), "a change not listed");
        let after = journal.position();
        journal.partition(topic, 6);
        assert_eq!(journal.since(after).map(|c| c.count()), Some(1), "listed again after it");

        let copy = journal.clone();
        assert!(copy.since(after).is_none(), "another journal");
        let behind = journal.position();
        for p in 0..=CHANGED_PARTITIONS_LISTED_MAX as i32 {
            journal.partition(topic, p);
        }
        assert!(journal.since(behind).is_none(), "dropped from the list");
        assert!(journal.since(JournalPosition { recorded: u64::MAX, ..behind }).is_none(), "ahead of it");
    }

    #[test]
    fn a_reader_is_told_when_acls_changed_since_its_position() {
        let mut journal = ChangedPartitions::default();
        let read = journal.position();
        journal.partition(TopicId::from_u128(1), 0);
        assert!(!journal.access_changed_since(read), "a partition's change is not one of ACLs");
        journal.access();
        assert!(journal.access_changed_since(read));
        assert!(!journal.access_changed_since(journal.position()));
        assert!(journal.clone().access_changed_since(journal.position()), "another journal");
    }
}
