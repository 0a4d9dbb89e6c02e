//! Share groups (KIP-932) in the coordinator: membership and the simple assignor driven by
//! ShareGroupHeartbeat, stored through Raft as [`GroupKind::Share`] groups; and the writer that
//! gathers share partitions' acquisitions and acknowledgements from many ShareFetch requests
//! into one `ShareUpdate` entry.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::GroupNode;
use super::consumer::Partitions;
use super::coordinator::Tables;
use super::{
    GroupError, ShareGroupDescription, ShareHeartbeat, ShareHeartbeatResponse, ShareMemberDescription, ShareWork,
    ShareWorkResult, assigned_partitions, encode_assignment, encode_subscription, setting, subscribed_topics,
};
use crate::command::{Command, CommandError, Outcome};
use crate::config::{self, ShareOffsetReset};
use crate::limits::{GROUP_MEMBERS_MAX, GROUP_NAME_BYTES_MAX};
use crate::locks::MutexRecovery;
use crate::state::{
    AcquiredRange, GroupKind, GroupMembership, MemberRecord, SHARE_OPS_MAX, SHARE_RECORD_LOCKS_MAX,
    SHARE_UPDATE_WEIGHT_MAX, ShareLag, ShareOp, ShareSettings, State, TopicId,
};

/// A share group's settings: group configs, which fall back to the `group.share.*` broker
/// configs (and `floe.share.auto.offset.reset`) when the group sets none.
const SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
const HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
const LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
const DELIVERY_LIMIT: &str = "share.delivery.count.limit";
const MAX_RECORD_LOCKS: &str = "share.partition.max.record.locks";
const AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";
/// Members of one share group (a broker config only).
const MAX_SIZE: &str = "group.share.max.size";
/// Topics one member may subscribe to by name.
const SUBSCRIBED_TOPICS_MAX: usize = 10_000;
/// The only assignor share groups have (Kafka's `group.share.assignors` default).
const ASSIGNOR: &str = "simple";

struct ShareMember {
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    subscribed: Vec<String>,
    /// What the member was last told, and with which epoch.
    assigned: Partitions,
    epoch: i32,
    previous_epoch: i32,
    last_seen: Instant,
}

pub(super) struct ShareGroup {
    epoch: i32,
    members: BTreeMap<String, ShareMember>,
    /// Partition counts of the subscribed topics when the targets were computed.
    subscribed_metadata: BTreeMap<TopicId, i32>,
    targets: BTreeMap<String, Partitions>,
    assignment_epoch: i32,
    stored: Option<GroupMembership>,
}

/// Whether `group_id` is a share group with members (live or stored).
pub(super) fn has_members(tables: &Tables, state: &State, group_id: &str) -> bool {
    match tables.share.get(group_id) {
        Some(group) => !group.members.is_empty(),
        None => state
            .groups
            .get(group_id)
            .is_some_and(|g| g.membership.kind == GroupKind::Share && !g.membership.members.is_empty()),
    }
}

impl ShareGroup {
    fn empty(epoch: i32) -> Self {
        Self {
            epoch,
            members: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            targets: BTreeMap::new(),
            assignment_epoch: epoch,
            stored: None,
        }
    }

    /// Resumes a stored share group under a new leader; members keep what they were told.
    fn from_state(state: &State, group_id: &str, now: Instant) -> Result<Self, GroupError> {
        let Some(record) = state.groups.get(group_id) else { return Ok(Self::empty(0)) };
        let m = &record.membership;
        if m.kind != GroupKind::Share {
            if m.members.is_empty() && record.offsets.is_empty() {
                return Ok(Self::empty(m.generation));
            }
            return Err(GroupError::GroupIdNotFound);
        }
        let mut group = Self::empty(m.generation);
        for r in &m.members {
            let assigned = assigned_partitions(&r.assignment)
                .into_iter()
                .filter_map(|(name, ps)| Some((state.topic_by_name(&name)?.topic_id, ps.into_iter().collect())))
                .collect();
            group.members.insert(
                r.member_id.clone(),
                ShareMember {
                    rack_id: r.rack_id.clone(),
                    client_id: r.client_id.clone(),
                    client_host: r.client_host.clone(),
                    subscribed: subscribed_topics(&r.subscription),
                    assigned,
                    epoch: r.member_epoch,
                    previous_epoch: r.member_epoch,
                    last_seen: now,
                },
            );
        }
        group.stored = Some(m.clone());
        Ok(group)
    }

