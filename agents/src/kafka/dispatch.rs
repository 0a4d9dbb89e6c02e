//! The supported Kafka surface on one screen: one line per API (`kafka_apis!`), from which the
//! tables ApiVersions advertises, the routing of each request to its module in `api/`, and the
//! walks of the authorizer and the namespace are made. (SaslHandshake and SaslAuthenticate
//! change the connection's authentication, so the connection answers them.)

use std::sync::Arc;

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

/// Every Kafka API Floe serves, one line each: its `ApiKey` and the request type whose
/// [`KafkaApi`] (its versions and handler) and `Resources` (what it names, walked by the
/// authorizer and the namespace) its module in `api/` implements. The APIs `for_caller` check
/// their caller's rights themselves and are walked by neither. ApiVersions is built from these
/// lines, so nothing is advertised that is not served.
macro_rules! kafka_apis {
    (
        walked { $($api:ident: $request:ty),* $(,)? }
        for_caller { $($own:ident: $own_request:ty),* $(,)? }
    ) => {
        /// The APIs served on every listener, with the versions each implements fully.
        pub const SUPPORTED: &[(ApiKey, i16, i16)] =
            &[$((ApiKey::$api, <$request as KafkaApi>::VERSIONS.0, <$request as KafkaApi>::VERSIONS.1)),*];

        /// The APIs that act for their caller, each with the listener feature it needs.
        const FOR_CALLER: &[(ApiKey, i16, i16, ServedWith)] = &[$((
            ApiKey::$own,
            <$own_request as KafkaApi>::VERSIONS.0,
            <$own_request as KafkaApi>::VERSIONS.1,
            <$own_request as KafkaApi>::SERVED_WITH,
        )),*];

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

        async fn route(request: RequestKind, cx: Context<'_>) -> Reply {
            match request {
                $(RequestKind::$api(r) => r.start(cx).await,)*
                $(RequestKind::$own(r) => r.start(cx).await,)*
                // The connection only decodes requests whose (key, version) its tables serve,
                // and answers SaslHandshake and SaslAuthenticate itself.
                other => unreachable!("request {other:?} passed the version check without a handler"),
            }
        }
    };
}

kafka_apis! {
    walked {
        Produce: ProduceRequest,
        Fetch: FetchRequest,
        ListOffsets: ListOffsetsRequest,
        Metadata: MetadataRequest,
        ApiVersions: ApiVersionsRequest,
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
        ShareGroupHeartbeat: ShareGroupHeartbeatRequest,
        ShareFetch: ShareFetchRequest,
        ShareAcknowledge: ShareAcknowledgeRequest,
        ShareGroupDescribe: ShareGroupDescribeRequest,
        DescribeShareGroupOffsets: DescribeShareGroupOffsetsRequest,
        AlterShareGroupOffsets: AlterShareGroupOffsetsRequest,
        DeleteShareGroupOffsets: DeleteShareGroupOffsetsRequest,
        InitProducerId: InitProducerIdRequest,
        AddPartitionsToTxn: AddPartitionsToTxnRequest,
        AddOffsetsToTxn: AddOffsetsToTxnRequest,
        TxnOffsetCommit: TxnOffsetCommitRequest,
        EndTxn: EndTxnRequest,
        DescribeProducers: DescribeProducersRequest,
        ListTransactions: ListTransactionsRequest,
        DescribeTransactions: DescribeTransactionsRequest,
    }
    for_caller {
        DescribeUserScramCredentials: DescribeUserScramCredentialsRequest,
        AlterUserScramCredentials: AlterUserScramCredentialsRequest,
        DescribeAcls: DescribeAclsRequest,
        CreateAcls: CreateAclsRequest,
        DeleteAcls: DeleteAclsRequest,
    }
}

/// One Kafka API: the versions it serves and how a request starts. Implemented in the API's
/// module in `api/`, next to its `Resources`.
pub(super) trait KafkaApi: Sized {
    /// The versions implemented fully, advertised in ApiVersions.
    const VERSIONS: (i16, i16);

    /// For an API that acts for its caller: the listener feature without which it has nothing
    /// to act on, and is neither served nor advertised.
    const SERVED_WITH: ServedWith = ServedWith::Always;

    /// Starts handling the request. Only Produce does work before returning (it appends to the
    /// flush buffer, in request order); every other API answers at once or in its own task.
    fn start(self, cx: Context<'_>) -> impl Future<Output = Reply> + Send;
}

/// What a listener must have for an API to be served on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ServedWith {
    Always,
    /// SASL: the SCRAM credential APIs need an authenticated principal (a super user).
    Sasl,
    /// `--authorizer`: without one there are no ACLs to manage.
    Authorizer,
}

/// Served, and advertised, only when the listener has SASL: SaslHandshake v0 (raw tokens
/// after the handshake) is not implemented; every client since Kafka 1.0 uses v1. The
/// connection answers these itself.
pub const SASL: &[(ApiKey, i16, i16)] = &[(ApiKey::SaslHandshake, 1, 1), (ApiKey::SaslAuthenticate, 0, 2)];

/// Whether an API acts for its caller rather than on named resources: it checks the caller's
/// rights itself, within the caller's tenant, so it is not walked by the authorizer, charged to
/// a quota or scoped to a namespace. Every other API is, before it reaches its handler.
pub fn acts_for_caller(api_key: ApiKey) -> bool {
    FOR_CALLER.iter().any(|(key, ..)| *key == api_key)
}

