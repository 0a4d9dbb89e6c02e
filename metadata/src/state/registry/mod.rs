//! The schema registry's state (Confluent Schema Registry's model): per namespace, schemas by
//! id and subjects with their versions, compatibility configs and modes.
//!
//! The state machine never parses a schema. The proposing agent parses and normalizes it and
//! checks compatibility against its mirror as of a [`RegistryRevision`]; here that revision is
//! checked to be still current (else [`RegistryError::Stale`]: the agent catches up and checks
//! again), ids and versions are assigned, and references and deletes are kept consistent.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{State, TenantTable};
use crate::command::{CommandError, Outcome};
use crate::limits::{
    REGISTRY_BYTES_MAX, REGISTRY_SCHEMA_COUNT_MAX, REGISTRY_SUBJECT_COUNT_MAX, SCHEMA_REFERENCES_MAX,
    SCHEMA_TEXT_BYTES_MAX, SUBJECT_NAME_BYTES_MAX, SUBJECT_VERSIONS_MAX,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    /// The name the registry's REST API uses (`schemaType`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Avro => "AVRO",
            Self::Protobuf => "PROTOBUF",
            Self::Json => "JSON",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "AVRO" => Some(Self::Avro),
            "PROTOBUF" => Some(Self::Protobuf),
            "JSON" => Some(Self::Json),
            _ => None,
        }
    }
}

/// A schema's use of a named type from another subject's version.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SchemaReference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// What identifies a schema id: registering equal content again gets the same id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaContent {
    pub schema_type: SchemaType,
    /// As the agent canonicalized it (normalized too when asked).
    pub text: String,
    pub references: Vec<SchemaReference>,
}

impl SchemaContent {
    fn stored_bytes(&self) -> u64 {
        let refs: usize = self.references.iter().map(|r| r.name.len() + r.subject.len() + 4).sum();
        (self.text.len() + refs) as u64
    }

    /// A content hash for the dedupe index (equal content is compared on a hit, so collisions
    /// only cost time).
    /// Over the stored layout, since `by_digest` is stored: a layout change is a format change.
    fn digest(&self) -> u32 {
        let stored = crate::state::stored::SchemaContent::from(self.clone());
        postcard::to_stdvec(&stored).map_or(0, |bytes| crc32c::crc32c(&bytes))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaRecord {
    pub content: SchemaContent,
    /// Subject versions naming this id, soft-deleted ones included; at 0 the id is gone.
    pub uses: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubjectVersion {
    pub id: i32,
    pub deleted: bool,
    pub registered_ms: i64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectRecord {
    pub versions: BTreeMap<i32, SubjectVersion>,
    /// Moves with every change to the versions: a compatibility check made at one revision is
    /// stale at another.
    pub revision: u64,
}

impl SubjectRecord {
    /// Live (not soft-deleted) versions, oldest first.
    pub fn live_versions(&self) -> impl DoubleEndedIterator<Item = (i32, &SubjectVersion)> {
        self.versions.iter().filter(|(_, v)| !v.deleted).map(|(n, v)| (*n, v))
    }

    pub fn latest_live(&self) -> Option<(i32, &SubjectVersion)> {
        self.live_versions().next_back()
    }
}

/// Compatibility levels, as the registry names them (`compatibilityLevel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Compatibility {
    None,
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl Compatibility {
    pub const ALL: [Self; 7] = [
        Self::None,
        Self::Backward,
        Self::BackwardTransitive,
        Self::Forward,
        Self::ForwardTransitive,
        Self::Full,
        Self::FullTransitive,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "NONE",
            Self::Backward => "BACKWARD",
            Self::BackwardTransitive => "BACKWARD_TRANSITIVE",
            Self::Forward => "FORWARD",
            Self::ForwardTransitive => "FORWARD_TRANSITIVE",
            Self::Full => "FULL",
            Self::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name().eq_ignore_ascii_case(name))
    }
}

/// Registry modes: READONLY refuses changes, IMPORT takes schemas with their ids given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistryMode {
    ReadWrite,
    ReadOnly,
    Import,
}

impl RegistryMode {
    pub fn name(self) -> &'static str {
        match self {
            Self::ReadWrite => "READWRITE",
            Self::ReadOnly => "READONLY",
            Self::Import => "IMPORT",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::ReadWrite, Self::ReadOnly, Self::Import].into_iter().find(|m| m.name().eq_ignore_ascii_case(name))
    }
}

/// A global or subject config; unset fields fall back (subject → global → default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegistryConfig {
    pub compatibility: Option<Compatibility>,
    pub normalize: Option<bool>,
}

