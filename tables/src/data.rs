//! Data files: a table schema as Arrow, rows collected into Arrow arrays, and those encoded as
//! a Parquet file (zstd; snappy without dictionaries when it is wide) whose columns carry Iceberg field ids, with the statistics a manifest
//! lists for it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, FixedSizeBinaryBuilder,
    Float32Builder, Float64Builder, Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
    Time64MicrosecondBuilder, TimestampMicrosecondBuilder, make_builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use parquet::arrow::{ArrowSchemaConverter, ArrowWriter, PARQUET_FIELD_ID_META_KEY};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::TableError;
use crate::manifest::{Content, DataFile, PartitionValue};
use crate::metadata::{PartitionSpec, Transform};
use crate::schema::{IcebergSchema, IcebergType, NestedField, PrimitiveType};

/// Rows per Parquet row group: small enough to bound the writer's memory per column, large
/// enough that readers skip whole groups by their statistics.
pub const ROW_GROUP_ROWS_MAX: usize = 1 << 17;

/// zstd level for data files: level 3 is zstd's default, a balance readers and writers share.
const ZSTD_LEVEL: i32 = 3;

/// Past this many Parquet leaf columns a file is written with snappy and no dictionaries. The
/// writer makes its column writers up front, and with zstd and dictionaries each holds about
/// 170 KB (a zstd context of 96 KB, a dictionary table of 70 KB) however few its values: a
/// table of 10,000 columns (the most a table takes) took 1.9 GB to write one row (issue 52).
/// Snappy keeps 2 KB per column until a page is large.
pub const WIDE_FILE_COLUMNS: usize = 256;

fn arrow_field(name: &str, id: i32, required: bool, data_type: DataType) -> Field {
    Field::new(name, data_type, !required)
        .with_metadata(HashMap::from([(PARQUET_FIELD_ID_META_KEY.to_owned(), id.to_string())]))
}

fn arrow_type(field_type: &IcebergType) -> DataType {
    match field_type {
        IcebergType::Primitive(primitive) => match *primitive {
            PrimitiveType::Boolean => DataType::Boolean,
            PrimitiveType::Int => DataType::Int32,
            PrimitiveType::Long => DataType::Int64,
            PrimitiveType::Float => DataType::Float32,
            PrimitiveType::Double => DataType::Float64,
            PrimitiveType::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
            PrimitiveType::Date => DataType::Date32,
            PrimitiveType::Time => DataType::Time64(TimeUnit::Microsecond),
            PrimitiveType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            PrimitiveType::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            PrimitiveType::String => DataType::Utf8,
            PrimitiveType::Uuid => DataType::FixedSizeBinary(16),
            PrimitiveType::Fixed(length) => DataType::FixedSizeBinary(length as i32),
            PrimitiveType::Binary => DataType::Binary,
        },
        IcebergType::Struct(inner) => DataType::Struct(struct_fields(&inner.fields)),
        IcebergType::List(list) => DataType::List(Arc::new(arrow_field(
            "element",
            list.element_id,
            list.element_required,
            arrow_type(&list.element),
        ))),
        IcebergType::Map(map) => {
            let entries = Fields::from(vec![
                arrow_field("key", map.key_id, true, arrow_type(&map.key)),
                arrow_field("value", map.value_id, map.value_required, arrow_type(&map.value)),
            ]);
            DataType::Map(Arc::new(Field::new("key_value", DataType::Struct(entries), false)), false)
        }
    }
}

fn struct_fields(fields: &[NestedField]) -> Fields {
    fields
        .iter()
        .map(|field| arrow_field(&field.name, field.id, field.required, arrow_type(&field.field_type)))
        .collect()
}

/// The Arrow schema of a table schema, every field (nested ones too) tagged with its Iceberg
/// id, which the Parquet writer copies into the file's schema.
pub fn arrow_schema(schema: &IcebergSchema) -> Schema {
    Schema::new(struct_fields(&schema.fields))
}

/// One Kafka record's metadata columns.
#[derive(Debug, Clone, Copy)]
pub struct KafkaRow<'a> {
    pub partition: i32,
    pub offset: i64,
    pub timestamp_ms: i64,
    pub key: Option<&'a [u8]>,
    /// Each header's key and value, in record order.
    pub headers: &'a [(&'a [u8], Option<&'a [u8]>)],
}

