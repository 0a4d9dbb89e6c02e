//! The agent: configuration and the shared handles every request path uses.

use std::sync::Arc;
use std::time::Duration;

use floe_metadata::{Command, Metadata};
use floe_storage::{BlockCache, SegmentStore};

use floe_metadata::tasks::TaskGroup;

use crate::produce::FlushBuffer;

/// When the flush buffer is written out, and how much memory it may hold.
#[derive(Clone, Debug)]
pub struct FlushConfig {
    /// Flush once this many bytes are buffered.
    pub flush_bytes: usize,
    /// Flush once the oldest buffered batch is this old.
    pub flush_interval: Duration,
    /// Buffered plus uploading bytes; past this, produce requests wait (backpressure).
    pub buffer_bytes_max: usize,
    /// Segment uploads running at once.
    pub uploads_in_flight_max: usize,
    /// Adaptive batching (the low-latency mode): also flush as soon as no flush is in flight, at
    /// most once per `min_flush_interval`.
    pub adaptive: bool,
    /// In adaptive mode, the least time between the starts of two flushes: bounds the PUT rate
    /// (and its cost) at low load.
    pub min_flush_interval: Duration,
}

/// Everything an agent is started with.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The broker id this agent has in Kafka Metadata responses.
    pub node_id: i32,
    /// Host and port clients are told to connect to; never `0.0.0.0`.
    pub advertised_host: String,
    pub advertised_port: u16,
    pub flush: FlushConfig,
    /// Kafka's `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    /// Kafka's `num.partitions`: partitions of auto-created topics and of CreateTopics with -1.
    pub default_partition_count: i32,
    /// Availability zone, reported as the broker's rack.
    pub zone: Option<String>,
    /// Clients' zones by their address, for clients that do not state theirs.
    pub zone_cidrs: crate::membership::ZoneCidrs,
    /// The work this agent takes (clients are steered by it; only jobs agents run the jobs).
    pub roles: floe_metadata::AgentRoles,
    /// The agent group: clients are told only of the agents of the group they reached.
    pub agent_group: String,
    /// Where other agents of the zone reach this one's peer listener for the blocks it owns
    /// (`block_peers`); `None`: it owns none and asks nobody.
    pub peer_addr: Option<String>,
    pub gc: crate::GcConfig,
    pub compaction: crate::CompactionConfig,
    pub tables: crate::TableJobConfig,
    pub links: crate::links::LinkJobConfig,
    /// A fault to inject, for crash tests; `None` in production.
    pub fault: Option<Fault>,
    /// SASL on the Kafka listener; `None`: clients need not authenticate.
    pub sasl: Option<crate::kafka::sasl::SaslConfig>,
    /// Failed authentications (SASL or HTTP API key) one address may make per minute before it
    /// is refused unchecked for the rest of that minute; 0: no limit.
    pub auth_failures_per_minute: u32,
    /// Users who pass every ACL (Kafka's `super.users`, by user name; each acts within its own
    /// tenant) and may describe and alter SCRAM credentials.
    pub super_users: Vec<String>,
    /// ACLs are enforced on both listeners; `None`: every authenticated request is allowed.
    pub authorizer: Option<crate::access::AuthorizerConfig>,
    /// Limits of the Kafka listener's connections.
    pub connections: crate::kafka::connections::ConnectionLimits,
    /// Bounds of the incremental fetch session cache (KIP-227).
    pub fetch_sessions: crate::fetch::sessions::FetchSessionBounds,
    /// What utilization 1.0 means (the autoscaling signal).
    pub load_targets: crate::load::LoadTargets,
}

/// Faults an agent can be told to inject (test-only; off unless given on the command line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Exit the process right after a segment PUT succeeds, before its commit: the object
    /// becomes an orphan.
    ExitBeforeCommit,
}

impl std::str::FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "exit-before-commit" => Ok(Self::ExitBeforeCommit),
            other => Err(format!("unknown fault {other:?}; known: exit-before-commit")),
        }
    }
}

/// Shared state of a running agent. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Agent {
    pub config: AgentConfig,
    pub metadata: Metadata,
    pub store: SegmentStore,
    /// The hot tier in front of the object store.
    pub cache: BlockCache,
    pub buffer: FlushBuffer,
    /// Failed authentications by source address, across the Kafka and HTTP listeners.
    pub auth_failures: floe_auth::failures::FailureLimiter,
    /// Tenants' and API keys' rate quotas on this agent, over both listeners.
    pub quotas: crate::quotas::QuotaBuckets,
    /// Waiting reads, by the partitions they wait on.
    pub wakeups: Arc<crate::fetch::wakeups::PartitionWakeups>,
    /// Registry schemas parsed for produce-time validation and compatibility checks.
    pub parsed_schemas: crate::produce::schemas::ParsedSchemas,
    /// Topics' produce policies, read once per state version.
    pub topic_policies: crate::produce::TopicPolicies,
    /// Incremental fetch sessions of the Kafka listener's connections.
    pub fetch_sessions: crate::fetch::sessions::FetchSessions,
    /// Share sessions of share group members reading through this agent.
    pub share_sessions: crate::share_sessions::ShareSessions,
    /// What this agent served, per tenant and minute, until reported.
    pub usage: crate::usage::UsageMeter,
    /// Set once the agent left the cluster to shut down: no more heartbeats, no longer listed.
    draining: std::sync::atomic::AtomicBool,
    /// Background tasks, stopped in this order: heartbeats (before the agent leaves the
    /// cluster), jobs (while the flushes drain; they run on [`crate::job_runtime`]), reporters
    /// (after them).
    heartbeats: TaskGroup,
    jobs: TaskGroup,
    reporters: TaskGroup,
}

