//! The state as today's format ([`crate::FORMAT_VERSION`]) stores it: in Raft snapshots, bucket
//! archives (`state-*.snap`), `Command::RestoreState` and the change stream's state copies.
//!
//! It is a type of its own so that the in-memory [`State`](crate::state::State) can change (a field renamed, an index
//! added that is rebuilt on load) without changing what is stored. The conversions name every
//! field on both sides, so a field added to either does not compile until it is decided whether
//! it is stored; one that is must come with a new format, a mirror of the old one in this module
//! and a golden file (`metadata/tests/golden`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::stored_layout;

use super::{
    AgentLoad, AgentRecord, GroupRecord, IdempotencyKeyRecord, JobLease, LinkRecord, ObjectRecord, ProducerRecord,
    SchemaRegistry, SharePartition, TableRecord, TenantRecord, Topic, TransactionRecord, UsageLedger, UserRecord,
};
use super::{ApiKeyQuotas, ApiKeyRecord};
use crate::state::{ObjectId, SharePartitionKey, TopicId};

/// [`State`](crate::state::State) as format 12 stores it, field for field in the order encoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredState {
    pub(crate) applied_index: u64,
    pub(crate) generation: u64,
    pub(crate) cluster_id: String,
    pub(crate) topics: BTreeMap<TopicId, Topic>,
    pub(crate) topic_ids: BTreeMap<String, TopicId>,
    pub(crate) objects: BTreeMap<ObjectId, ObjectRecord>,
    pub(crate) next_object_id: ObjectId,
    pub(crate) broker_configs: BTreeMap<String, String>,
    pub(crate) recent_commits: BTreeMap<String, Vec<crate::command::CommittedChunk>>,
    pub(crate) recent_commit_keys: VecDeque<String>,
    pub(crate) agents: BTreeMap<i32, AgentRecord>,
    pub(crate) groups: BTreeMap<String, GroupRecord>,
    pub(crate) producers: BTreeMap<i64, ProducerRecord>,
    pub(crate) next_producer_id: i64,
    pub(crate) transactions: BTreeMap<String, TransactionRecord>,
    pub(crate) job_lease: Option<JobLease>,
    pub(crate) idempotency_keys: BTreeMap<String, IdempotencyKeyRecord>,
    pub(crate) tenants: BTreeMap<String, TenantRecord>,
    pub(crate) users: BTreeMap<String, UserRecord>,
    pub(crate) api_keys: BTreeMap<String, ApiKeyRecord>,
    pub(crate) acls: BTreeMap<String, BTreeSet<super::AclBinding>>,
    pub(crate) scram_decoy_key: Vec<u8>,
    pub(crate) last_tenant_id: u64,
    pub(crate) api_key_quotas: BTreeMap<String, ApiKeyQuotas>,
    pub(crate) registries: BTreeMap<String, SchemaRegistry>,
    pub(crate) tables: BTreeMap<TopicId, TableRecord>,
    pub(crate) usage: UsageLedger,
    pub(crate) agents_left: BTreeMap<i32, i64>,
    pub(crate) agent_loads: BTreeMap<i32, AgentLoad>,
    pub(crate) share_partitions: BTreeMap<SharePartitionKey, SharePartition>,
    pub(crate) group_configs: BTreeMap<String, BTreeMap<String, String>>,
    pub(crate) format: u32,
    pub(crate) agent_profiles: BTreeMap<i32, super::AgentProfile>,
    pub(crate) agent_peers: BTreeMap<i32, String>,
    pub(crate) links: BTreeMap<String, LinkRecord>,
    pub(crate) mirror_topics: BTreeMap<TopicId, String>,
    pub(crate) mirror_truncations: BTreeMap<(TopicId, i32), i64>,
}

stored_layout!(by field: StoredState <=> crate::state::State { applied_index, generation, cluster_id, topics, topic_ids, objects, next_object_id, broker_configs, recent_commits, recent_commit_keys, agents, groups, producers, next_producer_id, transactions, job_lease, idempotency_keys, tenants, users, api_keys, acls, scram_decoy_key, last_tenant_id, api_key_quotas, registries, tables, usage, agents_left, agent_loads, share_partitions, group_configs, format, agent_profiles, agent_peers, links, mirror_topics, mirror_truncations } derived { recent_commit_chunks, changed } by crate::state::State::rebuild_derived);