/// Rows being collected for one data file: builders for every column of the table schema. The
/// first five are the metadata columns ([`crate::schema::metadata_columns`]); the caller fills
/// the value columns through [`RowsBuilder::value_columns`], one entry per row.
pub struct RowsBuilder {
    schema: SchemaRef,
    columns: Vec<Box<dyn ArrayBuilder>>,
    rows: usize,
    /// Bytes of keys, headers and values pushed so far: the estimate that rolls files.
    pub payload_bytes: usize,
}

impl std::fmt::Debug for RowsBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowsBuilder").field("rows", &self.rows).field("payload_bytes", &self.payload_bytes).finish()
    }
}

const METADATA_COLUMNS: usize = 5;

fn builder<T: 'static>(column: &mut Box<dyn ArrayBuilder>) -> Result<&mut T, TableError> {
    downcast::<T>(column.as_mut())
}

pub(crate) fn downcast<T: 'static>(builder: &mut dyn ArrayBuilder) -> Result<&mut T, TableError> {
    builder
        .as_any_mut()
        .downcast_mut::<T>()
        .ok_or_else(|| TableError::Invalid(format!("a column builder is not a {}", std::any::type_name::<T>())))
}

/// Appends a null of `field_type` (a struct's children get nulls too, as Arrow requires).
/// The builder of a struct builder's field `index`.
pub(crate) fn struct_child(structs: &mut StructBuilder, index: usize) -> Result<&mut dyn ArrayBuilder, TableError> {
    structs
        .field_builders_mut()
        .get_mut(index)
        .map(|child| child.as_mut())
        .ok_or_else(|| TableError::Invalid("struct builder without a field".into()))
}

pub(crate) fn append_null(builder: &mut dyn ArrayBuilder, field_type: &IcebergType) -> Result<(), TableError> {
    use PrimitiveType as P;
    match field_type {
        IcebergType::Primitive(p) => match p {
            P::Boolean => downcast::<BooleanBuilder>(builder)?.append_null(),
            P::Int => downcast::<Int32Builder>(builder)?.append_null(),
            P::Long => downcast::<Int64Builder>(builder)?.append_null(),
            P::Float => downcast::<Float32Builder>(builder)?.append_null(),
            P::Double => downcast::<Float64Builder>(builder)?.append_null(),
            P::Decimal { .. } => downcast::<Decimal128Builder>(builder)?.append_null(),
            P::Date => downcast::<Date32Builder>(builder)?.append_null(),
            P::Time => downcast::<Time64MicrosecondBuilder>(builder)?.append_null(),
            P::Timestamp | P::Timestamptz => downcast::<TimestampMicrosecondBuilder>(builder)?.append_null(),
            P::String => downcast::<StringBuilder>(builder)?.append_null(),
            P::Uuid | P::Fixed(_) => downcast::<FixedSizeBinaryBuilder>(builder)?.append_null(),
            P::Binary => downcast::<BinaryBuilder>(builder)?.append_null(),
        },
        IcebergType::Struct(inner) => {
            let structs = downcast::<StructBuilder>(builder)?;
            for (index, field) in inner.fields.iter().enumerate() {
                let child = struct_child(structs, index)?;
                append_null(child, &field.field_type)?;
            }
            structs.append_null();
        }
        IcebergType::List(_) => downcast::<ListBuilder<Box<dyn ArrayBuilder>>>(builder)?.append_null(),
        IcebergType::Map(_) => downcast::<MapBuilder<Box<dyn ArrayBuilder>, Box<dyn ArrayBuilder>>>(builder)?
            .append(false)
            .map_err(|e| TableError::Invalid(e.to_string()))?,
    }
    Ok(())
}

