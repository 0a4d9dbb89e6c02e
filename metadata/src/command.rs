//! Commands: one variant per state change. A command is what the journal (and later the Raft
//! log) stores, so it is a versioned format: add fields only with `#[serde(default)]` and new
//! variants only at the end.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::state::TopicId;

mod packed;
pub use packed::PackedCommits;

/// A change to the metadata state, as proposed by an agent or an admin request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// First entry of every cluster: fixes the cluster id (drawn by the proposer).
    InitCluster {
        cluster_id: String,
    },
    CreateTopic {
        name: String,
        /// Drawn by the proposer: a topic created again under the same name gets a new id.
        topic_id: TopicId,
        partition_count: i32,
        configs: BTreeMap<String, String>,
    },
    DeleteTopic {
        name: String,
    },
    /// Grows a topic to `partition_count` partitions.
    CreatePartitions {
        name: String,
        partition_count: i32,
    },
    /// Replaces the topic's whole set of explicitly set configs (validated by the proposer).
    SetTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    /// Sequences the chunks of one uploaded segment object.
    CommitSegment(SegmentCommit),
    /// Advances a partition's log start offset (Kafka DeleteRecords); `-1` means the high watermark.
    DeleteRecords {
        topic_id: TopicId,
        partition: i32,
        offset: i64,
    },
    /// Replaces the cluster-wide dynamic broker configs (Kafka's `<default>` broker resource).
    SetBrokerConfigs {
        configs: BTreeMap<String, String>,
    },
    /// Several agents' segment commits grouped into one entry (group commit); each is applied as
    /// [`Command::CommitSegment`] would be, in order, independently of the others.
    CommitSegments(Vec<SegmentCommit>),
    /// Seeds a brand-new cluster with a state restored from the object store. Accepted only as
    /// the first change of a cluster (before `InitCluster`).
    RestoreState(#[serde(deserialize_with = "crate::state::stored::restored_state")] Box<crate::state::StoredState>),
    /// An agent announces itself (on start and then periodically); `now_ms` is stamped by the
    /// agent, since the state machine reads no clock.
    AgentHeartbeat {
        agent: crate::state::stored::AgentInfo,
        now_ms: i64,
    },
    /// Stores a group's membership when a rebalance completes or the group empties (proposed by
    /// the group coordinator, which checked who may do this).
    StoreGroup {
        group_id: String,
        membership: crate::state::stored::GroupMembership,
        now_ms: i64,
    },
    /// Stores committed offsets; answered per partition with [`Outcome::OffsetsCommitted`].
    CommitOffsets {
        group_id: String,
        offsets: Vec<crate::state::stored::OffsetCommit>,
        /// Absent for commits not sent by a client process (none today but transactions', which
        /// are applied at EndTxn).
        stamp: Option<crate::state::stored::CommitStamp>,
        now_ms: i64,
    },
    /// Deletes a group with no members and its offsets.
    DeleteGroup {
        group_id: String,
    },
    /// Deletes some of a group's committed offsets (Kafka OffsetDelete).
    DeleteOffsets {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
    /// Drops offsets past `offsets.retention.minutes` as of `now_ms` (proposed periodically).
    ExpireOffsets {
        now_ms: i64,
    },
    /// Kafka InitProducerId: a new producer id, or for a transactional id the same id with its
    /// epoch bumped (fencing older instances and aborting their open transaction). `expected`
    /// is the id and epoch the client last had (KIP-360), if it sent one.
    InitProducerId {
        transactional_id: Option<String>,
        transaction_timeout_ms: i32,
        expected: Option<ProducerIdEpoch>,
        now_ms: i64,
        /// The tenant of the client asking (`None` without tenants): the producer id is its
        /// own, and no other tenant's batch or epoch bump may name it.
        tenant: Option<String>,
    },
    /// Adds partitions to a producer's transaction; answered per partition with
    /// [`Outcome::PartitionsAdded`].
    AddPartitionsToTxn {
        transactional_id: String,
        producer: ProducerIdEpoch,
        partitions: Vec<(TopicId, i32)>,
        now_ms: i64,
    },
    /// Adds a consumer group to a producer's transaction, so offsets can be committed in it.
    AddOffsetsToTxn {
        transactional_id: String,
        producer: ProducerIdEpoch,
        group_id: String,
        now_ms: i64,
    },
    /// Offsets committed inside a transaction: visible to the group only when it commits
    /// (proposed by the group coordinator after its generation checks).
    TxnCommitOffsets {
        transactional_id: String,
        producer: ProducerIdEpoch,
        group_id: String,
        offsets: Vec<crate::state::stored::OffsetCommit>,
        now_ms: i64,
    },
    /// Kafka EndTxn: writes a commit or abort marker into every partition of the transaction.
    EndTxn {
        transactional_id: String,
        producer: ProducerIdEpoch,
        commit: bool,
        now_ms: i64,
    },
    /// An operator aborts a transaction; its producer's epoch is bumped so it cannot go on.
    AbortTxn {
        transactional_id: String,
        now_ms: i64,
    },
    /// Proposed periodically by the leader: aborts transactions past their timeout (bumping the
    /// epoch) and forgets idle producer ids and transactional ids past their expiration.
    ExpireTransactions {
        now_ms: i64,
    },
    /// Proposed periodically by the leader: advances log start offsets past records older than
    /// `retention.ms` or beyond `retention.bytes`, for topics whose `cleanup.policy` has delete.
    ApplyRetention {
        now_ms: i64,
    },
    /// Forgets objects garbage collection deleted from the store; ids still referenced by the
    /// index are kept (a bug or a race), never forgotten.
    ForgetObjects {
        object_ids: Vec<crate::state::ObjectId>,
    },
    /// A compactor wrote a run of a partition's chunks, byte for byte, into one new object:
    /// swap them for it if the index still holds exactly that run (compare-and-set).
    CompactChunks(CompactedRun),
    /// A key compactor rewrote a range of a compacted topic's partition, keeping the latest
    /// record per key: swap the range's entries for `entries` if the index still holds exactly
    /// `replaced` (compare-and-set).
    CleanKeys(CleanedRange),
    /// An agent takes or renews the storage-job lease: granted when no other agent holds an
    /// unexpired one, so at most one agent runs compaction and garbage collection at a time.
    AcquireJobLease {
        agent_id: i32,
        now_ms: i64,
        duration_ms: i64,
    },
    /// An HTTP produce request carries an `Idempotency-Key`: the key gets a producer id of its
    /// own the first time, and the same one when the request is retried, so the retry's chunks
    /// (the same records with the same sequences) are answered with the original offsets.
    /// `request_digest` identifies the request; a different request under a known key is refused.
    InitIdempotencyKey {
        key: String,
        request_digest: u64,
        now_ms: i64,
        /// The tenant of the key's API key (`None` without tenants), owner of its producer id.
        tenant: Option<String>,
    },
    CreateTenant {
        name: String,
        now_ms: i64,
    },
    /// Deletes a tenant with its users, API keys and ACLs.
    DeleteTenant {
        name: String,
    },
    /// Creates a user of `tenant` or sets one mechanism's credential of an existing user (the
    /// proposer salted and hashed the password).
    UpsertScramCredential {
        user: String,
        tenant: String,
        mechanism: crate::state::ScramMechanism,
        credential: crate::state::stored::ScramCredential,
    },
    /// Deletes a user and the API keys that act as it.
    DeleteUser {
        user: String,
    },
    CreateApiKey {
        key_id: String,
        record: crate::state::stored::ApiKeyRecord,
    },
    DeleteApiKey {
        key_id: String,
    },
    /// Deletes one mechanism's credential of a user of `tenant` (AlterUserScramCredentials);
    /// deleting its last one deletes the user and the API keys that act as it.
    DeleteScramCredential {
        user: String,
        tenant: String,
        mechanism: crate::state::ScramMechanism,
    },
    /// Replaces a tenant's quotas.
    SetTenantQuotas {
        tenant: String,
        quotas: crate::state::stored::TenantQuotas,
    },
    /// Adds ACL bindings to a tenant's (`""`: the cluster's without tenants); one already
    /// there is kept once.
    CreateAcls {
        tenant: String,
        bindings: Vec<crate::state::stored::AclBinding>,
    },
    /// Removes a tenant's ACL bindings that match any of the filters.
    DeleteAcls {
        tenant: String,
        filters: Vec<crate::acl::AclFilter>,
    },
    /// Replaces the origins browsers may call the HTTP API from with a tenant's keys.
    SetTenantCorsOrigins {
        tenant: String,
        origins: Vec<String>,
    },
    /// Fixes the cluster's secret key for SCRAM decoys (drawn by the proposer, once): an
    /// unknown user's made-up salt is derived from it, so no one outside the cluster can tell
    /// that salt from a real user's.
    InitScramDecoyKey {
        key: Vec<u8>,
    },
    /// Replaces one API key's rate quotas (all `None`: none of its own, only its tenant's).
    SetApiKeyQuotas {
        key_id: String,
        quotas: crate::state::stored::ApiKeyQuotas,
    },
    /// Registers a schema under a subject (format 3): the proposer parsed it and checked its
    /// compatibility as of `checked_at`.
    RegisterSchema(crate::state::SchemaRegistration),
    /// Soft-deletes, or permanently deletes once soft-deleted, one version or all of a subject's.
    DeleteSchemaVersions {
        namespace: String,
        subject: String,
        version: Option<i32>,
        permanent: bool,
    },
    /// Sets or (with `None`) removes the global or a subject's registry config.
    SetRegistryConfig {
        namespace: String,
        subject: Option<String>,
        config: Option<crate::state::stored::RegistryConfig>,
    },
    /// Sets or removes the global or a subject's registry mode.
    SetRegistryMode {
        namespace: String,
        subject: Option<String>,
        mode: Option<crate::state::RegistryMode>,
        force: bool,
    },
    /// Kafka EndTxn of transaction version 2 (KIP-890, format 4): ends the transaction as
    /// [`Command::EndTxn`] does and gives its producer the next epoch (a new producer id once
    /// epochs run out), so each transaction has an epoch of its own and a late write of an ended
    /// one is fenced. Answered with [`Outcome::ProducerId`]: what the producer uses next.
    EndTxnV2 {
        transactional_id: String,
        producer: ProducerIdEpoch,
        commit: bool,
        now_ms: i64,
    },
    /// A table job publishes a new snapshot of a topic's Iceberg table (format 5): the table's
    /// metadata location and the offsets it now holds move together, if the table is still at
    /// `base_version` (compare-and-set) and each range starts where the table left off.
    CommitTableSnapshot(crate::state::TableCommit),
    /// An agent's numbered report of what it served (format 6); a report number already applied
    /// for its reporter changes nothing, so a journal may be sent again after a crash.
    ReportUsage(crate::state::UsageReport),
    /// Proposed by the leader once a minute has passed: files the counts commits made since the
    /// last close under the minute before `now_ms`'s and samples storage and partitions
    /// (format 6).
    CloseUsageMinute {
        now_ms: i64,
    },
    /// The storage-job agent wrote an hour's usage file (format 6).
    MarkUsageExported(crate::state::UsageExport),
    /// A draining agent leaves (format 6): it is no longer listed, its job lease is released,
    /// and a late copy of one of its earlier heartbeats (stamped before `now_ms`) does not bring
    /// it back.
    AgentLeave {
        agent_id: i32,
        now_ms: i64,
    },
    /// An agent's utilization over its last window, in thousandths of its targets (format 6):
    /// what `State::desired_agents` sums.
    ReportAgentLoad {
        agent_id: i32,
        utilization_milli: u32,
        now_ms: i64,
    },
    /// Share groups' acquisitions, acknowledgements and lock expiries, gathered from many
    /// requests (format 7); answered with [`Outcome::ShareUpdated`].
    ShareUpdate {
        now_ms: i64,
        ops: Vec<crate::state::ShareOp>,
    },
    /// Replaces a group's whole set of configs (format 8); an empty set removes them. Proposed
    /// only once the cluster applies format 8 (`State::applies_format`).
    SetGroupConfigs {
        group_id: String,
        configs: BTreeMap<String, String>,
    },
    /// Every voter runs a binary of metadata format `format`: its rules apply from here on
    /// (format 8; proposed by the leader's duties).
    SetFormat {
        format: u32,
    },
    /// [`Command::AgentHeartbeat`] with the agent's roles and agent group (format 9). Proposed
    /// only once the cluster applies format 9; before that every agent counts as one of all
    /// roles in the default group.
    AgentHeartbeatWithProfile {
        agent: crate::state::stored::AgentInfo,
        profile: crate::state::stored::AgentProfile,
        now_ms: i64,
    },
    /// [`Command::AgentHeartbeatWithProfile`] with the address of the agent's peer listener
    /// (format 10), where agents of its zone ask it for the object blocks it owns; `None`: it
    /// has none. Proposed only once the cluster applies format 10.
    AgentHeartbeatWithPeer {
        agent: crate::state::stored::AgentInfo,
        profile: crate::state::stored::AgentProfile,
        peer_addr: Option<String>,
        now_ms: i64,
    },
    /// Creates a link, or replaces the config of one that still mirrors (format 11; operator
    /// only). The proposer checked its patterns compile.
    SetLink {
        name: String,
        config: crate::state::stored::LinkConfig,
        now_ms: i64,
    },
    /// Deletes a link that mirrors no topic (format 11; operator only).
    DeleteLink {
        name: String,
    },
    /// A link's job creates the mirror of a source topic (format 11).
    CreateMirrorTopic {
        link: String,
        name: String,
        topic_id: TopicId,
        partition_count: i32,
        configs: BTreeMap<String, String>,
    },
    /// A link's job grows a mirror topic to the source's partition count and, with
    /// `configs`, sets the source's configs (format 11).
    UpdateMirrorTopic {
        link: String,
        topic_id: TopicId,
        partition_count: i32,
        configs: Option<BTreeMap<String, String>>,
    },
    /// Source batches written at their source offsets (format 11); answered with
    /// [`Outcome::Mirrored`].
    MirrorCommit(crate::state::MirrorCommit),
    /// What a link's job saw of its source: log ends, an error, deleted topics (format 11).
    ReportLink(crate::state::LinkReport),
    /// Stops a link and makes its topics writable (format 11; operator only).
    PromoteLink {
        name: String,
        now_ms: i64,
    },
    /// A source group's committed offsets, copied by a link's job (format 11).
    MirrorGroupOffsets {
        link: String,
        group_id: String,
        offsets: Vec<crate::state::stored::OffsetCommit>,
        now_ms: i64,
    },
    /// Failback (format 11; operator only): an ordinary topic becomes a mirror of `link` (the
    /// link back from the promoted cluster), to be cut back to `fork_offsets` (per partition, the
    /// log end the promoted side had when promoted) before the link writes it.
    AdoptMirrorTopic {
        link: String,
        topic_id: TopicId,
        fork_offsets: Vec<i64>,
    },
    /// A link's job cuts an adopted partition back to `offset` (format 11). `cut`: the bytes
    /// kept of the entry that spans `offset`, which only a reader of the object knows.
    TruncateMirrorPartition {
        link: String,
        topic_id: TopicId,
        partition: i32,
        offset: i64,
        cut: Option<crate::state::ChunkCut>,
    },
    /// [`Command::CommitSegments`] in the packed encoding of format 13 (`command/packed.rs`),
    /// which the group committer writes once every voter applies format 13.
    CommitSegmentsPacked(PackedCommits),
    /// A compactor wrote runs of several partitions' chunks into one new object (format 14):
    /// each run is swapped for its chunk if the index still holds exactly that run
    /// (compare-and-set per run). What one compaction round costs no longer grows with the
    /// partitions it touches: one object and one entry per round's few MiB, not per partition.
    CompactRuns(CompactedObject),
}

/// A range of one partition after key compaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanedRange {
    pub topic_id: TopicId,
    pub partition: i32,
    /// The entries replaced, as the compactor read them: (base offset, last offset, object).
    pub replaced: Vec<(i64, i64, Option<crate::state::ObjectId>)>,
    /// The new object (key, size) holding the kept batches; none when nothing was kept.
    pub object: Option<(String, u64)>,
    /// What replaces them, tiling the same offsets.
    pub entries: Vec<CleanedEntry>,
}

