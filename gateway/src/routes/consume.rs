//! Reading over HTTP: a partition from an offset (long-poll), a partition or a whole topic
//! followed as Server-Sent Events, and a consumer group's committed offsets.

use floe_agent::produce::schemas::{KEY_SCHEMA_ID_HEADER, VALUE_SCHEMA_ID_HEADER};
use floe_metadata::state::stored::each_into;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::extract::{Path, Query};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Json, Router};
use base64::Engine;
use bytes::Bytes;
use floe_agent::Agent;
use floe_agent::fetch::{FetchError, FetchedRecord, ReadLimits, fetched_records, read_partition};
use floe_agent::quotas::QuotaKind;
use floe_metadata::groups::{GroupError, GroupRequest, GroupResponse, MemberRef, next_commit_stamp};
use floe_metadata::{OffsetCommit, TopicId};
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::watch;

use crate::error::HttpError;
use floe_metadata::acl::{AclOperation, AclResourceType};

use crate::extract::{Scope, SmallBody};
use crate::limits::{
    CONSUME_BYTES_MAX, CONSUME_RECORDS_MAX, CONSUME_WAIT_MAX, FOLLOW_BUFFER_BYTES_MAX, FOLLOW_ROUND_BYTES_MAX,
    FOLLOW_STREAMS_MAX, FOLLOW_TENANT_BUFFER_BYTES_MAX, FOLLOW_TENANT_STREAMS_MAX, GROUP_COMMIT_OFFSETS_MAX,
    MemoryBudget, Reservation, Shares, SharesFull,
};
use crate::produce::json::rfc3339;
use crate::schema_json::SchemaJson;

/// `stop` turns true when the agent shuts down: event streams then end, so clients reconnect
/// to another agent instead of holding the shutdown open.
pub(crate) fn router(agent: Arc<Agent>, stop: watch::Receiver<bool>) -> Router {
    let follows = Arc::new(Shares::new(FOLLOW_STREAMS_MAX, FOLLOW_TENANT_STREAMS_MAX));
    let buffers = Arc::new(FollowBuffers::default());
    Router::new()
        .route("/v3/clusters/{cluster}/topics/{topic}/partitions/{partition}/records", get(read))
        .route("/v3/clusters/{cluster}/topics/{topic}/partitions/{partition}/records:follow", get(follow_partition))
        .route("/v3/clusters/{cluster}/topics/{topic}/records:follow", get(follow_topic))
        .route("/v3/clusters/{cluster}/consumer-groups/{group}/offsets", get(group_offsets).post(commit_offsets))
        .with_state(Reader { agent, follows, buffers, stop })
}

#[derive(Clone)]
struct Reader {
    agent: Arc<Agent>,
    follows: Arc<Shares>,
    buffers: Arc<FollowBuffers>,
    stop: watch::Receiver<bool>,
}

/// Room for what event streams have read and not sent yet: the agent's, and each tenant's.
struct FollowBuffers(MemoryBudget);

impl Default for FollowBuffers {
    fn default() -> Self {
        Self(MemoryBudget::new(FOLLOW_BUFFER_BYTES_MAX, FOLLOW_TENANT_BUFFER_BYTES_MAX))
    }
}

impl FollowBuffers {
    /// Room for one round, waited for: the agent's and the tenant's.
    async fn round(&self, tenant: &str) -> Option<Reservation> {
        self.0.reserve(tenant, FOLLOW_ROUND_BYTES_MAX).await
    }
}

