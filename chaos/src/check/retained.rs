//! The moving log start's model, from the history alone and the topics' settings
//! (`workloads::retained::LOG_START_TOPICS`): what was acknowledged at which offset (on the
//! retention topics also when it was stamped, from its value), which DeleteRecords were sent and
//! which were answered. A read of a topic that began at S and ended at E must show, per partition:
//!
//! - nothing before a cut answered before S, nor before the first offset a read that ended
//!   before S began at (a log start never moves back);
//! - every record acknowledged before S, at its acknowledged offset, unless it may be gone by E:
//!   below the furthest cut sent before E, or one retention could have removed ([`Retention`]);
//! - offsets without gaps, but for records that may be gone, each holding the value acknowledged
//!   there.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::{Checked, context, violation};
use crate::history::{Entry, Event};
use crate::workloads::produce::created_ms;
use crate::workloads::retained::{LOG_START_TOPICS, LogStartTopic, Read};

/// Most bytes one record of the retention producers takes in storage: alone in its batch (61
/// bytes of batch header), a value of about 30 bytes and its record framing come to under 128;
/// twice that for slack. Retention by size counts stored bytes, which the history does not know,
/// so the model counts records and takes each at this most.
pub(crate) const RECORD_STORED_BYTES_MAX: i64 = 256;
/// How far the harness's reading of the wall clock may be from the metadata leader's (the same
/// machine's clock, read at different moments and truncated to ms).
const CLOCK_SLACK_MS: i64 = 250;

#[derive(Debug, Default, Serialize)]
pub(crate) struct RetainedFigures {
    pub(crate) reads: usize,
    pub(crate) records_read: usize,
    pub(crate) cuts_answered: usize,
    /// The furthest each partition's log start was seen moved, summed over partitions: how much
    /// DeleteRecords or retention removed.
    pub(crate) log_start_max: i64,
    pub(crate) deleted_visible: usize,
    pub(crate) log_start_back: usize,
    pub(crate) lost: usize,
    pub(crate) misplaced: usize,
    pub(crate) gaps: usize,
}

/// What a topic's retention could have removed. Floe's retention (the metadata leader's duty,
/// `State::retention_start`) drops a partition's leading index entries while each is older than
/// `retention.ms` by its newest timestamp, or the entries after it still hold `retention.bytes`.
/// So a record can be gone only if, when the read ended, it was older than `retention.ms` (its
/// entry's newest timestamp is at least its own), or the records after it, each at most
/// [`RECORD_STORED_BYTES_MAX`], could fill `retention.bytes`. Neither says a record must be gone
/// by some time: the duty may be late, or the leader down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retention {
    pub(crate) retention_ms: Option<i64>,
    pub(crate) retention_bytes: Option<i64>,
}

impl Retention {
    pub(crate) fn of(topic: &LogStartTopic) -> Self {
        Self { retention_ms: topic.retention_ms, retention_bytes: topic.retention_bytes }
    }

    /// Whether retention may have removed the record at `offset`, stamped `created_ms` (`None`:
    /// not known, so it may be old), by wall time `now_unix_ms`, when its partition ended at most
    /// at `end` (`None`: not known).
    pub(crate) fn may_have_removed(
        &self,
        offset: i64,
        created_ms: Option<i64>,
        now_unix_ms: i64,
        end: Option<i64>,
    ) -> bool {
        let by_time = self.retention_ms.is_some_and(|ms| {
            created_ms.is_none_or(|c| now_unix_ms.saturating_add(CLOCK_SLACK_MS).saturating_sub(c) > ms)
        });
        let by_size = self.retention_bytes.is_some_and(|bytes| {
            end.is_none_or(|end| (end - offset - 1).max(0).saturating_mul(RECORD_STORED_BYTES_MAX) >= bytes)
        });
        by_time || by_size
    }
}

/// One acknowledged record of a topic.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AckedRecord<'h> {
    pub(crate) value: &'h str,
    /// When it was acknowledged (run time).
    pub(crate) t_ms: u64,
    /// Its timestamp, for stamped values.
    pub(crate) created_ms: Option<i64>,
}

/// Acknowledged records of `topic` by (partition, offset).
pub(crate) fn acked_records<'h>(history: &'h [Entry], topic: &str) -> BTreeMap<(i32, i64), AckedRecord<'h>> {
    history
        .iter()
        .filter_map(|e| match &e.event {
            Event::Acked { topic: t, partition, offset, value } if t == topic => {
                Some(((*partition, *offset), AckedRecord { value, t_ms: e.t_ms, created_ms: created_ms(value) }))
            }
            _ => None,
        })
        .collect()
}

