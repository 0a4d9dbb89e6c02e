//! Manifests (which files a snapshot holds, with their statistics) and manifest lists (which
//! manifests a snapshot holds): Avro files whose schemas carry the spec's field ids, since
//! readers match columns by id, not by name.

use std::collections::BTreeMap;

use apache_avro::types::Value;
use apache_avro::{Codec, DeflateSettings, Reader, Schema, Writer};
use serde_json::json;

use crate::TableError;
use crate::metadata::{FORMAT_VERSION, PartitionSpec, Transform};
use crate::schema::{IcebergSchema, IcebergType, PrimitiveType};

/// What a data file (and the manifest listing it) holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    Data,
    PositionDeletes,
}

impl Content {
    fn code(self) -> i32 {
        match self {
            Self::Data => 0,
            Self::PositionDeletes => 1,
        }
    }

    fn from_code(code: i32) -> Result<Self, TableError> {
        match code {
            0 => Ok(Self::Data),
            1 => Ok(Self::PositionDeletes),
            other => Err(TableError::Invalid(format!("unsupported file content {other}"))),
        }
    }
}

/// One partition value of a data file, typed as its partition field's result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PartitionValue {
    Int(i32),
    Long(i64),
    /// Days since the epoch.
    Date(i32),
    String(String),
}

impl PartitionValue {
    /// The spec's single-value binary form (a bound in a field summary).
    fn to_bytes(&self) -> Vec<u8> {
        match self {
            Self::Int(value) | Self::Date(value) => value.to_le_bytes().to_vec(),
            Self::Long(value) => value.to_le_bytes().to_vec(),
            Self::String(value) => value.as_bytes().to_vec(),
        }
    }

    fn to_avro(&self) -> Value {
        match self {
            Self::Int(value) => Value::Int(*value),
            Self::Long(value) => Value::Long(*value),
            Self::Date(value) => Value::Date(*value),
            Self::String(value) => Value::String(value.clone()),
        }
    }

    fn from_avro(value: &Value) -> Result<Self, TableError> {
        match value {
            Value::Int(value) => Ok(Self::Int(*value)),
            Value::Long(value) => Ok(Self::Long(*value)),
            Value::Date(value) => Ok(Self::Date(*value)),
            Value::String(value) => Ok(Self::String(value.clone())),
            other => Err(TableError::Invalid(format!("unsupported partition value {other:?}"))),
        }
    }
}

/// A data or delete file with its statistics, keyed by field id.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFile {
    pub content: Content,
    pub file_path: String,
    /// One value per field of the partition spec (`None`: null).
    pub partition: Vec<Option<PartitionValue>>,
    pub record_count: i64,
    pub file_size_in_bytes: i64,
    pub column_sizes: BTreeMap<i32, i64>,
    pub value_counts: BTreeMap<i32, i64>,
    pub null_value_counts: BTreeMap<i32, i64>,
    pub lower_bounds: BTreeMap<i32, Vec<u8>>,
    pub upper_bounds: BTreeMap<i32, Vec<u8>>,
    /// Where each row group starts, ascending.
    pub split_offsets: Vec<i64>,
}

/// Whether a manifest entry's file was added by its snapshot, carried over, or removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryStatus {
    Existing,
    Added,
    Deleted,
}

impl EntryStatus {
    fn code(self) -> i32 {
        match self {
            Self::Existing => 0,
            Self::Added => 1,
            Self::Deleted => 2,
        }
    }

