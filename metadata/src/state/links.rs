//! Links (format 11): a source Kafka-compatible cluster mirrored into this one with identical
//! offsets. A link's mirror topics take only the link's own commits, each source batch at its
//! source offset, until the link is promoted.
//!
//! The link's progress is the mirror partitions' log end offsets themselves: a mirror chunk
//! that ends at or below its partition's log end was applied already (a retry, or a job that
//! crashed after its commit), so a job that restarts reads the source from the log end and
//! neither skips nor repeats a batch; no commit needs remembering by key.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::transactions::AbortedTransaction;
use super::{EntryData, IndexEntry, ObjectRecord, State, TopicId, TxnMarker};
use crate::command::{CommandError, Outcome};
use crate::limits::{
    COMMIT_CHUNK_COUNT_MAX, LINK_COUNT_MAX, LINK_ERROR_BYTES_MAX, LINK_FIELD_BYTES_MAX, LINK_NAME_BYTES_MAX,
    LINK_TXN_EVENTS_MAX, PARTITION_OFFSET_MAX,
};

/// What an operator sets on a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// The source's bootstrap servers, `HOST:PORT[,HOST:PORT...]`.
    pub bootstrap: String,
    /// Connect to the source over TLS (verified against the system roots or `tls_ca_pem`).
    pub tls: bool,
    /// A PEM CA bundle that signs the source's certificates.
    pub tls_ca_pem: Option<String>,
    /// SASL credentials for the source; the password is kept in the metadata state (and its
    /// archives) and never shown.
    pub sasl: Option<LinkSasl>,
    /// Source topics mirrored: a regular expression that must match the whole name (checked
    /// by the proposer).
    pub topics: String,
    /// Groups whose committed offsets are copied; `None`: none are.
    pub groups: Option<String>,
    /// Topic configs follow the source's.
    pub sync_configs: bool,
    /// The tenant whose namespace the mirror topics and groups go into (format 12): the source's
    /// names are the names its clients use, and its quotas apply. `None`: the cluster's own.
    pub tenant: Option<String>,
    /// The source's ACLs on mirrored topics and groups are copied (format 12): those resources'
    /// bindings here are the source's while the link mirrors.
    pub acls: bool,
}

/// SASL credentials a link presents to its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSasl {
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: String,
    pub username: String,
    pub password: String,
}

/// A link as the cluster keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkRecord {
    pub config: LinkConfig,
    pub created_ms: i64,
    pub state: LinkState,
    /// The source's log end offset of each mirror partition, as the link's job last read it:
    /// the lag is this minus the partition's log end here.
    pub source_ends: BTreeMap<(TopicId, i32), i64>,
    /// What stops the link now (an unreachable source, refused credentials), shown in status;
    /// `None` while it mirrors.
    pub error: Option<String>,
    /// When the job last reported (its clock), `0` before it did.
    pub reported_ms: i64,
    /// Source topics that matched and were deleted at the source: reported, not deleted here.
    pub deleted_at_source: BTreeSet<String>,
}

/// Whether a link still mirrors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    Mirroring,
    /// Stopped and its topics made writable. `fork_offsets` are, per topic, each partition's log
    /// end offset when it was promoted: the last offset both sides share, where a reversed
    /// link starts.
    Promoted {
        at_ms: i64,
        fork_offsets: BTreeMap<String, Vec<i64>>,
    },
}

/// One source batch range written into a mirror partition, at its source offsets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorChunk {
    pub topic_id: TopicId,
    pub partition: i32,
    pub byte_start: u64,
    pub byte_len: u32,
    pub crc32c: u32,
    /// The first batch's base offset and the last batch's last offset, as the source had them.
    pub base_offset: i64,
    pub last_offset: i64,
    pub timestamp_max: i64,
    /// Records the chunk holds, for usage metering.
    pub record_count: u64,
    /// Transactions the chunk begins and ends, in offset order.
    pub transactions: Vec<MirrorTxnEvent>,
}

/// A transaction event seen in a mirrored chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MirrorTxnEvent {
    /// A transactional batch of `producer_id` at `offset`: opens its transaction here unless
    /// one is open.
    Data { producer_id: i64, offset: i64 },
    /// A control batch (commit or abort marker) of `producer_id` at `offset`.
    Marker { producer_id: i64, producer_epoch: i16, offset: i64, commit: bool },
}

