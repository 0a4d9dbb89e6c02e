//! State machine tests: command sequences from proptest, invariants checked after every apply.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::command::{BatchSummary, ChunkCommit, SegmentCommit};
use crate::state::{CommitStamp, GroupMembership, MemberRecord, OffsetCommit};

pub(super) fn topic_id(n: u8) -> TopicId {
    uuid::Uuid::from_bytes([n + 1; 16])
}

pub(super) fn create(name: &str, id: u8, partition_count: i32) -> Command {
    Command::CreateTopic { name: name.to_owned(), topic_id: topic_id(id), partition_count, configs: BTreeMap::new() }
}

fn commit(key: &str, chunks: &[(u8, i32, &[u32])]) -> Command {
    let mut byte_start = 0;
    let chunks = chunks
        .iter()
        .map(|(topic, partition, batches)| {
            let chunk = ChunkCommit {
                topic_id: topic_id(*topic),
                partition: *partition,
                byte_start,
                byte_len: 100,
                crc32c: 7,
                batches: batches
                    .iter()
                    .enumerate()
                    .map(|(i, n)| BatchSummary { offset_count: *n, timestamp_max: 1000 + i as i64, base_sequence: -1 })
                    .collect(),
                producer: None,
                uncompressed_bytes: 300,
            };
            byte_start += 100;
            chunk
        })
        .collect();
    Command::CommitSegment(SegmentCommit { key: key.to_owned(), object_bytes: byte_start + 24, chunks })
}

/// A copy of the state shares its partitions until one is written: the written one is copied,
/// the copy keeps what it had, and the partitions nobody wrote stay shared.
#[test]
fn a_copy_keeps_its_partitions_while_the_state_writes_its_own() {
    let (mut state, _) = run(vec![Command::InitCluster { cluster_id: "c".into() }, create("t", 0, 3)]);
    let copy = state.clone();
    state.apply(3, commit("k", &[(0, 1, &[5])])).expect("commits");
    let (now, then) = (&state.topics[&topic_id(0)].partitions, &copy.topics[&topic_id(0)].partitions);
    assert_eq!((now[1].next_offset, then[1].next_offset), (5, 0), "the written partition was copied first");
    assert!(!std::sync::Arc::ptr_eq(&now[1], &then[1]));
    assert!(std::sync::Arc::ptr_eq(&now[0], &then[0]) && std::sync::Arc::ptr_eq(&now[2], &then[2]), "the rest shared");
}

/// Applies commands from a fresh state, checking invariants after each; returns the outcomes.
pub(super) fn run(commands: Vec<Command>) -> (State, Vec<Result<Outcome, CommandError>>) {
    let mut state = State::default();
    let outcomes = commands
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let outcome = state.apply(i as u64 + 1, c);
            check_invariants(&state);
            outcome
        })
        .collect();
    (state, outcomes)
}

pub(crate) fn check_invariants(state: &State) {
    super::registry::tests::check_registry_invariants(state);
    for (id, profile) in &state.agent_profiles {
        assert!(state.agents.contains_key(id), "agent {id}'s profile outlives it");
        assert_ne!(*profile, crate::state::AgentProfile::default(), "agent {id}'s default profile is stored");
    }
    for (id, producer) in &state.producers {
        // (Sequences of a deleted topic may outlive it.)
        for topic in producer.partitions.keys().filter_map(|(topic_id, _)| state.topics.get(topic_id)) {
            let topic_tenant = crate::namespace::key_of(&topic.name);
            assert_eq!(producer.tenant.as_deref(), topic_tenant, "producer {id} wrote to another tenant's topic");
        }
    }
    for (name, tenant) in &state.tenants {
        let key = crate::namespace::namespace_key(name, tenant.id);
        let bound = state.producers.values().filter(|p| p.tenant.as_deref() == Some(key.as_str())).count();
        assert_eq!(tenant.producer_ids, bound as u64, "tenant {name:?} counts its producer ids");
        assert!(tenant.id <= state.last_tenant_id, "tenant ids come from last_tenant_id");
    }
    assert!(state.api_key_quotas.keys().all(|k| state.api_keys.contains_key(k)), "quotas only of keys");
    for (tenant, bindings) in &state.acls {
        assert!(tenant.is_empty() || state.tenants.contains_key(tenant), "ACLs of unknown tenant {tenant:?}");
        assert!(!bindings.is_empty(), "a tenant without ACLs has no entry");
        assert!(bindings.iter().all(|b| b.invalid().is_none()), "only valid bindings are kept");
    }
    assert_eq!(state.topics.len(), state.topic_ids.len());
    let mut references: BTreeMap<ObjectId, u64> = BTreeMap::new();
    for (id, topic) in &state.topics {
        assert_eq!(state.topic_ids.get(&topic.name), Some(id));
        for p in &topic.partitions {
            assert!(0 <= p.log_start_offset && p.log_start_offset <= p.next_offset);
            let mut expected_base = None;
            let mut index_bytes = 0;
            for e in &p.index {
                assert!(e.base_offset <= e.last_offset, "entries hold at least one offset");
                if let Some(b) = expected_base {
                    assert_eq!(e.base_offset, b, "index entries are contiguous, never overlapping");
                }
                expected_base = Some(e.last_offset + 1);
                assert!(e.last_offset >= p.log_start_offset, "entries wholly below the log start are dropped");
                if let Some(object_id) = e.object_id() {
                    *references.entry(object_id).or_default() += 1;
                    index_bytes += e.stored_bytes();
                } else if let EntryData::Marker(_) = e.data {
                    assert_eq!(e.base_offset, e.last_offset, "a marker takes one offset");
                }
            }
            if let Some(end) = expected_base {
                assert_eq!(end, p.next_offset, "the last entry ends at the log end offset");
            }
            assert_eq!(index_bytes, p.index_bytes, "the partition's size is its chunks' bytes");
            for (producer_id, first) in &p.open_transactions {
                assert!(*first < p.next_offset, "an open transaction starts at a written offset");
                // A mirror topic's transactions are the source's: ended by its markers, or aborted
                // when the link is promoted.
                let ongoing = state.mirror_topics.contains_key(id)
                    || state.transactions.values().any(|t| {
                        t.producer_id == *producer_id
                            && t.state == TxnState::Ongoing
                            && t.partitions.iter().any(|(t, _)| t == id)
                    });
                assert!(ongoing, "partition holds an open transaction of producer {producer_id} that is not ongoing");
            }
            assert!(p.last_stable_offset() <= p.next_offset);
            let mut last_marker = i64::MIN;
            for a in &p.aborted_transactions {
                assert!(a.first_offset < a.last_offset, "an aborted transaction holds data before its marker");
                assert!(a.last_offset > last_marker, "aborted transactions are kept in marker order");
                last_marker = a.last_offset;
            }
        }
    }
    for (topic_id, link) in &state.mirror_topics {
        assert!(state.topics.contains_key(topic_id), "a mirror topic outlived its topic");
        assert!(
            state.links.get(link).is_some_and(|l| l.state == LinkState::Mirroring),
            "mirror topic of a missing or promoted link"
        );
    }
    for (id, count) in &references {
        assert_eq!(
            state.objects.get(id).map(|o| o.reference_count),
            Some(*count),
            "every indexed object is referenced"
        );
    }
    for (id, o) in &state.objects {
        assert_eq!(o.reference_count, references.get(id).copied().unwrap_or(0));
    }
    assert!(state.recent_commit_keys.len() <= crate::limits::RECENT_COMMITS_MAX);
    let chunks: usize = state.recent_commits.values().map(|a| a.len()).sum();
    assert_eq!(state.recent_commit_chunks, chunks, "the kept answers' chunks are counted");
    if state.applies_format(15) && state.recent_commit_keys.len() > 1 {
        assert!(chunks <= crate::limits::RECENT_COMMIT_CHUNKS_MAX, "{chunks} chunks of answers kept");
    }
    for key in &state.recent_commit_keys {
        assert!(state.recent_commits.get(key).is_some_and(|a| !a.is_empty()), "commit {key:?} keeps its answer");
    }
    let held: Vec<&String> = state.recent_commits.iter().filter(|(_, a)| a.is_empty()).map(|(k, _)| k).collect();
    assert_eq!(state.recent_commits.len(), state.recent_commit_keys.len() + held.len(), "keys are remembered once");
    for key in held {
        assert!(super::offsets::segment_key_drawn_ms(key).is_some(), "held key {key:?} has a deadline");
    }
    for (user, record) in &state.users {
        assert!(state.tenants.contains_key(&record.tenant), "user {user:?} outlived its tenant");
        assert!(!record.scram.is_empty(), "user {user:?} has no credential left");
    }
    for (id, key) in &state.api_keys {
        let user = state.users.get(&key.user);
        assert!(user.is_some_and(|u| u.tenant == key.tenant), "API key {id:?} acts as a missing or foreign user");
    }
    for (key, record) in &state.idempotency_keys {
        assert!(state.producers.contains_key(&record.producer_id), "idempotency key {key:?} outlived its producer");
    }
    for (id, group) in &state.groups {
        for (topic, partition) in group.offsets.keys() {
            let topic = state.topic_by_name(topic);
            assert!(topic.is_some(), "group {id} keeps offsets of a deleted topic");
            assert!(
                topic.is_some_and(|t| (partition as usize) < t.partitions.len()),
                "offsets of a partition that never existed"
            );
        }
        assert_eq!(
            group.membership.members.is_empty(),
            group.empty_since_ms.is_some(),
            "group {id}: empty_since tracks emptiness"
        );
    }
}

#[test]
fn offsets_are_assigned_batch_by_batch_per_partition() {
    let (state, outcomes) = run(vec![
        create("a", 0, 2),
        commit("o1", &[(0, 0, &[3, 2]), (0, 1, &[1])]),
        commit("o2", &[(0, 1, &[4]), (0, 0, &[1])]),
    ]);
    assert_eq!(outcomes[1], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(0), Ok(0)] }));
    assert_eq!(outcomes[2], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(1), Ok(5)] }));
    let p0 = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(p0.next_offset, 6);
    assert_eq!(p0.entries_from(4).next().map(|e| e.base_offset), Some(0));
    assert_eq!(p0.entries_from(5).next().map(|e| e.base_offset), Some(5));
    assert!(p0.entries_from(6).next().is_none());
}

#[test]
fn chunks_of_unknown_partitions_are_rejected_alone() {
    let (state, outcomes) = run(vec![create("a", 0, 1), commit("o1", &[(0, 0, &[2]), (0, 5, &[1]), (9, 0, &[1])])]);
    assert_eq!(
        outcomes[1],
        Ok(Outcome::SegmentCommitted {
            chunks: vec![Ok(0), Err(CommandError::UnknownTopicOrPartition), Err(CommandError::UnknownTopicOrPartition)]
        })
    );
    assert_eq!(state.objects.values().next().map(|o| o.reference_count), Some(1));
}

#[test]
fn invalid_commands_change_nothing() {
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        create("a", 1, 1),
        create("bad name!", 2, 1),
        create("b", 3, 0),
        create("c", 4, TOPIC_PARTITION_COUNT_MAX + 1),
        commit("", &[(0, 0, &[1])]),
        commit("o", &[(0, 0, &[0])]),
        commit("o", &[]),
        Command::CreatePartitions { name: "a".into(), partition_count: 1 },
        Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 5 },
    ]);
    assert!(outcomes[1..].iter().all(|o| o.is_err()), "{outcomes:?}");
    let mut expected = State::default();
    expected.apply(1, create("a", 0, 1)).expect("valid");
    expected.applied_index = state.applied_index;
    assert_eq!(state, expected);
}

use crate::limits::TOPIC_PARTITION_COUNT_MAX;

#[test]
fn timestamp_lookups_find_the_first_entry_reaching_the_target() {
    let (state, _) = run(vec![create("a", 0, 1), commit("o1", &[(0, 0, &[2, 2])]), commit("o2", &[(0, 0, &[1])])]);
    let p = state.partition(topic_id(0), 0).expect("exists");
    // o1's chunk has timestamps up to 1001, o2's up to 1000.
    assert_eq!(p.entry_for_timestamp(1001).map(|e| e.base_offset), Some(0));
    assert_eq!(p.entry_for_timestamp(0).map(|e| e.base_offset), Some(0));
    assert!(p.entry_for_timestamp(1002).is_none());
    assert_eq!(p.entry_with_max_timestamp().map(|e| e.base_offset), Some(0));
}

#[test]
fn delete_records_advances_log_start_and_releases_objects() {
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        commit("o1", &[(0, 0, &[2])]),
        commit("o2", &[(0, 0, &[3])]),
        Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 3 },
        Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 1 },
    ]);
    assert_eq!(outcomes[3], Ok(Outcome::LogStartOffset { offset: 3 }));
    assert_eq!(outcomes[4], Ok(Outcome::LogStartOffset { offset: 3 }), "the log start never moves back");
    let p = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(p.index.len(), 1);
    assert_eq!(state.objects.values().map(|o| o.reference_count).collect::<Vec<_>>(), vec![0, 1]);
}