    fn from_code(code: i32) -> Result<Self, TableError> {
        match code {
            0 => Ok(Self::Existing),
            1 => Ok(Self::Added),
            2 => Ok(Self::Deleted),
            other => Err(TableError::Invalid(format!("unknown manifest entry status {other}"))),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ManifestEntry {
    pub status: EntryStatus,
    pub snapshot_id: i64,
    /// `None` for added files: they inherit the sequence number of the manifest list entry.
    pub sequence_number: Option<i64>,
    pub file_sequence_number: Option<i64>,
    pub data_file: DataFile,
}

/// A manifest list's entry: one manifest, with counts and partition bounds for pruning.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestFile {
    pub manifest_path: String,
    pub manifest_length: i64,
    pub partition_spec_id: i32,
    pub content: Content,
    pub sequence_number: i64,
    pub min_sequence_number: i64,
    pub added_snapshot_id: i64,
    pub added_files_count: i32,
    pub existing_files_count: i32,
    pub deleted_files_count: i32,
    pub added_rows_count: i64,
    pub existing_rows_count: i64,
    pub deleted_rows_count: i64,
    pub partitions: Vec<FieldSummary>,
}

/// Bounds of one partition field over a manifest's files.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSummary {
    pub contains_null: bool,
    pub lower_bound: Option<Vec<u8>>,
    pub upper_bound: Option<Vec<u8>>,
}

/// The Avro type of a partition field: the result type of its transform.
fn partition_field_avro_type(
    schema: &IcebergSchema,
    source_id: i32,
    transform: Transform,
) -> Result<serde_json::Value, TableError> {
    Ok(match transform {
        Transform::Hour => json!("int"),
        Transform::Day => json!({"type": "int", "logicalType": "date"}),
        Transform::Identity => {
            let source = schema
                .field(source_id)
                .ok_or_else(|| TableError::Invalid(format!("partition source field {source_id} is not a column")))?;
            match source.field_type {
                IcebergType::Primitive(PrimitiveType::Int) => json!("int"),
                IcebergType::Primitive(PrimitiveType::Long) => json!("long"),
                IcebergType::Primitive(PrimitiveType::Date) => json!({"type": "int", "logicalType": "date"}),
                IcebergType::Primitive(PrimitiveType::String) => json!("string"),
                ref other => {
                    return Err(TableError::Invalid(format!("identity partitions on {other:?} are not supported")));
                }
            }
        }
    })
}

/// An optional Avro field with its Iceberg id.
fn optional(name: &str, id: i32, avro_type: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "type": ["null", avro_type], "default": null, "field-id": id})
}

fn required(name: &str, id: i32, avro_type: serde_json::Value) -> serde_json::Value {
    json!({"name": name, "type": avro_type, "field-id": id})
}

/// An int-keyed map, written as the spec asks: an array of key/value records.
fn id_map(name: &str, id: i32, key_id: i32, value_id: i32, value_type: &str) -> serde_json::Value {
    optional(
        name,
        id,
        json!({
            "type": "array",
            "logicalType": "map",
            "items": {
                "type": "record",
                "name": format!("k{key_id}_v{value_id}"),
                "fields": [required("key", key_id, json!("int")), required("value", value_id, json!(value_type))],
            },
        }),
    )
}

fn manifest_entry_schema(schema: &IcebergSchema, spec: &PartitionSpec) -> Result<Schema, TableError> {
    let mut partition_fields = Vec::with_capacity(spec.fields.len());
    for field in &spec.fields {
        let avro_type = partition_field_avro_type(schema, field.source_id, field.transform)?;
        partition_fields.push(optional(&field.name, field.field_id, avro_type));
    }
    let data_file = json!({
        "type": "record",
        "name": "r2",
        "fields": [
            required("content", 134, json!("int")),
            required("file_path", 100, json!("string")),
            required("file_format", 101, json!("string")),
            required("partition", 102, json!({"type": "record", "name": "r102", "fields": partition_fields})),
            required("record_count", 103, json!("long")),
            required("file_size_in_bytes", 104, json!("long")),
            id_map("column_sizes", 108, 117, 118, "long"),
            id_map("value_counts", 109, 119, 120, "long"),
            id_map("null_value_counts", 110, 121, 122, "long"),
            id_map("lower_bounds", 125, 126, 127, "bytes"),
            id_map("upper_bounds", 128, 129, 130, "bytes"),
            optional("split_offsets", 132, json!({"type": "array", "items": "long", "element-id": 133})),
            optional("equality_ids", 135, json!({"type": "array", "items": "int", "element-id": 136})),
            optional("sort_order_id", 140, json!("int")),
        ],
    });
    let entry = json!({
        "type": "record",
        "name": "manifest_entry",
        "fields": [
            required("status", 0, json!("int")),
            optional("snapshot_id", 1, json!("long")),
            optional("sequence_number", 3, json!("long")),
            optional("file_sequence_number", 4, json!("long")),
            required("data_file", 2, data_file),
        ],
    });
    Ok(Schema::parse(&entry)?)
}

