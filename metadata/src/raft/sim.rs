//! Deterministic simulation of the metadata service (issue 30): three Raft nodes with today's
//! log store and state machine, in one process on virtual time (a paused current-thread Tokio
//! runtime), joined by a simulated network that loses, delays and reorders messages and cuts
//! links. Nodes crash (their Raft stops at an await point) and come back from their files, some
//! with a torn record appended to their log (a write in progress when the power went); a disk
//! fault makes a node's next log write fail halfway (or its next snapshot write fail), which
//! stops its Raft and so its process. Two simulated agents commit segments throughout, retrying
//! through whichever node they can reach.
//!
//! A seed decides the faults, the network's draws, the agents' commits and openraft's election
//! timeouts. After the faults stop and every node is back, the history is checked:
//! - every node holds the same log and the same state;
//! - an acknowledged commit is in the log at the index it was acknowledged with, and commits
//!   are linearizable: one acknowledged before another was sent has the lower index;
//! - offsets are never reused: acknowledged chunks keep their offsets, no two overlap, and the
//!   state's invariants (`state::tests::check_invariants`) hold on every node;
//! - group generations only move forward: the agents race to store generations of one group,
//!   and none acknowledged is above the one stored at the end;
//! - transactions are atomic: a transactional producer writes to two partitions per transaction
//!   and commits or aborts; every chunk of an aborted one is in an aborted range, none of a
//!   committed one is, and none is left open;
//! - the leader's duties (`leader_duties::run`, the same code as a real node's, on every node
//!   and on virtual time) abort a transaction its producer abandoned once its timeout passes,
//!   whichever node leads then;
//! - the group coordinator (`groups::GroupCoordinator`, the same code with its timers, on every
//!   node, seeing it as a [`GroupNode`]) never gives a KIP-848 member a partition another member
//!   still holds, a member's epoch never goes back, the members settle with every partition held
//!   once the faults stop, and the stored group assigns no partition twice. Three members
//!   heartbeat through whichever node leads; answers are lost as messages are;
//! - three classic (eager) members of another group join, sync (their leader assigning),
//!   heartbeat and commit through the same coordinators: every member that synced a generation
//!   was told the same leader, no two were given one partition in it, no commit of a generation
//!   is accepted after a newer one synced, and the group settles;
//! - three share (KIP-932) members heartbeat for their partitions, acquire records and
//!   acknowledge them at their next request (mostly accepting, sometimes releasing, now and then
//!   forgetting them until their locks expire): no record is locked by two members at once, no
//!   accepted record is delivered again, and delivery counts only go up, to the limit;
//! - snapshots: Raft snapshots every 10 to 60 entries (drawn per seed) and purges the log behind
//!   them, so a node that fell behind is sent a snapshot; a snapshot file write may fail like a
//!   log write. Each node's snapshot plus its log after it, applied afresh, gives the state the
//!   node holds, and a node never purged an entry its durable snapshot does not cover;
//! - a seed replays the same history (`a_seed_replays_its_history`).
//!
//! `FLOE_SIM_SEEDS=N` runs N seeds per test (the long mode; `.ci/run` runs the default),
//! `FLOE_SIM_SEED=S` one seed, and a failing seed is printed with how to run it alone;
//! `FLOE_SIM_TRACE=1` prints events as they happen (a seed that panics prints no history).
//!
//! Not simulated: disk errors other than a torn tail or a failed log or snapshot write (a record
//! corrupted in place stops the log's open, unit-tested in `log_store`), and the agents' TCP
//! protocol (agents call a node's Raft and group members its coordinator directly).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use openraft::error::{ClientWriteError, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, EntryPayload, Raft, SnapshotPolicy};
use rand08::rngs::StdRng;
use rand08::{Rng, SeedableRng};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::log_store::FileLogStore;
use super::state_machine::{StateMachine, TestSnapshotIo};
use super::{NodeId, TypeConfig};
use crate::clock::Clock;
use crate::command::{BatchSummary, ChunkCommit, Command, CommandError, Outcome, SegmentCommit};
use crate::groups::{GroupCoordinator, GroupError, GroupNode, GroupRequest, GroupResponse};
use crate::leader_duties::DutyNode;
use crate::locks::{MutexRecovery, RwLockRecovery};
use crate::node::NodeError;
use crate::state::State;

const NODES: [NodeId; 3] = [1, 2, 3];
const AGENTS: usize = 2;
const PARTITIONS: i32 = 4;
/// Virtual time during which faults are injected.
const FAULTY_FOR: Duration = Duration::from_secs(20);
/// Commits each agent makes.
const COMMITS_PER_AGENT: usize = 40;
/// Seeds per test in `.ci/run`.
const SEEDS_DEFAULT: u64 = 200;

/// The network between the nodes, and the running nodes.
struct Net {
    rng: StdRng,
    loss: f64,
    delay_max_ms: u64,
    /// Directed links that deliver nothing.
    cut: BTreeSet<(NodeId, NodeId)>,
    rafts: BTreeMap<NodeId, Raft<TypeConfig>>,
}

/// One node's files and what the simulation reads of it.
struct NodeFiles {
    dir: PathBuf,
    log: FileLogStore,
    state: Arc<RwLock<State>>,
    /// Stops the node's leader duties and group timers when it crashes.
    duties: CancellationToken,
    /// The node as its group coordinator sees it (a fresh coordinator per start, as a real
    /// node's).
    groups: SimGroupNode,
    /// Its state machine's snapshot I/O: on virtual time, and a write may fail.
    snapshots: Arc<TestSnapshotIo>,
}

#[derive(Clone)]
struct Sim {
    net: Arc<Mutex<Net>>,
    nodes: Arc<Mutex<BTreeMap<NodeId, NodeFiles>>>,
    history: Arc<Mutex<Vec<String>>>,
    root: PathBuf,
    start: Instant,
    /// Protocol time on virtual time: [`Sim::now_ms`] as wall time.
    clock: Clock,
    /// Raft's snapshot policy, drawn per seed: a snapshot every this many entries, keeping this
    /// many behind it in the log (the rest are purged, so a node that fell behind them is sent
    /// the snapshot).
    snapshot_every: u64,
    logs_kept: u64,
}

/// A transaction whose end was acknowledged: its producer, its chunks (partition, base offset,
/// offsets) and whether it committed.
#[derive(Clone, Debug)]
struct EndedTxn {
    producer_id: i64,
    chunks: Vec<(i32, i64, i64)>,
    committed: bool,
}

/// An acknowledged commit.
#[derive(Clone, Debug)]
struct Ack {
    command: Command,
    key: String,
    index: u64,
    sent_ms: u64,
    acked_ms: u64,
    /// (partition, base offset, offsets) per chunk.
    chunks: Vec<(i32, i64, i64)>,
}

impl Sim {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn record(&self, event: String) {
        let at = self.now_ms();
        // A seed that panics never returns its history: this prints it as it happens.
        if std::env::var_os("FLOE_SIM_TRACE").is_some() {
            eprintln!("{at:>6} {event}");
        }
        self.history.lock_recovered().push(format!("{at:>6} {event}"));
    }

    /// The group coordinator of node `NODES[target % 3]`, if that node runs.
    fn group_node(&self, target: usize) -> Option<(NodeId, SimGroupNode)> {
        let node = NODES[target % NODES.len()];
        let running = self.net.lock_recovered().rafts.contains_key(&node);
        self.nodes.lock_recovered().get(&node).filter(|_| running).map(|n| (node, n.groups.clone()))
    }

    /// Whether a group member's answer is lost on its way back.
    fn answer_lost(&self) -> bool {
        let mut net = self.net.lock_recovered();
        let loss = net.loss;
        net.rng.gen_bool(loss)
    }

    /// One message's trip from `from` to `to`: the target's Raft if it arrives.
    async fn carry(&self, from: NodeId, to: NodeId) -> Option<Raft<TypeConfig>> {
        let (delay, lost) = {
            let mut net = self.net.lock_recovered();
            let delay_max_ms = net.delay_max_ms;
            let delay = net.rng.gen_range(0..=delay_max_ms);
            let loss = net.loss;
            (delay, net.rng.gen_bool(loss))
        };
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let net = self.net.lock_recovered();
        if lost || net.cut.contains(&(from, to)) || !net.rafts.contains_key(&from) {
            return None;
        }
        net.rafts.get(&to).cloned()
    }