#[test]
fn a_topic_created_again_gets_a_fresh_log() {
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        commit("o1", &[(0, 0, &[2])]),
        Command::DeleteTopic { name: "a".into() },
        create("a", 1, 2),
        commit("o2", &[(0, 0, &[1]), (1, 1, &[1])]),
    ]);
    assert_eq!(
        outcomes[4],
        Ok(Outcome::SegmentCommitted { chunks: vec![Err(CommandError::UnknownTopicOrPartition), Ok(0)] })
    );
    assert_eq!(state.topic_by_name("a").map(|t| t.topic_id), Some(topic_id(1)));
}

/// A segment object key as an agent draws it at `drawn_ms` (`segments/<UUIDv7>.seg`); `n`
/// stands for its random bits.
fn drawn_key(drawn_ms: i64, n: u64) -> String {
    format!("segments/{drawn_ms:012x}7000{:016x}.seg", 0x8000_0000_0000_0000_u64 | n)
}

/// Agents' keys (`floe_storage::SegmentKey::generate`) name the time they were drawn; keys of
/// other shapes name none, and their commits have no deadline.
#[test]
fn segment_keys_name_the_time_they_were_drawn() {
    use super::offsets::segment_key_drawn_ms;
    let before = crate::now_ms();
    let key = format!("segments/{}.seg", uuid::Uuid::now_v7().simple());
    let after = crate::now_ms();
    let drawn = segment_key_drawn_ms(&key).expect("an agent's key names a time");
    assert!(before <= drawn && drawn <= after + 1_000, "{before} <= {drawn} <= {after}");
    assert_eq!(segment_key_drawn_ms(&drawn_key(0xabc_def, 9)), Some(0xabc_def));
    let random = format!("segments/{}.seg", uuid::Uuid::new_v4().simple());
    let compacted = format!("segments/{}.compacted.seg", uuid::Uuid::now_v7().simple());
    let upper = drawn_key(0xabc_def, 9).replace("abcdef", "ABCDEF");
    for other in ["o1", "segments/adopted", random.as_str(), compacted.as_str(), upper.as_str()] {
        assert_eq!(segment_key_drawn_ms(other), None, "{other}");
    }
}

/// A copy of a segment commit that arrives after more than `RECENT_COMMITS_MAX` other commits
/// (held by a paused metadata node, a retransmit queue) is not sequenced again: its key is held
/// past its answer until its deadline, and refused by the deadline after that (format 12).
#[test]
fn a_late_copy_of_a_segment_commit_is_never_applied_twice() {
    let minute = 29_000_000 * MINUTE_MS;
    let drawn_ms = minute + MINUTE_MS;
    let mut state = State::default();
    let mut index = 0;
    let mut apply = |state: &mut State, command| {
        index += 1;
        state.apply(index, command)
    };
    let setup = [Command::SetFormat { format: 12 }, create("a", 0, 1), Command::CloseUsageMinute { now_ms: drawn_ms }];
    for command in setup {
        apply(&mut state, command).expect("set up");
    }
    let key = drawn_key(drawn_ms, 0);
    let original = commit(&key, &[(0, 0, &[2])]);
    let first = apply(&mut state, original.clone());
    assert_eq!(first, Ok(Outcome::SegmentCommitted { chunks: vec![Ok(0)] }));
    for n in 1..=RECENT_COMMITS_MAX as u64 {
        let other = apply(&mut state, commit(&drawn_key(drawn_ms, n), &[(0, 0, &[1])]));
        assert!(other.is_ok(), "{other:?}");
    }
    let log_end = |state: &State| state.partition(topic_id(0), 0).map(|p| p.next_offset);
    let objects_named = |state: &State| state.objects.values().filter(|o| o.key == key).count();
    let end = log_end(&state);
    assert_eq!(end, Some(2 + RECENT_COMMITS_MAX as i64));

    // The late copy: its answer is gone, its key is not.
    let again = apply(&mut state, original.clone());
    assert!(again.is_err() || again == first, "applied again: {again:?}");
    assert_eq!(log_end(&state), end, "the records were sequenced twice");
    assert_eq!(objects_named(&state), 1, "two object records share the key");
    assert!(matches!(again, Err(CommandError::SegmentCommitRefused { .. })), "{again:?}");
    assert!(state.recent_commits.get(&key).is_some_and(|a| a.is_empty()), "held without its answer");

    // Its deadline passes: the key is forgotten, and the deadline refuses any copy.
    let past_deadline = drawn_ms + SEGMENT_COMMIT_WINDOW_MS + 2 * MINUTE_MS;
    apply(&mut state, Command::CloseUsageMinute { now_ms: past_deadline }).expect("a minute closes");
    assert!(!state.recent_commits.contains_key(&key), "held until its deadline only");
    let late = apply(&mut state, original);
    assert!(matches!(late, Err(CommandError::SegmentCommitRefused { .. })), "{late:?}");
    assert_eq!(log_end(&state), end);
    assert_eq!(objects_named(&state), 1);
    check_invariants(&state);
}

/// A segment commit is refused once the leader's time, as the state knows it, is past its key's
/// drawn time plus `SEGMENT_COMMIT_WINDOW_MS`: its object may have been collected as an orphan
/// (format 12). Before format 12 it applies, as it did on binaries without the rule.
#[test]
fn a_segment_commit_past_its_deadline_is_refused() {
    let minute = 29_000_000 * MINUTE_MS;
    let floor = minute + MINUTE_MS;
    let in_time = drawn_key(floor - SEGMENT_COMMIT_WINDOW_MS, 1);
    let late = drawn_key(floor - SEGMENT_COMMIT_WINDOW_MS - 1, 2);
    let commands = |format| {
        vec![
            Command::SetFormat { format },
            create("a", 0, 1),
            Command::CloseUsageMinute { now_ms: minute + 70_000 },
            commit(&late, &[(0, 0, &[2])]),
            commit(&in_time, &[(0, 0, &[3])]),
        ]
    };
    let (state, outcomes) = run(commands(12));
    assert_eq!(state.leader_time_floor_ms(), Some(floor));
    assert!(matches!(outcomes[3], Err(CommandError::SegmentCommitRefused { .. })), "{:?}", outcomes[3]);
    assert_eq!(outcomes[4], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(0)] }), "the late commit wrote nothing");
    assert!(state.objects.values().all(|o| o.key != late));

    let (older, outcomes) = run(commands(11));
    assert_eq!(outcomes[3], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(0)] }));
    assert_eq!(older.partition(topic_id(0), 0).map(|p| p.next_offset), Some(5));
}

/// From format 15 the answers kept for retried commits stay under `RECENT_COMMIT_CHUNKS_MAX`
/// chunks, the oldest dropped first: a copy of a commit whose answer went is refused (its key is
/// held), never sequenced again, while the newest answers still answer. Format 14 kept them by
/// count alone (65,536 commits, however many chunks each).
#[test]
fn answers_kept_for_retries_are_bounded_in_chunks() {
    let drawn_ms = 29_000_000 * MINUTE_MS;
    // Chunks of a topic that does not exist: answered (with an error each), nothing indexed.
    let chunks = vec![(9_u8, 0, &[1_u32][..]); COMMIT_CHUNK_COUNT_MAX];
    let commits = (RECENT_COMMIT_CHUNKS_MAX / COMMIT_CHUNK_COUNT_MAX + 1) as u64;
    let nth = |n| commit(&drawn_key(drawn_ms, n), &chunks);
    for format in [14, 15] {
        let mut state = State::default();
        let setup = [Command::SetFormat { format }, Command::CloseUsageMinute { now_ms: drawn_ms }];
        let mut index = 0;
        for command in setup.into_iter().chain((0..commits).map(nth)) {
            index += 1;
            state.apply(index, command).expect("applies");
        }
        let first = nth(0);
        let Command::CommitSegment(first_commit) = &first else { unreachable!("a segment commit") };
        let first_key = first_commit.key.clone();
        let again = state.apply(index + 1, first.clone());
        let newest = state.apply(index + 2, nth(commits - 1));
        assert!(
            matches!(newest, Ok(Outcome::SegmentCommitted { ref chunks }) if chunks.len() == COMMIT_CHUNK_COUNT_MAX)
        );
        if format == 15 {
            assert!(matches!(again, Err(CommandError::SegmentCommitRefused { .. })), "{again:?}");
            assert!(state.recent_commits.get(&first_key).is_some_and(|a| a.is_empty()), "held without its answer");
            assert!(state.recent_commit_chunks <= RECENT_COMMIT_CHUNKS_MAX, "{}", state.recent_commit_chunks);
        } else {
            assert!(
                matches!(again, Ok(Outcome::SegmentCommitted { ref chunks }) if chunks.len() == COMMIT_CHUNK_COUNT_MAX)
            );
            assert_eq!(state.recent_commit_chunks, commits as usize * COMMIT_CHUNK_COUNT_MAX);
        }
        check_invariants(&state);
    }
}

/// From format 15 a kept answer goes at its key's deadline, with its key (the agent gave up on
/// its commit a minute before): a copy is then refused by the deadline. Format 14 kept the
/// answer, and answered a copy, until 65,536 later commits pushed it out.
#[test]
fn an_answer_goes_at_its_keys_deadline() {
    let drawn_ms = 29_000_000 * MINUTE_MS;
    let key = drawn_key(drawn_ms, 1);
    let past_deadline = drawn_ms + SEGMENT_COMMIT_WINDOW_MS + 2 * MINUTE_MS;
    for format in [14, 15] {
        let (state, outcomes) = run(vec![
            Command::SetFormat { format },
            create("a", 0, 1),
            Command::CloseUsageMinute { now_ms: drawn_ms },
            commit(&key, &[(0, 0, &[2])]),
            commit(&drawn_key(past_deadline - MINUTE_MS, 2), &[(0, 0, &[3])]),
            Command::CloseUsageMinute { now_ms: past_deadline },
            commit(&key, &[(0, 0, &[2])]),
        ]);
        assert_eq!(state.partition(topic_id(0), 0).map(|p| p.next_offset), Some(5), "sequenced once");
        if format == 15 {
            assert!(matches!(outcomes[6], Err(CommandError::SegmentCommitRefused { .. })), "{:?}", outcomes[6]);
            assert!(!state.recent_commits.contains_key(&key));
            assert_eq!((state.recent_commit_keys.len(), state.recent_commit_chunks), (1, 1), "the newer answer stays");
        } else {
            assert_eq!(outcomes[6], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(0)] }));
            assert_eq!(state.recent_commit_keys.len(), 2);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Format 15: a copy of a commit whose key is still in time gets the original answer however
    /// the leader's time and other commits moved on (within the bounds); past its deadline it is
    /// refused; no copy is ever sequenced again.
    #[test]
    fn a_retry_inside_the_window_gets_its_answer(
        steps in proptest::collection::vec((0_u8..3, 0_u64..8, 1_u32..4), 1..80),
    ) {
        let start = 29_000_000 * MINUTE_MS;
        let mut state = State::default();
        let mut index = 0;
        let mut apply = |state: &mut State, command: Command| {
            index += 1;
            let outcome = state.apply(index, command);
            check_invariants(state);
            outcome
        };
        for command in [Command::SetFormat { format: 15 }, create("a", 0, 2), Command::CloseUsageMinute { now_ms: start }] {
            apply(&mut state, command).expect("set up");
        }
        let mut now = start;
        let mut sent: Vec<(Command, Outcome, i64)> = Vec::new();
        for (kind, pick, count) in steps {
            match kind {
                0 => {
                    let drawn_ms = now - pick as i64 * 10_000;
                    let command = commit(&drawn_key(drawn_ms, sent.len() as u64), &[(0, (pick % 2) as i32, &[count])]);
                    let outcome = apply(&mut state, command.clone());
                    prop_assert!(outcome.is_ok(), "{:?}", outcome);
                    sent.push((command, outcome.expect("checked"), drawn_ms));
                }
                1 if !sent.is_empty() => {
                    let (command, original, drawn_ms) = sent[pick as usize % sent.len()].clone();
                    let ends = |state: &State| [0, 1].map(|p| state.partition(topic_id(0), p).map(|l| l.next_offset));
                    let before = ends(&state);
                    let expired = state.leader_time_floor_ms().is_some_and(|floor| floor > drawn_ms + SEGMENT_COMMIT_WINDOW_MS);
                    let again = apply(&mut state, command);
                    if expired {
                        prop_assert!(matches!(again, Err(CommandError::SegmentCommitRefused { .. })), "{:?}", again);
                    } else {
                        prop_assert_eq!(again, Ok(original));
                    }
                    prop_assert_eq!(ends(&state), before, "a copy was sequenced again");
                }
                _ => {
                    now += MINUTE_MS * i64::from(count);
                    apply(&mut state, Command::CloseUsageMinute { now_ms: now }).expect("a minute closes");
                }
            }
        }
    }
}

