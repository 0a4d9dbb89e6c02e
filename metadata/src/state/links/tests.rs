//! Links: mirror commits at source offsets, retries, gaps, transactions, refusals of other
//! writers, promotion, group offsets; and a property test that whatever a job sends, each
//! source offset is written at most once and the index stays a tiling of the log.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::super::tests::{check_invariants, create, topic_id};
use super::*;
use crate::command::{BatchSummary, ChunkCommit, Command, SegmentCommit};
use crate::state::{GroupMembership, MemberRecord, OffsetCommit};

const LINK: &str = "east";

fn config() -> LinkConfig {
    LinkConfig {
        bootstrap: "source.example:9092".into(),
        tls: false,
        tls_ca_pem: None,
        sasl: None,
        topics: "orders.*".into(),
        groups: Some(".*".into()),
        sync_configs: true,
        tenant: None,
        acls: false,
    }
}

/// A format-11 state with link `east`, mirror topic `orders` (topic 0, 2 partitions) and an
/// ordinary topic `local` (topic 1).
fn linked() -> State {
    let mut state = State::default();
    let commands = vec![
        Command::SetFormat { format: 11 },
        Command::SetLink { name: LINK.into(), config: config().into(), now_ms: 1 },
        Command::CreateMirrorTopic {
            link: LINK.into(),
            name: "orders".into(),
            topic_id: topic_id(0),
            partition_count: 2,
            configs: BTreeMap::new(),
        },
        create("local", 1, 1),
    ];
    for command in commands {
        let index = state.applied_index + 1;
        state.apply(index, command).expect("set up");
    }
    state
}

fn apply(state: &mut State, command: Command) -> Result<Outcome, CommandError> {
    let index = state.applied_index + 1;
    let outcome = state.apply(index, command);
    check_invariants(state);
    outcome
}

fn chunk(partition: i32, base_offset: i64, last_offset: i64) -> MirrorChunk {
    MirrorChunk {
        topic_id: topic_id(0),
        partition,
        byte_start: 0,
        byte_len: 100,
        crc32c: 7,
        base_offset,
        last_offset,
        timestamp_max: 1_000 + last_offset,
        record_count: u64::try_from(last_offset - base_offset + 1).unwrap_or(0),
        transactions: Vec::new(),
    }
}

fn mirror(key: &str, chunks: Vec<MirrorChunk>) -> Command {
    let object_bytes = 100 * chunks.len() as u64 + 24;
    let chunks = chunks.into_iter().enumerate().map(|(i, c)| MirrorChunk { byte_start: 100 * i as u64, ..c }).collect();
    Command::MirrorCommit(MirrorCommit { link: LINK.into(), key: key.into(), object_bytes, chunks })
}

fn mirrored(outcome: Result<Outcome, CommandError>) -> Vec<Result<bool, CommandError>> {
    match outcome {
        Ok(Outcome::Mirrored(chunks)) => chunks,
        other => panic!("not a mirror commit outcome: {other:?}"),
    }
}

fn log(state: &State, partition: i32) -> &crate::state::Partition {
    state.partition(topic_id(0), partition).expect("mirror partition")
}

#[test]
fn links_wait_for_format_11_and_names_and_configs_are_checked() {
    let mut state = State::default();
    let set = |name: &str, config: LinkConfig| Command::SetLink { name: name.into(), config: config.into(), now_ms: 1 };
    assert!(matches!(apply(&mut state, set(LINK, config())), Err(CommandError::InvalidCommit(_))));
    apply(&mut state, Command::SetFormat { format: 11 }).expect("format");
    for (name, config) in [
        ("", config()),
        ("a b", config()),
        (LINK, LinkConfig { bootstrap: "no-port".into(), ..config() }),
        (LINK, LinkConfig { topics: String::new(), ..config() }),
        (
            LINK,
            LinkConfig {
                sasl: Some(LinkSasl { mechanism: "GSSAPI".into(), username: "u".into(), password: "p".into() }),
                ..config()
            },
        ),
    ] {
        assert!(matches!(apply(&mut state, set(name, config)), Err(CommandError::InvalidLink(_))), "{name:?}");
    }
    assert!(state.links.is_empty());
    apply(&mut state, set(LINK, config())).expect("a valid link");
    let other = LinkConfig { topics: "payments".into(), ..config() };
    apply(&mut state, set(LINK, other.clone())).expect("its config replaced");
    assert_eq!(state.links[LINK].config, other);
}

