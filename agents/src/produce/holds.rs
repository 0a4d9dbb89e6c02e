//! Sequence holds: an idempotent producer's later chunks to a partition wait behind its failed
//! one.
//!
//! Flushes upload in parallel and commit in flush order, so one producer's consecutive requests
//! to a partition can sit in different flushes. When a flush fails none of it is committed, but
//! the flushes behind it would be; and while the metadata state holds no sequences of a producer
//! on a partition it takes any first sequence (Kafka's rule for a producer whose state was
//! removed). Sequences 5–9 would then be committed without 0–4, and the retry of 0–4 refused for
//! the gap ever after. So a chunk that fails before metadata decides on it sets a hold on its
//! producer and partition: until the failed chunk is sent again and committed, the producer's
//! chunks after it there are answered with a retriable error instead of being committed. That
//! covers the flushes already in flight, the batches still buffered and requests the client sent
//! before it heard of the failure.
//!
//! Where the state holds the producer's sequences on the partition it refuses a gap itself
//! (`SequenceGap`), so no hold is set or kept there. A hold sees one agent's pipeline only.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use floe_metadata::{ChunkCommit, State};
use floe_storage::TopicPartition;

use crate::limits::{SEQUENCE_HOLD_COUNT_MAX, SEQUENCE_HOLD_DURATION};

/// The producer id and partition a hold is on.
type HoldKey = (i64, TopicPartition);

/// What holds need of one chunk of a flush; only idempotent and transactional producers' chunks
/// have one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ProducerChunk {
    pub(super) producer_id: i64,
    pub(super) producer_epoch: i16,
    pub(super) topic_partition: TopicPartition,
    pub(super) first_sequence: i32,
}

impl ProducerChunk {
    pub(super) fn of(chunk: &ChunkCommit) -> Option<Self> {
        let producer = chunk.producer?;
        let first = chunk.batches.first()?;
        Some(Self {
            producer_id: producer.producer_id,
            producer_epoch: producer.producer_epoch,
            topic_partition: TopicPartition { topic_id: chunk.topic_id, partition: chunk.partition },
            first_sequence: first.base_sequence,
        })
    }

    fn key(&self) -> HoldKey {
        (self.producer_id, self.topic_partition)
    }
}

/// What became of one chunk of a flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ChunkFate {
    /// Metadata appended it, or answered it as a duplicate of a chunk it had appended.
    Committed,
    /// Metadata refused it (a sequence gap, a fenced epoch, its topic deleted, ...).
    Refused,
    /// It failed before metadata decided on it: the upload failed or ran past the deadline, or
    /// the commit was refused as a whole or went unanswered (then it may still land).
    Undecided,
    /// Held back behind an earlier failed chunk; never proposed.
    Held,
}

#[derive(Clone, Copy, Debug)]
struct Hold {
    producer_epoch: i16,
    /// The failed chunk's first sequence: the chunk that must be committed first.
    first_sequence: i32,
    /// The failed chunk's last failure.
    since: Instant,
}

/// The committer's holds, by producer and partition. Bounded by [`SEQUENCE_HOLD_COUNT_MAX`];
/// a hold ends when its chunk is committed, its producer moves to a new epoch, the state gets
/// the producer's sequences on the partition, or after [`SEQUENCE_HOLD_DURATION`].
#[derive(Debug, Default)]
pub(super) struct SequenceHolds {
    holds: HashMap<HoldKey, Hold>,
}

impl SequenceHolds {
    /// For each chunk of a flush, in commit order, whether it is held back. Drops the holds the
    /// chunks show are over.
    pub(super) fn held(
        &mut self,
        chunks: &[Option<ProducerChunk>],
        sequenced: impl Fn(&ProducerChunk) -> bool,
        now: Instant,
    ) -> Vec<bool> {
        // A held chunk's retry takes the producer's chunks after it in the same commit along:
        // the state applies a commit's chunks in order, so they land only after it.
        let mut retried: HashSet<HoldKey> = HashSet::new();
        let mut held = Vec::with_capacity(chunks.len());
        for chunk in chunks {
            let Some(chunk) = chunk else {
                held.push(false);
                continue;
            };
            let key = chunk.key();
            let Some(hold) = self.live(key, now) else {
                held.push(false);
                continue;
            };
            if chunk.producer_epoch > hold.producer_epoch || sequenced(chunk) {
                // A new epoch starts again at sequence 0, which the state checks; it also checks
                // every chunk once it holds the producer's sequences here.
                self.holds.remove(&key);
                held.push(false);
            } else if chunk.producer_epoch < hold.producer_epoch || retried.contains(&key) {
                // An older epoch is the state's to fence.
                held.push(false);
            } else if chunk.first_sequence == hold.first_sequence {
                retried.insert(key);
                held.push(false);
            } else {
                // A chunk before the failed one must land first anyway: once it has, the state
                // holds the producer's sequences and guards the rest.
                held.push(follows(chunk.first_sequence, hold.first_sequence));
            }
        }
        held
    }

