//! Small data files merged: a table committed every interval gets a file per partition and
//! commit, small when traffic is light. Once a partition of the table holds
//! [`SMALL_FILES_MIN`] files under a quarter of `floe.table.target.file.bytes`, they are rewritten
//! as one file (up to the target size) in a `replace` snapshot: the same rows, fewer files. Only
//! files written with the table's current schema are merged (older ones keep their layout);
//! files merged away stay reachable from older snapshots until those expire.
//!
//! In an upsert table the merged file keeps only live rows; position delete files that named
//! only merged files leave the snapshot with them.

use std::collections::HashMap;
use std::time::Instant;

use floe_metadata::{Command, TableCommit, TopicId};
use floe_storage::TableObjectKey;
use floe_tables::TableError;
use floe_tables::data::{decode_parquet, encode_parquet};
use floe_tables::deletes::{keep_rows, row_keys};
use floe_tables::manifest::{Content, EntryStatus, ManifestEntry, PartitionValue};
use floe_tables::metadata::{Operation, new_snapshot_id};

use super::commit::{
    CachedTable, Files, NewSnapshot, TARGET_FILE_BYTES_DEFAULT, TableJobError, data_file_key, get, live_entries,
    put_object,
};
use crate::Agent;

/// Small files of one partition that make a merge worth its GETs and PUTs.
const SMALL_FILES_MIN: usize = 8;

