//! Formats 3 and 4's `State`: format 5 added table topics' tables. Their commands are a prefix
//! of today's `Command` and decode as they are.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, SchemaRegistry,
    TenantRecord, Topic, TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as formats 3 and 4 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV4 {
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
}

impl From<StateV4> for super::v5::StateV5 {
    fn from(v4: StateV4) -> Self {
        Self {
            applied_index: v4.applied_index,
            generation: v4.generation,
            cluster_id: v4.cluster_id,
            topics: v4.topics,
            topic_ids: v4.topic_ids,
            objects: v4.objects,
            next_object_id: v4.next_object_id,
            broker_configs: v4.broker_configs,
            recent_commits: v4.recent_commits,
            recent_commit_keys: v4.recent_commit_keys,
            agents: v4.agents,
            groups: v4.groups,
            producers: v4.producers,
            next_producer_id: v4.next_producer_id,
            transactions: v4.transactions,
            job_lease: v4.job_lease,
            idempotency_keys: v4.idempotency_keys,
            tenants: v4.tenants,
            users: v4.users,
            api_keys: v4.api_keys,
            acls: v4.acls,
            scram_decoy_key: v4.scram_decoy_key,
            last_tenant_id: v4.last_tenant_id,
            api_key_quotas: v4.api_key_quotas,
            registries: v4.registries,
            tables: BTreeMap::new(),
        }
    }
}
