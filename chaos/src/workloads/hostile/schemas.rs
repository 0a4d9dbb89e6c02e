//! Shared-type schemas against the schema registry (`--attacks schemas`). Through each agent,
//! one loop per language registers versions of a schema of shared types (Avro 20 deep,
//! Protobuf 30, JSON Schema 24) under a subject of its own, and after each asks the
//! compatibility endpoint about an incompatible one, one request after another. Another loop
//! writes the value `1` with the JSON Schema to a topic that validates every record against
//! its schema, over Kafka and over HTTP. Every answer is counted by its status: a success or a
//! refusal is what an agent should give; no answer, or a server error, is what the work budgets
//! exist to prevent.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;
use tokio::task::JoinSet;

use super::shared_types::{Language, framed};
use super::{Counters, Stop, Target, bump, hostile_client, stopped};
use crate::workloads::HTTP_REQUEST_TIMEOUT;
use crate::workloads::registry::REGISTRY_PREFIX;

/// How deep each language's schema is. Avro 20: before issue 52's fix a compatibility check
/// took 17 s at depth 19 on an async worker, each level doubling it. Protobuf 30: 2^30 paths
/// in 1.2 KB of text. JSON Schema 24: 2^24 applications of its bottom type to the value `1`.
fn depth(language: Language) -> usize {
    match language {
        Language::Avro => 20,
        Language::Protobuf => 30,
        Language::Json => 24,
    }
}

/// Versions each loop registers before it only asks about compatibility: the registry and
/// every agent's mirror keep each one, so a long run must not fill the tenant's share.
const REGISTRATIONS_MAX: usize = 50;
/// Incompatible texts each loop cycles through (they grow with the variant).
const INCOMPATIBLE_VARIANTS: usize = 16;
/// Pause between a loop's rounds: a client retrying in a loop, not a flood of connections.
const ROUND_PAUSE: Duration = Duration::from_millis(20);
/// The topic that validates its records against its value subject's schema (`full` mode).
pub(super) const VALIDATED_TOPIC: &str = "hostile.dag_json";
/// Records written to it per round over Kafka (one more goes over HTTP), and how often.
const VALIDATED_RECORDS_PER_ROUND: usize = 8;
const VALIDATED_ROUND: Duration = Duration::from_secs(1);
/// The registry's error code for "retry": no check slot came free within its wait, or the
/// metadata was unavailable. A refusal, not a failure.
const RETRY_CODE: u64 = 50003;

/// An HTTP answer: its status and its body, if it was JSON; status 0 when none came, with why
/// (the request timed out, or its connection failed).
pub(super) struct Answer {
    status: u16,
    body: Value,
    unanswered: &'static str,
    /// From sending the request to its answer, or to giving up on it.
    took: Duration,
}

impl Answer {
    /// The id a registration answered with.
    pub(super) fn id(&self) -> Option<i32> {
        if self.status != 200 {
            return None;
        }
        self.body.get("id")?.as_i64().and_then(|id| i32::try_from(id).ok())
    }
}

/// Sends `request` and reads its answer; `None` if the attack stopped first.
async fn send(request: reqwest::RequestBuilder, stop: &Stop) -> Option<Answer> {
    let sent = Instant::now();
    let answer = async {
        let response = match request.timeout(HTTP_REQUEST_TIMEOUT).send().await {
            Ok(response) => response,
            Err(e) => {
                let unanswered = if e.is_timeout() { "timed out" } else { "connection failed" };
                return Answer { status: 0, body: Value::Null, unanswered, took: sent.elapsed() };
            }
        };
        let status = response.status().as_u16();
        // A body cut short or not JSON still has its status.
        let body = response.bytes().await.ok().and_then(|b| serde_json::from_slice(&b).ok());
        Answer { status, body: body.unwrap_or(Value::Null), unanswered: "", took: sent.elapsed() }
    };
    tokio::select! {
        answer = answer => Some(answer),
        () = stopped(stop) => None,
    }
}

