//! One table commit: read what the table lacks, write it as Parquet plus Iceberg metadata, and
//! propose the snapshot with the offsets it adds.
//!
//! A table is raw (values as bytes, `_value`) when its topic had no value schema when the table
//! was created, else typed: each record is decoded with the schema its framing names, and the
//! table's schema evolves to hold new writer schemas. Records that do not decode, or whose
//! schema the table cannot evolve to, go to the topic's dead-letter table in the same commit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_metadata::{Command, TableCommit, TableRange, TableRecord, TopicId};
use floe_registry::ParsedSchema;
use floe_storage::{StorageError, TableObjectKey};
use floe_tables::TableError;
use floe_tables::avro::{NamedTypes, Schema, Value, append_value};
use floe_tables::data::{KafkaRow, RowsBuilder, encode_parquet, split_by_partition};
use floe_tables::deletes::{encode_position_deletes, row_keys};
use floe_tables::manifest::{
    Content, DataFile, EntryStatus, ManifestEntry, ManifestFile, ManifestHeader, PartitionValue, decode_manifest,
    decode_manifest_list, encode_manifest, encode_manifest_list,
};
use floe_tables::metadata::{Operation, PartitionSpec, Snapshot, Summary, TableMetadata, Transform, new_snapshot_id};
use floe_tables::protobuf::{DynamicMessage, ReflectMessage};
use floe_tables::schema::{IcebergSchema, column, dead_letter_schema, raw_table_schema, typed_table_schema};

use super::upsert::{KeyIndex, MODE_PROPERTY, MODE_UPSERT, PendingDeletes};
use crate::Agent;
use crate::fetch::{FetchError, FetchedRecord, ReadLimits, fetched_records, read_partition};
use crate::limits::{
    TABLE_BATCH_ROWS, TABLE_COMMIT_READ_BYTES_MAX, TABLE_MANIFESTS_MAX, TABLE_READ_BYTES, TABLE_SNAPSHOTS_MAX,
};
use crate::produce::schemas::{SchemaName, VALUE_SCHEMA_ID_HEADER, framed, header_among, schema_id_of_guid};
use crate::record_batch::records::Header;

/// `floe.table.target.file.bytes` when unset.
pub(super) const TARGET_FILE_BYTES_DEFAULT: usize = 128 * 1024 * 1024;

