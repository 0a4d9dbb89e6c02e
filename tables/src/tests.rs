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
    assert_eq!(json["fields"][2], serde_json::json!({"id": 3, "name": "_timestamp", "required": true, "type": "timestamptz"}));
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
