//! The durable Raft log and vote: one append-only file of records, replayed on open.
//!
//! Record framing (little-endian): `payload_bytes: u32 | crc32c: u32 | payload`, the payload a
//! postcard-encoded [`LogRecord`]. Every write is `fdatasync`ed before openraft hears it is done,
//! so an acknowledged append or vote survives a crash. A torn tail (a short record, or one whose
//! checksum fails) is cut at the last whole record on open. Two things stop the open instead,
//! since cutting would lose acknowledged entries: a whole record that does not decode (written by
//! a newer format, which the error names) and a damaged record with a whole one after it (the disk
//! corrupted it; a crash tears only the last). When the file grows past [`REWRITE_BYTES_MIN`] it
//! is rewritten with only the live records (written to a temporary file, fsynced, renamed over
//! the old one).

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::state_machine::DurableSnapshot;
use super::{NodeId, TypeConfig};
use crate::limits::COMMAND_BYTES_MAX;

/// Rewrite the file once it is this large and holds mostly purged records.
const REWRITE_BYTES_MIN: u64 = 16 * 1024 * 1024;

/// One durable change to the log or vote.
#[derive(Debug, Serialize, Deserialize)]
enum LogRecord {
    Append(Vec<Entry<TypeConfig>>),
    /// Removes entries at this index and after.
    Truncate(u64),
    /// Removes entries up to and including this log id.
    Purge(LogId<NodeId>),
    Vote(Vote<NodeId>),
    Committed(Option<LogId<NodeId>>),
    /// The file's format version ([`crate::FORMAT_VERSION`]), its first record. Files from
    /// before it have none and are version 1.
    Format(u32),
}

/// An entry as the log keeps it in memory: its id and its encoding, decoded when read. Decoded,
/// a segment commit takes several times the bytes of its (packed) encoding, and the log holds up
/// to 32 MiB of encodings between snapshots (`node.rs`, `SNAPSHOT_LOG_BYTES`); reads decode
/// where they would clone, which costs about the same.
#[derive(Debug, Clone)]
struct KeptEntry {
    log_id: LogId<NodeId>,
    bytes: Box<[u8]>,
}

impl KeptEntry {
    fn encode(entry: &Entry<TypeConfig>) -> io::Result<Self> {
        let bytes = postcard::to_stdvec(entry).map_err(io::Error::other)?.into_boxed_slice();
        Ok(Self { log_id: entry.log_id, bytes })
    }

    fn decode(&self) -> io::Result<Entry<TypeConfig>> {
        postcard::from_bytes(&self.bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("raft log entry {}: {e}", self.log_id)))
    }
}

#[derive(Debug, Default)]
struct LogContents {
    entries: BTreeMap<u64, KeptEntry>,
    last_purged: Option<LogId<NodeId>>,
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
}

impl LogContents {
    /// Applies a record read from the file (entries encoded again, in this binary's format).
    fn apply(&mut self, record: LogRecord) -> io::Result<()> {
        match record {
            LogRecord::Append(entries) => {
                for e in &entries {
                    self.append(KeptEntry::encode(e)?);
                }
            }
            LogRecord::Truncate(index) => {
                self.entries.split_off(&index);
            }
            LogRecord::Purge(log_id) => {
                self.entries = self.entries.split_off(&(log_id.index + 1));
                self.last_purged = Some(log_id);
            }
            LogRecord::Vote(vote) => self.vote = Some(vote),
            LogRecord::Committed(committed) => self.committed = committed,
            LogRecord::Format(_) => {}
        }
        Ok(())
    }

    fn append(&mut self, entry: KeptEntry) {
        self.entries.insert(entry.log_id.index, entry);
    }
}

#[derive(Debug)]
struct LogFile {
    path: PathBuf,
    file: File,
    bytes: u64,
    /// Bytes of entries appended since the last purge (a snapshot's): the node snapshots by this
    /// as well as by entry count, since an entry's size follows the partitions in its commits.
    appended_since_purge: Arc<AtomicU64>,
    contents: LogContents,
    /// A write failed: later ones are refused, so nothing whole follows a torn record (which the
    /// next open would take for corruption) and no fsync is retried after it failed.
    failed: bool,
    /// Tests: the next write stops halfway with an I/O error, as a failing disk's would.
    #[cfg(test)]
    fail_next_write: bool,
}

