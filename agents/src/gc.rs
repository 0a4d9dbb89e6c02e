//! Garbage collection of segment objects, run by one agent: the live agent with the lowest id
//! (every agent computes the same choice from its mirror; two collectors for a moment are
//! harmless, since deletes and `ForgetObjects` are idempotent).
//!
//! Two kinds of garbage:
//! - objects no index entry refers to (retention, DeleteRecords, deleted topics, compaction):
//!   deleted once they have been unreferenced for `log.segment.delete.delay.ms`, longer than any
//!   fetch that planned a read of them can take, then forgotten in metadata;
//! - orphans, uploaded but never committed (an agent died between PUT and commit, or every chunk
//!   was a duplicate): found by listing and deleted once older than the orphan grace. Agents
//!   give up committing a flush after half that grace, and the metadata state refuses any copy of
//!   a commit that arrives more than `SEGMENT_COMMIT_WINDOW_MS` after its key was drawn (within
//!   the default grace), so an orphan's commit can never land later.

use std::collections::{HashMap, HashSet};
use std::sync::Weak;

use floe_metadata::tasks::sleep_unless_stopped;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use floe_metadata::limits::SEGMENT_COMMIT_WINDOW_MS;
use floe_metadata::{Command, ObjectId, now_ms};
use floe_storage::SegmentKey;

use crate::Agent;
use crate::limits::{GC_DELETES_PER_ROUND_MAX, GC_LISTED_OBJECTS_MAX, JOB_LEASE};

/// Orphans are looked for every this many rounds: they are rare, and listing a large bucket
/// costs one LIST request per 1000 objects.
const ORPHAN_SEARCH_EVERY_ROUNDS: u64 = 10;

/// `log.segment.delete.delay.ms` when unset (Kafka's default).
const DELETE_DELAY_DEFAULT: Duration = Duration::from_secs(60);

/// When and how the collector runs.
#[derive(Clone, Copy, Debug)]
pub struct GcConfig {
    /// Pause between rounds.
    pub interval: Duration,
    /// Age after which an object that metadata does not know is an orphan.
    pub orphan_grace: Duration,
}

impl GcConfig {
    /// How long after its upload a flush may still be committed: half the orphan grace, so a
    /// commit can never name an object the collector deleted, and a minute less than the window
    /// in which the metadata state admits a commit ([`SEGMENT_COMMIT_WINDOW_MS`]), so one proposed
    /// in time is not refused there.
    pub fn commit_deadline(&self) -> Duration {
        let window = Duration::from_millis(SEGMENT_COMMIT_WINDOW_MS.unsigned_abs());
        (self.orphan_grace / 2).min(window.saturating_sub(Duration::from_secs(60)))
    }
}

/// Runs until `stop` (or the agent is dropped).
pub(crate) async fn run(agent: Weak<Agent>, config: GcConfig, stop: CancellationToken) {
    // When each unreferenced object was first seen so, by this collector (a new collector starts
    // the clock again: the safe direction).
    let mut unreferenced_since: HashMap<ObjectId, Instant> = HashMap::new();
    let mut round = 0u64;
    while sleep_unless_stopped(&stop, config.interval).await {
        let Some(agent) = agent.upgrade() else { return };
        if !is_job_runner(&agent).await {
            unreferenced_since.clear();
            continue;
        }
        if let Err(e) = collect_unreferenced(&agent, &mut unreferenced_since).await {
            tracing::warn!(error = %e, "collecting unreferenced objects");
        }
        if round.is_multiple_of(ORPHAN_SEARCH_EVERY_ROUNDS)
            && let Err(e) = collect_orphans(&agent, config.orphan_grace).await
        {
            tracing::warn!(error = %e, "collecting orphan objects");
        }
        // The usage exports ride on the same lease: one writer of each hour's files.
        if let Err(e) = crate::usage::export::export_due(&agent).await {
            tracing::warn!(error = %e, "exporting usage hours");
        }
        round += 1;
    }
}

