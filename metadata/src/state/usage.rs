//! Usage metering (format 6): what each tenant used, per minute, counted once.
//!
//! Produced bytes and records are counted where they become durable, when a segment commit is
//! applied, so a produce retried through another agent, or an idempotent retry answered with its
//! original offsets, counts once. What agents serve (fetches, requests) is counted by the agent
//! and committed in numbered reports ([`UsageReport`]); a report applied once is ignored when it
//! comes again, so an agent that crashed after reporting may send its journal again safely.
//! Storage and partitions are sampled from the index once per minute by the leader's
//! [`crate::Command::CloseUsageMinute`], which also files the commit-derived counts under the
//! minute it closes. Hours are exported to Parquet by the storage-job agent; a report that reaches
//! an exported hour marks it changed, and the job writes a corrected revision of its file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::State;
use crate::command::{CommandError, Outcome};
use crate::limits::{
    USAGE_CLOSE_BACKFILL_MINUTES, USAGE_MINUTES_KEPT_MS, USAGE_REPORT_ENTRIES_MAX, USAGE_REPORTER_FORGET_MS,
    USAGE_REPORTER_ID_BYTES_MAX, USAGE_TENANT_BYTES_MAX,
};

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 60 * MINUTE_MS;

/// One thing billed. Variants are only ever added at the end (their index is stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Meter {
    /// Bytes of committed record batches as stored (compressed as the producer sent them).
    ProducedBytes,
    /// The same batches with their records uncompressed.
    ProducedUncompressedBytes,
    /// Offsets committed by producers (one per record).
    ProducedRecords,
    /// Bytes of record batches returned to Kafka and HTTP consumers, as stored.
    FetchedBytes,
    FetchedUncompressedBytes,
    /// Records in the batches returned.
    FetchedRecords,
    /// Kafka requests served (after authentication).
    KafkaRequests,
    /// HTTP API calls served (after authentication).
    HttpRequests,
    /// The tenant's stored bytes (the index's chunks), sampled once a minute: divide a sum by 60
    /// for byte-hours.
    StorageByteMinutes,
    /// The tenant's partitions, sampled once a minute: divide a sum by 60 for partition-hours.
    PartitionMinutes,
    /// Bytes of the topic's log (as stored) converted into its Iceberg table.
    TableConvertedBytes,
}

impl Meter {
    pub const ALL: [Meter; 11] = [
        Meter::ProducedBytes,
        Meter::ProducedUncompressedBytes,
        Meter::ProducedRecords,
        Meter::FetchedBytes,
        Meter::FetchedUncompressedBytes,
        Meter::FetchedRecords,
        Meter::KafkaRequests,
        Meter::HttpRequests,
        Meter::StorageByteMinutes,
        Meter::PartitionMinutes,
        Meter::TableConvertedBytes,
    ];

    /// The meter's name in exports, the API and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Meter::ProducedBytes => "produced_bytes",
            Meter::ProducedUncompressedBytes => "produced_uncompressed_bytes",
            Meter::ProducedRecords => "produced_records",
            Meter::FetchedBytes => "fetched_bytes",
            Meter::FetchedUncompressedBytes => "fetched_uncompressed_bytes",
            Meter::FetchedRecords => "fetched_records",
            Meter::KafkaRequests => "kafka_requests",
            Meter::HttpRequests => "http_requests",
            Meter::StorageByteMinutes => "storage_byte_minutes",
            Meter::PartitionMinutes => "partition_minutes",
            Meter::TableConvertedBytes => "table_converted_bytes",
        }
    }

    pub fn from_name(name: &str) -> Option<Meter> {
        Meter::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// Counts by meter; meters never used are absent.
pub type Meters = BTreeMap<Meter, u64>;

/// Adds `counts` into `into`, saturating (a meter never wraps).
pub fn add_meters(into: &mut Meters, counts: impl IntoIterator<Item = (Meter, u64)>) {
    for (meter, value) in counts {
        if value > 0 {
            let slot = into.entry(meter).or_insert(0);
            *slot = slot.saturating_add(value);
        }
    }
}

/// Every tenant's usage the cluster still holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageLedger {
    /// Counts from commits since the last closed minute, by tenant (`""`: no tenant).
    pub open: BTreeMap<String, Meters>,
    /// Closed and reported counts: minute start (ms since the epoch) → tenant → meters.
    pub minutes: BTreeMap<i64, BTreeMap<String, Meters>>,
    /// The start of the last minute closed, if any.
    pub closed_through_ms: Option<i64>,
    /// Agents' report streams by reporter id.
    pub reporters: BTreeMap<String, UsageReporter>,
    /// Per hour with usage (hour start, ms): how often it changed and what was exported.
    pub hours: BTreeMap<i64, UsageHour>,
}