#[test]
fn a_tenant_link_mirrors_into_its_namespace_within_its_quotas() {
    let mut state = linked();
    let tenant_link = LinkConfig { tenant: Some("acme".into()), acls: true, ..config() };
    let set = |config: LinkConfig| Command::SetLink { name: "acme-in".into(), config: config.into(), now_ms: 1 };
    let refused = apply(&mut state, set(tenant_link.clone()));
    assert!(matches!(refused, Err(CommandError::InvalidLink(ref why)) if why.contains("format 12")), "{refused:?}");
    apply(&mut state, Command::SetFormat { format: 12 }).expect("format");
    let refused = apply(&mut state, set(tenant_link.clone()));
    assert!(matches!(refused, Err(CommandError::InvalidLink(ref why)) if why.contains("no tenant")), "{refused:?}");
    apply(&mut state, Command::CreateTenant { name: "acme".into(), now_ms: 1 }).expect("tenant");
    let quotas = crate::state::TenantQuotas { partitions: Some(4), ..Default::default() };
    apply(&mut state, Command::SetTenantQuotas { tenant: "acme".into(), quotas: quotas.into() }).expect("quotas");
    apply(&mut state, set(tenant_link.clone())).expect("a tenant link");
    let ns = state.tenant_namespace("acme").expect("namespace");
    let create = |link: &str, name: String, id: u8, partition_count| Command::CreateMirrorTopic {
        link: link.into(),
        name,
        topic_id: topic_id(id),
        partition_count,
        configs: BTreeMap::new(),
    };
    // Outside the tenant's namespace, or past its partition quota: refused, nothing created.
    let outside = apply(&mut state, create("acme-in", "orders-eu".into(), 7, 1));
    assert!(matches!(outside, Err(CommandError::InvalidTopicName { .. })), "{outside:?}");
    let too_big = apply(&mut state, create("acme-in", ns.scope("orders-big"), 8, 5));
    assert!(matches!(too_big, Err(CommandError::QuotaExceeded(_))), "{too_big:?}");
    assert!(state.topic_by_name(&ns.scope("orders-big")).is_none() && !state.mirror_topics.contains_key(&topic_id(8)));
    apply(&mut state, create("acme-in", ns.scope("orders-eu"), 9, 3)).expect("within the quota");
    assert_eq!(state.mirror_link(topic_id(9)), Some("acme-in"));
    let grow =
        Command::UpdateMirrorTopic { link: "acme-in".into(), topic_id: topic_id(9), partition_count: 5, configs: None };
    assert!(matches!(apply(&mut state, grow), Err(CommandError::QuotaExceeded(_))));
    assert_eq!(state.topics[&topic_id(9)].partitions.len(), 3);
    // A cluster link keeps out of tenants' namespaces; a link's tenant is fixed once it mirrors.
    let cluster_create = create(LINK, ns.scope("orders-x"), 10, 1);
    assert!(matches!(apply(&mut state, cluster_create), Err(CommandError::InvalidTopicName { .. })));
    let moved = apply(&mut state, set(LinkConfig { tenant: None, ..tenant_link }));
    assert!(matches!(moved, Err(CommandError::InvalidLink(ref why)) if why.contains("cannot change")), "{moved:?}");
}

