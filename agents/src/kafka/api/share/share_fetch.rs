//! ShareFetch (KIP-932): moves the member's share session on, sends the acknowledgements it
//! carries and asks the coordinator to lock records of the session's partitions for the member,
//! then reads those records like a fetch. Offsets locked without a record to deliver (markers,
//! aborted records, records key compaction removed, between batches or inside one) are archived
//! with the member's next request; records that did not fit the response are returned unsent,
//! with their delivery count as it was.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use floe_metadata::groups::{ShareWork, ShareWorkResult};
use floe_metadata::{AcquiredRange, TopicId};
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ResponseKind, ShareFetchRequest, ShareFetchResponse};
use kafka_protocol::protocol::StrBytes;

use super::super::super::dispatch::{Context, KafkaApi, Reply};
use super::super::super::error_code::{code, for_group};
use super::super::super::resources::{AnswerWalk, Op, Refusal, Refused, Res, Resources, TopicRef, Walk};
use super::{
    Acknowledgements, Caller, MAX_RECORDS_DEFAULT, for_session, lock_duration_ms, read_committed, send_work, share_work,
};
use crate::Agent;
use crate::fetch::{ReadLimits, consumer_batches, read_partition, record_runs};
use crate::limits::{FETCH_RESPONSE_BYTES_MAX, FETCH_WAIT_MAX};
use crate::share_sessions::SharePartitionRef;

/// How often a waiting ShareFetch asks again when no partition moved: records also become
/// available when other members release them or their locks pass.
const RETRY_EVERY: Duration = Duration::from_millis(250);
/// Reads one partition's acquired records may take.
const READ_ROUNDS_MAX: usize = 64;

/// A session partition as the client names it, and as this request acts on it.
type Acting = (SharePartitionRef, SharePartitionRef);

/// One partition's answer before it goes on the wire.
struct Served {
    records: Bytes,
    acquired: Vec<AcquiredRange>,
    gaps: Vec<(i64, i64)>,
    unsent: Vec<(i64, i64)>,
    leader_epoch: i32,
}

/// Reads the batches holding `ranges` (sorted, from one acquisition): the records to send, the
/// acquired ranges clipped to them, and what was acquired but is not sent.
async fn serve(
    agent: &Agent,
    (topic_id, partition): SharePartitionRef,
    ranges: &[AcquiredRange],
    budget: usize,
    must_return_first: bool,
    read_committed: bool,
) -> Result<Served, crate::fetch::FetchError> {
    let (Some(first), Some(last)) = (ranges.first().map(|r| r.first), ranges.last().map(|r| r.last)) else {
        return Ok(Served {
            records: Bytes::new(),
            acquired: Vec::new(),
            gaps: Vec::new(),
            unsent: Vec::new(),
            leader_epoch: 0,
        });
    };
    let mut out = BytesMut::new();
    let mut delivered: Vec<(i64, i64)> = Vec::new();
    let mut covered_to = first - 1;
    let mut from = first;
    let mut leader_epoch = 0;
    let mut left = budget;
    let mut held = floe_storage::LastBlock::default();
    for _ in 0..READ_ROUNDS_MAX {
        if from > last || left == 0 {
            break;
        }
        let limits =
            ReadLimits { max_bytes: left, must_return_first: must_return_first && out.is_empty(), read_committed };
        let read = read_partition(agent, topic_id, partition, from, -1, limits, &mut held).await?;
        leader_epoch = read.leader_epoch;
        left = left.saturating_sub(read.records.len());
        let batches = consumer_batches(&read, read_committed)
            .map_err(|e| crate::fetch::FetchError::CorruptStoredBatch(e.to_string()))?;
        for (header, bytes, deliverable) in batches {
            let (base, end) = (header.base_offset, header.base_offset + i64::from(header.last_offset_delta));
            if end < from || base > last {
                continue;
            }
            covered_to = covered_to.max(end);
            if deliverable && ranges.iter().any(|r| r.first <= end && base <= r.last) {
                let runs = record_runs(&header, &bytes)
                    .map_err(|e| crate::fetch::FetchError::CorruptStoredBatch(e.to_string()))?;
                out.extend_from_slice(&bytes);
                delivered.extend(runs);
            }
        }
        // Past stretches without batches too (markers, compacted-away ranges).
        if read.records.is_empty() {
            covered_to = covered_to.max(read.next_offset - 1);
        }
        let next = read.next_offset.max(covered_to + 1);
        if next <= from {
            break;
        }
        from = next;
    }
    let mut served =
        Served { records: out.freeze(), acquired: Vec::new(), gaps: Vec::new(), unsent: Vec::new(), leader_epoch };
    for r in ranges {
        let mut at = r.first;
        for &(base, end) in &delivered {
            let (lo, hi) = (base.max(r.first), end.min(r.last));
            if lo > hi {
                continue;
            }
            if at < lo {
                served.gaps.push((at, lo - 1));
            }
            served.acquired.push(AcquiredRange { first: lo, last: hi, delivery_count: r.delivery_count });
            at = hi + 1;
        }
        if at <= r.last {
            // Read past without a record for it: a gap; never reached: not sent.
            let read_to = covered_to.min(r.last);
            if at <= read_to {
                served.gaps.push((at, read_to));
            }
            if read_to < r.last {
                served.unsent.push(((read_to + 1).max(at), r.last));
            }
        }
    }
    Ok(served)
}

