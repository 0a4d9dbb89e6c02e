//! Compaction swaps: compare-and-set on the run, references moved to the new object.

use super::super::tests::{create, run, topic_id};
use crate::command::{BatchSummary, ChunkCommit, Command, CommandError, CompactedRun, Outcome, SegmentCommit};
use crate::state::{EntryData, State};

/// A flush of `records` offsets into one 100-byte chunk of partition 0 of topic 0.
pub(in crate::state) fn write(key: &str, records: u32) -> Command {
    Command::CommitSegment(SegmentCommit {
        key: key.into(),
        object_bytes: 124,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition: 0,
            byte_start: 0,
            byte_len: 100,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: records, timestamp_max: i64::from(records), base_sequence: -1 }],
            producer: None,
            uncompressed_bytes: 300,
        }],
    })
}

/// The run of the partition's first `n` entries, as a compactor would read it.
fn run_of(state: &State, n: usize, key: &str) -> CompactedRun {
    let log = state.partition(topic_id(0), 0).expect("exists");
    let replaced: Vec<(i64, i64, u64)> =
        log.index.iter().take(n).map(|e| (e.base_offset, e.last_offset, e.object_id().expect("chunk"))).collect();
    CompactedRun {
        topic_id: topic_id(0),
        partition: 0,
        replaced,
        key: key.into(),
        object_bytes: 100 * n as u64 + 24,
        byte_start: 0,
        byte_len: 100 * n as u32,
        crc32c: 9,
    }
}

pub(in crate::state) fn index(state: &State) -> Vec<crate::state::IndexEntry> {
    state.partition(topic_id(0), 0).map(|p| p.index.iter().cloned().collect()).unwrap_or_default()
}

#[test]
fn a_run_becomes_one_entry_in_a_new_object_and_the_old_objects_lose_their_references() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let compacted = run_of(&state, 2, "c1");
    assert_eq!(state.apply(10, Command::CompactChunks(compacted.clone())), Ok(Outcome::Done));
    let log = state.partition(topic_id(0), 0).expect("exists");
    let entries: Vec<(i64, i64)> = log.index.iter().map(|e| (e.base_offset, e.last_offset)).collect();
    assert_eq!(entries, vec![(0, 4), (5, 5)], "offsets do not change");
    assert!(matches!(log.index[0].data, EntryData::Chunk { byte_len: 200, crc32c: 9, .. }));
    assert_eq!(log.index[0].timestamp_max, 3);
    assert_eq!(log.index_bytes, 300);
    let unreferenced: Vec<&str> = state.unreferenced_objects().map(|(_, k)| k).collect();
    assert_eq!(unreferenced, vec!["o1", "o2"]);
    // The same swap again (a retried proposal) is refused and changes nothing.
    let before = state.clone();
    assert!(state.apply(11, Command::CompactChunks(compacted)).is_err());
    assert_eq!(index(&state), index(&before));
}

#[test]
fn a_run_changed_by_retention_is_not_swapped() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let compacted = run_of(&state, 2, "c1");
    let _ = state.apply(10, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 2 });
    assert_eq!(state.apply(11, Command::CompactChunks(compacted)), Err(CommandError::CompactionConflict));
    assert!(state.objects.values().all(|o| o.key != "c1"), "a failed swap adds no object");
}

#[test]
fn bad_compactions_are_refused() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3)]);
    let mut short = run_of(&state, 2, "c1"); // a chunk past the end of its object
    short.byte_len = 500;
    assert!(matches!(state.apply(10, Command::CompactChunks(short)), Err(CommandError::InvalidCommit(_))));
    let reused = run_of(&state, 2, "o1");
    assert!(matches!(state.apply(11, Command::CompactChunks(reused)), Err(CommandError::InvalidCommit(_))));
    let single = run_of(&state, 1, "c2");
    assert!(matches!(state.apply(12, Command::CompactChunks(single)), Err(CommandError::InvalidCommit(_))));
}

#[test]
fn a_recompressed_run_changes_the_partition_size() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let mut smaller = run_of(&state, 2, "c1");
    smaller.byte_len = 120;
    assert_eq!(state.apply(10, Command::CompactChunks(smaller)), Ok(Outcome::Done));
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.index_bytes), Some(220));
}
