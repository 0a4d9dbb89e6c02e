//! The group coordinator: live membership, rebalances and timers in memory on the metadata
//! leader; completed generations and offsets through Raft.
//!
//! All bookkeeping happens under one mutex without awaiting; proposals and waiting for other
//! members (JoinGroup waits for the rebalance, a follower's SyncGroup for the leader's
//! assignment) happen after it is released. A group's membership writes keep the order its
//! changes were made in (`super::write_turns`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::GroupNode;
use super::write_turns::{WriteTurn, WriteTurns};
use super::{
    Described, DescribedMember, GroupDescription, GroupError, GroupRequest, GroupResponse, JoinRequest, JoinResponse,
    JoinedMember, LeaveResult, LeavingMember, ListedGroup, MemberRef, Protocol, SyncRequest, SyncResponse, setting,
    subscribed_topics,
};
use crate::clock::Clock;
use crate::command::{Command, CommandError, Outcome};
use crate::locks::MutexRecovery;
use crate::node::NodeError;
use crate::state::stored::each_into;
use crate::state::{CommitStamp, GroupKind, GroupMembership, MemberRecord, OffsetCommit, State};

/// How often timers (sessions, rebalance deadlines) are checked.
pub(super) const TICK: Duration = Duration::from_millis(100);
/// Extra time a waiting JoinGroup or SyncGroup gets beyond the rebalance timeout before it is
/// answered REBALANCE_IN_PROGRESS (the member then rejoins).
const WAIT_MARGIN: Duration = Duration::from_secs(5);

/// The classic groups' settings (dynamic broker configs; defaults in the config catalog).
pub(super) const MIN_SESSION_TIMEOUT_MS: &str = "group.min.session.timeout.ms";
pub(super) const MAX_SESSION_TIMEOUT_MS: &str = "group.max.session.timeout.ms";
pub(super) const INITIAL_REBALANCE_DELAY_MS: &str = "group.initial.rebalance.delay.ms";
/// Capped at [`crate::limits::GROUP_MEMBERS_MAX`] whatever it is set to.
pub(super) const MAX_GROUP_SIZE: &str = "group.max.size";

