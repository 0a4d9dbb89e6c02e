//! The table topic's Iceberg table against the model of its writers (`check::changelog::model`:
//! per partition and key, each version written and what it came to), no server code. The topic
//! is compacted, so its table is an upsert table: one row per partition and key, holding the
//! key's latest record the table has read (read_committed). Read back after the table caught up
//! with the topic's last stable offsets, as asked at C:
//!
//! - no row holds an aborted write;
//! - no key has two rows, and no row holds a key or version that was never written;
//! - every key with a version committed before the cut has a row at least that new: the table
//!   holds the topic to the last stable offset of C, which an open transaction holds back (the
//!   cut is where it may have begun, [`lso_cut`]; once the writers stopped, only a transaction
//!   whose outcome was unknown may still be open).
//!
//! Without catching up, only the first two are judged.

use std::collections::HashMap;

use serde::Serialize;

use super::changelog::{key_events, lso_cut, model, txn_outcomes};
use super::{Checked, violation};
use crate::history::{Entry, Outcome};
use crate::workloads::changelog::version;
use crate::workloads::table::{TABLE_TOPIC, TableRead, TableRow};

#[derive(Debug, Default, Serialize)]
pub(crate) struct TableFigures {
    /// Whether the table was read back at all (it needs a Python with pyiceberg).
    pub(crate) read_back: bool,
    pub(crate) caught_up: bool,
    pub(crate) committed: usize,
    pub(crate) aborted: usize,
    pub(crate) unknown: usize,
    pub(crate) rows: usize,
    pub(crate) aborted_visible: usize,
    pub(crate) keys_twice: usize,
    pub(crate) never_written: usize,
    pub(crate) missing: usize,
    pub(crate) stale: usize,
}

