//! Shared-type schemas on table topics (`--attacks tables`): an Avro schema 15 deep and a
//! Protobuf one 30 deep are the value schemas of two table topics, and records written with
//! them, so the jobs agent maps the schemas to columns and writes the records as rows. Mapped
//! type by type down every path, one 10-byte record of the Avro schema took an agent from 533 MB
//! to 1.97 GB, and the Protobuf schema would have made 2^30 columns (issue 52); since then a
//! table holds at most 10,000 value fields and a nested type past them is JSON text. Each round
//! registers a new version, which the table must evolve to (so the registry maps it too), and
//! writes a few records with the latest; the run's verdict sees an agent that died, and the
//! report the agents' peak memory.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::schemas::{count, post_schema, produce, producer, register_url};
use super::shared_types::{Language, framed};
use super::{Counters, Stop, Target, stopped};

/// The table topics, each with its value schema's language and depth.
pub(super) const TOPICS: [(&str, Language, usize); 2] =
    [("hostile.dag_avro", Language::Avro, 15), ("hostile.dag_proto", Language::Protobuf, 30)];
/// How often the jobs agent commits these tables (`floe.table.commit.interval.ms`): each commit
/// maps the schemas of the records it writes.
pub(super) const COMMIT_INTERVAL_MS: &str = "1000";
/// Versions registered per topic, one a round: each is kept by the registry and evolves the
/// table's schema.
const VERSIONS_MAX: usize = 20;
/// Records written per round, their chains spread from the top type to the bottom one.
const RECORDS_PER_ROUND: usize = 16;
const ROUND: Duration = Duration::from_secs(5);

/// Attacks the table topic `topic` with a `language` schema `depth` deep until `stop`.
pub(super) async fn run(
    target: Target,
    http: reqwest::Client,
    (topic, language, depth): (&'static str, Language, usize),
    stop: Stop,
    counters: Arc<Counters>,
) {
    let Some(producer) = producer(&target) else { return };
    let subject = format!("{topic}-value");
    let (register, record) =
        (format!("{} table register", language.name()), format!("{} table record", language.name()));
    // The latest version registered: its id and number.
    let mut latest = None;
    let mut deliveries = JoinSet::new();
    for round in 0.. {
        let Some(base) = target.http.get(round % target.http.len().max(1)) else { break };
        if round < VERSIONS_MAX {
            let text = language.version(depth, round);
            let Some(answer) = post_schema(&http, register_url(base, &subject), language, text, &stop).await else {
                break;
            };
            count(&counters, &register, &answer);
            if let Some(id) = answer.id() {
                latest = Some((id, round));
            }
        }
        if let Some((id, version)) = latest {
            for i in 0..RECORDS_PER_ROUND {
                let chain = i * depth / (RECORDS_PER_ROUND - 1);
                let payload = framed(language, id, &language.value(depth, version, chain));
                produce(&producer, topic, &payload, &record, &mut deliveries, &counters);
            }
        }
        while deliveries.try_join_next().is_some() {}
        tokio::select! {
            () = tokio::time::sleep(ROUND) => {}
            () = stopped(&stop) => break,
        }
    }
    // Records still unanswered at the end go uncounted, as the flood's do.
    deliveries.abort_all();
}