/// The Raft log store. Clones share one file; openraft's replication tasks read through clones.
#[derive(Clone, Debug)]
pub(crate) struct FileLogStore {
    inner: Arc<Mutex<LogFile>>,
    /// What the state machine's snapshot file covers: no entry is purged before it does.
    durable: tokio::sync::watch::Receiver<DurableSnapshot>,
    /// [`LogFile::appended_since_purge`], read without the file's lock.
    appended_since_purge: Arc<AtomicU64>,
}

fn encode(record: &LogRecord) -> io::Result<Vec<u8>> {
    frame(&postcard::to_stdvec(record).map_err(io::Error::other)?)
}

/// The encoding of `LogRecord::Append` of `entries`, from their own encodings: postcard writes an
/// enum as its variant's index and a sequence as its length, both varints, then the items in
/// order (checked against encoding the record by `an_append_is_framed_as_its_record_encodes`).
fn encode_append(entries: &[KeptEntry]) -> io::Result<Vec<u8>> {
    let len = entries.iter().map(|e| e.bytes.len()).sum::<usize>();
    let mut payload = Vec::with_capacity(len + 11);
    push_varint(&mut payload, 0);
    push_varint(&mut payload, entries.len() as u64);
    for e in entries {
        payload.extend_from_slice(&e.bytes);
    }
    frame(&payload)
}

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn frame(payload: &[u8]) -> io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(payload.len() + 8);
    out.extend_from_slice(&u32::try_from(payload.len()).map_err(io::Error::other)?.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Reads whole, valid records; returns them, the byte length of the valid prefix and the file's
/// format version.
fn read_records(path: &Path) -> io::Result<(Vec<LogRecord>, u64, u32)> {
    let mut reader = match File::open(path) {
        Ok(file) => BufReader::new(file),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), 0, crate::FORMAT_VERSION)),
        Err(e) => return Err(e),
    };
    let (mut records, mut valid) = (Vec::new(), 0u64);
    // Until its first record says otherwise, a file is format 1.
    let mut version = 1;
    loop {
        let mut header = [0u8; 8];
        if reader.read_exact(&mut header).is_err() {
            break;
        }
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        // Zeros where a crash left blocks allocated but unwritten read as an empty record with a
        // matching checksum (CRC-32C of nothing is 0); no record encodes to nothing, so it is torn.
        if len == 0 || len > COMMAND_BYTES_MAX * 4 {
            break;
        }
        let mut payload = vec![0u8; len];
        if reader.read_exact(&mut payload).is_err() {
            break;
        }
        if crc32c::crc32c(&payload) != crc {
            // Each record is synced before the next is written, so a crash tears only the last:
            // a whole record after this one means the disk damaged it, and cutting here would
            // drop entries and votes this node acknowledged.
            if read_whole_record(&mut reader) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: the record at byte {valid} fails its checksum and a whole record follows it, so \
                         the disk corrupted it (a crash tears only the last record): nothing was cut; replace \
                         this node's data as for a lost volume (docs/OPERATIONS.md)",
                        path.display()
                    ),
                ));
            }
            break;
        }
        // Whole and checksummed, so not torn: a record that does not decode was written by a
        // newer Floe (or a bug), and cutting it would destroy committed entries.
        let record =
            crate::state::stored::decoding(version, || postcard::from_bytes::<LogRecord>(&payload)).map_err(|e| {
                let newest = crate::FORMAT_VERSION;
                let why = if version > newest {
                    format!("it is format {version}, and this Floe reads up to format {newest}")
                } else {
                    format!("it does not decode as format {version} ({e})")
                };
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{}: the record at byte {valid} passes its checksum but {why}: run the Floe version that \
                         wrote this log (or one newer); nothing was cut",
                        path.display()
                    ),
                )
            })?;
        if let (true, LogRecord::Format(v)) = (records.is_empty(), &record) {
            version = *v;
        }
        records.push(record);
        valid += 8 + len as u64;
    }
    Ok((records, valid, version))
}

/// Whether the reader is at a whole record: a plausible length and a payload that matches its
/// checksum.
fn read_whole_record(reader: &mut impl Read) -> bool {
    let mut header = [0u8; 8];
    if reader.read_exact(&mut header).is_err() {
        return false;
    }
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    if len == 0 || len > COMMAND_BYTES_MAX * 4 {
        return false;
    }
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).is_ok() && crc32c::crc32c(&payload) == crc
}