fn initial_delay(state: &State) -> Duration {
    Duration::from_millis(u64::try_from(setting(state, INITIAL_REBALANCE_DELAY_MS)).unwrap_or(0))
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Bounds what one member may make the coordinator (and the stored group) hold.
fn check_join_sizes(request: &JoinRequest) -> Result<(), String> {
    use crate::limits::{GROUP_MEMBER_BYTES_MAX, GROUP_NAME_BYTES_MAX, GROUP_PROTOCOLS_MAX};
    if request.protocols.len() > GROUP_PROTOCOLS_MAX {
        return Err(format!("more than {GROUP_PROTOCOLS_MAX} protocols"));
    }
    let names = [request.protocol_type.as_str(), request.client_id.as_str(), request.client_host.as_str()]
        .into_iter()
        .chain(request.instance_id.as_deref())
        .chain(request.protocols.iter().map(|(name, _)| name.as_str()));
    if names.into_iter().any(|n| n.len() > GROUP_NAME_BYTES_MAX) {
        return Err(format!("a protocol name, client id or instance id over {GROUP_NAME_BYTES_MAX} bytes"));
    }
    // Half the stored member budget: the other half is the assignment.
    if request.protocols.iter().map(|(_, m)| m.len()).sum::<usize>() > GROUP_MEMBER_BYTES_MAX / 2 {
        return Err(format!("protocol metadata over {} bytes", GROUP_MEMBER_BYTES_MAX / 2));
    }
    Ok(())
}

type JoinReply = Result<JoinResponse, (GroupError, JoinResponse)>;
type SyncReply = Result<SyncResponse, GroupError>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

struct Member {
    record: MemberRecord,
    protocols: Vec<Protocol>,
    last_seen: Instant,
    join_waiter: Option<oneshot::Sender<JoinReply>>,
    sync_waiter: Option<oneshot::Sender<SyncReply>>,
    /// Join order: the longest-standing member leads when the leader left.
    seq: u64,
}

impl Member {
    fn alive(&self, now: Instant) -> bool {
        self.join_waiter.is_some()
            || self.sync_waiter.is_some()
            || now.duration_since(self.last_seen) <= millis(self.record.session_timeout_ms)
    }

    fn metadata_for(&self, protocol: &str) -> Option<&[u8]> {
        self.protocols.iter().find(|(name, _)| name == protocol).map(|(_, m)| m.as_slice())
    }
}

pub(super) struct Group {
    phase: Phase,
    protocol_type: String,
    generation: i32,
    protocol: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until they join or their session passes.
    pending: HashMap<String, Instant>,
    join_deadline: Option<Instant>,
    /// While the first rebalance of an empty group waits for more members, its start time.
    initial_join_started: Option<Instant>,
    next_seq: u64,
}

/// What must happen once the lock is released.
#[derive(Default)]
struct Effects {
    store: Option<GroupMembership>,
    joins: Vec<(oneshot::Sender<JoinReply>, JoinReply)>,
    syncs: Vec<(oneshot::Sender<SyncReply>, SyncReply)>,
}

impl Effects {
    fn deliver(self) {
        for (tx, reply) in self.joins {
            let _ = tx.send(reply);
        }
        for (tx, reply) in self.syncs {
            let _ = tx.send(reply);
        }
    }
}

impl Group {
    pub(super) fn has_members(&self) -> bool {
        !self.members.is_empty()
    }

    fn from_state(state: &State, group_id: &str, now: Instant) -> Option<Self> {
        let record = state.groups.get(group_id)?;
        let m = &record.membership;
        // A consumer-protocol group with members is not a classic group; an empty one may become
        // one (its generation carries on).
        if m.kind != GroupKind::Classic && !m.members.is_empty() {
            return None;
        }
        let members: BTreeMap<String, Member> = m
            .members
            .iter()
            .enumerate()
            .map(|(seq, r)| {
                let protocols = m.protocol.iter().map(|p| (p.clone(), r.subscription.clone())).collect();
                let member = Member {
                    record: r.clone(),
                    protocols,
                    last_seen: now,
                    join_waiter: None,
                    sync_waiter: None,
                    seq: seq as u64,
                };
                (r.member_id.clone(), member)
            })
            .collect();
        Some(Self {
            phase: if members.is_empty() { Phase::Empty } else { Phase::Stable },
            protocol_type: m.protocol_type.clone(),
            generation: m.generation,
            protocol: m.protocol.clone(),
            leader: m.leader.clone(),
            next_seq: members.len() as u64,
            members,
            pending: HashMap::new(),
            join_deadline: None,
            initial_join_started: None,
        })
    }

    fn empty(protocol_type: &str) -> Self {
        Self {
            phase: Phase::Empty,
            protocol_type: protocol_type.to_owned(),
            generation: 0,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            join_deadline: None,
            initial_join_started: None,
            next_seq: 0,
        }
    }

    fn membership(&self) -> GroupMembership {
        GroupMembership {
            kind: GroupKind::Classic,
            protocol_type: self.protocol_type.clone(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            members: self.members.values().map(|m| m.record.clone()).collect(),
        }
    }

    fn static_member(&self, instance_id: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.record.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.record.member_id.as_str())
    }

    /// Checks a request naming `member_id` (and maybe an instance id) against the membership.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), GroupError> {
        if let Some(instance) = instance_id
            && let Some(current) = self.static_member(instance)
            && current != member_id
        {
            return Err(GroupError::FencedInstanceId);
        }
        if self.members.contains_key(member_id) { Ok(()) } else { Err(GroupError::UnknownMemberId) }
    }

    /// Protocols every member (and `offered`, when given) supports, in the first member's order.
    fn common_protocols(&self, offered: Option<&[Protocol]>) -> Vec<String> {
        let mut lists = self.members.values().map(|m| m.protocols.as_slice()).chain(offered);
        let Some(first) = lists.next() else { return Vec::new() };
        let rest: Vec<&[Protocol]> = lists.collect();
        first
            .iter()
            .map(|(name, _)| name.clone())
            .filter(|name| rest.iter().all(|l| l.iter().any(|(n, _)| n == name)))
            .collect()
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members.values().map(|m| millis(m.record.rebalance_timeout_ms)).max().unwrap_or_default()
    }

    fn add_member(&mut self, member_id: String, request: &JoinRequest, now: Instant) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let record = MemberRecord {
            member_id: member_id.clone(),
            instance_id: request.instance_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            session_timeout_ms: request.session_timeout_ms,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            subscription: Vec::new(),
            assignment: Vec::new(),
            member_epoch: 0,
            rack_id: None,
        };
        let member = Member {
            record,
            protocols: request.protocols.clone(),
            last_seen: now,
            join_waiter: None,
            sync_waiter: None,
            seq,
        };
        self.members.insert(member_id, member);
    }

    /// Starts (or extends) a rebalance: every member must rejoin.
    fn prepare_rebalance(&mut self, now: Instant, initial_delay: Duration, effects: &mut Effects) {
        if self.phase == Phase::CompletingRebalance {
            for member in self.members.values_mut() {
                if let Some(tx) = member.sync_waiter.take() {
                    effects.syncs.push((tx, Err(GroupError::RebalanceInProgress)));
                }
            }
        }
        let rebalance_timeout = self.max_rebalance_timeout();
        match self.phase {
            Phase::Empty => {
                self.initial_join_started = Some(now);
                self.join_deadline = Some(now + initial_delay.min(rebalance_timeout));
            }
            Phase::PreparingRebalance => {
                // A member joining during the initial delay extends it, up to the rebalance timeout.
                if let Some(started) = self.initial_join_started {
                    self.join_deadline = Some((now + initial_delay).min(started + rebalance_timeout));
                }
            }
            Phase::CompletingRebalance | Phase::Stable => self.join_deadline = Some(now + rebalance_timeout),
        }
        self.phase = Phase::PreparingRebalance;
    }

    /// Completes the join phase when every member has rejoined (or the deadline passed): bumps
    /// the generation, picks the protocol and the leader, and answers the waiting joins.
    fn maybe_complete_join(&mut self, now: Instant, effects: &mut Effects) {
        if self.phase != Phase::PreparingRebalance {
            return;
        }
        let deadline_passed = self.join_deadline.is_none_or(|d| now >= d);
        let all_joined = self.members.values().all(|m| m.join_waiter.is_some()) && self.pending.is_empty();
        let ready = if self.initial_join_started.is_some() { deadline_passed } else { all_joined || deadline_passed };
        if !ready {
            return;
        }
        self.members.retain(|_, m| m.join_waiter.is_some());
        self.generation = self.generation.saturating_add(1);
        self.join_deadline = None;
        self.initial_join_started = None;
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.protocol = None;
            self.leader = None;
            effects.store = Some(self.membership());
            return;
        }
        let candidates = self.common_protocols(None);
        let votes = |name: &String| {
            self.members
                .values()
                .filter(|m| m.protocols.iter().find(|(n, _)| candidates.contains(n)).is_some_and(|(n, _)| n == name))
                .count()
        };
        // Most first choices wins; ties go to the earliest in the first member's list.
        let chosen = candidates.iter().rev().max_by_key(|name| votes(name)).cloned();
        self.protocol = chosen.clone();
        let protocol = chosen.unwrap_or_default();
        if self.leader.as_ref().is_none_or(|l| !self.members.contains_key(l)) {
            self.leader = self.members.values().min_by_key(|m| m.seq).map(|m| m.record.member_id.clone());
        }
        let leader = self.leader.clone().unwrap_or_default();
        for member in self.members.values_mut() {
            member.record.subscription = member.metadata_for(&protocol).map(<[u8]>::to_vec).unwrap_or_default();
        }
        let everyone: Vec<JoinedMember> = self
            .members
            .values()
            .map(|m| JoinedMember {
                member_id: m.record.member_id.clone(),
                instance_id: m.record.instance_id.clone(),
                metadata: m.record.subscription.clone(),
            })
            .collect();
        self.phase = Phase::CompletingRebalance;
        for member in self.members.values_mut() {
            member.last_seen = now;
            if let Some(tx) = member.join_waiter.take() {
                let is_leader = member.record.member_id == leader;
                effects.joins.push((
                    tx,
                    Ok(JoinResponse {
                        generation: self.generation,
                        protocol_type: Some(self.protocol_type.clone()),
                        protocol: self.protocol.clone(),
                        leader: leader.clone(),
                        member_id: member.record.member_id.clone(),
                        members: if is_leader { everyone.clone() } else { Vec::new() },
                    }),
                ));
            }
        }
    }

    /// The join answer for a member of the current generation (no rebalance needed).
    fn current_join(&self, member_id: &str) -> JoinResponse {
        let is_leader = self.leader.as_deref() == Some(member_id);
        JoinResponse {
            generation: self.generation,
            protocol_type: Some(self.protocol_type.clone()),
            protocol: self.protocol.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_owned(),
            members: if is_leader && self.phase == Phase::CompletingRebalance {
                self.members
                    .values()
                    .map(|m| JoinedMember {
                        member_id: m.record.member_id.clone(),
                        instance_id: m.record.instance_id.clone(),
                        metadata: m.record.subscription.clone(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// Removes a member; the group rebalances (or empties).
    /// Ends the sessions that passed their timeout by `now` and completes a join that waited
    /// only on them: what the group timer does each round, and DeleteGroups before it looks.
    fn expire_sessions(&mut self, group_id: &str, now: Instant, initial_delay: Duration, effects: &mut Effects) {
        self.pending.retain(|_, deadline| *deadline > now);
        let expired: Vec<String> =
            self.members.values().filter(|m| !m.alive(now)).map(|m| m.record.member_id.clone()).collect();
        for member_id in expired {
            tracing::info!(group = %group_id, member = %member_id, "group member session expired");
            self.remove_member(&member_id, now, initial_delay, effects);
        }
        self.maybe_complete_join(now, effects);
    }

    fn remove_member(&mut self, member_id: &str, now: Instant, initial_delay: Duration, effects: &mut Effects) {
        let Some(mut member) = self.members.remove(member_id) else { return };
        if let Some(tx) = member.join_waiter.take() {
            effects.joins.push((tx, Err((GroupError::UnknownMemberId, JoinResponse::default()))));
        }
        if let Some(tx) = member.sync_waiter.take() {
            effects.syncs.push((tx, Err(GroupError::UnknownMemberId)));
        }
        if self.members.is_empty() && self.phase != Phase::PreparingRebalance {
            self.phase = Phase::Empty;
            self.generation = self.generation.saturating_add(1);
            self.protocol = None;
            self.leader = None;
            effects.store = Some(self.membership());
            return;
        }
        if self.phase != Phase::PreparingRebalance {
            self.prepare_rebalance(now, initial_delay, effects);
        }
        self.maybe_complete_join(now, effects);
    }
}

/// What an offset commit is: a plain one, stamped by the client's agent, or a transaction's.
enum Commit {
    Offsets(CommitStamp),
    Transactional(super::TxnRef),
}

struct Inner {
    /// The Raft term in which this node leads and holds the tables; `None` when not leading.
    term: Option<u64>,
    /// The term in which this node has applied everything committed before it led
    /// ([`GroupCoordinator::catch_up`]); until then its state may be older than the groups'.
    caught_up: Option<u64>,
    tables: Tables,
}

/// Live groups by protocol; a group id is in at most one of them.
#[derive(Default)]
pub(super) struct Tables {
    pub(super) classic: HashMap<String, Group>,
    pub(super) consumer: HashMap<String, super::consumer_group::ConsumerGroup>,
    pub(super) share: HashMap<String, super::share_group::ShareGroup>,
    /// Outlives a change of term: a write proposed in the old term may still land.
    turns: WriteTurns,
    /// Whether every stored classic group with members is in `classic` this term
    /// ([`Tables::resume_classic`]); cleared with the tables at a change of term.
    classic_resumed: bool,
}

/// A group's membership to store, with its place in the group's order of writes.
pub(super) struct GroupWrite {
    group_id: String,
    membership: GroupMembership,
    turn: WriteTurn,
}

impl Tables {
    /// The write of a change just made to `group_id` (under the tables' lock, so writes take
    /// turns in the order the changes were made).
    pub(super) fn write(&mut self, group_id: &str, membership: GroupMembership) -> GroupWrite {
        GroupWrite { group_id: group_id.to_owned(), membership, turn: self.turns.take(group_id) }
    }

    /// Whether `group_id` may be loaded from the stored state: not while a write of it is under
    /// way, which the stored state does not show yet (a membership built without it would
    /// overwrite it; the simulation's seed 1660). The member asks again.
    pub(super) fn may_load(&self, group_id: &str) -> Result<(), GroupError> {
        if self.turns.busy(group_id) {
            return Err(GroupError::CoordinatorNotAvailable("the group's writes are under way".into()));
        }
        Ok(())
    }

    /// Makes `group_id`'s next membership check write the whole membership, whatever it was
    /// last handed to Raft.
    fn rewrite_next(&mut self, group_id: &str) {
        if let Some(group) = self.consumer.get_mut(group_id) {
            group.rewrite_next();
        }
        if let Some(group) = self.share.get_mut(group_id) {
            group.rewrite_next();
        }
    }

    /// Once per term, makes every stored classic group with members live, so that its members'
    /// sessions run on this leader from `now` (Kafka's coordinator schedules each loaded
    /// member's expiry when it takes over) rather than from whenever a request first names the
    /// group. Static members close without LeaveGroup; a group whose members all went while
    /// another node led, or before a restart, was otherwise never expired: DescribeGroups
    /// showed its members and DeleteGroups answered NON_EMPTY_GROUP for good. A group with a
    /// write from an earlier term under way is left for a later call ([`Tables::may_load`]).
    /// The scan is bounded by the state's group count (`GROUP_COUNT_MAX`).
    fn resume_classic(&mut self, state: &State, clock: &Clock) {
        if self.classic_resumed {
            return;
        }
        let now = clock.now();
        let mut resumed = true;
        for (group_id, record) in &state.groups {
            let membership = &record.membership;
            if membership.kind != GroupKind::Classic
                || membership.members.is_empty()
                || self.classic.contains_key(group_id)
            {
                continue;
            }
            if self.may_load(group_id).is_err() {
                resumed = false;
                continue;
            }
            if let Some(group) = Group::from_state(state, group_id, now) {
                self.classic.insert(group_id.clone(), group);
            }
        }
        self.classic_resumed = resumed;
    }

    /// Forgets every live group (keeping the order of writes still under way).
    fn clear(&mut self) {
        *self = Tables { turns: std::mem::take(&mut self.turns), ..Tables::default() };
    }
}

/// Group coordination for the node it runs on (active only while that node leads).
pub struct GroupCoordinator {
    inner: Mutex<Inner>,
    share: super::ShareWriter,
}

impl std::fmt::Debug for GroupCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCoordinator").finish_non_exhaustive()
    }
}

impl Default for GroupCoordinator {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner { term: None, caught_up: None, tables: Tables::default() }),
            share: super::ShareWriter::default(),
        }
    }
}

