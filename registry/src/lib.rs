//! The schema registry's logic, pure: parsing schemas, the canonical text their ids are given
//! for, and compatibility checks between versions. The agents' HTTP API and the metadata state
//! machine (which never parses a schema) are elsewhere.
//!
//! Avro only so far; Protobuf and JSON Schema are refused as not supported (issue 24).

pub mod avro;

/// Why a schema was refused (Confluent's 42201).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{0}")]
    Invalid(String),
}

/// One way a new schema fails to read, or be read by, an old one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub kind: DifferenceKind,
    /// JSON-pointer-like path in the schema, as Confluent reports it (`/fields/1/type`).
    pub path: String,
    pub description: String,
}

/// The kinds of difference, named as Confluent's registry names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DifferenceKind {
    TypeMismatch,
    NameMismatch,
    FixedSizeMismatch,
    MissingEnumSymbols,
    MissingUnionBranch,
    ReaderFieldMissingDefaultValue,
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
pub fn check_compatibility(new: &avro::AvroSchema, earlier: &[(i32, &avro::AvroSchema)], rule: Rule) -> Vec<String> {
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
                    format!(
                        "{{errorType:'{}', description:'{}', additionalInfo:'{}'}}",
                        d.kind.name(),
                        d.description,
                        d.path
                    )
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