/// One index entry of a cleaned range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CleanedEntry {
    pub base_offset: i64,
    pub last_offset: i64,
    pub timestamp_max: i64,
    pub data: CleanedData,
}

/// What a cleaned entry holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanedData {
    /// Kept batches, with their offsets written in, at this byte range of the new object.
    Chunk { byte_start: u64, byte_len: u32, crc32c: u32 },
    /// A transaction marker kept as it was.
    Marker(crate::state::stored::TxnMarker),
    /// Nothing left.
    Removed,
    /// A [`CleanedData::Chunk`] whose batches still hold tombstones, with the earliest of their
    /// delete horizons (KIP-534).
    ChunkWithTombstones { byte_start: u64, byte_len: u32, crc32c: u32, delete_horizon_ms: i64 },
}

/// A run of one partition's index entries rewritten into one new object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactedRun {
    pub topic_id: TopicId,
    pub partition: i32,
    /// The entries replaced, as the compactor read them: (base offset, last offset, object).
    pub replaced: Vec<(i64, i64, crate::state::ObjectId)>,
    /// The new object and the one chunk in it holding the run's bytes, in order.
    pub key: String,
    pub object_bytes: u64,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
}

/// One object a compactor wrote holding runs of several partitions' chunks (format 14).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactedObject {
    pub key: String,
    pub object_bytes: u64,
    pub runs: Vec<CompactedChunk>,
}

