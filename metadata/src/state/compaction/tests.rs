//! Compaction swaps: compare-and-set on the run, references moved to the new object.

use super::super::tests::{check_invariants, create, run, run as run_commands, topic_id};
use crate::command::{
    BatchSummary, ChunkCommit, Command, CommandError, CompactedChunk, CompactedObject, CompactedRun, Outcome,
    SegmentCommit,
};
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

/// A flush of `records` offsets into one 100-byte chunk of `partition` of topic 0.
fn write_to(key: &str, partition: i32, records: u32) -> Command {
    let Command::CommitSegment(mut commit) = write(key, records) else { unreachable!("write commits a segment") };
    commit.chunks[0].partition = partition;
    Command::CommitSegment(commit)
}

/// The run of a partition's first `n` entries as a format-14 compactor names it, at `byte_start`
/// of its object (100 bytes per entry).
fn chunk_of(state: &State, partition: i32, n: usize, byte_start: u64) -> CompactedChunk {
    let log = state.partition(topic_id(0), partition).expect("exists");
    let entries: Vec<_> = log.index.iter().take(n).collect();
    CompactedChunk {
        topic_id: topic_id(0),
        partition,
        base_offset: entries[0].base_offset,
        last_offset: entries[n - 1].last_offset,
        entries: n as u32,
        objects_sum: entries.iter().filter_map(|e| e.object_id()).fold(0, u64::wrapping_add),
        byte_start,
        byte_len: 100 * n as u32,
        crc32c: 7,
    }
}

fn two_partitions() -> State {
    let (state, outcomes) = run(vec![
        Command::SetFormat { format: 14 },
        create("a", 0, 2),
        write_to("o1", 0, 2),
        write_to("o2", 1, 1),
        write_to("o3", 0, 3),
        write_to("o4", 1, 4),
        write_to("o5", 0, 1),
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    state
}

fn entries_of(state: &State, partition: i32) -> Vec<(i64, i64, Option<u64>)> {
    let log = state.partition(topic_id(0), partition).expect("exists");
    log.index.iter().map(|e| (e.base_offset, e.last_offset, e.object_id())).collect()
}

#[test]
fn runs_of_two_partitions_share_one_object_and_each_becomes_one_entry() {
    let mut state = two_partitions();
    let object = CompactedObject {
        key: "c1".into(),
        object_bytes: 424,
        runs: vec![chunk_of(&state, 0, 2, 0), chunk_of(&state, 1, 2, 200)],
    };
    assert_eq!(state.apply(10, Command::CompactRuns(object)), Ok(Outcome::RunsCompacted { swapped: 2, conflicts: 0 }));
    check_invariants(&state);
    let id = state.objects.iter().find(|(_, o)| o.key == "c1").map(|(id, o)| (*id, o.reference_count));
    let (id, references) = id.expect("the object is listed");
    assert_eq!(references, 2, "one reference per swapped run");
    assert_eq!(entries_of(&state, 0), vec![(0, 4, Some(id)), (5, 5, Some(4))], "offsets do not change");
    assert_eq!(entries_of(&state, 1), vec![(0, 4, Some(id))]);
    let unreferenced: Vec<&str> = state.unreferenced_objects().map(|(_, k)| k).collect();
    assert_eq!(unreferenced, vec!["o1", "o2", "o3", "o4"]);
    let log = state.partition(topic_id(0), 1).expect("exists");
    assert!(matches!(log.index[0].data, EntryData::Chunk { byte_start: 200, byte_len: 200, crc32c: 7, .. }));
    assert_eq!((log.index_bytes, log.index[0].timestamp_max), (200, 4));
}

#[test]
fn a_run_that_changed_is_skipped_and_the_others_are_swapped() {
    let state = two_partitions();
    let good = chunk_of(&state, 1, 2, 200);
    let changes: [fn(&mut CompactedChunk); 5] =
        [|c| c.objects_sum += 1, |c| c.entries = 3, |c| c.last_offset -= 1, |c| c.base_offset = 1, |c| c.partition = 9];
    for change in changes {
        let mut state = state.clone();
        let mut stale = chunk_of(&state, 0, 2, 0);
        change(&mut stale);
        let object = CompactedObject { key: "c1".into(), object_bytes: 424, runs: vec![stale, good.clone()] };
        let outcome = state.apply(10, Command::CompactRuns(object));
        assert_eq!(outcome, Ok(Outcome::RunsCompacted { swapped: 1, conflicts: 1 }));
        check_invariants(&state);
        assert_eq!(entries_of(&state, 0).len(), 3, "partition 0 is as it was");
        assert_eq!(entries_of(&state, 1).len(), 1);
        assert!(state.objects.values().any(|o| o.key == "c1" && o.reference_count == 1));
    }
    // Retention moved partition 0's start past the run: nothing matches, no object is listed.
    let mut state = state.clone();
    let stale = chunk_of(&state, 0, 2, 0);
    let _ = state.apply(10, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 2 });
    let before = state.clone();
    let object = CompactedObject { key: "c1".into(), object_bytes: 424, runs: vec![stale] };
    let outcome = state.apply(11, Command::CompactRuns(object));
    assert_eq!(outcome, Ok(Outcome::RunsCompacted { swapped: 0, conflicts: 1 }));
    assert!(state.objects.values().all(|o| o.key != "c1"), "an object no run kept is not listed");
    assert_eq!((state.next_object_id, entries_of(&state, 0)), (before.next_object_id, entries_of(&before, 0)));
}

#[test]
fn bad_compacted_objects_are_refused_whole() {
    let state = two_partitions();
    let run = chunk_of(&state, 0, 2, 0);
    let object = |key: &str, runs: Vec<CompactedChunk>| CompactedObject { key: key.into(), object_bytes: 424, runs };
    let mut past_end = run.clone();
    past_end.byte_start = 400;
    let mut single = run.clone();
    single.entries = 1;
    // Within each run's limit, past the command's: 101 runs of 10,000 entries.
    let mut long = run.clone();
    long.entries = crate::limits::COMPACTION_RUN_ENTRIES_MAX as u32;
    let too_much =
        vec![long; crate::limits::COMPACTED_OBJECT_ENTRIES_MAX / crate::limits::COMPACTION_RUN_ENTRIES_MAX + 1];
    let bad = [
        object("c1", vec![]),
        object("", vec![run.clone()]),
        object("o1", vec![run.clone()]),
        object("c1", vec![run.clone(), past_end]),
        object("c1", vec![single]),
        object("c1", too_much),
    ];
    for command in bad {
        let mut state = state.clone();
        let outcome = state.apply(10, Command::CompactRuns(command.clone()));
        assert!(matches!(outcome, Err(CommandError::InvalidCommit(_))), "{command:?}: {outcome:?}");
        assert_eq!(entries_of(&state, 0), entries_of(&two_partitions(), 0));
    }
    // Before every voter applies format 14, no node would read it.
    let (mut old, _) = run_commands(vec![create("a", 0, 2), write_to("o1", 0, 2), write_to("o3", 0, 3)]);
    let run = chunk_of(&old, 0, 2, 0);
    assert!(matches!(
        old.apply(10, Command::CompactRuns(object("c1", vec![run]))),
        Err(CommandError::InvalidCommit(_))
    ));
}
