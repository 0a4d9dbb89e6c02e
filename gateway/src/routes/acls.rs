//! ACLs over HTTP, in the REST v3 shape (`/v3/clusters/{cluster}/acls`): list, create and
//! delete the caller's tenant's bindings, as Kafka's DescribeAcls, CreateAcls and DeleteAcls do
//! (Describe on the cluster to list, Alter to change). Served only with `--authorizer`. Beyond
//! Kafka's resource types, `SUBJECT` names schema registry subjects, which Kafka's protocol
//! cannot name.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use floe_agent::Agent;
use floe_agent::access::Access;
use floe_metadata::acl::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType, PatternFilter,
};
use floe_metadata::{Command, Outcome};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::HttpError;
use crate::extract::{Path, Query, Scope, SmallBody};

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new().route("/v3/clusters/{cluster}/acls", get(list).post(create).delete(delete)).with_state(agent)
}

fn resource_type(name: &str) -> Option<AclResourceType> {
    Some(match name {
        "TOPIC" => AclResourceType::Topic,
        "GROUP" => AclResourceType::Group,
        "CLUSTER" => AclResourceType::Cluster,
        "TRANSACTIONAL_ID" => AclResourceType::TransactionalId,
        "SUBJECT" => AclResourceType::Subject,
        _ => return None,
    })
}

fn resource_type_name(t: AclResourceType) -> &'static str {
    match t {
        AclResourceType::Topic => "TOPIC",
        AclResourceType::Group => "GROUP",
        AclResourceType::Cluster => "CLUSTER",
        AclResourceType::TransactionalId => "TRANSACTIONAL_ID",
        AclResourceType::Subject => "SUBJECT",
    }
}

const OPERATIONS: [(&str, AclOperation); 11] = [
    ("ALL", AclOperation::All),
    ("READ", AclOperation::Read),
    ("WRITE", AclOperation::Write),
    ("CREATE", AclOperation::Create),
    ("DELETE", AclOperation::Delete),
    ("ALTER", AclOperation::Alter),
    ("DESCRIBE", AclOperation::Describe),
    ("CLUSTER_ACTION", AclOperation::ClusterAction),
    ("DESCRIBE_CONFIGS", AclOperation::DescribeConfigs),
    ("ALTER_CONFIGS", AclOperation::AlterConfigs),
    ("IDEMPOTENT_WRITE", AclOperation::IdempotentWrite),
];

fn operation(name: &str) -> Option<AclOperation> {
    OPERATIONS.iter().find(|(n, _)| *n == name).map(|(_, o)| *o)
}

fn operation_name(op: AclOperation) -> &'static str {
    OPERATIONS.iter().find(|(_, o)| *o == op).map_or("UNKNOWN", |(n, _)| n)
}

fn pattern_name(p: AclPatternType) -> &'static str {
    match p {
        AclPatternType::Literal => "LITERAL",
        AclPatternType::Prefixed => "PREFIXED",
    }
}

fn permission(name: &str) -> Option<AclPermission> {
    match name {
        "ALLOW" => Some(AclPermission::Allow),
        "DENY" => Some(AclPermission::Deny),
        _ => None,
    }
}

fn permission_name(p: AclPermission) -> &'static str {
    match p {
        AclPermission::Allow => "ALLOW",
        AclPermission::Deny => "DENY",
    }
}

fn binding_json(cluster_id: &str, b: &AclBinding) -> Value {
    json!({
        "kind": "KafkaAcl",
        "cluster_id": cluster_id,
        "resource_type": resource_type_name(b.resource_type),
        "resource_name": b.resource_name,
        "pattern_type": pattern_name(b.pattern_type),
        "principal": b.principal,
        "host": b.host,
        "operation": operation_name(b.operation),
        "permission": permission_name(b.permission),
    })
}

/// The caller's access, and a 403 unless it may do `operation` on its cluster.
fn access(agent: &Agent, scope: &Scope, operation: AclOperation) -> Result<Access, HttpError> {
    let Some(access) = scope.access() else {
        return Err(HttpError::not_found("ACLs are served only when agents run with --authorizer"));
    };
    if !access.allows_cluster(&agent.metadata.read(), operation) {
        return Err(HttpError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{operation:?} on the cluster is needed to {} ACLs",
                if operation == AclOperation::Describe { "list" } else { "change" }
            ),
        ));
    }
    Ok(access.clone())
}

/// A filter as query parameters; each absent one (or `ANY`) matches anything.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilterQuery {
    resource_type: Option<String>,
    resource_name: Option<String>,
    /// LITERAL, PREFIXED, ANY (as written), or MATCH (every pattern covering `resource_name`).
    pattern_type: Option<String>,
    principal: Option<String>,
    host: Option<String>,
    operation: Option<String>,
    permission: Option<String>,
}