/// Counts `answer` to `what` by its status, with the registry's error code (where it is not
/// the status) or a compatibility check's verdict beside it; one that is neither a success nor
/// a refusal also counts as failed.
pub(super) fn count(counters: &Counters, what: &str, answer: &Answer) {
    let code = answer.body.get("error_code").and_then(Value::as_u64);
    let detail = match (code, answer.body.get("is_compatible").and_then(Value::as_bool)) {
        (Some(code), _) if code != u64::from(answer.status) => format!(" {code}"),
        (_, Some(true)) => " compatible".to_owned(),
        (_, Some(false)) => " incompatible".to_owned(),
        _ => String::new(),
    };
    let key = match answer.status {
        0 => format!("{what}: no answer ({})", answer.unanswered),
        status => format!("{what}: {status}{detail}"),
    };
    bump(&counters.schema_answers, key);
    let took = u64::try_from(answer.took.as_millis()).unwrap_or(u64::MAX);
    let mut slowest = counters.schema_slowest_ms.lock().unwrap_or_else(|p| p.into_inner());
    let longest = slowest.entry(what.to_owned()).or_default();
    *longest = (*longest).max(took);
    drop(slowest);
    if answer.status == 0 || (answer.status >= 500 && code != Some(RETRY_CODE)) {
        counters.schema_failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// `POST`s schema `text` of `language` to the registry at `url`.
pub(super) async fn post_schema(
    http: &reqwest::Client,
    url: String,
    language: Language,
    text: String,
    stop: &Stop,
) -> Option<Answer> {
    let mut body = serde_json::json!({ "schema": text });
    if let Some(schema_type) = language.schema_type() {
        body["schemaType"] = schema_type.into();
    }
    let request =
        http.post(url).header("Content-Type", "application/vnd.schemaregistry.v1+json").body(body.to_string());
    send(request, stop).await
}

/// Where a schema is registered under `subject` through the agent at `base`.
pub(super) fn register_url(base: &str, subject: &str) -> String {
    format!("{base}{REGISTRY_PREFIX}/subjects/{subject}/versions")
}

/// Queues `payload` for partition 0 of `topic`, and counts its outcome under `what` once it
/// comes: acknowledged, or the error librdkafka reports (INVALID_RECORD is the refusal a
/// validation past its budget gives).
pub(super) fn produce(
    producer: &FutureProducer,
    topic: &str,
    payload: &[u8],
    what: &str,
    deliveries: &mut JoinSet<()>,
    counters: &Arc<Counters>,
) {
    let record = FutureRecord::<(), [u8]>::to(topic).payload(payload).partition(0);
    let Ok(delivery) = producer.send_result(record) else {
        // The local queue is full: the tenant's quota is holding its producers back.
        bump(&counters.schema_records, format!("{what}: not queued"));
        return;
    };
    let (what, counters) = (what.to_owned(), counters.clone());
    deliveries.spawn(async move {
        let outcome = match delivery.await {
            Ok(Ok(_)) => "acknowledged".to_owned(),
            Ok(Err((e, _))) => e.rdkafka_error_code().map_or_else(|| "failed".to_owned(), |code| format!("{code:?}")),
            Err(_) => "canceled".to_owned(),
        };
        bump(&counters.schema_records, format!("{what}: {outcome}"));
    });
}

/// A producer of the hostile tenant for a few records at a time.
pub(super) fn producer(target: &Target) -> Option<FutureProducer> {
    match hostile_client(target).set("acks", "all").set("message.timeout.ms", "30000").create() {
        Ok(producer) => Some(producer),
        Err(e) => {
            eprintln!("floe-chaos: a hostile tenant's producer: {e}");
            None
        }
    }
}

/// One loop of the registry attack, through the agent at `base` (the `agent`th): registers
/// versions of a `language` schema of shared types, up to [`REGISTRATIONS_MAX`], and after each
/// asks whether an incompatible one could follow the latest.
pub(super) async fn registry(
    http: reqwest::Client,
    base: String,
    agent: usize,
    language: Language,
    stop: Stop,
    counters: Arc<Counters>,
) {
    let name = language.name();
    let subject = format!("hostile-{name}-dag-{agent}");
    let (register, check) = (format!("{name} register"), format!("{name} compatibility"));
    let check_url = format!("{base}{REGISTRY_PREFIX}/compatibility/subjects/{subject}/versions/latest");
    let depth = depth(language);
    let mut round = 0;
    while !stop.is_set() {
        if round < REGISTRATIONS_MAX {
            let text = language.version(depth, round);
            let Some(answer) = post_schema(&http, register_url(&base, &subject), language, text, &stop).await else {
                return;
            };
            count(&counters, &register, &answer);
        }
        let text = language.incompatible(depth, round % INCOMPATIBLE_VARIANTS);
        let Some(answer) = post_schema(&http, check_url.clone(), language, text, &stop).await else { return };
        count(&counters, &check, &answer);
        round += 1;
        tokio::time::sleep(ROUND_PAUSE).await;
    }
}

/// Writes the value `1` with the JSON Schema of shared types to [`VALIDATED_TOPIC`], each value
/// 2^24 applications of its bottom type unless the validation's budget refuses it: records
/// over Kafka, and one a round over HTTP (REST v3's `schema_id`) through each agent in turn.
pub(super) async fn validated_records(target: Target, http: reqwest::Client, stop: Stop, counters: Arc<Counters>) {
    let Some(producer) = producer(&target) else { return };
    let subject = format!("{VALIDATED_TOPIC}-value");
    let depth = depth(Language::Json);
    let mut id = None;
    let mut deliveries = JoinSet::new();
    for round in 0.. {
        let Some(base) = target.http.get(round % target.http.len().max(1)) else { break };
        if id.is_none() {
            // Tried again each round until it is registered.
            let text = Language::Json.version(depth, 0);
            let Some(answer) = post_schema(&http, register_url(base, &subject), Language::Json, text, &stop).await
            else {
                break;
            };
            count(&counters, "json register (validated topic)", &answer);
            id = answer.id();
        }
        if let Some(id) = id {
            let payload = framed(Language::Json, id, &Language::Json.value(depth, 0, 0));
            for _ in 0..VALIDATED_RECORDS_PER_ROUND {
                produce(&producer, VALIDATED_TOPIC, &payload, "json record (Kafka)", &mut deliveries, &counters);
            }
            let url = format!("{base}/v3/clusters/{}/topics/{VALIDATED_TOPIC}/records", target.cluster_id);
            let record = serde_json::json!({
                "partition_id": 0,
                "value": {"type": "JSONSCHEMA", "schema_id": id, "data": 1},
            });
            let request = http.post(url).header("Content-Type", "application/json").body(record.to_string());
            let Some(answer) = send(request, &stop).await else { break };
            count(&counters, "json record (HTTP)", &answer);
        }
        while deliveries.try_join_next().is_some() {}
        tokio::select! {
            () = tokio::time::sleep(VALIDATED_ROUND) => {}
            () = stopped(&stop) => break,
        }
    }
    // Records still unanswered at the end go uncounted, as the flood's do.
    deliveries.abort_all();
}
