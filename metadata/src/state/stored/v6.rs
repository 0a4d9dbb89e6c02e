//! Format 6's `State`: format 7 added share groups' partitions. Its commands are a prefix of
//! today's `Command`.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 6 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV6 {
    pub(super) applied_index: u64,
    pub(super) generation: u64,
    pub(super) cluster_id: String,
    pub(super) topics: BTreeMap<TopicId, Topic>,
    pub(super) topic_ids: BTreeMap<String, TopicId>,
    pub(super) objects: BTreeMap<ObjectId, ObjectRecord>,
    pub(super) next_object_id: ObjectId,
    pub(super) broker_configs: BTreeMap<String, String>,
    pub(super) recent_commits: BTreeMap<String, Vec<crate::command::CommittedChunk>>,
    pub(super) recent_commit_keys: VecDeque<String>,
    pub(super) agents: BTreeMap<i32, AgentRecord>,
    pub(super) groups: BTreeMap<String, GroupRecord>,
    pub(super) producers: BTreeMap<i64, ProducerRecord>,
    pub(super) next_producer_id: i64,
    pub(super) transactions: BTreeMap<String, TransactionRecord>,
    pub(super) job_lease: Option<JobLease>,
    pub(super) idempotency_keys: BTreeMap<String, IdempotencyKeyRecord>,
    pub(super) tenants: BTreeMap<String, TenantRecord>,
    pub(super) users: BTreeMap<String, UserRecord>,
    pub(super) api_keys: BTreeMap<String, ApiKeyRecord>,
    pub(super) acls: BTreeMap<String, std::collections::BTreeSet<super::AclBinding>>,
    pub(super) scram_decoy_key: Vec<u8>,
    pub(super) last_tenant_id: u64,
    pub(super) api_key_quotas: BTreeMap<String, ApiKeyQuotas>,
    pub(super) registries: BTreeMap<String, SchemaRegistry>,
    pub(super) tables: BTreeMap<TopicId, TableRecord>,
    pub(super) usage: super::UsageLedger,
    pub(super) agents_left: BTreeMap<i32, i64>,
    pub(super) agent_loads: BTreeMap<i32, super::AgentLoad>,
}

impl From<StateV6> for super::StoredState {
    fn from(v6: StateV6) -> Self {
        Self {
            applied_index: v6.applied_index,
            generation: v6.generation,
            cluster_id: v6.cluster_id,
            topics: v6.topics,
            topic_ids: v6.topic_ids,
            objects: v6.objects,
            next_object_id: v6.next_object_id,
            broker_configs: v6.broker_configs,
            recent_commits: v6.recent_commits,
            recent_commit_keys: v6.recent_commit_keys,
            agents: v6.agents,
            groups: v6.groups,
            producers: v6.producers,
            next_producer_id: v6.next_producer_id,
            transactions: v6.transactions,
            job_lease: v6.job_lease,
            idempotency_keys: v6.idempotency_keys,
            tenants: v6.tenants,
            users: v6.users,
            api_keys: v6.api_keys,
            acls: v6.acls,
            scram_decoy_key: v6.scram_decoy_key,
            last_tenant_id: v6.last_tenant_id,
            api_key_quotas: v6.api_key_quotas,
            registries: v6.registries,
            tables: v6.tables,
            usage: v6.usage,
            agents_left: v6.agents_left,
            agent_loads: v6.agent_loads,
            share_partitions: BTreeMap::new(),
            group_configs: BTreeMap::new(),
            format: 0,
            agent_profiles: BTreeMap::new(),
            agent_peers: BTreeMap::new(),
            links: BTreeMap::new(),
            mirror_topics: BTreeMap::new(),
            mirror_truncations: BTreeMap::new(),
        }
    }
}