#[test]
fn batches_land_at_their_source_offsets_once_and_gaps_stay_gaps() {
    let mut state = linked();
    // The source's log starts at 100 (retention ran there before the link began).
    let first = mirror("o1", vec![chunk(0, 100, 104), chunk(1, 0, 9)]);
    assert_eq!(mirrored(apply(&mut state, first.clone())), vec![Ok(true), Ok(true)]);
    assert_eq!((log(&state, 0).log_start_offset, log(&state, 0).next_offset), (100, 105));
    // A retry, or a job restarted after its commit, changes nothing.
    assert_eq!(mirrored(apply(&mut state, first)), vec![Ok(false), Ok(false)]);
    assert_eq!(mirrored(apply(&mut state, mirror("o1-again", vec![chunk(0, 100, 104)]))), vec![Ok(false)]);
    assert_eq!(log(&state, 0).index.len(), 1);
    // Offsets the source compacted away are a gap: nothing to read there.
    assert_eq!(mirrored(apply(&mut state, mirror("o2", vec![chunk(0, 110, 119)]))), vec![Ok(true)]);
    let entries: Vec<_> = log(&state, 0).index.iter().map(|e| (e.base_offset, e.last_offset, e.object_id())).collect();
    assert_eq!(entries.len(), 3);
    assert_eq!((entries[1].0, entries[1].1, entries[1].2), (105, 109, None));
    assert!(matches!(log(&state, 0).index[2].data, EntryData::CleanedChunk { .. }), "batches carry their offsets");
    // A chunk straddling the log end means the source's log changed under the link.
    let straddling = mirrored(apply(&mut state, mirror("o3", vec![chunk(0, 115, 125)])));
    assert!(matches!(straddling[..], [Err(CommandError::InvalidCommit(_))]));
    assert_eq!(log(&state, 0).next_offset, 120);
}

#[test]
fn only_the_link_writes_a_mirror_topic_until_it_is_promoted() {
    let mut state = linked();
    let produce = Command::CommitSegment(SegmentCommit {
        key: "p1".into(),
        object_bytes: 124,
        chunks: vec![ChunkCommit {
            topic_id: topic_id(0),
            partition: 0,
            byte_start: 0,
            byte_len: 100,
            crc32c: 7,
            batches: vec![BatchSummary { offset_count: 1, timestamp_max: 5, base_sequence: -1 }],
            producer: None,
            uncompressed_bytes: 100,
        }],
    });
    let refused = |o: Result<Outcome, CommandError>| match o {
        Ok(Outcome::SegmentCommitted { chunks }) => matches!(chunks[..], [Err(CommandError::MirrorTopic { .. })]),
        other => matches!(other, Err(CommandError::MirrorTopic { .. })),
    };
    assert!(refused(apply(&mut state, produce.clone())));
    let others = [
        Command::DeleteRecords { topic_id: topic_id(0), partition: 0, offset: 0 },
        Command::CreatePartitions { name: "orders".into(), partition_count: 3 },
        Command::SetTopicConfigs { name: "orders".into(), configs: BTreeMap::new() },
    ];
    for command in others {
        assert!(refused(apply(&mut state, command.clone())), "{command:?}");
    }
    // Another link's commit, or a commit into an ordinary topic, is refused too.
    let mut foreign = mirror("f1", vec![chunk(0, 0, 0)]);
    if let Command::MirrorCommit(c) = &mut foreign {
        c.chunks[0].topic_id = topic_id(1);
    }
    assert!(matches!(mirrored(apply(&mut state, foreign))[..], [Err(CommandError::InvalidLink(_))]));
    // The job follows the source's partition count and configs.
    let grow = Command::UpdateMirrorTopic {
        link: LINK.into(),
        topic_id: topic_id(0),
        partition_count: 3,
        configs: Some([("retention.ms".to_owned(), "1000".to_owned())].into()),
    };
    apply(&mut state, grow).expect("the link grows its topic");
    assert_eq!(state.topic_by_name("orders").map(|t| t.partitions.len()), Some(3));

    apply(&mut state, Command::PromoteLink { name: LINK.into(), now_ms: 9 }).expect("promote");
    assert_eq!(state.mirror_link(topic_id(0)), None);
    // (Under a new object key: a commit retried under its key gets its first answer.)
    let Command::CommitSegment(mut again) = produce else { unreachable!("built above") };
    again.key = "p2".into();
    let outcome = apply(&mut state, Command::CommitSegment(again));
    assert!(matches!(&outcome, Ok(Outcome::SegmentCommitted { chunks }) if *chunks == vec![Ok(0)]), "{outcome:?}");
    let late = apply(&mut state, mirror("late", vec![chunk(0, 1, 1)]));
    assert!(matches!(late, Err(CommandError::InvalidLink(_))), "a promoted link writes no more: {late:?}");
}