/// The registry's default compatibility, as Confluent's.
pub const DEFAULT_COMPATIBILITY: Compatibility = Compatibility::Backward;

/// One namespace's registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchemaRegistry {
    /// The id the last new schema got; ids are never reused in a namespace.
    pub last_id: i32,
    /// Bytes of the schemas' content together.
    pub bytes: u64,
    pub schemas: BTreeMap<i32, SchemaRecord>,
    pub by_digest: BTreeMap<u32, Vec<i32>>,
    pub subjects: BTreeMap<String, SubjectRecord>,
    /// Schema ids whose references name a subject version.
    pub referenced_by: BTreeMap<(String, i32), BTreeSet<i32>>,
    pub config: RegistryConfig,
    pub mode: Option<RegistryMode>,
    pub subject_configs: BTreeMap<String, RegistryConfig>,
    pub subject_modes: BTreeMap<String, RegistryMode>,
    /// Moves with every config or mode change.
    pub config_revision: u64,
}

/// What an agent's compatibility check was made against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryRevision {
    pub subject: u64,
    pub config: u64,
}

/// A schema to register under a subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaRegistration {
    /// `""` in a cluster without tenants, else the tenant's namespace key.
    pub namespace: String,
    pub subject: String,
    pub content: crate::state::stored::SchemaContent,
    /// In IMPORT mode: the id (and version, if given) the schema must get.
    pub import: Option<(i32, Option<i32>)>,
    pub checked_at: RegistryRevision,
    pub now_ms: i64,
}

/// Why the registry refused a change; each maps to one of Confluent's error codes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum RegistryError {
    #[error("Subject '{0}' not found.")]
    SubjectNotFound(String),
    #[error("Version {0} not found.")]
    VersionNotFound(i32),
    #[error("Schema {0} not found")]
    SchemaNotFound(i32),
    #[error("Subject '{0}' was soft deleted. Set permanent=true to delete permanently")]
    SubjectSoftDeleted(String),
    #[error("Subject '{0}' was not deleted first before being permanently deleted")]
    SubjectNotSoftDeleted(String),
    #[error("Subject '{subject}' Version {version} was soft deleted. Set permanent=true to delete permanently")]
    VersionSoftDeleted { subject: String, version: i32 },
    #[error("Subject '{subject}' Version {version} was not deleted first before being permanently deleted")]
    VersionNotSoftDeleted { subject: String, version: i32 },
    #[error("{0}")]
    InvalidSchema(String),
    #[error("{0}")]
    InvalidSubject(String),
    #[error("One or more references exist to the schema {{subject={subject}, version={version}}}")]
    ReferenceExists { subject: String, version: i32 },
    #[error("{0}")]
    OperationNotPermitted(String),
    #[error("{0}")]
    IdConflict(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("Invalid mode: {0}")]
    InvalidMode(String),
    /// The subject or config moved since the proposer checked compatibility.
    #[error("the registry changed since the compatibility check; check again")]
    Stale,
}

fn refused(e: RegistryError) -> CommandError {
    CommandError::Registry(e)
}

/// Refuses subject names Confluent's registry refuses (42208), and contexts (`:.ctx:name`),
/// which Floe does not serve.
pub fn validate_subject(subject: &str) -> Result<(), RegistryError> {
    if subject.is_empty() || subject.len() > SUBJECT_NAME_BYTES_MAX {
        return Err(RegistryError::InvalidSubject(format!("Subject name must be 1 to {SUBJECT_NAME_BYTES_MAX} bytes")));
    }
    if subject.chars().any(char::is_control) {
        return Err(RegistryError::InvalidSubject(format!("Invalid subject {subject:?}: control characters")));
    }
    if subject.starts_with(":.") || subject == "__GLOBAL" || subject == "__EMPTY" {
        return Err(RegistryError::InvalidSubject(format!(
            "Invalid subject {subject:?}: contexts and reserved names are not supported"
        )));
    }
    Ok(())
}

impl SchemaRegistry {
    /// The id equal content has in this registry.
    pub fn id_of(&self, content: &SchemaContent) -> Option<i32> {
        let ids = self.by_digest.get(&content.digest())?;
        ids.iter().copied().find(|id| self.schemas.get(id).is_some_and(|s| &s.content == content))
    }

