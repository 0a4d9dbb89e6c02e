//! KIP-848 consumer groups in the coordinator: membership, epochs and reconciliation driven by
//! ConsumerGroupHeartbeat, stored through Raft as [`GroupKind::Consumer`] groups.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::consumer::{ASSIGNORS, AssignorMember, MemberAssignment, Partitions, assign, is_empty, reconcile};
use super::coordinator::Tables;
use super::{
    ConsumerGroupDescription, ConsumerHeartbeat, ConsumerHeartbeatResponse, ConsumerMemberDescription, GroupError,
    assigned_partitions, encode_assignment, encode_subscription, setting, subscribed_topics,
};
use crate::limits::{GROUP_MEMBERS_MAX, GROUP_NAME_BYTES_MAX};
use crate::state::{GroupKind, GroupMembership, MemberRecord, State, TopicId};

/// A consumer-protocol group's settings: group configs, which fall back to the
/// `group.consumer.*` broker configs when the group sets none.
pub(super) const SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
pub(super) const HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// Capped at [`GROUP_MEMBERS_MAX`] whatever it is set to.
pub(super) const MAX_SIZE: &str = "group.consumer.max.size";
/// Topics one member may subscribe to by name.
const SUBSCRIBED_TOPICS_MAX: usize = 10_000;

pub(super) struct ConsumerMember {
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    subscribed: Vec<String>,
    assignor: Option<String>,
    assignment: MemberAssignment,
    /// The epoch before the last change: a heartbeat whose answer was lost still carries it.
    previous_epoch: i32,
    last_seen: Instant,
    /// When a member told to give partitions up must have confirmed it, or be removed.
    revoke_deadline: Option<Instant>,
}

pub(super) struct ConsumerGroup {
    epoch: i32,
    assignment_epoch: i32,
    assignor: String,
    members: BTreeMap<String, ConsumerMember>,
    targets: BTreeMap<String, Partitions>,
    /// Partition counts of the subscribed topics when the targets were computed.
    subscribed_metadata: BTreeMap<TopicId, i32>,
    /// The membership last handed to Raft, so unchanged heartbeats write nothing.
    stored: Option<GroupMembership>,
}

/// Whether `group_id` is a consumer-protocol group with members (live or stored).
pub(super) fn has_members(tables: &Tables, state: &State, group_id: &str) -> bool {
    match tables.consumer.get(group_id) {
        Some(group) => !group.members.is_empty(),
        None => state
            .groups
            .get(group_id)
            .is_some_and(|g| g.membership.kind == GroupKind::Consumer && !g.membership.members.is_empty()),
    }
}

fn names_to_ids(state: &State, assignment: &[(String, Vec<i32>)]) -> Partitions {
    assignment
        .iter()
        .filter_map(|(name, ps)| Some((state.topic_by_name(name)?.topic_id, ps.iter().copied().collect())))
        .collect()
}

fn with_names(state: &State, partitions: &Partitions) -> Vec<(TopicId, String, Vec<i32>)> {
    partitions
        .iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(id, ps)| {
            let name = state.topics.get(id).map(|t| t.name.clone()).unwrap_or_default();
            (*id, name, ps.iter().copied().collect())
        })
        .collect()
}

fn to_wire(partitions: &Partitions) -> Vec<(TopicId, Vec<i32>)> {
    partitions.iter().filter(|(_, ps)| !ps.is_empty()).map(|(id, ps)| (*id, ps.iter().copied().collect())).collect()
}

impl ConsumerGroup {
    fn empty(epoch: i32) -> Self {
        Self {
            epoch,
            assignment_epoch: epoch,
            assignor: ASSIGNORS[0].to_owned(),
            members: BTreeMap::new(),
            targets: BTreeMap::new(),
            subscribed_metadata: BTreeMap::new(),
            stored: None,
        }
    }

