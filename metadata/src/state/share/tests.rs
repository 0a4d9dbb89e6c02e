//! Share partitions: acquisition, acknowledgement, release, lock expiry and the delivery limit,
//! and a property test that an acknowledged record is never handed out again.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::super::tests::{create, topic_id};
use super::*;
use crate::command::{BatchSummary, ChunkCommit, Command, SegmentCommit};

const GROUP: &str = "workers";

fn settings() -> ShareSettings {
    ShareSettings { lock_duration_ms: 1_000, delivery_limit: 3, max_in_flight: 100, start_at_earliest: true }
}

fn key() -> SharePartitionKey {
    (GROUP.to_owned(), topic_id(0), 0)
}

/// A state with topic 0 of one partition holding `records` records.
fn with_records(records: u32) -> State {
    let mut state = State::default();
    state.apply(1, create("jobs", 0, 1)).expect("create");
    if records > 0 {
        append(&mut state, records);
    }
    state
}

fn append(state: &mut State, records: u32) {
    let commit = Command::CommitSegment(SegmentCommit {
        key: format!("obj-{}", state.applied_index),
        object_bytes: 124,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition: 0,
            byte_start: 0,
            byte_len: 100,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: records, timestamp_max: 1, base_sequence: -1 }],
            producer: None,
            uncompressed_bytes: 100,
        }],
    });
    let index = state.applied_index + 1;
    state.apply(index, commit).expect("commit");
}

fn update(state: &mut State, now_ms: i64, op: ShareOp) -> Result<Vec<AcquiredRange>, CommandError> {
    let index = state.applied_index + 1;
    match state.apply(index, Command::ShareUpdate { now_ms, ops: vec![op] }) {
        Ok(Outcome::ShareUpdated(mut results)) => results.pop().expect("one result"),
        other => panic!("unexpected {other:?}"),
    }
}

fn acquire(state: &mut State, now_ms: i64, member: &str, max_records: i64) -> Vec<(i64, i64, i16)> {
    let op = ShareOp::Acquire {
        key: key(),
        member: member.into(),
        max_records,
        read_committed: false,
        settings: settings(),
    };
    update(state, now_ms, op).expect("acquire").into_iter().map(|r| (r.first, r.last, r.delivery_count)).collect()
}

fn ack(state: &mut State, now_ms: i64, member: &str, batches: &[(i64, i64, ShareAck)]) -> Result<(), CommandError> {
    let batches = batches.iter().map(|&(first, last, ack)| AckBatch { first, last, ack }).collect();
    update(state, now_ms, ShareOp::Acknowledge { key: key(), member: member.into(), batches }).map(|_| ())
}

fn share(state: &State) -> &SharePartition {
    state.share_partitions.get(&key()).expect("share partition")
}

#[test]
fn members_acquire_disjoint_records_and_accepted_ones_move_the_start() {
    let mut state = with_records(10);
    assert_eq!(acquire(&mut state, 0, "a", 4), [(0, 3, 1)]);
    assert_eq!(acquire(&mut state, 0, "b", 4), [(4, 7, 1)]);
    assert_eq!(acquire(&mut state, 0, "c", 4), [(8, 9, 1)]);
    assert_eq!(acquire(&mut state, 0, "c", 4), []);
    ack(&mut state, 1, "a", &[(0, 3, ShareAck::Accept)]).expect("a holds 0..=3");
    assert_eq!((share(&state).start_offset, share(&state).end_offset), (4, 10));
    // An acknowledgement out of order leaves the start where it is.
    ack(&mut state, 1, "c", &[(8, 9, ShareAck::Accept)]).expect("c holds 8..=9");
    assert_eq!(share(&state).start_offset, 4);
    ack(&mut state, 1, "b", &[(4, 7, ShareAck::Accept)]).expect("b holds 4..=7");
    assert_eq!((share(&state).start_offset, share(&state).ranges.len()), (10, 0));
}

