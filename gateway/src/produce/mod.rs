//! Writing records that arrive over HTTP. Records are placed as a Kafka producer would place
//! them (explicit partition, else murmur2 of the key, else one partition per group of keyless
//! records), built into v2 batches, validated like any produced batch, and appended to the
//! agent's flush buffer: one group of records is one append, so it lands in one flush.

pub(crate) mod binary;
pub(crate) mod json;
pub(crate) mod partitioner;
pub(crate) mod schema_data;

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::BytesMut;
use floe_agent::Agent;
use floe_agent::produce::schemas::{SchemaCheck, SchemaValidation};
use floe_agent::produce::{AppendError, AppendResult, PartitionAppend, Ticket, TopicPolicy, validate};
use floe_agent::record_batch::build::{BatchProducer, NewRecord, build_batch};
use floe_agent::record_batch::{HEADER_BYTES, records::codec_for};
use floe_metadata::{ChunkProducer, CommandError, ProducerIdEpoch, TopicId};
use floe_storage::TopicPartition;

use self::json::{DataReport, ParsedRecord};
use crate::error::HttpError;

/// Why one record was not written; reported in its delivery report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecordError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl RecordError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self { status: StatusCode::UNPROCESSABLE_ENTITY, message: message.into() }
    }

    fn from_append(error: &AppendError) -> Self {
        let status = match error {
            AppendError::Storage(_)
            | AppendError::MetadataUnavailable(_)
            | AppendError::EarlierSequenceFailed
            | AppendError::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
            AppendError::Rejected(CommandError::UnknownTopicOrPartition) => StatusCode::NOT_FOUND,
            AppendError::Rejected(CommandError::LimitReached(_)) => StatusCode::TOO_MANY_REQUESTS,
            // An earlier copy may have landed: retriable, outcome unknown, as when metadata is
            // unavailable.
            AppendError::Rejected(CommandError::SegmentCommitRefused { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            AppendError::Rejected(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self { status, message: error.to_string() }
    }
}

/// The topic a request writes to, resolved once per request.
#[derive(Clone, Debug)]
pub(crate) struct TopicTarget {
    pub(crate) name: String,
    pub(crate) topic_id: TopicId,
    pub(crate) partition_count: i32,
    policy: TopicPolicy,
    /// Set when the topic validates records' schemas.
    schemas: Option<SchemaValidation>,
    /// The topic's `compression.type` codec, or none when it says `producer`.
    codec: i16,
}

impl TopicTarget {
    pub(crate) fn resolve(agent: &Agent, name: &str) -> Result<Self, HttpError> {
        let state = agent.metadata.read();
        let topic =
            state.topic_by_name(name).ok_or_else(|| HttpError::not_found(format!("topic {name:?} not found")))?;
        let codec = state.topic_config_value(topic, "compression.type").and_then(codec_for).unwrap_or(0);
        Ok(Self {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            partition_count: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
            policy: TopicPolicy::for_topic(&state, topic),
            schemas: SchemaValidation::for_topic(&state, topic),
            codec,
        })
    }
}

/// A record written: where, and its delivery report's details.
#[derive(Clone, Debug)]
pub(crate) struct Delivered {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) timestamp: i64,
    pub(crate) key: Option<DataReport>,
    pub(crate) value: Option<DataReport>,
}

pub(crate) type Delivery = Result<Delivered, RecordError>;

/// Where each record of a group stands.
enum Slot {
    Failed(RecordError),
    /// `append` indexes the group's partition appends; `position` is the record's place among
    /// its partition's records, so its offset is that append's base offset plus `position`.
    Appended {
        append: usize,
        position: usize,
        written: Delivered,
    },
}

/// A group of records appended to the flush buffer; resolves to one delivery per record, in
/// the order they were given.
pub(crate) struct PendingGroup {
    ticket: Option<Result<Ticket, AppendError>>,
    slots: Vec<Slot>,
    topic: String,
    /// Batch bytes and records of each append, for the BrokerTopicMetrics counters.
    sizes: Vec<(u64, u64)>,
}

impl PendingGroup {
    pub(crate) async fn delivered(self) -> Vec<Delivery> {
        let results: Result<Vec<AppendResult>, RecordError> = match self.ticket {
            None => Ok(Vec::new()),
            Some(Ok(ticket)) => Ok(ticket.committed().await),
            Some(Err(e)) => Err(RecordError::from_append(&e)),
        };
        if let Ok(results) = &results {
            let topic = floe_agent::metrics::TOPIC_LABELS.label(&self.topic);
            for ((bytes, records), _) in self.sizes.iter().zip(results).filter(|(_, r)| r.is_ok()) {
                floe_agent::metrics::BYTES_IN.with_label_values(&[topic]).inc_by(*bytes);
                floe_agent::metrics::MESSAGES_IN.with_label_values(&[topic]).inc_by(*records);
            }
        }
        self.slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Failed(e) => Err(e),
                Slot::Appended { append, position, written } => match results.as_ref().map(|r| r.get(append)) {
                    Ok(Some(Ok(base))) => Ok(Delivered { offset: base + position as i64, ..written }),
                    Ok(Some(Err(e))) => Err(RecordError::from_append(e)),
                    Ok(None) => Err(RecordError::from_append(&AppendError::ShuttingDown)),
                    Err(e) => Err(e.clone()),
                },
            })
            .collect()
    }
}

