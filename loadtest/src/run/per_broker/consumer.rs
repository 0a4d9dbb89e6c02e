//! The consumer: its share of the partitions (every `consumers`-th, from its index), read from
//! the end (or the start, for a catch-up read) with one Fetch per broker at a time in an
//! incremental fetch session: after the first fetch a request names only the partitions whose
//! position moved, and the answer only the partitions with something new.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::{Buf, Bytes};
use floe_kafka_client::{BrokerConnection, SourceConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, MetadataRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;
use uuid::Uuid;

use super::{Leaders, leaders};
use crate::run::consumer::Plan;
use crate::run::producer::{SCHEMA_FRAMING_BYTES, locate};
use crate::run::stats::Stats;
use crate::run::{Isolation, RunArgs};

/// The broker's longest wait for data (the Java consumer's `fetch.max.wait.ms`).
const MAX_WAIT_MS: i32 = 500;
/// Largest answer (`fetch.max.bytes`) and share of one partition (`max.partition.fetch.bytes`).
const FETCH_MAX_BYTES: i32 = 50 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// Longest wait for one answer before the run is told something is wrong.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);
/// Highest Fetch version asked for, as Kafka 4's consumer: from 13 on, topics are named by id.
const FETCH_VERSION_MAX: i16 = 16;
/// The first Fetch version naming topics by id, and the first Metadata version answering them.
const FETCH_TOPIC_IDS_VERSION: i16 = 13;
const METADATA_TOPIC_IDS_VERSION: i16 = 10;
/// Fetch errors that end the session: the next request starts a new one with every partition.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
/// Wait before the next fetch after a partition's error (the Java client's `retry.backoff.ms`):
/// an error is answered at once, so without it a failing partition makes a busy loop that
/// loads the server the benchmark measures.
const ERROR_BACKOFF: Duration = Duration::from_millis(100);
/// A record batch's fixed header, up to and including its record count.
const BATCH_HEADER_BYTES: usize = 61;

/// One partition this consumer reads.
struct Position {
    topic: TopicName,
    /// Nil before Fetch v13.
    topic_id: Uuid,
    partition: i32,
    offset: i64,
    /// Moved since the last request named it: the next request in the session must name it.
    moved: bool,
}

pub(in crate::run) fn run(
    args: Arc<RunArgs>,
    index: usize,
    stats: Arc<Stats>,
    plan: Arc<Plan>,
    topics: Arc<Vec<(String, i32)>>,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(consume(args, index, stats.clone(), plan, topics));
    if let Err(e) = &result {
        stats.error(format!("consumer {index}: {e:#}"));
    }
    result
}

async fn consume(
    args: Arc<RunArgs>,
    index: usize,
    stats: Arc<Stats>,
    plan: Arc<Plan>,
    topics: Arc<Vec<(String, i32)>>,
) -> anyhow::Result<()> {
    let Leaders { addresses, of } = leaders(&args, &topics)?;
    let mut shares: Vec<Vec<(String, i32)>> = vec![Vec::new(); addresses.len()];
    let slots: u64 = topics.iter().map(|(_, p)| *p as u64).sum();
    for slot in (index as u64..slots).step_by(args.consumers.max(1)) {
        let (topic, partition) = locate(&topics, slot);
        let broker = of.get(&(topic.to_owned(), partition)).copied().context("a partition without a leader")?;
        shares[broker].push((topic.to_owned(), partition));
    }
    let mut readers = tokio::task::JoinSet::new();
    for (address, share) in addresses.into_iter().zip(shares).filter(|(_, share)| !share.is_empty()) {
        let (args, stats, plan) = (args.clone(), stats.clone(), plan.clone());
        readers.spawn(async move { read_from(address, share, &args, &stats, &plan).await });
    }
    while let Some(joined) = readers.join_next().await {
        joined.context("a fetch task panicked")??;
    }
    Ok(())
}

/// Reads `share` from the broker at `address` until the run stops.
async fn read_from(
    address: String,
    share: Vec<(String, i32)>,
    args: &RunArgs,
    stats: &Stats,
    plan: &Plan,
) -> anyhow::Result<()> {
    let config = SourceConfig {
        bootstrap: vec![address.clone()],
        tls_ca_pem: None,
        sasl: None,
        client_id: "floe-loadtest".to_owned(),
    };
    let mut connection = BrokerConnection::connect(&address, &config).await?;
    let mut positions = start_positions(&mut connection, share, args.from_start).await?;
    let at: HashMap<(TopicName, i32), usize> =
        positions.iter().enumerate().map(|(i, p)| ((p.topic.clone(), p.partition), i)).collect();
    plan.assigned.fetch_add(positions.len(), Ordering::Relaxed);
    for p in &positions {
        plan.reached_at(&p.topic, p.partition, p.offset);
    }
    let version = connection.version::<FetchRequest>("Fetch", FETCH_VERSION_MAX)?;
    // Answers name topics by id from v13: the names they stand for.
    let names = if version >= FETCH_TOPIC_IDS_VERSION {
        let ids = topic_ids(&mut connection, &positions).await?;
        for p in &mut positions {
            p.topic_id = ids.get(&p.topic).copied().with_context(|| format!("no id for topic {}", p.topic.0))?;
        }
        ids.into_iter().map(|(name, id)| (id, name)).collect()
    } else {
        HashMap::new()
    };
    // Sessions came with version 7; before it every fetch is a full one.
    let sessions = version >= 7;
    let (mut session_id, mut epoch) = (0i32, if sessions { 0i32 } else { -1 });
    let framing = if args.schema_id.is_some() { SCHEMA_FRAMING_BYTES } else { 0 };
    let carries_send_time = args.producers > 0 && args.record_bytes >= framing + 8;
    let result = async {
        while !stats.stop.load(Ordering::Relaxed) {
            let full = epoch <= 0;
            let request = fetch_request(&mut positions, full, session_id, epoch, args.isolation);
            let response = tokio::time::timeout(ANSWER_TIMEOUT, connection.call(&request, version))
                .await
                .with_context(|| format!("no Fetch answer within {ANSWER_TIMEOUT:?}"))??;
            match response.error_code {
                0 => {}
                FETCH_SESSION_ID_NOT_FOUND | INVALID_FETCH_SESSION_EPOCH => {
                    stats.error(format!("consume: fetch session ended ({})", response.error_code));
                    (session_id, epoch) = (0, 0);
                    continue;
                }
                code => bail!("Fetch failed with Kafka error {code}"),
            }
            if sessions {
                session_id = response.session_id;
                // A broker that keeps no session answers 0: every fetch stays a full one.
                epoch = if session_id == 0 { 0 } else { epoch.checked_add(1).unwrap_or(1).max(1) };
            }
            let mut failed = false;
            for topic in response.responses {
                let name = names.get(&topic.topic_id).unwrap_or(&topic.topic);
                for partition in topic.partitions {
                    let Some(&i) = at.get(&(name.clone(), partition.partition_index)) else { continue };
                    if partition.error_code != 0 {
                        stats.error(format!("consume: Kafka error {}", partition.error_code));
                        failed = true;
                        continue;
                    }
                    let Some(records) = partition.records else { continue };
                    let position = &mut positions[i];
                    let next = read_batches(records, stats, carries_send_time.then_some(framing));
                    if next > position.offset {
                        position.offset = next;
                        position.moved = true;
                        plan.reached_at(&position.topic, position.partition, next);
                    }
                }
            }
            if failed {
                tokio::time::sleep(ERROR_BACKOFF).await;
            }
        }
        anyhow::Ok(())
    }
    .await;
    plan.assigned.fetch_sub(positions.len(), Ordering::Relaxed);
    result
}

/// Each partition's log end (or start, with `from_start`), from its leader.
async fn start_positions(
    connection: &mut BrokerConnection,
    share: Vec<(String, i32)>,
    from_start: bool,
) -> anyhow::Result<Vec<Position>> {
    let version = connection.version::<ListOffsetsRequest>("ListOffsets", 7)?;
    let mut by_topic: Vec<ListOffsetsTopic> = Vec::new();
    for (topic, partition) in &share {
        let name = TopicName(StrBytes::from_string(topic.clone()));
        let wanted = ListOffsetsPartition::default()
            .with_partition_index(*partition)
            .with_current_leader_epoch(-1)
            .with_timestamp(if from_start { -2 } else { -1 });
        match by_topic.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(wanted),
            None => by_topic.push(ListOffsetsTopic::default().with_name(name).with_partitions(vec![wanted])),
        }
    }
    let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(by_topic);
    let response = connection.call(&request, version).await?;
    let mut positions = Vec::with_capacity(share.len());
    for topic in response.topics {
        for p in topic.partitions {
            if p.error_code != 0 {
                bail!("ListOffsets of {}/{} failed with Kafka error {}", topic.name.0, p.partition_index, p.error_code);
            }
            positions.push(Position {
                topic: topic.name.clone(),
                topic_id: Uuid::nil(),
                partition: p.partition_index,
                offset: p.offset,
                moved: false,
            });
        }
    }
    if positions.len() != share.len() {
        bail!("ListOffsets answered {} of {} partitions", positions.len(), share.len());
    }
    Ok(positions)
}

