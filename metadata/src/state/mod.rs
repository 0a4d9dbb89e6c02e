//! The metadata state machine: plain deterministic Rust over in-memory state.
//!
//! [`State::apply`] validates a command, changes nothing if it is invalid, and otherwise applies
//! it and asserts the invariants it must keep. A replica that trips an assertion stops rather
//! than drift from its peers.

mod acls;
mod changed;
pub use changed::{ChangedPartitions, JournalPosition};
mod cleaning;
mod compaction;
mod group_configs;
mod groups;
mod idempotency;
mod jobs;
mod links;
mod offsets;
pub use offsets::CommitAnswer;
mod registry;
mod retention;
mod security;
mod share;
pub mod stored;
mod tables;
mod topics;
mod transactions;
mod usage;

pub use groups::{
    AskedPartitions, CommitStamp, CommittedOffset, FetchedOffset, GroupKind, GroupMembership, GroupOffsets,
    GroupRecord, MemberRecord, OFFSET_METADATA_BYTES_MAX, OFFSETS_RETENTION_MS_DEFAULT, OffsetCommit, PartitionLag,
};

pub use idempotency::IdempotencyKeyRecord;
pub use jobs::JobLease;
pub use links::{
    ChunkCut, LinkConfig, LinkRecord, LinkReport, LinkSasl, LinkState, MirrorChunk, MirrorCommit, MirrorTxnEvent,
    MirroredChunks,
};
pub use registry::{
    Compatibility, DEFAULT_COMPATIBILITY, RegistryConfig, RegistryError, RegistryMode, RegistryRevision, SchemaContent,
    SchemaRecord, SchemaReference, SchemaRegistration, SchemaRegistry, SchemaType, SubjectRecord, SubjectVersion,
    validate_subject,
};
pub use security::{
    ApiKeyQuotas, ApiKeyRecord, ScramCredential, ScramMechanism, TenantQuotas, TenantRecord, TenantTable, UserRecord,
};
pub use share::{
    AckBatch, AcquiredRange, InFlight, RecordState, SHARE_OPS_MAX, SHARE_RECORD_LOCKS_MAX, SHARE_UPDATE_WEIGHT_MAX,
    ShareAck, ShareLag, ShareOp, SharePartition, SharePartitionKey, ShareSettings,
};
pub use stored::StoredState;
pub use tables::{RetiredTable, TableCommit, TableRange, TableRecord};
pub use topics::validate_topic_name;
pub use transactions::{
    AbortedTransaction, ProducerRecord, ProducerSequences, SequencedChunk, TransactionRecord, TxnState,
};
pub use usage::{
    HOUR_MS, MINUTE_MS, Meter, Meters, UsageEntry, UsageExport, UsageHour, UsageLedger, UsageReport, UsageReporter,
    UsageSummary, add_meters, tenant_of_stored_name,
};

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, VecDeque};

use crate::command::{Command, CommandError, Outcome};

pub type TopicId = uuid::Uuid;

/// Segment objects are named once in [`State::objects`] and referred to by this id from the
/// index, so a key shared by hundreds of partitions is stored once.
pub type ObjectId = u64;