    /// The version of `subject` holding `id`, deleted ones only when asked.
    pub fn version_of(&self, subject: &str, id: i32, deleted: bool) -> Option<i32> {
        let record = self.subjects.get(subject)?;
        record.versions.iter().rev().find(|(_, v)| v.id == id && (deleted || !v.deleted)).map(|(n, _)| *n)
    }

    /// The compatibility in force for `subject` (`None`: the global one).
    pub fn compatibility(&self, subject: Option<&str>) -> Compatibility {
        subject
            .and_then(|s| self.subject_configs.get(s))
            .and_then(|c| c.compatibility)
            .or(self.config.compatibility)
            .unwrap_or(DEFAULT_COMPATIBILITY)
    }

    /// Whether schemas registered under `subject` are normalized by default.
    pub fn normalize(&self, subject: Option<&str>) -> bool {
        subject.and_then(|s| self.subject_configs.get(s)).and_then(|c| c.normalize).or(self.config.normalize)
            == Some(true)
    }

    pub fn mode(&self, subject: Option<&str>) -> RegistryMode {
        subject.and_then(|s| self.subject_modes.get(s)).copied().or(self.mode).unwrap_or(RegistryMode::ReadWrite)
    }

    /// What a compatibility check of `subject` depends on, now.
    pub fn revision(&self, subject: &str) -> RegistryRevision {
        RegistryRevision { subject: self.subjects.get(subject).map_or(0, |s| s.revision), config: self.config_revision }
    }

    fn is_empty(&self) -> bool {
        self.schemas.is_empty()
            && self.subjects.is_empty()
            && self.subject_configs.is_empty()
            && self.subject_modes.is_empty()
            && self.config == RegistryConfig::default()
            && self.mode.is_none()
            && self.last_id == 0
    }

    fn add_schema(&mut self, id: i32, content: SchemaContent) {
        self.bytes += content.stored_bytes();
        for r in &content.references {
            self.referenced_by.entry((r.subject.clone(), r.version)).or_default().insert(id);
        }
        self.by_digest.entry(content.digest()).or_default().push(id);
        self.schemas.insert(id, SchemaRecord { content, uses: 0 });
    }

    /// One fewer subject version names `id`; the last one takes the schema with it.
    fn release(&mut self, id: i32) {
        let Some(record) = self.schemas.get_mut(&id) else { return };
        record.uses = record.uses.saturating_sub(1);
        if record.uses > 0 {
            return;
        }
        let Some(record) = self.schemas.remove(&id) else { return };
        self.bytes = self.bytes.saturating_sub(record.content.stored_bytes());
        let digest = record.content.digest();
        if let Some(ids) = self.by_digest.get_mut(&digest) {
            ids.retain(|i| *i != id);
            if ids.is_empty() {
                self.by_digest.remove(&digest);
            }
        }
        for r in &record.content.references {
            let key = (r.subject.clone(), r.version);
            if let Some(ids) = self.referenced_by.get_mut(&key) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.referenced_by.remove(&key);
                }
            }
        }
    }

    /// Schema ids referring to `subject` `version`; with `live_only`, only those some live
    /// version still names.
    pub fn referrers(&self, subject: &str, version: i32, live_only: bool) -> Vec<i32> {
        let Some(ids) = self.referenced_by.get(&(subject.to_owned(), version)) else { return Vec::new() };
        ids.iter()
            .copied()
            .filter(|id| {
                !live_only || self.subjects.values().any(|s| s.versions.values().any(|v| v.id == *id && !v.deleted))
            })
            .collect()
    }
}

impl State {
    /// How many entries of `table` tenant `name` may hold.
    fn table_share(&self, name: &str, table: TenantTable) -> u64 {
        self.tenants.get(name).map_or(u64::MAX, |t| t.quotas.table_limit(table))
    }

    /// The registry of namespace `namespace` (`""`: the cluster's without tenants).
    pub fn schema_registry(&self, namespace: &str) -> Option<&SchemaRegistry> {
        self.registries.get(namespace)
    }

    /// A registry change may name only a live tenant's namespace (or none): a late request from
    /// a deleted tenant's session lands nowhere.
    fn registry_mut(&mut self, namespace: &str) -> Result<&mut SchemaRegistry, CommandError> {
        if !namespace.is_empty() && self.tenant_of_key(namespace).is_none() {
            return Err(refused(RegistryError::InvalidSubject(format!(
                "no tenant has namespace {namespace:?} (was it deleted?)"
            ))));
        }
        Ok(self.registries.entry(namespace.to_owned()).or_default())
    }

