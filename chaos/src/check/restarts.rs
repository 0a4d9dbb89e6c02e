//! The restarting consumer group's model (`workloads::groups::restarting_member`), from the
//! history (the answers to its commits, each incarnation under a member number of its own; the
//! records acknowledged to its topic and their stamps) and what each incarnation consumed. Per
//! partition:
//!
//! - an incarnation never reads below the highest offset a commit of the group had stored before
//!   it started: it resumes at or after its committed offset;
//! - every record acknowledged at an offset from the first one consumed up to the highest
//!   committed offset was consumed by some incarnation, unless retention could have removed it
//!   by the time the consumer first read past it (`check::retained::Retention`): a restart
//!   never skips a record it had not consumed;
//! - each record consumed is the one acknowledged at its offset.
//!
//! That the offsets an observer reads never go back is `check_offsets`'s part; incarnations
//! re-reading records they consumed but had not committed are counted, as at-least-once allows.

use std::collections::HashSet;

use serde::Serialize;

use super::retained::{Retention, acked_records};
use super::{Checked, context, violation};
use crate::history::{Entry, Event};
use crate::workloads::groups::{Incarnation, RestartSpec};
use crate::workloads::retained::LogStartTopic;

#[derive(Debug, Default, Serialize)]
pub(crate) struct RestartFigures {
    pub(crate) incarnations: usize,
    pub(crate) records_consumed: usize,
    /// Records consumed again by a later incarnation (consumed, not yet committed, restarted).
    pub(crate) reread: usize,
    pub(crate) commits_stored: usize,
    /// Acknowledged records no incarnation consumed that retention may have removed first.
    pub(crate) removed_before_read: usize,
    pub(crate) read_below_committed: usize,
    pub(crate) skipped: usize,
    pub(crate) misplaced: usize,
}

/// The faults around `t_ms` and the group's commits that stored `offset` for `partition`.
fn commit_events(history: &[Entry], group: &str, t_ms: u64, partition: i32, offset: i64) -> Vec<Entry> {
    context(history, t_ms, |e| {
        matches!(e, Event::OffsetCommitAnswered { group: g, offsets, .. }
            if g == group && offsets.contains(&(partition, offset, true)))
    })
}