async fn share_fetch(agent: &Agent, request: ShareFetchRequest, caller: Caller) -> ShareFetchResponse {
    let lock_ms = lock_duration_ms(agent, request.group_id.as_ref().map_or("", |g| g.as_str()));
    let answer = ShareFetchResponse::default().with_acquisition_lock_timeout_ms(lock_ms);
    let (Some(group), Some(member)) = (request.group_id.as_ref(), request.member_id.as_ref()) else {
        return answer
            .with_error_code(code::INVALID_REQUEST)
            .with_error_message(Some(StrBytes::from_static_str("a share fetch names its group and member")));
    };
    let (group, member) = (group.to_string(), member.to_string());
    let has_acks = request.topics.iter().any(|t| t.partitions.iter().any(|p| !p.acknowledgement_batches.is_empty()));
    if request.share_session_epoch == 0 && has_acks {
        return answer.with_error_code(code::INVALID_REQUEST).with_error_message(Some(StrBytes::from_static_str(
            "a share session's first request carries no acknowledgements",
        )));
    }
    let added = request.topics.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p.partition_index)));
    let forgotten =
        request.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)));
    let turn = match agent.share_sessions.turn(
        &caller.owner,
        (&group, &member),
        request.share_session_epoch,
        added,
        forgotten,
    ) {
        Ok(turn) => turn,
        Err(e) => {
            return answer
                .with_error_code(for_session(e))
                .with_error_message(Some(super::super::str_bytes(e.to_string())));
        }
    };
    // Acknowledgements, by partition; a partition whose batches do not parse is answered alone.
    let (acks, partitions, unreadable) = {
        let state = agent.metadata.read();
        let acks = Acknowledgements::parse(
            &turn.gaps,
            request.topics.iter().flat_map(|t| {
                t.partitions.iter().filter(|p| !p.acknowledgement_batches.is_empty()).map(|p| {
                    let batches = p
                        .acknowledgement_batches
                        .iter()
                        .map(|b| (b.first_offset, b.last_offset, &b.acknowledge_types[..]));
                    (t.topic_id, p.partition_index, batches)
                })
            }),
            |t| caller.knows(&state, t),
        );
        // The session's partitions the caller may read now, each as the client names it and as
        // this request acts on it (`Caller::acting_id`).
        let (partitions, unreadable): (Vec<Acting>, Vec<Acting>) = turn
            .partitions
            .iter()
            .map(|&(t, p)| ((t, p), (caller.acting_id(&state, t), p)))
            .partition(|(_, (acted, _))| caller.may_read(&state, *acted));
        (acks, partitions, unreadable)
    };
    let acting: Vec<SharePartitionRef> = partitions.iter().map(|(_, acted)| *acted).collect();
    let read_committed = read_committed(agent, &group);
    let max_records = if request.max_records > 0 { request.max_records } else { MAX_RECORDS_DEFAULT };
    let per_partition = i64::from(max_records) / i64::try_from(acting.len().max(1)).unwrap_or(1);
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)).min(FETCH_WAIT_MAX);
    let deadline = Instant::now() + wait;
    let mut work = ShareWork {
        group_id: group.clone(),
        member_id: member.clone(),
        unsent: Vec::new(),
        acknowledgements: acks.work.clone(),
        release_all: turn.closing,
        acquire: acting.clone(),
        max_records: per_partition.max(1),
        read_committed,
    };
    let waiter = (!wait.is_zero() && !acting.is_empty()).then(|| {
        let state = agent.metadata.read();
        agent.wakeups.wait_on(&state, acting.clone())
    });
    let mut ack_results: Option<Vec<_>> = None;
    let acquired = loop {
        let result = match send_work(agent, work.clone(), &acks).await {
            Ok(result) => result,
            Err(e) => {
                let message = Some(super::super::str_bytes(e.to_string()));
                return answer.with_error_code(for_group(&e).code()).with_error_message(message);
            }
        };
        let ShareWorkResult { acknowledged, acquired } = result;
        ack_results.get_or_insert(acknowledged);
        let got_any = acquired.iter().any(|r| r.as_ref().is_ok_and(|v| !v.is_empty()));
        let errors = acquired.iter().any(Result::is_err);
        let Some(waiter) = waiter.as_ref().filter(|_| !(got_any || errors || Instant::now() >= deadline)) else {
            break acquired;
        };
        // Acknowledged once; later rounds only ask for records.
        work.acknowledgements.clear();
        work.release_all = false;
        tokio::select! {
            () = waiter.woken() => {}
            () = tokio::time::sleep(RETRY_EVERY.min(deadline.saturating_duration_since(Instant::now()))) => {}
        }
    };
    let mut ack_error = acks.codes(&ack_results.unwrap_or_default());
    // Read what was acquired.
    let mut budget = usize::try_from(request.max_bytes).unwrap_or(0).min(FETCH_RESPONSE_BYTES_MAX);
    let mut by_topic: std::collections::BTreeMap<TopicId, Vec<PartitionData>> = std::collections::BTreeMap::new();
    let mut gaps = Vec::new();
    let mut unsent = Vec::new();
    let mut sent_any = false;
    // Answered as the client names them; read as acted on (the same id but for another
    // tenant's, which acquires nothing).
    for ((named, p), acquired) in partitions.iter().zip(acquired) {
        let mut data = PartitionData::default()
            .with_partition_index(p.1)
            .with_acknowledge_error_code(ack_error.remove(named).unwrap_or(0))
            .with_records(Some(Bytes::new()));
        match acquired {
            Err(e) => data = data.with_error_code(for_group(&e).code()),
            Ok(ranges) if ranges.is_empty() => {}
            Ok(ranges) => match serve(agent, *p, &ranges, budget, !sent_any, read_committed).await {
                Ok(served) => {
                    budget = budget.saturating_sub(served.records.len());
                    sent_any |= !served.records.is_empty();
                    gaps.extend(served.gaps.iter().map(|(f, l)| (*p, *f, *l)));
                    if !served.unsent.is_empty() {
                        unsent.push((p.0, p.1, served.unsent));
                    }
                    data = data
                        .with_current_leader(
                            LeaderIdAndEpoch::default()
                                .with_leader_id(agent.config.node_id)
                                .with_leader_epoch(served.leader_epoch),
                        )
                        .with_records(Some(served.records))
                        .with_acquired_records(
                            served
                                .acquired
                                .into_iter()
                                .map(|r| {
                                    AcquiredRecords::default()
                                        .with_first_offset(r.first)
                                        .with_last_offset(r.last)
                                        .with_delivery_count(r.delivery_count)
                                })
                                .collect(),
                        );
                }
                Err(e) => {
                    // Nothing of it is sent: the records go back as they were.
                    tracing::debug!(error = %e, "share fetch read failed");
                    unsent.push((p.0, p.1, ranges.iter().map(|r| (r.first, r.last)).collect()));
                    data = data.with_error_code(super::super::super::error_code::for_fetch(&e).code());
                }
            },
        }
        by_topic.entry(named.0).or_default().push(data);
    }
    for ((t, p), _) in unreadable {
        by_topic.entry(t).or_default().push(
            PartitionData::default()
                .with_partition_index(p)
                .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                .with_records(Some(Bytes::new())),
        );
    }
    // Acknowledgements of partitions the session does not read (forgotten in this request).
    for ((t, p), code) in ack_error {
        by_topic.entry(t).or_default().push(
            PartitionData::default()
                .with_partition_index(p)
                .with_acknowledge_error_code(code)
                .with_records(Some(Bytes::new())),
        );
    }
    if !unsent.is_empty() {
        let give_back =
            ShareWork { group_id: group.clone(), member_id: member.clone(), unsent, ..ShareWork::default() };
        if let Err(e) = share_work(agent, give_back).await {
            // Their locks still pass; they are redelivered then, one delivery counted too many.
            crate::log_limited!(tracing::Level::WARN, error = %e, "returning unsent share records");
        }
    }
    agent.share_sessions.owe_gaps(&group, &member, gaps);
    answer.with_responses(
        by_topic
            .into_iter()
            .map(|(topic_id, partitions)| {
                ShareFetchableTopicResponse::default().with_topic_id(topic_id).with_partitions(partitions)
            })
            .collect(),
    )
}