/// Merges one partition's small files of the table this job just committed, if it has enough;
/// whether it did.
pub(super) async fn merge_small_files(
    agent: &Agent,
    topic_id: TopicId,
    cache: &mut HashMap<TopicId, CachedTable>,
) -> Result<bool, TableJobError> {
    let target_file_bytes = {
        let state = agent.metadata.read();
        let Some(topic) = state.topics.get(&topic_id) else { return Ok(false) };
        state
            .topic_config_value(topic, "floe.table.target.file.bytes")
            .and_then(|value| value.parse::<i64>().ok())
            .unwrap_or(TARGET_FILE_BYTES_DEFAULT as i64)
    };
    // The table as this job committed it last; the commit below compares and sets its version,
    // so a table someone else committed since is left alone.
    let Some(mut cached) = cache.remove(&topic_id) else { return Ok(false) };
    let mut files = Files::new(agent, usize::try_from(target_file_bytes).unwrap_or(usize::MAX));
    let table = &mut cached.main;
    let schema =
        table.metadata.current_schema().cloned().ok_or_else(|| TableError::Invalid("no current schema".into()))?;
    let mut groups = live_entries(agent, table).await?;

    // The first partition with enough small files.
    let small = target_file_bytes / 4;
    let mut candidates: HashMap<(i32, Vec<Option<PartitionValue>>), Vec<usize>> = HashMap::new();
    let mut chosen = None;
    'find: for (group, (spec_id, entries)) in groups.iter().enumerate() {
        for (index, entry) in entries.iter().enumerate() {
            if entry.data_file.content != Content::Data || entry.data_file.file_size_in_bytes >= small {
                continue;
            }
            let same = candidates.entry((*spec_id, entry.data_file.partition.clone())).or_default();
            same.push(index);
            if same.len() >= SMALL_FILES_MIN {
                chosen = Some((group, entry.data_file.partition.clone(), same.clone()));
                break 'find;
            }
        }
    }
    let Some((group, partition, indices)) = chosen else {
        cache.insert(topic_id, cached);
        return Ok(false);
    };

    // Read them (current schema only), up to the target size.
    let (mut batches, mut merged, mut bytes) = (Vec::new(), Vec::new(), 0i64);
    for index in indices {
        let file = &groups[group].1[index].data_file;
        if bytes + file.file_size_in_bytes > target_file_bytes {
            break;
        }
        if let Some(rows) = decode_parquet(get(agent, &file.file_path).await?, &schema)? {
            match &table.keys {
                // An upsert table's merged file keeps only the live rows.
                Some(keys) => {
                    let mut live = Vec::new();
                    for batch in &rows {
                        live.extend(keys.live_rows(&file.file_path, row_keys(batch)?));
                    }
                    let mut at = 0;
                    for batch in rows {
                        let keep = live[at..at + batch.num_rows()].to_vec();
                        at += batch.num_rows();
                        if keep.iter().any(|k| *k) {
                            batches.push(keep_rows(&batch, keep)?);
                        }
                    }
                }
                None => batches.extend(rows),
            }
            merged.push(index);
            bytes += file.file_size_in_bytes;
        }
    }
    if merged.len() < 2 {
        cache.insert(topic_id, cached);
        return Ok(false);
    }
    let dir = table.metadata.table_uuid.to_string();
    let spec_id = groups[group].0;
    let spec = table
        .metadata
        .partition_specs
        .iter()
        .find(|s| s.spec_id == spec_id)
        .cloned()
        .ok_or_else(|| TableError::Invalid(format!("unknown partition spec {spec_id}")))?;
    let started = Instant::now();
    let snapshot_id = new_snapshot_id();
    let sequence_number = table.metadata.next_sequence_number();
    let mut merged_paths = Vec::new();
    let mut removed_rows = 0;
    for index in merged.iter().rev() {
        let entry = groups[group].1.remove(*index);
        removed_rows += entry.data_file.record_count;
        merged_paths.push(entry.data_file.file_path);
    }
    // Position deletes that named only merged files go with them.
    if let Some(keys) = table.keys.as_mut() {
        let obsolete = keys.retire(&merged_paths);
        groups[group].1.retain(|entry| !obsolete.contains(&entry.data_file.file_path));
    }
    let (mut added_rows, mut added_bytes, mut added_files) = (0, 0, 0);
    // Every merged row may have been deleted: then no file replaces them.
    if !batches.is_empty() {
        let mut keys = Vec::new();
        if table.keys.is_some() {
            for batch in &batches {
                keys.extend(row_keys(batch)?.map(|(p, key)| (p, key.map(<[u8]>::to_vec))));
            }
        }
        let encoded = tokio::task::spawn_blocking(move || encode_parquet(&batches))
            .await
            .map_err(|e| TableJobError::Task(e.to_string()))??;
        let key = TableObjectKey::new(&data_file_key(&dir, &spec, &partition));
        let data_file = encoded.data_file(agent.store.table_uri(&key), partition);
        (added_rows, added_bytes, added_files) = (encoded.record_count, encoded.bytes.len() as i64, 1);
        put_object(agent, &key, encoded.bytes).await?;
        if let Some(index) = table.keys.as_mut() {
            let rows = keys.iter().map(|(p, key)| (*p, key.as_deref()));
            index.add_file(data_file.file_path.clone(), spec_id, data_file.partition.clone(), rows)?;
        }
        groups[group].1.push(ManifestEntry {
            status: EntryStatus::Added,
            snapshot_id,
            sequence_number: None,
            file_sequence_number: None,
            data_file,
        });
    }
    table.manifests.clear();
    let properties = vec![
        ("added-data-files", added_files.to_string()),
        ("deleted-data-files", merged.len().to_string()),
        ("added-records", added_rows.to_string()),
        ("deleted-records", removed_rows.to_string()),
        ("added-files-size", added_bytes.to_string()),
    ];
    let snapshot = NewSnapshot { snapshot_id, sequence_number, operation: Operation::Replace, properties };
    files.add_snapshot(&dir, &schema, table, groups, snapshot, None).await?;
    let location = files.put_metadata(&dir, table, cached.version).await?;
    if started.elapsed() > agent.config.gc.commit_deadline() {
        return Err(TableJobError::DeadlinePassed(started.elapsed()));
    }
    let commit = TableCommit {
        topic_id,
        table_uuid: *cached.main.metadata.table_uuid.as_bytes(),
        base_version: cached.version,
        metadata_location: location,
        dead_letter_location: cached.dead_letter.as_ref().map(|d| d.location.clone()),
        ranges: Vec::new(),
        new_generation: false,
        now_ms: floe_metadata::now_ms(),
    };
    agent.metadata.propose(Command::CommitTableSnapshot(commit)).await?;
    crate::metrics::TABLE_FILES_MERGED.inc_by(merged.len() as u64);
    cached.version += 1;
    cache.insert(topic_id, cached);
    Ok(true)
}