/// A run of one partition's consecutive chunk entries, as the compactor read it, and the chunk of
/// the new object holding its bytes. The run is named by its offsets, its entry count and the
/// wrapping sum of its entries' object ids rather than entry by entry, so a run of hundreds of
/// entries costs the command a few dozen bytes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactedChunk {
    pub topic_id: TopicId,
    pub partition: i32,
    /// The first replaced entry's base offset and the last one's last offset.
    pub base_offset: i64,
    pub last_offset: i64,
    pub entries: u32,
    pub objects_sum: u64,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
}

/// A producer id and epoch as clients send them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdEpoch {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One uploaded segment object and the partition chunks it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCommit {
    pub key: String,
    pub object_bytes: u64,
    pub chunks: Vec<ChunkCommit>,
}

/// One partition's chunk within a segment commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChunkCommit {
    pub topic_id: TopicId,
    pub partition: i32,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
    /// The chunk's batches in order; offsets are assigned batch by batch.
    pub batches: Vec<BatchSummary>,
    /// Set when the chunk holds one idempotent or transactional producer's batches of one
    /// request: the chunk is then sequenced, deduplicated or refused as a whole.
    pub producer: Option<ChunkProducer>,
    /// Bytes of the chunk's batches with their records uncompressed, for usage metering
    /// (format 6; read as `byte_len` from older formats).
    pub uncompressed_bytes: u64,
}

