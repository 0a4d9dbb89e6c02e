//! The metadata cluster's status as this process sees it: what `floe admin cluster` shows.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use floe_metadata::Metadata;

pub(crate) fn router(metadata: Metadata) -> Router {
    Router::new().route("/v1/cluster", get(status)).with_state(metadata)
}

async fn status(State(metadata): State<Metadata>) -> Json<serde_json::Value> {
    Json(cluster_json(&metadata))
}

/// The status `/v1/cluster` (and the operator's `/v1/admin/cluster`) answers.
pub(crate) fn cluster_json(metadata: &Metadata) -> serde_json::Value {
    let raft = metadata.status();
    let state = metadata.read();
    let partition_count: usize = state.topics.values().map(|t| t.partitions.len()).sum();
    let referenced = state.objects.values().filter(|o| o.reference_count > 0).count();
    // As this agent's Metadata answers list them: its mirror may lag another agent's.
    let session_ms = i64::try_from(floe_agent::membership::AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
    let live_agents: Vec<i32> =
        state.live_agents(floe_metadata::now_ms(), session_ms).map(|a| a.info.agent_id).collect();
    serde_json::json!({
        "cluster_id": state.cluster_id,
        "applied_index": state.applied_index,
        "topic_count": state.topics.len(),
        "partition_count": partition_count,
        "object_count": state.objects.len(),
        "referenced_object_count": referenced,
        "live_agent_ids": live_agents,
        "raft": raft,
    })
}
