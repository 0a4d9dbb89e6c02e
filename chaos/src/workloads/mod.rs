//! The workloads that run while faults are injected. Each records what it was told in the
//! history: an acknowledged offset, a failure, a transaction's outcome, a committed offset.

pub(crate) mod groups;
pub(crate) mod http;
pub(crate) mod produce;
pub(crate) mod transactions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rdkafka::config::ClientConfig;

/// Set when the workloads should finish what they started and return.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stop(Arc<AtomicBool>);

impl Stop {
    pub(crate) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Settings every client of the harness shares.
pub(crate) fn client(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        // Faults come and go within seconds; find new coordinators and leaders quickly.
        .set("reconnect.backoff.max.ms", "1000")
        .set("retry.backoff.max.ms", "1000")
        .set("topic.metadata.refresh.interval.ms", "5000");
    config
}

/// A client context that keeps librdkafka's warnings (offset resets, a partition moved to
/// another broker) in the history as notes, where the checker's context shows them.
pub(crate) struct Noting(pub(crate) Arc<crate::history::History>);

impl rdkafka::ClientContext for Noting {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        use rdkafka::config::RDKafkaLogLevel::{Alert, Critical, Emerg, Error, Warning};
        if matches!(level, Emerg | Alert | Critical | Error | Warning) {
            self.0.note(format!("librdkafka {fac}: {message}"));
        }
    }
}

impl rdkafka::consumer::ConsumerContext for Noting {}

/// Topics of a run and their partition counts.
pub(crate) const IDEMPOTENT_TOPIC: &str = "chaos-idempotent";
pub(crate) const IDEMPOTENT_PARTITIONS: i32 = 6;
pub(crate) const HTTP_TOPIC: &str = "chaos-http";
pub(crate) const HTTP_PARTITIONS: i32 = 3;
pub(crate) const TXN_INPUT_TOPIC: &str = "chaos-txn-input";
pub(crate) const TXN_OUTPUT_TOPIC: &str = "chaos-txn-output";
pub(crate) const TXN_PARTITIONS: i32 = 3;
/// Where recovery is probed: a record written and read through each agent.
pub(crate) const PROBE_TOPIC: &str = "chaos-probe";
/// The consume-transform-produce loop's group.
pub(crate) const TXN_GROUP: &str = "chaos-transform";
/// The group of plain consumers reading the idempotent topic.
pub(crate) const READER_GROUP: &str = "chaos-readers";
