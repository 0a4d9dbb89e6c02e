//! The supported Kafka surface on one screen: the tables ApiVersions advertises, what each API
//! acts on, and the one `match` that routes each request to its handler. (SaslHandshake and
//! SaslAuthenticate change the connection's authentication, so the connection answers them.)

use std::sync::Arc;

use floe_metadata::groups::next_commit_stamp;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::task::JoinHandle;

use super::api;
use super::error_code::code;
use super::resources::{AnswerWalk, Refused, Resources, Walk};
use super::sasl::Principal;
use crate::Agent;
use crate::access::Access;

/// Every API Floe implements, with the versions it implements fully. ApiVersions is built from
/// this table, so nothing is advertised that is not served.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 13),
    (ApiKey::Fetch, 4, 18),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 2),
    (ApiKey::FindCoordinator, 0, 5),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeTransactions, 0, 0),
];

/// Served, and advertised, only when the listener has SASL: SaslHandshake v0 (raw tokens
/// after the handshake) is not implemented; every client since Kafka 1.0 uses v1.
pub const SASL: &[(ApiKey, i16, i16)] = &[(ApiKey::SaslHandshake, 1, 1), (ApiKey::SaslAuthenticate, 0, 2)];

/// Served, and advertised, only when the listener has SASL: the SCRAM credential APIs need an
/// authenticated principal (a super user). They act for their caller ([`acts_for_caller`]).
pub const CREDENTIALS: &[(ApiKey, i16, i16)] =
    &[(ApiKey::DescribeUserScramCredentials, 0, 0), (ApiKey::AlterUserScramCredentials, 0, 0)];

/// Served, and advertised, only with `--authorizer`: without one there is nothing to manage.
/// They act for their caller ([`acts_for_caller`]).
pub const ACLS: &[(ApiKey, i16, i16)] =
    &[(ApiKey::DescribeAcls, 0, 3), (ApiKey::CreateAcls, 0, 3), (ApiKey::DeleteAcls, 0, 3)];

/// Whether an API acts for its caller rather than on named resources: it checks the caller's
/// rights itself, within the caller's tenant, so it is not walked by the authorizer, charged to
/// a quota or scoped to a namespace. Every other API is, before it reaches its handler.
pub fn acts_for_caller(api_key: ApiKey) -> bool {
    CREDENTIALS.iter().chain(ACLS).any(|(key, _, _)| *key == api_key)
}

/// Declares, for every API that does not act for its caller, where the resources it names are
/// declared (`resources::Resources`, in the API's module): the authorizer and the namespace walk
/// requests and answers through these two functions and know no API themselves.
macro_rules! walked {
    ($($api:ident: $request:ty),* $(,)?) => {
        #[cfg(test)]
        const WALKED: &[ApiKey] = &[$(ApiKey::$api),*];

        /// Walks the resources `request` names. `Err`: the whole answer.
        pub(super) fn walk_request(
            request: &mut RequestKind,
            version: i16,
            walk: &mut Walk<'_>,
        ) -> Result<(), Box<ResponseKind>> {
            match request {
                $(RequestKind::$api(r) => r.walk(version, walk).map_err(|a| Box::new(ResponseKind::$api(a))),)*
                // SASL and the APIs that act for their caller never reach a walk.
                _ => Ok(()),
            }
        }

        /// Walks the names in `response`, then answers what the request's walk took out.
        pub(super) fn walk_answer(response: &mut ResponseKind, walk: &AnswerWalk<'_>, refused: Option<Refused>) {
            match response {
                $(ResponseKind::$api(r) => {
                    <$request as Resources>::walk_answer(r, walk);
                    if let Some(refused) = refused {
                        <$request as Resources>::answer_refused(r, refused);
                    }
                })*
                _ => {}
            }
        }
    };
}

