//! Fetch: whole batches from each requested partition, stamped with their offsets, long-polling
//! until `min_bytes` are available or `max_wait_ms` passes. A waiting fetch is woken only when
//! a partition it asked for moves (`crate::fetch::wakeups`); an idle fetch costs no work.
//!
//! An agent without the fetch role answers a consumer that names its rack (Fetch v11+) with a
//! fetch agent of its pool as the preferred read replica (KIP-392), and no records.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};

use super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::error_code::{self, code};
use super::super::resources::{AnswerWalk, Op, Refused, Resources, TopicRef, Walk};
use crate::Agent;
use crate::fetch::sessions::{SessionView, ToldPartitions};
use crate::fetch::wakeups::{Mark, Waiter, any_woken};
use crate::fetch::{FetchError, PartitionRead, ReadLimits, read_at_end, read_partition};
use crate::limits::{FETCH_RESPONSE_BYTES_MAX, FETCH_WAIT_MAX};
use kafka_protocol::messages::ResponseKind;

const READ_COMMITTED: i8 = 1;
/// Slots a session's told offsets may use beyond twice its partitions, for partition numbers a
/// little above their count in a session of few partitions.
const TOLD_SLOTS_SPARE: usize = 1024;

pub(in crate::kafka) async fn handle(
    agent: &Agent,
    version: i16,
    mut request: FetchRequest,
    hints: crate::membership::ClientHints,
    session: Option<SessionView>,
) -> FetchResponse {
    let hints = crate::membership::ClientHints {
        rack: (version >= 11 && !request.rack_id.is_empty()).then(|| request.rack_id.to_string()),
        ..hints
    };
    // An agent started with the fetch role serves every read (before format 9 every agent counts
    // as one of all roles), so most Fetches skip this without reading the state.
    let replicas = (version >= 11 && !request.rack_id.is_empty() && !agent.config.roles.fetch)
        .then(|| {
            let state = agent.metadata.read();
            let roles = agent.effective_profile(&state).roles;
            (!roles.fetch).then(|| (crate::membership::client_pool(&state, agent, &hints).local, roles))
        })
        .flatten();
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(FETCH_WAIT_MAX);
    let deadline = Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let told = session.as_ref().map(SessionView::told);
    // The waiter that alone watches the session's quiet partitions, which the request leaves
    // out: waited on as it is (the session began by taking its moves so far), never replaced.
    let quiet_watcher = session.as_ref().and_then(SessionView::quiet_watcher).cloned();
    // Registered only once a read found too little: under load most Fetches answer at once,
    // and registering thousands of partitions for each would cost more than the read.
    let mut waiters: Option<Vec<Arc<Waiter>>> = None;
    // A session's waiter, kept registered since an earlier fetch (the session took its moves
    // when this fetch began): what moves from then on wakes this fetch.
    let mut kept = told.and_then(|told| told.lock().waiter());
    // After a pass with a session, the partitions it left out as unchanged and those that moved
    // since: a later pass looks again only at the others and the moved ones, not at all of them.
    let mut settled: Option<Settled> = None;
    // The request's partitions, once a move may name a quiet partition it leaves out; and
    // whether quiet partitions were taken into it, which the answer then lists after the others.
    let mut named: Option<rustc_hash::FxHashSet<(floe_metadata::TopicId, i32)>> = None;
    let (mut took_quiet, mut last_pass) = (false, false);
    let mut first = true;
    loop {
        if !std::mem::take(&mut first) {
            crate::metrics::LONG_POLL_READS.with_label_values(&["kafka"]).inc();
        }
        let redirect = replicas.as_ref().map(|(pool, roles)| (pool.as_slice(), *roles));
        let marks = if waiters.is_none() { Some(Vec::new()) } else { None };
        let (mut response, bytes, answer_now, seen, telling, left_out) =
            read_once(agent, version, &request, redirect, told, settled.as_ref(), marks).await;
        let done = bytes >= min_bytes.max(1) || answer_now || last_pass || wait.is_zero() || Instant::now() >= deadline;
        if !done && settled.is_none() && told.is_some() {
            settled = Some(Settled { left_out, moved: Default::default() });
        } else if done {
            // Only the answer sent tells the client anything: an earlier pass's is dropped.
            if let Some(session) = &session {
                if !telling.is_empty() {
                    // Room for twice the session's partitions: bounded by its size, as its cache is.
                    let slots_max = 2 * session.partitions() + TOLD_SLOTS_SPARE;
                    let mut told = session.told().lock();
                    for ((topic_id, partition), mark) in telling {
                        told.set(topic_id, partition, mark, slots_max);
                    }
                }
                if version >= 13 {
                    session.left_out(left_out_by_id(&request, &left_out));
                }
            }
            if took_quiet {
                merge_topics(&mut response);
            }
            count_bytes_out(agent, &response, &hints);
            return response;
        }
        let waiters = waiters.get_or_insert_with(|| {
            let seen = seen.unwrap_or_default();
            if let Some(watcher) = &quiet_watcher {
                // Partitions read here that the session's waiter does not watch (it was
                // registered before they could be read) get a waiter of this fetch's own.
                let unwatched: Seen = seen.into_iter().filter(|&(t, p, _)| !watcher.watches_one(t, p)).collect();
                let mut waiters = vec![watcher.clone()];
                if !unwatched.is_empty() {
                    waiters.push(Arc::new(agent.wakeups.wait_on_seen(&agent.metadata.read(), unwatched)));
                }
                return waiters;
            }
            // Registered against the partitions as the read above saw them: one that moved since
            // wakes the waiter at once, so no second read is needed to catch it; a later move
            // wakes it through the agent's compare. A session's kept waiter serves if it watches
            // the same partitions: registered all along, it was told of every move since.
            let same =
                kept.take().filter(|kept| kept.watches(seen.iter().map(|&(topic, partition, _)| (topic, partition))));
            vec![same.unwrap_or_else(|| {
                let registered = Arc::new(agent.wakeups.wait_on_seen(&agent.metadata.read(), seen));
                if let Some(told) = told {
                    told.lock().keep_waiter(registered.clone());
                }
                registered
            })]
        });
        tokio::select! {
            () = any_woken(waiters) => {}
            () = tokio::time::sleep_until(deadline.into()) => {}
        }
        // Every waiter's moves are taken, even past one that cannot list them.
        let taken: Vec<Option<Vec<_>>> = waiters.iter().map(|w| w.take_moved()).collect();
        let moved = taken.into_iter().collect::<Option<Vec<_>>>().map(|all| all.concat());
        let Some(moved) = moved else {
            // Too many to list: the next pass looks at every partition again.
            settled = None;
            if let Some(session) = session.as_ref().filter(|_| quiet_watcher.is_some()) {
                // Quiet ones among them are the next fetch's to read: this one answers now.
                session.told().lock().wake_quiet();
                last_pass = true;
            }
            continue;
        };
        if let (Some(session), Some(_)) = (&session, &quiet_watcher) {
            let named = named.get_or_insert_with(|| {
                request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition))).collect()
            });
            for &(topic_id, partition) in &moved {
                if named.contains(&(topic_id, partition)) {
                    continue;
                }
                // A quiet partition moved: read from now on, after the request's own.
                if let Some(quiet) = session.take_quiet(topic_id, partition) {
                    named.insert((topic_id, partition));
                    took_quiet = true;
                    match request.topics.last_mut().filter(|t| t.topic_id == topic_id) {
                        Some(topic) => topic.partitions.push(quiet),
                        None => request
                            .topics
                            .push(FetchTopic::default().with_topic_id(topic_id).with_partitions(vec![quiet])),
                    }
                }
            }
        }
        if let Some(s) = &mut settled {
            s.moved.extend(moved);
        }
    }
}

