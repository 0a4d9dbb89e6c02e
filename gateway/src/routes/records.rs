//! Produce over HTTP, in the Confluent REST Proxy v3 shape.
//!
//! `POST /v3/clusters/{cluster}/topics/{topic}/records` takes one record or several (JSON
//! objects one after another) and answers with one delivery report per record, in order. A body
//! sent in chunks (no `Content-Length`) is a stream: its records are written as they arrive and
//! each report is sent as soon as its flush is committed. A request of exactly one record gets
//! that record's status; several are answered 200 with per-record `error_code`s.
//!
//! `POST .../records:bulk` takes NDJSON (one record per line, up to 100,000) and answers once
//! with every record's partition and offset.
//!
//! With an `Idempotency-Key` header the request is read whole and written as one group by a
//! producer of the key's own: retried (to any agent, within `producer.id.expiration.ms` of its
//! last write), it is answered with the original offsets and written once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use floe_metadata::acl::{AclOperation, AclResourceType};

use crate::extract::{Path, Scope};
use crate::quotas;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use bytes::{Bytes, BytesMut};
use floe_agent::Agent;
use floe_agent::quotas::QuotaKind;
use floe_metadata::{Command, CommandError, Outcome, ProducerIdEpoch};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::body::{self, Encoding};
use crate::error::{HttpError, error_body};
use crate::limits::{
    BODY_IDLE, RECORD_JSON_BYTES_MAX, REQUEST_BYTES_MAX, REQUEST_RECORDS_MAX, STREAM_GROUP_RECORDS_MAX,
    STREAM_GROUPS_IN_FLIGHT_MAX, STREAM_RECORDS_MAX,
};
use crate::produce::json::{ParsedRecord, RecordRequest, rfc3339};
use crate::produce::{self, Delivery, PendingGroup, RecordError, TopicTarget, binary, partitioner};

pub(crate) fn router(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/v3/clusters/{cluster}/topics/{topic}/records", post(produce_records))
        .route("/v3/clusters/{cluster}/topics/{topic}/records:bulk", post(produce_bulk))
        .with_state(agent)
}

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const OCTET_STREAM: &str = "application/octet-stream";

/// Keyless records without a partition rotate over partitions group by group, across requests.
static KEYLESS_ROTATION: AtomicU32 = AtomicU32::new(0);

/// What a request writes to, checked before its body is read.
struct Target {
    cluster_id: String,
    topic: TopicTarget,
    /// The topic's name as the caller knows it (without its tenant).
    shown: String,
    scope: Scope,
}

fn target(agent: &Agent, cluster: &str, scope: Scope, topic: &str) -> Result<Target, HttpError> {
    let cluster_id = super::clusters::check_cluster(agent, cluster)?;
    scope.authorize(&agent.metadata.read(), AclOperation::Write, AclResourceType::Topic, topic)?;
    let resolved = TopicTarget::resolve(agent, &scope.stored(topic))
        .map_err(|_| HttpError::not_found(format!("topic {topic:?} not found")))?;
    if let Some(why) = agent.metadata.read().storage_quota_exceeded(&resolved.name) {
        // A quota, so 429; retrying helps only once retention or deletion frees space.
        return Err(HttpError::new(StatusCode::TOO_MANY_REQUESTS, why).with_retry_after(60));
    }
    if let Some(link) = agent.metadata.read().mirror_link(resolved.topic_id) {
        return Err(HttpError::new(
            StatusCode::CONFLICT,
            format!("topic {topic:?} is a mirror of link {link:?}; it takes writes once the link is promoted"),
        ));
    }
    Ok(Target { cluster_id, topic: resolved, shown: topic.to_owned(), scope })
}