fn store_error(e: NodeError) -> GroupError {
    GroupError::CoordinatorNotAvailable(e.to_string())
}

fn command_error(e: &CommandError) -> GroupError {
    match e {
        CommandError::UnknownTopicOrPartition => GroupError::UnknownTopicOrPartition,
        CommandError::OffsetMetadataTooLarge => GroupError::OffsetMetadataTooLarge,
        CommandError::GroupNotFound => GroupError::GroupIdNotFound,
        CommandError::GroupNotEmpty => GroupError::NonEmptyGroup,
        CommandError::InvalidGroup(_) => GroupError::InvalidGroupId,
        // A share group's start offset set outside the log.
        CommandError::OffsetOutOfRange { .. } => GroupError::InvalidRequest(e.to_string()),
        CommandError::ProducerFenced
        | CommandError::InvalidProducerEpoch { .. }
        | CommandError::InvalidProducerIdMapping
        | CommandError::InvalidTxnState(_)
        // Not retriable: waiting frees no room in a table.
        | CommandError::QuotaExceeded(_)
        | CommandError::LimitReached(_) => GroupError::Transaction(e.clone()),
        other => GroupError::CoordinatorNotAvailable(other.to_string()),
    }
}

/// An answer resting on an earlier write of its group that failed: the member asks again.
fn earlier_write_failed() -> GroupError {
    GroupError::CoordinatorNotAvailable("an earlier write of the group failed".into())
}

impl GroupCoordinator {
    pub(super) fn share_writer(&self) -> &super::ShareWriter {
        &self.share
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock_recovered()
    }

    /// Checks this node leads (forgetting in-memory groups from an earlier term) and runs `f`
    /// on the group table.
    fn with_groups<T>(
        &self,
        node: &impl GroupNode,
        f: impl FnOnce(&mut HashMap<String, Group>, &State) -> T,
    ) -> Result<T, GroupError> {
        self.with_tables(node, |tables, state| f(&mut tables.classic, state))
    }

    /// Checks this node leads (forgetting in-memory groups from an earlier term) and runs `f`
    /// on both group tables.
    pub(super) fn with_tables<T>(
        &self,
        node: &impl GroupNode,
        f: impl FnOnce(&mut Tables, &State) -> T,
    ) -> Result<T, GroupError> {
        let term = node.leader_term().ok_or(GroupError::NotCoordinator)?;
        let mut inner = self.lock();
        if inner.caught_up != Some(term) {
            return Err(GroupError::CoordinatorNotAvailable("the new metadata leader is catching up".into()));
        }
        if inner.term != Some(term) {
            inner.tables.clear();
            inner.term = Some(term);
        }
        let state = node.read();
        inner.tables.resume_classic(&state, node.clock());
        Ok(f(&mut inner.tables, &state))
    }

    /// Once per term: waits until this node, newly leader, has applied every entry committed
    /// before its term. A new leader's applied state may lag the log it leads, and groups loaded
    /// from it would hand out partitions a later stored membership gave to others (the
    /// simulation's seed 1703: a member was given a partition its stale load showed free).
    async fn catch_up(&self, node: &impl GroupNode) -> Result<(), GroupError> {
        let term = node.leader_term().ok_or(GroupError::NotCoordinator)?;
        if self.lock().caught_up == Some(term) {
            return Ok(());
        }
        node.confirm_linearizable_read().await.map_err(|e| GroupError::CoordinatorNotAvailable(e.to_string()))?;
        let mut inner = self.lock();
        if node.leader_term() == Some(term) && inner.caught_up.is_none_or(|t| t < term) {
            inner.caught_up = Some(term);
        }
        Ok(())
    }

    /// [`Self::with_tables`] for a change to `group_id` that may leave a membership to store in
    /// `effects`; its write takes its turn before the lock is released.
    fn changing<T>(
        &self,
        node: &impl GroupNode,
        group_id: &str,
        effects: &mut Effects,
        f: impl FnOnce(&mut Tables, &State, &mut Effects) -> T,
    ) -> Result<(T, Option<GroupWrite>), GroupError> {
        self.with_tables(node, |tables, state| {
            let out = f(tables, state, effects);
            let write = effects.store.take().map(|membership| tables.write(group_id, membership));
            (out, write)
        })
    }

