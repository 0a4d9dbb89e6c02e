//! An Iceberg REST catalog of the table topics' tables, read-only, under `/iceberg` on the HTTP
//! listener: `uri=http://AGENT:8080/iceberg` attaches pyiceberg, Spark or Trino. A topic's
//! name split at its dots gives the namespace and the table (`sales.orders` is table `orders`
//! in namespace `sales`; a topic without dots is in `default`). Callers see their own tenant's
//! tables only; another tenant's are answered 404, as if they did not exist.
//!
//! The catalog scopes metadata, not files: reading the Parquet files needs access to the bucket
//! (IAM in a BYOC deployment).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::extract::rejection::FormRejection;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Form, Json, Router};
use floe_agent::Agent;
use floe_metadata::State as MetadataState;
use floe_metadata::acl::{AclOperation, AclResourceType};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::extract::{Path, Query, Scope};

/// The namespace of topics without a dot in their name.
const DEFAULT_NAMESPACE: &str = "default";
/// How pyiceberg and the spec join namespace levels in a path.
const NAMESPACE_SEPARATOR: char = '\u{1f}';
/// Tables in one listing page.
const PAGE_TABLES_MAX: usize = 1000;
/// Metadata files kept parsed (they never change once written).
const METADATA_CACHE_ENTRIES_MAX: usize = 256;

/// What the catalog serves: the agent, and parsed metadata files by location.
#[derive(Debug, Clone)]
pub(crate) struct Catalog {
    agent: Arc<Agent>,
    metadata_cache: Arc<Mutex<HashMap<String, Arc<Value>>>>,
}

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    let catalog = Catalog { agent, metadata_cache: Arc::default() };
    Router::new().nest("/iceberg/v1", api()).with_state(catalog)
}

/// A route of the spec's that this catalog serves read-only: `allow` is what it answers (the
/// `Allow` header of a 405), `writes` the spec's writes on it, which are forbidden.
fn read_only(route: MethodRouter<Catalog>, allow: &'static str, writes: &'static [Method]) -> MethodRouter<Catalog> {
    // A forbidden write is the spec's answer to a write a catalog does not allow; methods the
    // spec has no use for here are not allowed.
    let options = move || async move { (StatusCode::NO_CONTENT, [(axum::http::header::ALLOW, allow)]) };
    route.options(options).fallback(move |method: Method| async move {
        if writes.contains(&method) {
            return IcebergError::forbidden("this catalog is read-only: Floe writes table topics' tables")
                .into_response();
        }
        let error = IcebergError {
            status: StatusCode::METHOD_NOT_ALLOWED,
            kind: "BadRequestException",
            message: format!("{method} is not a method of this route"),
        };
        let mut response = error.into_response();
        response.headers_mut().insert(axum::http::header::ALLOW, axum::http::HeaderValue::from_static(allow));
        response
    })
}

fn api() -> Router<Catalog> {
    Router::new()
        .route("/config", get(config))
        .route("/oauth/tokens", post(oauth_token))
        .route("/namespaces", read_only(get(list_namespaces), "GET, HEAD, POST", &[Method::POST]))
        .route(
            "/namespaces/{namespace}",
            read_only(get(load_namespace).head(namespace_exists), "GET, HEAD, DELETE", &[Method::DELETE]),
        )
        .route("/namespaces/{namespace}/properties", read_only(MethodRouter::new(), "POST", &[Method::POST]))
        .route("/namespaces/{namespace}/tables", read_only(get(list_tables), "GET, HEAD, POST", &[Method::POST]))
        .route(
            "/namespaces/{namespace}/tables/{table}",
            read_only(get(load_table).head(table_exists), "GET, HEAD, POST, DELETE", &[Method::POST, Method::DELETE]),
        )
        .route("/namespaces/{namespace}/tables/{table}/metrics", post(report_metrics))
        .route("/tables/rename", read_only(MethodRouter::new(), "POST", &[Method::POST]))
}

/// A client's scan or commit report: checked to be a JSON object, then dropped (Floe's own
/// metrics say what the catalog serves).
async fn report_metrics(body: crate::extract::SmallBody) -> Result<StatusCode, IcebergError> {
    serde_json::from_slice::<serde_json::Map<String, Value>>(&body.0)
        .map_err(|e| IcebergError::bad_request(format!("a metrics report is a JSON object: {e}")))?;
    Ok(StatusCode::NO_CONTENT)
}