/// Appends `records` (each parsed, or already refused) as one group. Keyless records without a
/// partition go to `keyless_partition`. With `producer`, every partition's batches are that
/// idempotent producer's, with sequences from 0: a retried group is then answered with the
/// original offsets (idempotency keys). `access`: the caller's ACLs, for keys and values
/// written with a registry schema.
pub(crate) async fn append(
    agent: &Arc<Agent>,
    target: &TopicTarget,
    mut records: Vec<Result<ParsedRecord, RecordError>>,
    keyless_partition: i32,
    producer: Option<ProducerIdEpoch>,
    access: Option<&floe_agent::access::Access>,
) -> PendingGroup {
    schema_data::write_schema_data(agent, &target.name, access, &mut records).await;
    let now_ms = floe_metadata::now_ms();
    let schema_refusals = schema_refusals(agent, target, &records).await;
    let mut by_partition: BTreeMap<i32, Vec<NewRecord>> = BTreeMap::new();
    let mut slots = Vec::with_capacity(records.len());
    // Slots refer to their partition's append by partition number until the appends are built.
    for (parsed, schema_refusal) in records.into_iter().zip(schema_refusals) {
        let parsed = match schema_refusal {
            Some(why) => Err(RecordError::invalid(why)),
            None => parsed,
        };
        let slot =
            parsed.and_then(|p| place(target, p, keyless_partition, now_ms)).map(|(partition, record, key, value)| {
                let timestamp = if target.policy.log_append_time { now_ms } else { record.timestamp };
                let records = by_partition.entry(partition).or_default();
                records.push(record);
                let written = Delivered { partition, offset: -1, timestamp, key, value };
                Slot::Appended { append: usize::MAX, position: records.len() - 1, written }
            });
        slots.push(slot.unwrap_or_else(Slot::Failed));
    }
    let mut appends = Vec::with_capacity(by_partition.len());
    let mut append_of: BTreeMap<i32, Result<usize, RecordError>> = BTreeMap::new();
    for (partition, records) in by_partition {
        let built = partition_append(target, partition, &records, producer, now_ms).map(|a| {
            appends.push(a);
            appends.len() - 1
        });
        append_of.insert(partition, built);
    }
    for slot in &mut slots {
        if let Slot::Appended { append, written, .. } = slot {
            match append_of.get(&written.partition) {
                Some(Ok(i)) => *append = *i,
                Some(Err(e)) => *slot = Slot::Failed(e.clone()),
                None => *slot = Slot::Failed(RecordError::from_append(&AppendError::ShuttingDown)),
            }
        }
    }
    let sizes = appends
        .iter()
        .map(|a| {
            let bytes = a.batches.iter().map(|b| b.bytes.len() as u64).sum();
            (bytes, a.batches.iter().map(|b| u64::from(b.record_count)).sum())
        })
        .collect();
    let ticket = if appends.is_empty() { None } else { Some(agent.buffer.append(appends).await) };
    PendingGroup { ticket, slots, topic: target.name.clone(), sizes }
}

/// Why each record is refused by the topic's schema validation, if it is (none without it). A
/// record naming a schema this agent's mirror does not hold is checked again after catching
/// the mirror up, since it may have been registered through another agent a moment ago.
async fn schema_refusals(
    agent: &Agent,
    target: &TopicTarget,
    records: &[Result<ParsedRecord, RecordError>],
) -> Vec<Option<String>> {
    let Some(validation) = target.schemas else { return vec![None; records.len()] };
    let check = || {
        let state = agent.metadata.read();
        let check = SchemaCheck::new(&state, &target.name, validation, &agent.parsed_schemas);
        let refusals: Vec<Option<String>> = records
            .iter()
            .map(|r| {
                let record = &r.as_ref().ok()?.record;
                let header = |name: &[u8]| floe_agent::produce::schemas::header_among(&record.headers, name);
                check.refusal_of(record.key.as_deref(), record.value.as_deref(), header)
            })
            .collect();
        (refusals, check.saw_missing())
    };
    let (refusals, missing) = check();
    let may = missing && agent.parsed_schemas.may_catch_up(floe_metadata::now_ms());
    if may && agent.metadata.catch_up().await.is_ok() { check().0 } else { refusals }
}

