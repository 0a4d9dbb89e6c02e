//! `GET /openapi.json`: the API's OpenAPI document (`gateway/openapi.json`), with the one cluster
//! id this endpoint serves filled in as the only value `cluster_id` takes.

use std::sync::{Arc, LazyLock};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use floe_agent::Agent;
use serde_json::Value;

use crate::error::HttpError;

static DOCUMENT: LazyLock<Result<Value, String>> =
    LazyLock::new(|| serde_json::from_str(include_str!("../../openapi.json")).map_err(|e| e.to_string()));

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new().route("/openapi.json", get(document)).with_state(agent)
}

async fn document(State(agent): State<Arc<Agent>>) -> Result<Json<Value>, HttpError> {
    let mut document = DOCUMENT.clone().map_err(|e| {
        HttpError::new(axum::http::StatusCode::INTERNAL_SERVER_ERROR, format!("openapi.json does not parse: {e}"))
    })?;
    let cluster_id = agent.metadata.read().cluster_id.clone();
    if !cluster_id.is_empty()
        && let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut)
    {
        for parameter in paths
            .values_mut()
            .filter_map(Value::as_object_mut)
            .flat_map(|operations| operations.values_mut())
            .filter_map(|operation| operation.get_mut("parameters").and_then(Value::as_array_mut))
            .flatten()
            .filter(|p| p.get("name").and_then(Value::as_str) == Some("cluster_id"))
        {
            parameter["schema"]["enum"] = serde_json::json!([cluster_id]);
        }
    }
    Ok(Json(document))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_parses() {
        assert!(super::DOCUMENT.is_ok(), "{:?}", super::DOCUMENT.as_ref().err());
    }
}
