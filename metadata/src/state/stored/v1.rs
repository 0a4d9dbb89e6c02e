//! Format 1's `State`, which had no tenant ids, no per-tenant producer-id counts and no API-key
//! quotas. Its commands are a prefix of today's `Command` and decode as they are.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::Deserialize;

use super::v2::StateV2;
use super::{
    AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, ObjectRecord, ProducerRecord, TenantRecord, Topic,
    TransactionRecord, UserRecord,
};
use super::{ApiKeyRecord, TenantQuotas};
use crate::state::{ObjectId, TopicId};

/// `State` as format 1 encoded it, field for field.
#[derive(Deserialize)]
pub(crate) struct StateV1 {
    applied_index: u64,
    generation: u64,
    cluster_id: String,
    topics: BTreeMap<TopicId, Topic>,
    topic_ids: BTreeMap<String, TopicId>,
    objects: BTreeMap<ObjectId, ObjectRecord>,
    next_object_id: ObjectId,
    broker_configs: BTreeMap<String, String>,
    recent_commits: BTreeMap<String, Vec<crate::command::CommittedChunk>>,
    recent_commit_keys: VecDeque<String>,
    agents: BTreeMap<i32, AgentRecord>,
    groups: BTreeMap<String, GroupRecord>,
    producers: BTreeMap<i64, ProducerRecord>,
    next_producer_id: i64,
    transactions: BTreeMap<String, TransactionRecord>,
    job_lease: Option<JobLease>,
    idempotency_keys: BTreeMap<String, IdempotencyKeyRecord>,
    tenants: BTreeMap<String, TenantRecordV1>,
    users: BTreeMap<String, UserRecord>,
    api_keys: BTreeMap<String, ApiKeyRecord>,
    acls: BTreeMap<String, BTreeSet<super::AclBinding>>,
    scram_decoy_key: Vec<u8>,
}

#[derive(Deserialize)]
struct TenantRecordV1 {
    created_ms: i64,
    quotas: TenantQuotas,
    cors_origins: Vec<String>,
}

impl From<StateV1> for StateV2 {
    /// Format 1's tenants keep id 0, the namespace key that is their bare name, so every stored
    /// name stays where it is; tenants created from now on get ids from 1.
    fn from(v1: StateV1) -> Self {
        let mut tenants: BTreeMap<String, TenantRecord> = v1
            .tenants
            .into_iter()
            .map(|(name, t)| {
                let record = TenantRecord {
                    created_ms: t.created_ms,
                    quotas: t.quotas,
                    cors_origins: t.cors_origins,
                    id: 0,
                    producer_ids: 0,
                };
                (name, record)
            })
            .collect();
        for key in v1.producers.values().filter_map(|p| p.tenant.as_deref()) {
            if let Some(tenant) = tenants.get_mut(key) {
                tenant.producer_ids += 1;
            }
        }
        Self {
            applied_index: v1.applied_index,
            generation: v1.generation,
            cluster_id: v1.cluster_id,
            topics: v1.topics,
            topic_ids: v1.topic_ids,
            objects: v1.objects,
            next_object_id: v1.next_object_id,
            broker_configs: v1.broker_configs,
            recent_commits: v1.recent_commits,
            recent_commit_keys: v1.recent_commit_keys,
            agents: v1.agents,
            groups: v1.groups,
            producers: v1.producers,
            next_producer_id: v1.next_producer_id,
            transactions: v1.transactions,
            job_lease: v1.job_lease,
            idempotency_keys: v1.idempotency_keys,
            tenants,
            users: v1.users,
            api_keys: v1.api_keys,
            acls: v1.acls,
            scram_decoy_key: v1.scram_decoy_key,
            last_tenant_id: 0,
            api_key_quotas: BTreeMap::new(),
        }
    }
}