use crate::limits::{COMMIT_CHUNK_COUNT_MAX, RECENT_COMMIT_CHUNKS_MAX, RECENT_COMMITS_MAX, SEGMENT_COMMIT_WINDOW_MS};

/// The name of generated topic `t`: topic 2 is in the namespace of tenant0 when it is the first
/// tenant created (id 1), so deleting that tenant deletes it.
fn arb_topic_name(t: u8) -> String {
    if t == 2 { "tenant0#1~t2".into() } else { format!("t{t}") }
}

fn arb_command() -> impl Strategy<Value = Command> {
    let topic = 0u8..3;
    prop_oneof![
        (topic.clone(), 1i32..4).prop_map(|(t, n)| create(&arb_topic_name(t), t, n)),
        topic.clone().prop_map(|t| Command::DeleteTopic { name: arb_topic_name(t) }),
        (topic.clone(), 1i32..6)
            .prop_map(|(t, n)| Command::CreatePartitions { name: arb_topic_name(t), partition_count: n }),
        (
            proptest::collection::vec((topic.clone(), 0i32..5, proptest::collection::vec(0u32..4, 0..4)), 0..4),
            any::<u16>()
        )
            .prop_map(|(chunks, k)| {
                let chunks: Vec<(u8, i32, &[u32])> = chunks.iter().map(|(t, p, b)| (*t, *p, &b[..])).collect();
                commit(&format!("o{k}"), &chunks)
            }),
        (topic.clone(), 0i32..3, -1i64..12).prop_map(|(t, p, o)| Command::DeleteRecords {
            topic_id: topic_id(t),
            partition: p,
            offset: o
        }),
        arb_group_command(),
        super::transactions::tests::arb_transaction_command(),
        arb_security_command(),
        super::registry::tests::arb_registry_command(),
    ]
}

/// Tenants, users and API keys over two tenants, two users and two key ids.
fn arb_security_command() -> impl Strategy<Value = Command> {
    use crate::state::{ApiKeyRecord, ScramCredential, ScramMechanism};
    let tenant = (0u8..2).prop_map(|t| format!("tenant{t}"));
    let user = (0u8..2).prop_map(|u| format!("user{u}"));
    prop_oneof![
        tenant.clone().prop_map(|name| Command::CreateTenant { name, now_ms: 0 }),
        tenant.clone().prop_map(|name| Command::DeleteTenant { name }),
        (user.clone(), tenant.clone(), any::<bool>()).prop_map(|(user, tenant, sha512)| {
            let mechanism = if sha512 { ScramMechanism::Sha512 } else { ScramMechanism::Sha256 };
            let bytes = mechanism.hash_bytes();
            let credential = ScramCredential {
                salt: vec![1; 16],
                iterations: 4096,
                stored_key: vec![2; bytes],
                server_key: vec![3; bytes],
            };
            Command::UpsertScramCredential { user, tenant, mechanism, credential: credential.into() }
        }),
        user.clone().prop_map(|user| Command::DeleteUser { user }),
        (user.clone(), tenant.clone(), any::<bool>()).prop_map(|(user, tenant, sha512)| {
            let mechanism = if sha512 { ScramMechanism::Sha512 } else { ScramMechanism::Sha256 };
            Command::DeleteScramCredential { user, tenant, mechanism }
        }),
        ((0u8..2), tenant.clone(), user).prop_map(|(k, tenant, user)| Command::CreateApiKey {
            key_id: format!("k{k}"),
            record: ApiKeyRecord { tenant, user, secret_sha256: vec![0; 32], created_ms: 0, expires_ms: None }.into(),
        }),
        (0u8..2).prop_map(|k| Command::DeleteApiKey { key_id: format!("k{k}") }),
        ((0u8..2), proptest::option::of(0u64..3)).prop_map(|(k, rate)| Command::SetApiKeyQuotas {
            key_id: format!("k{k}"),
            quotas: crate::state::ApiKeyQuotas { requests_per_sec: rate, ..Default::default() }.into(),
        }),
        (tenant.clone(), proptest::collection::vec(arb_acl(), 0..3)).prop_map(|(tenant, bindings)| {
            Command::CreateAcls { tenant, bindings: crate::state::stored::each_into(bindings) }
        }),
        (tenant, proptest::option::of(0u8..2)).prop_map(|(tenant, user)| {
            let filter = crate::acl::AclFilter {
                resource_type: None,
                resource_name: None,
                pattern: crate::acl::PatternFilter::Any,
                principal: user.map(|u| format!("User:user{u}")),
                host: None,
                operation: None,
                permission: None,
            };
            Command::DeleteAcls { tenant, filters: vec![filter] }
        }),
    ]
}

/// An ACL binding over two users and the generated topics, some invalid (a group written).
fn arb_acl() -> impl Strategy<Value = crate::acl::AclBinding> {
    use crate::acl::{AclBinding, AclOperation, AclPatternType, AclPermission, AclResourceType};
    (0u8..2, 0u8..3, any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(user, t, group, write, deny)| AclBinding {
        resource_type: if group { AclResourceType::Group } else { AclResourceType::Topic },
        resource_name: format!("t{t}"),
        pattern_type: if t == 2 { AclPatternType::Prefixed } else { AclPatternType::Literal },
        principal: format!("User:user{user}"),
        host: "*".into(),
        operation: if write { AclOperation::Write } else { AclOperation::Read },
        permission: if deny { AclPermission::Deny } else { AclPermission::Allow },
    })
}

/// Group commands over two groups and the same three topics, with times that go back and forth.
fn arb_group_command() -> impl Strategy<Value = Command> {
    let group = (0u8..2).prop_map(|g| format!("g{g}"));
    let now = 0i64..20;
    prop_oneof![
        (
            group.clone(),
            proptest::collection::vec((0u8..3, 0i32..4, 0i64..50), 0..4),
            proptest::option::of((0u64..2, 0u64..6).prop_map(|(origin, seq)| CommitStamp { origin, seq })),
            now.clone()
        )
            .prop_map(|(group_id, offsets, stamp, now_ms)| Command::CommitOffsets {
                group_id,
                offsets: offsets
                    .into_iter()
                    .map(|(t, partition, offset)| crate::state::stored::OffsetCommit {
                        topic: arb_topic_name(t),
                        partition,
                        offset,
                        leader_epoch: 0,
                        metadata: String::new(),
                    })
                    .collect(),
                stamp: stamp.map(Into::into),
                now_ms,
            }),
        (group.clone(), 0i32..4, 0usize..3, now.clone()).prop_map(|(group_id, generation, members, now_ms)| {
            let members =
                (0..members).map(|i| MemberRecord { member_id: format!("m{i}"), ..Default::default() }).collect();
            let membership =
                GroupMembership { protocol_type: "consumer".into(), generation, members, ..Default::default() };
            Command::StoreGroup { group_id, membership: membership.into(), now_ms }
        }),
        group.clone().prop_map(|group_id| Command::DeleteGroup { group_id }),
        (group, 0u8..3).prop_map(|(group_id, t)| Command::DeleteOffsets {
            group_id,
            partitions: vec![(arb_topic_name(t), 0), (arb_topic_name(t), 1)]
        }),
        now.clone().prop_map(|now_ms| Command::ExpireOffsets { now_ms: now_ms * 100_000_000 }),
        now.prop_map(|now_ms| Command::ApplyRetention { now_ms: now_ms * 100_000_000 }),
        proptest::collection::vec(0u64..8, 0..4).prop_map(|object_ids| Command::ForgetObjects { object_ids }),
    ]
}

proptest! {
    #[test]
    fn invariants_hold_for_any_command_sequence(commands in proptest::collection::vec(arb_command(), 0..60)) {
        let (_, outcomes) = run(commands.clone());
        // Committed offsets per partition are unique and contiguous: each commit's chunk base is
        // exactly where the partition ended before it (checked in check_invariants), and the
        // same log replayed gives the same state and the same outcomes.
        let (_, again) = run(commands);
        prop_assert_eq!(outcomes, again);
    }

    #[test]
    fn snapshot_round_trip_is_identity(commands in proptest::collection::vec(arb_command(), 0..40)) {
        let (state, _) = run(commands);
        let bytes = postcard::to_stdvec(&StoredState::from(state.clone())).expect("encodes");
        let restored: StoredState = postcard::from_bytes(&bytes).expect("decodes");
        // Written a piece at a time, it is the same bytes.
        let written = postcard::to_stdvec(&super::stored::AsStored(&state)).expect("encodes");
        prop_assert_eq!(&written, &bytes);
        prop_assert_eq!(state, State::from(restored));
    }
}

/// The state written a piece at a time (`AsStored`, what snapshots, archives and state copies
/// write) gives the bytes of its converted stored layout, for the golden state of every format
/// (each decoded, then written in today's format).
#[test]
fn a_state_written_piece_by_piece_is_its_stored_layouts_bytes() {
    for format in 1..=crate::FORMAT_VERSION {
        let golden = std::fs::read(golden_dir().join(format!("state-v{format}.snap"))).expect("the golden state");
        let state = crate::archive::decode_state(&golden).expect("decodes");
        let converted = postcard::to_stdvec(&StoredState::from(state.clone())).expect("encodes");
        let written = postcard::to_stdvec(&super::stored::AsStored(&state)).expect("encodes");
        assert!(written == converted, "format {format}'s golden state is written differently");
    }
}

#[test]
fn broker_configs_are_checked_and_feed_topic_defaults() {
    let set = |pairs: &[(&str, &str)]| Command::SetBrokerConfigs {
        configs: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
    };
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        set(&[("log.retention.ms", "1000")]),
        set(&[("num.partitions", "3")]),
        set(&[("log.retention.ms", "later")]),
        set(&[("not.a.config", "1")]),
    ]);
    assert_eq!(outcomes[1], Ok(Outcome::Done));
    assert!(outcomes[2..].iter().all(|o| matches!(o, Err(CommandError::InvalidConfig(_)))), "{outcomes:?}");
    let topic = state.topic_by_name("a").expect("exists");
    assert_eq!(state.effective_topic_config(topic, "retention.ms"), Some("1000"));
    assert_eq!(state.effective_topic_config(topic, "cleanup.policy"), None);
}

#[test]
fn a_retried_commit_gets_its_original_offsets() {
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        commit("o1", &[(0, 0, &[2])]),
        commit("o2", &[(0, 0, &[3])]),
        commit("o1", &[(0, 0, &[2])]),
    ]);
    assert_eq!(outcomes[3], outcomes[1], "the retry is answered with the first outcome");
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.next_offset), Some(5), "and sequenced nothing");
}

#[test]
fn a_commit_group_applies_like_its_commits_one_by_one() {
    let commits =
        [commit("g1", &[(0, 0, &[2])]), commit("g2", &[(0, 0, &[1]), (9, 0, &[1])]), commit("g1", &[(0, 0, &[2])])];
    let unpack = |c: &Command| match c {
        Command::CommitSegment(c) => c.clone(),
        _ => unreachable!("built by commit()"),
    };
    let (one_by_one, outcomes) = run([vec![create("a", 0, 1)], commits.to_vec()].concat());
    let (grouped, group_outcome) =
        run(vec![create("a", 0, 1), Command::CommitSegments(commits.iter().map(unpack).collect())]);
    assert_eq!(group_outcome[1], Ok(Outcome::SegmentsCommitted(outcomes[1..].to_vec())));
    assert_eq!(one_by_one.topics, grouped.topics);
}

#[test]
fn a_restored_state_seeds_only_a_new_cluster() {
    let (original, _) =
        run(vec![Command::InitCluster { cluster_id: "c1".into() }, create("a", 0, 1), commit("o1", &[(0, 0, &[4])])]);
    let encoded = crate::archive::encode_state(&original).expect("encodes");
    let seed = crate::archive::decode_state(&encoded).expect("decodes");
    assert!(crate::archive::decode_state(&encoded[..encoded.len() - 1]).is_err(), "truncation is detected");

    let (restored, outcomes) = run(vec![
        Command::RestoreState(Box::new(seed.clone().into())),
        Command::RestoreState(Box::new(seed.into())),
        commit("o2", &[(0, 0, &[1])]),
    ]);
    assert_eq!(outcomes[0], Ok(Outcome::Done));
    assert_eq!(outcomes[1], Err(CommandError::AlreadyInitialized), "a second restore is refused");
    assert_eq!(outcomes[2], Ok(Outcome::SegmentCommitted { chunks: vec![Ok(4)] }), "offsets continue");
    assert_eq!(restored.cluster_id, "c1");
    assert_eq!(restored.generation, original.generation + 1, "a restore starts a new generation");
    assert!(restored.version() > original.version(), "mirrors order the rebuilt state after the old one");
}

