//! Table commits: compare-and-set on the version, ranges that continue exactly where the table
//! left off, and the holds they put on retention and key compaction.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::super::tests::{run, topic_id};
use crate::command::{BatchSummary, ChunkCommit, Command, CommandError, Outcome, SegmentCommit};
use crate::state::{State, TableCommit, TableRange};

fn create(table: bool, partitions: i32, extra: &[(&str, &str)]) -> Command {
    let mut configs: BTreeMap<String, String> = extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    configs.insert("floe.table.enable".into(), table.to_string());
    Command::CreateTopic { name: "t".into(), topic_id: topic_id(0), partition_count: partitions, configs }
}

/// `records` records in partition `partition`, written at `timestamp`.
fn write(key: &str, partition: i32, records: u32, timestamp: i64) -> Command {
    Command::CommitSegment(SegmentCommit {
        key: key.into(),
        object_bytes: 124,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition,
            byte_start: 0,
            byte_len: 100,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: records, timestamp_max: timestamp, base_sequence: -1 }],
            producer: None,
            uncompressed_bytes: 300,
        }],
    })
}

fn commit(base_version: u64, ranges: &[(i32, i64, i64)]) -> Command {
    Command::CommitTableSnapshot(TableCommit {
        topic_id: topic_id(0),
        table_uuid: [9; 16],
        base_version,
        metadata_location: format!("file:///b/tables/t/metadata/{}.metadata.json", base_version + 1),
        dead_letter_location: None,
        ranges: ranges.iter().map(|&(partition, from, to)| TableRange { partition, from, to }).collect(),
        new_generation: false,
        now_ms: 10,
    })
}

fn conflict(outcome: &Result<Outcome, CommandError>) -> bool {
    matches!(outcome, Err(CommandError::TableConflict(_)))
}

#[test]
fn commits_continue_where_the_table_left_off_at_the_version_they_read() {
    let (state, outcomes) = run(vec![
        create(true, 2, &[]),
        write("a", 0, 5, 1),
        write("b", 1, 3, 1),
        commit(1, &[(0, 0, 5)]),
        commit(0, &[(0, 1, 5)]),
        commit(0, &[(0, 0, 6)]),
        commit(0, &[(0, 0, 2), (0, 2, 5)]),
        commit(0, &[(2, 0, 1)]),
        commit(0, &[(0, 0, 4)]),
        commit(0, &[(0, 4, 5)]),
        commit(1, &[(0, 4, 5), (1, 0, 3)]),
        commit(2, &[]),
    ]);
    assert!(conflict(&outcomes[3]), "no record yet: only version 0");
    assert!(conflict(&outcomes[4]), "the first range starts at the log start");
    assert!(matches!(outcomes[5], Err(CommandError::InvalidCommit(_))), "past the end");
    assert!(matches!(outcomes[6], Err(CommandError::InvalidCommit(_))), "a partition twice");
    assert_eq!(outcomes[7], Err(CommandError::UnknownTopicOrPartition));
    assert_eq!(outcomes[8], Ok(Outcome::Done));
    assert!(conflict(&outcomes[9]), "a writer that read version 0 lost the race");
    assert_eq!(outcomes[10], Ok(Outcome::Done));
    assert_eq!(outcomes[11], Ok(Outcome::Done), "a commit without ranges still moves the version");
    let table = &state.tables[&topic_id(0)];
    assert_eq!((table.version, table.offsets.clone()), (3, vec![5, 3]));
    assert_eq!(table.metadata_location, "file:///b/tables/t/metadata/3.metadata.json");
}

#[test]
fn an_open_transaction_bounds_a_commit() {
    let (_, outcomes) = run(vec![
        create(true, 1, &[]),
        write("a", 0, 2, 1),
        Command::InitProducerId {
            transactional_id: Some("tx".into()),
            transaction_timeout_ms: 60_000,
            expected: None,
            now_ms: 1,
            tenant: None,
        },
        Command::AddPartitionsToTxn {
            transactional_id: "tx".into(),
            producer: crate::command::ProducerIdEpoch { producer_id: 0, producer_epoch: 0 },
            partitions: vec![(topic_id(0), 0)],
            now_ms: 1,
        },
        Command::CommitSegment(SegmentCommit {
            key: "b".into(),
            object_bytes: 124,
            chunks: vec![ChunkCommit {
                topic_id: topic_id(0),
                partition: 0,
                byte_start: 0,
                byte_len: 100,
                crc32c: 0,
                batches: vec![BatchSummary { offset_count: 2, timestamp_max: 1, base_sequence: 0 }],
                producer: Some(crate::command::ChunkProducer {
                    producer_id: 0,
                    producer_epoch: 0,
                    transactional: true,
                }),
                uncompressed_bytes: 300,
            }],
        }),
        commit(0, &[(0, 0, 4)]),
        commit(0, &[(0, 0, 2)]),
    ]);
    assert_eq!(outcomes[4], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(2)] }));
    assert!(matches!(outcomes[5], Err(CommandError::InvalidCommit(_))), "past the last stable offset");
    assert_eq!(outcomes[6], Ok(Outcome::Done));
}

