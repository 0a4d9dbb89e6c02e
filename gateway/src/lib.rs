//! Floe's HTTP endpoints (axum) on `--http-addr`: produce in the REST v3 shape, liveness,
//! readiness, Prometheus metrics and the metadata cluster's status.

mod auth;
mod body;
mod connections;
mod error;
mod extract;
mod limits;
pub mod links;
mod metrics;
mod produce;
mod quotas;
mod routes;
mod schema_json;
pub mod tenants;
mod tls;
pub mod usage;

pub use connections::HttpConnectionLimits;
pub use limits::CallerLimits;
pub use routes::operator::OperatorToken;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::connect_info::MockConnectInfo;
use floe_agent::Agent;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// For the fuzz targets: parses `body` as the produce endpoints do (JSON records one after
/// another), turns each into a record, and builds them into one batch; returns the records read.
/// Never panics, whatever the bytes.
#[doc(hidden)]
pub fn parse_records_for_fuzzing(body: &[u8]) -> usize {
    produce::parse_for_fuzzing(body)
}

#[doc(hidden)]
pub use routes::schema_registry::registry_body_for_fuzzing;

/// How the HTTP API is served.
#[derive(Clone, Default)]
pub struct HttpConfig {
    /// Origins browsers may call the API from (CORS); `*` allows any. Empty: none.
    pub cors_origins: Vec<String>,
    /// Every request but health, readiness, metrics and the operator API must carry a valid API key.
    pub require_api_key: bool,
    /// Serve HTTPS with this certificate and key; plain HTTP when `None`.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Serve the operator API (`/v1/admin`: tenants, users, API keys) to holders of this token.
    pub operator_token: Option<OperatorToken>,
    /// Requests in flight per API key, tenant and (without a key) client address.
    pub caller_limits: CallerLimits,
    /// Who may read `/metrics`: its labels name every tenant's topics and groups.
    pub metrics_access: MetricsAccess,
    /// Connections at once, per address, and how long one may stay silent.
    pub connection_limits: HttpConnectionLimits,
}

/// Who may read `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Anyone who reaches the port: a private network's scraper.
    #[default]
    Open,
    /// Holders of the operator token (`Authorization: Bearer <token>`): a shared endpoint,
    /// where tenants must not read each other's topic and group names.
    Operator,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("cors_origins", &self.cors_origins)
            .field("require_api_key", &self.require_api_key)
            .field("tls", &self.tls.is_some())
            .field("operator_api", &self.operator_token.is_some())
            .field("caller_limits", &self.caller_limits)
            .field("metrics_access", &self.metrics_access)
            .field("connection_limits", &self.connection_limits)
            .finish()
    }
}

/// Serves the HTTP API (produce, read, admin, health, metrics) until `stop` turns true.
pub async fn serve_http(
    agent: Arc<Agent>,
    config: HttpConfig,
    listener: TcpListener,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = api_routes(&agent, &config, &stop)?;
    serve(app, agent, config, ("http", listener), stop).await
}

/// The HTTP API as [`serve_http`] serves it, with every layer of its listener, as a service to
/// call directly: for tests (`tower::ServiceExt::oneshot`) and embedders that bring their own
/// transport. Every request is taken as coming from `peer` (limits per address, failed
/// authentications); `stop` ends event streams as the listener's does.
pub fn http_router(
    agent: Arc<Agent>,
    config: &HttpConfig,
    peer: SocketAddr,
    stop: watch::Receiver<bool>,
) -> std::io::Result<Router> {
    let app = api_routes(&agent, config, &stop)?;
    let app = layered(app, agent, config)?;
    // A listener gives each request its connection's address and request count; without one,
    // `peer`, and a count of its own that nothing reads (idle connections are the listener's).
    Ok(app.layer(MockConnectInfo(auth::Peer(peer, connections::Busy::default()))))
}

/// The HTTP API's routes, before the layers of [`layered`].
fn api_routes(agent: &Arc<Agent>, config: &HttpConfig, stop: &watch::Receiver<bool>) -> std::io::Result<Router> {
    let mut app = Router::new()
        .merge(routes::status::router(agent.metadata.clone()))
        .merge(routes::clusters::router(agent.clone()))
        .merge(routes::records::router(agent.clone()))
        .merge(routes::consume::router(agent.clone(), stop.clone()))
        .merge(routes::admin::router(agent.clone()))
        .merge(routes::acls::router(agent.clone()))
        .merge(routes::schema_registry::router(agent.clone()))
        .merge(routes::iceberg::router(agent.clone()))
        .merge(routes::openapi::router(agent.clone()))
        .merge(routes::health::router(agent.clone()))
        .merge(routes::console::router())
        .merge(routes::metrics::router(agent.clone(), config.metrics_access, config.operator_token.clone())?)
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed);
    if let Some(token) = config.operator_token.clone() {
        app = app.merge(routes::operator::router(agent.clone(), token));
    }
    Ok(app)
}