walked! {
    ApiVersions: ApiVersionsRequest,
    Produce: ProduceRequest,
    Fetch: FetchRequest,
    ListOffsets: ListOffsetsRequest,
    Metadata: MetadataRequest,
    CreateTopics: CreateTopicsRequest,
    DeleteTopics: DeleteTopicsRequest,
    DeleteRecords: DeleteRecordsRequest,
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest,
    DescribeConfigs: DescribeConfigsRequest,
    AlterConfigs: AlterConfigsRequest,
    CreatePartitions: CreatePartitionsRequest,
    IncrementalAlterConfigs: IncrementalAlterConfigsRequest,
    DescribeCluster: DescribeClusterRequest,
    FindCoordinator: FindCoordinatorRequest,
    JoinGroup: JoinGroupRequest,
    SyncGroup: SyncGroupRequest,
    Heartbeat: HeartbeatRequest,
    LeaveGroup: LeaveGroupRequest,
    OffsetCommit: OffsetCommitRequest,
    OffsetFetch: OffsetFetchRequest,
    ListGroups: ListGroupsRequest,
    DescribeGroups: DescribeGroupsRequest,
    DeleteGroups: DeleteGroupsRequest,
    OffsetDelete: OffsetDeleteRequest,
    ConsumerGroupHeartbeat: ConsumerGroupHeartbeatRequest,
    ConsumerGroupDescribe: ConsumerGroupDescribeRequest,
    InitProducerId: InitProducerIdRequest,
    AddPartitionsToTxn: AddPartitionsToTxnRequest,
    AddOffsetsToTxn: AddOffsetsToTxnRequest,
    TxnOffsetCommit: TxnOffsetCommitRequest,
    EndTxn: EndTxnRequest,
    DescribeProducers: DescribeProducersRequest,
    ListTransactions: ListTransactionsRequest,
    DescribeTransactions: DescribeTransactionsRequest,
}

/// ApiVersions names nothing.
impl Resources for ApiVersionsRequest {
    fn walk(&mut self, _version: i16, _walk: &mut Walk<'_>) -> Result<(), ApiVersionsResponse> {
        Ok(())
    }

    fn walk_answer(_response: &mut ApiVersionsResponse, _walk: &AnswerWalk<'_>) {}
}

/// What a listener serves beyond [`SUPPORTED`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Extras {
    pub sasl: bool,
    pub acls: bool,
}

impl Extras {
    fn table(self) -> impl Iterator<Item = &'static (ApiKey, i16, i16)> {
        let (sasl, credentials) = if self.sasl { (SASL, CREDENTIALS) } else { (&[][..], &[][..]) };
        let acls = if self.acls { ACLS } else { &[] };
        SUPPORTED.iter().chain(sasl).chain(credentials).chain(acls)
    }
}

pub fn is_supported(api_key: ApiKey, version: i16, extras: Extras) -> bool {
    extras.table().any(|(k, min, max)| *k == api_key && (*min..=*max).contains(&version))
}

fn api_versions_table(extras: Extras) -> Vec<ApiVersion> {
    extras
        .table()
        .map(|(key, min, max)| {
            ApiVersion::default().with_api_key(*key as i16).with_min_version(*min).with_max_version(*max)
        })
        .collect()
}

/// Feature levels Floe supports and has finalized, from ApiVersions v3 (KIP-584). Kafka 4.x
/// clients use transactions version 2 (KIP-890: an epoch per transaction, partitions and groups
/// added by Produce and TxnOffsetCommit) when `transaction.version` is finalized at 2 or more.
const FEATURES: &[(&str, i16, i16)] = &[("transaction.version", 0, 2)];

