//! The checker: after every fault has healed, reads each topic back from offset 0 and holds it
//! against the history. Acknowledged records must be present once, at their acknowledged
//! offset; offsets of the plain topics must have no gaps; each producer's records must keep
//! their order within a partition; `read_committed` must show every committed transaction whole
//! and nothing of an aborted one, and each input of the transform exactly once; committed group
//! offsets must never go back; acknowledged schema versions must keep their ids and texts
//! ([`registry`]). Models of their own judge the compacted changelog's restores ([`changelog`]),
//! reads from a log start that DeleteRecords and retention move ([`retained`]), a consumer group
//! that restarts ([`restarts`]) and a table topic's Iceberg table ([`table`]).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::Serialize;

use crate::history::{Entry, Event};
use crate::workloads::transactions::parse_output;
use crate::workloads::{
    HTTP_PARTITIONS, HTTP_TOPIC, IDEMPOTENT_PARTITIONS, IDEMPOTENT_TOPIC, TXN_INPUT_TOPIC, TXN_OUTPUT_TOPIC,
    TXN_PARTITIONS, client,
};

/// Reading a topic back fails when no record arrives for this long (however long the whole read).
const READ_STALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long one ListOffsets for a partition's log start may take while a read waits.
const WATERMARK_TIMEOUT: Duration = Duration::from_secs(5);
/// Faults this long before an event are quoted with it.
const CONTEXT_BEFORE_MS: u64 = 15_000;
/// Most violations printed in full.
pub(crate) const VIOLATIONS_SHOWN: usize = 10;

/// One topic read back: per partition, `(offset, value)` in offset order.
type Log = Vec<Vec<(i64, String)>>;

/// The end of each partition of `topic` as a reader at the given isolation level sees it: the
/// high watermark, or the last stable offset for `read_committed` (librdkafka's default level).
pub(crate) fn end_offsets(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    read_committed: bool,
) -> anyhow::Result<Vec<i64>> {
    let consumer: BaseConsumer = client(bootstrap)
        .set("isolation.level", isolation_level(read_committed))
        .create()
        .context("watermark consumer")?;
    (0..partitions).map(|p| Ok(consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?.1)).collect()
}

/// Reads every partition of `topic` from the start to its end ([`read_each`]).
pub(crate) fn read_topic(bootstrap: &str, topic: &str, partitions: i32, read_committed: bool) -> anyhow::Result<Log> {
    let mut log: Log = vec![Vec::new(); partitions as usize];
    read_each(bootstrap, topic, partitions, read_committed, |m| {
        let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
        if let Some(partition) = log.get_mut(m.partition() as usize) {
            partition.push((m.offset(), value));
        }
    })?;
    Ok(log)
}

/// Hands `each` every record of `topic` from the start to the end its partitions had when the
/// read began, at the read's isolation level ([`end_offsets`]).
pub(crate) fn read_each(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    read_committed: bool,
    mut each: impl FnMut(&rdkafka::message::BorrowedMessage<'_>),
) -> anyhow::Result<()> {
    let consumer: BaseConsumer = client(bootstrap)
        .set("group.id", "chaos-checker")
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation_level(read_committed))
        // A log start that moves past the position (DeleteRecords) restarts the read there.
        .set("auto.offset.reset", "earliest")
        .create()
        .context("checker consumer")?;
    let ends = end_offsets(bootstrap, topic, partitions, read_committed)?;
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut progressed = Instant::now();
    let mut since_check = 0u32;
    loop {
        // Positions are asked for only when idle or every so many records: asking per record
        // made reading a long run's million records take minutes.
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                progressed = Instant::now();
                each(&m);
                since_check += 1;
                if since_check < 10_000 {
                    continue;
                }
            }
            // A dropped connection (an agent closing unproven ones under the idle attack, or
            // killed) is reported here too; librdkafka reconnects, and a read that never
            // resumes ends at the stall timeout below.
            Some(Err(e)) if is_transient(&e) => {}
            Some(Err(e)) => bail!("reading {topic}: {e}"),
            None => {}
        }
        since_check = 0;
        let position = consumer.position()?;
        let done = (0..partitions).all(|p| {
            let end = ends[p as usize];
            let reached = match position.find_partition(topic, p).map(|e| e.offset()) {
                Some(Offset::Offset(o)) => o >= end,
                _ => end == 0,
            };
            // Retention or DeleteRecords may have removed what was left before the end; the
            // consumer's position does not move past records it never got, so a log start at or
            // past the end means there is nothing more to read (asked only when not reached).
            reached || consumer.fetch_watermarks(topic, p, WATERMARK_TIMEOUT).is_ok_and(|(low, _)| low >= end)
        });
        if done {
            return Ok(());
        }
        if progressed.elapsed() > READ_STALL_TIMEOUT {
            bail!("reading {topic} to its end offsets {ends:?}: nothing arrived for {READ_STALL_TIMEOUT:?}");
        }
    }
}

