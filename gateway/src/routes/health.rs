//! Liveness and readiness.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use floe_agent::Agent;

use crate::error::HttpError;

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).with_state(agent)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready once the metadata state is initialized (the agent can assign offsets).
async fn readyz(State(agent): State<Arc<Agent>>) -> Result<Json<serde_json::Value>, HttpError> {
    let cluster_id = agent.metadata.read().cluster_id.clone();
    if cluster_id.is_empty() {
        return Err(HttpError::unavailable("metadata not initialized"));
    }
    Ok(Json(serde_json::json!({ "status": "ready", "cluster_id": cluster_id })))
}