fn api_versions(agent: &Agent, version: i16) -> ApiVersionsResponse {
    use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
    let response = ApiVersionsResponse::default().with_api_keys(api_versions_table(extras(agent)));
    if version < 3 {
        return response;
    }
    let supported = FEATURES.iter().map(|(name, min, max)| {
        SupportedFeatureKey::default()
            .with_name(StrBytes::from_static_str(name))
            .with_min_version(*min)
            .with_max_version(*max)
    });
    let finalized = FEATURES.iter().map(|(name, _, max)| {
        FinalizedFeatureKey::default()
            .with_name(StrBytes::from_static_str(name))
            .with_min_version_level(*max)
            .with_max_version_level(*max)
    });
    // One epoch for the whole life of these levels: they never change while an agent runs.
    response
        .with_supported_features(supported.collect())
        .with_finalized_features_epoch(1)
        .with_finalized_features(finalized.collect())
}

/// The answer to an ApiVersions request of a version we do not support (sent as v0).
pub(super) fn api_versions_unsupported(extras: Extras) -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_error_code(code::UNSUPPORTED_VERSION).with_api_keys(api_versions_table(extras))
}

/// What `agent`'s Kafka listener serves beyond [`SUPPORTED`].
pub(super) fn extras(agent: &Agent) -> Extras {
    Extras { sasl: agent.config.sasl.is_some(), acls: agent.config.authorizer.is_some() }
}

/// How a request will be answered.
#[derive(Debug)]
pub(super) enum Reply {
    /// No response at all (Produce with acks=0).
    None,
    Now(Box<ResponseKind>),
    Later(JoinHandle<ResponseKind>),
}

/// Who sent a request.
pub(super) struct Caller<'a> {
    /// Who the connection authenticated as (with SASL).
    pub(super) principal: Option<&'a Principal>,
    /// What its ACLs allow (with `--authorizer`).
    pub(super) access: Option<&'a Access>,
    pub(super) peer: std::net::SocketAddr,
    /// The caller's namespace key (`floe_metadata::namespace`), which its producer ids are
    /// bound to.
    pub(super) tenant: Option<&'a str>,
}

fn later<F>(future: F) -> Reply
where
    F: std::future::Future<Output = ResponseKind> + Send + 'static,
{
    Reply::Later(tokio::spawn(future))
}