    /// Drops a namespace's registry if nothing is left in it, so reads and writes of nothing
    /// leave no trace in the state.
    fn tidy_registry(&mut self, namespace: &str) {
        if self.registries.get(namespace).is_some_and(SchemaRegistry::is_empty) {
            self.registries.remove(namespace);
        }
    }

    pub(super) fn register_schema(&mut self, r: SchemaRegistration) -> Result<Outcome, CommandError> {
        let outcome = self.register_schema_in(&r);
        self.tidy_registry(&r.namespace);
        outcome
    }

    fn register_schema_in(&mut self, r: &SchemaRegistration) -> Result<Outcome, CommandError> {
        validate_subject(&r.subject).map_err(refused)?;
        let content = &SchemaContent::from(r.content.clone());
        if content.text.len() > SCHEMA_TEXT_BYTES_MAX {
            return Err(refused(RegistryError::TooLarge(format!(
                "Schema of {} bytes is over the limit of {SCHEMA_TEXT_BYTES_MAX}",
                content.text.len()
            ))));
        }
        if content.references.len() > SCHEMA_REFERENCES_MAX {
            return Err(refused(RegistryError::InvalidSchema(format!(
                "A schema names at most {SCHEMA_REFERENCES_MAX} references"
            ))));
        }
        let (subject_total, schema_total, bytes_total) = self
            .registries
            .values()
            .fold((0, 0, 0), |(s, n, b), r| (s + r.subjects.len(), n + r.schemas.len(), b + r.bytes));
        let tenant = crate::namespace::parse_key(&r.namespace)
            .filter(|_| !r.namespace.is_empty())
            .map(|(name, _)| name.to_owned());
        let (subject_share, schema_share) = match &tenant {
            Some(t) => (self.table_share(t, TenantTable::Subjects), self.table_share(t, TenantTable::Schemas)),
            None => (u64::MAX, u64::MAX),
        };
        let registry = self.registry_mut(&r.namespace)?;
        let mode = registry.mode(Some(&r.subject));
        match (mode, r.import) {
            (RegistryMode::ReadOnly, _) => {
                return Err(refused(RegistryError::OperationNotPermitted(format!(
                    "Subject {} is in read-only mode",
                    r.subject
                ))));
            }
            (RegistryMode::ReadWrite, Some(_)) => {
                return Err(refused(RegistryError::OperationNotPermitted(format!(
                    "Subject {} is not in import mode",
                    r.subject
                ))));
            }
            (RegistryMode::Import, None) => {
                return Err(refused(RegistryError::OperationNotPermitted(format!(
                    "Subject {} is not in read-write mode",
                    r.subject
                ))));
            }
            _ => {}
        }
        // A retry, or the same schema again: the version that holds it.
        let existing = registry.id_of(content);
        if let Some(id) = existing
            && let Some(version) = registry.version_of(&r.subject, id, false)
            && r.import.is_none_or(|(want, v)| want == id && v.is_none_or(|v| v == version))
        {
            return Ok(Outcome::SchemaRegistered { id, version });
        }
        if registry.revision(&r.subject) != r.checked_at {
            return Err(refused(RegistryError::Stale));
        }
        for reference in &content.references {
            let found = registry
                .subjects
                .get(&reference.subject)
                .and_then(|s| s.versions.get(&reference.version))
                .is_some_and(|v| !v.deleted);
            if !found {
                return Err(refused(RegistryError::InvalidSchema(format!(
                    "Invalid schema: reference {:?} to subject {:?} version {} not found",
                    reference.name, reference.subject, reference.version
                ))));
            }
        }
        let subject = registry.subjects.get(&r.subject);
        let next_version = subject.and_then(|s| s.versions.keys().next_back()).map_or(1, |v| v + 1);
        let version = match r.import {
            Some((_, Some(v))) if v < 1 => {
                return Err(refused(RegistryError::InvalidSchema(format!("Invalid version {v}"))));
            }
            Some((_, Some(v))) if subject.is_some_and(|s| s.versions.contains_key(&v)) => {
                return Err(refused(RegistryError::IdConflict(format!(
                    "Version {v} of subject {} already exists",
                    r.subject
                ))));
            }
            Some((_, Some(v))) => v,
            _ => next_version,
        };
        if subject.is_some_and(|s| s.versions.len() >= SUBJECT_VERSIONS_MAX) {
            return Err(refused(RegistryError::OperationNotPermitted(format!(
                "Subject {} has {SUBJECT_VERSIONS_MAX} versions, the most it may keep; delete some permanently",
                r.subject
            ))));
        }
        if subject.is_none()
            && (subject_total >= REGISTRY_SUBJECT_COUNT_MAX || registry.subjects.len() as u64 >= subject_share)
        {
            return Err(refused(RegistryError::OperationNotPermitted(format!(
                "at most {} subjects (cluster {REGISTRY_SUBJECT_COUNT_MAX})",
                subject_share.min(REGISTRY_SUBJECT_COUNT_MAX as u64)
            ))));
        }
        let id = match (existing, r.import) {
            (Some(id), None) => id,
            (Some(id), Some((want, _))) if id == want => id,
            (_, Some((want, _))) => {
                if want < 1 {
                    return Err(refused(RegistryError::InvalidSchema(format!("Invalid id {want}"))));
                }
                if registry.schemas.contains_key(&want) {
                    return Err(refused(RegistryError::IdConflict(format!(
                        "Overwrite new schema with id {want} is not permitted: that id holds another schema"
                    ))));
                }
                want
            }
            (None, None) => {
                if registry.last_id == i32::MAX {
                    return Err(refused(RegistryError::OperationNotPermitted("no schema ids are left".into())));
                }
                registry.last_id + 1
            }
        };
        if !registry.schemas.contains_key(&id) {
            let bytes_share = tenant.as_ref().map_or(REGISTRY_BYTES_MAX, |_| REGISTRY_BYTES_MAX / 10);
            if schema_total >= REGISTRY_SCHEMA_COUNT_MAX
                || registry.schemas.len() as u64 >= schema_share
                || bytes_total + content.stored_bytes() > REGISTRY_BYTES_MAX
                || registry.bytes + content.stored_bytes() > bytes_share
            {
                return Err(refused(RegistryError::OperationNotPermitted(format!(
                    "at most {} schemas and {bytes_share} bytes of schemas",
                    schema_share.min(REGISTRY_SCHEMA_COUNT_MAX as u64)
                ))));
            }
            registry.last_id = registry.last_id.max(id);
            registry.add_schema(id, content.clone());
        }
        if let Some(schema) = registry.schemas.get_mut(&id) {
            schema.uses += 1;
        }
        let subject = registry.subjects.entry(r.subject.clone()).or_default();
        subject.versions.insert(version, SubjectVersion { id, deleted: false, registered_ms: r.now_ms });
        subject.revision += 1;
        Ok(Outcome::SchemaRegistered { id, version })
    }

