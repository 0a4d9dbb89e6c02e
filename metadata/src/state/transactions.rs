//! Idempotent producers and transactions: producer ids and epochs, the last sequences each
//! producer wrote per partition (duplicates are answered with their original offsets), and the
//! transaction coordinator's state.
//!
//! Because all of this lives in one state machine, ending a transaction is one atomic command:
//! markers go into every partition, the last stable offsets move and the transaction's offsets
//! become visible together. Kafka needs a two-phase protocol across brokers for the same.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{EntryData, IndexEntry, Partition, State, TopicId, TxnMarker};
use crate::command::{ChunkCommit, ChunkProducer, CommandError, Outcome, ProducerIdEpoch};
use crate::limits::{
    PARTITION_OFFSET_MAX, PRODUCER_COUNT_MAX, PRODUCER_SEQUENCES_KEPT, TRANSACTION_COUNT_MAX, TRANSACTION_GROUPS_MAX,
    TRANSACTION_PARTITIONS_MAX, TRANSACTIONAL_ID_BYTES_MAX,
};
use crate::state::OffsetCommit;

/// Epochs go up to this; a producer whose epoch would pass it gets a new producer id instead.
const PRODUCER_EPOCH_MAX: i16 = i16::MAX - 1;

/// One idempotent or transactional producer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The current epoch; batches with an older one are fenced.
    pub epoch: i16,
    pub transactional_id: Option<String>,
    /// Largest batch timestamp written (or the InitProducerId time): for `producer.id.expiration.ms`.
    pub last_active_ms: i64,
    /// Recent sequences by partition.
    pub partitions: BTreeMap<(TopicId, i32), ProducerSequences>,
    /// The namespace key (`crate::namespace`) of the tenant whose InitProducerId created it
    /// (`None` without tenants): only that tenant's topics take its batches, and only its
    /// clients may bump its epoch. A tenant created again under the same name has another key.
    pub tenant: Option<String>,
}

/// A producer's last chunks in one partition, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerSequences {
    pub epoch: i16,
    pub recent: VecDeque<SequencedChunk>,
}

/// The sequences and offsets of one appended chunk (one request's batches for a partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequencedChunk {
    pub first_sequence: i32,
    pub last_sequence: i32,
    pub base_offset: i64,
    pub last_offset: i64,
    pub timestamp_max: i64,
}

/// Kafka's transaction states, as ListTransactions names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    CompleteCommit,
    CompleteAbort,
}

impl TxnState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::Ongoing => "Ongoing",
            Self::CompleteCommit => "CompleteCommit",
            Self::CompleteAbort => "CompleteAbort",
        }
    }
}

/// One transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionRecord {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump made by a timeout or an operator abort: the producer that
    /// held it may still re-initialize with it (KIP-360) rather than be fenced.
    pub epoch_before_abort: Option<i16>,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(TopicId, i32)>,
    pub groups: BTreeSet<String>,
    /// Offsets committed in the transaction, by group then (topic name, partition).
    pub pending_offsets: BTreeMap<String, BTreeMap<(String, i32), OffsetCommit>>,
    /// When the current transaction started (its first partition or group was added).
    pub started_ms: i64,
    pub last_update_ms: i64,
}

/// An aborted transaction's offsets in one partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
    /// The abort marker's offset.
    pub last_offset: i64,
}

impl Partition {
    /// Appends a transaction marker at the log end; an abort of a transaction that wrote here
    /// (from `first_offset`) becomes an aborted range. Nothing past the offset limit.
    pub(super) fn append_marker(&mut self, marker: TxnMarker, first_offset: Option<i64>, now_ms: i64) {
        let offset = self.next_offset;
        if offset >= PARTITION_OFFSET_MAX {
            return;
        }
        self.index.push_back(IndexEntry {
            base_offset: offset,
            last_offset: offset,
            timestamp_max: now_ms,
            data: EntryData::Marker(marker),
        });
        self.next_offset = offset + 1;
        if !marker.commit
            && let Some(first_offset) = first_offset
        {
            self.aborted_transactions.push_back(AbortedTransaction {
                producer_id: marker.producer_id,
                first_offset,
                last_offset: offset,
            });
        }
    }
}