/// Everything the metadata service knows, in memory. What is stored of it is
/// [`StoredState`]: a change here is not a format change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// Index of the last applied journal entry.
    pub applied_index: u64,
    /// How many times this cluster was rebuilt from an archive (`RestoreState`): log indexes
    /// start again with each generation, so (generation, applied_index) orders states.
    pub generation: u64,
    /// Empty until the `InitCluster` command.
    pub cluster_id: String,
    pub topics: BTreeMap<TopicId, Topic>,
    pub topic_ids: BTreeMap<String, TopicId>,
    pub objects: BTreeMap<ObjectId, ObjectRecord>,
    pub next_object_id: ObjectId,
    /// Dynamic broker configs set for the whole cluster; they override agents' static settings
    /// and supply topic defaults through each topic config's broker synonym.
    pub broker_configs: BTreeMap<String, String>,
    /// Outcomes of the most recent segment commits by object key, oldest first in
    /// `recent_commit_keys`: a commit retried after a lost answer (leader change, timeout) gets
    /// the original offsets instead of being sequenced twice. From format 12 an agent's key
    /// (`segments/<UUIDv7>.seg`) stays after its answer is dropped, with an empty list (no commit
    /// is answered so), until its deadline passes: a late copy of its commit is refused, never
    /// applied again (`offsets.rs`).
    pub recent_commits: BTreeMap<String, offsets::CommitAnswer>,
    /// The keys of `recent_commits` whose answers are kept, in commit order (at most
    /// `RECENT_COMMITS_MAX`; from format 15 at most `RECENT_COMMIT_CHUNKS_MAX` chunks answered,
    /// and none past its key's deadline).
    pub recent_commit_keys: VecDeque<String>,
    /// Chunks in the kept answers: derived from `recent_commits`, not stored.
    pub recent_commit_chunks: usize,
    /// Agents that have announced themselves, with their last heartbeat time (agent clock, ms).
    pub agents: BTreeMap<i32, AgentRecord>,
    /// Consumer groups by id: last completed membership and committed offsets.
    pub groups: BTreeMap<String, GroupRecord>,
    /// Idempotent and transactional producers by producer id: epoch and recent sequences.
    pub producers: BTreeMap<i64, ProducerRecord>,
    /// The id the next InitProducerId hands out.
    pub next_producer_id: i64,
    /// Transactions by transactional id.
    pub transactions: BTreeMap<String, TransactionRecord>,
    /// Which agent runs the storage jobs (compaction, garbage collection), until when.
    pub job_lease: Option<JobLease>,
    /// HTTP produce idempotency keys and the producer each writes as; forgotten with their
    /// producer (`producer.id.expiration.ms` after its last write).
    pub idempotency_keys: BTreeMap<String, IdempotencyKeyRecord>,
    /// Tenants by name.
    pub tenants: BTreeMap<String, TenantRecord>,
    /// SASL users by name (unique across tenants).
    pub users: BTreeMap<String, UserRecord>,
    /// HTTP API keys by id.
    pub api_keys: BTreeMap<String, ApiKeyRecord>,
    /// ACL bindings by tenant (`""`: a cluster without tenants), on the names its clients use.
    pub acls: BTreeMap<String, std::collections::BTreeSet<crate::acl::AclBinding>>,
    /// The key SCRAM decoy salts are derived from (`InitScramDecoyKey`); empty until then.
    /// Never leaves the cluster: agents hold it in their mirrors, no API answers with it.
    pub scram_decoy_key: Vec<u8>,
    /// The id the last tenant created got (format 2); ids are never reused.
    pub last_tenant_id: u64,
    /// Rate quotas of API keys that have their own, by key id (format 2).
    pub api_key_quotas: BTreeMap<String, ApiKeyQuotas>,
    /// Schema registries by namespace key (`""`: the cluster's without tenants) (format 3).
    pub registries: BTreeMap<String, SchemaRegistry>,
    /// Table topics' tables by topic (format 5): offsets converted and the current snapshot.
    pub tables: BTreeMap<TopicId, TableRecord>,
    /// Tenants' usage per minute, until exported (format 6).
    pub usage: UsageLedger,
    /// Agents that left, with when (their clock), so an older heartbeat does not return them
    /// (format 6).
    pub agents_left: BTreeMap<i32, i64>,
    /// Agents' last reported utilization (thousandths of their targets) and when (format 6).
    pub agent_loads: BTreeMap<i32, AgentLoad>,
    /// Share groups' partitions (format 7): records in flight, their states and locks.
    pub share_partitions: BTreeMap<SharePartitionKey, SharePartition>,
    /// Configs set on groups (the GROUP config resource, format 8), by group id; a group may
    /// have configs before it has members, and loses them when it is deleted.
    pub group_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// The metadata format whose rules every replica applies (format 8): raised by
    /// `SetFormat` once every voter runs a binary of that format, so a replica of an older
    /// binary never applies a command another way than the others. 0 before format 8.
    pub format: u32,
    /// Agents' roles and agent groups (format 9), for agents that are not of all roles in the
    /// default group; forgotten with the agent.
    pub agent_profiles: BTreeMap<i32, AgentProfile>,
    /// Agents' peer listeners (format 10), for agents that have one; forgotten with the agent.
    pub agent_peers: BTreeMap<i32, String>,
    /// Links by name (format 11): source clusters mirrored here with identical offsets.
    pub links: BTreeMap<String, LinkRecord>,
    /// Mirror topics and the link that writes them (format 11); a topic leaves this map when its
    /// link is promoted or the topic is deleted.
    pub mirror_topics: BTreeMap<TopicId, String>,
    /// Partitions of topics a reversed link adopted that must be cut back to the offset both
    /// sides share before the link writes them (format 11); the link's job cuts them.
    pub mirror_truncations: BTreeMap<(TopicId, i32), i64>,
    /// The partitions the applied commands changed (`changed.rs`): derived, not stored, never
    /// compared.
    pub changed: ChangedPartitions,
}

/// How clients reach an agent, as listed in Kafka Metadata responses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentInfo {
    pub agent_id: i32,
    pub host: String,
    pub port: u16,
    pub zone: Option<String>,
}