    async fn start_node(&self, id: NodeId, first: bool) {
        let dir = self.root.join(format!("node-{id}"));
        std::fs::create_dir_all(&dir).expect("node dir");
        let (machine, state, _applied) = StateMachine::open(&dir).expect("the state machine opens");
        let log =
            FileLogStore::open(&dir.join("raft-log"), machine.durable_snapshot()).expect("the log opens after a crash");
        let snapshots = machine.test_io();
        snapshots.inline.store(true, Ordering::Relaxed);
        let mut config = crate::node::raft_config(NODES.len()).expect("config");
        config.snapshot_policy = SnapshotPolicy::LogsSinceLast(self.snapshot_every);
        config.max_in_snapshot_log_to_keep = self.logs_kept;
        config.purge_batch_size = 1;
        let config = Arc::new(config.validate().expect("config"));
        let network = SimNetwork { sim: self.clone(), from: id };
        let raft = Raft::new(id, config, network, log.clone(), machine).await.expect("raft starts");
        if first {
            let members: BTreeMap<NodeId, BasicNode> =
                NODES.iter().map(|n| (*n, BasicNode::new(format!("sim-{n}")))).collect();
            let _ = raft.initialize(members).await;
        }
        let duties = CancellationToken::new();
        tokio::spawn(crate::leader_duties::run(SimDutyNode { sim: self.clone(), id }, duties.clone()));
        let groups = SimGroupNode {
            sim: self.clone(),
            id,
            state: state.clone(),
            coordinator: Arc::new(GroupCoordinator::default()),
        };
        tokio::spawn(GroupCoordinator::run_timers(groups.clone(), duties.clone()));
        self.nodes.lock_recovered().insert(id, NodeFiles { dir, log, state, duties, groups, snapshots });
        self.net.lock_recovered().rafts.insert(id, raft);
        self.record(format!("start {id}"));
    }

    /// Crashes every node whose Raft stopped on a fatal error (a failed log write), as its
    /// process exits on it (`floe metadata`).
    async fn crash_stopped_nodes(&self) {
        let stopped: Vec<NodeId> = self
            .net
            .lock_recovered()
            .rafts
            .iter()
            .filter(|(_, raft)| raft.metrics().borrow().running_state.is_err())
            .map(|(id, _)| *id)
            .collect();
        for id in stopped {
            self.record(format!("{id} stopped on a fault; its process exits"));
            self.crash(id, None).await;
        }
    }

    /// Stops node `id` where it is; with `torn`, a partial record is left at its log's end.
    async fn crash(&self, id: NodeId, torn: Option<Vec<u8>>) {
        let Some(raft) = self.net.lock_recovered().rafts.remove(&id) else { return };
        if let Some(node) = self.nodes.lock_recovered().get(&id) {
            node.duties.cancel();
        }
        let _ = raft.shutdown().await;
        if let Some(bytes) = torn {
            let path = self.nodes.lock_recovered()[&id].dir.join("raft-log");
            let mut file = std::fs::OpenOptions::new().append(true).open(path).expect("log file");
            file.write_all(&bytes).expect("torn tail");
            self.record(format!("crash {id} torn {}", bytes.len()));
        } else {
            self.record(format!("crash {id}"));
        }
    }

    /// Proposes `command` until a node acknowledges it: its index and what applying it gave, or
    /// `None` when `give_up` passed.
    async fn propose(
        &self,
        agent: usize,
        command: &Command,
        give_up: Instant,
    ) -> Option<(u64, Result<Outcome, crate::command::CommandError>)> {
        let mut target = NODES[agent % NODES.len()];
        let mut next = agent;
        while Instant::now() < give_up {
            let raft = self.net.lock_recovered().rafts.get(&target).cloned();
            let Some(raft) = raft else {
                next += 1;
                target = NODES[next % NODES.len()];
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            match tokio::time::timeout(Duration::from_secs(2), raft.client_write(command.clone())).await {
                Ok(Ok(response)) => return Some((response.log_id.index, response.data.0)),
                Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                    next += 1;
                    target = forward.leader_id.unwrap_or(NODES[next % NODES.len()]);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                _ => {
                    next += 1;
                    target = NODES[next % NODES.len()];
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        None
    }
}

/// A node as the leader's duties see it: its Raft, its state and the simulation's virtual time.
struct SimDutyNode {
    sim: Sim,
    id: NodeId,
}

impl DutyNode for SimDutyNode {
    fn leads(&self) -> bool {
        let raft = self.sim.net.lock_recovered().rafts.get(&self.id).cloned();
        raft.is_some_and(|r| r.metrics().borrow().current_leader == Some(self.id))
    }

    fn with_state<R>(&self, read: impl FnOnce(&State) -> R) -> R {
        let state = self.sim.nodes.lock_recovered().get(&self.id).map(|n| n.state.clone()).unwrap_or_default();
        let state = state.read_recovered();
        read(&state)
    }

    fn now_ms(&self) -> i64 {
        i64::try_from(self.sim.now_ms()).unwrap_or(i64::MAX)
    }

    async fn voters_format(&self) -> Option<u32> {
        Some(crate::FORMAT_VERSION)
    }

    async fn propose(&self, command: Command) -> Result<(), String> {
        let raft = self.sim.net.lock_recovered().rafts.get(&self.id).cloned().ok_or("the node is down")?;
        let what = match &command {
            Command::SetFormat { .. } => "raise the format",
            Command::ExpireTransactions { .. } => "expire transactions",
            Command::ExpireOffsets { .. } => "expire offsets",
            Command::ApplyRetention { .. } => "apply retention",
            _ => "another duty",
        };
        self.sim.record(format!("duty of {}: {what}", self.id));
        match tokio::time::timeout(Duration::from_secs(2), raft.client_write(command)).await {
            Ok(Ok(response)) => {
                self.sim.record(format!("duty of {}: {what} at {}", self.id, response.log_id.index));
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer in 2 s".into()),
        }
    }
}

/// A node as its group coordinator sees it.
#[derive(Clone)]
struct SimGroupNode {
    sim: Sim,
    id: NodeId,
    state: Arc<RwLock<State>>,
    coordinator: Arc<GroupCoordinator>,
}

impl SimGroupNode {
    fn raft(&self) -> Result<Raft<TypeConfig>, NodeError> {
        self.sim
            .net
            .lock_recovered()
            .rafts
            .get(&self.id)
            .cloned()
            .ok_or_else(|| NodeError::Unavailable("the node is down".into()))
    }
}

impl GroupNode for SimGroupNode {
    fn leader_term(&self) -> Option<u64> {
        let raft = self.raft().ok()?;
        let metrics = raft.metrics();
        let m = metrics.borrow();
        (m.current_leader == Some(self.id)).then_some(m.current_term)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read_recovered()
    }

    fn clock(&self) -> &Clock {
        &self.sim.clock
    }

    fn groups(&self) -> Arc<GroupCoordinator> {
        self.coordinator.clone()
    }

    async fn propose_indexed(&self, command: Command) -> Result<(Outcome, u64), NodeError> {
        let raft = self.raft()?;
        match tokio::time::timeout(Duration::from_secs(2), raft.client_write(command)).await {
            Ok(Ok(response)) => {
                let index = response.log_id.index;
                response.data.0.map(|outcome| (outcome, index)).map_err(NodeError::Rejected)
            }
            Ok(Err(e)) => Err(NodeError::Unavailable(e.to_string())),
            Err(_) => Err(NodeError::Unavailable("no answer in 2 s".into())),
        }
    }

    async fn confirm_linearizable_read(&self) -> Result<(), NodeError> {
        let raft = self.raft()?;
        match tokio::time::timeout(Duration::from_secs(2), raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(NodeError::Unavailable(e.to_string())),
            Err(_) => Err(NodeError::Unavailable("no quorum in 2 s".into())),
        }
    }
}

struct SimNetwork {
    sim: Sim,
    from: NodeId,
}

struct SimConnection {
    sim: Sim,
    from: NodeId,
    to: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for SimNetwork {
    type Network = SimConnection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Self::Network {
        SimConnection { sim: self.sim.clone(), from: self.from, to: target }
    }
}

fn lost<E: std::error::Error>() -> RPCError<NodeId, BasicNode, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other("lost in the simulated network")))
}

impl SimConnection {
    /// Carries a request there and its answer back; either may be lost.
    async fn exchange<T, E, F>(
        &self,
        option: &RPCOption,
        call: impl FnOnce(Raft<TypeConfig>) -> F,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        E: std::error::Error,
        F: std::future::Future<Output = Result<T, RaftError<NodeId, E>>>,
    {
        let target = self.sim.carry(self.from, self.to).await.ok_or_else(lost)?;
        let answer = tokio::time::timeout(option.hard_ttl(), call(target)).await.map_err(|_| lost())?;
        if self.sim.carry(self.to, self.from).await.is_none() {
            return Err(lost());
        }
        match answer {
            Ok(answer) => Ok(answer),
            Err(RaftError::Fatal(_)) => Err(lost()),
            Err(e) => Err(RPCError::RemoteError(RemoteError::new(self.to, e))),
        }
    }
}

impl RaftNetwork<TypeConfig> for SimConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.exchange(&option, |raft| async move { raft.append_entries(rpc).await }).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        if rpc.offset == 0 {
            let index = rpc.meta.last_log_id.map_or(0, |l| l.index);
            self.sim.record(format!("snapshot {}->{} to {index}", self.from, self.to));
        }
        self.exchange(&option, |raft| async move { raft.install_snapshot(rpc).await }).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.exchange(&option, |raft| async move { raft.vote(rpc).await }).await
    }
}

fn topic_id() -> crate::state::TopicId {
    uuid::Uuid::from_bytes([7; 16])
}

/// A segment commit of 1 to 3 chunks of random partitions and batch sizes.
fn random_commit(rng: &mut StdRng, key: &str) -> Command {
    let mut byte_start = 0;
    let chunks = (0..rng.gen_range(1..=3))
        .map(|_| {
            let batches: Vec<BatchSummary> = (0..rng.gen_range(1..=3))
                .map(|_| BatchSummary { offset_count: rng.gen_range(1..=50), timestamp_max: 1_000, base_sequence: -1 })
                .collect();
            let chunk = ChunkCommit {
                topic_id: topic_id(),
                partition: rng.gen_range(0..PARTITIONS),
                byte_start,
                byte_len: 100,
                crc32c: 0,
                batches,
                producer: None,
                uncompressed_bytes: 100,
            };
            byte_start += 100;
            chunk
        })
        .collect();
    Command::CommitSegment(SegmentCommit { key: key.to_owned(), object_bytes: byte_start + 24, chunks })
}

/// The agent index the transactional producer proposes as (which node it tries first).
const TXN_AGENT: usize = AGENTS;
/// Transactions it runs.
const TRANSACTIONS: usize = 12;

async fn transactional_agent(
    sim: Sim,
    mut rng: StdRng,
    acks: Arc<Mutex<Vec<Ack>>>,
    txns: Arc<Mutex<Vec<EndedTxn>>>,
    far: Instant,
) {
    use crate::command::{ChunkProducer, ProducerIdEpoch};
    let transactional_id = "sim-txn".to_owned();
    let init = Command::InitProducerId {
        transactional_id: Some(transactional_id.clone()),
        transaction_timeout_ms: 600_000,
        expected: None,
        now_ms: 0,
        tenant: None,
    };
    let Some((_, Ok(Outcome::ProducerId(producer)))) = sim.propose(TXN_AGENT, &init, far).await else {
        panic!("InitProducerId failed");
    };
    let ProducerIdEpoch { producer_id, producer_epoch } = producer;
    let mut sequences = [0i32; PARTITIONS as usize];
    for n in 0..TRANSACTIONS {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..800))).await;
        let first = rng.gen_range(0..PARTITIONS);
        let partitions = [first, (first + 1 + rng.gen_range(0..PARTITIONS - 1)) % PARTITIONS];
        let add = Command::AddPartitionsToTxn {
            transactional_id: transactional_id.clone(),
            producer,
            partitions: partitions.iter().map(|p| (topic_id(), *p)).collect(),
            now_ms: 0,
        };
        let added = sim.propose(TXN_AGENT, &add, far).await;
        assert!(
            matches!(&added, Some((_, Ok(Outcome::PartitionsAdded(r)))) if r.iter().all(Result::is_ok)),
            "AddPartitionsToTxn: {added:?}"
        );
        let key = format!("txn/object-{n}");
        let chunks: Vec<ChunkCommit> = partitions
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let count = rng.gen_range(1..=20u32);
                let batch =
                    BatchSummary { offset_count: count, timestamp_max: 1_000, base_sequence: sequences[*p as usize] };
                sequences[*p as usize] += count as i32;
                ChunkCommit {
                    topic_id: topic_id(),
                    partition: *p,
                    byte_start: 100 * i as u64,
                    byte_len: 100,
                    crc32c: 0,
                    batches: vec![batch],
                    producer: Some(ChunkProducer { producer_id, producer_epoch, transactional: true }),
                    uncompressed_bytes: 100,
                }
            })
            .collect();
        let command = Command::CommitSegment(SegmentCommit { key: key.clone(), object_bytes: 224, chunks });
        let sent_ms = sim.now_ms();
        let Some((index, Ok(Outcome::SegmentCommitted { chunks: bases }))) =
            sim.propose(TXN_AGENT, &command, far).await
        else {
            panic!("a transactional commit failed");
        };
        let Command::CommitSegment(commit) = &command else { unreachable!("built as a segment commit") };
        let chunks: Vec<(i32, i64, i64)> = commit
            .chunks
            .iter()
            .zip(bases)
            .map(|(c, base)| (c.partition, base.expect("sequenced"), i64::from(c.batches[0].offset_count)))
            .collect();
        sim.record(format!("ack {key} at {index}"));
        acks.lock_recovered().push(Ack {
            command,
            key,
            index,
            sent_ms,
            acked_ms: sim.now_ms(),
            chunks: chunks.clone(),
        });
        let committed = rng.gen_bool(0.7);
        let end =
            Command::EndTxn { transactional_id: transactional_id.clone(), producer, commit: committed, now_ms: 0 };
        let ended = sim.propose(TXN_AGENT, &end, far).await;
        assert!(matches!(ended, Some((_, Ok(_)))), "EndTxn: {ended:?}");
        sim.record(format!("txn {n} {}", if committed { "committed" } else { "aborted" }));
        txns.lock_recovered().push(EndedTxn { producer_id, chunks, committed });
    }
}

