//! DescribeAcls, CreateAcls and DeleteAcls over a tenant's bindings (`floe_metadata::acl`), by
//! the names its clients use. Served only with `--authorizer`. As in Kafka, describing needs
//! Describe on the cluster, creating and deleting need Alter; a refused DescribeAcls is one
//! error, refused creations and deletions are answered one by one.

use std::collections::BTreeMap;

use floe_metadata::acl::{
    AclBinding, AclFilter, AclOperation, AclPatternType, AclPermission, AclResourceType, PatternFilter,
};
use floe_metadata::state::stored::each_into;
use floe_metadata::{Command, NodeError, Outcome};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::super::dispatch::{Context, KafkaApi, Reply, ServedWith};
use super::super::error_code;
use super::str_bytes;
use crate::Agent;
use crate::access::Access;
use kafka_protocol::messages::ResponseKind;

/// The answers to CreateAcls and DeleteAcls without an authorizer, item by item. Not reached (the
/// ACL APIs are decoded only with `--authorizer`); here so that no request goes unanswered.
pub(crate) fn create_without_authorizer(request: &CreateAclsRequest) -> CreateAclsResponse {
    let refused = || AclCreationResult::default().with_error_code(error_code::code::SECURITY_DISABLED);
    CreateAclsResponse::default().with_results(request.creations.iter().map(|_| refused()).collect())
}

pub(crate) fn delete_without_authorizer(request: &DeleteAclsRequest) -> DeleteAclsResponse {
    let refused = || DeleteAclsFilterResult::default().with_error_code(error_code::code::SECURITY_DISABLED);
    DeleteAclsResponse::default().with_filter_results(request.filters.iter().map(|_| refused()).collect())
}

/// The wire code Kafka gives "any" in filters.
const ANY: i8 = 1;

fn resource_type(code: i8) -> Option<AclResourceType> {
    match code {
        2 => Some(AclResourceType::Topic),
        3 => Some(AclResourceType::Group),
        4 => Some(AclResourceType::Cluster),
        5 => Some(AclResourceType::TransactionalId),
        _ => None,
    }
}

/// Kafka's code for a resource type; none for registry subjects, which Kafka's protocol cannot
/// name (they are managed over HTTP).
fn resource_type_code(t: AclResourceType) -> Option<i8> {
    match t {
        AclResourceType::Topic => Some(2),
        AclResourceType::Group => Some(3),
        AclResourceType::Cluster => Some(4),
        AclResourceType::TransactionalId => Some(5),
        AclResourceType::Subject => None,
    }
}

/// The resource types Kafka's protocol names, which its "any" filters stand for.
const KAFKA_RESOURCE_TYPES: [AclResourceType; 4] =
    [AclResourceType::Topic, AclResourceType::Group, AclResourceType::Cluster, AclResourceType::TransactionalId];

fn pattern_type(code: i8) -> Option<AclPatternType> {
    match code {
        3 => Some(AclPatternType::Literal),
        4 => Some(AclPatternType::Prefixed),
        _ => None,
    }
}

fn pattern_type_code(p: AclPatternType) -> i8 {
    match p {
        AclPatternType::Literal => 3,
        AclPatternType::Prefixed => 4,
    }
}

const OPERATIONS: [(i8, AclOperation); 11] = [
    (2, AclOperation::All),
    (3, AclOperation::Read),
    (4, AclOperation::Write),
    (5, AclOperation::Create),
    (6, AclOperation::Delete),
    (7, AclOperation::Alter),
    (8, AclOperation::Describe),
    (9, AclOperation::ClusterAction),
    (10, AclOperation::DescribeConfigs),
    (11, AclOperation::AlterConfigs),
    (12, AclOperation::IdempotentWrite),
];

fn operation(code: i8) -> Option<AclOperation> {
    OPERATIONS.iter().find(|(c, _)| *c == code).map(|(_, o)| *o)
}

fn operation_code(o: AclOperation) -> i8 {
    OPERATIONS.iter().find(|(_, op)| *op == o).map_or(0, |(c, _)| *c)
}

fn permission(code: i8) -> Option<AclPermission> {
    match code {
        2 => Some(AclPermission::Deny),
        3 => Some(AclPermission::Allow),
        _ => None,
    }
}

fn permission_code(p: AclPermission) -> i8 {
    match p {
        AclPermission::Deny => 2,
        AclPermission::Allow => 3,
    }
}