impl<'de> Deserialize<'de> for ChunkCommit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The fields of formats 1 to 5, which had no uncompressed size.
        #[derive(Deserialize)]
        struct ChunkCommitV5 {
            topic_id: TopicId,
            partition: i32,
            byte_start: u64,
            byte_len: u32,
            crc32c: u32,
            batches: Vec<BatchSummary>,
            producer: Option<ChunkProducer>,
        }
        #[derive(Deserialize)]
        struct ChunkCommitV6 {
            topic_id: TopicId,
            partition: i32,
            byte_start: u64,
            byte_len: u32,
            crc32c: u32,
            batches: Vec<BatchSummary>,
            producer: Option<ChunkProducer>,
            uncompressed_bytes: u64,
        }
        if (1..=5).contains(&crate::state::stored::decoding_format()) {
            let c = ChunkCommitV5::deserialize(d)?;
            let uncompressed_bytes = u64::from(c.byte_len);
            let ChunkCommitV5 { topic_id, partition, byte_start, byte_len, crc32c, batches, producer } = c;
            return Ok(Self {
                topic_id,
                partition,
                byte_start,
                byte_len,
                crc32c,
                batches,
                producer,
                uncompressed_bytes,
            });
        }
        let ChunkCommitV6 { topic_id, partition, byte_start, byte_len, crc32c, batches, producer, uncompressed_bytes } =
            ChunkCommitV6::deserialize(d)?;
        Ok(Self { topic_id, partition, byte_start, byte_len, crc32c, batches, producer, uncompressed_bytes })
    }
}

