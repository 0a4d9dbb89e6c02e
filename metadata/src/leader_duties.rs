//! The metadata leader's periodic duties besides groups: record retention, transaction
//! timeouts, offset expiry, share record lock expiry, closing usage minutes, and raising the
//! cluster's format once every voter runs this binary's (`Command::SetFormat`). Every node runs
//! the loop; only the leader proposes, and each command carries the time it was proposed at, so
//! every replica applies the same thing. (Group sessions and rebalances are `groups::GroupCoordinator::run_timers`; the
//! archive is the binary's `cmd/archive.rs`; job leases are taken by the agents.)
//!
//! The loop sees its node only as a [`DutyNode`], so the deterministic simulation
//! (`raft/sim.rs`) runs this same code on its simulated nodes and virtual time.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::command::Command;
use crate::node::MetadataNode;
use crate::state::State;
use crate::tasks::sleep_unless_stopped;
use tokio_util::sync::CancellationToken;

/// What the duties need of a metadata node.
pub(crate) trait DutyNode: Send + Sync + 'static {
    /// Whether this node leads now (only the leader proposes).
    fn leads(&self) -> bool;
    /// Reads the node's state.
    fn with_state<R>(&self, read: impl FnOnce(&State) -> R) -> R;
    /// Protocol time, as the commands carry it.
    fn now_ms(&self) -> i64;
    /// Proposes `command`; `Err` says why it did not commit.
    fn propose(&self, command: Command) -> impl Future<Output = Result<(), String>> + Send;
    /// The oldest metadata format the voters run, `None` while one cannot be asked.
    fn voters_format(&self) -> impl Future<Output = Option<u32>> + Send;
}

impl DutyNode for MetadataNode {
    fn leads(&self) -> bool {
        self.leader_term().is_some()
    }

    fn with_state<R>(&self, read: impl FnOnce(&State) -> R) -> R {
        read(&self.read())
    }

    fn now_ms(&self) -> i64 {
        self.clock().now_ms()
    }

    async fn propose(&self, command: Command) -> Result<(), String> {
        MetadataNode::propose(self, command).await.map(|_| ()).map_err(|e| e.to_string())
    }

    async fn voters_format(&self) -> Option<u32> {
        let status = self.status();
        let mut asks = tokio::task::JoinSet::new();
        for voter in status.voters.iter().filter(|v| **v != status.node_id) {
            let addr = status.members.get(voter)?.clone();
            asks.spawn(async move { crate::raft::network::fetch_hello(&addr).await.ok().map(|hello| hello.format) });
        }
        // All at once, and not for long: a voter that is down is asked again in
        // FORMAT_CHECK_EVERY.
        let oldest = async move {
            let mut oldest = crate::FORMAT_VERSION;
            while let Some(asked) = asks.join_next().await {
                oldest = oldest.min(asked.ok()??);
            }
            Some(oldest)
        };
        tokio::time::timeout(VOTERS_FORMAT_TIMEOUT, oldest).await.ok()?
    }
}

/// How often the loop looks for due work.
const TICK: Duration = Duration::from_millis(100);
/// How often offsets past retention are dropped.
const EXPIRE_OFFSETS_EVERY: Duration = Duration::from_secs(60);
/// How often the leader looks for transactions past their timeout and idle producer ids (the
/// scan covers every producer).
const EXPIRE_TRANSACTIONS_EVERY: Duration = Duration::from_secs(1);
/// Retention's check interval when `log.retention.check.interval.ms` does not parse.
const RETENTION_CHECK_DEFAULT: Duration = Duration::from_secs(300);
/// How often a leader whose cluster applies an older format asks the voters theirs.
const FORMAT_CHECK_EVERY: Duration = Duration::from_secs(1);
/// How long the leader waits for the voters' formats (a loaded machine answers slowly).
const VOTERS_FORMAT_TIMEOUT: Duration = Duration::from_secs(3);

/// When each duty last ran.
struct LastRun {
    retention: Instant,
    transactions: Instant,
    offsets: Instant,
}

/// Runs until `stop`: the format check beside the other duties, so a voter that is slow to
/// answer holds up neither.
pub(crate) async fn run(node: impl DutyNode, stop: CancellationToken) {
    tokio::join!(raise_format(&node, &stop), periodic(&node, &stop));
}

/// Raises the cluster's format once every voter runs this binary's. Asked at once and then every
/// [`FORMAT_CHECK_EVERY`] while the cluster lags: a new cluster starts at format 0, and features
/// behind a format (links, agent peers) are refused until the raise.
async fn raise_format(node: &impl DutyNode, stop: &CancellationToken) {
    let mut last: Option<Instant> = None;
    while sleep_unless_stopped(stop, TICK).await {
        if !node.leads()
            || node.with_state(|s| s.applies_format(crate::FORMAT_VERSION))
            || last.is_some_and(|at| at.elapsed() < FORMAT_CHECK_EVERY)
        {
            continue;
        }
        last = Some(Instant::now());
        if node.voters_format().await.is_some_and(|oldest| oldest >= crate::FORMAT_VERSION) {
            let raise = Command::SetFormat { format: crate::FORMAT_VERSION };
            propose_if(node, true, raise, "raising the cluster's metadata format").await;
        }
    }
}

async fn periodic(node: &impl DutyNode, stop: &CancellationToken) {
    let start = Instant::now();
    let mut last = LastRun { retention: start, transactions: start, offsets: start };
    while sleep_unless_stopped(stop, TICK).await {
        if !node.leads() {
            continue;
        }
        let retention_every = node
            .with_state(|s| s.broker_config_i64("log.retention.check.interval.ms"))
            .and_then(|ms| u64::try_from(ms).ok())
            .map_or(RETENTION_CHECK_DEFAULT, Duration::from_millis);
        if last.retention.elapsed() >= retention_every {
            last.retention = Instant::now();
            let now_ms = node.now_ms();
            let due = node.with_state(|s| s.retention_due(now_ms));
            propose_if(node, due, Command::ApplyRetention { now_ms }, "applying retention").await;
        }
        if last.transactions.elapsed() >= EXPIRE_TRANSACTIONS_EVERY {
            last.transactions = Instant::now();
            let now_ms = node.now_ms();
            let due = node.with_state(|s| s.transactions_due(now_ms));
            propose_if(node, due, Command::ExpireTransactions { now_ms }, "expiring transactions").await;
        }
        // Share groups' records whose acquisition lock passed go back to the group.
        let now_ms = node.now_ms();
        let due = node.with_state(|s| s.share_locks_due(now_ms));
        let expire = Command::ShareUpdate { now_ms, ops: vec![crate::state::ShareOp::ExpireLocks] };
        propose_if(node, due, expire, "expiring share record locks").await;
        // Each minute is closed once it has passed (usage metering).
        let now_ms = node.now_ms();
        let due = node.with_state(|s| s.usage_close_due(now_ms));
        propose_if(node, due, Command::CloseUsageMinute { now_ms }, "closing a usage minute").await;
        if last.offsets.elapsed() >= EXPIRE_OFFSETS_EVERY {
            last.offsets = Instant::now();
            let due = node.with_state(|s| !s.groups.is_empty());
            let expire = Command::ExpireOffsets { now_ms: node.now_ms() };
            propose_if(node, due, expire, "expiring committed offsets").await;
        }
    }
}

async fn propose_if(node: &impl DutyNode, due: bool, command: Command, what: &str) {
    if due && let Err(e) = node.propose(command).await {
        tracing::warn!(error = %e, "{what}");
    }
}