/// A producer that writes one transaction to partitions 0 and 1 and is gone before it ends it:
/// the leader's duties abort it once its 3 s timeout passes. Returned as the transaction it
/// must end as (aborted).
async fn abandoned_transaction(sim: Sim, acks: Arc<Mutex<Vec<Ack>>>, far: Instant) -> EndedTxn {
    use crate::command::ChunkProducer;
    let transactional_id = "sim-abandoned".to_owned();
    let now_ms = |sim: &Sim| i64::try_from(sim.now_ms()).unwrap_or(i64::MAX);
    let init = Command::InitProducerId {
        transactional_id: Some(transactional_id.clone()),
        transaction_timeout_ms: 3_000,
        expected: None,
        now_ms: now_ms(&sim),
        tenant: None,
    };
    let Some((_, Ok(Outcome::ProducerId(producer)))) = sim.propose(TXN_AGENT + 1, &init, far).await else {
        panic!("InitProducerId of the abandoned producer failed");
    };
    let partitions = [0, 1];
    let add = Command::AddPartitionsToTxn {
        transactional_id,
        producer,
        partitions: partitions.iter().map(|p| (topic_id(), *p)).collect(),
        now_ms: now_ms(&sim),
    };
    let added = sim.propose(TXN_AGENT + 1, &add, far).await;
    let timed_out = |sim: &Sim, what: &str, index: u64| {
        // The faults held the producer up past its 3 s transaction timeout (an earlier copy of
        // the command may have landed and started it): the leader's duties aborted the
        // transaction and fenced the producer, as Kafka does. It must still end up closed.
        sim.record(format!("abandoned producer's {what} refused at {index}: its transaction had timed out"));
        EndedTxn { producer_id: producer.producer_id, chunks: Vec::new(), committed: false }
    };
    match &added {
        Some((_, Ok(Outcome::PartitionsAdded(_)))) => {}
        Some((index, Err(CommandError::ProducerFenced | CommandError::InvalidProducerEpoch { .. }))) => {
            return timed_out(&sim, "AddPartitionsToTxn", *index);
        }
        other => panic!("AddPartitionsToTxn: {other:?}"),
    }
    let key = "abandoned/object".to_owned();
    let chunks = partitions
        .iter()
        .map(|p| ChunkCommit {
            topic_id: topic_id(),
            partition: *p,
            byte_start: 100 * u64::try_from(*p).unwrap_or(0),
            byte_len: 100,
            crc32c: 0,
            batches: vec![BatchSummary { offset_count: 5, timestamp_max: 1_000, base_sequence: 0 }],
            producer: Some(ChunkProducer {
                producer_id: producer.producer_id,
                producer_epoch: producer.producer_epoch,
                transactional: true,
            }),
            uncompressed_bytes: 100,
        })
        .collect();
    let command = Command::CommitSegment(SegmentCommit { key: key.clone(), object_bytes: 224, chunks });
    let sent_ms = sim.now_ms();
    let Some((index, Ok(Outcome::SegmentCommitted { chunks: bases }))) =
        sim.propose(TXN_AGENT + 1, &command, far).await
    else {
        panic!("the abandoned transaction's commit failed");
    };
    if let Some(Err(refused)) = bases.iter().find(|b| b.is_err()) {
        assert!(
            matches!(refused, CommandError::InvalidProducerEpoch { .. } | CommandError::ProducerFenced),
            "the abandoned transaction's commit was refused: {refused:?}"
        );
        return timed_out(&sim, "commit", index);
    }
    let chunks: Vec<(i32, i64, i64)> =
        partitions.iter().zip(bases).map(|(p, base)| (*p, base.expect("sequenced"), 5)).collect();
    sim.record(format!("ack {key} at {index}, then the producer is gone"));
    acks.lock_recovered().push(Ack { command, key, index, sent_ms, acked_ms: sim.now_ms(), chunks: chunks.clone() });
    EndedTxn { producer_id: producer.producer_id, chunks, committed: false }
}