impl RowsBuilder {
    pub fn new(schema: &IcebergSchema) -> Self {
        let schema = Arc::new(arrow_schema(schema));
        let columns = schema.fields().iter().map(|field| make_builder(field.data_type(), 1024)).collect();
        Self { schema, columns, rows: 0, payload_bytes: 0 }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends a row's metadata columns. Every value column must then get exactly one entry.
    pub fn push_metadata(&mut self, row: &KafkaRow<'_>) -> Result<(), TableError> {
        if self.columns.len() < METADATA_COLUMNS {
            return Err(TableError::Invalid("a table schema without Floe's metadata columns".into()));
        }
        builder::<Int32Builder>(&mut self.columns[0])?.append_value(row.partition);
        builder::<Int64Builder>(&mut self.columns[1])?.append_value(row.offset);
        builder::<TimestampMicrosecondBuilder>(&mut self.columns[2])?
            .append_value(row.timestamp_ms.saturating_mul(1_000));
        builder::<BinaryBuilder>(&mut self.columns[3])?.append_option(row.key);
        let headers = builder::<ListBuilder<Box<dyn ArrayBuilder>>>(&mut self.columns[4])?;
        let entries = builder::<StructBuilder>(headers.values())?;
        for (key, value) in row.headers {
            let key_builder = entries
                .field_builder::<StringBuilder>(0)
                .ok_or_else(|| TableError::Invalid("header key column is not a string".into()))?;
            key_builder.append_value(String::from_utf8_lossy(key));
            let value_builder = entries
                .field_builder::<BinaryBuilder>(1)
                .ok_or_else(|| TableError::Invalid("header value column is not binary".into()))?;
            value_builder.append_option(*value);
            entries.append(true);
            self.payload_bytes += key.len() + value.map_or(0, <[u8]>::len);
        }
        headers.append(true);
        self.payload_bytes += row.key.map_or(0, <[u8]>::len);
        self.rows += 1;
        Ok(())
    }

    /// Appends a raw table's value (its one value column, `_value`, holds the bytes).
    pub fn push_raw_value(&mut self, value: Option<&[u8]>) -> Result<(), TableError> {
        let [column] = self.value_columns() else {
            return Err(TableError::Invalid("a raw table has exactly one value column".into()));
        };
        builder::<BinaryBuilder>(column)?.append_option(value);
        self.payload_bytes += value.map_or(0, <[u8]>::len);
        Ok(())
    }

    /// Appends a dead-letter row's value and error (its value columns are `_value`, `_error`).
    pub fn push_dead_letter(&mut self, value: Option<&[u8]>, error: &str) -> Result<(), TableError> {
        let [raw, reason] = self.value_columns() else {
            return Err(TableError::Invalid("a dead-letter table has two value columns".into()));
        };
        builder::<BinaryBuilder>(raw)?.append_option(value);
        builder::<StringBuilder>(reason)?.append_value(error);
        self.payload_bytes += value.map_or(0, <[u8]>::len) + error.len();
        Ok(())
    }

    /// Builders of the value columns, in schema order after the metadata columns.
    pub fn value_columns(&mut self) -> &mut [Box<dyn ArrayBuilder>] {
        let start = METADATA_COLUMNS.min(self.columns.len());
        &mut self.columns[start..]
    }

    /// The collected rows as one batch; the builders start over empty.
    pub fn finish(&mut self) -> Result<RecordBatch, TableError> {
        let arrays = self.columns.iter_mut().map(|column| column.finish()).collect();
        self.rows = 0;
        self.payload_bytes = 0;
        RecordBatch::try_new(self.schema.clone(), arrays).map_err(|error| TableError::Invalid(error.to_string()))
    }
}

/// An encoded Parquet file and what its manifest entry says about it.
#[derive(Debug)]
pub struct EncodedFile {
    pub bytes: Vec<u8>,
    pub record_count: i64,
    pub column_sizes: BTreeMap<i32, i64>,
    pub value_counts: BTreeMap<i32, i64>,
    pub null_value_counts: BTreeMap<i32, i64>,
    pub lower_bounds: BTreeMap<i32, Vec<u8>>,
    pub upper_bounds: BTreeMap<i32, Vec<u8>>,
    pub split_offsets: Vec<i64>,
}

impl EncodedFile {
    /// The manifest's description of this file once stored at `file_path`.
    pub fn data_file(&self, file_path: String, partition: Vec<Option<PartitionValue>>) -> DataFile {
        DataFile {
            content: Content::Data,
            file_path,
            partition,
            record_count: self.record_count,
            file_size_in_bytes: self.bytes.len() as i64,
            column_sizes: self.column_sizes.clone(),
            value_counts: self.value_counts.clone(),
            null_value_counts: self.null_value_counts.clone(),
            lower_bounds: self.lower_bounds.clone(),
            upper_bounds: self.upper_bounds.clone(),
            split_offsets: self.split_offsets.clone(),
        }
    }
}

/// How a file of `schema` is written: see [`WIDE_FILE_COLUMNS`].
fn writer_properties(schema: &Schema) -> Result<WriterProperties, parquet::errors::ParquetError> {
    let columns = ArrowSchemaConverter::new().convert(schema)?.num_columns();
    let builder = WriterProperties::builder().set_max_row_group_row_count(Some(ROW_GROUP_ROWS_MAX));
    let builder = if columns > WIDE_FILE_COLUMNS {
        builder.set_compression(Compression::SNAPPY).set_dictionary_enabled(false)
    } else {
        builder.set_compression(Compression::ZSTD(ZstdLevel::try_new(ZSTD_LEVEL)?))
    };
    Ok(builder.build())
}

/// Encodes `batches` (all with one schema, from [`RowsBuilder::finish`]) as one Parquet file.
pub fn encode_parquet(batches: &[RecordBatch]) -> Result<EncodedFile, TableError> {
    let parquet_error = |error: parquet::errors::ParquetError| TableError::Invalid(format!("parquet: {error}"));
    let Some(first) = batches.first() else {
        return Err(TableError::Invalid("a data file needs at least one batch".into()));
    };
    let properties = writer_properties(&first.schema()).map_err(parquet_error)?;
    let mut bytes = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut bytes, first.schema(), Some(properties)).map_err(parquet_error)?;
    let mut bounds = Bounds::default();
    for batch in batches {
        writer.write(batch).map_err(parquet_error)?;
        bounds.add(batch);
    }
    let metadata = writer.close().map_err(parquet_error)?;