impl KafkaApi for ShareFetchRequest {
    const VERSIONS: (i16, i16) = (1, 1);

    async fn start(self, cx: Context<'_>) -> Reply {
        let caller = Caller::of(&cx);
        cx.later(move |agent, _| async move { ResponseKind::ShareFetch(share_fetch(&agent, self, caller).await) })
    }
}

impl Resources for ShareFetchRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ShareFetchResponse> {
        let refused = |refusal: Refusal| ShareFetchResponse::default().with_error_code(refusal.error);
        if let Some(group) = self.group_id.as_mut() {
            walk.one(Op::Read, Res::Group, &mut group.0).map_err(refused)?;
        }
        // The session keeps these ids across requests, so they stay as the client sent them
        // (forgotten ones too); the handler acts on another tenant's as on an unknown id.
        walk.held_topics(
            &mut self.topics,
            Op::Read,
            |t| TopicRef { name: None, id: Some(&mut t.topic_id) },
            |t| t.partitions.iter().map(|p| p.partition_index).collect(),
        );
        Ok(())
    }

    fn walk_answer(_response: &mut ShareFetchResponse, _walk: &AnswerWalk<'_>) {}

    fn answer_refused(response: &mut ShareFetchResponse, refused: Refused) {
        response.responses.extend(refused.topics.into_iter().map(|t| {
            let partition = |p| {
                PartitionData::default()
                    .with_partition_index(p)
                    .with_error_code(code::TOPIC_AUTHORIZATION_FAILED)
                    .with_records(Some(Bytes::new()))
            };
            ShareFetchableTopicResponse::default()
                .with_topic_id(t.id)
                .with_partitions(t.partitions.into_iter().map(partition).collect())
        }));
    }
}
