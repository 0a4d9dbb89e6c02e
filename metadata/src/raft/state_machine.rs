//! The Raft state machine: committed commands applied to [`State`], and snapshots of it.
//!
//! A snapshot is the postcard-encoded [`SnapshotBody`] (state, last applied log id, membership).
//! The current one is kept in `raft-snapshot` as `crc32c: u32 LE | postcard((meta, body))`,
//! written to a temporary name, fsynced and renamed. On open the state is restored from it, and
//! openraft re-applies the committed entries after it from the log.

use std::fs::{self, File};
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, watch};

use super::{CommandResponse, NodeId, TypeConfig};
use crate::command::Command;
use crate::locks::{MutexRecovery, RwLockRecovery};
use crate::state::stored::AsStored;
use crate::state::{State, StoredState};

pub(crate) const SNAPSHOT_FILE: &str = "raft-snapshot";
/// Applied commands buffered for slow change-stream subscribers; one that falls further behind
/// is sent a fresh copy of the state instead.
const CHANGES_BUFFERED_MAX: usize = 8192;

/// One step of the change stream that agents mirror the state from.
#[derive(Clone, Debug)]
pub enum Change {
    /// `command` was applied at log index `index`.
    Applied(u64, Arc<Command>),
    /// The state was replaced wholesale (a snapshot was installed): resynchronize.
    Reset,
}

/// A snapshot's metadata and its encoded [`SnapshotBody`].
type StoredSnapshot = (SnapshotMeta<NodeId, BasicNode>, Vec<u8>);

#[derive(Debug, Serialize, Deserialize)]
struct SnapshotBody {
    /// In the format the body was written in (`state::stored::decoding`).
    #[serde(deserialize_with = "crate::state::stored::versioned_state")]
    state: StoredState,
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, BasicNode>,
}

/// A snapshot body (what peers send each other, and the `raft-snapshot` file holds) starts with
/// `FLOESNB` and `b'0'` plus the format version (a digit up to 9, `:` for 10), from format 2 on;
/// format 1 bodies have no magic.
const BODY_MAGIC: [u8; 7] = *b"FLOESNB";

/// Encodes a snapshot body in the format the cluster applies (`State::format`) when that is the
/// one before this binary's and holds everything in it, so a voter not yet upgraded can install
/// it mid-upgrade; otherwise in this binary's format.
fn encode_body(body: &SnapshotBodyToWrite<'_>) -> io::Result<Vec<u8>> {
    let current = crate::FORMAT_VERSION;
    let format = body.state.0.format;
    if format + 1 == current
        && let Ok(bytes) = crate::state::stored::encoding(format, || encode_body_as(body, format))
    {
        return Ok(bytes);
    }
    encode_body_as(body, current)
}

/// A [`SnapshotBody`] as it is written: the state written in its stored layout piece by piece
/// (`AsStored`), not converted whole first; the same bytes.
#[derive(Serialize)]
struct SnapshotBodyToWrite<'a> {
    state: AsStored<'a, State>,
    last_applied: Option<LogId<NodeId>>,
    last_membership: &'a StoredMembership<NodeId, BasicNode>,
}

fn encode_body_as(body: &SnapshotBodyToWrite<'_>, version: u32) -> io::Result<Vec<u8>> {
    let mut bytes = BODY_MAGIC.to_vec();
    bytes.push(b'0' + version as u8);
    postcard::to_extend(body, bytes).map_err(io::Error::other)
}

fn decode_body(bytes: &[u8]) -> io::Result<SnapshotBody> {
    let invalid = |e: postcard::Error| io::Error::new(io::ErrorKind::InvalidData, format!("raft snapshot body: {e}"));
    match bytes.split_first_chunk::<8>() {
        Some((magic, rest)) if magic[..7] == BODY_MAGIC => {
            let version = u32::from(magic[7].wrapping_sub(b'0'));
            if !(2..=crate::FORMAT_VERSION).contains(&version) {
                let why = format!("raft snapshot body: format {version}, which this Floe does not read");
                return Err(io::Error::new(io::ErrorKind::InvalidData, why));
            }
            crate::state::stored::decoding(version, || postcard::from_bytes(rest)).map_err(invalid)
        }
        _ => crate::state::stored::decoding(1, || postcard::from_bytes(bytes)).map_err(invalid),
    }
}

