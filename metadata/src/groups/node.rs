//! What the group coordinator needs of its metadata node, so the deterministic simulation
//! (`raft/sim.rs`) runs the same coordinator on simulated nodes and virtual time.

use std::future::Future;
use std::sync::{Arc, RwLockReadGuard};

use super::GroupCoordinator;
use crate::clock::Clock;
use crate::command::{Command, Outcome};
use crate::node::{MetadataNode, NodeError};
use crate::state::State;

pub(crate) trait GroupNode: Clone + Send + Sync + 'static {
    /// The current Raft term if this node leads it.
    fn leader_term(&self) -> Option<u64>;
    /// The node's applied state.
    fn read(&self) -> RwLockReadGuard<'_, State>;
    /// Protocol time: sessions, deadlines and the `now_ms` of the commands.
    fn clock(&self) -> &Clock;
    /// This node's coordinator.
    fn groups(&self) -> Arc<GroupCoordinator>;
    /// Replicates `command`; its outcome once applied and its log index.
    fn propose_indexed(&self, command: Command) -> impl Future<Output = Result<(Outcome, u64), NodeError>> + Send;
    /// Confirms this node still leads a quorum, so a read of its state is linearizable.
    fn confirm_linearizable_read(&self) -> impl Future<Output = Result<(), NodeError>> + Send;

    fn propose(&self, command: Command) -> impl Future<Output = Result<Outcome, NodeError>> + Send {
        let written = self.propose_indexed(command);
        async move { written.await.map(|(outcome, _)| outcome) }
    }
}

impl GroupNode for MetadataNode {
    fn leader_term(&self) -> Option<u64> {
        MetadataNode::leader_term(self)
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        MetadataNode::read(self)
    }

    fn clock(&self) -> &Clock {
        MetadataNode::clock(self)
    }

    fn groups(&self) -> Arc<GroupCoordinator> {
        MetadataNode::groups(self)
    }

    fn propose_indexed(&self, command: Command) -> impl Future<Output = Result<(Outcome, u64), NodeError>> + Send {
        MetadataNode::propose_indexed(self, command)
    }

    fn confirm_linearizable_read(&self) -> impl Future<Output = Result<(), NodeError>> + Send {
        MetadataNode::confirm_linearizable_read(self)
    }
}