    fn state_name(&self) -> &'static str {
        if self.members.is_empty() { "Empty" } else { "Stable" }
    }

    /// Recomputes every member's target when membership, subscriptions or partition counts
    /// changed: each subscribed topic's partitions spread over its subscribers, several members
    /// sharing a partition when there are more members than partitions.
    fn refresh_targets(&mut self, state: &State) {
        let mut subscribers: BTreeMap<TopicId, (i32, Vec<&str>)> = BTreeMap::new();
        for (id, m) in &self.members {
            for name in &m.subscribed {
                if let Some(t) = state.topic_by_name(name) {
                    let count = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
                    subscribers.entry(t.topic_id).or_insert((count, Vec::new())).1.push(id);
                }
            }
        }
        let metadata: BTreeMap<TopicId, i32> = subscribers.iter().map(|(t, (n, _))| (*t, *n)).collect();
        if metadata != self.subscribed_metadata {
            self.subscribed_metadata = metadata;
            self.epoch = self.epoch.saturating_add(1);
        }
        if self.assignment_epoch >= self.epoch {
            return;
        }
        let mut targets: BTreeMap<String, Partitions> = BTreeMap::new();
        for (topic, (count, members)) in &subscribers {
            let n = members.len();
            if n == 0 || *count <= 0 {
                continue;
            }
            let count = usize::try_from(*count).unwrap_or(0);
            let mut give = |member: &str, partition: usize| {
                let p = i32::try_from(partition).unwrap_or(i32::MAX);
                targets.entry(member.to_owned()).or_default().entry(*topic).or_default().insert(p);
            };
            if n <= count {
                for p in 0..count {
                    give(members[p % n], p);
                }
            } else {
                for (i, member) in members.iter().enumerate() {
                    give(member, i % count);
                }
            }
        }
        self.targets = targets;
        self.assignment_epoch = self.epoch;
    }

    fn remove(&mut self, member_id: &str) -> bool {
        let removed = self.members.remove(member_id).is_some();
        if removed {
            self.targets.remove(member_id);
            self.epoch = self.epoch.saturating_add(1);
        }
        removed
    }

    fn membership(&self, state: &State, group_id: &str) -> GroupMembership {
        let session = i32::try_from(session_timeout_ms(state, group_id)).unwrap_or(i32::MAX);
        let members = self
            .members
            .iter()
            .map(|(id, m)| {
                let by_name: Vec<(String, Vec<i32>)> = m
                    .assigned
                    .iter()
                    .filter_map(|(t, ps)| Some((state.topics.get(t)?.name.clone(), ps.iter().copied().collect())))
                    .collect();
                MemberRecord {
                    member_id: id.clone(),
                    instance_id: None,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: session,
                    rebalance_timeout_ms: 0,
                    subscription: encode_subscription(&m.subscribed),
                    assignment: encode_assignment(&by_name),
                    member_epoch: m.epoch,
                    rack_id: m.rack_id.clone(),
                }
            })
            .collect();
        GroupMembership {
            kind: GroupKind::Share,
            protocol_type: "share".into(),
            generation: self.epoch,
            protocol: Some(ASSIGNOR.into()),
            leader: None,
            members,
        }
    }

    /// Forgets what was last handed to Raft (a write of it failed): the next check writes the
    /// whole membership.
    pub(super) fn rewrite_next(&mut self) {
        self.stored = None;
    }

    fn changed_membership(&mut self, state: &State, group_id: &str) -> Option<GroupMembership> {
        let now = self.membership(state, group_id);
        (self.stored.as_ref() != Some(&now)).then(|| {
            self.stored = Some(now.clone());
            now
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(super) fn state_label(&self) -> &'static str {
        self.state_name()
    }

    /// Removes members whose session passed: the membership to store and who left.
    pub(super) fn expire(
        &mut self,
        group_id: &str,
        state: &State,
        now: Instant,
    ) -> Option<(GroupMembership, Vec<String>)> {
        let session = Duration::from_millis(u64::try_from(session_timeout_ms(state, group_id)).unwrap_or(0));
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now.duration_since(m.last_seen) > session)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %group_id, member = %id, "share group member removed (session timeout)");
            self.remove(id);
        }
        if gone.is_empty() { None } else { self.changed_membership(state, group_id).map(|m| (m, gone)) }
    }
}

