//! The checker: after every fault has healed, reads each topic back from offset 0 and holds it
//! against the history. Acknowledged records must be present once, at their acknowledged
//! offset; offsets of the plain topics must have no gaps; each producer's records must keep
//! their order within a partition; `read_committed` must show every committed transaction whole
//! and nothing of an aborted one, and each input of the transform exactly once; committed group
//! offsets must never go back.

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

const READ_TIMEOUT: Duration = Duration::from_secs(180);
/// Faults this long before an event are quoted with it.
const CONTEXT_BEFORE_MS: u64 = 15_000;
/// Most violations printed in full.
pub(crate) const VIOLATIONS_SHOWN: usize = 10;

/// One topic read back: per partition, `(offset, value)` in offset order.
type Log = Vec<Vec<(i64, String)>>;

/// Reads every partition of `topic` from the start to its high watermark.
pub(crate) fn read_topic(bootstrap: &str, topic: &str, partitions: i32, read_committed: bool) -> anyhow::Result<Log> {
    let consumer: BaseConsumer = client(bootstrap)
        .set("group.id", "chaos-checker")
        .set("enable.auto.commit", "false")
        .set("isolation.level", if read_committed { "read_committed" } else { "read_uncommitted" })
        .create()
        .context("checker consumer")?;
    let mut ends = Vec::new();
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        let (_, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(10))?;
        ends.push(high);
        assignment.add_partition_offset(topic, p, Offset::Beginning)?;
    }
    consumer.assign(&assignment)?;
    let mut log: Log = vec![Vec::new(); partitions as usize];
    let started = Instant::now();
    loop {
        let position = consumer.position()?;
        let done = (0..partitions).all(|p| match position.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => o >= ends[p as usize],
            _ => ends[p as usize] == 0,
        });
        if done {
            return Ok(log);
        }
        if started.elapsed() > READ_TIMEOUT {
            bail!("reading {topic} to its end offsets {ends:?} took over {READ_TIMEOUT:?}");
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let value = String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned();
                if let Some(partition) = log.get_mut(m.partition() as usize) {
                    partition.push((m.offset(), value));
                }
            }
            Some(Err(e)) => bail!("reading {topic}: {e}"),
            None => {}
        }
    }
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
    /// Longest time without an acknowledged write to the idempotent topic, in seconds, overall
    /// and by the fault in progress when it began: what each fault costs in availability.
    pub(crate) longest_stall_s: f64,
    pub(crate) longest_stall_by_fault_s: BTreeMap<String, f64>,
    pub(crate) violations: Vec<Violation>,
}