#[test]
fn offsets_never_overflow_whatever_commits_claim() {
    let mut state = State::default();
    state.apply(1, create("a", 0, 1)).expect("created");
    // Bring the partition near the end of the offset space, as a long flood of commits would.
    let max = crate::limits::PARTITION_OFFSET_MAX;
    let topic = state.topics.get_mut(&topic_id(0)).expect("exists");
    let partition = std::sync::Arc::make_mut(&mut topic.partitions[0]);
    partition.next_offset = max - 10;
    partition.log_start_offset = max - 10;
    let refused = state.apply(2, commit("big", &[(0, 0, &[u32::MAX])]));
    assert!(
        matches!(&refused, Ok(Outcome::SegmentCommitted { chunks }) if matches!(chunks[0], Err(CommandError::LimitReached(_)))),
        "{refused:?}"
    );
    let fits = state.apply(3, commit("small", &[(0, 0, &[10])]));
    assert_eq!(fits, Ok(Outcome::SegmentCommitted { chunks: vec![Ok(max - 10)] }));
    check_invariants(&state);
}

#[test]
fn committed_offsets_expire_as_kip_211_says() {
    let offsets = |group: &str, now_ms| Command::CommitOffsets {
        group_id: group.into(),
        offsets: vec![
            OffsetCommit { topic: "t0".into(), partition: 0, offset: 1, leader_epoch: 0, metadata: String::new() }
                .into(),
        ],
        stamp: None,
        now_ms,
    };
    let member = MemberRecord { member_id: "m".into(), ..Default::default() };
    let with_members = |members: Vec<MemberRecord>, generation| Command::StoreGroup {
        group_id: "live".into(),
        membership: GroupMembership { protocol_type: "consumer".into(), generation, members, ..Default::default() }
            .into(),
        now_ms: 0,
    };
    let minutes = |n: i64| n * 60_000;
    let retention =
        Command::SetBrokerConfigs { configs: [("offsets.retention.minutes".to_owned(), "10".to_owned())].into() };
    let (state, _) = run(vec![
        retention,
        create("t0", 0, 1),
        offsets("standalone", 0),
        with_members(vec![member], 1),
        offsets("live", 0),
        Command::ExpireOffsets { now_ms: minutes(60) },
    ]);
    assert!(!state.groups.contains_key("standalone"), "a standalone group's offsets expire retention after commit");
    assert_eq!(state.groups["live"].offsets.len(), 1, "a group with members keeps its offsets");

    // Once empty, the group's offsets expire retention after it became empty, not after the commit.
    let mut state = state;
    let next = state.applied_index + 1;
    state
        .apply(
            next,
            Command::StoreGroup {
                group_id: "live".into(),
                membership: GroupMembership { protocol_type: "consumer".into(), generation: 2, ..Default::default() }
                    .into(),
                now_ms: minutes(60),
            },
        )
        .expect("stored");
    state.apply(next + 1, Command::ExpireOffsets { now_ms: minutes(65) }).expect("expired");
    assert_eq!(state.groups["live"].offsets.len(), 1, "empty for 5 of 10 minutes: kept");
    state.apply(next + 2, Command::ExpireOffsets { now_ms: minutes(71) }).expect("expired");
    assert!(!state.groups.contains_key("live"), "empty for 11 minutes: offsets and group gone");
}

/// A commit that reaches the leader after a newer one from the same process (its answer was
/// lost and it was sent again, or it sat in a network queue) does not move the offset back; a
/// commit from another process, or an unstamped one, is applied as it comes.
#[test]
fn a_late_commit_never_replaces_a_newer_one_from_the_same_process() {
    let mut state = State::default();
    state.apply(1, Command::InitCluster { cluster_id: "c".into() }).expect("init");
    let create = Command::CreateTopic {
        name: "t".into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count: 1,
        configs: BTreeMap::new(),
    };
    state.apply(2, create).expect("topic");
    let commit = |offset, origin, seq| Command::CommitOffsets {
        group_id: "g".into(),
        offsets: vec![
            OffsetCommit { topic: "t".into(), partition: 0, offset, leader_epoch: 0, metadata: String::new() }.into(),
        ],
        stamp: Some(CommitStamp { origin, seq }.into()),
        now_ms: 0,
    };
    let committed = |state: &State| state.groups["g"].offsets.get("t", 0).map_or(-1, |o| o.offset);
    let mut index = 3;
    let mut apply = |state: &mut State, command| {
        index += 1;
        assert!(matches!(state.apply(index, command), Ok(Outcome::OffsetsCommitted(r)) if r.iter().all(Result::is_ok)));
    };
    apply(&mut state, commit(100, 7, 1));
    apply(&mut state, commit(200, 7, 2));
    apply(&mut state, commit(100, 7, 1));
    assert_eq!(committed(&state), 200, "the late copy of the first commit is skipped");
    apply(&mut state, commit(50, 7, 3));
    assert_eq!(committed(&state), 50, "a newer commit may move the offset back on purpose");
    apply(&mut state, commit(10, 8, 1));
    assert_eq!(committed(&state), 10, "another process's commits are not ordered against these");
    apply(&mut state, commit(60, 7, 2));
    assert_eq!(committed(&state), 10, "origin 7 is still remembered after origin 8 committed");
    for origin in 9..9 + groups::COMMIT_ORIGINS_MAX as u64 {
        apply(&mut state, commit(1, origin, 1));
    }
    apply(&mut state, commit(70, 7, 2));
    assert_eq!(committed(&state), 70, "only the latest few origins are remembered");
    check_invariants(&state);
}

#[test]
fn a_tenants_partitions_stay_within_its_quota() {
    let mut state = State::default();
    state.apply(1, Command::InitCluster { cluster_id: "c".into() }).expect("init");
    state.apply(2, Command::CreateTenant { name: "acme".into(), now_ms: 0 }).expect("tenant");
    let quotas = crate::state::TenantQuotas { partitions: Some(3), ..Default::default() };
    state.apply(3, Command::SetTenantQuotas { tenant: "acme".into(), quotas: quotas.into() }).expect("quotas");
    let create = |name: &str, partition_count| Command::CreateTopic {
        name: name.into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count,
        configs: BTreeMap::new(),
    };
    state.apply(4, create("acme#1~a", 2)).expect("2 of 3");
    assert!(matches!(state.apply(5, create("acme#1~b", 2)), Err(CommandError::QuotaExceeded(_))));
    assert!(matches!(
        state.apply(6, Command::CreatePartitions { name: "acme#1~a".into(), partition_count: 4 }),
        Err(CommandError::QuotaExceeded(_))
    ));
    state.apply(7, create("acme#1~b", 1)).expect("3 of 3");
    state.apply(8, create("other", 5)).expect("topics outside tenants have no quota");
    let unknown = Command::SetTenantQuotas { tenant: "nobody".into(), quotas: Default::default() };
    assert!(matches!(state.apply(9, unknown), Err(CommandError::CredentialNotFound(_))));
    let zero = crate::state::TenantQuotas { produce_bytes_per_sec: Some(0), ..Default::default() };
    assert!(state.apply(10, Command::SetTenantQuotas { tenant: "acme".into(), quotas: zero.into() }).is_err());
    check_invariants(&state);
}

#[test]
fn a_tenant_at_its_share_of_a_table_is_refused_and_others_are_not() {
    use crate::acl::{AclBinding, AclOperation, AclPatternType, AclPermission, AclResourceType};
    let mut state = State::default();
    let mut index = 0;
    let mut apply = |state: &mut State, command| {
        index += 1;
        state.apply(index, command)
    };
    apply(&mut state, Command::InitCluster { cluster_id: "c".into() }).expect("init");
    for tenant in ["acme", "globex"] {
        apply(&mut state, Command::CreateTenant { name: tenant.into(), now_ms: 0 }).expect("tenant");
    }
    let quotas = crate::state::TenantQuotas {
        topics: Some(1),
        groups: Some(1),
        transactional_ids: Some(1),
        producer_ids: Some(2),
        acls: Some(1),
        ..Default::default()
    };
    apply(&mut state, Command::SetTenantQuotas { tenant: "acme".into(), quotas: quotas.into() }).expect("quotas");
    let topic = |name: &str| Command::CreateTopic {
        name: name.into(),
        topic_id: uuid::Uuid::new_v4(),
        partition_count: 1,
        configs: BTreeMap::new(),
    };
    let commit = |group: &str, topic: &str| Command::CommitOffsets {
        group_id: group.into(),
        offsets: vec![crate::state::stored::OffsetCommit {
            topic: topic.into(),
            partition: 0,
            offset: 1,
            leader_epoch: -1,
            metadata: String::new(),
        }],
        stamp: None,
        now_ms: 0,
    };
    let init = |tenant: &str, transactional_id: Option<&str>| Command::InitProducerId {
        transactional_id: transactional_id.map(str::to_owned),
        transaction_timeout_ms: 10_000,
        expected: None,
        now_ms: 0,
        tenant: Some(tenant.into()),
    };
    let acl = |name: &str| Command::CreateAcls {
        tenant: name.into(),
        bindings: vec![
            AclBinding {
                resource_type: AclResourceType::Topic,
                resource_name: format!("t-{}", uuid::Uuid::new_v4()),
                pattern_type: AclPatternType::Literal,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission: AclPermission::Allow,
            }
            .into(),
        ],
    };
    let refused = |outcome: Result<Outcome, CommandError>| matches!(outcome, Err(CommandError::QuotaExceeded(_)));
    let acl_refused = |outcome: Result<Outcome, CommandError>| matches!(outcome, Ok(Outcome::AclsCreated(r)) if matches!(r[..], [Err(CommandError::QuotaExceeded(_))]));
    for (tenant, key) in [("acme", "acme#1"), ("globex", "globex#2")] {
        apply(&mut state, topic(&format!("{key}~a"))).expect("a first topic");
        apply(&mut state, commit(&format!("{key}~g1"), &format!("{key}~a"))).expect("a first group");
        apply(&mut state, init(key, Some(&format!("{key}~t1")))).expect("a first transactional id");
        apply(&mut state, init(key, None)).expect("a second producer id");
        assert!(matches!(apply(&mut state, acl(tenant)), Ok(Outcome::AclsCreated(r)) if r[0].is_ok()));
    }
    assert!(refused(apply(&mut state, topic("acme#1~b"))));
    assert!(refused(apply(&mut state, commit("acme#1~g2", "acme#1~a"))));
    assert!(refused(apply(&mut state, init("acme#1", Some("acme#1~t2")))));
    assert!(refused(apply(&mut state, init("acme#1", None))));
    assert!(acl_refused(apply(&mut state, acl("acme"))));
    // globex has the defaults, far above acme's shares.
    apply(&mut state, topic("globex#2~b")).expect("globex's own share");
    apply(&mut state, commit("globex#2~g2", "globex#2~a")).expect("globex's own share");
    apply(&mut state, init("globex#2", Some("globex#2~t2"))).expect("globex's own share");
    apply(&mut state, init("globex#2", None)).expect("globex's own share");
    assert!(matches!(apply(&mut state, acl("globex")), Ok(Outcome::AclsCreated(r)) if r[0].is_ok()));
    check_invariants(&state);
}

#[test]
fn a_tenant_at_its_storage_quota_is_told_so_and_others_are_not() {
    let mut state = State::default();
    state.apply(1, Command::InitCluster { cluster_id: "c".into() }).expect("init");
    state.apply(2, Command::CreateTenant { name: "acme".into(), now_ms: 0 }).expect("tenant");
    let quotas = crate::state::TenantQuotas { storage_bytes: Some(1000), ..Default::default() };
    state.apply(3, Command::SetTenantQuotas { tenant: "acme".into(), quotas: quotas.into() }).expect("quotas");
    let mut index = 3;
    for (name, partitions) in [("acme#1~a", 2), ("acme#1~b", 1), ("acmex", 1), ("other", 1)] {
        index += 1;
        let create = Command::CreateTopic {
            name: name.into(),
            topic_id: uuid::Uuid::new_v4(),
            partition_count: partitions,
            configs: BTreeMap::new(),
        };
        state.apply(index, create).expect("topic");
    }
    // Sizes as commits would leave them.
    let mut store = |name: &str, partition: usize, bytes: u64| {
        let id = state.topic_ids[name];
        std::sync::Arc::make_mut(&mut state.topics.get_mut(&id).expect("topic").partitions[partition]).index_bytes =
            bytes;
    };
    store("acme#1~a", 0, 400);
    store("acme#1~a", 1, 300);
    store("acme#1~b", 0, 200);
    store("acmex", 0, 5000);
    store("other", 0, 5000);
    assert_eq!(state.tenant_stored_bytes("acme"), 900, "only the tenant's own topics count");
    assert_eq!(state.storage_quota_exceeded("acme#1~a"), None);
    let id = state.topic_ids["acme#1~b"];
    std::sync::Arc::make_mut(&mut state.topics.get_mut(&id).expect("topic").partitions[0]).index_bytes = 300;
    assert!(state.storage_quota_exceeded("acme#1~a").is_some_and(|why| why.contains("1000")));
    assert_eq!(state.storage_quota_exceeded("other"), None, "topics outside tenants have no quota");
}