/// The partitions (by topic id, as the request names them from v13) that an answer left out.
fn left_out_by_id(request: &FetchRequest, left_out: &[bool]) -> Vec<(floe_metadata::TopicId, i32)> {
    let partitions = request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, p.partition)));
    partitions.zip(left_out).filter(|(_, out)| **out).map(|(partition, _)| partition).collect()
}

/// One entry per topic: quiet partitions taken into a long poll were read after the others, in
/// entries of their own.
fn merge_topics(response: &mut FetchResponse) {
    let mut at: rustc_hash::FxHashMap<(uuid::Uuid, TopicName), usize> = Default::default();
    let mut merged: Vec<FetchableTopicResponse> = Vec::with_capacity(response.responses.len());
    for topic in std::mem::take(&mut response.responses) {
        match at.get(&(topic.topic_id, topic.topic.clone())) {
            Some(&i) => merged[i].partitions.extend(topic.partitions),
            None => {
                at.insert((topic.topic_id, topic.topic.clone()), merged.len());
                merged.push(topic);
            }
        }
    }
    response.responses = merged;
}

/// Partitions a session's first pass left out as unchanged (by their place in the request), and
/// those that moved since (by the state's topic id).
struct Settled {
    left_out: Vec<bool>,
    moved: rustc_hash::FxHashSet<(floe_metadata::TopicId, i32)>,
}

