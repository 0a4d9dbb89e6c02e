//! The fuzz targets' bodies, shared by the `cargo fuzz` binaries (`fuzz_targets/`) and by the
//! regression test that replays every input kept under `fuzz/regressions/` in `.ci/run`
//! (`tests/fuzz_regressions.rs`). Each must return normally whatever the bytes.

use std::sync::LazyLock;

// `floe`'s own process allocator, so a hostile length prefix behaves as in production: the
// Kafka codec's huge pre-allocation is lazily mapped and the decode fails, rather than the
// allocation aborting the process.
#[allow(unsafe_code, reason = "the allocator floe runs with; see src/alloc.rs")]
#[path = "../src/alloc.rs"]
mod alloc;
#[global_allocator]
static ALLOCATOR: alloc::LazyHugeAllocator = alloc::LazyHugeAllocator;

use bytes::Bytes;
use floe_agent::kafka::dispatch::Extras;
use floe_agent::kafka::{Decoded, decode_request};
use floe_agent::produce::{TopicPolicy, validate};
use floe_agent::record_batch::{self, records};
use floe_metadata::{Command, State};
use floe_storage::segment::SegmentFooter;
use floe_storage::segment::trailer::{SegmentTrailer, TRAILER_BYTES};

/// A raw Kafka request frame (after the length prefix), decoded as the agent's connection
/// decodes it (every API key and version); Produce's records validated as its handler does.
pub fn kafka_request(data: &[u8]) {
    let flags = data.first().copied().unwrap_or(0);
    let extras = Extras { sasl: flags & 1 == 1, acls: flags & 2 == 2 };
    let Ok(Decoded::Request { request, .. }) = decode_request(Bytes::copy_from_slice(data), extras) else { return };
    if let kafka_protocol::messages::RequestKind::Produce(produce) = *request {
        // Tight timestamp bounds, so most batches take the per-record timestamp walk too.
        let policy = TopicPolicy {
            max_message_bytes: 1 << 20,
            log_append_time: false,
            compacted: true,
            timestamp_before_max_ms: 3_600_000,
            timestamp_after_max_ms: 3_600_000,
        };
        for topic in &produce.topic_data {
            for partition in &topic.partition_data {
                let _ = validate::partition_records(partition.records.as_ref(), &policy, 0, Some("txn"), None);
            }
        }
    }
}

/// Record batches as a producer sends them: validation, then (as key compaction and HTTP reads
/// do) bounded decompression, a walk over every record and header, and recompression.
pub fn record_batch(data: &[u8]) {
    let bytes = Bytes::copy_from_slice(data);
    let policy = TopicPolicy {
        max_message_bytes: 1 << 20,
        log_append_time: true,
        compacted: true,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
    };
    let _ = validate::partition_records(Some(&bytes), &policy, 1, Some("txn"), None);
    for batch in record_batch::split(&bytes) {
        let Ok((header, batch)) = batch else { break };
        let Ok(payload) = records::decompress(&header, &batch, 1 << 20) else { continue };
        for record in records::records(&payload) {
            let Ok(record) = record else { break };
            let _ = record.headers();
        }
        let _ = records::recompress(&header, &batch, 3);
    }
}

/// The tail of a segment object: its trailer, then the footer the trailer points at.
pub fn segment_footer(data: &[u8]) {
    if data.len() < TRAILER_BYTES {
        let _ = SegmentTrailer::decode(data);
        return;
    }
    let (rest, trailer) = data.split_at(data.len() - TRAILER_BYTES);
    let Ok(trailer) = SegmentTrailer::decode(trailer) else { return };
    let footer_len = (trailer.footer_bytes as usize).min(rest.len());
    let (body, footer) = rest.split_at(rest.len() - footer_len);
    let _ = SegmentFooter::decode(footer, &trailer, body.len() as u64);
}

static SEED_STATE: LazyLock<State> = LazyLock::new(|| {
    let topic_id = |n: u8| floe_metadata::TopicId::from_bytes([n; 16]);
    let compact = [("cleanup.policy".to_owned(), "compact".to_owned())].into();
    let commands = [
        Command::InitCluster { cluster_id: "fuzz".into() },
        Command::CreateTopic {
            name: "t".into(),
            topic_id: topic_id(1),
            partition_count: 3,
            configs: Default::default(),
        },
        Command::CreateTopic { name: "c".into(), topic_id: topic_id(2), partition_count: 1, configs: compact },
        Command::InitProducerId {
            transactional_id: Some("x".into()),
            transaction_timeout_ms: 60_000,
            expected: None,
            now_ms: 1,
            tenant: None,
        },
        Command::CreateTenant { name: "acme".into(), now_ms: 1 },
    ];
    let mut state = State::default();
    for (i, c) in commands.into_iter().enumerate() {
        let _ = state.apply(i as u64 + 1, c);
    }
    state
});

