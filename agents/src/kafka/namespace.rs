//! A tenant's connection sees only its namespace (`floe_metadata::namespace`): every topic name,
//! group id and transactional id in its requests is scoped (`orders` → `acme~orders`) before the
//! handlers see it, every name in the answers is unscoped again, and names of other tenants are
//! left out of listings. A topic id of another tenant's topic becomes the nil id, which no topic
//! has. The handlers stay unaware of tenants: this is the only place that knows.
//!
//! Tenants may not change broker configs: AlterConfigs and IncrementalAlterConfigs naming a
//! resource other than a topic are refused whole with CLUSTER_AUTHORIZATION_FAILED.

use floe_metadata::{Namespace, State};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{GroupId, RequestKind, ResponseKind, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// DescribeConfigs/AlterConfigs resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;

struct Scope<'a> {
    ns: &'a Namespace,
    state: &'a State,
}

impl Scope<'_> {
    fn str(&self, s: &mut StrBytes) {
        *s = StrBytes::from_string(self.ns.scope(s.as_str()));
    }

    fn topic(&self, t: &mut TopicName) {
        self.str(&mut t.0);
    }

    fn group(&self, g: &mut GroupId) {
        self.str(&mut g.0);
    }

    fn txn(&self, t: &mut TransactionalId) {
        self.str(&mut t.0);
    }

    /// Another tenant's topic id is made unknown.
    fn id(&self, id: &mut Uuid) {
        if self.state.topics.get(id).is_some_and(|t| !self.ns.owns(&t.name)) {
            *id = Uuid::nil();
        }
    }
}

