//! KIP-848 consumer groups (`group.protocol=consumer`): the coordinator assigns partitions
//! itself and hands them out member by member, so no partition is ever owned by two members.
//!
//! This file holds the pure parts: the server-side assignors (`uniform`, `range`) and the
//! reconciliation step that moves one member from its current assignment toward its target
//! (revoke first, then take only partitions nobody else still owns). The coordinator drives
//! them from heartbeats.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::state::TopicId;

/// Partitions by topic id, as the consumer protocol names them.
pub(super) type Partitions = BTreeMap<TopicId, BTreeSet<i32>>;

/// The assignors this coordinator runs; the first is the default.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// What an assignor needs to know of one member.
pub(super) struct AssignorMember<'a> {
    pub(super) member_id: &'a str,
    /// Subscribed topics that exist, with their partition counts.
    pub topics: &'a BTreeMap<TopicId, i32>,
    /// What the member holds now (the sticky `uniform` assignor keeps it where it can).
    pub current: &'a Partitions,
}

/// Computes every member's target assignment. Each topic is split among the members that
/// subscribe to it; every partition of a subscribed topic goes to exactly one of them.
pub(super) fn assign(assignor: &str, members: &[AssignorMember<'_>]) -> BTreeMap<String, Partitions> {
    let mut targets: BTreeMap<String, Partitions> =
        members.iter().map(|m| (m.member_id.to_owned(), Partitions::new())).collect();
    let topics: BTreeMap<TopicId, i32> = members.iter().flat_map(|m| m.topics.iter().map(|(t, n)| (*t, *n))).collect();
    // Members with fewer partitions overall pick first, so heterogeneous subscriptions stay even.
    let mut load: BTreeMap<&str, usize> = members.iter().map(|m| (m.member_id, 0)).collect();
    for (topic, count) in topics {
        let mut subscribers: Vec<&AssignorMember<'_>> =
            members.iter().filter(|m| m.topics.contains_key(&topic)).collect();
        subscribers.sort_by_key(|m| m.member_id);
        if subscribers.is_empty() {
            continue;
        }
        let partitions: Vec<i32> = (0..count.max(0)).collect();
        let owners = if assignor == "range" {
            range_split(&partitions, &subscribers)
        } else {
            sticky_split(topic, &partitions, &subscribers, &load)
        };
        for (partition, owner) in partitions.iter().zip(owners) {
            targets.entry(owner.to_owned()).or_default().entry(topic).or_default().insert(*partition);
            *load.entry(owner).or_default() += 1;
        }
    }
    targets
}

/// Contiguous ranges in member id order, the first members taking one extra.
fn range_split<'a>(partitions: &[i32], members: &[&AssignorMember<'a>]) -> Vec<&'a str> {
    let (base, extra) = (partitions.len() / members.len(), partitions.len() % members.len());
    members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| std::iter::repeat_n(m.member_id, base + usize::from(i < extra)))
        .collect()
}

/// Even counts (differing by at most one), keeping each partition with its current owner when
/// that owner still has room; the rest go to the least loaded members.
fn sticky_split<'a>(
    topic: TopicId,
    partitions: &[i32],
    members: &[&AssignorMember<'a>],
    load: &BTreeMap<&str, usize>,
) -> Vec<&'a str> {
    let (base, extra) = (partitions.len() / members.len(), partitions.len() % members.len());
    // Which members may take base + 1: those carrying the least elsewhere.
    let mut by_load: Vec<&&AssignorMember<'a>> = members.iter().collect();
    by_load.sort_by_key(|m| (load.get(m.member_id).copied().unwrap_or(0), m.member_id));
    let quota: BTreeMap<&str, usize> =
        by_load.iter().enumerate().map(|(i, m)| (m.member_id, base + usize::from(i < extra))).collect();
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    let mut owners: Vec<Option<&'a str>> = vec![None; partitions.len()];
    for (slot, partition) in partitions.iter().enumerate() {
        let holder = members.iter().find(|m| m.current.get(&topic).is_some_and(|ps| ps.contains(partition)));
        if let Some(m) = holder
            && taken.get(m.member_id).copied().unwrap_or(0) < quota[m.member_id]
        {
            *taken.entry(m.member_id).or_default() += 1;
            owners[slot] = Some(m.member_id);
        }
    }
    for owner in owners.iter_mut().filter(|o| o.is_none()) {
        let next = by_load
            .iter()
            .find(|m| taken.get(m.member_id).copied().unwrap_or(0) < quota[m.member_id])
            .map(|m| m.member_id);
        if let Some(id) = next {
            *taken.entry(id).or_default() += 1;
            *owner = Some(id);
        }
    }
    owners.into_iter().map(|o| o.unwrap_or(members[0].member_id)).collect()
}

/// A member's reconciliation state, as ConsumerGroupDescribe and the coordinator see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct MemberAssignment {
    pub epoch: i32,
    /// Partitions the member may consume now.
    pub assigned: Partitions,
    /// Partitions the member was told to give up and has not yet confirmed.
    pub revoking: Partitions,
}

fn minus(a: &Partitions, b: &Partitions) -> Partitions {
    let mut out = Partitions::new();
    for (topic, ps) in a {
        let rest: BTreeSet<i32> = ps.iter().filter(|p| !b.get(topic).is_some_and(|q| q.contains(p))).copied().collect();
        if !rest.is_empty() {
            out.insert(*topic, rest);
        }
    }
    out
}

