//! One table commit: read what the table lacks, write it as Parquet plus Iceberg metadata, and
//! propose the snapshot with the offsets it adds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_metadata::{Command, TableCommit, TableRange, TableRecord, TopicId};
use floe_storage::{StorageError, TableObjectKey};
use floe_tables::TableError;
use floe_tables::data::{KafkaRow, RowsBuilder, encode_parquet};
use floe_tables::manifest::{
    Content, DataFile, EntryStatus, ManifestEntry, ManifestFile, ManifestHeader, decode_manifest_list, encode_manifest,
    encode_manifest_list,
};
use floe_tables::metadata::{Operation, PartitionSpec, Snapshot, Summary, TableMetadata, new_snapshot_id};
use floe_tables::schema::raw_table_schema;

use crate::Agent;
use crate::fetch::{FetchError, ReadLimits, fetched_records, read_partition};
use crate::limits::{TABLE_BATCH_ROWS, TABLE_COMMIT_READ_BYTES_MAX, TABLE_READ_BYTES};

/// `floe.table.target.file.bytes` when unset.
const TARGET_FILE_BYTES_DEFAULT: usize = 128 * 1024 * 1024;

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

/// A table as this job last committed it, so the next commit need not read it back.
#[derive(Debug)]
pub(crate) struct CachedTable {
    version: u64,
    location: String,
    metadata: TableMetadata,
    /// The current snapshot's manifests (a new snapshot keeps them and adds its own).
    manifests: Vec<ManifestFile>,
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
    Ok(Plan { target_file_bytes, partitions, record })
}

async fn get(agent: &Agent, location: &str) -> Result<Bytes, TableJobError> {
    let key = agent.store.table_key_of_uri(location).ok_or_else(|| TableJobError::ForeignLocation(location.into()))?;
    Ok(agent.store.get_table_object(&key).await?)
}

/// Reads a table's current metadata and its current snapshot's manifest list.
async fn load(agent: &Agent, record: &TableRecord) -> Result<CachedTable, TableJobError> {
    let metadata = TableMetadata::parse(&get(agent, &record.metadata_location).await?)?;
    let manifests = match metadata.current_snapshot() {
        Some(snapshot) => decode_manifest_list(&get(agent, &snapshot.manifest_list).await?)?,
        None => Vec::new(),
    };
    Ok(CachedTable { version: record.version, location: record.metadata_location.clone(), metadata, manifests })
}

/// Data files written so far and the rows still being collected for the next one.
struct FileWriter<'a> {
    agent: &'a Agent,
    table_dir: String,
    target_file_bytes: usize,
    rows: RowsBuilder,
    batches: Vec<floe_tables::RecordBatch>,
    batch_payload: usize,
    files: Vec<DataFile>,
    first_put: Option<Instant>,
    total_rows: u64,
}

