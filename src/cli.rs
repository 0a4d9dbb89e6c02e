//! Command-line interface.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "floe", version, about = "A Kafka-compatible log service whose only durable store is object storage")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one metadata node and one agent in one process, on a local directory.
    Dev(DevArgs),
    /// Run one node of a replicated metadata cluster (1, 3 or 5 nodes).
    Metadata(MetadataArgs),
    /// Run a stateless agent against a metadata cluster.
    Agent(AgentArgs),
    /// Inspect a running cluster.
    Admin(AdminArgs),
    /// Check an S3 bucket (and with --metadata the metadata cluster) before trusting it: each
    /// check passes, warns or fails with its fix; any failure exits non-zero.
    Doctor(DoctorArgs),
    /// Settings files: every flag of `dev`, `metadata` and `agent` may also come from a TOML
    /// file (`--config FILE` or FLOE_CONFIG) or a FLOE_<FLAG> variable.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Run the load generator, `floe-loadtest` (found next to this binary or on PATH), with
    /// these arguments; `floe loadtest --help` shows its own help.
    #[command(disable_help_flag = true)]
    Loadtest {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run the fault-injection harness, `floe-chaos` (found next to this binary or on PATH),
    /// with these arguments; `floe chaos --help` shows its own help.
    #[command(disable_help_flag = true)]
    Chaos {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// The bucket and prefix Floe would use: s3://bucket/prefix.
    #[arg(long)]
    pub(crate) object_store: String,
    /// An S3-compatible endpoint instead of AWS (addressed by path).
    #[arg(long)]
    pub(crate) s3_endpoint: Option<String>,
    /// Metadata nodes to check too: HOST:PORT[,HOST:PORT...].
    #[arg(long, value_delimiter = ',')]
    pub(crate) metadata: Option<Vec<String>>,
    /// PUT and GET samples of 4 KiB (half as many of 8 MiB).
    #[arg(long, default_value_t = 10)]
    pub(crate) samples: usize,
    /// The agents' --flush-bytes, for the cost of a GiB.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub(crate) flush_bytes: u64,
    /// USD per 1,000 PUTs (S3 Standard list price).
    #[arg(long, default_value_t = 0.005)]
    pub(crate) put_price: f64,
    /// USD per 1,000 GETs (S3 Standard list price).
    #[arg(long, default_value_t = 0.0004)]
    pub(crate) get_price: f64,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) tls: MetadataTlsArgs,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct MetadataArgs {
    /// This node's id, as listed in --peers.
    #[arg(long, required = true)]
    pub(crate) node_id: Option<u64>,
    /// Metadata protocol listener; peers and agents connect here.
    #[arg(long, default_value = "127.0.0.1:9093")]
    pub(crate) metadata_addr: String,
    /// Directory for the Raft log and snapshots.
    #[arg(long, default_value = "./floe-metadata")]
    pub(crate) data_dir: PathBuf,
    /// Every voter of the cluster, this node included: ID=HOST:PORT,... (used to form the
    /// cluster on first start; a restarted node rejoins with what its log says).
    #[arg(long, value_parser = parse_peer, value_delimiter = ',', required = true)]
    pub(crate) peers: Vec<(u64, String)>,
    /// Join a running cluster (then add this node with `floe admin add-metadata-node`) rather than
    /// form a new one.
    #[arg(long)]
    pub(crate) join: bool,
    /// Object store the leader archives snapshots and the command stream to (for `restore`).
    #[arg(long)]
    pub(crate) object_store: Option<String>,
    /// Endpoint of an S3-compatible server for s3:// URLs.
    #[arg(long)]
    pub(crate) s3_endpoint: Option<String>,
    #[command(flatten)]
    pub(crate) tls: MetadataTlsArgs,
    /// Serve the metadata port without TLS on a non-loopback address: anyone who reaches it can
    /// read every credential and change anything. Only for networks nobody else can reach.
    #[arg(long)]
    pub(crate) metadata_allow_plaintext: bool,
    /// The HTTP operator API's token (the agents' --operator-token-file): agents relay it with
    /// the operator commands that API proposes, and this node accepts them only with it.
    #[arg(long)]
    pub(crate) operator_token_file: Option<PathBuf>,
    /// Serve Prometheus metrics (`/metrics`: Raft term and leader, commit latency, follower
    /// lag, snapshot and archive age, group and transaction counts) on this address; none
    /// without it.
    #[arg(long)]
    pub(crate) metrics_addr: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub(crate) log: LogArgs,
    #[command(subcommand)]
    pub(crate) action: Option<MetadataAction>,
}

/// Mutual TLS on the metadata port: this process's certificate (its role in a
/// spiffe://DOMAIN/floe/{peer,agent,operator}/ID URI SAN), key and the cluster CA.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct MetadataTlsArgs {
    /// PEM certificate (chain) for the metadata port, signed by --metadata-tls-ca.
    #[arg(long, global = true, requires_all = ["metadata_tls_key", "metadata_tls_ca"])]
    pub(crate) metadata_tls_cert: Option<PathBuf>,
    /// PEM private key of --metadata-tls-cert.
    #[arg(long, global = true, requires_all = ["metadata_tls_cert", "metadata_tls_ca"])]
    pub(crate) metadata_tls_key: Option<PathBuf>,
    /// PEM certificates of the cluster CA (two during a CA rotation).
    #[arg(long, global = true, requires_all = ["metadata_tls_cert", "metadata_tls_key"])]
    pub(crate) metadata_tls_ca: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MetadataAction {
    /// Rebuild a data directory from the newest state archived in the object store: run it on
    /// every node's (empty) data directory, then start the nodes as usual.
    Restore {
        /// Object store URL the state was archived to.
        #[arg(long)]
        object_store: String,
        #[arg(long)]
        s3_endpoint: Option<String>,
        /// The (empty) data directory to seed.
        #[arg(long)]
        data_dir: PathBuf,
    },
}

fn parse_peer(text: &str) -> Result<(u64, String), String> {
    let (id, addr) = text.split_once('=').ok_or_else(|| format!("{text:?}: expected ID=HOST:PORT"))?;
    let id = id.parse::<u64>().map_err(|e| format!("{text:?}: node id: {e}"))?;
    if id == 0 {
        return Err(format!("{text:?}: node ids start at 1"));
    }
    if !addr.contains(':') {
        return Err(format!("{text:?}: expected ID=HOST:PORT"));
    }
    Ok((id, addr.to_owned()))
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConfigAction {
    /// Validates a settings file and prints the effective settings of a command (with this
    /// environment): every flag, its value (secrets redacted) and where it came from.
    Check {
        /// The TOML file.
        file: PathBuf,
        /// The command whose settings to show.
        #[arg(long, default_value = "agent", value_parser = ["agent", "metadata", "dev"])]
        command: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// How the serving commands log.
#[derive(Debug, clap::Args)]
pub(crate) struct LogArgs {
    /// Log lines as text or as JSON objects (one per line, for log shippers). RUST_LOG filters.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AdminArgs {
    #[command(flatten)]
    pub(crate) tls: MetadataTlsArgs,
    #[command(subcommand)]
    pub(crate) command: AdminCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum AdminCommand {
    /// Show the metadata cluster: leader, term, members, applied index (JSON).
    Cluster {
        /// Any metadata node's address.
        #[arg(long, default_value = "127.0.0.1:9093")]
        metadata: String,
    },
    /// Add a metadata node as a voter; start it first with --peers naming the current voters and itself.
    AddMetadataNode {
        /// Any current metadata node's address.
        #[arg(long, default_value = "127.0.0.1:9093")]
        metadata: String,
        #[arg(long)]
        node_id: u64,
        /// The new node's --metadata-addr.
        #[arg(long)]
        addr: String,
    },
    /// Remove a metadata node from the voters.
    RemoveMetadataNode {
        /// Any current metadata node's address.
        #[arg(long, default_value = "127.0.0.1:9093")]
        metadata: String,
        #[arg(long)]
        node_id: u64,
    },
    /// Consumer and share groups: list them, or show one's members, offsets and lag (for a share
    /// group, each partition's start offset and the records not yet acknowledged).
    Groups {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: GroupsAction,
    },
    /// Tenants, their SASL users (SCRAM credentials, which also serve PLAIN) and HTTP API keys.
    Tenants {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        #[command(subcommand)]
        action: TenantsAction,
    },
    /// Tenants' metered usage per minute or hour (as billed): bytes and records produced and
    /// fetched, requests, storage and partition minutes, table conversion.
    Usage {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        /// One tenant (default: all).
        #[arg(long)]
        tenant: Option<String>,
        /// Start, RFC 3339 or ms since the epoch (default: an hour before --to).
        #[arg(long)]
        from: Option<String>,
        /// End, exclusive (default: now).
        #[arg(long)]
        to: Option<String>,
        /// minute or hour.
        #[arg(long, default_value = "hour")]
        granularity: String,
        /// Print JSON (as the operator API answers) instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Table topics: each one's table (version, metadata location, dead-letter table) and lag.
    Tables {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Links: source clusters mirrored here with identical offsets. Create one, see each mirror
    /// partition's lag and the link's last error, promote it (its topics become writable), delete it.
    Links {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        #[command(subcommand)]
        action: LinksAction,
    },
    /// Transactions: list them with their state and partitions, or abort a hanging one.
    Transactions {
        /// Metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',', default_value = "127.0.0.1:9093")]
        metadata: Vec<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: TransactionsAction,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum LinksAction {
    /// Every link with its state, error and lag (JSON).
    List,
    /// One link, with each mirror partition's log end here, the source's and the lag (JSON).
    Status { name: String },
    /// Creates a link (or changes the config of one that mirrors). Jobs agents start mirroring
    /// matching topics at once, each source batch at its source offset.
    Create {
        #[arg(long)]
        name: String,
        #[command(flatten)]
        source: LinkSourceArgs,
        /// Source topics to mirror: a regular expression matching whole names.
        #[arg(long)]
        topics: String,
        /// Groups whose committed offsets are copied (a regular expression); none by default.
        #[arg(long)]
        groups: Option<String>,
        /// Keep the mirror topics' configs as they are here instead of following the source's.
        #[arg(long)]
        no_sync_configs: bool,
        #[command(flatten)]
        target: LinkTargetArgs,
    },
    /// Failback: on this cluster (the old primary), a link back from the cluster where link
    /// --promoted-link was promoted. Its topics here become mirrors again, cut back to the offsets
    /// both sides share (the fork offsets), and catch up with what was written there since.
    Reverse {
        /// The new link's name here.
        #[arg(long)]
        name: String,
        /// The promoted link, on the other cluster.
        #[arg(long)]
        promoted_link: String,
        /// The other cluster's metadata nodes: HOST:PORT[,HOST:PORT...].
        #[arg(long, value_delimiter = ',')]
        promoted_metadata: Vec<String>,
        #[command(flatten)]
        source: LinkSourceArgs,
        #[command(flatten)]
        target: LinkTargetArgs,
    },
    /// Stops a link and makes its topics writable: failover to this cluster.
    Promote { name: String },
    /// Deletes a link that mirrors no topic any more (promote it first).
    Delete { name: String },
}

/// Where a link writes, and what else it copies.
#[derive(Debug, clap::Args)]
pub(crate) struct LinkTargetArgs {
    /// Mirror into this tenant's namespace (the source's names become the names its clients
    /// use), under its quotas; default: the cluster's own names.
    #[arg(long)]
    pub(crate) tenant: Option<String>,
    /// Copy the source's ACLs on the mirrored topics and groups (and keep them the source's
    /// while the link mirrors).
    #[arg(long)]
    pub(crate) acls: bool,
}

/// How a link reaches its source.
#[derive(Debug, clap::Args)]
pub(crate) struct LinkSourceArgs {
    /// The source's bootstrap servers, HOST:PORT[,HOST:PORT...].
    #[arg(long)]
    pub(crate) source_bootstrap: String,
    /// Connect to the source over TLS.
    #[arg(long)]
    pub(crate) source_tls: bool,
    /// A PEM CA bundle for the source's certificates (default: the system's roots).
    #[arg(long)]
    pub(crate) source_ca_file: Option<std::path::PathBuf>,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; the password is read from stdin.
    #[arg(long, requires = "source_sasl_username")]
    pub(crate) source_sasl_mechanism: Option<String>,
    #[arg(long, requires = "source_sasl_mechanism")]
    pub(crate) source_sasl_username: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum TransactionsAction {
    /// Every transactional id with its producer, state, timeout and partitions.
    List,
    /// Aborts a transaction's open transaction and fences its producer (which must then
    /// re-initialize): its records become invisible to read_committed consumers.
    Abort { transactional_id: String },
}

#[derive(Debug, Subcommand)]
pub(crate) enum TenantsAction {
    /// Every tenant with its users and API key ids (JSON).
    List,
    Create {
        name: String,
    },
    /// Deletes a tenant with everything in its namespace: users, API keys, ACLs, topics, groups,
    /// transactions.
    Delete {
        name: String,
    },
    /// Creates a user of a tenant, or sets its password: SCRAM credentials for each mechanism
    /// (PLAIN is checked against them). The password is read from stdin (first line).
    AddUser {
        #[arg(long)]
        tenant: String,
        user: String,
        /// Read the password from the first line of stdin.
        #[arg(long, required = true)]
        password_stdin: bool,
        #[arg(long, value_delimiter = ',', default_value = "SCRAM-SHA-256,SCRAM-SHA-512")]
        mechanisms: Vec<String>,
        /// PBKDF2 iterations (4096..=16384); unknown users are answered with the default.
        #[arg(long, default_value_t = floe_auth::scram::DEFAULT_ITERATIONS)]
        iterations: u32,
    },
    /// Deletes a user and its API keys.
    DeleteUser {
        user: String,
    },
    /// Replaces the origins browsers may call the HTTP API from with the tenant's API keys
    /// (CORS), besides the agents' `--http-cors-origin`s; none clears them.
    SetCors {
        #[arg(long)]
        tenant: String,
        /// `https://app.example.com` (scheme, host, port), or `*` for any; repeatable.
        #[arg(long = "origin", value_name = "ORIGIN")]
        origins: Vec<String>,
    },
    /// Sets a tenant's quotas (each cluster-wide; omitted rates, partitions and storage become
    /// unlimited, omitted table shares their default). Each agent enforces an equal share of a
    /// rate among the live agents.
    SetQuotas {
        #[arg(long)]
        tenant: String,
        /// Produce request bytes per second (Kafka's producer_byte_rate).
        #[arg(long)]
        produce_bytes_per_sec: Option<u64>,
        /// Fetched bytes per second (Kafka's consumer_byte_rate).
        #[arg(long)]
        fetch_bytes_per_sec: Option<u64>,
        /// Partitions of all the tenant's topics together.
        #[arg(long)]
        partitions: Option<u32>,
        /// Requests per second, Kafka and HTTP together.
        #[arg(long)]
        requests_per_sec: Option<u64>,
        /// Bytes stored in all the tenant's partitions; produce is refused at or past it.
        #[arg(long)]
        storage_bytes: Option<u64>,
        /// The tenant's share of the cluster's tables; omitted ones get their default (10,000
        /// topics, 10,000 groups, 10,000 transactional ids, 100,000 producer ids, 1,000 ACLs).
        #[arg(long)]
        topics: Option<u64>,
        #[arg(long)]
        groups: Option<u64>,
        #[arg(long)]
        transactional_ids: Option<u64>,
        #[arg(long)]
        producer_ids: Option<u64>,
        #[arg(long)]
        acls: Option<u64>,
    },
    /// Creates an HTTP API key acting as a user; prints the token once (only its hash is kept).
    CreateApiKey {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        user: String,
        /// The key stops working after this many seconds; never by default.
        #[arg(long)]
        expires_in_secs: Option<u64>,
    },
    DeleteApiKey {
        key_id: String,
    },
    /// Sets an API key's own rate quotas, within its tenant's (omitted: none of its own). For a
    /// fleet of devices under one tenant, one key each.
    SetApiKeyQuotas {
        key_id: String,
        /// Produce request bytes per second.
        #[arg(long)]
        produce_bytes_per_sec: Option<u64>,
        /// Fetched bytes per second.
        #[arg(long)]
        fetch_bytes_per_sec: Option<u64>,
        /// HTTP requests per second.
        #[arg(long)]
        requests_per_sec: Option<u64>,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum GroupsAction {
    /// Every group with its state and protocol type.
    List,
    /// One group: state, members and, per partition, committed offset, log end offset and lag.
    Describe { group: String },
}

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// Directory for metadata (Raft log, snapshots) and, by default, objects.
    #[arg(long, default_value = "./floe-data")]
    pub(crate) data_dir: PathBuf,
    /// Metadata protocol listener (Raft between metadata nodes, proposals, change streams).
    #[arg(long, default_value = "127.0.0.1:9093")]
    pub(crate) metadata_addr: SocketAddr,
    /// Object store URL: file:///dir, s3://bucket/prefix or memory:// (default: file://DATA_DIR/objects).
    #[arg(long)]
    pub(crate) object_store: Option<String>,
    #[command(flatten)]
    pub(crate) agent: AgentOptions,
    #[command(flatten)]
    pub(crate) log: LogArgs,
}

#[derive(Debug, clap::Args)]
pub(crate) struct AgentArgs {
    /// Metadata nodes to mirror from and propose to: HOST:PORT[,HOST:PORT...].
    #[arg(long, value_delimiter = ',', required = true)]
    pub(crate) metadata: Vec<String>,
    /// Object store URL: file:///dir, s3://bucket/prefix or memory://.
    #[arg(long)]
    pub(crate) object_store: String,
    #[command(flatten)]
    pub(crate) placement: Placement,
    #[command(flatten)]
    pub(crate) tls: MetadataTlsArgs,
    #[command(flatten)]
    pub(crate) agent: AgentOptions,
    #[command(flatten)]
    pub(crate) log: LogArgs,
}

/// Where an agent stands among the others: its zone, roles and agent group (`floe agent`).
#[derive(Debug, clap::Args)]
pub(crate) struct Placement {
    /// Availability zone of this agent (reported as its rack). A client is given the agents of
    /// its zone: the one it states (`floe_az=ZONE` in its client.id, or its address in
    /// --zone-cidrs), else the zone of the agent it reached.
    #[arg(long)]
    pub(crate) zone: Option<String>,
    /// Clients' zones by address, for clients whose client.id states none:
    /// ZONE=CIDR[,ZONE=CIDR...] (the narrowest range wins).
    #[arg(long, default_value = "")]
    pub(crate) zone_cidrs: floe_agent::membership::ZoneCidrs,
    /// The work this agent takes: produce, fetch, jobs (comma-separated). Partition leaders
    /// given to a client are agents of the roles of the agent it reached; an agent without fetch
    /// sends consumers that set client.rack to a fetch agent (KIP-392); only jobs agents run
    /// compaction, garbage collection, tables and usage exports. Any agent still serves any
    /// request. Takes effect once every metadata node runs metadata format 9.
    #[arg(long, default_value = "produce,fetch,jobs")]
    pub(crate) roles: floe_metadata::AgentRoles,
    /// Agent group: clients are told only of the agents of the group of the agent they reached
    /// (letters, digits, '.', '_', '-'; empty: the default group).
    #[arg(long, default_value = "")]
    pub(crate) agent_group: String,
    /// Peer listener (HOST:PORT): fetch agents of one zone and agent group ask each other for
    /// object blocks here, so each block is read from the object store once per zone. Served
    /// with the metadata mutual TLS identities (agent certificates need serverAuth), or in
    /// plaintext with --metadata-allow-plaintext. Takes effect once every metadata node runs
    /// metadata format 10. Unset: this agent reads every block it misses from the store.
    #[arg(long)]
    pub(crate) peer_addr: Option<std::net::SocketAddr>,
    /// The address other agents dial for --peer-addr (HOST:PORT); default: --peer-addr, or the
    /// advertised host with its port when --peer-addr listens on every address.
    #[arg(long)]
    pub(crate) peer_advertised_addr: Option<String>,
    /// Serve --peer-addr without TLS on a non-loopback address: whoever reaches it can read
    /// segment blocks. Only for networks nobody else can reach.
    #[arg(long)]
    pub(crate) peer_allow_plaintext: bool,
}

impl Placement {
    /// One agent of every role, in no zone (`floe dev`).
    pub(crate) fn single() -> Self {
        Self {
            zone: None,
            zone_cidrs: Default::default(),
            roles: floe_metadata::AgentRoles::ALL,
            agent_group: String::new(),
            peer_addr: None,
            peer_advertised_addr: None,
            peer_allow_plaintext: false,
        }
    }
}

/// Options of the agent, shared by `floe dev` and `floe agent`.
#[derive(Debug, clap::Args)]
pub(crate) struct AgentOptions {
    /// Kafka listener.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(crate) kafka_addr: SocketAddr,
    /// Address given to Kafka clients in Metadata responses (default: the Kafka listener's).
    #[arg(long)]
    pub(crate) advertised_addr: Option<String>,
    /// HTTP listener: the HTTP produce, read and admin API (/v3/..., /openapi.json), /healthz,
    /// /readyz, /metrics, /v1/cluster.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) http_addr: SocketAddr,
    /// Also serve the schema registry at the root of this address (for tools that cannot take a
    /// path prefix); it is always served under /schema-registry on --http-addr. Same API keys,
    /// TLS and limits as the HTTP listener.
    #[arg(long)]
    pub(crate) schema_registry_addr: Option<SocketAddr>,
    /// Origin browsers may call the HTTP API from (CORS), e.g. `https://app.example.com`;
    /// repeatable; `*` allows any origin. None: cross-origin browser calls are refused.
    #[arg(long = "http-cors-origin", value_name = "ORIGIN")]
    pub(crate) http_cors_origins: Vec<String>,
    /// Serve both listeners over TLS with this certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub(crate) tls_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub(crate) tls_key: Option<std::path::PathBuf>,
    /// Require an API key (`floe admin tenants create-api-key`) on every request but
    /// /healthz, /readyz, /metrics and the operator API.
    #[arg(long)]
    pub(crate) http_require_api_key: bool,
    /// Who may read /metrics: `open` (anyone who reaches the HTTP port) or `operator` (the
    /// operator token as a Bearer token; for a shared endpoint, as the labels name every
    /// tenant's topics and groups).
    #[arg(long, value_enum, default_value_t = MetricsAccess::Open)]
    pub(crate) http_metrics_access: MetricsAccess,
    /// HTTP requests (long-polls and event streams included) one API key may have in flight;
    /// more get 429. Health, readiness and metrics are never refused.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) http_requests_in_flight_per_key: usize,
    /// HTTP requests all of one tenant's API keys may have in flight together.
    #[arg(long, default_value_t = 4_000)]
    pub(crate) http_requests_in_flight_per_tenant: usize,
    /// HTTP requests without an API key one client address may have in flight.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) http_requests_in_flight_per_ip: usize,
    /// HTTP connections this agent holds at once; past it, new ones are closed at once.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) http_max_connections: usize,
    /// HTTP connections from one client address (a fleet behind one NAT shares it).
    #[arg(long, default_value_t = 4_000)]
    pub(crate) http_max_connections_per_ip: usize,
    /// An HTTP connection that neither sends nor receives a byte for this long is closed
    /// (long-polls answer within 30 s; event streams send a keep-alive every 15 s).
    #[arg(long, default_value_t = 60_000)]
    pub(crate) http_connections_max_idle_ms: u64,
    /// Serve the operator API (`/v1/admin`: tenants, users, API keys) to requests carrying the
    /// token in this file (`Authorization: Bearer <token>`, at least 24 characters). Without it
    /// the operator API is not served; `floe admin tenants` works either way.
    #[arg(long)]
    pub(crate) operator_token_file: Option<std::path::PathBuf>,
    /// Endpoint of an S3-compatible server for s3:// URLs (credentials from AWS_* variables).
    /// Request bodies are sent unsigned over HTTPS (TLS and Floe's CRC-32C protect them) and
    /// signed over plain HTTP; AWS_UNSIGNED_PAYLOAD=true|false decides instead.
    #[arg(long)]
    pub(crate) s3_endpoint: Option<String>,
    /// Flush when the oldest buffered batch is this old (default 250 for s3://, 10 otherwise).
    /// Defaults for s3:// also hold under --object-store-latency, which simulates a remote store.
    #[arg(long)]
    pub(crate) flush_interval_ms: Option<u64>,
    /// Flush when this many bytes are buffered.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub(crate) flush_bytes: usize,
    /// Adaptive batching: also flush as soon as the previous flush was answered, so a lone batch
    /// waits for no interval and batches grow with load. More PUTs at low load: at most one per
    /// --min-flush-interval-ms. Default on for s3://, off for file:// (`--flush-adaptive=false`
    /// turns it off).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub(crate) flush_adaptive: Option<bool>,
    /// With --flush-adaptive, the least time between the starts of two flushes: bounds PUTs per
    /// second, and their cost, when the agent is lightly loaded. Default 100 on S3 Standard, 20
    /// on S3 Express One Zone (a `--x-s3` directory bucket) and file://.
    #[arg(long)]
    pub(crate) min_flush_interval_ms: Option<u64>,
    /// Send a segment PUT a second time when it is slower than nine in ten recent PUTs of its
    /// size (at most one extra PUT per ten), and take whichever lands first: cuts the object
    /// store's latency tail from produce. Default on for s3://, off for file://.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub(crate) hedge_puts: Option<bool>,
    /// Memory for buffered and uploading batches; producers wait beyond it (default 4 x flush-bytes, at least 64 MiB).
    #[arg(long)]
    pub(crate) buffer_bytes: Option<usize>,
    /// Memory for the hot tier: recently written and read object blocks (default: a quarter of
    /// the memory the process may use, its cgroup's limit or the machine's RAM; at least 256 MiB).
    #[arg(long)]
    pub(crate) cache_bytes: Option<u64>,
    /// Local directory for the hot tier's disk part (an NVMe drive); none: memory only. What
    /// it holds survives a restart.
    #[arg(long)]
    pub(crate) cache_dir: Option<std::path::PathBuf>,
    /// Bytes the disk part may use.
    #[arg(long, default_value_t = 10 * 1024 * 1024 * 1024)]
    pub(crate) cache_disk_bytes: u64,
    /// Directory of the usage journal: what this agent served, per tenant and minute, kept until
    /// metadata has it, so a crash loses no count (default: CACHE_DIR/usage with --cache-dir,
    /// DATA_DIR/usage under `floe dev`; without either, counts wait in memory).
    #[arg(long)]
    pub(crate) usage_dir: Option<std::path::PathBuf>,
    /// Autoscaling signal: the share of the machine's CPU that counts as fully used
    /// (`floe_agent_utilization` is the highest of CPU, buffer fill and produce p99, each over
    /// its target).
    #[arg(long, default_value_t = 0.6)]
    pub(crate) autoscale_cpu_target: f64,
    /// Autoscaling signal: the flush-buffer fill that counts as fully used.
    #[arg(long, default_value_t = 0.5)]
    pub(crate) autoscale_buffer_target: f64,
    /// Autoscaling signal: the produce p99 latency that counts as fully used (0: four flush
    /// intervals, at least 500 ms).
    #[arg(long, default_value_t = 0)]
    pub(crate) autoscale_produce_p99_ms: u64,
    /// On SIGTERM, how long the agent may take to flush and answer what it buffered after
    /// leaving the cluster (keep an autoscaling group's termination hook longer).
    #[arg(long, default_value_t = 30)]
    pub(crate) drain_timeout_secs: u64,
    /// Meter what this agent serves per tenant (requests, fetched bytes and records), for usage
    /// billing. Off saves the journal writes where nobody bills (produced bytes and storage are
    /// metered by metadata either way).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) usage_metering: bool,
    /// How often the agent reports its usage counts to metadata.
    #[arg(long, default_value_t = 5000)]
    pub(crate) usage_report_interval_ms: u64,
    /// Kafka's auto.create.topics.enable.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) auto_create_topics: bool,
    /// Kafka's num.partitions: partitions of auto-created topics.
    #[arg(long, default_value_t = 1)]
    pub(crate) num_partitions: i32,
    /// Broker id of this agent in Kafka Metadata responses; unique per agent (default: 1 for
    /// `floe dev`, derived from the advertised address for `floe agent`).
    #[arg(long)]
    pub(crate) node_id: Option<i32>,
    /// Seconds between garbage collection rounds (run by the live agent with the lowest id);
    /// every tenth round also lists the store for orphans.
    #[arg(long, default_value_t = 30)]
    pub(crate) gc_interval_secs: u64,
    /// Age after which an object the metadata does not know (uploaded, never committed) is
    /// deleted; flushes not committed within half of it are failed back to their producers.
    #[arg(long, default_value_t = 600)]
    pub(crate) orphan_grace_secs: u64,
    /// Seconds between compaction rounds (run by the same agent as garbage collection). A round
    /// costs a PUT and a metadata commit per 8 MiB merged, whatever the partitions, and keeps
    /// the index short: at 2,000 partitions a minute of flushes is a million entries.
    #[arg(long, default_value_t = 10)]
    pub(crate) compaction_interval_secs: u64,
    /// Fewest consecutive small chunks of a partition that compaction merges into one object.
    #[arg(long, default_value_t = 16)]
    pub(crate) compaction_min_run: usize,
    /// Require SASL on the Kafka listener with these mechanisms (comma-separated: PLAIN,
    /// SCRAM-SHA-256, SCRAM-SHA-512). Users and passwords: `floe admin tenants add-user`. Use PLAIN only
    /// over TLS.
    #[arg(long, value_delimiter = ',')]
    pub(crate) sasl_mechanisms: Vec<floe_agent::kafka::sasl::Mechanism>,
    /// Failed authentications (SASL or HTTP API key) one client address may make in a minute;
    /// past it, that address is refused without its credentials being checked until the minute
    /// ends. 0: no limit.
    #[arg(long, default_value_t = 10)]
    pub(crate) auth_failures_per_minute: u32,
    /// Kafka's `super.users`, by user name: they pass every ACL and may describe and alter
    /// SCRAM credentials (DescribeUserScramCredentials, AlterUserScramCredentials), each within
    /// its own tenant.
    #[arg(long, value_delimiter = ',')]
    pub(crate) super_users: Vec<String>,
    /// Enforce ACLs (CreateAcls, DescribeAcls, DeleteAcls) on every Kafka request and HTTP
    /// call, as Kafka's StandardAuthorizer does; off, every authenticated client may do
    /// everything in its tenant.
    #[arg(long)]
    pub(crate) authorizer: bool,
    /// With `--authorizer`: a resource that no ACL names is open to everyone (Kafka's
    /// `allow.everyone.if.no.acl.found`); by default it is closed to all but super users.
    #[arg(long, requires = "authorizer")]
    pub(crate) allow_everyone_if_no_acl_found: bool,
    /// Kafka's `connections.max.reauth.ms`: clients must authenticate again within this long
    /// (KIP-368); 0 keeps an authentication for the connection's life.
    #[arg(long, default_value_t = 0)]
    pub(crate) sasl_session_lifetime_ms: u64,
    /// Kafka connections this agent holds at once (Kafka's `max.connections`). When full, the
    /// oldest connection that has not yet authenticated (or, without SASL, sent a request) is
    /// closed to let a new one in.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) max_connections: usize,
    /// Kafka connections from one client address (Kafka's `max.connections.per.ip`); more are
    /// closed at once.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) max_connections_per_ip: usize,
    /// Authenticated Kafka connections of one tenant's users on this agent, from however many
    /// addresses; past it, SaslAuthenticate is refused. Keeps one tenant from holding every
    /// place of --max-connections.
    #[arg(long, default_value_t = 2_500)]
    pub(crate) max_connections_per_tenant: usize,
    /// Connections the kernel queues for each of this agent's listeners (Kafka, HTTP, schema
    /// registry, block peers) before it accepts them (Kafka's `socket.listen.backlog.size`;
    /// the kernel caps it at `net.core.somaxconn`). Past it, new connections' SYNs are dropped
    /// and their clients retry after 1 s or more, as in a reconnect storm after an agent is lost.
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) socket_listen_backlog_size: u32,
    /// Exceptions to --max-connections-per-ip, as ADDR:N pairs separated by commas (Kafka's
    /// `max.connections.per.ip.overrides`), e.g. for a NAT gateway or a load balancer.
    #[arg(long, value_delimiter = ',', value_parser = parse_ip_override)]
    pub(crate) max_connections_per_ip_overrides: Vec<(std::net::IpAddr, usize)>,
    /// Incremental fetch sessions (KIP-227) this agent keeps (Kafka's
    /// `max.incremental.fetch.session.cache.slots`); 0 answers every Fetch without a session. One
    /// tenant may hold a quarter of them.
    #[arg(long, default_value_t = 1_000)]
    pub(crate) fetch_session_slots: usize,
    /// Kafka's `connections.max.idle.ms`: a connection that sends no request for this long is closed.
    #[arg(long, default_value_t = 600_000)]
    pub(crate) connections_max_idle_ms: u64,
    /// With --sasl-mechanisms: a connection that has not authenticated within this long is closed.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) authentication_timeout_ms: u64,
    /// Kafka's `sasl.server.max.receive.size`: the largest frame a connection may send before it
    /// has authenticated.
    #[arg(long, default_value_t = 512 * 1024)]
    pub(crate) sasl_max_receive_bytes: usize,
    /// Benchmarks only: delay every object-store request as the named profile says (a
    /// simulation of a remote store's latency on top of the real one): s3-standard or s3-express.
    #[arg(long, value_parser = parse_latency_profile)]
    pub(crate) object_store_latency: Option<floe_storage::LatencyProfile>,
    /// Reliability tests only: object-store requests fail at these rates, e.g.
    /// `put-error=0.1,put-lost-ack=0.05,slowdown=0.05,get-error=0.02,slow-put=0.01,slow-put-ms=3000,timeout=0.01,timeout-ms=10000`,
    /// or `@FILE`: a file holding such a spec, read again every half second (floe-chaos).
    #[arg(long, hide = true)]
    pub(crate) test_object_store_faults: Option<floe_storage::FaultSource>,
    /// Tests only: the table job pauses this long between writing a snapshot's files and
    /// committing them, so a test can kill the agent in between.
    #[arg(long, hide = true, default_value_t = 0)]
    pub(crate) test_table_commit_delay_ms: u64,
    /// Test-only fault injection: `exit-before-commit` makes the agent exit right after a
    /// segment PUT succeeds, before committing it (leaves an orphan object).
    #[arg(long, hide = true)]
    pub(crate) fault: Option<floe_agent::Fault>,
}

fn parse_ip_override(pair: &str) -> Result<(std::net::IpAddr, usize), String> {
    let (addr, count) = pair.rsplit_once(':').ok_or_else(|| format!("{pair:?} is not ADDR:N"))?;
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let addr = addr.parse().map_err(|e| format!("{addr:?}: {e}"))?;
    let count = count.parse().map_err(|e| format!("{count:?}: {e}"))?;
    Ok((addr, count))
}

fn parse_latency_profile(name: &str) -> Result<floe_storage::LatencyProfile, String> {
    floe_storage::LatencyProfile::named(name)
        .ok_or_else(|| format!("unknown latency profile {name:?}; known: {}", floe_storage::LatencyProfile::names()))
}

/// `--http-metrics-access`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MetricsAccess {
    Open,
    Operator,
}
