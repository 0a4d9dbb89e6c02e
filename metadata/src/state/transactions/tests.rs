//! Idempotence and transactions in the state machine, and their commands for the property test.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::super::tests::{create, run, topic_id};
use super::*;
use crate::command::{BatchSummary, Command, SegmentCommit};

/// A segment commit holding one producer chunk: `batches` are (base sequence, records).
fn produce(key: &str, partition: i32, producer: ChunkProducer, batches: &[(i32, u32)]) -> Command {
    let batches = batches
        .iter()
        .map(|(base_sequence, n)| BatchSummary { offset_count: *n, timestamp_max: 1000, base_sequence: *base_sequence })
        .collect();
    let chunk = ChunkCommit {
        topic_id: topic_id(0),
        partition,
        byte_start: 0,
        byte_len: 100,
        crc32c: 0,
        batches,
        producer: Some(producer),
        uncompressed_bytes: 300,
    };
    Command::CommitSegment(SegmentCommit { key: key.to_owned(), object_bytes: 124, chunks: vec![chunk] })
}

fn idempotent(producer_id: i64, producer_epoch: i16) -> ChunkProducer {
    ChunkProducer { producer_id, producer_epoch, transactional: false }
}

fn transactional(producer_id: i64, producer_epoch: i16) -> ChunkProducer {
    ChunkProducer { producer_id, producer_epoch, transactional: true }
}

fn init(transactional_id: Option<&str>, expected: Option<(i64, i16)>, now_ms: i64) -> Command {
    Command::InitProducerId {
        transactional_id: transactional_id.map(str::to_owned),
        transaction_timeout_ms: 10_000,
        expected: expected.map(|(producer_id, producer_epoch)| ProducerIdEpoch { producer_id, producer_epoch }),
        now_ms,
        tenant: None,
    }
}

fn pe(producer_id: i64, producer_epoch: i16) -> ProducerIdEpoch {
    ProducerIdEpoch { producer_id, producer_epoch }
}

fn add(id: &str, producer: ProducerIdEpoch, partitions: &[i32], now_ms: i64) -> Command {
    Command::AddPartitionsToTxn {
        transactional_id: id.to_owned(),
        producer,
        partitions: partitions.iter().map(|p| (topic_id(0), *p)).collect(),
        now_ms,
    }
}

fn end(id: &str, producer: ProducerIdEpoch, commit: bool, now_ms: i64) -> Command {
    Command::EndTxn { transactional_id: id.to_owned(), producer, commit, now_ms }
}

fn end_v2(id: &str, producer: ProducerIdEpoch, commit: bool, now_ms: i64) -> Command {
    Command::EndTxnV2 { transactional_id: id.to_owned(), producer, commit, now_ms }
}

fn committed(outcome: &Result<Outcome, CommandError>) -> Result<i64, CommandError> {
    match outcome {
        Ok(Outcome::SegmentCommitted { chunks }) => chunks[0].clone(),
        other => panic!("not a segment commit: {other:?}"),
    }
}

#[test]
fn a_retried_chunk_gets_its_original_offsets_and_is_stored_once() {
    let p = idempotent(0, 0);
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        init(None, None, 0),
        produce("o1", 0, p, &[(0, 3), (3, 2)]),
        produce("o2", 0, p, &[(5, 1)]),
        // The first request again, under a new object key (another agent's flush).
        produce("o3", 0, p, &[(0, 3), (3, 2)]),
        produce("o4", 0, p, &[(8, 1)]),
        produce("o5", 0, idempotent(0, 1), &[(6, 1)]),
        produce("o6", 0, idempotent(9, 0), &[(0, 1)]),
    ]);
    assert_eq!(outcomes[1], Ok(Outcome::ProducerId(pe(0, 0))));
    assert_eq!(committed(&outcomes[2]), Ok(0));
    assert_eq!(committed(&outcomes[3]), Ok(5));
    assert_eq!(committed(&outcomes[4]), Ok(0), "a duplicate is answered with its first offsets");
    assert_eq!(committed(&outcomes[5]), Err(CommandError::SequenceGap { expected: 6, found: 8 }));
    assert_eq!(committed(&outcomes[6]), Err(CommandError::SequenceGap { expected: 0, found: 6 }));
    assert_eq!(committed(&outcomes[7]), Err(CommandError::UnknownProducerId(9)));
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(log.next_offset, 6, "the duplicate took no offsets");
    assert_eq!(log.index.len(), 2);
    assert_eq!(state.objects.values().filter(|o| o.reference_count > 0).count(), 2);
}

