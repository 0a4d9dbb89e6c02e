//! The schema registry's REST API (Confluent Schema Registry's paths, bodies and error codes),
//! under `/schema-registry` on the HTTP listener, so unmodified registry clients work with
//! `url=http://AGENT/schema-registry`. Each caller sees its own tenant's registry.
//!
//! Schemas are parsed and checked for compatibility here (`floe_registry`), against this agent's
//! mirror of the metadata state; the state machine assigns ids and versions and refuses a
//! registration checked against a registry that has moved since, and the check is made again.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use floe_agent::Agent;
use floe_agent::access::Access;
use floe_agent::produce::schemas::{schema_guid, schema_id_of_guid};
use floe_metadata::State as MetadataState;
use floe_metadata::acl::{AclOperation, AclResourceType};
use floe_metadata::{
    Command, CommandError, Compatibility, NodeError, Outcome, RegistryConfig, RegistryError, RegistryMode,
    SchemaContent, SchemaReference, SchemaRegistration, SchemaRegistry, SchemaType,
};
use floe_registry::ParsedSchema;
use floe_tables::metadata::TableMetadata;
use floe_tables::schema::IcebergSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::extract::{Path, Query, Scope, SmallBody};
use crate::limits::{REGISTRY_CHECK_WAIT, REGISTRY_CHECKS, REGISTRY_CHECKS_MAX, REGISTRY_TENANT_CHECKS_MAX};

/// Registrations retried after the registry moved under the compatibility check.
const STALE_RETRIES: usize = 5;

/// The registry's API under `/schema-registry`, as the HTTP listener serves it.
pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new().nest("/schema-registry", api(agent)).route("/schema-registry/", get(root))
}

/// The registry's API at the root, as `--schema-registry-addr` serves it.
pub(crate) fn api(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/schemas", get(list_schemas))
        .route("/schemas/types", get(types))
        .route("/schemas/ids/{id}", get(schema_by_id))
        .route("/schemas/ids/{id}/schema", get(raw_schema_by_id))
        .route("/schemas/ids/{id}/subjects", get(subjects_of_id))
        .route("/schemas/ids/{id}/versions", get(versions_of_id))
        .route("/schemas/guids/{guid}", get(schema_by_guid))
        .route("/subjects", get(list_subjects))
        .route("/subjects/{subject}", post(lookup).delete(delete_subject))
        .route("/subjects/{subject}/versions", get(list_versions).post(register))
        .route("/subjects/{subject}/versions/{version}", get(get_version).delete(delete_version))
        .route("/subjects/{subject}/versions/{version}/schema", get(raw_version))
        .route("/subjects/{subject}/versions/{version}/referencedby", get(referenced_by))
        .route("/compatibility/subjects/{subject}/versions/{version}", post(compatibility_with_version))
        .route("/compatibility/subjects/{subject}/versions", post(compatibility_with_all))
        .route("/config", get(get_global_config).put(put_global_config).delete(delete_global_config))
        .route("/config/{subject}", get(get_subject_config).put(put_subject_config).delete(delete_subject_config))
        .route("/mode", get(get_global_mode).put(put_global_mode).delete(delete_global_mode))
        .route("/mode/{subject}", get(get_subject_mode).put(put_subject_mode).delete(delete_subject_mode))
        .with_state(agent)
}

/// An error in the registry's shape: an HTTP status and `{"error_code", "message"}`.
#[derive(Debug)]
pub(crate) struct RegistryHttpError {
    status: StatusCode,
    code: u32,
    message: String,
}