fn validate(request: &ShareHeartbeat) -> Result<(), GroupError> {
    let invalid = |why: &str| Err(GroupError::InvalidRequest(why.to_owned()));
    if request.group_id.is_empty() || request.group_id.len() > crate::limits::GROUP_ID_BYTES_MAX {
        return Err(GroupError::InvalidGroupId);
    }
    if request.member_epoch == 0 && request.subscribed_topics.is_none() {
        return invalid("a joining member must send its subscribed topic names");
    }
    if request.member_epoch != 0 && request.member_id.is_empty() {
        return invalid("member id is required");
    }
    let topics = request.subscribed_topics.as_deref().unwrap_or_default();
    if topics.len() > SUBSCRIBED_TOPICS_MAX || topics.iter().any(|t| t.len() > crate::limits::TOPIC_NAME_BYTES_MAX) {
        return invalid("too many subscribed topics, or a name over 249 bytes");
    }
    let names = [request.member_id.as_str(), request.client_id.as_str(), request.client_host.as_str()]
        .into_iter()
        .chain(request.rack_id.as_deref());
    if names.into_iter().any(|n| n.len() > GROUP_NAME_BYTES_MAX) {
        return invalid("a member id, client id or rack id over the limit");
    }
    Ok(())
}

fn load<'a>(
    tables: &'a mut Tables,
    state: &State,
    group_id: &str,
    now: Instant,
) -> Result<&'a mut ShareGroup, GroupError> {
    if super::consumer_group::has_members(tables, state, group_id)
        || tables.classic.get(group_id).is_some_and(|g| g.has_members())
    {
        return Err(GroupError::GroupIdNotFound);
    }
    if !tables.share.contains_key(group_id) {
        tables.may_load(group_id)?;
        let group = ShareGroup::from_state(state, group_id, now)?;
        tables.share.insert(group_id.to_owned(), group);
    }
    tables.share.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)
}

/// What a heartbeat changed: the membership to store, and members whose records are released.
pub(super) type HeartbeatEffects = (Option<GroupMembership>, Vec<String>);

