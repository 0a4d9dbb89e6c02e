//! The operator API: tenants, their SASL users and HTTP API keys, and links, under `/v1/admin`. Served
//! only with `--operator-token-file`, and every request must carry that token
//! (`Authorization: Bearer <token>`); failures count toward the per-source limit on failed
//! authentication. The commands are the ones `floe admin tenants` proposes.

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use floe_agent::Agent;
use floe_metadata::{Command, CommandError, NodeError};
use serde::Deserialize;

use crate::auth::Peer;
use crate::error::HttpError;
use crate::extract::{Path, Query, SmallBody};
use crate::routes::admin::json_body;
use crate::tenants;

/// The operator token, kept as its SHA-256 so comparing leaks nothing useful through timing.
#[derive(Clone, Debug)]
pub struct OperatorToken(Vec<u8>);

impl OperatorToken {
    /// Shortest token accepted: it guards every tenant's credentials.
    pub const MIN_BYTES: usize = 24;

    pub fn new(token: &str) -> Result<Self, String> {
        let token = token.trim();
        if token.len() < Self::MIN_BYTES {
            return Err(format!("the operator token must be at least {} characters", Self::MIN_BYTES));
        }
        Ok(Self(floe_auth::api_key::secret_hash(token)))
    }

    fn matches(&self, presented: &str) -> bool {
        floe_auth::api_key::secret_hash(presented) == self.0
    }
}

pub(crate) fn router(agent: Arc<Agent>, token: OperatorToken) -> Router {
    Router::new()
        .route("/v1/admin/tenants", get(list).post(create_tenant))
        .route("/v1/admin/tenants/{tenant}", delete(delete_tenant))
        .route("/v1/admin/tenants/{tenant}/users/{user}", put(upsert_user))
        .route("/v1/admin/tenants/{tenant}/quotas", put(set_quotas))
        .route("/v1/admin/tenants/{tenant}/cors", put(set_cors))
        .route("/v1/admin/tenants/{tenant}/api-keys", post(create_api_key))
        .route("/v1/admin/users/{user}", delete(delete_user))
        .route("/v1/admin/api-keys/{key_id}", delete(delete_api_key))
        .route("/v1/admin/api-keys/{key_id}/quotas", put(set_api_key_quotas))
        .route("/v1/admin/cluster", get(cluster))
        .route("/v1/admin/usage", get(usage))
        .route("/v1/admin/usage/exports", post(export_usage))
        .route("/v1/admin/links", get(list_links).post(set_link))
        .route("/v1/admin/links/{name}", get(show_link).delete(delete_link))
        .route("/v1/admin/links/{name}/promote", post(promote_link))
        .route("/v1/admin/links/{name}/reverse", post(reverse_link))
        .layer(axum::middleware::from_fn_with_state((agent.clone(), Arc::new(token)), require_operator))
        .with_state(agent)
}

/// Lets through only requests carrying the operator token.
pub(crate) async fn require_operator(
    State((agent, token)): State<(Arc<Agent>, Arc<OperatorToken>)>,
    ConnectInfo(Peer(peer, _)): ConnectInfo<Peer>,
    request: Request,
    next: Next,
) -> Response {
    let now = std::time::Instant::now();
    if let Some(wait) = agent.auth_failures.blocked(peer.ip(), now) {
        let secs = wait.as_secs().max(1);
        return HttpError::new(StatusCode::TOO_MANY_REQUESTS, floe_auth::AuthError::TooManyFailures(secs).to_string())
            .with_retry_after(secs)
            .into_response();
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if presented.is_some_and(|t| token.matches(t)) {
        return next.run(request).await;
    }
    agent.auth_failures.record_failure(peer.ip(), now);
    floe_agent::log_limited!(
        tracing::Level::WARN,
        %peer,
        path = %request.uri().path(),
        "operator API request without the operator token"
    );
    tokio::time::sleep(crate::auth::FAILURE_DELAY).await;
    HttpError::new(StatusCode::UNAUTHORIZED, "the operator token is required (Authorization: Bearer <token>)")
        .into_response()
}

fn command_error(e: NodeError) -> HttpError {
    match e {
        NodeError::Rejected(CommandError::CredentialNotFound(what)) => {
            HttpError::not_found(format!("{what} not found"))
        }
        NodeError::Rejected(CommandError::InvalidCredential(why)) => HttpError::new(StatusCode::CONFLICT, why),
        NodeError::Rejected(CommandError::LimitReached(why)) => HttpError::unprocessable(why),
        NodeError::Rejected(CommandError::InvalidLink(why)) if why.starts_with("no link named") => {
            HttpError::not_found(why)
        }
        NodeError::Rejected(CommandError::InvalidLink(why)) => HttpError::new(StatusCode::CONFLICT, why),
        NodeError::Rejected(e) => HttpError::bad_request(e.to_string()),
        other => HttpError::unavailable(format!("metadata unavailable: {other}")),
    }
}

async fn propose(agent: &Agent, command: Command) -> Result<(), HttpError> {
    agent.metadata.propose(command).await.map(drop).map_err(command_error)
}

async fn list_links(State(agent): State<Arc<Agent>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "links": crate::links::links_json(&agent.metadata.read(), None) }))
}

