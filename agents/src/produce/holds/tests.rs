use std::time::{Duration, Instant};

use super::*;

const PRODUCER: i64 = 7;

fn chunk(producer_id: i64, producer_epoch: i16, partition: i32, first_sequence: i32) -> Option<ProducerChunk> {
    let topic_partition = TopicPartition { topic_id: uuid::Uuid::nil(), partition };
    Some(ProducerChunk { producer_id, producer_epoch, topic_partition, first_sequence })
}

/// The producer's chunk to partition 0 at epoch 0, from `first_sequence`.
fn at(first_sequence: i32) -> Option<ProducerChunk> {
    chunk(PRODUCER, 0, 0, first_sequence)
}

fn unsequenced(_: &ProducerChunk) -> bool {
    false
}

/// Which of one flush's chunks are held back now.
fn check(holds: &mut SequenceHolds, chunks: &[Option<ProducerChunk>], expected: &[bool]) {
    assert_eq!(holds.held(chunks, unsequenced, Instant::now()), expected, "{chunks:?}");
}

/// One flush's chunks, all answered alike.
fn settle(holds: &mut SequenceHolds, chunks: &[Option<ProducerChunk>], fate: ChunkFate) {
    holds.settle(chunks, &vec![fate; chunks.len()], unsequenced, Instant::now());
}

#[test]
fn a_failed_chunk_holds_back_the_producers_later_chunks_until_its_retry_is_committed() {
    let mut holds = SequenceHolds::default();
    check(&mut holds, &[at(0), at(5)], &[false, false]);
    settle(&mut holds, &[at(0)], ChunkFate::Undecided);
    // The flush behind it, plain batches and other partitions' chunks along.
    check(&mut holds, &[None, at(5), chunk(PRODUCER, 0, 1, 5)], &[false, true, false]);
    settle(&mut holds, &[at(5)], ChunkFate::Held);
    check(&mut holds, &[at(10)], &[true]);
    // The retry takes the chunks after it in the same commit along, not the ones before it.
    check(&mut holds, &[at(5), at(0), at(5)], &[true, false, false]);
    // Failing again or refused, the retry keeps the hold; committed, it lifts it.
    settle(&mut holds, &[at(0), at(5)], ChunkFate::Undecided);
    check(&mut holds, &[at(5)], &[true]);
    settle(&mut holds, &[at(0)], ChunkFate::Refused);
    check(&mut holds, &[at(5)], &[true]);
    settle(&mut holds, &[at(0)], ChunkFate::Committed);
    check(&mut holds, &[at(5)], &[false]);
}

#[test]
fn a_hold_is_one_producers_on_one_partition_and_ends_with_a_new_epoch_or_its_sequences() {
    let mut holds = SequenceHolds::default();
    settle(&mut holds, &[at(0)], ChunkFate::Undecided);
    check(&mut holds, &[chunk(PRODUCER + 1, 0, 0, 5), chunk(PRODUCER, 0, 1, 5)], &[false, false]);
    // A bumped epoch starts again at 0 and ends the hold.
    check(&mut holds, &[chunk(PRODUCER, 1, 0, 0), at(5)], &[false, false]);
    // Once the state holds the producer's sequences here it refuses a gap itself.
    settle(&mut holds, &[at(0)], ChunkFate::Undecided);
    assert_eq!(holds.held(&[at(5)], |_| true, Instant::now()), [false]);
    check(&mut holds, &[at(5)], &[false]);
    // Nor is a hold set then.
    holds.settle(&[at(0)], &[ChunkFate::Undecided], |_| true, Instant::now());
    check(&mut holds, &[at(5)], &[false]);
}

#[test]
fn the_earliest_failed_chunk_is_the_one_held_for_and_a_hold_runs_out() {
    let mut holds = SequenceHolds::default();
    settle(&mut holds, &[at(5)], ChunkFate::Undecided);
    // A later failure leaves the hold on the earlier chunk.
    settle(&mut holds, &[at(10)], ChunkFate::Undecided);
    check(&mut holds, &[at(10)], &[true]);
    // A chunk before the held one goes first; failing, it takes the hold over.
    check(&mut holds, &[at(0)], &[false]);
    settle(&mut holds, &[at(0)], ChunkFate::Undecided);
    check(&mut holds, &[at(5)], &[true]);
    let later = Instant::now() + SEQUENCE_HOLD_DURATION + Duration::from_secs(1);
    assert_eq!(holds.held(&[at(5)], unsequenced, later), [false]);
    check(&mut holds, &[at(5)], &[false]);
}

#[test]
fn sequences_follow_each_other_across_the_wrap() {
    assert!(follows(5, 0));
    assert!(!follows(0, 5));
    assert!(!follows(5, 5));
    assert!(follows(0, i32::MAX));
    assert!(!follows(i32::MAX, 0));
}