/// Handles one ShareGroupHeartbeat under the coordinator's lock.
pub(super) fn heartbeat(
    tables: &mut Tables,
    state: &State,
    request: ShareHeartbeat,
    now: Instant,
) -> Result<(ShareHeartbeatResponse, HeartbeatEffects), GroupError> {
    validate(&request)?;
    let group = load(tables, state, &request.group_id, now)?;
    let interval = i32::try_from(group_setting(state, &request.group_id, HEARTBEAT_INTERVAL_MS)).unwrap_or(5_000);
    if request.member_epoch < 0 {
        if !group.remove(&request.member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        let answer = ShareHeartbeatResponse {
            member_id: request.member_id.clone(),
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: interval,
            assignment: None,
        };
        return Ok((answer, (group.changed_membership(state, &request.group_id), vec![request.member_id])));
    }
    let joining = request.member_epoch == 0;
    let member_id =
        if request.member_id.is_empty() { crate::raft::runtime::random_uuid().to_string() } else { request.member_id };
    if joining {
        let max = usize::try_from(setting(state, MAX_SIZE)).unwrap_or(0).min(GROUP_MEMBERS_MAX);
        if !group.members.contains_key(&member_id) && group.members.len() >= max {
            return Err(GroupError::GroupMaxSizeReached);
        }
        let previous = group.members.remove(&member_id);
        group.members.insert(
            member_id.clone(),
            ShareMember {
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                subscribed: Vec::new(),
                assigned: Partitions::new(),
                epoch: 0,
                previous_epoch: previous.map_or(0, |p| p.epoch),
                last_seen: now,
            },
        );
        group.epoch = group.epoch.saturating_add(1);
    } else {
        let member = group.members.get(&member_id).ok_or(GroupError::UnknownMemberId)?;
        if request.member_epoch != member.epoch && request.member_epoch != member.previous_epoch {
            return Err(GroupError::FencedMemberEpoch);
        }
    }
    let Some(member) = group.members.get_mut(&member_id) else { return Err(GroupError::UnknownMemberId) };
    member.last_seen = now;
    member.client_id = request.client_id;
    member.client_host = request.client_host;
    if request.rack_id.is_some() {
        member.rack_id = request.rack_id;
    }
    let mut moved = false;
    if let Some(mut topics) = request.subscribed_topics {
        topics.sort();
        topics.dedup();
        if topics != member.subscribed {
            member.subscribed = topics;
            moved = true;
        }
    }
    if moved {
        group.epoch = group.epoch.saturating_add(1);
    }
    group.refresh_targets(state);
    let target = group.targets.get(&member_id).cloned().unwrap_or_default();
    let epoch = group.epoch;
    let Some(member) = group.members.get_mut(&member_id) else { return Err(GroupError::UnknownMemberId) };
    // Share groups hand partitions over at once: records are locked one by one, not owned.
    let changed = member.assigned != target || member.epoch == 0;
    if changed {
        member.assigned = target;
        member.previous_epoch = member.epoch;
        member.epoch = epoch;
    }
    let answer = ShareHeartbeatResponse {
        member_id: member_id.clone(),
        member_epoch: member.epoch,
        heartbeat_interval_ms: interval,
        assignment: (changed || request.member_epoch != member.epoch).then(|| {
            member
                .assigned
                .iter()
                .filter(|(_, ps)| !ps.is_empty())
                .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                .collect()
        }),
    };
    Ok((answer, (group.changed_membership(state, &request.group_id), Vec::new())))
}

/// A numeric setting of share group `group_id` ([`State::group_config_i64`]).
fn group_setting(state: &State, group_id: &str, name: &str) -> i64 {
    state.group_config_i64(group_id, name).unwrap_or(0)
}

/// The session timeout of share group `group_id`.
fn session_timeout_ms(state: &State, group_id: &str) -> i64 {
    group_setting(state, group_id, SESSION_TIMEOUT_MS)
}

/// Where share group `group_id` starts a partition it has not read before.
fn offset_reset(state: &State, group_id: &str) -> ShareOffsetReset {
    state
        .group_config(group_id, AUTO_OFFSET_RESET)
        .and_then(config::share_offset_reset)
        .unwrap_or(ShareOffsetReset::Latest)
}

/// The settings an acquisition for share group `group_id` applies now.
fn settings(state: &State, group_id: &str) -> ShareSettings {
    ShareSettings {
        lock_duration_ms: group_setting(state, group_id, LOCK_DURATION_MS).max(1),
        delivery_limit: i16::try_from(group_setting(state, group_id, DELIVERY_LIMIT)).unwrap_or(i16::MAX).max(1),
        max_in_flight: group_setting(state, group_id, MAX_RECORD_LOCKS).clamp(1, SHARE_RECORD_LOCKS_MAX),
        start_at_earliest: offset_reset(state, group_id) == ShareOffsetReset::Earliest,
    }
}

/// Where a share partition not read before starts when the group resets `by_duration:`: at the
/// first stored chunk holding a record written at or after `now_ms - duration` (a few earlier
/// records of that chunk may be delivered too), or at the log end.
fn start_by_duration(state: &State, topic_id: TopicId, partition: i32, duration_ms: i64, now_ms: i64) -> Option<i64> {
    let log = state.partition(topic_id, partition)?;
    let since = now_ms.saturating_sub(duration_ms);
    Some(log.entry_for_timestamp(since).map_or(log.next_offset, |e| e.base_offset.max(log.log_start_offset)))
}

/// The operations one ShareFetch or ShareAcknowledge asks for, after checking its member is in
/// the group. Acknowledgements come first, so records released are acquirable at once.
/// The operations one request becomes, and how to read their results back.
pub(super) struct WorkPlan {
    pub(super) ops: Vec<ShareOp>,
    /// Operations that come first to start share partitions at a time (`by_duration:`).
    started: usize,
    /// For each partition to acquire from: whether it was left out, as it would take nothing.
    idle: Vec<bool>,
}

pub(super) fn work_ops(
    tables: &mut Tables,
    state: &State,
    work: &ShareWork,
    now: Instant,
    now_ms: i64,
) -> Result<WorkPlan, GroupError> {
    let group = load(tables, state, &work.group_id, now)?;
    if !group.members.contains_key(&work.member_id) {
        return Err(GroupError::UnknownMemberId);
    }
    let key = |t: TopicId, p: i32| (work.group_id.clone(), t, p);
    let mut ops = Vec::new();
    if let ShareOffsetReset::ByDuration(duration_ms) = offset_reset(state, &work.group_id)
        && state.applies_format(8)
    {
        for (t, p) in &work.acquire {
            if !state.share_partitions.contains_key(&key(*t, *p))
                && let Some(offset) = start_by_duration(state, *t, *p, duration_ms, now_ms)
            {
                ops.push(ShareOp::StartAt { key: key(*t, *p), offset });
            }
        }
    }
    let started = ops.len();
    for (t, p, ranges) in &work.unsent {
        ops.push(ShareOp::ReturnUnsent { key: key(*t, *p), member: work.member_id.clone(), ranges: ranges.clone() });
    }
    for (t, p, batches) in &work.acknowledgements {
        ops.push(ShareOp::Acknowledge { key: key(*t, *p), member: work.member_id.clone(), batches: batches.clone() });
    }
    if work.release_all {
        ops.push(ShareOp::ReleaseMember { group_id: work.group_id.clone(), member: work.member_id.clone() });
    }
    let settings = settings(state, &work.group_id);
    // A partition this request acknowledges or returns records of may have some to give at once.
    let touched = |t: &TopicId, p: &i32| {
        work.release_all
            || work.acknowledgements.iter().any(|(at, ap, _)| at == t && ap == p)
            || work.unsent.iter().any(|(at, ap, _)| at == t && ap == p)
    };
    let mut idle = Vec::with_capacity(work.acquire.len());
    for (t, p) in &work.acquire {
        let key = key(*t, *p);
        let nothing = !touched(t, p) && state.acquires_nothing(&key, work.read_committed, &settings, now_ms);
        idle.push(nothing);
        if !nothing {
            ops.push(ShareOp::Acquire {
                key,
                member: work.member_id.clone(),
                max_records: work.max_records,
                read_committed: work.read_committed,
                settings,
            });
        }
    }
    Ok(WorkPlan { ops, started, idle })
}

/// Splits the results of [`work_ops`] back into the request's parts.
pub(super) fn work_result(
    work: &ShareWork,
    plan: &WorkPlan,
    results: Vec<Result<Vec<AcquiredRange>, CommandError>>,
) -> ShareWorkResult {
    let mut results = results.into_iter().skip(plan.started + work.unsent.len());
    let error = |e: CommandError| match e {
        CommandError::InvalidRecordState(why) => GroupError::InvalidRecordState(why),
        CommandError::UnknownTopicOrPartition => GroupError::UnknownTopicOrPartition,
        // A tenant or group at its share of share partitions: POLICY_VIOLATION.
        e @ (CommandError::QuotaExceeded(_) | CommandError::LimitReached(_)) => GroupError::Transaction(e),
        other => GroupError::InvalidRequest(other.to_string()),
    };
    let missing = || GroupError::CoordinatorNotAvailable("no result for a share operation".into());
    let acknowledged = (0..work.acknowledgements.len())
        .map(|_| results.next().map_or_else(|| Err(missing()), |r| r.map(|_| ()).map_err(error)))
        .collect();
    if work.release_all {
        results.next();
    }
    let acquired =
        plan.idle
            .iter()
            .map(|&idle| {
                if idle { Ok(Vec::new()) } else { results.next().map_or_else(|| Err(missing()), |r| r.map_err(error)) }
            })
            .collect();
    ShareWorkResult { acknowledged, acquired }
}

type Results = Result<Vec<Result<Vec<AcquiredRange>, CommandError>>, GroupError>;

#[derive(Default)]
struct Pending {
    ops: Vec<ShareOp>,
    /// Each request's operation count, weight and answer.
    waiters: Vec<(usize, usize, oneshot::Sender<Results>)>,
    writing: bool,
}

/// Gathers share operations while a `ShareUpdate` is being written and writes them as the next
/// one, so the number of Raft entries follows the write rate of the log, not the request rate.
#[derive(Default)]
pub struct ShareWriter {
    pending: Mutex<Pending>,
}

impl std::fmt::Debug for ShareWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareWriter").finish_non_exhaustive()
    }
}

