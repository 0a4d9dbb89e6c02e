//! Format 8's `State`: format 9 added agents' profiles (roles and agent groups). Its commands
//! are a prefix of today's `Command`.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 8 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV8 {
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
}

impl From<StateV8> for super::StoredState {
    fn from(v8: StateV8) -> Self {
        Self {
            applied_index: v8.applied_index,
            generation: v8.generation,
            cluster_id: v8.cluster_id,
            topics: v8.topics,
            topic_ids: v8.topic_ids,
            objects: v8.objects,
            next_object_id: v8.next_object_id,
            broker_configs: v8.broker_configs,
            recent_commits: v8.recent_commits,
            recent_commit_keys: v8.recent_commit_keys,
            agents: v8.agents,
            groups: v8.groups,
            producers: v8.producers,
            next_producer_id: v8.next_producer_id,
            transactions: v8.transactions,
            job_lease: v8.job_lease,
            idempotency_keys: v8.idempotency_keys,
            tenants: v8.tenants,
            users: v8.users,
            api_keys: v8.api_keys,
            acls: v8.acls,
            scram_decoy_key: v8.scram_decoy_key,
            last_tenant_id: v8.last_tenant_id,
            api_key_quotas: v8.api_key_quotas,
            registries: v8.registries,
            tables: v8.tables,
            usage: v8.usage,
            agents_left: v8.agents_left,
            agent_loads: v8.agent_loads,
            share_partitions: v8.share_partitions,
            group_configs: v8.group_configs,
            format: v8.format,
            agent_profiles: BTreeMap::new(),
            agent_peers: BTreeMap::new(),
            links: BTreeMap::new(),
            mirror_topics: BTreeMap::new(),
            mirror_truncations: BTreeMap::new(),
        }
    }
}