#[test]
fn agents_stay_live_while_no_heartbeat_can_commit_and_a_silent_one_drops_out() {
    let agent = |agent_id: i32| crate::state::AgentInfo {
        agent_id,
        host: format!("10.0.0.{agent_id}"),
        port: 9092,
        zone: None,
    };
    let heartbeat = |agent_id: i32, now_ms: i64| Command::AgentHeartbeat { agent: agent(agent_id).into(), now_ms };
    let (state, _) = run(vec![heartbeat(1, 1_000), heartbeat(2, 1_000)]);
    let live =
        |state: &State, now_ms: i64| state.live_agents(now_ms, 10_000).map(|a| a.info.agent_id).collect::<Vec<_>>();
    assert_eq!(live(&state, 5_000), vec![1, 2]);
    // Nothing committed for 20 s (the metadata service was unavailable): nobody is dropped.
    assert_eq!(live(&state, 21_000), vec![1, 2]);
    // Agent 1 heartbeats again, agent 2 stays silent: it drops out once 1's heartbeat is 10 s newer.
    let (state, _) = run(vec![heartbeat(1, 1_000), heartbeat(2, 1_000), heartbeat(1, 10_000)]);
    assert_eq!(live(&state, 10_500), vec![1, 2]);
    let (state, _) = run(vec![heartbeat(1, 1_000), heartbeat(2, 1_000), heartbeat(1, 12_000)]);
    assert_eq!(live(&state, 12_500), vec![1]);
}

#[test]
fn a_late_copy_of_an_older_heartbeat_never_moves_the_time_back() {
    let agent = crate::state::AgentInfo { agent_id: 1, host: "10.0.0.1".into(), port: 9092, zone: None };
    let heartbeat = |now_ms: i64| Command::AgentHeartbeat { agent: agent.clone().into(), now_ms };
    let (state, _) = run(vec![heartbeat(5_000), heartbeat(3_000)]);
    assert_eq!(state.agents[&1].last_heartbeat_ms, 5_000);
}