/// Whether this agent runs the storage jobs (garbage collection, compaction) now: the live
/// agent of the jobs role with the lowest id does (of any agent group), once it has taken or
/// renewed the job lease in metadata, so two agents that briefly disagree about who is live
/// never both run jobs. Without a live jobs agent no jobs run.
pub(crate) async fn is_job_runner(agent: &Agent) -> bool {
    let candidate = {
        let state = agent.metadata.read();
        crate::membership::live_agents(&state, agent)
            .iter()
            .find(|a| a.profile.roles.jobs)
            .is_some_and(|a| a.info.agent_id == agent.config.node_id)
    };
    let lease = Command::AcquireJobLease {
        agent_id: agent.config.node_id,
        now_ms: now_ms(),
        duration_ms: i64::try_from(JOB_LEASE.as_millis()).unwrap_or(i64::MAX),
    };
    let runs = candidate && agent.metadata.propose(lease).await.is_ok();
    crate::metrics::JOB_RUNNER.set(i64::from(runs));
    runs
}

async fn collect_unreferenced(agent: &Agent, since: &mut HashMap<ObjectId, Instant>) -> Result<(), String> {
    let now = Instant::now();
    let (delay, due) = {
        let state = agent.metadata.read();
        let delay = state
            .broker_config_i64("log.segment.delete.delay.ms")
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(DELETE_DELAY_DEFAULT, Duration::from_millis);
        let current: HashMap<ObjectId, &str> = state.unreferenced_objects().collect();
        since.retain(|id, _| current.contains_key(id));
        for id in current.keys() {
            since.entry(*id).or_insert(now);
        }
        let due: Vec<(ObjectId, String)> = current
            .into_iter()
            .filter(|(id, _)| since.get(id).is_some_and(|t| now.duration_since(*t) >= delay))
            .take(GC_DELETES_PER_ROUND_MAX)
            .map(|(id, key)| (id, key.to_owned()))
            .collect();
        (delay, due)
    };
    if due.is_empty() {
        return Ok(());
    }
    let mut forgotten = Vec::with_capacity(due.len());
    for (id, key) in due {
        match agent.store.delete_segment(&SegmentKey::from_stored(key.clone())).await {
            Ok(()) => {
                crate::metrics::GC_DELETED.with_label_values(&["unreferenced"]).inc();
                forgotten.push(id);
            }
            Err(e) => tracing::warn!(key = %key, error = %e, "deleting an unreferenced object"),
        }
    }
    tracing::debug!(count = forgotten.len(), delay_ms = delay.as_millis() as u64, "deleted unreferenced objects");
    for id in &forgotten {
        since.remove(id);
    }
    agent.metadata.propose(Command::ForgetObjects { object_ids: forgotten }).await.map_err(|e| e.to_string())?;
    Ok(())
}

async fn collect_orphans(agent: &Agent, grace: Duration) -> Result<(), String> {
    let listed = agent.store.list_segments(GC_LISTED_OBJECTS_MAX).await.map_err(|e| e.to_string())?;
    let cutoff = now_ms().saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
    let mut old: HashSet<String> =
        listed.into_iter().filter(|s| s.last_modified_ms <= cutoff).map(|s| s.key.as_str().to_owned()).collect();
    if old.is_empty() {
        return Ok(());
    }
    // Read metadata after listing: an object committed before this point is known below, and
    // one older than the grace can no longer be committed (see `GcConfig::commit_deadline`).
    {
        let state = agent.metadata.read();
        for object in state.objects.values() {
            old.remove(object.key.as_str());
        }
    }
    for key in old.into_iter().take(GC_DELETES_PER_ROUND_MAX) {
        match agent.store.delete_segment(&SegmentKey::from_stored(key.clone())).await {
            Ok(()) => {
                tracing::info!(key = %key, "deleted an orphan object (uploaded, never committed)");
                crate::metrics::GC_DELETED.with_label_values(&["orphan"]).inc();
            }
            Err(e) => tracing::warn!(key = %key, error = %e, "deleting an orphan object"),
        }
    }
    Ok(())
}
