//! Floe's HTTP endpoints (axum): liveness, readiness and Prometheus metrics on `--http-addr`,
//! and the metadata node's status on `--metadata-addr`.

mod error;
mod routes;

use std::sync::Arc;

use axum::Router;
use floe_agent::Agent;
use floe_metadata::MetadataNode;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves `/healthz`, `/readyz` and `/metrics` until `stop` turns true.
pub async fn serve_http(agent: Arc<Agent>, listener: TcpListener, stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let app =
        Router::new().merge(routes::health::router(agent)).merge(routes::metrics::router()).fallback(error::not_found);
    serve(listener, app, stop).await
}

/// Serves the metadata node's status at `/v1/status` until `stop` turns true.
pub async fn serve_metadata(
    metadata: MetadataNode,
    listener: TcpListener,
    stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let app = routes::status::router(metadata).fallback(error::not_found);
    serve(listener, app, stop).await
}

async fn serve(listener: TcpListener, app: Router, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        })
        .await
}
