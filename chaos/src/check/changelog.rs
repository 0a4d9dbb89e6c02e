//! The changelog's reference model, written from the writers' history alone (no server code):
//! per key, the versions written and what each came to. Every restore is held against the model
//! as it stood when the restore began:
//!
//! - `read_committed` never shows a version whose transaction aborted;
//! - each key's last value read is at least as new as its newest version committed before the
//!   restore began (compaction keeps the latest committed value of every key; a newer one may
//!   have landed since); for `read_committed`, before the last stable offset it reads to, which
//!   an open transaction holds back ([`lso_cut`]);
//! - a key's versions only go up along offsets (no older value after a newer one);
//! - an offset holds the same record in every read (compaction never moves an offset).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::{Checked, context, violation};
use crate::history::{Entry, Event, Outcome};
use crate::workloads::changelog::{CHANGELOG_TOPIC, Restore, is_txn_key, version};

#[derive(Debug, Default, Serialize)]
pub(crate) struct ChangelogFigures {
    pub(crate) restores_read_committed: usize,
    pub(crate) restores_read_uncommitted: usize,
    pub(crate) records_read: usize,
    pub(crate) committed: usize,
    pub(crate) aborted: usize,
    pub(crate) unknown: usize,
    pub(crate) aborted_visible: usize,
    pub(crate) committed_hidden: usize,
    pub(crate) older_after_newer: usize,
    pub(crate) offsets_moved: usize,
}

/// What one write came to, and when its writer learnt it.
pub(super) struct Written {
    pub(super) t_ms: u64,
    pub(super) outcome: Outcome,
}

/// Every keyed write of `topic` (the changelog, or the table topic its writers also write), by
/// partition and key, then version.
pub(super) fn model<'h>(history: &'h [Entry], topic: &str) -> HashMap<(i32, &'h str), HashMap<u64, Written>> {
    let mut keys: HashMap<(i32, &str), HashMap<u64, Written>> = HashMap::new();
    for e in history {
        if let Event::KeyWritten { topic: t, partition, key, version, outcome } = &e.event
            && t == topic
        {
            keys.entry((*partition, key.as_str()))
                .or_default()
                .insert(*version, Written { t_ms: e.t_ms, outcome: *outcome });
        }
    }
    keys
}

/// When each transaction of `topic`'s transactional writer ended for it, and how, in time order.
pub(super) fn txn_outcomes(history: &[Entry], topic: &str) -> Vec<(u64, Outcome)> {
    let mut by_txn: BTreeMap<u64, (u64, Outcome)> = BTreeMap::new();
    for e in history {
        if let Event::KeyWritten { topic: t, key, version, outcome, .. } = &e.event
            && t == topic
            && is_txn_key(key)
        {
            by_txn.insert(*version, (e.t_ms, *outcome));
        }
    }
    let mut outcomes: Vec<(u64, Outcome)> = by_txn.into_values().collect();
    outcomes.sort_by_key(|(t_ms, _)| *t_ms);
    outcomes
}

/// The time before which a commit is surely below the last stable offset a read_committed
/// restore starting at `started_ms` reads to: the start of the earliest transaction that may
/// still have been open then. The writer runs one transaction at a time, so the open one began
/// after the last outcome; one whose outcome was unknown is settled only by the next
/// incarnation, so it may be the open one.
pub(super) fn lso_cut(txn_outcomes: &[(u64, Outcome)], started_ms: u64) -> u64 {
    let before = &txn_outcomes[..txn_outcomes.partition_point(|(t, _)| *t < started_ms)];
    // An outcome learnt at `t` is before the cut: the next transaction began after it.
    let cut = match before.split_last() {
        Some(((_, Outcome::Unknown), earlier)) => earlier.last().map_or(0, |(t, _)| t + 1),
        Some(((last, _), _)) => last + 1,
        None => 0,
    };
    cut.min(started_ms)
}

/// The faults around `t_ms` and every write of `topic`'s `key`.
pub(super) fn key_events(history: &[Entry], topic: &str, t_ms: u64, partition: i32, key: &str) -> Vec<Entry> {
    context(history, t_ms, |e| {
        matches!(e, Event::KeyWritten { topic: t, partition: p, key: k, .. }
            if t == topic && *p == partition && k == key)
    })
}