    /// Resumes a stored group under a new leader. The epoch moves on by one so every member
    /// reconciles against a fresh target; what a member was revoking counts as still held.
    fn from_state(state: &State, group_id: &str, now: Instant) -> Result<Self, GroupError> {
        let Some(record) = state.groups.get(group_id) else { return Ok(Self::empty(0)) };
        let m = &record.membership;
        match (m.kind, m.members.is_empty()) {
            (GroupKind::Classic | GroupKind::Share, false) => return Err(GroupError::GroupIdNotFound),
            (GroupKind::Classic | GroupKind::Share, true) => return Ok(Self::empty(m.generation)),
            (GroupKind::Consumer, _) => {}
        }
        let mut group = Self::empty(m.generation);
        group.assignor = m.protocol.clone().unwrap_or_else(|| ASSIGNORS[0].to_owned());
        for r in &m.members {
            let assigned = names_to_ids(state, &assigned_partitions(&r.assignment));
            let member = ConsumerMember {
                instance_id: r.instance_id.clone(),
                rack_id: r.rack_id.clone(),
                client_id: r.client_id.clone(),
                client_host: r.client_host.clone(),
                rebalance_timeout_ms: r.rebalance_timeout_ms,
                subscribed: subscribed_topics(&r.subscription),
                assignor: None,
                assignment: MemberAssignment { epoch: r.member_epoch, assigned, revoking: Partitions::new() },
                previous_epoch: r.member_epoch,
                last_seen: now,
                revoke_deadline: None,
            };
            group.members.insert(r.member_id.clone(), member);
        }
        if !group.members.is_empty() {
            group.epoch = group.epoch.saturating_add(1);
            group.assignment_epoch = -1;
        }
        group.stored = Some(m.clone());
        Ok(group)
    }