impl ShareWriter {
    /// Writes `ops` with whatever else is waiting; their results in order.
    pub(super) async fn write(&self, node: &impl GroupNode, ops: Vec<ShareOp>) -> Results {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let weight: usize = ops.iter().map(ShareOp::weight).sum();
        if ops.len() > SHARE_OPS_MAX || weight > SHARE_UPDATE_WEIGHT_MAX {
            return Err(GroupError::InvalidRequest(format!(
                "a share request of {} operations and weight {weight} is over the limits",
                ops.len()
            )));
        }
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut pending = self.pending.lock_recovered();
            pending.waiters.push((ops.len(), weight, tx));
            pending.ops.extend(ops);
            !std::mem::replace(&mut pending.writing, true)
        };
        if start {
            // A task of its own: the requests that wait on it may be dropped.
            let node = node.clone();
            tokio::spawn(async move { node.groups().share_writer().drain(&node).await });
        }
        rx.await.map_err(|_| GroupError::CoordinatorNotAvailable("the share writer stopped".into()))?
    }

    async fn drain(&self, node: &impl GroupNode) {
        loop {
            let (ops, waiters) = {
                let mut pending = self.pending.lock_recovered();
                if pending.waiters.is_empty() {
                    pending.writing = false;
                    return;
                }
                // Whole requests, as many as fit one entry (at least one).
                let (mut count, mut weight, mut take) = (0, 0, 0);
                for (n, w, _) in &pending.waiters {
                    if take > 0 && (count + n > SHARE_OPS_MAX || weight + w > SHARE_UPDATE_WEIGHT_MAX) {
                        break;
                    }
                    count += n;
                    weight += w;
                    take += 1;
                }
                let waiters: Vec<_> = pending.waiters.drain(..take).collect();
                let ops: Vec<ShareOp> = pending.ops.drain(..count).collect();
                (ops, waiters)
            };
            let command = Command::ShareUpdate { now_ms: node.clock().now_ms(), ops };
            let written = node.propose(command).await;
            let mut results = match written {
                Ok(Outcome::ShareUpdated(results)) => Ok(results.into_iter()),
                Ok(other) => Err(GroupError::CoordinatorNotAvailable(format!("unexpected outcome {other:?}"))),
                Err(e) => Err(GroupError::CoordinatorNotAvailable(e.to_string())),
            };
            for (n, _, tx) in waiters {
                let answer = match &mut results {
                    Ok(all) => Ok(all.by_ref().take(n).collect()),
                    Err(e) => Err(e.clone()),
                };
                let _ = tx.send(answer);
            }
        }
    }
}