impl RegistryHttpError {
    fn new(code: u32, message: impl Into<String>) -> Self {
        let status = match code / 100 {
            404 => StatusCode::NOT_FOUND,
            409 => StatusCode::CONFLICT,
            422 => StatusCode::UNPROCESSABLE_ENTITY,
            400 => StatusCode::BAD_REQUEST,
            403 => StatusCode::FORBIDDEN,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let status = if code == 409 { StatusCode::CONFLICT } else { status };
        Self { status, code, message: message.into() }
    }

    fn invalid_schema(message: impl Into<String>) -> Self {
        Self::new(42201, message)
    }
}

impl IntoResponse for RegistryHttpError {
    fn into_response(self) -> Response {
        let body = json!({ "error_code": self.code, "message": self.message });
        let mut response = (self.status, Json(body)).into_response();
        if let Ok(v) = header::HeaderValue::from_str(CONTENT_TYPE) {
            response.headers_mut().insert(header::CONTENT_TYPE, v);
        }
        response
    }
}

impl From<RegistryError> for RegistryHttpError {
    fn from(e: RegistryError) -> Self {
        let code = match &e {
            RegistryError::SubjectNotFound(_) => 40401,
            RegistryError::VersionNotFound(_) => 40402,
            RegistryError::SchemaNotFound(_) => 40403,
            RegistryError::SubjectSoftDeleted(_) => 40404,
            RegistryError::SubjectNotSoftDeleted(_) => 40405,
            RegistryError::VersionSoftDeleted { .. } => 40406,
            RegistryError::VersionNotSoftDeleted { .. } => 40407,
            RegistryError::InvalidSchema(_) => 42201,
            RegistryError::InvalidMode(_) => 42204,
            RegistryError::OperationNotPermitted(_) => 42205,
            RegistryError::ReferenceExists { .. } => 42206,
            RegistryError::IdConflict(_) => 42207,
            RegistryError::InvalidSubject(_) => 42208,
            RegistryError::TooLarge(_) => 42209,
            RegistryError::Stale => 50001,
        };
        Self::new(code, e.to_string())
    }
}

impl From<NodeError> for RegistryHttpError {
    fn from(e: NodeError) -> Self {
        match e {
            NodeError::Rejected(CommandError::Registry(e)) => e.into(),
            NodeError::Rejected(e) => Self::new(50001, e.to_string()),
            NodeError::Unavailable(why) => Self::new(50003, format!("metadata unavailable: {why}")),
        }
    }
}

type Answer = Result<Response, RegistryHttpError>;

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

fn ok(value: Value) -> Answer {
    let mut response = Json(value).into_response();
    if let Ok(v) = header::HeaderValue::from_str(CONTENT_TYPE) {
        response.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    Ok(response)
}

/// Query parameters as the registry reads them: booleans are `true` in any case, anything else
/// is false; unknown parameters are ignored.
#[derive(Debug, Default)]
struct Flags(HashMap<String, String>);

impl Flags {
    fn get(&self, name: &str) -> bool {
        self.0.get(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }
}

type FlagQuery = Query<HashMap<String, String>>;

fn flags(q: FlagQuery) -> Flags {
    Flags(q.0)
}

fn namespace(scope: &Scope) -> String {
    scope.namespace_key().unwrap_or_default().to_owned()
}

/// Whether `access` (none without `--authorizer`) lets its caller do `operation` on `subject`.
/// As Confluent's registry authorizes subjects: Read for schemas, versions, lookups and
/// compatibility checks, Write to register, Delete, DescribeConfigs and AlterConfigs for the
/// subject's compatibility level and mode.
pub(crate) fn may_subject(
    state: &MetadataState,
    access: Option<&Access>,
    operation: AclOperation,
    subject: &str,
) -> bool {
    access.is_none_or(|a| a.allows(state, operation, AclResourceType::Subject, subject))
}

/// Whether `access` may read schema `id` of `registry`: Read on a subject holding a version of it.
pub(crate) fn may_read_schema(
    state: &MetadataState,
    access: Option<&Access>,
    registry: &SchemaRegistry,
    id: i32,
) -> bool {
    access.is_none()
        || registry.subjects.iter().any(|(subject, record)| {
            record.versions.values().any(|v| v.id == id) && may_subject(state, access, AclOperation::Read, subject)
        })
}

fn denied(operation: AclOperation, what: &str) -> RegistryHttpError {
    RegistryHttpError::new(40301, format!("User is denied operation {operation:?} on {what}"))
}

/// A 40301 unless the caller may do `operation` on `subject`.
fn authorize(agent: &Agent, scope: &Scope, operation: AclOperation, subject: &str) -> Result<(), RegistryHttpError> {
    if may_subject(&agent.metadata.read(), scope.access(), operation, subject) {
        Ok(())
    } else {
        Err(denied(operation, &format!("subject {subject:?}")))
    }
}

/// A 40301 unless the caller may do `operation` on the registry's global settings (its
/// cluster, as Kafka's cluster-wide configs).
fn authorize_global(agent: &Agent, scope: &Scope, operation: AclOperation) -> Result<(), RegistryHttpError> {
    if scope.may_cluster(&agent.metadata.read(), operation) {
        Ok(())
    } else {
        Err(denied(operation, "the registry's global settings"))
    }
}

/// A 40301 unless the caller may read schema `id` (a 40403 when there is none).
async fn authorize_schema(agent: &Agent, scope: &Scope, id: i32) -> Result<(), RegistryHttpError> {
    if scope.access().is_none() {
        return Ok(());
    }
    let uses = read(agent, scope, |r| uses_of(r, id, true)).await?;
    let state = agent.metadata.read();
    if uses.iter().any(|(subject, _)| may_subject(&state, scope.access(), AclOperation::Read, subject)) {
        Ok(())
    } else {
        Err(denied(AclOperation::Read, &format!("schema {id}")))
    }
}

/// Reads the caller's registry; on a miss, once more after catching the mirror up with the
/// metadata leader, so a client that wrote through another agent reads its write here.
async fn read<T>(
    agent: &Agent,
    scope: &Scope,
    f: impl Fn(&SchemaRegistry) -> Result<T, RegistryHttpError>,
) -> Result<T, RegistryHttpError> {
    let ns = namespace(scope);
    let answer = || {
        let state = agent.metadata.read();
        f(state.schema_registry(&ns).unwrap_or(&SchemaRegistry::default()))
    };
    match answer() {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            agent.metadata.catch_up().await?;
            answer()
        }
        other => other,
    }
}

/// [`read`] for work that parses schemas: on a copy of the registry, since parsing and
/// compatibility checks take a while and the mirror's lock would hold back its applies, and
/// off the async workers ([`off_the_workers`]).
async fn read_copy<T: Send + 'static>(
    agent: &Arc<Agent>,
    scope: &Scope,
    f: impl Fn(&Agent, &SchemaRegistry) -> Result<T, RegistryHttpError> + Send + Sync + 'static,
) -> Result<T, RegistryHttpError> {
    let ns = namespace(scope);
    let f = Arc::new(f);
    let answer = || {
        let (agent, f, registry_ns) = (agent.clone(), f.clone(), ns.clone());
        off_the_workers(&ns, move || {
            let registry = agent.metadata.read().schema_registry(&registry_ns).cloned().unwrap_or_default();
            (*f)(&agent, &registry)
        })
    };
    match answer().await {
        Err(e) if e.status == StatusCode::NOT_FOUND => {
            agent.metadata.catch_up().await?;
            answer().await
        }
        other => other,
    }
}

/// Runs `work` (parsing, normalizing, compatibility checks: CPU for as long as their bounds
/// allow) on the blocking pool with one of the registry's check slots ([`REGISTRY_CHECKS_MAX`]
/// per agent, [`REGISTRY_TENANT_CHECKS_MAX`] per tenant), so the async workers stay free for
/// other requests and one tenant cannot take every slot. A caller that goes away leaves its
/// check to finish, holding its slot.
async fn off_the_workers<T: Send + 'static>(
    ns: &str,
    work: impl FnOnce() -> Result<T, RegistryHttpError> + Send + 'static,
) -> Result<T, RegistryHttpError> {
    let busy = || {
        let wait = REGISTRY_CHECK_WAIT.as_secs();
        RegistryHttpError::new(
            50003,
            format!(
                "schemas are checked at most {REGISTRY_TENANT_CHECKS_MAX} at a time per tenant and {REGISTRY_CHECKS_MAX} per agent, and no slot came free within {wait} s; retry"
            ),
        )
    };
    let waited = tokio::time::timeout(REGISTRY_CHECK_WAIT, REGISTRY_CHECKS.take(ns, 1)).await;
    let slot = waited.ok().flatten().ok_or_else(busy)?;
    let done = tokio::task::spawn_blocking(move || {
        let answer = work();
        drop(slot);
        answer
    })
    .await;
    done.map_err(|e| RegistryHttpError::new(50001, format!("checking the schema failed: {e}")))?
}

async fn propose(agent: &Agent, command: Command) -> Result<Outcome, RegistryHttpError> {
    Ok(agent.metadata.propose(command).await?)
}

fn parse_id(id: &str) -> Result<i32, RegistryHttpError> {
    id.parse::<i32>().map_err(|_| RegistryHttpError::new(40403, format!("Schema {id} not found")))
}