/// One agent journal's reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageReporter {
    /// The last report applied; reports at or below it are duplicates.
    pub last_seq: u64,
    pub last_report_ms: i64,
}

/// An hour's export bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageHour {
    /// Bumped by every change to the hour's counts.
    pub changes: u64,
    /// `changes` as of the last export; the hour needs a (corrected) file while lower.
    pub exported_changes: u64,
    /// The revision of the last file written (0: none); files are `rev-N`.
    pub revision: u32,
}

/// Counts an agent served, by minute and tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Names the agent's journal (drawn when the journal was created).
    pub reporter: String,
    /// Numbers the journal's reports, from 1, increasing.
    pub seq: u64,
    pub entries: Vec<UsageEntry>,
    pub now_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageEntry {
    /// A minute's start, ms since the epoch.
    pub minute_ms: i64,
    pub tenant: String,
    pub meters: Vec<(Meter, u64)>,
}

/// An exported hour's file revision, with the changes it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageExport {
    pub hour_ms: i64,
    pub revision: u32,
    pub changes: u64,
}

/// Usage summed per period and tenant, and per tenant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UsageSummary {
    /// (period start, tenant) → meters.
    pub periods: BTreeMap<(i64, String), Meters>,
    pub totals: BTreeMap<String, Meters>,
}

/// The tenant a stored topic name belongs to (`""` without tenants).
pub fn tenant_of_stored_name(stored: &str) -> &str {
    match stored.split_once(crate::namespace::SEPARATOR) {
        Some((key, _)) => crate::namespace::parse_key(key).map_or("", |(name, _)| name),
        None => "",
    }
}

fn hour_of(minute_ms: i64) -> i64 {
    minute_ms.div_euclid(HOUR_MS) * HOUR_MS
}

impl UsageLedger {
    fn add_minute(&mut self, minute_ms: i64, tenant: &str, counts: impl IntoIterator<Item = (Meter, u64)>) {
        let meters = self.minutes.entry(minute_ms).or_default().entry(tenant.to_owned()).or_default();
        add_meters(meters, counts);
        self.hours.entry(hour_of(minute_ms)).or_default().changes += 1;
    }

    /// Counts something a commit made durable; filed under the next minute closed.
    pub(super) fn add_open(&mut self, tenant: &str, counts: impl IntoIterator<Item = (Meter, u64)>) {
        if !self.open.contains_key(tenant) {
            self.open.insert(tenant.to_owned(), Meters::new());
        }
        if let Some(meters) = self.open.get_mut(tenant) {
            add_meters(meters, counts);
        }
    }

    /// Meters of `tenant` (all tenants: `None`) per minute in `[from_ms, to_ms)`.
    pub fn query(&self, tenant: Option<&str>, from_ms: i64, to_ms: i64) -> Vec<(i64, &str, &Meters)> {
        let mut rows = Vec::new();
        for (minute, tenants) in self.minutes.range(from_ms..to_ms.max(from_ms)) {
            for (name, meters) in tenants {
                if tenant.is_none_or(|t| t == name) {
                    rows.push((*minute, name.as_str(), meters));
                }
            }
        }
        rows
    }

