//! Usage metering in the state machine: counted once whatever is retried.

use super::super::tests::{create, run, topic_id};
use super::*;
use crate::command::{BatchSummary, ChunkCommit, ChunkProducer, Command, SegmentCommit};

const T0: i64 = 29_000_000 * MINUTE_MS;

fn produce(key: &str, producer: Option<(i64, i32)>) -> Command {
    let base_sequence = producer.map_or(-1, |(_, s)| s);
    Command::CommitSegment(SegmentCommit {
        key: key.to_owned(),
        object_bytes: 124,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition: 0,
            byte_start: 0,
            byte_len: 100,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: 3, timestamp_max: 0, base_sequence }],
            producer: producer.map(|(producer_id, _)| ChunkProducer {
                producer_id,
                producer_epoch: 0,
                transactional: false,
            }),
            uncompressed_bytes: 300,
        }],
    })
}

fn report(seq: u64, minute_ms: i64, records: u64) -> Command {
    Command::ReportUsage(UsageReport {
        reporter: "agent-journal".into(),
        seq,
        entries: vec![UsageEntry {
            minute_ms,
            tenant: "acme".into(),
            meters: vec![(Meter::FetchedRecords, records), (Meter::FetchedBytes, records * 10)],
        }],
        now_ms: minute_ms,
    })
}

fn meter(state: &State, minute_ms: i64, tenant: &str, meter: Meter) -> u64 {
    state.usage.minutes.get(&minute_ms).and_then(|t| t.get(tenant)).and_then(|m| m.get(&meter)).copied().unwrap_or(0)
}

/// A commit retried under its key, and an idempotent producer's chunk sent again through another
/// flush, count once; the minute close files them with a storage and partition sample.
#[test]
fn produced_bytes_and_records_count_once_per_commit_and_minutes_close_with_samples() {
    let init = Command::InitProducerId {
        transactional_id: None,
        transaction_timeout_ms: 1000,
        expected: None,
        now_ms: T0,
        tenant: Some("acme#1".into()),
    };
    let (state, outcomes) = run(vec![
        Command::CreateTenant { name: "acme".into(), now_ms: T0 },
        create("acme#1~orders", 0, 1),
        produce("a", None),
        produce("a", None),
        init,
        produce("b", Some((0, 0))),
        produce("c", Some((0, 0))),
        Command::CloseUsageMinute { now_ms: T0 + MINUTE_MS + 5 },
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(meter(&state, T0, "acme", Meter::ProducedRecords), 6, "two commits of three records");
    assert_eq!(meter(&state, T0, "acme", Meter::ProducedBytes), 200);
    assert_eq!(meter(&state, T0, "acme", Meter::ProducedUncompressedBytes), 600);
    assert_eq!(meter(&state, T0, "acme", Meter::StorageByteMinutes), 200);
    assert_eq!(meter(&state, T0, "acme", Meter::PartitionMinutes), 1);
    assert!(state.usage.open.is_empty());
    assert!(!state.usage_close_due(T0 + MINUTE_MS + 30_000), "closed once per minute");
}

/// A report applied once is ignored when it comes again (an agent replaying its journal).
#[test]
fn a_report_number_counts_once_and_numbers_are_checked() {
    let (state, outcomes) = run(vec![report(1, T0, 5), report(1, T0, 5), report(2, T0, 7), report(2, T0, 7)]);
    assert!(outcomes.iter().all(Result::is_ok));
    assert_eq!(meter(&state, T0, "acme", Meter::FetchedRecords), 12);
    let (_, refused) = run(vec![report(0, T0, 1), report(1, T0 + 1, 1)]);
    assert!(refused.iter().all(|o| matches!(o, Err(CommandError::InvalidUsage(_)))), "{refused:?}");
}

/// An exported hour that gets a late report is listed for export again; exported hours leave the
/// state once [`USAGE_MINUTES_KEPT_MS`] old, unexported ones stay longer.
#[test]
fn late_reports_reopen_an_exported_hour_and_old_exported_hours_are_dropped() {
    let hour = T0.div_euclid(HOUR_MS) * HOUR_MS;
    let later = hour + 5 * HOUR_MS;
    let mut commands = vec![report(1, hour, 5), report(2, later, 1)];
    commands.push(Command::MarkUsageExported(UsageExport { hour_ms: hour, revision: 1, changes: 1 }));
    let (state, _) = run(commands.clone());
    assert!(state.usage.hours_to_export(later + 2 * HOUR_MS).iter().all(|(h, _)| *h != hour));
    commands.push(report(3, hour + MINUTE_MS, 2));
    let (state, _) = run(commands.clone());
    let due: Vec<i64> = state.usage.hours_to_export(later + 2 * HOUR_MS).iter().map(|(h, _)| *h).collect();
    assert_eq!(due, vec![hour, later], "the late report reopens the hour");
    commands.push(Command::MarkUsageExported(UsageExport { hour_ms: hour, revision: 2, changes: 2 }));
    commands.push(Command::CloseUsageMinute { now_ms: hour + USAGE_MINUTES_KEPT_MS + 2 * HOUR_MS });
    let (state, _) = run(commands);
    assert!(!state.usage.minutes.contains_key(&hour), "exported and past the time kept");
    assert!(state.usage.minutes.contains_key(&later), "not exported yet");
    assert_eq!(state.usage.hours[&hour].revision, 2);
}
