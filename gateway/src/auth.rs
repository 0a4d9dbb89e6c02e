//! API-key authentication of the HTTP API. With `--http-require-api-key`, every request but
//! health, readiness, metrics and the operator API names a key: `Authorization: Bearer fk_<id>.<secret>`, or Basic with the key id as user and
//! the secret as password (as Confluent Cloud's REST clients send it). The key's user and
//! tenant go into the request's extensions. Failures wait a second and say only that the key
//! was not accepted.

use std::time::Duration;

use std::net::SocketAddr;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use base64::Engine;
use floe_agent::Agent;
use std::sync::Arc;

use crate::error::HttpError;

/// Who an authenticated request acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) tenant: String,
    pub(crate) user: String,
    /// The API key's id, for limits per key.
    pub(crate) key_id: String,
    /// The tenant's namespace (`floe_metadata::namespace`).
    pub(crate) namespace: floe_metadata::Namespace,
}

/// The client's address, for limiting failed authentication per source; the same for plain
/// TCP and TLS listeners.
/// With the connection's count of requests in progress (`connections::busy`).
#[derive(Clone, Debug)]
pub(crate) struct Peer(pub(crate) SocketAddr, pub(crate) crate::connections::Busy);

impl Connected<IncomingStream<'_, crate::connections::LimitedListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, crate::connections::LimitedListener>) -> Self {
        Self(*stream.remote_addr(), stream.io().requests())
    }
}

impl Connected<IncomingStream<'_, crate::tls::TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, crate::tls::TlsListener>) -> Self {
        Self(*stream.remote_addr(), stream.io().get_ref().0.requests())
    }
}

/// Paths served without an API key: probes and scrapers carry none, and the operator API
/// checks its own token. Everything else (records, admin, `/v1/cluster` with its internal
/// addresses, the API description) needs a key.
pub(crate) fn is_open(path: &str) -> bool {
    // The Iceberg catalog's token endpoint checks the key it is given itself.
    // The console's page and scripts hold nothing secret; what they ask for carries a key.
    matches!(path, "/healthz" | "/readyz" | "/metrics" | "/iceberg/v1/oauth/tokens")
        || path == "/console"
        || path.starts_with("/console/")
        || path.starts_with("/v1/admin/")
        || path == "/v1/admin"
}

/// How long a refused key waits for its 401: slows guessing, costs a typo little.
pub(crate) const FAILURE_DELAY: Duration = Duration::from_secs(1);

/// The key id and secret a request presents.
fn credentials(headers: &axum::http::HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    match scheme.to_ascii_lowercase().as_str() {
        "bearer" => floe_auth::api_key::split(rest.trim()).ok().map(|(id, secret)| (id.to_owned(), secret.to_owned())),
        "basic" => {
            let decoded = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            Some((id.trim_start_matches("fk_").to_owned(), secret.to_owned()))
        }
        _ => None,
    }
}

pub(crate) fn caller(agent: &Agent, id: &str, secret: &str) -> Option<Caller> {
    let state = agent.metadata.read();
    let key = state.api_keys.get(id)?;
    let live = key.expires_ms.is_none_or(|at| floe_metadata::now_ms() < at);
    let namespace = state.tenant_namespace(&key.tenant)?;
    (live && floe_auth::api_key::secret_matches(secret, &key.secret_sha256)).then(|| Caller {
        tenant: key.tenant.clone(),
        user: key.user.clone(),
        key_id: id.to_owned(),
        namespace,
    })
}

pub(crate) async fn require_api_key(
    State(agent): State<Arc<Agent>>,
    ConnectInfo(Peer(peer, _)): ConnectInfo<Peer>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_open(request.uri().path()) || request.method() == axum::http::Method::OPTIONS {
        return next.run(request).await;
    }
    let now = std::time::Instant::now();
    if let Some(wait) = agent.auth_failures.blocked(peer.ip(), now) {
        // Refused without checking the key: guessing gains nothing here.
        let secs = wait.as_secs().max(1);
        floe_agent::log_limited!(
            tracing::Level::INFO,
            %peer,
            "HTTP request refused: too many failed authentications from this address"
        );
        return HttpError::new(StatusCode::TOO_MANY_REQUESTS, floe_auth::AuthError::TooManyFailures(secs).to_string())
            .with_retry_after(secs)
            .into_response();
    }
    match credentials(request.headers()).and_then(|(id, secret)| caller(&agent, &id, &secret)) {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => {
            agent.auth_failures.record_failure(peer.ip(), now);
            floe_agent::log_limited!(
                tracing::Level::INFO,
                %peer,
                path = %request.uri().path(),
                "HTTP request with a missing or invalid API key"
            );
            tokio::time::sleep(FAILURE_DELAY).await;
            let mut response =
                HttpError::new(StatusCode::UNAUTHORIZED, "a valid API key is required (Authorization: Bearer <key>)")
                    .into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer, Basic"));
            response
        }
    }
}

/// With `--authorizer`: the caller's ACL access (`Caller` from its API key, or anonymous), for
/// the `Scope` of each handler.
pub(crate) async fn access(
    State(agent): State<Arc<Agent>>,
    ConnectInfo(Peer(peer, _)): ConnectInfo<Peer>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Caller>();
    let (user, tenant) = (caller.map(|c| c.user.clone()), caller.map(|c| c.tenant.clone()));
    if let Some(access) = floe_agent::access::Access::new(&agent.config, user.as_deref(), tenant.as_deref(), peer.ip())
    {
        request.extensions_mut().insert(access);
    }
    next.run(request).await
}

/// Whether a tenant lets browsers on `origin` call the API (CORS): the tenant of the API key the
/// request names, or, for a preflight (browsers send no key with it), any tenant. The key is not
/// checked here: a request with a bad one is refused anyway, and CORS only decides what a
/// browser may read.
pub(crate) fn tenant_allows_origin(agent: &Agent, origin: &HeaderValue, headers: &axum::http::HeaderMap) -> bool {
    let Ok(origin) = origin.to_str() else { return false };
    let state = agent.metadata.read();
    let lists = |t: &floe_metadata::TenantRecord| t.cors_origins.iter().any(|o| o == "*" || o == origin);
    match credentials(headers) {
        Some((id, _)) => state.api_keys.get(&id).and_then(|k| state.tenants.get(&k.tenant)).is_some_and(lists),
        None => state.tenants.values().any(lists),
    }
}
