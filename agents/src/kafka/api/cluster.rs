//! DescribeCluster: the live agents as brokers.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::code;
use super::super::resources::{AnswerWalk, Op, Resources, Walk};
use super::str_bytes;
use crate::Agent;
use kafka_protocol::messages::ResponseKind;

const ENDPOINT_BROKERS: i8 = 1;

pub(in crate::kafka) fn describe_cluster(agent: &Agent, request: DescribeClusterRequest) -> DescribeClusterResponse {
    let response = DescribeClusterResponse::default().with_endpoint_type(request.endpoint_type);
    if request.endpoint_type != ENDPOINT_BROKERS {
        return response
            .with_error_code(code::UNSUPPORTED_ENDPOINT_TYPE)
            .with_error_message(Some(str_bytes("only broker endpoints are served")));
    }
    let (agents, cluster_id) = {
        let state = agent.metadata.read();
        (crate::membership::live_agents(&state, agent), state.cluster_id.clone())
    };
    let brokers = agents
        .iter()
        .map(|crate::membership::LiveAgent { info: a, .. }| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(a.agent_id))
                .with_host(str_bytes(a.host.clone()))
                .with_port(i32::from(a.port))
                .with_rack(a.zone.clone().map(str_bytes))
        })
        .collect();
    response
        .with_cluster_id(str_bytes(cluster_id))
        .with_controller_id(BrokerId(agent.config.node_id))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(i32::MIN)
}

impl KafkaApi for DescribeClusterRequest {
    const VERSIONS: (i16, i16) = (0, 2);

    async fn start(self, cx: Context<'_>) -> Reply {
        cx.later(move |agent, _| async move { ResponseKind::DescribeCluster(describe_cluster(&agent, self)) })
    }
}

impl Resources for DescribeClusterRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), DescribeClusterResponse> {
        walk.cluster(Op::Describe).map_err(|refusal| DescribeClusterResponse::default().with_error_code(refusal.error))
    }

    fn walk_answer(_response: &mut DescribeClusterResponse, _walk: &AnswerWalk<'_>) {}
}