/// What an agent does and which agents it is pooled with (format 9).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentProfile {
    pub roles: AgentRoles,
    /// The agent group: clients that reach an agent are told only of its group's agents
    /// (`""`: the default group).
    pub group: String,
}

impl Default for AgentProfile {
    fn default() -> Self {
        Self { roles: AgentRoles::ALL, group: String::new() }
    }
}

/// The work an agent takes: clients' writes, clients' reads, the storage jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentRoles {
    pub produce: bool,
    pub fetch: bool,
    pub jobs: bool,
}

impl AgentRoles {
    pub const ALL: Self = Self { produce: true, fetch: true, jobs: true };

    /// Whether the agent takes no work at all (refused).
    pub fn is_empty(&self) -> bool {
        !(self.produce || self.fetch || self.jobs)
    }
}

impl std::fmt::Display for AgentRoles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = [(self.produce, "produce"), (self.fetch, "fetch"), (self.jobs, "jobs")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
        f.write_str(&names.join(","))
    }
}

impl std::str::FromStr for AgentRoles {
    type Err = String;

    /// A comma-separated list of `produce`, `fetch` and `jobs` (at least one).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut roles = Self { produce: false, fetch: false, jobs: false };
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "produce" => roles.produce = true,
                "fetch" => roles.fetch = true,
                "jobs" => roles.jobs = true,
                other => return Err(format!("unknown agent role {other:?}; known: produce, fetch, jobs")),
            }
        }
        if roles.is_empty() {
            return Err("an agent needs at least one role (produce, fetch, jobs)".into());
        }
        Ok(roles)
    }
}

/// An agent's last load report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentLoad {
    pub utilization_milli: u32,
    pub reported_ms: i64,
}

/// An agent as the cluster knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentRecord {
    pub info: AgentInfo,
    pub last_heartbeat_ms: i64,
}

/// A topic: its partitions and its explicitly set configs (defaults are not stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub topic_id: TopicId,
    pub configs: BTreeMap<String, String>,
    /// Shared, copied on write (`State::partition_mut`): a copy of the state (a snapshot's, a
    /// change stream's, the archive's), taken under the state's lock, copies pointers, and a
    /// partition written while a copy lives is copied once.
    pub partitions: Vec<std::sync::Arc<Partition>>,
}

/// One partition's log, as metadata sees it: offsets and where their bytes are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partition {
    /// Offset the next committed batch gets: Kafka's log end offset and high watermark.
    pub next_offset: i64,
    pub log_start_offset: i64,
    pub leader_epoch: i32,
    /// Chunks in offset order, contiguous: each entry starts where the previous one ended.
    pub index: VecDeque<IndexEntry>,
    /// Bytes of the index's chunks: the partition's size, for `retention.bytes`.
    pub index_bytes: u64,
    /// Producers with an open transaction here, by producer id: the transaction's first offset
    /// in this partition. The smallest is the last stable offset.
    pub open_transactions: BTreeMap<i64, i64>,
    /// Aborted transactions' offset ranges, by marker offset: read_committed consumers skip
    /// their batches. A range is listed while its marker is kept: retention forgets it with the
    /// log start, key compaction with its marker (`cleaning.rs`).
    pub aborted_transactions: VecDeque<AbortedTransaction>,
}

/// Offsets `base_offset..=last_offset` of a partition and where their batches are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    pub base_offset: i64,
    pub last_offset: i64,
    pub timestamp_max: i64,
    pub data: EntryData,
}

/// Where an index entry's batches come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryData {
    /// A byte range of a segment object.
    Chunk { object_id: ObjectId, byte_start: u64, byte_len: u32, crc32c: u32 },
    /// A transaction marker: one control record, built when fetched rather than stored.
    Marker(TxnMarker),
    /// A byte range written by key compaction. Records were removed, so offsets have gaps and
    /// each batch carries its own base offset in the object.
    CleanedChunk { object_id: ObjectId, byte_start: u64, byte_len: u32, crc32c: u32 },
    /// Offsets whose records key compaction removed entirely: nothing to read.
    Removed,
    /// A [`EntryData::CleanedChunk`] that still holds tombstones, and the earliest delete
    /// horizon among their batches (KIP-534): a key compaction pass is due once it passes.
    /// (A variant of its own, after the others, so journals and snapshots written before it
    /// still read.)
    CleanedChunkWithTombstones {
        object_id: ObjectId,
        byte_start: u64,
        byte_len: u32,
        crc32c: u32,
        delete_horizon_ms: i64,
    },
}

