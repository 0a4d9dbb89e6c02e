//! Archives the metadata state to the object store once a second (when it changed), from the
//! leader only, so the metadata can be rebuilt from the bucket alone with `floe metadata
//! restore`; and that restore.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, anyhow};
use floe_metadata::{MetadataNode, archive};
use floe_storage::SegmentStore;

/// How often the leader archives a changed state: the recovery point of a restore.
pub(crate) const ARCHIVE_INTERVAL: Duration = Duration::from_secs(1);
/// Archived states kept; older ones are deleted.
const ARCHIVES_KEPT: usize = 5;

/// Runs until the process exits.
pub(crate) async fn run(node: MetadataNode, store: SegmentStore) {
    let mut archived_index = 0u64;
    loop {
        tokio::time::sleep(ARCHIVE_INTERVAL).await;
        if node.status().leader != Some(node.node_id()) {
            continue;
        }
        let (index, encoded) = {
            let state = node.read();
            if state.applied_index == archived_index || state.cluster_id.is_empty() {
                continue;
            }
            (state.applied_index, archive::encode(&state))
        };
        let bytes = match encoded {
            Ok(bytes) => bytes,
            Err(e) => {
                tracing::error!(error = %e, "encoding the state archive");
                continue;
            }
        };
        if let Err(e) = store.put_archive(&archive::archive_name(index), bytes.into()).await {
            tracing::warn!(error = %e, "archiving the metadata state");
            continue;
        }
        archived_index = index;
        if let Ok(names) = store.list_archives().await {
            let states: Vec<_> = names.iter().filter(|n| n.starts_with(archive::ARCHIVE_PREFIX)).collect();
            for old in states.iter().take(states.len().saturating_sub(ARCHIVES_KEPT)) {
                let _ = store.delete_archive(old).await;
            }
        }
    }
}

/// Writes the newest archived state into `data_dir` as the seed of a new cluster.
pub(crate) async fn restore(store: &SegmentStore, data_dir: &Path) -> anyhow::Result<()> {
    let names = store.list_archives().await.context("listing archived states")?;
    let newest = names
        .iter()
        .rfind(|n| n.starts_with(archive::ARCHIVE_PREFIX))
        .ok_or_else(|| anyhow!("no archived state under metadata/ in {}", store.url()))?;
    let bytes = store.get_archive(newest).await.with_context(|| format!("reading {newest}"))?;
    let state = archive::decode(&bytes).map_err(|e| anyhow!("{newest}: {e}"))?;
    if data_dir.join("raft-log").exists() {
        anyhow::bail!("{} already holds a Raft log; restore into an empty directory", data_dir.display());
    }
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(data_dir.join(archive::RESTORE_SEED_FILE), &bytes)?;
    println!(
        "restored {newest}: {} topics, cluster {}; start the node on {} to seed the new cluster",
        state.topics.len(),
        state.cluster_id,
        data_dir.display()
    );
    Ok(())
}