async fn produce_records(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let target = target(&agent, &cluster, scope, &topic)?;
    quotas::admit(&agent, &target.scope, QuotaKind::Produce)?;
    body::require_media_type(&headers, &["application/json", OCTET_STREAM, binary::FRAMED_MEDIA_TYPE])?;
    let media_type = body::media_type(&headers).unwrap_or_default();
    let record_fields = headers.contains_key(binary::RECORD_HEADER) || uri.query().is_some_and(|q| !q.is_empty());
    if record_fields && media_type != OCTET_STREAM {
        return Err(HttpError::bad_request(
            "query parameters and Floe-Record-Header apply to application/octet-stream bodies only",
        ));
    }
    if media_type != "application/json" {
        return produce_binary(&agent, &target, &media_type, &uri, &headers, body).await;
    }
    let encoding = Encoding::of(&headers)?;
    let key = idempotency_key(&headers)?;
    // A body of known length is read whole; one sent in chunks is a stream, answered as its
    // records arrive.
    let chunked = !headers.contains_key(header::CONTENT_LENGTH);
    if key.is_none() && encoding == Encoding::Identity && chunked {
        return stream(agent, target, body).await;
    }
    let tenant = target.scope.tenant().unwrap_or_default().to_owned();
    let bytes = body::read_whole(body, encoding, REQUEST_BYTES_MAX, BODY_IDLE, &tenant).await?;
    quotas::charge(&agent, &target.scope, QuotaKind::Produce, bytes.len());
    let deliveries = write_whole(&agent, &target, &bytes, key.as_deref()).await?;
    Ok(answer(&target, &deliveries))
}

/// One record's status and report, or every record's report as lines.
fn answer(target: &Target, deliveries: &[Delivery]) -> Response {
    if let [delivery] = deliveries {
        let (status, report) = report(target, delivery);
        return (status, Json(report)).into_response();
    }
    let mut out = BytesMut::new();
    for delivery in deliveries {
        append_line(&mut out, &report(target, delivery).1);
    }
    json_lines(Body::from(out.freeze()))
}

/// A produce of raw bytes (see [`binary`]): one record's value, or framed records.
async fn produce_binary(
    agent: &Arc<Agent>,
    target: &Target,
    media_type: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let encoding = Encoding::of(headers)?;
    let key = idempotency_key(headers)?;
    let tenant = target.scope.tenant().unwrap_or_default().to_owned();
    let bytes = body::read_whole(body, encoding, REQUEST_BYTES_MAX, BODY_IDLE, &tenant).await?;
    quotas::charge(agent, &target.scope, QuotaKind::Produce, bytes.len());
    let now_ms = floe_metadata::now_ms();
    let (records, request) = if media_type == OCTET_STREAM {
        let params = axum::extract::Query::<binary::RawRecordParams>::try_from_uri(uri)
            .map_err(|e| HttpError::bad_request(e.body_text()))?
            .0;
        let record = binary::raw_record(params, headers, bytes.clone(), now_ms)?;
        // A retry under the same Idempotency-Key must be the same request: its query and
        // record headers are part of the record.
        let mut request = format!("{}\n", uri.query().unwrap_or_default()).into_bytes();
        for (name, value) in &record.record.headers {
            let value = value.as_deref().unwrap_or_default();
            request.extend_from_slice(format!("{}:{}:", name.len(), value.len()).as_bytes());
            request.extend_from_slice(name.as_bytes());
            request.extend_from_slice(value);
        }
        request.extend_from_slice(&bytes);
        (vec![Ok(record)], Bytes::from(request))
    } else {
        (binary::framed_records(&bytes, now_ms)?, bytes)
    };
    let deliveries = write_parsed(agent, target, records, &request, key.as_deref()).await?;
    Ok(answer(target, &deliveries))
}