/// Each ended transaction is whole: its chunks all readable under read_committed when it
/// committed, all within an aborted range when it aborted, and none left open.
fn check_transactions(state: &State, txns: &[EndedTxn]) -> Vec<String> {
    let mut problems = Vec::new();
    for (n, txn) in txns.iter().enumerate() {
        for &(partition, base, count) in &txn.chunks {
            let Some(p) = state.partition(topic_id(), partition) else {
                problems.push(format!("transaction {n}: no partition {partition}"));
                continue;
            };
            let aborted = p.aborted_transactions.iter().any(|a| {
                a.producer_id == txn.producer_id && a.first_offset <= base && base + count - 1 < a.last_offset
            });
            if aborted == txn.committed {
                problems.push(format!(
                    "transaction {n} {} but its chunk at {partition}/{base} is {}",
                    if txn.committed { "committed" } else { "aborted" },
                    if aborted { "aborted" } else { "not aborted" }
                ));
            }
            if p.open_transactions.contains_key(&txn.producer_id) {
                problems.push(format!("transaction {n} ended but is still open in partition {partition}"));
            }
        }
    }
    problems
}

/// KIP-848 consumer members of one group, through the coordinator of whichever node leads.
const MEMBERS: usize = 3;
const CONSUMER_GROUP: &str = "sim-consumers";
/// A member that heard no answer for this long gives its partitions up, as clients do (the
/// group's default session timeout).
const MEMBER_SESSION: Duration = Duration::from_secs(45);

/// Which member holds each partition of the consumer group, as the members believe, and what
/// went wrong: a partition given to one member while another still held it, or a member's
/// epoch going back.
#[derive(Default)]
struct Holdings {
    holder: BTreeMap<i32, String>,
    problems: Vec<String>,
}

impl Holdings {
    /// `member` holds `now` instead of `before`.
    fn hold(&mut self, member: &str, before: &BTreeSet<i32>, now: &BTreeSet<i32>) {
        for p in before.difference(now) {
            if self.holder.get(p).is_some_and(|h| h == member) {
                self.holder.remove(p);
            }
        }
        for p in now.difference(before) {
            if let Some(other) = self.holder.get(p).filter(|h| *h != member) {
                self.problems.push(format!("{member} was given partition {p} while {other} held it"));
            }
            self.holder.insert(*p, member.to_owned());
        }
    }
}

/// One consumer-protocol member, heartbeating until `stop`: it holds what its answers assign,
/// reports what it holds, rejoins when fenced, and looks for the coordinator on another node
/// when told this one is not it. An answer may be lost on its way back.
async fn consumer_member(sim: Sim, n: usize, mut rng: StdRng, holdings: Arc<Mutex<Holdings>>, stop: CancellationToken) {
    let member_id = format!("member-{n}");
    let (mut epoch, mut owned, mut heard) = (0, BTreeSet::new(), Instant::now());
    let mut target = n;
    let release = |owned: &mut BTreeSet<i32>, why: &str| {
        holdings.lock_recovered().hold(&member_id, owned, &BTreeSet::new());
        owned.clear();
        sim.record(format!("{member_id} gives its partitions up: {why}"));
    };
    while crate::tasks::sleep_unless_stopped(&stop, Duration::from_millis(rng.gen_range(200..600))).await {
        if !owned.is_empty() && heard.elapsed() > MEMBER_SESSION {
            release(&mut owned, "no answer for a session");
            epoch = 0;
        }
        let Some((node, group_node)) = sim.group_node(target) else {
            target += 1;
            continue;
        };
        let request = GroupRequest::ConsumerHeartbeat(crate::groups::ConsumerHeartbeat {
            group_id: CONSUMER_GROUP.into(),
            member_id: member_id.clone(),
            member_epoch: epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(vec!["sim".into()]),
            subscribed_regex: None,
            server_assignor: None,
            owned: Some(vec![(topic_id(), owned.iter().copied().collect())]),
            client_id: "sim".into(),
            client_host: "sim".into(),
        });
        let answer = group_node.groups().handle(&group_node, request).await;
        if sim.answer_lost() {
            continue;
        }
        match answer {
            Ok((GroupResponse::ConsumerHeartbeat(Ok(answer)), _)) => {
                heard = Instant::now();
                if answer.member_epoch < epoch {
                    holdings
                        .lock_recovered()
                        .problems
                        .push(format!("{member_id}'s epoch went back from {epoch} to {}", answer.member_epoch));
                }
                if answer.member_epoch != epoch {
                    sim.record(format!("{member_id} epoch {} from node {node}", answer.member_epoch));
                }
                epoch = answer.member_epoch;
                if let Some(assignment) = answer.assignment {
                    let now: BTreeSet<i32> = assignment.iter().flat_map(|(_, ps)| ps.iter().copied()).collect();
                    holdings.lock_recovered().hold(&member_id, &owned, &now);
                    sim.record(format!("{member_id} holds {now:?} at epoch {epoch}"));
                    owned = now;
                }
            }
            Ok((
                GroupResponse::ConsumerHeartbeat(Err(GroupError::FencedMemberEpoch | GroupError::UnknownMemberId)),
                _,
            )) => {
                release(&mut owned, "fenced");
                epoch = 0;
            }
            _ => target += 1,
        }
    }
}

/// Classic (eager) members of one group, through whichever node leads.
const CLASSIC_MEMBERS: usize = 3;
const CLASSIC_GROUP: &str = "sim-classic";
const CLASSIC_SESSION_MS: i32 = 10_000;

/// What the classic members were handed: per generation, the member each partition was synced
/// to and the leader every member was told; who holds each partition now (and from which
/// generation); the highest generation a member synced; and what went wrong.
#[derive(Default)]
struct ClassicHoldings {
    given: BTreeMap<i32, BTreeMap<i32, String>>,
    leaders: BTreeMap<i32, String>,
    holder: BTreeMap<i32, (String, i32)>,
    synced_max: i32,
    problems: Vec<String>,
}

impl ClassicHoldings {
    /// `member` synced `generation`, which it joined told `leader` leads it, and holds
    /// `partitions`: every member that synced the generation was told the same leader, and no
    /// other was given one of them. (A generation joined but never stored may be formed again
    /// with another leader after a failover, as in Kafka; a synced one is durable.)
    fn synced(&mut self, member: &str, generation: i32, leader: &str, partitions: &BTreeSet<i32>) {
        let told = self.leaders.entry(generation).or_insert_with(|| leader.to_owned());
        if told != leader {
            self.problems.push(format!("{member} synced generation {generation} led by another member"));
        }
        let given = self.given.entry(generation).or_default();
        for p in partitions {
            if let Some(other) = given.get(p).filter(|o| *o != member) {
                self.problems
                    .push(format!("{member} and {other} were both given partition {p} in generation {generation}"));
            }
            given.insert(*p, member.to_owned());
            self.holder.insert(*p, (member.to_owned(), generation));
        }
        self.synced_max = self.synced_max.max(generation);
    }

    fn release(&mut self, member: &str) {
        self.holder.retain(|_, (m, _)| m != member);
    }

    /// Every partition held, all from the newest generation synced.
    fn settled(&self) -> bool {
        self.holder.len() == PARTITIONS as usize && self.holder.values().all(|(_, g)| *g == self.synced_max)
    }
}

/// A classic member's range assignment, made by the group's leader: partition `p` goes to the
/// `p % n`-th member by name (each member names itself in its protocol metadata, so the
/// assignment does not depend on the coordinator's member ids). Encoded as one byte per partition.
fn classic_assignments(members: &[crate::groups::JoinedMember]) -> Vec<(String, Vec<u8>)> {
    let mut named: Vec<(&[u8], &str)> = members.iter().map(|m| (m.metadata.as_slice(), m.member_id.as_str())).collect();
    named.sort();
    named
        .iter()
        .enumerate()
        .map(|(i, (_, id))| {
            let partitions = (0..PARTITIONS).filter(|p| *p as usize % named.len() == i).map(|p| p as u8).collect();
            ((*id).to_owned(), partitions)
        })
        .collect()
}