/// How keys and values are shown.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Format {
    /// Base64, type BINARY.
    #[default]
    Binary,
    /// UTF-8 text (type STRING) where the bytes are UTF-8, else BINARY.
    String,
    /// Decoded with its registry schema (type AVRO, PROTOBUF or JSONSCHEMA) where the bytes
    /// carry the registry's framing, else JSON where they are JSON, else BINARY.
    Json,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Isolation {
    #[default]
    ReadUncommitted,
    ReadCommitted,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadParams {
    /// A number, `earliest` or `latest`; the log start when absent.
    offset: Option<String>,
    /// Instead of `offset`: the first record whose timestamp (ms since the epoch) is at least
    /// this, as ListOffsets finds it; the log end when none is.
    timestamp: Option<i64>,
    max_bytes: Option<usize>,
    max_records: Option<usize>,
    wait_ms: Option<usize>,
    #[serde(default)]
    isolation: Isolation,
    #[serde(default)]
    format: Format,
}

/// A partition of a topic, checked to exist.
#[derive(Clone, Debug)]
struct PartitionTarget {
    cluster_id: String,
    /// As the caller names it.
    topic: String,
    topic_id: TopicId,
    partition: i32,
}

fn partition_target(
    agent: &Agent,
    cluster: &str,
    scope: &Scope,
    topic: &str,
    partition: i32,
) -> Result<PartitionTarget, HttpError> {
    let cluster_id = super::clusters::check_cluster(agent, cluster)?;
    let state = agent.metadata.read();
    scope.authorize(&state, AclOperation::Read, AclResourceType::Topic, topic)?;
    let t = state
        .topic_by_name(&scope.stored(topic))
        .ok_or_else(|| HttpError::not_found(format!("topic {topic:?} not found")))?;
    if partition < 0 || partition as usize >= t.partitions.len() {
        return Err(HttpError::not_found(format!("partition {partition} of topic {topic:?} not found")));
    }
    Ok(PartitionTarget { cluster_id, topic: topic.to_owned(), topic_id: t.topic_id, partition })
}

/// The offset a read starts at: a number, `earliest` (log start) or `latest` (log end).
fn start_offset(agent: &Agent, target: &PartitionTarget, offset: Option<&str>) -> Result<i64, HttpError> {
    let state = agent.metadata.read();
    let p = state
        .partition(target.topic_id, target.partition)
        .ok_or_else(|| HttpError::not_found(format!("partition {} not found", target.partition)))?;
    match offset {
        None | Some("earliest") => Ok(p.log_start_offset),
        Some("latest") => Ok(p.next_offset),
        Some(n) => {
            n.parse().map_err(|_| HttpError::bad_request(format!("offset {n:?} is not a number, earliest or latest")))
        }
    }
}

/// The offset of the first record stamped `timestamp` or later; the log end when none is.
async fn offset_at_timestamp(agent: &Agent, target: &PartitionTarget, timestamp: i64) -> Result<i64, HttpError> {
    match floe_agent::fetch::records_at_timestamp(agent, target.topic_id, target.partition, timestamp).await {
        Ok(Some(hit)) => Ok(hit.offset),
        Ok(None) => start_offset(agent, target, Some("latest")),
        Err(FetchError::UnknownTopicOrPartition) => {
            Err(HttpError::not_found(format!("partition {} not found", target.partition)))
        }
        Err(e) => Err(HttpError::unavailable(format!("finding the offset of a timestamp: {e}"))),
    }
}

/// One read's records and where the partition stands.
struct Batch {
    records: Vec<FetchedRecord>,
    next_offset: i64,
    high_watermark: i64,
    log_start_offset: i64,
    last_stable_offset: i64,
}

async fn read_once(
    agent: &Agent,
    target: &PartitionTarget,
    offset: i64,
    max_bytes: usize,
    max_records: usize,
    isolation: Isolation,
) -> Result<Batch, HttpError> {
    let read_committed = isolation == Isolation::ReadCommitted;
    let limits = ReadLimits { max_bytes, must_return_first: true, read_committed };
    let mut held = floe_storage::LastBlock::default();
    let read =
        read_partition(agent, target.topic_id, target.partition, offset, -1, limits, &mut held).await.map_err(|e| {
            match e {
                FetchError::UnknownTopicOrPartition => HttpError::not_found(e.to_string()),
                FetchError::OffsetOutOfRange { .. } => HttpError::new(StatusCode::RANGE_NOT_SATISFIABLE, e.to_string()),
                FetchError::OffsetNotAvailable { .. } => HttpError::unavailable(e.to_string()).with_retry_after(1),
                other => HttpError::unavailable(format!("reading the partition: {other}")),
            }
        })?;
    let records = fetched_records(&read, offset, read_committed, max_records)
        .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("stored records: {e}")))?;
    // Past what was read: the next record, or the end of the batches read (markers and
    // aborted records take offsets too), never beyond what a reader may see.
    let visible_end = if read_committed { read.last_stable_offset } else { read.high_watermark };
    let read_end = last_offset_read(&read.records).map_or(offset, |last| last + 1);
    let next_offset = match records.last() {
        Some(r) if records.len() == max_records => r.offset + 1,
        _ => read_end.max(offset).min(visible_end.max(offset)),
    };
    Ok(Batch {
        records,
        next_offset,
        high_watermark: read.high_watermark,
        log_start_offset: read.log_start_offset,
        last_stable_offset: read.last_stable_offset,
    })
}