/// An agent's peer listener (format 10): refused until the cluster applies format 10 or when
/// not HOST:PORT, kept by heartbeats without one, dropped when said so, forgotten with the agent.
#[test]
fn agent_peers_wait_for_format_10_and_go_with_the_agent() {
    let agent = crate::state::AgentInfo { agent_id: 1, host: "10.0.0.1".into(), port: 9092, zone: None };
    let with = |peer: Option<&str>, now_ms| Command::AgentHeartbeatWithPeer {
        agent: agent.clone().into(),
        profile: crate::state::AgentProfile::default().into(),
        peer_addr: peer.map(str::to_owned),
        now_ms,
    };
    let without = |now_ms| Command::AgentHeartbeat { agent: agent.clone().into(), now_ms };
    let (state, outcomes) = run(vec![Command::SetFormat { format: 9 }, with(Some("10.0.0.1:9096"), 1_000)]);
    assert!(matches!(outcomes[1], Err(CommandError::InvalidCommit(_))), "format 9 cluster: {:?}", outcomes[1]);
    assert!(state.agent_peers.is_empty());

    let ten = || Command::SetFormat { format: 10 };
    let (state, outcomes) = run(vec![ten(), with(Some("10.0.0.1:9096"), 1_000), without(2_000)]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(state.agent_peer(1), Some("10.0.0.1:9096"), "a heartbeat without one keeps it");
    let (state, _) = run(vec![ten(), with(Some("10.0.0.1:9096"), 1_000), with(None, 2_000)]);
    assert!(state.agent_peers.is_empty());
    let (state, _) = run(vec![ten(), with(Some("10.0.0.1:9096"), 2_000), with(None, 1_000)]);
    assert_eq!(state.agent_peer(1), Some("10.0.0.1:9096"), "a late copy does not roll it back");
    let (state, _) =
        run(vec![ten(), with(Some("10.0.0.1:9096"), 1_000), Command::AgentLeave { agent_id: 1, now_ms: 2_000 }]);
    assert!(state.agent_peers.is_empty(), "gone with the agent");

    let long = format!("{}:9096", "h".repeat(300));
    for bad in ["10.0.0.1", "10.0.0.1:0", ":9096", "10.0.0.1:port", "10.0.0.1 :9096", long.as_str()] {
        let (state, outcomes) = run(vec![ten(), with(Some(bad), 1_000)]);
        assert!(matches!(outcomes[1], Err(CommandError::InvalidCommit(_))), "{bad:?}: {:?}", outcomes[1]);
        assert!(state.agent_peers.is_empty() && state.agents.is_empty());
    }
}

/// An agent's roles and group (format 9): refused until the cluster applies format 9, kept by
/// heartbeats without one, back to the default when said so, forgotten with the agent.
#[test]
fn agent_profiles_wait_for_format_9_and_go_with_the_agent() {
    use crate::state::{AgentInfo, AgentProfile};
    let agent = AgentInfo { agent_id: 1, host: "10.0.0.1".into(), port: 9092, zone: None };
    let fetch = AgentProfile { roles: "fetch".parse().expect("roles"), group: "edge".into() };
    let with = |profile: &AgentProfile, now_ms| Command::AgentHeartbeatWithProfile {
        agent: agent.clone().into(),
        profile: profile.clone().into(),
        now_ms,
    };
    let without = |now_ms| Command::AgentHeartbeat { agent: agent.clone().into(), now_ms };
    let (state, outcomes) = run(vec![without(1_000), with(&fetch, 2_000)]);
    assert!(matches!(outcomes[1], Err(CommandError::InvalidCommit(_))), "format 8 cluster: {:?}", outcomes[1]);
    assert_eq!(state.agent_profile(1), AgentProfile::default());

    let (state, outcomes) = run(vec![Command::SetFormat { format: 9 }, with(&fetch, 1_000), without(2_000)]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(state.agent_profile(1), fetch, "a heartbeat without a profile keeps it");
    let (state, _) =
        run(vec![Command::SetFormat { format: 9 }, with(&fetch, 1_000), with(&AgentProfile::default(), 2_000)]);
    assert!(state.agent_profiles.is_empty());
    // A late copy of an older heartbeat (sent again to another node) does not roll it back.
    let (state, _) =
        run(vec![Command::SetFormat { format: 9 }, with(&fetch, 2_000), with(&AgentProfile::default(), 1_000)]);
    assert_eq!(state.agent_profile(1), fetch);
    let (state, _) = run(vec![
        Command::SetFormat { format: 9 },
        with(&fetch, 1_000),
        Command::AgentLeave { agent_id: 1, now_ms: 2_000 },
    ]);
    assert!(state.agent_profiles.is_empty(), "gone with the agent");

    for bad in [
        AgentProfile {
            roles: crate::state::AgentRoles { produce: false, fetch: false, jobs: false },
            group: String::new(),
        },
        AgentProfile { roles: crate::state::AgentRoles::ALL, group: "no spaces".into() },
        AgentProfile { roles: crate::state::AgentRoles::ALL, group: "g".repeat(65) },
    ] {
        let (_, outcomes) = run(vec![Command::SetFormat { format: 9 }, with(&bad, 1_000)]);
        assert!(matches!(outcomes[1], Err(CommandError::InvalidCommit(_))), "{bad:?}: {:?}", outcomes[1]);
    }
    assert_eq!("jobs, fetch".parse::<crate::state::AgentRoles>().map(|r| r.to_string()), Ok("fetch,jobs".into()));
    assert!("".parse::<crate::state::AgentRoles>().is_err() && "store".parse::<crate::state::AgentRoles>().is_err());
}

/// The pool's desired size sums the live agents' utilizations (an agent without a recent report
/// counts as at target) and rounds up.
#[test]
fn the_desired_pool_size_sums_live_agents_utilizations() {
    let agent = |id| crate::state::AgentInfo { agent_id: id, host: "10.0.0.1".into(), port: 9092, zone: None };
    let heartbeat = |id, now_ms: i64| Command::AgentHeartbeat { agent: agent(id).into(), now_ms };
    let load = |id, milli, now_ms| Command::ReportAgentLoad { agent_id: id, utilization_milli: milli, now_ms };
    let (state, outcomes) = run(vec![
        heartbeat(1, 1_000),
        heartbeat(2, 1_000),
        heartbeat(3, 1_000),
        load(1, 500, 1_000),
        load(2, 600, 1_000),
        load(9, 900, 1_000),
    ]);
    assert!(matches!(outcomes.last(), Some(Err(CommandError::InvalidCommit(_)))), "unknown agents report nothing");
    assert_eq!(state.desired_agents(2_000, 10_000), 3, "0.5 + 0.6 + 1 (no report) rounds up to 3");
    let (state, _) = run(vec![heartbeat(1, 1_000), heartbeat(2, 1_000), load(1, 300, 1_000), load(2, 400, 1_000)]);
    assert_eq!(state.desired_agents(2_000, 10_000), 1);
    assert_eq!(state.desired_agents(70_000, 100_000), 2, "reports over a minute old count as at target");
}

/// A draining agent leaves: it is gone at once with its job lease, a late copy of a heartbeat
/// it sent before leaving does not bring it back, and the same agent started again rejoins.
#[test]
fn an_agent_that_left_stays_gone_until_it_heartbeats_again() {
    let agent = |id| crate::state::AgentInfo { agent_id: id, host: "10.0.0.1".into(), port: 9092, zone: None };
    let heartbeat = |id, now_ms: i64| Command::AgentHeartbeat { agent: agent(id).into(), now_ms };
    let mut commands = vec![
        heartbeat(1, 1_000),
        heartbeat(2, 1_000),
        Command::AcquireJobLease { agent_id: 1, now_ms: 1_000, duration_ms: 90_000 },
        Command::AgentLeave { agent_id: 1, now_ms: 2_000 },
        heartbeat(1, 1_900),
    ];
    let (state, _) = run(commands.clone());
    assert_eq!(state.agents.keys().copied().collect::<Vec<_>>(), vec![2]);
    assert_eq!(state.job_lease, None, "the lease is free for another agent");
    commands.push(Command::AcquireJobLease { agent_id: 2, now_ms: 2_500, duration_ms: 90_000 });
    commands.push(heartbeat(1, 30_000));
    let (state, outcomes) = run(commands);
    assert!(outcomes.iter().all(Result::is_ok));
    assert_eq!(state.agents.keys().copied().collect::<Vec<_>>(), vec![1, 2], "started again, it rejoins");
    assert!(state.agents_left.is_empty());
}

/// Where the golden files of the persisted formats live. The test runner's
/// `CARGO_MANIFEST_DIR` first: cargo reuses a test binary built in another checkout of the same
/// sources, whose compile-time path may no longer exist.
pub(crate) fn golden_dir() -> std::path::PathBuf {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
    crate_dir.join("tests").join("golden")
}

/// A fixed, varied command sequence: what the golden files of the current format are made from.
fn golden_commands() -> Vec<Command> {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut commands = vec![
        Command::InitCluster { cluster_id: "golden".into() },
        Command::InitScramDecoyKey { key: vec![7; 32] },
        Command::SetBrokerConfigs { configs: [("log.retention.ms".to_owned(), "3600000".to_owned())].into() },
        Command::CreateTenant { name: "tenant0".into(), now_ms: 1 },
        Command::SetTenantQuotas {
            tenant: "tenant0".into(),
            quotas: crate::state::TenantQuotas { produce_bytes_per_sec: Some(1 << 20), ..Default::default() }.into(),
        },
        Command::SetTenantCorsOrigins { tenant: "tenant0".into(), origins: vec!["https://app.example".into()] },
        Command::CreateTopic {
            name: "tenant0#1~t2".into(),
            topic_id: topic_id(2),
            partition_count: 2,
            configs: BTreeMap::new(),
        },
    ];
    // Every kind of command, then a stretch without deletions so the final state holds some
    // of everything (topics, groups, tenants, users, keys, ACLs, producers).
    for i in 0..1200 {
        if let Ok(tree) = arb_command().new_tree(&mut runner) {
            let command = tree.current();
            let deletes = matches!(
                command,
                Command::DeleteTopic { .. }
                    | Command::DeleteTenant { .. }
                    | Command::DeleteGroup { .. }
                    | Command::DeleteUser { .. }
                    | Command::DeleteApiKey { .. }
                    | Command::DeleteAcls { .. }
                    | Command::DeleteOffsets { .. }
                    | Command::DeleteScramCredential { .. }
            );
            if i < 600 || !deletes {
                commands.push(command);
            }
        }
    }
    commands
}

/// Format 4's commands: [`golden_commands`], then a tenant with some of everything each format
/// up to 4 added (the golden files of format 4 were made from these).
fn golden_commands_through_format_4() -> Vec<Command> {
    let mut commands = golden_commands();
    // Then a tenant of format 2 with some of everything, whatever the random part left.
    let (prefix, _) = run(commands.clone());
    let key = crate::namespace::namespace_key("golden", prefix.last_tenant_id + 1);
    let credential = crate::state::ScramCredential {
        salt: vec![1; 16],
        iterations: 4096,
        stored_key: vec![2; 32],
        server_key: vec![3; 32],
    };
    commands.extend([
        Command::CreateTenant { name: "golden".into(), now_ms: 2 },
        Command::UpsertScramCredential {
            user: "golden-user".into(),
            tenant: "golden".into(),
            mechanism: crate::state::ScramMechanism::Sha256,
            credential: credential.into(),
        },
        Command::CreateApiKey {
            key_id: "golden-key".into(),
            record: crate::state::stored::ApiKeyRecord {
                tenant: "golden".into(),
                user: "golden-user".into(),
                secret_sha256: vec![5; 32],
                created_ms: 2,
                expires_ms: None,
            },
        },
        Command::SetApiKeyQuotas {
            key_id: "golden-key".into(),
            quotas: crate::state::ApiKeyQuotas { requests_per_sec: Some(10), ..Default::default() }.into(),
        },
        Command::CreateTopic {
            name: format!("{key}~orders"),
            topic_id: uuid::Uuid::from_u128(0x601d),
            partition_count: 2,
            configs: BTreeMap::new(),
        },
        Command::InitProducerId {
            transactional_id: None,
            transaction_timeout_ms: 10_000,
            expected: None,
            now_ms: 2,
            tenant: Some(key.clone()),
        },
        // Format 3: a registry with a reference, a soft delete, configs and a mode.
        Command::SetRegistryConfig {
            namespace: key.clone(),
            subject: None,
            config: Some(crate::state::stored::RegistryConfig {
                compatibility: Some(crate::state::Compatibility::Full),
                normalize: Some(true),
            }),
        },
        golden_schema(&key, "golden-common", "{\"type\":\"fixed\",\"name\":\"Id\",\"size\":16}", vec![], 0),
        golden_schema(
            &key,
            "golden-value",
            "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"id\",\"type\":\"Id\"}]}",
            vec![crate::state::SchemaReference { name: "Id".into(), subject: "golden-common".into(), version: 1 }],
            0,
        ),
        golden_schema(&key, "golden-value", "\"string\"", vec![], 1),
        Command::DeleteSchemaVersions {
            namespace: key.clone(),
            subject: "golden-value".into(),
            version: Some(2),
            permanent: false,
        },
        Command::SetRegistryMode {
            namespace: key.clone(),
            subject: Some("golden-common".into()),
            mode: Some(crate::state::RegistryMode::ReadOnly),
            force: false,
        },
    ]);
    // Format 4: a transaction ended by EndTxn of transaction version 2.
    let (before, _) = run(commands.clone());
    let (txn, producer_id) = (format!("{key}~txn"), before.next_producer_id);
    let producer = crate::command::ProducerIdEpoch { producer_id, producer_epoch: 0 };
    commands.extend([
        Command::InitProducerId {
            transactional_id: Some(txn.clone()),
            transaction_timeout_ms: 10_000,
            expected: None,
            now_ms: 3,
            tenant: Some(key.clone()),
        },
        Command::AddPartitionsToTxn {
            transactional_id: txn.clone(),
            producer,
            partitions: vec![(uuid::Uuid::from_u128(0x601d), 0)],
            now_ms: 3,
        },
        Command::EndTxnV2 { transactional_id: txn, producer, commit: true, now_ms: 4 },
    ]);
    commands
}

/// Commands of every format up to 5: a varied history.
fn golden_commands_through_format_5() -> Vec<Command> {
    let mut commands = golden_commands_through_format_4();
    // Format 5: a table topic with two table commits, the second starting a new generation.
    let table_topic = uuid::Uuid::from_u128(0x7ab1e);
    let configs = BTreeMap::from([("floe.table.enable".to_owned(), "true".to_owned())]);
    let batch = BatchSummary { offset_count: 3, timestamp_max: 5, base_sequence: -1 };
    let range = |from, to| crate::state::TableRange { partition: 0, from, to };
    let table_commit = |base_version, uuid: u8, ranges, new_generation| {
        Command::CommitTableSnapshot(crate::state::TableCommit {
            topic_id: table_topic,
            table_uuid: [uuid; 16],
            base_version,
            metadata_location: format!("file:///golden/tables/{uuid}/metadata/{base_version}.metadata.json"),
            dead_letter_location: None,
            ranges,
            new_generation,
            now_ms: 6,
        })
    };
    commands.extend([
        Command::CreateTopic { name: "golden-table".into(), topic_id: table_topic, partition_count: 1, configs },
        Command::CommitSegment(SegmentCommit {
            key: "golden-table-object".into(),
            object_bytes: 124,
            chunks: vec![ChunkCommit {
                topic_id: table_topic,
                partition: 0,
                byte_start: 0,
                byte_len: 100,
                crc32c: 7,
                batches: vec![batch, batch],
                producer: None,
                uncompressed_bytes: 300,
            }],
        }),
        table_commit(0, 1, vec![range(0, 3)], false),
        table_commit(1, 2, vec![range(3, 6)], true),
    ]);
    commands
}

fn golden_commands_through_format_6() -> Vec<Command> {
    let mut commands = golden_commands_through_format_5();
    // Format 6: usage reports (one sent twice), minutes closed, an hour exported.
    let minute = 29_000_000 * crate::state::MINUTE_MS;
    let report = |seq| {
        Command::ReportUsage(crate::state::UsageReport {
            reporter: "golden-reporter".into(),
            seq,
            entries: vec![crate::state::UsageEntry {
                minute_ms: minute,
                tenant: "golden".into(),
                meters: vec![(crate::state::Meter::FetchedBytes, 1000), (crate::state::Meter::FetchedRecords, 10)],
            }],
            now_ms: minute + 5_000,
        })
    };
    let agent = |agent_id| crate::state::AgentInfo { agent_id, host: "10.0.0.9".into(), port: 9092, zone: None };
    commands.extend([
        Command::AgentHeartbeat { agent: agent(7).into(), now_ms: minute },
        Command::AgentHeartbeat { agent: agent(8).into(), now_ms: minute },
        Command::ReportAgentLoad { agent_id: 7, utilization_milli: 1250, now_ms: minute + 1 },
        Command::AgentLeave { agent_id: 8, now_ms: minute + 2 },
        report(1),
        report(1),
        Command::CloseUsageMinute { now_ms: minute + 70_000 },
        Command::CloseUsageMinute { now_ms: minute + 130_000 },
        Command::MarkUsageExported(crate::state::UsageExport {
            hour_ms: minute / crate::state::HOUR_MS * crate::state::HOUR_MS,
            revision: 1,
            changes: 2,
        }),
    ]);
    commands
}

fn golden_commands_through_format_7() -> Vec<Command> {
    let mut commands = golden_commands_through_format_6();
    // Format 7: a share group acquires, acknowledges, releases and expires locks.
    let (group, topic) = ("golden-share".to_owned(), topic_id(40));
    commands.extend([create("golden-share-topic", 40, 1), commit("golden-share-object", &[(40, 0, &[4])])]);
    let settings = crate::state::ShareSettings {
        lock_duration_ms: 30_000,
        delivery_limit: 5,
        max_in_flight: 2_000,
        start_at_earliest: true,
    };
    let acquire = |member: &str| crate::state::ShareOp::Acquire {
        key: (group.clone(), topic, 0),
        member: member.into(),
        max_records: 2,
        read_committed: false,
        settings,
    };
    let ack = |first, last, ack| crate::state::AckBatch { first, last, ack };
    commands.extend([
        Command::ShareUpdate { now_ms: 1_000, ops: vec![acquire("m1"), acquire("m2")] },
        Command::ShareUpdate {
            now_ms: 2_000,
            ops: vec![crate::state::ShareOp::Acknowledge {
                key: (group.clone(), topic, 0),
                member: "m1".into(),
                batches: vec![ack(0, 0, crate::state::ShareAck::Accept), ack(1, 1, crate::state::ShareAck::Release)],
            }],
        },
        Command::ShareUpdate { now_ms: 40_000, ops: vec![crate::state::ShareOp::ExpireLocks] },
        Command::ShareUpdate { now_ms: 41_000, ops: vec![acquire("m3")] },
    ]);
    commands
}

fn golden_commands_through_format_8() -> Vec<Command> {
    let mut commands = golden_commands_through_format_7();
    // Format 8: configs set on groups (one replaced, one removed), and a share partition
    // started at an offset.
    let configs = |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    commands.extend([
        Command::SetFormat { format: 8 },
        Command::SetGroupConfigs {
            group_id: "golden-share".into(),
            configs: configs(&[("share.isolation.level", "read_committed"), ("share.auto.offset.reset", "earliest")]),
        },
        Command::SetGroupConfigs {
            group_id: "golden-other".into(),
            configs: configs(&[("consumer.session.timeout.ms", "50000")]),
        },
        Command::SetGroupConfigs {
            group_id: "golden-share".into(),
            configs: configs(&[("share.auto.offset.reset", "by_duration:PT1H")]),
        },
        Command::SetGroupConfigs {
            group_id: "golden-gone".into(),
            configs: configs(&[("share.delivery.count.limit", "3")]),
        },
        Command::SetGroupConfigs { group_id: "golden-gone".into(), configs: BTreeMap::new() },
        Command::ShareUpdate {
            now_ms: 42_000,
            ops: vec![crate::state::ShareOp::StartAt { key: ("golden-started".into(), topic_id(40), 0), offset: 1 }],
        },
    ]);
    commands
}

fn golden_commands_through_format_9() -> Vec<Command> {
    let mut commands = golden_commands_through_format_8();
    // Format 9: agents' profiles: a fetch agent of a group, one back to the default profile, one
    // that leaves.
    let beat = |agent_id, profile, now_ms| Command::AgentHeartbeatWithProfile {
        agent: golden_agent(agent_id).into(),
        profile,
        now_ms,
    };
    commands.extend([
        Command::SetFormat { format: 9 },
        beat(11, golden_profile("fetch", "edge").into(), 50_000),
        beat(12, golden_profile("produce,jobs", "").into(), 50_000),
        beat(13, golden_profile("jobs", "batch").into(), 50_000),
        beat(12, crate::state::AgentProfile::default().into(), 51_000),
        Command::AgentLeave { agent_id: 13, now_ms: 52_000 },
    ]);
    commands
}

fn golden_agent(agent_id: i32) -> crate::state::AgentInfo {
    crate::state::AgentInfo { agent_id, host: "10.0.0.10".into(), port: 9092, zone: Some("zone-a".into()) }
}

fn golden_profile(roles: &str, group: &str) -> crate::state::AgentProfile {
    crate::state::AgentProfile { roles: roles.parse().expect("roles"), group: group.into() }
}

fn golden_commands_through_format_10() -> Vec<Command> {
    let mut commands = golden_commands_through_format_9();
    // Format 10: peer listeners: two agents name theirs, one drops it, one leaves.
    let beat = |agent_id, peer: Option<&str>, now_ms| Command::AgentHeartbeatWithPeer {
        agent: golden_agent(agent_id).into(),
        profile: golden_profile("fetch", "").into(),
        peer_addr: peer.map(str::to_owned),
        now_ms,
    };
    commands.extend([
        Command::SetFormat { format: 10 },
        beat(21, Some("10.0.0.21:9096"), 60_000),
        beat(22, Some("[fd00::22]:9096"), 60_000),
        beat(23, Some("10.0.0.23:9096"), 60_000),
        beat(22, None, 61_000),
        Command::AgentLeave { agent_id: 23, now_ms: 62_000 },
    ]);
    commands
}

/// Format 11's commands: a link with SASL that mirrors a topic with a gap and a source
/// transaction, copies a group's offsets and reports; a second link promoted and deleted.
fn golden_link_commands() -> Vec<Command> {
    use crate::state::{LinkConfig, LinkReport, LinkSasl, MirrorChunk, MirrorCommit, MirrorTxnEvent};
    // Not of `topic_id`'s pattern, which the commands before use.
    let mirrored_id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
    let adopted_id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_ce00);
    let config = |topics: &str| LinkConfig {
        bootstrap: "kafka-a.example:9092,kafka-b.example:9092".into(),
        tls: true,
        tls_ca_pem: Some("-----BEGIN CERTIFICATE-----\nZ29sZGVu\n-----END CERTIFICATE-----\n".into()),
        sasl: Some(LinkSasl { mechanism: "SCRAM-SHA-512".into(), username: "mirror".into(), password: "pw".into() }),
        topics: topics.into(),
        groups: Some("app-.*".into()),
        sync_configs: true,
        tenant: None,
        acls: false,
    };
    let chunk = |base_offset, last_offset, transactions| MirrorChunk {
        topic_id: mirrored_id,
        partition: 0,
        byte_start: 0,
        byte_len: 200,
        crc32c: 0x1234_5678,
        base_offset,
        last_offset,
        timestamp_max: 70_000 + last_offset,
        record_count: 9,
        transactions,
    };
    let commit = |key: &str, chunk| {
        Command::MirrorCommit(MirrorCommit {
            link: "east".into(),
            key: key.into(),
            object_bytes: 224,
            chunks: vec![chunk],
        })
    };
    let offsets = vec![OffsetCommit {
        topic: "mirrored".into(),
        partition: 0,
        offset: 12,
        leader_epoch: -1,
        metadata: "m".into(),
    }];
    vec![
        Command::SetFormat { format: 11 },
        Command::SetLink { name: "east".into(), config: config("mirrored|other").into(), now_ms: 70_000 },
        Command::CreateMirrorTopic {
            link: "east".into(),
            name: "mirrored".into(),
            topic_id: mirrored_id,
            partition_count: 1,
            configs: [("retention.ms".to_owned(), "86400000".to_owned())].into(),
        },
        commit("links/east/1", chunk(100, 109, vec![MirrorTxnEvent::Data { producer_id: 77, offset: 105 }])),
        commit(
            "links/east/2",
            chunk(
                115,
                120,
                vec![MirrorTxnEvent::Marker { producer_id: 77, producer_epoch: 2, offset: 115, commit: false }],
            ),
        ),
        Command::UpdateMirrorTopic { link: "east".into(), topic_id: mirrored_id, partition_count: 2, configs: None },
        Command::MirrorGroupOffsets {
            link: "east".into(),
            group_id: "app-1".into(),
            offsets: crate::state::stored::each_into(offsets),
            now_ms: 70_100,
        },
        Command::ReportLink(LinkReport {
            link: "east".into(),
            source_ends: vec![(mirrored_id, 0, 130), (mirrored_id, 1, 0)],
            error: Some("source broker kafka-b.example:9092 unreachable".into()),
            deleted_at_source: vec!["gone".into()],
            now_ms: 70_200,
        }),
        Command::SetLink { name: "west".into(), config: config("w.*").into(), now_ms: 70_300 },
        Command::PromoteLink { name: "west".into(), now_ms: 70_400 },
        Command::SetLink { name: "south".into(), config: config("s.*").into(), now_ms: 70_500 },
        Command::DeleteLink { name: "south".into() },
        // Failback: an ordinary topic adopted by a link back, cut inside its one chunk.
        Command::CreateTopic {
            name: "adopted".into(),
            topic_id: adopted_id,
            partition_count: 1,
            configs: BTreeMap::new(),
        },
        Command::CommitSegment(SegmentCommit {
            key: "segments/adopted".into(),
            object_bytes: 124,
            chunks: vec![ChunkCommit {
                topic_id: adopted_id,
                partition: 0,
                byte_start: 0,
                byte_len: 100,
                crc32c: 5,
                batches: vec![
                    BatchSummary { offset_count: 3, timestamp_max: 70_600, base_sequence: -1 },
                    BatchSummary { offset_count: 2, timestamp_max: 70_601, base_sequence: -1 },
                ],
                producer: None,
                uncompressed_bytes: 100,
            }],
        }),
        Command::SetLink { name: "back".into(), config: config("adopted").into(), now_ms: 70_700 },
        Command::AdoptMirrorTopic { link: "back".into(), topic_id: adopted_id, fork_offsets: vec![3] },
        Command::TruncateMirrorPartition {
            link: "back".into(),
            topic_id: adopted_id,
            partition: 0,
            offset: 3,
            cut: Some(crate::state::ChunkCut { byte_len: 60, crc32c: 6 }),
        },
    ]
}

/// The persisted formats as of format 15 (the current one): the archive's state and command
/// objects (the Raft snapshot and log hold the same postcard encodings of `State` and
/// `Command`). These bytes must keep decoding to what they encode: a change to `State` or
/// `Command` that breaks this test changes a format, and needs a new format version and a
/// reader for this one (then write the new version's golden files with `FLOE_WRITE_GOLDEN=1`,
/// keeping these).
#[test]
fn golden_files_of_format_15_still_decode_and_replay() {
    let (state_path, log_path) = (golden_dir().join("state-v15.snap"), golden_dir().join("commands-v15.cmds"));
    if std::env::var_os("FLOE_WRITE_GOLDEN").is_some() {
        let mut commands = golden_commands_through_format_10();
        commands.extend(golden_link_commands());
        let (before, _) = run(commands.clone());
        commands.extend(golden_commands_of_format_12(&before));
        let (before, _) = run(commands.clone());
        commands.extend(golden_commands_of_format_13(&before));
        let (before, _) = run(commands.clone());
        commands.extend(golden_commands_of_format_14(&before));
        let (before, _) = run(commands.clone());
        let added = golden_commands_of_format_15(&before);
        commands.extend(added.clone());
        let (state, outcomes) = run(commands.clone());
        let failed: Vec<_> =
            outcomes[outcomes.len() - added.len()..].iter().zip(added).filter(|(o, _)| o.is_err()).collect();
        assert!(failed.is_empty(), "every command of format 15 applies: {failed:?}");
        let indexed: Vec<(u64, &Command)> = commands.iter().enumerate().map(|(i, c)| (i as u64 + 1, c)).collect();
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&state_path, crate::archive::encode_state(&state).expect("encode")).expect("write");
        std::fs::write(&log_path, crate::archive::encode_log(&indexed).expect("encode")).expect("write");
    }
    let state_bytes = std::fs::read(&state_path).expect("the golden state file");
    let log_bytes = std::fs::read(&log_path).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 15 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 15 commands no longer decode");
    assert_eq!(crate::archive::encode_state(&state).ok(), Some(state_bytes), "format 15 state encodes differently");
    let indexed: Vec<(u64, &Command)> = log.iter().map(|(i, c)| (*i, c)).collect();
    assert_eq!(crate::archive::encode_log(&indexed).ok(), Some(log_bytes), "format 15 commands encode differently");
    let answered: Vec<&String> =
        state.recent_commit_keys.iter().filter(|k| super::offsets::segment_key_drawn_ms(k).is_some()).collect();
    assert!(
        state.format == 15
            && answered == [&golden_drawn_key(2)]
            && !state.recent_commits.contains_key(&golden_drawn_key(1)),
        "the answer past its deadline went, the one in time stayed: {answered:?}"
    );
    assert_eq!(state.recent_commit_chunks, state.recent_commits.values().map(|a| a.len()).sum::<usize>());
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 15 commands gives another state");
}