/// Holds every incarnation of the restarting member against the model.
pub(crate) fn check(history: &[Entry], spec: RestartSpec, incarnations: &[Incarnation], out: &mut Checked) {
    let RestartSpec { group, topic, partitions } = spec;
    let retention = LogStartTopic::named(topic)
        .map_or(Retention { retention_ms: None, retention_bytes: None }, |t| Retention::of(&t));
    let acked = acked_records(history, topic);
    // The group's stored commits: (answered at, partition, offset).
    let stored: Vec<(u64, i32, i64)> = history
        .iter()
        .filter_map(|e| match &e.event {
            Event::OffsetCommitAnswered { group: g, offsets, .. } if g == group => Some((e.t_ms, offsets)),
            _ => None,
        })
        .flat_map(|(t_ms, offsets)| offsets.iter().filter(|o| o.2).map(move |&(p, offset, _)| (t_ms, p, offset)))
        .collect();
    let mut f = RestartFigures { incarnations: incarnations.len(), commits_stored: stored.len(), ..Default::default() };
    for partition in 0..partitions {
        let index = usize::try_from(partition).unwrap_or(usize::MAX);
        let committed_before = |t_ms: u64| {
            stored.iter().filter(|(t, p, _)| *p == partition && *t < t_ms).map(|(_, _, offset)| *offset).max()
        };
        for inc in incarnations {
            let Some(records) = inc.records.get(index) else { continue };
            f.records_consumed += records.len();
            for r in records {
                if let Some(a) = acked.get(&(partition, r.offset))
                    && a.value != r.value
                {
                    f.misplaced += 1;
                    violation(
                        out,
                        "group read a record not acknowledged there",
                        format!(
                            "member {} of group {group} read {} at {topic}/{partition}@{}, where {} was acknowledged",
                            inc.member, r.value, r.offset, a.value
                        ),
                        Vec::new,
                    );
                }
            }
            let Some(committed) = committed_before(inc.started_ms) else { continue };
            if let Some(below) = records.iter().find(|r| r.offset < committed) {
                f.read_below_committed += 1;
                violation(
                    out,
                    "group read below its committed offset",
                    format!(
                        "member {} of group {group}, running from {} to {} ms, read {topic}/{partition}@{} though \
                         a commit of offset {committed} was stored before it started",
                        inc.member, inc.started_ms, inc.ended_ms, below.offset
                    ),
                    || commit_events(history, group, inc.started_ms, partition, committed),
                );
            }
        }
        let consumed: Vec<(i64, i64)> = incarnations
            .iter()
            .filter_map(|inc| inc.records.get(index))
            .flatten()
            .map(|r| (r.offset, r.unix_ms))
            .collect();
        let distinct: HashSet<i64> = consumed.iter().map(|(offset, _)| *offset).collect();
        f.reread += consumed.len() - distinct.len();
        let (Some(&first), Some(last_committed)) = (distinct.iter().min(), committed_before(u64::MAX)) else {
            continue;
        };
        // When the consumer first read past each offset: the earliest time it read a later one.
        let mut by_offset = consumed;
        by_offset.sort_unstable();
        let mut earliest_after: Vec<i64> = by_offset
            .iter()
            .rev()
            .scan(i64::MAX, |earliest, (_, unix_ms)| {
                *earliest = (*earliest).min(*unix_ms);
                Some(*earliest)
            })
            .collect();
        earliest_after.reverse();
        let read_past = |offset: i64| {
            let i = by_offset.partition_point(|(o, _)| *o <= offset);
            earliest_after.get(i).copied()
        };
        for (&(_, offset), a) in acked.range((partition, first)..(partition, last_committed)) {
            if distinct.contains(&offset) {
                continue;
            }
            // A commit past it means a later record was read (`None` cannot happen; it would
            // leave nothing to judge).
            let past_ms = read_past(offset).unwrap_or(i64::MAX);
            if retention.may_have_removed(offset, a.created_ms, past_ms, None) {
                f.removed_before_read += 1;
                continue;
            }
            f.skipped += 1;
            let t_ms = a.t_ms;
            violation(
                out,
                "group skipped an acknowledged record",
                format!(
                    "no member of group {group} read {} at {topic}/{partition}@{offset} (acknowledged at {t_ms} ms), \
                     though the group read from {first} and committed up to {last_committed}",
                    a.value
                ),
                || commit_events(history, group, t_ms, partition, last_committed),
            );
        }
    }
    out.restarts = f;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::groups::Consumed;
    use crate::workloads::produce::stamped_value;
    use crate::workloads::retained::{RETENTION_MS, RETENTION_PARTITIONS, RETENTION_TIME_TOPIC};

    const GROUP: &str = "g";
    const SPEC: RestartSpec =
        RestartSpec { group: GROUP, topic: RETENTION_TIME_TOPIC, partitions: RETENTION_PARTITIONS };
    /// Wall time of the run's start in these histories; record `o` is made `o` seconds after it.
    const T0: i64 = 1_000_000;

    fn value(offset: i64) -> String {
        stamped_value("aged", 0, offset as u64, T0 + offset * 1_000)
    }

    /// Records 0..n of partition 0, each acknowledged a second after the one before.
    fn acked(n: i64) -> Vec<Entry> {
        (0..n)
            .map(|o| Entry {
                t_ms: o as u64 * 1_000,
                event: Event::Acked { topic: RETENTION_TIME_TOPIC.into(), partition: 0, offset: o, value: value(o) },
            })
            .collect()
    }

    fn stored(t_ms: u64, member: u32, offset: i64) -> Entry {
        let offsets = vec![(0, offset, true)];
        Entry {
            t_ms,
            event: Event::OffsetCommitAnswered { group: GROUP.into(), member, seq: 1, sent_ms: t_ms, offsets },
        }
    }

    /// An incarnation that read `offsets` of partition 0, each as soon as it was made.
    fn incarnation(member: u32, started_ms: u64, ended_ms: u64, offsets: &[i64]) -> Incarnation {
        let records: Vec<Consumed> =
            offsets.iter().map(|&o| Consumed { offset: o, value: value(o), unix_ms: T0 + o * 1_000 }).collect();
        Incarnation { member, started_ms, ended_ms, records: vec![records, Vec::new()] }
    }

    fn kinds(history: &[Entry], incarnations: &[Incarnation]) -> Vec<&'static str> {
        let mut out = Checked::default();
        check(history, SPEC, incarnations, &mut out);
        out.violations.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn incarnations_resuming_where_the_last_commit_left_pass() {
        let mut history = acked(10);
        history.push(stored(3_500, 0, 4));
        history.push(stored(9_500, 1, 10));
        // The second incarnation rereads 4 and 5, consumed but not committed by the first.
        let incarnations =
            [incarnation(0, 0, 4_000, &[0, 1, 2, 3, 4, 5]), incarnation(1, 4_000, 9_600, &[4, 5, 6, 7, 8, 9])];
        let mut out = Checked::default();
        check(&history, SPEC, &incarnations, &mut out);
        assert_eq!(out.violations.len(), 0, "{:?}", out.violations);
        assert_eq!((out.restarts.reread, out.restarts.skipped), (2, 0));
    }

    #[test]
    fn reading_below_the_committed_offset_is_a_violation() {
        let mut history = acked(10);
        history.push(stored(3_500, 0, 4));
        history.push(stored(9_500, 1, 10));
        let incarnations =
            [incarnation(0, 0, 4_000, &[0, 1, 2, 3]), incarnation(1, 4_000, 9_600, &[2, 3, 4, 5, 6, 7, 8, 9])];
        assert_eq!(kinds(&history, &incarnations), ["group read below its committed offset"]);
    }

    #[test]
    fn a_restart_skipping_records_is_a_violation_unless_retention_explains_it() {
        let mut history = acked(20);
        history.push(stored(3_500, 0, 4));
        history.push(stored(19_500, 1, 20));
        // Resumed at 6: records 4 and 5, a second or two old when 6 was read, were skipped.
        let skipping =
            [incarnation(0, 0, 4_000, &[0, 1, 2, 3]), incarnation(1, 4_000, 19_600, &(6..20i64).collect::<Vec<_>>())];
        assert_eq!(kinds(&history, &skipping), ["group skipped an acknowledged record"; 2]);
        // Resumed at 15, all read at wall time 15 s: records 4..=9 were over 6 s old by then
        // (retention may have removed them first), 10..=14 were not.
        assert_eq!(RETENTION_MS, 6_000, "the expectation below assumes it");
        let mut late = incarnation(1, 4_000, 19_600, &(15..20i64).collect::<Vec<_>>());
        late.records[0].iter_mut().for_each(|r| r.unix_ms = T0 + 15_000);
        let mut out = Checked::default();
        check(&history, SPEC, &[incarnation(0, 0, 4_000, &[0, 1, 2, 3]), late], &mut out);
        let found: Vec<&str> = out.violations.iter().map(|v| v.kind).collect();
        assert_eq!(found, ["group skipped an acknowledged record"; 5]);
        assert_eq!(out.restarts.removed_before_read, 6);
    }

    #[test]
    fn a_record_read_at_an_offset_it_was_not_acknowledged_at_is_a_violation() {
        let mut history = acked(4);
        history.push(stored(3_500, 0, 4));
        let mut moved = incarnation(0, 0, 4_000, &[0, 1, 2, 3]);
        moved.records[0][2].value = value(3);
        assert_eq!(kinds(&history, &[moved]), ["group read a record not acknowledged there"]);
    }
}