impl FileWriter<'_> {
    fn push(&mut self, partition: i32, record: &crate::fetch::FetchedRecord) -> Result<(), TableJobError> {
        let headers: Vec<(&[u8], Option<&[u8]>)> =
            record.headers.iter().map(|(key, value)| (key.as_ref(), value.as_deref())).collect();
        self.rows.push_metadata(&KafkaRow {
            partition,
            offset: record.offset,
            timestamp_ms: record.timestamp,
            key: record.key.as_deref(),
            headers: &headers,
        })?;
        self.rows.push_raw_value(record.value.as_deref())?;
        self.total_rows += 1;
        if self.rows.rows() >= TABLE_BATCH_ROWS {
            self.end_batch()?;
        }
        Ok(())
    }

    fn end_batch(&mut self) -> Result<(), TableJobError> {
        if self.rows.rows() > 0 {
            self.batch_payload += self.rows.payload_bytes;
            self.batches.push(self.rows.finish()?);
        }
        Ok(())
    }

    fn full(&self) -> bool {
        self.batch_payload + self.rows.payload_bytes >= self.target_file_bytes
    }

    /// Encodes the collected rows as one Parquet file and stores it.
    async fn write_file(&mut self) -> Result<(), TableJobError> {
        self.end_batch()?;
        if self.batches.is_empty() {
            return Ok(());
        }
        let batches = std::mem::take(&mut self.batches);
        self.batch_payload = 0;
        let encoded = tokio::task::spawn_blocking(move || encode_parquet(&batches))
            .await
            .map_err(|e| TableJobError::Task(e.to_string()))??;
        let key = TableObjectKey::new(&format!("{}/data/{}.parquet", self.table_dir, uuid::Uuid::now_v7().simple()));
        let data_file = encoded.data_file(self.agent.store.table_uri(&key), Vec::new());
        self.first_put.get_or_insert_with(Instant::now);
        let size = encoded.bytes.len() as u64;
        self.agent.store.put_table_object(&key, Bytes::from(encoded.bytes)).await?;
        crate::metrics::TABLE_FILES.inc();
        crate::metrics::TABLE_BYTES_WRITTEN.inc_by(size);
        self.files.push(data_file);
        Ok(())
    }

    async fn put(&mut self, relative: String, bytes: Vec<u8>) -> Result<String, TableJobError> {
        let key = TableObjectKey::new(&format!("{}/{relative}", self.table_dir));
        self.first_put.get_or_insert_with(Instant::now);
        let size = bytes.len() as u64;
        self.agent.store.put_table_object(&key, Bytes::from(bytes)).await?;
        crate::metrics::TABLE_BYTES_WRITTEN.inc_by(size);
        Ok(self.agent.store.table_uri(&key))
    }
}