fn manifest_list_schema() -> Result<Schema, TableError> {
    let summary = json!({
        "type": "record",
        "name": "r508",
        "fields": [
            required("contains_null", 509, json!("boolean")),
            optional("contains_nan", 518, json!("boolean")),
            optional("lower_bound", 510, json!("bytes")),
            optional("upper_bound", 511, json!("bytes")),
        ],
    });
    let list = json!({
        "type": "record",
        "name": "manifest_file",
        "fields": [
            required("manifest_path", 500, json!("string")),
            required("manifest_length", 501, json!("long")),
            required("partition_spec_id", 502, json!("int")),
            required("content", 517, json!("int")),
            required("sequence_number", 515, json!("long")),
            required("min_sequence_number", 516, json!("long")),
            required("added_snapshot_id", 503, json!("long")),
            required("added_files_count", 504, json!("int")),
            required("existing_files_count", 505, json!("int")),
            required("deleted_files_count", 506, json!("int")),
            required("added_rows_count", 512, json!("long")),
            required("existing_rows_count", 513, json!("long")),
            required("deleted_rows_count", 514, json!("long")),
            optional("partitions", 507, json!({"type": "array", "items": summary, "element-id": 508})),
        ],
    });
    Ok(Schema::parse(&list)?)
}

fn some<T>(value: T) -> Value
where
    Value: From<T>,
{
    Value::Union(1, Box::new(Value::from(value)))
}

fn none() -> Value {
    Value::Union(0, Box::new(Value::Null))
}

fn opt_long(value: Option<i64>) -> Value {
    value.map_or_else(none, some)
}

fn map_value<V: Clone>(map: &BTreeMap<i32, V>, to_avro: impl Fn(V) -> Value) -> Value {
    let items = map
        .iter()
        .map(|(key, value)| {
            Value::Record(vec![("key".into(), Value::Int(*key)), ("value".into(), to_avro(value.clone()))])
        })
        .collect();
    Value::Union(1, Box::new(Value::Array(items)))
}

fn avro_writer(schema: &Schema) -> Writer<'_, Vec<u8>> {
    Writer::with_codec(schema, Vec::new(), Codec::Deflate(DeflateSettings::default()))
}

/// What a manifest describes: the table schema and partition spec its files were written with.
#[derive(Debug, Clone, Copy)]
pub struct ManifestHeader<'a> {
    pub schema: &'a IcebergSchema,
    pub spec: &'a PartitionSpec,
    pub content: Content,
}

/// A manifest file's bytes.
pub fn encode_manifest(header: ManifestHeader<'_>, entries: &[ManifestEntry]) -> Result<Vec<u8>, TableError> {
    let avro_schema = manifest_entry_schema(header.schema, header.spec)?;
    let mut writer = avro_writer(&avro_schema);
    writer.add_user_metadata("schema".into(), serde_json::to_vec(header.schema)?)?;
    writer.add_user_metadata("schema-id".into(), header.schema.schema_id.to_string())?;
    writer.add_user_metadata("partition-spec".into(), serde_json::to_vec(&header.spec.fields)?)?;
    writer.add_user_metadata("partition-spec-id".into(), header.spec.spec_id.to_string())?;
    writer.add_user_metadata("format-version".into(), FORMAT_VERSION.to_string())?;
    let content = match header.content {
        Content::Data => "data",
        Content::PositionDeletes => "deletes",
    };
    writer.add_user_metadata("content".into(), content)?;
    for entry in entries {
        if entry.data_file.partition.len() != header.spec.fields.len() {
            return Err(TableError::Invalid(format!(
                "a file with {} partition values in a spec of {} fields",
                entry.data_file.partition.len(),
                header.spec.fields.len()
            )));
        }
        writer.append_value_ref(&entry_value(entry, header.spec))?;
    }
    Ok(writer.into_inner()?)
}