impl FileLogStore {
    /// Opens the log at `path`; `durable` is what the node's snapshot file covers
    /// ([`super::state_machine::StateMachine::durable_snapshot`]).
    pub(crate) fn open(path: &Path, durable: tokio::sync::watch::Receiver<DurableSnapshot>) -> io::Result<Self> {
        let (records, valid, version) = read_records(path)?;
        if version > crate::FORMAT_VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: format {version}, newer than this Floe reads", path.display()),
            ));
        }
        let mut contents = LogContents::default();
        for record in records {
            contents.apply(record)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        if file.metadata()?.len() != valid {
            tracing::warn!(path = %path.display(), valid, "cutting a torn raft log tail");
            file.set_len(valid)?;
            file.sync_all()?;
        }
        let mut log = LogFile {
            path: path.to_owned(),
            file,
            bytes: valid,
            appended_since_purge: Arc::new(AtomicU64::new(valid)),
            contents,
            failed: false,
            #[cfg(test)]
            fail_next_write: false,
        };
        if valid == 0 {
            log.write(LogRecord::Format(crate::FORMAT_VERSION))?;
        } else if version < crate::FORMAT_VERSION {
            // Entries appended from now on are in this format: the file says so first.
            log.rewrite()?;
        }
        let appended_since_purge = log.appended_since_purge.clone();
        Ok(Self { inner: Arc::new(Mutex::new(log)), durable, appended_since_purge })
    }
}

impl FileLogStore {
    /// Bytes of entries appended since the last purge, kept up to date as the log is written.
    pub(crate) fn appended_since_purge(&self) -> Arc<AtomicU64> {
        self.appended_since_purge.clone()
    }

    /// The entries currently in the log, in index order (for replay checks in tests).
    #[cfg(test)]
    pub(crate) async fn entries(&self) -> Vec<Entry<TypeConfig>> {
        self.inner.lock().await.contents.entries.values().map(|e| e.decode().expect("entries decode")).collect()
    }

    /// Makes the next write fail halfway with an I/O error (a disk fault), or not.
    #[cfg(test)]
    pub(crate) async fn fail_next_write(&self, fail: bool) {
        self.inner.lock().await.fail_next_write = fail;
    }
}