/// Format 14's files (runs of many partitions in one compacted object): its state reads, and
/// its commands replay to that state.
#[test]
fn golden_files_of_format_14_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v14.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v14.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 14 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 14 commands no longer decode");
    let compacted = state.objects.values().find(|o| o.key == "golden-v14-compacted");
    assert!(
        state.format == 14 && compacted.is_some_and(|o| o.reference_count == 1),
        "the compacted object holds the one run that still matched: {compacted:?}"
    );
    check_invariants(&state);
    let (replayed, outcomes) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(outcomes.last(), Some(&Ok(Outcome::RunsCompacted { swapped: 1, conflicts: 1 })));
    assert_eq!(replayed, state, "replaying format 14 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 15's golden keys: agents' keys drawn a minute apart, the first just past its deadline
/// when the last minute closes.
fn golden_drawn_key(n: u64) -> String {
    drawn_key(GOLDEN_V15_MS + n as i64 * MINUTE_MS, n)
}
const GOLDEN_V15_MS: i64 = 29_000_000 * MINUTE_MS;

/// Two commits with agents' keys, then the leader's time past the first one's deadline: its
/// answer and key go, the second's answer stays (format 15).
fn golden_commands_of_format_15(before: &State) -> Vec<Command> {
    let topic = before
        .topics
        .values()
        .find(|t| t.partitions.len() >= 2 && before.mirror_link(t.topic_id).is_none())
        .expect("the golden commands keep a topic of two partitions that is not a mirror");
    let chunk = |n: i64| ChunkCommit {
        topic_id: topic.topic_id,
        partition: 0,
        byte_start: 0,
        byte_len: 50,
        crc32c: 0xc0ff_ee00 + n as u32,
        batches: vec![BatchSummary { offset_count: 1, timestamp_max: GOLDEN_V15_MS + n, base_sequence: -1 }],
        producer: None,
        uncompressed_bytes: 50,
    };
    let segment = |n: u64| {
        Command::CommitSegment(SegmentCommit {
            key: golden_drawn_key(n),
            object_bytes: 74,
            chunks: vec![chunk(n as i64)],
        })
    };
    vec![
        Command::SetFormat { format: 15 },
        Command::CloseUsageMinute { now_ms: GOLDEN_V15_MS + MINUTE_MS },
        segment(1),
        segment(2),
        Command::CloseUsageMinute { now_ms: GOLDEN_V15_MS + MINUTE_MS + SEGMENT_COMMIT_WINDOW_MS + MINUTE_MS },
    ]
}

/// Format 13's files (packed segment commits): its state reads, and its commands replay to that
/// state.
#[test]
fn golden_files_of_format_13_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v13.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v13.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 13 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 13 commands no longer decode");
    let packed: Vec<_> = log
        .iter()
        .filter_map(|(_, c)| match c {
            Command::CommitSegmentsPacked(crate::command::PackedCommits(commits)) => Some(commits),
            _ => None,
        })
        .collect();
    let [commits] = packed.as_slice() else { panic!("one packed commit in the golden log: {}", packed.len()) };
    let committed = commits.iter().all(|c| state.recent_commits.get(&c.key).is_some_and(|a| !a.is_empty()));
    assert!(state.format == 13 && commits.len() == 2 && committed, "the packed commits applied: {commits:?}");
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 13 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// The two chunks a packed commit of format 13 gave partition 1 compacted into one object, beside
/// a run of partition 0 that does not match what its index holds (format 14).
fn golden_commands_of_format_14(before: &State) -> Vec<Command> {
    let topic = before
        .topics
        .values()
        .find(|t| t.partitions.len() >= 2 && before.mirror_link(t.topic_id).is_none())
        .expect("the golden commands keep a topic of two partitions that is not a mirror");
    let tail: Vec<&crate::state::IndexEntry> = topic.partitions[1].index.iter().rev().take(2).collect();
    let [last, first] = tail.as_slice() else { panic!("format 13's commits gave partition 1 two entries") };
    let objects_sum = tail.iter().filter_map(|e| e.object_id()).fold(0u64, u64::wrapping_add);
    let matching = crate::command::CompactedChunk {
        topic_id: topic.topic_id,
        partition: 1,
        base_offset: first.base_offset,
        last_offset: last.last_offset,
        entries: 2,
        objects_sum,
        byte_start: 0,
        byte_len: 180,
        crc32c: 0xfeed_f00d,
    };
    let stale = crate::command::CompactedChunk {
        partition: 0,
        base_offset: 0,
        last_offset: 1,
        objects_sum: 1,
        byte_start: 180,
        byte_len: 20,
        ..matching.clone()
    };
    vec![
        Command::SetFormat { format: 14 },
        Command::CompactRuns(crate::command::CompactedObject {
            key: "golden-v14-compacted".into(),
            object_bytes: 224,
            runs: vec![matching, stale],
        }),
    ]
}

/// Two flushes' segment commits in the packed encoding: one of plain chunks over two
/// partitions, one with an idempotent producer's chunk (format 13).
fn golden_commands_of_format_13(before: &State) -> Vec<Command> {
    let topic = before
        .topics
        .values()
        .find(|t| t.partitions.len() >= 2 && before.mirror_link(t.topic_id).is_none())
        .expect("the golden commands keep a topic of two partitions that is not a mirror");
    let plain = |partition, byte_start, timestamp_max| ChunkCommit {
        topic_id: topic.topic_id,
        partition,
        byte_start,
        byte_len: 90,
        crc32c: 0xdead_beef,
        batches: vec![BatchSummary { offset_count: 1, timestamp_max, base_sequence: -1 }],
        producer: None,
        uncompressed_bytes: 90,
    };
    let first = SegmentCommit {
        key: "golden-v13-a".into(),
        object_bytes: 204,
        chunks: vec![plain(0, 0, 90_000), plain(1, 90, 90_001)],
    };
    let mut second =
        SegmentCommit { key: "golden-v13-b".into(), object_bytes: 300, chunks: vec![plain(1, 24, 89_999)] };
    second.chunks[0].uncompressed_bytes = 240;
    vec![
        Command::SetFormat { format: 13 },
        Command::CommitSegmentsPacked(crate::command::PackedCommits(vec![first, second].into())),
    ]
}

/// Format 12's files (a link's tenant and ACL copying): its state reads, and its commands
/// replay to that state.
#[test]
fn golden_files_of_format_12_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v12.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v12.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 12 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 12 commands no longer decode");
    let tenant_link = &state.links["tenant-in"].config;
    let ns = state.tenant_namespace("tenant0").expect("the tenant");
    let mirrored = state.topic_by_name(&ns.scope("t-orders")).expect("the tenant's mirror topic");
    assert!(
        state.format == 12
            && tenant_link.tenant.as_deref() == Some("tenant0")
            && tenant_link.acls
            && state.mirror_link(mirrored.topic_id) == Some("tenant-in")
            && state.links["east"].config.tenant.is_none(),
        "a varied state: {:?} links",
        state.links,
    );
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 12 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// A link into a tenant's namespace that copies ACLs (format 12).
fn golden_commands_of_format_12(before: &State) -> Vec<Command> {
    let ns = before.tenant_namespace("tenant0").expect("the golden commands keep tenant0");
    let config = crate::state::LinkConfig {
        bootstrap: "kafka-c.example:9092".into(),
        tls: false,
        tls_ca_pem: None,
        sasl: None,
        topics: "t-.*".into(),
        groups: Some("t-app".into()),
        sync_configs: false,
        tenant: Some("tenant0".into()),
        acls: true,
    };
    vec![
        Command::SetFormat { format: 12 },
        Command::SetLink { name: "tenant-in".into(), config: config.into(), now_ms: 80_000 },
        Command::CreateMirrorTopic {
            link: "tenant-in".into(),
            name: ns.scope("t-orders"),
            topic_id: uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_ce01),
            partition_count: 2,
            configs: BTreeMap::new(),
        },
    ]
}