/// A version in a path: a number from 1, or `latest` / `-1`.
#[derive(Clone, Copy, Debug)]
enum VersionId {
    Number(i32),
    Latest,
}

fn parse_version(v: &str) -> Result<VersionId, RegistryHttpError> {
    match v {
        "latest" | "-1" => Ok(VersionId::Latest),
        _ => match v.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(VersionId::Number(n)),
            _ => Err(RegistryHttpError::new(
                42202,
                format!(
                    "The specified version '{v}' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
                ),
            )),
        },
    }
}

/// The version `which` of `subject`: a soft-deleted one only with `deleted`.
fn find_version(
    registry: &SchemaRegistry,
    subject: &str,
    which: VersionId,
    deleted: bool,
) -> Result<(i32, i32), RegistryHttpError> {
    let record = registry
        .subjects
        .get(subject)
        .filter(|s| deleted || s.latest_live().is_some())
        .ok_or_else(|| RegistryError::SubjectNotFound(subject.to_owned()))?;
    let found = match which {
        VersionId::Latest if deleted => record.versions.iter().next_back().map(|(n, v)| (*n, v.id)),
        VersionId::Latest => record.latest_live().map(|(n, v)| (n, v.id)),
        VersionId::Number(n) => record.versions.get(&n).filter(|v| deleted || !v.deleted).map(|v| (n, v.id)),
    };
    found.ok_or_else(|| {
        RegistryError::VersionNotFound(match which {
            VersionId::Number(n) => n,
            VersionId::Latest => -1,
        })
        .into()
    })
}

/// Schema `id` of the registry `ns` as the registry shows it, with its GUID.
fn schema_json(ns: &str, registry: &SchemaRegistry, id: i32) -> Result<Value, RegistryHttpError> {
    let schema = registry.schemas.get(&id).ok_or(RegistryError::SchemaNotFound(id))?;
    let mut body = json!({ "schema": schema.content.text, "guid": schema_guid(ns, id).to_string() });
    add_type_and_references(&mut body, &schema.content);
    Ok(body)
}

/// `schemaType` is left out for AVRO and `references` when empty, as the registry does.
fn add_type_and_references(body: &mut Value, content: &SchemaContent) {
    if content.schema_type != SchemaType::Avro {
        body["schemaType"] = json!(content.schema_type.name());
    }
    if !content.references.is_empty() {
        body["references"] = content
            .references
            .iter()
            .map(|r| json!({ "name": r.name, "subject": r.subject, "version": r.version }))
            .collect();
    }
}

async fn root() -> Answer {
    ok(json!({}))
}

async fn types() -> Answer {
    ok(json!(["JSON", "PROTOBUF", "AVRO"]))
}

/// `format=serialized` asks for a Protobuf schema as a base64 `FileDescriptorProto` (what
/// confluent-kafka's Protobuf deserializer reads); other formats are answered as registered.
fn apply_format(
    agent: &Agent,
    scope: &Scope,
    r: &SchemaRegistry,
    id: i32,
    format: Option<&String>,
    body: &mut Value,
) -> Result<(), RegistryHttpError> {
    if format.is_none_or(|f| f != "serialized") {
        return Ok(());
    }
    if r.schemas.get(&id).is_some_and(|s| s.content.schema_type == SchemaType::Protobuf) {
        let parsed = agent
            .parsed_schemas
            .get(&namespace(scope), id, r)
            .map_err(|e| RegistryHttpError::new(50001, format!("schema {id}: {e}")))?;
        if let floe_registry::ParsedSchema::Protobuf(p) = parsed.as_ref() {
            body["schema"] = json!(p.serialized());
        }
    }
    Ok(())
}

async fn schema_by_id(State(agent): State<Arc<Agent>>, scope: Scope, Path(id): Path<String>, q: FlagQuery) -> Answer {
    schema_answer(&agent, &scope, parse_id(&id)?, &q, false).await
}

/// Schema `id` as `GET /schemas/ids/{id}` answers it (`with_id`: the id too), once the caller
/// may read it.
async fn schema_answer(agent: &Agent, scope: &Scope, id: i32, q: &FlagQuery, with_id: bool) -> Answer {
    authorize_schema(agent, scope, id).await?;
    let format = q.0.get("format");
    ok(read(agent, scope, |r| {
        let mut body = schema_json(&namespace(scope), r, id)?;
        if with_id {
            body["id"] = json!(id);
        }
        apply_format(agent, scope, r, id, format, &mut body)?;
        Ok(body)
    })
    .await?)
}

/// `GET /schemas/guids/{guid}`: the schema a GUID names (as header framing with magic byte 1
/// carries it), as `GET /schemas/ids/{id}` answers, with its id.
async fn schema_by_guid(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(guid): Path<String>,
    q: FlagQuery,
) -> Answer {
    let not_found = || RegistryHttpError::new(40403, format!("Schema {guid} not found"));
    let guid = uuid::Uuid::parse_str(&guid).map_err(|_| not_found())?;
    let id = schema_id_of_guid(&namespace(&scope), guid).ok_or_else(not_found)?;
    schema_answer(&agent, &scope, id, &q, true).await
}

async fn raw_schema_by_id(State(agent): State<Arc<Agent>>, scope: Scope, Path(id): Path<String>) -> Answer {
    let id = parse_id(&id)?;
    authorize_schema(&agent, &scope, id).await?;
    let text = read(&agent, &scope, |r| {
        r.schemas.get(&id).map(|s| s.content.text.clone()).ok_or_else(|| RegistryError::SchemaNotFound(id).into())
    })
    .await?;
    Ok(text.into_response())
}

/// (subject, version) pairs holding `id`, soft-deleted ones only with `deleted`.
fn uses_of(registry: &SchemaRegistry, id: i32, deleted: bool) -> Result<Vec<(String, i32)>, RegistryHttpError> {
    if !registry.schemas.contains_key(&id) {
        return Err(RegistryError::SchemaNotFound(id).into());
    }
    Ok(registry
        .subjects
        .iter()
        .flat_map(|(s, record)| {
            record.versions.iter().filter(|(_, v)| v.id == id && (deleted || !v.deleted)).map(|(n, _)| (s.clone(), *n))
        })
        .collect())
}

/// The (subject, version) pairs of `uses` whose subject the caller may read.
fn readable(agent: &Agent, scope: &Scope, uses: Vec<(String, i32)>) -> Vec<(String, i32)> {
    let state = agent.metadata.read();
    uses.into_iter().filter(|(s, _)| may_subject(&state, scope.access(), AclOperation::Read, s)).collect()
}