    let mut file = EncodedFile {
        bytes,
        record_count: 0,
        column_sizes: BTreeMap::new(),
        value_counts: BTreeMap::new(),
        null_value_counts: BTreeMap::new(),
        lower_bounds: BTreeMap::new(),
        upper_bounds: BTreeMap::new(),
        split_offsets: Vec::new(),
    };
    for group in metadata.row_groups() {
        file.record_count += group.num_rows();
        if let Some(first) = group.columns().first() {
            file.split_offsets.push(first.dictionary_page_offset().unwrap_or_else(|| first.data_page_offset()));
        }
        for column in group.columns() {
            let info = column.column_descr().self_type().get_basic_info();
            if !info.has_id() {
                continue;
            }
            let id = info.id();
            *file.column_sizes.entry(id).or_default() += column.compressed_size();
            *file.value_counts.entry(id).or_default() += column.num_values();
            if let Some(nulls) = column.statistics().and_then(|statistics| statistics.null_count_opt()) {
                *file.null_value_counts.entry(id).or_default() += nulls as i64;
            }
        }
    }
    for (id, (low, high)) in bounds.by_field {
        file.lower_bounds.insert(id, low.to_le_bytes_of_width());
        file.upper_bounds.insert(id, high.to_le_bytes_of_width());
    }
    Ok(file)
}

/// The rows of a data file, if it was written with exactly `schema` (the same columns, ids and
/// types); `None` for a file of another schema version, which a merge leaves as it is.
pub fn decode_parquet(bytes: bytes::Bytes, schema: &IcebergSchema) -> Result<Option<Vec<RecordBatch>>, TableError> {
    let parquet_error = |error: parquet::errors::ParquetError| TableError::Invalid(format!("parquet: {error}"));
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(parquet_error)?;
    if reader.schema().fields() != arrow_schema(schema).fields() {
        return Ok(None);
    }
    let batches = reader
        .build()
        .map_err(parquet_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TableError::Invalid(format!("parquet: {e}")))?;
    Ok(Some(batches))
}

/// Lower and upper bounds of the top-level integer and timestamp columns: exact, unlike
/// Parquet's string statistics, which may be truncated.
#[derive(Default)]
struct Bounds {
    by_field: BTreeMap<i32, (Bound, Bound)>,
}

#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Bound {
    Int(i32),
    Long(i64),
}

impl Bound {
    fn to_le_bytes_of_width(self) -> Vec<u8> {
        match self {
            Self::Int(value) => value.to_le_bytes().to_vec(),
            Self::Long(value) => value.to_le_bytes().to_vec(),
        }
    }
}

