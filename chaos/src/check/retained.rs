//! The moving log start's model, from the history alone: what was acknowledged at which offset,
//! which DeleteRecords were sent and which were answered. A read of the topic that began at S and
//! ended at E must show, per partition:
//!
//! - nothing before a cut acknowledged before S;
//! - every record acknowledged before S at or past the furthest cut sent before E, at its
//!   acknowledged offset (a cut sent but not answered may or may not have applied);
//! - offsets without gaps, each holding the value acknowledged there.

use std::collections::HashMap;

use serde::Serialize;

use super::{Checked, context, violation};
use crate::history::{Entry, Event};
use crate::workloads::retained::{RETAINED_TOPIC, Read};

#[derive(Debug, Default, Serialize)]
pub(crate) struct RetainedFigures {
    pub(crate) reads: usize,
    pub(crate) records_read: usize,
    pub(crate) cuts_answered: usize,
    pub(crate) deleted_visible: usize,
    pub(crate) lost: usize,
    pub(crate) misplaced: usize,
    pub(crate) gaps: usize,
}

/// The furthest cut of `partition` among `events` up to `until_ms`, by which event kind counts.
fn furthest_cut(history: &[Entry], partition: i32, until_ms: u64, answered: bool) -> i64 {
    history
        .iter()
        .take_while(|e| e.t_ms <= until_ms)
        .filter_map(|e| match &e.event {
            Event::RecordsDeleted { topic, partition: p, before }
                if answered && topic == RETAINED_TOPIC && *p == partition =>
            {
                Some(*before)
            }
            Event::DeleteRecordsSent { topic, partition: p, before }
                if !answered && topic == RETAINED_TOPIC && *p == partition =>
            {
                Some(*before)
            }
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

fn cut_events(history: &[Entry], t_ms: u64, partition: i32) -> Vec<Entry> {
    context(history, t_ms, |e| {
        matches!(e, Event::RecordsDeleted { topic, partition: p, .. } | Event::DeleteRecordsSent { topic, partition: p, .. }
            if topic == RETAINED_TOPIC && *p == partition)
    })
}

/// Holds every read against the model.
pub(crate) fn check(history: &[Entry], reads: &[Read], out: &mut Checked) {
    let mut figures = RetainedFigures {
        reads: reads.len(),
        cuts_answered: history.iter().filter(|e| matches!(e.event, Event::RecordsDeleted { .. })).count(),
        ..RetainedFigures::default()
    };
    // Acknowledged records: (partition, offset) -> (value, when).
    let mut acked: HashMap<(i32, i64), (&str, u64)> = HashMap::new();
    let mut acked_at: HashMap<&str, (i32, i64)> = HashMap::new();
    for e in history {
        if let Event::Acked { topic, partition, offset, value } = &e.event
            && topic == RETAINED_TOPIC
        {
            acked.insert((*partition, *offset), (value, e.t_ms));
            acked_at.insert(value, (*partition, *offset));
        }
    }
    for read in reads {
        for (partition, records) in (0i32..).zip(&read.records) {
            figures.records_read += records.len();
            let gone = furthest_cut(history, partition, read.started_ms, true);
            let maybe_gone = furthest_cut(history, partition, read.ended_ms, false);
            let at = format!("a read of {RETAINED_TOPIC}/{partition} at {} ms", read.started_ms);
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
                        || cut_events(history, read.started_ms, partition),
                    );
                }
                // A read overtaken by a cut starts again at the new log start: a jump to at most
                // the furthest cut sent is no gap.
                if let Some(p) = previous
                    && *offset != p + 1
                    && !(*offset > p && *offset <= maybe_gone)
                {
                    figures.gaps += 1;
                    violation(out, "gap after the log start", format!("{at} went from offset {p} to {offset}"), || {
                        cut_events(history, read.started_ms, partition)
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
                        || cut_events(history, read.started_ms, partition),
                    );
                }
            }
            for (&(p, offset), &(value, t_ms)) in &acked {
                if p != partition || t_ms >= read.started_ms || offset < maybe_gone {
                    continue;
                }
                if shown.get(&offset) != Some(&value) {
                    figures.lost += 1;
                    violation(
                        out,
                        "acknowledged record missing after the log start",
                        format!(
                            "{at} did not show {value} at offset {offset} (acknowledged at {t_ms} ms; furthest cut sent {maybe_gone})"
                        ),
                        || cut_events(history, read.started_ms, partition),
                    );
                }
            }
        }
    }
    out.retained = figures;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ms: u64, event: Event) -> Entry {
        Entry { t_ms, event }
    }

    fn acked(t_ms: u64, offset: i64) -> Entry {
        at(t_ms, Event::Acked { topic: RETAINED_TOPIC.into(), partition: 0, offset, value: format!("v{offset}") })
    }

    fn read(started_ms: u64, ended_ms: u64, offsets: std::ops::Range<i64>) -> Read {
        Read { started_ms, ended_ms, records: vec![offsets.map(|o| (o, format!("v{o}"))).collect()] }
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
}