fn isolation_level(read_committed: bool) -> &'static str {
    if read_committed { "read_committed" } else { "read_uncommitted" }
}

/// Whether a consumer error is one librdkafka recovers from by itself.
fn is_transient(error: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::types::RDKafkaErrorCode::{AllBrokersDown, BrokerTransportFailure};
    matches!(error.rdkafka_error_code(), Some(BrokerTransportFailure | AllBrokersDown))
}

#[derive(Debug, Serialize)]
pub(crate) struct Violation {
    pub(crate) kind: &'static str,
    pub(crate) detail: String,
    /// The events that show it: the writes involved and the faults around them.
    pub(crate) history: Vec<Entry>,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct TopicFigures {
    pub(crate) acknowledged: usize,
    pub(crate) failed_or_unknown: usize,
    pub(crate) read: usize,
    pub(crate) lost: usize,
    pub(crate) duplicated: usize,
    pub(crate) misplaced: usize,
    pub(crate) out_of_order: usize,
    pub(crate) gaps: usize,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct TxnFigures {
    pub(crate) committed: usize,
    pub(crate) aborted: usize,
    pub(crate) unknown: usize,
    pub(crate) unknown_visible: usize,
    pub(crate) inputs: usize,
    pub(crate) outputs: usize,
    pub(crate) partial: usize,
    pub(crate) aborted_visible: usize,
    pub(crate) inputs_missing: usize,
    pub(crate) inputs_repeated: usize,
}

#[derive(Debug, Default, Serialize)]
pub(crate) struct Checked {
    pub(crate) topics: BTreeMap<String, TopicFigures>,
    pub(crate) transactions: TxnFigures,
    pub(crate) offset_observations: usize,
    pub(crate) offsets_backwards: usize,
    /// Observed offsets that went back because librdkafka resent an older commit late.
    pub(crate) offsets_resent_back: usize,
    /// Longest time without an acknowledged write to the idempotent topic, in seconds, overall
    /// and by the fault in progress when it began: what each fault costs in availability.
    pub(crate) longest_stall_s: f64,
    pub(crate) longest_stall_by_fault_s: BTreeMap<String, f64>,
    pub(crate) registry: registry::RegistryFigures,
    pub(crate) changelog: changelog::ChangelogFigures,
    /// By topic: the DeleteRecords topic and the retention topics.
    pub(crate) retained: BTreeMap<String, retained::RetainedFigures>,
    pub(crate) restarts: restarts::RestartFigures,
    pub(crate) table: table::TableFigures,
    pub(crate) violations_by_kind: BTreeMap<&'static str, usize>,
    pub(crate) violations: Vec<Violation>,
}

/// Records a violation; only the first few of each kind quote their history, since quoting is
/// a scan of the whole history and a long run can hold many thousands of violations.
fn violation(out: &mut Checked, kind: &'static str, detail: String, history: impl FnOnce() -> Vec<Entry>) {
    let seen = out.violations_by_kind.entry(kind).or_default();
    *seen += 1;
    let quoted = *seen <= VIOLATIONS_SHOWN;
    out.violations.push(Violation { kind, detail, history: if quoted { history() } else { Vec::new() } });
}

/// Faults in progress or recent around `t_ms` (and processes that exited on their own), and
/// every event `related` picks.
fn context(history: &[Entry], t_ms: u64, related: impl Fn(&Event) -> bool) -> Vec<Entry> {
    history
        .iter()
        .filter(|e| {
            let near = e.t_ms + CONTEXT_BEFORE_MS >= t_ms && e.t_ms <= t_ms + 2_000;
            let fault =
                matches!(e.event, Event::FaultStart { .. } | Event::FaultEnd { .. } | Event::ProcessExited { .. });
            (fault && near) || related(&e.event)
        })
        .cloned()
        .collect()
}

fn value_events(history: &[Entry], value: &str) -> Vec<Entry> {
    let t = history
        .iter()
        .find(|e| matches!(&e.event, Event::Acked { value: v, .. } | Event::Failed { value: v, .. } if v == value))
        .map_or(0, |e| e.t_ms);
    context(history, t, |e| matches!(e, Event::Acked { value: v, .. } | Event::Failed { value: v, .. } if v == value))
}

/// The producer a value came from (`idem-1`, `http-0`), for the order check.
fn source(value: &str) -> &str {
    let mut dashes = value.match_indices('-').map(|(i, _)| i);
    match (dashes.next(), dashes.next()) {
        (Some(_), Some(second)) => &value[..second],
        _ => value,
    }
}

/// Acknowledged records against a plain (non-transactional) topic read back.
fn check_plain_topic(topic: &str, log: &Log, history: &[Entry], out: &mut Checked) {
    let mut figures = TopicFigures::default();
    let mut acked: HashMap<&str, (i32, i64)> = HashMap::new();
    let mut acked_at: HashMap<(i32, i64), &str> = HashMap::new();
    for e in history {
        match &e.event {
            Event::Acked { topic: t, partition, offset, value } if t == topic => {
                figures.acknowledged += 1;
                if let Some(other) = acked_at.insert((*partition, *offset), value)
                    && other != value
                {
                    violation(
                        out,
                        "offset acknowledged twice",
                        format!("{topic}/{partition}@{offset} was acknowledged for {other} and for {value}"),
                        || {
                            context(
                                history,
                                e.t_ms,
                                |ev| matches!(ev, Event::Acked { value: v, .. } if v == other || v == value),
                            )
                        },
                    );
                }
                if let Some(first) = acked.insert(value, (*partition, *offset))
                    && first != (*partition, *offset)
                {
                    violation(
                        out,
                        "acknowledged twice",
                        format!("{topic}: {value} acknowledged at {first:?} and at {:?}", (partition, offset)),
                        || value_events(history, value),
                    );
                }
            }
            Event::Failed { topic: t, .. } if t == topic => figures.failed_or_unknown += 1,
            _ => {}
        }
    }
    let mut found: HashMap<&str, Vec<(i32, i64)>> = HashMap::new();
    for (p, records) in log.iter().enumerate() {
        let mut last_by_source: HashMap<&str, &str> = HashMap::new();
        for (i, (offset, value)) in records.iter().enumerate() {
            figures.read += 1;
            found.entry(value).or_default().push((p as i32, *offset));
            if *offset != i as i64 {
                figures.gaps += 1;
                if figures.gaps == 1 {
                    violation(
                        out,
                        "gap",
                        format!("{topic}/{p}: offset {offset} is record {i} of the partition"),
                        Vec::new,
                    );
                }
            }
            if let Some(before) = last_by_source.insert(source(value), value)
                && before >= value.as_str()
            {
                figures.out_of_order += 1;
                violation(
                    out,
                    "out of order",
                    format!("{topic}/{p}: {value} at offset {offset} follows {before}"),
                    || value_events(history, value),
                );
            }
        }
    }
    for (value, places) in &found {
        if places.len() > 1 {
            figures.duplicated += 1;
            violation(
                out,
                "duplicated",
                format!("{topic}: {value} is in the log {} times, at {places:?}", places.len()),
                || value_events(history, value),
            );
        }
    }
    for (value, at) in &acked {
        match found.get(value) {
            None => {
                figures.lost += 1;
                violation(
                    out,
                    "lost",
                    format!("{topic}: {value} was acknowledged at {at:?} and is not in the log"),
                    || value_events(history, value),
                );
            }
            Some(places) if !places.contains(at) => {
                figures.misplaced += 1;
                violation(
                    out,
                    "misplaced",
                    format!("{topic}: {value} was acknowledged at {at:?} and is at {places:?}"),
                    || value_events(history, value),
                );
            }
            Some(_) => {}
        }
    }
    out.topics.insert(topic.to_owned(), figures);
}

/// Where the transform's consumer moved past inputs without handing them over: per partition,
/// each committed transaction's inputs start right after the last one's (a rewind after an
/// abort or an unknown outcome starts at or before it, which the output check judges).
fn skipped_inputs(history: &[Entry], out: &mut Checked) {
    let mut last: HashMap<i32, (i64, u64)> = HashMap::new();
    for e in history {
        let Event::TxnCommitted { txn, inputs, .. } = &e.event else { continue };
        for &(partition, first, end) in inputs {
            if let Some(&(previous, previous_txn)) = last.get(&partition)
                && first > previous + 1
            {
                let t_ms = e.t_ms;
                violation(
                    out,
                    "inputs skipped",
                    format!(
                        "{TXN_INPUT_TOPIC}/{partition}: transaction {txn} starts at {first}, transaction \
                         {previous_txn} ended at {previous}: {} inputs never handed to the transform",
                        first - previous - 1
                    ),
                    || context(history, t_ms, |x| std::ptr::eq(x, &e.event)),
                );
            }
            last.insert(partition, (end, *txn));
        }
    }
}

/// The transform's output (read_committed) against its input and the transactions' outcomes.
fn check_transactions(input: &Log, output: &Log, history: &[Entry], out: &mut Checked) {
    let mut f = TxnFigures::default();
    let mut outcomes: HashMap<u64, (&Event, u64)> = HashMap::new();
    for e in history {
        match &e.event {
            Event::TxnCommitted { txn, .. } | Event::TxnAborted { txn, .. } | Event::TxnUnknown { txn, .. } => {
                outcomes.insert(*txn, (&e.event, e.t_ms));
            }
            _ => {}
        }
    }
    skipped_inputs(history, out);
    let input_offset: HashMap<&str, (usize, i64)> = input
        .iter()
        .enumerate()
        .flat_map(|(p, records)| records.iter().map(move |(o, v)| (v.as_str(), (p, *o))))
        .collect();
    f.inputs = input_offset.len();
    let mut visible: HashMap<u64, usize> = HashMap::new();
    let mut seen_inputs: HashMap<&str, usize> = HashMap::new();
    for (p, records) in output.iter().enumerate() {
        let mut last_input: Option<i64> = None;
        for (offset, value) in records {
            f.outputs += 1;
            let Some((input, txn)) = parse_output(value) else {
                violation(
                    out,
                    "foreign output",
                    format!("{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value:?} was not written by the transform"),
                    Vec::new,
                );
                continue;
            };
            *visible.entry(txn).or_default() += 1;
            *seen_inputs.entry(input).or_default() += 1;
            match input_offset.get(input) {
                Some(&(ip, io)) if ip == p && last_input.is_none_or(|last| io > last) => last_input = Some(io),
                Some(&(ip, io)) => violation(
                    out,
                    "out of order",
                    format!(
                        "{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value} (input {TXN_INPUT_TOPIC}/{ip}@{io}) after input offset {last_input:?}"
                    ),
                    Vec::new,
                ),
                None => violation(
                    out,
                    "foreign output",
                    format!("{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value}'s input is not in {TXN_INPUT_TOPIC}"),
                    Vec::new,
                ),
            }
        }
    }
    for (&txn, &(event, t_ms)) in &outcomes {
        let shown = visible.get(&txn).copied().unwrap_or(0);
        let txn_context = || context(history, t_ms, |e| std::ptr::eq(e, event));
        match event {
            Event::TxnCommitted { records, .. } => {
                f.committed += 1;
                if shown != *records {
                    f.partial += 1;
                    violation(
                        out,
                        "committed transaction not whole",
                        format!("transaction {txn} committed {records} records; read_committed shows {shown}"),
                        txn_context,
                    );
                }
            }
            Event::TxnAborted { .. } => {
                f.aborted += 1;
                if shown > 0 {
                    f.aborted_visible += 1;
                    violation(
                        out,
                        "aborted data visible",
                        format!("transaction {txn} was aborted; read_committed shows {shown} of its records"),
                        txn_context,
                    );
                }
            }
            Event::TxnUnknown { records, .. } => {
                f.unknown += 1;
                if shown == *records {
                    f.unknown_visible += 1;
                } else if shown != 0 {
                    f.partial += 1;
                    violation(
                        out,
                        "transaction not atomic",
                        format!("transaction {txn} of {records} records (outcome unknown to the client) shows {shown}"),
                        txn_context,
                    );
                }
            }
            _ => {}
        }
    }
    for txn in visible.keys().filter(|t| !outcomes.contains_key(t)) {
        violation(
            out,
            "unknown transaction",
            format!("records of transaction {txn}, which the transform never finished, are visible"),
            Vec::new,
        );
    }
    for input in input_offset.keys() {
        match seen_inputs.get(input).copied().unwrap_or(0) {
            1 => {}
            0 => {
                f.inputs_missing += 1;
                if f.inputs_missing <= VIOLATIONS_SHOWN {
                    violation(
                        out,
                        "input not transformed",
                        format!("{input} is in {TXN_INPUT_TOPIC} but not in {TXN_OUTPUT_TOPIC}"),
                        || value_events(history, input),
                    );
                }
            }
            n => {
                f.inputs_repeated += 1;
                violation(
                    out,
                    "input transformed twice",
                    format!("{input} is in {TXN_OUTPUT_TOPIC} {n} times"),
                    || value_events(history, input),
                );
            }
        }
    }
    out.transactions = f;
}

/// A member's commits of one partition acknowledged so far: when the last was acknowledged,
/// and the send time and number of the one sent last among them.
type Acked = (u64, u64, u64);

/// Committed offsets as the observer read them. An offset a member's commit left must not be
/// there after a later commit of the same member was acknowledged, if that later commit was
/// sent after librdkafka had answered the earlier one: from then on no copy of the earlier one
/// is on its way, so reading it means the coordinator applied the member's commits out of the
/// order it sent them, or lost the later one. An earlier commit librdkafka had not answered yet
/// may land last: it resends a commit that failed on a dead connection after the ones sent
/// behind it, and Apache Kafka then stores the older offset too. Those are counted, not
/// violations. Only synchronous commits have a known answer, so only they can be found applied
/// late (the workload's one-at-a-time member commits only so). Offsets no member's tag names
/// (the transform's, stored by its transactions) must simply never go back.
fn check_offsets(history: &[Entry], out: &mut Checked) {
    // When each member's commit was answered; per group, member and partition, the commits
    // acknowledged, in answer order, with the latest send time among them so far.
    let mut answered: HashMap<(&str, u32, u64), u64> = HashMap::new();
    let mut acked: HashMap<(&str, u32, i32), Vec<Acked>> = HashMap::new();
    for e in history {
        let Event::OffsetCommitAnswered { group, member, seq, sent_ms, offsets } = &e.event else { continue };
        answered.entry((group, *member, *seq)).or_insert(e.t_ms);
        for &(partition, _, _) in offsets.iter().filter(|(_, _, stored)| *stored) {
            let list = acked.entry((group, *member, partition)).or_default();
            let (sent, latest) = match list.last() {
                Some(&(_, sent, latest)) if sent >= *sent_ms => (sent, latest),
                _ => (*sent_ms, *seq),
            };
            list.push((e.t_ms, sent, latest));
        }
    }
    let mut last: HashMap<(&str, i32), (i64, u64)> = HashMap::new();
    for e in history {
        let Event::OffsetObserved { group, partition, offset, asked_ms, commit } = &e.event else { continue };
        out.offset_observations += 1;
        let went_back = last.insert((group, *partition), (*offset, e.t_ms)).filter(|(b, _)| offset < b);
        let Some((member, seq)) = *commit else {
            if let Some((before, t_before)) = went_back {
                out.offsets_backwards += 1;
                violation(
                    out,
                    "committed offset went back",
                    format!(
                        "group {group} partition {partition}: {offset} at {} ms after {before} at {t_before} ms",
                        e.t_ms
                    ),
                    || context(history, e.t_ms, |_| false),
                );
            }
            continue;
        };
        // Of this member's commits acknowledged before the observer asked, the one sent last.
        let later = acked.get(&(group.as_str(), member, *partition)).and_then(|list| {
            let n = list.partition_point(|&(t, _, _)| t < *asked_ms);
            n.checked_sub(1).map(|i| (list[i].1, list[i].2))
        });
        let this_answered = answered.get(&(group.as_str(), member, seq)).copied();
        match (later, this_answered) {
            (Some((sent_later, later_seq)), Some(t_answered)) if sent_later > t_answered => {
                out.offsets_backwards += 1;
                violation(
                    out,
                    "commit applied out of order",
                    format!(
                        "group {group} partition {partition}: read at {asked_ms} ms, offset {offset} of member \
                         {member}'s commit {seq} (answered at {t_answered} ms), though its commit {later_seq}, \
                         sent at {sent_later} ms, was acknowledged before"
                    ),
                    || {
                        context(history, e.t_ms, |ev| {
                            matches!(ev, Event::OffsetCommitAnswered { member: m, seq: s, .. }
                                if *m == member && (*s == seq || *s == later_seq))
                        })
                    },
                );
            }
            _ if went_back.is_some() => out.offsets_resent_back += 1,
            _ => {}
        }
    }
}

/// Gaps between acknowledgements of the idempotent producers, each put down to the last fault
/// that was in progress at some time during it.
fn stalls(history: &[Entry], out: &mut Checked) {
    let mut active: Option<&str> = None;
    let mut during_gap: Option<&str> = None;
    let mut last_ack: Option<u64> = None;
    for e in history {
        match &e.event {
            Event::FaultStart { fault, .. } => {
                active = Some(fault);
                during_gap = Some(fault);
            }
            Event::FaultEnd { .. } => active = None,
            Event::Acked { topic, .. } if topic == IDEMPOTENT_TOPIC => {
                if let Some(before) = last_ack {
                    let gap = e.t_ms.saturating_sub(before) as f64 / 1000.0;
                    out.longest_stall_s = out.longest_stall_s.max(gap);
                    let worst =
                        out.longest_stall_by_fault_s.entry(during_gap.unwrap_or("none").to_owned()).or_default();
                    *worst = worst.max(gap);
                }
                last_ack = Some(e.t_ms);
                during_gap = active;
            }
            _ => {}
        }
    }
}

/// Reads everything back and checks it against `history`.
pub(crate) fn run(bootstrap: &str, history: &[Entry]) -> anyhow::Result<Checked> {
    let mut out = Checked::default();
    for (topic, partitions) in [(IDEMPOTENT_TOPIC, IDEMPOTENT_PARTITIONS), (HTTP_TOPIC, HTTP_PARTITIONS)] {
        let log = read_topic(bootstrap, topic, partitions, false)?;
        check_plain_topic(topic, &log, history, &mut out);
    }
    let input = read_topic(bootstrap, TXN_INPUT_TOPIC, TXN_PARTITIONS, false)?;
    check_plain_topic(TXN_INPUT_TOPIC, &input, history, &mut out);
    let output = read_topic(bootstrap, TXN_OUTPUT_TOPIC, TXN_PARTITIONS, true)?;
    check_transactions(&input, &output, history, &mut out);
    check_offsets(history, &mut out);
    stalls(history, &mut out);
    Ok(out)
}

pub(crate) mod changelog;
pub(crate) mod registry;
pub(crate) mod restarts;
pub(crate) mod retained;
pub(crate) mod table;
#[cfg(test)]
mod tests;
