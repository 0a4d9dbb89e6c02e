//! Links: the job that mirrors a source cluster into mirror topics here, each source batch at
//! its source offset, run by the agent holding the job lease.
//!
//! Each link runs in a task of its own (a source that is slow or never answers holds up only its
//! own link), rounds one after another: refresh the source's topics (creating, growing and configuring mirror
//! topics), fetch from each mirror partition's log end, write what came back into one object
//! and commit it with `MirrorCommit`, then report the source's log ends and copy group offsets
//! now and then. Progress is the mirror partitions' log ends, committed with the data: a job
//! that crashes after its commit reads on from there, one that crashes before it wrote an
//! object nothing refers to (collected as an orphan), so no batch is skipped or written twice.

mod acls;
mod source;

use std::collections::{BTreeMap, HashMap};
use std::sync::Weak;
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_metadata::namespace::Namespace;
use floe_metadata::tasks::sleep_unless_stopped;
use floe_metadata::{Command, LinkConfig, LinkReport, LinkState, MirrorChunk, MirrorCommit, Outcome, State, TopicId};
use floe_storage::segment::ChunkStats;
use floe_storage::{SegmentKey, SegmentWriter, TopicPartition};
use tokio_util::sync::CancellationToken;

use crate::Agent;
pub use source::{LinkBatches, link_batches};

/// How the link job runs.
#[derive(Clone, Copy, Debug)]
pub struct LinkJobConfig {
    /// Pause between rounds when a round brought nothing.
    pub idle_interval: Duration,
    /// How long a fetch waits at the source for new data. None waits: the link pauses
    /// `idle_interval` after a round that brought nothing (measured: lag p99 0.51 s at 50 MB/s).
    pub fetch_max_wait: Duration,
    /// Bytes asked per partition and fetch.
    pub partition_max_bytes: i32,
}

impl Default for LinkJobConfig {
    fn default() -> Self {
        Self { idle_interval: Duration::from_millis(100), fetch_max_wait: Duration::ZERO, partition_max_bytes: 1 << 20 }
    }
}

/// How often a link rereads the source's topics, reports and copies group offsets.
const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// Pause after a link failed before it tries its source again.
const RETRY_AFTER: Duration = Duration::from_secs(2);
/// How often the job renews its hold on the job lease (which lasts 90 s): a proposal each
/// round would load the metadata service for nothing.
const LEASE_CHECK_EVERY: Duration = Duration::from_secs(10);

/// One link's connection and timers, kept across rounds.
struct LinkWorker {
    config: LinkConfig,
    source: Option<floe_kafka_client::SourceCluster>,
    /// Mirror topics by source name, with the source's partition leaders.
    leaders: BTreeMap<String, Vec<floe_kafka_client::SourcePartition>>,
    refreshed: Option<Instant>,
    /// The source's log end of each partition, from the last fetches.
    source_ends: BTreeMap<(TopicId, i32), i64>,
    deleted_at_source: Vec<String>,
    /// Where to read a partition from when the source no longer has its log end here (a gap).
    positions: BTreeMap<(TopicId, i32), i64>,
}

impl LinkWorker {
    fn new(config: LinkConfig) -> Self {
        Self {
            config,
            source: None,
            leaders: BTreeMap::new(),
            refreshed: None,
            source_ends: BTreeMap::new(),
            deleted_at_source: Vec::new(),
            positions: BTreeMap::new(),
        }
    }
}

