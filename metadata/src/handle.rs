//! What an agent holds to reach metadata: the node in its own process (`floe dev`) or a remote
//! cluster mirrored locally (`floe agent`). Both offer the same three things: propose, read the
//! applied state, and watch the applied index.

use std::sync::RwLockReadGuard;

use tokio::sync::watch;

use crate::client::RemoteMetadata;
use crate::command::{Command, Outcome};
use crate::groups::{GroupError, GroupRequest, GroupResponse};
use crate::node::{ClusterStatus, MetadataNode, NodeError};
use crate::state::State;

/// An agent's way to metadata; cheap to clone.
#[derive(Clone, Debug)]
pub enum Metadata {
    /// A metadata node in this process.
    Local(MetadataNode),
    /// A metadata cluster elsewhere, with a local mirror of its state.
    Remote(RemoteMetadata),
}

impl Metadata {
    /// Replicates `command` and returns its outcome once this process can read its effect.
    pub async fn propose(&self, command: Command) -> Result<Outcome, NodeError> {
        match self {
            Self::Local(node) => node.propose(command).await,
            Self::Remote(remote) => remote.propose(command).await,
        }
    }

    /// The applied state as this process sees it. Hold the guard briefly.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        match self {
            Self::Local(node) => node.read(),
            Self::Remote(remote) => remote.read(),
        }
    }

    /// Changes whenever newly applied entries are visible through [`Metadata::read`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        match self {
            Self::Local(node) => node.subscribe(),
            Self::Remote(remote) => remote.subscribe(),
        }
    }

    /// Handles a consumer group request on the metadata leader; once answered, its writes are
    /// visible through [`Metadata::read`].
    pub async fn group_request(&self, request: GroupRequest) -> Result<GroupResponse, GroupError> {
        match self {
            Self::Local(node) => node.group_request(request).await.map(|(response, _)| response),
            Self::Remote(remote) => remote.group_request(request).await,
        }
    }

    /// Waits until [`Metadata::read`] shows everything the metadata leader had applied when
    /// asked: for answers a lagging copy would get wrong.
    pub async fn catch_up(&self) -> Result<(), NodeError> {
        match self {
            Self::Local(node) => node.catch_up().await,
            Self::Remote(remote) => remote.catch_up().await,
        }
    }

    /// Waits until every metadata node has applied what this process sees, or `patience` runs
    /// out; returns the nodes still behind then. A node in this process has nobody to wait for:
    /// it serves the only agent that reads it.
    pub async fn wait_applied_by_every_node(&self, patience: std::time::Duration) -> Vec<String> {
        match self {
            Self::Local(_) => Vec::new(),
            Self::Remote(remote) => remote.wait_applied_by_every_node(patience).await,
        }
    }

    /// Whether this process holds the metadata leader, whose applied state no other copy is
    /// ahead of. A mirror, or a follower, may lag.
    pub fn is_leader(&self) -> bool {
        match self {
            Self::Local(node) => node.leader_term().is_some(),
            Self::Remote(_) => false,
        }
    }

    /// The Raft view, when the node runs in this process.
    pub fn status(&self) -> Option<ClusterStatus> {
        match self {
            Self::Local(node) => Some(node.status()),
            Self::Remote(_) => None,
        }
    }
}