impl KafkaApi for ApiVersionsRequest {
    const VERSIONS: (i16, i16) = (0, 4);

    async fn start(self, cx: Context<'_>) -> Reply {
        Reply::Now(Box::new(ResponseKind::ApiVersions(api_versions(cx.agent, cx.version()))))
    }
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
    fn table(self) -> impl Iterator<Item = (ApiKey, i16, i16)> {
        let sasl = if self.sasl { SASL } else { &[] };
        let served = move |with: ServedWith| match with {
            ServedWith::Always => true,
            ServedWith::Sasl => self.sasl,
            ServedWith::Authorizer => self.acls,
        };
        let for_caller = FOR_CALLER.iter().filter(move |(.., with)| served(*with));
        SUPPORTED.iter().chain(sasl).copied().chain(for_caller.map(|(key, min, max, _)| (*key, *min, *max)))
    }
}

pub fn is_supported(api_key: ApiKey, version: i16, extras: Extras) -> bool {
    extras.table().any(|(k, min, max)| k == api_key && (min..=max).contains(&version))
}

fn api_versions_table(extras: Extras) -> Vec<ApiVersion> {
    extras
        .table()
        .map(|(key, min, max)| {
            ApiVersion::default().with_api_key(key as i16).with_min_version(min).with_max_version(max)
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
    /// An answer the connection's writer polls itself, in order: for answers many requests
    /// get at one moment (a flush's commit answers every Produce in it), which the writer then
    /// finds ready together and sends in one write, where a task each would be run one by one
    /// beside the writer (at 2,000 partitions nearly a socket write per Produce).
    Waiting(WaitingAnswer),
}

/// The future of a [`Reply::Waiting`].
pub(super) struct WaitingAnswer(pub(super) std::pin::Pin<Box<dyn Future<Output = ResponseKind> + Send>>);

impl std::fmt::Debug for WaitingAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WaitingAnswer")
    }
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
    /// A Fetch's session: what its answers told the client, and its quiet partitions.
    pub(super) fetch_session: Option<crate::fetch::sessions::SessionView>,
}

/// What a handler knows of its request beyond the request itself.
pub(super) struct Context<'a> {
    pub(super) agent: &'a Arc<Agent>,
    pub(super) header: &'a RequestHeader,
    pub(super) caller: &'a Caller<'a>,
    /// The connection's lane of OffsetCommits, answered in request order.
    pub(super) lane: &'a mut api::groups::CommitLane,
}

impl Context<'_> {
    pub(super) fn version(&self) -> i16 {
        self.header.request_api_version
    }

    pub(super) fn client_id(&self) -> Option<&str> {
        self.header.client_id.as_deref()
    }

    /// What steers the client to agents: its client id and address.
    pub(super) fn hints(&self) -> crate::membership::ClientHints {
        crate::membership::ClientHints {
            client_id: self.client_id().map(str::to_owned),
            address: Some(self.caller.peer.ip()),
            rack: None,
        }
    }

    /// The client as a group member is described: its client id and `/address`.
    pub(super) fn client(&self) -> api::groups::Client {
        api::groups::Client {
            client_id: self.client_id().unwrap_or_default().to_owned(),
            host: format!("/{}", self.caller.peer.ip()),
        }
    }

    /// Answers in a task of its own: `handle` gets the agent and the request's version.
    pub(super) fn later<F, Fut>(&self, handle: F) -> Reply
    where
        F: FnOnce(Arc<Agent>, i16) -> Fut,
        Fut: Future<Output = ResponseKind> + Send + 'static,
    {
        Reply::Later(tokio::spawn(handle(self.agent.clone(), self.version())))
    }
}

/// Starts handling one request ([`KafkaApi::start`]), OffsetCommits in `lane`, the
/// connection's, in order. A request of an API that does not act for its caller has been
/// authorized and scoped to the caller's namespace by the connection.
pub(super) async fn start(
    agent: &Arc<Agent>,
    header: &RequestHeader,
    request: RequestKind,
    caller: &Caller<'_>,
    lane: &mut api::groups::CommitLane,
) -> Reply {
    route(request, Context { agent, header, caller, lane }).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apis_acting_for_their_caller_are_served_only_with_what_they_act_on() {
        let plain = Extras::default();
        let sasl = Extras { sasl: true, acls: false };
        let acls = Extras { sasl: false, acls: true };
        assert!(is_supported(ApiKey::Produce, 13, plain));
        assert!(!is_supported(ApiKey::Produce, 14, plain));
        for (key, served_with) in [
            (ApiKey::SaslHandshake, sasl),
            (ApiKey::DescribeUserScramCredentials, sasl),
            (ApiKey::AlterUserScramCredentials, sasl),
            (ApiKey::DescribeAcls, acls),
            (ApiKey::CreateAcls, acls),
            (ApiKey::DeleteAcls, acls),
        ] {
            let version = if key == ApiKey::SaslHandshake { 1 } else { 0 };
            assert!(!is_supported(key, version, plain), "{key:?} served without what it acts on");
            assert!(is_supported(key, version, served_with), "{key:?} not served");
        }
        assert!(acts_for_caller(ApiKey::CreateAcls) && !acts_for_caller(ApiKey::Produce));
        let advertised = api_versions_table(Extras { sasl: true, acls: true });
        assert_eq!(advertised.len(), SUPPORTED.len() + SASL.len() + FOR_CALLER.len());
    }
}