    /// Takes in what became of a flush's chunks (`fates`, one per chunk). A chunk that failed
    /// undecided sets the hold on its producer and partition, or renews it, unless an earlier
    /// chunk's hold is there; a held chunk's retry, once committed, lifts it. A refused retry
    /// leaves it: whatever refused the chunk may not refuse the ones after it.
    pub(super) fn settle(
        &mut self,
        chunks: &[Option<ProducerChunk>],
        fates: &[ChunkFate],
        sequenced: impl Fn(&ProducerChunk) -> bool,
        now: Instant,
    ) {
        for (chunk, fate) in chunks.iter().zip(fates) {
            let Some(chunk) = chunk else { continue };
            let key = chunk.key();
            let hold = self.live(key, now);
            match fate {
                ChunkFate::Held | ChunkFate::Refused => {}
                ChunkFate::Committed => {
                    if hold.is_some_and(|h| {
                        h.producer_epoch == chunk.producer_epoch && h.first_sequence == chunk.first_sequence
                    }) {
                        self.holds.remove(&key);
                    }
                }
                ChunkFate::Undecided => {
                    let earlier_failed = hold.is_some_and(|h| {
                        h.producer_epoch > chunk.producer_epoch
                            || (h.producer_epoch == chunk.producer_epoch
                                && follows(chunk.first_sequence, h.first_sequence))
                    });
                    if earlier_failed {
                        continue;
                    }
                    if sequenced(chunk) {
                        self.holds.remove(&key);
                    } else {
                        let hold = Hold {
                            producer_epoch: chunk.producer_epoch,
                            first_sequence: chunk.first_sequence,
                            since: now,
                        };
                        self.insert(key, hold);
                    }
                }
            }
        }
    }

    /// The hold on `key`, unless it has run out (it is then dropped).
    fn live(&mut self, key: HoldKey, now: Instant) -> Option<Hold> {
        let hold = *self.holds.get(&key)?;
        if now.saturating_duration_since(hold.since) < SEQUENCE_HOLD_DURATION {
            return Some(hold);
        }
        self.holds.remove(&key);
        None
    }

    fn insert(&mut self, key: HoldKey, hold: Hold) {
        if self.holds.len() >= SEQUENCE_HOLD_COUNT_MAX && !self.holds.contains_key(&key) {
            self.holds.retain(|_, h| hold.since.saturating_duration_since(h.since) < SEQUENCE_HOLD_DURATION);
            if self.holds.len() >= SEQUENCE_HOLD_COUNT_MAX
                && let Some(oldest) = self.holds.iter().min_by_key(|(_, h)| h.since).map(|(k, _)| *k)
            {
                let (producer_id, topic_partition) = oldest;
                crate::log_limited!(
                    tracing::Level::WARN,
                    producer_id,
                    ?topic_partition,
                    "sequence holds are full; dropping the oldest"
                );
                self.holds.remove(&oldest);
            }
        }
        self.holds.insert(key, hold);
    }
}

/// Whether `state` holds sequences of the chunk's producer on its partition: it then refuses a
/// gap itself.
pub(super) fn sequenced(state: &State, chunk: &ProducerChunk) -> bool {
    let TopicPartition { topic_id, partition } = chunk.topic_partition;
    state.producers.get(&chunk.producer_id).is_some_and(|record| record.partitions.contains_key(&(topic_id, partition)))
}

/// Whether `sequence` comes after `held`. Sequences wrap past `i32::MAX` to 0, as in Kafka; a
/// producer has far fewer than 2^30 of them in flight.
fn follows(sequence: i32, held: i32) -> bool {
    let distance = (i64::from(sequence) - i64::from(held)).rem_euclid(1_i64 << 31);
    distance > 0 && distance < (1_i64 << 30)
}

#[cfg(test)]
mod tests;
