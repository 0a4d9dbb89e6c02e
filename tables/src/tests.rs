use std::collections::BTreeMap;

use apache_avro::Reader;

use crate::manifest::{
    Content, DataFile, EntryStatus, ManifestEntry, ManifestFile, ManifestHeader, PartitionValue, decode_manifest,
    decode_manifest_list, encode_manifest, encode_manifest_list,
};
use crate::metadata::{
    Operation, PartitionField, PartitionSpec, Snapshot, Summary, TableMetadata, Transform, new_snapshot_id,
};
use crate::schema::{IcebergSchema, IcebergType, NestedField, PrimitiveType, column, metadata_columns};

fn schema() -> IcebergSchema {
    let mut fields = metadata_columns(false);
    fields.push(NestedField::new(101, "value", false, IcebergType::Primitive(PrimitiveType::Binary)));
    IcebergSchema { schema_id: 0, identifier_field_ids: Vec::new(), fields }
}

fn data_file(path: &str, partition: Vec<Option<PartitionValue>>, rows: i64) -> DataFile {
    DataFile {
        content: Content::Data,
        file_path: path.to_owned(),
        partition,
        record_count: rows,
        file_size_in_bytes: 1234,
        column_sizes: BTreeMap::from([(column::OFFSET, 100)]),
        value_counts: BTreeMap::from([(column::OFFSET, rows)]),
        null_value_counts: BTreeMap::from([(column::OFFSET, 0)]),
        lower_bounds: BTreeMap::from([(column::OFFSET, 0i64.to_le_bytes().to_vec())]),
        upper_bounds: BTreeMap::from([(column::OFFSET, (rows - 1).to_le_bytes().to_vec())]),
        split_offsets: vec![4],
    }
}

#[test]
fn schema_json_has_the_spec_shape_and_reads_back() {
    let schema = schema();
    let json = serde_json::to_value(&schema).unwrap();
    assert_eq!(json["type"], "struct");
    assert_eq!(json["schema-id"], 0);
    assert_eq!(
        json["fields"][2],
        serde_json::json!({"id": 3, "name": "_timestamp", "required": true, "type": "timestamptz"})
    );
    let headers = &json["fields"][4]["type"];
    assert_eq!(headers["type"], "list");
    assert_eq!(headers["element-id"], 6);
    assert_eq!(headers["element"]["fields"][1]["id"], 8);
    assert_eq!(serde_json::from_value::<IcebergSchema>(json).unwrap(), schema);
    assert_eq!(schema.highest_field_id(), 101);
}

#[test]
fn primitive_names_round_trip() {
    for name in ["decimal(38, 9)", "fixed[16]", "timestamptz", "uuid", "binary"] {
        let parsed: IcebergType = serde_json::from_value(serde_json::json!(name)).unwrap();
        assert_eq!(serde_json::to_value(&parsed).unwrap(), serde_json::json!(name));
    }
    assert!(serde_json::from_value::<IcebergType>(serde_json::json!("varchar")).is_err());
    let decimal: IcebergType = serde_json::from_value(serde_json::json!("decimal(10,2)")).unwrap();
    assert_eq!(decimal, IcebergType::Primitive(PrimitiveType::Decimal { precision: 10, scale: 2 }));
}

#[test]
fn unpartitioned_manifest_round_trips_and_carries_field_ids() {
    let schema = schema();
    let spec = PartitionSpec::unpartitioned();
    let header = ManifestHeader { schema: &schema, spec: &spec, content: Content::Data };
    let entries = vec![ManifestEntry {
        status: EntryStatus::Added,
        snapshot_id: 7,
        sequence_number: None,
        file_sequence_number: None,
        data_file: data_file("file:///t/data/a.parquet", Vec::new(), 10),
    }];
    let bytes = encode_manifest(header, &entries).unwrap();
    assert_eq!(decode_manifest(&bytes).unwrap(), entries);

    let reader = Reader::new(&bytes[..]).unwrap();
    let written: serde_json::Value = serde_json::to_value(reader.writer_schema()).unwrap();
    let data_file_fields = &written["fields"][4]["type"]["fields"];
    let ids: Vec<i64> = data_file_fields.as_array().unwrap().iter().map(|f| f["field-id"].as_i64().unwrap()).collect();
    assert_eq!(ids, [134, 100, 101, 102, 103, 104, 108, 109, 110, 125, 128, 132, 135, 140]);
    let split_offsets = &data_file_fields[11]["type"][1];
    assert_eq!(split_offsets["element-id"], 133);
    let metadata = reader.user_metadata();
    assert_eq!(metadata["format-version"], b"2");
    assert_eq!(metadata["content"], b"data");
    let stored: IcebergSchema = serde_json::from_slice(&metadata["schema"]).unwrap();
    assert_eq!(stored, schema);
}