/// A share group as ShareGroupDescribe shows it; a group that is not a share group (or none at
/// all) is GROUP_ID_NOT_FOUND, as in Kafka.
pub(super) fn describe(
    tables: &mut Tables,
    state: &State,
    group_id: &str,
    now: Instant,
) -> Result<ShareGroupDescription, GroupError> {
    let is_share = tables.share.contains_key(group_id)
        || state.groups.get(group_id).is_some_and(|g| g.membership.kind == GroupKind::Share);
    if !is_share {
        return Err(GroupError::GroupIdNotFound);
    }
    let group = load(tables, state, group_id, now)?;
    let named = |partitions: &Partitions| -> Vec<(TopicId, String, Vec<i32>)> {
        partitions
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| {
                let name = state.topics.get(t).map(|t| t.name.clone()).unwrap_or_default();
                (*t, name, ps.iter().copied().collect())
            })
            .collect()
    };
    Ok(ShareGroupDescription {
        group_id: group_id.to_owned(),
        state: group.state_name().into(),
        epoch: group.epoch,
        assignment_epoch: group.assignment_epoch.max(0),
        assignor: ASSIGNOR.into(),
        members: group
            .members
            .iter()
            .map(|(id, m)| ShareMemberDescription {
                member_id: id.clone(),
                rack_id: m.rack_id.clone(),
                member_epoch: m.epoch,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topics: m.subscribed.clone(),
                assignment: named(&m.assigned),
            })
            .collect(),
    })
}

