//! Retention and forgetting objects.

use std::collections::BTreeMap;

use super::super::tests::{run, topic_id};
use crate::command::{BatchSummary, ChunkCommit, Command, Outcome, SegmentCommit};
use crate::state::State;

fn create(configs: &[(&str, &str)]) -> Command {
    Command::CreateTopic {
        name: "a".into(),
        topic_id: topic_id(0),
        partition_count: 1,
        configs: configs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    }
}

/// One object holding one chunk of `records` records, `bytes` long, written at `timestamp`.
fn write(key: &str, records: u32, bytes: u32, timestamp: i64) -> Command {
    Command::CommitSegment(SegmentCommit {
        key: key.into(),
        object_bytes: u64::from(bytes) + 24,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition: 0,
            byte_start: 0,
            byte_len: bytes,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: records, timestamp_max: timestamp, base_sequence: -1 }],
            producer: None,
            uncompressed_bytes: 300,
        }],
    })
}

fn log_start(state: &State) -> i64 {
    state.partition(topic_id(0), 0).map_or(-1, |p| p.log_start_offset)
}

#[test]
fn entries_older_than_retention_ms_go_whole() {
    let (mut state, _) =
        run(vec![create(&[("retention.ms", "1000")]), write("o1", 5, 100, 1_000), write("o2", 5, 100, 2_000)]);
    assert!(!state.retention_due(2_000));
    assert!(state.retention_due(2_001));
    assert_eq!(state.apply(10, Command::ApplyRetention { now_ms: 2_001 }), Ok(Outcome::Done));
    assert_eq!(log_start(&state), 5);
    assert_eq!(state.unreferenced_objects().map(|(_, k)| k.to_owned()).collect::<Vec<_>>(), vec!["o1".to_owned()]);
    assert_eq!(state.apply(11, Command::ApplyRetention { now_ms: 10_000 }), Ok(Outcome::Done));
    assert_eq!(log_start(&state), 10, "everything expired: the log is empty at its end offset");
    let p = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!((p.index.len(), p.index_bytes), (0, 0));
}

#[test]
fn retention_bytes_keeps_at_least_that_much() {
    let (mut state, _) = run(vec![
        create(&[("retention.bytes", "250")]),
        write("o1", 1, 100, 0),
        write("o2", 1, 100, 0),
        write("o3", 1, 100, 0),
        write("o4", 1, 100, 0),
    ]);
    assert_eq!(state.apply(10, Command::ApplyRetention { now_ms: 0 }), Ok(Outcome::Done));
    assert_eq!(log_start(&state), 1, "dropping o2 too would leave 200 < 250 bytes");
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.index_bytes), Some(300));
}

#[test]
fn compact_only_topics_and_defaults_keep_everything() {
    let (mut state, _) =
        run(vec![create(&[("cleanup.policy", "compact"), ("retention.ms", "1")]), write("o1", 1, 100, 0)]);
    assert!(!state.retention_due(1_000_000));
    let (mut fresh, _) = run(vec![create(&[]), write("o1", 1, 100, 0)]);
    assert!(!fresh.retention_due(7 * 24 * 3_600_000), "the default keeps a week");
    assert!(fresh.retention_due(7 * 24 * 3_600_000 + 1));
    let _ = state.apply(10, Command::ApplyRetention { now_ms: 1_000_000 });
    let _ = fresh.apply(
        10,
        Command::SetBrokerConfigs { configs: BTreeMap::from([("log.retention.ms".to_owned(), "-1".to_owned())]) },
    );
    assert!(!fresh.retention_due(i64::MAX), "a cluster-wide -1 keeps everything");
}

#[test]
fn only_unreferenced_objects_are_forgotten() {
    let (mut state, _) = run(vec![create(&[]), write("o1", 1, 100, 0), write("o2", 1, 100, 0)]);
    let _ = state.apply(10, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 1 });
    let ids: Vec<u64> = state.objects.keys().copied().collect();
    assert_eq!(state.apply(11, Command::ForgetObjects { object_ids: ids }), Ok(Outcome::Done));
    assert_eq!(state.objects.values().map(|o| o.key.as_str()).collect::<Vec<_>>(), vec!["o2"]);
}