/// Why a table commit did not happen.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableJobError {
    #[error("the topic is gone")]
    TopicGone,
    #[error("object store: {0}")]
    Storage(#[from] StorageError),
    #[error("{0}")]
    Table(#[from] TableError),
    #[error("reading the topic: {0}")]
    Fetch(#[from] FetchError),
    #[error("decoding records: {0}")]
    Records(String),
    #[error("metadata: {0}")]
    Metadata(#[from] floe_metadata::NodeError),
    #[error("{0} is not a location under this store's tables/ prefix")]
    ForeignLocation(String),
    #[error("files were written {0:?} ago, past the commit deadline; they are left to garbage collection")]
    DeadlinePassed(Duration),
    #[error("encoding task failed: {0}")]
    Task(String),
}

/// One Iceberg table as last committed: where its metadata is, the metadata, and the current
/// snapshot's manifests (a new snapshot keeps them and adds its own).
#[derive(Debug)]
pub(super) struct TableFiles {
    /// Empty for a table not committed yet.
    pub(super) location: String,
    pub(super) metadata: TableMetadata,
    pub(super) manifests: Vec<ManifestFile>,
    /// An upsert table's live rows by key, once read.
    pub(super) keys: Option<KeyIndex>,
}

impl TableFiles {
    fn is_upsert(&self) -> bool {
        self.metadata.properties.get(MODE_PROPERTY).is_some_and(|mode| mode == MODE_UPSERT)
    }
}

/// A topic's tables as this job last committed them, so the next commit need not read them.
#[derive(Debug)]
pub(crate) struct CachedTable {
    pub(super) version: u64,
    pub(super) main: TableFiles,
    pub(super) dead_letter: Option<TableFiles>,
}

/// What a commit did.
#[derive(Debug)]
pub(super) struct CommitSummary {
    pub(super) rows: u64,
    pub(super) files: usize,
    /// It stopped at its read budget with more to read.
    pub(super) backlogged: bool,
}

/// What the commit reads from the mirror before any I/O.
struct Plan {
    target_file_bytes: usize,
    /// (partition, first offset the table lacks, last stable offset).
    partitions: Vec<(i32, i64, i64)>,
    record: Option<TableRecord>,
    /// The topic's registry namespace key.
    namespace: String,
    /// A new table is typed: the topic's value subject has a schema, or values are validated.
    typed_if_new: bool,
    /// `floe.table.partition.by`.
    partition_by: String,
    /// The topic's `retention.ms` when it deletes: snapshots older than it expire.
    retention_ms: Option<i64>,
    /// `cleanup.policy` includes `compact`: a new table is an upsert table.
    compacted: bool,
}

fn plan(agent: &Agent, topic_id: TopicId) -> Result<Plan, TableJobError> {
    let state = agent.metadata.read();
    let topic = state.topics.get(&topic_id).ok_or(TableJobError::TopicGone)?;
    let record = state.tables.get(&topic_id).cloned();
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, log)| {
            let committed = record.as_ref().and_then(|r| r.offsets.get(index)).copied().unwrap_or(0);
            (i32::try_from(index).unwrap_or(i32::MAX), committed.max(log.log_start_offset), log.last_stable_offset())
        })
        .collect();
    let target_file_bytes = state
        .topic_config_value(topic, "floe.table.target.file.bytes")
        .and_then(|value| value.parse().ok())
        .unwrap_or(TARGET_FILE_BYTES_DEFAULT);
    let namespace = floe_metadata::namespace::key_of(&topic.name).unwrap_or("").to_owned();
    let name = topic.name.split_once(floe_metadata::namespace::SEPARATOR).map_or(topic.name.as_str(), |(_, n)| n);
    let has_value_schema = state
        .schema_registry(&namespace)
        .and_then(|registry| registry.subjects.get(&format!("{name}-value")))
        .is_some_and(|subject| subject.latest_live().is_some());
    let validated = state.topic_config_value(topic, "confluent.value.schema.validation") == Some("true");
    let partition_by = state.topic_config_value(topic, "floe.table.partition.by").unwrap_or("none").to_owned();
    let policy = state.topic_config_value(topic, "cleanup.policy").unwrap_or("delete");
    let deletes = policy.split(',').any(|p| p.trim() == "delete");
    let compacted = policy.split(',').any(|p| p.trim() == "compact");
    let retention_ms = deletes
        .then(|| state.topic_config_value(topic, "retention.ms").and_then(|ms| ms.parse::<i64>().ok()))
        .flatten()
        .filter(|ms| *ms >= 0);
    Ok(Plan {
        target_file_bytes,
        partitions,
        record,
        namespace,
        typed_if_new: has_value_schema || validated,
        partition_by,
        retention_ms,
        compacted,
    })
}

/// Reads the table object at `location` (a URI under this store's tables/ prefix).
pub(super) async fn get(agent: &Agent, location: &str) -> Result<Bytes, TableJobError> {
    let key = agent.store.table_key_of_uri(location).ok_or_else(|| TableJobError::ForeignLocation(location.into()))?;
    get_object(agent, &key).await
}

/// Reads a table object: one GET of the table job's, counted for its cost.
pub(super) async fn get_object(agent: &Agent, key: &TableObjectKey) -> Result<Bytes, TableJobError> {
    crate::metrics::TABLE_OBJECT_REQUESTS.with_label_values(&["get"]).inc();
    Ok(agent.store.get_table_object(key).await?)
}

/// Stores a table object: one PUT of the table job's, counted for its cost.
pub(super) async fn put_object(agent: &Agent, key: &TableObjectKey, bytes: Vec<u8>) -> Result<(), TableJobError> {
    crate::metrics::TABLE_OBJECT_REQUESTS.with_label_values(&["put"]).inc();
    crate::metrics::TABLE_BYTES_WRITTEN.inc_by(bytes.len() as u64);
    Ok(agent.store.put_table_object(key, Bytes::from(bytes)).await?)
}

/// Reads a table's metadata at `location` and its current snapshot's manifest list.
async fn load(agent: &Agent, location: &str) -> Result<TableFiles, TableJobError> {
    let metadata = TableMetadata::parse(&get(agent, location).await?)?;
    let manifests = match metadata.current_snapshot() {
        Some(snapshot) => decode_manifest_list(&get(agent, &snapshot.manifest_list).await?)?,
        None => Vec::new(),
    };
    Ok(TableFiles { location: location.to_owned(), metadata, manifests, keys: None })
}

/// A table not committed yet, in a directory of its own; `upsert` for a compacted topic's.
fn new_table(agent: &Agent, topic_id: TopicId, schema: IcebergSchema, upsert: bool) -> TableFiles {
    let table_uuid = uuid::Uuid::new_v4();
    let location = agent.store.table_uri(&TableObjectKey::new(&table_uuid.to_string()));
    let properties = [
        ("write.format.default", "parquet".to_owned()),
        ("write.parquet.compression-codec", "zstd".to_owned()),
        ("floe.managed", "true".to_owned()),
        ("floe.topic-id", topic_id.to_string()),
        (MODE_PROPERTY, if upsert { MODE_UPSERT } else { "append" }.to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let metadata = TableMetadata::new(
        table_uuid,
        location,
        schema,
        PartitionSpec::unpartitioned(),
        properties,
        floe_metadata::now_ms(),
    );
    TableFiles { location: String::new(), metadata, manifests: Vec::new(), keys: upsert.then(KeyIndex::default) }
}

/// A table this commit writes rows into.
struct Target {
    table: TableFiles,
    /// The schema rows are collected with (the table's current one).
    schema: IcebergSchema,
    rows: RowsBuilder,
    batches: Vec<floe_tables::RecordBatch>,
    batch_payload: usize,
    files: Vec<DataFile>,
    /// The schema evolved: a new metadata file is due even without new files.
    evolved: bool,
    /// An upsert table's tombstones and deleted rows not yet written.
    pending: PendingDeletes,
}

impl Target {
    fn new(table: TableFiles) -> Result<Self, TableJobError> {
        let schema =
            table.metadata.current_schema().cloned().ok_or_else(|| TableError::Invalid("no current schema".into()))?;
        let rows = RowsBuilder::new(&schema);
        Ok(Self {
            table,
            schema,
            rows,
            batches: Vec::new(),
            batch_payload: 0,
            files: Vec::new(),
            evolved: false,
            pending: PendingDeletes::default(),
        })
    }

    fn is_raw(&self) -> bool {
        self.schema.field(column::RAW_VALUE).is_some()
    }

    fn dir(&self) -> String {
        self.table.metadata.table_uuid.to_string()
    }

    /// Closes the rows collected so far into a batch.
    fn end_batch(&mut self) -> Result<(), TableJobError> {
        if self.rows.rows() > 0 {
            self.batch_payload += self.rows.payload_bytes;
            self.batches.push(self.rows.finish()?);
        }
        Ok(())
    }

    /// Counts a row; closes the batch when it is full.
    fn row_done(&mut self) -> Result<(), TableJobError> {
        if self.rows.rows() >= TABLE_BATCH_ROWS {
            self.end_batch()?;
        }
        Ok(())
    }

    fn full(&self, target_file_bytes: usize) -> bool {
        self.batch_payload + self.rows.payload_bytes >= target_file_bytes
    }
}

/// What writes a commit's files, and when it wrote the first (for the commit deadline).
pub(super) struct Files<'a> {
    agent: &'a Agent,
    target_file_bytes: usize,
    first_put: Option<Instant>,
    /// Data files written.
    written: usize,
}

impl<'a> Files<'a> {
    pub(super) fn new(agent: &'a Agent, target_file_bytes: usize) -> Self {
        Self { agent, target_file_bytes, first_put: None, written: 0 }
    }

    /// Encodes the target's collected rows as Parquet, one file per partition of the table's
    /// default spec, and stores them.
    async fn write_file(&mut self, target: &mut Target) -> Result<(), TableJobError> {
        target.end_batch()?;
        let mut batches = std::mem::take(&mut target.batches);
        target.batch_payload = 0;
        let upsert = target.table.keys.is_some();
        if let Some(keys) = target.table.keys.as_mut() {
            batches = keys.supersede(batches, &mut target.pending)?;
        }
        if batches.is_empty() {
            return Ok(());
        }
        let spec = target
            .table
            .metadata
            .default_spec()
            .cloned()
            .ok_or_else(|| TableError::Invalid("no default spec".into()))?;
        let schema = target.schema.clone();
        let spec_of_files = spec.clone();
        let encoded = tokio::task::spawn_blocking(move || -> Result<Vec<_>, TableError> {
            let mut groups: Vec<(Vec<Option<PartitionValue>>, Vec<floe_tables::RecordBatch>)> = Vec::new();
            for batch in batches {
                for (key, part) in split_by_partition(batch, &spec, &schema)? {
                    match groups.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, parts)) => parts.push(part),
                        None => groups.push((key, vec![part])),
                    }
                }
            }
            groups
                .into_iter()
                .map(|(key, parts)| {
                    // An upsert table indexes where each key's row lands.
                    let mut keys = Vec::new();
                    if upsert {
                        for part in &parts {
                            keys.extend(row_keys(part)?.map(|(p, key)| (p, key.map(<[u8]>::to_vec))));
                        }
                    }
                    encode_parquet(&parts).map(|file| (key, file, keys))
                })
                .collect()
        })
        .await
        .map_err(|e| TableJobError::Task(e.to_string()))??;
        for (key, file, keys) in encoded {
            let object = TableObjectKey::new(&data_file_key(&target.dir(), &spec_of_files, &key));
            let data_file = file.data_file(self.agent.store.table_uri(&object), key);
            self.first_put.get_or_insert_with(Instant::now);
            put_object(self.agent, &object, file.bytes).await?;
            crate::metrics::TABLE_FILES.inc();
            self.written += 1;
            if let Some(index) = target.table.keys.as_mut() {
                let rows = keys.iter().map(|(p, key)| (*p, key.as_deref()));
                let spec_id = spec_of_files.spec_id;
                index.add_file(data_file.file_path.clone(), spec_id, data_file.partition.clone(), rows)?;
            }
            target.files.push(data_file);
        }
        Ok(())
    }

    async fn write_file_if_full(&mut self, target: &mut Target) -> Result<(), TableJobError> {
        if target.full(self.target_file_bytes) {
            self.write_file(target).await?;
        }
        Ok(())
    }

    /// Writes an upsert table's position delete files for the rows this commit deleted, one
    /// per partition of the data files they name.
    async fn write_deletes(&mut self, target: &mut Target) -> Result<(), TableJobError> {
        let dir = target.dir();
        let Some(index) = target.table.keys.as_mut() else { return Ok(()) };
        for mut group in index.delete_groups(&mut target.pending) {
            let spec = target
                .table
                .metadata
                .partition_specs
                .iter()
                .find(|spec| spec.spec_id == group.spec_id)
                .ok_or_else(|| TableError::Invalid(format!("unknown partition spec {}", group.spec_id)))?;
            let file = encode_position_deletes(&mut group.deletes)?;
            let object = TableObjectKey::new(&data_file_key(&dir, spec, &group.partition));
            let delete_file = file.delete_file(self.agent.store.table_uri(&object), group.partition);
            self.first_put.get_or_insert_with(Instant::now);
            put_object(self.agent, &object, file.bytes).await?;
            crate::metrics::TABLE_ROWS_DELETED.inc_by(delete_file.record_count.unsigned_abs());
            index.add_delete_file(delete_file.file_path.clone(), group.files);
            target.files.push(delete_file);
        }
        Ok(())
    }

    /// Writes a manifest for each (partition spec, entries) group (two when it holds data and
    /// delete files), then the manifest list of the table's manifests with them, and makes the
    /// snapshot current (expiring old ones).
    pub(super) async fn add_snapshot(
        &mut self,
        dir: &str,
        schema: &IcebergSchema,
        table: &mut TableFiles,
        groups: Vec<(i32, Vec<ManifestEntry>)>,
        snapshot: NewSnapshot,
        retention_ms: Option<i64>,
    ) -> Result<(), TableJobError> {
        let NewSnapshot { snapshot_id, sequence_number, operation, mut properties } = snapshot;
        for (spec_id, entries) in groups {
            let spec = table
                .metadata
                .partition_specs
                .iter()
                .find(|spec| spec.spec_id == spec_id)
                .cloned()
                .ok_or_else(|| TableError::Invalid(format!("unknown partition spec {spec_id}")))?;
            let (data, deletes): (Vec<_>, Vec<_>) =
                entries.into_iter().partition(|entry| entry.data_file.content == Content::Data);
            for (content, entries) in [(Content::Data, data), (Content::PositionDeletes, deletes)] {
                if entries.is_empty() {
                    continue;
                }
                let header = ManifestHeader { schema, spec: &spec, content };
                let manifest = encode_manifest(header, &entries)?;
                let length = manifest.len() as i64;
                let name = format!("metadata/{}-m0.avro", uuid::Uuid::now_v7().simple());
                let uri = self.put(dir, name, manifest).await?;
                let summary = ManifestFile::summarise(uri, length, header, sequence_number, snapshot_id, &entries);
                table.manifests.push(summary);
            }
        }
        let parent = table.metadata.current_snapshot_id;
        let list = encode_manifest_list(snapshot_id, parent, sequence_number, &table.manifests)?;
        let list_uri =
            self.put(dir, format!("metadata/snap-{snapshot_id}-{}.avro", uuid::Uuid::now_v7().simple()), list).await?;
        let totals = |content: Content| {
            table.manifests.iter().filter(|m| m.content == content).fold((0i64, 0i64), |(rows, files), m| {
                (
                    rows + m.added_rows_count + m.existing_rows_count,
                    files + i64::from(m.added_files_count + m.existing_files_count),
                )
            })
        };
        let (total_rows, total_files) = totals(Content::Data);
        let (total_deletes, total_delete_files) = totals(Content::PositionDeletes);
        properties.push(("total-records", total_rows.to_string()));
        properties.push(("total-data-files", total_files.to_string()));
        properties.push(("total-delete-files", total_delete_files.to_string()));
        properties.push(("total-position-deletes", total_deletes.to_string()));
        properties.push(("total-equality-deletes", "0".to_owned()));
        let snapshot = Snapshot {
            snapshot_id,
            parent_snapshot_id: parent,
            sequence_number,
            timestamp_ms: floe_metadata::now_ms(),
            manifest_list: list_uri,
            summary: Summary {
                operation,
                properties: properties.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            },
            schema_id: Some(schema.schema_id),
        };
        let previous = (!table.location.is_empty()).then(|| table.location.clone());
        table.metadata.add_snapshot(snapshot, previous);
        table.metadata.expire_snapshots(floe_metadata::now_ms(), retention_ms, TABLE_SNAPSHOTS_MAX);
        Ok(())
    }

    /// Writes the table's next metadata file; its location.
    pub(super) async fn put_metadata(
        &mut self,
        dir: &str,
        table: &mut TableFiles,
        version: u64,
    ) -> Result<String, TableJobError> {
        let name = format!("metadata/{:05}-{}.metadata.json", version + 1, uuid::Uuid::now_v7().simple());
        let location = self.put(dir, name, table.metadata.to_json()?).await?;
        table.location = location.clone();
        Ok(location)
    }

    async fn put(&mut self, dir: &str, relative: String, bytes: Vec<u8>) -> Result<String, TableJobError> {
        let key = TableObjectKey::new(&format!("{dir}/{relative}"));
        self.first_put.get_or_insert_with(Instant::now);
        put_object(self.agent, &key, bytes).await?;
        Ok(self.agent.store.table_uri(&key))
    }

    /// Writes the target's last file, then its manifest, manifest list and next metadata
    /// file; the table's new metadata location, or the old one when nothing changed.
    async fn publish(
        &mut self,
        target: &mut Target,
        version: u64,
        ranges: &[TableRange],
        retention_ms: Option<i64>,
    ) -> Result<String, TableJobError> {
        self.write_file(target).await?;
        self.write_deletes(target).await?;
        let dir = target.dir();
        let files = std::mem::take(&mut target.files);
        let table = &mut target.table;
        if files.is_empty() && !table.location.is_empty() && !target.evolved {
            return Ok(table.location.clone());
        }
        if !files.is_empty() {
            let spec =
                table.metadata.default_spec().cloned().ok_or_else(|| TableError::Invalid("no default spec".into()))?;
            let snapshot_id = new_snapshot_id();
            let sequence_number = table.metadata.next_sequence_number();
            let data = || files.iter().filter(|f| f.content == Content::Data);
            let deletes = || files.iter().filter(|f| f.content == Content::PositionDeletes);
            let file_count = data().count();
            let added_bytes: i64 = files.iter().map(|f| f.file_size_in_bytes).sum();
            let added_rows: i64 = data().map(|f| f.record_count).sum();
            let delete_file_count = deletes().count();
            let added_deletes: i64 = deletes().map(|f| f.record_count).sum();
            let entries: Vec<ManifestEntry> = files
                .into_iter()
                .map(|data_file| ManifestEntry {
                    status: EntryStatus::Added,
                    snapshot_id,
                    sequence_number: None,
                    file_sequence_number: None,
                    data_file,
                })
                .collect();
            // One manifest per commit; past TABLE_MANIFESTS_MAX they are rewritten as one per
            // partition spec, so readers plan from a bounded list.
            let mut groups = Vec::new();
            if table.manifests.len() >= TABLE_MANIFESTS_MAX {
                groups = live_entries(self.agent, table).await?;
                table.manifests.clear();
                crate::metrics::TABLE_MANIFEST_MERGES.inc();
            }
            match groups.iter_mut().find(|(spec_id, _)| *spec_id == spec.spec_id) {
                Some((_, existing)) => existing.extend(entries),
                None => groups.push((spec.spec_id, entries)),
            }
            let offsets: Vec<String> = ranges.iter().map(|r| format!("{}:{}-{}", r.partition, r.from, r.to)).collect();
            let mut properties = vec![
                ("added-data-files", file_count.to_string()),
                ("added-records", added_rows.to_string()),
                ("added-files-size", added_bytes.to_string()),
                ("floe.offsets", offsets.join(",")),
            ];
            let mut operation = Operation::Append;
            if delete_file_count > 0 {
                properties.push(("added-delete-files", delete_file_count.to_string()));
                properties.push(("added-position-delete-files", delete_file_count.to_string()));
                properties.push(("added-position-deletes", added_deletes.to_string()));
                operation = if file_count > 0 { Operation::Overwrite } else { Operation::Delete };
            }
            let snapshot = NewSnapshot { snapshot_id, sequence_number, operation, properties };
            self.add_snapshot(&dir, &target.schema, table, groups, snapshot, retention_ms).await?;
        } else if !table.location.is_empty() {
            table.metadata.replaces(table.location.clone());
        }
        let location = self.put_metadata(&dir, table, version).await?;
        target.evolved = false;
        Ok(location)
    }
}

