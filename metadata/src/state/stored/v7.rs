//! Format 7's `State`: format 8 added group configs. Its commands are a prefix of
//! today's `Command`.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 7 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV7 {
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
}

impl From<StateV7> for super::StoredState {
    fn from(v7: StateV7) -> Self {
        Self {
            applied_index: v7.applied_index,
            generation: v7.generation,
            cluster_id: v7.cluster_id,
            topics: v7.topics,
            topic_ids: v7.topic_ids,
            objects: v7.objects,
            next_object_id: v7.next_object_id,
            broker_configs: v7.broker_configs,
            recent_commits: v7.recent_commits,
            recent_commit_keys: v7.recent_commit_keys,
            agents: v7.agents,
            groups: v7.groups,
            producers: v7.producers,
            next_producer_id: v7.next_producer_id,
            transactions: v7.transactions,
            job_lease: v7.job_lease,
            idempotency_keys: v7.idempotency_keys,
            tenants: v7.tenants,
            users: v7.users,
            api_keys: v7.api_keys,
            acls: v7.acls,
            scram_decoy_key: v7.scram_decoy_key,
            last_tenant_id: v7.last_tenant_id,
            api_key_quotas: v7.api_key_quotas,
            registries: v7.registries,
            tables: v7.tables,
            usage: v7.usage,
            agents_left: v7.agents_left,
            agent_loads: v7.agent_loads,
            share_partitions: v7.share_partitions,
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
