//! Upsert tables: which row each (Kafka partition, key) is, and position delete files, the
//! Iceberg v2 way to say "row N of file F is gone". A compacted topic's table keeps one live
//! row per partition and key, as compaction keeps one record: a newer record deletes the older
//! row by position, a tombstone deletes it and adds none.
//!
//! Position deletes rather than equality deletes: every Iceberg reader applies them (pyiceberg,
//! for one, refuses equality deletes), and applying them costs readers no join on the key.

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, BooleanArray, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::TableError;
use crate::data::{EncodedFile, arrow_schema, encode_parquet};
use crate::manifest::{Content, DataFile, PartitionValue};
use crate::schema::{IcebergSchema, IcebergType, NestedField, PrimitiveType};

/// The spec's reserved field ids of a position delete file's columns.
pub const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;
pub const DELETE_POS_ID: i32 = 2_147_483_545;

/// The schema of a position delete file: `file_path` and `pos`, sorted by both.
pub fn position_delete_schema() -> IcebergSchema {
    IcebergSchema {
        schema_id: 0,
        identifier_field_ids: Vec::new(),
        fields: vec![
            NestedField::new(DELETE_FILE_PATH_ID, "file_path", true, IcebergType::Primitive(PrimitiveType::String)),
            NestedField::new(DELETE_POS_ID, "pos", true, IcebergType::Primitive(PrimitiveType::Long)),
        ],
    }
}

/// A position delete file of `deletes` (data file path, row position), which it sorts; with
/// the path bounds readers use to skip it for other data files.
pub fn encode_position_deletes(deletes: &mut [(String, i64)]) -> Result<EncodedFile, TableError> {
    deletes.sort();
    let schema = Arc::new(arrow_schema(&position_delete_schema()));
    let paths = StringArray::from_iter_values(deletes.iter().map(|(path, _)| path.as_str()));
    let positions = Int64Array::from_iter_values(deletes.iter().map(|(_, pos)| *pos));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(paths), Arc::new(positions)])
        .map_err(|e| TableError::Invalid(e.to_string()))?;
    let mut file = encode_parquet(&[batch])?;
    if let (Some((first, _)), Some((last, _))) = (deletes.first(), deletes.last()) {
        file.lower_bounds.insert(DELETE_FILE_PATH_ID, first.as_bytes().to_vec());
        file.upper_bounds.insert(DELETE_FILE_PATH_ID, last.as_bytes().to_vec());
    }
    Ok(file)
}

impl EncodedFile {
    /// The manifest's description of this file as a position delete file at `file_path`.
    pub fn delete_file(&self, file_path: String, partition: Vec<Option<PartitionValue>>) -> DataFile {
        DataFile { content: Content::PositionDeletes, ..self.data_file(file_path, partition) }
    }
}

/// The (data file path, position) pairs of a position delete file.
pub fn decode_position_deletes(bytes: bytes::Bytes) -> Result<Vec<(String, i64)>, TableError> {
    let mut deletes = Vec::new();
    for batch in read_columns(bytes, &["file_path", "pos"])? {
        let (Some(paths), Some(positions)) =
            (batch.column(0).as_string_opt::<i32>(), batch.column(1).as_primitive_opt::<Int64Type>())
        else {
            return Err(TableError::Invalid("a position delete file's columns are not file_path and pos".into()));
        };
        for row in 0..batch.num_rows() {
            deletes.push((paths.value(row).to_owned(), positions.value(row)));
        }
    }
    Ok(deletes)
}

/// A row's Kafka partition and key.
pub type RowKey = (i32, Option<Vec<u8>>);

/// Each row's Kafka partition and key, in row order, of a data file Floe wrote.
pub fn decode_row_keys(bytes: bytes::Bytes) -> Result<Vec<RowKey>, TableError> {
    let mut keys = Vec::new();
    for batch in read_columns(bytes, &["_partition", "_key"])? {
        keys.extend(row_keys(&batch)?.map(|(partition, key)| (partition, key.map(<[u8]>::to_vec))));
    }
    Ok(keys)
}

/// Each row's Kafka partition and key, in row order.
pub fn row_keys(batch: &RecordBatch) -> Result<impl Iterator<Item = (i32, Option<&[u8]>)>, TableError> {
    let partitions = batch.column_by_name("_partition").and_then(|c| c.as_primitive_opt::<Int32Type>());
    let keys = batch.column_by_name("_key").and_then(|c| c.as_binary_opt::<i32>());
    let (Some(partitions), Some(keys)) = (partitions, keys) else {
        return Err(TableError::Invalid("rows without _partition and _key columns".into()));
    };
    Ok((0..batch.num_rows()).map(move |row| (partitions.value(row), keys.is_valid(row).then(|| keys.value(row)))))
}

/// Each row's Kafka offset, in row order.
pub fn row_offsets(batch: &RecordBatch) -> Result<&[i64], TableError> {
    batch
        .column_by_name("_offset")
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .map(|offsets| offsets.values().as_ref())
        .ok_or_else(|| TableError::Invalid("rows without an _offset column".into()))
}

/// The rows of `batch` whose entry in `keep` is true.
pub fn keep_rows(batch: &RecordBatch, keep: Vec<bool>) -> Result<RecordBatch, TableError> {
    arrow_select::filter::filter_record_batch(batch, &BooleanArray::from(keep))
        .map_err(|e| TableError::Invalid(e.to_string()))
}

/// The top-level columns `names` of a Parquet file, in that order.
fn read_columns(bytes: bytes::Bytes, names: &[&str]) -> Result<Vec<RecordBatch>, TableError> {
    let parquet_error = |error: parquet::errors::ParquetError| TableError::Invalid(format!("parquet: {error}"));
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(parquet_error)?;
    let roots: Vec<usize> = names
        .iter()
        .map(|name| {
            builder
                .schema()
                .index_of(name)
                .map_err(|_| TableError::Invalid(format!("the Parquet file has no column {name}")))
        })
        .collect::<Result<_, _>>()?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let batches = builder
        .with_projection(mask)
        .build()
        .map_err(parquet_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TableError::Invalid(format!("parquet: {e}")))?;
    // The projection keeps the file's column order; put them in the order asked for.
    let mut sorted: Vec<usize> = roots.clone();
    sorted.sort_unstable();
    let order: Vec<usize> =
        roots.iter().map(|root| sorted.iter().position(|r| r == root).unwrap_or_default()).collect();
    batches.into_iter().map(|batch| batch.project(&order).map_err(|e| TableError::Invalid(e.to_string()))).collect()
}
