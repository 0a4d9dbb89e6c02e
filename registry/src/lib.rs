//! The schema registry's logic, pure: parsing schemas, the canonical text their ids are given
//! for, and compatibility checks between versions. The agents' HTTP API and the metadata state
//! machine (which never parses a schema) are elsewhere.
//!
//! Avro, JSON Schema and Protobuf. What a schema or a record may make the registry do is
//! bounded in work as well as size ([`limits`]).

pub mod avro;
pub mod json;
pub mod limits;
pub mod protobuf;

/// The schema languages this crate parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaFormat {
    Avro,
    Json,
    Protobuf,
}

/// A parsed schema of any supported language.
#[derive(Debug)]
pub enum ParsedSchema {
    Avro(avro::AvroSchema),
    Json(json::JsonSchema),
    Protobuf(Box<protobuf::ProtobufSchema>),
}

impl ParsedSchema {
    /// Parses `text` with its references, each (the name it is referred to by, its text).
    pub fn parse(format: SchemaFormat, text: &str, references: &[(&str, &str)]) -> Result<Self, SchemaError> {
        match format {
            SchemaFormat::Avro => {
                let texts: Vec<&str> = references.iter().map(|(_, text)| *text).collect();
                avro::AvroSchema::parse(text, &texts).map(Self::Avro)
            }
            SchemaFormat::Json => json::JsonSchema::parse(text, references).map(Self::Json),
            SchemaFormat::Protobuf => {
                protobuf::ProtobufSchema::parse(text, references).map(|s| Self::Protobuf(Box::new(s)))
            }
        }
    }

    /// Confluent's `normalize=true`: `text` rewritten so that schemas that differ only in ways
    /// that do not change their meaning get one text, so one id. Avro: aliases sorted and
    /// deduplicated (properties are always written sorted). JSON Schema: nothing beyond the
    /// canonical text, which already sorts keys. Protobuf: imports sorted and deduplicated,
    /// fields by number, oneofs by their first field number, enum values by number, reserved
    /// ranges and names sorted; messages and enums keep their order, which message indexes
    /// depend on. A Protobuf file the printer cannot write (custom options) is left as it is.
    pub fn normalized_text(
        format: SchemaFormat,
        text: &str,
        references: &[(&str, &str)],
    ) -> Result<String, SchemaError> {
        match format {
            SchemaFormat::Avro => avro::AvroSchema::normalized_text(text),
            SchemaFormat::Json => Ok(text.to_owned()),
            SchemaFormat::Protobuf => protobuf::ProtobufSchema::normalized_text(text, references),
        }
    }

    /// Memory the parsed schema holds beyond its text, where it can be much more than the
    /// text: a JSON Schema's compiled patterns. (Avro's and Protobuf's parsed forms are a
    /// small multiple of their text, which the caller counts.)
    pub fn compiled_bytes(&self) -> usize {
        match self {
            Self::Json(s) => s.pattern_bytes(),
            Self::Avro(_) | Self::Protobuf(_) => 0,
        }
    }

    /// The text the schema's id is given for.
    pub fn canonical(&self) -> &str {
        match self {
            Self::Avro(s) => s.canonical(),
            Self::Json(s) => s.canonical(),
            Self::Protobuf(s) => s.canonical(),
        }
    }

    /// The name the record name strategies use for a record with this payload (after the
    /// 5-byte framing): an Avro named type's full name, a JSON Schema's `title`, the full name
    /// of the Protobuf message the payload's message indexes name.
    pub fn record_name(&self, payload: &[u8]) -> Option<String> {
        match self {
            Self::Avro(s) => s.full_name(),
            Self::Json(s) => s.title(),
            Self::Protobuf(s) => s.record_name(payload),
        }
    }

    /// Checks a record's payload (after the registry's 5-byte framing) against the schema.
    pub fn check_payload(&self, payload: &[u8]) -> Result<(), String> {
        match self {
            Self::Avro(s) => s.check_datum(payload),
            Self::Json(s) => s.check_instance(payload),
            Self::Protobuf(s) => s.check_payload(payload),
        }
    }

    /// Whether this is a Protobuf schema defining message `name` (a full name).
    pub fn has_message(&self, name: &str) -> bool {
        matches!(self, Self::Protobuf(s) if s.has_message(name))
    }