/// The ids of the topics of `positions`, from the broker's Metadata.
async fn topic_ids(
    connection: &mut BrokerConnection,
    positions: &[Position],
) -> anyhow::Result<HashMap<TopicName, Uuid>> {
    let version = connection.version::<MetadataRequest>("Metadata", 12)?;
    if version < METADATA_TOPIC_IDS_VERSION {
        bail!("the broker answers Fetch v{FETCH_TOPIC_IDS_VERSION}+ but not Metadata v{METADATA_TOPIC_IDS_VERSION}+");
    }
    let mut names: Vec<TopicName> = positions.iter().map(|p| p.topic.clone()).collect();
    names.dedup();
    let topics = names.into_iter().map(|name| MetadataRequestTopic::default().with_name(Some(name))).collect();
    let response = connection.call(&MetadataRequest::default().with_topics(Some(topics)), version).await?;
    let mut ids = HashMap::new();
    for topic in response.topics {
        let Some(name) = topic.name else { continue };
        if topic.error_code != 0 {
            bail!("Metadata of {} failed with Kafka error {}", name.0, topic.error_code);
        }
        ids.insert(name, topic.topic_id);
    }
    Ok(ids)
}

/// A full fetch names every partition; an incremental one only those that moved.
fn fetch_request(
    positions: &mut [Position],
    full: bool,
    session_id: i32,
    epoch: i32,
    isolation: Isolation,
) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for position in positions.iter_mut().filter(|p| full || p.moved) {
        position.moved = false;
        let partition = FetchPartition::default()
            .with_partition(position.partition)
            .with_current_leader_epoch(-1)
            .with_fetch_offset(position.offset)
            .with_last_fetched_epoch(-1)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(PARTITION_MAX_BYTES);
        // Positions are kept topic by topic in turn, so look the topic up rather than assume
        // it is the last one.
        match topics.iter_mut().find(|t| t.topic == position.topic) {
            Some(t) => t.partitions.push(partition),
            None => topics.push(
                FetchTopic::default()
                    .with_topic(position.topic.clone())
                    .with_topic_id(position.topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_isolation_level(match isolation {
            Isolation::ReadUncommitted => 0,
            Isolation::ReadCommitted => 1,
        })
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// Counts the records of whole batches in `records` (a trailing partial batch is read by the
/// next fetch) and returns the offset after the last whole batch. With `send_time_at`, each
/// record's value carries its send time there, for end-to-end latency.
fn read_batches(mut records: Bytes, stats: &Stats, send_time_at: Option<usize>) -> i64 {
    let mut next = i64::MIN;
    while records.len() >= BATCH_HEADER_BYTES {
        let length = i32::from_be_bytes([records[8], records[9], records[10], records[11]]);
        let Some(total) = usize::try_from(length).ok().and_then(|l| l.checked_add(12)) else { break };
        if total > records.len() {
            break;
        }
        let mut batch = records.split_to(total);
        let base_offset = (&batch[0..8]).get_i64();
        let last_delta = i64::from((&batch[23..27]).get_i32());
        let control = (&batch[21..23]).get_i16() & 0x20 != 0;
        next = next.max(base_offset.saturating_add(last_delta).saturating_add(1));
        if control {
            continue;
        }
        match RecordBatchDecoder::decode(&mut batch) {
            Ok(set) => {
                for record in set.records {
                    let value = record.value.unwrap_or_default();
                    let bytes = (value.len() + record.key.map_or(0, |k| k.len())) as u64;
                    let sent = send_time_at
                        .and_then(|at| value.get(at..at + 8))
                        .and_then(|b| b.try_into().ok())
                        .map(u64::from_be_bytes);
                    stats.received(bytes, sent);
                }
            }
            Err(e) => stats.error(format!("consume: undecodable batch: {e}")),
        }
    }
    next
}
