//! A metadata node: one voter of the Raft-replicated metadata service, serving proposals and
//! reads to the agent in its process and the metadata protocol to its peers.
//!
//! The Raft log and vote are durable on local disk (fsync before acknowledging); the state
//! machine applies committed commands to [`State`] and snapshots it so the log can be purged. A
//! proposal made on a follower is forwarded to the leader. `floe dev` runs a one-node cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use tokio::time::Instant;

use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::command::{Command, CommandError, Outcome};
use crate::groups::{GroupError, GroupRequest, GroupResponse};
use crate::locks::{MutexRecovery, RwLockRecovery};
use crate::raft::network::NotAfter;
use crate::raft::{NodeId, TypeConfig, log_store, network, state_machine};
use crate::state::State;

/// Why a proposal did not produce an outcome.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NodeError {
    /// The state machine rejected the command; nothing changed.
    #[error(transparent)]
    Rejected(#[from] CommandError),
    /// No quorum committed the command in time. It may still commit later: the caller may retry
    /// (commands whose effect must happen once carry their own idempotency key).
    #[error("metadata unavailable: {0}")]
    Unavailable(String),
}

/// How long a proposal keeps retrying (leader elections, forwarding) before it is answered as
/// unavailable.
const PROPOSE_DEADLINE: Duration = Duration::from_secs(10);
/// Pause between attempts while no leader is known.
const PROPOSE_RETRY_PAUSE: Duration = Duration::from_millis(50);
/// A leader whose write has not committed after this long checks that it still reaches a quorum.
const LEADERSHIP_CHECK_AFTER: Duration = Duration::from_secs(1);
/// How long that check may take before the leader counts itself cut off.
const LEADERSHIP_CHECK_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long a follower waits for the leader's read index.
const READ_INDEX_TIMEOUT: Duration = Duration::from_secs(5);

/// Segment commits queued for grouping; past this, proposers wait.
const COMMIT_QUEUE_MAX: usize = 4096;

/// A segment commit waiting for the group committer, with where to send its result.
type PendingCommit = (crate::command::SegmentCommit, tokio::sync::oneshot::Sender<Result<(Outcome, u64), NodeError>>);

