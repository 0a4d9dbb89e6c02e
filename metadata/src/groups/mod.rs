//! Consumer group coordination (Kafka's classic group protocol) on the metadata leader.
//!
//! Agents forward JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and the group admin
//! requests here as [`GroupRequest`]s, translated from the wire; the [`GroupCoordinator`] keeps
//! live membership in memory (who joined, heartbeats, waiting requests, timers) and writes what
//! must survive a leader change through Raft: each completed generation (`StoreGroup`) and
//! committed offsets (`CommitOffsets`). A new leader resumes groups from that state (classic
//! groups with members as soon as it has caught up, so their members' sessions run whether or not
//! they ever ask again); members it does not know rejoin.

mod consumer;
mod consumer_group;
mod coordinator;
mod node;
mod share_group;
#[cfg(test)]
mod tests;
mod write_turns;

use serde::{Deserialize, Serialize};

pub use consumer::ASSIGNORS;
pub use coordinator::GroupCoordinator;
pub(crate) use node::GroupNode;
pub use share_group::ShareWriter;

use crate::state::{AskedPartitions, CommitStamp, FetchedOffset, State, TopicId};

/// A group setting: its dynamic broker config, or the default the config catalog declares
/// (`crate::config`), so the coordinator re-declares none. Every name read here is in the
/// catalog with a default (`group_settings_have_catalog_defaults`).
fn setting(state: &State, name: &str) -> i64 {
    state.broker_config_i64(name).unwrap_or(0)
}

/// Why a group request failed; each maps to the Kafka error code of the same name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum GroupError {
    #[error("this node does not coordinate groups now")]
    NotCoordinator,
    #[error("the group coordinator is not available: {0}")]
    CoordinatorNotAvailable(String),
    #[error("invalid group id")]
    InvalidGroupId,
    #[error("unknown member id")]
    UnknownMemberId,
    #[error("illegal generation")]
    IllegalGeneration,
    #[error("rebalance in progress")]
    RebalanceInProgress,
    #[error("member id required")]
    MemberIdRequired,
    #[error("fenced instance id")]
    FencedInstanceId,
    #[error("inconsistent group protocol")]
    InconsistentGroupProtocol,
    #[error("invalid session timeout")]
    InvalidSessionTimeout,
    #[error("group max size reached")]
    GroupMaxSizeReached,
    #[error("group id not found")]
    GroupIdNotFound,
    #[error("non-empty group")]
    NonEmptyGroup,
    #[error("group subscribed to topic")]
    GroupSubscribedToTopic,
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("offset metadata too large")]
    OffsetMetadataTooLarge,
    /// The request is over a size limit (Floe's; Kafka has none for it) or lacks a field.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("fenced member epoch")]
    FencedMemberEpoch,
    #[error("stale member epoch")]
    StaleMemberEpoch,
    #[error("unsupported assignor")]
    UnsupportedAssignor,
    /// Refused by the state machine for a reason the client sees as that command's Kafka error:
    /// a transactional offset commit refused by the transaction's state, or a tenant at its
    /// share of the groups or share partitions tables.
    #[error(transparent)]
    Transaction(crate::command::CommandError),
    /// A share acknowledgement of records the member does not hold locked (or whose lock
    /// passed).
    #[error("invalid record state: {0}")]
    InvalidRecordState(String),
}

/// A stamp for this process's next offset commit: later than all its earlier ones.
pub fn next_commit_stamp() -> CommitStamp {
    static ORIGIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let origin = *ORIGIN.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    CommitStamp { origin, seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1 }
}

/// A member's protocol (name and metadata) as offered in JoinGroup.
pub type Protocol = (String, Vec<u8>);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinRequest {
    pub group_id: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    pub protocols: Vec<Protocol>,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: an unknown member first gets MEMBER_ID_REQUIRED and its new id.
    pub require_known_member: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinResponse {
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// For the leader only: every member with its metadata for the chosen protocol.
    pub members: Vec<JoinedMember>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    /// From the leader: each member's assignment.
    pub assignments: Vec<(String, Vec<u8>)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncResponse {
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Vec<u8>,
}

/// Who sends a heartbeat or an offset commit; generation -1 with an empty member id is an
/// assign-mode consumer committing for a group without members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRef {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
}

/// One member leaving (LeaveGroup v3+ names several; an admin may name only the instance id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeavingMember {
    pub member_id: String,
    pub instance_id: Option<String>,
}

/// A group as DescribeGroups shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<DescribedMember>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescribedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Vec<u8>,
    pub assignment: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListedGroup {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    /// `classic` or `consumer` (KIP-848), as ListGroups v5 reports it.
    pub group_type: String,
}

/// One ConsumerGroupHeartbeat (KIP-848). `None` fields are "unchanged since the last one".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    pub member_id: String,
    /// 0 joins, -1 leaves, -2 leaves for a static member's restart; otherwise the member's epoch.
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topics: Option<Vec<String>>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// The partitions the member holds now.
    pub owned: Option<Vec<(TopicId, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerHeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The partitions the member may hold from now on, when that changed.
    pub assignment: Option<Vec<(TopicId, Vec<i32>)>>,
}

