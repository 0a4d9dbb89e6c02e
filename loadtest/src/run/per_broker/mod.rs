//! Clients shaped as the Java client's, on Floe's own protocol code, for benchmarks at many
//! partitions.
//!
//! The producer sends as the Java client does: each partition's records gather in a batch,
//! and once any batch for a broker is `linger.ms` old (or full), one Produce request carries
//! every partition's open batch to that broker, with at most five requests in flight per
//! connection. librdkafka sends one request per partition batch instead, so with thousands of
//! partitions and a few records each it sends a request per record, and its own CPU (on the
//! same cores as the server in these benchmarks) decides the latency. Plaintext, uncompressed
//! and not idempotent.
//!
//! The consumer reads its share of the partitions (assigned in turn, not through a group) with
//! one fetch per broker at a time in an incremental fetch session (KIP-227), as the Java
//! consumer's fetcher does; librdkafka names every partition in every fetch and reads every
//! partition's answer. Plaintext and uncompressed: what the partition benchmarks need, refused
//! otherwise.

mod consumer;
mod producer;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Context, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::RunArgs;

pub(super) use consumer::run as consume;
pub(super) use producer::run as produce;

/// Where each partition's leader is: broker addresses, and per partition an index into them.
struct Leaders {
    addresses: Vec<String>,
    of: HashMap<(String, i32), usize>,
}

/// Refuses what these clients do not do, before anything starts.
pub(super) fn check(args: &RunArgs) -> anyhow::Result<()> {
    use super::ConsumerKind;
    use super::ProducerKind::PerBroker;
    let producing = args.producers > 0 && args.producer_kind == PerBroker;
    let consuming = args.consumers > 0 && args.consumer_kind == ConsumerKind::PerBroker;
    if !producing && !consuming {
        return Ok(());
    }
    if args.compression != "none" {
        bail!("per-broker clients send and read uncompressed batches; use --compression none");
    }
    if args.transaction_records > 0 {
        bail!("per-broker clients are not transactional");
    }
    if producing && args.idempotence {
        bail!("the per-broker producer is not idempotent");
    }
    if producing && args.acks == "0" {
        bail!("the per-broker producer waits for answers; use --acks 1 or all");
    }
    let settings = args.client_config.iter().chain(&args.producer_config).chain(&args.consumer_config);
    let secured = settings
        .into_iter()
        .any(|(k, v)| (k == "security.protocol" && !v.eq_ignore_ascii_case("plaintext")) || k.starts_with("sasl."));
    if secured {
        bail!("per-broker clients speak plaintext only");
    }
    Ok(())
}

/// Each partition's leader as an index into the returned broker addresses.
fn leaders(args: &RunArgs, topics: &[(String, i32)]) -> anyhow::Result<Leaders> {
    let client: BaseConsumer =
        super::client_config(&args.bootstrap, &args.client_config).create().context("metadata client")?;
    let mut addresses: Vec<String> = Vec::new();
    let mut by_id: HashMap<i32, usize> = HashMap::new();
    let mut leaders = HashMap::new();
    for (topic, _) in topics {
        let metadata = client
            .fetch_metadata(Some(topic), Duration::from_secs(30))
            .with_context(|| format!("metadata of {topic}"))?;
        for broker in metadata.brokers() {
            by_id.entry(broker.id()).or_insert_with(|| {
                addresses.push(format!("{}:{}", broker.host(), broker.port()));
                addresses.len() - 1
            });
        }
        for t in metadata.topics() {
            for p in t.partitions() {
                let broker = by_id
                    .get(&p.leader())
                    .copied()
                    .with_context(|| format!("{topic}/{} has no known leader", p.id()))?;
                leaders.insert((topic.clone(), p.id()), broker);
            }
        }
    }
    Ok(Leaders { addresses, of: leaders })
}