/// Starts handling one request. Only Produce does work before returning (it appends to the
/// flush buffer, in request order); everything else runs in its own task, OffsetCommits in
/// `lane`, the connection's, in order. A request of an API that does not act for its caller has
/// been authorized and scoped to the caller's namespace by the connection.
pub(super) async fn start(
    agent: &Arc<Agent>,
    header: &RequestHeader,
    request: RequestKind,
    caller: &Caller<'_>,
    lane: &mut api::groups::CommitLane,
) -> Reply {
    let version = header.request_api_version;
    let (peer, tenant) = (caller.peer, caller.tenant);
    let client = || api::groups::Client {
        client_id: header.client_id.as_ref().map(|c| c.to_string()).unwrap_or_default(),
        host: format!("/{}", peer.ip()),
    };
    let agent = agent.clone();
    match request {
        RequestKind::ApiVersions(_) => Reply::Now(Box::new(ResponseKind::ApiVersions(api_versions(&agent, version)))),
        RequestKind::Produce(req) => api::produce::start(&agent, version, req).await,
        RequestKind::Fetch(req) => {
            later(async move { ResponseKind::Fetch(api::fetch::handle(&agent, version, req).await) })
        }
        RequestKind::ListOffsets(req) => {
            later(async move { ResponseKind::ListOffsets(api::list_offsets::handle(&agent, version, req).await) })
        }
        RequestKind::Metadata(req) => {
            let client_id = header.client_id.as_ref().map(|c| c.to_string());
            later(async move { ResponseKind::Metadata(api::metadata::handle(&agent, version, req, client_id).await) })
        }
        RequestKind::CreateTopics(req) => {
            later(async move { ResponseKind::CreateTopics(api::topics::create_topics(&agent, version, req).await) })
        }
        RequestKind::DeleteTopics(req) => {
            later(async move { ResponseKind::DeleteTopics(api::topics::delete_topics(&agent, version, req).await) })
        }
        RequestKind::CreatePartitions(req) => {
            later(async move { ResponseKind::CreatePartitions(api::topics::create_partitions(&agent, req).await) })
        }
        RequestKind::DeleteRecords(req) => {
            later(async move { ResponseKind::DeleteRecords(api::delete_records::handle(&agent, req).await) })
        }
        RequestKind::OffsetForLeaderEpoch(req) => {
            later(
                async move { ResponseKind::OffsetForLeaderEpoch(api::offset_for_leader_epoch::handle(&agent, req).await) },
            )
        }
        RequestKind::DescribeConfigs(req) => {
            later(async move { ResponseKind::DescribeConfigs(api::configs::describe(&agent, req)) })
        }
        RequestKind::AlterConfigs(req) => {
            later(async move { ResponseKind::AlterConfigs(api::configs::alter(&agent, req).await) })
        }
        RequestKind::IncrementalAlterConfigs(req) => {
            later(
                async move { ResponseKind::IncrementalAlterConfigs(api::configs::incremental_alter(&agent, req).await) },
            )
        }
        RequestKind::DescribeCluster(req) => {
            later(async move { ResponseKind::DescribeCluster(api::cluster::describe_cluster(&agent, req)) })
        }
        RequestKind::FindCoordinator(req) => {
            let client_id = header.client_id.as_deref();
            let response = api::groups::find_coordinator(&agent, version, req, client_id);
            Reply::Now(Box::new(ResponseKind::FindCoordinator(response)))
        }
        RequestKind::JoinGroup(req) => {
            let client = client();
            later(async move { ResponseKind::JoinGroup(api::groups::join(&agent, version, req, client).await) })
        }
        RequestKind::SyncGroup(req) => {
            later(async move { ResponseKind::SyncGroup(api::groups::sync(&agent, version, req).await) })
        }
        RequestKind::Heartbeat(req) => {
            later(async move { ResponseKind::Heartbeat(api::groups::heartbeat(&agent, req).await) })
        }
        RequestKind::LeaveGroup(req) => {
            later(async move { ResponseKind::LeaveGroup(api::groups::leave(&agent, version, req).await) })
        }
        RequestKind::OffsetCommit(req) => {
            // Stamped here, in request order: the handler tasks may start in any order (tokio
            // runs the newest spawned task first), and the state machine skips a commit whose
            // stamp is older than one it applied.
            let answer = lane.submit(&agent, req, next_commit_stamp());
            later(async move { ResponseKind::OffsetCommit(answer.await) })
        }
        RequestKind::OffsetFetch(req) => {
            later(async move { ResponseKind::OffsetFetch(api::groups::offset_fetch(&agent, version, req).await) })
        }
        RequestKind::ListGroups(req) => {
            later(async move { ResponseKind::ListGroups(api::groups::list(&agent, version, req).await) })
        }
        RequestKind::DescribeGroups(req) => {
            later(async move { ResponseKind::DescribeGroups(api::groups::describe(&agent, req).await) })
        }
        RequestKind::DeleteGroups(req) => {
            later(async move { ResponseKind::DeleteGroups(api::groups::delete(&agent, req).await) })
        }
        RequestKind::OffsetDelete(req) => {
            later(async move { ResponseKind::OffsetDelete(api::groups::offset_delete(&agent, req).await) })
        }
        RequestKind::ConsumerGroupHeartbeat(req) => {
            let client = client();
            later(async move {
                ResponseKind::ConsumerGroupHeartbeat(api::groups::consumer_heartbeat(&agent, req, client).await)
            })
        }
        RequestKind::ConsumerGroupDescribe(req) => later(async move {
            ResponseKind::ConsumerGroupDescribe(api::groups::consumer_describe(&agent, version, req).await)
        }),
        RequestKind::InitProducerId(req) => {
            let tenant = tenant.map(str::to_owned);
            later(async move {
                ResponseKind::InitProducerId(api::transactions::init_producer_id(&agent, version, req, tenant).await)
            })
        }
        RequestKind::AddPartitionsToTxn(req) => later(async move {
            ResponseKind::AddPartitionsToTxn(api::transactions::add_partitions_to_txn(&agent, version, req).await)
        }),
        RequestKind::AddOffsetsToTxn(req) => later(async move {
            ResponseKind::AddOffsetsToTxn(api::transactions::add_offsets_to_txn(&agent, version, req).await)
        }),
        RequestKind::TxnOffsetCommit(req) => later(async move {
            ResponseKind::TxnOffsetCommit(api::transactions::txn_offset_commit(&agent, version, req).await)
        }),
        RequestKind::EndTxn(req) => {
            later(async move { ResponseKind::EndTxn(api::transactions::end_txn(&agent, version, req).await) })
        }
        RequestKind::DescribeProducers(req) => {
            later(async move { ResponseKind::DescribeProducers(api::transactions::describe_producers(&agent, req)) })
        }
        RequestKind::ListTransactions(req) => {
            later(async move { ResponseKind::ListTransactions(api::transactions::list_transactions(&agent, req)) })
        }
        RequestKind::DescribeTransactions(req) => {
            later(
                async move { ResponseKind::DescribeTransactions(api::transactions::describe_transactions(&agent, req)) },
            )
        }
        RequestKind::DescribeUserScramCredentials(req) => {
            let response = match caller.principal {
                Some(principal) => api::scram_credentials::describe(&agent, principal, caller.access, &req),
                None => api::scram_credentials::describe_unauthenticated(&req),
            };
            Reply::Now(Box::new(ResponseKind::DescribeUserScramCredentials(response)))
        }
        RequestKind::AlterUserScramCredentials(req) => match caller.principal {
            Some(principal) => {
                let (principal, access) = (principal.clone(), caller.access.cloned());
                later(async move {
                    let response = api::scram_credentials::alter(&agent, &principal, access.as_ref(), req).await;
                    ResponseKind::AlterUserScramCredentials(response)
                })
            }
            None => Reply::Now(Box::new(ResponseKind::AlterUserScramCredentials(
                api::scram_credentials::alter_unauthenticated(&req),
            ))),
        },
        RequestKind::DescribeAcls(req) => Reply::Now(Box::new(ResponseKind::DescribeAcls(match caller.access {
            Some(access) => api::acls::describe(&agent, access, &req),
            // Not reached (decoded only with an authorizer); one error is DescribeAcls's answer.
            None => DescribeAclsResponse::default().with_error_code(code::SECURITY_DISABLED),
        }))),
        RequestKind::CreateAcls(req) => match caller.access.cloned() {
            Some(access) => {
                later(async move { ResponseKind::CreateAcls(api::acls::create(&agent, &access, req).await) })
            }
            None => Reply::Now(Box::new(ResponseKind::CreateAcls(api::acls::create_without_authorizer(&req)))),
        },
        RequestKind::DeleteAcls(req) => match caller.access.cloned() {
            Some(access) => {
                later(async move { ResponseKind::DeleteAcls(api::acls::delete(&agent, &access, req).await) })
            }
            None => Reply::Now(Box::new(ResponseKind::DeleteAcls(api::acls::delete_without_authorizer(&req)))),
        },
        // The connection only decodes requests whose (key, version) its tables serve, answers
        // SaslHandshake and SaslAuthenticate itself, and every other entry has an arm above.
        other => unreachable!("request {other:?} passed the version check without a handler"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API served but not declared in `walked!` would reach its handler unauthorized and
    /// unscoped, in another tenant's names.
    #[test]
    fn every_served_api_is_walked_or_acts_for_its_caller() {
        let extras = Extras { sasl: true, acls: true };
        for (key, _, _) in extras.table() {
            let sasl = SASL.iter().any(|(k, _, _)| k == key);
            assert!(sasl || acts_for_caller(*key) || WALKED.contains(key), "{key:?} names resources nobody walks");
        }
    }
}