/// One classic member, eager: before each join it gives up what it holds; it joins, syncs (its
/// leader assigning), heartbeats, and commits offsets of what it holds with its generation.
/// Answers may be lost on their way back, and a member that heard nothing for a session gives
/// everything up and joins again as a new member.
async fn classic_member(
    sim: Sim,
    n: usize,
    mut rng: StdRng,
    holdings: Arc<Mutex<ClassicHoldings>>,
    stop: CancellationToken,
) {
    let name = format!("classic-{n}");
    let (mut member_id, mut generation, mut synced) = (String::new(), -1, false);
    let (mut owned, mut heard, mut commits) = (BTreeSet::new(), Instant::now(), 0u64);
    let mut target = n;
    let release = |owned: &mut BTreeSet<i32>, why: &str| {
        if !owned.is_empty() {
            holdings.lock_recovered().release(&name);
            owned.clear();
            sim.record(format!("{name} gives its partitions up: {why}"));
        }
    };
    while crate::tasks::sleep_unless_stopped(&stop, Duration::from_millis(rng.gen_range(200..600))).await {
        if heard.elapsed() > Duration::from_millis(CLASSIC_SESSION_MS as u64) {
            release(&mut owned, "no answer for a session");
            (member_id, synced) = (String::new(), false);
        }
        let Some((node, group_node)) = sim.group_node(target) else {
            target += 1;
            continue;
        };
        let member = crate::groups::MemberRef {
            group_id: CLASSIC_GROUP.into(),
            generation,
            member_id: member_id.clone(),
            instance_id: None,
        };
        if synced {
            // Heartbeat, and now and then commit what it holds.
            let request = if rng.gen_bool(0.3) && !owned.is_empty() {
                commits += 1;
                let offsets = owned
                    .iter()
                    .map(|p| crate::state::stored::OffsetCommit {
                        topic: "sim".into(),
                        partition: *p,
                        offset: commits as i64,
                        leader_epoch: -1,
                        metadata: String::new(),
                    })
                    .collect();
                let stamp = crate::state::stored::CommitStamp { origin: 1_000 + n as u64, seq: commits };
                GroupRequest::CommitOffsets { member, offsets, stamp }
            } else {
                GroupRequest::Heartbeat(member)
            };
            let newest_synced = holdings.lock_recovered().synced_max;
            let answer = group_node.groups().handle(&group_node, request).await;
            if sim.answer_lost() {
                continue;
            }
            let error = match answer {
                Ok((GroupResponse::Heartbeat(Ok(())), _)) => None,
                Ok((GroupResponse::CommitOffsets(Ok(results)), _)) => {
                    if results.iter().all(Result::is_ok) && generation < newest_synced {
                        holdings.lock_recovered().problems.push(format!(
                            "{name}'s commit of generation {generation} was accepted after generation {newest_synced} synced"
                        ));
                    }
                    results.into_iter().find_map(Result::err)
                }
                Ok((GroupResponse::Heartbeat(Err(e)) | GroupResponse::CommitOffsets(Err(e)), _)) => Some(e),
                _ => {
                    target += 1;
                    continue;
                }
            };
            heard = Instant::now();
            match error {
                None => {}
                Some(GroupError::RebalanceInProgress) => synced = false,
                Some(GroupError::IllegalGeneration | GroupError::UnknownMemberId) => {
                    release(&mut owned, "fenced");
                    (member_id, synced) = (String::new(), false);
                }
                Some(_) => target += 1,
            }
            continue;
        }
        release(&mut owned, "rejoining");
        let join = GroupRequest::Join(crate::groups::JoinRequest {
            group_id: CLASSIC_GROUP.into(),
            session_timeout_ms: CLASSIC_SESSION_MS,
            rebalance_timeout_ms: 5_000,
            member_id: member_id.clone(),
            instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), name.clone().into_bytes())],
            client_id: "sim".into(),
            client_host: "sim".into(),
            require_known_member: false,
        });
        let answer = group_node.groups().handle(&group_node, join).await;
        if sim.answer_lost() {
            continue;
        }
        let joined = match answer {
            Ok((GroupResponse::Join(Ok(joined)), _)) => joined,
            Ok((GroupResponse::Join(Err((GroupError::UnknownMemberId | GroupError::IllegalGeneration, _))), _)) => {
                heard = Instant::now();
                member_id = String::new();
                continue;
            }
            Ok((GroupResponse::Join(Err(_)), _)) => continue,
            _ => {
                target += 1;
                continue;
            }
        };
        heard = Instant::now();
        (member_id, generation) = (joined.member_id.clone(), joined.generation);
        let leads = if joined.leader == member_id { "leads" } else { "follows" };
        sim.record(format!("{name} joined generation {generation} through node {node} and {leads}"));
        let assignments = if joined.leader == member_id { classic_assignments(&joined.members) } else { Vec::new() };
        let sync = GroupRequest::Sync(crate::groups::SyncRequest {
            group_id: CLASSIC_GROUP.into(),
            generation,
            member_id: member_id.clone(),
            instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol: Some("range".into()),
            assignments,
        });
        let answer = group_node.groups().handle(&group_node, sync).await;
        if sim.answer_lost() {
            continue;
        }
        match answer {
            Ok((GroupResponse::Sync(Ok(synced_to)), _)) => {
                heard = Instant::now();
                owned = synced_to.assignment.iter().map(|p| i32::from(*p)).collect();
                holdings.lock_recovered().synced(&name, generation, &joined.leader, &owned);
                sim.record(format!("{name} holds {owned:?} in generation {generation}"));
                synced = true;
            }
            Ok((GroupResponse::Sync(Err(GroupError::UnknownMemberId | GroupError::IllegalGeneration)), _)) => {
                member_id = String::new();
            }
            Ok((GroupResponse::Sync(Err(_)), _)) => {}
            _ => target += 1,
        }
    }
}

/// Share group members, through whichever node leads.
const SHARE_MEMBERS: usize = 3;
const SHARE_GROUP: &str = "sim-share";
/// `group.share.record.lock.duration.ms` and `group.share.delivery.count.limit` by default.
const SHARE_LOCK_MS: u64 = 30_000;
const SHARE_DELIVERY_LIMIT: i16 = 5;

/// A record a share member acquired: by whom, the virtual time its request was sent (its lock
/// lasts at least `SHARE_LOCK_MS` from then), and whether its holder may have given it back
/// since (an acknowledgement sent, a release, a rejoin).
struct ShareLock {
    member: String,
    sent_ms: u64,
    answered_ms: u64,
    maybe_over: bool,
}

/// What the share members were handed, per (partition, offset): each record's current lock, the
/// highest delivery count seen, and the records whose acceptance was acknowledged.
#[derive(Default)]
struct ShareLedger {
    locks: BTreeMap<(i32, i64), ShareLock>,
    deliveries: BTreeMap<(i32, i64), i16>,
    accepted: BTreeSet<(i32, i64)>,
    problems: Vec<String>,
}

impl ShareLedger {
    /// `member` was answered at `answered_ms` with a lock on `range` of `partition`, asked for at
    /// `sent_ms`: no accepted record is delivered again, no record is locked by two members at
    /// once, and delivery counts go up to the limit.
    fn acquired(
        &mut self,
        member: &str,
        partition: i32,
        range: &crate::state::AcquiredRange,
        sent_ms: u64,
        answered_ms: u64,
    ) {
        for offset in range.first..=range.last {
            let key = (partition, offset);
            if self.accepted.contains(&key) {
                self.problems.push(format!("{member} was given {partition}/{offset}, which was accepted"));
            }
            if let Some(lock) = self.locks.get(&key).filter(|l| l.member != member && !l.maybe_over) {
                // Both locks surely overlapped: each was granted before the other surely ended.
                if answered_ms < lock.sent_ms + SHARE_LOCK_MS && lock.answered_ms < sent_ms + SHARE_LOCK_MS {
                    self.problems
                        .push(format!("{member} was given {partition}/{offset} while {} held it", lock.member));
                }
            }
            let before = self.deliveries.insert(key, range.delivery_count);
            if before.is_some_and(|b| b >= range.delivery_count) || range.delivery_count > SHARE_DELIVERY_LIMIT {
                self.problems.push(format!(
                    "{partition}/{offset} delivered with count {} after {before:?} (limit {SHARE_DELIVERY_LIMIT})",
                    range.delivery_count
                ));
            }
            self.locks.insert(key, ShareLock { member: member.to_owned(), sent_ms, answered_ms, maybe_over: false });
        }
    }

    /// `member` may have given back all it holds (or `only` these records).
    fn maybe_over(&mut self, member: &str, only: Option<(i32, i64, i64)>) {
        for ((p, o), lock) in &mut self.locks {
            if lock.member == member && only.is_none_or(|(op, first, last)| op == *p && (first..=last).contains(o)) {
                lock.maybe_over = true;
            }
        }
    }
}