/// Serves `/metrics` alone (the process-wide registry, unauthenticated, as agents serve it by
/// default) until `stop` turns true: for processes without the HTTP API, such as metadata nodes.
pub async fn serve_metrics(listener: TcpListener, stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let app = routes::metrics::bare_router()
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn(connections::busy))
        .into_make_service_with_connect_info::<auth::Peer>();
    let listener = connections::LimitedListener::new(listener, HttpConnectionLimits::default(), "metrics");
    let mut stop = stop;
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    axum::serve(listener, app).with_graceful_shutdown(stopped).await
}

/// Serves the schema registry alone, at the root of `listener` (`--schema-registry-addr`), with
/// the HTTP listener's authentication, quotas and limits, until `stop` turns true.
pub async fn serve_schema_registry(
    agent: Arc<Agent>,
    config: HttpConfig,
    listener: TcpListener,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = routes::schema_registry::api(agent.clone())
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed);
    serve(app, agent, config, ("schema_registry", listener), stop).await
}

/// Serves `app` behind the layers every HTTP listener has ([`layered`]), with connection limits
/// and TLS. The listener's name labels its connections in `floe_connections`.
async fn serve(
    app: Router,
    agent: Arc<Agent>,
    config: HttpConfig,
    (name, listener): (&'static str, TcpListener),
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = layered(app, agent, &config)?;
    let mut stop = stop;
    let stopped = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    let listener = connections::LimitedListener::new(listener, config.connection_limits, name);
    match config.tls {
        Some(acceptor) => {
            let app = app.into_make_service_with_connect_info::<auth::Peer>();
            axum::serve(tls::TlsListener::new(listener, acceptor)?, app).with_graceful_shutdown(stopped).await
        }
        None => {
            let app = app.into_make_service_with_connect_info::<auth::Peer>();
            axum::serve(listener, app).with_graceful_shutdown(stopped).await
        }
    }
}

/// `app` behind the layers every HTTP listener has: API keys, ACL context, per-caller and
/// per-tenant limits and quotas, metrics, request counts per connection and CORS.
fn layered(mut app: Router, agent: Arc<Agent>, config: &HttpConfig) -> std::io::Result<Router> {
    let agent_for_cors = agent.clone();
    // Inside the API-key layer, which names the tenant.
    app = app.layer(axum::middleware::from_fn_with_state(agent.clone(), quotas::requests));
    // Inside the API-key layer, which names the caller and its key.
    let callers = Arc::new(limits::CallersInFlight::default());
    app = app.layer(axum::middleware::from_fn_with_state((config.caller_limits, callers), limits::callers_in_flight));
    if agent.config.authorizer.is_some() {
        // Inside the API-key layer, which names the caller first.
        app = app.layer(axum::middleware::from_fn_with_state(agent.clone(), auth::access));
    }
    if config.require_api_key {
        app = app.layer(axum::middleware::from_fn_with_state(agent, auth::require_api_key));
    }
    Ok(app
        .layer(axum::middleware::from_fn(limits::requests_in_flight))
        .layer(axum::middleware::from_fn(metrics::record))
        .layer(axum::middleware::from_fn(connections::busy))
        .layer(cors(agent_for_cors, &config.cors_origins)?))
}

/// The CORS policy: the configured origins, and those a tenant lists for its API keys, may call
/// every endpoint with any method and the headers clients send (`Content-Type`,
/// `Content-Encoding`, `Idempotency-Key`, `Last-Event-ID`).
fn cors(agent: Arc<Agent>, origins: &[String]) -> std::io::Result<tower_http::cors::CorsLayer> {
    use tower_http::cors::{AllowHeaders, AllowMethods, AllowOrigin, Any, CorsLayer};
    let any = origins.iter().any(|o| o == "*");
    let listed = origins
        .iter()
        .filter(|o| *o != "*")
        .map(|o| axum::http::HeaderValue::from_str(o))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("--http-cors-origin: {e}")))?;
    let allow_origin = AllowOrigin::predicate(move |origin, parts| {
        any || listed.contains(origin) || auth::tenant_allows_origin(&agent, origin, &parts.headers)
    });
    // Mirrored rather than `*`, which older browsers do not accept in every position.
    Ok(CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods(AllowMethods::mirror_request())
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers(Any))
}
