//! Floe's HTTP endpoints (axum) on `--http-addr`: produce in the REST v3 shape, liveness,
//! readiness, Prometheus metrics and the metadata cluster's status.

mod body;
mod error;
mod extract;
mod limits;
mod metrics;
mod produce;
mod routes;

use std::sync::Arc;

use axum::Router;
use floe_agent::Agent;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves the HTTP API (produce, read, admin, health, metrics) until `stop` turns true.
pub async fn serve_http(agent: Arc<Agent>, listener: TcpListener, stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let app = Router::new()
        .merge(routes::status::router(agent.metadata.clone()))
        .merge(routes::clusters::router(agent.clone()))
        .merge(routes::records::router(agent.clone()))
        .merge(routes::consume::router(agent.clone(), stop.clone()))
        .merge(routes::admin::router(agent.clone()))
        .merge(routes::openapi::router(agent.clone()))
        .merge(routes::health::router(agent))
        .merge(routes::metrics::router())
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn(metrics::record));
    serve(listener, app, stop).await
}

async fn serve(listener: TcpListener, app: Router, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}
