//! Floe's metadata service: the deterministic state machine that orders everything (topics,
//! offsets, the offset index), replicated with Raft (openraft) by metadata nodes that keep the log
//! and snapshots on local disk, and serve proposals and reads.
//!
//! The state machine ([`State::apply`]) is pure: it reads no clock, draws no random numbers and
//! does no I/O. Anything time- or randomness-dependent is stamped into the [`Command`] by the
//! proposer, so every replica that applies the same log reaches the same state.

pub mod acl;
pub mod archive;
pub mod client;
pub mod clock;
pub mod command;
pub mod config;
pub mod groups;
pub mod handle;
mod leader_duties;
pub mod limits;
pub mod locks;
pub mod metrics;
pub mod namespace;
pub mod node;
pub mod raft;
pub mod state;
pub mod tasks;
pub mod tls;

pub use client::RemoteMetadata;

/// The version of every persisted metadata format: the Raft log and snapshot files, the
/// archive's state and command objects (`FLOEMST5`, `FLOEMLG5`), all holding postcard encodings
/// of [`State`] and [`Command`]. `tests/golden` holds each version's files; a change that stops
/// the newest decoding needs the next version and a reader for this one.
///
/// - 1: the first named format.
/// - 2: tenants have ids that are never reused (their namespace keys), and per-tenant
///   producer-id counts; API keys may have their own quotas (`Command::SetApiKeyQuotas`).
/// - 3: schema registries (`State::registries`, `Command::RegisterSchema` and the registry
///   commands after it).
/// - 4: transaction version 2 (`Command::EndTxnV2`); the state is format 3's.
/// - 5: table topics (`State::tables`, `Command::CommitTableSnapshot`).
/// - 6: usage metering (`State::usage`, `ChunkCommit::uncompressed_bytes`,
///   `Command::ReportUsage` and the usage commands after it).
/// - 7: share groups' partitions (`State::share_partitions`, `Command::ShareUpdate`).
/// - 8: group configs (`State::group_configs`, `Command::SetGroupConfigs`) and
///   `ShareOp::StartAt`.
/// - 9: agents' roles and agent groups (`State::agent_profiles`,
///   `Command::AgentHeartbeatWithProfile`).
/// - 10: agents' peer listeners (`State::agent_peers`, `Command::AgentHeartbeatWithPeer`).
/// - 11: links (`State::links`, `State::mirror_topics`, `Command::SetLink` and the commands
///   after it).
/// - 12: a link's tenant and ACL copying (`LinkConfig::tenant`, `LinkConfig::acls`); a segment
///   commit's key is committed at most once and not after its deadline
///   (`limits::SEGMENT_COMMIT_WINDOW_MS`), a rule with no stored change.
/// - 13: `Command::CommitSegmentsPacked`, grouped segment commits in a packed encoding
///   (`command/packed.rs`), about 16 bytes per one-batch chunk instead of 41.
/// - 14: `Command::CompactRuns`, one compacted object holding runs of many partitions, each run
///   named by its offsets, entry count and object ids' sum; the state is format 13's.
/// - 15: segment commits' answers are kept for at most `limits::RECENT_COMMIT_CHUNKS_MAX`
///   chunks and not past their keys' deadlines, a rule with no stored change.
///
/// Older formats' states and chunk commits are read by `state::stored`; their other commands
/// decode as they are.
pub const FORMAT_VERSION: u32 = 15;

/// Wall-clock milliseconds since the Unix epoch: what proposers stamp into commands (the state
/// machine itself never reads a clock).
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
pub use command::{
    BatchSummary, ChunkCommit, ChunkProducer, CleanedData, CleanedEntry, CleanedRange, Command, CommandError,
    CommittedChunk, CompactedChunk, CompactedObject, CompactedRun, Outcome, ProducerIdEpoch, SegmentCommit,
};
pub use handle::Metadata;
pub use namespace::Namespace;
pub use node::{ClusterStatus, MetadataNode, MetadataNodeConfig, NodeError};
pub use raft::state_machine::Change;
pub use state::{
    AbortedTransaction, AgentInfo, AgentProfile, AgentRecord, AgentRoles, ApiKeyQuotas, ApiKeyRecord, AskedPartitions,
    CommitStamp, CommittedOffset, EntryData, FetchedOffset, GroupKind, GroupMembership, GroupRecord, IndexEntry,
    JobLease, MemberRecord, OFFSET_METADATA_BYTES_MAX, ObjectId, ObjectRecord, OffsetCommit, Partition, PartitionLag,
    ProducerRecord, ScramCredential, ScramMechanism, State, StoredChunk, TableCommit, TableRange, TableRecord,
    TenantQuotas, TenantRecord, TenantTable, Topic, TopicId, TransactionRecord, TxnMarker, TxnState, UserRecord,
    validate_topic_name,
};
pub use state::{
    AckBatch, AcquiredRange, RecordState, SHARE_OPS_MAX, ShareAck, ShareLag, ShareOp, SharePartition, SharePartitionKey,
};
pub use state::{ChangedPartitions, JournalPosition};
pub use state::{
    ChunkCut, LinkConfig, LinkRecord, LinkReport, LinkSasl, LinkState, MirrorChunk, MirrorCommit, MirrorTxnEvent,
    MirroredChunks,
};
pub use state::{
    Compatibility, DEFAULT_COMPATIBILITY, RegistryConfig, RegistryError, RegistryMode, RegistryRevision, SchemaContent,
    SchemaRecord, SchemaReference, SchemaRegistration, SchemaRegistry, SchemaType, SubjectRecord, SubjectVersion,
    validate_subject,
};
pub use state::{
    HOUR_MS, MINUTE_MS, Meter, Meters, UsageEntry, UsageExport, UsageHour, UsageLedger, UsageReport, UsageSummary,
    add_meters, tenant_of_stored_name,
};
