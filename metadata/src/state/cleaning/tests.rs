//! Key compaction swaps: tiling, compare-and-set, references, and the entries never replaced.

use super::super::compaction::tests::{index, write};
use super::super::tests::{check_invariants, create, run, topic_id};
use crate::command::{
    BatchSummary, ChunkCommit, ChunkProducer, CleanedData, CleanedEntry, CleanedRange, Command, CommandError, Outcome,
    ProducerIdEpoch, SegmentCommit,
};
use crate::state::{EntryData, State};

/// The partition's first `n` entries as a compactor read them, replaced by `entries`.
fn range_of(state: &State, n: usize, object: Option<(&str, u64)>, entries: Vec<CleanedEntry>) -> CleanedRange {
    let log = state.partition(topic_id(0), 0).expect("exists");
    CleanedRange {
        topic_id: topic_id(0),
        partition: 0,
        replaced: log.index.iter().take(n).map(|e| (e.base_offset, e.last_offset, e.object_id())).collect(),
        object: object.map(|(k, size)| (k.to_owned(), size)),
        entries,
    }
}

fn chunk(base_offset: i64, last_offset: i64, byte_start: u64, byte_len: u32) -> CleanedEntry {
    CleanedEntry {
        base_offset,
        last_offset,
        timestamp_max: 7,
        data: CleanedData::Chunk { byte_start, byte_len, crc32c: 1 },
    }
}

fn removed(base_offset: i64, last_offset: i64) -> CleanedEntry {
    CleanedEntry { base_offset, last_offset, timestamp_max: 7, data: CleanedData::Removed }
}

#[test]
fn a_cleaned_range_replaces_its_entries_and_moves_references() {
    // Offsets 0..=1 (o1), 2..=4 (o2), 5..=5 (o3).
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let range = range_of(&state, 2, Some(("k1", 80)), vec![removed(0, 1), chunk(2, 3, 0, 30), chunk(4, 4, 30, 20)]);
    assert_eq!(state.apply(10, Command::CleanKeys(range.clone())), Ok(Outcome::Done));
    let log = state.partition(topic_id(0), 0).expect("exists");
    let kinds: Vec<(i64, i64, bool)> = log
        .index
        .iter()
        .map(|e| (e.base_offset, e.last_offset, e.chunk().is_some_and(|c| c.offsets_in_batches)))
        .collect();
    assert_eq!(kinds, vec![(0, 1, false), (2, 3, true), (4, 4, true), (5, 5, false)]);
    assert_eq!(log.index[0].data, EntryData::Removed);
    assert_eq!(log.index_bytes, 150, "two new chunks of 50 bytes and the untouched 100");
    let unreferenced: Vec<&str> = state.unreferenced_objects().map(|(_, k)| k).collect();
    assert_eq!(unreferenced, vec!["o1", "o2"]);
    let new = state.objects.values().find(|o| o.key == "k1").expect("listed");
    assert_eq!(new.reference_count, 2);
    // A retried proposal finds the index changed and changes nothing.
    let before = index(&state);
    assert!(state.apply(11, Command::CleanKeys(range)).is_err());
    assert_eq!(index(&state), before);
}

#[test]
fn a_range_can_keep_nothing() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let range = range_of(&state, 2, None, vec![removed(0, 4)]);
    assert_eq!(state.apply(10, Command::CleanKeys(range)), Ok(Outcome::Done));
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.index_bytes), Some(100));
}

#[test]
fn a_range_changed_since_it_was_read_is_not_swapped() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let range = range_of(&state, 2, None, vec![removed(0, 4)]);
    let _ = state.apply(10, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 2 });
    assert_eq!(state.apply(11, Command::CleanKeys(range)), Err(CommandError::CompactionConflict));
}

#[test]
fn bad_ranges_are_refused() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let before = index(&state);
    let bad = [
        // The log's last entry stays, so consumers always find a batch at the end.
        range_of(&state, 3, None, vec![removed(0, 5)]),
        // Gaps and overlaps in the tiling.
        range_of(&state, 2, None, vec![removed(0, 3)]),
        range_of(&state, 2, None, vec![removed(0, 2), removed(2, 4)]),
        // A chunk past the end of its object, or without one.
        range_of(&state, 2, Some(("k1", 40)), vec![chunk(0, 4, 0, 50)]),
        range_of(&state, 2, None, vec![chunk(0, 4, 0, 50)]),
        // An object nothing refers to, or one already listed.
        range_of(&state, 2, Some(("k1", 40)), vec![removed(0, 4)]),
        range_of(&state, 2, Some(("o3", 80)), vec![chunk(0, 4, 0, 50)]),
        // A marker that was not there.
        range_of(
            &state,
            2,
            None,
            vec![
                removed(0, 3),
                CleanedEntry {
                    base_offset: 4,
                    last_offset: 4,
                    timestamp_max: 7,
                    data: CleanedData::Marker(crate::state::stored::TxnMarker {
                        producer_id: 1,
                        producer_epoch: 0,
                        commit: true,
                    }),
                },
            ],
        ),
    ];
    for (i, range) in bad.into_iter().enumerate() {
        assert!(state.apply(10 + i as u64, Command::CleanKeys(range)).is_err(), "bad range {i} was applied");
        assert_eq!(index(&state), before);
    }
}

