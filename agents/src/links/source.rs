//! What a link reads from its source: topics to mirror, batches to write, groups' offsets.

use std::collections::BTreeMap;

use bytes::Bytes;
use floe_kafka_client::{Sasl, SourceCluster, SourceConfig};
use floe_metadata::state::stored::each_into;
use floe_metadata::{Command, CommandError, LinkConfig, MirrorTxnEvent, NodeError, OffsetCommit, TopicId};

use super::{LinkWorker, compile_pattern, link_namespace, mirror_topics, stored_name};
use crate::Agent;
use crate::record_batch::{self, ATTRIBUTE_TRANSACTIONAL, BatchHeader, HEADER_BYTES};

/// Groups whose offsets one round copies at most.
const GROUPS_PER_ROUND_MAX: usize = 1_000;

pub(super) fn source_config(config: &LinkConfig, node_id: i32) -> SourceConfig {
    SourceConfig {
        bootstrap: config.bootstrap.split(',').map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()).collect(),
        tls_ca_pem: config.tls.then(|| config.tls_ca_pem.clone().unwrap_or_default()),
        sasl: config.sasl.as_ref().map(|s| Sasl {
            mechanism: s.mechanism.clone(),
            username: s.username.clone(),
            password: s.password.clone(),
        }),
        client_id: format!("floe-link-{node_id}"),
    }
}

/// Source batches of one partition from a fetch offset on, ready to store as they are.
#[derive(Debug, Default)]
pub struct LinkBatches {
    pub batches: Vec<Bytes>,
    pub base_offset: i64,
    pub last_offset: i64,
    pub record_count: u64,
    pub timestamp_min: i64,
    pub timestamp_max: i64,
    pub transactions: Vec<MirrorTxnEvent>,
}

/// The whole batches of a fetch answer that end at or after `from`. A fetch may end in part of
/// a batch (cut at the size asked): that part is left for the next fetch. Each batch's checksum
/// is checked: what is stored is what the source wrote.
pub fn link_batches(records: &Bytes, from: i64) -> Result<LinkBatches, String> {
    let mut out = LinkBatches { timestamp_min: i64::MAX, timestamp_max: i64::MIN, ..LinkBatches::default() };
    let mut at = 0usize;
    while at < records.len() {
        let rest = &records[at..];
        let header = match BatchHeader::parse(rest) {
            Ok(header) if header.batch_bytes <= rest.len() => header,
            Ok(_) | Err(record_batch::BatchError::Truncated { .. }) => break,
            Err(e) => return Err(format!("the source sent a batch this link cannot store: {e}")),
        };
        let batch = records.slice(at..at + header.batch_bytes);
        at += header.batch_bytes;
        let last = header.base_offset + i64::from(header.last_offset_delta);
        if last < from {
            continue;
        }
        if header.base_offset < from {
            return Err(format!(
                "a source batch spans {}..={last}, across offset {from} where the mirror ends",
                header.base_offset
            ));
        }
        if !record_batch::crc_matches(&batch, &header) {
            return Err(format!("the source's batch at offset {} fails its checksum", header.base_offset));
        }
        if out.batches.is_empty() {
            out.base_offset = header.base_offset;
        } else if header.base_offset <= out.last_offset {
            return Err(format!("source batches out of order at offset {}", header.base_offset));
        }
        out.last_offset = last;
        out.record_count += u64::try_from(header.record_count).unwrap_or(0);
        out.timestamp_min = out.timestamp_min.min(header.first_timestamp());
        out.timestamp_max = out.timestamp_max.max(header.max_timestamp);
        if let Some(event) = transaction_event(&header, &batch) {
            out.transactions.push(event);
        }
        out.batches.push(batch);
    }
    Ok(out)
}

/// The bytes of a stored chunk (its first batch at `base_offset`) that come before `offset`,
/// which must be where one of its batches starts.
pub(super) fn cut_at(
    chunk: &Bytes,
    base_offset: i64,
    offsets_in_batches: bool,
    offset: i64,
) -> Result<floe_metadata::ChunkCut, String> {
    let mut next_base = base_offset;
    let mut at = 0usize;
    for batch in record_batch::split(chunk) {
        let (header, bytes) = batch.map_err(|e| e.to_string())?;
        let base = if offsets_in_batches { header.base_offset } else { next_base };
        next_base = base + header.offset_count();
        if base >= offset {
            break;
        }
        if next_base > offset {
            return Err(format!("offset {offset} falls inside a batch ({base}..{next_base}): not a fork point"));
        }
        at += bytes.len();
    }
    let byte_len = u32::try_from(at).map_err(|e| e.to_string())?;
    Ok(floe_metadata::ChunkCut { byte_len, crc32c: crc32c::crc32c(&chunk[..at]) })
}

