//! Produce: validate each partition's batches, append them to the flush buffer together, answer
//! once the flush is committed (acks 1 and all alike), or not at all for acks=0.

use std::sync::Arc;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use super::super::dispatch::{Context, KafkaApi, Reply, WaitingAnswer};
use super::super::error_code::{self, code};
use super::super::resources::{AnswerWalk, Op, Refused, RefusedTopic, Res, Resources, TopicRef, Walk};
use crate::Agent;
use crate::produce::schemas::SchemaCheck;
use crate::produce::{PartitionAppend, PartitionBatches, ProduceError, RecordError, validate};
use floe_storage::TopicPartition;

/// Per topic in request order: its name as sent, its id, and each partition's slot.
type Layout = Vec<(kafka_protocol::messages::TopicName, uuid::Uuid, Vec<(i32, Slot)>)>;

/// Where each partition's answer comes from.
enum Slot {
    Failed(i16, String),
    /// Refused for some of its records, which the answer names (KIP-467, Produce v8+).
    RecordsRefused(i16, String, Vec<RecordError>),
    /// Index into the appended partitions, and the LogAppendTime stamp if the topic uses it.
    Appended(usize, Option<i64>),
}

/// A request's partitions validated: what to append, and where each partition's answer comes from.
struct Plan {
    appends: Vec<PartitionAppend>,
    /// Bytes and records of each append, for the BrokerTopicMetrics counters.
    sizes: Vec<(u64, u64)>,
    layout: Layout,
    /// Some records were refused for naming a schema this agent's mirror does not hold.
    schema_missing: bool,
}

impl Plan {
    /// Takes the partitions in `refused` out of the appends and answers them with their error.
    fn refuse(&mut self, refused: &[super::transactions::NotAdded]) {
        if refused.is_empty() {
            return;
        }
        let why = |a: &PartitionAppend| refused.iter().find(|(p, _, _)| *p == a.topic_partition);
        let mut kept = Vec::with_capacity(self.appends.len());
        let mut new_index = Vec::with_capacity(self.appends.len());
        for (append, size) in std::mem::take(&mut self.appends).into_iter().zip(std::mem::take(&mut self.sizes)) {
            match why(&append) {
                Some((_, code, message)) => new_index.push(Err((*code, message.clone()))),
                None => {
                    new_index.push(Ok(kept.len()));
                    kept.push((append, size));
                }
            }
        }
        (self.appends, self.sizes) = kept.into_iter().unzip();
        for (_, slot) in self.layout.iter_mut().flat_map(|(_, _, slots)| slots.iter_mut()) {
            if let Slot::Appended(index, stamp) = slot {
                *slot = match new_index.get(*index) {
                    Some(Ok(kept)) => Slot::Appended(*kept, *stamp),
                    Some(Err((code, message))) => Slot::Failed(*code, message.clone()),
                    None => Slot::Failed(ResponseError::UnknownServerError.code(), "lost append".into()),
                };
            }
        }
    }
}

pub(in crate::kafka) async fn start(agent: &Arc<Agent>, version: i16, request: ProduceRequest) -> Reply {
    let acks = request.acks;
    let now_ms = floe_metadata::now_ms();
    let mut plan = validate_request(agent, version, &request, now_ms);
    // A schema registered through another agent a moment ago may not be mirrored here yet:
    // catch up with the metadata leader once and validate again before refusing records for it.
    if plan.schema_missing && agent.parsed_schemas.may_catch_up(now_ms) && agent.metadata.catch_up().await.is_ok() {
        plan = validate_request(agent, version, &request, now_ms);
    }
    if version >= super::transactions::IMPLICIT_PARTITIONS_PRODUCE_VERSION
        && let Some(id) = request.transactional_id.as_ref().map(|t| t.as_str()).filter(|t| !t.is_empty())
    {
        let not_added = super::transactions::add_produced_partitions(agent, id, &plan.appends).await;
        plan.refuse(&not_added);
    }
    let Plan { appends, sizes, mut layout, .. } = plan;

    let results = if appends.is_empty() {
        Vec::new()
    } else {
        match agent.buffer.append(appends).await {
            Ok(ticket) if acks == 0 => {
                drop(ticket);
                return Reply::None;
            }
            Ok(ticket) => {
                let agent = agent.clone();
                return Reply::Waiting(WaitingAnswer(Box::pin(async move {
                    let results = ticket.committed().await;
                    ResponseKind::Produce(respond(&agent, version, layout, &results, &sizes))
                })));
            }
            Err(e) => {
                let error = error_code::for_append(&e).code();
                layout.iter_mut().flat_map(|(_, _, slots)| slots.iter_mut()).for_each(|(_, slot)| {
                    if matches!(slot, Slot::Appended(..)) {
                        *slot = Slot::Failed(error, e.to_string());
                    }
                });
                Vec::new()
            }
        }
    };
    if acks == 0 {
        return Reply::None;
    }
    Reply::Now(Box::new(ResponseKind::Produce(respond(agent, version, layout, &results, &sizes))))
}

