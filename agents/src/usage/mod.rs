//! What this agent served, per tenant and minute, reported to metadata in numbered reports
//! ([`floe_metadata::Command::ReportUsage`]) so each count lands once.
//!
//! With a journal directory, every count is appended to a local journal before the response it
//! counts is written, and each report is sealed in the journal before it is proposed and marked
//! confirmed once committed. An agent killed at any point replays the journal when it starts
//! again: sealed reports not confirmed are proposed again under their numbers (metadata ignores
//! one it already applied), and counts after the last seal are reported anew. Without a journal,
//! a crash loses what was counted since the last report (one interval).
//!
//! Journal file `usage.journal`: `FLOEUSJ1`, then records `len: u32 LE | crc32c: u32 LE |
//! postcard(JournalRecord)`; the first record is the reporter id. A torn tail is cut.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use floe_metadata::{Command, Meter, Meters, UsageEntry, UsageReport, add_meters};
use serde::{Deserialize, Serialize};

pub mod export;

const JOURNAL_MAGIC: &[u8; 8] = b"FLOEUSJ1";
const JOURNAL_FILE: &str = "usage.journal";
/// A journal past this size is rewritten with only what is not yet confirmed.
const JOURNAL_COMPACT_BYTES: u64 = 4 * 1024 * 1024;
/// Longest journal record read back: one report's entries at most.
const JOURNAL_RECORD_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Counts (minute × tenant) sealed into one report at most: half of what metadata takes, so a
/// report is never refused for its size (many tenants, or hours of counts kept through an
/// outage, become several reports).
const REPORT_ENTRIES_MAX: usize = floe_metadata::limits::USAGE_REPORT_ENTRIES_MAX / 2;

/// How usage is counted and reported.
#[derive(Clone, Debug)]
pub struct UsageConfig {
    /// Off: this agent counts and reports nothing (commits are still metered by metadata).
    pub enabled: bool,
    /// Where the journal lives; none: counts are kept in memory until reported.
    pub journal_dir: Option<PathBuf>,
    pub report_interval: Duration,
}