/// The last offset of the last whole batch in `records`.
fn last_offset_read(records: &Bytes) -> Option<i64> {
    floe_agent::record_batch::split(records)
        .map_while(Result::ok)
        .last()
        .map(|(h, _)| h.base_offset + i64::from(h.last_offset_delta))
}

async fn read(
    State(reader): State<Reader>,
    scope: Scope,
    Path((cluster, topic, partition)): Path<(String, String, i32)>,
    Query(params): Query<ReadParams>,
) -> Result<Json<Value>, HttpError> {
    let agent = &reader.agent;
    let target = partition_target(agent, &cluster, &scope, &topic, partition)?;
    crate::quotas::admit(agent, &scope, QuotaKind::Fetch)?;
    let offset = match params.timestamp {
        None => start_offset(agent, &target, params.offset.as_deref())?,
        Some(_) if params.offset.is_some() => {
            return Err(HttpError::bad_request("give offset or timestamp, not both"));
        }
        Some(timestamp) if timestamp < 0 => {
            return Err(HttpError::bad_request("timestamp is milliseconds since the Unix epoch, not negative"));
        }
        Some(timestamp) => offset_at_timestamp(agent, &target, timestamp).await?,
    };
    let max_bytes = bounded("max_bytes", params.max_bytes, 1024 * 1024, CONSUME_BYTES_MAX)?;
    let max_records = bounded("max_records", params.max_records, 1000, CONSUME_RECORDS_MAX)?;
    let wait_ms = bounded("wait_ms", params.wait_ms, 0, CONSUME_WAIT_MAX.as_millis() as usize)?;
    let wait = Duration::from_millis(wait_ms as u64);
    let deadline = Instant::now() + wait;
    let waiter = agent.wakeups.wait_on(&agent.metadata.read(), [(target.topic_id, target.partition)]);
    let mut first = true;
    let batch = loop {
        if !std::mem::take(&mut first) {
            floe_agent::metrics::LONG_POLL_READS.with_label_values(&["http"]).inc();
        }
        let batch = read_once(agent, &target, offset, max_bytes, max_records, params.isolation).await?;
        if !batch.records.is_empty() || Instant::now() >= deadline {
            break batch;
        }
        // Wait for the partition to move (or the deadline), then read again.
        let _ = tokio::time::timeout_at(deadline.into(), waiter.woken()).await;
    };
    let bytes: usize = batch.records.iter().map(record_bytes).sum();
    crate::quotas::charge(agent, &scope, QuotaKind::Fetch, bytes);
    crate::quotas::meter_read(agent, &scope, batch.records.len(), bytes);
    let mut schemas = SchemaJson::for_topic(agent.clone(), &scope, &topic);
    let records: Vec<Value> =
        batch.records.iter().map(|r| record_json(&target, r, params.format, &mut schemas)).collect();
    Ok(Json(serde_json::json!({
        "cluster_id": target.cluster_id,
        "topic_name": target.topic,
        "partition_id": target.partition,
        "records": records,
        "next_offset": batch.next_offset,
        "high_watermark": batch.high_watermark,
        "last_stable_offset": batch.last_stable_offset,
        "log_start_offset": batch.log_start_offset,
    })))
}

/// A query parameter's value, `default` when absent; refused outside its range (a wait of 0
/// and no upper bound below 1 make sense only for `wait_ms`).
fn bounded(name: &str, value: Option<usize>, default: usize, max: usize) -> Result<usize, HttpError> {
    let min = usize::from(name != "wait_ms");
    match value.unwrap_or(default) {
        v if (min..=max).contains(&v) => Ok(v),
        v => Err(HttpError::bad_request(format!("{name} {v} is outside {min}..={max}"))),
    }
}