#[derive(Debug, Default)]
struct Applied {
    last_applied: Option<LogId<NodeId>>,
    last_membership: StoredMembership<NodeId, BasicNode>,
}

/// The state machine; clones share everything (the snapshot builder is a clone).
#[derive(Clone, Debug)]
pub(crate) struct StateMachine {
    dir: PathBuf,
    state: Arc<RwLock<State>>,
    applied: Arc<Mutex<Applied>>,
    applied_index: Arc<watch::Sender<u64>>,
    changes: tokio::sync::broadcast::Sender<Change>,
    /// Log id of the snapshot in the `raft-snapshot` file: a snapshot built in the background
    /// never replaces a newer one installed meanwhile.
    snapshot_file: Arc<std::sync::Mutex<Option<LogId<NodeId>>>>,
    /// What the `raft-snapshot` file covers, for the log store's purges ([`DurableSnapshot`]).
    durable: Arc<watch::Sender<DurableSnapshot>>,
    /// Tests: how the simulation (`raft::sim`) drives snapshot I/O.
    #[cfg(test)]
    test_io: Arc<TestSnapshotIo>,
}

/// The last log index the `raft-snapshot` file covers (0 without one), or that writing it
/// failed. openraft 0.9 purges a follower's log as soon as it hands the state machine a snapshot
/// to install, without waiting for the install: the log store waits for this instead, so a crash
/// in between never leaves a log that starts after the newest durable snapshot (which a node
/// cannot start from).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DurableSnapshot {
    Covers(u64),
    Failed,
}

/// Tests: snapshot files are written on the calling task (on virtual time, so a seed replays),
/// and the next write may fail with an I/O error, as a failing disk's would.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct TestSnapshotIo {
    pub(crate) inline: std::sync::atomic::AtomicBool,
    pub(crate) fail_next_write: std::sync::atomic::AtomicBool,
}

#[cfg(test)]
impl TestSnapshotIo {
    /// The injected fault, once.
    fn take_fault(&self) -> io::Result<()> {
        if self.fail_next_write.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Err(io::Error::other("injected disk fault"));
        }
        Ok(())
    }
}

/// The `raft-snapshot` file: `FLOERSN` and the format version's digit ([`crate::FORMAT_VERSION`]),
/// then `crc32c (u32 LE) | postcard (meta, body)`.
const SNAPSHOT_MAGIC: [u8; 8] = *b"FLOERSN2";

fn write_snapshot_file(dir: &Path, meta: &SnapshotMeta<NodeId, BasicNode>, body: &[u8]) -> io::Result<()> {
    let payload = postcard::to_stdvec(&(meta, body)).map_err(io::Error::other)?;
    let path = dir.join(SNAPSHOT_FILE);
    let tmp = path.with_extension("tmp");
    let mut file = File::create(&tmp)?;
    file.write_all(&SNAPSHOT_MAGIC)?;
    file.write_all(&crc32c::crc32c(&payload).to_le_bytes())?;
    file.write_all(&payload)?;
    file.sync_all()?;
    fs::rename(&tmp, &path)?;
    let written = SNAPSHOT_MAGIC.len() + 4 + payload.len();
    crate::metrics::WRITTEN_BYTES.with_label_values(&["raft-snapshot"]).inc_by(written as u64);
    File::open(dir)?.sync_all()
}

