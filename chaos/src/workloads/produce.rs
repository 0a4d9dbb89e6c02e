//! Idempotent producers (librdkafka, `enable.idempotence`, `acks=all`) writing unique values
//! `PREFIX-ID-SEQ` to partition `SEQ % partitions`, so each producer's order in a partition can be
//! checked from the values alone. A stamped producer also sets each record's timestamp itself and
//! writes it into the value (`PREFIX-ID-SEQ@MS`), so a model of time retention knows from the
//! history alone how old every acknowledged record was.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use tokio::task::JoinSet;

use super::{Stop, client};
use crate::history::{Event, History};

#[derive(Clone, Debug)]
pub(crate) struct ProduceSpec {
    pub(crate) topic: &'static str,
    pub(crate) partitions: i32,
    pub(crate) prefix: &'static str,
    pub(crate) id: usize,
    pub(crate) per_second: u32,
    /// Each record's CreateTime set to the wall clock at send and written into its value.
    pub(crate) stamped: bool,
}

pub(crate) fn value(prefix: &str, id: usize, seq: u64) -> String {
    format!("{prefix}-{id}-{seq:08}")
}

/// A stamped value: [`value`] and the record's timestamp (ms since the Unix epoch).
pub(crate) fn stamped_value(prefix: &str, id: usize, seq: u64, created_ms: i64) -> String {
    format!("{}@{created_ms}", value(prefix, id, seq))
}

/// The timestamp a stamped value carries.
pub(crate) fn created_ms(value: &str) -> Option<i64> {
    value.rsplit_once('@')?.1.parse().ok()
}

/// An idempotent producer (`acks=all`) that keeps retrying for 90 s.
pub(crate) fn idempotent_producer(bootstrap: &str) -> anyhow::Result<FutureProducer> {
    client(bootstrap)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "90000")
        .create()
        .context("idempotent producer")
}

/// Produces until `stop`, then waits for every outstanding delivery report.
pub(crate) async fn run(bootstrap: String, spec: ProduceSpec, stop: Stop, history: Arc<History>) -> anyhow::Result<()> {
    let mut producer = idempotent_producer(&bootstrap)?;
    let mut tick = tokio::time::interval(Duration::from_secs(1) / spec.per_second.max(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut reports = JoinSet::new();
    let mut seq = 0u64;
    while !stop.is_set() {
        tick.tick().await;
        while reports.try_join_next().is_some() {}
        if let Some((code, reason)) = producer.client().fatal_error() {
            // Reported, and the producer replaced, so the run goes on; the checker still
            // judges every record this producer had acknowledged.
            history.note(format!("{} producer {}: fatal error {code:?}: {reason}", spec.topic, spec.id));
            producer = idempotent_producer(&bootstrap)?;
        }
        let created_ms = spec.stamped.then(super::unix_ms);
        let value = match created_ms {
            Some(ms) => stamped_value(spec.prefix, spec.id, seq, ms),
            None => value(spec.prefix, spec.id, seq),
        };
        let partition = (seq % spec.partitions as u64) as i32;
        let mut record = FutureRecord::<(), str>::to(spec.topic).payload(&value).partition(partition);
        if let Some(ms) = created_ms {
            record = record.timestamp(ms);
        }
        let Ok(delivery) = producer.send_result(record) else {
            continue; // The local queue is full: this tick writes nothing.
        };
        seq += 1;
        let (history, topic) = (history.clone(), spec.topic.to_owned());
        let sent_ms = history.now_ms();
        reports.spawn(async move {
            let event = match delivery.await {
                Ok(Ok(d)) => {
                    history.produce_latency(sent_ms);
                    Event::Acked { topic, partition: d.partition, offset: d.offset, value }
                }
                Ok(Err((error, _))) => Event::Failed { topic, value, error: error.to_string() },
                Err(_) => Event::Failed { topic, value, error: "producer dropped".into() },
            };
            history.push(event);
        });
    }
    while reports.join_next().await.is_some() {}
    Ok(())
}