/// What a batch means for its producer's transaction: a control batch ends it (its record's
/// key says commit or abort), a transactional data batch opens it unless open.
fn transaction_event(header: &BatchHeader, batch: &Bytes) -> Option<MirrorTxnEvent> {
    let (producer_id, offset) = (header.producer_id, header.base_offset);
    if header.is_control() {
        let records = batch.get(HEADER_BYTES..)?;
        let record = crate::record_batch::records::record_refs(records).next()?.ok()?;
        let key = record.key?;
        // Key: version (int16), type (int16): 0 abort, 1 commit.
        let kind = i16::from_be_bytes([*key.get(2)?, *key.get(3)?]);
        return Some(MirrorTxnEvent::Marker {
            producer_id,
            producer_epoch: header.producer_epoch,
            offset,
            commit: kind == 1,
        });
    }
    (header.attributes & ATTRIBUTE_TRANSACTIONAL != 0 && producer_id >= 0)
        .then_some(MirrorTxnEvent::Data { producer_id, offset })
}

/// After OFFSET_OUT_OF_RANGE at `from`: where the link reads on. The source removed offsets
/// not mirrored yet: on from its log start (a gap here). A source log that now ends below the
/// mirror's was cut or recreated: the link stops with an error rather than diverge.
pub(super) async fn position_after_out_of_range(
    source: &mut SourceCluster,
    topic: &str,
    partition: i32,
    leader: i32,
    from: i64,
) -> Result<i64, String> {
    let p = [floe_kafka_client::SourcePartition { index: partition, leader }];
    let earliest = source.list_offsets(topic, &p, -2).await.map_err(|e| e.to_string())?;
    let latest = source.list_offsets(topic, &p, -1).await.map_err(|e| e.to_string())?;
    let (Some(Ok(earliest)), Some(Ok(latest))) = (earliest.get(&partition), latest.get(&partition)) else {
        return Err(format!("{topic}-{partition}: the source did not say where its log starts and ends"));
    };
    if *latest < from {
        return Err(format!(
            "{topic}-{partition}: the source's log ends at {latest}, below the mirror's {from}: it was truncated or \
             recreated; delete the mirror topic to mirror it afresh"
        ));
    }
    Ok((*earliest).max(from))
}