/// A share group's partitions with their start offsets and lag: all it has state for, or
/// those asked (start offset -1 where it has none).
pub(super) fn offsets(
    tables: &Tables,
    state: &State,
    group_id: &str,
    asked: Option<Vec<(String, Vec<i32>)>>,
) -> Result<Vec<ShareLag>, GroupError> {
    if super::consumer_group::has_members(tables, state, group_id)
        || tables.classic.get(group_id).is_some_and(|g| g.has_members())
        || state.groups.get(group_id).is_some_and(|g| g.membership.kind != GroupKind::Share && !g.offsets.is_empty())
    {
        return Err(GroupError::GroupIdNotFound);
    }
    let known = state.share_lag(group_id);
    let Some(asked) = asked else { return Ok(known) };
    let mut out = Vec::new();
    for (topic, partitions) in asked {
        let topic_id = state.topic_by_name(&topic).map(|t| t.topic_id);
        for partition in partitions {
            let row = known.iter().find(|l| l.topic == topic && l.partition == partition).cloned();
            out.push(row.unwrap_or_else(|| ShareLag {
                topic: topic.clone(),
                topic_id: topic_id.unwrap_or_default(),
                partition,
                start_offset: -1,
                log_end: topic_id.and_then(|t| state.partition(t, partition)).map_or(-1, |p| p.next_offset),
                lag: 0,
            }));
        }
    }
    Ok(out)
}

/// Checks `group_id` may have its share offsets changed: a share group (or none yet) without
/// members.
pub(super) fn check_alterable(tables: &Tables, state: &State, group_id: &str) -> Result<(), GroupError> {
    if group_id.is_empty() || group_id.len() > crate::limits::GROUP_ID_BYTES_MAX {
        return Err(GroupError::InvalidGroupId);
    }
    if super::consumer_group::has_members(tables, state, group_id)
        || tables.classic.get(group_id).is_some_and(|g| g.has_members())
        || state.groups.get(group_id).is_some_and(|g| g.membership.kind != GroupKind::Share && !g.offsets.is_empty())
    {
        return Err(GroupError::GroupIdNotFound);
    }
    if has_members(tables, state, group_id) {
        return Err(GroupError::NonEmptyGroup);
    }
    Ok(())
}