    /// Soft or permanent delete of one version (`Some`) or all of a subject's (`None`).
    pub(super) fn delete_schema_versions(
        &mut self,
        namespace: &str,
        subject: &str,
        version: Option<i32>,
        permanent: bool,
    ) -> Result<Outcome, CommandError> {
        let outcome = self.delete_schema_versions_in(namespace, subject, version, permanent);
        self.tidy_registry(namespace);
        outcome
    }

    fn delete_schema_versions_in(
        &mut self,
        namespace: &str,
        name: &str,
        version: Option<i32>,
        permanent: bool,
    ) -> Result<Outcome, CommandError> {
        let registry = self.registry_mut(namespace)?;
        let not_found = || refused(RegistryError::SubjectNotFound(name.to_owned()));
        let subject = registry.subjects.get(name).ok_or_else(not_found)?;
        if registry.mode(Some(name)) == RegistryMode::ReadOnly {
            return Err(refused(RegistryError::OperationNotPermitted(format!("Subject {name} is in read-only mode"))));
        }
        let targets: Vec<i32> = match version {
            Some(v) => {
                let Some(found) = subject.versions.get(&v) else {
                    return Err(refused(RegistryError::VersionNotFound(v)));
                };
                match (found.deleted, permanent) {
                    (true, false) => {
                        return Err(refused(RegistryError::VersionSoftDeleted {
                            subject: name.to_owned(),
                            version: v,
                        }));
                    }
                    (false, true) => {
                        return Err(refused(RegistryError::VersionNotSoftDeleted {
                            subject: name.to_owned(),
                            version: v,
                        }));
                    }
                    _ => vec![v],
                }
            }
            None if permanent => {
                if subject.live_versions().next().is_some() {
                    return Err(refused(RegistryError::SubjectNotSoftDeleted(name.to_owned())));
                }
                subject.versions.keys().copied().collect()
            }
            None => {
                let live: Vec<i32> = subject.live_versions().map(|(v, _)| v).collect();
                if live.is_empty() {
                    return Err(refused(RegistryError::SubjectSoftDeleted(name.to_owned())));
                }
                live
            }
        };
        // Referred to by a live version (soft) or by any schema still stored (permanent).
        if let Some(v) = targets.iter().find(|v| !registry.referrers(name, **v, !permanent).is_empty()) {
            return Err(refused(RegistryError::ReferenceExists { subject: name.to_owned(), version: *v }));
        }
        let mut released = Vec::new();
        let Some(subject) = registry.subjects.get_mut(name) else { return Err(not_found()) };
        for v in &targets {
            if permanent {
                if let Some(gone) = subject.versions.remove(v) {
                    released.push(gone.id);
                }
            } else if let Some(entry) = subject.versions.get_mut(v) {
                entry.deleted = true;
            }
        }
        subject.revision += 1;
        if subject.versions.is_empty() {
            registry.subjects.remove(name);
            registry.subject_configs.remove(name);
            registry.subject_modes.remove(name);
        }
        for id in released {
            registry.release(id);
        }
        Ok(Outcome::SchemaVersionsDeleted(targets))
    }