/// Metadata commands as the Raft log and the metadata protocol carry them (postcard), applied
/// one after another to a state with topics, a transactional producer and a tenant. An invalid
/// command must be refused; the state machine asserts its invariants and would stop otherwise.
pub fn metadata_command(data: &[u8]) {
    let mut state = SEED_STATE.clone();
    let mut rest = data;
    let mut index = state.applied_index;
    while let Ok((command, tail)) = postcard::take_from_bytes::<Command>(rest) {
        index += 1;
        let _ = state.apply(index, command);
        if tail.len() == rest.len() {
            break;
        }
        rest = tail;
    }
}

/// HTTP produce bodies: JSON records one after another, as the REST v3 endpoints parse them,
/// built into a batch and validated.
pub fn http_records(data: &[u8]) {
    let _ = floe_gateway::parse_records_for_fuzzing(data);
}

/// A schema registry request body (register, lookup, compatibility; config and mode): parsed
/// as the registry's routes parse it, references resolved against a fixed registry, normalized
/// when the first byte asks, and checked for compatibility under every level.
pub fn registry_body(data: &[u8]) {
    floe_gateway::registry_body_for_fuzzing(data);
}

/// Schemas whose data the Avro datum check walks: recursion, every container and union.
static AVRO_SCHEMAS: LazyLock<Vec<floe_registry::avro::AvroSchema>> = LazyLock::new(|| {
    [
        r#"{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}"#,
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"array","items":["null","string","double"]}},
            {"name":"m","type":{"type":"map","values":{"type":"fixed","name":"F","size":3}}},
            {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},{"name":"b","type":"boolean"},
            {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}"#,
        r#"{"type":"array","items":{"type":"map","values":"null"}}"#,
    ]
    .iter()
    .filter_map(|text| floe_registry::avro::AvroSchema::parse(text, &[]).ok())
    .collect()
});

/// A record's payload checked against a registry schema, as produce-time validation in full
/// mode does (the first byte picks the schema), and decoded to JSON as `format=json` reads do:
/// what decodes is a valid datum, and its JSON encodes back to a datum that decodes the same.
pub fn avro_datum(data: &[u8]) {
    let Some((&pick, datum)) = data.split_first() else { return };
    let Some(schema) = AVRO_SCHEMAS.get(usize::from(pick) % AVRO_SCHEMAS.len().max(1)) else { return };
    let checked = schema.check_datum(datum);
    if let Ok(json) = schema.decode_json(datum) {
        assert!(checked.is_ok(), "decoded what the check refuses: {checked:?}");
        let again = schema.encode_json(&json).expect("decoded JSON encodes");
        assert_eq!(schema.check_datum(&again), Ok(()));
        assert_eq!(schema.decode_json(&again).as_ref(), Ok(&json), "the round trip changed the value");
    }
}

/// A schema text as the registry parses one a client registers (the first byte picks AVRO,
/// JSON or PROTOBUF): what parses has a canonical text that parses to itself, and reads itself.
pub fn schema_text(data: &[u8]) {
    use floe_registry::{ParsedSchema, SchemaFormat};
    let Some((&pick, text)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(text) else { return };
    let format = [SchemaFormat::Avro, SchemaFormat::Json, SchemaFormat::Protobuf][usize::from(pick) % 3];
    let Ok(schema) = ParsedSchema::parse(format, text, &[]) else { return };
    let again = ParsedSchema::parse(format, schema.canonical(), &[]).expect("the canonical text parses");
    assert_eq!(again.canonical(), schema.canonical(), "the canonical text is its own canonical text");
    assert!(schema.can_read(&again).is_empty(), "a schema reads what it writes");
    let _ = schema.record_name(&[0]);
    // normalize=true: the normalized text parses, means the same schema, and is its own
    // normalization.
    let normalized = ParsedSchema::normalized_text(format, text, &[]).expect("a schema that parses normalizes");
    let parsed = ParsedSchema::parse(format, &normalized, &[]).expect("the normalized text parses");
    assert!(
        parsed.can_read(&schema).is_empty() && schema.can_read(&parsed).is_empty(),
        "normalizing keeps the meaning"
    );
    let twice = ParsedSchema::normalized_text(format, &normalized, &[]).expect("normalizes again");
    let canonical = |t: &str| ParsedSchema::parse(format, t, &[]).map(|s| s.canonical().to_owned()).ok();
    assert_eq!(canonical(&twice), canonical(&normalized), "normalizing is idempotent");
}