    /// Meters of `tenant` (all: `None`) in `[from_ms, to_ms)` summed per period of `step_ms`
    /// (a minute or an hour), and per tenant over the whole range.
    pub fn summarize(&self, tenant: Option<&str>, from_ms: i64, to_ms: i64, step_ms: i64) -> UsageSummary {
        let mut summary = UsageSummary::default();
        let step_ms = step_ms.max(MINUTE_MS);
        for (minute, name, meters) in self.query(tenant, from_ms, to_ms) {
            let counts = || meters.iter().map(|(m, v)| (*m, *v));
            add_meters(
                summary.periods.entry((minute.div_euclid(step_ms) * step_ms, name.to_owned())).or_default(),
                counts(),
            );
            add_meters(summary.totals.entry(name.to_owned()).or_default(), counts());
        }
        summary
    }

    /// Hours that ended before `before_ms` and whose counts changed since their last export.
    pub fn hours_to_export(&self, before_ms: i64) -> Vec<(i64, &UsageHour)> {
        self.hours
            .iter()
            .filter(|(hour, h)| **hour + HOUR_MS <= before_ms && h.changes > h.exported_changes)
            .map(|(hour, h)| (*hour, h))
            .collect()
    }
}

impl State {
    /// Whether the minute before `now_ms`'s still needs closing.
    pub fn usage_close_due(&self, now_ms: i64) -> bool {
        let minute = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS - MINUTE_MS;
        self.usage.closed_through_ms.is_none_or(|closed| closed < minute)
    }

    /// Files the open commit counts under the minute before `now_ms`'s, samples storage and
    /// partitions for every minute since the last one closed (at most a day back), and drops
    /// minutes exported long enough ago.
    pub(super) fn close_usage_minute(&mut self, now_ms: i64) -> Result<Outcome, CommandError> {
        let minute = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS - MINUTE_MS;
        if self.usage.closed_through_ms.is_some_and(|closed| closed >= minute) {
            return Ok(Outcome::Done);
        }
        let earliest = minute - (USAGE_CLOSE_BACKFILL_MINUTES - 1) * MINUTE_MS;
        let first = self.usage.closed_through_ms.map_or(minute, |closed| (closed + MINUTE_MS).max(earliest));
        let mut sample: BTreeMap<String, Meters> = BTreeMap::new();
        for topic in self.topics.values() {
            let tenant = tenant_of_stored_name(&topic.name);
            let bytes: u64 = topic.partitions.iter().map(|p| p.index_bytes).sum();
            let meters = sample.entry(tenant.to_owned()).or_default();
            add_meters(
                meters,
                [(Meter::StorageByteMinutes, bytes), (Meter::PartitionMinutes, topic.partitions.len() as u64)],
            );
        }
        let mut at = first;
        while at <= minute {
            for (tenant, meters) in &sample {
                self.usage.add_minute(at, tenant, meters.iter().map(|(m, v)| (*m, *v)));
            }
            at += MINUTE_MS;
        }
        for (tenant, meters) in std::mem::take(&mut self.usage.open) {
            self.usage.add_minute(minute, &tenant, meters);
        }
        self.usage.closed_through_ms = Some(minute);
        // Exported, unchanged hours leave the state once old enough; nothing leaves unexported
        // unless it is far older still (no storage-job agent for days), to bound the state.
        let horizon = minute - USAGE_MINUTES_KEPT_MS;
        let hard_horizon = minute - 7 * USAGE_MINUTES_KEPT_MS;
        let hours = &self.usage.hours;
        let removable = |hour: i64| {
            hour + HOUR_MS <= hard_horizon
                || (hour + HOUR_MS <= horizon && hours.get(&hour).is_none_or(|h| h.changes == h.exported_changes))
        };
        let dropped: Vec<i64> = self.usage.minutes.keys().copied().filter(|m| removable(hour_of(*m))).collect();
        for m in dropped {
            self.usage.minutes.remove(&m);
        }
        // An hour's record outlives its minutes, so a report arriving later still continues its
        // file revisions rather than writing over the first one.
        self.usage.hours.retain(|hour, _| *hour + HOUR_MS > hard_horizon);
        self.usage.reporters.retain(|_, r| now_ms.saturating_sub(r.last_report_ms) <= USAGE_REPORTER_FORGET_MS);
        Ok(Outcome::Done)
    }

