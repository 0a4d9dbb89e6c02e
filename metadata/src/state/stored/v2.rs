//! Format 2's `State`: format 3 added the schema registries. Its commands are a prefix of
//! today's `Command` and decode as they are.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::v4::StateV4;
use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, TenantRecord, Topic,
    TransactionRecord, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, TopicId};

/// `State` as format 2 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV2 {
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
}

impl From<StateV2> for StateV4 {
    fn from(v2: StateV2) -> Self {
        Self {
            applied_index: v2.applied_index,
            generation: v2.generation,
            cluster_id: v2.cluster_id,
            topics: v2.topics,
            topic_ids: v2.topic_ids,
            objects: v2.objects,
            next_object_id: v2.next_object_id,
            broker_configs: v2.broker_configs,
            recent_commits: v2.recent_commits,
            recent_commit_keys: v2.recent_commit_keys,
            agents: v2.agents,
            groups: v2.groups,
            producers: v2.producers,
            next_producer_id: v2.next_producer_id,
            transactions: v2.transactions,
            job_lease: v2.job_lease,
            idempotency_keys: v2.idempotency_keys,
            tenants: v2.tenants,
            users: v2.users,
            api_keys: v2.api_keys,
            acls: v2.acls,
            scram_decoy_key: v2.scram_decoy_key,
            last_tenant_id: v2.last_tenant_id,
            api_key_quotas: v2.api_key_quotas,
            registries: BTreeMap::new(),
        }
    }
}