/// The producer whose batches make up a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub transactional: bool,
}

/// What sequencing needs to know of one record batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchSummary {
    /// Offsets the batch occupies: its `lastOffsetDelta + 1`.
    pub offset_count: u32,
    pub timestamp_max: i64,
    /// The batch's `baseSequence` (-1 without a producer); its records take the sequences
    /// after it, one per offset.
    pub base_sequence: i32,
}

/// What applying a command produced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    Done,
    TopicCreated {
        topic_id: TopicId,
    },
    /// Per chunk, in commit order: the base offset assigned to its first batch, or why the chunk
    /// was not sequenced (its topic was deleted between upload and commit, say).
    SegmentCommitted {
        chunks: Vec<CommittedChunk>,
    },
    LogStartOffset {
        offset: i64,
    },
    /// Per commit of a [`Command::CommitSegments`], in order, what committing it alone would give.
    SegmentsCommitted(Vec<Result<Outcome, CommandError>>),
    /// Per partition of a [`Command::CommitOffsets`], in order.
    OffsetsCommitted(Vec<Result<(), CommandError>>),
    ProducerId(ProducerIdEpoch),
    /// Per partition of a [`Command::AddPartitionsToTxn`], in order.
    PartitionsAdded(Vec<Result<(), CommandError>>),
    /// The producer an idempotency key writes as; `retry` when the key was already known.
    IdempotencyKey {
        producer: ProducerIdEpoch,
        retry: bool,
    },
    /// Per binding of a [`Command::CreateAcls`], in order.
    AclsCreated(Vec<Result<(), CommandError>>),
    /// Per filter of a [`Command::DeleteAcls`], in order, the bindings it removed.
    AclsDeleted(Vec<Vec<crate::state::stored::AclBinding>>),
    /// The id and version a registered schema has under its subject.
    SchemaRegistered {
        id: i32,
        version: i32,
    },
    /// The versions a [`Command::DeleteSchemaVersions`] deleted.
    SchemaVersionsDeleted(Vec<i32>),
    /// The config a [`Command::SetRegistryConfig`] replaced or removed.
    RegistryConfigSet(Option<crate::state::stored::RegistryConfig>),
    /// The mode a [`Command::SetRegistryMode`] replaced or removed.
    RegistryModeSet(Option<crate::state::RegistryMode>),
    /// Per operation of a [`Command::ShareUpdate`], in order: the records it acquired (empty for
    /// the other operations).
    ShareUpdated(Vec<Result<Vec<crate::state::AcquiredRange>, CommandError>>),
    /// Per chunk of a [`Command::MirrorCommit`], in order: appended (`true`) or already there.
    Mirrored(crate::state::MirroredChunks),
    /// What a [`Command::CompactRuns`] did: runs swapped, and runs whose partition changed
    /// since the compactor read it (their bytes are dead space in the object).
    RunsCompacted {
        swapped: u32,
        conflicts: u32,
    },
}

