//! How today's format stores the schema registries: subjects, versions, schemas and settings. Each
//! type is the in-memory type of the same name in [`crate::state`], field for field in the order
//! encoded; commands carry these layouts too. The conversions below name every field, so a change
//! to the in-memory type compiles only once they say how it is stored. A change to a type here is a
//! format change: a new format version, a mirror of the old layout and a golden file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::state::{Compatibility, RegistryMode, SchemaType};

/// [`crate::state::RegistryConfig`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryConfig {
    pub compatibility: Option<Compatibility>,
    pub normalize: Option<bool>,
}

impl From<crate::state::RegistryConfig> for RegistryConfig {
    fn from(registry_config: crate::state::RegistryConfig) -> Self {
        let crate::state::RegistryConfig { compatibility, normalize } = registry_config;
        Self { compatibility, normalize }
    }
}

impl From<RegistryConfig> for crate::state::RegistryConfig {
    fn from(registry_config: RegistryConfig) -> Self {
        let RegistryConfig { compatibility, normalize } = registry_config;
        Self { compatibility, normalize }
    }
}

/// [`crate::state::SchemaContent`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SchemaContent {
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<SchemaReference>,
}

impl From<crate::state::SchemaContent> for SchemaContent {
    fn from(schema_content: crate::state::SchemaContent) -> Self {
        let crate::state::SchemaContent { schema_type, text, references } = schema_content;
        Self { schema_type, text, references: references.into_iter().map(Into::into).collect() }
    }
}

impl From<SchemaContent> for crate::state::SchemaContent {
    fn from(schema_content: SchemaContent) -> Self {
        let SchemaContent { schema_type, text, references } = schema_content;
        Self { schema_type, text, references: references.into_iter().map(Into::into).collect() }
    }
}

/// [`crate::state::SchemaRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaRecord {
    pub(crate) content: SchemaContent,
    pub(crate) uses: u32,
}

impl From<crate::state::SchemaRecord> for SchemaRecord {
    fn from(schema_record: crate::state::SchemaRecord) -> Self {
        let crate::state::SchemaRecord { content, uses } = schema_record;
        Self { content: content.into(), uses }
    }
}

impl From<SchemaRecord> for crate::state::SchemaRecord {
    fn from(schema_record: SchemaRecord) -> Self {
        let SchemaRecord { content, uses } = schema_record;
        Self { content: content.into(), uses }
    }
}

/// [`crate::state::SchemaReference`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

impl From<crate::state::SchemaReference> for SchemaReference {
    fn from(schema_reference: crate::state::SchemaReference) -> Self {
        let crate::state::SchemaReference { name, subject, version } = schema_reference;
        Self { name, subject, version }
    }
}

impl From<SchemaReference> for crate::state::SchemaReference {
    fn from(schema_reference: SchemaReference) -> Self {
        let SchemaReference { name, subject, version } = schema_reference;
        Self { name, subject, version }
    }
}

/// [`crate::state::SchemaRegistry`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaRegistry {
    pub(crate) last_id: i32,
    pub(crate) bytes: u64,
    pub(crate) schemas: BTreeMap<i32, SchemaRecord>,
    pub(crate) by_digest: BTreeMap<u32, Vec<i32>>,
    pub(crate) subjects: BTreeMap<String, SubjectRecord>,
    pub(crate) referenced_by: BTreeMap<(String, i32), BTreeSet<i32>>,
    pub(crate) config: RegistryConfig,
    pub(crate) mode: Option<RegistryMode>,
    pub(crate) subject_configs: BTreeMap<String, RegistryConfig>,
    pub(crate) subject_modes: BTreeMap<String, RegistryMode>,
    pub(crate) config_revision: u64,
}

impl From<crate::state::SchemaRegistry> for SchemaRegistry {
    fn from(schema_registry: crate::state::SchemaRegistry) -> Self {
        let crate::state::SchemaRegistry {
            last_id,
            bytes,
            schemas,
            by_digest,
            subjects,
            referenced_by,
            config,
            mode,
            subject_configs,
            subject_modes,
            config_revision,
        } = schema_registry;
        Self {
            last_id,
            bytes,
            schemas: schemas.into_iter().map(|(key, value)| (key, value.into())).collect(),
            by_digest,
            subjects: subjects.into_iter().map(|(key, value)| (key, value.into())).collect(),
            referenced_by,
            config: config.into(),
            mode,
            subject_configs: subject_configs.into_iter().map(|(key, value)| (key, value.into())).collect(),
            subject_modes,
            config_revision,
        }
    }
}

impl From<SchemaRegistry> for crate::state::SchemaRegistry {
    fn from(schema_registry: SchemaRegistry) -> Self {
        let SchemaRegistry {
            last_id,
            bytes,
            schemas,
            by_digest,
            subjects,
            referenced_by,
            config,
            mode,
            subject_configs,
            subject_modes,
            config_revision,
        } = schema_registry;
        Self {
            last_id,
            bytes,
            schemas: schemas.into_iter().map(|(key, value)| (key, value.into())).collect(),
            by_digest,
            subjects: subjects.into_iter().map(|(key, value)| (key, value.into())).collect(),
            referenced_by,
            config: config.into(),
            mode,
            subject_configs: subject_configs.into_iter().map(|(key, value)| (key, value.into())).collect(),
            subject_modes,
            config_revision,
        }
    }
}

/// [`crate::state::SubjectRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubjectRecord {
    pub(crate) versions: BTreeMap<i32, SubjectVersion>,
    pub(crate) revision: u64,
}

impl From<crate::state::SubjectRecord> for SubjectRecord {
    fn from(subject_record: crate::state::SubjectRecord) -> Self {
        let crate::state::SubjectRecord { versions, revision } = subject_record;
        Self { versions: versions.into_iter().map(|(key, value)| (key, value.into())).collect(), revision }
    }
}

impl From<SubjectRecord> for crate::state::SubjectRecord {
    fn from(subject_record: SubjectRecord) -> Self {
        let SubjectRecord { versions, revision } = subject_record;
        Self { versions: versions.into_iter().map(|(key, value)| (key, value.into())).collect(), revision }
    }
}

/// [`crate::state::SubjectVersion`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubjectVersion {
    pub(crate) id: i32,
    pub(crate) deleted: bool,
    pub(crate) registered_ms: i64,
}

impl From<crate::state::SubjectVersion> for SubjectVersion {
    fn from(subject_version: crate::state::SubjectVersion) -> Self {
        let crate::state::SubjectVersion { id, deleted, registered_ms } = subject_version;
        Self { id, deleted, registered_ms }
    }
}

impl From<SubjectVersion> for crate::state::SubjectVersion {
    fn from(subject_version: SubjectVersion) -> Self {
        let SubjectVersion { id, deleted, registered_ms } = subject_version;
        Self { id, deleted, registered_ms }
    }
}