/// Scopes every name in `request` to `ns`. `Err` answers the request without handling it.
pub(super) fn scope_request(ns: &Namespace, state: &State, request: &mut RequestKind) -> Result<(), Box<ResponseKind>> {
    let s = Scope { ns, state };
    match request {
        RequestKind::Produce(r) => {
            if let Some(t) = r.transactional_id.as_mut() {
                s.txn(t);
            }
            for t in &mut r.topic_data {
                s.topic(&mut t.name);
                s.id(&mut t.topic_id);
            }
        }
        RequestKind::Fetch(r) => {
            for t in &mut r.topics {
                s.topic(&mut t.topic);
                s.id(&mut t.topic_id);
            }
            for t in &mut r.forgotten_topics_data {
                s.topic(&mut t.topic);
                s.id(&mut t.topic_id);
            }
        }
        RequestKind::ListOffsets(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.name)),
        RequestKind::Metadata(r) => {
            for t in r.topics.iter_mut().flatten() {
                if let Some(name) = t.name.as_mut() {
                    s.topic(name);
                }
                s.id(&mut t.topic_id);
            }
        }
        RequestKind::CreateTopics(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.name)),
        RequestKind::DeleteTopics(r) => {
            for t in &mut r.topics {
                if let Some(name) = t.name.as_mut() {
                    s.topic(name);
                }
                s.id(&mut t.topic_id);
            }
            r.topic_names.iter_mut().for_each(|t| s.topic(t));
        }
        RequestKind::DeleteRecords(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.name)),
        RequestKind::OffsetForLeaderEpoch(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.topic)),
        RequestKind::CreatePartitions(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.name)),
        RequestKind::DescribeConfigs(r) => {
            for resource in r.resources.iter_mut().filter(|r| r.resource_type == RESOURCE_TOPIC) {
                s.str(&mut resource.resource_name);
            }
        }
        RequestKind::AlterConfigs(r) => {
            if r.resources.iter().any(|r| r.resource_type != RESOURCE_TOPIC) {
                let responses = r
                    .resources
                    .iter()
                    .map(|resource| {
                        kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                            .with_error_message(Some(StrBytes::from_static_str(BROKER_CONFIGS_REFUSED)))
                            .with_resource_type(resource.resource_type)
                            .with_resource_name(resource.resource_name.clone())
                    })
                    .collect();
                return Err(Box::new(ResponseKind::AlterConfigs(
                    kafka_protocol::messages::AlterConfigsResponse::default().with_responses(responses),
                )));
            }
            r.resources.iter_mut().for_each(|resource| s.str(&mut resource.resource_name));
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            if r.resources.iter().any(|r| r.resource_type != RESOURCE_TOPIC) {
                let responses = r
                    .resources
                    .iter()
                    .map(|resource| {
                        kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(ResponseError::ClusterAuthorizationFailed.code())
                            .with_error_message(Some(StrBytes::from_static_str(BROKER_CONFIGS_REFUSED)))
                            .with_resource_type(resource.resource_type)
                            .with_resource_name(resource.resource_name.clone())
                    })
                    .collect();
                return Err(Box::new(ResponseKind::IncrementalAlterConfigs(
                    kafka_protocol::messages::IncrementalAlterConfigsResponse::default().with_responses(responses),
                )));
            }
            r.resources.iter_mut().for_each(|resource| s.str(&mut resource.resource_name));
        }
        RequestKind::JoinGroup(r) => s.group(&mut r.group_id),
        RequestKind::SyncGroup(r) => s.group(&mut r.group_id),
        RequestKind::Heartbeat(r) => s.group(&mut r.group_id),
        RequestKind::LeaveGroup(r) => s.group(&mut r.group_id),
        RequestKind::OffsetCommit(r) => {
            s.group(&mut r.group_id);
            r.topics.iter_mut().for_each(|t| s.topic(&mut t.name));
        }
        RequestKind::OffsetFetch(r) => {
            s.group(&mut r.group_id);
            r.topics.iter_mut().flatten().for_each(|t| s.topic(&mut t.name));
            for g in &mut r.groups {
                s.group(&mut g.group_id);
                g.topics.iter_mut().flatten().for_each(|t| s.topic(&mut t.name));
            }
        }
        RequestKind::DescribeGroups(r) => r.groups.iter_mut().for_each(|g| s.group(g)),
        RequestKind::DeleteGroups(r) => r.groups_names.iter_mut().for_each(|g| s.group(g)),
        RequestKind::OffsetDelete(r) => {
            s.group(&mut r.group_id);
            r.topics.iter_mut().for_each(|t| s.topic(&mut t.name));
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            s.group(&mut r.group_id);
            r.subscribed_topic_names.iter_mut().flatten().for_each(|t| s.topic(t));
            r.topic_partitions.iter_mut().flatten().for_each(|t| s.id(&mut t.topic_id));
        }
        RequestKind::ConsumerGroupDescribe(r) => r.group_ids.iter_mut().for_each(|g| s.group(g)),
        RequestKind::InitProducerId(r) => {
            if let Some(t) = r.transactional_id.as_mut() {
                s.txn(t);
            }
        }
        RequestKind::AddPartitionsToTxn(r) => {
            s.txn(&mut r.v3_and_below_transactional_id);
            r.v3_and_below_topics.iter_mut().for_each(|t| s.topic(&mut t.name));
            for txn in &mut r.transactions {
                s.txn(&mut txn.transactional_id);
                txn.topics.iter_mut().for_each(|t| s.topic(&mut t.name));
            }
        }
        RequestKind::AddOffsetsToTxn(r) => {
            s.txn(&mut r.transactional_id);
            s.group(&mut r.group_id);
        }
        RequestKind::TxnOffsetCommit(r) => {
            s.txn(&mut r.transactional_id);
            s.group(&mut r.group_id);
            r.topics.iter_mut().for_each(|t| s.topic(&mut t.name));
        }
        RequestKind::EndTxn(r) => s.txn(&mut r.transactional_id),
        RequestKind::DescribeProducers(r) => r.topics.iter_mut().for_each(|t| s.topic(&mut t.name)),
        RequestKind::DescribeTransactions(r) => r.transactional_ids.iter_mut().for_each(|t| s.txn(t)),
        // ApiVersions, DescribeCluster and FindCoordinator name nothing of a namespace;
        // ListGroups and ListTransactions list everything, filtered in the answer; the SASL and
        // SCRAM APIs check the tenant themselves.
        _ => {}
    }
    Ok(())
}

const BROKER_CONFIGS_REFUSED: &str = "a tenant may alter only its own topics' configs";

fn unscoped(ns: &Namespace, s: &mut StrBytes) {
    if let Some(name) = ns.unscope(s.as_str()) {
        *s = StrBytes::from_string(name.to_owned());
    }
}

fn topic(ns: &Namespace, t: &mut TopicName) {
    unscoped(ns, &mut t.0);
}

fn group(ns: &Namespace, g: &mut GroupId) {
    unscoped(ns, &mut g.0);
}

fn txn(ns: &Namespace, t: &mut TransactionalId) {
    unscoped(ns, &mut t.0);
}