/// Holds the table read back against the model; `None`: it was not read.
pub(crate) fn check(history: &[Entry], read: Option<&TableRead>, out: &mut Checked) {
    let model = model(history, TABLE_TOPIC);
    let mut f = TableFigures::default();
    for written in model.values().flat_map(HashMap::values) {
        match written.outcome {
            Outcome::Committed => f.committed += 1,
            Outcome::Aborted => f.aborted += 1,
            Outcome::Unknown => f.unknown += 1,
        }
    }
    let Some(read) = read else {
        out.table = f;
        return;
    };
    f.read_back = true;
    f.caught_up = read.caught_up_ms.is_some();
    f.rows = read.rows.len();
    let t_ms = read.caught_up_ms.unwrap_or(0);
    let mut row_of: HashMap<(i32, &str), u64> = HashMap::new();
    for TableRow { partition, offset, key, value } in &read.rows {
        let partition = *partition;
        let here = format!("the row of {TABLE_TOPIC}/{partition}@{offset}");
        let written = key.as_deref().zip(value.as_deref().and_then(version)).and_then(|(key, version)| {
            let w = model.get(&(partition, key))?.get(&version)?;
            Some((key, version, w))
        });
        let Some((key, version, written)) = written else {
            f.never_written += 1;
            violation(out, "table row never written", format!("{here} holds {key:?}={value:?}"), Vec::new);
            continue;
        };
        if written.outcome == Outcome::Aborted {
            f.aborted_visible += 1;
            violation(
                out,
                "table row of an aborted write",
                format!("{here} holds {key}=v{version}, whose transaction aborted"),
                || key_events(history, TABLE_TOPIC, t_ms, partition, key),
            );
        }
        if let Some(other) = row_of.insert((partition, key), version) {
            f.keys_twice += 1;
            violation(
                out,
                "table key in two rows",
                format!("{TABLE_TOPIC}/{partition} key {key} has rows v{other} and v{version}"),
                || key_events(history, TABLE_TOPIC, t_ms, partition, key),
            );
        }
    }
    let Some(caught_up_ms) = read.caught_up_ms else {
        out.table = f;
        return;
    };
    let outcomes = txn_outcomes(history, TABLE_TOPIC);
    let cut = match outcomes.last() {
        Some((_, Outcome::Unknown)) => lso_cut(&outcomes, caught_up_ms),
        _ if read.writers_stopped => caught_up_ms,
        _ => lso_cut(&outcomes, caught_up_ms),
    };
    for (&(partition, key), versions) in &model {
        let newest =
            versions.iter().filter(|(_, w)| w.outcome == Outcome::Committed && w.t_ms < cut).map(|(v, _)| *v).max();
        let Some(newest) = newest else { continue };
        let row = row_of.get(&(partition, key)).copied();
        if row.is_some_and(|v| v >= newest) {
            continue;
        }
        let (kind, shown) = match row {
            None => {
                f.missing += 1;
                ("table row missing", "no row".to_owned())
            }
            Some(v) => {
                f.stale += 1;
                ("table row stale", format!("v{v}"))
            }
        };
        violation(
            out,
            kind,
            format!(
                "{TABLE_TOPIC}/{partition} key {key}: the table holds {shown}, though v{newest} was committed \
                 before it caught up at {caught_up_ms} ms"
            ),
            || key_events(history, TABLE_TOPIC, caught_up_ms, partition, key),
        );
    }
    out.table = f;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Event;

    fn written(t_ms: u64, partition: i32, key: &str, version: u64, outcome: Outcome) -> Entry {
        Entry {
            t_ms,
            event: Event::KeyWritten { topic: TABLE_TOPIC.into(), partition, key: key.into(), version, outcome },
        }
    }

    fn row(partition: i32, offset: i64, key: &str, value: &str) -> TableRow {
        TableRow { partition, offset, key: Some(key.into()), value: Some(value.into()) }
    }

    fn kinds(history: &[Entry], caught_up_ms: Option<u64>, rows: &[TableRow]) -> Vec<&'static str> {
        let mut out = Checked::default();
        let read = TableRead { caught_up_ms, writers_stopped: true, rows: rows.to_vec() };
        check(history, Some(&read), &mut out);
        let mut kinds: Vec<&str> = out.violations.iter().map(|v| v.kind).collect();
        kinds.sort_unstable();
        kinds
    }

    #[test]
    fn the_table_holds_the_newest_committed_value_of_every_key() {
        let history = [
            written(10, 0, "t0-0", 1, Outcome::Committed),
            written(20, 0, "t0-0", 2, Outcome::Aborted),
            written(30, 0, "i0-0", 0, Outcome::Committed),
            written(40, 0, "i0-0", 2, Outcome::Unknown),
            written(50, 1, "t1-0", 1, Outcome::Committed),
        ];
        let clean = [row(0, 0, "t0-0", "v1"), row(0, 3, "i0-0", "v0"), row(1, 0, "t1-0", "v1")];
        assert_eq!(kinds(&history, Some(100), &clean), Vec::<&str>::new());
        // A write of unknown outcome may have landed after the newest committed one.
        let unknown_landed = [row(0, 0, "t0-0", "v1"), row(0, 4, "i0-0", "v2"), row(1, 0, "t1-0", "v1")];
        assert_eq!(kinds(&history, Some(100), &unknown_landed), Vec::<&str>::new());
        // Before it caught up nothing is missing, only wrong.
        assert_eq!(kinds(&history, None, &[]), Vec::<&str>::new());
        assert_eq!(kinds(&history, None, &[row(0, 1, "t0-0", "v2")]), ["table row of an aborted write"]);
    }

    #[test]
    fn each_kind_of_table_violation_is_found() {
        let history = [
            written(10, 0, "t0-0", 1, Outcome::Committed),
            written(20, 0, "t0-0", 2, Outcome::Aborted),
            written(30, 0, "t0-1", 3, Outcome::Committed),
            written(40, 0, "t0-1", 4, Outcome::Committed),
            written(50, 1, "i1-0", 1, Outcome::Committed),
        ];
        let rows = [
            // An aborted write.
            row(0, 1, "t0-0", "v2"),
            // Older than the newest committed, and the key twice.
            row(0, 2, "t0-1", "v3"),
            row(0, 3, "t0-1", "v3"),
            // Never written; i1-0 has no row at all.
            row(1, 0, "i1-0", "v9"),
        ];
        assert_eq!(
            kinds(&history, Some(100), &rows),
            [
                "table key in two rows",
                "table row missing",
                "table row never written",
                "table row of an aborted write",
                "table row stale",
            ]
        );
    }

    #[test]
    fn a_transaction_of_unknown_outcome_may_still_hold_the_tables_end_back() {
        // Transaction 2 ended unknown at 40 (so it began after 20); idempotent v5 was committed
        // at 30, past where that transaction may have begun, so the table need not hold it.
        let history = [
            written(10, 0, "i0-0", 4, Outcome::Committed),
            written(20, 0, "t0-0", 1, Outcome::Committed),
            written(30, 0, "i0-0", 5, Outcome::Committed),
            written(40, 0, "t0-0", 2, Outcome::Unknown),
        ];
        let rows = [row(0, 0, "i0-0", "v4"), row(0, 1, "t0-0", "v1")];
        assert_eq!(kinds(&history, Some(100), &rows), Vec::<&str>::new());
        // Had transaction 2 committed, everything before 100 must show.
        let mut settled = history.clone();
        settled[3] = written(40, 0, "t0-0", 2, Outcome::Committed);
        assert_eq!(kinds(&settled, Some(100), &rows), ["table row stale", "table row stale"]);
    }
}