    pub(super) fn report_usage(&mut self, report: UsageReport) -> Result<Outcome, CommandError> {
        let invalid = |why: String| Err(CommandError::InvalidUsage(why));
        if report.reporter.is_empty() || report.reporter.len() > USAGE_REPORTER_ID_BYTES_MAX {
            return invalid(format!("a reporter id has 1 to {USAGE_REPORTER_ID_BYTES_MAX} bytes"));
        }
        if report.seq == 0 {
            return invalid("report numbers start at 1".into());
        }
        if report.entries.len() > USAGE_REPORT_ENTRIES_MAX {
            return invalid(format!("more than {USAGE_REPORT_ENTRIES_MAX} entries"));
        }
        for entry in &report.entries {
            if entry.minute_ms < 0 || entry.minute_ms % MINUTE_MS != 0 {
                return invalid(format!("{} is not the start of a minute", entry.minute_ms));
            }
            if entry.tenant.len() > USAGE_TENANT_BYTES_MAX {
                return invalid(format!("a tenant name has at most {USAGE_TENANT_BYTES_MAX} bytes"));
            }
            if entry.meters.len() > Meter::ALL.len() {
                return invalid("a meter named twice".into());
            }
        }
        if self.usage.reporters.get(&report.reporter).is_some_and(|r| r.last_seq >= report.seq) {
            return Ok(Outcome::Done);
        }
        for entry in report.entries {
            self.usage.add_minute(entry.minute_ms, &entry.tenant, entry.meters);
        }
        self.usage
            .reporters
            .insert(report.reporter, UsageReporter { last_seq: report.seq, last_report_ms: report.now_ms });
        Ok(Outcome::Done)
    }

    pub(super) fn mark_usage_exported(&mut self, export: UsageExport) -> Result<Outcome, CommandError> {
        let Some(hour) = self.usage.hours.get_mut(&export.hour_ms) else {
            return Err(CommandError::InvalidUsage(format!("no usage in hour {}", export.hour_ms)));
        };
        // A slower exporter of an older revision never undoes a newer one's record.
        if export.revision > hour.revision {
            hour.revision = export.revision;
            hour.exported_changes = export.changes.min(hour.changes).max(hour.exported_changes);
        }
        Ok(Outcome::Done)
    }

    /// Table-conversion bytes of a table commit's ranges: each index entry's stored bytes in
    /// proportion to the offsets of it the range covers.
    pub(super) fn meter_table_ranges(&mut self, topic_id: super::TopicId, ranges: &[super::TableRange]) {
        let Some(topic) = self.topics.get(&topic_id) else { return };
        let mut bytes = 0u64;
        for range in ranges {
            let Some(partition) = usize::try_from(range.partition).ok().and_then(|p| topic.partitions.get(p)) else {
                continue;
            };
            let first = partition.index.partition_point(|e| e.last_offset < range.from);
            for entry in partition.index.range(first..).take_while(|e| e.base_offset < range.to) {
                let (from, to) = (entry.base_offset.max(range.from), (entry.last_offset + 1).min(range.to));
                let len = entry.stored_bytes();
                if from >= to || len == 0 {
                    continue;
                }
                let covered =
                    u128::from(len) * (to - from) as u128 / (entry.last_offset + 1 - entry.base_offset) as u128;
                bytes = bytes.saturating_add(covered as u64);
            }
        }
        let tenant = tenant_of_stored_name(&topic.name).to_owned();
        self.usage.add_open(&tenant, [(Meter::TableConvertedBytes, bytes)]);
    }
}

#[cfg(test)]
mod tests;