#[test]
fn source_transactions_hold_the_last_stable_offset_and_promotion_aborts_the_open_ones() {
    let mut state = linked();
    let data = |producer_id, offset| MirrorTxnEvent::Data { producer_id, offset };
    let marker =
        |producer_id, offset, commit| MirrorTxnEvent::Marker { producer_id, producer_epoch: 3, offset, commit };
    // Producer 7 aborts 0..=4 (marker at 5); producer 8 commits 6..=7 (marker at 8); producer 9
    // opens a transaction at 9 that the source has not ended.
    let chunks = vec![
        MirrorChunk { transactions: vec![data(7, 0), data(7, 3), marker(7, 5, false)], ..chunk(0, 0, 5) },
        MirrorChunk { transactions: vec![data(8, 6), marker(8, 8, true), data(9, 9)], ..chunk(0, 6, 9) },
    ];
    let mut outcome = Vec::new();
    for (i, c) in chunks.into_iter().enumerate() {
        outcome.extend(mirrored(apply(&mut state, mirror(&format!("t{i}"), vec![c]))));
    }
    assert_eq!(outcome, vec![Ok(true), Ok(true)]);
    let p = log(&state, 0);
    assert_eq!(
        p.aborted_transactions.iter().map(|a| (a.producer_id, a.first_offset, a.last_offset)).collect::<Vec<_>>(),
        vec![(7, 0, 5)]
    );
    assert_eq!(p.last_stable_offset(), 9, "producer 9's open transaction holds read_committed readers");

    apply(&mut state, Command::PromoteLink { name: LINK.into(), now_ms: 50 }).expect("promote");
    let p = log(&state, 0);
    assert_eq!(p.next_offset, 11, "an abort marker for producer 9 at 10");
    assert!(matches!(p.index.back().map(|e| &e.data), Some(EntryData::Marker(m)) if m.producer_id == 9 && !m.commit));
    assert_eq!(p.last_stable_offset(), 11);
    assert_eq!(p.aborted_transactions.back().map(|a| (a.first_offset, a.last_offset)), Some((9, 10)));
    let LinkState::Promoted { fork_offsets, at_ms } = &state.links[LINK].state else { panic!("promoted") };
    assert_eq!((*at_ms, &fork_offsets["orders"]), (50, &vec![10, 0]), "the log ends before the markers it added");
}

#[test]
fn a_transaction_event_out_of_its_chunk_or_order_is_refused() {
    let mut state = linked();
    for events in [
        vec![MirrorTxnEvent::Data { producer_id: 1, offset: 20 }],
        vec![
            MirrorTxnEvent::Data { producer_id: 1, offset: 3 },
            MirrorTxnEvent::Marker { producer_id: 1, producer_epoch: 0, offset: 2, commit: false },
        ],
    ] {
        let c = MirrorChunk { transactions: events, ..chunk(0, 0, 5) };
        assert!(matches!(apply(&mut state, mirror("bad", vec![c])), Err(CommandError::InvalidCommit(_))));
    }
    assert_eq!(log(&state, 0).next_offset, 0);
}