type Placed = (i32, NewRecord, Option<DataReport>, Option<DataReport>);

/// The partition a record goes to, after the checks that concern it alone.
/// `now_ms` is the append time the timestamp bounds are measured from.
fn place(
    target: &TopicTarget,
    parsed: ParsedRecord,
    keyless_partition: i32,
    now_ms: i64,
) -> Result<Placed, RecordError> {
    let record = parsed.record;
    let partition = match (parsed.partition_id, &record.key) {
        (Some(p), _) if p < 0 || p >= target.partition_count => {
            return Err(RecordError {
                status: StatusCode::NOT_FOUND,
                message: format!("partition {p} of topic {:?} not found", target.name),
            });
        }
        (Some(p), _) => p,
        (None, Some(key)) => partitioner::partition_for_key(key, target.partition_count),
        (None, None) => keyless_partition,
    };
    if target.policy.compacted && record.key.is_none() {
        return Err(RecordError::invalid(format!("topic {:?} is compacted: every record needs a key", target.name)));
    }
    if !target.policy.log_append_time {
        let (before, after) = (target.policy.timestamp_before_max_ms, target.policy.timestamp_after_max_ms);
        if record.timestamp < now_ms.saturating_sub(before) || record.timestamp > now_ms.saturating_add(after) {
            return Err(RecordError::invalid(format!(
                "timestamp {} is outside the topic's bounds: at most {before} ms before and {after} ms after the append time {now_ms} (message.timestamp.before.max.ms, message.timestamp.after.max.ms)",
                record.timestamp
            )));
        }
    }
    let bytes = record.approximate_bytes() + HEADER_BYTES;
    if bytes > target.policy.max_message_bytes {
        return Err(RecordError {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            message: format!(
                "record of about {bytes} bytes exceeds max.message.bytes {}",
                target.policy.max_message_bytes
            ),
        });
    }
    Ok((partition, record, parsed.key_report, parsed.value_report))
}

/// One partition's records as batches of at most `max.message.bytes`, validated like a Kafka
/// producer's.
fn partition_append(
    target: &TopicTarget,
    partition: i32,
    records: &[NewRecord],
    producer: Option<ProducerIdEpoch>,
    now_ms: i64,
) -> Result<PartitionAppend, RecordError> {
    let mut bytes = BytesMut::new();
    let mut sequence = 0i32;
    let mut start = 0;
    while start < records.len() {
        let mut end = start;
        let mut size = HEADER_BYTES;
        while end < records.len()
            && (end == start || size + records[end].approximate_bytes() <= target.policy.max_message_bytes)
        {
            size += records[end].approximate_bytes();
            end += 1;
        }
        let batch_producer = producer.map(|p| BatchProducer {
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            base_sequence: sequence,
        });
        let batch = build_batch(&records[start..end], batch_producer, target.codec)
            .map_err(|e| RecordError::invalid(e.to_string()))?;
        bytes.extend_from_slice(&batch);
        sequence = sequence.wrapping_add((end - start) as i32);
        start = end;
    }
    // Schemas were checked record by record before (see `append`).
    let validated = validate::partition_records(Some(&bytes.freeze()), &target.policy, now_ms, None, None)
        .map_err(|e| RecordError::invalid(e.to_string()))?;
    debug_assert_eq!(
        validated.producer.map(|p| p.producer_id),
        producer.map(|p| p.producer_id),
        "batches carry the group's producer"
    );
    Ok(PartitionAppend {
        topic_partition: TopicPartition { topic_id: target.topic_id, partition },
        batches: validated.batches,
        producer: producer.map(|p| ChunkProducer {
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            transactional: false,
        }),
    })
}

/// See [`crate::parse_records_for_fuzzing`].
pub(crate) fn parse_for_fuzzing(body: &[u8]) -> usize {
    let mut records = Vec::new();
    for parsed in serde_json::Deserializer::from_slice(body).into_iter::<json::RecordRequest>() {
        let Ok(request) = parsed else { break };
        if let Ok(record) = request.into_record(0) {
            records.push(record.record);
        }
    }
    if let Ok(batch) = build_batch(&records, None, 0) {
        let policy = TopicPolicy {
            max_message_bytes: usize::MAX,
            log_append_time: false,
            compacted: true,
            timestamp_before_max_ms: 0,
            timestamp_after_max_ms: 0,
        };
        let _ = validate::partition_records(Some(&batch), &policy, 0, None, None);
    }
    records.len()
}