impl Default for UsageConfig {
    fn default() -> Self {
        Self { enabled: true, journal_dir: None, report_interval: Duration::from_secs(5) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("usage journal {path}: {source}")]
    Journal { path: PathBuf, source: io::Error },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum JournalRecord {
    Reporter(String),
    Counted(UsageEntry),
    /// The counts since the previous seal form report `seq`.
    Sealed(u64),
    /// Report `seq` (and every one before it) is committed.
    Confirmed(u64),
}

/// Counts by (minute start, tenant).
type Pending = BTreeMap<(i64, String), Meters>;

fn entries(pending: Pending) -> Vec<UsageEntry> {
    pending
        .into_iter()
        .map(|((minute_ms, tenant), meters)| UsageEntry { minute_ms, tenant, meters: meters.into_iter().collect() })
        .collect()
}

fn add_entry(pending: &mut Pending, entry: UsageEntry) {
    add_meters(pending.entry((entry.minute_ms, entry.tenant)).or_default(), entry.meters);
}

#[derive(Debug)]
struct Journal {
    path: PathBuf,
    file: File,
    bytes: u64,
    /// While a rewrite is written elsewhere ([`UsageMeter::compact`]): the frames appended
    /// since it began, which the new journal takes on before it replaces this one.
    since_rewrite: Option<Vec<u8>>,
}

/// Encodes `record` as a journal frame.
fn frame(record: &JournalRecord) -> io::Result<Vec<u8>> {
    let payload = postcard::to_stdvec(record).map_err(io::Error::other)?;
    let mut frame = Vec::with_capacity(8 + payload.len());
    frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    frame.extend_from_slice(&crc32c::crc32c(&payload).to_le_bytes());
    frame.extend_from_slice(&payload);
    Ok(frame)
}

impl Journal {
    fn append(&mut self, record: &JournalRecord) -> io::Result<()> {
        let frame = frame(record)?;
        self.file.write_all(&frame)?;
        self.bytes += frame.len() as u64;
        if let Some(since) = &mut self.since_rewrite {
            since.extend_from_slice(&frame);
        }
        Ok(())
    }

    /// Writes `records` as a new journal beside `path` and syncs it; [`Journal::replace`] puts
    /// it in place. Done without the meter's lock: the sync may take as long as the disk does.
    fn write_rewrite(path: &Path, records: &[JournalRecord]) -> io::Result<Rewrite> {
        let tmp = path.with_extension("journal.tmp");
        let mut out = JOURNAL_MAGIC.to_vec();
        for record in records {
            out.extend_from_slice(&frame(record)?);
        }
        let mut file = File::create(&tmp)?;
        file.write_all(&out)?;
        file.sync_all()?;
        Ok(Rewrite { tmp, file, bytes: out.len() as u64 })
    }

    /// Replaces the journal at `path` with `rewrite`, after appending `since` (the frames
    /// appended to the old one meanwhile); the old journal holds everything until the rename.
    fn replace(path: &Path, mut rewrite: Rewrite, since: &[u8]) -> io::Result<Self> {
        rewrite.file.write_all(since)?;
        std::fs::rename(&rewrite.tmp, path)?;
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Journal { path: path.to_owned(), file, bytes: rewrite.bytes + since.len() as u64, since_rewrite: None })
    }

    /// Writes a new journal holding `records` and puts it in place of this one.
    fn rewrite(path: &Path, records: &[JournalRecord]) -> io::Result<Self> {
        Self::replace(path, Self::write_rewrite(path, records)?, &[])
    }
}

/// A journal written beside the live one, synced, not yet in its place.
#[derive(Debug)]
struct Rewrite {
    tmp: PathBuf,
    file: File,
    bytes: u64,
}

/// Reads a journal's records up to the first torn or corrupt one.
fn read_journal(path: &Path) -> io::Result<Vec<JournalRecord>> {
    let mut bytes = Vec::new();
    match File::open(path) {
        Ok(mut file) => file.read_to_end(&mut bytes)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    if !bytes.starts_with(JOURNAL_MAGIC) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "not a usage journal"));
    }
    let mut records = Vec::new();
    let mut rest = &bytes[JOURNAL_MAGIC.len()..];
    while rest.len() >= 8 {
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        let Some(payload) = rest.get(8..8 + len).filter(|_| len <= JOURNAL_RECORD_BYTES_MAX) else { break };
        if crc32c::crc32c(payload) != crc {
            break;
        }
        let Ok(record) = postcard::from_bytes(payload) else { break };
        records.push(record);
        rest = &rest[8 + len..];
    }
    Ok(records)
}

/// Reports waiting to be proposed, oldest first, and the counts not yet sealed.
#[derive(Debug, Default)]
struct Recovered {
    reporter: Option<String>,
    sealed: Vec<(u64, Pending)>,
    open: Pending,
    confirmed: u64,
}

fn recover(records: Vec<JournalRecord>) -> Recovered {
    let mut out = Recovered::default();
    for record in records {
        match record {
            JournalRecord::Reporter(id) => out.reporter = Some(id),
            JournalRecord::Counted(entry) => add_entry(&mut out.open, entry),
            JournalRecord::Sealed(seq) => out.sealed.push((seq, std::mem::take(&mut out.open))),
            JournalRecord::Confirmed(seq) => {
                out.confirmed = out.confirmed.max(seq);
                out.sealed.retain(|(s, _)| *s > seq);
            }
        }
    }
    out
}