/// Format 11's files (links, before their tenant and ACL copying): its links read with neither,
/// and its commands replay to that state.
#[test]
fn golden_files_of_format_11_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v11.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v11.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 11 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 11 commands no longer decode");
    let mirrored = state.topic_by_name("mirrored").expect("the mirror topic");
    assert!(
        state.format == 11
            && state.links.len() == 3
            && state.links.values().all(|l| l.config.tenant.is_none() && !l.config.acls)
            && state.links["east"].config.groups.as_deref() == Some("app-.*")
            && state.topic_by_name("adopted").is_some_and(|t| t.partitions[0].next_offset == 3)
            && state.mirror_link(mirrored.topic_id) == Some("east")
            && mirrored.partitions[0].next_offset == 121
            && mirrored.partitions[0].aborted_transactions.len() == 1
            && state.links["east"].error.is_some()
            && state.agent_peer(21) == Some("10.0.0.21:9096"),
        "a varied state: {:?} links",
        state.links,
    );
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 11 commands gives another state");
}

/// Format 10's files (before links): its state reads with none, and its commands, a prefix of
/// today's, replay to that state.
#[test]
fn golden_files_of_format_10_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v10.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v10.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 10 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 10 commands no longer decode");
    assert!(state.links.is_empty() && state.mirror_topics.is_empty());
    assert!(
        state.format == 10 && state.agent_peers.len() == 1 && state.agent_peer(21) == Some("10.0.0.21:9096"),
        "a varied state: {:?} agent peers",
        state.agent_peers,
    );
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 10 commands gives another state");
}

/// Format 9's files (before peer listeners): its state reads with none, and its commands, a
/// prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_9_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v9.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v9.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 9 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 9 commands no longer decode");
    assert!(state.agent_peers.is_empty());
    assert!(
        state.format == 9
            && state.agent_profiles.len() == 1
            && state.agent_profile(11) == golden_profile("fetch", "edge")
            && state.agent_profile(12) == crate::state::AgentProfile::default()
            && !state.agents.contains_key(&13)
            && state.group_configs.len() == 2,
        "a varied state: {:?} agent profiles",
        state.agent_profiles,
    );
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 9 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 8's files (before agents' profiles): its state reads with none, and its commands, a
/// prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_8_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v8.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v8.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 8 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 8 commands no longer decode");
    assert!(state.agent_profiles.is_empty());
    assert!(
        state.group_configs.len() == 2
            && state.format == 8
            && state.group_config("golden-share", "share.auto.offset.reset") == Some("by_duration:PT1H")
            && state.group_config("golden-share", "share.isolation.level") == Some("read_uncommitted")
            && state.share_partitions.keys().any(|(g, _, _)| g == "golden-started")
            && state.share_partitions.values().any(|s| s.ranges.values().any(|r| r.delivery_count == 2)),
        "the group configs of format 8: {:?}",
        state.group_configs,
    );
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 8 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 7's files (before group configs): its state reads with none, and its commands, a
/// prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_7_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v7.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v7.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 7 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 7 commands no longer decode");
    assert!(state.group_configs.is_empty());
    assert!(state.share_partitions.values().any(|s| s.start_offset == 1 && s.lock_deadline_ms.is_some()));
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 7 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 6's files (before share groups): its state reads with no share partitions, and its
/// commands, a prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_6_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v6.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v6.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 6 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 6 commands no longer decode");
    assert!(state.share_partitions.is_empty());
    assert!(state.usage.minutes.len() == 2 && state.agent_loads.get(&7).is_some_and(|l| l.utilization_milli == 1250));
    check_invariants(&state);
    let (replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert_eq!(replayed, state, "replaying format 6 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 5's files (before usage metering): its state reads with no usage, its chunk commits
/// with their stored size as their uncompressed size, and its commands replay to that state
/// (apart from the usage the replay meters).
#[test]
fn golden_files_of_format_5_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v5.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v5.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 5 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 5 commands no longer decode");
    assert_eq!(state.usage, crate::state::UsageLedger::default());
    assert!(state.tables.values().any(|t| t.version == 2 && t.offsets == [6] && t.retired.len() == 1));
    let chunks: Vec<&ChunkCommit> = log
        .iter()
        .filter_map(|(_, c)| match c {
            Command::CommitSegment(commit) => Some(commit.chunks.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    assert!(!chunks.is_empty() && chunks.iter().all(|c| c.uncompressed_bytes == u64::from(c.byte_len)));
    check_invariants(&state);
    let (mut replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    assert!(!replayed.usage.open.is_empty(), "replayed commits are metered");
    replayed.usage = Default::default();
    assert_eq!(replayed, state, "replaying format 5 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 4's files (before table topics): its state reads with no tables, and its commands, a
/// prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_4_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v4.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v4.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 4 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 4 commands no longer decode");
    assert!(state.tables.is_empty());
    assert!(state.transactions.values().any(|t| t.state == crate::state::TxnState::CompleteCommit));
    check_invariants(&state);
    let (mut replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    replayed.usage = Default::default();
    assert_eq!(replayed, state, "replaying format 4 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

fn golden_schema(
    namespace: &str,
    subject: &str,
    text: &str,
    references: Vec<crate::state::SchemaReference>,
    subject_revision: u64,
) -> Command {
    Command::RegisterSchema(crate::state::SchemaRegistration {
        namespace: namespace.into(),
        subject: subject.into(),
        content: (crate::state::SchemaContent {
            schema_type: crate::state::SchemaType::Avro,
            text: text.into(),
            references,
        })
        .into(),
        import: None,
        checked_at: crate::state::RegistryRevision { subject: subject_revision, config: 1 },
        now_ms: 3,
    })
}

/// Format 3's files (before transaction version 2): its state is today's, and its commands, a
/// prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_3_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v3.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v3.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 3 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 3 commands no longer decode");
    assert!(state.registries.values().any(|r| r.schemas.len() > 2));
    check_invariants(&state);
    let (mut replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    replayed.usage = Default::default();
    assert_eq!(replayed, state, "replaying format 3 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
}

/// Format 2's files (before schema registries): its state reads with no registries, and its
/// commands, a prefix of today's, replay to that state.
#[test]
fn golden_files_of_format_2_still_decode_and_replay() {
    let state_bytes = std::fs::read(golden_dir().join("state-v2.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v2.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 2 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 2 commands no longer decode");
    assert!(state.registries.is_empty() && state.tenants.values().any(|t| t.id > 0));
    check_invariants(&state);
    let (mut replayed, _) = run(log.into_iter().map(|(_, c)| c).collect());
    replayed.usage = Default::default();
    assert_eq!(replayed, state, "replaying format 2 commands gives another state");
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state, "it re-encodes in this format");
    // A format-2 `RestoreState` holds a format-2 state.
    let tag = postcard::to_stdvec(&Command::RestoreState(Box::default())).expect("encode")[0];
    let mut restore = vec![tag];
    restore.extend_from_slice(&state_bytes[12..]);
    let decoded = crate::state::stored::decoding(2, || postcard::from_bytes::<Command>(&restore));
    assert_eq!(decoded.ok(), Some(Command::RestoreState(Box::new(state.into()))));
    assert!(postcard::from_bytes::<Command>(&restore).is_err(), "read as format 3 it does not decode");
}

/// Format 1's files (written before tenant ids): its state is read through `state::format1`,
/// keeping every stored name where it was, and its commands decode as they are.
#[test]
fn golden_files_of_format_1_still_decode() {
    let state_bytes = std::fs::read(golden_dir().join("state-v1.snap")).expect("the golden state file");
    let log_bytes = std::fs::read(golden_dir().join("commands-v1.cmds")).expect("the golden command file");
    let state = crate::archive::decode_state(&state_bytes).expect("format 1 state no longer decodes");
    let log = crate::archive::decode_log(&log_bytes).expect("format 1 commands no longer decode");
    assert!(log.len() > 1000, "{} commands", log.len());
    assert!(state.tenants.values().all(|t| t.id == 0) && state.last_tenant_id == 0);
    // Its tenants keep their bare names as namespace keys, so their topics stay theirs.
    assert_eq!(state.tenant_of_key("tenant0").map(|(name, _)| name), Some("tenant0"));
    assert_eq!(state.storage_quota_exceeded("tenant0~t2"), None);
    assert!(state.topic_ids.contains_key("tenant0~t2"));
    check_invariants(&state);
    // It re-encodes in the current format and reads back the same.
    let again = crate::archive::decode_state(&crate::archive::encode_state(&state).expect("encode")).expect("decode");
    assert_eq!(again, state);
    // A format-1 `RestoreState` (in a Raft log or archive log object of format 1) holds a
    // format-1 state: the command's tag, then the state's bytes.
    let tag = postcard::to_stdvec(&Command::RestoreState(Box::default())).expect("encode")[0];
    let mut restore = vec![tag];
    restore.extend_from_slice(&state_bytes[12..]);
    let decoded = crate::state::stored::decoding(1, || postcard::from_bytes::<Command>(&restore));
    assert_eq!(decoded.ok(), Some(Command::RestoreState(Box::new(state.clone().into()))));
    assert!(postcard::from_bytes::<Command>(&restore).is_err(), "read as format 3 it does not decode");
    // A tenant created after the upgrade gets an id, so a namespace no format-1 name is in.
    let mut upgraded = state;
    let next = upgraded.applied_index + 1;
    upgraded.apply(next, Command::CreateTenant { name: "newco".into(), now_ms: 0 }).expect("create");
    assert_eq!(upgraded.tenants["newco"].id, 1);
}

/// Answers are kept compactly when every chunk was appended, and stored exactly as the list of
/// results they stand for, so the change is invisible in snapshots and state copies.
#[test]
fn a_commit_answer_is_stored_as_the_results_it_stands_for() {
    use super::stored::Restate;
    use crate::command::CommittedChunk;
    let appended: Vec<CommittedChunk> = vec![Ok(0), Ok(17), Ok(5)];
    let mixed: Vec<CommittedChunk> = vec![Ok(3), Err(CommandError::UnknownTopicOrPartition), Ok(9)];
    for results in [appended.clone(), mixed.clone(), Vec::new()] {
        let answer = CommitAnswer::new(results.clone());
        assert_eq!(answer.chunks(), results);
        assert_eq!(answer.is_empty(), results.is_empty());
        let stored: Vec<CommittedChunk> = answer.clone().restate();
        assert_eq!(stored, results);
        let back: CommitAnswer = stored.restate();
        assert_eq!(back, answer);
    }
    assert!(matches!(CommitAnswer::new(appended), CommitAnswer::Appended(_)));
    assert!(matches!(CommitAnswer::new(mixed), CommitAnswer::Mixed(_)));
}

/// `entries_from` looks at the last few entries before a binary search; either way it starts at
/// the first entry ending at or after the offset, for indexes shorter and longer than its look.
#[test]
fn entries_from_starts_at_the_first_entry_reaching_the_offset() {
    for len in 0..20i64 {
        let mut p = Partition::default();
        // Entries of two offsets each, with a gap of one after every third (as compaction leaves).
        let mut base = 0;
        for i in 0..len {
            p.index.push_back(IndexEntry {
                base_offset: base,
                last_offset: base + 1,
                timestamp_max: 0,
                data: EntryData::Removed,
            });
            base += if i % 3 == 2 { 3 } else { 2 };
        }
        for offset in -1..base + 2 {
            let expected = p.index.iter().position(|e| e.last_offset >= offset);
            let got = p.entries_from(offset).next().map(|e| e.base_offset);
            assert_eq!(got, expected.map(|i| p.index[i].base_offset), "{len} entries, offset {offset}");
        }
    }
}
