//! How today's format stores subjects, versions and schemas. Each type is the in-memory type of the
//! same name in [`crate::state`], field for field in the order encoded; the conversions below name
//! every field, so a change to the in-memory type compiles only once they say how it is stored. A
//! change to a type here is a format change: a new format version, a mirror of the old layout and a
//! golden file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::state::{RegistryConfig, RegistryMode, SchemaContent};

/// [`crate::state::SchemaRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaRecord {
    pub(crate) content: SchemaContent,
    pub(crate) uses: u32,
}

impl From<crate::state::SchemaRecord> for SchemaRecord {
    fn from(schema_record: crate::state::SchemaRecord) -> Self {
        let crate::state::SchemaRecord { content, uses } = schema_record;
        Self { content, uses }
    }
}

impl From<SchemaRecord> for crate::state::SchemaRecord {
    fn from(schema_record: SchemaRecord) -> Self {
        let SchemaRecord { content, uses } = schema_record;
        Self { content, uses }
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
            config,
            mode,
            subject_configs,
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
            config,
            mode,
            subject_configs,
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