impl Inner {
    /// Seals the open counts, if any, into the next numbered report.
    fn seal(&mut self) {
        if self.open.is_empty() {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let open = std::mem::take(&mut self.open);
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.append(&JournalRecord::Sealed(seq))
        {
            tracing::warn!(path = %journal.path.display(), error = %e, "usage journal write failed");
        }
        self.sealed.push((seq, open));
    }
}

#[derive(Debug)]
struct Inner {
    reporter: String,
    /// The number the next sealed report gets.
    next_seq: u64,
    confirmed: u64,
    /// Sealed, not yet confirmed, oldest first.
    sealed: Vec<(u64, Pending)>,
    open: Pending,
    journal: Option<Journal>,
}

/// This agent's usage counts.
#[derive(Debug)]
pub struct UsageMeter {
    inner: Mutex<Inner>,
    config: UsageConfig,
}

impl UsageMeter {
    /// Opens (and replays) the journal, if the config names a directory.
    pub fn open(config: UsageConfig) -> Result<Self, UsageError> {
        let fresh = || uuid::Uuid::new_v4().simple().to_string();
        let Some(dir) = config.journal_dir.as_ref().filter(|_| config.enabled) else {
            let inner = Inner {
                reporter: fresh(),
                next_seq: 1,
                confirmed: 0,
                sealed: Vec::new(),
                open: Pending::new(),
                journal: None,
            };
            return Ok(Self { inner: Mutex::new(inner), config });
        };
        let path = dir.join(JOURNAL_FILE);
        let failed = |source| UsageError::Journal { path: path.clone(), source };
        std::fs::create_dir_all(dir).map_err(failed)?;
        let recovered = recover(read_journal(&path).map_err(failed)?);
        let reporter = recovered.reporter.unwrap_or_else(fresh);
        let next_seq = recovered.sealed.last().map_or(recovered.confirmed, |(seq, _)| *seq) + 1;
        // The journal is rewritten with what is still owed, so it starts small.
        let mut records =
            vec![JournalRecord::Reporter(reporter.clone()), JournalRecord::Confirmed(recovered.confirmed)];
        for (seq, pending) in &recovered.sealed {
            records.extend(entries(pending.clone()).into_iter().map(JournalRecord::Counted));
            records.push(JournalRecord::Sealed(*seq));
        }
        records.extend(entries(recovered.open.clone()).into_iter().map(JournalRecord::Counted));
        let journal = Journal::rewrite(&path, &records).map_err(failed)?;
        if !recovered.sealed.is_empty() || !recovered.open.is_empty() {
            tracing::info!(
                reports = recovered.sealed.len(),
                unsealed = recovered.open.len(),
                "usage journal replayed; reporting what was not confirmed"
            );
        }
        let inner = Inner {
            reporter,
            next_seq,
            confirmed: recovered.confirmed,
            sealed: recovered.sealed,
            open: recovered.open,
            journal: Some(journal),
        };
        Ok(Self { inner: Mutex::new(inner), config })
    }

    /// Counts what was served to `tenant` (`""`: no tenant) now. Journaled before it returns.
    pub fn record(&self, tenant: &str, counts: &[(Meter, u64)]) {
        if !self.config.enabled {
            return;
        }
        let minute_ms = floe_metadata::now_ms().div_euclid(floe_metadata::MINUTE_MS) * floe_metadata::MINUTE_MS;
        let counts: Vec<(Meter, u64)> = counts.iter().copied().filter(|(_, v)| *v > 0).collect();
        if counts.is_empty() {
            return;
        }
        let Ok(mut inner) = self.inner.lock() else { return };
        if let Some(journal) = &mut inner.journal {
            let entry = UsageEntry { minute_ms, tenant: tenant.to_owned(), meters: counts.clone() };
            if let Err(e) = journal.append(&JournalRecord::Counted(entry)) {
                tracing::warn!(path = %journal.path.display(), error = %e, "usage journal write failed");
            }
        }
        add_meters(inner.open.entry((minute_ms, tenant.to_owned())).or_default(), counts);
        if inner.open.len() >= REPORT_ENTRIES_MAX {
            inner.seal();
        }
    }

    /// Seals the open counts into the next report (if any) and returns the oldest report not
    /// yet confirmed.
    fn next_report(&self) -> Option<UsageReport> {
        let mut inner = self.inner.lock().ok()?;
        inner.seal();
        let (seq, pending) = inner.sealed.first()?;
        Some(UsageReport {
            reporter: inner.reporter.clone(),
            seq: *seq,
            entries: entries(pending.clone()),
            now_ms: floe_metadata::now_ms(),
        })
    }