/// Faults in progress or recent around `t_ms`, and every event `related` picks.
fn context(history: &[Entry], t_ms: u64, related: impl Fn(&Event) -> bool) -> Vec<Entry> {
    history
        .iter()
        .filter(|e| {
            let near = e.t_ms + CONTEXT_BEFORE_MS >= t_ms && e.t_ms <= t_ms + 2_000;
            let fault = matches!(e.event, Event::FaultStart { .. } | Event::FaultEnd { .. });
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
                    out.violations.push(Violation {
                        kind: "offset acknowledged twice",
                        detail: format!("{topic}/{partition}@{offset} was acknowledged for {other} and for {value}"),
                        history: context(
                            history,
                            e.t_ms,
                            |ev| matches!(ev, Event::Acked { value: v, .. } if v == other || v == value),
                        ),
                    });
                }
                if let Some(first) = acked.insert(value, (*partition, *offset))
                    && first != (*partition, *offset)
                {
                    out.violations.push(Violation {
                        kind: "acknowledged twice",
                        detail: format!("{topic}: {value} acknowledged at {first:?} and at {:?}", (partition, offset)),
                        history: value_events(history, value),
                    });
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
                    out.violations.push(Violation {
                        kind: "gap",
                        detail: format!("{topic}/{p}: offset {offset} is record {i} of the partition"),
                        history: Vec::new(),
                    });
                }
            }
            if let Some(before) = last_by_source.insert(source(value), value)
                && before >= value.as_str()
            {
                figures.out_of_order += 1;
                out.violations.push(Violation {
                    kind: "out of order",
                    detail: format!("{topic}/{p}: {value} at offset {offset} follows {before}"),
                    history: value_events(history, value),
                });
            }
        }
    }
    for (value, places) in &found {
        if places.len() > 1 {
            figures.duplicated += 1;
            out.violations.push(Violation {
                kind: "duplicated",
                detail: format!("{topic}: {value} is in the log {} times, at {places:?}", places.len()),
                history: value_events(history, value),
            });
        }
    }
    for (value, at) in &acked {
        match found.get(value) {
            None => {
                figures.lost += 1;
                out.violations.push(Violation {
                    kind: "lost",
                    detail: format!("{topic}: {value} was acknowledged at {at:?} and is not in the log"),
                    history: value_events(history, value),
                });
            }
            Some(places) if !places.contains(at) => {
                figures.misplaced += 1;
                out.violations.push(Violation {
                    kind: "misplaced",
                    detail: format!("{topic}: {value} was acknowledged at {at:?} and is at {places:?}"),
                    history: value_events(history, value),
                });
            }
            Some(_) => {}
        }
    }
    out.topics.insert(topic.to_owned(), figures);
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
                out.violations.push(Violation {
                    kind: "foreign output",
                    detail: format!("{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value:?} was not written by the transform"),
                    history: Vec::new(),
                });
                continue;
            };
            *visible.entry(txn).or_default() += 1;
            *seen_inputs.entry(input).or_default() += 1;
            match input_offset.get(input) {
                Some(&(ip, io)) if ip == p && last_input.is_none_or(|last| io > last) => last_input = Some(io),
                Some(&(ip, io)) => out.violations.push(Violation {
                    kind: "out of order",
                    detail: format!(
                        "{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value} (input {TXN_INPUT_TOPIC}/{ip}@{io}) after input offset {last_input:?}"
                    ),
                    history: Vec::new(),
                }),
                None => out.violations.push(Violation {
                    kind: "foreign output",
                    detail: format!("{TXN_OUTPUT_TOPIC}/{p}@{offset}: {value}'s input is not in {TXN_INPUT_TOPIC}"),
                    history: Vec::new(),
                }),
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
                    out.violations.push(Violation {
                        kind: "committed transaction not whole",
                        detail: format!("transaction {txn} committed {records} records; read_committed shows {shown}"),
                        history: txn_context(),
                    });
                }
            }
            Event::TxnAborted { .. } => {
                f.aborted += 1;
                if shown > 0 {
                    f.aborted_visible += 1;
                    out.violations.push(Violation {
                        kind: "aborted data visible",
                        detail: format!("transaction {txn} was aborted; read_committed shows {shown} of its records"),
                        history: txn_context(),
                    });
                }
            }
            Event::TxnUnknown { records, .. } => {
                f.unknown += 1;
                if shown == *records {
                    f.unknown_visible += 1;
                } else if shown != 0 {
                    f.partial += 1;
                    out.violations.push(Violation {
                        kind: "transaction not atomic",
                        detail: format!(
                            "transaction {txn} of {records} records (outcome unknown to the client) shows {shown}"
                        ),
                        history: txn_context(),
                    });
                }
            }
            _ => {}
        }
    }
    for txn in visible.keys().filter(|t| !outcomes.contains_key(t)) {
        out.violations.push(Violation {
            kind: "unknown transaction",
            detail: format!("records of transaction {txn}, which the transform never finished, are visible"),
            history: Vec::new(),
        });
    }
    for input in input_offset.keys() {
        match seen_inputs.get(input).copied().unwrap_or(0) {
            1 => {}
            0 => {
                f.inputs_missing += 1;
                if f.inputs_missing <= VIOLATIONS_SHOWN {
                    out.violations.push(Violation {
                        kind: "input not transformed",
                        detail: format!("{input} is in {TXN_INPUT_TOPIC} but not in {TXN_OUTPUT_TOPIC}"),
                        history: value_events(history, input),
                    });
                }
            }
            n => {
                f.inputs_repeated += 1;
                out.violations.push(Violation {
                    kind: "input transformed twice",
                    detail: format!("{input} is in {TXN_OUTPUT_TOPIC} {n} times"),
                    history: value_events(history, input),
                });
            }
        }
    }
    out.transactions = f;
}

/// Committed offsets, as members saw their commits succeed and as the observer read them.
fn check_offsets(history: &[Entry], out: &mut Checked) {
    let mut last: HashMap<(&str, &str, i32), (i64, u64)> = HashMap::new();
    for e in history {
        let (how, group, partition, offset) = match &e.event {
            Event::OffsetCommitted { group, partition, offset } => ("committed", group, *partition, *offset),
            Event::OffsetObserved { group, partition, offset } => ("observed", group, *partition, *offset),
            _ => continue,
        };
        out.offset_observations += 1;
        if let Some((before, t_before)) = last.insert((how, group, partition), (offset, e.t_ms))
            && offset < before
        {
            out.offsets_backwards += 1;
            out.violations.push(Violation {
                kind: "committed offset went back",
                detail: format!(
                    "group {group} partition {partition}: {how} {offset} at {} ms after {before} at {t_before} ms",
                    e.t_ms
                ),
                history: context(history, e.t_ms, |_| false),
            });
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

#[cfg(test)]
mod tests;