async fn show_link(
    State(agent): State<Arc<Agent>>,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, HttpError> {
    let mut found = crate::links::links_json(&agent.metadata.read(), Some(&name));
    found.pop().map(Json).ok_or_else(|| HttpError::not_found(format!("link {name:?} not found")))
}

/// Creates a link, or replaces the config of one that still mirrors.
async fn set_link(
    State(agent): State<Arc<Agent>>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let request: crate::links::LinkRequest = json_body(&headers, &body)?;
    let name = request.name.clone();
    let command = crate::links::set_link_command(&agent.metadata.read(), request, floe_metadata::now_ms())
        .map_err(HttpError::bad_request)?;
    propose(&agent, command).await?;
    let shown = crate::links::links_json(&agent.metadata.read(), Some(&name)).pop().unwrap_or_default();
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

async fn delete_link(State(agent): State<Arc<Agent>>, Path(name): Path<String>) -> Result<StatusCode, HttpError> {
    propose(&agent, Command::DeleteLink { name }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stops a link and makes its topics writable.
async fn promote_link(
    State(agent): State<Arc<Agent>>,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, HttpError> {
    propose(&agent, Command::PromoteLink { name: name.clone(), now_ms: floe_metadata::now_ms() }).await?;
    let shown = crate::links::links_json(&agent.metadata.read(), Some(&name)).pop().unwrap_or_default();
    Ok(Json(shown))
}

/// Failback: link `name` from the cluster where a link was promoted (its source), given the
/// promoted link's fork offsets; this cluster's copies of its topics are cut back to them.
async fn reverse_link(
    State(agent): State<Arc<Agent>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let mut request: crate::links::ReverseRequest = json_body(&headers, &body)?;
    if !request.link.name.is_empty() && request.link.name != name {
        return Err(HttpError::bad_request(format!("the link is named {name:?} by the path")));
    }
    request.link.name = name.clone();
    let commands = crate::links::reverse_commands(&agent.metadata.read(), request, floe_metadata::now_ms())
        .map_err(HttpError::bad_request)?;
    for command in commands {
        propose(&agent, command).await?;
    }
    let shown = crate::links::links_json(&agent.metadata.read(), Some(&name)).pop().unwrap_or_default();
    Ok((StatusCode::CREATED, Json(shown)).into_response())
}

/// What `/v1/cluster` shows, for the operator (who has no API key): metadata nodes, agents
/// and their zones.
async fn cluster(State(agent): State<Arc<Agent>>) -> Json<serde_json::Value> {
    Json(super::status::cluster_json(&agent.metadata))
}

async fn list(State(agent): State<Arc<Agent>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "tenants": tenants::tenants_json(&agent.metadata.read()) }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTenant {
    name: String,
}

async fn create_tenant(
    State(agent): State<Arc<Agent>>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let request: CreateTenant = json_body(&headers, &body)?;
    propose(&agent, Command::CreateTenant { name: request.name.clone(), now_ms: floe_metadata::now_ms() }).await?;
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "tenant": request.name }))).into_response())
}