/// Every live file of the table's current snapshot as an existing entry (its sequence numbers
/// written out, as a rewritten manifest must), grouped by partition spec.
pub(super) async fn live_entries(
    agent: &Agent,
    table: &TableFiles,
) -> Result<Vec<(i32, Vec<ManifestEntry>)>, TableJobError> {
    let mut by_spec: Vec<(i32, Vec<ManifestEntry>)> = Vec::new();
    for manifest in &table.manifests {
        for mut entry in decode_manifest(&get(agent, &manifest.manifest_path).await?)? {
            if entry.status == EntryStatus::Deleted {
                continue;
            }
            entry.status = EntryStatus::Existing;
            entry.sequence_number = Some(entry.sequence_number.unwrap_or(manifest.sequence_number));
            entry.file_sequence_number = Some(entry.file_sequence_number.unwrap_or(manifest.sequence_number));
            match by_spec.iter_mut().find(|(spec_id, _)| *spec_id == manifest.partition_spec_id) {
                Some((_, entries)) => entries.push(entry),
                None => by_spec.push((manifest.partition_spec_id, vec![entry])),
            }
        }
    }
    Ok(by_spec)
}

/// A snapshot about to be added: its id and sequence number, what it did, and its summary's
/// counters (totals are added).
pub(super) struct NewSnapshot {
    pub(super) snapshot_id: i64,
    pub(super) sequence_number: i64,
    pub(super) operation: Operation,
    pub(super) properties: Vec<(&'static str, String)>,
}

/// Where a record goes in a typed table.
enum Decoded {
    /// An Avro value of writer schema `id`.
    Avro(i32, Arc<ParsedSchema>, Value),
    /// A Protobuf message of writer schema `id`.
    Protobuf(i32, Arc<ParsedSchema>, DynamicMessage),
    /// A JSON instance of writer schema `id`, valid under it.
    Json(i32, Arc<ParsedSchema>, serde_json::Value),
    /// A null value: its value columns are null.
    Tombstone,
    /// Why it goes to the dead-letter table.
    DeadLetter(String),
}

/// Parsed writer schemas of this commit by id (the agent's cache, without its lock per record).
struct WriterSchemas {
    namespace: String,
    by_id: HashMap<i32, Result<Arc<ParsedSchema>, String>>,
}

impl WriterSchemas {
    fn get(&mut self, agent: &Agent, id: i32) -> Result<Arc<ParsedSchema>, String> {
        if let Some(found) = self.by_id.get(&id) {
            return found.clone();
        }
        let parsed = {
            let state = agent.metadata.read();
            match state.schema_registry(&self.namespace) {
                Some(registry) => agent.parsed_schemas.get(&self.namespace, id, registry),
                None => Err(format!("schema {id} not found: the namespace has no registry")),
            }
        };
        self.by_id.insert(id, parsed.clone());
        parsed
    }

