//! Format 10's `State`: format 11 added links and mirror topics. Its commands are a prefix of
//! today's `Command`.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 10 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV10 {
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
    pub(super) share_partitions: BTreeMap<crate::state::SharePartitionKey, super::SharePartition>,
    pub(super) group_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub(super) format: u32,
    pub(super) agent_profiles: BTreeMap<i32, super::AgentProfile>,
    pub(super) agent_peers: BTreeMap<i32, String>,
}

impl From<StateV10> for super::StoredState {
    fn from(v10: StateV10) -> Self {
        Self {
            applied_index: v10.applied_index,
            generation: v10.generation,
            cluster_id: v10.cluster_id,
            topics: v10.topics,
            topic_ids: v10.topic_ids,
            objects: v10.objects,
            next_object_id: v10.next_object_id,
            broker_configs: v10.broker_configs,
            recent_commits: v10.recent_commits,
            recent_commit_keys: v10.recent_commit_keys,
            agents: v10.agents,
            groups: v10.groups,
            producers: v10.producers,
            next_producer_id: v10.next_producer_id,
            transactions: v10.transactions,
            job_lease: v10.job_lease,
            idempotency_keys: v10.idempotency_keys,
            tenants: v10.tenants,
            users: v10.users,
            api_keys: v10.api_keys,
            acls: v10.acls,
            scram_decoy_key: v10.scram_decoy_key,
            last_tenant_id: v10.last_tenant_id,
            api_key_quotas: v10.api_key_quotas,
            registries: v10.registries,
            tables: v10.tables,
            usage: v10.usage,
            agents_left: v10.agents_left,
            agent_loads: v10.agent_loads,
            share_partitions: v10.share_partitions,
            group_configs: v10.group_configs,
            format: v10.format,
            agent_profiles: v10.agent_profiles,
            agent_peers: v10.agent_peers,
            links: BTreeMap::new(),
            mirror_topics: BTreeMap::new(),
            mirror_truncations: BTreeMap::new(),
        }
    }
}
