//! Planning a round: which runs are found, and how they share objects.

use std::collections::BTreeMap;
use std::time::Duration;

use floe_metadata::limits::COMPACTION_RUN_ENTRIES_MAX;
use floe_metadata::{
    BatchSummary, ChunkCommit, Command, CompactedChunk, CompactedObject, Outcome, SegmentCommit, State,
};

use super::{CompactionConfig, Run, find_runs, objects_of};

const TOPIC: uuid::Uuid = uuid::Uuid::from_u128(7);

fn config(target_object_bytes: u64) -> CompactionConfig {
    CompactionConfig {
        interval: Duration::from_secs(1),
        small_chunk_bytes: 1 << 20,
        min_run: 4,
        crowded_entries: 1_000_000,
        target_object_bytes,
    }
}

/// A topic of `partitions` partitions and, in `flushes` flushes, one chunk of `chunk_bytes` for
/// each of them (flush objects, as the produce path writes them).
fn state_of(partitions: i32, flushes: u32, chunk_bytes: u32) -> State {
    let mut state = State::default();
    apply(&mut state, Command::InitCluster { cluster_id: "compaction".into() });
    apply(&mut state, Command::SetFormat { format: 14 });
    let create = Command::CreateTopic {
        name: "t".into(),
        topic_id: TOPIC,
        partition_count: partitions,
        configs: BTreeMap::new(),
    };
    apply(&mut state, create);
    flush(&mut state, partitions, 0..flushes, chunk_bytes);
    state
}

fn apply(state: &mut State, command: Command) -> Outcome {
    let index = state.applied_index + 1;
    state.apply(index, command).expect("applies")
}

/// Flushes `flushes` (their numbers name their objects), each one chunk per partition.
fn flush(state: &mut State, partitions: i32, flushes: std::ops::Range<u32>, chunk_bytes: u32) {
    for flush in flushes {
        let chunks = (0..partitions)
            .map(|p| ChunkCommit {
                topic_id: TOPIC,
                partition: p,
                byte_start: u64::from(chunk_bytes) * p as u64,
                byte_len: chunk_bytes,
                crc32c: flush,
                batches: vec![BatchSummary { offset_count: 1, timestamp_max: i64::from(flush), base_sequence: -1 }],
                producer: None,
                uncompressed_bytes: u64::from(chunk_bytes),
            })
            .collect();
        let object_bytes = u64::from(chunk_bytes) * partitions as u64;
        let key = format!("segments/{flush:08}.seg");
        apply(state, Command::CommitSegment(SegmentCommit { key, object_bytes, chunks }));
    }
}

/// Commits `run` as compacted into an object of its own, as the compactor does.
fn commit(state: &mut State, run: &Run, key: &str) {
    let bytes = u32::try_from(run.bytes()).expect("small");
    let chunk = CompactedChunk {
        topic_id: run.topic_id,
        partition: run.partition,
        base_offset: run.entries[0].base_offset,
        last_offset: run.entries[run.entries.len() - 1].last_offset,
        entries: u32::try_from(run.entries.len()).expect("small"),
        objects_sum: run.entries.iter().fold(0u64, |sum, e| sum.wrapping_add(e.object_id)),
        byte_start: 0,
        byte_len: bytes,
        crc32c: 1,
    };
    let object = CompactedObject { key: key.into(), object_bytes: u64::from(bytes) + 100, runs: vec![chunk] };
    assert_eq!(apply(state, Command::CompactRuns(object)), Outcome::RunsCompacted { swapped: 1, conflicts: 0 });
}

/// Each run's (partition, first offset, last offset, entries).
fn shape(runs: &[Run]) -> Vec<(i32, i64, i64, usize)> {
    runs.iter()
        .map(|r| (r.partition, r.entries[0].base_offset, r.entries[r.entries.len() - 1].last_offset, r.entries.len()))
        .collect()
}

#[test]
fn every_run_of_a_partition_is_found_not_only_the_first() {
    // 35 chunks of 100 bytes, objects of at most 1,000 bytes: three runs of ten and one of five.
    let state = state_of(1, 35, 100);
    let runs = find_runs(&state, &config(1_000));
    assert_eq!(shape(&runs), vec![(0, 0, 9, 10), (0, 10, 19, 10), (0, 20, 29, 10), (0, 30, 34, 5)]);
}

#[test]
fn a_run_holds_at_most_the_entries_one_compaction_may_replace() {
    let flushes = u32::try_from(COMPACTION_RUN_ENTRIES_MAX).expect("fits") + 5;
    let state = state_of(1, flushes, 10);
    let runs = find_runs(&state, &config(1 << 30));
    assert_eq!(
        shape(&runs),
        vec![
            (0, 0, COMPACTION_RUN_ENTRIES_MAX as i64 - 1, COMPACTION_RUN_ENTRIES_MAX),
            (0, COMPACTION_RUN_ENTRIES_MAX as i64, i64::from(flushes) - 1, 5)
        ]
    );
}

#[test]
fn runs_share_objects_up_to_the_target_size_once_the_cluster_reads_them() {
    // Eight partitions of six 100-byte chunks: eight runs of 600 bytes.
    let state = state_of(8, 6, 100);
    let sizes = |objects: &[Vec<Run>]| objects.iter().map(Vec::len).collect::<Vec<_>>();
    let shared = objects_of(find_runs(&state, &config(2_000)), true, 2_000);
    assert_eq!(sizes(&shared), vec![3, 3, 2], "at most 2,000 bytes each");
    let alone = objects_of(find_runs(&state, &config(2_000)), false, 2_000);
    assert_eq!(sizes(&alone), vec![1; 8], "one object per run before format 14");
}

#[test]
fn a_merged_chunk_is_merged_again_only_with_three_times_its_size() {
    let mut state = state_of(1, 16, 100);
    let runs = find_runs(&state, &config(1 << 20));
    assert_eq!(shape(&runs), vec![(0, 0, 15, 16)]);
    commit(&mut state, &runs[0], "c1.compacted.seg");
    // 1,600 merged bytes, then 1,600 fresh: the fresh ones alone.
    flush(&mut state, 1, 16..32, 100);
    let runs = find_runs(&state, &config(1 << 20));
    assert_eq!(shape(&runs), vec![(0, 16, 31, 16)]);
    // 1,600 merged bytes, then 4,800 fresh: all of it.
    flush(&mut state, 1, 32..64, 100);
    let runs = find_runs(&state, &config(1 << 20));
    assert_eq!(shape(&runs), vec![(0, 0, 63, 49)]);
}

#[test]
fn a_crowded_index_merges_runs_shorter_than_min_run() {
    // 300 partitions of three entries each: under `min_run`, until the state holds more
    // entries than the crowded bound.
    let state = state_of(300, 3, 100);
    assert!(find_runs(&state, &config(1 << 20)).is_empty());
    let crowded = CompactionConfig { crowded_entries: 899, ..config(1 << 20) };
    assert_eq!(find_runs(&state, &crowded).len(), 300);
}