fn data_json(bytes: &Option<Bytes>, header: Option<&[u8]>, format: Format, schemas: &mut SchemaJson) -> Value {
    let Some(bytes) = bytes else { return Value::Null };
    if format == Format::Json {
        return schemas.show(bytes, header);
    }
    if format == Format::String
        && let Ok(text) = std::str::from_utf8(bytes)
    {
        return serde_json::json!({ "type": "STRING", "data": text });
    }
    serde_json::json!({ "type": "BINARY", "data": base64::engine::general_purpose::STANDARD.encode(bytes) })
}

/// The record's one header named `name`, if it has exactly one, with a value (as validation
/// reads it; otherwise the value is shown by its own framing).
fn schema_header<'r>(record: &'r FetchedRecord, name: &[u8]) -> Option<&'r [u8]> {
    match floe_agent::produce::schemas::header_among(&record.headers, name) {
        floe_agent::record_batch::records::Header::One(value) => value,
        _ => None,
    }
}

fn record_json(target: &PartitionTarget, record: &FetchedRecord, format: Format, schemas: &mut SchemaJson) -> Value {
    let headers: Vec<Value> = record
        .headers
        .iter()
        .map(|(name, value)| {
            serde_json::json!({
                "name": String::from_utf8_lossy(name),
                "value": value.as_ref().map(|v| base64::engine::general_purpose::STANDARD.encode(v)),
            })
        })
        .collect();
    serde_json::json!({
        "partition_id": target.partition,
        "offset": record.offset,
        "timestamp": rfc3339(record.timestamp),
        "timestamp_type": if record.log_append_time { "LOG_APPEND_TIME" } else { "CREATE_TIME" },
        "key": data_json(&record.key, schema_header(record, KEY_SCHEMA_ID_HEADER), format, schemas),
        "value": data_json(&record.value, schema_header(record, VALUE_SCHEMA_ID_HEADER), format, schemas),
        "headers": headers,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowParams {
    /// Where to start: a number (partition streams only), `earliest` or `latest` (the default).
    offset: Option<String>,
    #[serde(default)]
    isolation: Isolation,
    #[serde(default)]
    format: Format,
}

/// A stream slot for `scope`'s caller: the tenant's share of the agent's, or 503.
fn follow_permit(reader: &Reader, scope: &Scope) -> Result<Reservation, HttpError> {
    reader.follows.try_take(scope.tenant(), 1).map_err(|full| match full {
        SharesFull::Tenant => HttpError::unavailable(format!(
            "this tenant already has {FOLLOW_TENANT_STREAMS_MAX} event streams on this agent"
        )),
        SharesFull::Agent => {
            HttpError::unavailable(format!("this agent already serves {FOLLOW_STREAMS_MAX} event streams"))
        }
    })
}

/// `Last-Event-ID` of a partition stream: the offset of the last record the client saw.
fn last_event_offset(headers: &HeaderMap) -> Result<Option<i64>, HttpError> {
    headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| HttpError::bad_request("Last-Event-ID must be the offset of the last record seen"))
        })
        .transpose()
}

/// Where a followed partition is.
struct Cursor {
    target: PartitionTarget,
    offset: i64,
}

async fn follow_partition(
    State(reader): State<Reader>,
    scope: Scope,
    Path((cluster, topic, partition)): Path<(String, String, i32)>,
    Query(params): Query<FollowParams>,
    headers: HeaderMap,
) -> Result<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>, HttpError> {
    let target = partition_target(&reader.agent, &cluster, &scope, &topic, partition)?;
    let offset = match last_event_offset(&headers)? {
        Some(last) => last + 1,
        None => start_offset(&reader.agent, &target, Some(params.offset.as_deref().unwrap_or("latest")))?,
    };
    crate::quotas::admit(&reader.agent, &scope, QuotaKind::Fetch)?;
    let permit = follow_permit(&reader, &scope)?;
    Ok(follow(reader, scope, vec![Cursor { target, offset }], params, permit))
}