#[test]
fn an_epoch_bump_restarts_sequences_and_fences_the_old_epoch() {
    let (_, outcomes) = run(vec![
        create("a", 0, 1),
        init(None, None, 0),
        produce("o1", 0, idempotent(0, 0), &[(0, 2)]),
        init(None, Some((0, 0)), 0),
        produce("o2", 0, idempotent(0, 1), &[(0, 1)]),
        produce("o3", 0, idempotent(0, 0), &[(2, 1)]),
        init(None, Some((0, 0)), 0),
    ]);
    assert_eq!(outcomes[3], Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(committed(&outcomes[4]), Ok(2));
    assert_eq!(committed(&outcomes[5]), Err(CommandError::InvalidProducerEpoch { found: 0, current: 1 }));
    assert_eq!(outcomes[6], Err(CommandError::InvalidProducerEpoch { found: 0, current: 1 }));
}

#[test]
fn sequences_wrap_after_i32_max() {
    let p = idempotent(0, 0);
    let (_, outcomes) = run(vec![
        create("a", 0, 1),
        init(None, None, 0),
        produce("o1", 0, p, &[(i32::MAX - 1, 2)]),
        produce("o2", 0, p, &[(0, 1)]),
    ]);
    assert_eq!(committed(&outcomes[2]), Ok(0));
    assert_eq!(committed(&outcomes[3]), Ok(2));
}

#[test]
fn a_committed_transaction_writes_markers_and_publishes_its_offsets() {
    let t = "t";
    let offsets = vec![crate::state::OffsetCommit {
        topic: "a".into(),
        partition: 0,
        offset: 42,
        leader_epoch: 0,
        metadata: String::new(),
    }];
    let (state, outcomes) = run(vec![
        create("a", 0, 2),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0, 1], 1),
        produce("o1", 0, transactional(0, 0), &[(0, 3)]),
        Command::AddOffsetsToTxn { transactional_id: t.into(), producer: pe(0, 0), group_id: "g".into(), now_ms: 2 },
        Command::TxnCommitOffsets {
            transactional_id: t.into(),
            producer: pe(0, 0),
            group_id: "g".into(),
            offsets: crate::state::stored::each_into(offsets.clone()),
            now_ms: 3,
        },
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(log.last_stable_offset(), 0, "the open transaction holds the LSO");
    assert!(state.has_pending_txn_offset("g", "a", 0));
    assert!(!state.groups.contains_key("g"), "offsets are invisible before the commit");

    let mut state = state;
    assert_eq!(state.apply(100, end(t, pe(0, 0), true, 4)), Ok(Outcome::Done));
    assert_eq!(state.apply(101, end(t, pe(0, 0), true, 5)), Ok(Outcome::Done), "a retried EndTxn is answered");
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!((log.next_offset, log.last_stable_offset()), (4, 4));
    assert_eq!(
        log.index.back().map(|e| &e.data),
        Some(&EntryData::Marker(TxnMarker { producer_id: 0, producer_epoch: 0, commit: true }))
    );
    let other = state.partition(topic_id(0), 1).expect("exists");
    assert_eq!(other.next_offset, 1, "every added partition gets a marker");
    assert_eq!(state.groups.get("g").and_then(|g| g.offsets.get("a", 0)).map(|o| o.offset), Some(42));
    assert!(!state.has_pending_txn_offset("g", "a", 0));
    assert!(log.aborted_transactions.is_empty());
}

#[test]
fn an_aborted_transaction_is_listed_and_a_new_instance_fences_the_old() {
    let t = "t";
    let (state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0], 1),
        produce("o1", 0, transactional(0, 0), &[(0, 2)]),
        produce("o2", 0, transactional(0, 0), &[(2, 2)]),
        // A second instance: the open transaction is aborted, the epoch bumped.
        init(Some(t), None, 2),
        produce("o3", 0, transactional(0, 0), &[(4, 1)]),
        end(t, pe(0, 0), true, 3),
        produce("o4", 0, transactional(0, 1), &[(0, 1)]),
    ]);
    assert_eq!(outcomes[5], Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(committed(&outcomes[6]), Err(CommandError::InvalidProducerEpoch { found: 0, current: 1 }));
    assert_eq!(outcomes[7], Err(CommandError::ProducerFenced));
    assert!(
        matches!(committed(&outcomes[8]), Err(CommandError::InvalidTxnState(_))),
        "a partition must be added first: {:?}",
        outcomes[8]
    );
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(
        log.aborted_transactions.iter().copied().collect::<Vec<_>>(),
        vec![AbortedTransaction { producer_id: 0, first_offset: 0, last_offset: 4 }]
    );
    assert_eq!((log.next_offset, log.last_stable_offset()), (5, 5));
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_and_its_producer_may_resume() {
    let t = "t";
    let (mut state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0], 1_000),
        produce("o1", 0, transactional(0, 0), &[(0, 1)]),
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(!state.transactions_due(11_000));
    assert!(state.transactions_due(11_001));
    assert_eq!(state.apply(10, Command::ExpireTransactions { now_ms: 11_001 }), Ok(Outcome::Done));
    let txn = state.transactions.get(t).expect("kept");
    assert_eq!((txn.state, txn.producer_epoch), (TxnState::CompleteAbort, 1));
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!((log.next_offset, log.last_stable_offset()), (2, 2));
    assert_eq!(state.apply(11, end(t, pe(0, 0), true, 11_002)), Err(CommandError::ProducerFenced));
    // KIP-360: the timed-out producer re-initializes with the epoch it had.
    assert_eq!(state.apply(12, init(Some(t), Some((0, 0)), 11_003)), Ok(Outcome::ProducerId(pe(0, 2))));
    // A zombie still holding epoch 0 now is fenced.
    assert_eq!(state.apply(13, init(Some(t), Some((0, 0)), 11_004)), Err(CommandError::ProducerFenced));
}

