//! How today's format stores the lease of the agent that runs background jobs. Each type is the in-
//! memory type of the same name in [`crate::state`], field for field in the order encoded; commands
//! carry these layouts too. The conversions below name every field, so a change to the in-memory
//! type compiles only once they say how it is stored. A change to a type here is a format change: a
//! new format version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

/// [`crate::state::JobLease`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JobLease {
    pub(crate) agent_id: i32,
    pub(crate) expires_ms: i64,
}

stored_layout!(JobLease <=> crate::state::JobLease { agent_id, expires_ms });