/// Rereads the source's topics: creates mirrors of new matching topics, follows partition
/// counts and (with `sync_configs`) configs, and notes mirror topics the source deleted.
/// Returns what was refused for single topics (a quota, a name taken here): those topics are
/// not mirrored (a refused creation leaves nothing behind), the others are.
pub(super) async fn refresh_topics(agent: &Agent, name: &str, worker: &mut LinkWorker) -> Result<Vec<String>, String> {
    let pattern = compile_pattern(&worker.config.topics)?;
    let ns = link_namespace(&agent.metadata.read(), &worker.config)?;
    let Some(source) = worker.source.as_mut() else { return Ok(Vec::new()) };
    let metadata = source.metadata().await.map_err(|e| e.to_string())?;
    let matching: Vec<&floe_kafka_client::SourceTopic> = metadata
        .topics
        .iter()
        .filter(|t| !t.is_internal && t.error_code == 0 && super::pattern_matches(&pattern, &t.name))
        .collect();
    let configs = if worker.config.sync_configs && !matching.is_empty() {
        let names: Vec<String> = matching.iter().map(|t| t.name.clone()).collect();
        source.topic_configs(&names).await.map_err(|e| e.to_string())?
    } else {
        BTreeMap::new()
    };
    let mut leaders = BTreeMap::new();
    let mut conflicts = Vec::new();
    let mut problems = Vec::new();
    for topic in matching {
        let wanted_configs = configs.get(&topic.name).map(storable_configs).unwrap_or_default();
        let count = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
        let stored = stored_name(ns.as_ref(), &topic.name);
        let command = {
            let state = agent.metadata.read();
            match state.topic_by_name(&stored) {
                None => Some(Command::CreateMirrorTopic {
                    link: name.to_owned(),
                    name: stored.clone(),
                    topic_id: uuid::Uuid::new_v4(),
                    partition_count: count,
                    configs: wanted_configs,
                }),
                Some(local) if state.mirror_link(local.topic_id) != Some(name) => {
                    conflicts.push(topic.name.clone());
                    continue;
                }
                Some(local) => {
                    let grow = usize::try_from(count).is_ok_and(|c| c > local.partitions.len());
                    let reconfigure = worker.config.sync_configs && local.configs != wanted_configs;
                    (grow || reconfigure).then(|| Command::UpdateMirrorTopic {
                        link: name.to_owned(),
                        topic_id: local.topic_id,
                        partition_count: count.max(i32::try_from(local.partitions.len()).unwrap_or(i32::MAX)),
                        configs: reconfigure.then_some(wanted_configs),
                    })
                }
            }
        };
        if let Some(command) = command {
            let created = matches!(command, Command::CreateMirrorTopic { .. });
            match agent.metadata.propose(command).await {
                Ok(_) => {}
                Err(NodeError::Rejected(e)) => {
                    problems.push(format!("mirroring topic {}: {e}", topic.name));
                    if created {
                        continue;
                    }
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        leaders.insert(topic.name.clone(), topic.partitions.clone());
    }
    {
        let state = agent.metadata.read();
        let at_source: std::collections::BTreeSet<&str> = metadata.topics.iter().map(|t| t.name.as_str()).collect();
        worker.deleted_at_source = mirror_topics(&state, name)
            .map(|(n, _)| ns.as_ref().and_then(|ns| ns.unscope(n)).unwrap_or(n))
            .filter(|n| !at_source.contains(n))
            .map(str::to_owned)
            .collect();
    }
    worker.leaders = leaders;
    if !conflicts.is_empty() {
        problems.push(format!(
            "topics {conflicts:?} exist here and are not mirrors of this link: rename or delete them to mirror them"
        ));
    }
    Ok(problems)
}

/// The source configs Floe keeps on a topic: those it knows, each valid on its own.
fn storable_configs(source: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    source
        .iter()
        .filter(|(name, value)| {
            floe_metadata::config::topic_config(name).is_some()
                && floe_metadata::config::validate_topic_config(name, value).is_ok()
        })
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// Copies the committed offsets of the source's matching groups into this cluster's groups of
/// the same name, for mirror topics of this link; a group with members here keeps its own.
pub(super) async fn copy_group_offsets(agent: &Agent, name: &str, worker: &mut LinkWorker) -> Result<(), String> {
    let Some(pattern) = worker.config.groups.as_deref() else { return Ok(()) };
    let pattern = compile_pattern(pattern)?;
    let ns = link_namespace(&agent.metadata.read(), &worker.config)?;
    let Some(source) = worker.source.as_mut() else { return Ok(()) };
    let groups = source.list_groups().await.map_err(|e| e.to_string())?;
    for group in groups.into_iter().filter(|g| super::pattern_matches(&pattern, g)).take(GROUPS_PER_ROUND_MAX) {
        let offsets = source.group_offsets(&group).await.map_err(|e| e.to_string())?;
        let offsets: Vec<OffsetCommit> = {
            let state = agent.metadata.read();
            let mirrored: BTreeMap<&str, TopicId> = mirror_topics(&state, name).collect();
            offsets
                .into_iter()
                .map(|o| (stored_name(ns.as_ref(), &o.topic), o))
                .filter(|(stored, _)| mirrored.contains_key(stored.as_str()))
                .map(|(stored, o)| OffsetCommit {
                    topic: stored,
                    partition: o.partition,
                    offset: o.offset,
                    leader_epoch: -1,
                    metadata: o.metadata,
                })
                .collect()
        };
        if offsets.is_empty() {
            continue;
        }
        let command = Command::MirrorGroupOffsets {
            link: name.to_owned(),
            group_id: stored_name(ns.as_ref(), &group),
            offsets: each_into(offsets),
            now_ms: floe_metadata::now_ms(),
        };
        match agent.metadata.propose(command).await {
            Ok(_) | Err(NodeError::Rejected(CommandError::GroupNotEmpty)) => {}
            Err(e) => tracing::warn!(link = %name, group = %group, error = %e, "copying a group's offsets failed"),
        }
    }
    Ok(())
}