    fn decode(&mut self, agent: &Agent, record: &FetchedRecord) -> Decoded {
        let Some(value) = record.value.as_deref() else { return Decoded::Tombstone };
        let header = match header_among(&record.headers, VALUE_SCHEMA_ID_HEADER) {
            Header::Absent => None,
            Header::One(Some(header)) => Some(header),
            Header::One(None) => return Decoded::DeadLetter("the value's schema id header is null".into()),
            Header::Repeated => return Decoded::DeadLetter("more than one value schema id header".into()),
        };
        let Some(framing) = framed(value, header) else {
            return Decoded::DeadLetter("the value does not carry a schema registry framing".into());
        };
        let id = match framing.schema {
            SchemaName::Id(id) => id,
            SchemaName::Guid(guid) => match schema_id_of_guid(&self.namespace, guid) {
                Some(id) => id,
                None => return Decoded::DeadLetter(format!("schema GUID {guid} is not registered")),
            },
        };
        let parsed = match self.get(agent, id) {
            Ok(parsed) => parsed,
            Err(e) => return Decoded::DeadLetter(e),
        };
        let decoded = match parsed.as_ref() {
            ParsedSchema::Avro(avro) => {
                avro.decode_value(framing.payload).map(|v| Decoded::Avro(id, parsed.clone(), v))
            }
            ParsedSchema::Protobuf(protobuf) => {
                // With the schema id in a header, the message indexes are there too.
                let payload = match framing.header_indexes {
                    Some(indexes) => [indexes, framing.payload].concat(),
                    None => framing.payload.to_vec(),
                };
                protobuf.decode_message(&payload).map(|message| Decoded::Protobuf(id, parsed.clone(), message))
            }
            ParsedSchema::Json(json) => serde_json::from_slice::<serde_json::Value>(framing.payload)
                .map_err(|e| format!("not JSON: {e}"))
                .and_then(|instance| json.check_value(&instance).map(|()| instance))
                .map(|instance| Decoded::Json(id, parsed.clone(), instance)),
        };
        decoded.unwrap_or_else(|e| Decoded::DeadLetter(format!("the value does not decode with schema {id}: {e}")))
    }
}

/// Appends a record that could not be decoded to the dead-letter table, created on first use.
async fn push_dead_letter(
    files: &mut Files<'_>,
    dead_letter: &mut Option<Target>,
    topic_id: TopicId,
    row: &KafkaRow<'_>,
    value: Option<&[u8]>,
    why: &str,
) -> Result<(), TableJobError> {
    if dead_letter.is_none() {
        *dead_letter = Some(Target::new(new_table(files.agent, topic_id, dead_letter_schema(), false))?);
    }
    let Some(target) = dead_letter.as_mut() else { return Ok(()) };
    target.rows.push_metadata(row)?;
    target.rows.push_dead_letter(value, why)?;
    target.row_done()?;
    crate::metrics::TABLE_DEAD_LETTERS.inc();
    files.write_file_if_full(target).await
}

/// Commits what the tables of `topic_id` lack (up to the read budget): one snapshot of the
/// table, and of its dead-letter table when records went there, in one metadata command.
pub(super) async fn commit_table(
    agent: &Agent,
    topic_id: TopicId,
    cache: &mut HashMap<TopicId, CachedTable>,
    commit_delay: Duration,
) -> Result<CommitSummary, TableJobError> {
    let plan = plan(agent, topic_id)?;
    let cached = cache.remove(&topic_id);
    let (version, main, dead_letter) = match (&plan.record, cached) {
        (Some(record), Some(cached))
            if cached.version == record.version
                && cached.main.location == record.metadata_location
                && cached.dead_letter.as_ref().map(|d| d.location.as_str())
                    == record.dead_letter_location.as_deref() =>
        {
            (cached.version, cached.main, cached.dead_letter)
        }
        (Some(record), _) => {
            let main = load(agent, &record.metadata_location).await?;
            let dead_letter = match &record.dead_letter_location {
                Some(location) => Some(load(agent, location).await?),
                None => None,
            };
            (record.version, main, dead_letter)
        }
        (None, _) => {
            let schema = if plan.typed_if_new { typed_table_schema() } else { raw_table_schema() };
            (0, new_table(agent, topic_id, schema, plan.compacted), None)
        }
    };
    let mut main = main;
    if main.is_upsert() && main.keys.is_none() {
        main.keys = Some(KeyIndex::build(agent, &main).await?);
    }
    let mut main = Target::new(main)?;
    if let Some(fields) = partitioning(&plan.partition_by, &main.schema)
        && main.table.metadata.use_partitioning(&fields)?
    {
        main.evolved = true;
    }
    let mut dead_letter = dead_letter.map(Target::new).transpose()?;
    let mut files = Files::new(agent, plan.target_file_bytes);
    let mut writers = WriterSchemas { namespace: plan.namespace.clone(), by_id: HashMap::new() };
    // Per writer schema id: whether the table holds its records (else why not).
    let mut verdicts: HashMap<i32, Result<(), String>> = HashMap::new();
    let raw = main.is_raw();
    let upsert = main.table.keys.is_some();

    let mut budget = TABLE_COMMIT_READ_BYTES_MAX;
    let mut backlogged = false;
    let mut ranges = Vec::new();
    let mut rows = 0u64;
    let mut held = floe_storage::LastBlock::default();
    for &(partition, from, last_stable) in &plan.partitions {
        let mut at = from;
        while at < last_stable {
            if budget == 0 {
                backlogged = true;
                break;
            }
            let limits =
                ReadLimits { max_bytes: TABLE_READ_BYTES.min(budget), must_return_first: true, read_committed: true };
            let read = read_partition(agent, topic_id, partition, at, -1, limits, &mut held).await?;
            budget = budget.saturating_sub(read.records.len());
            crate::metrics::TABLE_BYTES_READ.inc_by(read.records.len() as u64);
            let records =
                fetched_records(&read, at, true, usize::MAX).map_err(|e| TableJobError::Records(e.to_string()))?;
            for record in &records {
                let headers: Vec<(&[u8], Option<&[u8]>)> =
                    record.headers.iter().map(|(key, value)| (key.as_ref(), value.as_deref())).collect();
                let row = KafkaRow {
                    partition,
                    offset: record.offset,
                    timestamp_ms: record.timestamp,
                    key: record.key.as_deref(),
                    headers: &headers,
                };
                let value = record.value.as_deref();
                rows += 1;
                // An upsert table's tombstone deletes the key's row and adds none.
                if let (Some(key), None, true) = (row.key, value, upsert) {
                    main.pending.tombstone(partition, key, record.offset);
                    continue;
                }
                if raw {
                    main.rows.push_metadata(&row)?;
                    main.rows.push_raw_value(value)?;
                    main.row_done()?;
                    files.write_file_if_full(&mut main).await?;
                    continue;
                }
                let decoded = writers.decode(agent, record);
                let id = match &decoded {
                    Decoded::Avro(id, ..) | Decoded::Protobuf(id, ..) | Decoded::Json(id, ..) => *id,
                    Decoded::Tombstone => {
                        main.rows.push_metadata(&row)?;
                        append_value(main.rows.value_columns(), &main.schema, &Schema::Null, &NoNames, None)?;
                        main.row_done()?;
                        continue;
                    }
                    Decoded::DeadLetter(why) => {
                        push_dead_letter(&mut files, &mut dead_letter, topic_id, &row, value, why).await?;
                        continue;
                    }
                };
                if let std::collections::hash_map::Entry::Vacant(slot) = verdicts.entry(id) {
                    let last_column_id = main.table.metadata.last_column_id;
                    let evolved = match &decoded {
                        Decoded::Avro(_, parsed, _) | Decoded::Json(_, parsed, _) => {
                            super::evolve_table_schema(&main.schema, last_column_id, parsed, None)
                        }
                        Decoded::Protobuf(_, parsed, message) => super::evolve_table_schema(
                            &main.schema,
                            last_column_id,
                            parsed,
                            Some(&message.descriptor()),
                        ),
                        Decoded::Tombstone | Decoded::DeadLetter(_) => Ok(None),
                    };
                    let verdict = match evolved {
                        Ok(None) => Ok(()),
                        Ok(Some((schema, last_column_id))) => {
                            // Rows so far keep the schema they were collected with.
                            files.write_file(&mut main).await?;
                            main.table.metadata.add_schema(schema.clone(), last_column_id);
                            main.rows = RowsBuilder::new(&schema);
                            main.schema = schema;
                            main.evolved = true;
                            Ok(())
                        }
                        Err(e) => Err(format!("schema {id} cannot be a version of the table's schema: {e}")),
                    };
                    slot.insert(verdict);
                }
                if let Some(Err(why)) = verdicts.get(&id) {
                    let why = why.clone();
                    push_dead_letter(&mut files, &mut dead_letter, topic_id, &row, value, &why).await?;
                    continue;
                }
                main.rows.push_metadata(&row)?;
                let columns = main.rows.value_columns();
                match &decoded {
                    Decoded::Avro(_, parsed, datum) => {
                        if let ParsedSchema::Avro(avro) = parsed.as_ref() {
                            append_value(columns, &main.schema, avro.root(), &super::AvroNames(avro), Some(datum))?;
                        }
                    }
                    Decoded::Protobuf(_, _, message) => {
                        floe_tables::protobuf::append_message(columns, &main.schema, Some(message))?;
                    }
                    Decoded::Json(_, _, instance) => {
                        floe_tables::json::append_instance(columns, &main.schema, Some(instance))?;
                    }
                    Decoded::Tombstone | Decoded::DeadLetter(_) => {}
                }
                main.rows.payload_bytes += value.map_or(0, <[u8]>::len);
                main.row_done()?;
                files.write_file_if_full(&mut main).await?;
            }
            if read.next_offset <= at {
                break;
            }
            at = read.next_offset;
        }
        if at > from {
            ranges.push(TableRange { partition, from, to: at });
        }
    }
    if ranges.is_empty() {
        let main = main.table;
        cache.insert(topic_id, CachedTable { version, main, dead_letter: dead_letter.map(|t| t.table) });
        return Ok(CommitSummary { rows: 0, files: 0, backlogged: false });
    }
    let metadata_location = files.publish(&mut main, version, &ranges, plan.retention_ms).await?;
    let dead_letter_location = match dead_letter.as_mut() {
        Some(target) => Some(files.publish(target, version, &ranges, plan.retention_ms).await?),
        None => None,
    };
    let file_count = files.written;

    if !commit_delay.is_zero() {
        tokio::time::sleep(commit_delay).await;
    }
    if let Some(first_put) = files.first_put {
        let deadline = agent.config.gc.commit_deadline();
        if first_put.elapsed() > deadline {
            return Err(TableJobError::DeadlinePassed(first_put.elapsed()));
        }
    }
    let commit = TableCommit {
        topic_id,
        table_uuid: *main.table.metadata.table_uuid.as_bytes(),
        base_version: version,
        metadata_location,
        dead_letter_location,
        ranges,
        new_generation: false,
        now_ms: floe_metadata::now_ms(),
    };
    agent.metadata.propose(Command::CommitTableSnapshot(commit)).await?;
    crate::metrics::TABLE_ROWS.inc_by(rows);
    cache.insert(
        topic_id,
        CachedTable { version: version + 1, main: main.table, dead_letter: dead_letter.map(|t| t.table) },
    );
    Ok(CommitSummary { rows, files: file_count, backlogged })
}

/// A tombstone's writer: no named types.
struct NoNames;

impl NamedTypes for NoNames {
    fn named(&self, _: &str) -> Option<&Schema> {
        None
    }
}

/// The partition fields `floe.table.partition.by` asks for, as (source id, transform); `None`
/// while the field it names is not a top-level timestamp or date column of the table (yet).
fn partitioning(config: &str, schema: &IcebergSchema) -> Option<Vec<(i32, Transform)>> {
    use floe_metadata::config::TablePartitionBy;
    use floe_tables::schema::{IcebergType, PrimitiveType};
    let (transform, field) = match floe_metadata::config::table_partition_by(config)? {
        TablePartitionBy::None => return Some(Vec::new()),
        TablePartitionBy::Hour(field) => (Transform::Hour, field),
        TablePartitionBy::Day(field) => (Transform::Day, field),
    };
    let Some(name) = field else { return Some(vec![(column::TIMESTAMP, transform)]) };
    let source = schema.fields.iter().find(|f| f.name == name && f.id >= floe_tables::avro::VALUE_FIELD_ID_START)?;
    let usable = match source.field_type {
        IcebergType::Primitive(PrimitiveType::Timestamp | PrimitiveType::Timestamptz) => true,
        IcebergType::Primitive(PrimitiveType::Date) => transform == Transform::Day,
        _ => false,
    };
    usable.then(|| vec![(source.id, transform)])
}

/// A partition value as a path segment.
pub(super) fn partition_text(value: Option<&PartitionValue>) -> String {
    match value {
        None => "null".to_owned(),
        Some(PartitionValue::Int(v) | PartitionValue::Date(v)) => v.to_string(),
        Some(PartitionValue::Long(v)) => v.to_string(),
        Some(PartitionValue::String(v)) => v.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect(),
    }
}

/// Where a new file of a table's partition goes: `<table>/data/<field>=<value>/.../<uuid>.parquet`.
pub(super) fn data_file_key(dir: &str, spec: &PartitionSpec, partition: &[Option<PartitionValue>]) -> String {
    let name = format!("{}.parquet", uuid::Uuid::now_v7().simple());
    let path: Vec<String> = spec
        .fields
        .iter()
        .zip(partition)
        .map(|(field, value)| format!("{}={}", field.name, partition_text(value.as_ref())))
        .collect();
    if path.is_empty() { format!("{dir}/data/{name}") } else { format!("{dir}/data/{}/{name}", path.join("/")) }
}
