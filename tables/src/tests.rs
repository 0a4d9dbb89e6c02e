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
    fn wide_files_are_written_without_per_column_zstd_or_dictionaries() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch};
        use arrow_schema::{DataType, Field, Schema};
        use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
        use parquet::basic::{Compression, Encoding};

        let columns = crate::data::WIDE_FILE_COLUMNS + 1;
        let fields: Vec<Field> = (0..columns)
            .map(|i| {
                Field::new(format!("c{i}"), DataType::Int64, true).with_metadata(std::collections::HashMap::from([(
                    PARQUET_FIELD_ID_META_KEY.to_owned(),
                    (i + 1).to_string(),
                )]))
            })
            .collect();
        let arrays: Vec<ArrayRef> =
            (0..columns).map(|i| std::sync::Arc::new(Int64Array::from(vec![i as i64, 7, 7])) as ArrayRef).collect();
        let batch = RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), arrays).unwrap();
        let file = encode_parquet(std::slice::from_ref(&batch)).unwrap();
        assert_eq!(file.record_count, 3);

        let reader = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(file.bytes)).unwrap();
        let group = reader.metadata().row_group(0);
        for column in group.columns() {
            assert_eq!(column.compression(), Compression::SNAPPY);
            assert!(!column.encodings().any(|e| matches!(e, Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY)));
        }
        let read: Vec<_> = reader.build().unwrap().collect::<Result<_, _>>().unwrap();
        assert_eq!(read, [batch]);
    }

    #[test]
    fn files_of_the_current_schema_decode_for_merging() {
        let schema = schema();
        let file = encode_parquet(&[rows(&schema, 0, 30)]).unwrap();
        let batches = crate::data::decode_parquet(bytes::Bytes::from(file.bytes.clone()), &schema).unwrap().unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 30);
        let merged = encode_parquet(&batches).unwrap();
        assert_eq!(merged.record_count, 30);
        let mut other = schema.clone();
        other.fields.pop();
        assert!(crate::data::decode_parquet(bytes::Bytes::from(file.bytes), &other).unwrap().is_none());
    }

    #[test]
    fn row_keys_come_back_from_the_file_in_row_order() {
        use crate::deletes::{decode_row_keys, keep_rows, row_keys, row_offsets};
        let schema = schema();
        let batch = rows(&schema, 0, 10);
        let keys: Vec<(i32, Option<Vec<u8>>)> =
            row_keys(&batch).unwrap().map(|(p, k)| (p, k.map(<[u8]>::to_vec))).collect();
        assert_eq!(keys[0], (3, None), "offset 0 has no key");
        assert_eq!(keys[1], (3, Some(b"k1".to_vec())));
        assert_eq!(row_offsets(&batch).unwrap(), (0..10).collect::<Vec<i64>>());
        let file = encode_parquet(std::slice::from_ref(&batch)).unwrap();
        assert_eq!(decode_row_keys(bytes::Bytes::from(file.bytes)).unwrap(), keys);
        let kept = keep_rows(&batch, (0..10).map(|i| i % 3 == 0).collect()).unwrap();
        assert_eq!(row_offsets(&kept).unwrap(), [0, 3, 6, 9]);
    }

    #[test]
    fn position_deletes_are_sorted_bounded_and_read_back() {
        use crate::deletes::{DELETE_FILE_PATH_ID, DELETE_POS_ID, decode_position_deletes, encode_position_deletes};
        let mut deletes = vec![("s3://b/t/data/b.parquet".to_owned(), 7), ("s3://b/t/data/a.parquet".to_owned(), 9)];
        deletes.push(("s3://b/t/data/a.parquet".to_owned(), 2));
        let file = encode_position_deletes(&mut deletes).unwrap();
        assert_eq!(file.record_count, 3);
        assert_eq!(file.lower_bounds[&DELETE_FILE_PATH_ID], b"s3://b/t/data/a.parquet");
        assert_eq!(file.upper_bounds[&DELETE_FILE_PATH_ID], b"s3://b/t/data/b.parquet");
        assert_eq!(file.lower_bounds[&DELETE_POS_ID], 2i64.to_le_bytes());
        let entry = file.delete_file("s3://b/t/data/d.parquet".into(), Vec::new());
        assert_eq!(entry.content, Content::PositionDeletes);
        let read = decode_position_deletes(bytes::Bytes::from(file.bytes)).unwrap();
        let expected: Vec<(String, i64)> = [("a", 2), ("a", 9), ("b", 7)]
            .iter()
            .map(|(name, pos)| (format!("s3://b/t/data/{name}.parquet"), *pos))
            .collect();
        assert_eq!(read, expected);
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

mod avro_values {
    use apache_avro::Schema;
    use apache_avro::types::Value;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMicrosecondType};

    use crate::avro::{NamedTypes, VALUE_FIELD_ID_START, append_value, evolve};
    use crate::data::{KafkaRow, RowsBuilder};
    use crate::schema::{IcebergType, PrimitiveType, typed_table_schema};

    struct Names;
    impl NamedTypes for Names {
        fn named(&self, _: &str) -> Option<&Schema> {
            None
        }
    }

    const V1: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"long"},
        {"name":"qty","type":"int"},
        {"name":"when","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"attrs","type":{"type":"map","values":"long"}},
        {"name":"shipping","type":["null",{"type":"record","name":"Ship","fields":[{"name":"city","type":"string"}]}],"default":null},
        {"name":"either","type":["int","string"]},
        {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}}]}"#;

    /// v2: adds an optional field and widens qty from int to long.
    const V2: &str = r#"{"type":"record","name":"Order","fields":[
        {"name":"id","type":"long"},
        {"name":"qty","type":"long"},
        {"name":"note","type":["null","string"],"default":null}]}"#;

    fn v1_value(id: i64) -> Value {
        Value::Record(vec![
            ("id".into(), Value::Long(id)),
            ("qty".into(), Value::Int(3)),
            ("when".into(), Value::Long(1_700_000_000_123)),
            ("tags".into(), Value::Array(vec![Value::String("a".into()), Value::String("b".into())])),
            ("attrs".into(), Value::Map([("x".to_owned(), Value::Long(1))].into_iter().collect())),
            (
                "shipping".into(),
                Value::Union(1, Box::new(Value::Record(vec![("city".into(), Value::String("Oslo".into()))]))),
            ),
            ("either".into(), Value::Union(1, Box::new(Value::String("s".into())))),
            ("kind".into(), Value::Enum(1, "B".into())),
        ])
    }

    #[test]
    fn a_record_schema_becomes_columns_with_stable_ids_and_evolves() {
        let v1 = Schema::parse_str(V1).unwrap();
        let table = typed_table_schema();
        let (s1, last1) = evolve(&table, table.highest_field_id(), &v1, &Names).unwrap().unwrap();
        let names: Vec<&str> = s1.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(&names[5..], ["id", "qty", "when", "tags", "attrs", "shipping", "either", "kind"]);
        assert_eq!(s1.fields[5].id, VALUE_FIELD_ID_START);
        assert_eq!(s1.fields[7].field_type, IcebergType::Primitive(PrimitiveType::Timestamptz));
        assert_eq!(s1.fields[11].field_type, IcebergType::Primitive(PrimitiveType::String), "a two-type union is JSON");
        assert!(s1.fields[5..].iter().all(|f| !f.required));
        assert_eq!(evolve(&s1, last1, &v1, &Names).unwrap(), None, "the same writer changes nothing");

        let v2 = Schema::parse_str(V2).unwrap();
        let (s2, last2) = evolve(&s1, last1, &v2, &Names).unwrap().unwrap();
        assert_eq!(s2.schema_id, s1.schema_id + 1);
        let qty = s2.fields.iter().find(|f| f.name == "qty").unwrap();
        assert_eq!((qty.id, &qty.field_type), (s1.fields[6].id, &IcebergType::Primitive(PrimitiveType::Long)));
        let note = s2.fields.iter().find(|f| f.name == "note").unwrap();
        assert_eq!(note.id, last1 + 1, "a new field gets the next id");
        assert!(s2.fields.iter().any(|f| f.name == "tags"), "fields the writer dropped stay");
        assert_eq!(last2, last1 + 1);

        // Narrowing back is fine (int fits long), a different type is not.
        let v3 =
            Schema::parse_str(r#"{"type":"record","name":"Order","fields":[{"name":"qty","type":"string"}]}"#).unwrap();
        let refused = evolve(&s2, last2, &v3, &Names).unwrap_err();
        assert!(matches!(&refused, crate::evolution::Incompatible::TypeChanged { path, .. } if path == "qty"));
        let clash =
            Schema::parse_str(r#"{"type":"record","name":"R","fields":[{"name":"_offset","type":"long"}]}"#).unwrap();
        assert!(evolve(&s2, last2, &clash, &Names).is_err(), "a field may not shadow a metadata column");
    }

    #[test]
    fn values_fill_columns_widened_and_null_where_absent() {
        let v1 = Schema::parse_str(V1).unwrap();
        let v2 = Schema::parse_str(V2).unwrap();
        let table = typed_table_schema();
        let (s1, last1) = evolve(&table, table.highest_field_id(), &v1, &Names).unwrap().unwrap();
        let (s2, _) = evolve(&s1, last1, &v2, &Names).unwrap().unwrap();
        let mut rows = RowsBuilder::new(&s2);
        let row = |offset| KafkaRow { partition: 0, offset, timestamp_ms: 1, key: None, headers: &[] };
        rows.push_metadata(&row(0)).unwrap();
        append_value(rows.value_columns(), &s2, &v1, &Names, Some(&v1_value(7))).unwrap();
        rows.push_metadata(&row(1)).unwrap();
        let v2_value = Value::Record(vec![
            ("id".into(), Value::Long(8)),
            ("qty".into(), Value::Long(1 << 40)),
            ("note".into(), Value::Union(1, Box::new(Value::String("hi".into())))),
        ]);
        append_value(rows.value_columns(), &s2, &v2, &Names, Some(&v2_value)).unwrap();
        rows.push_metadata(&row(2)).unwrap();
        append_value(rows.value_columns(), &s2, &Schema::Null, &Names, None).unwrap();
        let batch = rows.finish().unwrap();
        assert_eq!(batch.num_rows(), 3);
        let column = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        let qty = column("qty");
        let qty = qty.as_primitive::<Int64Type>();
        assert_eq!((qty.value(0), qty.value(1), qty.is_null(2)), (3, 1 << 40, true));
        let when = column("when");
        assert_eq!(when.as_primitive::<TimestampMicrosecondType>().value(0), 1_700_000_000_123_000);
        assert!(when.is_null(1), "v2 has no `when`");
        let note = column("note");
        assert_eq!((note.is_null(0), note.as_string::<i32>().value(1)), (true, "hi"));
        let either = column("either");
        assert_eq!(either.as_string::<i32>().value(0), r#"{"string":"s"}"#);
        assert_eq!(column("kind").as_string::<i32>().value(0), "B");
        let shipping = column("shipping");
        let city = shipping.as_struct().column(0).clone();
        assert_eq!(city.as_string::<i32>().value(0), "Oslo");
        assert!(shipping.is_null(2));
        let tags = column("tags");
        assert_eq!(tags.as_list::<i32>().value(0).len(), 2);
        let attrs = column("attrs");
        assert_eq!(attrs.as_map().value(0).column(1).as_primitive::<Int64Type>().value(0), 1);
        // The batch encodes, with the ids the table schema gave.
        let file = crate::data::encode_parquet(&[batch]).unwrap();
        assert!(file.value_counts.contains_key(&(VALUE_FIELD_ID_START)));
    }
}

mod protobuf_values {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Decimal128Type, TimestampMicrosecondType};
    use floe_registry::protobuf::ProtobufSchema;

    use crate::data::{KafkaRow, RowsBuilder};
    use crate::protobuf::{ReflectMessage, append_message, evolve};
    use crate::schema::{IcebergType, PrimitiveType, typed_table_schema};

    const PROTO: &str = r#"syntax = "proto3";
package t;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
import "google/type/date.proto";
message Item { int32 v = 1; }
message Node { string name = 1; Node next = 2; }
message Event {
  google.protobuf.Timestamp ts = 1;
  google.protobuf.StringValue nick = 2;
  map<string, int32> m = 3;
  oneof choice { string a = 4; int32 b = 5; }
  uint64 big = 6;
  repeated Item items = 7;
  google.protobuf.Struct extra = 8;
  google.type.Date day = 9;
  Node node = 10;
  int32 plain = 11;
}
"#;

    #[test]
    fn messages_become_typed_columns() {
        let schema = ProtobufSchema::parse(PROTO, &[]).unwrap();
        let json = serde_json::json!({
            "ts": "2024-01-01T00:00:00.5Z", "nick": "x", "m": {"k": 1}, "a": "y",
            "big": "18446744073709551615", "items": [{"v": 1}, {"v": 2}], "extra": {"z": 1},
            "day": {"year": 2024, "month": 2, "day": 29}, "node": {"name": "n", "next": {"name": "m"}}
        });
        let payload = schema.encode_json(&json, Some("t.Event")).unwrap();
        let message = schema.decode_message(&payload).unwrap();
        let table = typed_table_schema();
        let (evolved, _) = evolve(&table, table.highest_field_id(), &message.descriptor()).unwrap().unwrap();
        let field = |name: &str| evolved.fields.iter().find(|f| f.name == name).unwrap().field_type.clone();
        assert_eq!(field("ts"), IcebergType::Primitive(PrimitiveType::Timestamptz));
        assert_eq!(field("nick"), IcebergType::Primitive(PrimitiveType::String));
        assert_eq!(field("big"), IcebergType::Primitive(PrimitiveType::Decimal { precision: 20, scale: 0 }));
        assert_eq!(field("extra"), IcebergType::Primitive(PrimitiveType::String), "Struct is JSON text");
        assert_eq!(field("day"), IcebergType::Primitive(PrimitiveType::Date));
        let IcebergType::Struct(node) = field("node") else { panic!("a struct") };
        assert_eq!(node.fields[1].field_type, IcebergType::Primitive(PrimitiveType::String), "recursion is JSON");

        let mut rows = RowsBuilder::new(&evolved);
        rows.push_metadata(&KafkaRow { partition: 0, offset: 0, timestamp_ms: 0, key: None, headers: &[] }).unwrap();
        append_message(rows.value_columns(), &evolved, Some(&message)).unwrap();
        rows.push_metadata(&KafkaRow { partition: 0, offset: 1, timestamp_ms: 0, key: None, headers: &[] }).unwrap();
        append_message(rows.value_columns(), &evolved, None).unwrap();
        let batch = rows.finish().unwrap();
        let column = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        assert_eq!(column("ts").as_primitive::<TimestampMicrosecondType>().value(0), 1_704_067_200_500_000);
        assert_eq!(column("nick").as_string::<i32>().value(0), "x");
        assert_eq!(column("a").as_string::<i32>().value(0), "y");
        assert!(column("b").is_null(0), "the other oneof member is null");
        assert_eq!(column("big").as_primitive::<Decimal128Type>().value(0), u64::MAX as i128);
        assert_eq!(column("day").as_primitive::<Date32Type>().value(0), 19_782);
        assert_eq!(column("items").as_list::<i32>().value(0).len(), 2);
        assert_eq!(column("m").as_map().value(0).column(0).as_string::<i32>().value(0), "k");
        assert_eq!(column("extra").as_string::<i32>().value(0), r#"{"z":1.0}"#);
        assert_eq!(column("plain").as_primitive::<arrow_array::types::Int32Type>().value(0), 0, "defaults are written");
        assert!(column("ts").is_null(1) && column("plain").is_null(1), "a tombstone is all null");
        crate::data::encode_parquet(&[batch]).unwrap();
    }
}

mod json_values {
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Date32Type, Float64Type, Int64Type};

    use crate::data::{KafkaRow, RowsBuilder};
    use crate::json::{append_instance, evolve};
    use crate::schema::{IcebergType, PrimitiveType, typed_table_schema};

    #[test]
    fn json_schema_objects_become_typed_columns() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string"}, "age": {"type": ["integer", "null"]}, "score": {"type": "number"},
            "born": {"type": "string", "format": "date"}, "tags": {"type": "array", "items": {"type": "string"}},
            "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "address": {"type": "object", "properties": {"city": {"type": "string"}}}
        }});
        let table = typed_table_schema();
        let (evolved, last) = evolve(&table, table.highest_field_id(), &schema).unwrap().unwrap();
        let field = |name: &str| evolved.fields.iter().find(|f| f.name == name).unwrap().field_type.clone();
        assert_eq!(field("age"), IcebergType::Primitive(PrimitiveType::Long));
        assert_eq!(field("born"), IcebergType::Primitive(PrimitiveType::Date));
        assert_eq!(field("either"), IcebergType::Primitive(PrimitiveType::String));
        assert!(matches!(field("attrs"), IcebergType::Map(_)));
        assert_eq!(evolve(&evolved, last, &schema).unwrap(), None);

        let mut rows = RowsBuilder::new(&evolved);
        let instance = serde_json::json!({"name": "ada", "age": 36, "score": 1.5, "born": "1815-12-10",
            "tags": ["a"], "attrs": {"k": 2}, "either": 3, "address": {"city": "London"}});
        rows.push_metadata(&KafkaRow { partition: 0, offset: 0, timestamp_ms: 0, key: None, headers: &[] }).unwrap();
        append_instance(rows.value_columns(), &evolved, Some(&instance)).unwrap();
        rows.push_metadata(&KafkaRow { partition: 0, offset: 1, timestamp_ms: 0, key: None, headers: &[] }).unwrap();
        append_instance(rows.value_columns(), &evolved, Some(&serde_json::json!({"name": "bob", "age": null})))
            .unwrap();
        let batch = rows.finish().unwrap();
        let column = |name: &str| batch.column(batch.schema().index_of(name).unwrap()).clone();
        assert_eq!(column("age").as_primitive::<Int64Type>().value(0), 36);
        assert!(column("age").is_null(1));
        assert_eq!(column("score").as_primitive::<Float64Type>().value(0), 1.5);
        assert_eq!(column("born").as_primitive::<Date32Type>().value(0), -56_270);
        assert_eq!(column("either").as_string::<i32>().value(0), "3");
        assert_eq!(column("address").as_struct().column(0).as_string::<i32>().value(0), "London");
        assert!(column("address").is_null(1));
    }
}