impl Bounds {
    fn add(&mut self, batch: &RecordBatch) {
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            let Some(id) = field.metadata().get(PARQUET_FIELD_ID_META_KEY).and_then(|id| id.parse::<i32>().ok()) else {
                continue;
            };
            let mut widen = |value: Bound| {
                let entry = self.by_field.entry(id).or_insert((value, value));
                if value < entry.0 {
                    entry.0 = value;
                }
                if value > entry.1 {
                    entry.1 = value;
                }
            };
            match column.data_type() {
                DataType::Int32 => {
                    column.as_primitive::<Int32Type>().iter().flatten().for_each(|v| widen(Bound::Int(v)))
                }
                DataType::Date32 => {
                    column.as_primitive::<Date32Type>().iter().flatten().for_each(|v| widen(Bound::Int(v)))
                }
                DataType::Int64 => {
                    column.as_primitive::<Int64Type>().iter().flatten().for_each(|v| widen(Bound::Long(v)))
                }
                DataType::Timestamp(TimeUnit::Microsecond, _) => column
                    .as_primitive::<TimestampMicrosecondType>()
                    .iter()
                    .flatten()
                    .for_each(|v| widen(Bound::Long(v))),
                _ => {}
            }
        }
    }
}

const MICROS_PER_HOUR: i64 = 3_600_000_000;
const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// The partition values of a row's source value: hours or days since the epoch of a
/// timestamp (µs), days of a date.
fn transform(value: Option<i64>, transform: Transform, is_date: bool) -> Option<PartitionValue> {
    let value = value?;
    Some(match (transform, is_date) {
        (Transform::Hour, false) => PartitionValue::Int(i32::try_from(value.div_euclid(MICROS_PER_HOUR)).ok()?),
        (Transform::Hour, true) => PartitionValue::Int(i32::try_from(value.checked_mul(24)?).ok()?),
        (Transform::Day, false) => PartitionValue::Date(i32::try_from(value.div_euclid(MICROS_PER_DAY)).ok()?),
        (Transform::Day, true) => PartitionValue::Date(i32::try_from(value).ok()?),
        (Transform::Identity, _) => PartitionValue::Long(value),
    })
}

/// One partition's values and its rows.
pub type PartitionedRows = (Vec<Option<PartitionValue>>, RecordBatch);

/// Splits a batch's rows by their partition under `spec` (whose sources are top-level
/// timestamp or date columns of `schema`): each partition's values and its rows, in first-seen
/// order. An unpartitioned spec gives the batch back whole.
pub fn split_by_partition(
    batch: RecordBatch,
    spec: &PartitionSpec,
    schema: &IcebergSchema,
) -> Result<Vec<PartitionedRows>, TableError> {
    if spec.fields.is_empty() {
        return Ok(vec![(Vec::new(), batch)]);
    }
    let mut sources = Vec::with_capacity(spec.fields.len());
    for field in &spec.fields {
        let source = schema
            .field(field.source_id)
            .ok_or_else(|| TableError::Invalid(format!("partition source {} is not a column", field.source_id)))?;
        let column = batch
            .column_by_name(&source.name)
            .ok_or_else(|| TableError::Invalid(format!("no column {}", source.name)))?;
        let values: Vec<Option<i64>> = match column.data_type() {
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                column.as_primitive::<TimestampMicrosecondType>().iter().collect()
            }
            DataType::Date32 => column.as_primitive::<Date32Type>().iter().map(|v| v.map(i64::from)).collect(),
            other => return Err(TableError::Invalid(format!("cannot partition by a {other} column"))),
        };
        sources.push((values, field.transform, matches!(column.data_type(), DataType::Date32)));
    }
    let mut groups: Vec<(Vec<Option<PartitionValue>>, Vec<u32>)> = Vec::new();
    let mut index_of: HashMap<Vec<Option<PartitionValue>>, usize> = HashMap::new();
    for row in 0..batch.num_rows() {
        let key: Vec<Option<PartitionValue>> =
            sources.iter().map(|(values, t, is_date)| transform(values[row], *t, *is_date)).collect();
        let at = *index_of.entry(key.clone()).or_insert_with(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[at].1.push(u32::try_from(row).unwrap_or(u32::MAX));
    }
    groups
        .into_iter()
        .map(|(key, rows)| {
            let indices = arrow_array::UInt32Array::from(rows);
            arrow_select::take::take_record_batch(&batch, &indices)
                .map(|part| (key, part))
                .map_err(|e| TableError::Invalid(e.to_string()))
        })
        .collect()
}
