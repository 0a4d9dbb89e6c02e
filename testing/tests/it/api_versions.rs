//! ApiVersions, the first request of every Kafka client: the APIs and versions it may use, and
//! the answer to a client newer than the agent.

use bytes::BytesMut;
use floe_agent::kafka::dispatch::SUPPORTED;
use floe_testing::{TestAgent, TestOptions};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Encodable, StrBytes};

/// ApiVersions v3: flexible, with the client's software name and the feature levels.
const API_VERSIONS_VERSION: i16 = 3;

/// ApiVersions lists exactly the APIs of the agent's dispatch table, with the versions each
/// implements (so a client never picks one the agent would refuse): Produce v3 to v13, Fetch v4
/// to v18 and so on. The SASL and ACL APIs are left out on a listener without SASL or an
/// authorizer (as the harness runs), and so are APIs the agent does not implement at all, such
/// as ElectLeaders. The finalized `transaction.version` is 2, the level Kafka 4 clients need for
/// KIP-890 transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_lists_exactly_the_apis_the_agent_serves() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    let response = kafka.call(&api_versions_request(), API_VERSIONS_VERSION).await;
    assert_eq!(response.error_code, 0);
    let advertised = ranges(&response);
    assert_eq!(advertised, served(), "the dispatch table, no more and no less");
    for (key, min, max) in [
        (ApiKey::Produce, 3, 13),
        (ApiKey::Fetch, 4, 18),
        (ApiKey::ListOffsets, 1, 10),
        (ApiKey::Metadata, 0, 13),
        (ApiKey::CreateTopics, 2, 7),
        (ApiKey::ApiVersions, 0, 4),
    ] {
        assert!(advertised.contains(&(key as i16, min, max)), "{key:?} v{min} to v{max}: {advertised:?}");
    }
    for key in [
        // Served only with SASL.
        ApiKey::SaslHandshake,
        ApiKey::SaslAuthenticate,
        ApiKey::DescribeUserScramCredentials,
        ApiKey::AlterUserScramCredentials,
        // Served only with an authorizer.
        ApiKey::DescribeAcls,
        ApiKey::CreateAcls,
        ApiKey::DeleteAcls,
        // Not implemented.
        ApiKey::WriteTxnMarkers,
        ApiKey::DescribeLogDirs,
        ApiKey::ElectLeaders,
    ] {
        assert!(advertised.iter().all(|(k, ..)| *k != key as i16), "{key:?} is advertised: {advertised:?}");
    }
    let supported: Vec<(&str, i16, i16)> =
        response.supported_features.iter().map(|f| (f.name.as_str(), f.min_version, f.max_version)).collect();
    assert_eq!(supported, vec![("transaction.version", 0, 2)]);
    let finalized: Vec<(&str, i16, i16)> = response
        .finalized_features
        .iter()
        .map(|f| (f.name.as_str(), f.min_version_level, f.max_version_level))
        .collect();
    assert_eq!(finalized, vec![("transaction.version", 2, 2)]);
    floe.shutdown().await;
}

/// ApiVersions in a version newer than the agent's (v99, as from a client of a later Kafka) is
/// answered in v0, the one shape every client reads, with UNSUPPORTED_VERSION (35) and the same
/// table; the client then asks again in the highest version that table gives ApiVersions, on the
/// same connection, and is answered without an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_newer_than_the_agents_is_answered_in_v0_with_unsupported_version() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    // A body of the newest shape kafka-protocol knows; the agent reads no body of a version it
    // does not serve.
    let mut body = BytesMut::new();
    api_versions_request().encode(&mut body, API_VERSIONS_VERSION).expect("request encodes");
    let sent = kafka.send_raw(ApiKey::ApiVersions, 99, &body).await;
    let (answered, fallback) = kafka.recv::<ApiVersionsRequest>(0).await;
    assert_eq!(answered, sent);
    assert_eq!(fallback.error_code, ResponseError::UnsupportedVersion.code());
    assert_eq!(fallback.error_code, 35);
    assert_eq!(ranges(&fallback), served());

    let newest = fallback
        .api_keys
        .iter()
        .find(|api| api.api_key == ApiKey::ApiVersions as i16)
        .expect("ApiVersions is listed")
        .max_version;
    assert_eq!(newest, 4);
    let retried = kafka.call(&api_versions_request(), newest).await;
    assert_eq!(retried.error_code, 0);
    assert_eq!(ranges(&retried), served());
    floe.shutdown().await;
}

/// An ApiVersions request as a client sends it, naming its software.
fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("floe-testing"))
        .with_client_software_version(StrBytes::from_static_str("0.1.0"))
}

/// The (API key, min version, max version) an ApiVersions answer lists, sorted.
fn ranges(response: &ApiVersionsResponse) -> Vec<(i16, i16, i16)> {
    let mut ranges: Vec<(i16, i16, i16)> =
        response.api_keys.iter().map(|api| (api.api_key, api.min_version, api.max_version)).collect();
    ranges.sort_unstable();
    ranges
}

/// The APIs the agent's dispatch table serves on every listener, as [`ranges`] lists them.
fn served() -> Vec<(i16, i16, i16)> {
    let mut served: Vec<(i16, i16, i16)> = SUPPORTED.iter().map(|&(key, min, max)| (key as i16, min, max)).collect();
    served.sort_unstable();
    served
}