/// What to do with a producer's chunk.
pub(super) enum Admission {
    Append,
    /// Already written (a retry): answered with the original base offset.
    Duplicate(i64),
}

/// The sequence after `sequence`; sequences wrap to 0 after `i32::MAX`, as in Kafka.
pub(super) fn next_sequence(sequence: i32) -> i32 {
    if sequence == i32::MAX { 0 } else { sequence + 1 }
}

/// The last sequence a batch of `count` records starting at `base` takes.
fn last_sequence(base: i32, count: u32) -> i32 {
    let last = i64::from(base) + i64::from(count) - 1;
    // Wraps past i32::MAX to 0 like Kafka; the result is always within 0..=i32::MAX.
    i32::try_from(last % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

/// First and last sequence of a producer chunk, if its batches' sequences are contiguous.
pub(super) fn chunk_sequences(chunk: &ChunkCommit) -> Result<(i32, i32), CommandError> {
    let first = chunk.batches.first().map_or(-1, |b| b.base_sequence);
    let mut expected = first;
    let mut last = first;
    for batch in &chunk.batches {
        if batch.base_sequence < 0 || batch.base_sequence != expected {
            return Err(CommandError::OutOfOrderSequence { expected, found: batch.base_sequence });
        }
        last = last_sequence(batch.base_sequence, batch.offset_count);
        expected = next_sequence(last);
    }
    Ok((first, last))
}

fn validate_transactional_id(id: &str) -> Result<(), CommandError> {
    if id.is_empty() || id.len() > TRANSACTIONAL_ID_BYTES_MAX {
        return Err(CommandError::InvalidTxnState(format!(
            "transactional ids are 1 to {TRANSACTIONAL_ID_BYTES_MAX} bytes"
        )));
    }
    Ok(())
}

impl State {
    /// Decides whether a producer's chunk is appended, answered as a duplicate, or refused.
    pub(super) fn admit_producer_chunk(
        &self,
        chunk: &ChunkCommit,
        producer: ChunkProducer,
    ) -> Result<Admission, CommandError> {
        let (first, last) = chunk_sequences(chunk)?;
        let tenant = self.topics.get(&chunk.topic_id).and_then(|t| crate::namespace::key_of(&t.name));
        let Some(record) = self.producers.get(&producer.producer_id) else {
            // An expired id has no owner on record: in a cluster of tenants any of them could
            // adopt it, so its producer starts again with a new id (KIP-360), as for an id
            // never handed out.
            if producer.producer_id >= self.next_producer_id || tenant.is_some() {
                return Err(CommandError::UnknownProducerId(producer.producer_id));
            }
            if producer.transactional {
                return Err(CommandError::InvalidTxnState("the producer has no ongoing transaction".into()));
            }
            if self.producers.len() >= PRODUCER_COUNT_MAX {
                return Err(CommandError::LimitReached(format!("at most {PRODUCER_COUNT_MAX} producers")));
            }
            // Its state expired: like Kafka, accept any sequence and start tracking again.
            return Ok(Admission::Append);
        };
        if record.tenant.as_deref() != tenant {
            // Another tenant's producer: as if it did not exist, whatever the epoch.
            return Err(CommandError::UnknownProducerId(producer.producer_id));
        }
        if producer.producer_epoch < record.epoch {
            return Err(CommandError::InvalidProducerEpoch { found: producer.producer_epoch, current: record.epoch });
        }
        if producer.transactional {
            let in_transaction =
                record.transactional_id.as_ref().and_then(|id| self.transactions.get(id)).is_some_and(|t| {
                    t.producer_id == producer.producer_id
                        && t.producer_epoch == producer.producer_epoch
                        && t.state == TxnState::Ongoing
                        && t.partitions.contains(&(chunk.topic_id, chunk.partition))
                });
            if !in_transaction {
                return Err(CommandError::InvalidTxnState("partition was not added to an ongoing transaction".into()));
            }
        }
        let Some(sequences) = record.partitions.get(&(chunk.topic_id, chunk.partition)) else {
            return Ok(Admission::Append);
        };
        if sequences.epoch < producer.producer_epoch {
            // A new epoch starts its sequences again at 0.
            return if first == 0 {
                Ok(Admission::Append)
            } else {
                Err(CommandError::SequenceGap { expected: 0, found: first })
            };
        }
        if let Some(original) = sequences.recent.iter().find(|c| c.first_sequence == first && c.last_sequence == last) {
            return Ok(Admission::Duplicate(original.base_offset));
        }
        match sequences.recent.back() {
            Some(previous) if next_sequence(previous.last_sequence) != first => {
                Err(CommandError::SequenceGap { expected: next_sequence(previous.last_sequence), found: first })
            }
            _ => Ok(Admission::Append),
        }
    }

    /// Records an appended producer chunk's sequences, and opens its transaction in the
    /// partition if it is transactional.
    pub(super) fn record_producer_chunk(
        &mut self,
        chunk: &ChunkCommit,
        producer: ChunkProducer,
        base_offset: i64,
        last_offset: i64,
        timestamp_max: i64,
    ) {
        let Ok((first_sequence, last_sequence)) = chunk_sequences(chunk) else {
            unreachable!("admit_producer_chunk checked the sequences");
        };
        // Only a cluster without tenants re-tracks an expired id (`admit_producer_chunk`).
        let record = self.producers.entry(producer.producer_id).or_insert_with(|| ProducerRecord {
            epoch: producer.producer_epoch,
            transactional_id: None,
            last_active_ms: timestamp_max,
            partitions: BTreeMap::new(),
            tenant: None,
        });
        record.epoch = record.epoch.max(producer.producer_epoch);
        record.last_active_ms = record.last_active_ms.max(timestamp_max);
        let sequences = record.partitions.entry((chunk.topic_id, chunk.partition)).or_default();
        if sequences.epoch != producer.producer_epoch {
            sequences.epoch = producer.producer_epoch;
            sequences.recent.clear();
        }
        sequences.recent.push_back(SequencedChunk {
            first_sequence,
            last_sequence,
            base_offset,
            last_offset,
            timestamp_max,
        });
        while sequences.recent.len() > PRODUCER_SEQUENCES_KEPT {
            sequences.recent.pop_front();
        }
        if producer.transactional
            && let Some(partition) = self.partition_mut(chunk.topic_id, chunk.partition)
        {
            partition.open_transactions.entry(producer.producer_id).or_insert(base_offset);
        }
    }

    /// Keeps [`super::TenantRecord::producer_ids`] with the producers table: one more (`added`)
    /// or one fewer producer id bound to namespace `key`.
    fn count_producer_id(&mut self, key: Option<&str>, added: bool) {
        let Some((name, _)) = key.and_then(|k| self.tenant_of_key(k)) else { return };
        let name = name.to_owned();
        if let Some(record) = self.tenants.get_mut(&name) {
            record.producer_ids = if added { record.producer_ids + 1 } else { record.producer_ids.saturating_sub(1) };
        }
    }

    pub(super) fn allocate_producer_id(
        &mut self,
        transactional_id: Option<String>,
        tenant: Option<String>,
        now_ms: i64,
    ) -> Result<i64, CommandError> {
        if self.producers.len() >= PRODUCER_COUNT_MAX {
            return Err(CommandError::LimitReached(format!("at most {PRODUCER_COUNT_MAX} producers")));
        }
        if let Some(key) = &tenant {
            let Some((name, _)) = self.tenant_of_key(key) else {
                return Err(CommandError::CredentialNotFound(format!("tenant of namespace {key:?}")));
            };
            self.check_table_quota(name, super::TenantTable::ProducerIds)?;
        }
        self.count_producer_id(tenant.as_deref(), true);
        let producer_id = self.next_producer_id;
        self.next_producer_id += 1;
        self.producers.insert(
            producer_id,
            ProducerRecord { epoch: 0, transactional_id, last_active_ms: now_ms, partitions: BTreeMap::new(), tenant },
        );
        Ok(producer_id)
    }

    pub(super) fn init_producer_id(
        &mut self,
        transactional_id: Option<String>,
        transaction_timeout_ms: i32,
        expected: Option<ProducerIdEpoch>,
        now_ms: i64,
        tenant: Option<String>,
    ) -> Result<Outcome, CommandError> {
        let expected = expected.filter(|e| e.producer_id >= 0);
        let Some(id) = transactional_id else {
            // KIP-360: an idempotent producer bumps its own epoch to reset its sequences.
            if let Some(e) = expected
                && let Some(record) = self.producers.get_mut(&e.producer_id)
                && record.transactional_id.is_none()
            {
                if record.tenant != tenant {
                    return Err(CommandError::InvalidProducerIdMapping);
                }
                if record.epoch != e.producer_epoch {
                    return Err(CommandError::InvalidProducerEpoch { found: e.producer_epoch, current: record.epoch });
                }
                if record.epoch < PRODUCER_EPOCH_MAX {
                    record.epoch += 1;
                    record.last_active_ms = record.last_active_ms.max(now_ms);
                    return Ok(Outcome::ProducerId(ProducerIdEpoch {
                        producer_id: e.producer_id,
                        producer_epoch: record.epoch,
                    }));
                }
            }
            let producer_id = self.allocate_producer_id(None, tenant, now_ms)?;
            return Ok(Outcome::ProducerId(ProducerIdEpoch { producer_id, producer_epoch: 0 }));
        };
        validate_transactional_id(&id)?;
        let max = self.broker_config_i64("transaction.max.timeout.ms").unwrap_or(900_000);
        if transaction_timeout_ms <= 0 || i64::from(transaction_timeout_ms) > max {
            return Err(CommandError::InvalidTransactionTimeout { requested: transaction_timeout_ms, max });
        }
        let Some(txn) = self.transactions.get(&id) else {
            if self.transactions.len() >= TRANSACTION_COUNT_MAX {
                return Err(CommandError::LimitReached(format!("at most {TRANSACTION_COUNT_MAX} transactional ids")));
            }
            if let Some(owner) = self.owning_tenant(&id) {
                self.check_table_quota(owner, super::TenantTable::TransactionalIds)?;
            }
            let producer_id = self.allocate_producer_id(Some(id.clone()), tenant, now_ms)?;
            self.transactions.insert(
                id,
                TransactionRecord {
                    producer_id,
                    producer_epoch: 0,
                    epoch_before_abort: None,
                    timeout_ms: transaction_timeout_ms,
                    state: TxnState::Empty,
                    partitions: BTreeSet::new(),
                    groups: BTreeSet::new(),
                    pending_offsets: BTreeMap::new(),
                    started_ms: now_ms,
                    last_update_ms: now_ms,
                },
            );
            return Ok(Outcome::ProducerId(ProducerIdEpoch { producer_id, producer_epoch: 0 }));
        };
        if let Some(e) = expected {
            let current = e.producer_id == txn.producer_id
                && (e.producer_epoch == txn.producer_epoch || txn.epoch_before_abort == Some(e.producer_epoch));
            if !current {
                return Err(CommandError::ProducerFenced);
            }
        }
        // A new instance fences the old one: its open transaction is aborted. The epoch is bumped
        // first, as it may fail (a new producer id past a limit) and a refused command changes
        // nothing.
        let (ongoing, old) = (
            txn.state == TxnState::Ongoing,
            ProducerIdEpoch { producer_id: txn.producer_id, producer_epoch: txn.producer_epoch },
        );
        let producer = self.bump_epoch(&id, tenant, now_ms)?;
        if ongoing {
            self.complete_txn(&id, false, old, now_ms);
        }
        let Some(txn) = self.transactions.get_mut(&id) else {
            unreachable!("the transaction was just read");
        };
        txn.epoch_before_abort = None;
        txn.timeout_ms = transaction_timeout_ms;
        txn.state = TxnState::Empty;
        txn.last_update_ms = now_ms;
        Ok(Outcome::ProducerId(producer))
    }

    /// Gives a transactional id's producer the next epoch, or a new producer id once epochs run
    /// out; `tenant` owns the producer from then on.
    fn bump_epoch(&mut self, id: &str, tenant: Option<String>, now_ms: i64) -> Result<ProducerIdEpoch, CommandError> {
        // The producer is bound to the asking session's namespace: never to one of a tenant not
        // created yet (no session can hold it, and the tenant's count would miss this producer
        // once it is). A deleted tenant's key is still accepted here, as logs written before
        // this check replay so.
        if let Some(key) = &tenant
            && crate::namespace::parse_key(key).is_none_or(|(_, id)| id > self.last_tenant_id)
        {
            return Err(CommandError::CredentialNotFound(format!("tenant of namespace {key:?}")));
        }
        let Some(txn) = self.transactions.get(id) else {
            return Err(CommandError::TransactionalIdNotFound);
        };
        let (producer_id, producer_epoch) = if txn.producer_epoch < PRODUCER_EPOCH_MAX {
            (txn.producer_id, txn.producer_epoch + 1)
        } else {
            (self.allocate_producer_id(Some(id.to_owned()), tenant.clone(), now_ms)?, 0)
        };
        if let Some(record) = self.producers.get_mut(&producer_id) {
            record.epoch = producer_epoch;
            record.last_active_ms = record.last_active_ms.max(now_ms);
            let previous = std::mem::replace(&mut record.tenant, tenant.clone());
            if previous != tenant {
                self.count_producer_id(previous.as_deref(), false);
                self.count_producer_id(tenant.as_deref(), true);
            }
        } else {
            self.count_producer_id(tenant.as_deref(), true);
            self.producers.insert(
                producer_id,
                ProducerRecord {
                    epoch: producer_epoch,
                    transactional_id: Some(id.to_owned()),
                    last_active_ms: now_ms,
                    partitions: BTreeMap::new(),
                    tenant,
                },
            );
        }
        if let Some(txn) = self.transactions.get_mut(id) {
            txn.producer_id = producer_id;
            txn.producer_epoch = producer_epoch;
        }
        Ok(ProducerIdEpoch { producer_id, producer_epoch })
    }

    /// The transaction `id` if `producer` is its current producer.
    fn current_txn(&mut self, id: &str, producer: ProducerIdEpoch) -> Result<&mut TransactionRecord, CommandError> {
        let txn = self.transactions.get_mut(id).ok_or(CommandError::InvalidProducerIdMapping)?;
        if txn.producer_id != producer.producer_id {
            return Err(CommandError::InvalidProducerIdMapping);
        }
        if txn.producer_epoch != producer.producer_epoch {
            return Err(CommandError::ProducerFenced);
        }
        Ok(txn)
    }

    /// Starts the transaction if it is not running.
    fn begin_if_idle(txn: &mut TransactionRecord, now_ms: i64) {
        if txn.state != TxnState::Ongoing {
            txn.state = TxnState::Ongoing;
            txn.started_ms = now_ms;
            txn.partitions.clear();
            txn.groups.clear();
            txn.pending_offsets.clear();
        }
        txn.last_update_ms = now_ms;
    }

    pub(super) fn add_partitions_to_txn(
        &mut self,
        id: &str,
        producer: ProducerIdEpoch,
        partitions: Vec<(TopicId, i32)>,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        let known: Vec<bool> = partitions.iter().map(|(t, p)| self.partition(*t, *p).is_some()).collect();
        if let Some((topic_id, _)) = partitions.iter().find(|(t, _)| self.mirror_link(*t).is_some()) {
            self.refuse_mirror(*topic_id)?;
        }
        let txn = self.current_txn(id, producer)?;
        if known.iter().any(|k| !k) {
            return Ok(Outcome::PartitionsAdded(
                known
                    .iter()
                    .map(|k| {
                        Err(if *k {
                            CommandError::OperationNotAttempted
                        } else {
                            CommandError::UnknownTopicOrPartition
                        })
                    })
                    .collect(),
            ));
        }
        let added: BTreeSet<(TopicId, i32)> = partitions.iter().copied().collect();
        let already = if txn.state == TxnState::Ongoing { txn.partitions.len() } else { 0 };
        if already + added.len() > TRANSACTION_PARTITIONS_MAX {
            return Err(CommandError::LimitReached(format!(
                "at most {TRANSACTION_PARTITIONS_MAX} partitions per transaction"
            )));
        }
        Self::begin_if_idle(txn, now_ms);
        txn.partitions.extend(added);
        Ok(Outcome::PartitionsAdded(partitions.iter().map(|_| Ok(())).collect()))
    }

    pub(super) fn add_offsets_to_txn(
        &mut self,
        id: &str,
        producer: ProducerIdEpoch,
        group_id: String,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        super::groups::validate_group_id(&group_id)?;
        let txn = self.current_txn(id, producer)?;
        if txn.state == TxnState::Ongoing
            && txn.groups.len() >= TRANSACTION_GROUPS_MAX
            && !txn.groups.contains(&group_id)
        {
            return Err(CommandError::LimitReached(format!("at most {TRANSACTION_GROUPS_MAX} groups per transaction")));
        }
        Self::begin_if_idle(txn, now_ms);
        txn.groups.insert(group_id);
        Ok(Outcome::Done)
    }

    pub(super) fn txn_commit_offsets(
        &mut self,
        id: &str,
        producer: ProducerIdEpoch,
        group_id: String,
        offsets: Vec<OffsetCommit>,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        let results = self.check_offset_commits(&offsets);
        let txn = self.current_txn(id, producer)?;
        if txn.state != TxnState::Ongoing || !txn.groups.contains(&group_id) {
            return Err(CommandError::InvalidTxnState("the group was not added to an ongoing transaction".into()));
        }
        txn.last_update_ms = now_ms;
        let pending = txn.pending_offsets.entry(group_id).or_default();
        for (commit, result) in offsets.into_iter().zip(&results) {
            if result.is_ok() {
                pending.insert((commit.topic.clone(), commit.partition), commit);
            }
        }
        Ok(Outcome::OffsetsCommitted(results))
    }

    pub(super) fn end_txn(
        &mut self,
        id: &str,
        producer: ProducerIdEpoch,
        commit: bool,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        let txn = self.current_txn(id, producer)?;
        match (txn.state, commit) {
            (TxnState::Ongoing, _) => {
                self.complete_txn(id, commit, producer, now_ms);
                Ok(Outcome::Done)
            }
            // A retried EndTxn whose first attempt completed.
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(Outcome::Done),
            (state, _) => Err(CommandError::InvalidTxnState(format!(
                "cannot {} a transaction in state {}",
                if commit { "commit" } else { "abort" },
                state.name()
            ))),
        }
    }

    /// EndTxn of transaction version 2: ends the transaction and bumps the producer's epoch, so
    /// the next transaction has an epoch of its own. The markers carry the new epoch (as Kafka
    /// writes them), except when epochs ran out and the producer id changes: they then carry
    /// the old id and epoch, which opened the transaction in each partition. A retry of an
    /// EndTxn that already ended the transaction (the bumped epoch's answer was lost) gets the
    /// same answer again, as does an abort of a transaction a timeout already aborted.
    pub(super) fn end_txn_v2(
        &mut self,
        id: &str,
        producer: ProducerIdEpoch,
        commit: bool,
        now_ms: i64,
    ) -> Result<Outcome, CommandError> {
        let txn = self.transactions.get(id).ok_or(CommandError::InvalidProducerIdMapping)?;
        let current = ProducerIdEpoch { producer_id: txn.producer_id, producer_epoch: txn.producer_epoch };
        let ended_as_asked =
            matches!((txn.state, commit), (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false));
        let bumped_from_request = producer.producer_id == current.producer_id
            && producer.producer_epoch < PRODUCER_EPOCH_MAX
            && producer.producer_epoch + 1 == current.producer_epoch;
        // Epochs ran out at the last EndTxn: the id changed and the epoch started again at 0.
        let replaced_from_request = current.producer_epoch == 0
            && producer.producer_epoch == PRODUCER_EPOCH_MAX
            && producer.producer_id != current.producer_id
            && self.producers.get(&producer.producer_id).is_some_and(|p| p.transactional_id.as_deref() == Some(id));
        if ended_as_asked && (bumped_from_request || replaced_from_request) {
            return Ok(Outcome::ProducerId(current));
        }
        let txn = self.current_txn(id, producer)?;
        let ongoing = txn.state == TxnState::Ongoing;
        // An abort of a transaction nothing reached (a client counts one as begun at its first
        // send, even if every record was refused) only moves the epoch on, as Kafka's does.
        if !ongoing && commit {
            return Err(CommandError::InvalidTxnState(format!(
                "cannot commit a transaction in state {}",
                txn.state.name()
            )));
        }
        let tenant = self.producers.get(&producer.producer_id).and_then(|p| p.tenant.clone());
        // The bump first: it may fail (a new producer id past a limit), and a refused command
        // changes nothing. The markers carry the new epoch while the id stays.
        let next = self.bump_epoch(id, tenant, now_ms)?;
        if ongoing {
            let marker = if next.producer_id == producer.producer_id { next } else { producer };
            self.complete_txn(id, commit, marker, now_ms);
        }
        if let Some(txn) = self.transactions.get_mut(id) {
            txn.epoch_before_abort = None;
            if !ongoing {
                txn.state = TxnState::CompleteAbort;
                txn.last_update_ms = now_ms;
            }
        }
        Ok(Outcome::ProducerId(next))
    }

    /// Aborts `id`'s open transaction and fences its producer (a timeout or an operator).
    fn fence_and_abort(&mut self, id: &str, now_ms: i64) -> Result<(), CommandError> {
        let Some((old_epoch, producer_id)) = self.transactions.get(id).map(|t| (t.producer_epoch, t.producer_id))
        else {
            return Err(CommandError::TransactionalIdNotFound);
        };
        let tenant = self.producers.get(&producer_id).and_then(|p| p.tenant.clone());
        // The bump first: it may fail, and then nothing has changed.
        self.bump_epoch(id, tenant, now_ms)?;
        self.complete_txn(id, false, ProducerIdEpoch { producer_id, producer_epoch: old_epoch }, now_ms);
        if let Some(txn) = self.transactions.get_mut(id) {
            txn.epoch_before_abort = Some(old_epoch);
        }
        Ok(())
    }

    pub(super) fn abort_txn_by_operator(&mut self, id: &str, now_ms: i64) -> Result<Outcome, CommandError> {
        match self.transactions.get(id).map(|t| t.state) {
            None => Err(CommandError::TransactionalIdNotFound),
            Some(TxnState::Ongoing) => self.fence_and_abort(id, now_ms).map(|()| Outcome::Done),
            Some(state) => Err(CommandError::InvalidTxnState(format!("transaction is {}, not Ongoing", state.name()))),
        }
    }

    /// Ends the ongoing transaction `id`: a marker of `producer` (the id that opened the
    /// transaction in each partition) in each of its partitions, its offsets committed (or
    /// dropped), and the partitions' last stable offsets moved on.
    fn complete_txn(&mut self, id: &str, commit: bool, producer: ProducerIdEpoch, now_ms: i64) {
        let Some(txn) = self.transactions.get_mut(id) else { return };
        let ProducerIdEpoch { producer_id, producer_epoch } = producer;
        txn.state = if commit { TxnState::CompleteCommit } else { TxnState::CompleteAbort };
        txn.last_update_ms = now_ms;
        txn.groups.clear();
        let partitions = std::mem::take(&mut txn.partitions);
        let pending = std::mem::take(&mut txn.pending_offsets);
        let marker = TxnMarker { producer_id, producer_epoch, commit };
        for (topic_id, index) in partitions {
            let Some(partition) = self.partition_mut(topic_id, index) else { continue };
            let first_offset = partition.open_transactions.remove(&producer_id);
            partition.append_marker(marker, first_offset, now_ms);
        }
        if commit {
            for (group_id, offsets) in pending {
                let offsets = offsets.into_values().collect();
                // Checked when committed into the transaction; a partition deleted since is skipped.
                let _ = self.commit_offsets(&group_id, offsets, None, now_ms);
            }
        }
    }

    /// Aborts transactions past their timeout and forgets idle producers and transactional ids.
    pub(super) fn expire_transactions(&mut self, now_ms: i64) -> Result<Outcome, CommandError> {
        let timed_out: Vec<String> = self
            .transactions
            .iter()
            .filter(|(_, t)| {
                t.state == TxnState::Ongoing && now_ms.saturating_sub(t.started_ms) > i64::from(t.timeout_ms)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in timed_out {
            self.fence_and_abort(&id, now_ms)?;
        }
        let producer_expiry = self.broker_config_i64("producer.id.expiration.ms").unwrap_or(86_400_000);
        let txn_expiry = self.broker_config_i64("transactional.id.expiration.ms").unwrap_or(604_800_000);
        self.transactions
            .retain(|_, t| t.state == TxnState::Ongoing || now_ms.saturating_sub(t.last_update_ms) < txn_expiry);
        let transactions = &self.transactions;
        let mut expired = Vec::new();
        self.producers.retain(|producer_id, record| {
            let current_txn = record
                .transactional_id
                .as_ref()
                .and_then(|id| transactions.get(id))
                .is_some_and(|t| t.producer_id == *producer_id);
            let kept = current_txn || now_ms.saturating_sub(record.last_active_ms) < producer_expiry;
            if !kept {
                expired.extend(record.tenant.take());
            }
            kept
        });
        for key in expired {
            self.count_producer_id(Some(&key), false);
        }
        self.forget_idle_idempotency_keys();
        Ok(Outcome::Done)
    }

    /// Whether `expire_transactions` at `now_ms` would change anything (so the leader proposes
    /// it only then).
    pub fn transactions_due(&self, now_ms: i64) -> bool {
        let producer_expiry = self.broker_config_i64("producer.id.expiration.ms").unwrap_or(86_400_000);
        let txn_expiry = self.broker_config_i64("transactional.id.expiration.ms").unwrap_or(604_800_000);
        self.transactions.values().any(|t| {
            if t.state == TxnState::Ongoing {
                now_ms.saturating_sub(t.started_ms) > i64::from(t.timeout_ms)
            } else {
                now_ms.saturating_sub(t.last_update_ms) >= txn_expiry
            }
        }) || self
            .producers
            .values()
            .any(|p| p.transactional_id.is_none() && now_ms.saturating_sub(p.last_active_ms) >= producer_expiry)
    }

    /// Offsets of `group` committed in an open transaction, by (topic, partition): a consumer
    /// asking for stable offsets must wait for them.
    pub fn has_pending_txn_offset(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_owned(), partition);
        self.transactions
            .values()
            .any(|t| t.state == TxnState::Ongoing && t.pending_offsets.get(group).is_some_and(|o| o.contains_key(&key)))
    }

    /// A deleted topic leaves no producer sequences or transaction partitions behind.
    pub(super) fn forget_topic_producers(&mut self, topic_id: TopicId) {
        for record in self.producers.values_mut() {
            record.partitions.retain(|(t, _), _| *t != topic_id);
        }
        for txn in self.transactions.values_mut() {
            txn.partitions.retain(|(t, _)| *t != topic_id);
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