async fn produce_bulk(
    State(agent): State<Arc<Agent>>,
    scope: Scope,
    Path((cluster, topic)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, HttpError> {
    let target = target(&agent, &cluster, scope, &topic)?;
    quotas::admit(&agent, &target.scope, QuotaKind::Produce)?;
    body::require_media_type(&headers, &["application/x-ndjson", "application/jsonl", "application/json"])?;
    let encoding = Encoding::of(&headers)?;
    let key = idempotency_key(&headers)?;
    let tenant = target.scope.tenant().unwrap_or_default().to_owned();
    let bytes = body::read_whole(body, encoding, REQUEST_BYTES_MAX, BODY_IDLE, &tenant).await?;
    quotas::charge(&agent, &target.scope, QuotaKind::Produce, bytes.len());
    let deliveries = write_whole(&agent, &target, &bytes, key.as_deref()).await?;
    let mut partitions = Vec::with_capacity(deliveries.len());
    let mut offsets = Vec::with_capacity(deliveries.len());
    let mut errors = Vec::new();
    for (index, delivery) in deliveries.iter().enumerate() {
        match delivery {
            Ok(d) => {
                partitions.push(d.partition);
                offsets.push(d.offset);
            }
            Err(e) => {
                partitions.push(-1);
                offsets.push(-1);
                errors
                    .push(serde_json::json!({ "index": index, "error_code": e.status.as_u16(), "message": e.message }));
            }
        }
    }
    Ok(Json(serde_json::json!({
        "cluster_id": target.cluster_id,
        "topic_name": target.shown,
        "record_count": deliveries.len(),
        "error_count": errors.len(),
        "partition_ids": partitions,
        "offsets": offsets,
        "errors": errors,
    })))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, HttpError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else { return Ok(None) };
    let key = value.to_str().map_err(|_| HttpError::bad_request("Idempotency-Key must be visible ASCII"))?;
    let max = floe_metadata::limits::IDEMPOTENCY_KEY_BYTES_MAX;
    if key.is_empty() || key.len() > max || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HttpError::bad_request(format!("Idempotency-Key must be 1 to {max} visible ASCII characters")));
    }
    Ok(Some(key.to_owned()))
}

/// Parses a whole body of records and writes them as one group.
async fn write_whole(
    agent: &Arc<Agent>,
    target: &Target,
    bytes: &Bytes,
    key: Option<&str>,
) -> Result<Vec<Delivery>, HttpError> {
    let now_ms = floe_metadata::now_ms();
    let mut records = Vec::new();
    let mut parser = serde_json::Deserializer::from_slice(bytes).into_iter::<RecordRequest>();
    for parsed in &mut parser {
        if records.len() == REQUEST_RECORDS_MAX {
            return Err(HttpError::too_large(format!("more than {REQUEST_RECORDS_MAX} records in one request")));
        }
        records.push(parsed_record(parsed, now_ms)?);
    }
    if records.is_empty() {
        return Err(HttpError::bad_request("the request holds no records"));
    }
    write_parsed(agent, target, records, bytes, key).await
}

/// Writes parsed records as one group; under an idempotency key, `request` is what a retry
/// must repeat exactly.
async fn write_parsed(
    agent: &Arc<Agent>,
    target: &Target,
    records: Vec<Result<ParsedRecord, RecordError>>,
    request: &[u8],
    key: Option<&str>,
) -> Result<Vec<Delivery>, HttpError> {
    let (producer, keyless) = match key {
        Some(key) => {
            let stored = target.scope.stored(key);
            let producer =
                key_producer(agent, &stored, target.scope.namespace_key(), &target.topic.name, request).await?;
            (Some(producer), partitioner::partition_for_key(key.as_bytes(), target.topic.partition_count))
        }
        None => (None, next_keyless(&target.topic)),
    };
    let group = produce::append(agent, &target.topic, records, keyless, producer, target.scope.access()).await;
    Ok(group.delivered().await)
}

/// A record as parsed: refused alone when its fields are wrong, but a body that is not JSON
/// at all cannot be read on, so it fails the request.
fn parsed_record(
    parsed: Result<RecordRequest, serde_json::Error>,
    now_ms: i64,
) -> Result<Result<ParsedRecord, RecordError>, HttpError> {
    match parsed {
        Ok(request) => Ok(request.into_record(now_ms)),
        Err(e) if e.is_data() => Ok(Err(RecordError::invalid(format!("invalid record: {e}")))),
        Err(e) => Err(HttpError::bad_request(format!("request body is not JSON records: {e}"))),
    }
}

