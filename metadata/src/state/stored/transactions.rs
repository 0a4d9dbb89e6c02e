//! How today's format stores producers, their sequences and transactions. Each type is the in-
//! memory type of the same name in [`crate::state`], field for field in the order encoded; commands
//! carry these layouts too. The conversions below name every field, so a change to the in-memory
//! type compiles only once they say how it is stored. A change to a type here is a format change: a
//! new format version, a mirror of the old layout and a golden file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::{restate_via_from, stored_layout};

use super::OffsetCommit;
use crate::state::TopicId;

/// [`crate::state::AbortedTransaction`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AbortedTransaction {
    pub(crate) producer_id: i64,
    pub(crate) first_offset: i64,
    pub(crate) last_offset: i64,
}

stored_layout!(AbortedTransaction <=> crate::state::AbortedTransaction { producer_id, first_offset, last_offset });

/// [`crate::state::ProducerRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProducerRecord {
    pub(crate) epoch: i16,
    pub(crate) transactional_id: Option<String>,
    pub(crate) last_active_ms: i64,
    pub(crate) partitions: BTreeMap<(TopicId, i32), ProducerSequences>,
    pub(crate) tenant: Option<String>,
}

stored_layout!(ProducerRecord <=> crate::state::ProducerRecord { epoch, transactional_id, last_active_ms, partitions, tenant });

/// [`crate::state::ProducerSequences`] as it is stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProducerSequences {
    pub(crate) epoch: i16,
    pub(crate) recent: VecDeque<SequencedChunk>,
}

stored_layout!(ProducerSequences <=> crate::state::ProducerSequences { epoch, recent });

/// [`crate::state::SequencedChunk`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SequencedChunk {
    pub(crate) first_sequence: i32,
    pub(crate) last_sequence: i32,
    pub(crate) base_offset: i64,
    pub(crate) last_offset: i64,
    pub(crate) timestamp_max: i64,
}

stored_layout!(SequencedChunk <=> crate::state::SequencedChunk { first_sequence, last_sequence, base_offset, last_offset, timestamp_max });

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

stored_layout!(TransactionRecord <=> crate::state::TransactionRecord { producer_id, producer_epoch, epoch_before_abort, timeout_ms, state, partitions, groups, pending_offsets, started_ms, last_update_ms });

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

restate_via_from!(TxnState <=> crate::state::TxnState);