#[test]
fn a_partition_starts_at_the_log_end_unless_earliest_is_asked() {
    let mut state = with_records(10);
    let op = ShareOp::Acquire {
        key: key(),
        member: "a".into(),
        max_records: 5,
        read_committed: false,
        settings: ShareSettings { start_at_earliest: false, ..settings() },
    };
    assert_eq!(update(&mut state, 0, op.clone()).expect("acquire"), []);
    append(&mut state, 2);
    let acquired = update(&mut state, 0, op).expect("acquire");
    assert_eq!(acquired, [AcquiredRange { first: 10, last: 11, delivery_count: 1 }]);
}

#[test]
fn released_records_come_back_with_a_higher_count_and_the_limit_archives_them() {
    let mut state = with_records(4);
    assert_eq!(acquire(&mut state, 0, "a", 4), [(0, 3, 1)]);
    ack(&mut state, 1, "a", &[(0, 0, ShareAck::Accept), (1, 1, ShareAck::Release), (2, 3, ShareAck::Reject)])
        .expect("held");
    assert_eq!(share(&state).start_offset, 1);
    assert_eq!(acquire(&mut state, 2, "b", 10), [(1, 1, 2)]);
    ack(&mut state, 3, "b", &[(1, 1, ShareAck::Release)]).expect("held");
    assert_eq!(acquire(&mut state, 4, "a", 10), [(1, 1, 3)]);
    // The third delivery was the last: released now, it is archived, never delivered again.
    ack(&mut state, 5, "a", &[(1, 1, ShareAck::Release)]).expect("held");
    assert_eq!(acquire(&mut state, 6, "a", 10), []);
    assert_eq!((share(&state).start_offset, share(&state).end_offset), (4, 4));
}

#[test]
fn expired_locks_free_records_and_late_acknowledgements_are_refused() {
    let mut state = with_records(3);
    assert_eq!(acquire(&mut state, 0, "a", 3), [(0, 2, 1)]);
    assert!(state.share_locks_due(1_000));
    assert!(!state.share_locks_due(999));
    update(&mut state, 1_000, ShareOp::ExpireLocks).expect("expire");
    assert!(matches!(
        ack(&mut state, 1_001, "a", &[(0, 2, ShareAck::Accept)]),
        Err(CommandError::InvalidRecordState(_))
    ));
    assert_eq!(acquire(&mut state, 1_002, "b", 3), [(0, 2, 2)]);
    // A lock past its deadline is refused even before the leader expires it.
    assert!(ack(&mut state, 2_002, "b", &[(0, 0, ShareAck::Accept)]).is_err());
}

#[test]
fn acknowledgements_are_all_or_nothing_and_only_by_the_holder() {
    let mut state = with_records(6);
    acquire(&mut state, 0, "a", 3);
    acquire(&mut state, 0, "b", 3);
    let before = state.share_partitions.clone();
    assert!(ack(&mut state, 1, "a", &[(0, 2, ShareAck::Accept), (3, 3, ShareAck::Accept)]).is_err());
    assert!(ack(&mut state, 1, "a", &[(0, 1, ShareAck::Accept), (1, 2, ShareAck::Accept)]).is_err());
    assert!(ack(&mut state, 1, "a", &[(5, 9, ShareAck::Accept)]).is_err());
    assert_eq!(state.share_partitions, before);
}

#[test]
fn a_member_leaving_releases_its_records_and_unsent_ones_keep_their_count() {
    let mut state = with_records(6);
    acquire(&mut state, 0, "a", 3);
    update(&mut state, 1, ShareOp::ReturnUnsent { key: key(), member: "a".into(), ranges: vec![(2, 2)] })
        .expect("return");
    assert_eq!(acquire(&mut state, 1, "b", 1), [(2, 2, 1)]);
    update(&mut state, 1, ShareOp::ReleaseMember { group_id: GROUP.into(), member: "a".into() }).expect("release");
    assert_eq!(acquire(&mut state, 2, "b", 10), [(0, 1, 2), (3, 5, 1)]);
}