    fn confirm(&self, seq: u64) {
        let Ok(mut inner) = self.inner.lock() else { return };
        inner.sealed.retain(|(s, _)| *s > seq);
        inner.confirmed = inner.confirmed.max(seq);
        let Some(journal) = &mut inner.journal else { return };
        if let Err(e) = journal.append(&JournalRecord::Confirmed(seq)) {
            tracing::warn!(path = %journal.path.display(), error = %e, "usage journal write failed");
        }
    }

    /// What a journal past [`JOURNAL_COMPACT_BYTES`] is rewritten with: only what is not yet
    /// confirmed. From here the journal also keeps what is appended to it, for
    /// [`UsageMeter::finish_compaction`]. None when no rewrite is due (or one is under way).
    fn begin_compaction(&self) -> Option<(PathBuf, Vec<JournalRecord>)> {
        let mut inner = self.inner.lock().ok()?;
        let inner = &mut *inner;
        let journal =
            inner.journal.as_mut().filter(|j| j.bytes > JOURNAL_COMPACT_BYTES && j.since_rewrite.is_none())?;
        journal.since_rewrite = Some(Vec::new());
        let mut records =
            vec![JournalRecord::Reporter(inner.reporter.clone()), JournalRecord::Confirmed(inner.confirmed)];
        for (seq, pending) in &inner.sealed {
            records.extend(entries(pending.clone()).into_iter().map(JournalRecord::Counted));
            records.push(JournalRecord::Sealed(*seq));
        }
        records.extend(entries(inner.open.clone()).into_iter().map(JournalRecord::Counted));
        Some((journal.path.clone(), records))
    }

    /// Puts `rewrite` in place of the journal with what was appended since
    /// [`UsageMeter::begin_compaction`]; on a failure the old journal stays, whole.
    fn finish_compaction(&self, rewrite: io::Result<Rewrite>) {
        let Ok(mut inner) = self.inner.lock() else { return };
        let Some(journal) = &mut inner.journal else { return };
        let since = journal.since_rewrite.take().unwrap_or_default();
        match rewrite.and_then(|rewrite| Journal::replace(&journal.path, rewrite, &since)) {
            Ok(new) => *journal = new,
            Err(e) => tracing::warn!(path = %journal.path.display(), error = %e, "usage journal rewrite failed"),
        }
    }

    /// Rewrites a journal grown past [`JOURNAL_COMPACT_BYTES`] with only what is not yet
    /// confirmed. The new file is written and synced on the blocking pool without the lock
    /// that every counted response takes, so a slow disk delays no response.
    async fn compact(&self) {
        let Some((path, records)) = self.begin_compaction() else { return };
        let written = tokio::task::spawn_blocking(move || Journal::write_rewrite(&path, &records)).await;
        self.finish_compaction(written.unwrap_or_else(|e| Err(io::Error::other(e))));
    }