/// Validates every partition of `request` against this agent's mirror of the metadata state.
fn validate_request(agent: &Agent, version: i16, request: &ProduceRequest, now_ms: i64) -> Plan {
    let acks = request.acks;
    let mut appends = Vec::new();
    let mut sizes: Vec<(u64, u64)> = Vec::new();
    let mut layout: Layout = Vec::new();
    let mut schema_missing = false;
    {
        let state = agent.metadata.read();
        for topic in &request.topic_data {
            let resolved = if version >= 13 {
                state.topics.get(&topic.topic_id)
            } else {
                state.topic_by_name(topic.name.as_str())
            };
            // A topic over its tenant's storage quota, or a mirror topic, takes no writes.
            let refused = resolved.and_then(|t| {
                state
                    .storage_quota_exceeded(&t.name)
                    .map(ProduceError::StorageQuotaExceeded)
                    .or_else(|| state.mirror_link(t.topic_id).map(|link| ProduceError::MirrorTopic(link.to_owned())))
            });
            let policies = resolved.map(|t| (t, agent.topic_policies.get(&state, t)));
            let policy = policies.map(|(_, (policy, _))| policy);
            let schemas = policies
                .and_then(|(t, (_, schemas))| schemas.map(|v| (t, v)))
                .map(|(t, v)| SchemaCheck::new(&state, &t.name, v, &agent.parsed_schemas));
            let transactional_id = request.transactional_id.as_ref().map(|t| t.as_str());
            let mut slots = Vec::with_capacity(topic.partition_data.len());
            for partition in &topic.partition_data {
                let slot = match (resolved.zip(policy.as_ref()), &refused) {
                    _ if !matches!(acks, -1..=1) => failed(&ProduceError::InvalidRequiredAcks(acks)),
                    (None, _) if version >= 13 => Slot::Failed(code::UNKNOWN_TOPIC_ID, "unknown topic id".into()),
                    (None, _) => failed(&ProduceError::UnknownTopicOrPartition),
                    (Some((t, _)), _) if partition.index < 0 || partition.index as usize >= t.partitions.len() => {
                        failed(&ProduceError::UnknownTopicOrPartition)
                    }
                    (Some(_), Some(why)) => failed(why),
                    (Some((t, policy)), None) => {
                        let validated = validate::partition_records(
                            partition.records.as_ref(),
                            policy,
                            now_ms,
                            transactional_id,
                            schemas.as_ref(),
                        );
                        match validated {
                            Ok(PartitionBatches { batches, producer }) => {
                                sizes.push((
                                    batches.iter().map(|b| b.bytes.len() as u64).sum::<u64>(),
                                    batches.iter().map(|b| u64::from(b.record_count)).sum::<u64>(),
                                ));
                                let topic_partition =
                                    TopicPartition { topic_id: t.topic_id, partition: partition.index };
                                appends.push(PartitionAppend { topic_partition, batches, producer });
                                Slot::Appended(appends.len() - 1, policy.log_append_time.then_some(now_ms))
                            }
                            Err(e) => failed(&e),
                        }
                    }
                };
                slots.push((partition.index, slot));
            }
            schema_missing |= schemas.as_ref().is_some_and(SchemaCheck::saw_missing);
            let topic_id = resolved.map(|t| t.topic_id).unwrap_or(topic.topic_id);
            layout.push((topic.name.clone(), topic_id, slots));
        }
    }
    Plan { appends, sizes, layout, schema_missing }
}

fn failed(error: &ProduceError) -> Slot {
    let code = error_code::for_produce(error).code();
    match error {
        ProduceError::RecordsRefused { records, .. } => Slot::RecordsRefused(code, error.to_string(), records.clone()),
        _ => Slot::Failed(code, error.to_string()),
    }
}

