//! The checker on made-up histories: each kind of violation is found, and a clean run has none.

use super::*;

fn at(t_ms: u64, event: Event) -> Entry {
    Entry { t_ms, event }
}

fn acked(topic: &str, partition: i32, offset: i64, value: &str) -> Entry {
    at(offset as u64, Event::Acked { topic: topic.into(), partition, offset, value: value.into() })
}

fn log(partitions: &[&[&str]]) -> Log {
    partitions.iter().map(|p| p.iter().enumerate().map(|(o, v)| (o as i64, v.to_string())).collect()).collect()
}

fn kinds(out: &Checked) -> Vec<&'static str> {
    out.violations.iter().map(|v| v.kind).collect()
}

const T: &str = "topic";

#[test]
fn a_clean_plain_topic_passes() {
    let history = vec![acked(T, 0, 0, "idem-0-0"), acked(T, 0, 1, "idem-0-1"), acked(T, 1, 0, "idem-1-0")];
    let mut out = Checked::default();
    check_plain_topic(T, &log(&[&["idem-0-0", "idem-0-1"], &["idem-1-0"]]), &history, &mut out);
    assert_eq!(kinds(&out), Vec::<&str>::new());
    assert_eq!(out.topics[T].acknowledged, 3);
}

#[test]
fn lost_duplicated_misplaced_and_reordered_records_are_found() {
    let fault = at(0, Event::FaultStart { fault: "kill-agent".into(), target: "a1".into() });
    let history = vec![fault, acked(T, 0, 0, "idem-0-0"), acked(T, 0, 1, "idem-0-1"), acked(T, 0, 2, "idem-0-2")];
    let mut out = Checked::default();
    // idem-0-0 lost, idem-0-2 written twice and out of order, idem-0-1 at the wrong offset.
    check_plain_topic(T, &log(&[&["idem-0-2", "idem-0-9", "idem-0-1", "idem-0-2"]]), &history, &mut out);
    let mut found = kinds(&out);
    found.sort_unstable();
    found.dedup();
    assert_eq!(found, ["duplicated", "lost", "misplaced", "out of order"]);
    let lost = out.violations.iter().find(|v| v.kind == "lost").expect("lost");
    assert!(lost.history.iter().any(|e| matches!(e.event, Event::FaultStart { .. })), "the fault is quoted");
    assert!(lost.history.iter().any(|e| matches!(&e.event, Event::Acked { value, .. } if value == "idem-0-0")));
}

#[test]
fn one_offset_acknowledged_for_two_records_is_found() {
    let history = vec![acked(T, 0, 0, "idem-0-0"), acked(T, 0, 0, "idem-1-0")];
    let mut out = Checked::default();
    check_plain_topic(T, &log(&[&["idem-1-0"]]), &history, &mut out);
    assert_eq!(kinds(&out), ["offset acknowledged twice", "lost"]);
}

#[test]
fn a_gap_in_offsets_is_found() {
    let mut out = Checked::default();
    let gappy = vec![vec![(0, "idem-0-0".to_string()), (2, "idem-0-1".to_string())]];
    check_plain_topic(T, &gappy, &[], &mut out);
    assert_eq!(kinds(&out), ["gap"]);
}

#[test]
fn torn_aborted_and_repeated_transactions_are_found() {
    let input = log(&[&["in-0-0", "in-0-1", "in-0-2", "in-0-3", "in-0-4"]]);
    let history = vec![
        at(1, Event::TxnCommitted { txn: 1, records: 2, inputs: Vec::new() }),
        at(2, Event::TxnAborted { txn: 2, records: 1, reason: "fenced".into() }),
        at(3, Event::TxnUnknown { txn: 3, records: 2, error: "timed out".into() }),
        at(4, Event::TxnCommitted { txn: 4, records: 2, inputs: Vec::new() }),
    ];
    // Transaction 1 shows one of two records, 2 (aborted) shows one, 3 (unknown) one of two;
    // in-0-4 is never transformed and in-0-3 twice.
    let output = log(&[&["out-in-0-0|t1", "out-in-0-1|t2", "out-in-0-2|t3", "out-in-0-3|t4", "out-in-0-3|t4"]]);
    let mut out = Checked::default();
    check_transactions(&input, &output, &history, &mut out);
    let mut found = kinds(&out);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "aborted data visible",
            "committed transaction not whole",
            "input not transformed",
            "input transformed twice",
            "out of order",
            "transaction not atomic"
        ]
    );
}

#[test]
fn whole_transactions_pass_including_unknown_ones_that_committed() {
    let input = log(&[&["in-0-0", "in-0-1", "in-0-2"]]);
    let history = vec![
        at(1, Event::TxnCommitted { txn: 1, records: 1, inputs: Vec::new() }),
        at(2, Event::TxnAborted { txn: 2, records: 2, reason: "fenced".into() }),
        at(3, Event::TxnUnknown { txn: 3, records: 2, error: "timed out".into() }),
    ];
    let output = log(&[&["out-in-0-0|t1", "out-in-0-1|t3", "out-in-0-2|t3"]]);
    let mut out = Checked::default();
    check_transactions(&input, &output, &history, &mut out);
    assert_eq!(kinds(&out), Vec::<&str>::new());
    assert_eq!(out.transactions.unknown_visible, 1);
}

#[test]
fn an_untagged_committed_offset_going_back_is_found() {
    let seen =
        |t, offset| at(t, Event::OffsetObserved { group: "g".into(), partition: 0, offset, asked_ms: t, commit: None });
    let mut out = Checked::default();
    check_offsets(&[seen(1, 5), seen(2, 9), seen(3, 9), seen(4, 7)], &mut out);
    assert_eq!(kinds(&out), ["committed offset went back"]);
    let mut fine = Checked::default();
    check_offsets(&[seen(1, 5), seen(2, 9)], &mut fine);
    assert!(fine.violations.is_empty());
}