    /// Handles one request; the `u64` is the log index of the last write it made (0 if none),
    /// so the caller can wait until its own view includes it.
    pub(crate) async fn handle(
        &self,
        node: &impl GroupNode,
        request: GroupRequest,
    ) -> Result<(GroupResponse, u64), GroupError> {
        self.catch_up(node).await?;
        Ok(match request {
            GroupRequest::Join(r) => (GroupResponse::Join(self.join(node, r).await?), 0),
            GroupRequest::Sync(r) => (GroupResponse::Sync(self.sync(node, r).await?), 0),
            GroupRequest::Heartbeat(r) => (GroupResponse::Heartbeat(self.heartbeat(node, &r)?), 0),
            GroupRequest::Leave { group_id, members } => {
                (GroupResponse::Leave(self.leave(node, &group_id, members).await?), 0)
            }
            GroupRequest::CommitOffsets { member, offsets, stamp } => {
                let (result, index) =
                    self.commit_offsets(node, &member, Commit::Offsets(stamp.into()), each_into(offsets)).await?;
                (GroupResponse::CommitOffsets(result), index)
            }
            GroupRequest::TxnCommitOffsets { member, transaction, offsets } => {
                let (result, index) =
                    self.commit_offsets(node, &member, Commit::Transactional(transaction), each_into(offsets)).await?;
                (GroupResponse::CommitOffsets(result), index)
            }
            GroupRequest::Describe(ids) => (GroupResponse::Describe(self.describe(node, &ids)?), 0),
            GroupRequest::List { states, types } => (GroupResponse::List(self.list(node, &states, &types)?), 0),
            GroupRequest::Delete(ids) => {
                let (result, index) = self.delete(node, ids).await?;
                (GroupResponse::Delete(result), index)
            }
            GroupRequest::ConsumerHeartbeat(request) => {
                let group_id = request.group_id.clone();
                let now = node.clock().now();
                let result = self.with_tables(node, |tables, state| {
                    super::consumer_group::heartbeat(tables, state, request, now).map(|(answer, membership)| {
                        let write = match membership {
                            Some(m) => Ok(tables.write(&group_id, m)),
                            None => Err(tables.turns.barrier(&group_id)),
                        };
                        (answer, write)
                    })
                })?;
                match result {
                    Err(e) => (GroupResponse::ConsumerHeartbeat(Err(e)), 0),
                    // No write of its own, but it may rest on earlier ones under way.
                    Ok((answer, Err(barrier))) => {
                        if barrier.passed().await {
                            (GroupResponse::ConsumerHeartbeat(Ok(answer)), 0)
                        } else {
                            (GroupResponse::ConsumerHeartbeat(Err(earlier_write_failed())), 0)
                        }
                    }
                    Ok((answer, Ok(write))) => {
                        // Not durable: forget the live group so the next heartbeat starts again
                        // from the stored state, unless later writes of it are under way (the
                        // stored state would then be older than theirs).
                        let forget = |tables: &mut Tables, _: &State| {
                            if !tables.turns.busy(&group_id) {
                                tables.consumer.remove(&group_id);
                            }
                        };
                        match self.store_or_undo(node, write, forget).await {
                            Ok(index) => (GroupResponse::ConsumerHeartbeat(Ok(answer)), index),
                            Err(e) => (GroupResponse::ConsumerHeartbeat(Err(e)), 0),
                        }
                    }
                }
            }
            GroupRequest::ConsumerDescribe(ids) => {
                let now = node.clock().now();
                let described = self.with_tables(node, |tables, state| {
                    ids.into_iter()
                        .map(|id| match super::consumer_group::load(tables, state, &id, now) {
                            Ok(Some(group)) => Ok(group.describe(&id, state)),
                            Ok(None) => Err((id, GroupError::GroupIdNotFound)),
                            Err(e) => Err((id, e)),
                        })
                        .collect()
                })?;
                (GroupResponse::ConsumerDescribe(described), 0)
            }
            GroupRequest::DeleteOffsets { group_id, partitions } => {
                let (result, index) = self.delete_offsets(node, &group_id, partitions).await?;
                (GroupResponse::DeleteOffsets(result), index)
            }
            GroupRequest::ShareHeartbeat(request) => {
                let group_id = request.group_id.clone();
                let now = node.clock().now();
                let result = self.with_tables(node, |tables, state| {
                    super::share_group::heartbeat(tables, state, request, now).map(|(answer, (membership, left))| {
                        let write = match membership {
                            Some(m) => Ok(tables.write(&group_id, m)),
                            None => Err(tables.turns.barrier(&group_id)),
                        };
                        (answer, (write, left))
                    })
                })?;
                match result {
                    Err(e) => (GroupResponse::ShareHeartbeat(Err(e)), 0),
                    Ok((answer, (write, left))) => {
                        let mut index = 0;
                        match write {
                            Err(barrier) => {
                                if !barrier.passed().await {
                                    return Ok((GroupResponse::ShareHeartbeat(Err(earlier_write_failed())), 0));
                                }
                            }
                            Ok(write) => {
                                let forget = |tables: &mut Tables, _: &State| {
                                    if !tables.turns.busy(&group_id) {
                                        tables.share.remove(&group_id);
                                    }
                                };
                                match self.store_or_undo(node, write, forget).await {
                                    Ok(i) => index = i,
                                    Err(e) => return Ok((GroupResponse::ShareHeartbeat(Err(e)), 0)),
                                }
                            }
                        }
                        self.release_members(node, &group_id, left).await;
                        (GroupResponse::ShareHeartbeat(Ok(answer)), index)
                    }
                }
            }
            GroupRequest::ShareWork(work) => {
                let (now, now_ms) = (node.clock().now(), node.clock().now_ms());
                let ops = self.with_tables(node, |tables, state| {
                    super::share_group::work_ops(tables, state, &work, now, now_ms)
                })?;
                let answer = match ops {
                    Err(e) => Err(e),
                    // Every partition idle, nothing acknowledged: nothing to write.
                    Ok(plan) if plan.ops.is_empty() => Ok(super::share_group::work_result(&work, &plan, Vec::new())),
                    Ok(mut plan) => {
                        let ops = std::mem::take(&mut plan.ops);
                        self.share.write(node, ops).await.map(|r| super::share_group::work_result(&work, &plan, r))
                    }
                };
                (GroupResponse::ShareWork(answer), 0)
            }
            GroupRequest::ShareDescribe(ids) => {
                let now = node.clock().now();
                let described = self.with_tables(node, |tables, state| {
                    ids.into_iter()
                        .map(|id| super::share_group::describe(tables, state, &id, now).map_err(|e| (id, e)))
                        .collect()
                })?;
                (GroupResponse::ShareDescribe(described), 0)
            }
            GroupRequest::ShareOffsets(groups) => {
                node.confirm_linearizable_read()
                    .await
                    .map_err(|e| GroupError::CoordinatorNotAvailable(e.to_string()))?;
                let offsets = self.with_tables(node, |tables, state| {
                    groups
                        .into_iter()
                        .map(|(id, asked)| super::share_group::offsets(tables, state, &id, asked))
                        .collect()
                })?;
                (GroupResponse::ShareOffsets(offsets), 0)
            }
            GroupRequest::AlterShareOffsets { group_id, offsets } => {
                let planned = self.with_tables(node, |tables, state| {
                    super::share_group::check_alterable(tables, state, &group_id)?;
                    Ok(offsets
                        .iter()
                        .map(|(topic, partition, offset)| {
                            let topic_id =
                                state.topic_by_name(topic).ok_or(GroupError::UnknownTopicOrPartition)?.topic_id;
                            let key = (group_id.clone(), topic_id, *partition);
                            Ok(crate::state::ShareOp::SetStartOffset { key, offset: *offset })
                        })
                        .collect::<Vec<Result<_, GroupError>>>())
                })?;
                (GroupResponse::AlterShareOffsets(self.write_planned(node, planned).await), 0)
            }
            GroupRequest::DeleteShareOffsets { group_id, topics } => {
                let planned = self.with_tables(node, |tables, state| {
                    super::share_group::check_alterable(tables, state, &group_id)?;
                    Ok(topics
                        .iter()
                        .map(|topic| {
                            let topic_id =
                                state.topic_by_name(topic).ok_or(GroupError::UnknownTopicOrPartition)?.topic_id;
                            Ok(crate::state::ShareOp::DeleteTopicState { group_id: group_id.clone(), topic_id })
                        })
                        .collect::<Vec<Result<_, GroupError>>>())
                })?;
                (GroupResponse::DeleteShareOffsets(self.write_planned(node, planned).await), 0)
            }
            GroupRequest::FetchOffsets { groups, require_stable } => {
                node.confirm_linearizable_read()
                    .await
                    .map_err(|e| GroupError::CoordinatorNotAvailable(e.to_string()))?;
                let state = node.read();
                let fetched =
                    groups.into_iter().map(|(id, asked)| state.committed_offsets(&id, asked, require_stable)).collect();
                (GroupResponse::FetchOffsets(fetched), 0)
            }
        })
    }