#[test]
fn in_flight_records_are_bounded_and_the_start_follows_retention() {
    let mut state = with_records(500);
    assert_eq!(acquire(&mut state, 0, "a", 1_000), [(0, 99, 1)]);
    let index = state.applied_index + 1;
    state.apply(index, Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 50 }).expect("delete");
    assert_eq!(acquire(&mut state, 1, "b", 1_000), [(100, 149, 1)]);
    assert_eq!(share(&state).start_offset, 50);
    let index = state.applied_index + 1;
    state.apply(index, Command::DeleteTopic { name: "jobs".into() }).expect("delete topic");
    assert!(state.share_partitions.is_empty());
}

#[derive(Clone, Debug)]
enum Step {
    Produce(u32),
    Acquire(u8, i64),
    Ack(u8, i64, i64, u8),
    Unsent(u8, i64, i64),
    Leave(u8),
    Tick(i64),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u32..20).prop_map(Step::Produce),
        (0u8..3, 1i64..15).prop_map(|(m, n)| Step::Acquire(m, n)),
        (0u8..3, 0i64..80, 0i64..6, 0u8..4).prop_map(|(m, f, len, t)| Step::Ack(m, f, len, t)),
        (0u8..3, 0i64..80, 0i64..4).prop_map(|(m, f, len)| Step::Unsent(m, f, len)),
        (0u8..3).prop_map(Step::Leave),
        (1i64..700).prop_map(Step::Tick),
    ]
}

proptest! {
    /// Whatever members do: an acknowledged or archived record is never acquired again, a
    /// record is held by one member at a time, no delivery passes the limit, and the start
    /// offset never moves back.
    #[test]
    fn acknowledged_records_are_never_delivered_again(steps in prop::collection::vec(arb_step(), 1..120)) {
        let mut state = with_records(0);
        let mut now = 0i64;
        let mut done: BTreeSet<i64> = BTreeSet::new();
        // Offset -> (member, lock deadline) for what is held now, as the test believes.
        let mut held: BTreeMap<i64, (String, i64)> = BTreeMap::new();
        let mut start = 0i64;
        for step in steps {
            match step {
                Step::Produce(n) => append(&mut state, n),
                Step::Acquire(m, n) => {
                    let member = format!("m{m}");
                    let idle = state.acquires_nothing(&key(), false, &settings(), now);
                    let before = state.share_partitions.clone();
                    let acquired = acquire(&mut state, now, &member, n);
                    if idle {
                        prop_assert!(acquired.is_empty(), "an acquisition judged idle took {:?}", acquired);
                        prop_assert_eq!(&before, &state.share_partitions, "an acquisition judged idle changed the state");
                    }
                    for (first, last, count) in acquired {
                        prop_assert!((1..=settings().delivery_limit).contains(&count));
                        for offset in first..=last {
                            prop_assert!(!done.contains(&offset), "offset {offset} delivered after it was done");
                            if let Some((holder, until)) = held.get(&offset) {
                                prop_assert!(*until <= now, "offset {offset} still held by {holder}");
                            }
                            held.insert(offset, (member.clone(), now + settings().lock_duration_ms));
                        }
                    }
                }
                Step::Ack(m, first, len, t) => {
                    let member = format!("m{m}");
                    let ack_type = [ShareAck::Gap, ShareAck::Accept, ShareAck::Release, ShareAck::Reject][usize::from(t)];
                    let accepted = ack(&mut state, now, &member, &[(first, first + len, ack_type)]).is_ok();
                    let holds = (first..=first + len)
                        .all(|o| held.get(&o).is_some_and(|(h, until)| *h == member && *until > now));
                    prop_assert_eq!(accepted, holds, "acknowledgement of {}..={} by {}", first, first + len, member);
                    if accepted {
                        for offset in first..=first + len {
                            held.remove(&offset);
                            if ack_type != ShareAck::Release {
                                done.insert(offset);
                            }
                        }
                    }
                }
                Step::Unsent(m, first, len) => {
                    let member = format!("m{m}");
                    let op = ShareOp::ReturnUnsent { key: key(), member: member.clone(), ranges: vec![(first, first + len)] };
                    update(&mut state, now, op).expect("return");
                    held.retain(|o, (h, _)| !(*h == member && (first..=first + len).contains(o)));
                }
                Step::Leave(m) => {
                    let member = format!("m{m}");
                    update(&mut state, now, ShareOp::ReleaseMember { group_id: GROUP.into(), member: member.clone() })
                        .expect("release");
                    held.retain(|_, (h, _)| *h != member);
                }
                Step::Tick(ms) => {
                    now += ms;
                    if state.share_locks_due(now) {
                        update(&mut state, now, ShareOp::ExpireLocks).expect("expire");
                    }
                }
            }
            if let Some(share) = state.share_partitions.get(&key()) {
                prop_assert!(share.start_offset >= start);
                start = share.start_offset;
                prop_assert!(share.end_offset - share.start_offset <= settings().max_in_flight);
            }
        }
    }
}

