//! How today's format stores what each agent registered and the load it last reported. Each type is
//! the in-memory type of the same name in [`crate::state`], field for field in the order encoded;
//! commands carry these layouts too. The conversions below name every field, so a change to the in-
//! memory type compiles only once they say how it is stored. A change to a type here is a format
//! change: a new format version, a mirror of the old layout and a golden file.

use serde::{Deserialize, Serialize};

use super::stored_layout;

/// [`crate::state::AgentLoad`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AgentLoad {
    pub(crate) utilization_milli: u32,
    pub(crate) reported_ms: i64,
}

stored_layout!(AgentLoad <=> crate::state::AgentLoad { utilization_milli, reported_ms });

/// [`crate::state::AgentInfo`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentInfo {
    pub agent_id: i32,
    pub host: String,
    pub port: u16,
    pub zone: Option<String>,
}

stored_layout!(AgentInfo <=> crate::state::AgentInfo { agent_id, host, port, zone });

/// [`crate::state::AgentProfile`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProfile {
    pub roles: AgentRoles,
    pub group: String,
}

stored_layout!(AgentProfile <=> crate::state::AgentProfile { roles, group });

/// [`crate::state::AgentRoles`] as it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRoles {
    pub produce: bool,
    pub fetch: bool,
    pub jobs: bool,
}

stored_layout!(AgentRoles <=> crate::state::AgentRoles { produce, fetch, jobs });

/// [`crate::state::AgentRecord`] as it is stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub info: AgentInfo,
    pub last_heartbeat_ms: i64,
}

stored_layout!(AgentRecord <=> crate::state::AgentRecord { info, last_heartbeat_ms });
