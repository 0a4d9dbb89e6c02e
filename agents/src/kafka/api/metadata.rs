//! Metadata: the client's pool of agents as brokers, topics with ids, partitions led by the pool's
//! agents of the reached agent's roles (`crate::membership`),
//! and auto-creation of requested topics (`auto.create.topics.enable`).

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};

use super::super::error_code::{self, code};
use super::str_bytes;
use floe_metadata::AgentInfo;

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::resources::{AnswerWalk, Op, Refused, Res, Resources, TopicRef, Walk};
use crate::Agent;
use kafka_protocol::messages::ResponseKind;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;

/// Authorized-operations value meaning "not requested / not computed".
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

pub(in crate::kafka) async fn handle(
    agent: &Agent,
    version: i16,
    request: MetadataRequest,
    hints: crate::membership::ClientHints,
) -> MetadataResponse {
    let (brokers, leaders, this) = {
        let this = agent.info();
        let state = agent.metadata.read();
        let pool = crate::membership::client_pool(&state, agent, &hints);
        let leaders = crate::membership::leaders(&pool.local, agent.effective_profile(&state).roles);
        (pool.group.into_iter().map(|a| a.info).collect::<Vec<AgentInfo>>(), leaders, this)
    };
    // v0 has no null: an empty list means every topic. From v1 an empty list means none.
    let requested = match request.topics {
        None => None,
        Some(topics) if topics.is_empty() && version == 0 => None,
        Some(topics) => Some(topics),
    };
    // Below v4 a client cannot refuse auto-creation: the flag is decoded as true there, and only
    // the authorizer clears it (Create refused).
    let allow_auto_create = request.allow_auto_topic_creation && agent.config.auto_create_topics;
    let mut topics = Vec::new();
    match requested {
        None => {
            let state = agent.metadata.read();
            topics.extend(state.topics.values().map(|t| describe(&brokers, &leaders, t)));
        }
        Some(requested) => {
            for wanted in requested {
                let name = wanted.name.as_ref().map(|n| n.as_str().to_owned());
                let found = {
                    let state = agent.metadata.read();
                    match &name {
                        Some(name) => state.topic_by_name(name).map(|t| describe(&brokers, &leaders, t)),
                        None => state.topics.get(&wanted.topic_id).map(|t| describe(&brokers, &leaders, t)),
                    }
                };
                let topic = match (found, name) {
                    (Some(topic), _) => topic,
                    (None, Some(name)) if allow_auto_create => {
                        let partitions = agent.config.default_partition_count;
                        match super::topics::create(agent, &name, partitions, Default::default()).await {
                            Ok(_)
                            | Err(floe_metadata::NodeError::Rejected(floe_metadata::CommandError::TopicExists(_))) => {
                                let state = agent.metadata.read();
                                state
                                    .topic_by_name(&name)
                                    .map(|t| describe(&brokers, &leaders, t))
                                    .unwrap_or_else(|| missing(Some(name), code::UNKNOWN_TOPIC_OR_PARTITION))
                            }
                            Err(e) => {
                                let error = match &e {
                                    floe_metadata::NodeError::Rejected(
                                        floe_metadata::CommandError::InvalidTopicName { .. },
                                    ) => code::INVALID_TOPIC_EXCEPTION,
                                    other => error_code::for_node(other).code(),
                                };
                                missing(Some(name), error)
                            }
                        }
                    }
                    (None, Some(name)) => missing(Some(name), code::UNKNOWN_TOPIC_OR_PARTITION),
                    (None, None) => missing(None, code::UNKNOWN_TOPIC_ID).with_topic_id(wanted.topic_id),
                };
                topics.push(topic);
            }
        }
    }
    let cluster_id = agent.metadata.read().cluster_id.clone();
    MetadataResponse::default()
        .with_brokers(brokers.iter().map(broker).collect())
        .with_cluster_id(Some(str_bytes(cluster_id)))
        .with_controller_id(BrokerId(this.agent_id))
        .with_topics(topics)
        .with_cluster_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn broker(agent: &AgentInfo) -> MetadataResponseBroker {
    MetadataResponseBroker::default()
        .with_node_id(BrokerId(agent.agent_id))
        .with_host(str_bytes(agent.host.clone()))
        .with_port(i32::from(agent.port))
        .with_rack(agent.zone.clone().map(str_bytes))
}

/// A topic with each partition led (nominally) by its rendezvous-chosen agent among `leaders`;
/// every broker is a replica and in sync, since every agent can serve every partition.
fn describe(brokers: &[AgentInfo], leaders: &[AgentInfo], topic: &floe_metadata::Topic) -> MetadataResponseTopic {
    let all: Vec<BrokerId> = brokers.iter().map(|a| BrokerId(a.agent_id)).collect();
    let partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, p)| {
            let leader = crate::membership::partition_leader(leaders, topic.topic_id, index as i32);
            MetadataResponsePartition::default()
                .with_partition_index(index as i32)
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(p.leader_epoch)
                .with_replica_nodes(all.clone())
                .with_isr_nodes(all.clone())
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(topic.name.clone()))))
        .with_topic_id(topic.topic_id)
        .with_partitions(partitions)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

fn missing(name: Option<String>, error: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name.map(|n| TopicName(str_bytes(n))))
        .with_error_code(error)
        .with_topic_authorized_operations(AUTHORIZED_OPERATIONS_OMITTED)
}

impl KafkaApi for MetadataRequest {
    const VERSIONS: (i16, i16) = (0, 13);

    async fn start(self, cx: Context<'_>) -> Reply {
        let hints = cx.hints();
        cx.later(
            move |agent, version| async move { ResponseKind::Metadata(handle(&agent, version, self, hints).await) },
        )
    }
}

impl Resources for MetadataRequest {
    fn walk(&mut self, version: i16, walk: &mut Walk<'_>) -> Result<(), MetadataResponse> {
        // v0 has no null: an empty list asks for every topic, a listing like null from v1.
        if version == 0 && self.topics.as_ref().is_some_and(Vec::is_empty) {
            self.topics = None;
        }
        let Some(topics) = self.topics.as_mut() else {
            walk.listing();
            return Ok(());
        };
        walk.topics(
            topics,
            Op::Describe,
            |t| TopicRef { name: t.name.as_mut().map(|n| &mut n.0), id: Some(&mut t.topic_id) },
            |_| vec![],
        );
        // Auto-creation needs Create on the cluster or on each topic it would create.
        if self.allow_auto_topic_creation && walk.cluster(Op::Create).is_err() {
            let creatable =
                |t: &MetadataRequestTopic| t.name.as_ref().is_some_and(|n| walk.may(Op::Create, Res::Topic, n));
            self.allow_auto_topic_creation = topics.iter().all(creatable);
        }
        Ok(())
    }

    fn walk_answer(response: &mut MetadataResponse, walk: &AnswerWalk<'_>) {
        walk.listed(&mut response.topics, Res::Topic, |t| t.name.as_mut().map(|n| &mut n.0));
        walk.topic_ids(&mut response.topics, |t| &mut t.topic_id);
    }

    fn answer_refused(response: &mut MetadataResponse, refused: Refused) {
        response.topics.extend(refused.topics.into_iter().map(|t| {
            MetadataResponseTopic::default()
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                .with_name((!t.name.is_empty()).then_some(TopicName(t.name)))
                .with_topic_id(t.id)
        }));
    }
}