fn entry_value(entry: &ManifestEntry, spec: &PartitionSpec) -> Value {
    let file = &entry.data_file;
    let partition = spec
        .fields
        .iter()
        .zip(&file.partition)
        .map(|(field, value)| {
            let value = value.as_ref().map_or_else(none, |value| Value::Union(1, Box::new(value.to_avro())));
            (field.name.clone(), value)
        })
        .collect();
    let data_file = Value::Record(vec![
        ("content".into(), Value::Int(file.content.code())),
        ("file_path".into(), Value::String(file.file_path.clone())),
        ("file_format".into(), Value::String("PARQUET".into())),
        ("partition".into(), Value::Record(partition)),
        ("record_count".into(), Value::Long(file.record_count)),
        ("file_size_in_bytes".into(), Value::Long(file.file_size_in_bytes)),
        ("column_sizes".into(), map_value(&file.column_sizes, Value::Long)),
        ("value_counts".into(), map_value(&file.value_counts, Value::Long)),
        ("null_value_counts".into(), map_value(&file.null_value_counts, Value::Long)),
        ("lower_bounds".into(), map_value(&file.lower_bounds, Value::Bytes)),
        ("upper_bounds".into(), map_value(&file.upper_bounds, Value::Bytes)),
        (
            "split_offsets".into(),
            Value::Union(
                1,
                Box::new(Value::Array(file.split_offsets.iter().map(|offset| Value::Long(*offset)).collect())),
            ),
        ),
        ("equality_ids".into(), none()),
        ("sort_order_id".into(), none()),
    ]);
    Value::Record(vec![
        ("status".into(), Value::Int(entry.status.code())),
        ("snapshot_id".into(), some(entry.snapshot_id)),
        ("sequence_number".into(), opt_long(entry.sequence_number)),
        ("file_sequence_number".into(), opt_long(entry.file_sequence_number)),
        ("data_file".into(), data_file),
    ])
}

/// A manifest list file's bytes, for the snapshot `snapshot_id`.
pub fn encode_manifest_list(
    snapshot_id: i64,
    parent_snapshot_id: Option<i64>,
    sequence_number: i64,
    manifests: &[ManifestFile],
) -> Result<Vec<u8>, TableError> {
    let avro_schema = manifest_list_schema()?;
    let mut writer = avro_writer(&avro_schema);
    writer.add_user_metadata("snapshot-id".into(), snapshot_id.to_string())?;
    let parent = parent_snapshot_id.map_or_else(|| "null".to_owned(), |id| id.to_string());
    writer.add_user_metadata("parent-snapshot-id".into(), parent)?;
    writer.add_user_metadata("sequence-number".into(), sequence_number.to_string())?;
    writer.add_user_metadata("format-version".into(), FORMAT_VERSION.to_string())?;
    for manifest in manifests {
        let partitions = manifest
            .partitions
            .iter()
            .map(|summary| {
                Value::Record(vec![
                    ("contains_null".into(), Value::Boolean(summary.contains_null)),
                    ("contains_nan".into(), none()),
                    ("lower_bound".into(), summary.lower_bound.clone().map_or_else(none, some)),
                    ("upper_bound".into(), summary.upper_bound.clone().map_or_else(none, some)),
                ])
            })
            .collect();
        let value = Value::Record(vec![
            ("manifest_path".into(), Value::String(manifest.manifest_path.clone())),
            ("manifest_length".into(), Value::Long(manifest.manifest_length)),
            ("partition_spec_id".into(), Value::Int(manifest.partition_spec_id)),
            ("content".into(), Value::Int(manifest.content.code())),
            ("sequence_number".into(), Value::Long(manifest.sequence_number)),
            ("min_sequence_number".into(), Value::Long(manifest.min_sequence_number)),
            ("added_snapshot_id".into(), Value::Long(manifest.added_snapshot_id)),
            ("added_files_count".into(), Value::Int(manifest.added_files_count)),
            ("existing_files_count".into(), Value::Int(manifest.existing_files_count)),
            ("deleted_files_count".into(), Value::Int(manifest.deleted_files_count)),
            ("added_rows_count".into(), Value::Long(manifest.added_rows_count)),
            ("existing_rows_count".into(), Value::Long(manifest.existing_rows_count)),
            ("deleted_rows_count".into(), Value::Long(manifest.deleted_rows_count)),
            ("partitions".into(), Value::Union(1, Box::new(Value::Array(partitions)))),
        ]);
        writer.append_value_ref(&value)?;
    }
    Ok(writer.into_inner()?)
}