/// Group commit: while one entry is being replicated, segment commits queue up; the next entry
/// carries all of them (up to [`COMMIT_GROUP_MAX`](crate::limits::COMMIT_GROUP_MAX)). An idle
/// cluster writes a single commit at once, so grouping adds no latency. Runs until the node's
/// last handle is dropped.
async fn group_commits(node: MetadataNode, mut queue: tokio::sync::mpsc::Receiver<PendingCommit>) {
    let mut group = Vec::new();
    while queue.recv_many(&mut group, crate::limits::COMMIT_GROUP_MAX).await > 0 {
        let (commits, replies): (Vec<_>, Vec<_>) = group.drain(..).unzip();
        // Once every voter reads format 13, even a single commit goes packed: at many
        // partitions its chunks are most of the Raft log, the change stream and the archive.
        let packed = node.read().applies_format(13);
        if commits.len() == 1 && !packed {
            let commit = commits.into_iter().next().expect("one commit");
            let result = node.write(Command::CommitSegment(commit), NotAfter::default()).await;
            replies.into_iter().for_each(|reply| {
                let _ = reply.send(result.clone());
            });
            continue;
        }
        let command = if packed {
            Command::CommitSegmentsPacked(crate::command::PackedCommits(commits.into()))
        } else {
            Command::CommitSegments(commits)
        };
        match node.write(command, NotAfter::default()).await {
            Ok((Outcome::SegmentsCommitted(outcomes), index)) if outcomes.len() == replies.len() => {
                for (reply, outcome) in replies.into_iter().zip(outcomes) {
                    let _ = reply.send(outcome.map(|o| (o, index)).map_err(NodeError::Rejected));
                }
            }
            Ok(other) => {
                let error = NodeError::Unavailable(format!("unexpected outcome of a commit group: {other:?}"));
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
            Err(error) => {
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// Where a node keeps its data and how it reaches its peers.
#[derive(Clone, Debug)]
pub struct MetadataNodeConfig {
    pub node_id: NodeId,
    /// Address the metadata protocol listens on (and that peers use to reach this node).
    pub listen_addr: String,
    pub data_dir: PathBuf,
    /// Every voter of the cluster, this node included: id → address. Used on first start only.
    pub peers: BTreeMap<NodeId, String>,
    /// Joins an existing cluster (added later with `floe admin add-metadata-node`) instead of
    /// forming one on first start.
    pub join: bool,
    /// Protocol time (`crate::clock`): the system's, except in tests.
    pub clock: crate::clock::Clock,
}

/// The protocol server's stop signal and task.
type ServerHandle = (watch::Sender<bool>, tokio::task::JoinHandle<()>);

/// A running replicated metadata node; cheap to clone.
#[derive(Clone)]
pub struct MetadataNode {
    pub(crate) raft: openraft::Raft<TypeConfig>,
    state: Arc<RwLock<State>>,
    changes: tokio::sync::broadcast::Sender<crate::raft::state_machine::Change>,
    /// Connections for forwarding proposals to the leader.
    pool: Arc<network::ConnectionPool>,
    /// Segment commits waiting to be grouped into one entry.
    commit_group: tokio::sync::mpsc::Sender<PendingCommit>,
    applied: watch::Receiver<u64>,
    node_id: NodeId,
    data_dir: PathBuf,
    /// Stops the protocol server; [`MetadataNode::shutdown`] waits for it to release its port.
    server: Arc<std::sync::Mutex<Option<ServerHandle>>>,
    /// Consumer group coordination, active while this node leads.
    groups: Arc<crate::groups::GroupCoordinator>,
    /// The commit grouping, group timers and leader duties; stopped by [`MetadataNode::shutdown`].
    tasks: crate::tasks::TaskGroup,
    clock: crate::clock::Clock,
    /// Tests: the log store, to inject disk faults.
    #[cfg(test)]
    log: log_store::FileLogStore,
}

impl std::fmt::Debug for MetadataNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataNode").field("node_id", &self.node_id).finish_non_exhaustive()
    }
}

/// A snapshot of the node's Raft view, for status endpoints and `floe admin cluster`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterStatus {
    pub node_id: NodeId,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub last_log_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub voters: Vec<NodeId>,
    pub members: BTreeMap<NodeId, String>,
    /// Agents that have heartbeated, with their last heartbeat (agent clock, ms since the epoch).
    pub agents: Vec<crate::state::stored::AgentRecord>,
}

/// Snapshots once this many bytes of entries were appended since the last purge, however few
/// the entries: with thousands of partitions one commit entry holds hundreds of chunks, and
/// [`raft_config`]'s count of entries alone would let the log (on disk and decoded in memory)
/// grow to hundreds of megabytes between snapshots.
const SNAPSHOT_LOG_BYTES: u64 = 32 * 1024 * 1024;

/// How often the log's size is looked at, and the least time between two snapshots it asks for.
const SNAPSHOT_LOG_CHECK_EVERY: Duration = Duration::from_secs(1);
const SNAPSHOT_LOG_PAUSE: Duration = Duration::from_secs(10);

/// Asks Raft for a snapshot whenever [`SNAPSHOT_LOG_BYTES`] have been appended since the last
/// purge (which follows each snapshot).
async fn snapshot_by_log_bytes(
    node: MetadataNode,
    appended: Arc<std::sync::atomic::AtomicU64>,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut last: Option<Instant> = None;
    while crate::tasks::sleep_unless_stopped(&stop, SNAPSHOT_LOG_CHECK_EVERY).await {
        let due = appended.load(std::sync::atomic::Ordering::Relaxed) >= SNAPSHOT_LOG_BYTES;
        if !due || last.is_some_and(|at| at.elapsed() < SNAPSHOT_LOG_PAUSE) {
            continue;
        }
        last = Some(Instant::now());
        if let Err(e) = node.raft.trigger().snapshot().await {
            tracing::warn!(error = %e, "asking for a snapshot of a large raft log failed");
        }
    }
}

pub(crate) fn raft_config(voter_count: usize) -> std::io::Result<openraft::Config> {
    // Generous for loaded 2-core machines: the heartbeat is also the append RPC timeout. A single
    // voter has nobody to wait for, so it elects itself quickly (`floe dev` starts in well under a
    // second).
    let (heartbeat_interval, election_timeout_min, election_timeout_max) =
        if voter_count <= 1 { (50, 150, 300) } else { (100, 500, 1000) };
    openraft::Config {
        cluster_name: "floe-metadata".into(),
        heartbeat_interval,
        election_timeout_min,
        election_timeout_max,
        install_snapshot_timeout: 10_000,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(10_000),
        max_in_snapshot_log_to_keep: 1_000,
        ..Default::default()
    }
    .validate()
    .map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests;

impl MetadataNode {
    /// Opens the node's log and snapshot, starts Raft and the protocol server, and forms the
    /// cluster on first start (every node is given the same voter set, which is safe).
    pub async fn start(config: MetadataNodeConfig) -> std::io::Result<Self> {
        std::fs::create_dir_all(&config.data_dir)?;
        let (state_machine, state, applied) = state_machine::StateMachine::open(&config.data_dir)?;
        let log_store =
            log_store::FileLogStore::open(&config.data_dir.join("raft-log"), state_machine.durable_snapshot())?;
        let changes = state_machine.changes();
        let (commit_group, commit_queue) = tokio::sync::mpsc::channel(COMMIT_QUEUE_MAX);
        let raft_config = Arc::new(raft_config(config.peers.len())?);
        #[cfg(test)]
        let log = log_store.clone();
        let log_appended = log_store.appended_since_purge();
        let raft = openraft::Raft::new(config.node_id, raft_config, network::Network, log_store, state_machine)
            .await
            .map_err(std::io::Error::other)?;
        let listener = tokio::net::TcpListener::bind(&config.listen_addr).await?;
        let node = Self {
            raft,
            state,
            changes,
            pool: Default::default(),
            commit_group,
            applied,
            node_id: config.node_id,
            data_dir: config.data_dir.clone(),
            server: Default::default(),
            groups: Default::default(),
            tasks: Default::default(),
            clock: config.clock.clone(),
            #[cfg(test)]
            log,
        };
        crate::metrics::NodeCollector::register(node.clone());
        node.tasks.spawn_cancellable(group_commits(node.clone(), commit_queue));
        node.tasks.spawn(|stop| crate::groups::GroupCoordinator::run_timers(node.clone(), stop));
        node.tasks.spawn(|stop| crate::leader_duties::run(node.clone(), stop));
        node.tasks.spawn(|stop| snapshot_by_log_bytes(node.clone(), log_appended, stop));
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(network::serve(listener, node.clone(), stopped));
        *node.server.lock_recovered() = Some((stop, server));
        let members: BTreeMap<NodeId, BasicNode> =
            config.peers.iter().map(|(id, addr)| (*id, BasicNode::new(addr.clone()))).collect();
        if !config.join && !node.raft.is_initialized().await.map_err(std::io::Error::other)? {
            match node.raft.initialize(members).await {
                Ok(()) => tracing::info!(node_id = config.node_id, "metadata cluster formed"),
                // Another node's initialization reached us first: fine, same voter set.
                Err(e) => tracing::info!(error = %e, "metadata cluster already initialized"),
            }
        }
        Ok(node)
    }

    pub fn node_id(&self) -> NodeId {
        self.node_id
    }

    /// Replicates `command` through the leader (forwarding if this node is not it), and returns
    /// its outcome once applied. Retries while no leader is known, up to [`PROPOSE_DEADLINE`].
    pub async fn propose(&self, command: Command) -> Result<Outcome, NodeError> {
        self.propose_indexed(command).await.map(|(outcome, _)| outcome)
    }

    /// Like [`MetadataNode::propose`], also returning the log index the command was applied at.
    /// Segment commits go through the group committer; everything else is written directly.
    pub async fn propose_indexed(&self, command: Command) -> Result<(Outcome, u64), NodeError> {
        self.propose_before(command, NotAfter::default()).await
    }

    /// [`MetadataNode::propose_indexed`] for a sender that stops waiting at `not_after`: past it
    /// the command is not written. Segment commits ignore it: the state answers a late one by
    /// its key, or refuses it once its key's deadline has passed on the leader's clock
    /// ([`crate::limits::SEGMENT_COMMIT_WINDOW_MS`]).
    pub(crate) async fn propose_before(
        &self,
        command: Command,
        not_after: NotAfter,
    ) -> Result<(Outcome, u64), NodeError> {
        match command {
            Command::CommitSegment(commit) => {
                let (reply, answer) = tokio::sync::oneshot::channel();
                self.commit_group
                    .send((commit, reply))
                    .await
                    .map_err(|_| NodeError::Unavailable("group committer stopped".into()))?;
                answer.await.map_err(|_| NodeError::Unavailable("group committer stopped".into()))?
            }
            other => self.write(other, not_after).await,
        }
    }

    /// Replicates one command as one entry (forwarding to the leader when needed).
    async fn write(&self, command: Command, not_after: NotAfter) -> Result<(Outcome, u64), NodeError> {
        let deadline = Instant::now() + PROPOSE_DEADLINE;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            // Without a quorum a leader's write never commits; give up when the leader finds itself
            // cut off, or at the deadline. The entry may still commit later, so callers treat
            // Unavailable as "outcome unknown" (segment commits are idempotent by key).
            let written = self.client_write_while_leading(command.clone(), remaining, not_after).await?;
            let leader = match written {
                Ok(response) => {
                    return response.data.0.map(|o| (o, response.log_id.index)).map_err(NodeError::Rejected);
                }
                Err(e) => match e.forward_to_leader() {
                    Some(forward) => forward.leader_id.zip(forward.leader_node.clone()),
                    None => return Err(NodeError::Unavailable(e.to_string())),
                },
            };
            if let Some((leader_id, leader)) = leader {
                // A leader that is paused or cut off from this node never answers; once this node
                // sees another leader elected, the proposal goes there instead of waiting out
                // the forward's timeout.
                let mut metrics = self.raft.metrics();
                let forward = network::forward_proposal(&self.pool, &leader.addr, &command, not_after);
                let replaced = metrics.wait_for(|m| m.current_leader.is_some_and(|l| l != leader_id));
                tokio::select! {
                    reply = forward => match reply {
                        Ok(network::ProposeReply::Applied(response, index)) => {
                            return response.0.map(|o| (o, index)).map_err(NodeError::Rejected);
                        }
                        Ok(network::ProposeReply::NotLeader) | Err(_) => {}
                    },
                    _ = replaced => continue,
                }
            }
            if Instant::now() >= deadline {
                return Err(NodeError::Unavailable("no metadata leader within the deadline".into()));
            }
            tokio::time::sleep(PROPOSE_RETRY_PAUSE).await;
        }
    }

    /// `client_write`, bounded by `limit`, except that a leader whose write is slow confirms it still
    /// reaches a quorum and answers Unavailable at once if it cannot: a leader partitioned from the
    /// other voters keeps its role (openraft has no check-quorum step-down), and without this its
    /// clients would wait for the partition to heal instead of moving on to the new leader.
    async fn client_write_while_leading(
        &self,
        command: Command,
        limit: Duration,
        not_after: NotAfter,
    ) -> Result<crate::raft::ClientWriteResult, NodeError> {
        if not_after.passed() {
            return Err(NodeError::Unavailable("the proposal arrived after its sender stopped waiting".into()));
        }
        let deadline = Instant::now() + limit;
        let started = Instant::now();
        let write = self.raft.client_write(command);
        tokio::pin!(write);
        if let Ok(written) = tokio::time::timeout(LEADERSHIP_CHECK_AFTER.min(limit), &mut write).await {
            if written.is_ok() {
                crate::metrics::COMMIT_SECONDS.observe(started.elapsed().as_secs_f64());
            }
            return Ok(written);
        }
        // A sole voter is its own quorum: a write slower than the check (a large `RestoreState`
        // applied) is no sign of lost leadership, and the check would wait behind that write.
        if self.leader_term().is_some() && !self.sole_voter() && self.confirm_linearizable_read().await.is_err() {
            tracing::warn!("this metadata leader cannot reach a quorum; refusing writes until it can");
            return Err(NodeError::Unavailable("the metadata leader cannot reach a quorum".into()));
        }
        let written = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), write)
            .await
            .map_err(|_| NodeError::Unavailable("metadata quorum did not commit within the deadline".into()))?;
        if written.is_ok() {
            crate::metrics::COMMIT_SECONDS.observe(started.elapsed().as_secs_f64());
        }
        Ok(written)
    }

    /// Confirms this node still leads (a quorum answers its heartbeats) and waits until it has
    /// applied every entry committed before the call, so [`MetadataNode::read`] is linearizable.
    pub(crate) async fn confirm_linearizable_read(&self) -> Result<(), NodeError> {
        match tokio::time::timeout(LEADERSHIP_CHECK_TIMEOUT, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(NodeError::Unavailable(e.to_string())),
            Err(_) => Err(NodeError::Unavailable("the metadata leader cannot reach a quorum".into())),
        }
    }

    /// Whether this node is its cluster's only voter.
    fn sole_voter(&self) -> bool {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let mut voters = m.membership_config.membership().voter_ids();
        voters.next() == Some(self.node_id) && voters.next().is_none()
    }

    /// The current Raft term if this node is its leader.
    pub(crate) fn leader_term(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        (m.current_leader == Some(self.node_id)).then_some(m.current_term)
    }

    /// Protocol time: what the group coordinator and the leader's duties read.
    pub fn clock(&self) -> &crate::clock::Clock {
        &self.clock
    }

    pub(crate) fn groups(&self) -> Arc<crate::groups::GroupCoordinator> {
        self.groups.clone()
    }

    /// Handles a consumer group request on the leader, forwarding it there from a follower.
    /// The `u64` is the log index of the request's last write (0 if none).
    pub async fn group_request(&self, request: GroupRequest) -> Result<(GroupResponse, u64), GroupError> {
        self.group_request_before(request, NotAfter::default()).await
    }

    /// [`MetadataNode::group_request`] for a sender that stops waiting at `not_after`: past it
    /// the request is not handled.
    pub(crate) async fn group_request_before(
        &self,
        request: GroupRequest,
        not_after: NotAfter,
    ) -> Result<(GroupResponse, u64), GroupError> {
        if self.leader_term().is_some() {
            if not_after.passed() {
                return Err(GroupError::CoordinatorNotAvailable(
                    "the request arrived after its sender stopped waiting".into(),
                ));
            }
            return self.groups.handle(self, request).await;
        }
        let addr =
            self.leader_addr().ok_or_else(|| GroupError::CoordinatorNotAvailable("no metadata leader".into()))?;
        let timeout = network::group_call_timeout(&request);
        match self.pool.call(&addr, &network::Request::GroupAsLeader(request, not_after), timeout).await {
            Ok(network::Response::Group(result)) => result,
            Ok(_) => Err(GroupError::CoordinatorNotAvailable(format!("{addr} answered with the wrong response kind"))),
            Err(e) => Err(GroupError::CoordinatorNotAvailable(e.to_string())),
        }
    }

    /// The read index of a linearizable read: on the leader, once it has confirmed it still leads,
    /// its applied index; a follower asks the leader.
    pub(crate) async fn read_index(&self) -> Result<u64, NodeError> {
        if self.leader_term().is_some() {
            self.confirm_linearizable_read().await?;
            return Ok(self.read().applied_index);
        }
        let addr = self.leader_addr().ok_or_else(|| NodeError::Unavailable("no metadata leader".into()))?;
        match self.pool.call(&addr, &network::Request::ReadIndexAsLeader, READ_INDEX_TIMEOUT).await {
            Ok(network::Response::ReadIndex(index)) => index.map_err(NodeError::Unavailable),
            Ok(_) => Err(NodeError::Unavailable(format!("{addr} answered with the wrong response kind"))),
            Err(e) => Err(NodeError::Unavailable(e.to_string())),
        }
    }

    /// Waits until this node has applied everything the leader had when asked: reads after it
    /// are as fresh as the leader's.
    pub async fn catch_up(&self) -> Result<(), NodeError> {
        let index = self.read_index().await?;
        let mut applied = self.subscribe();
        tokio::time::timeout(READ_INDEX_TIMEOUT, applied.wait_for(|a| *a >= index))
            .await
            .map_err(|_| NodeError::Unavailable(format!("this node did not apply index {index} in time")))?
            .map_err(|_| NodeError::Unavailable("the state machine stopped".into()))?;
        Ok(())
    }

    /// The address of the leader this node knows of.
    fn leader_addr(&self) -> Option<String> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let leader = m.current_leader?;
        m.membership_config.membership().get_node(&leader).map(|n| n.addr.clone())
    }

    /// Applies `command` only if this node is the leader (the server side of forwarding).
    pub(crate) async fn propose_as_leader(&self, command: Command, not_after: NotAfter) -> network::ProposeReply {
        match self.client_write_while_leading(command, PROPOSE_DEADLINE, not_after).await {
            Ok(Ok(response)) => network::ProposeReply::Applied(response.data, response.log_id.index),
            Ok(Err(_)) | Err(_) => network::ProposeReply::NotLeader,
        }
    }

    /// This node's applied state. Hold the guard briefly.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read_recovered()
    }

    /// Every command applied from now on, in order (for agents' state mirrors and the archive).
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::raft::state_machine::Change> {
        self.changes.subscribe()
    }

    /// Watches the index of the last applied entry.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }

    /// How long ago this node wrote its snapshot file; `None` before its first.
    pub(crate) fn snapshot_age(&self) -> Option<Duration> {
        let written = std::fs::metadata(self.data_dir.join(state_machine::SNAPSHOT_FILE)).ok()?.modified().ok()?;
        Some(written.elapsed().unwrap_or_default())
    }

    pub fn status(&self) -> ClusterStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        ClusterStatus {
            node_id: self.node_id,
            leader: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            applied_index: m.last_applied.map(|l| l.index),
            voters: membership.voter_ids().collect(),
            members: membership.nodes().map(|(id, node)| (*id, node.addr.clone())).collect(),
            agents: self.read().agents.values().cloned().map(Into::into).collect(),
        }
    }

    /// Waits until this node sees a leader, up to `timeout`.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, NodeError> {
        let metrics = self
            .raft
            .wait(Some(timeout))
            .metrics(|m| m.current_leader.is_some(), "a leader")
            .await
            .map_err(|e| NodeError::Unavailable(e.to_string()))?;
        metrics.current_leader.ok_or_else(|| NodeError::Unavailable("no leader".into()))
    }

    /// Proposes `InitCluster` if the replicated state has never been initialized, or, when a
    /// restored state waits in the data directory (`floe metadata restore`), `RestoreState`;
    /// then `InitScramDecoyKey` if the state has no decoy key yet.
    pub async fn ensure_initialized(&self) -> Result<(), NodeError> {
        self.ensure_cluster_id().await?;
        if !self.read().scram_decoy_key.is_empty() {
            return Ok(());
        }
        // Two v4 UUIDs: 244 bits from the operating system's random source.
        let key = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()].iter().flat_map(|u| *u.as_bytes()).collect();
        match self.propose(Command::InitScramDecoyKey { key }).await {
            Ok(_) | Err(NodeError::Rejected(CommandError::AlreadyInitialized)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn ensure_cluster_id(&self) -> Result<(), NodeError> {
        if !self.read().cluster_id.is_empty() {
            return Ok(());
        }
        let seed_path = self.data_dir.join(crate::archive::RESTORE_SEED_FILE);
        if let Ok(bytes) = std::fs::read(&seed_path) {
            let seed = crate::archive::decode_state(&bytes).map_err(|e| NodeError::Unavailable(e.to_string()))?;
            tracing::info!(topics = seed.topics.len(), "seeding the new cluster with the restored state");
            match self.propose(Command::RestoreState(Box::new(seed.into()))).await {
                Ok(_) | Err(NodeError::Rejected(CommandError::AlreadyInitialized)) => {
                    let _ = std::fs::remove_file(&seed_path);
                    // The whole state is one log entry now: snapshot it at once, so a restart
                    // loads a snapshot rather than replaying it, and a joining node gets a copy.
                    if let Err(e) = self.raft.trigger().snapshot().await {
                        tracing::warn!(error = %e, "asking for a snapshot of the restored state failed");
                    }
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        let cluster_id = uuid::Uuid::new_v4().simple().to_string();
        match self.propose(Command::InitCluster { cluster_id }).await {
            Ok(_) | Err(NodeError::Rejected(CommandError::AlreadyInitialized)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Stops the protocol server and Raft. Connections already open are closed as they next
    /// read a request.
    /// Adds a voter (first as a learner, so it catches up before it counts toward quorum).
    /// Only the leader can; others answer with an error naming the leader.
    pub async fn add_voter(&self, node_id: NodeId, addr: String) -> Result<(), String> {
        self.raft.add_learner(node_id, BasicNode::new(addr), true).await.map_err(|e| e.to_string())?;
        let change = openraft::ChangeMembers::AddVoterIds([node_id].into_iter().collect());
        self.raft.change_membership(change, false).await.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Removes a voter from the cluster. Only the leader can.
    pub async fn remove_voter(&self, node_id: NodeId) -> Result<(), String> {
        let change = openraft::ChangeMembers::RemoveVoters([node_id].into_iter().collect());
        self.raft.change_membership(change, false).await.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Resolves, with the reason, once Raft stopped on a fatal error (a log or state write that
    /// failed, say). The node then serves nothing and never recovers by itself: its process
    /// should exit so that it starts again from its files.
    pub async fn stopped_by_fault(&self) -> String {
        let mut metrics = self.raft.metrics();
        loop {
            if let Err(fatal) = &metrics.borrow_and_update().running_state {
                return fatal.to_string();
            }
            if metrics.changed().await.is_err() {
                return "Raft stopped".into();
            }
        }
    }

    /// Tests: the node's next log write fails halfway, as on a failing disk.
    #[cfg(test)]
    pub(crate) async fn fail_next_log_write(&self) {
        self.log.fail_next_write(true).await;
    }

    /// Stops serving, then the background tasks (each finishes its step), then Raft.
    pub async fn shutdown(&self) {
        let server = self.server.lock_recovered().take();
        if let Some((stop, handle)) = server {
            let _ = stop.send(true);
            let _ = handle.await;
        }
        self.tasks.stop().await;
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
    }
}