/// One object written by a link job and the mirror chunks it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirrorCommit {
    pub link: String,
    pub key: String,
    pub object_bytes: u64,
    pub chunks: Vec<MirrorChunk>,
}

/// What a link's job reports besides data: the source's log ends, an error, deleted topics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkReport {
    pub link: String,
    pub source_ends: Vec<(TopicId, i32, i64)>,
    pub error: Option<String>,
    pub deleted_at_source: Vec<String>,
    pub now_ms: i64,
}

/// The first `byte_len` bytes of an index entry's chunk, and their checksum: what is kept of an
/// entry a truncation cuts through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkCut {
    pub byte_len: u32,
    pub crc32c: u32,
}

/// What a mirror commit did with each chunk, in order: `true` if appended, `false` if it was
/// already there (a retry).
pub type MirroredChunks = Vec<Result<bool, CommandError>>;

fn validate_link_name(name: &str) -> Result<(), CommandError> {
    let ok = !name.is_empty()
        && name.len() <= LINK_NAME_BYTES_MAX
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(CommandError::InvalidLink(format!(
            "a link name is 1 to {LINK_NAME_BYTES_MAX} of [A-Za-z0-9._-], not {name:?}"
        )))
    }
}

fn validate_link_config(config: &LinkConfig) -> Result<(), CommandError> {
    let invalid = |why: String| Err(CommandError::InvalidLink(why));
    let fields = [Some(&config.bootstrap), Some(&config.topics), config.groups.as_ref()];
    if fields.into_iter().flatten().any(|f| f.is_empty() || f.len() > LINK_FIELD_BYTES_MAX) {
        return invalid(format!("the bootstrap servers and patterns are 1 to {LINK_FIELD_BYTES_MAX} bytes"));
    }
    if !config.bootstrap.split(',').all(|a| crate::limits::valid_peer_addr(a.trim())) {
        return invalid(format!("bootstrap servers are HOST:PORT[,HOST:PORT...], not {:?}", config.bootstrap));
    }
    if config.tls_ca_pem.as_ref().is_some_and(|pem| pem.len() > crate::limits::LINK_CA_BYTES_MAX) {
        return invalid(format!("a CA bundle is at most {} bytes", crate::limits::LINK_CA_BYTES_MAX));
    }
    if let Some(sasl) = &config.sasl {
        if !matches!(sasl.mechanism.as_str(), "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512") {
            return invalid(format!("SASL mechanism {:?}: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", sasl.mechanism));
        }
        if sasl.username.is_empty() || sasl.username.len() > 255 || sasl.password.len() > 255 {
            return invalid("a SASL user name is 1 to 255 bytes, a password up to 255".into());
        }
    }
    Ok(())
}

impl State {
    /// The link mirroring topic `topic_id`, if it is a mirror topic.
    pub fn mirror_link(&self, topic_id: TopicId) -> Option<&str> {
        self.mirror_topics.get(&topic_id).map(String::as_str)
    }

    /// Refuses a write that is not the link's to a mirror topic.
    pub(super) fn refuse_mirror(&self, topic_id: TopicId) -> Result<(), CommandError> {
        match self.mirror_link(topic_id) {
            Some(link) => Err(CommandError::MirrorTopic { link: link.to_owned() }),
            None => Ok(()),
        }
    }

    pub(super) fn refuse_mirror_by_name(&self, name: &str) -> Result<(), CommandError> {
        match self.topic_ids.get(name) {
            Some(topic_id) => self.refuse_mirror(*topic_id),
            None => Ok(()),
        }
    }

    /// The tenant namespace `link` mirrors into; `None` for the cluster's own (or a tenant that
    /// is gone, whose topics went with it).
    fn link_namespace(&self, link: &LinkRecord) -> Option<crate::namespace::Namespace> {
        link.config.tenant.as_deref().and_then(|t| self.tenant_namespace(t))
    }

    fn require_links(&self) -> Result<(), CommandError> {
        if self.applies_format(11) {
            Ok(())
        } else {
            Err(CommandError::InvalidCommit("links need every metadata node on format 11".into()))
        }
    }