#[test]
fn group_offsets_move_only_forward_and_only_while_the_group_is_empty_here() {
    let mut state = linked();
    apply(&mut state, mirror("o", vec![chunk(0, 0, 99)])).expect("data");
    let offsets = |topic: &str, offset| {
        vec![OffsetCommit { topic: topic.into(), partition: 0, offset, leader_epoch: -1, metadata: String::new() }]
    };
    let copy = |offsets| Command::MirrorGroupOffsets { link: LINK.into(), group_id: "g".into(), offsets, now_ms: 5 };
    let committed = |state: &State| state.groups.get("g").and_then(|g| g.offsets.get("orders", 0)).map(|c| c.offset);
    apply(&mut state, copy(crate::state::stored::each_into(offsets("orders", 40)))).expect("copied");
    assert_eq!(committed(&state), Some(40));
    apply(&mut state, copy(crate::state::stored::each_into(offsets("orders", 30)))).expect("not backwards");
    assert_eq!(committed(&state), Some(40));
    apply(&mut state, copy(crate::state::stored::each_into(offsets("local", 30))))
        .expect("an ordinary topic's are skipped");
    assert!(state.groups["g"].offsets.keys().all(|(t, _)| t == "orders"));
    let member = MemberRecord { member_id: "m".into(), ..Default::default() };
    let membership = GroupMembership {
        protocol_type: "consumer".into(),
        generation: 1,
        members: vec![member],
        ..Default::default()
    };
    apply(&mut state, Command::StoreGroup { group_id: "g".into(), membership: membership.into(), now_ms: 6 })
        .expect("a member joins");
    assert!(matches!(
        apply(&mut state, copy(crate::state::stored::each_into(offsets("orders", 60)))),
        Err(CommandError::GroupNotEmpty)
    ));
    assert_eq!(committed(&state), Some(40), "a consumer that moved over owns its offsets");
}

#[test]
fn a_link_is_deleted_only_once_it_mirrors_nothing_and_reports_are_kept_in_order() {
    let mut state = linked();
    let report = |now_ms, end| {
        Command::ReportLink(LinkReport {
            link: LINK.into(),
            source_ends: vec![(topic_id(0), 0, end), (topic_id(1), 0, 5)],
            error: (end < 0).then(|| "unreachable".to_owned()),
            deleted_at_source: Vec::new(),
            now_ms,
        })
    };
    apply(&mut state, report(10, 500)).expect("report");
    apply(&mut state, report(5, -1)).expect("a late report");
    let link = &state.links[LINK];
    assert_eq!((link.error.as_deref(), link.source_ends.len()), (None, 1), "only mirror partitions, only the newest");
    assert_eq!(link.source_ends[&(topic_id(0), 0)], 500);
    assert!(matches!(apply(&mut state, Command::DeleteLink { name: LINK.into() }), Err(CommandError::InvalidLink(_))));
    apply(&mut state, Command::PromoteLink { name: LINK.into(), now_ms: 20 }).expect("promote");
    let again = Command::SetLink { name: LINK.into(), config: config().into(), now_ms: 21 };
    assert!(matches!(apply(&mut state, again), Err(CommandError::InvalidLink(_))), "a promoted link stays stopped");
    apply(&mut state, Command::DeleteLink { name: LINK.into() }).expect("deleted");
    assert!(state.links.is_empty());
}

proptest! {
    /// Whatever chunks a job sends (retries, overlaps, gaps, in any order), a source offset is
    /// written at most once, each accepted chunk is indexed exactly at its source offsets, and
    /// the invariants hold.
    #[test]
    fn each_source_offset_is_written_at_most_once(
        sends in prop::collection::vec((0i32..2, 0i64..60, 0i64..8), 1..40),
    ) {
        let mut state = linked();
        let mut accepted: Vec<(i32, i64, i64)> = Vec::new();
        for (i, (partition, base, len)) in sends.into_iter().enumerate() {
            let outcome = mirrored(apply(&mut state, mirror(&format!("k{i}"), vec![chunk(partition, base, base + len)])));
            if outcome == vec![Ok(true)] {
                accepted.push((partition, base, base + len));
            }
        }
        for partition in 0..2 {
            let indexed: Vec<(i64, i64)> = log(&state, partition)
                .index
                .iter()
                .filter(|e| matches!(e.data, EntryData::CleanedChunk { .. }))
                .map(|e| (e.base_offset, e.last_offset))
                .collect();
            let sent: Vec<(i64, i64)> =
                accepted.iter().filter(|(p, _, _)| *p == partition).map(|(_, b, l)| (*b, *l)).collect();
            prop_assert_eq!(indexed, sent);
        }
    }
}