fn respond(
    agent: &Agent,
    version: i16,
    layout: Layout,
    results: &[crate::produce::AppendResult],
    sizes: &[(u64, u64)],
) -> ProduceResponse {
    let state = agent.metadata.read();
    let responses = layout
        .into_iter()
        .map(|(name, topic_id, slots)| {
            // Bytes and records appended to the topic, counted once per topic.
            let (mut appended, mut bytes_in, mut records_in) = (false, 0u64, 0u64);
            let partition_responses = slots
                .into_iter()
                .map(|(index, slot)| {
                    let response = PartitionProduceResponse::default().with_index(index).with_log_append_time_ms(-1);
                    let (error, message) = match slot {
                        Slot::Failed(error, message) => (error, Some(message)),
                        // Older versions have no field for them: the message says how many.
                        Slot::RecordsRefused(error, message, records) if version >= 8 => {
                            let named = records
                                .into_iter()
                                .map(|r| {
                                    BatchIndexAndErrorMessage::default()
                                        .with_batch_index(r.batch_index)
                                        .with_batch_index_error_message(Some(StrBytes::from_string(r.message)))
                                })
                                .collect();
                            return response
                                .with_error_code(error)
                                .with_base_offset(-1)
                                .with_error_message(Some(StrBytes::from_string(message)))
                                .with_record_errors(named);
                        }
                        Slot::RecordsRefused(error, message, _) => (error, Some(message)),
                        Slot::Appended(i, log_append_time) => match results.get(i) {
                            Some(Ok(base_offset)) => {
                                let (bytes, records) = sizes.get(i).copied().unwrap_or_default();
                                appended = true;
                                bytes_in += bytes;
                                records_in += records;
                                let log_start_offset =
                                    state.partition(topic_id, index).map_or(-1, |p| p.log_start_offset);
                                return response
                                    .with_base_offset(*base_offset)
                                    .with_log_append_time_ms(log_append_time.unwrap_or(-1))
                                    .with_log_start_offset(log_start_offset);
                            }
                            Some(Err(e)) => (error_code::for_append(e).code(), Some(e.to_string())),
                            None => (error_code::for_append(&crate::produce::AppendError::ShuttingDown).code(), None),
                        },
                    };
                    response
                        .with_error_code(error)
                        .with_base_offset(-1)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            if appended {
                let topic = state.topics.get(&topic_id).map_or("", |t| t.name.as_str());
                let topic = crate::metrics::TOPIC_LABELS.label(topic);
                crate::metrics::BYTES_IN.with_label_values(&[topic]).inc_by(bytes_in);
                crate::metrics::MESSAGES_IN.with_label_values(&[topic]).inc_by(records_in);
            }
            TopicProduceResponse::default()
                .with_name(name)
                .with_topic_id(topic_id)
                .with_partition_responses(partition_responses)
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}

impl KafkaApi for ProduceRequest {
    const VERSIONS: (i16, i16) = (3, 13);

    async fn start(self, cx: Context<'_>) -> Reply {
        start(cx.agent, cx.version(), self).await
    }
}

impl Resources for ProduceRequest {
    fn walk(&mut self, _version: i16, walk: &mut Walk<'_>) -> Result<(), ProduceResponse> {
        if let Some(id) = self.transactional_id.as_mut()
            && let Err(refusal) = walk.one(Op::Write, Res::TransactionalId, &mut id.0)
        {
            let topics = self.topic_data.iter().map(|t| RefusedTopic {
                name: t.name.0.clone(),
                id: t.topic_id,
                partitions: t.partition_data.iter().map(|p| p.index).collect(),
                within: None,
            });
            return Err(ProduceResponse::default().with_responses(refusals(topics, refusal.error)));
        }
        walk.topics(
            &mut self.topic_data,
            Op::Write,
            |t| TopicRef::with_id(&mut t.name.0, &mut t.topic_id),
            |t| t.partition_data.iter().map(|p| p.index).collect(),
        );
        Ok(())
    }

    fn walk_answer(response: &mut ProduceResponse, walk: &AnswerWalk<'_>) {
        walk.names(&mut response.responses, |t| &mut t.name.0);
        walk.topic_ids(&mut response.responses, |t| &mut t.topic_id);
    }

    fn answer_refused(response: &mut ProduceResponse, refused: Refused) {
        response.responses.extend(refusals(refused.topics.into_iter(), code::TOPIC_AUTHORIZATION_FAILED));
    }
}

fn refusals(topics: impl Iterator<Item = RefusedTopic>, error: i16) -> Vec<TopicProduceResponse> {
    let partition =
        |p: i32| PartitionProduceResponse::default().with_index(p).with_error_code(error).with_base_offset(-1);
    topics
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(kafka_protocol::messages::TopicName(t.name))
                .with_topic_id(t.id)
                .with_partition_responses(t.partitions.into_iter().map(partition).collect())
        })
        .collect()
}