    fn mirroring_link(&self, name: &str) -> Result<&LinkRecord, CommandError> {
        match self.links.get(name) {
            None => Err(CommandError::InvalidLink(format!("no link named {name:?}"))),
            Some(link) if link.state != LinkState::Mirroring => {
                Err(CommandError::InvalidLink(format!("link {name:?} was promoted")))
            }
            Some(link) => Ok(link),
        }
    }

    /// Creates a link, or replaces the config of one that still mirrors.
    pub(super) fn set_link(&mut self, name: String, config: LinkConfig, now_ms: i64) -> Result<Outcome, CommandError> {
        self.require_links()?;
        validate_link_name(&name)?;
        validate_link_config(&config)?;
        if (config.tenant.is_some() || config.acls) && !self.applies_format(12) {
            return Err(CommandError::InvalidLink(
                "a link's tenant and ACL copying need every metadata node on format 12".into(),
            ));
        }
        if let Some(tenant) = config.tenant.as_ref().filter(|t| !self.tenants.contains_key(*t)) {
            return Err(CommandError::InvalidLink(format!("no tenant named {tenant:?}")));
        }
        let count = self.links.len();
        let mirrored = self.mirror_topics.values().filter(|l| **l == name).count();
        match self.links.get_mut(&name) {
            Some(link) if link.state != LinkState::Mirroring => {
                Err(CommandError::InvalidLink(format!("link {name:?} was promoted; delete it and create another")))
            }
            Some(link) if link.config.tenant != config.tenant && mirrored > 0 => Err(CommandError::InvalidLink(
                format!("link {name:?} mirrors {mirrored} topics into its namespace: its tenant cannot change"),
            )),
            Some(link) => {
                link.config = config;
                Ok(Outcome::Done)
            }
            None if count >= LINK_COUNT_MAX => {
                Err(CommandError::LimitReached(format!("at most {LINK_COUNT_MAX} links")))
            }
            None => {
                let record = LinkRecord {
                    config,
                    created_ms: now_ms,
                    state: LinkState::Mirroring,
                    source_ends: BTreeMap::new(),
                    error: None,
                    reported_ms: 0,
                    deleted_at_source: BTreeSet::new(),
                };
                self.links.insert(name, record);
                Ok(Outcome::Done)
            }
        }
    }

    /// Deletes a link that mirrors no topic (promote it first, or delete its topics).
    pub(super) fn delete_link(&mut self, name: &str) -> Result<Outcome, CommandError> {
        self.require_links()?;
        if !self.links.contains_key(name) {
            return Err(CommandError::InvalidLink(format!("no link named {name:?}")));
        }
        let mirrored = self.mirror_topics.values().filter(|l| *l == name).count();
        if mirrored > 0 {
            return Err(CommandError::InvalidLink(format!(
                "link {name:?} still mirrors {mirrored} topics: promote it, or delete them first"
            )));
        }
        self.links.remove(name);
        Ok(Outcome::Done)
    }