fn next_keyless(topic: &TopicTarget) -> i32 {
    let partitions = topic.partition_count.max(1) as u32;
    (KEYLESS_ROTATION.fetch_add(1, Ordering::Relaxed) % partitions) as i32
}

/// The producer an idempotency key writes as (the same on every retry of the same request),
/// bound to the caller's namespace key `tenant`.
async fn key_producer(
    agent: &Agent,
    key: &str,
    tenant: Option<&str>,
    topic: &str,
    body: &[u8],
) -> Result<ProducerIdEpoch, HttpError> {
    let digest =
        (crc32c::crc32c_append(crc32c::crc32c(topic.as_bytes()), body) as u64) << 32 | body.len() as u32 as u64;
    let command = Command::InitIdempotencyKey {
        key: key.to_owned(),
        request_digest: digest,
        now_ms: floe_metadata::now_ms(),
        tenant: tenant.map(str::to_owned),
    };
    match agent.metadata.propose(command).await {
        Ok(Outcome::IdempotencyKey { producer, .. }) => Ok(producer),
        Ok(other) => Err(HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("unexpected outcome {other:?}"))),
        Err(floe_metadata::NodeError::Rejected(CommandError::IdempotencyKeyReused(_))) => {
            Err(HttpError::unprocessable("Idempotency-Key was already used for a different request (topic or body)"))
        }
        Err(floe_metadata::NodeError::Rejected(CommandError::LimitReached(why))) => {
            Err(HttpError::new(StatusCode::TOO_MANY_REQUESTS, why))
        }
        Err(floe_metadata::NodeError::Rejected(e)) => Err(HttpError::bad_request(e.to_string())),
        Err(e) => Err(HttpError::unavailable(format!("metadata unavailable: {e}"))),
    }
}

/// A record's delivery report: its status and body.
fn report(target: &Target, delivery: &Delivery) -> (StatusCode, Value) {
    match delivery {
        Ok(d) => (
            StatusCode::OK,
            serde_json::json!({
                "error_code": 200,
                "cluster_id": target.cluster_id,
                "topic_name": target.shown,
                "partition_id": d.partition,
                "offset": d.offset,
                "timestamp": rfc3339(d.timestamp),
                "key": d.key,
                "value": d.value,
            }),
        ),
        Err(e) => (e.status, error_body(e.status, &e.message)),
    }
}

fn append_line(out: &mut BytesMut, value: &Value) {
    if serde_json::to_writer(bytes::BufMut::writer(&mut *out), value).is_ok() {
        out.extend_from_slice(b"\n");
    }
}