impl LogFile {
    /// Makes `record` durable, then applies it to the in-memory contents.
    fn write(&mut self, record: LogRecord) -> io::Result<()> {
        if self.failed {
            return Err(io::Error::other("an earlier write to the raft log failed; the node must restart"));
        }
        let (bytes, appended) = match &record {
            LogRecord::Append(entries) => {
                let kept = entries.iter().map(KeptEntry::encode).collect::<io::Result<Vec<_>>>()?;
                (encode_append(&kept)?, Some(kept))
            }
            _ => (encode(&record)?, None),
        };
        let written = self.append(&bytes);
        if written.is_err() {
            self.failed = true;
            // Best effort: the next open cuts a torn tail anyway.
            let _ = self.file.set_len(self.bytes);
        }
        written?;
        self.bytes += bytes.len() as u64;
        crate::metrics::WRITTEN_BYTES.with_label_values(&["raft-log"]).inc_by(bytes.len() as u64);
        match &record {
            LogRecord::Append(_) => {
                self.appended_since_purge.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            LogRecord::Purge(_) => self.appended_since_purge.store(0, Ordering::Relaxed),
            _ => {}
        }
        match appended {
            Some(kept) => kept.into_iter().for_each(|e| self.contents.append(e)),
            None => self.contents.apply(record)?,
        }
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> io::Result<()> {
        #[cfg(test)]
        if std::mem::take(&mut self.fail_next_write) {
            self.file.write_all(&bytes[..bytes.len() / 2])?;
            return Err(io::Error::other("injected disk fault"));
        }
        self.file.write_all(bytes)?;
        self.file.sync_data()
    }

    /// Rewrites the file with only what is live, when it has grown large.
    fn maybe_rewrite(&mut self) -> io::Result<()> {
        if self.bytes < REWRITE_BYTES_MIN {
            return Ok(());
        }
        self.rewrite()
    }

    fn rewrite(&mut self) -> io::Result<()> {
        let tmp = self.path.with_extension("rewrite");
        let mut out = File::create(&tmp)?;
        let mut bytes = 0u64;
        let c = &self.contents;
        let mut live = vec![LogRecord::Format(crate::FORMAT_VERSION)];
        live.extend(c.last_purged.map(LogRecord::Purge));
        live.extend(c.vote.map(LogRecord::Vote));
        live.push(LogRecord::Committed(c.committed));
        let mut encoded: Vec<Vec<u8>> = live.iter().map(encode).collect::<io::Result<_>>()?;
        encoded.push(encode_append(&c.entries.values().cloned().collect::<Vec<_>>())?);
        for record in &encoded {
            out.write_all(record)?;
            bytes += record.len() as u64;
        }
        out.sync_all()?;
        fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            File::open(dir)?.sync_all()?;
        }
        self.file = OpenOptions::new().append(true).open(&self.path)?;
        self.bytes = bytes;
        crate::metrics::WRITTEN_BYTES.with_label_values(&["raft-log"]).inc_by(bytes);
        Ok(())
    }
}

fn write_error(e: io::Error) -> StorageError<NodeId> {
    StorageIOError::write_logs(&e).into()
}

impl RaftLogReader<TypeConfig> for FileLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        inner
            .contents
            .entries
            .range(range)
            .map(|(_, e)| e.decode())
            .collect::<io::Result<_>>()
            .map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

impl RaftLogStorage<TypeConfig> for FileLogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        let c = &inner.contents;
        let last = c.entries.values().next_back().map(|e| e.log_id).or(c.last_purged);
        Ok(LogState { last_purged_log_id: c.last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().await.write(LogRecord::Vote(*vote)).map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.contents.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().await.write(LogRecord::Committed(committed)).map_err(write_error)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.contents.committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<_> = entries.into_iter().collect();
        let result = self.inner.lock().await.write(LogRecord::Append(entries));
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                Err(write_error(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.inner.lock().await.write(LogRecord::Truncate(log_id.index)).map_err(write_error)
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        // A follower is told to purge while its snapshot is still being installed
        // (`DurableSnapshot`): the entries go only once a durable snapshot covers them.
        let covered = self
            .durable
            .wait_for(|d| !matches!(d, DurableSnapshot::Covers(index) if *index < log_id.index))
            .await
            .map(|d| *d);
        if !matches!(covered, Ok(DurableSnapshot::Covers(_))) {
            let why = format!("no durable snapshot covers the entries up to {} to purge", log_id.index);
            return Err(write_error(io::Error::other(why)));
        }
        let mut inner = self.inner.lock().await;
        inner.write(LogRecord::Purge(log_id)).map_err(write_error)?;
        inner.maybe_rewrite().map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log file of an earlier format is rewritten as this one when opened, keeping what is
    /// live, so entries appended afterwards are never read back as the old format.
    #[test]
    fn a_log_of_format_1_is_rewritten_in_this_format_when_opened() {
        let dir = std::env::temp_dir().join(format!("floe-log-format-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("raft-log");
        let committed = Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 7));
        // Format 1 files began without a format record.
        fs::write(&path, encode(&LogRecord::Committed(committed)).expect("encode")).expect("write");
        drop(FileLogStore::open(&path, any_snapshot()).expect("open"));
        let (records, _, version) = read_records(&path).expect("read");
        assert_eq!(version, crate::FORMAT_VERSION);
        assert!(matches!(records.first(), Some(LogRecord::Format(v)) if *v == crate::FORMAT_VERSION));
        assert!(records.iter().any(|r| matches!(r, LogRecord::Committed(c) if *c == committed)));
        fs::remove_dir_all(&dir).expect("clean up");
    }

    fn log_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("floe-log-{name}-{}", uuid::Uuid::new_v4().simple()));
        fs::create_dir_all(&dir).expect("dir");
        dir
    }

    /// A record whose checksum holds but which does not decode was written whole, by a newer
    /// Floe or a buggy one: opening refuses, naming the format, and cuts nothing (it used to be
    /// taken for a torn tail and cut, with every record after it).
    #[test]
    fn a_whole_record_that_does_not_decode_stops_the_open_and_cuts_nothing() {
        let dir = log_dir("undecodable");
        let path = dir.join("raft-log");
        let committed = Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 7));
        let mut bytes = encode(&LogRecord::Format(crate::FORMAT_VERSION)).expect("encode");
        // A variant this Floe does not know, framed and checksummed as a real record.
        let unknown = [200u8, 1, 2, 3];
        bytes.extend_from_slice(&(unknown.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(&unknown).to_le_bytes());
        bytes.extend_from_slice(&unknown);
        bytes.extend_from_slice(&encode(&LogRecord::Committed(committed)).expect("encode"));
        fs::write(&path, &bytes).expect("write");
        let error = FileLogStore::open(&path, any_snapshot()).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let message = error.to_string();
        assert!(message.contains("does not decode") && message.contains(&format!("format {}", crate::FORMAT_VERSION)));
        assert_eq!(fs::read(&path).expect("read"), bytes, "nothing was cut");
        fs::remove_dir_all(&dir).expect("clean up");
    }

    /// A tail that is short or fails its checksum is what a crash mid-write leaves: it is cut,
    /// and what came before it is kept.
    #[test]
    fn a_short_or_damaged_tail_is_cut() {
        for damage in ["short", "checksum", "zeros"] {
            let dir = log_dir("torn");
            let path = dir.join("raft-log");
            let committed = Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 7));
            let mut bytes = encode(&LogRecord::Format(crate::FORMAT_VERSION)).expect("encode");
            bytes.extend_from_slice(&encode(&LogRecord::Committed(committed)).expect("encode"));
            let whole = bytes.len();
            let mut tail = encode(&LogRecord::Committed(None)).expect("encode");
            match damage {
                "short" => tail.truncate(tail.len() - 1),
                "zeros" => tail.fill(0),
                _ => *tail.last_mut().expect("payload") ^= 0xff,
            }
            bytes.extend_from_slice(&tail);
            fs::write(&path, &bytes).expect("write");
            drop(FileLogStore::open(&path, any_snapshot()).expect("opens"));
            let (records, valid, _) = read_records(&path).expect("read");
            assert_eq!(valid as usize, whole, "{damage}: cut at the last whole record");
            assert!(records.iter().any(|r| matches!(r, LogRecord::Committed(c) if *c == committed)), "{damage}");
            fs::remove_dir_all(&dir).expect("clean up");
        }
    }

    /// A damaged record with a whole record after it is not what a crash leaves, since each
    /// record is synced before the next is written: it is the disk corrupting a record. Opening
    /// refuses and cuts nothing (it used to cut there, and with it every entry and vote after).
    #[test]
    fn a_damaged_record_before_a_whole_one_stops_the_open_and_cuts_nothing() {
        let dir = log_dir("corrupt");
        let path = dir.join("raft-log");
        let committed = Some(LogId::new(openraft::CommittedLeaderId::new(2, 1), 7));
        let mut bytes = encode(&LogRecord::Format(crate::FORMAT_VERSION)).expect("encode");
        let damaged_at = bytes.len();
        let mut damaged = encode(&LogRecord::Committed(committed)).expect("encode");
        *damaged.last_mut().expect("payload") ^= 0x01;
        bytes.extend_from_slice(&damaged);
        bytes.extend_from_slice(&encode(&LogRecord::Vote(Vote::new(3, 1))).expect("encode"));
        fs::write(&path, &bytes).expect("write");
        let error = FileLogStore::open(&path, any_snapshot()).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        let message = error.to_string();
        assert!(message.contains(&format!("byte {damaged_at}")) && message.contains("corrupt"), "{message}");
        assert_eq!(fs::read(&path).expect("read"), bytes, "nothing was cut");
        fs::remove_dir_all(&dir).expect("clean up");
    }

    /// After a write fails, the log refuses the next ones: a record written whole after a torn
    /// one would make the file look corrupted on the next open. What failed is cut at once.
    #[tokio::test]
    async fn after_a_failed_write_the_log_refuses_more_and_reopens_whole() {
        let dir = log_dir("failed-write");
        let path = dir.join("raft-log");
        let mut store = FileLogStore::open(&path, any_snapshot()).expect("open");
        store.save_vote(&Vote::new(1, 1)).await.expect("vote");
        let length = fs::metadata(&path).expect("metadata").len();
        store.fail_next_write(true).await;
        assert!(store.save_vote(&Vote::new(2, 1)).await.is_err(), "the injected fault");
        assert!(store.save_vote(&Vote::new(3, 1)).await.is_err(), "refused after it");
        assert_eq!(fs::metadata(&path).expect("metadata").len(), length, "the torn half was cut");
        drop(store);
        let mut reopened = FileLogStore::open(&path, any_snapshot()).expect("reopens");
        assert_eq!(reopened.read_vote().await.expect("vote"), Some(Vote::new(1, 1)));
        fs::remove_dir_all(&dir).expect("clean up");
    }

    /// A snapshot file that covers whatever a test purges.
    fn any_snapshot() -> tokio::sync::watch::Receiver<DurableSnapshot> {
        tokio::sync::watch::channel(DurableSnapshot::Covers(u64::MAX)).1
    }

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: openraft::EntryPayload::Blank,
        }
    }

    fn command_entry(index: u64, command: crate::command::Command) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(openraft::CommittedLeaderId::new(1, 1), index),
            payload: openraft::EntryPayload::Normal(command),
        }
    }

    /// The log keeps entries encoded and frames an append from those encodings: the bytes equal
    /// encoding the record whole, for one entry and for more than a one-byte count, and entries
    /// read back (also after reopening) equal what was appended.
    #[tokio::test]
    async fn an_append_is_framed_as_its_record_encodes() {
        use crate::command::Command;
        for count in [1u64, 3, 200] {
            let entries: Vec<_> = (1..=count)
                .map(|i| match i % 3 {
                    0 => entry(i),
                    1 => command_entry(i, Command::DeleteTopic { name: format!("t{i}") }),
                    _ => {
                        command_entry(i, Command::SetBrokerConfigs { configs: [("a".into(), "b".repeat(300))].into() })
                    }
                })
                .collect();
            let kept: Vec<_> = entries.iter().map(|e| KeptEntry::encode(e).expect("encode")).collect();
            let whole = encode(&LogRecord::Append(entries.clone())).expect("encode");
            assert_eq!(encode_append(&kept).expect("encode"), whole, "{count} entries");

            let dir = log_dir("kept");
            let path = dir.join("raft-log");
            let mut log = FileLogStore::open(&path, any_snapshot()).expect("opens");
            log.inner.lock().await.write(LogRecord::Append(entries.clone())).expect("append");
            assert_eq!(log.try_get_log_entries(..).await.expect("read"), entries);
            drop(log);
            let mut reopened = FileLogStore::open(&path, any_snapshot()).expect("reopens");
            assert_eq!(reopened.try_get_log_entries(2..).await.expect("read"), entries[1..].to_vec());
            fs::remove_dir_all(&dir).expect("clean up");
        }
    }

    /// openraft 0.9 tells a follower's log to purge as it hands the state machine a snapshot to
    /// install: the purge waits until a durable snapshot covers the entries, and fails if writing
    /// the snapshot failed, so a crash in between leaves a log the node can start from (found
    /// by the simulation, seed 5: a node whose snapshot write failed could not start again).
    #[tokio::test(start_paused = true)]
    async fn a_purge_waits_for_a_durable_snapshot_that_covers_it() {
        let dir = log_dir("purge");
        let (durable, rx) = tokio::sync::watch::channel(DurableSnapshot::Covers(3));
        let mut log = FileLogStore::open(&dir.join("raft-log"), rx).expect("opens");
        log.inner.lock().await.write(LogRecord::Append((1..=9).map(entry).collect())).expect("append");
        let mut purging = log.clone();
        let purge = tokio::spawn(async move { purging.purge(entry(6).log_id).await });
        // On paused time this returns once every task is idle: the purge is waiting, not slow.
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        assert!(!purge.is_finished(), "the purge waits while the snapshot covers only 3");
        assert_eq!(log.entries().await.len(), 9);
        durable.send_replace(DurableSnapshot::Covers(6));
        purge.await.expect("task").expect("purged once the snapshot covers 6");
        assert_eq!(log.entries().await.first().map(|e| e.log_id.index), Some(7));

        durable.send_replace(DurableSnapshot::Failed);
        assert!(log.purge(entry(8).log_id).await.is_err(), "no purge after a failed snapshot write");
        assert_eq!(log.entries().await.len(), 3, "the entries stay");
        fs::remove_dir_all(&dir).expect("clean up");
    }
}