fn read_snapshot_file(dir: &Path) -> io::Result<Option<StoredSnapshot>> {
    let bytes = match fs::read(dir.join(SNAPSHOT_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let corrupt = |why: &str| io::Error::new(io::ErrorKind::InvalidData, format!("raft snapshot: {why}"));
    // Files from before the format was named have no magic, and are format 1.
    let framed = match bytes.split_first_chunk::<8>() {
        Some((magic, rest)) if magic[..7] == SNAPSHOT_MAGIC[..7] => {
            let version = u32::from(magic[7].wrapping_sub(b'0'));
            if version > crate::FORMAT_VERSION {
                return Err(corrupt(&format!("format {version}, newer than this Floe reads")));
            }
            rest
        }
        _ => &bytes[..],
    };
    let (crc, payload) = framed.split_first_chunk::<4>().ok_or_else(|| corrupt("truncated"))?;
    if crc32c::crc32c(payload) != u32::from_le_bytes(*crc) {
        return Err(corrupt("checksum mismatch"));
    }
    postcard::from_bytes(payload).map(Some).map_err(|e| corrupt(&e.to_string()))
}

/// Tests: the last log index and the state of the snapshot in `dir`, if there is one.
#[cfg(test)]
pub(crate) fn read_snapshot(dir: &Path) -> io::Result<Option<(u64, State)>> {
    let Some((meta, body)) = read_snapshot_file(dir)? else { return Ok(None) };
    let body = decode_body(&body)?;
    Ok(Some((meta.last_log_id.map_or(0, |l| l.index), State::from(body.state))))
}

impl StateMachine {
    pub(crate) fn changes(&self) -> tokio::sync::broadcast::Sender<Change> {
        self.changes.clone()
    }

    /// Restores the state from the snapshot in `dir`, if any.
    pub(crate) fn open(dir: &Path) -> io::Result<(Self, Arc<RwLock<State>>, watch::Receiver<u64>)> {
        let mut applied = Applied::default();
        let mut state = State::default();
        let mut on_disk = None;
        if let Some((meta, body)) = read_snapshot_file(dir)? {
            let decoded = decode_body(&body)?;
            state = State::from(decoded.state);
            applied.last_applied = decoded.last_applied;
            applied.last_membership = decoded.last_membership;
            on_disk = meta.last_log_id;
        }
        let durable = Arc::new(watch::Sender::new(DurableSnapshot::Covers(on_disk.map_or(0, |l| l.index))));
        let snapshot_file = Arc::new(std::sync::Mutex::new(on_disk));
        let index = applied.last_applied.map_or(0, |l| l.index);
        let (applied_index, applied_rx) = watch::channel(index);
        let state = Arc::new(RwLock::new(state));
        let machine = Self {
            dir: dir.to_owned(),
            state: state.clone(),
            applied: Arc::new(Mutex::new(applied)),
            applied_index: Arc::new(applied_index),
            changes: tokio::sync::broadcast::channel(CHANGES_BUFFERED_MAX).0,
            snapshot_file,
            durable,
            #[cfg(test)]
            test_io: Arc::default(),
        };
        Ok((machine, state, applied_rx))
    }
}

impl StateMachine {
    /// Runs blocking snapshot I/O on the blocking pool, so applying entries is not held up.
    async fn off_the_runtime<T: Send + 'static>(
        &self,
        io: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        #[cfg(test)]
        if self.test_io.inline.load(std::sync::atomic::Ordering::Relaxed) {
            return io();
        }
        tokio::task::spawn_blocking(io).await.map_err(io::Error::other)?
    }

    /// What the `raft-snapshot` file covers, as it changes (for [`FileLogStore`](super::log_store::FileLogStore)).
    pub(crate) fn durable_snapshot(&self) -> watch::Receiver<DurableSnapshot> {
        self.durable.subscribe()
    }

    /// Tests: the simulation's switches for snapshot I/O.
    #[cfg(test)]
    pub(crate) fn test_io(&self) -> Arc<TestSnapshotIo> {
        self.test_io.clone()
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        // Copy the state and its log id together (no entry is applied in between), then encode
        // and write without holding anything: applying entries must not wait for the disk.
        let (state, last_applied, last_membership) = {
            let applied = self.applied.lock().await;
            let state = self.state.read_recovered().clone();
            (state, applied.last_applied, applied.last_membership.clone())
        };
        // Written in its stored layout after both locks are released, a piece at a time.
        let meta = SnapshotMeta {
            last_log_id: last_applied,
            last_membership: last_membership.clone(),
            snapshot_id: format!(
                "{}-{}",
                last_applied.map_or(0, |l| l.leader_id.term),
                last_applied.map_or(0, |l| l.index)
            ),
        };
        let dir = self.dir.clone();
        let (written, durable) = (self.snapshot_file.clone(), self.durable.clone());
        let file_meta = meta.clone();
        #[cfg(test)]
        let test_io = self.test_io.clone();
        let write = move || -> io::Result<Vec<u8>> {
            let body = SnapshotBodyToWrite { state: AsStored(&state), last_applied, last_membership: &last_membership };
            let bytes = encode_body(&body)?;
            // A snapshot installed meanwhile is newer: leave its file in place.
            let mut newest = written.lock_recovered();
            if *newest < file_meta.last_log_id {
                #[cfg(test)]
                test_io.take_fault()?;
                write_snapshot_file(&dir, &file_meta, &bytes)?;
                *newest = file_meta.last_log_id;
                durable.send_replace(DurableSnapshot::Covers(file_meta.last_log_id.map_or(0, |l| l.index)));
            }
            Ok(bytes)
        };
        let bytes = self
            .off_the_runtime(write)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>> {
        let applied = self.applied.lock().await;
        Ok((applied.last_applied, applied.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResponse>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut applied = self.applied.lock().await;
        let mut responses = Vec::new();
        {
            let mut state = self.state.write_recovered();
            for entry in entries {
                applied.last_applied = Some(entry.log_id);
                responses.push(match entry.payload {
                    EntryPayload::Blank => CommandResponse::default(),
                    EntryPayload::Normal(command) => {
                        if self.changes.receiver_count() > 0 {
                            let _ = self.changes.send(Change::Applied(entry.log_id.index, Arc::new(command.clone())));
                        }
                        CommandResponse(state.apply(entry.log_id.index, command))
                    }
                    EntryPayload::Membership(membership) => {
                        applied.last_membership = StoredMembership::new(Some(entry.log_id), membership);
                        CommandResponse::default()
                    }
                });
            }
        }
        if let Some(last) = applied.last_applied {
            self.applied_index.send_replace(last.index);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let bytes = snapshot.into_inner();
        // Decoded, then made this node's `raft-snapshot` file; if either fails, the purge
        // openraft issued with this install must not go ahead.
        let failed = |e: StorageIOError<NodeId>| {
            self.durable.send_replace(DurableSnapshot::Failed);
            StorageError::from(e)
        };
        let body =
            decode_body(&bytes).map_err(|e| failed(StorageIOError::read_snapshot(Some(meta.signature()), &e)))?;
        {
            let mut newest = self.snapshot_file.lock_recovered();
            #[cfg(test)]
            self.test_io
                .take_fault()
                .map_err(|e| failed(StorageIOError::write_snapshot(Some(meta.signature()), &e)))?;
            write_snapshot_file(&self.dir, meta, &bytes)
                .map_err(|e| failed(StorageIOError::write_snapshot(Some(meta.signature()), &e)))?;
            *newest = meta.last_log_id;
            self.durable.send_replace(DurableSnapshot::Covers(meta.last_log_id.map_or(0, |l| l.index)));
        }
        let mut applied = self.applied.lock().await;
        *self.state.write_recovered() = State::from(body.state);
        applied.last_applied = meta.last_log_id;
        applied.last_membership = meta.last_membership.clone();
        self.applied_index.send_replace(meta.last_log_id.map_or(0, |l| l.index));
        let _ = self.changes.send(Change::Reset);
        Ok(())
    }

    /// The newest snapshot is the `raft-snapshot` file (built and installed snapshots are
    /// written there before they count), read when a peer needs it rather than kept in memory
    /// beside the state: at a million partitions that copy was 25–194 MiB.
    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let dir = self.dir.clone();
        let stored = self
            .off_the_runtime(move || read_snapshot_file(&dir))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(stored.map(|(meta, bytes)| Snapshot { meta, snapshot: Box::new(Cursor::new(bytes)) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot body of format 1 (no magic) and ones of later formats (`FLOESNB2`, ..., the
    /// golden files' states) still read, and one written now reads back as written.
    #[test]
    fn snapshot_bodies_of_older_formats_decode() {
        let membership = StoredMembership::<NodeId, BasicNode>::default();
        let older =
            [("state-v1.snap", None), ("state-v2.snap", Some(*b"FLOESNB2")), ("state-v3.snap", Some(*b"FLOESNB3"))];
        for (file, magic) in older {
            let golden = crate::state::tests::golden_dir().join(file);
            let archived = fs::read(golden).expect("the golden state file");
            let state = crate::archive::decode_state(&archived).expect("an old state");
            let last_applied = Some(LogId::new(openraft::CommittedLeaderId::new(3, 1), state.applied_index));
            let mut old = magic.map(|m| m.to_vec()).unwrap_or_default();
            old.extend_from_slice(&archived[12..]);
            old.extend(postcard::to_stdvec(&(last_applied, &membership)).expect("encode"));
            let body = decode_body(&old).expect("an old body");
            let stored = StoredState::from(state.clone());
            assert_eq!((&body.state, body.last_applied), (&stored, last_applied), "{file}");
            let now = encode_body(&SnapshotBodyToWrite {
                state: AsStored(&state),
                last_applied,
                last_membership: &membership,
            })
            .expect("encode");
            assert!(now.starts_with(b"FLOESNB") && u32::from(now[7] - b'0') == crate::FORMAT_VERSION);
            let again = decode_body(&now).expect("a body of today's format");
            assert_eq!((again.state, again.last_applied), (stored, last_applied));
        }
    }

    /// While the cluster applies the format before this binary's, snapshot bodies are written in
    /// it, byte for byte as that format's binary wrote them, so a voter not yet upgraded can
    /// install one; what that format cannot hold is written in this binary's format.
    #[test]
    fn snapshot_bodies_are_written_in_the_format_the_cluster_applies() {
        let golden = fs::read(crate::state::tests::golden_dir().join("state-v14.snap")).expect("the golden state");
        let state = crate::archive::decode_state(&golden).expect("format 14 state");
        assert_eq!(state.format, 14, "the golden state of format 14 applies format 14");
        let last_applied = Some(LogId::new(openraft::CommittedLeaderId::new(3, 1), state.applied_index));
        let membership = StoredMembership::default();
        let body = SnapshotBodyToWrite { state: AsStored(&state), last_applied, last_membership: &membership };
        let bytes = encode_body(&body).expect("encode");
        assert_eq!(&bytes[..8], b"FLOESNB>", "written as format 14");
        assert_eq!(&bytes[8..8 + golden.len() - 12], &golden[12..], "as format 14's binary wrote it");
        let read = crate::state::stored::decoding(14, || postcard::from_bytes::<SnapshotBody>(&bytes[8..]));
        assert_eq!(read.expect("a format 14 reader reads it").state, StoredState::from(state.clone()));

        // Once the cluster applies this binary's format, bodies are written in it.
        let mut current = state.clone();
        current.format = crate::FORMAT_VERSION;
        let bytes = encode_body(&SnapshotBodyToWrite { state: AsStored(&current), ..body }).expect("encode");
        assert_eq!(bytes[7], b'0' + crate::FORMAT_VERSION as u8);
        assert_eq!(decode_body(&bytes).expect("decodes").state, StoredState::from(current));
    }
}