impl ManifestFile {
    /// The list entry for a manifest just written by snapshot `snapshot_id` at
    /// `sequence_number`, summarising `entries` (as passed to [`encode_manifest`]).
    pub fn summarise(
        manifest_path: String,
        manifest_length: i64,
        header: ManifestHeader<'_>,
        sequence_number: i64,
        snapshot_id: i64,
        entries: &[ManifestEntry],
    ) -> Self {
        let mut counts = [(0i32, 0i64); 3];
        let mut min_sequence_number = sequence_number;
        for entry in entries {
            let slot = &mut counts[entry.status.code() as usize];
            slot.0 += 1;
            slot.1 += entry.data_file.record_count;
            if let Some(number) = entry.sequence_number {
                min_sequence_number = min_sequence_number.min(number);
            }
        }
        let partitions = (0..header.spec.fields.len())
            .map(|index| {
                let values = entries.iter().map(|entry| entry.data_file.partition.get(index).cloned().flatten());
                let mut summary = FieldSummary { contains_null: false, lower_bound: None, upper_bound: None };
                let mut lower: Option<PartitionValue> = None;
                let mut upper: Option<PartitionValue> = None;
                for value in values {
                    match value {
                        None => summary.contains_null = true,
                        Some(value) => {
                            if lower.as_ref().is_none_or(|low| value < *low) {
                                lower = Some(value.clone());
                            }
                            if upper.as_ref().is_none_or(|high| value > *high) {
                                upper = Some(value);
                            }
                        }
                    }
                }
                summary.lower_bound = lower.map(|value| value.to_bytes());
                summary.upper_bound = upper.map(|value| value.to_bytes());
                summary
            })
            .collect();
        let [existing, added, deleted] = counts;
        Self {
            manifest_path,
            manifest_length,
            partition_spec_id: header.spec.spec_id,
            content: header.content,
            sequence_number,
            min_sequence_number,
            added_snapshot_id: snapshot_id,
            added_files_count: added.0,
            existing_files_count: existing.0,
            deleted_files_count: deleted.0,
            added_rows_count: added.1,
            existing_rows_count: existing.1,
            deleted_rows_count: deleted.1,
            partitions,
        }
    }
}

// Reading back. Only files Floe wrote are read, so fields are found by name.

type Fields = Vec<(String, Value)>;

fn record(value: Value) -> Result<Fields, TableError> {
    match value {
        Value::Record(fields) => Ok(fields),
        other => Err(TableError::Invalid(format!("expected an Avro record, found {other:?}"))),
    }
}

fn take(fields: &mut Fields, name: &str) -> Result<Value, TableError> {
    let index = fields
        .iter()
        .position(|(field, _)| field == name)
        .ok_or_else(|| TableError::Invalid(format!("Avro record without field {name}")))?;
    let value = fields.swap_remove(index).1;
    Ok(match value {
        Value::Union(_, inner) => *inner,
        other => other,
    })
}

fn int(value: Value) -> Result<i32, TableError> {
    match value {
        Value::Int(value) => Ok(value),
        other => Err(TableError::Invalid(format!("expected an int, found {other:?}"))),
    }
}

fn long(value: Value) -> Result<i64, TableError> {
    match value {
        Value::Long(value) => Ok(value),
        other => Err(TableError::Invalid(format!("expected a long, found {other:?}"))),
    }
}

fn opt<T>(value: Value, read: impl Fn(Value) -> Result<T, TableError>) -> Result<Option<T>, TableError> {
    match value {
        Value::Null => Ok(None),
        other => read(other).map(Some),
    }
}

fn string(value: Value) -> Result<String, TableError> {
    match value {
        Value::String(value) => Ok(value),
        other => Err(TableError::Invalid(format!("expected a string, found {other:?}"))),
    }
}

fn blob(value: Value) -> Result<Vec<u8>, TableError> {
    match value {
        Value::Bytes(value) => Ok(value),
        other => Err(TableError::Invalid(format!("expected bytes, found {other:?}"))),
    }
}

fn array(value: Value) -> Result<Vec<Value>, TableError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(Vec::new()),
        other => Err(TableError::Invalid(format!("expected an array, found {other:?}"))),
    }
}