#[test]
fn an_altered_start_drops_what_was_in_flight_and_lag_counts_what_is_left() {
    let mut state = with_records(10);
    acquire(&mut state, 0, "a", 4);
    ack(&mut state, 1, "a", &[(2, 3, ShareAck::Accept)]).expect("held");
    let lag = state.share_lag(GROUP);
    assert_eq!((lag[0].start_offset, lag[0].log_end, lag[0].lag), (0, 10, 8));
    update(&mut state, 2, ShareOp::ReleaseMember { group_id: GROUP.into(), member: "a".into() }).expect("release");
    let set = |offset| ShareOp::SetStartOffset { key: key(), offset };
    assert!(matches!(update(&mut state, 2, set(11)), Err(CommandError::OffsetOutOfRange { .. })));
    update(&mut state, 2, set(7)).expect("within the log");
    assert_eq!((share(&state).start_offset, share(&state).end_offset, share(&state).ranges.len()), (7, 7, 0));
    assert_eq!(acquire(&mut state, 3, "b", 10), [(7, 9, 1)]);
    ack(&mut state, 4, "b", &[(7, 9, ShareAck::Accept)]).expect("held");
    update(&mut state, 4, ShareOp::DeleteTopicState { group_id: GROUP.into(), topic_id: topic_id(0) }).expect("delete");
    assert!(state.share_lag(GROUP).is_empty());
}

#[test]
fn offsets_change_only_while_no_record_is_locked_and_entries_stay_bounded() {
    let mut state = with_records(10);
    acquire(&mut state, 0, "a", 2);
    let set = ShareOp::SetStartOffset { key: key(), offset: 5 };
    assert!(matches!(update(&mut state, 1, set.clone()), Err(CommandError::GroupNotEmpty)));
    let delete = ShareOp::DeleteTopicState { group_id: GROUP.into(), topic_id: topic_id(0) };
    assert!(matches!(update(&mut state, 1, delete), Err(CommandError::GroupNotEmpty)));
    update(&mut state, 1, ShareOp::ReleaseMember { group_id: GROUP.into(), member: "a".into() }).expect("release");
    update(&mut state, 1, set).expect("no lock left");
    // One entry carries at most SHARE_UPDATE_WEIGHT_MAX batches, whatever its requests held.
    let batches = vec![AckBatch { first: 5, last: 5, ack: ShareAck::Accept }; SHARE_UPDATE_WEIGHT_MAX];
    let op = ShareOp::Acknowledge { key: key(), member: "a".into(), batches };
    let index = state.applied_index + 1;
    assert!(matches!(
        state.apply(index, Command::ShareUpdate { now_ms: 2, ops: vec![op] }),
        Err(CommandError::LimitReached(_))
    ));
}