/// A filter field: `ANY` is `None`; a code Floe does not know (UNKNOWN, or a resource type or
/// operation it has no such ACLs for) is `Err`.
fn any_or<T>(code: i8, known: impl Fn(i8) -> Option<T>) -> Result<Option<T>, ()> {
    if code == ANY { Ok(None) } else { known(code).map(Some).ok_or(()) }
}

/// The filter a DescribeAcls or DeleteAcls request carries; `Ok(None)`: it names a resource type
/// or operation Floe keeps no ACLs for, so it matches nothing.
#[allow(clippy::too_many_arguments)]
fn filter(
    resource_type_filter: i8,
    resource_name: Option<&StrBytes>,
    pattern_type_filter: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation_filter: i8,
    permission_filter: i8,
) -> Result<Option<AclFilter>, String> {
    let pattern = match pattern_type_filter {
        ANY => PatternFilter::Any,
        2 => PatternFilter::Match,
        code => PatternFilter::Exactly(pattern_type(code).ok_or_else(|| format!("unknown pattern type {code}"))?),
    };
    if resource_type_filter == 0 || operation_filter == 0 || permission_filter == 0 {
        return Err("a filter may not name the UNKNOWN resource type, operation or permission".into());
    }
    let permission =
        any_or(permission_filter, permission).map_err(|()| format!("unknown permission {permission_filter}"))?;
    let (Ok(resource_type), Ok(operation)) =
        (any_or(resource_type_filter, resource_type), any_or(operation_filter, operation))
    else {
        return Ok(None);
    };
    Ok(Some(AclFilter {
        resource_type,
        resource_name: resource_name.map(|n| n.to_string()),
        pattern,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation,
        permission,
    }))
}

pub(in crate::kafka) fn describe(
    agent: &Agent,
    access: &Access,
    request: &DescribeAclsRequest,
) -> DescribeAclsResponse {
    let state = agent.metadata.read();
    let refused = |error: ResponseError, why: String| {
        DescribeAclsResponse::default().with_error_code(error.code()).with_error_message(Some(str_bytes(why)))
    };
    if !access.allows_cluster(&state, AclOperation::Describe) {
        return refused(
            ResponseError::ClusterAuthorizationFailed,
            "describing ACLs needs Describe on the cluster".into(),
        );
    }
    let r = request;
    let filter = match filter(
        r.resource_type_filter,
        r.resource_name_filter.as_ref(),
        r.pattern_type_filter,
        r.principal_filter.as_ref(),
        r.host_filter.as_ref(),
        r.operation,
        r.permission_type,
    ) {
        Ok(filter) => filter,
        Err(why) => return refused(ResponseError::InvalidRequest, why),
    };
    let mut resources: BTreeMap<(AclResourceType, &str, AclPatternType), Vec<AclDescription>> = BTreeMap::new();
    let kafka_named = |b: &&AclBinding| resource_type_code(b.resource_type).is_some();
    for binding in
        state.tenant_acls(access.tenant()).filter(kafka_named).filter(|b| filter.as_ref().is_some_and(|f| f.matches(b)))
    {
        let key = (binding.resource_type, binding.resource_name.as_str(), binding.pattern_type);
        resources.entry(key).or_default().push(
            AclDescription::default()
                .with_principal(str_bytes(binding.principal.as_str()))
                .with_host(str_bytes(binding.host.as_str()))
                .with_operation(operation_code(binding.operation))
                .with_permission_type(permission_code(binding.permission)),
        );
    }
    let resources = resources
        .into_iter()
        .map(|((t, name, pattern), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type_code(t).unwrap_or_default())
                .with_resource_name(str_bytes(name))
                .with_pattern_type(pattern_type_code(pattern))
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}

fn node_error(e: &NodeError) -> (ResponseError, String) {
    (error_code::for_node(e), e.to_string())
}

/// An ACL binding as Kafka's protocol spells it (wire codes).
pub(crate) struct KafkaAcl<'a> {
    pub resource_type: i8,
    pub resource_name: &'a str,
    pub pattern_type: i8,
    pub principal: &'a str,
    pub host: &'a str,
    pub operation: i8,
    pub permission: i8,
}

