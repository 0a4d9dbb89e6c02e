//! Format 5's `State`: format 6 added usage metering. Its commands are a prefix of today's
//! `Command`, except chunk commits, which `ChunkCommit`'s own decoding reads.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TableRecord, TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 5 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV5 {
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
}

impl From<StateV5> for super::StoredState {
    fn from(v5: StateV5) -> Self {
        Self {
            applied_index: v5.applied_index,
            generation: v5.generation,
            cluster_id: v5.cluster_id,
            topics: v5.topics,
            topic_ids: v5.topic_ids,
            objects: v5.objects,
            next_object_id: v5.next_object_id,
            broker_configs: v5.broker_configs,
            recent_commits: v5.recent_commits,
            recent_commit_keys: v5.recent_commit_keys,
            agents: v5.agents,
            groups: v5.groups,
            producers: v5.producers,
            next_producer_id: v5.next_producer_id,
            transactions: v5.transactions,
            job_lease: v5.job_lease,
            idempotency_keys: v5.idempotency_keys,
            tenants: v5.tenants,
            users: v5.users,
            api_keys: v5.api_keys,
            acls: v5.acls,
            scram_decoy_key: v5.scram_decoy_key,
            last_tenant_id: v5.last_tenant_id,
            api_key_quotas: v5.api_key_quotas,
            registries: v5.registries,
            tables: v5.tables,
            usage: Default::default(),
            agents_left: BTreeMap::new(),
            agent_loads: BTreeMap::new(),
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