impl Settled {
    /// Whether the partition at `at` in the request is still as the first pass left it out.
    fn still(&self, at: usize, topic_id: floe_metadata::TopicId, partition: i32) -> bool {
        self.left_out.get(at).copied().unwrap_or(false) && !self.moved.contains(&(topic_id, partition))
    }
}

/// Each partition as a read answered it, to wait on.
type Seen = Vec<(floe_metadata::TopicId, i32, Mark)>;
/// What an answer tells of each partition it read (`None`: an error, told again once it clears).
type Telling = Vec<((floe_metadata::TopicId, i32), Option<Mark>)>;

/// How a partition is answered without reading its index.
enum AtEnd {
    /// Read to its end: no records, the state's offsets.
    Read(PartitionRead),
    /// The session told the client all there is of it and nothing moved since: left out of the
    /// answer (which would drop it), only waited on.
    Unchanged(Mark),
    /// Left out by an earlier pass of this fetch as unchanged, and not moved since.
    Settled,
}

/// The partition as the session last told the client of it (`told`, the topic's), if the client
/// has read it to that end and nothing of it has moved since.
fn unchanged(topic: &floe_metadata::Topic, told: &[Option<Mark>], p: &FetchPartition) -> Option<Mark> {
    let index = usize::try_from(p.partition).ok()?;
    let seen = (*told.get(index)?)?;
    let log = topic.partitions.get(index)?;
    let epoch_matches = p.current_leader_epoch < 0 || p.current_leader_epoch == log.leader_epoch;
    (epoch_matches && p.fetch_offset == seen.high_watermark() && Mark::of_partition(log) == seen).then_some(seen)
}

