//! Administration over HTTP in the REST v3 shape: topics (create, list, describe, partitions,
//! configs, delete) and consumer groups (list, describe with lag). Every change goes through the
//! same metadata commands and config checks as the Kafka admin APIs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::extract::Path;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use floe_agent::Agent;
use floe_metadata::groups::{GroupRequest, GroupResponse};
use floe_metadata::{Command, CommandError, NodeError, Outcome, State as MetadataState, Topic};
use serde::Deserialize;
use serde_json::Value;

use crate::error::HttpError;
use floe_metadata::acl::{AclOperation, AclResourceType};

use crate::extract::{Scope, SmallBody};
use crate::limits::ADMIN_CONFIGS_MAX;
use crate::routes::clusters::check_cluster;

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/v3/clusters/{cluster}/topics", get(list_topics).post(create_topic))
        .route("/v3/clusters/{cluster}/topics/{topic}", get(describe_topic).delete(delete_topic))
        .route("/v3/clusters/{cluster}/topics/{topic}/partitions", get(list_partitions))
        .route("/v3/clusters/{cluster}/topics/{topic}/configs", get(topic_configs))
        .route("/v3/clusters/{cluster}/topics/{topic}/configs:alter", post(alter_topic_configs))
        .route("/v3/clusters/{cluster}/consumer-groups", get(list_groups))
        .route("/v3/clusters/{cluster}/consumer-groups/{group}", get(describe_group))
        .with_state(agent)
}

/// A topic as REST v3 shows it, under the name the caller knows it by.
fn topic_json(cluster_id: &str, name: &str, topic: &Topic) -> Value {
    serde_json::json!({
        "kind": "KafkaTopic",
        "cluster_id": cluster_id,
        "topic_name": name,
        "topic_id": topic.topic_id.to_string(),
        "is_internal": false,
        "replication_factor": 1,
        "partitions_count": topic.partitions.len(),
    })
}

/// The caller's topic `name` (not found when another tenant's), if its ACLs allow `operation`
/// on it.
fn find_topic<'a>(
    state: &'a MetadataState,
    scope: &Scope,
    name: &str,
    operation: AclOperation,
) -> Result<&'a Topic, HttpError> {
    scope.authorize(state, operation, AclResourceType::Topic, name)?;
    state.topic_by_name(&scope.stored(name)).ok_or_else(|| HttpError::not_found(format!("topic {name:?} not found")))
}

async fn list_topics(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let state = agent.metadata.read();
    let described = |name: &&str| scope.may(&state, AclOperation::Describe, AclResourceType::Topic, name);
    let data: Vec<Value> = state
        .topics
        .values()
        .filter_map(|t| Some(topic_json(&cluster_id, scope.shown(&t.name).filter(described)?, t)))
        .collect();
    Ok(Json(serde_json::json!({ "kind": "KafkaTopicList", "data": data })))
}

async fn describe_topic(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let state = agent.metadata.read();
    Ok(Json(topic_json(&cluster_id, &topic, find_topic(&state, &scope, &topic, AclOperation::Describe)?)))
}