impl FilterQuery {
    fn filter(self) -> Result<AclFilter, HttpError> {
        fn any<T>(value: Option<String>, read: impl Fn(&str) -> Option<T>, what: &str) -> Result<Option<T>, HttpError> {
            match value.as_deref() {
                None | Some("ANY") => Ok(None),
                Some(v) => read(v).map(Some).ok_or_else(|| HttpError::bad_request(format!("unknown {what} {v:?}"))),
            }
        }
        let pattern = match self.pattern_type.as_deref() {
            None | Some("ANY") => PatternFilter::Any,
            Some("MATCH") => PatternFilter::Match,
            Some("LITERAL") => PatternFilter::Exactly(AclPatternType::Literal),
            Some("PREFIXED") => PatternFilter::Exactly(AclPatternType::Prefixed),
            Some(other) => return Err(HttpError::bad_request(format!("unknown pattern_type {other:?}"))),
        };
        Ok(AclFilter {
            resource_type: any(self.resource_type, resource_type, "resource_type")?,
            resource_name: self.resource_name,
            pattern,
            principal: self.principal,
            host: self.host,
            operation: any(self.operation, operation, "operation")?,
            permission: any(self.permission, permission, "permission")?,
        })
    }
}

async fn list(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
    Query(query): Query<FilterQuery>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = super::clusters::check_cluster(&agent, &cluster)?;
    let access = access(&agent, &scope, AclOperation::Describe)?;
    let filter = query.filter()?;
    let state = agent.metadata.read();
    let data: Vec<Value> = state
        .tenant_acls(access.tenant())
        .filter(|b| filter.matches(b))
        .map(|b| binding_json(&cluster_id, b))
        .collect();
    Ok(Json(json!({ "kind": "KafkaAclList", "data": data })))
}

/// One binding to create, as REST v3 takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    resource_type: String,
    resource_name: String,
    pattern_type: String,
    principal: String,
    #[serde(default = "any_host")]
    host: String,
    operation: String,
    permission: String,
}

fn any_host() -> String {
    floe_metadata::acl::WILDCARD.to_owned()
}

async fn create(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
    SmallBody(body): SmallBody,
) -> Result<Response, HttpError> {
    super::clusters::check_cluster(&agent, &cluster)?;
    let access = access(&agent, &scope, AclOperation::Alter)?;
    let body: CreateBody =
        serde_json::from_slice(&body).map_err(|e| HttpError::bad_request(format!("invalid ACL: {e}")))?;
    let unknown = |what: &str, v: &str| HttpError::bad_request(format!("unknown {what} {v:?}"));
    let binding = AclBinding {
        resource_type: resource_type(&body.resource_type)
            .ok_or_else(|| unknown("resource_type", &body.resource_type))?,
        resource_name: body.resource_name,
        pattern_type: match body.pattern_type.as_str() {
            "LITERAL" => AclPatternType::Literal,
            "PREFIXED" => AclPatternType::Prefixed,
            other => return Err(unknown("pattern_type", other)),
        },
        principal: body.principal,
        host: body.host,
        operation: operation(&body.operation).ok_or_else(|| unknown("operation", &body.operation))?,
        permission: permission(&body.permission).ok_or_else(|| unknown("permission", &body.permission))?,
    };
    let command = Command::CreateAcls { tenant: access.tenant().into(), bindings: vec![binding.into()] };
    match agent.metadata.propose(command).await {
        Ok(Outcome::AclsCreated(outcomes)) => match outcomes.into_iter().next() {
            Some(Ok(())) => Ok(StatusCode::CREATED.into_response()),
            Some(Err(e)) => Err(HttpError::bad_request(e.to_string())),
            None => Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, "no outcome for the ACL")),
        },
        Ok(other) => Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected outcome {other:?}"))),
        Err(e) => Err(super::admin::command_error(e)),
    }
}

async fn delete(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path(cluster): Path<String>,
    Query(query): Query<FilterQuery>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = super::clusters::check_cluster(&agent, &cluster)?;
    let access = access(&agent, &scope, AclOperation::Alter)?;
    // As REST v3 asks: a delete names these (ANY where it means any), so that a bare DELETE does
    // not remove every binding of the tenant.
    let named = [&query.resource_type, &query.pattern_type, &query.operation, &query.permission];
    if named.iter().any(|q| q.is_none()) {
        return Err(HttpError::bad_request(
            "deleting ACLs needs resource_type, pattern_type, operation and permission (each may be ANY)",
        ));
    }
    let filter = query.filter()?;
    let command = Command::DeleteAcls { tenant: access.tenant().into(), filters: vec![filter] };
    match agent.metadata.propose(command).await {
        Ok(Outcome::AclsDeleted(deleted)) => {
            let data: Vec<Value> =
                deleted.into_iter().flatten().map(|b| binding_json(&cluster_id, &b.into())).collect();
            Ok(Json(json!({ "data": data })))
        }
        Ok(other) => Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected outcome {other:?}"))),
        Err(e) => Err(super::admin::command_error(e)),
    }
}