    async fn join(&self, node: &impl GroupNode, request: JoinRequest) -> Result<JoinReply, GroupError> {
        let fail = |e: GroupError| Ok(Err((e, JoinResponse::default())));
        if request.group_id.is_empty() || request.group_id.len() > crate::limits::GROUP_ID_BYTES_MAX {
            return fail(GroupError::InvalidGroupId);
        }
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return fail(GroupError::InconsistentGroupProtocol);
        }
        if let Err(why) = check_join_sizes(&request) {
            return fail(GroupError::InvalidRequest(why));
        }
        let now = node.clock().now();
        let mut effects = Effects::default();
        // The closure's error is the immediate answer (no waiting); it is moved once, not hot.
        #[allow(clippy::result_large_err)]
        let (outcome, write) =
            self.changing(node, &request.group_id, &mut effects, |tables, state, effects| -> Result<_, JoinReply> {
                if super::consumer_group::has_members(tables, state, &request.group_id)
                    || super::share_group::has_members(tables, state, &request.group_id)
                {
                    return Err(Err((GroupError::InconsistentGroupProtocol, JoinResponse::default())));
                }
                let groups = &mut tables.classic;
                let session = i64::from(request.session_timeout_ms);
                if session < setting(state, MIN_SESSION_TIMEOUT_MS) || session > setting(state, MAX_SESSION_TIMEOUT_MS)
                {
                    return Err(Err((GroupError::InvalidSessionTimeout, JoinResponse::default())));
                }
                let initial_delay = initial_delay(state);
                let max_size =
                    usize::try_from(setting(state, MAX_GROUP_SIZE)).unwrap_or(0).min(crate::limits::GROUP_MEMBERS_MAX);
                let group = match groups.entry(request.group_id.clone()) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(e) => e.insert(
                        Group::from_state(state, &request.group_id, now)
                            .unwrap_or_else(|| Group::empty(&request.protocol_type)),
                    ),
                };
                let inconsistent = Err(Err((GroupError::InconsistentGroupProtocol, JoinResponse::default())));
                if group.members.is_empty() {
                    group.protocol_type.clone_from(&request.protocol_type);
                } else if group.protocol_type != request.protocol_type
                    || group.common_protocols(Some(&request.protocols)).is_empty()
                {
                    return inconsistent;
                }
                let full = group.members.len() >= max_size;
                let new_id = || {
                    let client: String = request.client_id.chars().take(255).collect();
                    format!("{client}-{}", crate::raft::runtime::random_uuid())
                };
                let member_id = if request.member_id.is_empty() {
                    if let Some(instance) = request.instance_id.as_deref()
                        && let Some(old_id) = group.static_member(instance).map(str::to_owned)
                    {
                        // A static member restarted: it takes over its old membership and the old
                        // instance is fenced.
                        let id = new_id();
                        let Some(mut member) = group.members.remove(&old_id) else {
                            return Err(Err((GroupError::UnknownMemberId, JoinResponse::default())));
                        };
                        if let Some(tx) = member.join_waiter.take() {
                            effects.joins.push((tx, Err((GroupError::FencedInstanceId, JoinResponse::default()))));
                        }
                        if let Some(tx) = member.sync_waiter.take() {
                            effects.syncs.push((tx, Err(GroupError::FencedInstanceId)));
                        }
                        let unchanged = group.protocol.as_deref().is_some_and(|p| {
                            request.protocols.iter().any(|(n, m)| n == p && *m == member.record.subscription)
                        });
                        member.record.member_id.clone_from(&id);
                        member.record.client_id.clone_from(&request.client_id);
                        member.record.client_host.clone_from(&request.client_host);
                        member.record.session_timeout_ms = request.session_timeout_ms;
                        member.record.rebalance_timeout_ms = request.rebalance_timeout_ms;
                        member.protocols.clone_from(&request.protocols);
                        member.last_seen = now;
                        group.members.insert(id.clone(), member);
                        if group.leader.as_deref() == Some(old_id.as_str()) {
                            group.leader = Some(id.clone());
                        }
                        if group.phase == Phase::Stable && unchanged {
                            effects.store = Some(group.membership());
                            return Err(Ok(group.current_join(&id)));
                        }
                        id
                    } else if request.instance_id.is_none() && request.require_known_member {
                        let id = new_id();
                        group.pending.insert(id.clone(), now + millis(request.session_timeout_ms));
                        return Err(Err((
                            GroupError::MemberIdRequired,
                            JoinResponse { member_id: id, ..Default::default() },
                        )));
                    } else {
                        if full {
                            return Err(Err((GroupError::GroupMaxSizeReached, JoinResponse::default())));
                        }
                        let id = new_id();
                        group.add_member(id.clone(), &request, now);
                        id
                    }
                } else if group.pending.remove(&request.member_id).is_some() {
                    if full {
                        return Err(Err((GroupError::GroupMaxSizeReached, JoinResponse::default())));
                    }
                    group.add_member(request.member_id.clone(), &request, now);
                    request.member_id.clone()
                } else {
                    if let Err(e) = group.check_member(&request.member_id, request.instance_id.as_deref()) {
                        return Err(Err((e, JoinResponse::default())));
                    }
                    let leader = group.leader.clone();
                    let Some(member) = group.members.get_mut(&request.member_id) else {
                        return Err(Err((GroupError::UnknownMemberId, JoinResponse::default())));
                    };
                    let unchanged = member.protocols == request.protocols;
                    member.protocols.clone_from(&request.protocols);
                    member.record.session_timeout_ms = request.session_timeout_ms;
                    member.record.rebalance_timeout_ms = request.rebalance_timeout_ms;
                    member.last_seen = now;
                    let is_leader = leader.as_deref() == Some(request.member_id.as_str());
                    match group.phase {
                        Phase::CompletingRebalance if unchanged => {
                            return Err(Ok(group.current_join(&request.member_id)));
                        }
                        Phase::Stable if unchanged && !is_leader => {
                            return Err(Ok(group.current_join(&request.member_id)));
                        }
                        _ => {}
                    }
                    request.member_id.clone()
                };
                if group.phase != Phase::PreparingRebalance || group.initial_join_started.is_some() {
                    group.prepare_rebalance(now, initial_delay, effects);
                }
                let (tx, rx) = oneshot::channel();
                if let Some(member) = group.members.get_mut(&member_id) {
                    member.join_waiter = Some(tx);
                }
                let wait = group.max_rebalance_timeout().max(initial_delay) + WAIT_MARGIN;
                group.maybe_complete_join(now, effects);
                Ok((rx, wait))
            })?;
        effects.deliver();
        if let Some(write) = write {
            self.store(node, write).await?;
        }
        let (rx, wait) = match outcome {
            Ok(waiting) => waiting,
            Err(answer) => return Ok(answer),
        };
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(GroupError::NotCoordinator),
            Err(_) => Ok(Err((GroupError::RebalanceInProgress, JoinResponse::default()))),
        }
    }

    /// Writes the share operations of items that could be planned; each item's outcome in order.
    async fn write_planned(
        &self,
        node: &impl GroupNode,
        planned: Result<Vec<Result<crate::state::ShareOp, GroupError>>, GroupError>,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let planned = planned?;
        let ops: Vec<crate::state::ShareOp> = planned.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        let mut written = self.share.write(node, ops).await?.into_iter();
        Ok(planned
            .into_iter()
            .map(|p| {
                p?;
                match written.next() {
                    Some(Ok(_)) => Ok(()),
                    Some(Err(e)) => Err(command_error(&e)),
                    None => Err(GroupError::CoordinatorNotAvailable("no result for a share operation".into())),
                }
            })
            .collect())
    }

    /// Ends the record locks of share group members that left; their records are redelivered.
    async fn release_members(&self, node: &impl GroupNode, group_id: &str, members: Vec<String>) {
        let ops: Vec<crate::state::ShareOp> = members
            .into_iter()
            .map(|member| crate::state::ShareOp::ReleaseMember { group_id: group_id.to_owned(), member })
            .collect();
        if let Err(e) = self.share.write(node, ops).await {
            // The locks still end at their deadline.
            tracing::warn!(group = %group_id, error = %e, "releasing a share group member's records");
        }
    }

    /// Writes a group's membership once the group's earlier writes are over.
    async fn store(&self, node: &impl GroupNode, write: GroupWrite) -> Result<u64, GroupError> {
        self.store_or_undo(node, write, |_, _| {}).await
    }

    /// [`Self::store`], running `undo` on the tables if the write failed, under the same lock
    /// as the end of the write's turn: a change that takes its barrier after the failure is
    /// counted already sees the group undone (on a multi-threaded runtime another request could
    /// otherwise come in between and answer from the unwritten membership).
    async fn store_or_undo(
        &self,
        node: &impl GroupNode,
        write: GroupWrite,
        undo: impl FnOnce(&mut Tables, &State),
    ) -> Result<u64, GroupError> {
        let GroupWrite { group_id, membership, turn } = write;
        turn.wait().await;
        let command = Command::StoreGroup {
            group_id: group_id.clone(),
            membership: membership.into(),
            now_ms: node.clock().now_ms(),
        };
        let written = node.propose_indexed(command).await.map(|(_, index)| index).map_err(store_error);
        if written.is_err() {
            // The live group holds a change no stored membership shows: its next check writes the
            // whole membership again, and (in this order) answers waiting on this write fail.
            let mut turn = Some(turn);
            let _ = self.with_tables(node, |tables, state| {
                tables.rewrite_next(&group_id);
                if let Some(turn) = turn.take() {
                    turn.failed();
                }
                undo(tables, state);
            });
            if let Some(turn) = turn {
                turn.failed();
            }
        }
        written
    }

    async fn sync(&self, node: &impl GroupNode, request: SyncRequest) -> Result<SyncReply, GroupError> {
        let now = node.clock().now();
        let mut effects = Effects::default();
        // An answer from a stable group waits for the group's writes under way: the generation
        // may not be durable yet.
        let mut stable = None;
        let (outcome, write) = self.changing(
            node,
            &request.group_id,
            &mut effects,
            |tables, _state, effects| -> Result<(oneshot::Receiver<SyncReply>, Duration), SyncReply> {
                let barrier = tables.turns.barrier(&request.group_id);
                let groups = &mut tables.classic;
                let group = groups.get_mut(&request.group_id).ok_or(Err(GroupError::UnknownMemberId))?;
                group.check_member(&request.member_id, request.instance_id.as_deref()).map_err(Err)?;
                if request.generation != group.generation {
                    return Err(Err(GroupError::IllegalGeneration));
                }
                if request.protocol_type.as_ref().is_some_and(|t| *t != group.protocol_type)
                    || request.protocol.as_ref().is_some_and(|p| Some(p) != group.protocol.as_ref())
                {
                    return Err(Err(GroupError::InconsistentGroupProtocol));
                }
                let answer = |group: &Group, assignment: Vec<u8>| SyncResponse {
                    protocol_type: Some(group.protocol_type.clone()),
                    protocol: group.protocol.clone(),
                    assignment,
                };
                match group.phase {
                    Phase::Empty => return Err(Err(GroupError::UnknownMemberId)),
                    Phase::PreparingRebalance => return Err(Err(GroupError::RebalanceInProgress)),
                    Phase::Stable => {
                        let assignment = group.members.get(&request.member_id).map(|m| m.record.assignment.clone());
                        stable = Some(barrier);
                        return Err(Ok(answer(group, assignment.unwrap_or_default())));
                    }
                    Phase::CompletingRebalance => {}
                }
                let (tx, rx) = oneshot::channel();
                let wait = group.max_rebalance_timeout() + WAIT_MARGIN;
                if let Some(member) = group.members.get_mut(&request.member_id) {
                    member.sync_waiter = Some(tx);
                    member.last_seen = now;
                }
                if group.leader.as_deref() == Some(request.member_id.as_str()) {
                    let budget = crate::limits::GROUP_MEMBER_BYTES_MAX / 2;
                    if request.assignments.iter().any(|(_, a)| a.len() > budget) {
                        return Err(Err(GroupError::InvalidRequest(format!("an assignment over {budget} bytes"))));
                    }
                    let mut assignments: HashMap<&str, &Vec<u8>> =
                        request.assignments.iter().map(|(id, a)| (id.as_str(), a)).collect();
                    for member in group.members.values_mut() {
                        member.record.assignment =
                            assignments.remove(member.record.member_id.as_str()).cloned().unwrap_or_default();
                    }
                    group.phase = Phase::Stable;
                    effects.store = Some(group.membership());
                    let replies: Vec<_> = group
                        .members
                        .values_mut()
                        .filter_map(|m| m.sync_waiter.take().map(|tx| (tx, m.record.assignment.clone())))
                        .collect();
                    for (tx, assignment) in replies {
                        effects.syncs.push((tx, Ok(answer(group, assignment))));
                    }
                }
                Ok((rx, wait))
            },
        )?;
        let (rx, wait) = match outcome {
            Ok(waiting) => waiting,
            Err(Ok(answer)) if let Some(barrier) = stable => {
                return Ok(if barrier.passed().await { Ok(answer) } else { Err(earlier_write_failed()) });
            }
            Err(answer) => return Ok(answer),
        };
        if let Some(write) = write {
            let generation = write.membership.generation;
            // The generation is not durable: fail this round and rebalance.
            let rebalance = |tables: &mut Tables, state: &State| {
                if let Some(group) = tables.classic.get_mut(&request.group_id)
                    && group.generation == generation
                {
                    let delay = initial_delay(state);
                    let mut more = Effects::default();
                    group.prepare_rebalance(node.clock().now(), delay, &mut more);
                    more.deliver();
                }
            };
            if let Err(e) = self.store_or_undo(node, write, rebalance).await {
                for (_, reply) in &mut effects.syncs {
                    *reply = Err(e.clone());
                }
            }
        }
        effects.deliver();
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(GroupError::NotCoordinator),
            Err(_) => Ok(Err(GroupError::RebalanceInProgress)),
        }
    }

    fn heartbeat(&self, node: &impl GroupNode, request: &MemberRef) -> Result<Result<(), GroupError>, GroupError> {
        let now = node.clock().now();
        self.with_groups(node, |groups, state| {
            if !groups.contains_key(&request.group_id)
                && let Some(group) = Group::from_state(state, &request.group_id, now)
            {
                groups.insert(request.group_id.clone(), group);
            }
            let group = groups.get_mut(&request.group_id).ok_or(GroupError::UnknownMemberId)?;
            group.check_member(&request.member_id, request.instance_id.as_deref())?;
            if request.generation != group.generation {
                return Err(GroupError::IllegalGeneration);
            }
            if let Some(member) = group.members.get_mut(&request.member_id) {
                member.last_seen = now;
            }
            match group.phase {
                Phase::PreparingRebalance => Err(GroupError::RebalanceInProgress),
                Phase::Empty => Err(GroupError::UnknownMemberId),
                Phase::CompletingRebalance | Phase::Stable => Ok(()),
            }
        })
    }

    async fn leave(
        &self,
        node: &impl GroupNode,
        group_id: &str,
        leaving: Vec<LeavingMember>,
    ) -> Result<Result<Vec<LeaveResult>, GroupError>, GroupError> {
        let now = node.clock().now();
        let mut effects = Effects::default();
        let (result, write) = self.changing(node, group_id, &mut effects, |tables, state, effects| {
            let groups = &mut tables.classic;
            if !groups.contains_key(group_id)
                && let Some(group) = Group::from_state(state, group_id, now)
            {
                groups.insert(group_id.to_owned(), group);
            }
            let Some(group) = groups.get_mut(group_id) else { return Err(GroupError::UnknownMemberId) };
            let delay = initial_delay(state);
            let mut results = Vec::new();
            for member in leaving {
                let target = match (&member.instance_id, member.member_id.is_empty()) {
                    (Some(instance), _) => match group.static_member(instance) {
                        Some(id) if member.member_id.is_empty() || member.member_id == id => Ok(id.to_owned()),
                        Some(_) => Err(GroupError::FencedInstanceId),
                        None => Err(GroupError::UnknownMemberId),
                    },
                    (None, false) if group.pending.remove(&member.member_id).is_some() => {
                        results.push((member, Ok(())));
                        continue;
                    }
                    (None, false) if group.members.contains_key(&member.member_id) => Ok(member.member_id.clone()),
                    _ => Err(GroupError::UnknownMemberId),
                };
                if let Ok(id) = &target {
                    group.remove_member(id, now, delay, effects);
                }
                results.push((member, target.map(|_| ())));
            }
            Ok(results)
        })?;
        effects.deliver();
        if let Some(write) = write {
            self.store(node, write).await?;
        }
        Ok(result)
    }

    /// OffsetCommit, or TxnOffsetCommit when `transaction` is set.
    async fn commit_offsets(
        &self,
        node: &impl GroupNode,
        member: &MemberRef,
        commit: Commit,
        offsets: Vec<OffsetCommit>,
    ) -> Result<(Result<Vec<Result<(), GroupError>>, GroupError>, u64), GroupError> {
        if member.group_id.is_empty() || member.group_id.len() > crate::limits::GROUP_ID_BYTES_MAX {
            return Ok((Err(GroupError::InvalidGroupId), 0));
        }
        let now = node.clock().now();
        let unchecked = matches!(commit, Commit::Transactional(_)) && member.generation < 0;
        let allowed = self.with_tables(node, |tables, state| {
            if unchecked {
                return Ok(());
            }
            if let Some(group) = super::consumer_group::load(tables, state, &member.group_id, now)? {
                if member.generation < 0 && member.member_id.is_empty() && group.is_empty() {
                    return Ok(());
                }
                return match group.member_epoch(&member.member_id) {
                    None => Err(GroupError::UnknownMemberId),
                    Some(epoch) if epoch != member.generation => Err(GroupError::StaleMemberEpoch),
                    Some(_) => Ok(()),
                };
            }
            let groups = &mut tables.classic;
            if !groups.contains_key(&member.group_id)
                && let Some(group) = Group::from_state(state, &member.group_id, now)
            {
                groups.insert(member.group_id.clone(), group);
            }
            let Some(group) = groups.get_mut(&member.group_id) else {
                // No such group: only an assign-mode consumer (generation -1) may create one.
                return if member.generation < 0 { Ok(()) } else { Err(GroupError::IllegalGeneration) };
            };
            if member.generation < 0 && group.phase == Phase::Empty {
                return Ok(());
            }
            group.check_member(&member.member_id, member.instance_id.as_deref())?;
            if member.generation != group.generation {
                return Err(GroupError::IllegalGeneration);
            }
            if group.phase == Phase::CompletingRebalance {
                return Err(GroupError::RebalanceInProgress);
            }
            if let Some(m) = group.members.get_mut(&member.member_id) {
                m.last_seen = now;
            }
            Ok(())
        })?;
        if let Err(e) = allowed {
            return Ok((Err(e), 0));
        }
        let group_id = member.group_id.clone();
        let command = match commit {
            Commit::Offsets(stamp) => Command::CommitOffsets {
                group_id,
                offsets: each_into(offsets),
                stamp: Some(stamp.into()),
                now_ms: node.clock().now_ms(),
            },
            Commit::Transactional(t) => Command::TxnCommitOffsets {
                transactional_id: t.transactional_id,
                producer: t.producer,
                group_id,
                offsets: each_into(offsets),
                now_ms: node.clock().now_ms(),
            },
        };
        match node.propose_indexed(command).await {
            Ok((Outcome::OffsetsCommitted(results), index)) => {
                Ok((Ok(results.iter().map(|r| r.as_ref().map_err(command_error).copied()).collect()), index))
            }
            Ok((other, _)) => Err(GroupError::CoordinatorNotAvailable(format!("unexpected outcome {other:?}"))),
            Err(NodeError::Rejected(e)) => Ok((Err(command_error(&e)), 0)),
            Err(e) => Err(store_error(e)),
        }
    }

    fn describe(&self, node: &impl GroupNode, ids: &[String]) -> Result<Vec<Described>, GroupError> {
        let now = node.clock().now();
        self.with_tables(node, |tables, state| {
            ids.iter()
                .map(|id| {
                    if let Some(group) =
                        super::consumer_group::load(tables, state, id, now).map_err(|e| (id.clone(), e))?
                    {
                        return Ok(group.describe_classic(id, state));
                    }
                    let groups = &tables.classic;
                    let loaded;
                    let group = match groups.get(id) {
                        Some(g) => Some(g),
                        None => {
                            loaded = Group::from_state(state, id, now);
                            loaded.as_ref()
                        }
                    };
                    let Some(group) = group else {
                        return Ok(GroupDescription {
                            group_id: id.clone(),
                            state: "Dead".into(),
                            protocol_type: String::new(),
                            protocol: String::new(),
                            members: Vec::new(),
                        });
                    };
                    Ok(GroupDescription {
                        group_id: id.clone(),
                        state: group.phase.name().into(),
                        protocol_type: group.protocol_type.clone(),
                        protocol: group.protocol.clone().unwrap_or_default(),
                        members: group
                            .members
                            .values()
                            .map(|m| DescribedMember {
                                member_id: m.record.member_id.clone(),
                                instance_id: m.record.instance_id.clone(),
                                client_id: m.record.client_id.clone(),
                                client_host: m.record.client_host.clone(),
                                metadata: m.record.subscription.clone(),
                                assignment: m.record.assignment.clone(),
                            })
                            .collect(),
                    })
                })
                .collect()
        })
    }

    fn list(&self, node: &impl GroupNode, states: &[String], types: &[String]) -> Result<Vec<ListedGroup>, GroupError> {
        self.with_tables(node, |tables, state| {
            let kind_name = |kind: GroupKind| match kind {
                GroupKind::Classic => "classic",
                GroupKind::Consumer => "consumer",
                GroupKind::Share => "share",
            };
            let mut listed: BTreeMap<String, ListedGroup> = state
                .groups
                .iter()
                .map(|(id, record)| {
                    let phase = if record.membership.members.is_empty() { Phase::Empty } else { Phase::Stable };
                    let group = ListedGroup {
                        group_id: id.clone(),
                        protocol_type: record.membership.protocol_type.clone(),
                        state: phase.name().into(),
                        group_type: kind_name(record.membership.kind).into(),
                    };
                    (id.clone(), group)
                })
                .collect();
            for (id, group) in &tables.classic {
                let entry = ListedGroup {
                    group_id: id.clone(),
                    protocol_type: group.protocol_type.clone(),
                    state: group.phase.name().into(),
                    group_type: "classic".into(),
                };
                listed.insert(id.clone(), entry);
            }
            for (id, group) in &tables.consumer {
                let entry = ListedGroup {
                    group_id: id.clone(),
                    protocol_type: "consumer".into(),
                    state: group.state_label().into(),
                    group_type: "consumer".into(),
                };
                listed.insert(id.clone(), entry);
            }
            for (id, group) in &tables.share {
                let entry = ListedGroup {
                    group_id: id.clone(),
                    protocol_type: "share".into(),
                    state: group.state_label().into(),
                    group_type: "share".into(),
                };
                listed.insert(id.clone(), entry);
            }
            listed
                .into_values()
                .filter(|g| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(&g.state)))
                .filter(|g| types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(&g.group_type)))
                .collect()
        })
    }

    async fn delete(
        &self,
        node: &impl GroupNode,
        ids: Vec<String>,
    ) -> Result<(Vec<(String, Result<(), GroupError>)>, u64), GroupError> {
        let mut results = Vec::new();
        let mut last_index = 0;
        for id in ids {
            // Sessions past their timeout end now, not at the timer's next round, and the group's
            // writes under way (that one included) land before the stored state is asked to
            // delete it: a client deleting a group its static members left without LeaveGroup,
            // a session timeout after they closed, is answered as on Kafka.
            let now = node.clock().now();
            let (live, expiry, barrier) = self.with_tables(node, |tables, state| {
                let mut effects = Effects::default();
                if let Some(group) = tables.classic.get_mut(&id) {
                    group.expire_sessions(&id, now, initial_delay(state), &mut effects);
                }
                let expiry = effects.store.take().map(|membership| tables.write(&id, membership));
                let live = tables.classic.get(&id).is_some_and(|g| !g.members.is_empty())
                    || super::consumer_group::has_members(tables, state, &id)
                    || super::share_group::has_members(tables, state, &id);
                (live, expiry.map(|write| (write, effects)), tables.turns.barrier(&id))
            })?;
            if let Some((write, effects)) = expiry {
                effects.deliver();
                if let Err(e) = self.store(node, write).await {
                    results.push((id, Err(e)));
                    continue;
                }
            }
            if live {
                results.push((id, Err(GroupError::NonEmptyGroup)));
                continue;
            }
            if !barrier.passed().await {
                results
                    .push((id, Err(GroupError::CoordinatorNotAvailable("a write of the group failed; retry".into()))));
                continue;
            }
            let result = match node.propose_indexed(Command::DeleteGroup { group_id: id.clone() }).await {
                Ok((_, index)) => {
                    last_index = index;
                    self.with_tables(node, |tables, _| {
                        tables.classic.remove(&id);
                        tables.consumer.remove(&id);
                        tables.share.remove(&id);
                    })?;
                    // A share group's records in flight go with it.
                    let ops = vec![crate::state::ShareOp::DeleteGroup { group_id: id.clone() }];
                    self.share.write(node, ops).await.map(|_| ())
                }
                Err(NodeError::Rejected(e)) => Err(command_error(&e)),
                Err(e) => Err(store_error(e)),
            };
            results.push((id, result));
        }
        Ok((results, last_index))
    }

    async fn delete_offsets(
        &self,
        node: &impl GroupNode,
        group_id: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<(Result<Vec<Result<(), GroupError>>, GroupError>, u64), GroupError> {
        let now = node.clock().now();
        let checked = self.with_groups(node, |groups, state| {
            if !state.groups.contains_key(group_id) && !groups.contains_key(group_id) {
                return Err(GroupError::GroupIdNotFound);
            }
            let subscribed: Vec<String> = match groups.get(group_id) {
                Some(g) if g.phase != Phase::Empty && g.protocol_type == "consumer" => {
                    g.members.values().flat_map(|m| subscribed_topics(&m.record.subscription)).collect()
                }
                Some(_) => Vec::new(),
                None => Group::from_state(state, group_id, now)
                    .filter(|g| g.phase != Phase::Empty && g.protocol_type == "consumer")
                    .map(|g| g.members.values().flat_map(|m| subscribed_topics(&m.record.subscription)).collect())
                    .unwrap_or_default(),
            };
            Ok(partitions
                .iter()
                .map(|(topic, partition)| {
                    let known = state
                        .topic_by_name(topic)
                        .is_some_and(|t| usize::try_from(*partition).is_ok_and(|p| p < t.partitions.len()));
                    if !known {
                        Err(GroupError::UnknownTopicOrPartition)
                    } else if subscribed.contains(topic) {
                        Err(GroupError::GroupSubscribedToTopic)
                    } else {
                        Ok(())
                    }
                })
                .collect::<Vec<_>>())
        })?;
        let results = match checked {
            Ok(results) => results,
            Err(e) => return Ok((Err(e), 0)),
        };
        let deletable: Vec<(String, i32)> =
            partitions.into_iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(p, _)| p).collect();
        if deletable.is_empty() {
            return Ok((Ok(results), 0));
        }
        match node
            .propose_indexed(Command::DeleteOffsets { group_id: group_id.to_owned(), partitions: deletable })
            .await
        {
            Ok((_, index)) => Ok((Ok(results), index)),
            Err(NodeError::Rejected(e)) => Ok((Err(command_error(&e)), 0)),
            Err(e) => Err(store_error(e)),
        }
    }

    /// Runs the group timers until the node shuts down: expires sessions and pending member ids and
    /// completes rebalances at their deadline. (The leader's other periodic work is
    /// `crate::leader_duties`.)
    pub(crate) async fn run_timers(node: impl GroupNode, stop: tokio_util::sync::CancellationToken) {
        while crate::tasks::sleep_unless_stopped(&stop, TICK).await {
            let coordinator = node.groups();
            if node.leader_term().is_some() && coordinator.catch_up(&node).await.is_err() {
                continue;
            }
            let now = node.clock().now();
            let mut releases = Vec::new();
            let mut effects = Effects::default();
            let leading = coordinator.with_tables(&node, |tables, state| {
                let delay = initial_delay(state);
                let mut stores = Vec::new();
                for (id, group) in &mut tables.consumer {
                    if let Some(membership) = group.expire(id, state, now) {
                        stores.push((id.clone(), membership));
                    }
                }
                for (id, group) in &mut tables.share {
                    if let Some((membership, left)) = group.expire(id, state, now) {
                        stores.push((id.clone(), membership));
                        releases.push((id.clone(), left));
                    }
                }
                let groups = &mut tables.classic;
                for (id, group) in groups.iter_mut() {
                    let mut group_effects = Effects::default();
                    group.expire_sessions(id, now, delay, &mut group_effects);
                    if let Some(membership) = group_effects.store.take() {
                        stores.push((id.clone(), membership));
                    }
                    effects.joins.append(&mut group_effects.joins);
                    effects.syncs.append(&mut group_effects.syncs);
                }
                let writes: Vec<GroupWrite> = stores.into_iter().map(|(id, m)| tables.write(&id, m)).collect();
                // Empty groups live on in the replicated state alone, once it shows them.
                let turns = &tables.turns;
                tables.consumer.retain(|id, g| !g.is_empty() || turns.busy(id));
                tables.share.retain(|id, g| !g.is_empty() || turns.busy(id));
                tables.classic.retain(|id, g| g.phase != Phase::Empty || !g.pending.is_empty() || turns.busy(id));
                writes
            });
            effects.deliver();
            let Ok(writes) = leading else {
                // No longer leading: drop the groups, so members waiting here for a join or a
                // sync are answered NOT_COORDINATOR now and look for the new leader, instead of
                // waiting out their rebalance timeout on a node that will never complete it.
                let mut inner = coordinator.lock();
                inner.term = None;
                inner.tables.clear();
                continue;
            };
            // Each group's write waits for that group's earlier ones only, not for other groups'.
            let mut stores = tokio::task::JoinSet::new();
            for write in writes {
                let node = node.clone();
                stores.spawn(async move {
                    let group_id = write.group_id.clone();
                    if let Err(e) = node.groups().store(&node, write).await {
                        tracing::warn!(group = %group_id, error = %e, "storing group membership");
                    }
                });
            }
            while stores.join_next().await.is_some() {}
            for (group_id, left) in releases {
                coordinator.release_members(&node, &group_id, left).await;
            }
        }
    }
}