/// Holds every restore against the model.
pub(crate) fn check(history: &[Entry], restores: &[Restore], out: &mut Checked) {
    let model = model(history, CHANGELOG_TOPIC);
    let mut figures = ChangelogFigures::default();
    for written in model.values().flat_map(HashMap::values) {
        match written.outcome {
            Outcome::Committed => figures.committed += 1,
            Outcome::Aborted => figures.aborted += 1,
            Outcome::Unknown => figures.unknown += 1,
        }
    }
    let txn_outcomes = txn_outcomes(history, CHANGELOG_TOPIC);
    // Every record seen at each offset, across all restores.
    let mut at_offset: HashMap<(i32, i64), (&str, &str)> = HashMap::new();
    for restore in restores {
        let level = if restore.read_committed { "read_committed" } else { "read_uncommitted" };
        if restore.read_committed {
            figures.restores_read_committed += 1;
        } else {
            figures.restores_read_uncommitted += 1;
        }
        let visible_before =
            if restore.read_committed { lso_cut(&txn_outcomes, restore.started_ms) } else { restore.started_ms };
        for (partition, records) in (0i32..).zip(&restore.records) {
            figures.records_read += records.len();
            let mut last: HashMap<&str, u64> = HashMap::new();
            let mut seen_offsets = HashSet::new();
            for (offset, key, value) in records {
                let here = format!("{CHANGELOG_TOPIC}/{partition}@{offset}");
                let first = *at_offset.entry((partition, *offset)).or_insert((key, value));
                if first != (key.as_str(), value.as_str()) || !seen_offsets.insert(*offset) {
                    figures.offsets_moved += 1;
                    violation(
                        out,
                        "changelog offset moved",
                        format!(
                            "{here} held {}={} and, in a {level} restore at {} ms, {key}={value}",
                            first.0, first.1, restore.started_ms
                        ),
                        || key_events(history, CHANGELOG_TOPIC, restore.started_ms, partition, key),
                    );
                }
                let Some(version) = version(value) else {
                    figures.offsets_moved += 1;
                    violation(
                        out,
                        "changelog record unknown",
                        format!("{here}: {key}={value} was never written"),
                        Vec::new,
                    );
                    continue;
                };
                let written = model.get(&(partition, key.as_str())).and_then(|k| k.get(&version));
                if restore.read_committed && written.is_some_and(|w| w.outcome == Outcome::Aborted) {
                    figures.aborted_visible += 1;
                    violation(
                        out,
                        "changelog aborted record visible",
                        format!(
                            "a read_committed restore at {} ms read {here}: {key}={value}, whose transaction aborted",
                            restore.started_ms
                        ),
                        || key_events(history, CHANGELOG_TOPIC, restore.started_ms, partition, key),
                    );
                }
                if let Some(before) = last.insert(key, version)
                    && before >= version
                {
                    figures.older_after_newer += 1;
                    violation(
                        out,
                        "changelog older value after newer",
                        format!(
                            "a {level} restore at {} ms read {key}=v{before} and then {key}=v{version} at {here}",
                            restore.started_ms
                        ),
                        || key_events(history, CHANGELOG_TOPIC, restore.started_ms, partition, key),
                    );
                }
            }
            for ((p, key), versions) in &model {
                if *p != partition {
                    continue;
                }
                let newest_committed = versions
                    .iter()
                    .filter(|(_, w)| w.outcome == Outcome::Committed && w.t_ms < visible_before)
                    .map(|(v, _)| *v)
                    .max();
                let Some(newest) = newest_committed else { continue };
                let read = last.get(key).copied();
                if read.is_none_or(|r| r < newest) {
                    figures.committed_hidden += 1;
                    let shown = read.map_or_else(|| "nothing".to_owned(), |r| format!("v{r}"));
                    violation(
                        out,
                        "changelog committed value hidden",
                        format!(
                            "a {level} restore at {} ms read {shown} as the last value of {CHANGELOG_TOPIC}/{partition} key {key}, \
                             whose v{newest} was committed before it began",
                            restore.started_ms
                        ),
                        || key_events(history, CHANGELOG_TOPIC, restore.started_ms, partition, key),
                    );
                }
            }
        }
    }
    out.changelog = figures;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(t_ms: u64, partition: i32, key: &str, version: u64, outcome: Outcome) -> Entry {
        Entry {
            t_ms,
            event: Event::KeyWritten { topic: CHANGELOG_TOPIC.into(), partition, key: key.into(), version, outcome },
        }
    }

    fn restore(read_committed: bool, started_ms: u64, records: &[(i64, &str, &str)]) -> Restore {
        Restore {
            read_committed,
            started_ms,
            records: vec![records.iter().map(|(o, k, v)| (*o, (*k).to_owned(), (*v).to_owned())).collect()],
        }
    }

    fn kinds(history: &[Entry], restores: &[Restore]) -> Vec<&'static str> {
        let mut out = Checked::default();
        check(history, restores, &mut out);
        out.violations.iter().map(|v| v.kind).collect()
    }

    /// Finding 1 of issue 51 as a restore shows it: an abort, then a commit of the same key; the
    /// cleaner dropped the abort's marker, and a read_committed restore shows nothing of the key.
    #[test]
    fn a_restore_missing_a_committed_value_is_a_violation() {
        let history = [written(10, 0, "t0-0", 1, Outcome::Aborted), written(20, 0, "t0-0", 2, Outcome::Committed)];
        assert_eq!(kinds(&history, &[restore(true, 30, &[])]), ["changelog committed value hidden"]);
        assert_eq!(kinds(&history, &[restore(true, 30, &[(5, "t0-0", "v2")])]), Vec::<&str>::new());
        // Committed after the restore began: it may or may not be read.
        assert_eq!(kinds(&history, &[restore(true, 15, &[])]), Vec::<&str>::new());
    }

    /// Seen in CI: the transactional writer's transaction stayed open through a partition, so
    /// the LSO stood at its first record; a read_committed restore ends there (librdkafka, like
    /// the Java client, reads to the LSO), and the idempotent writer's records acknowledged
    /// since are past it. Only what was committed before that transaction began must show.
    #[test]
    fn a_read_committed_restore_need_not_show_records_past_an_open_transaction() {
        let history = [
            written(10, 0, "i0-0", 1, Outcome::Committed),
            written(20, 0, "t0-0", 1, Outcome::Committed),
            // Transaction 2 begins after 20 and is still open when the restore begins at 40.
            written(30, 0, "i0-0", 2, Outcome::Committed),
            written(50, 0, "t0-0", 2, Outcome::Committed),
        ];
        let to_lso = [(0, "i0-0", "v1"), (1, "t0-0", "v1")];
        assert_eq!(kinds(&history, &[restore(true, 40, &to_lso)]), Vec::<&str>::new());
        assert_eq!(
            kinds(&history, &[restore(false, 40, &to_lso)]),
            ["changelog committed value hidden"],
            "read_uncommitted reads to the high watermark"
        );
        // What was committed before the open transaction began still has to show.
        assert_eq!(kinds(&history, &[restore(true, 40, &[(1, "t0-0", "v1")])]), ["changelog committed value hidden"]);
        // A transaction whose outcome was unknown may still be open: the cut is where it began.
        let unknown = [
            written(10, 0, "i0-0", 1, Outcome::Committed),
            written(20, 0, "t0-0", 1, Outcome::Committed),
            written(30, 0, "i0-0", 2, Outcome::Committed),
            written(35, 0, "t0-0", 2, Outcome::Unknown),
        ];
        assert_eq!(kinds(&unknown, &[restore(true, 40, &to_lso)]), Vec::<&str>::new());
    }

    #[test]
    fn aborted_records_older_values_and_moved_offsets_are_violations() {
        let history = [
            written(10, 0, "k", 1, Outcome::Committed),
            written(20, 0, "k", 2, Outcome::Aborted),
            written(30, 0, "k", 3, Outcome::Committed),
        ];
        let aborted = restore(true, 40, &[(1, "k", "v2"), (2, "k", "v3")]);
        assert_eq!(kinds(&history, &[aborted]), ["changelog aborted record visible"]);
        let uncommitted = restore(false, 40, &[(1, "k", "v2"), (2, "k", "v3")]);
        assert_eq!(
            kinds(&history, std::slice::from_ref(&uncommitted)),
            Vec::<&str>::new(),
            "read_uncommitted may show it"
        );
        let backwards = restore(false, 40, &[(1, "k", "v3"), (2, "k", "v1")]);
        assert!(kinds(&history, &[backwards]).contains(&"changelog older value after newer"));
        let moved = restore(false, 50, &[(1, "k", "v3")]);
        assert_eq!(kinds(&history, &[uncommitted, moved]), ["changelog offset moved"]);
    }
}