mod value_fields_cap {
    use apache_avro::types::Value;
    use arrow_array::Array;
    use arrow_array::cast::AsArray;
    use floe_registry::avro::AvroSchema;
    use floe_registry::protobuf::ProtobufSchema;
    use serde_json::json;

    use crate::avro::{NamedTypes, Schema, VALUE_FIELDS_MAX};
    use crate::data::{KafkaRow, RowsBuilder};
    use crate::evolution::{Incompatible, field_count, value_fields};
    use crate::protobuf::ReflectMessage;
    use crate::schema::{IcebergSchema, IcebergType, NestedField, PrimitiveType, typed_table_schema};

    /// An Avro schema's named types, as the agents resolve references.
    struct Names(AvroSchema);
    impl NamedTypes for Names {
        fn named(&self, full_name: &str) -> Option<&Schema> {
            self.0.named(full_name)
        }
    }

    /// Avro records `T0` to `T{depth}`: each but the last has two optional fields `a` and `b` of
    /// the next record (`b` by name), the last one field `x`. As a tree: `3 * 2^depth - 2` fields.
    fn avro_text(depth: usize) -> String {
        let mut schema = format!(r#"{{"type":"record","name":"T{depth}","fields":[{{"name":"x","type":"int"}}]}}"#);
        for i in (0..depth).rev() {
            let next = i + 1;
            schema = format!(
                r#"{{"type":"record","name":"T{i}","fields":[{{"name":"a","type":["null",{schema}]}},{{"name":"b","type":["null","T{next}"]}}]}}"#
            );
        }
        schema
    }

    /// The same shape in Protobuf: `T0` (the first message) to `T{depth}`.
    fn protobuf_text(depth: usize) -> String {
        let mut text = String::from("syntax = \"proto3\"; package p;");
        for i in 0..depth {
            let next = i + 1;
            text.push_str(&format!(" message T{i} {{ T{next} a = 1; T{next} b = 2; }}"));
        }
        text.push_str(&format!(" message T{depth} {{ int32 x = 1; }}"));
        text
    }

    fn avro_table(names: &Names) -> IcebergSchema {
        let table = typed_table_schema();
        crate::avro::evolve(&table, table.highest_field_id(), names.0.root(), names).unwrap().unwrap().0
    }

    fn protobuf_table(schema: &ProtobufSchema) -> IcebergSchema {
        let table = typed_table_schema();
        let message = schema.first_message().unwrap();
        crate::protobuf::evolve(&table, table.highest_field_id(), &message).unwrap().unwrap().0
    }

    /// Checks a table mapped from the shared types: as many fields as the cap allows, `a`'s tree
    /// first, and `b` (reached once the cap is spent) as JSON text.
    fn check_capped(language: &str, depth: usize, table: &IcebergSchema) {
        let count = field_count(value_fields(&table.fields));
        assert!(count <= VALUE_FIELDS_MAX, "{language} depth {depth}: {count} fields");
        assert!(count + 2 >= VALUE_FIELDS_MAX, "{language} depth {depth}: only {count} fields");
        let b = table.fields.iter().find(|f| f.name == "b").unwrap();
        assert_eq!(b.field_type, IcebergType::Primitive(PrimitiveType::String), "{language} depth {depth}");
    }

    #[test]
    fn shared_types_map_to_at_most_the_cap_of_fields() {
        // Depth 13 is 24,574 fields as a tree, which the mapping used to build whole (quickly, so
        // this fails there rather than at depth 20, 3 million, or 30, 3 billion).
        for depth in [13, 20] {
            let names = Names(AvroSchema::parse(&avro_text(depth), &[]).unwrap());
            check_capped("avro", depth, &avro_table(&names));
        }
        for depth in [13, 30] {
            let schema = ProtobufSchema::parse(&protobuf_text(depth), &[]).unwrap();
            check_capped("protobuf", depth, &protobuf_table(&schema));
        }
    }

    #[test]
    fn values_past_the_cap_are_kept_as_json_text() {
        let row = KafkaRow { partition: 0, offset: 0, timestamp_ms: 0, key: None, headers: &[] };
        let null = || Value::Union(0, Box::new(Value::Null));
        let names = Names(AvroSchema::parse(&avro_text(13), &[]).unwrap());
        let table = avro_table(&names);
        let t1 = Value::Record(vec![("a".into(), null()), ("b".into(), null())]);
        let value = Value::Record(vec![("a".into(), null()), ("b".into(), Value::Union(1, Box::new(t1)))]);
        let mut rows = RowsBuilder::new(&table);
        rows.push_metadata(&row).unwrap();
        crate::avro::append_value(rows.value_columns(), &table, names.0.root(), &names, Some(&value)).unwrap();
        let batch = rows.finish().unwrap();
        let b = batch.column(batch.schema().index_of("b").unwrap()).clone();
        assert_eq!(b.as_string::<i32>().value(0), r#"{"a":null,"b":null}"#);
        assert!(batch.column(batch.schema().index_of("a").unwrap()).is_null(0));

        let schema = ProtobufSchema::parse(&protobuf_text(13), &[]).unwrap();
        let table = protobuf_table(&schema);
        let payload = schema.encode_json(&json!({"b": {"a": {}}}), Some("p.T0")).unwrap();
        let message = schema.decode_message(&payload).unwrap();
        let mut rows = RowsBuilder::new(&table);
        rows.push_metadata(&row).unwrap();
        crate::protobuf::append_message(rows.value_columns(), &table, Some(&message)).unwrap();
        let batch = rows.finish().unwrap();
        let b = batch.column(batch.schema().index_of("b").unwrap()).clone();
        let text: serde_json::Value = serde_json::from_str(b.as_string::<i32>().value(0)).unwrap();
        assert!(text["a"].is_object(), "{text}");
        assert_eq!(message.descriptor().full_name(), "p.T0");
    }

    /// A JSON Schema object of `count` integer properties named `{prefix}0`, `{prefix}1`, …
    fn wide(prefix: &str, count: usize) -> serde_json::Value {
        let properties: serde_json::Map<String, serde_json::Value> =
            (0..count).map(|i| (format!("{prefix}{i}"), json!({"type": "integer"}))).collect();
        json!({"type": "object", "properties": properties})
    }

    #[test]
    fn writers_that_together_pass_the_cap_are_refused() {
        let table = typed_table_schema();
        let (first, last) = crate::json::evolve(&table, table.highest_field_id(), &wide("a", 6_000)).unwrap().unwrap();
        assert_eq!(crate::json::evolve(&first, last, &wide("a", 6_000)).unwrap(), None);
        let refused = crate::json::evolve(&first, last, &wide("b", 6_000)).unwrap_err();
        assert_eq!(refused, Incompatible::TooManyFields { count: 12_000 });
        assert!(refused.to_string().contains("more than 10000"), "{refused}");
    }

    #[test]
    fn a_table_past_the_cap_keeps_its_fields_but_does_not_grow() {
        // Made before the cap: 12,000 columns.
        let mut table = typed_table_schema();
        let long = IcebergType::Primitive(PrimitiveType::Long);
        for i in 0..12_000 {
            let id = crate::avro::VALUE_FIELD_ID_START + i;
            table.fields.push(NestedField::new(id, &format!("a{i}"), false, long.clone()));
        }
        let last = table.highest_field_id();
        assert_eq!(crate::json::evolve(&table, last, &wide("a", 12_000)).unwrap(), None);
        let refused = crate::json::evolve(&table, last, &wide("a", 12_001)).unwrap_err();
        assert_eq!(refused, Incompatible::TooManyFields { count: 12_001 });
    }
}

/// The cost fuzzer's table properties: issue 52's shared types, generated, map to at most the cap
/// of fields however deep and wide, and in time. A few cases by default; `FLOE_FUZZ_CASES` (set
/// by `scripts/fuzz.sh`) runs them long.
mod cost {
    use std::time::{Duration, Instant};

    use floe_registry::avro::AvroSchema;
    use floe_registry::protobuf::ProtobufSchema;
    use proptest::prelude::*;

    use crate::avro::{NamedTypes, Schema, VALUE_FIELDS_MAX};
    use crate::evolution::{field_count, value_fields};
    use crate::schema::{IcebergSchema, typed_table_schema};

    fn config() -> ProptestConfig {
        let cases = std::env::var("FLOE_FUZZ_CASES").ok().and_then(|cases| cases.parse().ok()).unwrap_or(16);
        ProptestConfig::with_cases(cases)
    }

    struct Names(AvroSchema);
    impl NamedTypes for Names {
        fn named(&self, full_name: &str) -> Option<&Schema> {
            self.0.named(full_name)
        }
    }

    /// Avro records `T0` to `T{depth}`: each but the last has `fanout` fields of the next (the
    /// first defines it), optional or, with `repeated`, arrays of it; the last one `int` field.
    fn avro_text(depth: usize, fanout: usize, repeated: bool) -> String {
        let of = |inner: &str| {
            if repeated { format!(r#"{{"type":"array","items":{inner}}}"#) } else { format!(r#"["null",{inner}]"#) }
        };
        let mut schema = format!(r#"{{"type":"record","name":"T{depth}","fields":[{{"name":"x","type":"int"}}]}}"#);
        for i in (0..depth).rev() {
            let named = of(&format!("\"T{}\"", i + 1));
            let rest: String = (1..fanout).map(|f| format!(r#",{{"name":"f{f}","type":{named}}}"#)).collect();
            schema =
                format!(r#"{{"type":"record","name":"T{i}","fields":[{{"name":"f0","type":{}}}{rest}]}}"#, of(&schema));
        }
        schema
    }

    /// The same shape in Protobuf: messages `T0` to `T{depth}` in package `p`.
    fn protobuf_text(depth: usize, fanout: usize, repeated: bool) -> String {
        let label = if repeated { "repeated " } else { "" };
        let mut text = String::from("syntax = \"proto3\"; package p;");
        for i in 0..depth {
            let fields: String = (0..fanout).map(|f| format!(" {label}T{} f{f} = {};", i + 1, f + 1)).collect();
            text.push_str(&format!(" message T{i} {{{fields} }}"));
        }
        text.push_str(&format!(" message T{depth} {{ int32 x = 1; }}"));
        text
    }

    fn fields(table: &IcebergSchema) -> usize {
        field_count(value_fields(&table.fields))
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn shared_types_map_to_at_most_the_cap_of_fields(
            depth in 1usize..=30,
            fanout in 1usize..=3,
            repeated in any::<bool>(),
        ) {
            let table = typed_table_schema();
            let started = Instant::now();
            let names = Names(AvroSchema::parse(&avro_text(depth, fanout, repeated), &[]).unwrap());
            let (avro, _) = crate::avro::evolve(&table, table.highest_field_id(), names.0.root(), &names).unwrap().unwrap();
            prop_assert!(fields(&avro) <= VALUE_FIELDS_MAX, "avro: {} fields", fields(&avro));
            let schema = ProtobufSchema::parse(&protobuf_text(depth, fanout, repeated), &[]).unwrap();
            let message = schema.first_message().unwrap();
            let (protobuf, _) = crate::protobuf::evolve(&table, table.highest_field_id(), &message).unwrap().unwrap();
            prop_assert!(fields(&protobuf) <= VALUE_FIELDS_MAX, "protobuf: {} fields", fields(&protobuf));
            prop_assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        }
    }
}

#[test]
fn snapshots_expire_by_age_and_count_but_the_current_one_stays() {
    let mut metadata = TableMetadata::new(
        uuid::Uuid::new_v4(),
        "file:///t".into(),
        schema(),
        PartitionSpec::unpartitioned(),
        BTreeMap::new(),
        0,
    );
    for (i, at) in [10, 20, 30, 40, 50].into_iter().enumerate() {
        let snapshot = Snapshot {
            snapshot_id: i as i64 + 1,
            parent_snapshot_id: metadata.current_snapshot_id,
            sequence_number: metadata.next_sequence_number(),
            timestamp_ms: at,
            manifest_list: format!("file:///t/metadata/snap-{i}.avro"),
            summary: Summary { operation: Operation::Append, properties: BTreeMap::new() },
            schema_id: Some(0),
        };
        metadata.add_snapshot(snapshot, Some(format!("file:///t/metadata/{i}.metadata.json")));
    }
    metadata.expire_snapshots(60, Some(35), 10);
    assert_eq!(metadata.snapshots.iter().map(|s| s.snapshot_id).collect::<Vec<_>>(), [3, 4, 5], "older than 25");
    metadata.expire_snapshots(60, None, 2);
    assert_eq!(metadata.snapshots.iter().map(|s| s.snapshot_id).collect::<Vec<_>>(), [4, 5], "the newest 2");
    assert_eq!(metadata.snapshots[0].parent_snapshot_id, None, "no parent that is gone");
    assert_eq!(metadata.snapshot_log.len(), 2);
    metadata.expire_snapshots(1_000, Some(1), 10);
    assert_eq!(metadata.snapshots.iter().map(|s| s.snapshot_id).collect::<Vec<_>>(), [5], "the current one stays");
    for i in 0..200 {
        metadata.replaces(format!("file:///t/metadata/x{i}.metadata.json"));
    }
    assert_eq!(metadata.metadata_log.len(), crate::metadata::METADATA_LOG_MAX);
    assert!(metadata.metadata_log.last().unwrap().metadata_file.ends_with("x199.metadata.json"));
}
