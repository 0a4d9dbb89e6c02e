//! Raft plumbing for the metadata node: the type configuration, the durable log store, the
//! state machine over [`State`](crate::State) and the TCP protocol between nodes.

pub(crate) mod handshakes;
pub(crate) mod log_store;
pub mod network;
pub mod runtime;
#[cfg(test)]
mod sim;
pub mod state_machine;

use std::io::Cursor;

use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use crate::command::{Command, CommandError, Outcome};

/// Raft node ids: operators assign them (`--node-id`), starting at 1.
pub type NodeId = u64;

/// What applying one command produced, as replicated back to the proposer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandResponse(pub Result<Outcome, CommandError>);

impl Default for CommandResponse {
    /// The response to entries that carry no command (leader blanks, membership changes).
    fn default() -> Self {
        Self(Ok(Outcome::Done))
    }
}

openraft::declare_raft_types!(
    /// Floe's Raft types: commands in, command responses out.
    pub TypeConfig:
        D = Command,
        R = CommandResponse,
        NodeId = NodeId,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = runtime::FloeRuntime,
);

/// What `Raft::client_write` answers.
pub(crate) type ClientWriteResult = Result<
    openraft::raft::ClientWriteResponse<TypeConfig>,
    openraft::error::RaftError<NodeId, openraft::error::ClientWriteError<NodeId, BasicNode>>,
>;
