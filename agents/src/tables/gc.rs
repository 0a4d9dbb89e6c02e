//! Garbage collection of table files: files of a table that its current metadata cannot reach
//! (written by a commit that never landed), and every file of a table that metadata no longer
//! knows (its topic was deleted). Only files older than the orphan grace are deleted; a commit
//! gives up after half of it (`GcConfig::commit_deadline`), so no commit can land later naming
//! a deleted file.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use floe_storage::{ListedTableObject, TableObjectKey};
use floe_tables::manifest::{decode_manifest, decode_manifest_list};
use floe_tables::metadata::TableMetadata;

use super::commit::{TableJobError, get_object};
use crate::Agent;
use crate::limits::{GC_DELETES_PER_ROUND_MAX, GC_LISTED_OBJECTS_MAX};

/// What a table directory is to metadata.
enum Known {
    /// A table's current generation (or its dead-letter table), at this metadata location.
    Current(String),
    /// A retired generation: kept whole.
    Retired,
}

pub(super) async fn collect(agent: &Agent, grace: Duration) -> Result<(), TableJobError> {
    crate::metrics::TABLE_OBJECT_REQUESTS.with_label_values(&["list"]).inc();
    let listed = agent.store.list_table_objects("", GC_LISTED_OBJECTS_MAX).await?;
    let cutoff = floe_metadata::now_ms().saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
    let mut old: BTreeMap<String, Vec<ListedTableObject>> = BTreeMap::new();
    for object in listed.into_iter().filter(|o| o.last_modified_ms <= cutoff) {
        let table_dir = object.key.as_str().split('/').nth(1).unwrap_or_default().to_owned();
        old.entry(table_dir).or_default().push(object);
    }
    if old.is_empty() {
        return Ok(());
    }
    // Read metadata after listing: a table committed before this point is known below.
    let known: BTreeMap<String, Known> = {
        let state = agent.metadata.read();
        let mut known = BTreeMap::new();
        let dir_of = |location: &str| {
            agent.store.table_key_of_uri(location).and_then(|key| key.as_str().split('/').nth(1).map(str::to_owned))
        };
        for table in state.tables.values() {
            for location in std::iter::once(&table.metadata_location).chain(&table.dead_letter_location) {
                if let Some(dir) = dir_of(location) {
                    known.insert(dir, Known::Current(location.clone()));
                }
            }
            for retired in &table.retired {
                known.insert(uuid::Uuid::from_bytes(retired.table_uuid).to_string(), Known::Retired);
            }
        }
        known
    };
    let mut deletes = 0;
    for (table_dir, objects) in old {
        let live = match known.get(&table_dir) {
            Some(Known::Retired) => continue,
            Some(Known::Current(location)) => reachable(agent, location).await?,
            None => HashSet::new(),
        };
        for object in objects.into_iter().filter(|o| !live.contains(&o.key)) {
            if deletes >= GC_DELETES_PER_ROUND_MAX {
                return Ok(());
            }
            crate::metrics::TABLE_OBJECT_REQUESTS.with_label_values(&["delete"]).inc();
            match agent.store.delete_table_object(&object.key).await {
                Ok(()) => {
                    deletes += 1;
                    crate::metrics::GC_DELETED.with_label_values(&["table"]).inc();
                    tracing::info!(key = %object.key, "deleted a table file no metadata refers to");
                }
                Err(e) => tracing::warn!(key = %object.key, error = %e, "deleting a table file"),
            }
        }
    }
    Ok(())
}

/// Every file the table's metadata at `location` refers to: itself, earlier metadata files,
/// and each snapshot's manifest list, manifests and data files.
async fn reachable(agent: &Agent, location: &str) -> Result<HashSet<TableObjectKey>, TableJobError> {
    let key_of =
        |uri: &str| agent.store.table_key_of_uri(uri).ok_or_else(|| TableJobError::ForeignLocation(uri.into()));
    let mut live = HashSet::new();
    let metadata_key = key_of(location)?;
    let metadata = TableMetadata::parse(&get_object(agent, &metadata_key).await?)?;
    live.insert(metadata_key);
    for entry in &metadata.metadata_log {
        live.insert(key_of(&entry.metadata_file)?);
    }
    let mut manifests_seen = HashSet::new();
    for snapshot in &metadata.snapshots {
        let list_key = key_of(&snapshot.manifest_list)?;
        let list = decode_manifest_list(&get_object(agent, &list_key).await?)?;
        live.insert(list_key);
        for manifest in list {
            let manifest_key = key_of(&manifest.manifest_path)?;
            if !manifests_seen.insert(manifest_key.clone()) {
                continue;
            }
            for entry in decode_manifest(&get_object(agent, &manifest_key).await?)? {
                live.insert(key_of(&entry.data_file.file_path)?);
            }
            live.insert(manifest_key);
        }
    }
    Ok(live)
}
