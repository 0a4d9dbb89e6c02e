//! Format 9's `State`: format 10 added agents' peer listeners. Its commands are a prefix of
//! today's `Command`.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 9 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV9 {
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
}

impl From<StateV9> for super::StoredState {
    fn from(v9: StateV9) -> Self {
        Self {
            applied_index: v9.applied_index,
            generation: v9.generation,
            cluster_id: v9.cluster_id,
            topics: v9.topics,
            topic_ids: v9.topic_ids,
            objects: v9.objects,
            next_object_id: v9.next_object_id,
            broker_configs: v9.broker_configs,
            recent_commits: v9.recent_commits,
            recent_commit_keys: v9.recent_commit_keys,
            agents: v9.agents,
            groups: v9.groups,
            producers: v9.producers,
            next_producer_id: v9.next_producer_id,
            transactions: v9.transactions,
            job_lease: v9.job_lease,
            idempotency_keys: v9.idempotency_keys,
            tenants: v9.tenants,
            users: v9.users,
            api_keys: v9.api_keys,
            acls: v9.acls,
            scram_decoy_key: v9.scram_decoy_key,
            last_tenant_id: v9.last_tenant_id,
            api_key_quotas: v9.api_key_quotas,
            registries: v9.registries,
            tables: v9.tables,
            usage: v9.usage,
            agents_left: v9.agents_left,
            agent_loads: v9.agent_loads,
            share_partitions: v9.share_partitions,
            group_configs: v9.group_configs,
            format: v9.format,
            agent_profiles: v9.agent_profiles,
            agent_peers: BTreeMap::new(),
            links: BTreeMap::new(),
            mirror_topics: BTreeMap::new(),
            mirror_truncations: BTreeMap::new(),
        }
    }
}