/// A KIP-848 group as ConsumerGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    pub state: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topics: Vec<String>,
    /// (topic id, topic name, partitions).
    pub assignment: Vec<(TopicId, String, Vec<i32>)>,
    pub target_assignment: Vec<(TopicId, String, Vec<i32>)>,
}

/// One ShareGroupHeartbeat (KIP-932). `None` fields are "unchanged since the last one".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareHeartbeat {
    pub group_id: String,
    pub member_id: String,
    /// 0 joins, -1 leaves; otherwise the member's epoch.
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub subscribed_topics: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareHeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The partitions the member reads from now on, when that changed.
    pub assignment: Option<Vec<(TopicId, Vec<i32>)>>,
}

/// Offsets `first..=last`.
pub type OffsetRange = (i64, i64);

/// What one ShareFetch or ShareAcknowledge asks of the share partitions, for one member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareWork {
    pub group_id: String,
    pub member_id: String,
    /// Records acquired by an earlier request but never sent (no room in its response).
    pub unsent: Vec<(TopicId, i32, Vec<OffsetRange>)>,
    pub acknowledgements: Vec<(TopicId, i32, Vec<crate::state::AckBatch>)>,
    /// The member closed its share session: every lock it holds ends.
    pub release_all: bool,
    /// Partitions to acquire records from, up to `max_records` each.
    pub acquire: Vec<(TopicId, i32)>,
    pub max_records: i64,
    pub read_committed: bool,
}

/// The answer to a [`ShareWork`], part for part in request order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareWorkResult {
    pub acknowledged: Vec<Result<(), GroupError>>,
    pub acquired: Vec<Result<Vec<crate::state::AcquiredRange>, GroupError>>,
}

/// A share group as ShareGroupDescribe shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareGroupDescription {
    pub group_id: String,
    pub state: String,
    pub epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ShareMemberDescription>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareMemberDescription {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topics: Vec<String>,
    /// (topic id, topic name, partitions).
    pub assignment: Vec<(TopicId, String, Vec<i32>)>,
}

/// A request to the group coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupRequest {
    Join(JoinRequest),
    Sync(SyncRequest),
    Heartbeat(MemberRef),
    Leave {
        group_id: String,
        members: Vec<LeavingMember>,
    },
    CommitOffsets {
        member: MemberRef,
        offsets: Vec<crate::state::stored::OffsetCommit>,
        /// From [`next_commit_stamp`], taken once per client request before any retry.
        stamp: crate::state::stored::CommitStamp,
    },
    Describe(Vec<String>),
    /// Groups whose state is in `states` and protocol type in `types` (empty: any).
    List {
        states: Vec<String>,
        types: Vec<String>,
    },
    Delete(Vec<String>),
    DeleteOffsets {
        group_id: String,
        partitions: Vec<(String, i32)>,
    },
    ConsumerHeartbeat(ConsumerHeartbeat),
    ConsumerDescribe(Vec<String>),
    /// TxnOffsetCommit: offsets stored in `transaction`, visible when it commits. A generation
    /// of -1 (clients before KIP-447) skips the member checks. Answered as `CommitOffsets`.
    TxnCommitOffsets {
        member: MemberRef,
        transaction: TxnRef,
        offsets: Vec<crate::state::stored::OffsetCommit>,
    },
    /// OffsetFetch for each group with the partitions asked, read on the leader once it has
    /// confirmed it still leads and has applied everything committed: a consumer resuming from
    /// these offsets must not see an older commit than the group's latest.
    FetchOffsets {
        groups: Vec<(String, AskedPartitions)>,
        require_stable: bool,
    },
    ShareHeartbeat(ShareHeartbeat),
    ShareWork(ShareWork),
    ShareDescribe(Vec<String>),
    /// DescribeShareGroupOffsets: each group's share partitions (all of them, or those asked by
    /// topic name), read on the leader.
    ShareOffsets(Vec<(String, AskedPartitions)>),
    /// AlterShareGroupOffsets of an empty share group: (topic, partition, start offset).
    AlterShareOffsets {
        group_id: String,
        offsets: Vec<(String, i32, i64)>,
    },
    /// DeleteShareGroupOffsets of an empty share group: every partition of each topic.
    DeleteShareOffsets {
        group_id: String,
        topics: Vec<String>,
    },
}

/// The transaction a TxnOffsetCommit belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRef {
    pub transactional_id: String,
    pub producer: crate::command::ProducerIdEpoch,
}

/// How one leaving member fared.
pub type LeaveResult = (LeavingMember, Result<(), GroupError>);
/// One group's description, or its id and why it cannot be described.
pub type Described = Result<GroupDescription, (String, GroupError)>;

