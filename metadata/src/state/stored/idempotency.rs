//! How today's format stores the HTTP gateway's idempotency keys. Each type is the in-memory type
//! of the same name in [`crate::state`], field for field in the order encoded; commands carry these
//! layouts too. The conversions below name every field, so a change to the in-memory type compiles
//! only once they say how it is stored. A change to a type here is a format change: a new format
//! version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

/// [`crate::state::IdempotencyKeyRecord`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IdempotencyKeyRecord {
    pub(crate) producer_id: i64,
    pub(crate) request_digest: u64,
    pub(crate) created_ms: i64,
}

stored_layout!(IdempotencyKeyRecord <=> crate::state::IdempotencyKeyRecord { producer_id, request_digest, created_ms });