/// A valid cleaning of the partition's first `n` entries: each replaced entry becomes a chunk
/// (`keep`) or nothing; stretches of nothing are absorbed by the chunk before them or removed.
fn cleaning_of(state: &State, n: usize, keep: &[bool], key: &str) -> CleanedRange {
    let log = state.partition(topic_id(0), 0).expect("exists");
    let mut entries: Vec<CleanedEntry> = Vec::new();
    let mut bytes = 0u64;
    for (e, keep) in log.index.iter().take(n).zip(keep.iter().cycle()) {
        match entries.last_mut() {
            _ if *keep => {
                entries.push(chunk(e.base_offset, e.last_offset, bytes, 10));
                bytes += 10;
            }
            Some(last) => last.last_offset = e.last_offset,
            None => entries.push(removed(e.base_offset, e.last_offset)),
        }
    }
    range_of(state, n, (bytes > 0).then_some((key, bytes + 24)), entries)
}

proptest::proptest! {
    #[test]
    fn cleaning_keeps_the_index_contiguous_and_references_exact(
        flushes in proptest::collection::vec(1u32..4, 2..12),
        cuts in proptest::collection::vec((1usize..12, proptest::collection::vec(proptest::bool::ANY, 1..5)), 1..4),
        delete_to in 0i64..10,
    ) {
        let mut commands = vec![create("a", 0, 1)];
        commands.extend(flushes.iter().enumerate().map(|(i, n)| write(&format!("o{i}"), *n)));
        let (mut state, _) = run(commands);
        let mut index = 100;
        for (round, (n, keep)) in cuts.into_iter().enumerate() {
            let len = state.partition(topic_id(0), 0).map_or(0, |p| p.index.len());
            let range = cleaning_of(&state, n.min(len.saturating_sub(1)).max(1), &keep, &format!("c{round}"));
            let applied = state.apply(index, Command::CleanKeys(range));
            // Only a range that would take the log's last entry is refused.
            proptest::prop_assert!(applied.is_ok() || n >= len || len < 2, "{applied:?}");
            super::super::tests::check_invariants(&state);
            let _ = state.apply(index + 1, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: delete_to });
            super::super::tests::check_invariants(&state);
            index += 2;
        }
    }
}

#[test]
fn a_chunk_with_tombstones_keeps_its_delete_horizon_and_old_encodings_stay_readable() {
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let with_tombstones = |base_offset, byte_start| CleanedEntry {
        base_offset,
        last_offset: 4,
        timestamp_max: 7,
        data: CleanedData::ChunkWithTombstones { byte_start, byte_len: 20, crc32c: 1, delete_horizon_ms: 99 },
    };
    let range = range_of(&state, 2, Some(("k1", 50)), vec![chunk(0, 1, 0, 30), with_tombstones(2, 30)]);
    assert_eq!(state.apply(10, Command::CleanKeys(range)), Ok(Outcome::Done));
    let log = state.partition(topic_id(0), 0).expect("exists");
    let horizons: Vec<Option<i64>> = log.index.iter().map(|e| e.delete_horizon_ms()).collect();
    assert_eq!(horizons, vec![None, Some(99), None]);
    assert!(log.index[1].chunk().is_some_and(|c| c.offsets_in_batches && c.byte_start == 30));
    assert_eq!(state.objects.values().find(|o| o.key == "k1").map(|o| o.reference_count), Some(2));
    // Out of its object: refused like any chunk.
    let (mut state, _) = run(vec![create("a", 0, 1), write("o1", 2), write("o2", 3), write("o3", 1)]);
    let outside = with_tombstones(0, 40);
    assert!(state.apply(10, Command::CleanKeys(range_of(&state, 2, Some(("k1", 50)), vec![outside]))).is_err());
    // The new variants come after the old ones, so journals and snapshots written before them
    // decode as they did.
    let encoded = |data: &EntryData| {
        postcard::to_allocvec(&crate::state::stored::EntryData::from(data.clone())).expect("encodes")[0]
    };
    assert_eq!(encoded(&EntryData::Removed), 3);
    let horizon = EntryData::CleanedChunkWithTombstones {
        object_id: 1,
        byte_start: 0,
        byte_len: 1,
        crc32c: 0,
        delete_horizon_ms: 5,
    };
    assert_eq!(encoded(&horizon), 4);
    let cleaned = |data: &CleanedData| postcard::to_allocvec(data).expect("encodes")[0];
    assert_eq!(cleaned(&CleanedData::Removed), 2);
}