async fn follow_topic(
    State(reader): State<Reader>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
    Query(params): Query<FollowParams>,
) -> Result<Sse<impl futures::Stream<Item = Result<Event, Infallible>>>, HttpError> {
    let start = params.offset.as_deref().unwrap_or("latest");
    if !matches!(start, "earliest" | "latest") {
        return Err(HttpError::bad_request("a topic stream starts at offset=earliest or offset=latest"));
    }
    let partitions = {
        let state = reader.agent.metadata.read();
        scope.authorize(&state, AclOperation::Read, AclResourceType::Topic, &topic)?;
        let t = state
            .topic_by_name(&scope.stored(&topic))
            .ok_or_else(|| HttpError::not_found(format!("topic {topic:?} not found")))?;
        t.partitions.len() as i32
    };
    let mut cursors = Vec::with_capacity(partitions as usize);
    for partition in 0..partitions {
        let target = partition_target(&reader.agent, &cluster, &scope, &topic, partition)?;
        let offset = start_offset(&reader.agent, &target, Some(start))?;
        cursors.push(Cursor { target, offset });
    }
    crate::quotas::admit(&reader.agent, &scope, QuotaKind::Fetch)?;
    let permit = follow_permit(&reader, &scope)?;
    Ok(follow(reader, scope, cursors, params, permit))
}

/// Events for every record of `cursors` from where each starts, as they are committed. Each
/// event's id is its offset (`partition:offset` on topic streams); errors end the stream with
/// an `error` event, and so does the agent shutting down.
fn follow(
    reader: Reader,
    scope: Scope,
    cursors: Vec<Cursor>,
    params: FollowParams,
    permit: Reservation,
) -> Sse<impl futures::Stream<Item = Result<Event, Infallible>>> {
    let whole_topic = cursors.len() > 1 || cursors.first().is_some_and(|c| c.target.partition != 0);
    let waiter = {
        let state = reader.agent.metadata.read();
        reader.agent.wakeups.wait_on(&state, cursors.iter().map(|c| (c.target.topic_id, c.target.partition)))
    };
    let schemas =
        SchemaJson::for_topic(reader.agent.clone(), &scope, cursors.first().map_or("", |c| c.target.topic.as_str()));
    let state = Follow {
        schemas,
        agent: reader.agent,
        buffers: reader.buffers,
        scope,
        cursors,
        next_cursor: 0,
        params,
        whole_topic,
        waiter,
        stop: reader.stop,
        ready: VecDeque::new(),
        held: None,
        done: false,
        waited: false,
        _permit: permit,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let event = state.next_event().await?;
        Some((Ok(event), state))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

/// An event stream's position and what it has read but not sent yet.
struct Follow {
    agent: Arc<Agent>,
    /// Decodes records for `format=json`.
    schemas: SchemaJson,
    buffers: Arc<FollowBuffers>,
    /// The caller: its ACLs are checked and its fetch quota charged at every read.
    scope: Scope,
    cursors: Vec<Cursor>,
    /// Where the next round starts, so a round cut short by its byte bound is fair to every
    /// partition.
    next_cursor: usize,
    params: FollowParams,
    whole_topic: bool,
    /// Woken when one of the cursors' partitions moves.
    waiter: floe_agent::fetch::wakeups::Waiter,
    stop: watch::Receiver<bool>,
    ready: VecDeque<Event>,
    /// Room taken for `ready` (the tenant's and the agent's), given back once it is sent.
    held: Option<Reservation>,
    done: bool,
    /// Whether the next round follows a wait (its reads count in `floe_long_poll_reads_total`).
    waited: bool,
    /// Held for the stream's life: one of the agent's event-stream slots.
    _permit: Reservation,
}

/// A record's key, value and header bytes: what a read is charged and metered by.
fn record_bytes(r: &floe_agent::fetch::FetchedRecord) -> usize {
    let headers: usize = r.headers.iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, |v| v.len())).sum();
    r.key.as_ref().map_or(0, |k| k.len()) + r.value.as_ref().map_or(0, |v| v.len()) + headers
}