#[test]
fn one_share_group_holds_a_bounded_number_of_partitions() {
    let mut state = State::default();
    let per_topic = 5_001;
    state.apply(1, create("a", 0, per_topic)).expect("create");
    state.apply(2, create("b", 1, per_topic)).expect("create");
    let op = |group: &str, topic: u8, partition: i32| ShareOp::Acquire {
        key: (group.to_owned(), topic_id(topic), partition),
        member: "m".into(),
        max_records: 1,
        read_committed: false,
        settings: settings(),
    };
    let mut refused = 0;
    for t in 0..2u8 {
        let ops: Vec<ShareOp> = (0..per_topic).map(|p| op(GROUP, t, p)).collect();
        let index = state.applied_index + 1;
        let Ok(Outcome::ShareUpdated(results)) = state.apply(index, Command::ShareUpdate { now_ms: 0, ops }) else {
            panic!("applied")
        };
        refused += results.iter().filter(|r| matches!(r, Err(CommandError::LimitReached(_)))).count();
    }
    assert_eq!(refused, 2 * usize::try_from(per_topic).expect("small") - GROUP_SHARE_PARTITIONS_MAX);
    // Another group is not held back by this one.
    let index = state.applied_index + 1;
    let Ok(Outcome::ShareUpdated(results)) =
        state.apply(index, Command::ShareUpdate { now_ms: 0, ops: vec![op("other", 0, 0)] })
    else {
        panic!("applied")
    };
    assert!(results[0].is_ok());
}

/// A tenant's share groups together hold at most its share of the cluster's share partitions
/// (a tenth, 10,000): the next one is refused, another tenant's and a tenant-less group's are
/// not. (Before, ten share groups of one tenant could fill the cluster's 100,000.)
#[test]
fn a_tenants_share_groups_stay_within_its_share_of_share_partitions() {
    let mut state = State::default();
    let apply = |state: &mut State, command| {
        let index = state.applied_index + 1;
        state.apply(index, command)
    };
    apply(&mut state, Command::SetFormat { format: 8 }).expect("format 8");
    for tenant in ["acme", "globex"] {
        apply(&mut state, Command::CreateTenant { name: tenant.into(), now_ms: 0 }).expect("tenant");
    }
    let topic = |name: &str, id: u8| Command::CreateTopic {
        name: name.into(),
        topic_id: topic_id(id),
        partition_count: 5_000,
        configs: BTreeMap::new(),
    };
    for (name, id) in [("acme#1~a", 1), ("acme#1~b", 2), ("globex#2~c", 3), ("plain", 4)] {
        apply(&mut state, topic(name, id)).expect("topic");
    }
    let acquire_all = |group: &str, topic: u8, partitions: std::ops::Range<i32>| Command::ShareUpdate {
        now_ms: 0,
        ops: partitions
            .map(|p| ShareOp::Acquire {
                key: (group.to_owned(), topic_id(topic), p),
                member: "m".into(),
                max_records: 1,
                read_committed: false,
                settings: settings(),
            })
            .collect(),
    };
    let results = |outcome: Result<Outcome, CommandError>| match outcome {
        Ok(Outcome::ShareUpdated(results)) => results,
        other => panic!("unexpected {other:?}"),
    };
    for (group, topic) in [("acme#1~g1", 1), ("acme#1~g2", 2)] {
        let done = results(apply(&mut state, acquire_all(group, topic, 0..5_000)));
        assert!(done.iter().all(Result::is_ok), "10,000 in two groups fit");
    }
    let over = results(apply(&mut state, acquire_all("acme#1~g3", 1, 0..2)));
    assert!(over.iter().all(|r| matches!(r, Err(CommandError::QuotaExceeded(_)))), "{over:?}");
    let again = results(apply(&mut state, acquire_all("acme#1~g1", 1, 0..1)));
    assert!(again[0].is_ok(), "a share partition it holds is not a new one");
    let others = results(apply(&mut state, acquire_all("globex#2~g1", 3, 0..10)));
    assert!(others.iter().all(Result::is_ok), "another tenant's share is its own");
    let plain = results(apply(&mut state, acquire_all("g1", 4, 0..10)));
    assert!(plain.iter().all(Result::is_ok), "a group outside tenants has no tenant share");
}