async fn delete_tenant(State(agent): State<Arc<Agent>>, Path(tenant): Path<String>) -> Result<StatusCode, HttpError> {
    propose(&agent, Command::DeleteTenant { name: tenant }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Quotas {
    #[serde(default)]
    produce_bytes_per_sec: Option<u64>,
    #[serde(default)]
    fetch_bytes_per_sec: Option<u64>,
    #[serde(default)]
    partitions: Option<u32>,
    #[serde(default)]
    requests_per_sec: Option<u64>,
    #[serde(default)]
    storage_bytes: Option<u64>,
    #[serde(default)]
    topics: Option<u64>,
    #[serde(default)]
    groups: Option<u64>,
    #[serde(default)]
    transactional_ids: Option<u64>,
    #[serde(default)]
    producer_ids: Option<u64>,
    #[serde(default)]
    acls: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cors {
    origins: Vec<String>,
}

/// Replaces the origins browsers may call the HTTP API from with the tenant's keys.
async fn set_cors(
    State(agent): State<Arc<Agent>>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<StatusCode, HttpError> {
    let cors: Cors = json_body(&headers, &body)?;
    propose(&agent, Command::SetTenantCorsOrigins { tenant, origins: cors.origins }).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces a tenant's quotas; a rate, partition or storage quota left out is unlimited, a
/// table share left out is its default.
async fn set_quotas(
    State(agent): State<Arc<Agent>>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<StatusCode, HttpError> {
    let q: Quotas = json_body(&headers, &body)?;
    let quotas = floe_metadata::TenantQuotas {
        produce_bytes_per_sec: q.produce_bytes_per_sec,
        fetch_bytes_per_sec: q.fetch_bytes_per_sec,
        partitions: q.partitions,
        requests_per_sec: q.requests_per_sec,
        storage_bytes: q.storage_bytes,
        topics: q.topics,
        groups: q.groups,
        transactional_ids: q.transactional_ids,
        producer_ids: q.producer_ids,
        acls: q.acls,
    };
    propose(&agent, Command::SetTenantQuotas { tenant, quotas: quotas.into() }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpsertUser {
    password: String,
    #[serde(default = "default_mechanisms")]
    mechanisms: Vec<String>,
    #[serde(default = "default_iterations")]
    iterations: u32,
}

fn default_mechanisms() -> Vec<String> {
    vec!["SCRAM-SHA-256".into(), "SCRAM-SHA-512".into()]
}

fn default_iterations() -> u32 {
    tenants::DEFAULT_ITERATIONS
}

async fn upsert_user(
    State(agent): State<Arc<Agent>>,
    Path((tenant, user)): Path<(String, String)>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<StatusCode, HttpError> {
    let request: UpsertUser = json_body(&headers, &body)?;
    let commands = tenants::user_commands(&tenant, &user, &request.password, &request.mechanisms, request.iterations)
        .map_err(HttpError::unprocessable)?;
    for command in commands {
        propose(&agent, command).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_user(State(agent): State<Arc<Agent>>, Path(user): Path<String>) -> Result<StatusCode, HttpError> {
    propose(&agent, Command::DeleteUser { user }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateApiKey {
    user: String,
    #[serde(default)]
    expires_in_secs: Option<u64>,
}

async fn create_api_key(
    State(agent): State<Arc<Agent>>,
    Path(tenant): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let request: CreateApiKey = json_body(&headers, &body)?;
    let (key_id, token, command) =
        tenants::new_api_key(&tenant, &request.user, request.expires_in_secs, floe_metadata::now_ms())
            .map_err(HttpError::unprocessable)?;
    propose(&agent, command).await?;
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "key_id": key_id, "token": token }))).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyQuotas {
    #[serde(default)]
    produce_bytes_per_sec: Option<u64>,
    #[serde(default)]
    fetch_bytes_per_sec: Option<u64>,
    #[serde(default)]
    requests_per_sec: Option<u64>,
}

/// Replaces an API key's own rate quotas (those left out: none of its own); its tenant's apply
/// as well.
async fn set_api_key_quotas(
    State(agent): State<Arc<Agent>>,
    Path(key_id): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<StatusCode, HttpError> {
    let q: KeyQuotas = json_body(&headers, &body)?;
    let quotas = floe_metadata::ApiKeyQuotas {
        produce_bytes_per_sec: q.produce_bytes_per_sec,
        fetch_bytes_per_sec: q.fetch_bytes_per_sec,
        requests_per_sec: q.requests_per_sec,
    };
    propose(&agent, Command::SetApiKeyQuotas { key_id, quotas: quotas.into() }).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_api_key(State(agent): State<Arc<Agent>>, Path(key_id): Path<String>) -> Result<StatusCode, HttpError> {
    propose(&agent, Command::DeleteApiKey { key_id }).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsageParams {
    tenant: Option<String>,
    from: Option<String>,
    to: Option<String>,
    granularity: Option<String>,
}

/// Tenants' metered usage (`crate::usage`), read after catching up with the metadata leader.
async fn usage(State(agent): State<Arc<Agent>>, Query(params): Query<UsageParams>) -> Result<Response, HttpError> {
    let query = crate::usage::UsageQuery::parse(
        params.tenant,
        params.from.as_deref(),
        params.to.as_deref(),
        params.granularity.as_deref(),
    )
    .map_err(HttpError::bad_request)?;
    agent.metadata.catch_up().await.map_err(command_error)?;
    let answer = query.answer(&agent.metadata.read().usage).map_err(HttpError::unprocessable)?;
    Ok(Json(answer).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportUsage {
    /// Any time within the hour: RFC 3339 or milliseconds since the epoch.
    hour: String,
}

/// Writes the next revision of an hour's usage file now (the storage-job agent does so by itself
/// once an hour is over): to check an export, or rebuild one.
async fn export_usage(
    State(agent): State<Arc<Agent>>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let request: ExportUsage = json_body(&headers, &body)?;
    let at = crate::usage::parse_time("hour", &request.hour).map_err(HttpError::bad_request)?;
    let hour_ms = at.div_euclid(floe_metadata::HOUR_MS) * floe_metadata::HOUR_MS;
    agent.metadata.catch_up().await.map_err(command_error)?;
    match floe_agent::usage::export::export_hour(&agent, hour_ms).await {
        Ok(Some(file)) => {
            Ok((StatusCode::CREATED, Json(serde_json::json!({ "file": format!("usage/{file}") }))).into_response())
        }
        Ok(None) => Err(HttpError::not_found(format!("no usage in the hour of {}", crate::usage::rfc3339(hour_ms)))),
        Err(e) => Err(HttpError::unavailable(format!("exporting the hour: {e}"))),
    }
}
