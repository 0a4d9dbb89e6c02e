//! Floe's metadata service: the deterministic state machine that orders everything (topics,
//! offsets, the offset index), replicated with Raft (openraft) by metadata nodes that keep the log
//! and snapshots on local disk, and serve proposals and reads.
//!
//! The state machine ([`State::apply`]) is pure: it reads no clock, draws no random numbers and
//! does no I/O. Anything time- or randomness-dependent is stamped into the [`Command`] by the
//! proposer, so every replica that applies the same log reaches the same state.

pub mod archive;
pub mod client;
pub mod command;
pub mod config;
pub mod groups;
pub mod handle;
pub mod limits;
pub mod node;
pub mod raft;
pub mod state;

pub use client::RemoteMetadata;
pub use command::{
    AgentInfo, BatchSummary, ChunkCommit, Command, CommandError, CommittedChunk, Outcome, SegmentCommit,
};
pub use handle::Metadata;
pub use node::{ClusterStatus, MetadataNode, MetadataNodeConfig, NodeError};
pub use raft::state_machine::Change;
pub use state::{
    AgentRecord, CommittedOffset, GroupKind, GroupMembership, GroupRecord, IndexEntry, MemberRecord, ObjectId,
    ObjectRecord, OffsetCommit, Partition, PartitionLag, State, Topic, TopicId, validate_topic_name,
};