/// Where an entry's bytes are in the object store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredChunk {
    pub object_id: ObjectId,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
    /// Batches carry their offsets (key-compacted); otherwise offsets follow from the entry's
    /// base offset and each batch's `lastOffsetDelta`.
    pub offsets_in_batches: bool,
}

/// A commit or abort marker of one producer's transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnMarker {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub commit: bool,
}

impl IndexEntry {
    /// The segment object holding the entry's bytes, unless it is a marker.
    pub fn object_id(&self) -> Option<ObjectId> {
        self.chunk().map(|c| c.object_id)
    }

    /// Bytes the entry takes in object storage (markers take none).
    pub fn stored_bytes(&self) -> u64 {
        self.chunk().map_or(0, |c| u64::from(c.byte_len))
    }

    /// The stored bytes of the entry, unless it is a marker or removed.
    pub fn chunk(&self) -> Option<StoredChunk> {
        match self.data {
            EntryData::Chunk { object_id, byte_start, byte_len, crc32c } => {
                Some(StoredChunk { object_id, byte_start, byte_len, crc32c, offsets_in_batches: false })
            }
            EntryData::CleanedChunk { object_id, byte_start, byte_len, crc32c }
            | EntryData::CleanedChunkWithTombstones { object_id, byte_start, byte_len, crc32c, .. } => {
                Some(StoredChunk { object_id, byte_start, byte_len, crc32c, offsets_in_batches: true })
            }
            EntryData::Marker(_) | EntryData::Removed => None,
        }
    }

    /// When key compaction may drop the tombstones this entry holds, if it holds any.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        match self.data {
            EntryData::CleanedChunkWithTombstones { delete_horizon_ms, .. } => Some(delete_horizon_ms),
            _ => None,
        }
    }
}

/// A segment object known to metadata and how many index entries refer to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRecord {
    pub key: String,
    pub object_bytes: u64,
    pub reference_count: u64,
}