/// One pass over every requested partition: the response, its record bytes, whether any
/// partition failed or was sent to a read replica (either answers at once rather than waiting),
/// and, when `marks` is given, each partition as read. With a session's `told`, partitions it
/// told all of are left out, and what this answer would tell is returned, for the pass whose
/// answer is sent to write, with which partitions (by place in the request) were left out; with
/// `settled`, partitions an earlier pass left out that have not moved since are left out unseen.
async fn read_once(
    agent: &Agent,
    version: i16,
    request: &FetchRequest,
    replicas: Option<(&[crate::membership::LiveAgent], floe_metadata::AgentRoles)>,
    told: Option<&ToldPartitions>,
    settled: Option<&Settled>,
    mut marks: Option<Seen>,
) -> (FetchResponse, usize, bool, Option<Seen>, Telling, Vec<bool>) {
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0).min(FETCH_RESPONSE_BYTES_MAX);
    let mut total = 0usize;
    let mut errors = false;
    let mut topics = Vec::with_capacity(request.topics.len());
    let read_committed = request.isolation_level == READ_COMMITTED;
    let (mut reads_at_end, mut reads_planned, mut unchanged_left_out, mut settled_left_out) = (0u64, 0u64, 0u64, 0u64);
    // What this answer tells of each partition read (None: an error, told again once it clears).
    let mut telling = Telling::new();
    let mut left_out = Vec::new();
    let mut held = floe_storage::LastBlock::default();
    // The place of the next partition in the request, over all its topics.
    let mut at = 0usize;
    for topic in &request.topics {
        // The topic, and the partitions read at their end answered under one guard: most of a
        // large Fetch, which then costs a few lookups per partition.
        let (resolved, mut at_end) = {
            let state = agent.metadata.read();
            let t = if version >= 13 {
                state.topics.get(&topic.topic_id)
            } else {
                state.topic_by_name(topic.topic.as_str())
            };
            let at_end: Vec<Option<AtEnd>> = match t {
                Some(t) if replicas.is_none() => {
                    let told = told.map(ToldPartitions::lock);
                    let told_of_topic = told.as_ref().map_or(&[][..], |told| told.topic(t.topic_id));
                    topic
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(i, p)| {
                            if settled.is_some_and(|s| s.still(at + i, t.topic_id, p.partition)) {
                                return Some(AtEnd::Settled);
                            }
                            if let Some(seen) = unchanged(t, told_of_topic, p) {
                                return Some(AtEnd::Unchanged(seen));
                            }
                            read_at_end(
                                &state,
                                t.topic_id,
                                p.partition,
                                p.fetch_offset,
                                p.current_leader_epoch,
                                read_committed,
                            )
                            .map(AtEnd::Read)
                        })
                        .collect()
                }
                _ => Vec::new(),
            };
            (t.map(|t| (t.topic_id, t.name.clone())), at_end)
        };
        // Room for the partitions answered, not the whole session's.
        let leaving_out = at_end.iter().filter(|a| matches!(a, Some(AtEnd::Unchanged(_) | AtEnd::Settled))).count();
        let mut partitions = Vec::with_capacity(topic.partitions.len() - leaving_out);
        let topic_at = at;
        at += topic.partitions.len();
        if told.is_some() {
            left_out.resize(at, false);
        }
        for (i, p) in topic.partitions.iter().enumerate() {
            // Left out before anything is built for it: most of a large session's partitions.
            let at_end_read = match (at_end.get_mut(i).and_then(Option::take), &resolved) {
                (Some(AtEnd::Unchanged(seen)), Some((topic_id, _))) => {
                    unchanged_left_out += 1;
                    if let Some(marks) = &mut marks {
                        marks.push((*topic_id, p.partition, seen));
                    }
                    if let Some(flag) = left_out.get_mut(topic_at + i) {
                        *flag = true;
                    }
                    continue;
                }
                (Some(AtEnd::Settled), Some(_)) => {
                    settled_left_out += 1;
                    if let Some(flag) = left_out.get_mut(topic_at + i) {
                        *flag = true;
                    }
                    continue;
                }
                (Some(AtEnd::Read(read)), _) => Some(read),
                _ => None,
            };
            let data = PartitionData::default().with_partition_index(p.partition);
            let Some((topic_id, _)) = &resolved else {
                errors = true;
                let error = if version >= 13 { code::UNKNOWN_TOPIC_ID } else { code::UNKNOWN_TOPIC_OR_PARTITION };
                partitions.push(failed(data, error));
                continue;
            };
            if let Some(redirected) =
                replicas.and_then(|(pool, roles)| redirect(agent, pool, roles, *topic_id, data.clone()))
            {
                errors = true;
                partitions.push(redirected);
                continue;
            }
            let limits = ReadLimits {
                max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0).min(budget),
                must_return_first: total == 0,
                read_committed,
            };
            let read = match at_end_read {
                Some(read) => {
                    reads_at_end += 1;
                    Ok(read)
                }
                None => {
                    reads_planned += 1;
                    read_partition(
                        agent,
                        *topic_id,
                        p.partition,
                        p.fetch_offset,
                        p.current_leader_epoch,
                        limits,
                        &mut held,
                    )
                    .await
                }
            };
            match read {
                Ok(read) => {
                    if let Some(marks) = &mut marks {
                        marks.push((*topic_id, p.partition, Mark::of_read(&read)));
                    }
                    if told.is_some() {
                        telling.push(((*topic_id, p.partition), Some(Mark::of_read(&read))));
                    }
                    budget = budget.saturating_sub(read.records.len());
                    total += read.records.len();
                    let aborted = read_committed.then(|| {
                        read.aborted_transactions
                            .iter()
                            .map(|a| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(a.producer_id))
                                    .with_first_offset(a.first_offset)
                            })
                            .collect()
                    });
                    partitions.push(
                        data.with_high_watermark(read.high_watermark)
                            .with_last_stable_offset(read.last_stable_offset)
                            .with_log_start_offset(read.log_start_offset)
                            .with_aborted_transactions(aborted)
                            .with_records(Some(read.records)),
                    );
                }
                Err(e) => {
                    if !matches!(e, FetchError::OffsetOutOfRange { .. } | FetchError::OffsetNotAvailable { .. }) {
                        tracing::debug!(error = %e, "fetch partition failed");
                    }
                    errors = true;
                    if told.is_some() {
                        telling.push(((*topic_id, p.partition), None));
                    }
                    partitions.push(failed(data, error_code::for_fetch(&e).code()));
                }
            }
        }
        let name = resolved.map(|(_, name)| TopicName(super::str_bytes(name))).unwrap_or_else(|| topic.topic.clone());
        topics.push(
            FetchableTopicResponse::default()
                .with_topic(name)
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    crate::metrics::FETCH_PARTITION_READS.with_label_values(&["at_end"]).inc_by(reads_at_end);
    crate::metrics::FETCH_PARTITION_READS.with_label_values(&["planned"]).inc_by(reads_planned);
    crate::metrics::FETCH_PARTITION_READS.with_label_values(&["unchanged"]).inc_by(unchanged_left_out);
    crate::metrics::FETCH_PARTITION_READS.with_label_values(&["settled"]).inc_by(settled_left_out);
    (FetchResponse::default().with_session_id(0).with_responses(topics), total, errors, marks, telling, left_out)
}

