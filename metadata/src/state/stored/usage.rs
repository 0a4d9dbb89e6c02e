//! How today's format stores the usage ledger and its reporters. Each type is the in-memory type of
//! the same name in [`crate::state`], field for field in the order encoded; commands carry these
//! layouts too. The conversions below name every field, so a change to the in-memory type compiles
//! only once they say how it is stored. A change to a type here is a format change: a new format
//! version, a mirror of the old layout and a golden file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::stored_layout;

use crate::state::Meter;

/// [`crate::state::UsageHour`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UsageHour {
    pub(crate) changes: u64,
    pub(crate) exported_changes: u64,
    pub(crate) revision: u32,
}

stored_layout!(UsageHour <=> crate::state::UsageHour { changes, exported_changes, revision });

/// [`crate::state::UsageLedger`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UsageLedger {
    pub(crate) open: BTreeMap<String, BTreeMap<Meter, u64>>,
    pub(crate) minutes: BTreeMap<i64, BTreeMap<String, BTreeMap<Meter, u64>>>,
    pub(crate) closed_through_ms: Option<i64>,
    pub(crate) reporters: BTreeMap<String, UsageReporter>,
    pub(crate) hours: BTreeMap<i64, UsageHour>,
}

stored_layout!(UsageLedger <=> crate::state::UsageLedger { open, minutes, closed_through_ms, reporters, hours });

/// [`crate::state::UsageReporter`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct UsageReporter {
    pub(crate) last_seq: u64,
    pub(crate) last_report_ms: i64,
}

stored_layout!(UsageReporter <=> crate::state::UsageReporter { last_seq, last_report_ms });