impl Follow {
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            self.held = None;
            if self.done || *self.stop.borrow() {
                return None;
            }
            let tenant = self.scope.tenant().unwrap_or_default().to_owned();
            self.held = tokio::select! {
                held = self.buffers.round(&tenant) => held,
                _ = self.stop.changed() => return None,
            };
            let mut any = false;
            let mut bytes = 0;
            let (mut records_read, mut record_bytes_read) = (0, 0);
            let count = self.cursors.len();
            let start = self.next_cursor % count.max(1);
            if std::mem::take(&mut self.waited) {
                floe_agent::metrics::LONG_POLL_READS.with_label_values(&["http"]).inc_by(count as u64);
            }
            for i in 0..count {
                if bytes >= FOLLOW_ROUND_BYTES_MAX {
                    self.next_cursor = start + i;
                    break;
                }
                let cursor = &mut self.cursors[(start + i) % count];
                let allowed = {
                    let state = self.agent.metadata.read();
                    self.scope.authorize(&state, AclOperation::Read, AclResourceType::Topic, &cursor.target.topic)
                };
                if let Err(e) = allowed {
                    let data = crate::error::error_body(e.status, &e.message).to_string();
                    self.ready.push_back(Event::default().event("error").data(data));
                    self.done = true;
                    break;
                }
                let budget = FOLLOW_ROUND_BYTES_MAX - bytes;
                let read = read_once(&self.agent, &cursor.target, cursor.offset, budget, 1000, self.params.isolation);
                match read.await {
                    Ok(batch) => {
                        records_read += batch.records.len();
                        record_bytes_read += batch.records.iter().map(record_bytes).sum::<usize>();
                        for record in &batch.records {
                            let id = if self.whole_topic {
                                format!("{}:{}", cursor.target.partition, record.offset)
                            } else {
                                record.offset.to_string()
                            };
                            let data =
                                record_json(&cursor.target, record, self.params.format, &mut self.schemas).to_string();
                            bytes += data.len();
                            self.ready.push_back(Event::default().event("record").id(id).data(data));
                        }
                        any |= !batch.records.is_empty();
                        cursor.offset = batch.next_offset;
                    }
                    Err(e) => {
                        let data = crate::error::error_body(e.status, &e.message).to_string();
                        self.ready.push_back(Event::default().event("error").data(data));
                        self.done = true;
                        break;
                    }
                }
            }
            // Past the tenant's fetch quota the stream pauses, as a throttled Kafka fetch does.
            let wait = crate::quotas::charge(&self.agent, &self.scope, QuotaKind::Fetch, bytes);
            crate::quotas::meter_read(&self.agent, &self.scope, records_read, record_bytes_read);
            if !wait.is_zero() {
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = self.stop.changed() => {}
                }
            }
            if !any && !self.done {
                // Nothing read holds no room while it waits.
                self.held = None;
                // Nothing new: wait for one of its partitions to move (a deleted topic does too;
                // bounded all the same, so ACL changes are checked again) or the agent stopping.
                tokio::select! {
                    _ = tokio::time::timeout(Duration::from_secs(5), self.waiter.woken()) => {}
                    _ = self.stop.changed() => {}
                }
                self.waited = true;
            }
        }
    }
}

