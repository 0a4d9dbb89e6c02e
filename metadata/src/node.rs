//! A metadata node in one process: owns the [`State`], its journal and snapshots, and serves
//! proposals and reads to the agent.
//!
//! Proposals from all callers queue on one channel; a single writer thread drains what is queued,
//! appends it to the journal with one fsync (group commit), then applies each command in order
//! and answers. A proposal is answered only after its entry is durable, so an acknowledged change
//! survives `kill -9`. Readers take a shared lock for short, allocation-light lookups.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use tokio::sync::{mpsc, oneshot, watch};

use crate::command::{Command, CommandError, Outcome};
use crate::journal::{Journal, encode_command};
use crate::snapshot;
use crate::state::State;

/// Proposals waiting for the writer. Bounded so that a stalled disk pushes back on agents.
const PROPOSAL_QUEUE_MAX: usize = 4096;
/// Entries written with one fsync at most.
const GROUP_COMMIT_MAX: usize = 1024;
/// Entries after which the writer snapshots and starts a new journal file.
const SNAPSHOT_EVERY_ENTRIES: u64 = 100_000;
/// Journal bytes after which the writer snapshots, whatever the entry count.
const SNAPSHOT_EVERY_BYTES: u64 = 256 * 1024 * 1024;

/// Why a proposal did not produce an outcome.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The state machine rejected the command; nothing changed.
    #[error(transparent)]
    Rejected(#[from] CommandError),
    /// The node cannot make the entry durable now; the caller may retry.
    #[error("metadata unavailable: {0}")]
    Unavailable(String),
}

struct Proposal {
    command: Command,
    reply: oneshot::Sender<Result<Outcome, NodeError>>,
}

/// Handle to the metadata node; cheap to clone.
#[derive(Clone, Debug)]
pub struct MetadataNode {
    state: Arc<RwLock<State>>,
    proposals: mpsc::Sender<Proposal>,
    applied: watch::Receiver<u64>,
}

impl std::fmt::Debug for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proposal").field("command", &self.command).finish_non_exhaustive()
    }
}

impl MetadataNode {
    /// Recovers state from `dir` (snapshot, then journal replay) and starts the writer thread.
    pub fn open(dir: &Path) -> std::io::Result<Self> {
        let mut state = snapshot::load(dir)?;
        let (journal, entries) = Journal::open(dir, state.applied_index)?;
        let replayed = entries.len();
        for (index, command) in entries {
            // Outcomes were returned when the entries were first applied; replay only rebuilds state.
            let _ = state.apply(index, command);
        }
        tracing::info!(dir = %dir.display(), applied_index = state.applied_index, replayed, "metadata state recovered");
        let (applied_tx, applied) = watch::channel(state.applied_index);
        let state = Arc::new(RwLock::new(state));
        let (proposals, queue) = mpsc::channel(PROPOSAL_QUEUE_MAX);
        let writer = Writer {
            dir: dir.to_owned(),
            state: state.clone(),
            journal,
            applied: applied_tx,
            entries_since_snapshot: replayed as u64,
        };
        std::thread::Builder::new().name("metadata-writer".into()).spawn(move || writer.run(queue))?;
        Ok(Self { state, proposals, applied })
    }

    /// Makes `command` durable, applies it and returns its outcome.
    pub async fn propose(&self, command: Command) -> Result<Outcome, NodeError> {
        let (reply, answer) = oneshot::channel();
        self.proposals
            .send(Proposal { command, reply })
            .await
            .map_err(|_| NodeError::Unavailable("metadata writer stopped".into()))?;
        answer.await.map_err(|_| NodeError::Unavailable("metadata writer stopped".into()))?
    }

    /// A read-only view of the state. Hold it briefly: the writer waits while it is held.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Watches the applied index: changes after every applied group of entries.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }

    /// Proposes `InitCluster` if this state has never been initialized.
    pub async fn ensure_initialized(&self) -> Result<(), NodeError> {
        if !self.read().cluster_id.is_empty() {
            return Ok(());
        }
        let cluster_id = uuid::Uuid::new_v4().simple().to_string();
        match self.propose(Command::InitCluster { cluster_id }).await {
            Ok(_) | Err(NodeError::Rejected(CommandError::AlreadyInitialized)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

struct Writer {
    dir: PathBuf,
    state: Arc<RwLock<State>>,
    journal: Journal,
    applied: watch::Sender<u64>,
    entries_since_snapshot: u64,
}

impl Writer {
    /// Runs until every [`MetadataNode`] handle is dropped, or the disk fails.
    fn run(mut self, mut queue: mpsc::Receiver<Proposal>) {
        let mut batch = Vec::with_capacity(GROUP_COMMIT_MAX);
        while queue.blocking_recv_many(&mut batch, GROUP_COMMIT_MAX) > 0 {
            if let Err(e) = self.commit(&mut batch) {
                tracing::error!(error = %e, "metadata journal write failed; refusing further proposals");
                for proposal in batch.drain(..) {
                    let _ = proposal.reply.send(Err(NodeError::Unavailable(e.to_string())));
                }
                // An fsync failure leaves the file in an unknown state: stop rather than guess.
                return;
            }
        }
    }

    fn commit(&mut self, batch: &mut Vec<Proposal>) -> std::io::Result<()> {
        let first_index = self.state.read().unwrap_or_else(|p| p.into_inner()).applied_index + 1;
        let mut encoded = Vec::with_capacity(batch.len());
        let mut accepted = Vec::with_capacity(batch.len());
        for proposal in batch.drain(..) {
            match encode_command(&proposal.command) {
                Ok(payload) => {
                    encoded.push((first_index + encoded.len() as u64, payload));
                    accepted.push(proposal);
                }
                Err(e) => {
                    let _ = proposal.reply.send(Err(NodeError::Rejected(CommandError::InvalidCommit(e.to_string()))));
                }
            }
        }
        if encoded.is_empty() {
            return Ok(());
        }
        self.journal.append(&encoded)?;
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        for ((index, _), proposal) in encoded.iter().zip(accepted) {
            let outcome = state.apply(*index, proposal.command).map_err(NodeError::Rejected);
            let _ = proposal.reply.send(outcome);
        }
        let applied_index = state.applied_index;
        drop(state);
        self.applied.send_replace(applied_index);
        self.entries_since_snapshot += encoded.len() as u64;
        if self.entries_since_snapshot >= SNAPSHOT_EVERY_ENTRIES || self.journal.bytes() >= SNAPSHOT_EVERY_BYTES {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            snapshot::write(&self.dir, &state)?;
            self.journal.rotate(state.applied_index + 1)?;
            self.entries_since_snapshot = 0;
            tracing::info!(applied_index = state.applied_index, "metadata snapshot written");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
