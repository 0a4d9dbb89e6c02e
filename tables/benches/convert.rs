//! Table conversion speed: Avro records (as a registry-framed producer writes them, framing
//! stripped) decoded, appended to Arrow builders and encoded as one zstd Parquet file, the work a
//! table commit does per record. Throughput is in record bytes. Two shapes: small records (38
//! bytes on average, per-record costs dominate) and 1 KiB ones (a free-text field of ~900 bytes,
//! as events with a description or a payload are).
//!
//! `cargo bench -p floe-tables --bench convert`

use apache_avro::types::Value;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use floe_registry::avro::AvroSchema;
use floe_tables::avro::{NamedTypes, Schema, append_value, evolve};
use floe_tables::data::{KafkaRow, RowsBuilder, encode_parquet};
use floe_tables::schema::typed_table_schema;

const SCHEMA: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"qty","type":"int"},
    {"name":"price","type":"double"},{"name":"when","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"text","type":"string","default":""}]}"#;
const RECORDS: usize = 50_000;

struct Names<'a>(&'a AvroSchema);

impl NamedTypes for Names<'_> {
    fn named(&self, full_name: &str) -> Option<&Schema> {
        self.0.named(full_name)
    }
}

/// Words the 1 KiB records' text is drawn from: repetitive, as real text compresses.
const WORDS: [&str; 16] = [
    "order",
    "shipped",
    "to",
    "warehouse",
    "north",
    "delayed",
    "customer",
    "requested",
    "refund",
    "for",
    "item",
    "damaged",
    "in",
    "transit",
    "the",
    "priority",
];

/// Text of about `bytes` bytes, different per record.
fn text(i: i64, bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 16);
    let mut state = i as u64 * 0x9e37_79b9_7f4a_7c15 + 1;
    while text.len() < bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        text.push_str(WORDS[(state % 16) as usize]);
        text.push(' ');
    }
    text
}

fn records(schema: &Schema, text_bytes: usize) -> Vec<Vec<u8>> {
    (0..RECORDS as i64)
        .map(|i| {
            let value = Value::Record(vec![
                ("id".into(), Value::Long(i)),
                ("customer".into(), Value::String(format!("customer-{}", i % 5_000))),
                ("qty".into(), Value::Int((i % 17) as i32)),
                ("price".into(), Value::Double(i as f64 * 0.25)),
                ("when".into(), Value::Long(1_700_000_000_000 + i)),
                ("tags".into(), Value::Array(vec![Value::String(format!("t{}", i % 7)); (i % 3) as usize])),
                (
                    "note".into(),
                    Value::Union(
                        u32::from(i % 4 == 0),
                        Box::new(if i % 4 == 0 { Value::String(format!("note {i}")) } else { Value::Null }),
                    ),
                ),
                ("text".into(), Value::String(if text_bytes == 0 { String::new() } else { text(i, text_bytes) })),
            ]);
            apache_avro::to_avro_datum(schema, value).expect("encodes")
        })
        .collect()
}

fn convert(c: &mut Criterion) {
    let avro = AvroSchema::parse(SCHEMA, &[]).expect("parses");
    let names = Names(&avro);
    let empty = typed_table_schema();
    let (table, _) = evolve(&empty, empty.highest_field_id(), avro.root(), &names).expect("evolves").expect("columns");
    let mut group = c.benchmark_group("tables");
    group.sample_size(10);
    for (name, text_bytes) in [("avro_to_parquet", 0), ("avro_to_parquet_1k", 960)] {
        let payloads = records(avro.root(), text_bytes);
        let bytes: usize = payloads.iter().map(Vec::len).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut rows = RowsBuilder::new(&table);
                for (offset, payload) in payloads.iter().enumerate() {
                    let value = avro.decode_value(payload).expect("decodes");
                    let row =
                        KafkaRow { partition: 0, offset: offset as i64, timestamp_ms: 1, key: None, headers: &[] };
                    rows.push_metadata(&row).expect("metadata");
                    append_value(rows.value_columns(), &table, avro.root(), &names, Some(&value)).expect("appends");
                }
                encode_parquet(&[rows.finish().expect("batch")]).expect("encodes").bytes.len()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, convert);
criterion_main!(benches);