impl State {
    /// Applies one journal entry. Never panics on a command's content: invalid commands are
    /// rejected with an error and leave the state unchanged.
    pub fn apply(&mut self, index: u64, command: Command) -> Result<Outcome, CommandError> {
        assert!(index > self.applied_index, "journal entries are applied once, in order");
        self.applied_index = index;
        match command {
            Command::InitCluster { cluster_id } => {
                if !self.cluster_id.is_empty() {
                    return Err(CommandError::AlreadyInitialized);
                }
                self.cluster_id = cluster_id;
                Ok(Outcome::Done)
            }
            Command::InitScramDecoyKey { key } => {
                if !self.scram_decoy_key.is_empty() {
                    return Err(CommandError::AlreadyInitialized);
                }
                if key.len() < 16 {
                    return Err(CommandError::InvalidCredential("a decoy key has at least 16 bytes".into()));
                }
                self.scram_decoy_key = key;
                Ok(Outcome::Done)
            }
            Command::CreateTopic { name, topic_id, partition_count, configs } => {
                self.create_topic(name, topic_id, partition_count, configs)
            }
            Command::DeleteTopic { name } => self.delete_topic(&name),
            Command::CreatePartitions { name, partition_count } => {
                self.refuse_mirror_by_name(&name)?;
                self.create_partitions(&name, partition_count)
            }
            Command::SetTopicConfigs { name, configs } => {
                self.refuse_mirror_by_name(&name)?;
                self.set_topic_configs(&name, configs)
            }
            Command::CommitSegment(commit) => self.commit_segment(&commit),
            Command::DeleteRecords { topic_id, partition, offset } => {
                self.refuse_mirror(topic_id)?;
                self.delete_records(topic_id, partition, offset)
            }
            Command::SetBrokerConfigs { configs } => self.set_broker_configs(configs),
            Command::AgentHeartbeat { agent, now_ms } => self.agent_heartbeat(agent.into(), None, None, now_ms),
            Command::AgentHeartbeatWithProfile { agent, profile, now_ms } => {
                if !self.applies_format(9) {
                    return Err(CommandError::InvalidCommit("agent roles need every metadata node on format 9".into()));
                }
                self.agent_heartbeat(agent.into(), Some(profile.into()), None, now_ms)
            }
            Command::AgentHeartbeatWithPeer { agent, profile, peer_addr, now_ms } => {
                if !self.applies_format(10) {
                    return Err(CommandError::InvalidCommit(
                        "agent peer listeners need every metadata node on format 10".into(),
                    ));
                }
                self.agent_heartbeat(agent.into(), Some(profile.into()), Some(peer_addr), now_ms)
            }
            Command::RestoreState(seed) => {
                if !self.cluster_id.is_empty() || !self.topics.is_empty() {
                    return Err(CommandError::AlreadyInitialized);
                }
                let generation = seed.generation + 1;
                *self = State::from(*seed);
                // Raft indexes of the new cluster start again; only this bookkeeping changes.
                self.applied_index = index;
                self.generation = generation;
                Ok(Outcome::Done)
            }
            Command::StoreGroup { group_id, membership, now_ms } => {
                self.store_group(&group_id, membership.into(), now_ms)
            }
            Command::CommitOffsets { group_id, offsets, stamp, now_ms } => {
                self.commit_offsets(&group_id, stored::each_into(offsets), stamp.map(Into::into), now_ms)
            }
            Command::DeleteGroup { group_id } => self.delete_group(&group_id),
            Command::DeleteOffsets { group_id, partitions } => self.delete_offsets(&group_id, partitions),
            Command::ExpireOffsets { now_ms } => self.expire_offsets(now_ms),
            Command::InitProducerId { transactional_id, transaction_timeout_ms, expected, now_ms, tenant } => {
                self.init_producer_id(transactional_id, transaction_timeout_ms, expected, now_ms, tenant)
            }
            Command::AddPartitionsToTxn { transactional_id, producer, partitions, now_ms } => {
                self.add_partitions_to_txn(&transactional_id, producer, partitions, now_ms)
            }
            Command::AddOffsetsToTxn { transactional_id, producer, group_id, now_ms } => {
                self.add_offsets_to_txn(&transactional_id, producer, group_id, now_ms)
            }
            Command::TxnCommitOffsets { transactional_id, producer, group_id, offsets, now_ms } => {
                self.txn_commit_offsets(&transactional_id, producer, group_id, stored::each_into(offsets), now_ms)
            }
            Command::EndTxn { transactional_id, producer, commit, now_ms } => {
                self.end_txn(&transactional_id, producer, commit, now_ms)
            }
            Command::AbortTxn { transactional_id, now_ms } => self.abort_txn_by_operator(&transactional_id, now_ms),
            Command::ExpireTransactions { now_ms } => self.expire_transactions(now_ms),
            Command::ApplyRetention { now_ms } => self.apply_retention(now_ms),
            Command::ForgetObjects { object_ids } => self.forget_objects(&object_ids),
            Command::CompactChunks(run) => self.compact_chunks(run),
            Command::CompactRuns(object) => self.compact_runs(object),
            Command::CleanKeys(range) => self.clean_keys(range),
            Command::AcquireJobLease { agent_id, now_ms, duration_ms } => {
                self.acquire_job_lease(agent_id, now_ms, duration_ms)
            }
            Command::InitIdempotencyKey { key, request_digest, now_ms, tenant } => {
                self.init_idempotency_key(key, request_digest, now_ms, tenant)
            }
            Command::CreateTenant { name, now_ms } => self.create_tenant(name, now_ms),
            Command::DeleteTenant { name } => self.delete_tenant(&name),
            Command::SetTenantQuotas { tenant, quotas } => self.set_tenant_quotas(&tenant, quotas.into()),
            Command::CreateAcls { tenant, bindings } => self.create_acls(tenant, stored::each_into(bindings)),
            Command::DeleteAcls { tenant, filters } => self.delete_acls(&tenant, &filters),
            Command::SetTenantCorsOrigins { tenant, origins } => self.set_tenant_cors_origins(&tenant, origins),
            Command::SetApiKeyQuotas { key_id, quotas } => self.set_api_key_quotas(&key_id, quotas.into()),
            Command::UpsertScramCredential { user, tenant, mechanism, credential } => {
                self.upsert_scram_credential(user, tenant, mechanism, credential.into())
            }
            Command::DeleteUser { user } => self.delete_user(&user),
            Command::DeleteScramCredential { user, tenant, mechanism } => {
                self.delete_scram_credential(&user, &tenant, mechanism)
            }
            Command::CreateApiKey { key_id, record } => self.create_api_key(key_id, record.into()),
            Command::DeleteApiKey { key_id } => self.delete_api_key(&key_id),
            Command::RegisterSchema(registration) => self.register_schema(registration),
            Command::DeleteSchemaVersions { namespace, subject, version, permanent } => {
                self.delete_schema_versions(&namespace, &subject, version, permanent)
            }
            Command::SetRegistryConfig { namespace, subject, config } => {
                self.set_registry_config(&namespace, subject, config.map(Into::into))
            }
            Command::SetRegistryMode { namespace, subject, mode, force } => {
                self.set_registry_mode(&namespace, subject, mode, force)
            }
            Command::EndTxnV2 { transactional_id, producer, commit, now_ms } => {
                self.end_txn_v2(&transactional_id, producer, commit, now_ms)
            }
            Command::CommitTableSnapshot(commit) => self.commit_table_snapshot(commit),
            Command::ReportUsage(report) => self.report_usage(report),
            Command::CloseUsageMinute { now_ms } => {
                let closed = self.close_usage_minute(now_ms);
                // The leader's time, as the state knows it, moved on: some keys' deadlines passed.
                self.forget_expired_commit_keys();
                closed
            }
            Command::MarkUsageExported(export) => self.mark_usage_exported(export),
            Command::ReportAgentLoad { agent_id, utilization_milli, now_ms } => {
                if !self.agents.contains_key(&agent_id) {
                    return Err(CommandError::InvalidCommit(format!("agent {agent_id} is not in the cluster")));
                }
                self.agent_loads.insert(agent_id, AgentLoad { utilization_milli, reported_ms: now_ms });
                Ok(Outcome::Done)
            }
            Command::ShareUpdate { now_ms, ops } => self.share_update(now_ms, ops),
            Command::SetGroupConfigs { group_id, configs } => self.set_group_configs(group_id, configs),
            Command::SetFormat { format } => {
                if format > crate::FORMAT_VERSION {
                    return Err(CommandError::InvalidCommit(format!(
                        "format {format} is newer than this Floe's ({})",
                        crate::FORMAT_VERSION
                    )));
                }
                self.format = self.format.max(format);
                Ok(Outcome::Done)
            }
            Command::AgentLeave { agent_id, now_ms } => {
                self.agents.remove(&agent_id);
                self.agent_loads.remove(&agent_id);
                self.agent_profiles.remove(&agent_id);
                self.agent_peers.remove(&agent_id);
                self.agents_left.insert(agent_id, now_ms);
                if self.job_lease.is_some_and(|lease| lease.agent_id == agent_id) {
                    self.job_lease = None;
                }
                Ok(Outcome::Done)
            }
            Command::CommitSegments(commits) => self.commit_segments(&commits),
            Command::CommitSegmentsPacked(crate::command::PackedCommits(commits)) => {
                if !self.applies_format(13) {
                    return Err(CommandError::InvalidCommit(
                        "packed segment commits need every metadata node on format 13".into(),
                    ));
                }
                self.commit_segments(&commits)
            }
            Command::SetLink { name, config, now_ms } => self.set_link(name, config.into(), now_ms),
            Command::DeleteLink { name } => self.delete_link(&name),
            Command::CreateMirrorTopic { link, name, topic_id, partition_count, configs } => {
                self.create_mirror_topic(link, name, topic_id, partition_count, configs)
            }
            Command::UpdateMirrorTopic { link, topic_id, partition_count, configs } => {
                self.update_mirror_topic(&link, topic_id, partition_count, configs)
            }
            Command::MirrorCommit(commit) => self.mirror_commit(commit),
            Command::ReportLink(report) => self.report_link(report),
            Command::PromoteLink { name, now_ms } => self.promote_link(&name, now_ms),
            Command::MirrorGroupOffsets { link, group_id, offsets, now_ms } => {
                self.mirror_group_offsets(&link, &group_id, stored::each_into(offsets), now_ms)
            }
            Command::AdoptMirrorTopic { link, topic_id, fork_offsets } => {
                self.adopt_mirror_topic(&link, topic_id, fork_offsets)
            }
            Command::TruncateMirrorPartition { link, topic_id, partition, offset, cut } => {
                self.truncate_mirror_partition(&link, topic_id, partition, offset, cut)
            }
        }
    }

