//! `GET /v3/clusters` and `GET /v3/clusters/{cluster}`: the one cluster an endpoint serves, as
//! REST v3 lists it, so clients can find the id every other path starts with.

use std::sync::Arc;

use crate::extract::Path;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use floe_agent::Agent;
use serde_json::Value;

use crate::error::HttpError;

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new().route("/v3/clusters", get(list)).route("/v3/clusters/{cluster}", get(describe)).with_state(agent)
}

/// The cluster's id if `cluster` names it; 404 otherwise, 503 before the cluster is initialized.
pub(crate) fn check_cluster(agent: &Agent, cluster: &str) -> Result<String, HttpError> {
    let cluster_id = agent.metadata.read().cluster_id.clone();
    if cluster_id.is_empty() {
        return Err(HttpError::unavailable("metadata not initialized"));
    }
    if cluster != cluster_id {
        return Err(HttpError::not_found(format!(
            "cluster {cluster:?} not found; this endpoint serves {cluster_id:?}"
        )));
    }
    Ok(cluster_id)
}

fn cluster(agent: &Agent, cluster_id: &str) -> Value {
    let controller = agent.metadata.read().agents.keys().next().copied().unwrap_or(agent.config.node_id);
    serde_json::json!({
        "kind": "KafkaCluster",
        "cluster_id": cluster_id,
        "controller_id": controller,
        "metadata": { "self": format!("/v3/clusters/{cluster_id}") },
    })
}

async fn list(State(agent): State<Arc<Agent>>) -> Result<Json<Value>, HttpError> {
    let cluster_id = agent.metadata.read().cluster_id.clone();
    let cluster_id = check_cluster(&agent, &cluster_id)?;
    Ok(Json(serde_json::json!({ "kind": "KafkaClusterList", "data": [cluster(&agent, &cluster_id)] })))
}

async fn describe(State(agent): State<Arc<Agent>>, Path(id): Path<String>) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &id)?;
    Ok(Json(cluster(&agent, &cluster_id)))
}