pub type CommittedChunk = Result<i64, CommandError>;

/// Why a command (or one chunk of a commit) was rejected. Rejection changes nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CommandError {
    #[error("topic {0:?} already exists")]
    TopicExists(String),
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: String },
    #[error("invalid partition count {count}: {reason}")]
    InvalidPartitions { count: i32, reason: String },
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    #[error("offset {offset} is outside {log_start_offset}..={high_watermark}")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, high_watermark: i64 },
    #[error("invalid commit: {0}")]
    InvalidCommit(String),
    #[error("cluster is already initialized")]
    AlreadyInitialized,
    #[error("limit reached: {0}")]
    LimitReached(String),
    #[error("invalid group: {0}")]
    InvalidGroup(String),
    #[error("group not found")]
    GroupNotFound,
    #[error("group has members")]
    GroupNotEmpty,
    #[error("offset metadata longer than the limit")]
    OffsetMetadataTooLarge,
    #[error("sequence {found} does not follow {expected}")]
    OutOfOrderSequence { expected: i32, found: i32 },
    #[error("producer epoch {found} is older than the current {current}")]
    InvalidProducerEpoch { found: i16, current: i16 },
    #[error("producer fenced by a newer instance with the same transactional id")]
    ProducerFenced,
    #[error("producer id {0} is not known")]
    UnknownProducerId(i64),
    #[error("producer id does not match the transactional id")]
    InvalidProducerIdMapping,
    #[error("invalid transaction state: {0}")]
    InvalidTxnState(String),
    #[error("transaction timeout {requested} ms is outside 1..={max} (transaction.max.timeout.ms)")]
    InvalidTransactionTimeout { requested: i32, max: i64 },
    #[error("transactional id not found")]
    TransactionalIdNotFound,
    #[error("not attempted: another partition of the request failed")]
    OperationNotAttempted,
    #[error("the index changed since the compactor read it")]
    CompactionConflict,
    #[error("agent {agent_id} holds the storage-job lease")]
    JobLeaseHeld { agent_id: i32 },
    #[error("idempotency key {0:?} was used for a different request")]
    IdempotencyKeyReused(String),
    #[error("invalid idempotency key: {0}")]
    InvalidIdempotencyKey(String),
    #[error("invalid credential: {0}")]
    InvalidCredential(String),
    #[error("{0} not found")]
    CredentialNotFound(String),
    /// Over a tenant's quota (partitions).
    #[error("quota exceeded: {0}")]
    QuotaExceeded(String),
    #[error("invalid ACL: {0}")]
    InvalidAcl(String),
    /// A producer's chunk whose first sequence does not follow its last committed chunk in the
    /// partition. Unlike Kafka, the missing chunk may still be committing through another
    /// agent (one that died or was cut off after proposing it), so this is not the definite
    /// OUT_OF_ORDER_SEQUENCE: a client told that takes the missing records as lost and sends
    /// them again under a new epoch, where no sequence can match them.
    #[error("sequence {found} does not follow {expected} (an earlier chunk may still be committing)")]
    SequenceGap { expected: i32, found: i32 },
    /// Refused by the metadata port's authorization (mutual TLS roles): nothing was proposed.
    #[error("not authorized: {0}")]
    NotAuthorized(String),
    #[error("{0}")]
    Registry(crate::state::RegistryError),
    /// A table commit raced another writer or a moved log start: the writer rereads the table.
    #[error("table commit conflict: {0}")]
    TableConflict(String),
    #[error("invalid usage report: {0}")]
    InvalidUsage(String),
    /// A share acknowledgement of records the member does not hold locked.
    #[error("invalid record state: {0}")]
    InvalidRecordState(String),
    #[error("invalid link: {0}")]
    InvalidLink(String),
    /// A write to a mirror topic by anyone but its link.
    #[error("the topic is a mirror of link {link:?}: it takes writes once the link is promoted")]
    MirrorTopic { link: String },
    /// A segment commit not applied although an earlier copy of it may have been (format 12):
    /// its key was committed before and the answer is no longer kept, or its deadline passed
    /// ([`crate::limits::SEGMENT_COMMIT_WINDOW_MS`]), or the keys held until their deadlines are
    /// at their limit. Nothing changed; its records are neither acknowledged nor reported lost.
    #[error("segment commit of {key:?} refused: {why}")]
    SegmentCommitRefused { key: String, why: String },
}

impl Command {
    /// Commands only an operator may propose over the metadata port (an operator certificate,
    /// or an agent relaying the operator token): tenants, their quotas and CORS origins, API
    /// keys and users, and whole-state changes. Everything else is data-plane work an agent
    /// does on a client's behalf after checking that client itself.
    pub fn operator_only(&self) -> bool {
        matches!(
            self,
            Command::CreateTenant { .. }
                | Command::DeleteTenant { .. }
                | Command::SetTenantQuotas { .. }
                | Command::SetTenantCorsOrigins { .. }
                | Command::CreateApiKey { .. }
                | Command::DeleteApiKey { .. }
                | Command::SetApiKeyQuotas { .. }
                | Command::DeleteUser { .. }
                | Command::RestoreState(_)
                | Command::InitCluster { .. }
                | Command::InitScramDecoyKey { .. }
                | Command::SetLink { .. }
                | Command::DeleteLink { .. }
                | Command::PromoteLink { .. }
                | Command::AdoptMirrorTopic { .. }
        )
    }
}