fn json_lines(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// What the body reader hands the reporter, in order.
enum StreamEvent {
    Group(PendingGroup),
    /// The stream cannot be read on; reported after every earlier record.
    Failed(HttpError),
}

/// A streamed request: records are appended group by group as they arrive and reported in
/// order as their flushes commit. The response starts with the first report; if the whole
/// request was one record, it is answered with that record's status instead.
async fn stream(agent: Arc<Agent>, target: Target, body: Body) -> Result<Response, HttpError> {
    let (events_tx, mut events_rx) = mpsc::channel::<(StreamEvent, bool)>(STREAM_GROUPS_IN_FLIGHT_MAX);
    let topic = target.topic.clone();
    tokio::spawn(read_stream(agent, topic, target.scope.clone(), body, events_tx));
    let (lines_tx, lines_rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(STREAM_GROUPS_IN_FLIGHT_MAX);
    let Some((first, ended)) = events_rx.recv().await else {
        return Err(HttpError::bad_request("the request holds no records"));
    };
    let first = match first {
        StreamEvent::Failed(e) => return Err(e),
        StreamEvent::Group(group) => group.delivered().await,
    };
    if ended && first.len() == 1 {
        let (status, report) = report(&target, &first[0]);
        return Ok((status, Json(report)).into_response());
    }
    tokio::spawn(async move {
        let mut deliveries = first;
        loop {
            let mut out = BytesMut::new();
            for delivery in &deliveries {
                append_line(&mut out, &report(&target, delivery).1);
            }
            if lines_tx.send(Ok(out.freeze())).await.is_err() {
                return; // the client went away
            }
            deliveries = match events_rx.recv().await {
                None => return,
                Some((StreamEvent::Group(group), _)) => group.delivered().await,
                Some((StreamEvent::Failed(e), _)) => {
                    let mut out = BytesMut::new();
                    append_line(&mut out, &error_body(e.status, &e.message));
                    let _ = lines_tx.send(Ok(out.freeze())).await;
                    return;
                }
            };
        }
    });
    let lines = futures::stream::unfold(lines_rx, |mut rx| async move { rx.recv().await.map(|line| (line, rx)) });
    Ok(json_lines(Body::from_stream(lines)))
}

/// Reads a streamed body, appending the records that arrived together as one group. Each event
/// says whether the body had ended when it was sent.
async fn read_stream(
    agent: Arc<Agent>,
    topic: TopicTarget,
    scope: Scope,
    body: Body,
    events: mpsc::Sender<(StreamEvent, bool)>,
) {
    let mut chunks = body.into_data_stream();
    let mut pending = BytesMut::new();
    let mut total = 0usize;
    let mut ended = false;
    // Set when a group filled up with records still buffered: parse those before reading on.
    let mut more_buffered = false;
    loop {
        if !more_buffered && !ended {
            match body::next_chunk(&mut chunks, BODY_IDLE).await {
                Ok(Some(chunk)) => {
                    pending.extend_from_slice(&chunk);
                    // Over the tenant's share: read on only once it is paid back.
                    let wait = quotas::charge(&agent, &scope, QuotaKind::Produce, chunk.len());
                    tokio::time::sleep(wait).await;
                }
                Ok(None) => ended = true,
                Err(e) => {
                    let _ = events.send((StreamEvent::Failed(e), true)).await;
                    return;
                }
            }
        }
        let now_ms = floe_metadata::now_ms();
        let mut records = Vec::new();
        let mut consumed = 0;
        let mut failure = None;
        {
            let mut parser = serde_json::Deserializer::from_slice(&pending).into_iter::<RecordRequest>();
            loop {
                let next = parser.next();
                match next {
                    None => {
                        consumed = parser.byte_offset();
                        break;
                    }
                    Some(Err(e)) if e.is_eof() && !ended => break,
                    Some(parsed) => match parsed_record(parsed, now_ms) {
                        Ok(record) => {
                            consumed = parser.byte_offset();
                            records.push(record);
                            total += 1;
                            if total > STREAM_RECORDS_MAX {
                                failure = Some(HttpError::too_large(format!(
                                    "more than {STREAM_RECORDS_MAX} records in one stream"
                                )));
                                break;
                            }
                            if records.len() == STREAM_GROUP_RECORDS_MAX {
                                break;
                            }
                        }
                        Err(e) => {
                            failure = Some(e);
                            break;
                        }
                    },
                }
            }
        }
        let _ = pending.split_to(consumed);
        if failure.is_none() && pending.len() > RECORD_JSON_BYTES_MAX {
            failure = Some(HttpError::too_large(format!("a record's JSON exceeds {RECORD_JSON_BYTES_MAX} bytes")));
        }
        more_buffered = records.len() == STREAM_GROUP_RECORDS_MAX;
        if !records.is_empty() {
            let group = produce::append(&agent, &topic, records, next_keyless(&topic), None, scope.access()).await;
            let body_done = ended && failure.is_none() && pending.iter().all(u8::is_ascii_whitespace) && !more_buffered;
            if events.send((StreamEvent::Group(group), body_done)).await.is_err() {
                return;
            }
        }
        if let Some(e) = failure {
            let _ = events.send((StreamEvent::Failed(e), true)).await;
            return;
        }
        if ended && !more_buffered {
            return;
        }
    }
}