async fn subjects_of_id(State(agent): State<Arc<Agent>>, scope: Scope, Path(id): Path<String>, q: FlagQuery) -> Answer {
    let (id, deleted) = (parse_id(&id)?, flags(q).get("deleted"));
    authorize_schema(&agent, &scope, id).await?;
    let uses = readable(&agent, &scope, read(&agent, &scope, |r| uses_of(r, id, deleted)).await?);
    let mut subjects: Vec<String> = uses.into_iter().map(|(s, _)| s).collect();
    subjects.dedup();
    ok(json!(subjects))
}

async fn versions_of_id(State(agent): State<Arc<Agent>>, scope: Scope, Path(id): Path<String>, q: FlagQuery) -> Answer {
    let (id, deleted) = (parse_id(&id)?, flags(q).get("deleted"));
    authorize_schema(&agent, &scope, id).await?;
    let uses = readable(&agent, &scope, read(&agent, &scope, |r| uses_of(r, id, deleted)).await?);
    ok(uses.into_iter().map(|(s, v)| json!({ "subject": s, "version": v })).collect())
}

/// Schema text one `GET /schemas` answer holds at most; a client pages on with `offset`.
const LISTED_SCHEMA_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Versions one `GET /schemas` answer lists at most (and by default).
const LISTED_SCHEMAS_MAX: usize = 10_000;

/// `GET /schemas`: subjects' versions with their schemas, by subject then version, as
/// Confluent's registry lists them (`subjectPrefix`, `deleted`, `latestOnly`, `offset`,
/// `limit`); only subjects the caller may read.
async fn list_schemas(State(agent): State<Arc<Agent>>, scope: Scope, q: FlagQuery) -> Answer {
    let number = |name: &str| -> Result<Option<usize>, RegistryHttpError> {
        match q.0.get(name) {
            None => Ok(None),
            Some(v) => match v.parse::<i64>() {
                Ok(n) if n < 0 => Ok(None),
                Ok(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
                Err(_) => Err(RegistryHttpError::new(40002, format!("{name} {v:?} is not a number"))),
            },
        }
    };
    let offset = number("offset")?.unwrap_or(0);
    let limit = number("limit")?.unwrap_or(LISTED_SCHEMAS_MAX).min(LISTED_SCHEMAS_MAX);
    let prefix = q.0.get("subjectPrefix").cloned().unwrap_or_default();
    let flags = flags(q);
    let (deleted, latest_only) = (flags.get("deleted"), flags.get("latestOnly"));
    let listed = {
        let state = agent.metadata.read();
        let empty = SchemaRegistry::default();
        let ns = namespace(&scope);
        let r = state.schema_registry(&ns).unwrap_or(&empty);
        let mut out = Vec::new();
        let mut bytes = 0usize;
        let versions = r
            .subjects
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .filter(|(name, _)| may_subject(&state, scope.access(), AclOperation::Read, name))
            .flat_map(|(name, record)| {
                let live: Vec<(i32, i32)> =
                    record.versions.iter().filter(|(_, v)| deleted || !v.deleted).map(|(n, v)| (*n, v.id)).collect();
                let keep = if latest_only { live.len().saturating_sub(1) } else { 0 };
                live.into_iter().skip(keep).map(move |(n, id)| (name, n, id))
            });
        for (subject, version, id) in versions.skip(offset).take(limit) {
            let body = version_json(&ns, r, subject, version, id)?;
            bytes += body["schema"].as_str().map_or(0, str::len);
            out.push(body);
            if bytes > LISTED_SCHEMA_BYTES_MAX {
                break;
            }
        }
        out
    };
    ok(json!(listed))
}

async fn list_subjects(State(agent): State<Arc<Agent>>, scope: Scope, q: FlagQuery) -> Answer {
    let q = flags(q);
    let (deleted, deleted_only) = (q.get("deleted"), q.get("deletedOnly"));
    let prefix = q.0.get("subjectPrefix").cloned().unwrap_or_default();
    let subjects = read(&agent, &scope, |r| {
        Ok(r.subjects
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .filter(|(_, s)| {
                let live = s.latest_live().is_some();
                if deleted_only { !live } else { deleted || live }
            })
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>())
    })
    .await?;
    let state = agent.metadata.read();
    let subjects: Vec<String> =
        subjects.into_iter().filter(|s| may_subject(&state, scope.access(), AclOperation::Describe, s)).collect();
    ok(json!(subjects))
}

async fn list_versions(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Read, &subject)?;
    let q = flags(q);
    let (deleted, deleted_only) = (q.get("deleted"), q.get("deletedOnly"));
    let versions = read(&agent, &scope, |r| {
        let record = r
            .subjects
            .get(&subject)
            .filter(|s| deleted || deleted_only || s.latest_live().is_some())
            .ok_or_else(|| RegistryError::SubjectNotFound(subject.clone()))?;
        Ok(record
            .versions
            .iter()
            .filter(|(_, v)| if deleted_only { v.deleted } else { deleted || !v.deleted })
            .map(|(n, _)| *n)
            .collect::<Vec<_>>())
    })
    .await?;
    ok(json!(versions))
}

fn version_json(
    ns: &str,
    r: &SchemaRegistry,
    subject: &str,
    version: i32,
    id: i32,
) -> Result<Value, RegistryHttpError> {
    let mut body = schema_json(ns, r, id)?;
    body["subject"] = json!(subject);
    body["version"] = json!(version);
    body["id"] = json!(id);
    Ok(body)
}

async fn get_version(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((subject, version)): Path<(String, String)>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Read, &subject)?;
    let format = q.0.get("format").cloned();
    let (which, deleted) = (parse_version(&version)?, flags(q).get("deleted"));
    ok(read(&agent, &scope, |r| {
        let (version, id) = find_version(r, &subject, which, deleted)?;
        let mut body = version_json(&namespace(&scope), r, &subject, version, id)?;
        apply_format(&agent, &scope, r, id, format.as_ref(), &mut body)?;
        Ok(body)
    })
    .await?)
}

async fn raw_version(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((subject, version)): Path<(String, String)>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Read, &subject)?;
    let (which, deleted) = (parse_version(&version)?, flags(q).get("deleted"));
    let text = read(&agent, &scope, |r| {
        let (_, id) = find_version(r, &subject, which, deleted)?;
        Ok(r.schemas.get(&id).map(|s| s.content.text.clone()).unwrap_or_default())
    })
    .await?;
    Ok(text.into_response())
}

