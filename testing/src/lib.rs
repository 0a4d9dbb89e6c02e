//! An in-process Floe for tests: a one-voter metadata node and one agent over a temporary
//! directory and the `memory://` object store (optionally behind the fault wrapper), as
//! `floe dev` wires them, with no sockets but the metadata node's own listener. A test drives
//! the Kafka protocol over an in-memory duplex straight into the agent's connection handler
//! ([`TestAgent::kafka`]) and the HTTP API through its router ([`TestAgent::http`]).
//!
//! Test support, not a library for production: anything unexpected panics with a message, as a
//! test's assertion would.

mod kafka;

pub use kafka::{
    CREATE_TOPICS_VERSION, FETCH_VERSION, INIT_PRODUCER_ID_VERSION, KafkaClient, LIST_OFFSETS_VERSION,
    METADATA_VERSION, PRODUCE_VERSION, decode_records, fetch_request, list_offsets_request, partition_answer,
    produce_request, produce_request_to, producer_batch, record_batch, split_batches, transactional_batch,
};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use floe_agent::kafka::connections::{ConnectionLimits, Connections};
use floe_agent::{Agent, AgentConfig, CompactionConfig, FlushConfig, GcConfig};
use floe_metadata::{Metadata, MetadataNode, MetadataNodeConfig};
use floe_storage::{BlockCache, BlockCacheConfig, FaultSource, FaultSwitch, ObjectStoreConfig, SegmentStore};
use tokio::sync::watch;

/// Bytes each direction of a Kafka duplex buffers before its writer waits for the reader.
const DUPLEX_BYTES: usize = 4 << 20;
/// Longest wait for the one-voter metadata cluster to elect itself.
const LEADER_WAIT: Duration = Duration::from_secs(10);
/// Longest wait for an event a test polls for.
const EVENT_WAIT: Duration = Duration::from_secs(10);
/// Largest `/metrics` body read: the process's metrics, many times over.
const METRICS_BYTES_MAX: usize = 64 << 20;

/// How a [`TestAgent`] is started.
#[derive(Clone, Debug, Default)]
pub struct TestOptions {
    /// Puts the object store behind the fault wrapper, whose rates [`TestAgent::set_faults`]
    /// sets (no faults until then).
    pub object_store_faults: bool,
    /// The hot tier's memory (16 MiB when `None`); a small one sends reads to the object store.
    pub cache_memory_bytes: Option<u64>,
    /// Checks every request against ACLs (`--authorizer`), everything open while no ACL names
    /// a resource: the harness's clients do not authenticate (`User:ANONYMOUS`).
    pub authorizer: bool,
}

/// A metadata node and an agent in this process, over a temporary directory removed when the
/// harness is dropped. Owned by one test; [`TestAgent::shutdown`] stops both in the order
/// `floe agent` does.
#[derive(Debug)]
pub struct TestAgent {
    pub agent: Arc<Agent>,
    pub metadata: MetadataNode,
    /// The table Kafka connections are admitted through, as a listener's would be.
    connections: Arc<Connections>,
    /// The HTTP API with its listener's layers.
    http: axum::Router,
    /// Turns true at shutdown: event streams of the HTTP API end.
    stop: watch::Sender<bool>,
    dir: PathBuf,
    faults: Option<FaultSwitch>,
    /// The port of the next Kafka connection's made-up peer address, so logs tell them apart.
    next_peer_port: AtomicU16,
}