async fn list_partitions(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let state = agent.metadata.read();
    let t = find_topic(&state, &scope, &topic, AclOperation::Describe)?;
    let data: Vec<Value> = t
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            serde_json::json!({
                "kind": "KafkaPartition",
                "cluster_id": cluster_id,
                "topic_name": topic,
                "partition_id": i,
                "log_start_offset": p.log_start_offset,
                "high_watermark": p.next_offset,
                "last_stable_offset": p.last_stable_offset(),
                "size_bytes": p.index_bytes,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "kind": "KafkaPartitionList", "data": data })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateTopicRequest {
    topic_name: String,
    /// The cluster's `num.partitions` when absent.
    #[serde(default)]
    partitions_count: Option<i32>,
    /// Accepted for REST v3 clients; durability comes from the object store.
    #[serde(default)]
    replication_factor: Option<i32>,
    #[serde(default)]
    configs: Vec<ConfigEntry>,
    #[serde(default)]
    validate_only: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigEntry {
    name: String,
    #[serde(default)]
    value: Option<String>,
    /// For `configs:alter`: `SET` (the default) or `DELETE`.
    #[serde(default)]
    operation: Option<String>,
}

pub(crate) fn json_body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: &Bytes) -> Result<T, HttpError> {
    crate::body::require_media_type(headers, &["application/json"])?;
    serde_json::from_slice(body).map_err(|e| {
        if e.is_data() {
            HttpError::unprocessable(format!("invalid request: {e}"))
        } else {
            HttpError::bad_request(format!("request body is not JSON: {e}"))
        }
    })
}

pub(crate) fn command_error(e: NodeError) -> HttpError {
    match e {
        NodeError::Rejected(CommandError::TopicExists(name)) => {
            HttpError::new(StatusCode::CONFLICT, format!("topic {name:?} already exists"))
        }
        NodeError::Rejected(CommandError::UnknownTopicOrPartition) => HttpError::not_found("topic not found"),
        NodeError::Rejected(CommandError::LimitReached(why) | CommandError::QuotaExceeded(why)) => {
            HttpError::unprocessable(why)
        }
        NodeError::Rejected(e) => HttpError::bad_request(e.to_string()),
        other => HttpError::unavailable(format!("metadata unavailable: {other}")),
    }
}

fn validated_configs(entries: &[ConfigEntry]) -> Result<BTreeMap<String, String>, HttpError> {
    if entries.len() > ADMIN_CONFIGS_MAX {
        return Err(HttpError::unprocessable(format!("at most {ADMIN_CONFIGS_MAX} configs per request")));
    }
    let mut configs = BTreeMap::new();
    for entry in entries {
        let value = entry
            .value
            .as_deref()
            .ok_or_else(|| HttpError::bad_request(format!("config {} has no value", entry.name)))?;
        let value = floe_metadata::config::validate_topic_config(&entry.name, value)
            .map_err(|e| HttpError::bad_request(e.to_string()))?;
        configs.insert(entry.name.clone(), value);
    }
    Ok(configs)
}

async fn create_topic(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let request: CreateTopicRequest = json_body(&headers, &body)?;
    floe_metadata::validate_topic_name(&request.topic_name).map_err(|e| HttpError::bad_request(e.to_string()))?;
    {
        // Create on the cluster, or on the topic, as Kafka's CreateTopics asks.
        let state = agent.metadata.read();
        if !scope.may_cluster(&state, AclOperation::Create) {
            scope.authorize(&state, AclOperation::Create, AclResourceType::Topic, &request.topic_name)?;
        }
    }
    let stored = scope.stored(&request.topic_name);
    let partition_count = request.partitions_count.unwrap_or(agent.config.default_partition_count);
    if !(1..=floe_metadata::limits::TOPIC_PARTITION_COUNT_MAX).contains(&partition_count) {
        return Err(HttpError::bad_request(format!(
            "partitions_count {partition_count} is outside 1..={}",
            floe_metadata::limits::TOPIC_PARTITION_COUNT_MAX
        )));
    }
    if request.replication_factor.is_some_and(|r| r == 0 || r < -1) {
        return Err(HttpError::bad_request("replication_factor must be -1 or at least 1"));
    }
    let configs = validated_configs(&request.configs)?;
    if request.validate_only {
        if agent.metadata.read().topic_by_name(&stored).is_some() {
            return Err(HttpError::new(StatusCode::CONFLICT, format!("topic {:?} already exists", request.topic_name)));
        }
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let command =
        Command::CreateTopic { name: stored.clone(), topic_id: uuid::Uuid::new_v4(), partition_count, configs };
    match agent.metadata.propose(command).await.map_err(command_error)? {
        Outcome::TopicCreated { .. } => {}
        other => {
            return Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected outcome {other:?}")));
        }
    }
    let state = agent.metadata.read();
    let topic = state
        .topic_by_name(&stored)
        .ok_or_else(|| HttpError::unavailable(format!("topic {:?} created but not yet visible", request.topic_name)))?;
    Ok((StatusCode::CREATED, Json(topic_json(&cluster_id, &request.topic_name, topic))).into_response())
}

async fn delete_topic(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
) -> Result<StatusCode, HttpError> {
    check_cluster(&agent, &cluster)?;
    find_topic(&agent.metadata.read(), &scope, &topic, AclOperation::Delete)?;
    let topic = scope.stored(&topic);
    agent.metadata.propose(Command::DeleteTopic { name: topic }).await.map_err(command_error)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn topic_configs(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let state = agent.metadata.read();
    let t = find_topic(&state, &scope, &topic, AclOperation::DescribeConfigs)?;
    let data: Vec<Value> = floe_metadata::config::TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let (value, source) = match (t.configs.get(def.name), state.broker_default(def.name)) {
                (Some(v), _) => (Some(v.as_str()), "DYNAMIC_TOPIC_CONFIG"),
                (None, Some(v)) => (Some(v.as_str()), "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                (None, None) => (def.default, "DEFAULT_CONFIG"),
            };
            serde_json::json!({
                "kind": "KafkaTopicConfig",
                "cluster_id": cluster_id,
                "topic_name": topic,
                "name": def.name,
                "value": if def.sensitive { None } else { value },
                "is_default": source == "DEFAULT_CONFIG",
                "is_read_only": def.read_only,
                "is_sensitive": def.sensitive,
                "source": source,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "kind": "KafkaTopicConfigList", "data": data })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AlterConfigsRequest {
    data: Vec<ConfigEntry>,
    #[serde(default)]
    validate_only: bool,
}

/// Sets or deletes some of a topic's configs (Kafka's IncrementalAlterConfigs).
async fn alter_topic_configs(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<StatusCode, HttpError> {
    check_cluster(&agent, &cluster)?;
    let request: AlterConfigsRequest = json_body(&headers, &body)?;
    let mut configs = find_topic(&agent.metadata.read(), &scope, &topic, AclOperation::AlterConfigs)?.configs.clone();
    let topic = scope.stored(&topic);
    let (deletes, sets): (Vec<&ConfigEntry>, Vec<&ConfigEntry>) =
        request.data.iter().partition(|e| e.operation.as_deref() == Some("DELETE"));
    if request.data.len() > ADMIN_CONFIGS_MAX {
        return Err(HttpError::unprocessable(format!("at most {ADMIN_CONFIGS_MAX} configs per request")));
    }
    if let Some(bad) = sets.iter().find(|e| e.operation.as_deref().is_some_and(|o| o != "SET")) {
        return Err(HttpError::unprocessable(format!("operation {:?}: use SET or DELETE", bad.operation)));
    }
    for entry in deletes {
        if floe_metadata::config::topic_config(&entry.name).is_none() {
            return Err(HttpError::bad_request(format!("unknown topic config {}", entry.name)));
        }
        configs.remove(&entry.name);
    }
    let set: Vec<ConfigEntry> =
        sets.iter().map(|e| ConfigEntry { name: e.name.clone(), value: e.value.clone(), operation: None }).collect();
    configs.extend(validated_configs(&set)?);
    if request.validate_only {
        return Ok(StatusCode::NO_CONTENT);
    }
    agent.metadata.propose(Command::SetTopicConfigs { name: topic, configs }).await.map_err(command_error)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_groups(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    let request = GroupRequest::List { states: Vec::new(), types: Vec::new() };
    let groups = match agent.metadata.group_request(request).await {
        Ok(GroupResponse::List(groups)) => groups,
        Ok(other) => {
            return Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected answer {other:?}")));
        }
        Err(e) => return Err(HttpError::unavailable(e.to_string())),
    };
    let state = agent.metadata.read();
    let described = |id: &&str| scope.may(&state, AclOperation::Describe, AclResourceType::Group, id);
    let data: Vec<Value> = groups
        .iter()
        .filter_map(|g| Some((scope.shown(&g.group_id).filter(described)?, g)))
        .map(|(id, g)| {
            serde_json::json!({
                "kind": "KafkaConsumerGroup",
                "cluster_id": cluster_id,
                "consumer_group_id": id,
                "state": g.state,
                "protocol_type": g.protocol_type,
                "type": g.group_type,
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "kind": "KafkaConsumerGroupList", "data": data })))
}

/// A group's lag rows (topic, partition, current offset, log end, lag) as JSON, with their total.
/// A topic the caller may not describe is left out, as OffsetFetch does.
fn lag_rows(
    scope: &Scope,
    state: &floe_metadata::State,
    rows: impl Iterator<Item = (String, i32, i64, i64, i64)>,
) -> (Vec<Value>, i64) {
    let mut total = 0;
    let mut out = Vec::new();
    for (topic, partition, current, log_end, lag) in rows {
        let shown = scope.shown(&topic).unwrap_or(&topic);
        if !scope.may(state, AclOperation::Describe, AclResourceType::Topic, shown) {
            continue;
        }
        total += lag;
        out.push(serde_json::json!({
            "topic_name": shown,
            "partition_id": partition,
            "current_offset": current,
            "log_end_offset": log_end,
            "lag": lag,
        }));
    }
    (out, total)
}

/// A share group in the shape of a consumer group: its members, and per partition its start
/// offset (as `current_offset`) and the records not yet acknowledged (as `lag`).
async fn describe_share_group(
    agent: &Agent,
    scope: &Scope,
    cluster_id: String,
    shown: &str,
    group: String,
) -> Result<Json<Value>, HttpError> {
    let described = match agent.metadata.group_request(GroupRequest::ShareDescribe(vec![group.clone()])).await {
        Ok(GroupResponse::ShareDescribe(mut groups)) if groups.len() == 1 => groups.remove(0),
        Ok(other) => {
            return Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected answer {other:?}")));
        }
        Err(e) => return Err(HttpError::unavailable(e.to_string())),
    };
    let description = described.map_err(|(_, e)| HttpError::not_found(format!("share group {shown:?}: {e}")))?;
    let state = agent.metadata.read();
    let members: Vec<Value> = description
        .members
        .iter()
        .map(|m| serde_json::json!({ "consumer_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host }))
        .collect();
    let rows = state.share_lag(&group).into_iter().map(|l| (l.topic, l.partition, l.start_offset, l.log_end, l.lag));
    let (partitions, total_lag) = lag_rows(scope, &state, rows);
    Ok(Json(serde_json::json!({
        "kind": "KafkaConsumerGroup",
        "cluster_id": cluster_id,
        "consumer_group_id": shown,
        "state": description.state,
        "protocol_type": "share",
        "type": "share",
        "partition_assignor": description.assignor,
        "members": members,
        "total_lag": total_lag,
        "lags": partitions,
    })))
}

async fn describe_group(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, shown)): Path<(String, String)>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = check_cluster(&agent, &cluster)?;
    scope.authorize(&agent.metadata.read(), AclOperation::Describe, AclResourceType::Group, &shown)?;
    let group = scope.stored(&shown);
    let is_share = {
        let state = agent.metadata.read();
        state.groups.get(&group).is_some_and(|g| g.membership.kind == floe_metadata::GroupKind::Share)
    };
    if is_share {
        return describe_share_group(&agent, &scope, cluster_id, &shown, group).await;
    }
    let described = match agent.metadata.group_request(GroupRequest::Describe(vec![group.clone()])).await {
        Ok(GroupResponse::Describe(mut groups)) if groups.len() == 1 => groups.remove(0),
        Ok(other) => {
            return Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected answer {other:?}")));
        }
        Err(e) => return Err(HttpError::unavailable(e.to_string())),
    };
    let description = described.map_err(|(_, e)| HttpError::unavailable(e.to_string()))?;
    let state = agent.metadata.read();
    if description.state == "Dead" && !state.groups.contains_key(&group) {
        return Err(HttpError::not_found(format!("group {shown:?} not found")));
    }
    let lag = state.group_lag(&group);
    let members: Vec<Value> = description
        .members
        .iter()
        .map(|m| {
            serde_json::json!({
                "consumer_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
            })
        })
        .collect();
    let rows = lag.into_iter().map(|l| (l.topic, l.partition, l.committed, l.log_end, l.lag));
    let (partitions, total_lag) = lag_rows(&scope, &state, rows);
    Ok(Json(serde_json::json!({
        "kind": "KafkaConsumerGroup",
        "cluster_id": cluster_id,
        "consumer_group_id": shown,
        "state": description.state,
        "protocol_type": description.protocol_type,
        "partition_assignor": description.protocol,
        "members": members,
        "total_lag": total_lag,
        "lags": partitions,
    })))
}