/// Member 0's commit `seq` of `offset`, sent at `sent` and answered (stored) at `t`.
fn answered(t: u64, seq: u64, sent: u64, offset: i64) -> Entry {
    let offsets = vec![(0, offset, true)];
    at(t, Event::OffsetCommitAnswered { group: "g".into(), member: 0, seq, sent_ms: sent, offsets })
}

/// The observer reading, asked at `t`, the offset member 0's commit `seq` left.
fn seen_commit(t: u64, seq: u64, offset: i64) -> Entry {
    at(t + 5, Event::OffsetObserved { group: "g".into(), partition: 0, offset, asked_ms: t, commit: Some((0, seq)) })
}

#[test]
fn an_earlier_commit_read_after_a_later_one_sent_after_its_answer_is_out_of_order() {
    // Commit 1 answered at 20, commit 2 sent at 30 and acknowledged at 40: reading commit 1
    // at 50 means it was applied after commit 2.
    let history = [answered(20, 1, 10, 100), answered(40, 2, 30, 200), seen_commit(50, 1, 100)];
    let mut out = Checked::default();
    check_offsets(&history, &mut out);
    assert_eq!(kinds(&out), ["commit applied out of order"]);
    // Read before commit 2 was acknowledged, commit 1 is simply the latest.
    let mut fine = Checked::default();
    check_offsets(&[answered(20, 1, 10, 100), seen_commit(35, 1, 100), answered(40, 2, 30, 200)], &mut fine);
    assert!(fine.violations.is_empty());
}

#[test]
fn an_earlier_commit_librdkafka_resent_behind_later_ones_is_counted_not_a_violation() {
    // The shape of a failed CI run: commits 1 and 2 were on a connection that died; commit 3
    // (sent at 30, acknowledged at 40) overtook librdkafka's resends of them, answered at 45
    // and 46. Apache Kafka stores the resent older offset too.
    let history = [
        seen_commit(5, 0, 90),
        answered(40, 3, 30, 4255),
        answered(45, 2, 12, 4254),
        answered(46, 1, 10, 4253),
        seen_commit(50, 3, 4255),
        seen_commit(60, 1, 4253),
    ];
    let mut out = Checked::default();
    check_offsets(&history, &mut out);
    assert!(out.violations.is_empty(), "{:?}", kinds(&out));
    assert_eq!(out.offsets_resent_back, 1);
}

#[test]
fn a_transform_moving_past_inputs_is_found_where_it_happened() {
    let input = log(&[&["in-0-0", "in-0-1", "in-0-2", "in-0-3"], &["in-0-4", "in-0-5"]]);
    let committed = |txn, inputs: Vec<(i32, i64, i64)>| Event::TxnCommitted { txn, records: inputs.len(), inputs };
    let history = vec![
        at(1, committed(1, vec![(0, 0, 0), (1, 0, 0)])),
        // A rewind may start a partition again earlier; that is not a skip.
        at(2, committed(2, vec![(0, 0, 1), (1, 1, 1)])),
        at(3, committed(3, vec![(0, 3, 3)])),
    ];
    let output = log(&[&["out-in-0-0|t1", "out-in-0-4|t1", "out-in-0-1|t2", "out-in-0-5|t2", "out-in-0-3|t3"]]);
    let mut out = Checked::default();
    check_transactions(&input, &output, &history, &mut out);
    assert!(kinds(&out).contains(&"inputs skipped"), "{:?}", kinds(&out));
}

fn registered(t_ms: u64, subject: &str, schema: &str, id: i32, version: i32) -> Entry {
    at(t_ms, Event::SchemaRegistered { subject: subject.into(), schema: schema.into(), id, version })
}

#[test]
fn schema_versions_lost_changed_or_sharing_an_id_are_found() {
    use registry::ReadBack;
    let (a, b, c) = (r#"{"type":"string"}"#, r#"{"type":"long"}"#, r#"{"type":"int"}"#);
    let history = vec![
        registered(1, "s", a, 1, 1),
        registered(2, "s", b, 2, 2),
        registered(3, "t", c, 2, 1),
        registered(4, "u", a, 4, 1),
    ];
    let mut now = ReadBack::default();
    // Spacing and key order do not matter; a version gone, one pointing at another id do.
    now.versions.insert(("s".into(), 1), Some((1, r#"{ "type" : "string" }"#.into())));
    now.versions.insert(("s".into(), 2), None);
    now.versions.insert(("t".into(), 1), Some((3, c.into())));
    now.versions.insert(("u".into(), 1), Some((4, a.into())));
    now.ids.extend([(1, Some(a.into())), (2, Some(b.into())), (4, Some(b.into()))]);
    let mut out = Checked::default();
    registry::check(&history, &now, &mut out);
    let mut found = kinds(&out);
    found.sort_unstable();
    assert_eq!(
        found,
        [
            "schema id shared",
            "schema id shared",
            "schema version changed",
            "schema version changed",
            "schema version lost"
        ]
    );
    assert_eq!((out.registry.registered, out.registry.versions_lost, out.registry.ids_shared), (4, 1, 2));

    let clean = vec![registered(1, "s", a, 1, 1)];
    let mut now = ReadBack::default();
    now.versions.insert(("s".into(), 1), Some((1, a.into())));
    now.ids.insert(1, Some(a.into()));
    let mut out = Checked::default();
    registry::check(&clean, &now, &mut out);
    assert_eq!(kinds(&out), Vec::<&str>::new());
}