impl TestAgent {
    /// Starts the metadata node, waits for it to lead and initialize the cluster, then starts the
    /// agent and announces it, as `floe dev` does. Must run inside a multi-threaded Tokio runtime
    /// (`#[tokio::test(flavor = "multi_thread")]`).
    pub async fn start(options: TestOptions) -> Self {
        let dir = std::env::temp_dir().join(format!("floe-testing-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let metadata = start_metadata_node(&dir).await;
        metadata.wait_for_leader(LEADER_WAIT).await.expect("the metadata node leads");
        metadata.ensure_initialized().await.expect("the cluster is initialized");

        let faults = options.object_store_faults.then(FaultSwitch::default);
        let store = SegmentStore::open(&ObjectStoreConfig {
            url: "memory://".into(),
            faults: faults.clone().map(FaultSource::Switch),
            ..ObjectStoreConfig::default()
        })
        .expect("memory store opens");
        let cache = BlockCache::open(&BlockCacheConfig {
            memory_bytes: options.cache_memory_bytes.unwrap_or(16 << 20),
            disk: None,
        })
        .await
        .expect("cache opens");
        let usage = floe_agent::UsageMeter::open(floe_agent::UsageConfig {
            enabled: false,
            journal_dir: None,
            report_interval: Duration::from_secs(5),
        })
        .expect("usage meter opens");
        let mut config = agent_config();
        if options.authorizer {
            config.authorizer = Some(floe_agent::access::AuthorizerConfig { allow_if_no_acl: true });
        }
        let agent = Agent::start(config, Metadata::Local(metadata.clone()), store, cache, usage);
        floe_agent::membership::announce(&agent).await.expect("metadata accepts the agent");

        let connections = Connections::new(agent.config.connections.clone());
        let (stop, stopped) = watch::channel(false);
        let http_peer = SocketAddr::from(([127, 0, 0, 1], 1));
        let http = floe_gateway::http_router(agent.clone(), &floe_gateway::HttpConfig::default(), http_peer, stopped)
            .expect("HTTP router builds");
        Self { agent, metadata, connections, http, stop, dir, faults, next_peer_port: AtomicU16::new(40_000) }
    }

    /// A new Kafka connection to the agent: an in-memory duplex whose server end the agent's
    /// connection handler serves, as it serves an accepted socket.
    pub fn kafka(&self) -> KafkaClient {
        let (client, server) = tokio::io::duplex(DUPLEX_BYTES);
        let port = self.next_peer_port.fetch_add(1, Ordering::Relaxed);
        let peer = SocketAddr::from(([127, 0, 0, 1], port));
        let served = floe_agent::kafka::server::serve_stream(self.agent.clone(), &self.connections, server, peer)
            .expect("the connection limits admit a test's connections");
        tokio::spawn(served);
        KafkaClient::new(client)
    }

    /// Sends `request` through the HTTP API's router, every layer of its listener included.
    pub async fn http(&self, request: Request<Body>) -> Response<Body> {
        use tower::ServiceExt;
        // The router's error type is `Infallible`.
        let Ok(response) = self.http.clone().oneshot(request).await;
        response
    }

    /// The value of one series of the process's metrics, as `/metrics` spells it (such as
    /// `floe_flush_held_chunks_total` or `floe_long_poll_reads_total{listener="kafka"}`); 0 while
    /// the series does not exist. The registry is the process's, shared by every test of a test
    /// binary: a test compares a counter before and after something only it causes.
    pub async fn metric(&self, series: &str) -> f64 {
        let request = Request::get("/metrics").body(Body::empty()).expect("a request");
        let response = self.http(request).await;
        assert!(response.status().is_success(), "/metrics answered {}", response.status());
        let body = axum::body::to_bytes(response.into_body(), METRICS_BYTES_MAX).await.expect("the metrics are read");
        let text = std::str::from_utf8(&body).expect("the metrics are text");
        text.lines()
            .filter_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
            .map(|value| value.trim().parse::<f64>().expect("a metric's value is a number"))
            .sum()
    }

    /// Returns once a Fetch waits registered to be woken (`floe_long_polls_waiting`), so a test
    /// can make the change that is to wake it rather than be there when it first reads; panics
    /// after [`EVENT_WAIT`]. The gauge is the process's: another test's long poll moving it only
    /// makes the caller's test weaker, never wrong.
    pub async fn wait_for_long_poll(&self) {
        let waiting = async {
            while self.metric("floe_long_polls_waiting").await < 1.0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::time::timeout(EVENT_WAIT, waiting).await.expect("a Fetch waits to be woken");
    }

    /// The cluster's id, which the HTTP API's `/v3/clusters/{cluster}` paths name.
    pub fn cluster_id(&self) -> String {
        self.agent.metadata.read().cluster_id.clone()
    }

    /// Sets the object store's fault rates (`floe agent --test-object-store-faults` syntax, such
    /// as `put-error=1`; empty: none), from its next request on.
    pub fn set_faults(&self, spec: &str) {
        let switch = self.faults.as_ref().expect("started with TestOptions { object_store_faults: true }");
        switch.set(spec.parse().expect("a fault spec"));
    }

    /// Leaves the cluster, drains the agent (buffered batches flushed and answered), then stops
    /// the metadata node; the directory goes when `self` is dropped.
    pub async fn shutdown(self) {
        self.agent.leave().await;
        let _ = self.stop.send(true);
        self.agent.shutdown().await;
        self.metadata.shutdown().await;
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        // Also after a failed test, which never reached `shutdown`.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a one-voter metadata node on a port found free. A port is bound and released, then
/// bound again by the node: a test running beside this one may take it in between (an outgoing
/// connection is given such ports), so the node is started again on another.
async fn start_metadata_node(dir: &std::path::Path) -> MetadataNode {
    const ATTEMPTS: usize = 5;
    let mut last_error = None;
    for attempt in 0..ATTEMPTS {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let metadata_addr = format!("127.0.0.1:{port}");
        let started = MetadataNode::start(MetadataNodeConfig {
            node_id: 1,
            listen_addr: metadata_addr.clone(),
            // A directory per attempt: a failed start may have written its files.
            data_dir: dir.join(format!("metadata-{attempt}")),
            peers: [(1, metadata_addr)].into_iter().collect(),
            join: false,
            clock: floe_metadata::clock::Clock::system(),
        })
        .await;
        match started {
            Ok(node) => return node,
            Err(e) => last_error = Some(e),
        }
    }
    panic!("the metadata node did not start in {ATTEMPTS} attempts: {last_error:?}");
}

/// An agent as `floe dev` configures one, with a short flush interval (as for a local store) and
/// jobs that run rarely, so a test sees its own work only.
fn agent_config() -> AgentConfig {
    let flush_interval = Duration::from_millis(5);
    AgentConfig {
        node_id: 1,
        // Named in Metadata answers; nothing listens there (connections come through `kafka`).
        advertised_host: "127.0.0.1".into(),
        advertised_port: 9092,
        flush: FlushConfig {
            flush_bytes: 1 << 20,
            flush_interval,
            buffer_bytes_max: 64 << 20,
            uploads_in_flight_max: 4,
            adaptive: false,
            min_flush_interval: Duration::ZERO,
        },
        // Off, so that a name a test never created stays unknown.
        auto_create_topics: false,
        default_partition_count: 1,
        zone: None,
        zone_cidrs: Default::default(),
        roles: floe_metadata::AgentRoles::ALL,
        agent_group: String::new(),
        peer_addr: None,
        gc: GcConfig { interval: Duration::from_secs(60), orphan_grace: Duration::from_secs(600) },
        compaction: CompactionConfig {
            interval: Duration::from_secs(60),
            small_chunk_bytes: 1 << 20,
            min_run: 16,
            crowded_entries: 200_000,
            target_object_bytes: 8 << 20,
        },
        tables: floe_agent::TableJobConfig { interval: Duration::from_millis(500), commit_delay: Duration::ZERO },
        links: floe_agent::links::LinkJobConfig::default(),
        fault: None,
        sasl: None,
        auth_failures_per_minute: 0,
        super_users: Vec::new(),
        authorizer: None,
        connections: ConnectionLimits::default(),
        fetch_sessions: floe_agent::fetch::sessions::FetchSessionBounds::with_slots(1_000),
        load_targets: floe_agent::load::LoadTargets {
            cpu: 0.6,
            buffer_fill: 0.5,
            produce_p99: (flush_interval * 4).max(Duration::from_millis(500)),
        },
    }
}