#[test]
fn partitioned_manifest_and_list_summarise_bounds() {
    let schema = schema();
    let spec = PartitionSpec {
        spec_id: 0,
        fields: vec![PartitionField {
            source_id: column::TIMESTAMP,
            field_id: 1000,
            name: "_timestamp_day".into(),
            transform: Transform::Day,
        }],
    };
    let header = ManifestHeader { schema: &schema, spec: &spec, content: Content::Data };
    let entry = |path: &str, day: Option<i32>| ManifestEntry {
        status: EntryStatus::Added,
        snapshot_id: 9,
        sequence_number: None,
        file_sequence_number: None,
        data_file: data_file(path, vec![day.map(PartitionValue::Date)], 5),
    };
    let entries = vec![entry("a", Some(20_000)), entry("b", Some(19_990)), entry("c", None)];
    let bytes = encode_manifest(header, &entries).unwrap();
    assert_eq!(decode_manifest(&bytes).unwrap(), entries);

    let listed = ManifestFile::summarise("m.avro".into(), bytes.len() as i64, header, 3, 9, &entries);
    assert_eq!(listed.added_files_count, 3);
    assert_eq!(listed.added_rows_count, 15);
    assert!(listed.partitions[0].contains_null);
    assert_eq!(listed.partitions[0].lower_bound.as_deref(), Some(&19_990i32.to_le_bytes()[..]));
    assert_eq!(listed.partitions[0].upper_bound.as_deref(), Some(&20_000i32.to_le_bytes()[..]));
    let list = encode_manifest_list(9, Some(8), 3, std::slice::from_ref(&listed)).unwrap();
    assert_eq!(decode_manifest_list(&list).unwrap(), vec![listed]);

    let wrong = vec![ManifestEntry { data_file: data_file("d", Vec::new(), 1), ..entries[0].clone() }];
    assert!(encode_manifest(header, &wrong).is_err());
}

#[test]
fn table_metadata_json_round_trips_with_a_snapshot() {
    let uuid = uuid::Uuid::new_v4();
    let mut metadata = TableMetadata::new(
        uuid,
        "file:///bucket/tables/x".into(),
        schema(),
        PartitionSpec::unpartitioned(),
        BTreeMap::from([("floe.topic".to_owned(), "orders".to_owned())]),
        1_000,
    );
    assert_eq!(metadata.last_partition_id, 999);
    assert_eq!(metadata.last_column_id, 101);
    let id = new_snapshot_id();
    assert!(id > 0);
    metadata.add_snapshot(
        Snapshot {
            snapshot_id: id,
            parent_snapshot_id: None,
            sequence_number: metadata.next_sequence_number(),
            timestamp_ms: 2_000,
            manifest_list: "file:///bucket/tables/x/metadata/snap.avro".into(),
            summary: Summary {
                operation: Operation::Append,
                properties: BTreeMap::from([("added-records".to_owned(), "10".to_owned())]),
            },
            schema_id: Some(0),
        },
        Some("file:///bucket/tables/x/metadata/00000-a.metadata.json".into()),
    );
    let json: serde_json::Value = serde_json::from_slice(&metadata.to_json().unwrap()).unwrap();
    assert_eq!(json["format-version"], 2);
    assert_eq!(json["refs"]["main"]["type"], "branch");
    assert_eq!(json["snapshots"][0]["summary"]["operation"], "append");
    assert_eq!(json["snapshots"][0]["summary"]["added-records"], "10");
    assert_eq!(json["last-sequence-number"], 1);
    assert_eq!(json["metadata-log"][0]["timestamp-ms"], 1_000);
    let back = TableMetadata::parse(&metadata.to_json().unwrap()).unwrap();
    assert_eq!(back, metadata);
    assert_eq!(back.current_snapshot().map(|s| s.snapshot_id), Some(id));

    let mut v1 = json.clone();
    v1["format-version"] = 1.into();
    assert!(TableMetadata::parse(&serde_json::to_vec(&v1).unwrap()).is_err());
}

mod data_files {
    use arrow_array::builder::BinaryBuilder;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;
    use crate::data::{KafkaRow, RowsBuilder, encode_parquet};

    /// Rows at offsets `from..to` of partition 3, with a value column of raw bytes.
    fn rows(schema: &IcebergSchema, from: i64, to: i64) -> arrow_array::RecordBatch {
        let mut rows = RowsBuilder::new(schema);
        for offset in from..to {
            let key = format!("k{offset}");
            let headers: Vec<(&[u8], Option<&[u8]>)> =
                if offset % 2 == 0 { vec![(b"trace", Some(b"abc")), (b"empty", None)] } else { Vec::new() };
            rows.push_metadata(&KafkaRow {
                partition: 3,
                offset,
                timestamp_ms: 1_700_000_000_000 + offset,
                key: (offset % 5 != 0).then_some(key.as_bytes()),
                headers: &headers,
            })
            .unwrap();
            let value = rows.value_columns()[0].as_any_mut().downcast_mut::<BinaryBuilder>().unwrap();
            value.append_value(format!("value {offset}"));
        }
        assert_eq!(rows.rows() as i64, to - from);
        rows.finish().unwrap()
    }