    /// Rebuilds what the state keeps in memory only, after it was loaded from its stored form.
    pub(crate) fn rebuild_derived(&mut self) {
        self.recent_commit_chunks = self.recent_commits.values().map(offsets::CommitAnswer::len).sum();
    }

    /// Whether the cluster applies the rules of metadata format `format` (every voter runs it).
    pub fn applies_format(&self, format: u32) -> bool {
        self.format >= format
    }

    /// Orders states of one history: a later generation, then a later applied index.
    pub fn version(&self) -> (u64, u64) {
        (self.generation, self.applied_index)
    }

    pub fn topic_by_name(&self, name: &str) -> Option<&Topic> {
        self.topic_ids.get(name).and_then(|id| self.topics.get(id))
    }

    pub fn partition(&self, topic_id: TopicId, partition: i32) -> Option<&Partition> {
        let index = usize::try_from(partition).ok()?;
        self.topics.get(&topic_id)?.partitions.get(index).map(|p| &**p)
    }

    /// The value a topic config has for `topic`: set on the topic, else set dynamically for the
    /// cluster through its broker synonym, else `None` (the catalog default applies).
    pub fn effective_topic_config<'a>(&'a self, topic: &'a Topic, name: &str) -> Option<&'a str> {
        topic.configs.get(name).or_else(|| self.broker_default(name)).map(String::as_str)
    }