/// Commits what the table of `topic_id` lacks (up to the read budget) as one snapshot.
pub(super) async fn commit_table(
    agent: &Agent,
    topic_id: TopicId,
    cache: &mut HashMap<TopicId, CachedTable>,
    commit_delay: Duration,
) -> Result<CommitSummary, TableJobError> {
    let plan = plan(agent, topic_id)?;
    let cached = cache.remove(&topic_id);
    let table = match (&plan.record, cached) {
        (Some(record), Some(cached))
            if cached.version == record.version && cached.location == record.metadata_location =>
        {
            cached
        }
        (Some(record), _) => load(agent, record).await?,
        (None, _) => {
            let table_uuid = uuid::Uuid::new_v4();
            let location = agent.store.table_uri(&TableObjectKey::new(&table_uuid.to_string()));
            let properties = [
                ("write.format.default", "parquet"),
                ("write.parquet.compression-codec", "zstd"),
                ("floe.managed", "true"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .chain([("floe.topic-id".to_owned(), topic_id.to_string())])
            .collect();
            let metadata = TableMetadata::new(
                table_uuid,
                location,
                raw_table_schema(),
                PartitionSpec::unpartitioned(),
                properties,
                floe_metadata::now_ms(),
            );
            CachedTable { version: 0, location: String::new(), metadata, manifests: Vec::new() }
        }
    };
    let table_uuid = table.metadata.table_uuid;
    let schema =
        table.metadata.current_schema().cloned().ok_or_else(|| TableError::Invalid("no current schema".into()))?;
    let mut writer = FileWriter {
        agent,
        table_dir: table_uuid.to_string(),
        target_file_bytes: plan.target_file_bytes,
        rows: RowsBuilder::new(&schema),
        batches: Vec::new(),
        batch_payload: 0,
        files: Vec::new(),
        first_put: None,
        total_rows: 0,
    };

    let mut budget = TABLE_COMMIT_READ_BYTES_MAX;
    let mut backlogged = false;
    let mut ranges = Vec::new();
    for &(partition, from, last_stable) in &plan.partitions {
        let mut at = from;
        while at < last_stable {
            if budget == 0 {
                backlogged = true;
                break;
            }
            let limits =
                ReadLimits { max_bytes: TABLE_READ_BYTES.min(budget), must_return_first: true, read_committed: true };
            let read = read_partition(agent, topic_id, partition, at, -1, limits).await?;
            budget = budget.saturating_sub(read.records.len());
            let records =
                fetched_records(&read, at, true, usize::MAX).map_err(|e| TableJobError::Records(e.to_string()))?;
            for record in &records {
                writer.push(partition, record)?;
                if writer.full() {
                    writer.write_file().await?;
                }
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
    writer.write_file().await?;
    if ranges.is_empty() && plan.record.is_some() {
        cache.insert(topic_id, table);
        return Ok(CommitSummary { rows: 0, files: 0, backlogged: false });
    }

    let CachedTable { version, location: previous_location, mut metadata, mut manifests } = table;
    let files = std::mem::take(&mut writer.files);
    let file_count = files.len();
    let location = if !files.is_empty() {
        let spec = metadata.default_spec().cloned().ok_or_else(|| TableError::Invalid("no default spec".into()))?;
        let snapshot_id = new_snapshot_id();
        let sequence_number = metadata.next_sequence_number();
        let added_bytes: i64 = files.iter().map(|f| f.file_size_in_bytes).sum();
        let added_rows: i64 = files.iter().map(|f| f.record_count).sum();
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
        let header = ManifestHeader { schema: &schema, spec: &spec, content: Content::Data };
        let manifest = encode_manifest(header, &entries)?;
        let manifest_length = manifest.len() as i64;
        let manifest_uri = writer.put(format!("metadata/{}-m0.avro", uuid::Uuid::now_v7().simple()), manifest).await?;
        manifests.push(ManifestFile::summarise(
            manifest_uri,
            manifest_length,
            header,
            sequence_number,
            snapshot_id,
            &entries,
        ));
        let parent = metadata.current_snapshot_id;
        let list = encode_manifest_list(snapshot_id, parent, sequence_number, &manifests)?;
        let list_uri =
            writer.put(format!("metadata/snap-{snapshot_id}-{}.avro", uuid::Uuid::now_v7().simple()), list).await?;
        let total_rows: i64 = manifests.iter().map(|m| m.added_rows_count + m.existing_rows_count).sum();
        let total_files: i64 = manifests.iter().map(|m| i64::from(m.added_files_count + m.existing_files_count)).sum();
        let offsets: Vec<String> = ranges.iter().map(|r| format!("{}:{}-{}", r.partition, r.from, r.to)).collect();
        let properties = [
            ("added-data-files", file_count.to_string()),
            ("added-records", added_rows.to_string()),
            ("added-files-size", added_bytes.to_string()),
            ("total-records", total_rows.to_string()),
            ("total-data-files", total_files.to_string()),
            ("floe.offsets", offsets.join(",")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let snapshot = Snapshot {
            snapshot_id,
            parent_snapshot_id: parent,
            sequence_number,
            timestamp_ms: floe_metadata::now_ms(),
            manifest_list: list_uri,
            summary: Summary { operation: Operation::Append, properties },
            schema_id: Some(schema.schema_id),
        };
        metadata.add_snapshot(snapshot, (!previous_location.is_empty()).then(|| previous_location.clone()));
        let name = format!("metadata/{:05}-{}.metadata.json", version + 1, uuid::Uuid::now_v7().simple());
        writer.put(name, metadata.to_json()?).await?
    } else if previous_location.is_empty() {
        // A new table without rows yet: its first metadata file, so catalogs can list it.
        let name = format!("metadata/{:05}-{}.metadata.json", version + 1, uuid::Uuid::now_v7().simple());
        writer.put(name, metadata.to_json()?).await?
    } else {
        // Offsets moved past records no reader sees (markers, aborted transactions).
        previous_location
    };

    if !commit_delay.is_zero() {
        tokio::time::sleep(commit_delay).await;
    }
    if let Some(first_put) = writer.first_put {
        let deadline = agent.config.gc.commit_deadline();
        if first_put.elapsed() > deadline {
            return Err(TableJobError::DeadlinePassed(first_put.elapsed()));
        }
    }
    let commit = TableCommit {
        topic_id,
        table_uuid: *table_uuid.as_bytes(),
        base_version: version,
        metadata_location: location.clone(),
        dead_letter_location: None,
        ranges,
        new_generation: false,
        now_ms: floe_metadata::now_ms(),
    };
    agent.metadata.propose(Command::CommitTableSnapshot(commit)).await?;
    crate::metrics::TABLE_ROWS.inc_by(writer.total_rows);
    cache.insert(topic_id, CachedTable { version: version + 1, location, metadata, manifests });
    Ok(CommitSummary { rows: writer.total_rows, files: file_count, backlogged })
}
