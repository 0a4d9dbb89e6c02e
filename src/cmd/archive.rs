//! The metadata archive writer (on the leader) and `floe metadata restore`.
//!
//! The leader starts a chain with a state snapshot, then uploads the commands applied since the
//! previous upload once a second as a log object, and starts a new chain with a fresh snapshot
//! every [`SNAPSHOT_INTERVAL`] (or [`SNAPSHOT_AFTER_COMMANDS`]). The recovery point of a restore
//! is therefore the last second of commits. Format and chaining: `floe_metadata::archive`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use floe_metadata::archive::{self, ArchiveName};
use floe_metadata::{Change, Command, MetadataNode};
use floe_storage::SegmentStore;
use tokio::sync::broadcast::error::TryRecvError;

/// How often applied commands are uploaded: the recovery point of a restore.
const ARCHIVE_INTERVAL: Duration = Duration::from_secs(1);
/// A new snapshot starts a new chain at least this often, bounding the replay at restore.
const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(300);
/// ... or after this many archived commands.
const SNAPSHOT_AFTER_COMMANDS: usize = 100_000;
/// Commands held while uploads fail; past this the chain restarts with a snapshot.
const PENDING_COMMANDS_MAX: usize = 200_000;
/// Snapshots kept (with the logs after the oldest of them); older archive objects are deleted.
const SNAPSHOTS_KEPT: usize = 3;

/// A chain being written: where the last uploaded object ended and what waits to be uploaded.
struct Chain {
    changes: tokio::sync::broadcast::Receiver<Change>,
    generation: u64,
    position: u64,
    pending: Vec<(u64, Arc<Command>)>,
    started: Instant,
    archived_commands: usize,
}

/// Runs until the process exits.
pub(crate) async fn run(node: MetadataNode, store: SegmentStore) {
    let mut chain: Option<Chain> = None;
    loop {
        tokio::time::sleep(ARCHIVE_INTERVAL).await;
        if node.status().leader != Some(node.node_id()) {
            chain = None;
            continue;
        }
        let restart = match &mut chain {
            None => true,
            Some(c) => {
                let keep = collect(c) && c.pending.len() <= PENDING_COMMANDS_MAX;
                !keep || c.started.elapsed() >= SNAPSHOT_INTERVAL || c.archived_commands >= SNAPSHOT_AFTER_COMMANDS
            }
        };
        if let Some(c) = &mut chain
            && !c.pending.is_empty()
            && let Err(e) = upload_log(&store, c).await
        {
            tracing::warn!(error = %e, pending = c.pending.len(), "archiving metadata commands");
            continue;
        }
        if chain.as_ref().is_some_and(|c| c.pending.is_empty()) {
            archived_now();
        }
        if restart {
            match start_chain(&node, &store).await {
                Ok(Some(new)) => {
                    chain = Some(new);
                    archived_now();
                }
                Ok(None) => chain = None,
                Err(e) => {
                    tracing::warn!(error = %e, "archiving a metadata snapshot");
                    chain = None;
                }
            }
        }
    }
}

/// Everything applied so far is archived (`floe_metadata_archive_last_success_timestamp_seconds`).
fn archived_now() {
    floe_metadata::metrics::ARCHIVE_LAST_SUCCESS.set(floe_metadata::now_ms() as f64 / 1000.0);
}

/// Moves applied commands from the change stream into `pending`. False when the chain cannot
/// continue (the stream lagged or was reset, or a restore changed the generation).
fn collect(chain: &mut Chain) -> bool {
    loop {
        match chain.changes.try_recv() {
            Ok(Change::Applied(index, command)) => {
                let next_after = chain.pending.last().map_or(chain.position, |(i, _)| *i);
                if index <= next_after {
                    continue;
                }
                if matches!(*command, Command::RestoreState(_)) {
                    return false;
                }
                chain.pending.push((index, command));
            }
            Err(TryRecvError::Empty) => return true,
            Ok(Change::Reset) | Err(TryRecvError::Lagged(_) | TryRecvError::Closed) => return false,
        }
    }
}

async fn upload_log(store: &SegmentStore, chain: &mut Chain) -> anyhow::Result<()> {
    let last = chain.pending.last().map_or(chain.position, |(i, _)| *i);
    let name = ArchiveName::Log { generation: chain.generation, after: chain.position, last };
    let borrowed: Vec<(u64, &Command)> = chain.pending.iter().map(|(i, c)| (*i, c.as_ref())).collect();
    let bytes = archive::encode_log(&borrowed)?;
    store.put_archive(&name.to_string(), bytes.into()).await?;
    chain.archived_commands += chain.pending.len();
    chain.position = last;
    chain.pending.clear();
    Ok(())
}

/// Uploads a snapshot of the current state and starts a chain after it; `None` while the
/// cluster is not initialized yet. Subscribing before copying the state means every command
/// after the snapshot reaches the chain.
async fn start_chain(node: &MetadataNode, store: &SegmentStore) -> anyhow::Result<Option<Chain>> {
    let changes = node.changes();
    // Copied under the read lock, encoded after it: applying commands waits for the copy only.
    let state = node.read().clone();
    if state.cluster_id.is_empty() {
        return Ok(None);
    }
    let (generation, index) = (state.generation, state.applied_index);
    // About a second at a million partitions: off the async workers.
    let bytes = tokio::task::spawn_blocking(move || archive::encode_state(&state)).await??;
    store.put_archive(&ArchiveName::State { generation, index }.to_string(), bytes.into()).await?;
    tracing::debug!(generation, index, "metadata snapshot archived");
    if let Ok(names) = store.list_archives().await {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        for old in archive::obsolete(&refs, SNAPSHOTS_KEPT) {
            if let Err(e) = store.delete_archive(old).await {
                tracing::warn!(error = %e, name = old, "deleting an old metadata archive object");
            }
        }
    }
    Ok(Some(Chain {
        changes,
        generation,
        position: index,
        pending: Vec::new(),
        started: Instant::now(),
        archived_commands: 0,
    }))
}

/// Rebuilds the newest archived state (snapshot plus command log) into `data_dir` as the seed
/// of a new cluster.
pub(crate) async fn restore(store: &SegmentStore, data_dir: &Path) -> anyhow::Result<()> {
    if data_dir.join("raft-log").exists() {
        anyhow::bail!("{} already holds a Raft log; restore into an empty directory", data_dir.display());
    }
    let names = store.list_archives().await.context("listing the metadata archive")?;
    let plan = archive::plan_restore(names.iter().map(String::as_str))
        .ok_or_else(|| anyhow!("no archived metadata snapshot under metadata/ in {}", store.url()))?;
    let snapshot = plan.snapshot.to_string();
    let bytes = store.get_archive(&snapshot).await.with_context(|| format!("reading {snapshot}"))?;
    let mut state = archive::decode_state(&bytes).with_context(|| snapshot.clone())?;
    for log in &plan.logs {
        let name = log.to_string();
        let bytes = store.get_archive(&name).await.with_context(|| format!("reading {name}"))?;
        let commands = archive::decode_log(&bytes).with_context(|| name.clone())?;
        archive::replay_log(&mut state, *log, commands)?;
    }
    std::fs::create_dir_all(data_dir)?;
    let restored = format!(
        "restored {snapshot} and {} command logs up to index {}: {} topics, cluster {}; start the node on {} to seed the new cluster",
        plan.logs.len(),
        state.applied_index,
        state.topics.len(),
        state.cluster_id,
        data_dir.display()
    );
    std::fs::write(data_dir.join(archive::RESTORE_SEED_FILE), archive::encode_state(&state)?)?;
    println!("{restored}");
    Ok(())
}