#[test]
fn a_version_2_transaction_ends_with_the_next_epoch_and_fences_its_own_late_writes() {
    let t = "t";
    let (mut state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0], 1),
        produce("o1", 0, transactional(0, 0), &[(0, 2)]),
        end_v2(t, pe(0, 0), true, 2),
    ]);
    assert_eq!(outcomes[4], Ok(Outcome::ProducerId(pe(0, 1))), "the producer goes on with epoch 1");
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!((log.next_offset, log.last_stable_offset()), (3, 3));
    assert_eq!(
        log.index.back().map(|e| &e.data),
        Some(&EntryData::Marker(TxnMarker { producer_id: 0, producer_epoch: 1, commit: true })),
        "the marker carries the new epoch"
    );
    // The answer was lost and the client asks again: the same answer, nothing written twice.
    assert_eq!(state.apply(10, end_v2(t, pe(0, 0), true, 3)), Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(state.partition(topic_id(0), 0).map(|l| l.next_offset), Some(3));
    // A late write of the ended transaction is fenced; the next transaction uses epoch 1.
    let late = state.apply(11, produce("o2", 0, transactional(0, 0), &[(2, 1)]));
    assert_eq!(committed(&late), Err(CommandError::InvalidProducerEpoch { found: 0, current: 1 }));
    assert!(state.apply(12, add(t, pe(0, 1), &[0], 4)).is_ok());
    assert_eq!(committed(&state.apply(13, produce("o3", 0, transactional(0, 1), &[(0, 1)]))), Ok(3));
    // Asking for the opposite end, or ending with an old epoch otherwise, is refused.
    assert_eq!(state.apply(14, end_v2(t, pe(0, 0), false, 5)), Err(CommandError::ProducerFenced));
    assert_eq!(state.apply(15, end_v2(t, pe(0, 1), false, 6)), Ok(Outcome::ProducerId(pe(0, 2))));
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(log.aborted_transactions.back().map(|a| (a.first_offset, a.last_offset)), Some((3, 4)));
    assert!(matches!(state.apply(16, end_v2(t, pe(0, 2), true, 7)), Err(CommandError::InvalidTxnState(_))));
}

