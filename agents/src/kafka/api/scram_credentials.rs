//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554), served only on a SASL
//! listener and only to super users (`--super-users`) or, with `--authorizer`, to principals
//! with Describe or Alter on the cluster, within the caller's own tenant: a super user of one
//! tenant neither sees nor touches another tenant's users. Credentials arrive salted
//! by the client (never the password) and are stored as SCRAM server keys.

use std::collections::{BTreeMap, BTreeSet};

use floe_metadata::acl::AclOperation;
use floe_metadata::{Command, CommandError, NodeError, ScramMechanism};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::super::dispatch::{Context, KafkaApi, Reply, ServedWith};
use crate::access::Access;
use crate::agent::Agent;
use crate::kafka::sasl::Principal;
use kafka_protocol::messages::ResponseKind;

/// Most users one request may name.
const USERS_PER_REQUEST_MAX: usize = 1000;

/// Kafka's mechanism numbers on the wire.
fn mechanism(code: i8) -> Option<ScramMechanism> {
    match code {
        1 => Some(ScramMechanism::Sha256),
        2 => Some(ScramMechanism::Sha512),
        _ => None,
    }
}

fn mechanism_code(m: ScramMechanism) -> i8 {
    match m {
        ScramMechanism::Sha256 => 1,
        ScramMechanism::Sha512 => 2,
    }
}

/// Super users may; with `--authorizer`, so may whoever has `operation` on the cluster (Describe
/// to describe, Alter to alter), as in Kafka.
fn allowed(agent: &Agent, principal: &Principal, access: Option<&Access>, operation: AclOperation) -> bool {
    agent.config.super_users.contains(&principal.user)
        || access.is_some_and(|a| a.allows_cluster(&agent.metadata.read(), operation))
}

fn message(text: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(text.into()))
}

/// Errors go into per-user results, never the response's top-level error: librdkafka (2.x)
/// frees a stack string when that one is set and crashes the client. A refused describe-all
/// answers one result, for the caller, carrying the error.
pub(crate) fn describe(
    agent: &Agent,
    principal: &Principal,
    access: Option<&Access>,
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let failed = |user: &str, code: ResponseError, why: &str| {
        DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_owned()))
            .with_error_code(code.code())
            .with_error_message(message(why))
    };
    // As in Kafka, no list and an empty list both mean every user (of this tenant).
    let names: Option<Vec<&str>> =
        request.users.as_ref().filter(|names| !names.is_empty()).map(|n| n.iter().map(|u| u.name.as_str()).collect());
    let refusal = if !allowed(agent, principal, access, AclOperation::Describe) {
        let why = "describing SCRAM credentials needs a super user or Describe on the cluster".to_owned();
        Some((ResponseError::ClusterAuthorizationFailed, why))
    } else if names.as_ref().is_some_and(|n| n.len() > USERS_PER_REQUEST_MAX) {
        Some((ResponseError::InvalidRequest, format!("at most {USERS_PER_REQUEST_MAX} users per request")))
    } else {
        None
    };
    if let Some((code, why)) = refusal {
        let users = names.unwrap_or_else(|| vec![principal.user.as_str()]);
        let unique: BTreeSet<&str> = users.into_iter().collect();
        let results = unique.into_iter().map(|u| failed(u, code, &why)).collect();
        return DescribeUserScramCredentialsResponse::default().with_results(results);
    }
    let state = agent.metadata.read();
    let infos = |record: &floe_metadata::UserRecord| -> Vec<CredentialInfo> {
        record
            .scram
            .iter()
            .map(|(m, c)| {
                CredentialInfo::default()
                    .with_mechanism(mechanism_code(*m))
                    .with_iterations(i32::try_from(c.iterations).unwrap_or(i32::MAX))
            })
            .collect()
    };
    let results: Vec<DescribeUserScramCredentialsResult> = match names {
        None => state
            .users
            .iter()
            .filter(|(_, u)| u.tenant == principal.tenant)
            .map(|(name, record)| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(name.clone()))
                    .with_credential_infos(infos(record))
            })
            .collect(),
        Some(names) => {
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for name in names {
                *counts.entry(name).or_default() += 1;
            }
            counts
                .into_iter()
                .map(|(name, count)| match state.users.get(name).filter(|u| u.tenant == principal.tenant) {
                    _ if count > 1 => failed(name, ResponseError::DuplicateResource, "user named more than once"),
                    Some(record) => DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(name.into()))
                        .with_credential_infos(infos(record)),
                    None => failed(name, ResponseError::ResourceNotFound, "no SCRAM credential for this user"),
                })
                .collect()
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// One user's changes, checked before anything is proposed.
#[derive(Default)]
struct Changes {
    commands: Vec<Command>,
    error: Option<(ResponseError, String)>,
}

fn reject(changes: &mut Changes, code: ResponseError, why: String) {
    if changes.error.is_none() {
        changes.error = Some((code, why));
    }
}

fn node_error(e: &NodeError) -> (ResponseError, String) {
    match e {
        NodeError::Rejected(CommandError::CredentialNotFound(what)) => {
            (ResponseError::ResourceNotFound, format!("{what} not found"))
        }
        // Says nothing of the tenant a name belongs to when it is not the caller's.
        NodeError::Rejected(CommandError::InvalidCredential(_)) => {
            (ResponseError::UnacceptableCredential, "this credential cannot be set for this user".into())
        }
        NodeError::Rejected(CommandError::LimitReached(why)) => (ResponseError::PolicyViolation, why.clone()),
        NodeError::Rejected(other) => (ResponseError::InvalidRequest, other.to_string()),
        NodeError::Unavailable(why) => (ResponseError::CoordinatorNotAvailable, why.clone()),
    }
}

