//! Table topics: the job that turns a topic's records into an Iceberg table of Parquet files
//! under `PREFIX/tables/<table-uuid>/`, run by the agent holding the storage-job lease.
//!
//! Each round, every table topic whose `floe.table.commit.interval.ms` has passed is read from
//! its table's committed offsets up to the last stable offset, its records written as Parquet
//! files plus a manifest, a manifest list and a new metadata JSON (all create-only), and then
//! `CommitTableSnapshot` moves the table's offsets and metadata location together. A crash
//! before that commit leaves only files no metadata refers to, which [`gc`] deletes after the
//! orphan grace: no gap, no duplicate row.

mod commit;
mod gc;
mod merge;
mod upsert;

use std::collections::HashMap;
use std::sync::Weak;

use floe_metadata::tasks::sleep_unless_stopped;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use floe_metadata::{State, TopicId};
use floe_registry::ParsedSchema;
use floe_tables::schema::IcebergSchema;

use crate::Agent;

pub(crate) use commit::CachedTable;

/// The table schema widened to hold values of writer schema `writer` (for Protobuf, of
/// `message`, else the schema's first message), with the new `last-column-id`; `None` when the
/// table holds them already; why not when no Iceberg evolution can.
pub fn evolve_table_schema(
    table: &IcebergSchema,
    last_column_id: i32,
    writer: &ParsedSchema,
    message: Option<&floe_tables::protobuf::MessageDescriptor>,
) -> Result<Option<(IcebergSchema, i32)>, String> {
    let evolved = match writer {
        ParsedSchema::Avro(avro) => floe_tables::avro::evolve(table, last_column_id, avro.root(), &AvroNames(avro)),
        ParsedSchema::Protobuf(protobuf) => match message.cloned().or_else(|| protobuf.first_message()) {
            Some(message) => floe_tables::protobuf::evolve(table, last_column_id, &message),
            None => return Err("the Protobuf schema defines no message".into()),
        },
        ParsedSchema::Json(json) => floe_tables::json::evolve(table, last_column_id, json.root()),
    };
    evolved.map_err(|e| e.to_string())
}

/// An Avro writer schema's named types, as `floe_tables::avro` resolves references.
pub(crate) struct AvroNames<'a>(pub(crate) &'a floe_registry::avro::AvroSchema);

impl floe_tables::avro::NamedTypes for AvroNames<'_> {
    fn named(&self, full_name: &str) -> Option<&floe_tables::avro::Schema> {
        self.0.named(full_name)
    }
}

/// How the table job runs.
#[derive(Clone, Copy, Debug)]
pub struct TableJobConfig {
    /// Pause between rounds looking for tables due a commit.
    pub interval: Duration,
    /// Tests only: pause between writing a snapshot's files and committing them, so a test can
    /// kill the agent in between.
    pub commit_delay: Duration,
}

/// Table GC runs every this many rounds: it lists the table prefixes.
const GC_EVERY_ROUNDS: u64 = 30;

/// Runs until `stop` (or the agent is dropped).
pub(crate) async fn run(agent: Weak<Agent>, config: TableJobConfig, stop: CancellationToken) {
    let mut last_attempt: HashMap<TopicId, Instant> = HashMap::new();
    // Tables whose last round stopped at its byte budget: due again at once.
    let mut backlogged: Vec<TopicId> = Vec::new();
    let mut cache: HashMap<TopicId, CachedTable> = HashMap::new();
    let mut round = 0u64;
    while sleep_unless_stopped(&stop, config.interval).await {
        let Some(agent) = agent.upgrade() else { return };
        round += 1;
        let due = {
            let state = agent.metadata.read();
            due_tables(&state, &last_attempt, &backlogged)
        };
        let gc_due = round.is_multiple_of(GC_EVERY_ROUNDS);
        if due.is_empty() && !gc_due {
            continue;
        }
        if !crate::gc::is_job_runner(&agent).await {
            cache.clear();
            continue;
        }
        backlogged.clear();
        for topic_id in due {
            last_attempt.insert(topic_id, Instant::now());
            let started = Instant::now();
            match commit::commit_table(&agent, topic_id, &mut cache, config.commit_delay).await {
                Ok(summary) => {
                    crate::metrics::TABLE_COMMITS.with_label_values(&["ok"]).inc();
                    crate::metrics::TABLE_CONVERT_SECONDS.inc_by(started.elapsed().as_secs_f64());
                    if summary.backlogged {
                        backlogged.push(topic_id);
                    }
                    tracing::debug!(topic = %topic_id, rows = summary.rows, files = summary.files, "table commit");
                    if let Err(e) = merge::merge_small_files(&agent, topic_id, &mut cache).await {
                        tracing::warn!(topic = %topic_id, error = %e, "merging a table's small files failed");
                        cache.remove(&topic_id);
                    }
                }
                Err(e) => {
                    crate::metrics::TABLE_COMMITS.with_label_values(&["failed"]).inc();
                    tracing::warn!(topic = %topic_id, error = %e, "table commit failed; rereading the table next round");
                    cache.remove(&topic_id);
                }
            }
        }
        if gc_due && let Err(e) = gc::collect(&agent, agent.config.gc.orphan_grace).await {
            tracing::warn!(error = %e, "collecting table files");
        }
    }
}

/// Table topics due a commit: their commit interval has passed since this job's last attempt
/// (or they are backlogged), and they have records the table lacks.
fn due_tables(state: &State, last_attempt: &HashMap<TopicId, Instant>, backlogged: &[TopicId]) -> Vec<TopicId> {
    let mut due = Vec::new();
    for (topic_id, topic) in &state.topics {
        if !state.table_enabled(topic) {
            continue;
        }
        let interval = state
            .topic_config_value(topic, "floe.table.commit.interval.ms")
            .and_then(|value| value.parse::<u64>().ok())
            .map_or(Duration::from_secs(60), Duration::from_millis);
        let waited = last_attempt.get(topic_id).is_none_or(|at| at.elapsed() >= interval);
        if !waited && !backlogged.contains(topic_id) {
            continue;
        }
        let table = state.tables.get(topic_id);
        let behind = topic.partitions.iter().enumerate().any(|(index, log)| {
            let committed = table.and_then(|t| t.offsets.get(index)).copied().unwrap_or(0);
            committed.max(log.log_start_offset) < log.last_stable_offset()
        });
        // A table is created with its first records, so a typed table's first writer schema
        // is registered by then.
        if behind {
            due.push(*topic_id);
        }
    }
    due
}