    /// Creates a topic that link `link` mirrors.
    pub(super) fn create_mirror_topic(
        &mut self,
        link: String,
        name: String,
        topic_id: TopicId,
        partition_count: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Outcome, CommandError> {
        self.require_links()?;
        let tenant = self.mirroring_link(&link)?.config.tenant.clone();
        match tenant {
            None if crate::namespace::key_of(&name).is_some() => {
                return Err(CommandError::InvalidTopicName {
                    name,
                    reason: format!("link {link:?} mirrors into the cluster's own namespace, not a tenant's"),
                });
            }
            None => {}
            Some(tenant) => {
                let ns = self.tenant_namespace(&tenant).ok_or_else(|| {
                    CommandError::InvalidLink(format!("tenant {tenant:?} of link {link:?} no longer exists"))
                })?;
                if !ns.owns(&name) {
                    return Err(CommandError::InvalidTopicName {
                        name,
                        reason: format!("link {link:?} mirrors into tenant {tenant:?}'s namespace"),
                    });
                }
            }
        }
        let outcome = self.create_topic(name, topic_id, partition_count, configs)?;
        self.mirror_topics.insert(topic_id, link);
        Ok(outcome)
    }

    /// A mirror topic's partitions follow the source's count, and its configs the source's.
    pub(super) fn update_mirror_topic(
        &mut self,
        link: &str,
        topic_id: TopicId,
        partition_count: i32,
        configs: Option<BTreeMap<String, String>>,
    ) -> Result<Outcome, CommandError> {
        self.require_links()?;
        self.mirroring_link(link)?;
        if self.mirror_link(topic_id) != Some(link) {
            return Err(CommandError::InvalidLink(format!("topic {topic_id} is not a mirror topic of link {link:?}")));
        }
        let name = self.topics.get(&topic_id).map(|t| t.name.clone()).ok_or(CommandError::UnknownTopicOrPartition)?;
        let count = self.topics.get(&topic_id).map_or(0, |t| t.partitions.len());
        if usize::try_from(partition_count).is_ok_and(|c| c > count) {
            self.create_partitions(&name, partition_count)?;
        }
        if let Some(configs) = configs {
            self.set_topic_configs(&name, configs)?;
        }
        Ok(Outcome::Done)
    }

    /// Writes source batches at their source offsets. A chunk that ends at or below its
    /// partition's log end was written already and is skipped; one that overlaps the log end
    /// means the source's log changed under the link, and is refused. Offsets the source no
    /// longer has (compacted, or removed by retention before the link read them) are a gap.
    pub(super) fn mirror_commit(&mut self, commit: MirrorCommit) -> Result<Outcome, CommandError> {
        self.require_links()?;
        self.mirroring_link(&commit.link)?;
        if commit.key.is_empty() || commit.chunks.is_empty() || commit.chunks.len() > COMMIT_CHUNK_COUNT_MAX {
            return Err(CommandError::InvalidCommit(format!(
                "a mirror commit has an object key and 1..={COMMIT_CHUNK_COUNT_MAX} chunks"
            )));
        }
        for chunk in &commit.chunks {
            let end = chunk.byte_start.checked_add(u64::from(chunk.byte_len));
            if end.is_none_or(|end| end > commit.object_bytes) || chunk.byte_len == 0 {
                return Err(CommandError::InvalidCommit("a chunk's bytes lie outside the object".into()));
            }
            if chunk.base_offset < 0
                || chunk.last_offset < chunk.base_offset
                || chunk.last_offset >= PARTITION_OFFSET_MAX
            {
                return Err(CommandError::InvalidCommit(format!(
                    "offsets {}..={} of a mirror chunk",
                    chunk.base_offset, chunk.last_offset
                )));
            }
            if chunk.transactions.len() > LINK_TXN_EVENTS_MAX {
                return Err(CommandError::InvalidCommit(format!(
                    "at most {LINK_TXN_EVENTS_MAX} transaction events per chunk"
                )));
            }
            // In offset order within the chunk, so markers always follow the data they end.
            let mut previous = chunk.base_offset - 1;
            for event in &chunk.transactions {
                let (MirrorTxnEvent::Data { producer_id, offset } | MirrorTxnEvent::Marker { producer_id, offset, .. }) =
                    *event;
                if producer_id < 0 || offset <= previous || offset > chunk.last_offset {
                    return Err(CommandError::InvalidCommit(
                        "transaction events lie in their chunk, in offset order".into(),
                    ));
                }
                previous = offset;
            }
        }
        let object_id = self.next_object_id;
        let mut reference_count = 0u64;
        let mut results = MirroredChunks::with_capacity(commit.chunks.len());
        for chunk in commit.chunks {
            if self.mirror_link(chunk.topic_id) != Some(commit.link.as_str()) {
                results.push(Err(CommandError::InvalidLink(format!(
                    "topic {} is not a mirror topic of link {:?}",
                    chunk.topic_id, commit.link
                ))));
                continue;
            }
            let tenant_name = self.topics.get(&chunk.topic_id).map(|t| t.name.clone());
            if self.partition(chunk.topic_id, chunk.partition).is_none() {
                results.push(Err(CommandError::UnknownTopicOrPartition));
                continue;
            }
            if self.mirror_truncations.contains_key(&(chunk.topic_id, chunk.partition)) {
                results.push(Err(CommandError::InvalidLink("the partition is to be cut back first".into())));
                continue;
            }
            let Some(partition) = self.partition_mut(chunk.topic_id, chunk.partition) else {
                results.push(Err(CommandError::UnknownTopicOrPartition));
                continue;
            };
            if chunk.last_offset < partition.next_offset {
                results.push(Ok(false));
                continue;
            }
            if chunk.base_offset < partition.next_offset {
                results.push(Err(CommandError::InvalidCommit(format!(
                    "source offsets {}..={} overlap the mirror's log end {}: the source's log changed",
                    chunk.base_offset, chunk.last_offset, partition.next_offset
                ))));
                continue;
            }
            if chunk.base_offset > partition.next_offset {
                if partition.index.is_empty() {
                    // Nothing mirrored yet, or everything since removed: the log starts here.
                    partition.log_start_offset = chunk.base_offset;
                } else {
                    partition.index.push_back(IndexEntry {
                        base_offset: partition.next_offset,
                        last_offset: chunk.base_offset - 1,
                        timestamp_max: partition.index.back().map_or(i64::MIN, |e| e.timestamp_max),
                        data: EntryData::Removed,
                    });
                }
            }
            partition.index.push_back(IndexEntry {
                base_offset: chunk.base_offset,
                last_offset: chunk.last_offset,
                timestamp_max: chunk.timestamp_max,
                data: EntryData::CleanedChunk {
                    object_id,
                    byte_start: chunk.byte_start,
                    byte_len: chunk.byte_len,
                    crc32c: chunk.crc32c,
                },
            });
            partition.next_offset = chunk.last_offset + 1;
            partition.index_bytes += u64::from(chunk.byte_len);
            for event in &chunk.transactions {
                match *event {
                    MirrorTxnEvent::Data { producer_id, offset } => {
                        partition.open_transactions.entry(producer_id).or_insert(offset);
                    }
                    MirrorTxnEvent::Marker { producer_id, offset, commit, .. } => {
                        let first_offset = partition.open_transactions.remove(&producer_id);
                        if !commit && let Some(first_offset) = first_offset {
                            partition.aborted_transactions.push_back(AbortedTransaction {
                                producer_id,
                                first_offset,
                                last_offset: offset,
                            });
                        }
                    }
                }
            }
            reference_count += 1;
            if let Some(name) = tenant_name {
                self.usage.add_open(
                    super::tenant_of_stored_name(&name),
                    [
                        (super::Meter::ProducedBytes, u64::from(chunk.byte_len)),
                        (super::Meter::ProducedRecords, chunk.record_count),
                    ],
                );
            }
            results.push(Ok(true));
        }
        if reference_count > 0 {
            self.objects.insert(
                object_id,
                ObjectRecord { key: commit.key, object_bytes: commit.object_bytes, reference_count },
            );
            self.next_object_id += 1;
        }
        Ok(Outcome::Mirrored(results))
    }

    /// Records what a link's job saw of its source.
    pub(super) fn report_link(&mut self, report: LinkReport) -> Result<Outcome, CommandError> {
        self.require_links()?;
        let LinkReport { link: name, source_ends, error, deleted_at_source, now_ms } = report;
        self.mirroring_link(&name)?;
        if error.as_ref().is_some_and(|e| e.len() > LINK_ERROR_BYTES_MAX)
            || deleted_at_source.len() > crate::limits::TOPIC_COUNT_MAX
        {
            return Err(CommandError::InvalidCommit("a link report's error or topic list is too long".into()));
        }
        let mirrored: BTreeMap<(TopicId, i32), i64> = source_ends
            .into_iter()
            .filter(|(topic_id, partition, _)| {
                self.mirror_link(*topic_id) == Some(name.as_str()) && self.partition(*topic_id, *partition).is_some()
            })
            .map(|(topic_id, partition, end)| ((topic_id, partition), end))
            .collect();
        let mirror_topics = &self.mirror_topics;
        let Some(link) = self.links.get_mut(&name) else {
            unreachable!("checked above");
        };
        // A late report (sent before a newer one was applied) changes nothing.
        if now_ms < link.reported_ms {
            return Ok(Outcome::Done);
        }
        link.reported_ms = now_ms;
        link.error = error;
        link.source_ends.retain(|(topic_id, _), _| mirror_topics.get(topic_id) == Some(&name));
        link.source_ends.extend(mirrored);
        link.deleted_at_source.extend(deleted_at_source);
        Ok(Outcome::Done)
    }

    /// Stops a link and makes its topics writable. A transaction the source had not ended is
    /// aborted here (its producer is on the other side), so the topics' last stable offsets
    /// move on.
    pub(super) fn promote_link(&mut self, name: &str, now_ms: i64) -> Result<Outcome, CommandError> {
        self.require_links()?;
        let ns = self.link_namespace(self.mirroring_link(name)?);
        let topics: Vec<TopicId> = self.mirror_topics.iter().filter(|(_, l)| *l == name).map(|(t, _)| *t).collect();
        let mut fork_offsets = BTreeMap::new();
        for topic_id in topics {
            self.mirror_topics.remove(&topic_id);
            self.mirror_truncations.retain(|(t, _), _| *t != topic_id);
            let Some(topic) = self.topics.get_mut(&topic_id) else { continue };
            // By the name the source (and a link reading this cluster back) knows it.
            let shown = ns.as_ref().and_then(|ns| ns.unscope(&topic.name)).unwrap_or(&topic.name).to_owned();
            fork_offsets.insert(shown, topic.partitions.iter().map(|p| p.next_offset).collect());
            self.changed.everything();
            for partition in topic.partitions.iter_mut().map(std::sync::Arc::make_mut) {
                for (producer_id, first_offset) in std::mem::take(&mut partition.open_transactions) {
                    // The source producer's epoch is not known here; any epoch ends its
                    // transaction for readers.
                    let marker = TxnMarker { producer_id, producer_epoch: 0, commit: false };
                    partition.append_marker(marker, Some(first_offset), now_ms);
                }
            }
        }
        if let Some(link) = self.links.get_mut(name) {
            link.state = LinkState::Promoted { at_ms: now_ms, fork_offsets };
        }
        Ok(Outcome::Done)
    }

    /// Failback: makes an ordinary topic a mirror of `link`, its partitions to be cut back to
    /// the fork offsets first. Refused while a transaction of this cluster is open on it.
    pub(super) fn adopt_mirror_topic(
        &mut self,
        link: &str,
        topic_id: TopicId,
        fork_offsets: Vec<i64>,
    ) -> Result<Outcome, CommandError> {
        self.require_links()?;
        let record = self.mirroring_link(link)?;
        let (tenant, ns) = (record.config.tenant.is_some(), self.link_namespace(record));
        let topic = self.topics.get(&topic_id).ok_or(CommandError::UnknownTopicOrPartition)?;
        let in_namespace = match &ns {
            Some(ns) => ns.owns(&topic.name),
            None => !tenant && crate::namespace::key_of(&topic.name).is_none(),
        };
        if !in_namespace {
            return Err(CommandError::InvalidLink(format!(
                "topic {} is outside link {link:?}'s namespace",
                topic.name
            )));
        }
        if let Some(other) = self.mirror_link(topic_id) {
            return Err(CommandError::InvalidLink(format!(
                "topic {} is a mirror of link {other:?} already",
                topic.name
            )));
        }
        if fork_offsets.len() > topic.partitions.len() || fork_offsets.iter().any(|o| *o < 0) {
            return Err(CommandError::InvalidLink(format!(
                "{} fork offsets for {} partitions",
                fork_offsets.len(),
                topic.partitions.len()
            )));
        }
        let open = self
            .transactions
            .values()
            .any(|t| t.state == super::TxnState::Ongoing && t.partitions.iter().any(|(t, _)| *t == topic_id));
        if open || topic.partitions.iter().any(|p| !p.open_transactions.is_empty()) {
            return Err(CommandError::InvalidLink(format!(
                "topic {} has open transactions: end them before the link takes it over",
                topic.name
            )));
        }
        let cuts: Vec<(i32, i64)> = fork_offsets
            .iter()
            .enumerate()
            .filter(|(p, fork)| topic.partitions.get(*p).is_some_and(|log| log.next_offset > **fork))
            .map(|(p, fork)| (i32::try_from(p).unwrap_or(i32::MAX), *fork))
            .collect();
        for (partition, fork) in cuts {
            self.mirror_truncations.insert((topic_id, partition), fork);
        }
        // Its producers wrote on this side; from here on the topic holds what the link writes.
        self.forget_topic_producers(topic_id);
        self.mirror_topics.insert(topic_id, link.to_owned());
        Ok(Outcome::Done)
    }

    /// Cuts an adopted partition back to its fork offset: entries past it are dropped, the one
    /// spanning it keeps `cut`'s bytes, and transactions past it are forgotten.
    pub(super) fn truncate_mirror_partition(
        &mut self,
        link: &str,
        topic_id: TopicId,
        partition: i32,
        offset: i64,
        cut: Option<ChunkCut>,
    ) -> Result<Outcome, CommandError> {
        self.require_links()?;
        self.mirroring_link(link)?;
        if self.mirror_link(topic_id) != Some(link)
            || self.mirror_truncations.get(&(topic_id, partition)) != Some(&offset)
        {
            return Err(CommandError::InvalidLink(format!("no cut of {topic_id}-{partition} at {offset} is due")));
        }
        let log = self.partition_mut(topic_id, partition).ok_or(CommandError::UnknownTopicOrPartition)?;
        let spanning = log.index.iter().find(|e| e.base_offset < offset && offset <= e.last_offset);
        let kept = match (spanning.map(|e| &e.data), cut) {
            (None, _) => None,
            (Some(EntryData::Removed), _) => Some(EntryData::Removed),
            (
                Some(
                    EntryData::Chunk { object_id, byte_start, byte_len, .. }
                    | EntryData::CleanedChunk { object_id, byte_start, byte_len, .. }
                    | EntryData::CleanedChunkWithTombstones { object_id, byte_start, byte_len, .. },
                ),
                Some(cut),
            ) if cut.byte_len > 0 && cut.byte_len < *byte_len => {
                let offsets_in_batches = !matches!(spanning.map(|e| &e.data), Some(EntryData::Chunk { .. }));
                let (object_id, byte_start) = (*object_id, *byte_start);
                Some(if offsets_in_batches {
                    EntryData::CleanedChunk { object_id, byte_start, byte_len: cut.byte_len, crc32c: cut.crc32c }
                } else {
                    EntryData::Chunk { object_id, byte_start, byte_len: cut.byte_len, crc32c: cut.crc32c }
                })
            }
            (Some(_), _) => {
                return Err(CommandError::InvalidCommit(format!(
                    "cutting {topic_id}-{partition} at {offset} needs the bytes kept of the entry spanning it"
                )));
            }
        };
        let mut released = Vec::new();
        while log.index.back().is_some_and(|e| e.base_offset >= offset || e.last_offset >= offset) {
            let Some(entry) = log.index.pop_back() else { break };
            log.index_bytes -= entry.stored_bytes();
            if entry.base_offset < offset {
                // The spanning entry: its kept part goes back, holding its object.
                let data = kept.clone().unwrap_or(EntryData::Removed);
                let replacement = IndexEntry {
                    base_offset: entry.base_offset,
                    last_offset: offset - 1,
                    timestamp_max: entry.timestamp_max,
                    data,
                };
                log.index_bytes += replacement.stored_bytes();
                if replacement.object_id().is_none() {
                    released.extend(entry.object_id());
                }
                log.index.push_back(replacement);
                break;
            }
            released.extend(entry.object_id());
        }
        log.next_offset = offset.max(log.log_start_offset);
        log.open_transactions.retain(|_, first| *first < offset);
        while log.aborted_transactions.back().is_some_and(|a| a.last_offset >= offset) {
            log.aborted_transactions.pop_back();
        }
        for object_id in released {
            self.release_object(object_id);
        }
        self.mirror_truncations.remove(&(topic_id, partition));
        Ok(Outcome::Done)
    }

    /// Copies a source group's committed offsets: only forward, and only while the group has no
    /// members here (a consumer that moved over owns its offsets from then on).
    pub(super) fn mirror_group_offsets(
        &mut self,
        link: &str,
        group_id: &str,
        offsets: Vec<super::OffsetCommit>,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        self.require_links()?;
        self.mirroring_link(link)?;
        super::groups::validate_group_id(group_id)?;
        if self.groups.get(group_id).is_some_and(|g| !g.membership.members.is_empty()) {
            return Err(CommandError::GroupNotEmpty);
        }
        let forward: Vec<super::OffsetCommit> = offsets
            .into_iter()
            .filter(|o| {
                self.topic_by_name(&o.topic).is_some_and(|t| self.mirror_link(t.topic_id) == Some(link))
                    && self
                        .groups
                        .get(group_id)
                        .and_then(|g| g.offsets.get(&o.topic, o.partition))
                        .is_none_or(|c| c.offset < o.offset)
            })
            .collect();
        if forward.is_empty() {
            return Ok(Outcome::Done);
        }
        self.commit_offsets(group_id, forward, None, now_ms)
    }
}

#[cfg(test)]
mod tests;