/// The answers to the credential APIs for a connection that did not authenticate. Not reached
/// on a SASL listener (it admits no such request before authentication); here so that no
/// request goes unanswered. Per user, as above.
pub(crate) fn describe_unauthenticated(
    request: &DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut users: Vec<String> =
        request.users.iter().flatten().map(|u| u.name.to_string()).collect::<BTreeSet<_>>().into_iter().collect();
    if users.is_empty() {
        users.push(String::new());
    }
    let results = users
        .into_iter()
        .map(|user| {
            DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(message("not authenticated"))
        })
        .collect();
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

pub(crate) fn alter_unauthenticated(request: &AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse {
    let users: BTreeSet<String> = request
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(request.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    let results = users
        .into_iter()
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(user))
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(message("not authenticated"))
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

pub(crate) async fn alter(
    agent: &Agent,
    principal: &Principal,
    access: Option<&Access>,
    request: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let mut by_user: BTreeMap<String, Changes> = BTreeMap::new();
    let operations = request.deletions.len() + request.upsertions.len();
    let allowed = allowed(agent, principal, access, AclOperation::Alter);
    let mut seen: BTreeSet<(String, i8)> = BTreeSet::new();
    for d in &request.deletions {
        let name = d.name.to_string();
        let changes = by_user.entry(name.clone()).or_default();
        if !seen.insert((name.clone(), d.mechanism)) {
            reject(
                changes,
                ResponseError::DuplicateResource,
                format!("user {name:?} has two changes to one mechanism"),
            );
            continue;
        }
        match mechanism(d.mechanism) {
            Some(m) => changes.commands.push(Command::DeleteScramCredential {
                user: name,
                tenant: principal.tenant.clone(),
                mechanism: m,
            }),
            None => reject(changes, ResponseError::UnsupportedSaslMechanism, format!("mechanism {}", d.mechanism)),
        }
    }
    for u in &request.upsertions {
        let name = u.name.to_string();
        let changes = by_user.entry(name.clone()).or_default();
        if !seen.insert((name.clone(), u.mechanism)) {
            reject(
                changes,
                ResponseError::DuplicateResource,
                format!("user {name:?} has two changes to one mechanism"),
            );
            continue;
        }
        let Some(m) = mechanism(u.mechanism) else {
            reject(changes, ResponseError::UnsupportedSaslMechanism, format!("mechanism {}", u.mechanism));
            continue;
        };
        let iterations = u32::try_from(u.iterations).unwrap_or(0);
        if u.salted_password.len() != m.hash_bytes() || u.salt.is_empty() {
            reject(changes, ResponseError::UnacceptableCredential, "salt or salted password of the wrong size".into());
            continue;
        }
        let credential = floe_auth::scram::credential_from_salted(m, &u.salted_password, &u.salt, iterations);
        changes.commands.push(Command::UpsertScramCredential {
            user: name,
            tenant: principal.tenant.clone(),
            mechanism: m,
            credential: credential.into(),
        });
    }
    let mut results = Vec::with_capacity(by_user.len());
    for (user, changes) in by_user {
        let result = AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user));
        let error = if !allowed {
            let why = "altering SCRAM credentials needs a super user or Alter on the cluster";
            Some((ResponseError::ClusterAuthorizationFailed, why.into()))
        } else if operations > USERS_PER_REQUEST_MAX {
            Some((ResponseError::InvalidRequest, format!("at most {USERS_PER_REQUEST_MAX} changes per request")))
        } else if changes.error.is_some() {
            changes.error
        } else {
            let mut failed = None;
            for command in changes.commands {
                if let Err(e) = agent.metadata.propose(command).await {
                    failed = Some(node_error(&e));
                    break;
                }
            }
            failed
        };
        results.push(match error {
            Some((code, why)) => result.with_error_code(code.code()).with_error_message(message(why)),
            None => result,
        });
    }
    AlterUserScramCredentialsResponse::default().with_results(results)
}

impl KafkaApi for DescribeUserScramCredentialsRequest {
    const VERSIONS: (i16, i16) = (0, 0);
    const SERVED_WITH: ServedWith = ServedWith::Sasl;

    async fn start(self, cx: Context<'_>) -> Reply {
        let response = match cx.caller.principal {
            Some(principal) => describe(cx.agent, principal, cx.caller.access, &self),
            None => describe_unauthenticated(&self),
        };
        Reply::Now(Box::new(ResponseKind::DescribeUserScramCredentials(response)))
    }
}

impl KafkaApi for AlterUserScramCredentialsRequest {
    const VERSIONS: (i16, i16) = (0, 0);
    const SERVED_WITH: ServedWith = ServedWith::Sasl;

    async fn start(self, cx: Context<'_>) -> Reply {
        let Some(principal) = cx.caller.principal.cloned() else {
            return Reply::Now(Box::new(ResponseKind::AlterUserScramCredentials(alter_unauthenticated(&self))));
        };
        let access = cx.caller.access.cloned();
        cx.later(move |agent, _| async move {
            ResponseKind::AlterUserScramCredentials(alter(&agent, &principal, access.as_ref(), self).await)
        })
    }
}