/// Runs until `stop` (or the agent is dropped): while this agent holds the job lease, one task
/// per mirroring link, restarted when its config changes and stopped when it is promoted or
/// deleted.
pub(crate) async fn run(agent: Weak<Agent>, config: LinkJobConfig, stop: CancellationToken) {
    let mut running: HashMap<String, LinkTask> = HashMap::new();
    let mut lease_checked: Option<Instant> = None;
    while sleep_unless_stopped(&stop, config.idle_interval).await {
        let Some(strong) = agent.upgrade() else { break };
        let links: Vec<(String, LinkConfig)> = {
            let state = strong.metadata.read();
            state
                .links
                .iter()
                .filter(|(_, l)| l.state == LinkState::Mirroring)
                .map(|(name, l)| (name.clone(), l.config.clone()))
                .collect()
        };
        if links.is_empty() {
            stop_links(&mut running).await;
            lease_checked = None;
            continue;
        }
        if lease_checked.is_none_or(|t| t.elapsed() >= LEASE_CHECK_EVERY) {
            if !crate::gc::is_job_runner(&strong).await {
                stop_links(&mut running).await;
                lease_checked = None;
                continue;
            }
            lease_checked = Some(Instant::now());
        }
        drop(strong);
        let ended: Vec<String> = running
            .iter()
            .filter(|(name, task)| {
                task.handle.is_finished() || !links.iter().any(|(n, c)| n == *name && *c == task.config)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in ended {
            if let Some(task) = running.remove(&name) {
                task.stop().await;
            }
        }
        for (name, link_config) in links {
            if let std::collections::hash_map::Entry::Vacant(slot) = running.entry(name.clone()) {
                let token = stop.child_token();
                let handle = tokio::spawn(run_link(agent.clone(), name, link_config.clone(), config, token.clone()));
                slot.insert(LinkTask { config: link_config, stop: token, handle });
            }
        }
    }
    stop_links(&mut running).await;
}

/// A link's task, as the job started it.
struct LinkTask {
    config: LinkConfig,
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
}

impl LinkTask {
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.handle.await;
    }
}

async fn stop_links(running: &mut HashMap<String, LinkTask>) {
    for (_, task) in running.drain() {
        task.stop().await;
    }
}

/// One link's rounds until `stop`: at once after a round that mirrored something, after
/// `idle_interval` when it brought nothing, after [`RETRY_AFTER`] when it failed.
async fn run_link(
    agent: Weak<Agent>,
    name: String,
    link_config: LinkConfig,
    config: LinkJobConfig,
    stop: CancellationToken,
) {
    let mut worker = LinkWorker::new(link_config);
    let mut pause = Duration::ZERO;
    while sleep_unless_stopped(&stop, pause).await {
        let Some(agent) = agent.upgrade() else { return };
        // A round waits on its source up to its requests' timeouts; stopping does not. A round
        // cut short leaves at most an object no commit refers to (collected as an orphan).
        let Some(result) = stop.run_until_cancelled(round(&agent, &name, &mut worker, &config)).await else { return };
        pause = match result {
            Ok(mirrored) if mirrored > 0 => Duration::ZERO,
            Ok(_) => config.idle_interval,
            Err(e) => {
                crate::metrics::LINK_ERRORS.with_label_values(&[&name]).inc();
                tracing::warn!(link = %name, error = %e, "link round failed");
                worker.source = None;
                worker.refreshed = None;
                report(&agent, &name, &mut worker, Some(e)).await;
                RETRY_AFTER
            }
        };
    }
}

/// One round of one link; returns the bytes mirrored.
async fn round(agent: &Agent, name: &str, worker: &mut LinkWorker, config: &LinkJobConfig) -> Result<u64, String> {
    if worker.source.is_none() {
        let source_config = source::source_config(&worker.config, agent.config.node_id);
        let cluster = floe_kafka_client::SourceCluster::connect(source_config).await.map_err(|e| e.to_string())?;
        worker.source = Some(cluster);
    }
    let due = worker.refreshed.is_none_or(|t| t.elapsed() >= REFRESH_EVERY);
    if due {
        // What one topic or the ACLs cannot do is shown in status; the rest mirrors on.
        let mut problems = source::refresh_topics(agent, name, worker).await?;
        if worker.config.acls
            && let Err(e) = acls::copy_acls(agent, name, worker).await
        {
            problems.push(e);
        }
        if worker.config.groups.is_some() {
            source::copy_group_offsets(agent, name, worker).await?;
        }
        report(agent, name, worker, (!problems.is_empty()).then(|| problems.join("; "))).await;
        worker.refreshed = Some(Instant::now());
    }
    cut_adopted_partitions(agent, name).await?;
    mirror_once(agent, name, worker, config).await
}

/// Cuts partitions a reversed link adopted back to their fork offsets, before writing them:
/// the entry spanning the fork offset is read to find the byte where its batch there starts.
async fn cut_adopted_partitions(agent: &Agent, name: &str) -> Result<(), String> {
    let due: Vec<(TopicId, i32, i64)> = {
        let state = agent.metadata.read();
        state
            .mirror_truncations
            .iter()
            .filter(|((topic_id, _), _)| state.mirror_link(*topic_id) == Some(name))
            .map(|((t, p), offset)| (*t, *p, *offset))
            .collect()
    };
    for (topic_id, partition, offset) in due {
        let spanning = {
            let state = agent.metadata.read();
            let log = state.partition(topic_id, partition).ok_or("an adopted partition is gone")?;
            log.index.iter().find(|e| e.base_offset < offset && offset <= e.last_offset).and_then(|e| {
                let chunk = e.chunk()?;
                let object = state.objects.get(&chunk.object_id)?;
                Some((e.base_offset, chunk, object.key.clone(), object.object_bytes))
            })
        };
        let cut = match spanning {
            None => None,
            Some((base_offset, chunk, key, object_bytes)) => {
                let chunk_ref = floe_storage::ChunkRef {
                    key: SegmentKey::from_stored(key),
                    byte_start: chunk.byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: chunk.crc32c,
                };
                let bytes =
                    agent.cache.read_chunk(&agent.store, &chunk_ref, object_bytes).await.map_err(|e| e.to_string())?;
                Some(source::cut_at(&bytes, base_offset, chunk.offsets_in_batches, offset)?)
            }
        };
        let command = Command::TruncateMirrorPartition { link: name.to_owned(), topic_id, partition, offset, cut };
        agent.metadata.propose(command).await.map_err(|e| e.to_string())?;
        tracing::info!(link = %name, topic = %topic_id, partition, offset, "cut an adopted partition back to its fork offset");
    }
    Ok(())
}

/// Fetches from every mirror partition's log end and commits what came back as one object.
async fn mirror_once(
    agent: &Agent,
    name: &str,
    worker: &mut LinkWorker,
    config: &LinkJobConfig,
) -> Result<u64, String> {
    // Where each mirror partition ends here, by source leader.
    let mut by_leader: BTreeMap<i32, Vec<(String, i32, i64)>> = BTreeMap::new();
    let mut topic_ids: BTreeMap<String, TopicId> = BTreeMap::new();
    {
        let state = agent.metadata.read();
        let ns = link_namespace(&state, &worker.config)?;
        for (topic, partitions) in &worker.leaders {
            let stored = stored_name(ns.as_ref(), topic);
            let Some(local) = state.topic_by_name(&stored).filter(|t| state.mirror_link(t.topic_id) == Some(name))
            else {
                continue;
            };
            if let Some(why) = state.storage_quota_exceeded(&stored) {
                return Err(format!("mirroring paused: {why}"));
            }
            topic_ids.insert(topic.clone(), local.topic_id);
            for p in partitions.iter().filter(|p| p.leader >= 0) {
                let Some(log) = usize::try_from(p.index).ok().and_then(|i| local.partitions.get(i)) else { continue };
                let skip_to = worker.positions.get(&(local.topic_id, p.index)).copied().unwrap_or(0);
                by_leader.entry(p.leader).or_default().push((topic.clone(), p.index, log.next_offset.max(skip_to)));
            }
        }
    }
    let Some(source) = worker.source.as_mut() else { return Ok(0) };
    let fetch_started = Instant::now();
    let mut chunks: Vec<(TopicPartition, LinkBatches)> = Vec::new();
    let mut stale_leaders = false;
    for (leader, wants) in by_leader {
        let fetched = source
            .fetch(leader, &wants, config.partition_max_bytes, config.fetch_max_wait)
            .await
            .map_err(|e| e.to_string())?;
        for part in fetched {
            let Some(topic_id) = topic_ids.get(&part.topic).copied() else { continue };
            let from = wants.iter().find(|(t, p, _)| *t == part.topic && *p == part.partition).map(|w| w.2);
            let Some(from) = from else { continue };
            match part.error_code {
                0 => {}
                // OFFSET_OUT_OF_RANGE: the source removed what was not mirrored yet (or its log
                // was cut below ours); where it starts decides.
                1 => {
                    let to =
                        source::position_after_out_of_range(source, &part.topic, part.partition, leader, from).await?;
                    worker.positions.insert((topic_id, part.partition), to);
                    continue;
                }
                // Leadership moved, or the topic is being recreated: reread the source's topics.
                3 | 5 | 6 | 74 | 75 | 100 => {
                    stale_leaders = true;
                    continue;
                }
                code => {
                    return Err(format!(
                        "fetching {}-{} from the source: Kafka error {code}",
                        part.topic, part.partition
                    ));
                }
            }
            worker.source_ends.insert((topic_id, part.partition), part.high_watermark);
            let batches =
                link_batches(&part.records, from).map_err(|e| format!("{}-{}: {e}", part.topic, part.partition))?;
            if !batches.batches.is_empty() {
                chunks.push((TopicPartition { topic_id, partition: part.partition }, batches));
            }
        }
    }
    if stale_leaders {
        worker.refreshed = None;
    }
    if chunks.is_empty() {
        return Ok(0);
    }
    let fetched = fetch_started.elapsed();
    let committed = commit(agent, name, chunks).await?;
    tracing::debug!(link = %name, bytes = committed, ?fetched, total = ?fetch_started.elapsed(), "link round");
    Ok(committed)
}

/// Writes the chunks into one object and commits them at their source offsets.
async fn commit(agent: &Agent, name: &str, chunks: Vec<(TopicPartition, LinkBatches)>) -> Result<u64, String> {
    let mut writer = SegmentWriter::new();
    let mut mirror_chunks = Vec::with_capacity(chunks.len());
    let mut bytes = 0u64;
    for (tp, batches) in chunks {
        let stats = ChunkStats {
            batch_count: u32::try_from(batches.batches.len()).unwrap_or(u32::MAX),
            record_count: u32::try_from(batches.record_count).unwrap_or(u32::MAX),
            timestamp_min: batches.timestamp_min,
            timestamp_max: batches.timestamp_max,
        };
        let entry = *writer.push_chunk(tp, batches.batches.iter().cloned(), stats);
        bytes += u64::from(entry.byte_len);
        mirror_chunks.push(MirrorChunk {
            topic_id: tp.topic_id,
            partition: tp.partition,
            byte_start: entry.byte_start,
            byte_len: entry.byte_len,
            crc32c: entry.crc32c,
            base_offset: batches.base_offset,
            last_offset: batches.last_offset,
            timestamp_max: batches.timestamp_max,
            record_count: batches.record_count,
            transactions: batches.transactions,
        });
    }
    let object = writer.finish();
    let (object_bytes, blocks) = (object.object_bytes, object.blocks.clone());
    let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate();
    agent.store.put_segment(&key, object).await.map_err(|e| e.to_string())?;
    agent.cache.insert_object(&key, &parts, &blocks, floe_storage::WrittenTier::Memory);
    let command = Command::MirrorCommit(MirrorCommit {
        link: name.to_owned(),
        key: key.as_str().to_owned(),
        object_bytes,
        chunks: mirror_chunks,
    });
    match agent.metadata.propose(command).await {
        Ok(Outcome::Mirrored(results)) => {
            if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
                return Err(format!("the mirror commit was refused for a partition: {e}"));
            }
            crate::metrics::LINK_BYTES.with_label_values(&[name]).inc_by(bytes);
            Ok(bytes)
        }
        Ok(other) => Err(format!("unexpected outcome of a mirror commit: {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Tells metadata what the link saw of its source; a failure to is only logged (the next
/// round reports again).
async fn report(agent: &Agent, name: &str, worker: &mut LinkWorker, error: Option<String>) {
    let report = LinkReport {
        link: name.to_owned(),
        source_ends: worker.source_ends.iter().map(|((t, p), end)| (*t, *p, *end)).collect(),
        error: error.map(|e| truncated(&e, floe_metadata::limits::LINK_ERROR_BYTES_MAX)),
        deleted_at_source: std::mem::take(&mut worker.deleted_at_source),
        now_ms: floe_metadata::now_ms(),
    };
    if let Err(e) = agent.metadata.propose(Command::ReportLink(report)).await {
        tracing::warn!(link = %name, error = %e, "link report not committed");
    }
}

fn truncated(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// Whether `name` matches a link's pattern as a whole.
pub fn pattern_matches(pattern: &regex::Regex, name: &str) -> bool {
    pattern.find(name).is_some_and(|m| m.start() == 0 && m.end() == name.len())
}

/// A link's pattern, compiled; an invalid one is an operator's error, told when the link is set.
pub fn compile_pattern(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
        .size_limit(1 << 20)
        .build()
        .map_err(|e| format!("pattern {pattern:?}: {e}"))
}

/// A pattern matching exactly the given names.
pub fn exact_names_pattern<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    names.into_iter().map(|n| regex::escape(n)).collect::<Vec<_>>().join("|")
}

/// The tenant namespace a link mirrors into (`None`: the cluster's own names).
fn link_namespace(state: &State, config: &LinkConfig) -> Result<Option<Namespace>, String> {
    match &config.tenant {
        None => Ok(None),
        Some(tenant) => {
            state.tenant_namespace(tenant).map(Some).ok_or_else(|| format!("the link's tenant {tenant:?} is gone"))
        }
    }
}

/// The name stored here for the source's topic or group `name`.
fn stored_name(ns: Option<&Namespace>, name: &str) -> String {
    ns.map_or_else(|| name.to_owned(), |ns| ns.scope(name))
}

/// Mirror topics of `link` as the state has them, by stored name.
fn mirror_topics<'a>(state: &'a State, link: &'a str) -> impl Iterator<Item = (&'a str, TopicId)> + 'a {
    state
        .mirror_topics
        .iter()
        .filter(move |(_, l)| l.as_str() == link)
        .filter_map(|(id, _)| state.topics.get(id).map(|t| (t.name.as_str(), *id)))
}

#[cfg(test)]
mod tests;
