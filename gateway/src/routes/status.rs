//! The metadata cluster's status as this process sees it: what `floe admin cluster` shows.
//! A tenant's API key sees only what is its own (its topic and partition counts) and the
//! agents' ids; the metadata nodes' addresses, Raft's view and cluster-wide counts are the
//! operator's (`/v1/admin/cluster`), or everyone's where the API runs without keys.

use axum::extract::State;
use axum::routing::get;
use axum::{Extension, Json, Router};
use floe_metadata::Metadata;

use crate::auth::Caller;

pub(crate) fn router(metadata: Metadata) -> Router {
    Router::new().route("/v1/cluster", get(status)).with_state(metadata)
}

async fn status(State(metadata): State<Metadata>, caller: Option<Extension<Caller>>) -> Json<serde_json::Value> {
    Json(match caller {
        Some(Extension(caller)) => tenant_json(&metadata, &caller),
        None => cluster_json(&metadata),
    })
}

/// As this agent's Metadata answers list them: its mirror may lag another agent's.
fn live_agent_ids(state: &floe_metadata::State) -> Vec<i32> {
    let session_ms = i64::try_from(floe_agent::membership::AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
    state.live_agents(floe_metadata::now_ms(), session_ms).map(|a| a.info.agent_id).collect()
}

/// What a tenant's key may see.
fn tenant_json(metadata: &Metadata, caller: &Caller) -> serde_json::Value {
    let state = metadata.read();
    let own = state
        .topic_ids
        .iter()
        .filter(|(name, _)| caller.namespace.owns(name))
        .filter_map(|(_, id)| state.topics.get(id));
    let (topics, partitions) = own.fold((0, 0), |(t, p), topic| (t + 1, p + topic.partitions.len()));
    serde_json::json!({
        "cluster_id": state.cluster_id,
        "tenant": caller.tenant,
        "topic_count": topics,
        "partition_count": partitions,
        "live_agent_ids": live_agent_ids(&state),
    })
}

/// The status `/v1/cluster` answers without API keys, and the operator's `/v1/admin/cluster`.
pub(crate) fn cluster_json(metadata: &Metadata) -> serde_json::Value {
    let raft = metadata.status();
    let state = metadata.read();
    let partition_count: usize = state.topics.values().map(|t| t.partitions.len()).sum();
    let referenced = state.objects.values().filter(|o| o.reference_count > 0).count();
    serde_json::json!({
        "cluster_id": state.cluster_id,
        "applied_index": state.applied_index,
        "topic_count": state.topics.len(),
        "partition_count": partition_count,
        "object_count": state.objects.len(),
        "referenced_object_count": referenced,
        "live_agent_ids": live_agent_ids(&state),
        "metadata_format": state.format,
        "agents": agents_json(&state),
        "raft": raft,
    })
}

/// Each live agent's zone, roles, agent group and whether it has a peer listener (not its
/// addresses).
fn agents_json(state: &floe_metadata::State) -> Vec<serde_json::Value> {
    let session_ms = i64::try_from(floe_agent::membership::AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
    state
        .live_agents(floe_metadata::now_ms(), session_ms)
        .map(|a| {
            let profile = state.agent_profile(a.info.agent_id);
            serde_json::json!({
                "agent_id": a.info.agent_id,
                "zone": a.info.zone,
                "roles": profile.roles.to_string(),
                "agent_group": profile.group,
                "peer_listener": state.agent_peer(a.info.agent_id).is_some(),
            })
        })
        .collect()
}