async fn referenced_by(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((subject, version)): Path<(String, String)>,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Read, &subject)?;
    let which = parse_version(&version)?;
    let ids = read(&agent, &scope, |r| {
        let (version, _) = find_version(r, &subject, which, true)?;
        Ok(r.referrers(&subject, version, false))
    })
    .await?;
    ok(json!(ids))
}

/// A schema as clients send it to register, look up or check.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SchemaBody {
    schema: String,
    #[serde(default)]
    schema_type: Option<String>,
    #[serde(default)]
    references: Vec<ReferenceBody>,
    #[serde(default)]
    id: Option<i32>,
    #[serde(default)]
    version: Option<i32>,
    /// Data contracts (Confluent's `metadata` and `ruleSet`) are not supported: refused when set.
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    rule_set: Option<Value>,
}

#[derive(Clone, Debug, Deserialize)]
struct ReferenceBody {
    name: String,
    subject: String,
    version: i32,
}

/// A request body that must be one JSON object (serde would also read a struct from an array).
fn json_object<T: serde::de::DeserializeOwned>(body: &[u8], code: u32, what: &str) -> Result<T, RegistryHttpError> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(RegistryHttpError::new(code, format!("{what}: the body must be a JSON object")));
    }
    serde_json::from_slice(body).map_err(|e| RegistryHttpError::new(code, format!("{what}: {e}")))
}

fn schema_body(body: &[u8]) -> Result<SchemaBody, RegistryHttpError> {
    let parsed: SchemaBody = json_object(body, 42201, "Invalid schema body")?;
    let is_set = |v: &Option<Value>| v.as_ref().is_some_and(|v| !v.is_null() && v != &json!({}));
    if is_set(&parsed.metadata) || is_set(&parsed.rule_set) {
        return Err(RegistryHttpError::invalid_schema("metadata and ruleSet (data contracts) are not supported"));
    }
    Ok(parsed)
}

/// A schema parsed with its references: what is stored and what compatibility is checked on.
struct Parsed {
    content: SchemaContent,
    schema: ParsedSchema,
}

/// Parses `body`'s schema against the caller's registry: references resolve to the texts of
/// the versions they name (and theirs, depth first), and the schema is written canonically,
/// after Confluent's normalization if `normalize` (`normalize=true`, or the subject's config).
fn parse_schema(registry: &SchemaRegistry, body: &SchemaBody, normalize: bool) -> Result<Parsed, RegistryHttpError> {
    let schema_type = match body.schema_type.as_deref() {
        None => SchemaType::Avro,
        Some(t) => SchemaType::from_name(&t.to_ascii_uppercase())
            .ok_or_else(|| RegistryHttpError::invalid_schema(format!("Invalid schema type {t}")))?,
    };
    let format = floe_agent::produce::schemas::format_of(schema_type);
    if body.schema.len() > floe_metadata::limits::SCHEMA_TEXT_BYTES_MAX {
        return Err(RegistryError::TooLarge("Schema too large".into()).into());
    }
    let references: Vec<SchemaReference> = body
        .references
        .iter()
        .map(|r| SchemaReference { name: r.name.clone(), subject: r.subject.clone(), version: r.version })
        .collect();
    let texts = reference_texts(registry, &references)?;
    let text_refs: Vec<(&str, &str)> = texts.iter().map(|(name, text)| (name.as_str(), text.as_str())).collect();
    let invalid = |e: floe_registry::SchemaError| RegistryHttpError::invalid_schema(e.to_string());
    let normalized = if normalize {
        Some(ParsedSchema::normalized_text(format, &body.schema, &text_refs).map_err(invalid)?)
    } else {
        None
    };
    let schema =
        ParsedSchema::parse(format, normalized.as_deref().unwrap_or(&body.schema), &text_refs).map_err(invalid)?;
    let content = SchemaContent { schema_type, text: schema.canonical().to_owned(), references };
    Ok(Parsed { content, schema })
}