fn union(a: &Partitions, b: &Partitions) -> Partitions {
    let mut out = a.clone();
    for (topic, ps) in b {
        out.entry(*topic).or_default().extend(ps);
    }
    out
}

pub(super) fn is_empty(p: &Partitions) -> bool {
    p.values().all(BTreeSet::is_empty)
}

/// Moves `member` one step toward `target` (computed at `target_epoch`). `owned` is what the
/// member reports holding, when it reports; `held_by_others` tells whether another member still
/// holds a partition. Returns whether the member's assignment changed.
///
/// A member first gives up what it must lose (its epoch stays until it confirms), then gets
/// the new epoch and whatever of its target is free; partitions still held elsewhere follow on
/// later heartbeats, once their previous owner released them.
pub(super) fn reconcile(
    member: &mut MemberAssignment,
    target: &Partitions,
    target_epoch: i32,
    owned: Option<&Partitions>,
    held_by_others: impl Fn(TopicId, i32) -> bool,
) -> bool {
    if !is_empty(&member.revoking) {
        let released = owned.is_some_and(|owned| is_empty(&minus(owned, &member.assigned)));
        if !released {
            return false;
        }
        member.revoking.clear();
    }
    if member.epoch == target_epoch && member.assigned == *target {
        return false;
    }
    let revoke = minus(&member.assigned, target);
    if !is_empty(&revoke) {
        member.assigned = minus(&member.assigned, &revoke);
        member.revoking = revoke;
        return true;
    }
    let wanted = minus(target, &member.assigned);
    let mut free = Partitions::new();
    for (topic, ps) in &wanted {
        let ok: BTreeSet<i32> = ps.iter().filter(|p| !held_by_others(*topic, **p)).copied().collect();
        if !ok.is_empty() {
            free.insert(*topic, ok);
        }
    }
    let before = (member.epoch, member.assigned.clone());
    member.assigned = union(&member.assigned, &free);
    member.epoch = target_epoch;
    before != (member.epoch, member.assigned.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u8) -> TopicId {
        uuid::Uuid::from_bytes([n; 16])
    }

    fn parts(list: &[(u8, &[i32])]) -> Partitions {
        list.iter().map(|(t, ps)| (topic(*t), ps.iter().copied().collect())).collect()
    }

    #[test]
    fn uniform_is_even_and_keeps_current_owners() {
        let topics: BTreeMap<TopicId, i32> = [(topic(1), 6)].into_iter().collect();
        let a_now = parts(&[(1, &[0, 1, 2])]);
        let b_now = parts(&[(1, &[3, 4, 5])]);
        let none = Partitions::new();
        let members = [
            AssignorMember { member_id: "a", topics: &topics, current: &a_now },
            AssignorMember { member_id: "b", topics: &topics, current: &b_now },
            AssignorMember { member_id: "c", topics: &topics, current: &none },
        ];
        let t = assign("uniform", &members);
        let counts: Vec<usize> = t.values().map(|p| p.values().map(BTreeSet::len).sum()).collect();
        assert_eq!(counts, [2, 2, 2]);
        assert!(is_empty(&minus(&t["a"], &a_now)) && is_empty(&minus(&t["b"], &b_now)), "a and b keep only their own");
        let all: BTreeSet<i32> = t.values().flat_map(|p| p[&topic(1)].iter().copied()).collect();
        assert_eq!(all.len(), 6, "every partition has exactly one owner");
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let topics: BTreeMap<TopicId, i32> = [(topic(1), 5)].into_iter().collect();
        let none = Partitions::new();
        let members = [
            AssignorMember { member_id: "b", topics: &topics, current: &none },
            AssignorMember { member_id: "a", topics: &topics, current: &none },
        ];
        let t = assign("range", &members);
        assert_eq!(t["a"], parts(&[(1, &[0, 1, 2])]));
        assert_eq!(t["b"], parts(&[(1, &[3, 4])]));
    }

    #[test]
    fn reconciliation_revokes_before_it_assigns_and_waits_for_release() {
        let mut a = MemberAssignment { epoch: 1, assigned: parts(&[(1, &[0, 1, 2, 3])]), revoking: Partitions::new() };
        let target = parts(&[(1, &[0, 1])]);
        assert!(reconcile(&mut a, &target, 2, None, |_, _| false));
        assert_eq!((a.epoch, &a.assigned, &a.revoking), (1, &target, &parts(&[(1, &[2, 3])])));
        // Still holding 2 and 3: nothing moves.
        assert!(!reconcile(&mut a, &target, 2, Some(&parts(&[(1, &[0, 1, 2, 3])])), |_, _| false));
        assert!(reconcile(&mut a, &target, 2, Some(&parts(&[(1, &[0, 1])])), |_, _| false));
        assert_eq!((a.epoch, is_empty(&a.revoking)), (2, true));

        // A newcomer gets only what nobody else holds, and the rest later.
        let mut c = MemberAssignment::default();
        let wanted = parts(&[(1, &[2, 3])]);
        assert!(reconcile(&mut c, &wanted, 2, Some(&Partitions::new()), |_, p| p == 3));
        assert_eq!((c.epoch, &c.assigned), (2, &parts(&[(1, &[2])])));
        assert!(reconcile(&mut c, &wanted, 2, None, |_, _| false));
        assert_eq!(c.assigned, wanted);
    }
}