fn id_map_of<V>(value: Value, read: impl Fn(Value) -> Result<V, TableError>) -> Result<BTreeMap<i32, V>, TableError> {
    let mut map = BTreeMap::new();
    for item in array(value)? {
        let mut fields = record(item)?;
        map.insert(int(take(&mut fields, "key")?)?, read(take(&mut fields, "value")?)?);
    }
    Ok(map)
}

/// The entries of a manifest Floe wrote.
pub fn decode_manifest(bytes: &[u8]) -> Result<Vec<ManifestEntry>, TableError> {
    let mut entries = Vec::new();
    for value in Reader::new(bytes)? {
        let mut fields = record(value?)?;
        let mut file = record(take(&mut fields, "data_file")?)?;
        let partition = record(take(&mut file, "partition")?)?
            .into_iter()
            .map(|(_, value)| match value {
                Value::Union(_, inner) => opt(*inner, |value| PartitionValue::from_avro(&value)),
                other => opt(other, |value| PartitionValue::from_avro(&value)),
            })
            .collect::<Result<_, _>>()?;
        let data_file = DataFile {
            content: Content::from_code(int(take(&mut file, "content")?)?)?,
            file_path: string(take(&mut file, "file_path")?)?,
            partition,
            record_count: long(take(&mut file, "record_count")?)?,
            file_size_in_bytes: long(take(&mut file, "file_size_in_bytes")?)?,
            column_sizes: id_map_of(take(&mut file, "column_sizes")?, long)?,
            value_counts: id_map_of(take(&mut file, "value_counts")?, long)?,
            null_value_counts: id_map_of(take(&mut file, "null_value_counts")?, long)?,
            lower_bounds: id_map_of(take(&mut file, "lower_bounds")?, blob)?,
            upper_bounds: id_map_of(take(&mut file, "upper_bounds")?, blob)?,
            split_offsets: array(take(&mut file, "split_offsets")?)?.into_iter().map(long).collect::<Result<_, _>>()?,
        };
        entries.push(ManifestEntry {
            status: EntryStatus::from_code(int(take(&mut fields, "status")?)?)?,
            snapshot_id: long(take(&mut fields, "snapshot_id")?)?,
            sequence_number: opt(take(&mut fields, "sequence_number")?, long)?,
            file_sequence_number: opt(take(&mut fields, "file_sequence_number")?, long)?,
            data_file,
        });
    }
    Ok(entries)
}

/// The manifests of a manifest list Floe wrote.
pub fn decode_manifest_list(bytes: &[u8]) -> Result<Vec<ManifestFile>, TableError> {
    let mut manifests = Vec::new();
    for value in Reader::new(bytes)? {
        let mut fields = record(value?)?;
        let partitions = array(take(&mut fields, "partitions")?)?
            .into_iter()
            .map(|item| {
                let mut summary = record(item)?;
                Ok(FieldSummary {
                    contains_null: matches!(take(&mut summary, "contains_null")?, Value::Boolean(true)),
                    lower_bound: opt(take(&mut summary, "lower_bound")?, blob)?,
                    upper_bound: opt(take(&mut summary, "upper_bound")?, blob)?,
                })
            })
            .collect::<Result<_, TableError>>()?;
        manifests.push(ManifestFile {
            manifest_path: string(take(&mut fields, "manifest_path")?)?,
            manifest_length: long(take(&mut fields, "manifest_length")?)?,
            partition_spec_id: int(take(&mut fields, "partition_spec_id")?)?,
            content: Content::from_code(int(take(&mut fields, "content")?)?)?,
            sequence_number: long(take(&mut fields, "sequence_number")?)?,
            min_sequence_number: long(take(&mut fields, "min_sequence_number")?)?,
            added_snapshot_id: long(take(&mut fields, "added_snapshot_id")?)?,
            added_files_count: int(take(&mut fields, "added_files_count")?)?,
            existing_files_count: int(take(&mut fields, "existing_files_count")?)?,
            deleted_files_count: int(take(&mut fields, "deleted_files_count")?)?,
            added_rows_count: long(take(&mut fields, "added_rows_count")?)?,
            existing_rows_count: long(take(&mut fields, "existing_rows_count")?)?,
            deleted_rows_count: long(take(&mut fields, "deleted_rows_count")?)?,
            partitions,
        });
    }
    Ok(manifests)
}
