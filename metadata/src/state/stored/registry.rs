//! How today's format stores the schema registries: subjects, versions, schemas and settings. Each
//! type is the in-memory type of the same name in [`crate::state`], field for field in the order
//! encoded; commands carry these layouts too. The conversions below name every field, so a change
//! to the in-memory type compiles only once they say how it is stored. A change to a type here is a
//! format change: a new format version, a mirror of the old layout and a golden file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::stored_layout;

use crate::state::{Compatibility, RegistryMode, SchemaType};

/// [`crate::state::RegistryConfig`] as it is stored.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryConfig {
    pub compatibility: Option<Compatibility>,
    pub normalize: Option<bool>,
}

stored_layout!(RegistryConfig <=> crate::state::RegistryConfig { compatibility, normalize });

/// [`crate::state::SchemaContent`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SchemaContent {
    pub schema_type: SchemaType,
    pub text: String,
    pub references: Vec<SchemaReference>,
}

stored_layout!(SchemaContent <=> crate::state::SchemaContent { schema_type, text, references });

/// [`crate::state::SchemaRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SchemaRecord {
    pub(crate) content: SchemaContent,
    pub(crate) uses: u32,
}

stored_layout!(SchemaRecord <=> crate::state::SchemaRecord { content, uses });

/// [`crate::state::SchemaReference`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

stored_layout!(SchemaReference <=> crate::state::SchemaReference { name, subject, version });

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

stored_layout!(SchemaRegistry <=> crate::state::SchemaRegistry { last_id, bytes, schemas, by_digest, subjects, referenced_by, config, mode, subject_configs, subject_modes, config_revision });

/// [`crate::state::SubjectRecord`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubjectRecord {
    pub(crate) versions: BTreeMap<i32, SubjectVersion>,
    pub(crate) revision: u64,
}

stored_layout!(SubjectRecord <=> crate::state::SubjectRecord { versions, revision });

/// [`crate::state::SubjectVersion`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SubjectVersion {
    pub(crate) id: i32,
    pub(crate) deleted: bool,
    pub(crate) registered_ms: i64,
}

stored_layout!(SubjectVersion <=> crate::state::SubjectVersion { id, deleted, registered_ms });