/// How long leaving waits for heartbeats in flight.
const HEARTBEATS_STOP_WAIT: Duration = Duration::from_secs(5);

impl Agent {
    /// Builds the agent and starts its flush pipeline. Must run inside a Tokio runtime.
    pub fn start(
        config: AgentConfig,
        metadata: Metadata,
        store: SegmentStore,
        cache: BlockCache,
        usage: crate::usage::UsageMeter,
    ) -> Arc<Self> {
        let pipeline = crate::produce::Pipeline {
            flush: config.flush.clone(),
            commit_deadline: config.gc.commit_deadline(),
            fault: config.fault,
        };
        let buffer = FlushBuffer::start(pipeline, metadata.clone(), store.clone(), cache.clone());
        crate::metrics::register();
        crate::metrics::GroupLagCollector::register(metadata.clone());
        crate::metrics::TableLagCollector::register(metadata.clone());
        crate::metrics::LinkLagCollector::register(metadata.clone());
        let auth_failures =
            floe_auth::failures::FailureLimiter::new(config.auth_failures_per_minute, Duration::from_secs(60));
        let quotas = crate::quotas::QuotaBuckets::default();
        let wakeups = Arc::default();
        let parsed_schemas = crate::produce::schemas::ParsedSchemas::default();
        let fetch_sessions = crate::fetch::sessions::FetchSessions::new(config.fetch_sessions);
        let agent = Arc::new(Self {
            config,
            metadata,
            store,
            cache,
            buffer,
            auth_failures,
            quotas,
            wakeups,
            parsed_schemas,
            topic_policies: Default::default(),
            fetch_sessions,
            share_sessions: crate::share_sessions::ShareSessions::default(),
            usage,
            draining: std::sync::atomic::AtomicBool::new(false),
            heartbeats: TaskGroup::default(),
            jobs: TaskGroup::default(),
            reporters: TaskGroup::default(),
        });
        // Each holds a weak reference: dropping the agent (tests) also ends them.
        let weak = || Arc::downgrade(&agent);
        if agent.config.peer_addr.is_some() {
            let peers = crate::block_peers::ZonePeers::new(weak(), crate::block_peers::OWNER_DEADLINE);
            agent.cache.set_peers(Arc::new(peers));
        }
        let heartbeats = agent.heartbeats.clone();
        agent.heartbeats.spawn(|stop| crate::membership::heartbeat(weak(), heartbeats, stop));
        let jobs = crate::job_runtime::handle();
        agent.jobs.spawn_on(&jobs, |stop| crate::gc::run(weak(), agent.config.gc, stop));
        agent.jobs.spawn_on(&jobs, |stop| crate::compaction::run(weak(), agent.config.compaction, stop));
        agent.jobs.spawn_on(&jobs, |stop| crate::tables::run(weak(), agent.config.tables, stop));
        agent.jobs.spawn_on(&jobs, |stop| crate::links::run(weak(), agent.config.links, stop));
        agent.reporters.spawn_cancellable(crate::fetch::wakeups::run(weak()));
        agent.reporters.spawn(|stop| crate::usage::run(weak(), stop));
        agent.reporters.spawn(|stop| crate::load::run(weak(), agent.config.load_targets, stop));
        agent
    }

    /// How clients reach this agent.
    pub fn info(&self) -> floe_metadata::AgentInfo {
        floe_metadata::AgentInfo {
            agent_id: self.config.node_id,
            host: self.config.advertised_host.clone(),
            port: self.config.advertised_port,
            zone: self.config.zone.clone(),
        }
    }

    /// This agent's roles and group, as it announces them.
    pub fn profile(&self) -> floe_metadata::AgentProfile {
        floe_metadata::AgentProfile { roles: self.config.roles, group: self.config.agent_group.clone() }
    }

    /// The profile this agent acts by: its own once the cluster applies format 9, else every
    /// role in the default group, as every other agent sees it until then (acting by its own
    /// alone would disagree with them: two produce agents naming each other as read replicas,
    /// or nobody bidding for the jobs).
    pub fn effective_profile(&self, state: &floe_metadata::State) -> floe_metadata::AgentProfile {
        if state.applies_format(9) { self.profile() } else { floe_metadata::AgentProfile::default() }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Leaves the cluster before shutting down: heartbeats stop, and the agent is dropped from
    /// metadata (and its job lease released), so other agents stop listing it at once and its
    /// clients, told by its own Metadata answers too, move to them.
    pub async fn leave(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::Relaxed);
        // A heartbeat committed after the leave would list the agent again: the ones in flight
        // are waited for (a while; past that the agent's session expires in the usual time).
        if tokio::time::timeout(HEARTBEATS_STOP_WAIT, self.heartbeats.stop()).await.is_err() {
            tracing::warn!("leaving the cluster: a heartbeat is still in flight");
        }
        let leave = Command::AgentLeave { agent_id: self.config.node_id, now_ms: floe_metadata::now_ms() };
        if let Err(e) = self.metadata.propose(leave).await {
            tracing::warn!(error = %e, "leaving the cluster: not committed; other agents drop this one within 10 s");
        }
    }

    /// Stops taking new batches and waits until every buffered batch is flushed and answered,
    /// while the jobs finish their step in progress; then stops the reporters.
    pub async fn shutdown(&self) {
        tokio::join!(self.jobs.stop(), self.buffer.close_and_drain());
        self.reporters.stop().await;
        // What was served is reported before leaving (a journal would keep it otherwise).
        if let Err(e) = self.usage.report(&self.metadata).await {
            tracing::warn!(error = %e, "last usage report not committed");
        }
        self.cache.close().await;
    }
}