    /// KIP-848's group states.
    fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.assignment_epoch < self.epoch {
            "Assigning"
        } else if self.members.iter().any(|(id, m)| {
            m.assignment.epoch != self.assignment_epoch
                || !is_empty(&m.assignment.revoking)
                || self.targets.get(id).is_some_and(|t| *t != m.assignment.assigned)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    fn remove(&mut self, member_id: &str) -> bool {
        let removed = self.members.remove(member_id).is_some();
        if removed {
            self.targets.remove(member_id);
            self.epoch = self.epoch.saturating_add(1);
        }
        removed
    }

    /// Recomputes the targets when the group epoch moved (membership, subscriptions or the
    /// subscribed topics' partition counts changed).
    fn refresh_targets(&mut self, state: &State) {
        let topics_of = |subscribed: &[String]| -> BTreeMap<TopicId, i32> {
            subscribed
                .iter()
                .filter_map(|name| state.topic_by_name(name))
                .map(|t| (t.topic_id, i32::try_from(t.partitions.len()).unwrap_or(i32::MAX)))
                .collect()
        };
        let all: Vec<String> = self.members.values().flat_map(|m| m.subscribed.iter().cloned()).collect();
        let metadata = topics_of(&all);
        if metadata != self.subscribed_metadata {
            self.subscribed_metadata = metadata;
            self.epoch = self.epoch.saturating_add(1);
        }
        if self.assignment_epoch >= self.epoch {
            return;
        }
        // The assignor most members ask for; the default when none asks.
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        let assignor = votes.iter().max_by_key(|(_, n)| **n).map_or(ASSIGNORS[0], |(a, _)| *a).to_owned();
        let subscriptions: Vec<(String, BTreeMap<TopicId, i32>)> =
            self.members.iter().map(|(id, m)| (id.clone(), topics_of(&m.subscribed))).collect();
        let inputs: Vec<AssignorMember<'_>> = subscriptions
            .iter()
            .map(|(id, topics)| AssignorMember {
                member_id: id,
                topics,
                current: &self.members[id].assignment.assigned,
            })
            .collect();
        self.targets = assign(&assignor, &inputs);
        self.assignor = assignor;
        self.assignment_epoch = self.epoch;
    }

    /// Moves `member_id` toward its target; true when its assignment changed.
    fn reconcile_member(&mut self, member_id: &str, owned: Option<&Partitions>, now: Instant) -> bool {
        let target = self.targets.get(member_id).cloned().unwrap_or_default();
        let held: BTreeSet<(TopicId, i32)> = self
            .members
            .iter()
            .filter(|(id, _)| id.as_str() != member_id)
            .flat_map(|(_, m)| {
                let a = &m.assignment;
                a.assigned.iter().chain(&a.revoking).flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
            })
            .collect();
        let epoch = self.assignment_epoch;
        let Some(member) = self.members.get_mut(member_id) else { return false };
        let before = member.assignment.epoch;
        let changed = reconcile(&mut member.assignment, &target, epoch, owned, |t, p| held.contains(&(t, p)));
        if member.assignment.epoch != before {
            member.previous_epoch = before;
        }
        member.revoke_deadline = if is_empty(&member.assignment.revoking) {
            None
        } else {
            Some(
                member
                    .revoke_deadline
                    .unwrap_or(now + Duration::from_millis(member.rebalance_timeout_ms.max(0) as u64)),
            )
        };
        changed
    }

    /// The membership to store, with what each member holds or is still revoking.
    fn membership(&self, state: &State, group_id: &str) -> GroupMembership {
        let session = state.group_config_i64(group_id, SESSION_TIMEOUT_MS).unwrap_or(0);
        let session = i32::try_from(session).unwrap_or(i32::MAX);
        let members = self
            .members
            .iter()
            .map(|(id, m)| {
                let held = m.assignment.assigned.iter().chain(&m.assignment.revoking).fold(
                    Partitions::new(),
                    |mut acc, (t, ps)| {
                        acc.entry(*t).or_default().extend(ps);
                        acc
                    },
                );
                let by_name: Vec<(String, Vec<i32>)> =
                    with_names(state, &held).into_iter().map(|(_, name, ps)| (name, ps)).collect();
                MemberRecord {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: session,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    subscription: encode_subscription(&m.subscribed),
                    assignment: encode_assignment(&by_name),
                    member_epoch: m.assignment.epoch,
                    rack_id: m.rack_id.clone(),
                }
            })
            .collect();
        GroupMembership {
            kind: GroupKind::Consumer,
            protocol_type: "consumer".into(),
            generation: self.epoch,
            protocol: Some(self.assignor.clone()),
            leader: None,
            members,
        }
    }

    /// Forgets what was last handed to Raft (a write of it failed): the next check writes the
    /// whole membership.
    pub(super) fn rewrite_next(&mut self) {
        self.stored = None;
    }

    /// The membership to store if it differs from what was stored last.
    fn changed_membership(&mut self, state: &State, group_id: &str) -> Option<GroupMembership> {
        let now = self.membership(state, group_id);
        (self.stored.as_ref() != Some(&now)).then(|| {
            self.stored = Some(now.clone());
            now
        })
    }

    pub(super) fn describe(&self, group_id: &str, state: &State) -> ConsumerGroupDescription {
        ConsumerGroupDescription {
            group_id: group_id.to_owned(),
            state: self.state_name().into(),
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch.max(0),
            assignor: self.assignor.clone(),
            members: self
                .members
                .iter()
                .map(|(id, m)| ConsumerMemberDescription {
                    member_id: id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.assignment.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topics: m.subscribed.clone(),
                    assignment: with_names(state, &m.assignment.assigned),
                    target_assignment: with_names(state, self.targets.get(id).unwrap_or(&Partitions::new())),
                })
                .collect(),
        }
    }

    /// The group as the classic DescribeGroups shows it.
    pub(super) fn describe_classic(&self, group_id: &str, state: &State) -> super::GroupDescription {
        let membership = self.membership(state, group_id);
        super::GroupDescription {
            group_id: group_id.to_owned(),
            state: self.state_name().into(),
            protocol_type: membership.protocol_type,
            protocol: self.assignor.clone(),
            members: membership
                .members
                .into_iter()
                .map(|r| super::DescribedMember {
                    member_id: r.member_id,
                    instance_id: r.instance_id,
                    client_id: r.client_id,
                    client_host: r.client_host,
                    metadata: r.subscription,
                    assignment: r.assignment,
                })
                .collect(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub(super) fn state_label(&self) -> &'static str {
        self.state_name()
    }

    /// The epoch a member must commit offsets with.
    pub(super) fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.assignment.epoch)
    }

    /// Removes members whose session passed or who did not revoke in time. Returns the
    /// membership to store when anything changed.
    pub(super) fn expire(&mut self, group_id: &str, state: &State, now: Instant) -> Option<GroupMembership> {
        let session = state.group_config_i64(group_id, SESSION_TIMEOUT_MS).unwrap_or(0);
        let session = Duration::from_millis(u64::try_from(session).unwrap_or(0));
        let gone: Vec<String> = self
            .members
            .iter()
            .filter(|(_, m)| now.duration_since(m.last_seen) > session || m.revoke_deadline.is_some_and(|d| now >= d))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &gone {
            tracing::info!(group = %group_id, member = %id, "consumer group member removed (session or revocation timeout)");
            self.remove(id);
        }
        if gone.is_empty() { None } else { self.changed_membership(state, group_id) }
    }
}

fn validate(request: &ConsumerHeartbeat) -> Result<(), GroupError> {
    let invalid = |why: &str| Err(GroupError::InvalidRequest(why.to_owned()));
    if request.group_id.is_empty() || request.group_id.len() > crate::limits::GROUP_ID_BYTES_MAX {
        return Err(GroupError::InvalidGroupId);
    }
    // librdkafka sends an empty regex alongside topic names.
    if request.subscribed_regex.as_deref().is_some_and(|r| !r.is_empty()) {
        return invalid("regular expression subscriptions are not supported; subscribe by topic names");
    }
    if request.member_epoch == 0 {
        if request.subscribed_topics.is_none() {
            return invalid("a joining member must send its subscribed topic names");
        }
        if request.rebalance_timeout_ms <= 0 {
            return invalid("a joining member must send its rebalance timeout");
        }
    }
    if request.member_epoch > 0 && request.member_id.is_empty() {
        return invalid("member id is required");
    }
    if request.server_assignor.as_deref().is_some_and(|a| !ASSIGNORS.contains(&a)) {
        return Err(GroupError::UnsupportedAssignor);
    }
    let topics = request.subscribed_topics.as_deref().unwrap_or_default();
    if topics.len() > SUBSCRIBED_TOPICS_MAX || topics.iter().any(|t| t.len() > crate::limits::TOPIC_NAME_BYTES_MAX) {
        return invalid("too many subscribed topics, or a name over 249 bytes");
    }
    let names = [request.member_id.as_str(), request.client_id.as_str(), request.client_host.as_str()]
        .into_iter()
        .chain(request.instance_id.as_deref())
        .chain(request.rack_id.as_deref());
    if names.into_iter().any(|n| n.len() > GROUP_NAME_BYTES_MAX) {
        return invalid("a member id, client id, instance id or rack id over the limit");
    }
    if request.owned.as_ref().is_some_and(|o| o.iter().map(|(_, ps)| ps.len()).sum::<usize>() > 1_000_000) {
        return invalid("too many owned partitions");
    }
    Ok(())
}

/// Handles one ConsumerGroupHeartbeat under the coordinator's lock; the second value is the
/// membership to store, if it changed.
pub(super) fn heartbeat(
    tables: &mut Tables,
    state: &State,
    request: ConsumerHeartbeat,
    now: Instant,
) -> Result<(ConsumerHeartbeatResponse, Option<GroupMembership>), GroupError> {
    validate(&request)?;
    if tables.classic.get(&request.group_id).is_some_and(|g| g.has_members())
        || super::share_group::has_members(tables, state, &request.group_id)
    {
        return Err(GroupError::GroupIdNotFound);
    }
    if !tables.consumer.contains_key(&request.group_id) {
        tables.may_load(&request.group_id)?;
    }
    let group = match tables.consumer.entry(request.group_id.clone()) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(ConsumerGroup::from_state(state, &request.group_id, now)?)
        }
    };
    tables.classic.remove(&request.group_id);
    let interval = state.group_config_i64(&request.group_id, HEARTBEAT_INTERVAL_MS).unwrap_or(5_000);
    let interval = i32::try_from(interval).unwrap_or(5_000);
    if request.member_epoch < 0 {
        let is_static = group.members.get(&request.member_id).map(|m| m.instance_id.is_some());
        match (request.member_epoch, is_static) {
            (_, None) => return Err(GroupError::UnknownMemberId),
            // A static member leaving for a restart keeps its partitions for its successor (the
            // same instance id) until its session passes.
            (-2, Some(true)) => {}
            _ => {
                group.remove(&request.member_id);
            }
        }
        let answer = ConsumerHeartbeatResponse {
            member_id: request.member_id,
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: interval,
            assignment: None,
        };
        return Ok((answer, group.changed_membership(state, &request.group_id)));
    }
    let owned = request
        .owned
        .as_ref()
        .map(|o| o.iter().map(|(t, ps)| (*t, ps.iter().copied().collect::<BTreeSet<i32>>())).collect::<Partitions>());
    let joining = request.member_epoch == 0;
    let member_id = if joining {
        let member_id = if request.member_id.is_empty() {
            crate::raft::runtime::random_uuid().to_string()
        } else {
            request.member_id.clone()
        };
        // A static member coming back takes over its predecessor and what it holds.
        let predecessor = request.instance_id.as_ref().and_then(|instance| {
            group.members.iter().find(|(id, m)| m.instance_id.as_ref() == Some(instance) && **id != member_id)
        });
        let inherited = predecessor.map(|(id, m)| (id.clone(), m.assignment.clone()));
        if let Some((old, _)) = &inherited {
            group.members.remove(old);
            group.targets.remove(old);
        }
        if group.members.remove(&member_id).is_none()
            && group.members.len() >= usize::try_from(setting(state, MAX_SIZE)).unwrap_or(0).min(GROUP_MEMBERS_MAX)
        {
            return Err(GroupError::GroupMaxSizeReached);
        }
        let assignment = inherited.map(|(_, a)| a).unwrap_or_default();
        group.members.insert(
            member_id.clone(),
            ConsumerMember {
                instance_id: request.instance_id.clone(),
                rack_id: request.rack_id.clone(),
                client_id: request.client_id.clone(),
                client_host: request.client_host.clone(),
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                subscribed: Vec::new(),
                assignor: None,
                previous_epoch: assignment.epoch,
                assignment,
                last_seen: now,
                revoke_deadline: None,
            },
        );
        group.epoch = group.epoch.saturating_add(1);
        member_id
    } else {
        let member = group.members.get(&request.member_id).ok_or(GroupError::UnknownMemberId)?;
        let epoch = member.assignment.epoch;
        let lost_answer = request.member_epoch == member.previous_epoch
            && owned.as_ref().is_some_and(|o| {
                o.iter()
                    .all(|(t, ps)| ps.iter().all(|p| member.assignment.assigned.get(t).is_some_and(|a| a.contains(p))))
            });
        if request.member_epoch != epoch && !lost_answer {
            return Err(GroupError::FencedMemberEpoch);
        }
        request.member_id.clone()
    };
    let Some(member) = group.members.get_mut(&member_id) else { return Err(GroupError::UnknownMemberId) };
    member.last_seen = now;
    member.client_id.clone_from(&request.client_id);
    member.client_host.clone_from(&request.client_host);
    if request.rebalance_timeout_ms > 0 {
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    if request.rack_id.is_some() {
        member.rack_id.clone_from(&request.rack_id);
    }
    let mut moved = false;
    if let Some(mut topics) = request.subscribed_topics.clone() {
        topics.sort();
        topics.dedup();
        if topics != member.subscribed {
            member.subscribed = topics;
            moved = true;
        }
    }
    if request.server_assignor.is_some() && request.server_assignor != member.assignor {
        member.assignor.clone_from(&request.server_assignor);
        moved = true;
    }
    if moved {
        group.epoch = group.epoch.saturating_add(1);
    }
    group.refresh_targets(state);
    let changed = group.reconcile_member(&member_id, owned.as_ref(), now);
    let Some(member) = group.members.get(&member_id) else { return Err(GroupError::UnknownMemberId) };
    let out_of_sync = owned.as_ref().is_some_and(|o| {
        let reported: Partitions = o.iter().filter(|(_, ps)| !ps.is_empty()).map(|(t, ps)| (*t, ps.clone())).collect();
        let assigned: Partitions = member
            .assignment
            .assigned
            .iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| (*t, ps.clone()))
            .collect();
        reported != assigned
    });
    let answer = ConsumerHeartbeatResponse {
        member_id: member_id.clone(),
        member_epoch: member.assignment.epoch,
        heartbeat_interval_ms: interval,
        assignment: (changed || joining || out_of_sync).then(|| to_wire(&member.assignment.assigned)),
    };
    Ok((answer, group.changed_membership(state, &request.group_id)))
}

/// The consumer group `group_id`, live or as stored, if it is one.
pub(super) fn load<'a>(
    tables: &'a mut Tables,
    state: &State,
    group_id: &str,
    now: Instant,
) -> Result<Option<&'a mut ConsumerGroup>, GroupError> {
    if !tables.consumer.contains_key(group_id) {
        let Some(stored) = state.groups.get(group_id) else { return Ok(None) };
        if stored.membership.kind != GroupKind::Consumer {
            return Ok(None);
        }
        tables.may_load(group_id)?;
        let Ok(group) = ConsumerGroup::from_state(state, group_id, now) else { return Ok(None) };
        tables.consumer.insert(group_id.to_owned(), group);
    }
    Ok(tables.consumer.get_mut(group_id))
}