#[test]
fn failback_adopts_a_topic_cut_back_to_its_fork_offset_then_mirrors_on() {
    let mut state = linked();
    let batches = |counts: &[u32]| {
        counts.iter().map(|n| BatchSummary { offset_count: *n, timestamp_max: 5, base_sequence: -1 }).collect()
    };
    // Topic `local` holds 0..=8 in one chunk of three batches (2, 3 and 4 offsets) and 9..=13 in another.
    for (key, counts) in [("l1", vec![2, 3, 4]), ("l2", vec![5])] {
        let chunk = ChunkCommit {
            topic_id: topic_id(1),
            partition: 0,
            byte_start: 0,
            byte_len: 90,
            crc32c: 7,
            batches: batches(&counts),
            producer: None,
            uncompressed_bytes: 90,
        };
        let commit = SegmentCommit { key: key.into(), object_bytes: 100, chunks: vec![chunk] };
        apply(&mut state, Command::CommitSegment(commit)).expect("local writes");
    }
    apply(&mut state, Command::SetLink { name: "back".into(), config: config().into(), now_ms: 2 }).expect("link back");
    let adopt = |topic: u8, fork: i64| Command::AdoptMirrorTopic {
        link: "back".into(),
        topic_id: topic_id(topic),
        fork_offsets: vec![fork],
    };
    assert!(matches!(apply(&mut state, adopt(0, 0)), Err(CommandError::InvalidLink(_))), "a mirror of another link");
    // The promoted side mirrored up to offset 5 (a batch boundary): 5..=13 were never seen there.
    apply(&mut state, adopt(1, 5)).expect("adopted");
    assert_eq!(state.mirror_link(topic_id(1)), Some("back"));
    let mut early = mirror("b1", vec![chunk(0, 5, 6)]);
    if let Command::MirrorCommit(c) = &mut early {
        c.link = "back".into();
        c.chunks[0].topic_id = topic_id(1);
    }
    assert!(matches!(mirrored(apply(&mut state, early.clone()))[..], [Err(CommandError::InvalidLink(_))]), "cut first");
    let truncate = |offset, cut| Command::TruncateMirrorPartition {
        link: "back".into(),
        topic_id: topic_id(1),
        partition: 0,
        offset,
        cut,
    };
    assert!(apply(&mut state, truncate(4, None)).is_err(), "only the fork offset");
    assert!(apply(&mut state, truncate(5, None)).is_err(), "the entry spanning 5 needs its kept bytes");
    let objects_before = state.objects.values().filter(|o| o.reference_count > 0).count();
    apply(&mut state, truncate(5, Some(ChunkCut { byte_len: 40, crc32c: 9 }))).expect("cut");
    let log = state.partition(topic_id(1), 0).expect("local");
    let entries: Vec<_> = log.index.iter().map(|e| (e.base_offset, e.last_offset, e.stored_bytes())).collect();
    assert_eq!((entries, log.next_offset), (vec![(0, 4, 40)], 5));
    assert_eq!(state.objects.values().filter(|o| o.reference_count > 0).count(), objects_before - 1, "l2 released");
    assert!(state.mirror_truncations.is_empty());
    if let Command::MirrorCommit(c) = &mut early {
        c.key = "b2".into();
    }
    assert_eq!(mirrored(apply(&mut state, early)), vec![Ok(true)], "then the link writes on from the fork offset");
}