async fn group_offsets(
    State(reader): State<Reader>,
    scope: Scope,
    Path((cluster, shown)): Path<(String, String)>,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = super::clusters::check_cluster(&reader.agent, &cluster)?;
    scope.authorize(&reader.agent.metadata.read(), AclOperation::Describe, AclResourceType::Group, &shown)?;
    let group = scope.stored(&shown);
    // Read on the metadata leader, as OffsetFetch is: a client resumes from these offsets, and
    // this agent's mirror may hold an older commit.
    let request = GroupRequest::FetchOffsets { groups: vec![(group.clone(), None)], require_stable: false };
    let committed = match reader.agent.metadata.group_request(request).await {
        Ok(GroupResponse::FetchOffsets(mut groups)) if groups.len() == 1 => groups.pop().unwrap_or_default(),
        Ok(_) => {
            return Err(HttpError::unavailable("the group coordinator answered another request").with_retry_after(1));
        }
        Err(e) => return Err(HttpError::unavailable(e.to_string()).with_retry_after(1)),
    };
    let state = reader.agent.metadata.read();
    if committed.is_empty() && !state.groups.contains_key(&group) {
        return Err(HttpError::not_found(format!("group {shown:?} not found")));
    }
    // Topics the caller may not describe are left out, as OffsetFetch of all topics does.
    let described = |(topic, _): &&(String, Vec<floe_metadata::FetchedOffset>)| {
        scope.may(&state, AclOperation::Describe, AclResourceType::Topic, scope.shown(topic).unwrap_or(topic))
    };
    let offsets: Vec<Value> = committed
        .iter()
        .filter(described)
        .flat_map(|(topic, fetched)| fetched.iter().map(move |f| (topic, f)))
        .map(|(topic, committed)| {
            let end = state
                .topic_by_name(topic)
                .and_then(|t| state.partition(t.topic_id, committed.partition))
                .map(|p| p.next_offset);
            serde_json::json!({
                "topic_name": scope.shown(topic).unwrap_or(topic),
                "partition_id": committed.partition,
                "offset": committed.offset,
                "metadata": committed.metadata,
                "lag": end.map(|end| (end - committed.offset).max(0)),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "cluster_id": cluster_id, "consumer_group_id": shown, "offsets": offsets })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitRequest {
    offsets: Vec<CommitEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommitEntry {
    topic_name: String,
    partition_id: i32,
    offset: i64,
    #[serde(default)]
    metadata: String,
}

/// Commits offsets as a consumer outside any group generation would (Kafka's simple consumer
/// commit): accepted while the group has no active members.
async fn commit_offsets(
    State(reader): State<Reader>,
    scope: Scope,
    Path((cluster, shown)): Path<(String, String)>,
    headers: HeaderMap,
    SmallBody(body): SmallBody,
) -> Result<Json<Value>, HttpError> {
    let cluster_id = super::clusters::check_cluster(&reader.agent, &cluster)?;
    crate::body::require_media_type(&headers, &["application/json"])?;
    let request: CommitRequest =
        serde_json::from_slice(&body).map_err(|e| HttpError::bad_request(format!("invalid offsets: {e}")))?;
    if request.offsets.is_empty() || request.offsets.len() > GROUP_COMMIT_OFFSETS_MAX {
        return Err(HttpError::unprocessable(format!("commit 1 to {GROUP_COMMIT_OFFSETS_MAX} offsets")));
    }
    {
        // OffsetCommit's checks: Read on the group and on every topic committed.
        let state = reader.agent.metadata.read();
        scope.authorize(&state, AclOperation::Read, AclResourceType::Group, &shown)?;
        for o in &request.offsets {
            scope.authorize(&state, AclOperation::Read, AclResourceType::Topic, &o.topic_name)?;
        }
    }
    let offsets: Vec<OffsetCommit> = request
        .offsets
        .iter()
        .map(|o| OffsetCommit {
            topic: scope.stored(&o.topic_name),
            partition: o.partition_id,
            offset: o.offset,
            leader_epoch: -1,
            metadata: o.metadata.clone(),
        })
        .collect();
    let member =
        MemberRef { group_id: scope.stored(&shown), generation: -1, member_id: String::new(), instance_id: None };
    let response = reader
        .agent
        .metadata
        .group_request(GroupRequest::CommitOffsets {
            member,
            offsets: each_into(offsets),
            stamp: next_commit_stamp().into(),
        })
        .await
        .map_err(group_error)?;
    let results = match response {
        GroupResponse::CommitOffsets(Ok(results)) => results,
        GroupResponse::CommitOffsets(Err(e)) => return Err(group_error(e)),
        other => return Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected answer {other:?}"))),
    };
    let entries: Vec<Value> = request
        .offsets
        .iter()
        .zip(results)
        .map(|(o, result)| {
            let status = result.as_ref().map_or_else(|e| group_error(e.clone()).status, |()| StatusCode::OK);
            serde_json::json!({
                "topic_name": o.topic_name,
                "partition_id": o.partition_id,
                "offset": o.offset,
                "error_code": status.as_u16(),
                "message": result.err().map(|e| e.to_string()),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({ "cluster_id": cluster_id, "consumer_group_id": shown, "offsets": entries })))
}

fn group_error(error: GroupError) -> HttpError {
    let status = match &error {
        GroupError::NotCoordinator | GroupError::CoordinatorNotAvailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        GroupError::InvalidGroupId => StatusCode::BAD_REQUEST,
        GroupError::UnknownTopicOrPartition | GroupError::GroupIdNotFound => StatusCode::NOT_FOUND,
        GroupError::UnknownMemberId
        | GroupError::IllegalGeneration
        | GroupError::RebalanceInProgress
        | GroupError::NonEmptyGroup => StatusCode::CONFLICT,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    };
    HttpError::new(status, error.to_string())
}