    /// Proposes reports until none is waiting. Stops at the first failure to commit (the report
    /// stays sealed and is proposed again, under its number, next time); a report metadata
    /// refuses is dropped, or it would hold back every report after it.
    pub async fn report(&self, metadata: &floe_metadata::Metadata) -> Result<(), floe_metadata::NodeError> {
        self.compact().await;
        while let Some(report) = self.next_report() {
            let seq = report.seq;
            crate::metrics::USAGE_REPORTS.inc();
            match metadata.propose(Command::ReportUsage(report)).await {
                Ok(_) => {}
                Err(floe_metadata::NodeError::Rejected(e)) => {
                    crate::metrics::USAGE_REPORTS_REFUSED.inc();
                    tracing::error!(seq, error = %e, "usage report refused by metadata; its counts are dropped");
                }
                Err(e) => return Err(e),
            }
            self.confirm(seq);
        }
        self.compact().await;
        Ok(())
    }
}

/// Reports what a replayed journal holds at once, then the agent's usage every interval; runs
/// until `stop` (or the agent is dropped).
pub(crate) async fn run(agent: Weak<crate::Agent>, stop: tokio_util::sync::CancellationToken) {
    let Some(interval) = agent.upgrade().filter(|a| a.usage.config.enabled).map(|a| a.usage.config.report_interval)
    else {
        return;
    };
    let mut retry = Duration::from_millis(100);
    loop {
        let Some(strong) = agent.upgrade() else { return };
        let wait = match strong.usage.report(&strong.metadata).await {
            Ok(()) => interval,
            Err(e) => {
                tracing::debug!(error = %e, "usage report not committed yet; retrying");
                retry = (retry * 2).min(interval);
                retry
            }
        };
        drop(strong);
        if !floe_metadata::tasks::sleep_unless_stopped(&stop, wait).await {
            return;
        }
    }
}

/// Counts a Kafka Fetch response's record batches (control batches are not records a client
/// reads, and are not counted).
pub fn fetched_batches(records: &bytes::Bytes) -> [(Meter, u64); 3] {
    let (mut stored, mut uncompressed, mut count) = (0u64, 0u64, 0u64);
    for part in crate::record_batch::split(records) {
        let Ok((header, bytes)) = part else { break };
        if header.is_control() {
            continue;
        }
        stored += header.batch_bytes as u64;
        uncompressed += crate::record_batch::records::uncompressed_len(
            &header,
            &bytes,
            crate::limits::BATCH_DECOMPRESSED_BYTES_MAX,
        );
        count += u64::try_from(header.record_count).unwrap_or(0);
    }
    [(Meter::FetchedBytes, stored), (Meter::FetchedUncompressedBytes, uncompressed), (Meter::FetchedRecords, count)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory under the system's temporary one.
    struct TempDir(PathBuf);

    impl TempDir {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tempdir() -> TempDir {
        TempDir(std::env::temp_dir().join(format!("floe-usage-test-{}", uuid::Uuid::new_v4().simple())))
    }

    fn config(dir: &Path) -> UsageConfig {
        UsageConfig { enabled: true, journal_dir: Some(dir.to_owned()), report_interval: Duration::from_secs(1) }
    }

    fn total(reports: &[UsageReport], meter: Meter) -> u64 {
        reports
            .iter()
            .flat_map(|r| &r.entries)
            .flat_map(|e| &e.meters)
            .filter(|(m, _)| *m == meter)
            .map(|(_, v)| v)
            .sum()
    }

    /// A crash after sealing and before confirming proposes the same report again under the same
    /// number; counts after the seal come back as the next report; confirmed ones never again.
    #[test]
    fn a_restart_replays_what_was_not_confirmed_under_the_same_numbers() {
        let dir = tempdir();
        let meter = UsageMeter::open(config(dir.path())).expect("open");
        meter.record("a", &[(Meter::FetchedRecords, 5)]);
        let first = meter.next_report().expect("a report");
        meter.confirm(first.seq);
        meter.record("a", &[(Meter::FetchedRecords, 7)]);
        let second = meter.next_report().expect("a report");
        meter.record("b", &[(Meter::FetchedRecords, 11)]);
        drop(meter);

        let meter = UsageMeter::open(config(dir.path())).expect("reopen");
        let again = meter.next_report().expect("the unconfirmed report");
        assert_eq!((again.reporter.clone(), again.seq), (second.reporter.clone(), second.seq));
        assert_eq!(total(std::slice::from_ref(&again), Meter::FetchedRecords), 7);
        meter.confirm(again.seq);
        let third = meter.next_report().expect("the unsealed counts");
        assert_eq!(third.seq, second.seq + 1);
        assert_eq!(total(std::slice::from_ref(&third), Meter::FetchedRecords), 11);
        meter.confirm(third.seq);
        assert!(meter.next_report().is_none());
        drop(meter);
        let meter = UsageMeter::open(config(dir.path())).expect("reopen");
        assert!(meter.next_report().is_none(), "nothing confirmed comes back");
    }

    /// Counts for more (minute, tenant) pairs than a report may hold become several reports.
    #[test]
    fn many_tenants_seal_into_reports_metadata_accepts() {
        let meter =
            UsageMeter::open(UsageConfig { enabled: true, journal_dir: None, report_interval: Duration::from_secs(1) })
                .expect("open");
        let tenants = REPORT_ENTRIES_MAX * 2 + 7;
        for t in 0..tenants {
            meter.record(&format!("tenant-{t}"), &[(Meter::KafkaRequests, 1)]);
        }
        let mut reports = Vec::new();
        while let Some(report) = meter.next_report() {
            meter.confirm(report.seq);
            reports.push(report);
        }
        assert_eq!(reports.len(), 3);
        assert!(reports.iter().all(|r| r.entries.len() <= floe_metadata::limits::USAGE_REPORT_ENTRIES_MAX));
        assert_eq!(total(&reports, Meter::KafkaRequests), tenants as u64);
    }

    /// Grows the meter's journal past [`JOURNAL_COMPACT_BYTES`] with reports it confirms.
    fn grow_past_compaction(meter: &UsageMeter) {
        let tenant = "t".repeat(4096);
        for _ in 0..JOURNAL_COMPACT_BYTES / 4096 + 1 {
            meter.record(&tenant, &[(Meter::KafkaRequests, 1)]);
            let report = meter.next_report().expect("a report");
            meter.confirm(report.seq);
        }
    }

    /// A journal is rewritten without the lock, while responses are counted: what was counted,
    /// sealed and confirmed meanwhile is in the journal that replaces it, and a rewrite that
    /// failed leaves the old one whole.
    #[test]
    fn counts_made_during_a_compaction_are_kept() {
        for fails in [false, true] {
            let dir = tempdir();
            let meter = UsageMeter::open(config(dir.path())).expect("open");
            grow_past_compaction(&meter);
            let (path, records) = meter.begin_compaction().expect("a rewrite due");
            assert!(meter.begin_compaction().is_none(), "one rewrite at a time");
            meter.record("a", &[(Meter::FetchedRecords, 100)]);
            let confirmed = meter.next_report().expect("a report");
            meter.confirm(confirmed.seq);
            meter.record("a", &[(Meter::FetchedRecords, 5)]);
            let sealed = meter.next_report().expect("a report");
            let rewrite =
                if fails { Err(io::Error::other("disk full")) } else { Journal::write_rewrite(&path, &records) };
            meter.finish_compaction(rewrite);
            meter.record("a", &[(Meter::FetchedRecords, 7)]);
            drop(meter);
            let bytes = std::fs::metadata(&path).expect("journal").len();
            assert_eq!(bytes > JOURNAL_COMPACT_BYTES, fails, "journal of {bytes} bytes");

            let meter = UsageMeter::open(config(dir.path())).expect("reopen");
            let again = meter.next_report().expect("the sealed report");
            assert_eq!(again.seq, sealed.seq);
            assert_eq!(total(std::slice::from_ref(&again), Meter::FetchedRecords), 5);
            meter.confirm(again.seq);
            let open = meter.next_report().expect("the unsealed counts");
            assert_eq!(total(std::slice::from_ref(&open), Meter::FetchedRecords), 7);
            meter.confirm(open.seq);
            assert!(meter.next_report().is_none(), "the confirmed report does not come back");
        }
    }

    #[test]
    fn a_torn_tail_is_cut() {
        let dir = tempdir();
        let meter = UsageMeter::open(config(dir.path())).expect("open");
        meter.record("a", &[(Meter::KafkaRequests, 3)]);
        drop(meter);
        let path = dir.path().join(JOURNAL_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]);
        std::fs::write(&path, bytes).expect("write");
        let meter = UsageMeter::open(config(dir.path())).expect("reopen");
        let report = meter.next_report().expect("a report");
        assert_eq!(total(&[report], Meter::KafkaRequests), 3);
    }
}
