//! Table metadata: the JSON file a catalog points at, holding schemas, partition specs and
//! snapshots (Iceberg spec, "Table Metadata" and "Snapshots"; format version 2).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::TableError;
use crate::schema::IcebergSchema;

/// The Iceberg format version Floe writes.
pub const FORMAT_VERSION: u8 = 2;

/// Earlier metadata files a metadata file lists (Iceberg's `write.metadata.previous-versions-max`
/// default).
pub const METADATA_LOG_MAX: usize = 100;

/// Partition field ids start here (the spec's convention; 999 means "none yet").
pub const PARTITION_FIELD_ID_START: i32 = 1000;

/// How a partition value is derived from its source column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    Identity,
    /// Hours since the epoch of a timestamp.
    Hour,
    /// Days since the epoch of a timestamp or date.
    Day,
}

impl Transform {
    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "identity",
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }
}

impl Serialize for Transform {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Transform {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        match name.as_str() {
            "identity" => Ok(Self::Identity),
            "hour" => Ok(Self::Hour),
            "day" => Ok(Self::Day),
            other => Err(serde::de::Error::custom(format!("unsupported partition transform {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionField {
    pub source_id: i32,
    pub field_id: i32,
    pub name: String,
    pub transform: Transform,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PartitionSpec {
    pub spec_id: i32,
    pub fields: Vec<PartitionField>,
}

impl PartitionSpec {
    pub fn unpartitioned() -> Self {
        Self { spec_id: 0, fields: Vec::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SortOrder {
    pub order_id: i32,
    pub fields: Vec<serde_json::Value>,
}

/// What a snapshot did, as its summary's `operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    /// Only data files were added.
    Append,
    /// Files were rewritten without changing the rows (merges, expiry).
    Replace,
    /// Rows were replaced or deleted (upsert tables).
    Overwrite,
    Delete,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Snapshot {
    pub snapshot_id: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_snapshot_id: Option<i64>,
    pub sequence_number: i64,
    pub timestamp_ms: i64,
    pub manifest_list: String,
    pub summary: Summary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema_id: Option<i32>,
}

/// A snapshot's summary: the operation plus string counters (the spec's optional metrics and
/// Floe's own `floe.*` entries).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub operation: Operation,
    #[serde(flatten)]
    pub properties: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SnapshotRef {
    pub snapshot_id: i64,
    #[serde(rename = "type")]
    pub ref_type: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SnapshotLogEntry {
    pub snapshot_id: i64,
    pub timestamp_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MetadataLogEntry {
    pub metadata_file: String,
    pub timestamp_ms: i64,
}

/// The branch every snapshot is committed to.
pub const MAIN_BRANCH: &str = "main";

/// A table's metadata file, format version 2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TableMetadata {
    pub format_version: u8,
    pub table_uuid: uuid::Uuid,
    pub location: String,
    pub last_sequence_number: i64,
    pub last_updated_ms: i64,
    pub last_column_id: i32,
    pub schemas: Vec<IcebergSchema>,
    pub current_schema_id: i32,
    pub partition_specs: Vec<PartitionSpec>,
    pub default_spec_id: i32,
    pub last_partition_id: i32,
    #[serde(default)]
    pub properties: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_snapshot_id: Option<i64>,
    #[serde(default)]
    pub snapshots: Vec<Snapshot>,
    #[serde(default)]
    pub snapshot_log: Vec<SnapshotLogEntry>,
    #[serde(default)]
    pub metadata_log: Vec<MetadataLogEntry>,
    pub sort_orders: Vec<SortOrder>,
    pub default_sort_order_id: i32,
    #[serde(default)]
    pub refs: BTreeMap<String, SnapshotRef>,
}

impl TableMetadata {
    /// A table without snapshots: one schema, one partition spec, no sort order.
    pub fn new(
        table_uuid: uuid::Uuid,
        location: String,
        schema: IcebergSchema,
        spec: PartitionSpec,
        properties: BTreeMap<String, String>,
        now_ms: i64,
    ) -> Self {
        let last_partition_id =
            spec.fields.iter().map(|field| field.field_id).max().unwrap_or(PARTITION_FIELD_ID_START - 1);
        Self {
            format_version: FORMAT_VERSION,
            table_uuid,
            location,
            last_sequence_number: 0,
            last_updated_ms: now_ms,
            last_column_id: schema.highest_field_id(),
            current_schema_id: schema.schema_id,
            schemas: vec![schema],
            default_spec_id: spec.spec_id,
            partition_specs: vec![spec],
            last_partition_id,
            properties,
            current_snapshot_id: None,
            snapshots: Vec::new(),
            snapshot_log: Vec::new(),
            metadata_log: Vec::new(),
            sort_orders: vec![SortOrder { order_id: 0, fields: Vec::new() }],
            default_sort_order_id: 0,
            refs: BTreeMap::new(),
        }
    }

    pub fn parse(bytes: &[u8]) -> Result<Self, TableError> {
        let metadata: Self = serde_json::from_slice(bytes)?;
        if metadata.format_version != FORMAT_VERSION {
            return Err(TableError::Invalid(format!(
                "table metadata has format version {}; Floe reads {FORMAT_VERSION}",
                metadata.format_version
            )));
        }
        Ok(metadata)
    }

    pub fn to_json(&self) -> Result<Vec<u8>, TableError> {
        Ok(serde_json::to_vec(self)?)
    }

    pub fn current_schema(&self) -> Option<&IcebergSchema> {
        self.schemas.iter().find(|schema| schema.schema_id == self.current_schema_id)
    }

    pub fn default_spec(&self) -> Option<&PartitionSpec> {
        self.partition_specs.iter().find(|spec| spec.spec_id == self.default_spec_id)
    }

    pub fn current_snapshot(&self) -> Option<&Snapshot> {
        let id = self.current_snapshot_id?;
        self.snapshots.iter().find(|snapshot| snapshot.snapshot_id == id)
    }

    /// The sequence number the next snapshot gets.
    pub fn next_sequence_number(&self) -> i64 {
        self.last_sequence_number + 1
    }

    /// Makes the spec that partitions by `fields` ((source field id, transform) pairs) the
    /// default, adding it when no spec does so yet; whether the default changed. Partition
    /// field ids are reused for the same source and transform.
    pub fn use_partitioning(&mut self, fields: &[(i32, Transform)]) -> Result<bool, TableError> {
        let same = |spec: &PartitionSpec| {
            spec.fields.len() == fields.len()
                && spec.fields.iter().zip(fields).all(|(f, (source, t))| f.source_id == *source && f.transform == *t)
        };
        if let Some(existing) = self.partition_specs.iter().find(|spec| same(spec)) {
            let changed = existing.spec_id != self.default_spec_id;
            self.default_spec_id = existing.spec_id;
            return Ok(changed);
        }
        let schema = self.current_schema().ok_or_else(|| TableError::Invalid("no current schema".into()))?.clone();
        let mut partition_fields = Vec::with_capacity(fields.len());
        for (source_id, transform) in fields {
            let source = schema
                .field(*source_id)
                .ok_or_else(|| TableError::Invalid(format!("partition source {source_id} is not a column")))?;
            let known = self
                .partition_specs
                .iter()
                .flat_map(|spec| &spec.fields)
                .find(|f| f.source_id == *source_id && f.transform == *transform)
                .map(|f| f.field_id);
            let field_id = match known {
                Some(id) => id,
                None => {
                    self.last_partition_id += 1;
                    self.last_partition_id
                }
            };
            partition_fields.push(PartitionField {
                source_id: *source_id,
                field_id,
                name: format!("{}_{}", source.name, transform.name()),
                transform: *transform,
            });
        }
        let spec_id = self.partition_specs.iter().map(|spec| spec.spec_id).max().map_or(0, |id| id + 1);
        self.partition_specs.push(PartitionSpec { spec_id, fields: partition_fields });
        self.default_spec_id = spec_id;
        Ok(true)
    }

    /// Adds `schema` (a new version, from [`crate::avro::evolve`]) and makes it current.
    pub fn add_schema(&mut self, schema: IcebergSchema, last_column_id: i32) {
        self.last_column_id = self.last_column_id.max(last_column_id);
        self.current_schema_id = schema.schema_id;
        self.schemas.push(schema);
    }

    /// Remembers `previous_location`, the metadata file the next one replaces, in the metadata
    /// log (the newest [`METADATA_LOG_MAX`] are kept).
    pub fn replaces(&mut self, previous_location: String) {
        self.metadata_log
            .push(MetadataLogEntry { metadata_file: previous_location, timestamp_ms: self.last_updated_ms });
        let excess = self.metadata_log.len().saturating_sub(METADATA_LOG_MAX);
        self.metadata_log.drain(..excess);
    }

    /// Drops snapshots older than `now_ms - retention_ms` (the topic's `retention.ms`; `None`:
    /// kept forever) and beyond the newest `keep_max`; the current snapshot always stays. Files
    /// only they reached become garbage for the table's collector.
    pub fn expire_snapshots(&mut self, now_ms: i64, retention_ms: Option<i64>, keep_max: usize) {
        let current = self.current_snapshot_id;
        let cutoff = retention_ms.map(|ms| now_ms.saturating_sub(ms));
        let newest_kept = self.snapshots.len().saturating_sub(keep_max);
        let mut index = 0;
        self.snapshots.retain(|snapshot| {
            let keep = Some(snapshot.snapshot_id) == current
                || (index >= newest_kept && cutoff.is_none_or(|cutoff| snapshot.timestamp_ms >= cutoff));
            index += 1;
            keep
        });
        let kept: Vec<i64> = self.snapshots.iter().map(|s| s.snapshot_id).collect();
        self.snapshot_log.retain(|entry| kept.contains(&entry.snapshot_id));
        for snapshot in &mut self.snapshots {
            if snapshot.parent_snapshot_id.is_some_and(|parent| !kept.contains(&parent)) {
                snapshot.parent_snapshot_id = None;
            }
        }
    }

    /// Makes `snapshot` current on the main branch, remembering `previous_location` (the
    /// metadata file this one replaces, if any) in the metadata log.
    pub fn add_snapshot(&mut self, snapshot: Snapshot, previous_location: Option<String>) {
        if let Some(metadata_file) = previous_location {
            self.replaces(metadata_file);
        }
        self.last_sequence_number = snapshot.sequence_number;
        self.last_updated_ms = snapshot.timestamp_ms;
        self.current_snapshot_id = Some(snapshot.snapshot_id);
        self.snapshot_log
            .push(SnapshotLogEntry { snapshot_id: snapshot.snapshot_id, timestamp_ms: snapshot.timestamp_ms });
        self.refs.insert(
            MAIN_BRANCH.to_owned(),
            SnapshotRef { snapshot_id: snapshot.snapshot_id, ref_type: "branch".to_owned() },
        );
        self.snapshots.push(snapshot);
    }
}

/// A new snapshot id: random and positive, as the spec asks.
pub fn new_snapshot_id() -> i64 {
    let bits = uuid::Uuid::new_v4().as_u64_pair().0;
    // Clearing the sign bit keeps it positive; zero is remapped so "no parent" stays distinct.
    ((bits >> 1) as i64).max(1)
}