    /// Sets (`Some`) or removes the global (`subject: None`) or a subject's config; answers the
    /// config it replaced.
    pub(super) fn set_registry_config(
        &mut self,
        namespace: &str,
        subject: Option<String>,
        config: Option<RegistryConfig>,
    ) -> Result<Outcome, CommandError> {
        if let Some(s) = &subject {
            validate_subject(s).map_err(refused)?;
        }
        let subject_count = self.registries.values().map(|r| r.subject_configs.len()).sum::<usize>();
        let registry = self.registry_mut(namespace)?;
        let previous = match (&subject, config) {
            (None, Some(c)) => Some(std::mem::replace(&mut registry.config, c)),
            (None, None) => Some(std::mem::take(&mut registry.config)),
            (Some(s), Some(c)) => {
                if !registry.subject_configs.contains_key(s) && subject_count >= REGISTRY_SUBJECT_COUNT_MAX {
                    return Err(refused(RegistryError::OperationNotPermitted("too many subject configs".into())));
                }
                registry.subject_configs.insert(s.clone(), c)
            }
            (Some(s), None) => registry.subject_configs.remove(s),
        };
        registry.config_revision += 1;
        self.tidy_registry(namespace);
        Ok(Outcome::RegistryConfigSet(previous.map(Into::into)))
    }

    /// Sets or removes the global or a subject's mode; IMPORT over schemas already registered
    /// needs `force` (Confluent's 42205). Answers the mode it replaced.
    pub(super) fn set_registry_mode(
        &mut self,
        namespace: &str,
        subject: Option<String>,
        mode: Option<RegistryMode>,
        force: bool,
    ) -> Result<Outcome, CommandError> {
        if let Some(s) = &subject {
            validate_subject(s).map_err(refused)?;
        }
        let mode_count = self.registries.values().map(|r| r.subject_modes.len()).sum::<usize>();
        let registry = self.registry_mut(namespace)?;
        if mode == Some(RegistryMode::Import) && !force {
            let occupied = match &subject {
                None => !registry.subjects.is_empty(),
                Some(s) => registry.subjects.contains_key(s),
            };
            if occupied {
                return Err(refused(RegistryError::OperationNotPermitted(
                    "Cannot import since found existing subjects".into(),
                )));
            }
        }
        let previous = match (&subject, mode) {
            (None, m) => std::mem::replace(&mut registry.mode, m),
            (Some(s), Some(m)) => {
                if !registry.subject_modes.contains_key(s) && mode_count >= REGISTRY_SUBJECT_COUNT_MAX {
                    return Err(refused(RegistryError::OperationNotPermitted("too many subject modes".into())));
                }
                registry.subject_modes.insert(s.clone(), m)
            }
            (Some(s), None) => registry.subject_modes.remove(s),
        };
        registry.config_revision += 1;
        self.tidy_registry(namespace);
        Ok(Outcome::RegistryModeSet(previous))
    }
}

#[cfg(test)]
pub(super) mod tests;