    #[test]
    fn parquet_carries_field_ids_counts_and_exact_bounds() {
        let schema = schema();
        let file = encode_parquet(&[rows(&schema, 10, 60), rows(&schema, 60, 110)]).unwrap();
        assert_eq!(file.record_count, 100);
        assert_eq!(&file.bytes[..4], b"PAR1");
        assert_eq!(file.lower_bounds[&column::OFFSET], 10i64.to_le_bytes());
        assert_eq!(file.upper_bounds[&column::OFFSET], 109i64.to_le_bytes());
        assert_eq!(file.lower_bounds[&column::PARTITION], 3i32.to_le_bytes());
        assert_eq!(file.lower_bounds[&column::TIMESTAMP], ((1_700_000_000_000i64 + 10) * 1000).to_le_bytes());
        assert!(!file.lower_bounds.contains_key(&column::KEY), "no bounds on binary columns");
        assert_eq!(file.null_value_counts[&column::KEY], 20);
        assert_eq!(file.value_counts[&101], 100);
        assert_eq!(file.null_value_counts[&101], 0);
        // Header keys are a nested leaf with their own id: 50 rows with two headers, 50 with none.
        assert_eq!(file.null_value_counts[&column::HEADER_VALUE], 50 + 50);
        assert!(file.column_sizes.keys().all(|id| *id != column::HEADERS), "sizes are per leaf");
        assert_eq!(file.split_offsets, vec![4]);

        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(file.bytes.clone())).unwrap();
        let parquet_schema = reader.parquet_schema();
        let ids: Vec<i32> = parquet_schema.columns().iter().map(|c| c.self_type().get_basic_info().id()).collect();
        assert_eq!(ids, [1, 2, 3, 4, 7, 8, 101]);
        let compression = reader.metadata().row_group(0).column(0).compression();
        assert!(matches!(compression, parquet::basic::Compression::ZSTD(_)));
        let batches: Vec<_> = reader.build().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 100);
    }

    #[test]
    fn empty_input_is_refused() {
        assert!(encode_parquet(&[]).is_err());
    }

    /// Writes a small complete table (metadata JSON, manifest list, manifest, one Parquet file)
    /// into `FLOE_TABLES_SAMPLE_DIR` when set, for reading with other engines by hand.
    #[test]
    fn sample_table_is_complete() {
        let dir = match std::env::var("FLOE_TABLES_SAMPLE_DIR") {
            Ok(dir) => std::path::PathBuf::from(dir),
            Err(_) => std::env::temp_dir().join(format!("floe-tables-sample-{}", std::process::id())),
        };
        let location = format!("file://{}", dir.display());
        std::fs::create_dir_all(dir.join("data")).unwrap();
        std::fs::create_dir_all(dir.join("metadata")).unwrap();
        let schema = schema();
        let spec = PartitionSpec::unpartitioned();
        let file = encode_parquet(&[rows(&schema, 0, 100)]).unwrap();
        let data_path = format!("{location}/data/00000.parquet");
        std::fs::write(dir.join("data/00000.parquet"), &file.bytes).unwrap();

        let snapshot_id = new_snapshot_id();
        let header = ManifestHeader { schema: &schema, spec: &spec, content: Content::Data };
        let entries = vec![ManifestEntry {
            status: EntryStatus::Added,
            snapshot_id,
            sequence_number: None,
            file_sequence_number: None,
            data_file: file.data_file(data_path, Vec::new()),
        }];
        let manifest = encode_manifest(header, &entries).unwrap();
        std::fs::write(dir.join("metadata/m0.avro"), &manifest).unwrap();
        let listed = ManifestFile::summarise(
            format!("{location}/metadata/m0.avro"),
            manifest.len() as i64,
            header,
            1,
            snapshot_id,
            &entries,
        );
        let list = encode_manifest_list(snapshot_id, None, 1, &[listed]).unwrap();
        std::fs::write(dir.join("metadata/snap-0.avro"), &list).unwrap();
        let mut metadata =
            TableMetadata::new(uuid::Uuid::new_v4(), location.clone(), schema, spec, BTreeMap::new(), 1_000);
        metadata.add_snapshot(
            Snapshot {
                snapshot_id,
                parent_snapshot_id: None,
                sequence_number: 1,
                timestamp_ms: 2_000,
                manifest_list: format!("{location}/metadata/snap-0.avro"),
                summary: Summary { operation: Operation::Append, properties: BTreeMap::new() },
                schema_id: Some(0),
            },
            None,
        );
        std::fs::write(dir.join("metadata/00001.metadata.json"), metadata.to_json().unwrap()).unwrap();
        assert_eq!(decode_manifest_list(&std::fs::read(dir.join("metadata/snap-0.avro")).unwrap()).unwrap().len(), 1);
        if std::env::var("FLOE_TABLES_SAMPLE_DIR").is_err() {
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