    /// A topic config's value in force: the topic's, else the cluster's, else Kafka's default.
    pub fn topic_config_value<'a>(&'a self, topic: &'a Topic, name: &str) -> Option<&'a str> {
        self.effective_topic_config(topic, name).or_else(|| crate::config::topic_config(name).and_then(|d| d.default))
    }

    /// The cluster's dynamic value for a topic config's broker synonym, if one is set.
    pub fn broker_default(&self, topic_config: &str) -> Option<&String> {
        crate::config::topic_config(topic_config)
            .and_then(|def| def.broker_synonym)
            .and_then(|synonym| self.broker_configs.get(synonym))
    }

    /// A numeric cluster-wide broker config: its dynamic value, else the catalog default.
    pub fn broker_config_i64(&self, name: &str) -> Option<i64> {
        self.broker_configs
            .get(name)
            .map(String::as_str)
            .or_else(|| crate::config::broker_config(name).and_then(|d| d.default))
            .and_then(|v| v.parse().ok())
    }

    /// How many agents the pool needs so that each runs at its targets: the live agents'
    /// utilizations summed (one reported over a minute ago, or never, counts as at target),
    /// rounded up, at least one.
    pub fn desired_agents(&self, now_ms: i64, session_ms: i64) -> u32 {
        let total_milli: u64 = self
            .live_agents(now_ms, session_ms)
            .map(|a| {
                let load = self.agent_loads.get(&a.info.agent_id);
                match load {
                    Some(load) if now_ms.saturating_sub(load.reported_ms) <= 60_000 => {
                        u64::from(load.utilization_milli)
                    }
                    _ => 1000,
                }
            })
            .sum();
        u32::try_from(total_milli.div_ceil(1000)).unwrap_or(u32::MAX).max(1)
    }

    /// Agents whose last heartbeat is at most `session_ms` older than the newest heartbeat any
    /// agent got in (or than `now_ms`, if that is earlier), by id. Judged against the newest
    /// heartbeat, not the clock: while the metadata service commits nothing (an election, a paused
    /// leader, this copy cut off) no agent can heartbeat, and that silence is not death. Were they
    /// dropped, clients would drop their connections to agents serving them, coordinators
    /// included (librdkafka decommissions a broker missing from Metadata).
    pub fn live_agents(&self, now_ms: i64, session_ms: i64) -> impl Iterator<Item = &AgentRecord> {
        let newest = self.agents.values().map(|a| a.last_heartbeat_ms).max().unwrap_or(now_ms);
        let judged_at = now_ms.min(newest);
        self.agents.values().filter(move |a| judged_at.saturating_sub(a.last_heartbeat_ms) <= session_ms)
    }

    /// An agent's roles and agent group (all roles in the default group unless it said otherwise).
    pub fn agent_profile(&self, agent_id: i32) -> AgentProfile {
        self.agent_profiles.get(&agent_id).cloned().unwrap_or_default()
    }

    /// The address of an agent's peer listener, if it has one (format 10).
    pub fn agent_peer(&self, agent_id: i32) -> Option<&str> {
        self.agent_peers.get(&agent_id).map(String::as_str)
    }