/// The spec's error body: `{"error": {"message", "type", "code"}}`.
#[derive(Debug)]
pub(crate) struct IcebergError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl IcebergError {
    fn not_found(kind: &'static str, message: String) -> Self {
        Self { status: StatusCode::NOT_FOUND, kind, message }
    }

    fn forbidden(message: &str) -> Self {
        Self { status: StatusCode::FORBIDDEN, kind: "ForbiddenException", message: message.to_owned() }
    }

    fn bad_request(message: String) -> Self {
        Self { status: StatusCode::BAD_REQUEST, kind: "BadRequestException", message }
    }

    fn unavailable(message: String) -> Self {
        Self { status: StatusCode::SERVICE_UNAVAILABLE, kind: "ServiceUnavailableException", message }
    }
}

impl IntoResponse for IcebergError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"message": self.message, "type": self.kind, "code": self.status.as_u16()}});
        (self.status, Json(body)).into_response()
    }
}

/// Routes a client may call, as `GET /config` lists them: clients call nothing else, so a
/// write is refused before it is sent.
const ENDPOINTS: &[&str] = &[
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
];

async fn config() -> Json<Value> {
    Json(json!({"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS}))
}

#[derive(Deserialize)]
struct TokenRequest {
    grant_type: String,
    client_id: Option<String>,
    client_secret: Option<String>,
}

/// OAuth2 client credentials (how Spark and Trino present a `credential`): the client id and
/// secret are an API key's id and secret, and the token handed back is the key itself.
async fn oauth_token(
    State(catalog): State<Catalog>,
    peer: axum::extract::ConnectInfo<crate::auth::Peer>,
    request: Result<Form<TokenRequest>, FormRejection>,
) -> Response {
    let refuse = |status: StatusCode, error: &str, description: &str| {
        (status, Json(json!({"error": error, "error_description": description}))).into_response()
    };
    // RFC 6749's error JSON for a body that is not a token request, not axum's plain text.
    let request = match request {
        Ok(Form(request)) => request,
        Err(rejection) => return refuse(StatusCode::BAD_REQUEST, "invalid_request", &rejection.body_text()),
    };
    if request.grant_type != "client_credentials" {
        return refuse(StatusCode::BAD_REQUEST, "unsupported_grant_type", "only client_credentials is supported");
    }
    let now = std::time::Instant::now();
    let ip = peer.0.0.ip();
    if catalog.agent.auth_failures.blocked(ip, now).is_some() {
        return refuse(StatusCode::TOO_MANY_REQUESTS, "invalid_client", "too many failed authentications");
    }
    let (Some(id), Some(secret)) = (request.client_id, request.client_secret) else {
        return refuse(StatusCode::BAD_REQUEST, "invalid_request", "client_id and client_secret are required");
    };
    if crate::auth::caller(&catalog.agent, &id, &secret).is_none() {
        catalog.agent.auth_failures.record_failure(ip, now);
        tokio::time::sleep(crate::auth::FAILURE_DELAY).await;
        return refuse(StatusCode::UNAUTHORIZED, "invalid_client", "the API key was not accepted");
    }
    Json(json!({
        "access_token": floe_auth::api_key::join(&id, &secret),
        "token_type": "bearer",
        "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
    }))
    .into_response()
}

/// A table the caller may see: the topic it comes from and the generation it is.
struct Listed {
    topic: String,
    /// `None`: the current table (or its dead-letter table, `<table>__dlq`); `Some(n)`:
    /// retired generation `n` (`<table>__v<n>`).
    generation: Option<u32>,
    location: String,
}

/// The caller's tables by namespace and name.
fn tables(state: &MetadataState, scope: &Scope) -> BTreeMap<Vec<String>, BTreeMap<String, Listed>> {
    let mut out: BTreeMap<Vec<String>, BTreeMap<String, Listed>> = BTreeMap::new();
    for (topic_id, table) in &state.tables {
        let Some(topic) = state.topics.get(topic_id) else { continue };
        let Some(shown) = scope.shown(&topic.name) else { continue };
        if !scope.may(state, AclOperation::Describe, AclResourceType::Topic, shown) {
            continue;
        }
        let (namespace, name) = identifier(shown);
        let in_namespace = out.entry(namespace).or_default();
        for retired in &table.retired {
            in_namespace.insert(
                format!("{name}__v{}", retired.generation),
                Listed {
                    topic: shown.to_owned(),
                    generation: Some(retired.generation),
                    location: retired.metadata_location.clone(),
                },
            );
        }
        if let Some(location) = &table.dead_letter_location {
            in_namespace.insert(
                format!("{name}__dlq"),
                Listed { topic: shown.to_owned(), generation: None, location: location.clone() },
            );
        }
        // A dotted topic wins over a dotless one of the same identifier (`default.x` and `x`).
        let dotted = shown.contains('.');
        let taken =
            in_namespace.get(&name).is_some_and(|other| other.generation.is_none() && other.topic.contains('.'));
        if dotted || !taken {
            in_namespace.insert(
                name,
                Listed { topic: shown.to_owned(), generation: None, location: table.metadata_location.clone() },
            );
        }
    }
    out
}

/// The namespace and table name of a topic.
fn identifier(topic: &str) -> (Vec<String>, String) {
    match topic.rsplit_once('.') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
            (namespace.split('.').map(str::to_owned).collect(), name.to_owned())
        }
        _ => (vec![DEFAULT_NAMESPACE.to_owned()], topic.to_owned()),
    }
}

fn namespace_of_path(text: &str) -> Vec<String> {
    text.split(NAMESPACE_SEPARATOR).map(str::to_owned).collect()
}

#[derive(Deserialize)]
struct ListNamespaces {
    parent: Option<String>,
}

async fn list_namespaces(
    State(catalog): State<Catalog>,
    scope: Scope,
    Query(query): Query<ListNamespaces>,
) -> Json<Value> {
    let state = catalog.agent.metadata.read();
    let parent = query.parent.as_deref().map(namespace_of_path).unwrap_or_default();
    // Every level that holds a table, below the parent: a namespace exists when a table in
    // it or under it does.
    let mut children = BTreeSet::new();
    for namespace in tables(&state, &scope).keys() {
        if namespace.len() > parent.len() && namespace.starts_with(&parent) {
            children.insert(namespace[..=parent.len()].to_vec());
        }
    }
    Json(json!({"namespaces": children}))
}

fn namespace_known(catalog: &Catalog, scope: &Scope, namespace: &[String]) -> bool {
    let state = catalog.agent.metadata.read();
    tables(&state, scope).keys().any(|held| held.starts_with(namespace))
}

async fn load_namespace(
    State(catalog): State<Catalog>,
    scope: Scope,
    Path(namespace): Path<String>,
) -> Result<Json<Value>, IcebergError> {
    let namespace = namespace_of_path(&namespace);
    if !namespace_known(&catalog, &scope, &namespace) {
        return Err(no_namespace(&namespace));
    }
    Ok(Json(json!({"namespace": namespace, "properties": {}})))
}

async fn namespace_exists(State(catalog): State<Catalog>, scope: Scope, Path(namespace): Path<String>) -> StatusCode {
    if namespace_known(&catalog, &scope, &namespace_of_path(&namespace)) {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

fn no_namespace(namespace: &[String]) -> IcebergError {
    IcebergError::not_found("NoSuchNamespaceException", format!("namespace {} does not exist", namespace.join(".")))
}

#[derive(Deserialize)]
struct ListTables {
    #[serde(rename = "pageToken")]
    page_token: Option<String>,
    #[serde(rename = "pageSize")]
    page_size: Option<usize>,
}

async fn list_tables(
    State(catalog): State<Catalog>,
    scope: Scope,
    Path(namespace): Path<String>,
    Query(query): Query<ListTables>,
) -> Result<Json<Value>, IcebergError> {
    let namespace = namespace_of_path(&namespace);
    let state = catalog.agent.metadata.read();
    let all = tables(&state, &scope);
    if !all.keys().any(|held| held.starts_with(&namespace)) {
        return Err(no_namespace(&namespace));
    }
    let size = query.page_size.unwrap_or(PAGE_TABLES_MAX).clamp(1, PAGE_TABLES_MAX);
    let after = query.page_token.unwrap_or_default();
    let names: Vec<&String> =
        all.get(&namespace).into_iter().flat_map(BTreeMap::keys).filter(|n| **n > after).collect();
    let page = &names[..names.len().min(size)];
    let identifiers: Vec<Value> = page.iter().map(|name| json!({"namespace": namespace, "name": name})).collect();
    let mut body = json!({"identifiers": identifiers});
    if names.len() > size
        && let Some(last) = page.last()
    {
        body["next-page-token"] = json!(last);
    }
    Ok(Json(body))
}

/// The metadata location of a table the caller may read.
fn locate(catalog: &Catalog, scope: &Scope, namespace: &str, table: &str) -> Result<String, IcebergError> {
    let namespace = namespace_of_path(namespace);
    let state = catalog.agent.metadata.read();
    let all = tables(&state, scope);
    let missing = || {
        IcebergError::not_found("NoSuchTableException", format!("table {}.{table} does not exist", namespace.join(".")))
    };
    let listed = all.get(&namespace).and_then(|tables| tables.get(table)).ok_or_else(missing)?;
    if !scope.may(&state, AclOperation::Read, AclResourceType::Topic, &listed.topic) {
        return Err(IcebergError::forbidden("not authorized to read this table's topic"));
    }
    Ok(listed.location.clone())
}

async fn table_exists(
    State(catalog): State<Catalog>,
    scope: Scope,
    Path((namespace, table)): Path<(String, String)>,
) -> StatusCode {
    match locate(&catalog, &scope, &namespace, &table) {
        Ok(_) => StatusCode::NO_CONTENT,
        Err(e) => e.status,
    }
}

async fn load_table(
    State(catalog): State<Catalog>,
    scope: Scope,
    Path((namespace, table)): Path<(String, String)>,
) -> Result<Json<Value>, IcebergError> {
    let location = locate(&catalog, &scope, &namespace, &table)?;
    let metadata = catalog.metadata(&location).await?;
    let mut config = serde_json::Map::new();
    let store = &catalog.agent.store;
    if let Some(endpoint) = store.s3_endpoint() {
        config.insert("s3.endpoint".into(), json!(endpoint));
        config.insert("s3.path-style-access".into(), json!("true"));
    }
    if store.url().starts_with("s3://") {
        let region = std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION"));
        config.insert("s3.region".into(), json!(region.as_deref().unwrap_or("us-east-1")));
    }
    Ok(Json(json!({"metadata-location": location, "metadata": *metadata, "config": config})))
}

impl Catalog {
    /// The parsed metadata file at `location`, read once and kept (metadata files never change).
    async fn metadata(&self, location: &str) -> Result<Arc<Value>, IcebergError> {
        if let Some(cached) = self.metadata_cache.lock().ok().and_then(|cache| cache.get(location).cloned()) {
            return Ok(cached);
        }
        let store = &self.agent.store;
        let key = store
            .table_key_of_uri(location)
            .ok_or_else(|| IcebergError::bad_request(format!("{location} is not in this store")))?;
        let bytes = store
            .get_table_object(&key)
            .await
            .map_err(|e| IcebergError::unavailable(format!("reading the table's metadata: {e}")))?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| IcebergError::unavailable(format!("the table's metadata does not parse: {e}")))?;
        let value = Arc::new(value);
        if let Ok(mut cache) = self.metadata_cache.lock() {
            if cache.len() >= METADATA_CACHE_ENTRIES_MAX {
                cache.clear();
            }
            cache.insert(location.to_owned(), value.clone());
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_split_into_namespace_and_table() {
        assert_eq!(identifier("sales.eu.orders"), (vec!["sales".to_owned(), "eu".to_owned()], "orders".to_owned()));
        assert_eq!(identifier("orders"), (vec!["default".to_owned()], "orders".to_owned()));
        assert_eq!(identifier(".x"), (vec!["default".to_owned()], ".x".to_owned()));
        assert_eq!(identifier("x."), (vec!["default".to_owned()], "x.".to_owned()));
        assert_eq!(namespace_of_path("a\u{1f}b"), vec!["a".to_owned(), "b".to_owned()]);
    }
}