/// A compacted partition where producer 0 (transactional id "t") aborted a transaction at
/// offsets 0..=4 (its abort marker at 5), then committed new values at 6..=10 (its commit
/// marker at 11); then a plain write at 12, the log's last entry, which no pass replaces.
fn aborted_then_committed() -> State {
    let producer = ProducerIdEpoch { producer_id: 0, producer_epoch: 0 };
    let transactional = ChunkProducer { producer_id: 0, producer_epoch: 0, transactional: true };
    let add = |now_ms| Command::AddPartitionsToTxn {
        transactional_id: "t".into(),
        producer,
        partitions: vec![(topic_id(0), 0)],
        now_ms,
    };
    let produce = |key: &str, base_sequence| {
        Command::CommitSegment(SegmentCommit {
            key: key.into(),
            object_bytes: 124,
            chunks: vec![ChunkCommit {
                topic_id: topic_id(0),
                partition: 0,
                byte_start: 0,
                byte_len: 100,
                crc32c: 0,
                batches: vec![BatchSummary { offset_count: 5, timestamp_max: 1000, base_sequence }],
                producer: Some(transactional),
                uncompressed_bytes: 300,
            }],
        })
    };
    let end = |commit, now_ms| Command::EndTxn { transactional_id: "t".into(), producer, commit, now_ms };
    let (state, outcomes) = run(vec![
        Command::SetFormat { format: 12 },
        Command::CreateTopic {
            name: "a".into(),
            topic_id: topic_id(0),
            partition_count: 1,
            configs: [("cleanup.policy".to_owned(), "compact".to_owned())].into(),
        },
        Command::InitProducerId {
            transactional_id: Some("t".into()),
            transaction_timeout_ms: 60_000,
            expected: None,
            now_ms: 1,
            tenant: None,
        },
        add(2),
        produce("o1", 0),
        end(false, 3),
        add(4),
        produce("o2", 5),
        end(true, 5),
        write("o3", 1),
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    state
}

/// The aborted ranges (producer, first offset, marker offset) a read_committed fetch from
/// `offset` is told of: those whose marker is at or after it, as the agents' fetch path picks.
fn aborted_from(state: &State, offset: i64) -> Vec<(i64, i64, i64)> {
    let log = state.partition(topic_id(0), 0).expect("exists");
    log.aborted_transactions
        .iter()
        .filter(|a| a.last_offset >= offset)
        .map(|a| (a.producer_id, a.first_offset, a.last_offset))
        .collect()
}

fn marker(base_offset: i64, commit: bool) -> CleanedEntry {
    CleanedEntry {
        base_offset,
        last_offset: base_offset,
        timestamp_max: 7,
        data: CleanedData::Marker(crate::state::stored::TxnMarker { producer_id: 0, producer_epoch: 0, commit }),
    }
}

/// Issue 51, finding 1: once a pass dropped an abort marker (past `delete.retention.ms`), a
/// read_committed client still told of its range never saw the committed values after it.
#[test]
fn an_aborted_range_goes_with_its_marker() {
    let state = aborted_then_committed();
    assert_eq!(aborted_from(&state, 0), vec![(0, 0, 5)]);
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.index.len()), Some(5));

    // Both markers past their retention: the aborted records and the markers go, and the
    // committed batch's chunk stretches over the emptied offsets, as the compactor writes it.
    let mut dropped = state.clone();
    let range = range_of(&dropped, 4, Some(("k1", 80)), vec![chunk(0, 11, 0, 50)]);
    assert_eq!(dropped.apply(20, Command::CleanKeys(range)), Ok(Outcome::Done));
    check_invariants(&dropped);
    assert!(aborted_from(&dropped, 0).is_empty(), "a range whose marker is gone is not listed");

    // Markers still within their retention stay, and so does the range.
    let mut kept = state.clone();
    let entries = vec![removed(0, 4), marker(5, false), chunk(6, 10, 0, 50), marker(11, true)];
    let range = range_of(&kept, 4, Some(("k1", 80)), entries);
    assert_eq!(kept.apply(20, Command::CleanKeys(range)), Ok(Outcome::Done));
    assert_eq!(aborted_from(&kept, 0), vec![(0, 0, 5)]);
    // A later pass that drops the marker takes the range with it.
    let range = range_of(&kept, 4, Some(("k2", 80)), vec![chunk(0, 11, 0, 50)]);
    assert_eq!(kept.apply(21, Command::CleanKeys(range)), Ok(Outcome::Done));
    assert!(aborted_from(&kept, 0).is_empty());

    // A range cleaned from after the transaction began (not how the compactor cuts them) leaves
    // the transaction's first records unread: its range stays, so they stay hidden.
    let mut late = state;
    let log = late.partition(topic_id(0), 0).expect("exists");
    let range = CleanedRange {
        topic_id: topic_id(0),
        partition: 0,
        replaced: log.index.iter().skip(1).take(3).map(|e| (e.base_offset, e.last_offset, e.object_id())).collect(),
        object: Some(("k3".to_owned(), 80)),
        entries: vec![chunk(5, 11, 0, 50)],
    };
    assert_eq!(late.apply(20, Command::CleanKeys(range)), Ok(Outcome::Done));
    assert_eq!(aborted_from(&late, 0), vec![(0, 0, 5)]);
}