/// One share consumer: it heartbeats for its assignment, acquires records of its partitions,
/// and acknowledges what it acquired at its next request: mostly accepting, sometimes releasing,
/// and now and then forgetting them until their locks expire. Answers may be lost.
async fn share_member(sim: Sim, n: usize, mut rng: StdRng, ledger: Arc<Mutex<ShareLedger>>, stop: CancellationToken) {
    let name = format!("share-{n}");
    let (mut member_id, mut epoch) = (format!("sim-share-member-{n}"), 0);
    let mut assigned: Vec<i32> = Vec::new();
    let mut holding: Vec<(i32, crate::state::AcquiredRange)> = Vec::new();
    let mut target = n;
    while crate::tasks::sleep_unless_stopped(&stop, Duration::from_millis(rng.gen_range(200..600))).await {
        let Some((_, group_node)) = sim.group_node(target) else {
            target += 1;
            continue;
        };
        let heartbeat = GroupRequest::ShareHeartbeat(crate::groups::ShareHeartbeat {
            group_id: SHARE_GROUP.into(),
            member_id: member_id.clone(),
            member_epoch: epoch,
            rack_id: None,
            subscribed_topics: (epoch == 0).then(|| vec!["sim".into()]),
            client_id: "sim".into(),
            client_host: "sim".into(),
        });
        let answer = group_node.groups().handle(&group_node, heartbeat).await;
        if sim.answer_lost() {
            continue;
        }
        match answer {
            Ok((GroupResponse::ShareHeartbeat(Ok(answer)), _)) => {
                (member_id, epoch) = (answer.member_id, answer.member_epoch);
                if let Some(assignment) = answer.assignment {
                    assigned = assignment.into_iter().flat_map(|(_, ps)| ps).collect();
                    sim.record(format!("{name} reads {assigned:?} at epoch {epoch}"));
                }
            }
            Ok((
                GroupResponse::ShareHeartbeat(Err(GroupError::FencedMemberEpoch | GroupError::UnknownMemberId)),
                _,
            )) => {
                // Joining again: what it held goes back to the group.
                ledger.lock_recovered().maybe_over(&name, None);
                (epoch, assigned) = (0, Vec::new());
                holding.clear();
                continue;
            }
            _ => {
                target += 1;
                continue;
            }
        }
        if assigned.is_empty() {
            continue;
        }
        // Acknowledge what it holds (unless it forgets), and acquire more.
        let mut acknowledgements = Vec::new();
        let mut accepting = Vec::new();
        if !rng.gen_bool(0.1) {
            for (partition, range) in std::mem::take(&mut holding) {
                let ack =
                    if rng.gen_bool(0.8) { crate::state::ShareAck::Accept } else { crate::state::ShareAck::Release };
                ledger.lock_recovered().maybe_over(&name, Some((partition, range.first, range.last)));
                if ack == crate::state::ShareAck::Accept {
                    accepting.push((partition, range.first, range.last));
                }
                let batch = crate::state::AckBatch { first: range.first, last: range.last, ack };
                acknowledgements.push((topic_id(), partition, vec![batch]));
            }
        } else if !holding.is_empty() {
            sim.record(format!("{name} forgets what it holds"));
            holding.clear();
        }
        let acquire: Vec<(crate::state::TopicId, i32)> = assigned.iter().map(|p| (topic_id(), *p)).collect();
        let work = GroupRequest::ShareWork(crate::groups::ShareWork {
            group_id: SHARE_GROUP.into(),
            member_id: member_id.clone(),
            unsent: Vec::new(),
            acknowledgements,
            release_all: false,
            acquire: acquire.clone(),
            max_records: 5,
            read_committed: false,
        });
        let sent_ms = sim.now_ms();
        let answer = group_node.groups().handle(&group_node, work).await;
        if sim.answer_lost() {
            continue;
        }
        let Ok((GroupResponse::ShareWork(Ok(result)), _)) = answer else { continue };
        let answered_ms = sim.now_ms();
        let mut ledger = ledger.lock_recovered();
        for ((partition, first, last), acked) in accepting.iter().zip(&result.acknowledged) {
            if acked.is_ok() {
                ledger.accepted.extend((*first..=*last).map(|o| (*partition, o)));
            }
        }
        for ((_, partition), acquired) in acquire.iter().zip(result.acquired) {
            for range in acquired.unwrap_or_default() {
                ledger.acquired(&name, *partition, &range, sent_ms, answered_ms);
                sim.record(format!(
                    "{name} acquired {partition}/{}..={} (delivery {})",
                    range.first, range.last, range.delivery_count
                ));
                holding.push((*partition, range));
            }
        }
    }
}

/// The group the agents race on, with a member, so the leader's offset expiry keeps it.
fn group(generation: i32) -> crate::state::GroupMembership {
    let member = crate::state::MemberRecord {
        member_id: "sim-member".into(),
        instance_id: None,
        client_id: "sim".into(),
        client_host: "sim".into(),
        session_timeout_ms: 45_000,
        rebalance_timeout_ms: 60_000,
        subscription: Vec::new(),
        assignment: Vec::new(),
        member_epoch: 0,
        rack_id: None,
    };
    crate::state::GroupMembership {
        kind: crate::state::GroupKind::default(),
        protocol_type: "consumer".into(),
        generation,
        protocol: Some("range".into()),
        leader: None,
        members: vec![member],
    }
}

/// What one seed produced: its history and the problems the checks found.
struct Run {
    history: Vec<String>,
    problems: Vec<String>,
}

fn root_dir(seed: u64) -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    base.join(format!("floe-sim-{seed}-{}", uuid::Uuid::new_v4().simple()))
}

fn run_seed(seed: u64) -> Run {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().start_paused(true).build().expect("runtime");
    let root = root_dir(seed);
    let run = runtime.block_on(simulate(seed, root.clone()));
    drop(runtime);
    let _ = std::fs::remove_dir_all(&root);
    run
}