    /// `profile` is `None` for a heartbeat without one (before format 9): the agent keeps the
    /// profile it has; `peer` likewise (before format 10), `Some(None)` says it has no listener.
    fn agent_heartbeat(
        &mut self,
        agent: AgentInfo,
        profile: Option<AgentProfile>,
        peer: Option<Option<String>>,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        if agent.agent_id < 0 || agent.host.is_empty() || agent.host.len() > 255 || agent.port == 0 {
            return Err(CommandError::InvalidCommit(format!("invalid agent {agent:?}")));
        }
        if agent.zone.as_ref().is_some_and(|z| z.len() > 255) {
            return Err(CommandError::InvalidCommit("zone name longer than 255 bytes".into()));
        }
        if let Some(profile) = &profile {
            if profile.roles.is_empty() {
                return Err(CommandError::InvalidCommit("an agent needs at least one role".into()));
            }
            if !crate::limits::valid_agent_group(&profile.group) {
                return Err(CommandError::InvalidCommit(format!(
                    "agent group names are up to {} bytes of letters, digits, '.', '_' and '-'",
                    crate::limits::AGENT_GROUP_BYTES_MAX
                )));
            }
        }
        if let Some(Some(addr)) = &peer
            && !crate::limits::valid_peer_addr(addr)
        {
            return Err(CommandError::InvalidCommit(format!(
                "a peer address is HOST:PORT of up to {} bytes",
                crate::limits::PEER_ADDR_BYTES_MAX
            )));
        }
        if !self.agents.contains_key(&agent.agent_id) && self.agents.len() >= crate::limits::AGENT_COUNT_MAX {
            return Err(CommandError::LimitReached(format!("at most {} agents", crate::limits::AGENT_COUNT_MAX)));
        }
        // A heartbeat sent before the agent left is a late copy: it stays gone.
        if self.agents_left.get(&agent.agent_id).is_some_and(|left| now_ms <= *left) {
            return Ok(Outcome::Done);
        }
        // Forget agents silent for a long time, judged by this heartbeat's clock.
        self.agents.retain(|_, a| now_ms.saturating_sub(a.last_heartbeat_ms) <= crate::limits::AGENT_FORGET_MS);
        let agents = &self.agents;
        self.agent_loads.retain(|id, _| agents.contains_key(id) || *id == agent.agent_id);
        self.agent_profiles.retain(|id, _| agents.contains_key(id) || *id == agent.agent_id);
        self.agent_peers.retain(|id, _| agents.contains_key(id) || *id == agent.agent_id);
        // A late copy of an older heartbeat does not roll the profile back either.
        let late = self.agents.get(&agent.agent_id).is_some_and(|a| now_ms < a.last_heartbeat_ms);
        match peer.filter(|_| !late) {
            Some(Some(addr)) => {
                self.agent_peers.insert(agent.agent_id, addr);
            }
            Some(None) => {
                self.agent_peers.remove(&agent.agent_id);
            }
            None => {}
        }
        match profile.filter(|_| !late) {
            Some(profile) if profile == AgentProfile::default() => {
                self.agent_profiles.remove(&agent.agent_id);
            }
            Some(profile) => {
                self.agent_profiles.insert(agent.agent_id, profile);
            }
            None => {}
        }
        self.agents_left.retain(|_, left| now_ms.saturating_sub(*left) <= crate::limits::AGENT_FORGET_MS);
        self.agents_left.remove(&agent.agent_id);
        // A late copy of an older heartbeat (heartbeats are sent to a second node when the first is
        // slow) never moves the time back.
        let last_heartbeat_ms = self.agents.get(&agent.agent_id).map_or(now_ms, |a| a.last_heartbeat_ms.max(now_ms));
        self.agents.insert(agent.agent_id, AgentRecord { info: agent, last_heartbeat_ms });
        Ok(Outcome::Done)
    }

    pub fn object_key(&self, object_id: ObjectId) -> Option<&str> {
        self.objects.get(&object_id).map(|o| o.key.as_str())
    }
}

/// Index entries [`Partition::entries_from`] looks at from the back before a binary search.
const TAIL_SCAN_ENTRIES: usize = 8;

impl Partition {
    /// Index entries holding offsets at or after `offset`, starting with the one containing it.
    pub fn entries_from(&self, offset: i64) -> impl Iterator<Item = &IndexEntry> {
        // Most reads are of the last few entries (a consumer keeping up): looked for from the
        // back first, which at thousands of partitions saved most of a binary search over a
        // ring buffer per partition read.
        let len = self.index.len();
        let tail = len.saturating_sub(TAIL_SCAN_ENTRIES);
        let start = match (tail..len).rev().find(|&i| self.index[i].last_offset < offset) {
            Some(before) => before + 1,
            None if tail == 0 => 0,
            None => self.index.partition_point(|e| e.last_offset < offset),
        };
        self.index.range(start..)
    }

    /// The first entry whose largest timestamp is at least `timestamp`: the earliest record with
    /// such a timestamp is in it (timestamps need not grow with offsets, so this scans).
    pub fn entry_for_timestamp(&self, timestamp: i64) -> Option<&IndexEntry> {
        self.data_entries().find(|e| e.timestamp_max >= timestamp)
    }

    /// Entries at or after the log start that hold records (not markers), in offset order.
    pub fn data_entries(&self) -> impl Iterator<Item = &IndexEntry> {
        self.entries_from(self.log_start_offset).filter(|e| e.object_id().is_some())
    }

    /// The first offset of the earliest open transaction, else the log end: read_committed
    /// consumers read below it.
    pub fn last_stable_offset(&self) -> i64 {
        self.open_transactions.values().copied().min().unwrap_or(self.next_offset)
    }

    /// The entry holding the largest timestamp (the first such entry when several tie).
    pub fn entry_with_max_timestamp(&self) -> Option<&IndexEntry> {
        self.data_entries().fold(None, |best: Option<&IndexEntry>, e| match best {
            Some(b) if b.timestamp_max >= e.timestamp_max => Some(b),
            _ => Some(e),
        })
    }
}