#[test]
fn a_version_2_abort_of_a_timed_out_transaction_succeeds_with_the_epoch_the_timeout_gave() {
    let t = "t";
    let (mut state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0], 1_000),
        produce("o1", 0, transactional(0, 0), &[(0, 1)]),
        Command::ExpireTransactions { now_ms: 11_001 },
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(state.apply(10, end_v2(t, pe(0, 0), false, 11_002)), Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(state.apply(11, end_v2(t, pe(0, 0), true, 11_003)), Err(CommandError::ProducerFenced));
}

#[test]
fn a_version_2_abort_of_a_transaction_nothing_reached_moves_the_epoch_on() {
    // A client counts a transaction as begun at its first send, even if every record of it was
    // refused: its abort must not fail, or the producer could not go on.
    let t = "t";
    let (mut state, outcomes) = run(vec![create("a", 0, 1), init(Some(t), None, 0)]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(state.apply(10, end_v2(t, pe(0, 0), false, 1)), Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(state.transactions.get(t).map(|t| t.state), Some(TxnState::CompleteAbort));
    assert_eq!(state.partition(topic_id(0), 0).map(|l| l.next_offset), Some(0), "no markers");
    assert_eq!(state.apply(11, end_v2(t, pe(0, 0), false, 2)), Ok(Outcome::ProducerId(pe(0, 1))), "a retry");
    assert!(matches!(state.apply(12, end_v2(t, pe(0, 1), true, 3)), Err(CommandError::InvalidTxnState(_))));
}

/// Puts transaction `t` (of producer id 0) at the last epoch, as 32,765 transactions would.
fn skip_to_the_last_epoch(state: &mut State, t: &str) -> i16 {
    if let Some(txn) = state.transactions.get_mut(t) {
        txn.producer_epoch = PRODUCER_EPOCH_MAX;
    }
    if let Some(p) = state.producers.get_mut(&0) {
        p.epoch = PRODUCER_EPOCH_MAX;
    }
    PRODUCER_EPOCH_MAX
}

#[test]
fn a_version_2_end_that_cannot_get_a_new_producer_id_changes_nothing() {
    let t = "t";
    let (mut state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        add(t, pe(0, 0), &[0], 1),
        produce("o1", 0, transactional(0, 0), &[(0, 1)]),
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let last = skip_to_the_last_epoch(&mut state, t);
    // Every producer id taken: the rollover cannot happen, so the transaction stays open.
    let idle = ProducerRecord {
        epoch: 0,
        transactional_id: None,
        last_active_ms: 0,
        partitions: BTreeMap::new(),
        tenant: None,
    };
    for id in 1..crate::limits::PRODUCER_COUNT_MAX as i64 {
        state.producers.insert(id, idle.clone());
    }
    let before = state.clone();
    assert!(matches!(state.apply(10, end_v2(t, pe(0, last), true, 2)), Err(CommandError::LimitReached(_))));
    assert_eq!(state.transactions.get(t), before.transactions.get(t));
    assert_eq!(state.partition(topic_id(0), 0).map(|l| l.next_offset), Some(1), "no marker written");
}

#[test]
fn a_version_2_end_past_the_last_epoch_moves_to_a_new_producer_id() {
    let t = "t";
    let (mut state, outcomes) = run(vec![
        create("a", 0, 1),
        init(Some(t), None, 0),
        init(Some(t), None, 0),
        add(t, pe(0, 1), &[0], 1),
        produce("o1", 0, transactional(0, 1), &[(0, 1)]),
    ]);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let last = skip_to_the_last_epoch(&mut state, t);
    let next = state.apply(10, end_v2(t, pe(0, last), true, 2));
    let Ok(Outcome::ProducerId(next)) = next else { panic!("{next:?}") };
    assert_ne!(next.producer_id, 0);
    assert_eq!(next.producer_epoch, 0);
    let log = state.partition(topic_id(0), 0).expect("exists");
    assert_eq!(log.last_stable_offset(), 2, "the marker closed the old id's transaction");
    assert_eq!(state.apply(11, end_v2(t, pe(0, last), true, 3)), Ok(Outcome::ProducerId(next)), "a retry");
}

#[test]
fn transaction_timeouts_are_bounded_by_a_dynamic_maximum() {
    let long = |ms| Command::InitProducerId {
        transactional_id: Some("t".into()),
        transaction_timeout_ms: ms,
        expected: None,
        now_ms: 0,
        tenant: None,
    };
    let (_, outcomes) = run(vec![
        long(900_001),
        Command::SetBrokerConfigs {
            configs: BTreeMap::from([("transaction.max.timeout.ms".to_owned(), "3600000".to_owned())]),
        },
        long(3_600_000),
        long(0),
    ]);
    assert_eq!(outcomes[0], Err(CommandError::InvalidTransactionTimeout { requested: 900_001, max: 900_000 }));
    assert_eq!(outcomes[2], Ok(Outcome::ProducerId(pe(0, 0))));
    assert_eq!(outcomes[3], Err(CommandError::InvalidTransactionTimeout { requested: 0, max: 3_600_000 }));
}

/// A producer chunk like [`produce`], for topic `topic`.
fn produce_to(topic: u8, key: &str, producer: ChunkProducer, batches: &[(i32, u32)]) -> Command {
    let Command::CommitSegment(mut commit) = produce(key, 0, producer, batches) else { unreachable!() };
    commit.chunks[0].topic_id = topic_id(topic);
    Command::CommitSegment(commit)
}

fn init_for(tenant: &str, transactional_id: Option<&str>, expected: Option<(i64, i16)>) -> Command {
    let Command::InitProducerId { transactional_id, transaction_timeout_ms, expected, now_ms, .. } =
        init(transactional_id, expected, 0)
    else {
        unreachable!()
    };
    Command::InitProducerId { transactional_id, transaction_timeout_ms, expected, now_ms, tenant: Some(tenant.into()) }
}

#[test]
fn a_tenant_can_neither_write_as_nor_fence_another_tenants_producer() {
    let (state, outcomes) = run(vec![
        Command::CreateTenant { name: "acme".into(), now_ms: 0 },
        Command::CreateTenant { name: "globex".into(), now_ms: 0 },
        create("acme#1~orders", 0, 1),
        create("globex#2~orders", 1, 1),
        init_for("globex#2", None, None),
        produce_to(1, "o1", idempotent(0, 0), &[(0, 1)]),
        // acme, with Write on its own topic, names globex's producer at a higher epoch...
        produce_to(0, "o2", idempotent(0, 32_000), &[(0, 1)]),
        // ...asks for globex's producer's epoch to be bumped (KIP-360)...
        init_for("acme#1", None, Some((0, 0))),
        // ...and a transactional id of its own cannot take the producer either.
        init_for("acme#1", Some("acme#1~t"), None),
        produce_to(1, "o3", idempotent(0, 0), &[(1, 1)]),
        // Within its tenant a producer keeps Kafka's rules: its own bump is accepted.
        init_for("globex#2", None, Some((0, 0))),
        produce_to(1, "o4", idempotent(0, 1), &[(0, 1)]),
        // An id never handed out, or one whose state expired, is unknown to every tenant.
        produce_to(0, "o5", idempotent(7, 0), &[(0, 1)]),
    ]);
    assert_eq!(committed(&outcomes[5]), Ok(0));
    assert_eq!(committed(&outcomes[6]), Err(CommandError::UnknownProducerId(0)));
    assert_eq!(outcomes[7], Err(CommandError::InvalidProducerIdMapping));
    assert_eq!(outcomes[8], Ok(Outcome::ProducerId(pe(1, 0))), "a new id, not globex's");
    assert_eq!(committed(&outcomes[9]), Ok(1), "globex's producer was not fenced");
    assert_eq!(outcomes[10], Ok(Outcome::ProducerId(pe(0, 1))));
    assert_eq!(committed(&outcomes[11]), Ok(2));
    assert_eq!(committed(&outcomes[12]), Err(CommandError::UnknownProducerId(7)));
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.next_offset), Some(0), "acme's topic took nothing");
    assert_eq!(state.producers.get(&0).map(|p| (p.epoch, p.tenant.as_deref())), Some((1, Some("globex#2"))));
}

#[test]
fn an_expired_producer_of_a_tenant_starts_again_with_a_new_id() {
    let (mut state, _) = run(vec![
        Command::CreateTenant { name: "acme".into(), now_ms: 0 },
        create("acme#1~a", 0, 1),
        init_for("acme#1", None, None),
        produce("o1", 0, idempotent(0, 0), &[(0, 1)]),
    ]);
    assert_eq!(state.apply(10, Command::ExpireTransactions { now_ms: 1000 + 86_400_000 }), Ok(Outcome::Done));
    let outcome = state.apply(11, produce("o2", 0, idempotent(0, 0), &[(1, 1)]));
    assert_eq!(committed(&outcome), Err(CommandError::UnknownProducerId(0)), "no owner on record: not adopted");
}

#[test]
fn idle_producers_expire_but_may_write_again_with_any_sequence() {
    let (mut state, _) =
        run(vec![create("a", 0, 1), init(None, None, 0), produce("o1", 0, idempotent(0, 0), &[(0, 1)])]);
    let day = 86_400_000;
    assert!(!state.transactions_due(1000 + day - 1));
    assert_eq!(state.apply(10, Command::ExpireTransactions { now_ms: 1000 + day }), Ok(Outcome::Done));
    assert!(state.producers.is_empty());
    let outcome = state.apply(11, produce("o2", 0, idempotent(0, 0), &[(7, 1)]));
    assert_eq!(committed(&outcome), Ok(1), "Kafka accepts any sequence from a producer it no longer knows");
}

#[test]
fn an_idempotency_key_names_one_producer_whose_retried_chunks_are_answered_with_the_original_offsets() {
    let key = |k: &str, request_digest: u64, now_ms: i64| Command::InitIdempotencyKey {
        key: k.to_owned(),
        request_digest,
        now_ms,
        tenant: None,
    };
    let (mut state, outcomes) = run(vec![
        create("a", 0, 2),
        key("req-1", 7, 0),
        produce("o1", 0, idempotent(0, 0), &[(0, 3)]),
        produce("o2", 1, idempotent(0, 0), &[(0, 2)]),
        // The same request retried: the same producer, the same sequences.
        key("req-1", 7, 10),
        produce("o3", 1, idempotent(0, 0), &[(0, 2)]),
        produce("o4", 0, idempotent(0, 0), &[(0, 3)]),
        key("req-1", 8, 20),
        key("req-2", 8, 20),
        key("", 8, 20),
        key(&"x".repeat(256), 8, 20),
    ]);
    assert_eq!(outcomes[1], Ok(Outcome::IdempotencyKey { producer: pe(0, 0), retry: false }));
    assert_eq!(outcomes[4], Ok(Outcome::IdempotencyKey { producer: pe(0, 0), retry: true }));
    assert_eq!(committed(&outcomes[5]), Ok(0), "partition 1 answers the retry with its first offsets");
    assert_eq!(committed(&outcomes[6]), Ok(0));
    assert_eq!(outcomes[7], Err(CommandError::IdempotencyKeyReused("req-1".into())));
    assert_eq!(outcomes[8], Ok(Outcome::IdempotencyKey { producer: pe(1, 0), retry: false }));
    assert!(matches!(outcomes[9], Err(CommandError::InvalidIdempotencyKey(_))));
    assert!(matches!(outcomes[10], Err(CommandError::InvalidIdempotencyKey(_))));
    assert_eq!(state.partition(topic_id(0), 0).map(|p| p.next_offset), Some(3));
    assert_eq!(state.partition(topic_id(0), 1).map(|p| p.next_offset), Some(2));
    // Once the producer is forgotten, so is the key: a retry then is a new request.
    let day = 86_400_000;
    assert_eq!(state.apply(20, Command::ExpireTransactions { now_ms: 1000 + day }), Ok(Outcome::Done));
    assert!(state.idempotency_keys.is_empty());
    assert_eq!(
        state.apply(21, key("req-1", 8, 2 * day)),
        Ok(Outcome::IdempotencyKey { producer: pe(2, 0), retry: false })
    );
}

/// Producer and transaction commands over two transactional ids, a few producer ids and epochs,
/// and topic `t0` (the property test's topics), with clocks that jump.
pub(in crate::state) fn arb_transaction_command() -> impl Strategy<Value = Command> {
    let id = (0u8..2).prop_map(|t| format!("x{t}"));
    let producer = (0i64..3, 0i16..3).prop_map(|(producer_id, producer_epoch)| pe(producer_id, producer_epoch));
    let now = (0i64..40).prop_map(|n| n * 1_000);
    prop_oneof![
        (proptest::option::of(id.clone()), proptest::option::of((0i64..3, 0i16..3)), now.clone(), any::<bool>())
            .prop_map(|(id, expected, now_ms, tenant)| {
                let Command::InitProducerId { transactional_id, transaction_timeout_ms, expected, now_ms, .. } =
                    init(id.as_deref(), expected, now_ms)
                else {
                    unreachable!()
                };
                // A tenant's producers may never write to `t0`, which is no tenant's.
                let tenant = tenant.then(|| "tenant0#1".to_owned());
                Command::InitProducerId { transactional_id, transaction_timeout_ms, expected, now_ms, tenant }
            }),
        (id.clone(), producer.clone(), proptest::collection::vec(0i32..3, 1..3), now.clone())
            .prop_map(|(id, producer, partitions, now_ms)| add(&id, producer, &partitions, now_ms)),
        (0i32..3, producer.clone(), any::<bool>(), 0i32..6, 1u32..3, any::<u16>()).prop_map(
            |(partition, p, txn, sequence, n, key)| {
                let chunk_producer =
                    ChunkProducer { producer_id: p.producer_id, producer_epoch: p.producer_epoch, transactional: txn };
                produce(&format!("p{key}"), partition, chunk_producer, &[(sequence, n)])
            }
        ),
        (id.clone(), producer.clone(), any::<bool>(), now.clone(), any::<bool>()).prop_map(
            |(id, producer, commit, now_ms, v2)| {
                if v2 { end_v2(&id, producer, commit, now_ms) } else { end(&id, producer, commit, now_ms) }
            }
        ),
        (id.clone(), producer, now.clone()).prop_map(|(id, producer, now_ms)| Command::AddOffsetsToTxn {
            transactional_id: id,
            producer,
            group_id: "g0".into(),
            now_ms
        }),
        (id, now.clone()).prop_map(|(transactional_id, now_ms)| Command::AbortTxn { transactional_id, now_ms }),
        now.clone().prop_map(|now_ms| Command::ExpireTransactions { now_ms: now_ms * 3_000 }),
        (0u8..3, 0u64..2, now).prop_map(|(k, request_digest, now_ms)| Command::InitIdempotencyKey {
            key: format!("k{k}"),
            request_digest,
            now_ms,
            tenant: None
        }),
    ]
}