/// A KIP-848 group described through DescribeGroups carries the subscription and assignment the
/// coordinator encoded, with stored topic names; a classic member's are its client's own bytes
/// (names as the client knows them, and possibly user data), left as they are.
fn consumer_protocol(
    ns: &Namespace,
    member: &mut kafka_protocol::messages::describe_groups_response::DescribedGroupMember,
) {
    use floe_metadata::groups::{assigned_partitions, encode_assignment, encode_subscription, subscribed_topics};
    let topics = subscribed_topics(&member.member_metadata);
    if topics.iter().any(|t| ns.owns(t)) {
        let shown: Vec<String> = topics.iter().map(|t| ns.unscope(t).unwrap_or(t).to_owned()).collect();
        member.member_metadata = encode_subscription(&shown).into();
    }
    let assigned = assigned_partitions(&member.member_assignment);
    if assigned.iter().any(|(t, _)| ns.owns(t)) {
        let shown: Vec<(String, Vec<i32>)> =
            assigned.into_iter().map(|(t, p)| (ns.unscope(&t).unwrap_or(&t).to_owned(), p)).collect();
        member.member_assignment = encode_assignment(&shown).into();
    }
}

/// Unscopes every name in `response` and leaves out what belongs to other namespaces.
pub(super) fn unscope_response(ns: &Namespace, response: &mut ResponseKind) {
    match response {
        ResponseKind::Produce(r) => r.responses.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::Fetch(r) => r.responses.iter_mut().for_each(|t| topic(ns, &mut t.topic)),
        ResponseKind::ListOffsets(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::Metadata(r) => {
            r.topics.retain(|t| t.name.as_ref().is_none_or(|n| ns.owns(n.as_str())));
            r.topics.iter_mut().filter_map(|t| t.name.as_mut()).for_each(|n| topic(ns, n));
        }
        ResponseKind::CreateTopics(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::DeleteTopics(r) => {
            r.responses.iter_mut().filter_map(|t| t.name.as_mut()).for_each(|n| topic(ns, n))
        }
        ResponseKind::DeleteRecords(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::OffsetForLeaderEpoch(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.topic)),
        ResponseKind::CreatePartitions(r) => r.results.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::DescribeConfigs(r) => {
            for result in r.results.iter_mut().filter(|r| r.resource_type == RESOURCE_TOPIC) {
                unscoped(ns, &mut result.resource_name);
            }
        }
        ResponseKind::AlterConfigs(r) => {
            for result in r.responses.iter_mut().filter(|r| r.resource_type == RESOURCE_TOPIC) {
                unscoped(ns, &mut result.resource_name);
            }
        }
        ResponseKind::IncrementalAlterConfigs(r) => {
            for result in r.responses.iter_mut().filter(|r| r.resource_type == RESOURCE_TOPIC) {
                unscoped(ns, &mut result.resource_name);
            }
        }
        ResponseKind::OffsetCommit(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::OffsetFetch(r) => {
            r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name));
            for g in &mut r.groups {
                group(ns, &mut g.group_id);
                g.topics.iter_mut().for_each(|t| topic(ns, &mut t.name));
            }
        }
        ResponseKind::ListGroups(r) => {
            r.groups.retain(|g| ns.owns(g.group_id.as_str()));
            r.groups.iter_mut().for_each(|g| group(ns, &mut g.group_id));
        }
        ResponseKind::DescribeGroups(r) => {
            for g in &mut r.groups {
                group(ns, &mut g.group_id);
                if g.protocol_type.as_str() == "consumer" {
                    g.members.iter_mut().for_each(|m| consumer_protocol(ns, m));
                }
            }
        }
        ResponseKind::DeleteGroups(r) => r.results.iter_mut().for_each(|g| group(ns, &mut g.group_id)),
        ResponseKind::OffsetDelete(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::ConsumerGroupDescribe(r) => {
            for g in &mut r.groups {
                group(ns, &mut g.group_id);
                for m in &mut g.members {
                    m.subscribed_topic_names.iter_mut().for_each(|t| topic(ns, t));
                    let assigned = m.assignment.topic_partitions.iter_mut();
                    assigned
                        .chain(m.target_assignment.topic_partitions.iter_mut())
                        .for_each(|t| topic(ns, &mut t.topic_name));
                }
            }
        }
        ResponseKind::AddPartitionsToTxn(r) => {
            r.results_by_topic_v3_and_below.iter_mut().for_each(|t| topic(ns, &mut t.name));
            for result in &mut r.results_by_transaction {
                txn(ns, &mut result.transactional_id);
                result.topic_results.iter_mut().for_each(|t| topic(ns, &mut t.name));
            }
        }
        ResponseKind::TxnOffsetCommit(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::DescribeProducers(r) => r.topics.iter_mut().for_each(|t| topic(ns, &mut t.name)),
        ResponseKind::ListTransactions(r) => {
            r.transaction_states.retain(|t| ns.owns(t.transactional_id.as_str()));
            r.transaction_states.iter_mut().for_each(|t| txn(ns, &mut t.transactional_id));
        }
        ResponseKind::DescribeTransactions(r) => {
            for state in &mut r.transaction_states {
                txn(ns, &mut state.transactional_id);
                state.topics.iter_mut().for_each(|t| topic(ns, &mut t.topic));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use floe_metadata::Command;
    use kafka_protocol::messages::list_transactions_response::TransactionState;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{
        FetchRequest, ListTransactionsResponse, MetadataRequest, fetch_request::FetchTopic,
    };

    use super::*;

    fn state_with(topics: &[(&str, Uuid)]) -> State {
        let mut state = State::default();
        let _ = state.apply(1, Command::InitCluster { cluster_id: "c".into() });
        for (i, tenant) in ["acme", "globex"].into_iter().enumerate() {
            state.apply(2 + i as u64, Command::CreateTenant { name: tenant.into(), now_ms: 0 }).expect("tenant");
        }
        for (i, (name, id)) in topics.iter().enumerate() {
            let create = Command::CreateTopic {
                name: (*name).into(),
                topic_id: *id,
                partition_count: 1,
                configs: Default::default(),
            };
            state.apply(4 + i as u64, create).expect("topic created");
        }
        state
    }

    #[test]
    fn another_tenants_topic_id_becomes_unknown_and_names_are_scoped() {
        let (mine, theirs) = (Uuid::new_v4(), Uuid::new_v4());
        let state = state_with(&[("acme#1~orders", mine), ("globex#2~orders", theirs)]);
        let acme = Namespace::of("acme#1");
        let topic = |name: &str, id| {
            FetchTopic::default().with_topic(TopicName(StrBytes::from_string(name.into()))).with_topic_id(id)
        };
        let mut request =
            RequestKind::Fetch(FetchRequest::default().with_topics(vec![topic("orders", mine), topic("", theirs)]));
        scope_request(&acme, &state, &mut request).expect("scoped");
        let RequestKind::Fetch(fetch) = request else { unreachable!() };
        assert_eq!(fetch.topics[0].topic.as_str(), "acme#1~orders");
        assert_eq!(fetch.topics[0].topic_id, mine, "its own topic id stays");
        assert_eq!(fetch.topics[1].topic_id, Uuid::nil(), "another tenant's topic id is made unknown");
        assert_eq!(fetch.topics[1].topic.as_str(), "", "an empty name stays empty");

        let by_id = MetadataRequestTopic::default().with_topic_id(theirs);
        let mut request = RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![by_id])));
        scope_request(&acme, &state, &mut request).expect("scoped");
        let RequestKind::Metadata(metadata) = request else { unreachable!() };
        assert_eq!(metadata.topics.expect("topics")[0].topic_id, Uuid::nil());
    }

    #[test]
    fn listings_show_only_the_namespace_and_without_its_prefix() {
        let txn = |id: &str| {
            TransactionState::default().with_transactional_id(TransactionalId(StrBytes::from_string(id.into())))
        };
        let listed = ListTransactionsResponse::default().with_transaction_states(vec![
            txn("acme#1~writer"),
            txn("globex#2~writer"),
            txn("acmewriter"),
        ]);
        let mut response = ResponseKind::ListTransactions(listed);
        unscope_response(&Namespace::of("acme#1"), &mut response);
        let ResponseKind::ListTransactions(listed) = response else { unreachable!() };
        let ids: Vec<&str> = listed.transaction_states.iter().map(|t| t.transactional_id.as_str()).collect();
        assert_eq!(ids, vec!["writer"]);
    }

    #[test]
    fn tenants_may_not_alter_broker_configs() {
        use kafka_protocol::messages::IncrementalAlterConfigsRequest;
        use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;
        let broker =
            AlterConfigsResource::default().with_resource_type(4).with_resource_name(StrBytes::from_static_str("1"));
        let mut request = RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![broker]),
        );
        let answer = scope_request(&Namespace::of("acme#1"), &State::default(), &mut request).expect_err("refused");
        let ResponseKind::IncrementalAlterConfigs(response) = *answer else { panic!("wrong answer {answer:?}") };
        assert_eq!(response.responses[0].error_code, ResponseError::ClusterAuthorizationFailed.code());
    }
}