#[test]
fn retention_and_key_compaction_wait_for_the_table() {
    let old = 1;
    let mut commands = vec![
        create(true, 1, &[("retention.ms", "1000")]),
        write("a", 0, 5, old),
        write("b", 0, 5, old),
        write("c", 0, 5, old),
        Command::ApplyRetention { now_ms: 100_000 },
    ];
    let (state, _) = run(commands.clone());
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.log_start_offset), Some(0), "nothing converted yet");
    assert_eq!(state.table_hold(topic_id(0), 0), Some(0));

    commands.extend([commit(0, &[(0, 0, 7)]), Command::ApplyRetention { now_ms: 100_000 }]);
    let (state, _) = run(commands.clone());
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.log_start_offset), Some(5), "only whole entries before 7");

    // Turning the table off releases the hold.
    commands.extend([
        Command::SetTopicConfigs {
            name: "t".into(),
            configs: BTreeMap::from([
                ("floe.table.enable".to_owned(), "false".to_owned()),
                ("retention.ms".to_owned(), "1000".to_owned()),
            ]),
        },
        Command::ApplyRetention { now_ms: 100_000 },
    ]);
    let (state, _) = run(commands);
    assert_eq!(state.table_hold(topic_id(0), 0), None);
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.log_start_offset), Some(15), "all expired");
}

#[test]
fn deleted_records_are_skipped_and_a_deleted_topic_drops_its_table() {
    let (state, outcomes) = run(vec![
        create(true, 1, &[]),
        write("a", 0, 5, 1),
        write("b", 0, 5, 1),
        commit(0, &[(0, 0, 2)]),
        Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 5 },
        commit(1, &[(0, 2, 10)]),
        commit(1, &[(0, 5, 10)]),
    ]);
    assert!(conflict(&outcomes[5]), "the log start moved past the table's offset");
    assert_eq!(outcomes[6], Ok(Outcome::Done));
    assert_eq!(state.tables[&topic_id(0)].offsets, vec![10]);

    let (state, _) = run(vec![
        create(true, 1, &[]),
        write("a", 0, 5, 1),
        commit(0, &[(0, 0, 5)]),
        Command::DeleteTopic { name: "t".into() },
    ]);
    assert!(state.tables.is_empty());
}

#[test]
fn a_new_generation_retires_the_current_table() {
    let generation = |base_version, uuid: u8| {
        Command::CommitTableSnapshot(TableCommit {
            table_uuid: [uuid; 16],
            new_generation: true,
            ..match commit(base_version, &[]) {
                Command::CommitTableSnapshot(c) => c,
                _ => unreachable!(),
            }
        })
    };
    let (state, outcomes) = run(vec![
        create(true, 1, &[]),
        generation(0, 1),
        commit(0, &[]),
        generation(1, 9),
        generation(1, 2),
        Command::CommitTableSnapshot(TableCommit {
            table_uuid: [3; 16],
            ..match commit(2, &[]) {
                Command::CommitTableSnapshot(c) => c,
                _ => unreachable!(),
            }
        }),
    ]);
    assert!(conflict(&outcomes[1]), "nothing to retire");
    assert!(conflict(&outcomes[3]), "a new generation needs a new id");
    assert_eq!(outcomes[4], Ok(Outcome::Done));
    assert!(conflict(&outcomes[5]), "another id without a new generation");
    let table = &state.tables[&topic_id(0)];
    assert_eq!(table.table_uuid, [2; 16]);
    assert_eq!(table.retired.len(), 1);
    assert_eq!((table.retired[0].table_uuid, table.retired[0].generation), ([9; 16], 1));
}

#[test]
fn locations_are_bounded() {
    let mut long = match commit(0, &[]) {
        Command::CommitTableSnapshot(c) => c,
        _ => unreachable!(),
    };
    long.metadata_location = "x".repeat(crate::limits::TABLE_LOCATION_BYTES_MAX + 1);
    let (_, outcomes) = run(vec![create(true, 1, &[]), Command::CommitTableSnapshot(long)]);
    assert!(matches!(outcomes[1], Err(CommandError::InvalidCommit(_))));
}

