//! Issue 52's shared-type schemas, as the hostile tenant writes them: types that each use the
//! next one twice, so a schema's text grows linearly with its depth while the paths through it
//! grow as 2^depth. Whatever walks such a schema by paths rather than by types (a compatibility
//! check, a validator, a table's column mapping) does exponential work, which the agents must
//! refuse or bound. Also values of them, framed as Confluent's serializers frame them (magic
//! byte 0, the schema id, then the payload).

use serde_json::{Value, json};

/// A schema language of the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Language {
    Avro,
    Protobuf,
    Json,
}

impl Language {
    pub(super) const ALL: [Self; 3] = [Self::Avro, Self::Protobuf, Self::Json];

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Avro => "avro",
            Self::Protobuf => "protobuf",
            Self::Json => "json",
        }
    }

    /// The registry's `schemaType` (none for Avro, its default).
    pub(super) fn schema_type(self) -> Option<&'static str> {
        match self {
            Self::Avro => None,
            Self::Protobuf => Some("PROTOBUF"),
            Self::Json => Some("JSON"),
        }
    }

    /// Version `version` of the schema `depth` deep. Each version reads the one before (the
    /// registry's default level, BACKWARD), so registering them in turn has the registry
    /// compare every shared type with its previous version.
    pub(super) fn version(self, depth: usize, version: usize) -> String {
        match self {
            Self::Avro => avro(depth, "long", version),
            Self::Protobuf => protobuf(depth, "int64", version),
            Self::Json => json_schema(depth, json!({"type": "integer", "description": format!("version {version}")})),
        }
    }

    /// A schema `depth` deep that cannot read the versions: its bottom type differs, so no
    /// shared type above it can either. `variant` changes its text, so that no cache of parsed
    /// schemas spares an agent the work.
    pub(super) fn incompatible(self, depth: usize, variant: usize) -> String {
        match self {
            Self::Avro => avro(depth, "boolean", variant),
            Self::Protobuf => protobuf(depth, "string", variant),
            Self::Json => json_schema(depth, json!({"type": "string", "description": format!("variant {variant}")})),
        }
    }

    /// A value of [`Language::version`]`(depth, version)`, unframed: for Avro and Protobuf the
    /// top type whose first field holds the next type and so on, `chain` levels down; for JSON
    /// Schema the number 1 (which every level applies twice to).
    pub(super) fn value(self, depth: usize, version: usize, chain: usize) -> Vec<u8> {
        match self {
            Self::Avro => avro_chain(depth, version, chain),
            Self::Protobuf => protobuf_chain(depth, chain),
            Self::Json => b"1".to_vec(),
        }
    }
}

/// Avro records `T0` to `T{depth}`: each but the last has fields `a` and `b` of type
/// `["null", T{i+1}]` (`a` defines the type, `b` names it), default null; the last has `n` of
/// type `leaf` and then `extra` fields `x0`, `x1`... (longs, default 0).
pub(super) fn avro(depth: usize, leaf: &str, extra: usize) -> String {
    let mut fields = vec![json!({"name": "n", "type": leaf})];
    fields.extend((0..extra).map(|k| json!({"name": format!("x{k}"), "type": "long", "default": 0})));
    let mut record = json!({"type": "record", "name": format!("T{depth}"), "fields": fields});
    for i in (0..depth).rev() {
        let next = format!("T{}", i + 1);
        record = json!({"type": "record", "name": format!("T{i}"), "fields": [
            {"name": "a", "type": ["null", record], "default": null},
            {"name": "b", "type": ["null", next], "default": null},
        ]});
    }
    record.to_string()
}

/// Protobuf messages `M0` to `M{depth}` of package `hostile.dag`: each but the last has fields
/// `a` and `b` of the next message's type; the last has `n` of type `leaf` and then `extra`
/// int64 fields. Messages are defined side by side, so no nesting limit applies to the depth.
pub(super) fn protobuf(depth: usize, leaf: &str, extra: usize) -> String {
    let mut text = String::from("syntax = \"proto3\";\npackage hostile.dag;\n");
    for i in 0..depth {
        let next = i + 1;
        text.push_str(&format!("message M{i} {{ M{next} a = 1; M{next} b = 2; }}\n"));
    }
    let extras: String = (0..extra).map(|k| format!(" int64 x{k} = {};", k + 2)).collect();
    text.push_str(&format!("message M{depth} {{ {leaf} n = 1;{extras} }}\n"));
    text
}

/// A JSON Schema of definitions `d0` to `d{depth}`: each but the last applies the next twice
/// through `allOf` (the two uses titled apart, so they are not one subschema), the last is
/// `leaf`, and the schema is `d0`.
pub(super) fn json_schema(depth: usize, leaf: Value) -> String {
    let mut definitions = serde_json::Map::new();
    for i in 0..depth {
        let next = format!("#/$defs/d{}", i + 1);
        let uses = json!([{"$ref": next, "title": "first use"}, {"$ref": next, "title": "second use"}]);
        definitions.insert(format!("d{i}"), json!({ "allOf": uses }));
    }
    definitions.insert(format!("d{depth}"), leaf);
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$ref": "#/$defs/d0",
        "$defs": definitions,
    });
    schema.to_string()
}

/// A record written with schema `id` of `language`: Confluent's framing, then `payload`. A
/// Protobuf payload names the schema's first message (message indexes `[0]`, one zero byte).
pub(super) fn framed(language: Language, id: i32, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&id.to_be_bytes());
    if language == Language::Protobuf {
        out.push(0);
    }
    out.extend_from_slice(payload);
    out
}

/// An Avro value of `avro(depth, "long", extra)`, in Avro's binary encoding (fields in order,
/// a union as its branch index, a long as a zig-zag varint): `T0.a` holds `T1`, whose `a`
/// holds `T2`, down to `T{chain}`; every other union is null, and `T{depth}`, if reached, has
/// `n` = `chain` and its extra fields 0.
pub(super) fn avro_chain(depth: usize, extra: usize, chain: usize) -> Vec<u8> {
    let chain = chain.min(depth);
    // Down each `a`: union branch 1, zig-zag encoded.
    let mut out = vec![2u8; chain];
    if chain == depth {
        push_varint(&mut out, (chain as u64) << 1);
        out.extend(std::iter::repeat_n(0u8, extra));
    } else {
        // `T{chain}`'s `a` and `b`: branch 0, null.
        out.extend([0, 0]);
    }
    // Back up: each record above has `b` null after its `a`.
    out.extend(std::iter::repeat_n(0u8, chain));
    out
}

/// A Protobuf value of `protobuf(depth, "int64", _)`'s `M0`: its field `a` holds `M1`, whose `a`
/// holds `M2`, down to `M{chain}`; `M{depth}`, if reached, has `n` = `chain`. Unset fields are
/// left out, as proto3 writes them.
pub(super) fn protobuf_chain(depth: usize, chain: usize) -> Vec<u8> {
    let chain = chain.min(depth);
    let mut inner = Vec::new();
    if chain == depth {
        // Field 1, a varint.
        inner.push(0x08);
        push_varint(&mut inner, chain as u64);
    }
    for _ in 0..chain {
        // Field 1, length-delimited.
        let mut outer = vec![0x0a];
        push_varint(&mut outer, inner.len() as u64);
        outer.extend_from_slice(&inner);
        inner = outer;
    }
    inner
}

/// A base-128 varint, low groups first, as Avro and Protobuf write them.
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