/// The registry the fuzz target checks bodies against: one schema of each type under subjects
/// `avro`, `json` and `proto`, which a body's references may name.
static FUZZ_REGISTRY: std::sync::LazyLock<SchemaRegistry> = std::sync::LazyLock::new(|| {
    let mut registry = SchemaRegistry::default();
    let schemas = [
        ("avro", SchemaType::Avro, r#"{"type":"record","name":"R","fields":[{"name":"a","type":["null","long"]}]}"#),
        ("json", SchemaType::Json, r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#),
        ("proto", SchemaType::Protobuf, "syntax = \"proto3\"; package p; message M { int64 a = 1; }"),
    ];
    for (id, (subject, schema_type, text)) in (1..).zip(schemas) {
        let content = SchemaContent { schema_type, text: text.to_owned(), references: Vec::new() };
        registry.schemas.insert(id, floe_metadata::state::SchemaRecord { content, uses: 1 });
        let version = floe_metadata::state::SubjectVersion { id, deleted: false, registered_ms: 0 };
        registry.subjects.entry(subject.to_owned()).or_default().versions.insert(1, version);
        registry.last_id = id;
    }
    registry
});

/// A registration, lookup or compatibility body as those routes read it (the first byte asks
/// for `normalize=true`), checked under every compatibility level against the fixed registry's
/// schemas; also read as a config and a mode body. Never panics, whatever the bytes.
#[doc(hidden)]
pub fn registry_body_for_fuzzing(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else { return };
    let _ = json_object::<ConfigBody>(body, 42203, "config")
        .map(|c| c.compatibility.as_deref().map(Compatibility::from_name));
    let _ = json_object::<ModeBody>(body, 42204, "mode").map(|m| RegistryMode::from_name(&m.mode));
    let Ok(body) = schema_body(body) else { return };
    let registry = &*FUZZ_REGISTRY;
    let Ok(new) = parse_schema(registry, &body, flags & 1 == 1) else { return };
    let earlier: Vec<(i32, ParsedSchema)> = registry
        .schemas
        .iter()
        .filter(|(_, s)| s.content.schema_type == new.content.schema_type)
        .filter_map(|(id, s)| {
            let format = floe_agent::produce::schemas::format_of(s.content.schema_type);
            ParsedSchema::parse(format, &s.content.text, &[]).ok().map(|p| (*id, p))
        })
        .collect();
    let earlier: Vec<(i32, &ParsedSchema)> = earlier.iter().map(|(v, s)| (*v, s)).collect();
    for level in Compatibility::ALL {
        let _ = floe_registry::check_compatibility(&new.schema, &earlier, rule_of(level));
    }
}

/// The schemas `references` name, as (name, text) (see [`floe_agent::produce::schemas::reference_texts`]).
fn reference_texts(
    registry: &SchemaRegistry,
    references: &[SchemaReference],
) -> Result<Vec<(String, String)>, RegistryHttpError> {
    floe_agent::produce::schemas::reference_texts(registry, references).map_err(RegistryHttpError::invalid_schema)
}

fn rule_of(level: Compatibility) -> floe_registry::Rule {
    use floe_registry::Rule;
    let (backward, forward, transitive) = match level {
        Compatibility::None => (false, false, false),
        Compatibility::Backward => (true, false, false),
        Compatibility::BackwardTransitive => (true, false, true),
        Compatibility::Forward => (false, true, false),
        Compatibility::ForwardTransitive => (false, true, true),
        Compatibility::Full => (true, true, false),
        Compatibility::FullTransitive => (true, true, true),
    };
    Rule { backward, forward, transitive }
}

/// The messages of every incompatibility of `new` with the subject's live versions `against`
/// (newest first) under the subject's level.
fn incompatibilities(
    agent: &Agent,
    ns: &str,
    registry: &SchemaRegistry,
    new: &Parsed,
    against: &[(i32, i32)],
    rule: floe_registry::Rule,
) -> Result<Vec<String>, RegistryHttpError> {
    if rule == floe_registry::Rule::default() {
        return Ok(Vec::new());
    }
    let mut earlier = Vec::new();
    for (version, id) in against {
        if registry.schemas.get(id).is_some_and(|s| s.content.schema_type != new.content.schema_type) {
            return Ok(vec!["Incompatible because of different schema type".to_owned()]);
        }
        let parsed = agent
            .parsed_schemas
            .get(ns, *id, registry)
            .map_err(|e| RegistryHttpError::new(50001, format!("schema {id}: {e}")))?;
        earlier.push((*version, parsed));
    }
    let earlier: Vec<(i32, &ParsedSchema)> = earlier.iter().map(|(v, s)| (*v, s.as_ref())).collect();
    Ok(floe_registry::check_compatibility(&new.schema, &earlier, rule))
}

/// Live versions of `subject`, newest first, as (version, id).
fn live_versions(registry: &SchemaRegistry, subject: &str) -> Vec<(i32, i32)> {
    registry.subjects.get(subject).map_or_else(Vec::new, |s| s.live_versions().rev().map(|(n, v)| (n, v.id)).collect())
}

async fn register(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    floe_metadata::validate_subject(&subject).map_err(RegistryHttpError::from)?;
    authorize(&agent, &scope, AclOperation::Write, &subject)?;
    let body = schema_body(&body)?;
    let normalize = flags(q).get("normalize");
    let ns = namespace(&scope);
    let (id, version) = register_schema(&agent, &ns, &subject, &body, normalize).await?;
    ok(json!({ "id": id, "version": version, "subject": subject, "guid": schema_guid(&ns, id).to_string() }))
}

/// Registers a schema under `subject` of the registry `ns` (or finds it there already) as
/// `POST /subjects/{subject}/versions` does: its id and version. `normalize`: asked for with
/// `normalize=true` (the subject's config may ask for it too).
async fn register_schema(
    agent: &Arc<Agent>,
    ns: &str,
    subject: &str,
    body: &SchemaBody,
    normalize: bool,
) -> Result<(i32, i32), RegistryHttpError> {
    let table = table_of_subject(agent, ns, subject).await?;
    for attempt in 0..=STALE_RETRIES {
        let work = (agent.clone(), ns.to_owned(), subject.to_owned(), body.clone(), table.clone());
        let registered = off_the_workers(ns, move || {
            let (agent, ns, subject, body, table) = work;
            let registry = agent.metadata.read().schema_registry(&ns).cloned().unwrap_or_default();
            registration(&agent, &registry, &ns, &subject, &body, normalize, table.as_ref())
        });
        let command = match registered.await? {
            Ok(command) => command,
            Err(existing) => return Ok(existing),
        };
        match agent.metadata.propose(command).await {
            Ok(Outcome::SchemaRegistered { id, version }) => return Ok((id, version)),
            Ok(other) => return Err(RegistryHttpError::new(50001, format!("unexpected outcome {other:?}"))),
            Err(NodeError::Rejected(CommandError::Registry(RegistryError::Stale))) if attempt < STALE_RETRIES => {
                agent.metadata.catch_up().await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(RegistryError::Stale.into())
}

/// Registers a schema given as text with a record sent over HTTP (REST v3's `schema` field):
/// its id, or why not.
pub(crate) async fn register_for_produce(
    agent: &Arc<Agent>,
    ns: &str,
    subject: &str,
    schema_type: SchemaType,
    text: &str,
) -> Result<i32, String> {
    floe_metadata::validate_subject(subject).map_err(|e| e.to_string())?;
    let body = SchemaBody {
        schema: text.to_owned(),
        schema_type: Some(schema_type.name().to_owned()),
        references: Vec::new(),
        id: None,
        version: None,
        metadata: None,
        rule_set: None,
    };
    register_schema(agent, ns, subject, &body, false).await.map(|(id, _)| id).map_err(|e| e.message)
}

/// The value subject's table topic's typed table, as a new version must be able to evolve it
/// (`floe.table.schema.incompatible=refuse`): its current schema and last column id. `None` for
/// other subjects, tables not created yet and raw tables (which hold any value).
async fn table_of_subject(
    agent: &Agent,
    ns: &str,
    subject: &str,
) -> Result<Option<(IcebergSchema, i32)>, RegistryHttpError> {
    let Some(name) = subject.strip_suffix("-value") else { return Ok(None) };
    let location = {
        let state = agent.metadata.read();
        let stored = if ns.is_empty() { name.to_owned() } else { floe_metadata::Namespace::of(ns).scope(name) };
        let Some(topic) = state.topic_ids.get(&stored).and_then(|id| state.topics.get(id)) else { return Ok(None) };
        if !state.table_enabled(topic) {
            return Ok(None);
        }
        match state.tables.get(&topic.topic_id) {
            Some(table) => table.metadata_location.clone(),
            None => return Ok(None),
        }
    };
    let unreadable = |why: String| RegistryHttpError::new(50001, format!("reading the topic's table: {why}"));
    let key = agent.store.table_key_of_uri(&location).ok_or_else(|| unreadable(location.clone()))?;
    let bytes = agent.store.get_table_object(&key).await.map_err(|e| unreadable(e.to_string()))?;
    let metadata = TableMetadata::parse(&bytes).map_err(|e| unreadable(e.to_string()))?;
    let schema = metadata.current_schema().cloned().ok_or_else(|| unreadable("no current schema".into()))?;
    if schema.field(floe_tables::schema::column::RAW_VALUE).is_some() {
        return Ok(None);
    }
    Ok(Some((schema, metadata.last_column_id)))
}

/// The command registering `body` under `subject`, or (`Err` inside) its id and version when
/// the subject holds it already. `table`: the typed table the subject's records go to.
fn registration(
    agent: &Agent,
    registry: &SchemaRegistry,
    ns: &str,
    subject: &str,
    body: &SchemaBody,
    normalize: bool,
    table: Option<&(IcebergSchema, i32)>,
) -> Result<Result<Command, (i32, i32)>, RegistryHttpError> {
    let parsed = parse_schema(registry, body, normalize || registry.normalize(Some(subject)))?;
    if body.id.is_none()
        && let Some(id) = registry.id_of(&parsed.content)
        && let Some(version) = registry.version_of(subject, id, false)
    {
        return Ok(Err((id, version)));
    }
    let live = live_versions(registry, subject);
    let rule = rule_of(registry.compatibility(Some(subject)));
    let messages = incompatibilities(agent, ns, registry, &parsed, &live, rule)?;
    if !messages.is_empty() {
        return Err(RegistryHttpError::new(
            409,
            format!(
                "Schema being registered is incompatible with an earlier schema for subject \"{subject}\", details: [{}]",
                messages.join(", ")
            ),
        ));
    }
    if let Some((schema, last_column_id)) = table
        && let Err(why) = floe_agent::tables::evolve_table_schema(schema, *last_column_id, &parsed.schema, None)
    {
        return Err(RegistryHttpError::new(
            409,
            format!(
                "Schema being registered is incompatible with the Iceberg table of subject \"{subject}\"'s topic: {why} (floe.table.schema.incompatible=refuse)"
            ),
        ));
    }
    Ok(Ok(Command::RegisterSchema(SchemaRegistration {
        namespace: ns.to_owned(),
        subject: subject.to_owned(),
        content: parsed.content.into(),
        import: body.id.map(|id| (id, body.version)),
        checked_at: registry.revision(subject),
        now_ms: floe_metadata::now_ms(),
    })))
}

async fn lookup(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Read, &subject)?;
    let flags = flags(q);
    let (deleted, normalize) = (flags.get("deleted"), flags.get("normalize"));
    let body = schema_body(&body)?;
    let ns = namespace(&scope);
    ok(read_copy(&agent, &scope, move |_, r| {
        if !r.subjects.get(&subject).is_some_and(|s| deleted || s.latest_live().is_some()) {
            return Err(RegistryError::SubjectNotFound(subject.clone()).into());
        }
        let parsed = parse_schema(r, &body, normalize || r.normalize(Some(&subject)))?;
        let found = r.id_of(&parsed.content).and_then(|id| Some((id, r.version_of(&subject, id, deleted)?)));
        let (id, version) = found.ok_or_else(|| RegistryHttpError::new(40403, "Schema not found"))?;
        version_json(&ns, r, &subject, version, id)
    })
    .await?)
}

async fn delete_subject(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Delete, &subject)?;
    let permanent = flags(q).get("permanent");
    let command = Command::DeleteSchemaVersions { namespace: namespace(&scope), subject, version: None, permanent };
    match propose(&agent, command).await? {
        Outcome::SchemaVersionsDeleted(versions) => ok(json!(versions)),
        other => Err(RegistryHttpError::new(50001, format!("unexpected outcome {other:?}"))),
    }
}

async fn delete_version(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((subject, version)): Path<(String, String)>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::Delete, &subject)?;
    let permanent = flags(q).get("permanent");
    let which = parse_version(&version)?;
    let number = match which {
        VersionId::Number(n) => n,
        // The latest version a delete of this kind may apply to.
        VersionId::Latest => read(&agent, &scope, |r| Ok(find_version(r, &subject, which, permanent)?.0)).await?,
    };
    let command =
        Command::DeleteSchemaVersions { namespace: namespace(&scope), subject, version: Some(number), permanent };
    match propose(&agent, command).await? {
        Outcome::SchemaVersionsDeleted(_) => ok(json!(number)),
        other => Err(RegistryHttpError::new(50001, format!("unexpected outcome {other:?}"))),
    }
}

async fn check(
    agent: &Arc<Agent>,
    scope: &Scope,
    subject: &str,
    version: Option<VersionId>,
    flags: Flags,
    body: &[u8],
) -> Answer {
    authorize(agent, scope, AclOperation::Read, subject)?;
    let body = schema_body(body)?;
    let (verbose, normalize) = (flags.get("verbose"), flags.get("normalize"));
    let (ns, subject) = (namespace(scope), subject.to_owned());
    let messages = read_copy(agent, scope, move |agent, r| {
        let parsed = parse_schema(r, &body, normalize || r.normalize(Some(&subject)))?;
        let rule = rule_of(r.compatibility(Some(&subject)));
        let against = match version {
            Some(which) => {
                let found = find_version(r, &subject, which, false)?;
                vec![found]
            }
            None => live_versions(r, &subject),
        };
        // Against the named version, else the latest or (transitive levels) every live one.
        incompatibilities(agent, &ns, r, &parsed, &against, rule)
    })
    .await?;
    let mut answer = json!({ "is_compatible": messages.is_empty() });
    if verbose {
        answer["messages"] = json!(messages);
    }
    ok(answer)
}

async fn compatibility_with_version(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((subject, version)): Path<(String, String)>,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    let which = parse_version(&version)?;
    check(&agent, &scope, &subject, Some(which), flags(q), &body).await
}

async fn compatibility_with_all(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    check(&agent, &scope, &subject, None, flags(q), &body).await
}

fn config_json(config: &RegistryConfig, fallback: Option<Compatibility>) -> Value {
    let level = config.compatibility.or(fallback).unwrap_or(floe_metadata::DEFAULT_COMPATIBILITY);
    let mut body = json!({ "compatibilityLevel": level.name() });
    if let Some(n) = config.normalize {
        body["normalize"] = json!(n);
    }
    body
}

async fn get_global_config(State(agent): State<Arc<Agent>>, scope: Scope) -> Answer {
    authorize_global(&agent, &scope, AclOperation::DescribeConfigs)?;
    ok(read(&agent, &scope, |r| Ok(config_json(&r.config, None))).await?)
}

async fn get_subject_config(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::DescribeConfigs, &subject)?;
    let default_to_global = flags(q).get("defaultToGlobal");
    ok(read(&agent, &scope, |r| match r.subject_configs.get(&subject) {
        Some(c) => Ok(config_json(c, r.config.compatibility)),
        None if default_to_global => Ok(config_json(&r.config, None)),
        None => Err(RegistryHttpError::new(
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )),
    })
    .await?)
}

#[derive(Debug, Deserialize)]
struct ConfigBody {
    compatibility: Option<String>,
    #[serde(default)]
    normalize: Option<bool>,
}

/// A 40301 unless the caller may change the settings of `subject` (none: the global ones).
fn authorize_settings(agent: &Agent, scope: &Scope, subject: Option<&str>) -> Result<(), RegistryHttpError> {
    match subject {
        Some(subject) => authorize(agent, scope, AclOperation::AlterConfigs, subject),
        None => authorize_global(agent, scope, AclOperation::AlterConfigs),
    }
}

async fn set_config(agent: &Agent, scope: &Scope, subject: Option<String>, body: &[u8]) -> Answer {
    authorize_settings(agent, scope, subject.as_deref())?;
    let body: ConfigBody = json_object(body, 42203, "Invalid compatibility level")?;
    let compatibility = match body.compatibility.as_deref() {
        None => None,
        Some(level) => Some(
            Compatibility::from_name(level)
                .ok_or_else(|| RegistryHttpError::new(42203, format!("Invalid compatibility level: {level}")))?,
        ),
    };
    let config = RegistryConfig { compatibility, normalize: body.normalize };
    let command = Command::SetRegistryConfig { namespace: namespace(scope), subject, config: Some(config.into()) };
    propose(agent, command).await?;
    let mut answer = json!({});
    if let Some(c) = compatibility {
        answer["compatibility"] = json!(c.name());
    }
    if let Some(n) = body.normalize {
        answer["normalize"] = json!(n);
    }
    ok(answer)
}

async fn put_global_config(State(agent): State<Arc<Agent>>, scope: Scope, SmallBody(body): SmallBody) -> Answer {
    set_config(&agent, &scope, None, &body).await
}

async fn put_subject_config(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    SmallBody(body): SmallBody,
) -> Answer {
    set_config(&agent, &scope, Some(subject), &body).await
}

async fn delete_config(agent: &Agent, scope: &Scope, subject: Option<String>) -> Answer {
    authorize_settings(agent, scope, subject.as_deref())?;
    let named = subject.clone();
    let command = Command::SetRegistryConfig { namespace: namespace(scope), subject, config: None };
    match propose(agent, command).await? {
        Outcome::RegistryConfigSet(Some(previous)) => ok(config_json(&previous.into(), None)),
        Outcome::RegistryConfigSet(None) => Err(RegistryError::SubjectNotFound(named.unwrap_or_default()).into()),
        other => Err(RegistryHttpError::new(50001, format!("unexpected outcome {other:?}"))),
    }
}

async fn delete_global_config(State(agent): State<Arc<Agent>>, scope: Scope) -> Answer {
    delete_config(&agent, &scope, None).await
}

async fn delete_subject_config(State(agent): State<Arc<Agent>>, scope: Scope, Path(subject): Path<String>) -> Answer {
    delete_config(&agent, &scope, Some(subject)).await
}

async fn get_global_mode(State(agent): State<Arc<Agent>>, scope: Scope) -> Answer {
    authorize_global(&agent, &scope, AclOperation::DescribeConfigs)?;
    ok(read(&agent, &scope, |r| Ok(json!({ "mode": r.mode(None).name() }))).await?)
}

async fn get_subject_mode(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
) -> Answer {
    authorize(&agent, &scope, AclOperation::DescribeConfigs, &subject)?;
    let default_to_global = flags(q).get("defaultToGlobal");
    ok(read(&agent, &scope, |r| match r.subject_modes.get(&subject) {
        Some(m) => Ok(json!({ "mode": m.name() })),
        None if default_to_global => Ok(json!({ "mode": r.mode(None).name() })),
        None => Err(RegistryHttpError::new(
            40409,
            format!("Subject '{subject}' does not have subject-level mode configured"),
        )),
    })
    .await?)
}

#[derive(Debug, Deserialize)]
struct ModeBody {
    mode: String,
}

async fn set_mode(agent: &Agent, scope: &Scope, subject: Option<String>, force: bool, body: &[u8]) -> Answer {
    authorize_settings(agent, scope, subject.as_deref())?;
    let body: ModeBody = json_object(body, 42204, "Invalid mode")?;
    let mode = RegistryMode::from_name(&body.mode)
        .ok_or_else(|| RegistryHttpError::new(42204, format!("Invalid mode: {}", body.mode)))?;
    let command = Command::SetRegistryMode { namespace: namespace(scope), subject, mode: Some(mode), force };
    propose(agent, command).await?;
    ok(json!({ "mode": mode.name() }))
}

async fn put_global_mode(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    set_mode(&agent, &scope, None, flags(q).get("force"), &body).await
}

async fn put_subject_mode(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(subject): Path<String>,
    q: FlagQuery,
    SmallBody(body): SmallBody,
) -> Answer {
    set_mode(&agent, &scope, Some(subject), flags(q).get("force"), &body).await
}

async fn delete_mode(agent: &Agent, scope: &Scope, subject: Option<String>) -> Answer {
    authorize_settings(agent, scope, subject.as_deref())?;
    let command = Command::SetRegistryMode { namespace: namespace(scope), subject, mode: None, force: false };
    match propose(agent, command).await? {
        Outcome::RegistryModeSet(previous) => ok(json!({ "mode": previous.unwrap_or(RegistryMode::ReadWrite).name() })),
        other => Err(RegistryHttpError::new(50001, format!("unexpected outcome {other:?}"))),
    }
}

async fn delete_global_mode(State(agent): State<Arc<Agent>>, scope: Scope) -> Answer {
    delete_mode(&agent, &scope, None).await
}

async fn delete_subject_mode(State(agent): State<Arc<Agent>>, scope: Scope, Path(subject): Path<String>) -> Answer {
    delete_mode(&agent, &scope, Some(subject)).await
}