/// The answer to a [`GroupRequest`], variant for variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GroupResponse {
    /// On MEMBER_ID_REQUIRED the response still carries the member id the client must use.
    Join(Result<JoinResponse, (GroupError, JoinResponse)>),
    Sync(Result<SyncResponse, GroupError>),
    Heartbeat(Result<(), GroupError>),
    Leave(Result<Vec<LeaveResult>, GroupError>),
    /// Per partition, in request order.
    CommitOffsets(Result<Vec<Result<(), GroupError>>, GroupError>),
    Describe(Vec<Described>),
    List(Vec<ListedGroup>),
    Delete(Vec<(String, Result<(), GroupError>)>),
    /// Per partition, in request order.
    DeleteOffsets(Result<Vec<Result<(), GroupError>>, GroupError>),
    ConsumerHeartbeat(Result<ConsumerHeartbeatResponse, GroupError>),
    ConsumerDescribe(Vec<Result<ConsumerGroupDescription, (String, GroupError)>>),
    /// Per group in request order: its offsets by topic.
    FetchOffsets(Vec<Vec<(String, Vec<FetchedOffset>)>>),
    ShareHeartbeat(Result<ShareHeartbeatResponse, GroupError>),
    ShareWork(Result<ShareWorkResult, GroupError>),
    ShareDescribe(Vec<Result<ShareGroupDescription, (String, GroupError)>>),
    /// Per group in request order: its share partitions, or why not.
    ShareOffsets(Vec<Result<Vec<crate::state::ShareLag>, GroupError>>),
    /// Per item in request order (offsets or topics).
    AlterShareOffsets(Result<Vec<Result<(), GroupError>>, GroupError>),
    DeleteShareOffsets(Result<Vec<Result<(), GroupError>>, GroupError>),
}

/// The partitions a `consumer` protocol assignment gives a member, read from its assignment
/// (ConsumerProtocolAssignment: version i16, then an array of (i16-length topic, array of i32
/// partitions)). Malformed assignments give nothing.
pub fn assigned_partitions(assignment: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut bytes = assignment;
    let parse = |bytes: &mut &[u8]| -> Option<Vec<(String, Vec<i32>)>> {
        take(bytes, 2)?;
        let topics = i32::from_be_bytes(take(bytes, 4)?.try_into().ok()?);
        let mut out = Vec::new();
        for _ in 0..topics.max(0) {
            let len = i16::from_be_bytes(take(bytes, 2)?.try_into().ok()?);
            let name = String::from_utf8_lossy(take(bytes, usize::try_from(len).ok()?)?).into_owned();
            let count = i32::from_be_bytes(take(bytes, 4)?.try_into().ok()?);
            let mut partitions = Vec::new();
            for _ in 0..count.max(0) {
                partitions.push(i32::from_be_bytes(take(bytes, 4)?.try_into().ok()?));
            }
            out.push((name, partitions));
        }
        Some(out)
    };
    parse(&mut bytes).unwrap_or_default()
}

/// Encodes topic names as a ConsumerProtocolSubscription (version 0, no user data).
pub fn encode_subscription(topics: &[String]) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&i32::try_from(topics.len()).unwrap_or(i32::MAX).to_be_bytes());
    for topic in topics {
        put_string(&mut out, topic);
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

/// Encodes partitions by topic name as a ConsumerProtocolAssignment (version 0, no user data).
pub fn encode_assignment(assignment: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = vec![0, 0];
    out.extend_from_slice(&i32::try_from(assignment.len()).unwrap_or(i32::MAX).to_be_bytes());
    for (topic, partitions) in assignment {
        put_string(&mut out, topic);
        out.extend_from_slice(&i32::try_from(partitions.len()).unwrap_or(i32::MAX).to_be_bytes());
        for p in partitions {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

/// Topic names are at most 249 bytes, so the i16 length never truncates.
fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&i16::try_from(s.len()).unwrap_or(i16::MAX).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Splits `n` bytes off the front of `bytes`.
fn take<'a>(bytes: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, rest) = bytes.split_at_checked(n)?;
    *bytes = rest;
    Some(head)
}

/// The topics a `consumer` protocol member subscribes to, read from its subscription metadata
/// (ConsumerProtocolSubscription: version i16, then an array of i16-length strings). Malformed
/// metadata subscribes to nothing.
pub fn subscribed_topics(metadata: &[u8]) -> Vec<String> {
    let mut bytes = metadata;
    let parse = |bytes: &mut &[u8]| -> Option<Vec<String>> {
        take(bytes, 2)?;
        let count = i32::from_be_bytes(take(bytes, 4)?.try_into().ok()?);
        let mut topics = Vec::new();
        for _ in 0..count.max(0) {
            let len = i16::from_be_bytes(take(bytes, 2)?.try_into().ok()?);
            let name = take(bytes, usize::try_from(len).ok()?)?;
            topics.push(String::from_utf8_lossy(name).into_owned());
        }
        Some(topics)
    };
    parse(&mut bytes).unwrap_or_default()
}