/// The binding `acl` spells, or why Floe cannot keep it.
pub(crate) fn binding_of(acl: KafkaAcl<'_>) -> Result<AclBinding, String> {
    let resource_type = resource_type(acl.resource_type)
        .ok_or_else(|| format!("resource type {} cannot be given ACLs here", acl.resource_type))?;
    let pattern_type = pattern_type(acl.pattern_type).ok_or("an ACL's pattern type is LITERAL or PREFIXED")?;
    let operation = operation(acl.operation).ok_or_else(|| format!("operation {} cannot be granted", acl.operation))?;
    let permission = permission(acl.permission).ok_or("an ACL's permission is ALLOW or DENY")?;
    Ok(AclBinding {
        resource_type,
        resource_name: acl.resource_name.to_owned(),
        pattern_type,
        principal: acl.principal.to_owned(),
        host: acl.host.to_owned(),
        operation,
        permission,
    })
}

pub(in crate::kafka) async fn create(agent: &Agent, access: &Access, request: CreateAclsRequest) -> CreateAclsResponse {
    let failed = |error: ResponseError, why: &str| {
        AclCreationResult::default().with_error_code(error.code()).with_error_message(Some(str_bytes(why)))
    };
    if !access.allows_cluster(&agent.metadata.read(), AclOperation::Alter) {
        let results = request
            .creations
            .iter()
            .map(|_| failed(ResponseError::ClusterAuthorizationFailed, "creating ACLs needs Alter on the cluster"));
        return CreateAclsResponse::default().with_results(results.collect());
    }
    // Each creation is read on its own; the readable ones go to metadata in one command.
    let read: Vec<Result<AclBinding, String>> = request
        .creations
        .iter()
        .map(|c| {
            binding_of(KafkaAcl {
                resource_type: c.resource_type,
                resource_name: &c.resource_name,
                pattern_type: c.resource_pattern_type,
                principal: &c.principal,
                host: &c.host,
                operation: c.operation,
                permission: c.permission_type,
            })
        })
        .collect();
    let bindings: Vec<AclBinding> = read.iter().filter_map(|r| r.as_ref().ok().cloned()).collect();
    let mut outcomes = match agent
        .metadata
        .propose(Command::CreateAcls { tenant: access.tenant().into(), bindings: each_into(bindings) })
        .await
    {
        Ok(Outcome::AclsCreated(outcomes)) => outcomes.into_iter(),
        Ok(other) => {
            tracing::error!(?other, "CreateAcls answered with another outcome");
            let results = read.iter().map(|_| failed(ResponseError::UnknownServerError, "unexpected answer"));
            return CreateAclsResponse::default().with_results(results.collect());
        }
        Err(e) => {
            let (error, why) = node_error(&e);
            return CreateAclsResponse::default().with_results(read.iter().map(|_| failed(error, &why)).collect());
        }
    };
    let results = read
        .into_iter()
        .map(|r| match r {
            Err(why) => failed(ResponseError::InvalidRequest, &why),
            Ok(_) => match outcomes.next() {
                Some(Ok(())) => AclCreationResult::default(),
                Some(Err(e)) => failed(error_code::for_command(&e), &e.to_string()),
                None => failed(ResponseError::UnknownServerError, "no outcome for this ACL"),
            },
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn read_filter(f: &DeleteAclsFilter) -> Result<Option<AclFilter>, String> {
    filter(
        f.resource_type_filter,
        f.resource_name_filter.as_ref(),
        f.pattern_type_filter,
        f.principal_filter.as_ref(),
        f.host_filter.as_ref(),
        f.operation,
        f.permission_type,
    )
}

pub(in crate::kafka) async fn delete(agent: &Agent, access: &Access, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let failed = |error: ResponseError, why: &str| {
        DeleteAclsFilterResult::default().with_error_code(error.code()).with_error_message(Some(str_bytes(why)))
    };
    if !access.allows_cluster(&agent.metadata.read(), AclOperation::Alter) {
        let results = request
            .filters
            .iter()
            .map(|_| failed(ResponseError::ClusterAuthorizationFailed, "deleting ACLs needs Alter on the cluster"));
        return DeleteAclsResponse::default().with_filter_results(results.collect());
    }
    let read: Vec<Result<Option<AclFilter>, String>> = request.filters.iter().map(read_filter).collect();
    // A filter of any resource type stands for Kafka's types only (not registry subjects): it
    // is sent as one filter per type, and their deletions are put back together below.
    let expanded = |f: &AclFilter| -> Vec<AclFilter> {
        match f.resource_type {
            Some(_) => vec![f.clone()],
            None => KAFKA_RESOURCE_TYPES.iter().map(|t| AclFilter { resource_type: Some(*t), ..f.clone() }).collect(),
        }
    };
    let filters: Vec<AclFilter> =
        read.iter().filter_map(|r| r.as_ref().ok().cloned().flatten()).flat_map(|f| expanded(&f)).collect();
    // Expanded filters may outnumber what one command takes: sent in commands of at most that.
    let mut deleted = Vec::with_capacity(filters.len());
    for chunk in filters.chunks(floe_metadata::limits::ACL_COMMAND_ITEMS_MAX) {
        let command = Command::DeleteAcls { tenant: access.tenant().into(), filters: chunk.to_vec() };
        match agent.metadata.propose(command).await {
            Ok(Outcome::AclsDeleted(removed)) => deleted.extend(removed.into_iter().map(each_into::<_, AclBinding>)),
            Ok(other) => {
                tracing::error!(?other, "DeleteAcls answered with another outcome");
                let results = read.iter().map(|_| failed(ResponseError::UnknownServerError, "unexpected answer"));
                return DeleteAclsResponse::default().with_filter_results(results.collect());
            }
            Err(e) => {
                let (error, why) = node_error(&e);
                return DeleteAclsResponse::default()
                    .with_filter_results(read.iter().map(|_| failed(error, &why)).collect());
            }
        }
    }
    let mut deleted = deleted.into_iter();
    let matching = |b: AclBinding| {
        DeleteAclsMatchingAcl::default()
            .with_resource_type(resource_type_code(b.resource_type).unwrap_or_default())
            .with_resource_name(str_bytes(b.resource_name))
            .with_pattern_type(pattern_type_code(b.pattern_type))
            .with_principal(str_bytes(b.principal))
            .with_host(str_bytes(b.host))
            .with_operation(operation_code(b.operation))
            .with_permission_type(permission_code(b.permission))
    };
    let results = read
        .into_iter()
        .map(|r| match r {
            Err(why) => failed(ResponseError::InvalidRequest, &why),
            Ok(None) => DeleteAclsFilterResult::default(),
            Ok(Some(f)) => {
                let removed = (0..expanded(&f).len()).flat_map(|_| deleted.next().unwrap_or_default());
                DeleteAclsFilterResult::default().with_matching_acls(removed.map(matching).collect())
            }
        })
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

impl KafkaApi for DescribeAclsRequest {
    const VERSIONS: (i16, i16) = (0, 3);
    const SERVED_WITH: ServedWith = ServedWith::Authorizer;

    async fn start(self, cx: Context<'_>) -> Reply {
        Reply::Now(Box::new(ResponseKind::DescribeAcls(match cx.caller.access {
            Some(access) => describe(cx.agent, access, &self),
            // Not reached (decoded only with an authorizer); one error is DescribeAcls's answer.
            None => DescribeAclsResponse::default().with_error_code(error_code::code::SECURITY_DISABLED),
        })))
    }
}

impl KafkaApi for CreateAclsRequest {
    const VERSIONS: (i16, i16) = (0, 3);
    const SERVED_WITH: ServedWith = ServedWith::Authorizer;

    async fn start(self, cx: Context<'_>) -> Reply {
        match cx.caller.access.cloned() {
            Some(access) => {
                cx.later(move |agent, _| async move { ResponseKind::CreateAcls(create(&agent, &access, self).await) })
            }
            None => Reply::Now(Box::new(ResponseKind::CreateAcls(create_without_authorizer(&self)))),
        }
    }
}

impl KafkaApi for DeleteAclsRequest {
    const VERSIONS: (i16, i16) = (0, 3);
    const SERVED_WITH: ServedWith = ServedWith::Authorizer;

    async fn start(self, cx: Context<'_>) -> Reply {
        match cx.caller.access.cloned() {
            Some(access) => {
                cx.later(move |agent, _| async move { ResponseKind::DeleteAcls(delete(&agent, &access, self).await) })
            }
            None => Reply::Now(Box::new(ResponseKind::DeleteAcls(delete_without_authorizer(&self)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_code_round_trips_and_any_is_no_filter() {
        for (code, op) in OPERATIONS {
            assert_eq!(operation(code), Some(op));
            assert_eq!(operation_code(op), code);
        }
        let all = filter(ANY, None, ANY, None, None, ANY, ANY).expect("valid").expect("matches some");
        assert_eq!((all.resource_type, all.operation, all.permission), (None, None, None));
        assert!(filter(0, None, ANY, None, None, ANY, ANY).is_err(), "UNKNOWN is refused");
        assert_eq!(filter(7, None, ANY, None, None, ANY, ANY), Ok(None), "USER resources have no ACLs here");
    }
}