/// The furthest cut of `topic`'s `partition` up to `until_ms`: among the answered cuts, or among
/// those sent.
fn furthest_cut(history: &[Entry], topic: &str, partition: i32, until_ms: u64, answered: bool) -> i64 {
    history
        .iter()
        .take_while(|e| e.t_ms <= until_ms)
        .filter_map(|e| match &e.event {
            Event::RecordsDeleted { topic: t, partition: p, before } if answered && t == topic && *p == partition => {
                Some(*before)
            }
            Event::DeleteRecordsSent { topic: t, partition: p, before }
                if !answered && t == topic && *p == partition =>
            {
                Some(*before)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn cut_events(history: &[Entry], topic: &str, t_ms: u64, partition: i32) -> Vec<Entry> {
    context(history, t_ms, |e| {
        matches!(e, Event::RecordsDeleted { topic: t, partition: p, .. }
            | Event::DeleteRecordsSent { topic: t, partition: p, .. } if t == topic && *p == partition)
    })
}

/// Holds every read against the model of its topic.
pub(crate) fn check(history: &[Entry], reads: &[Read], out: &mut Checked) {
    for topic in &LOG_START_TOPICS {
        let of_topic: Vec<&Read> = reads.iter().filter(|r| r.topic == topic.topic).collect();
        let figures = check_topic(history, topic, &of_topic, out);
        out.retained.insert(topic.topic.to_owned(), figures);
    }
}

fn check_topic(history: &[Entry], t: &LogStartTopic, reads: &[&Read], out: &mut Checked) -> RetainedFigures {
    let topic = t.topic;
    let retention = Retention::of(t);
    let mut figures = RetainedFigures {
        reads: reads.len(),
        cuts_answered: history
            .iter()
            .filter(|e| matches!(&e.event, Event::RecordsDeleted { topic: x, .. } if x == topic))
            .count(),
        ..RetainedFigures::default()
    };
    let acked = acked_records(history, topic);
    let acked_at: HashMap<&str, (i32, i64)> = acked.iter().map(|(at, a)| (a.value, *at)).collect();
    let mut log_start_max: HashMap<i32, i64> = HashMap::new();
    for read in reads {
        for (partition, records) in (0i32..).zip(&read.records) {
            figures.records_read += records.len();
            let gone = furthest_cut(history, topic, partition, read.started_ms, true);
            let cut_sent = furthest_cut(history, topic, partition, read.ended_ms, false);
            let end = read.ends.get(partition as usize).copied();
            let may_be_gone = |offset: i64| {
                let created = acked.get(&(partition, offset)).and_then(|a| a.created_ms);
                offset < cut_sent || retention.may_have_removed(offset, created, read.ended_unix_ms, end)
            };
            // Where earlier reads began: the log start was there or further by their end.
            let seen_start = reads
                .iter()
                .filter(|r| r.ended_ms < read.started_ms)
                .filter_map(|r| r.records.get(partition as usize)?.first().map(|(o, _)| *o))
                .max()
                .unwrap_or(0);
            let at = format!("a read of {topic}/{partition} at {} ms", read.started_ms);
            if let Some(&(first, _)) = records.first() {
                let furthest = log_start_max.entry(partition).or_insert(first);
                *furthest = (*furthest).max(first);
                if first < seen_start && first >= gone {
                    figures.log_start_back += 1;
                    violation(
                        out,
                        "log start went back",
                        format!("{at} began at offset {first}; a read that ended before it began at {seen_start}"),
                        || cut_events(history, topic, read.started_ms, partition),
                    );
                }
            }
            let mut shown: HashMap<i64, &str> = HashMap::new();
            let mut previous: Option<i64> = None;
            for (offset, value) in records {
                shown.insert(*offset, value);
                if *offset < gone {
                    figures.deleted_visible += 1;
                    violation(
                        out,
                        "deleted record visible",
                        format!("{at} showed offset {offset}, before the cut at {gone} acknowledged before it began"),
                        || cut_events(history, topic, read.started_ms, partition),
                    );
                }
                // A read overtaken by the log start starts again there: a jump past records that
                // may be gone is no gap.
                if let Some(p) = previous
                    && *offset != p + 1
                    && !(*offset > p && may_be_gone(*offset - 1))
                {
                    figures.gaps += 1;
                    violation(out, "gap after the log start", format!("{at} went from offset {p} to {offset}"), || {
                        cut_events(history, topic, read.started_ms, partition)
                    });
                }
                previous = Some(*offset);
                if let Some(&was) = acked_at.get(value.as_str())
                    && was != (partition, *offset)
                {
                    figures.misplaced += 1;
                    violation(
                        out,
                        "record moved after the log start moved",
                        format!("{at} showed {value} at offset {offset}; it was acknowledged at {was:?}"),
                        || cut_events(history, topic, read.started_ms, partition),
                    );
                }
            }
            for (&(_, offset), a) in acked.range((partition, i64::MIN)..(partition + 1, i64::MIN)) {
                if a.t_ms >= read.started_ms || may_be_gone(offset) {
                    continue;
                }
                if shown.get(&offset) != Some(&a.value) {
                    figures.lost += 1;
                    let (value, t_ms) = (a.value, a.t_ms);
                    violation(
                        out,
                        "acknowledged record missing after the log start",
                        format!(
                            "{at} did not show {value} at offset {offset} (acknowledged at {t_ms} ms; furthest \
                             cut sent {cut_sent}; the read ended at {} ms since the epoch, its partition's end at \
                             most {end:?})",
                            read.ended_unix_ms
                        ),
                        || cut_events(history, topic, read.started_ms, partition),
                    );
                }
            }
        }
    }
    figures.log_start_max = log_start_max.values().sum();
    figures
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::retained::{
        RETAINED_TOPIC, RETENTION_BYTES, RETENTION_MS, RETENTION_SIZE_TOPIC, RETENTION_TIME_TOPIC,
    };

    fn at(t_ms: u64, event: Event) -> Entry {
        Entry { t_ms, event }
    }

    fn acked(t_ms: u64, offset: i64) -> Entry {
        at(t_ms, Event::Acked { topic: RETAINED_TOPIC.into(), partition: 0, offset, value: format!("v{offset}") })
    }

    fn read(started_ms: u64, ended_ms: u64, offsets: std::ops::Range<i64>) -> Read {
        Read {
            topic: RETAINED_TOPIC,
            started_ms,
            ended_ms,
            ended_unix_ms: 0,
            ends: vec![offsets.end],
            records: vec![offsets.map(|o| (o, format!("v{o}"))).collect()],
        }
    }

    fn kinds(history: &[Entry], reads: &[Read]) -> Vec<&'static str> {
        let mut out = Checked::default();
        check(history, reads, &mut out);
        out.violations.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn reads_are_held_against_the_cuts_answered_and_sent() {
        let mut history: Vec<Entry> = (0..10).map(|o| acked(o as u64, o)).collect();
        history.push(at(20, Event::DeleteRecordsSent { topic: RETAINED_TOPIC.into(), partition: 0, before: 4 }));
        history.push(at(25, Event::RecordsDeleted { topic: RETAINED_TOPIC.into(), partition: 0, before: 4 }));
        history.push(at(40, Event::DeleteRecordsSent { topic: RETAINED_TOPIC.into(), partition: 0, before: 6 }));
        assert_eq!(kinds(&history, &[read(30, 35, 4..10)]), Vec::<&str>::new());
        assert_eq!(kinds(&history, &[read(30, 45, 6..10)]), Vec::<&str>::new(), "a cut sent during the read");
        assert_eq!(kinds(&history, &[read(30, 35, 6..10)]), ["acknowledged record missing after the log start"; 2]);
        assert_eq!(kinds(&history, &[read(30, 35, 3..10)]), ["deleted record visible"]);
        let mut gap = read(30, 35, 4..10);
        gap.records[0].remove(2);
        assert_eq!(
            kinds(&history, &[gap]),
            ["gap after the log start", "acknowledged record missing after the log start"]
        );
    }

    #[test]
    fn a_record_at_another_offset_than_its_acknowledged_one_is_found() {
        let mut history: Vec<Entry> = (0..10).map(|o| acked(o as u64, o)).collect();
        history.push(at(15, Event::DeleteRecordsSent { topic: RETAINED_TOPIC.into(), partition: 0, before: 4 }));
        history.push(at(20, Event::RecordsDeleted { topic: RETAINED_TOPIC.into(), partition: 0, before: 4 }));
        let mut swapped = read(30, 35, 4..10);
        swapped.records[0].swap(0, 1);
        swapped.records[0][0].0 = 4;
        swapped.records[0][1].0 = 5;
        assert_eq!(
            kinds(&history, &[swapped]),
            [
                "record moved after the log start moved",
                "record moved after the log start moved",
                "acknowledged record missing after the log start",
                "acknowledged record missing after the log start"
            ]
        );
    }

    #[test]
    fn a_later_read_beginning_before_an_earlier_ones_start_is_a_log_start_going_back() {
        let mut history: Vec<Entry> = (0..10).map(|o| acked(o as u64, o)).collect();
        history.push(at(20, Event::DeleteRecordsSent { topic: RETAINED_TOPIC.into(), partition: 0, before: 5 }));
        let earlier = read(30, 35, 5..10);
        // Began after the earlier read ended, at offset 3: records 3 and 4 came back.
        assert_eq!(kinds(&history, &[earlier.clone(), read(40, 45, 3..10)]), ["log start went back"]);
        // Overlapping reads are not ordered.
        assert_eq!(kinds(&history, &[earlier.clone(), read(34, 45, 3..10)]), Vec::<&str>::new());
        assert_eq!(kinds(&history, &[earlier, read(40, 45, 5..10)]), Vec::<&str>::new());
    }

    /// A stamped record of a retention topic acknowledged at run time `t_ms`, made at wall time
    /// `created_ms`.
    fn stamped(topic: &str, t_ms: u64, offset: i64, created_ms: i64) -> Entry {
        let value = crate::workloads::produce::stamped_value("aged", 0, offset as u64, created_ms);
        at(t_ms, Event::Acked { topic: topic.into(), partition: 0, offset, value })
    }

    fn retention_read(
        topic: &'static str,
        history: &[Entry],
        ended_unix_ms: i64,
        end: i64,
        shown: std::ops::Range<i64>,
    ) -> Read {
        let value = |o: i64| {
            history
                .iter()
                .find_map(|e| match &e.event {
                    Event::Acked { offset, value, .. } if *offset == o => Some(value.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        };
        Read {
            topic,
            started_ms: 1_000,
            ended_ms: 1_100,
            ended_unix_ms,
            ends: vec![end, 0],
            records: vec![shown.map(|o| (o, value(o))).collect(), Vec::new()],
        }
    }

    #[test]
    fn time_retention_may_remove_only_records_older_than_retention_ms() {
        // Records 0..10 made a second apart from wall time 100_000, all acknowledged early.
        let history: Vec<Entry> =
            (0..10).map(|o| stamped(RETENTION_TIME_TOPIC, 10 + o as u64, o, 100_000 + 1_000 * o)).collect();
        // When the read ends, records 0 and 1 are past 6 s (7.5 and 6.5 s old), record 2 is not (5.5 s).
        let now = 100_000 + 1_000 + RETENTION_MS + 500;
        assert_eq!(
            kinds(&history, &[retention_read(RETENTION_TIME_TOPIC, &history, now, 10, 2..10)]),
            Vec::<&str>::new()
        );
        assert_eq!(
            kinds(&history, &[retention_read(RETENTION_TIME_TOPIC, &history, now, 10, 0..10)]),
            Vec::<&str>::new()
        );
        assert_eq!(
            kinds(&history, &[retention_read(RETENTION_TIME_TOPIC, &history, now, 10, 3..10)]),
            ["acknowledged record missing after the log start"],
            "record 2 is 5 s old"
        );
        // A gap past young records is a gap, past old ones the log start moving during the read.
        let mut gap = retention_read(RETENTION_TIME_TOPIC, &history, now, 10, 0..10);
        gap.records[0].retain(|(o, _)| *o != 1);
        assert_eq!(kinds(&history, &[gap]), Vec::<&str>::new());
        let mut gap = retention_read(RETENTION_TIME_TOPIC, &history, now, 10, 0..10);
        gap.records[0].retain(|(o, _)| *o != 5);
        assert_eq!(
            kinds(&history, &[gap]),
            ["gap after the log start", "acknowledged record missing after the log start"]
        );
    }

    #[test]
    fn size_retention_may_remove_only_records_with_enough_after_them() {
        let after = RETENTION_BYTES / RECORD_STORED_BYTES_MAX;
        let count = after + 10;
        // Made just now: time never explains a removal on this topic.
        let history: Vec<Entry> = (0..count).map(|o| stamped(RETENTION_SIZE_TOPIC, 10, o, 100_000)).collect();
        // Records up to count - after - 1 have `after` records behind them.
        let first_kept = count - after;
        let read = |from| retention_read(RETENTION_SIZE_TOPIC, &history, 100_000, count, from..count);
        assert_eq!(kinds(&history, &[read(first_kept)]), Vec::<&str>::new());
        assert_eq!(
            kinds(&history, &[read(first_kept + 1)]),
            ["acknowledged record missing after the log start"],
            "record {first_kept} has fewer than {after} records after it"
        );
    }

    #[test]
    fn retention_removes_by_either_limit() {
        let both = Retention { retention_ms: Some(1_000), retention_bytes: Some(10 * RECORD_STORED_BYTES_MAX) };
        assert!(both.may_have_removed(95, Some(0), 5_000, Some(100)), "old");
        assert!(both.may_have_removed(80, Some(4_900), 5_000, Some(100)), "ten after it");
        assert!(!both.may_have_removed(95, Some(4_900), 5_000, Some(100)));
        assert!(both.may_have_removed(95, None, 5_000, Some(100)), "an unknown stamp may be old");
        let neither = Retention { retention_ms: None, retention_bytes: None };
        assert!(!neither.may_have_removed(0, None, i64::MAX / 2, None));
    }
}