/// The partition's answer naming its read replica, with the log's offsets and no records; `None`
/// when this agent serves it (no fetch agent, or an unknown partition, whose error the read
/// gives).
fn redirect(
    agent: &Agent,
    pool: &[crate::membership::LiveAgent],
    roles: floe_metadata::AgentRoles,
    topic_id: floe_metadata::TopicId,
    data: PartitionData,
) -> Option<PartitionData> {
    let replica = crate::membership::read_replica(pool, roles, topic_id, data.partition_index)?;
    let state = agent.metadata.read();
    let log = state.partition(topic_id, data.partition_index)?;
    crate::metrics::FETCHES_SENT_TO_READ_REPLICAS.inc();
    Some(
        data.with_high_watermark(log.next_offset)
            .with_last_stable_offset(log.last_stable_offset())
            .with_log_start_offset(log.log_start_offset)
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(replica))
            .with_records(Some(Bytes::new())),
    )
}

fn failed(data: PartitionData, error: i16) -> PartitionData {
    data.with_error_code(error)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_records(Some(Bytes::new()))
}

fn count_bytes_out(agent: &Agent, response: &FetchResponse, hints: &crate::membership::ClientHints) {
    let mut total = 0;
    for topic in &response.responses {
        let bytes: usize = topic.partitions.iter().filter_map(|p| p.records.as_ref()).map(|r| r.len()).sum();
        if bytes > 0 {
            crate::metrics::BYTES_OUT
                .with_label_values(&[crate::metrics::TOPIC_LABELS.label(topic.topic.as_str())])
                .inc_by(bytes as u64);
        }
        total += bytes;
    }
    if total > 0 {
        let agent_zone = agent.config.zone.as_deref().unwrap_or("none");
        // Only zones agents are in get series of their own: the client names its zone.
        let stated = crate::membership::stated_zone(agent, hints);
        let known = stated.filter(|zone| {
            Some(*zone) == agent.config.zone.as_deref()
                || agent.metadata.read().agents.values().any(|a| a.info.zone.as_deref() == Some(*zone))
        });
        crate::metrics::FETCH_ZONE_BYTES
            .with_label_values(&[known.unwrap_or("unknown"), agent_zone])
            .inc_by(total as u64);
    }
}

impl KafkaApi for FetchRequest {
    const VERSIONS: (i16, i16) = (4, 18);

    async fn start(self, cx: Context<'_>) -> Reply {
        let (hints, session) = (cx.hints(), cx.caller.fetch_session.clone());
        cx.later(move |agent, version| async move {
            ResponseKind::Fetch(handle(&agent, version, self, hints, session).await)
        })
    }
}

impl Resources for FetchRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), FetchResponse> {
        walk.topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef::with_id(&mut t.topic.0, &mut t.topic_id),
            |t| t.partitions.iter().map(|p| p.partition).collect(),
        );
        for t in &mut self.forgotten_topics_data {
            walk.mention(TopicRef::with_id(&mut t.topic.0, &mut t.topic_id));
        }
        if self.topics.is_empty() && walk.took_any() {
            // Nothing left to wait for: answer now rather than after max_wait_ms.
            let mut answer = FetchResponse::default();
            Self::answer_refused(&mut answer, walk.take_refused());
            return Err(answer);
        }
        Ok(())
    }

    fn walk_answer(response: &mut FetchResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.responses, |t| &mut t.topic.0);
        walk.topic_ids(&mut response.responses, |t| &mut t.topic_id);
    }

    fn answer_refused(response: &mut FetchResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                PartitionData::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_high_watermark(-1)
            };
            FetchableTopicResponse::default()
                .with_topic(TopicName(t.name))
                .with_topic_id(t.id)
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