async fn simulate(seed: u64, root: PathBuf) -> Run {
    super::runtime::seed_this_thread(seed);
    let mut faults = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(1));
    let net = Net {
        rng: StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(2)),
        loss: faults.gen_range(0.0..0.2),
        delay_max_ms: faults.gen_range(1..60),
        cut: BTreeSet::new(),
        rafts: BTreeMap::new(),
    };
    let mut policy = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(11));
    let sim = Sim {
        net: Arc::new(Mutex::new(net)),
        nodes: Arc::default(),
        history: Arc::default(),
        root,
        start: Instant::now(),
        clock: Clock::tokio(0),
        snapshot_every: policy.gen_range(10..=60),
        logs_kept: policy.gen_range(0..=20),
    };
    for id in NODES {
        sim.start_node(id, true).await;
    }
    let far = Instant::now() + Duration::from_secs(600);
    let create = Command::CreateTopic {
        name: "sim".into(),
        topic_id: topic_id(),
        partition_count: PARTITIONS,
        configs: BTreeMap::new(),
    };
    let (_, created) = sim.propose(0, &create, far).await.expect("the topic is proposed");
    // A copy whose answer was lost may have created it already.
    assert!(matches!(created, Ok(_) | Err(CommandError::TopicExists(_))), "the topic is created: {created:?}");

    // The agents commit while the faults run.
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let generations: Arc<Mutex<Vec<i32>>> = Arc::default();
    let mut agents = Vec::new();
    for agent in 0..AGENTS {
        let (sim, acks, generations) = (sim.clone(), acks.clone(), generations.clone());
        let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(3 + agent as u64 * 1_000_003));
        agents.push(tokio::spawn(async move {
            for n in 0..COMMITS_PER_AGENT {
                tokio::time::sleep(Duration::from_millis(rng.gen_range(0..400))).await;
                let key = format!("agent-{agent}/object-{n}");
                let Command::CommitSegment(commit) = random_commit(&mut rng, &key) else {
                    unreachable!("built as a segment commit")
                };
                let sent_ms = sim.now_ms();
                // Half the commits go in format 13's packed encoding, as a node's group committer
                // writes them, until the cluster is found not to apply it yet.
                let mut command = if rng.gen_bool(0.5) {
                    Command::CommitSegmentsPacked(crate::command::PackedCommits(vec![commit.clone()].into()))
                } else {
                    Command::CommitSegment(commit.clone())
                };
                // A commit whose answer was lost is sent again: the object key makes it one.
                let Some((mut index, mut outcome)) = sim.propose(agent, &command, far).await else { return };
                if matches!(&outcome, Err(CommandError::InvalidCommit(why)) if why.contains("format 13")) {
                    command = Command::CommitSegment(commit.clone());
                    let Some(sent) = sim.propose(agent, &command, far).await else { return };
                    (index, outcome) = sent;
                }
                let outcome = match outcome {
                    Ok(Outcome::SegmentsCommitted(mut each)) if each.len() == 1 => each.remove(0),
                    other => other,
                };
                let Ok(Outcome::SegmentCommitted { chunks }) = outcome else {
                    panic!("unexpected outcome {outcome:?}")
                };
                let chunks = commit
                    .chunks
                    .iter()
                    .zip(chunks)
                    .map(|(chunk, base)| {
                        let count: i64 = chunk.batches.iter().map(|b| i64::from(b.offset_count)).sum();
                        (chunk.partition, base.expect("the partition exists"), count)
                    })
                    .collect();
                sim.record(format!("ack {key} at {index}"));
                acks.lock_recovered().push(Ack { command, key, index, sent_ms, acked_ms: sim.now_ms(), chunks });
                // Both agents store generations of one group, racing: a store older than the
                // stored generation is refused, an acknowledged one is never undone.
                let generation = rng.gen_range(1..=(n as i32 + 1) * 2);
                let store =
                    Command::StoreGroup { group_id: "sim".into(), membership: group(generation).into(), now_ms: 0 };
                let Some((index, outcome)) = sim.propose(agent, &store, far).await else { return };
                if outcome.is_ok() {
                    sim.record(format!("group generation {generation} at {index}"));
                    generations.lock_recovered().push(generation);
                }
            }
        }));
    }

    // A transactional producer: each transaction writes to two partitions, then commits or aborts.
    let txns: Arc<Mutex<Vec<EndedTxn>>> = Arc::default();
    {
        let (sim, acks, txns) = (sim.clone(), acks.clone(), txns.clone());
        let rng = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(7_777_777));
        agents.push(tokio::spawn(transactional_agent(sim, rng, acks, txns, far)));
    }
    let abandoned = tokio::spawn(abandoned_transaction(sim.clone(), acks.clone(), far));
    let holdings: Arc<Mutex<Holdings>> = Arc::default();
    let members_stop = CancellationToken::new();
    let members: Vec<_> = (0..MEMBERS)
        .map(|n| {
            let rng = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(5_000_011 + n as u64));
            tokio::spawn(consumer_member(sim.clone(), n, rng, holdings.clone(), members_stop.clone()))
        })
        .collect();
    let share: Arc<Mutex<ShareLedger>> = Arc::default();
    let share_members: Vec<_> = (0..SHARE_MEMBERS)
        .map(|n| {
            let rng = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(7_000_003 + n as u64));
            tokio::spawn(share_member(sim.clone(), n, rng, share.clone(), members_stop.clone()))
        })
        .collect();
    let classic: Arc<Mutex<ClassicHoldings>> = Arc::default();
    let classic_members: Vec<_> = (0..CLASSIC_MEMBERS)
        .map(|n| {
            let rng = StdRng::seed_from_u64(seed.wrapping_mul(3).wrapping_add(6_000_017 + n as u64));
            tokio::spawn(classic_member(sim.clone(), n, rng, classic.clone(), members_stop.clone()))
        })
        .collect();

    // Faults until FAULTY_FOR; at most two nodes down at once.
    let faulty_until = Instant::now() + FAULTY_FOR;
    while Instant::now() < faulty_until {
        tokio::time::sleep(Duration::from_millis(faults.gen_range(100..800))).await;
        sim.crash_stopped_nodes().await;
        let running: Vec<NodeId> = sim.net.lock_recovered().rafts.keys().copied().collect();
        let down: Vec<NodeId> = NODES.iter().copied().filter(|n| !running.contains(n)).collect();
        match faults.gen_range(0..7) {
            0 | 1 if running.len() > 1 => {
                let id = running[faults.gen_range(0..running.len())];
                let torn = faults.gen_bool(0.5).then(|| {
                    let len = faults.gen_range(1..40);
                    let mut bytes = vec![0u8; len];
                    faults.fill(&mut bytes[..]);
                    if len >= 4 && faults.gen_bool(0.5) {
                        // A length prefix that promises more than was written.
                        bytes[..4].copy_from_slice(&200u32.to_le_bytes());
                    }
                    bytes
                });
                sim.crash(id, torn).await;
            }
            2 if !down.is_empty() => sim.start_node(down[faults.gen_range(0..down.len())], false).await,
            3 => {
                let id = NODES[faults.gen_range(0..NODES.len())];
                let mut net = sim.net.lock_recovered();
                for other in NODES.into_iter().filter(|o| *o != id) {
                    net.cut.insert((id, other));
                    net.cut.insert((other, id));
                }
                drop(net);
                sim.record(format!("isolate {id}"));
            }
            4 => {
                let (a, b) = (NODES[faults.gen_range(0..3)], NODES[faults.gen_range(0..3)]);
                if a != b {
                    sim.net.lock_recovered().cut.insert((a, b));
                    sim.record(format!("cut {a}->{b}"));
                }
            }
            5 if !running.is_empty() => {
                // The node's next log write fails halfway, or its next snapshot write fails: its
                // Raft stops, and so its process.
                let id = running[faults.gen_range(0..running.len())];
                let files = sim.nodes.lock_recovered().get(&id).map(|n| (n.log.clone(), n.snapshots.clone()));
                if let Some((log, snapshots)) = files {
                    if faults.gen_bool(0.5) {
                        log.fail_next_write(true).await;
                        sim.record(format!("disk fault {id}"));
                    } else {
                        snapshots.fail_next_write.store(true, Ordering::Relaxed);
                        sim.record(format!("snapshot disk fault {id}"));
                    }
                }
            }
            _ => {
                sim.net.lock_recovered().cut.clear();
                sim.record("heal".into());
            }
        }
    }

    // Heal, bring every node back, and let the agents finish.
    {
        let mut net = sim.net.lock_recovered();
        net.cut.clear();
        net.loss = 0.0;
    }
    sim.record("heal all".into());
    let files: Vec<(FileLogStore, Arc<TestSnapshotIo>)> =
        sim.nodes.lock_recovered().values().map(|n| (n.log.clone(), n.snapshots.clone())).collect();
    for (log, snapshots) in files {
        log.fail_next_write(false).await;
        snapshots.fail_next_write.store(false, Ordering::Relaxed);
    }
    sim.crash_stopped_nodes().await;
    let running: Vec<NodeId> = sim.net.lock_recovered().rafts.keys().copied().collect();
    for id in NODES.into_iter().filter(|n| !running.contains(n)) {
        sim.start_node(id, false).await;
    }
    for agent in agents {
        agent.await.expect("agent task");
    }
    let abandoned = abandoned.await.expect("abandoned producer task");
    // The leader's duties abort it once its timeout passed (every node is back by now).
    let aborted_by = Instant::now() + Duration::from_secs(30);
    let open = |sim: &Sim| {
        let nodes = sim.nodes.lock_recovered();
        let state = nodes[&1].state.read_recovered();
        (0..PARTITIONS)
            .filter_map(|p| state.partition(topic_id(), p))
            .any(|p| p.open_transactions.contains_key(&abandoned.producer_id))
    };
    while open(&sim) && Instant::now() < aborted_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    txns.lock_recovered().push(abandoned);
    // The members settle: every partition held by one of them (in the classic group, all from
    // its newest generation).
    let settled_by = Instant::now() + Duration::from_secs(60);
    let settled =
        || holdings.lock_recovered().holder.len() == PARTITIONS as usize && classic.lock_recovered().settled();
    while !settled() && Instant::now() < settled_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    members_stop.cancel();
    for member in members.into_iter().chain(classic_members).chain(share_members) {
        member.await.expect("member task");
    }
    let done = Command::CreateTopic {
        name: "done".into(),
        topic_id: uuid::Uuid::from_bytes([9; 16]),
        partition_count: 1,
        configs: BTreeMap::new(),
    };
    let (last, _) = sim.propose(0, &done, far).await.expect("a last command commits");
    let converged = Instant::now() + Duration::from_secs(120);
    while sim.nodes.lock_recovered().values().any(|n| n.state.read_recovered().applied_index < last) {
        assert!(Instant::now() < converged, "the nodes did not converge to index {last}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let acks = acks.lock_recovered().clone();
    let mut problems = check(&sim, &acks, last).await;
    if !acks.iter().any(|a| matches!(a.command, Command::CommitSegmentsPacked(_))) {
        problems.push("no packed segment commit (format 13) was acknowledged".into());
    }
    let holdings = std::mem::take(&mut *holdings.lock_recovered());
    problems.extend(holdings.problems);
    if holdings.holder.len() < PARTITIONS as usize {
        problems.push(format!("the consumer group never settled: partitions held {:?}", holdings.holder));
    }
    let classic = std::mem::take(&mut *classic.lock_recovered());
    if !classic.settled() {
        problems.push(format!(
            "the classic group never settled: partitions held {:?}, newest generation {}",
            classic.holder, classic.synced_max
        ));
    }
    problems.extend(classic.problems);
    problems.extend(std::mem::take(&mut share.lock_recovered().problems));
    problems.extend(check_stored_consumer_group(&sim.nodes.lock_recovered()[&1].state.read_recovered()));
    problems.extend(check_transactions(&sim.nodes.lock_recovered()[&1].state.read_recovered(), &txns.lock_recovered()));
    let stored =
        sim.nodes.lock_recovered()[&1].state.read_recovered().groups.get("sim").map(|g| g.membership.generation);
    if let Some(highest) = generations.lock_recovered().iter().max()
        && stored < Some(*highest)
    {
        problems.push(format!("group generation {highest} was acknowledged, {stored:?} is stored"));
    }
    for node in sim.nodes.lock_recovered().values() {
        node.duties.cancel();
    }
    let rafts: Vec<Raft<TypeConfig>> = std::mem::take(&mut sim.net.lock_recovered().rafts).into_values().collect();
    for raft in rafts {
        let _ = raft.shutdown().await;
    }
    let history = std::mem::take(&mut *sim.history.lock_recovered());
    Run { history, problems }
}

/// The consumer group as stored: no partition assigned to two members.
fn check_stored_consumer_group(state: &State) -> Vec<String> {
    let Some(group) = state.groups.get(CONSUMER_GROUP) else {
        return vec!["the consumer group was never stored".into()];
    };
    let mut seen: BTreeMap<(String, i32), &str> = BTreeMap::new();
    let mut problems = Vec::new();
    for member in &group.membership.members {
        for (topic, partitions) in crate::groups::assigned_partitions(&member.assignment) {
            for p in partitions {
                if let Some(other) = seen.insert((topic.clone(), p), &member.member_id) {
                    problems.push(format!("partition {p} is stored as {other}'s and {}'s", member.member_id));
                }
            }
        }
    }
    problems
}

async fn check(sim: &Sim, acks: &[Ack], last: u64) -> Vec<String> {
    let mut problems = Vec::new();
    // Snapshots and states are read before anything awaits, so no entry is applied in between.
    type Snapshot = Option<(u64, State)>;
    let read: Vec<(NodeId, FileLogStore, Snapshot, State)> = sim
        .nodes
        .lock_recovered()
        .iter()
        .map(|(id, n)| {
            let snapshot = super::state_machine::read_snapshot(&n.dir).expect("the snapshot file reads");
            (*id, n.log.clone(), snapshot, n.state.read_recovered().clone())
        })
        .collect();
    let mut nodes = Vec::new();
    for (id, log, snapshot, state) in read {
        let entries: BTreeMap<u64, Option<Command>> = log
            .entries()
            .await
            .into_iter()
            .map(|e| {
                let command = match e.payload {
                    EntryPayload::Normal(command) => Some(command),
                    _ => None,
                };
                (e.log_id.index, command)
            })
            .collect();
        nodes.push((id, entries, snapshot, state));
    }

    // One log up to `last` where the nodes' logs overlap (each purged its own prefix), and one
    // state.
    let (first_id, first_log) = (nodes[0].0, &nodes[0].1);
    for (id, entries, _, _) in &nodes[1..] {
        let differs = entries.range(..=last).find(|(i, e)| first_log.get(i).is_some_and(|f| f != *e));
        if let Some((index, _)) = differs {
            problems.push(format!("node {id}'s log differs from node {first_id}'s at index {index}"));
        }
    }
    for (id, _, _, state) in &nodes[1..] {
        let mut state = state.clone();
        let mut first = nodes[0].3.clone();
        // Nodes may have applied past `last` by different amounts; compare where all are.
        state.applied_index = 0;
        first.applied_index = 0;
        if nodes.iter().all(|(_, _, _, s)| s.applied_index == nodes[0].3.applied_index) && state != first {
            problems.push(format!("node {id}'s state differs from node {first_id}'s"));
        }
    }
    for (_, _, _, state) in &nodes {
        crate::state::tests::check_invariants(state);
    }
    // Each node's snapshot plus its log after it, applied afresh, gives the state the node holds:
    // applying is deterministic, and no node purged an entry its snapshot does not cover.
    for (id, entries, snapshot, held) in &nodes {
        let (from, mut replayed) = snapshot.clone().unwrap_or_default();
        let missing = (from + 1..=held.applied_index).find(|i| !entries.contains_key(i));
        if let Some(index) = missing {
            problems.push(format!("node {id} lacks entry {index}, after its snapshot at {from}"));
            continue;
        }
        // A snapshot may end past the last command, at a leader's blank entry.
        let after = entries.range(from + 1..).take_while(|(i, _)| **i <= held.applied_index);
        for (index, command) in after {
            if let Some(command) = command {
                let _ = replayed.apply(*index, command.clone());
            }
        }
        let mut held = held.clone();
        (replayed.applied_index, held.applied_index) = (0, 0);
        if replayed != held {
            problems.push(format!("node {id}'s snapshot at {from} and log replayed afresh give another state"));
        }
    }

    // Acknowledged commits: in the log where acknowledged (on the nodes that still hold that
    // entry; one purged everywhere is checked in the index below), in real-time order.
    for ack in acks {
        let held: Vec<&Option<Command>> =
            nodes.iter().filter_map(|(_, entries, _, _)| entries.get(&ack.index)).collect();
        if held.iter().any(|command| **command != Some(ack.command.clone())) {
            problems.push(format!("{} acknowledged at index {} is not there", ack.key, ack.index));
        }
    }
    for a in acks {
        for b in acks.iter().filter(|b| b.sent_ms > a.acked_ms) {
            if b.index <= a.index {
                problems.push(format!(
                    "{} (acked at {} ms, index {}) before {} (sent at {} ms, index {})",
                    a.key, a.acked_ms, a.index, b.key, b.sent_ms, b.index
                ));
            }
        }
    }

    // Offsets: each acknowledged chunk where it was acknowledged, and no two overlapping.
    let state = &nodes[0].3;
    let mut taken: BTreeMap<i32, Vec<(i64, i64, &str)>> = BTreeMap::new();
    for ack in acks {
        for &(partition, base, count) in &ack.chunks {
            taken.entry(partition).or_default().push((base, base + count, &ack.key));
            let found = state.partition(topic_id(), partition).is_some_and(|p| {
                p.index.iter().any(|entry| {
                    entry.base_offset == base
                        && matches!(&entry.data, crate::state::EntryData::Chunk { object_id, .. }
                            if state.objects.get(object_id).is_some_and(|o| o.key == ack.key))
                })
            });
            if !found {
                problems.push(format!("{}'s chunk at {partition}/{base} is not in the index", ack.key));
            }
        }
    }
    for (partition, mut ranges) in taken {
        ranges.sort();
        for pair in ranges.windows(2) {
            if pair[1].0 < pair[0].1 {
                problems.push(format!("offsets reused in partition {partition}: {pair:?}"));
            }
        }
    }
    problems
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("FLOE_SIM_SEED").ok().and_then(|s| s.parse().ok()) {
        return vec![seed];
    }
    let count = std::env::var("FLOE_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(SEEDS_DEFAULT);
    (0..count).collect()
}

/// Runs seeds `first, first + stride, …` of [`seeds`], failing with the seeds that broke a check.
fn run_seeds(first: u64, stride: u64) {
    let mut failed = Vec::new();
    for seed in seeds().into_iter().filter(|s| s % stride == first) {
        let run = std::panic::catch_unwind(|| run_seed(seed));
        match run {
            Ok(run) if run.problems.is_empty() => {}
            Ok(run) => {
                eprintln!("seed {seed}: {:?}\nhistory:\n{}", run.problems, run.history.join("\n"));
                failed.push(seed);
            }
            Err(_) => {
                eprintln!("seed {seed} panicked (its message is above)");
                failed.push(seed);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "simulation seeds failed: {failed:?}; run one alone with \
         FLOE_SIM_SEED=<seed> cargo nextest run -p floe-metadata sim::"
    );
}

#[test]
fn simulated_faults_break_no_invariant_even_seeds() {
    run_seeds(0, 2);
}

#[test]
fn simulated_faults_break_no_invariant_odd_seeds() {
    run_seeds(1, 2);
}

/// Seeds that once failed, run in every `.ci/run` whatever `FLOE_SIM_SEEDS` says: 5 found a
/// follower's log purged before its snapshot install was written; 49 and 64 a classic member's
/// SyncGroup answered from a stable group whose generation was not yet durable; 1162, 1660 and
/// 1703 found the KIP-848 coordinator's bugs (RELIABILITY.md); the others found flaws of this
/// harness (a transaction timed out under the faults, a topic created by a copy whose answer
/// was lost).
#[test]
fn seeds_that_once_failed_pass() {
    let mut failed = Vec::new();
    for seed in [5, 49, 64, 1162, 1415, 1660, 1698, 1703, 1796, 1889] {
        match std::panic::catch_unwind(|| run_seed(seed)) {
            Ok(run) if run.problems.is_empty() => {}
            Ok(run) => {
                eprintln!("seed {seed}: {:?}", run.problems);
                failed.push(seed);
            }
            Err(_) => failed.push(seed),
        }
    }
    assert!(failed.is_empty(), "seeds failed: {failed:?}");
}

#[test]
fn a_seed_replays_its_history() {
    let mut snapshots_sent = false;
    for seed in seeds().into_iter().take(4) {
        let (first, second) = (run_seed(seed), run_seed(seed));
        let saw = |what: &str| first.history.iter().any(|e| e.contains(what));
        assert!(
            saw("crash")
                && saw("ack")
                && saw("group generation")
                && saw("txn")
                && saw("expire transactions")
                && saw("member-0 holds")
                && saw("classic-0 holds")
                && saw(" acquired "),
            "seed {seed} did little: {:?}",
            first.history
        );
        assert_eq!(first.history, second.history, "seed {seed} ran two different histories");
        snapshots_sent |= saw("snapshot 1->") || saw("snapshot 2->") || saw("snapshot 3->");
        if std::env::var_os("FLOE_SIM_PRINT").is_some() {
            eprintln!("seed {seed}:\n{}", first.history.join("\n"));
        }
    }
    assert!(snapshots_sent, "no leader sent a snapshot in these seeds");
}