/// What the property test does next.
#[derive(Clone, Debug)]
enum Step {
    Write {
        partition: i32,
        records: u32,
    },
    /// A table commit for up to two partitions: each range starts at the table's offset or
    /// `skew` away from it, and is `len` long.
    Commit {
        version_skew: i8,
        ranges: Vec<(i32, i8, u8)>,
    },
    DeleteRecords {
        partition: i32,
        ahead: u8,
    },
    Retention,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..2i32, 1..6u32).prop_map(|(partition, records)| Step::Write { partition, records }),
        (-1..2i8, prop::collection::vec((0..2i32, -2..3i8, 0..8u8), 0..3))
            .prop_map(|(version_skew, ranges)| Step::Commit { version_skew, ranges }),
        (0..2i32, 0..4u8).prop_map(|(partition, ahead)| Step::DeleteRecords { partition, ahead }),
        Just(Step::Retention),
    ]
}

proptest! {
    /// Whatever writers propose, the accepted ranges of each partition never overlap, follow each
    /// other without gaps except over records deleted before they reached the table, and the
    /// table's offsets are where the last accepted range ended.
    #[test]
    fn accepted_table_ranges_tile_each_partition(steps in prop::collection::vec(step(), 1..60)) {
        let mut state = State::default();
        let mut index = 0;
        let mut apply = |state: &mut State, command| { index += 1; state.apply(index, command) };
        let outcome = apply(&mut state, create(true, 2, &[("retention.ms", "1000")]));
                    prop_assert!(outcome.is_ok(), "{:?}", outcome);
        let mut accepted: BTreeMap<i32, Vec<(i64, i64, i64)>> = BTreeMap::new();
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Write { partition, records } => {
                    let outcome = apply(&mut state, write(&format!("o{n}"), partition, records, 1));
                    prop_assert!(outcome.is_ok(), "{:?}", outcome);
                }
                Step::DeleteRecords { partition, ahead } => {
                    let log = state.partition(topic_id(0), partition).expect("exists");
                    let offset = (log.log_start_offset + i64::from(ahead)).min(log.next_offset);
                    let outcome = apply(&mut state, Command::DeleteRecords { topic_id: topic_id(0), partition, offset });
                    prop_assert!(outcome.is_ok(), "{:?}", outcome);
                }
                Step::Retention => {
                    let outcome = apply(&mut state, Command::ApplyRetention { now_ms: 1_000_000 });
                    prop_assert!(outcome.is_ok(), "{:?}", outcome);
                }
                Step::Commit { version_skew, ranges } => {
                    let version = state.tables.get(&topic_id(0)).map_or(0, |t| t.version);
                    let base_version = version.saturating_add_signed(i64::from(version_skew));
                    let ranges: Vec<(i32, i64, i64)> = ranges
                        .into_iter()
                        .map(|(partition, skew, len)| {
                            let log = state.partition(topic_id(0), partition).expect("exists");
                            let offset = state.tables.get(&topic_id(0))
                                .and_then(|t| t.offsets.get(partition as usize).copied())
                                .unwrap_or(0)
                                .max(log.log_start_offset);
                            let from = (offset + i64::from(skew)).max(0);
                            (partition, from, from + i64::from(len))
                        })
                        .collect();
                    let starts: Vec<i64> = ranges.iter().map(|(p, _, _)| {
                        state.partition(topic_id(0), *p).map_or(0, |l| l.log_start_offset)
                    }).collect();
                    if apply(&mut state, commit(base_version, &ranges)).is_ok() {
                        for ((partition, from, to), log_start) in ranges.into_iter().zip(starts) {
                            accepted.entry(partition).or_default().push((from, to, log_start));
                        }
                    }
                }
            }
            for partition in 0..2 {
                let log = state.partition(topic_id(0), partition).expect("exists");
                if let Some(hold) = state.table_hold(topic_id(0), partition) {
                    prop_assert!(log.log_start_offset <= hold, "retention passed the table");
                }
            }
        }
        for (partition, ranges) in accepted {
            let mut end = 0;
            for (from, to, log_start) in &ranges {
                prop_assert!(from <= to);
                prop_assert!(*from == end || (*from > end && *from == *log_start), "{ranges:?}");
                end = *to;
            }
            prop_assert_eq!(state.tables[&topic_id(0)].offsets[partition as usize], end);
        }
    }
}
