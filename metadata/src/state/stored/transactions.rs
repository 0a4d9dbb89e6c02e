//! How today's format stores producers, their sequences and transactions. Each type is the in-
//! memory type of the same name in [`crate::state`], field for field in the order encoded; commands
//! carry these layouts too. The conversions below name every field, so a change to the in-memory
//! type compiles only once they say how it is stored. A change to a type here is a format change: a
//! new format version, a mirror of the old layout and a golden file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::OffsetCommit;
use crate::state::TopicId;

/// [`crate::state::AbortedTransaction`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AbortedTransaction {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
}

impl From<crate::state::AbortedTransaction> for AbortedTransaction {
    fn from(aborted_transaction: crate::state::AbortedTransaction) -> Self {
        let crate::state::AbortedTransaction { producer_id, first_offset, last_offset } = aborted_transaction;
        Self { producer_id, first_offset, last_offset }
    }
}

impl From<AbortedTransaction> for crate::state::AbortedTransaction {
    fn from(aborted_transaction: AbortedTransaction) -> Self {
        let AbortedTransaction { producer_id, first_offset, last_offset } = aborted_transaction;
        Self { producer_id, first_offset, last_offset }
    }
}

/// [`crate::state::ProducerRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProducerRecord {
    pub(crate) epoch: i16,
    pub(crate) transactional_id: Option<String>,
    pub(crate) last_active_ms: i64,
    pub(crate) partitions: BTreeMap<(TopicId, i32), ProducerSequences>,
    pub(crate) tenant: Option<String>,
}

impl From<crate::state::ProducerRecord> for ProducerRecord {
    fn from(producer_record: crate::state::ProducerRecord) -> Self {
        let crate::state::ProducerRecord { epoch, transactional_id, last_active_ms, partitions, tenant } =
            producer_record;
        Self {
            epoch,
            transactional_id,
            last_active_ms,
            partitions: partitions.into_iter().map(|(key, value)| (key, value.into())).collect(),
            tenant,
        }
    }
}

impl From<ProducerRecord> for crate::state::ProducerRecord {
    fn from(producer_record: ProducerRecord) -> Self {
        let ProducerRecord { epoch, transactional_id, last_active_ms, partitions, tenant } = producer_record;
        Self {
            epoch,
            transactional_id,
            last_active_ms,
            partitions: partitions.into_iter().map(|(key, value)| (key, value.into())).collect(),
            tenant,
        }
    }
}

/// [`crate::state::ProducerSequences`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProducerSequences {
    pub(crate) epoch: i16,
    pub(crate) recent: VecDeque<SequencedChunk>,
}

impl From<crate::state::ProducerSequences> for ProducerSequences {
    fn from(producer_sequences: crate::state::ProducerSequences) -> Self {
        let crate::state::ProducerSequences { epoch, recent } = producer_sequences;
        Self { epoch, recent: recent.into_iter().map(Into::into).collect() }
    }
}

impl From<ProducerSequences> for crate::state::ProducerSequences {
    fn from(producer_sequences: ProducerSequences) -> Self {
        let ProducerSequences { epoch, recent } = producer_sequences;
        Self { epoch, recent: recent.into_iter().map(Into::into).collect() }
    }
}

/// [`crate::state::SequencedChunk`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SequencedChunk {
    pub(crate) first_sequence: i32,
    pub(crate) last_sequence: i32,
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) timestamp_max: i64,
}

impl From<crate::state::SequencedChunk> for SequencedChunk {
    fn from(sequenced_chunk: crate::state::SequencedChunk) -> Self {
        let crate::state::SequencedChunk { first_sequence, last_sequence, base_offset, last_offset, timestamp_max } =
            sequenced_chunk;
        Self { first_sequence, last_sequence, base_offset, last_offset, timestamp_max }
    }
}

impl From<SequencedChunk> for crate::state::SequencedChunk {
    fn from(sequenced_chunk: SequencedChunk) -> Self {
        let SequencedChunk { first_sequence, last_sequence, base_offset, last_offset, timestamp_max } = sequenced_chunk;
        Self { first_sequence, last_sequence, base_offset, last_offset, timestamp_max }
    }
}

/// [`crate::state::TransactionRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TransactionRecord {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) epoch_before_abort: Option<i16>,
    pub(crate) timeout_ms: i32,
    pub(crate) state: TxnState,
    pub(crate) partitions: BTreeSet<(TopicId, i32)>,
    pub(crate) groups: BTreeSet<String>,
    pub(crate) pending_offsets: BTreeMap<String, BTreeMap<(String, i32), OffsetCommit>>,
    pub(crate) started_ms: i64,
    pub(crate) last_update_ms: i64,
}

impl From<crate::state::TransactionRecord> for TransactionRecord {
    fn from(transaction_record: crate::state::TransactionRecord) -> Self {
        let crate::state::TransactionRecord {
            producer_id,
            producer_epoch,
            epoch_before_abort,
            timeout_ms,
            state,
            partitions,
            groups,
            pending_offsets,
            started_ms,
            last_update_ms,
        } = transaction_record;
        Self {
            producer_id,
            producer_epoch,
            epoch_before_abort,
            timeout_ms,
            state: state.into(),
            partitions,
            groups,
            pending_offsets: pending_offsets
                .into_iter()
                .map(|(key, value)| (key, value.into_iter().map(|(k1, v1)| (k1, v1.into())).collect()))
                .collect(),
            started_ms,
            last_update_ms,
        }
    }
}

impl From<TransactionRecord> for crate::state::TransactionRecord {
    fn from(transaction_record: TransactionRecord) -> Self {
        let TransactionRecord {
            producer_id,
            producer_epoch,
            epoch_before_abort,
            timeout_ms,
            state,
            partitions,
            groups,
            pending_offsets,
            started_ms,
            last_update_ms,
        } = transaction_record;
        Self {
            producer_id,
            producer_epoch,
            epoch_before_abort,
            timeout_ms,
            state: state.into(),
            partitions,
            groups,
            pending_offsets: pending_offsets
                .into_iter()
                .map(|(key, value)| (key, value.into_iter().map(|(k1, v1)| (k1, v1.into())).collect()))
                .collect(),
            started_ms,
            last_update_ms,
        }
    }
}

/// [`crate::state::TxnState`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum TxnState {
    Empty,
    Ongoing,
    CompleteCommit,
    CompleteAbort,
}

impl From<crate::state::TxnState> for TxnState {
    fn from(txn_state: crate::state::TxnState) -> Self {
        match txn_state {
            crate::state::TxnState::Empty => Self::Empty,
            crate::state::TxnState::Ongoing => Self::Ongoing,
            crate::state::TxnState::CompleteCommit => Self::CompleteCommit,
            crate::state::TxnState::CompleteAbort => Self::CompleteAbort,
        }
    }
}

impl From<TxnState> for crate::state::TxnState {
    fn from(txn_state: TxnState) -> Self {
        match txn_state {
            TxnState::Empty => Self::Empty,
            TxnState::Ongoing => Self::Ongoing,
            TxnState::CompleteCommit => Self::CompleteCommit,
            TxnState::CompleteAbort => Self::CompleteAbort,
        }
    }
}