    /// A JSON value as the payload a Confluent serializer writes after the 5-byte framing:
    /// an Avro datum, a JSON document the schema accepts, or message indexes and a Protobuf
    /// message (`message`, a full name, or else the schema's first; only Protobuf schemas hold
    /// several). Errors name where in the value it does not fit.
    pub fn encode_json(&self, value: &serde_json::Value, message: Option<&str>) -> Result<Vec<u8>, String> {
        if message.is_some() && !matches!(self, Self::Protobuf(_)) {
            return Err("a message name is for PROTOBUF schemas only".into());
        }
        match self {
            Self::Avro(s) => s.encode_json(value),
            Self::Json(s) => {
                s.check_value(value)?;
                serde_json::to_vec(value).map_err(|e| e.to_string())
            }
            Self::Protobuf(s) => s.encode_json(value, message),
        }
    }

    /// A payload (after the framing) as JSON: Avro's JSON encoding, the JSON document itself, or
    /// Protobuf's JSON mapping.
    pub fn decode_json(&self, payload: &[u8]) -> Result<serde_json::Value, String> {
        match self {
            Self::Avro(s) => s.decode_json(payload),
            Self::Json(_) => serde_json::from_slice(payload).map_err(|e| format!("not JSON: {e}")),
            Self::Protobuf(s) => s.decode_json(payload),
        }
    }

    /// Whether this schema reads everything `writer` wrote: every difference found.
    pub fn can_read(&self, writer: &ParsedSchema) -> Vec<Difference> {
        match (self, writer) {
            (Self::Avro(r), Self::Avro(w)) => r.can_read(w),
            (Self::Json(r), Self::Json(w)) => r.can_read(w),
            (Self::Protobuf(r), Self::Protobuf(w)) => r.can_read(w),
            _ => vec![Difference {
                kind: "TYPE_MISMATCH",
                path: "/".into(),
                description: "Incompatible because of different schema type".into(),
            }],
        }
    }
}

/// Why a schema was refused (Confluent's 42201).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{0}")]
    Invalid(String),
}

/// One way a new schema fails to read, or be read by, an old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// Confluent's name for the kind of difference (`TYPE_MISMATCH`, `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`).
    pub kind: &'static str,
    /// JSON-pointer-like path in the schema, as Confluent reports it (`/fields/1/type`).
    pub path: String,
    pub description: String,
}

/// The kinds of difference between Avro schemas, named as Confluent's registry names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DifferenceKind {
    TypeMismatch,
    NameMismatch,
    FixedSizeMismatch,
    MissingEnumSymbols,
    MissingUnionBranch,
    ReaderFieldMissingDefaultValue,
    /// The check took more than [`avro::COMPARE_STEPS_MAX`] steps (as JSON Schema's does past
    /// its own budget): reported alone, as incompatible.
    SchemaTooComplex,
}

impl DifferenceKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::TypeMismatch => "TYPE_MISMATCH",
            Self::NameMismatch => "NAME_MISMATCH",
            Self::FixedSizeMismatch => "FIXED_SIZE_MISMATCH",
            Self::MissingEnumSymbols => "MISSING_ENUM_SYMBOLS",
            Self::MissingUnionBranch => "MISSING_UNION_BRANCH",
            Self::ReaderFieldMissingDefaultValue => "READER_FIELD_MISSING_DEFAULT_VALUE",
            Self::SchemaTooComplex => "SCHEMA_TOO_COMPLEX",
        }
    }
}

/// What a compatibility level asks of a new schema against earlier versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rule {
    /// The new schema reads data written with the earlier ones.
    pub backward: bool,
    /// The earlier ones read data written with the new schema.
    pub forward: bool,
    /// Against every earlier live version, not only the latest.
    pub transitive: bool,
}

/// Checks `new` against `earlier` (live versions, newest first, each with its version number)
/// under `rule`: the messages of every difference found, empty when compatible. A transitive
/// check stops at the first version it fails against.
pub fn check_compatibility(new: &ParsedSchema, earlier: &[(i32, &ParsedSchema)], rule: Rule) -> Vec<String> {
    let against = if rule.transitive { earlier } else { &earlier[..earlier.len().min(1)] };
    for (version, old) in against {
        let mut found = Vec::new();
        if rule.backward {
            found.extend(new.can_read(old));
        }
        if rule.forward {
            found.extend(old.can_read(new));
        }
        if !found.is_empty() {
            let mut messages: Vec<String> = found
                .iter()
                .map(|d| {
                    format!("{{errorType:'{}', description:'{}', additionalInfo:'{}'}}", d.kind, d.description, d.path)
                })
                .collect();
            messages.push(format!("{{oldSchemaVersion: {version}}}"));
            messages.push(format!("{{oldSchema: '{}'}}", old.canonical()));
            return messages;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests;
