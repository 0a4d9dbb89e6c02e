//! Runs an agent (Kafka and HTTP listeners, flush pipeline) until SIGTERM or Ctrl-C, then drains
//! it: shared by `floe dev` and `floe agent`.

use std::time::Duration;

use anyhow::Context;
use floe_agent::{Agent, AgentConfig, CompactionConfig, FlushConfig, GcConfig};
use floe_metadata::Metadata;
use floe_storage::{BlockCache, BlockCacheConfig, ObjectStoreConfig, SegmentStore, StoreClass};

use crate::cli::{AgentOptions, Placement};

/// The hot tier's memory unless told: a quarter of what the process may use, so reads of recent
/// data come from memory as a broker's page cache would serve them, within [256 MiB, 64 GiB].
fn default_cache_bytes() -> u64 {
    const MIN: u64 = 256 << 20;
    const MAX: u64 = 64 << 30;
    crate::memory::available_bytes().map_or(MIN, |bytes| (bytes / 4).clamp(MIN, MAX))
}

/// How an agent flushes unless told otherwise, by the store it writes to.
struct FlushDefaults {
    interval_ms: u64,
    adaptive: bool,
    min_interval_ms: u64,
    hedge_puts: bool,
}

impl FlushDefaults {
    fn of(class: StoreClass) -> Self {
        match class {
            // Local disk: flushes are cheap and quick, so a short interval is low latency enough.
            StoreClass::Local => Self { interval_ms: 10, adaptive: false, min_interval_ms: 20, hedge_puts: false },
            // A PUT takes tens of milliseconds with a long tail and is billed: flush when the
            // last flush is answered but at most ten times a second, and hedge slow PUTs. This
            // keeps produce p99 under 300 ms (docs/BENCHMARKS.md, "Produce latency at s3://
            // defaults").
            StoreClass::S3Standard => Self { interval_ms: 250, adaptive: true, min_interval_ms: 100, hedge_puts: true },
            // Single-digit-millisecond PUTs: flushing up to 50 times a second is the low-latency
            // mode's point.
            StoreClass::S3Express => Self { interval_ms: 250, adaptive: true, min_interval_ms: 20, hedge_puts: true },
        }
    }
}

/// `default_usage_dir` is where the usage journal goes unless `--usage-dir` or `--cache-dir` says.
pub(crate) async fn run(
    options: &AgentOptions,
    object_store_url: &str,
    placement: Placement,
    metadata: Metadata,
    default_usage_dir: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    let metadata_is_local = matches!(metadata, Metadata::Local(_));
    let defaults = FlushDefaults::of(StoreClass::of(object_store_url, options.object_store_latency));
    let store = SegmentStore::open(&ObjectStoreConfig {
        url: object_store_url.to_owned(),
        s3_endpoint: options.s3_endpoint.clone(),
        latency: options.object_store_latency,
        faults: options.test_object_store_faults.clone(),
        hedge_puts: options.hedge_puts.unwrap_or(defaults.hedge_puts),
    })?;
    if let Some(faults) = &options.test_object_store_faults {
        tracing::warn!(?faults, "object store requests fail on purpose (--test-object-store-faults: tests only)");
    }
    if let Some(profile) = options.object_store_latency {
        tracing::warn!(
            profile = profile.name,
            "object store requests are delayed by a simulated latency profile (benchmarks only)"
        );
    }
    if options.num_partitions < 1 {
        anyhow::bail!("--num-partitions must be at least 1");
    }
    if !floe_metadata::limits::valid_agent_group(&placement.agent_group) {
        anyhow::bail!(
            "--agent-group is up to {} bytes of letters, digits, '.', '_' and '-'",
            floe_metadata::limits::AGENT_GROUP_BYTES_MAX
        );
    }
    let flush_interval = Duration::from_millis(options.flush_interval_ms.unwrap_or(defaults.interval_ms));
    let adaptive = options.flush_adaptive.unwrap_or(defaults.adaptive);
    let flush = FlushConfig {
        flush_bytes: options.flush_bytes.max(1),
        flush_interval,
        buffer_bytes_max: options.buffer_bytes.unwrap_or((4 * options.flush_bytes).max(64 * 1024 * 1024)),
        uploads_in_flight_max: 4,
        adaptive,
        min_flush_interval: Duration::from_millis(options.min_flush_interval_ms.unwrap_or(defaults.min_interval_ms)),
    };
    let backlog = options.socket_listen_backlog_size;
    let http = super::listen::listen(options.http_addr, backlog)
        .with_context(|| format!("binding HTTP listener {}", options.http_addr))?;
    let registry = match options.schema_registry_addr {
        Some(addr) => Some(
            super::listen::listen(addr, backlog).with_context(|| format!("binding schema registry listener {addr}"))?,
        ),
        None => None,
    };
    let kafka = super::listen::listen(options.kafka_addr, backlog)
        .with_context(|| format!("binding Kafka listener {}", options.kafka_addr))?;
    let bound = kafka.local_addr()?;
    let (advertised_host, advertised_port) = match &options.advertised_addr {
        Some(addr) => {
            let (host, port) = addr.rsplit_once(':').context("--advertised-addr must be HOST:PORT")?;
            (host.to_owned(), port.parse().context("--advertised-addr port")?)
        }
        None if bound.ip().is_unspecified() => {
            tracing::warn!("Kafka listener is on a wildcard address; advertising 127.0.0.1 (set --advertised-addr)");
            ("127.0.0.1".to_owned(), bound.port())
        }
        None => (bound.ip().to_string(), bound.port()),
    };
    let peer = match placement.peer_addr {
        Some(bind) => {
            let listener =
                super::listen::listen(bind, backlog).with_context(|| format!("binding the peer listener {bind}"))?;
            let advertised = match &placement.peer_advertised_addr {
                Some(addr) => addr.clone(),
                None if bind.ip().is_unspecified() => format!("{}:{}", advertised_host, bind.port()),
                None => bind.to_string(),
            };
            if !floe_metadata::limits::valid_peer_addr(&advertised) {
                anyhow::bail!("--peer-advertised-addr {advertised:?} is not HOST:PORT");
            }
            Some((listener, advertised))
        }
        None => None,
    };
    // Agents of a fleet started from one template get distinct ids from their addresses.
    let derived_id =
        || (crc32c::crc32c(format!("{advertised_host}:{advertised_port}").as_bytes()) & 0x7fff_ffff) as i32;
    let node_id = options.node_id.unwrap_or_else(|| if metadata_is_local { 1 } else { derived_id() });
    let config = AgentConfig {
        node_id,
        advertised_host,
        advertised_port,
        flush,
        auto_create_topics: options.auto_create_topics,
        default_partition_count: options.num_partitions,
        zone: placement.zone,
        zone_cidrs: placement.zone_cidrs,
        roles: placement.roles,
        agent_group: placement.agent_group,
        peer_addr: peer.as_ref().map(|(_, advertised)| advertised.clone()),
        gc: GcConfig {
            interval: Duration::from_secs(options.gc_interval_secs.max(1)),
            orphan_grace: Duration::from_secs(options.orphan_grace_secs.max(1)),
        },
        tables: floe_agent::TableJobConfig {
            interval: Duration::from_millis(500),
            commit_delay: Duration::from_millis(options.test_table_commit_delay_ms),
        },
        links: floe_agent::links::LinkJobConfig::default(),
        fault: options.fault,
        sasl: (!options.sasl_mechanisms.is_empty()).then(|| floe_agent::kafka::sasl::SaslConfig {
            mechanisms: options.sasl_mechanisms.clone(),
            session_lifetime: (options.sasl_session_lifetime_ms > 0)
                .then(|| Duration::from_millis(options.sasl_session_lifetime_ms)),
            // Kafka's connection.failed.authentication.delay.ms is 100; a second slows guessing
            // far more and costs an honest client with a typo little.
            failure_delay: Duration::from_secs(1),
        }),
        auth_failures_per_minute: options.auth_failures_per_minute,
        super_users: options.super_users.clone(),
        authorizer: options.authorizer.then_some(floe_agent::access::AuthorizerConfig {
            allow_if_no_acl: options.allow_everyone_if_no_acl_found,
        }),
        connections: floe_agent::kafka::connections::ConnectionLimits {
            max_connections: options.max_connections.max(1),
            max_per_ip: options.max_connections_per_ip,
            per_ip_overrides: options.max_connections_per_ip_overrides.iter().copied().collect(),
            max_per_tenant: options.max_connections_per_tenant,
            idle: Duration::from_millis(options.connections_max_idle_ms.max(1)),
            authentication_timeout: Duration::from_millis(options.authentication_timeout_ms.max(1)),
            unauthenticated_frame_bytes_max: options.sasl_max_receive_bytes.max(64),
        },
        fetch_sessions: floe_agent::fetch::sessions::FetchSessionBounds::with_slots(options.fetch_session_slots),
        load_targets: floe_agent::load::LoadTargets {
            cpu: options.autoscale_cpu_target,
            buffer_fill: options.autoscale_buffer_target,
            // Produce latency follows the flush interval when idle: the target sits well above it.
            produce_p99: match options.autoscale_produce_p99_ms {
                0 => (flush_interval * 4).max(Duration::from_millis(500)),
                ms => Duration::from_millis(ms),
            },
        },
        compaction: CompactionConfig {
            interval: Duration::from_secs(options.compaction_interval_secs.max(1)),
            small_chunk_bytes: 1024 * 1024,
            min_run: options.compaction_min_run.max(2),
            crowded_entries: 200_000,
            // A fetch reads a whole chunk: past a few blocks, bigger chunks cost reads, not GETs.
            target_object_bytes: 8 * 1024 * 1024,
        },
    };
    let cache_bytes = options.cache_bytes.unwrap_or_else(default_cache_bytes);
    tracing::info!(cache_bytes, "hot tier memory");
    let cache = BlockCache::open(&BlockCacheConfig {
        memory_bytes: cache_bytes,
        disk: options.cache_dir.clone().map(|dir| (dir, options.cache_disk_bytes)),
    })
    .await
    .context("opening the block cache")?;
    let usage_dir = (options.usage_dir.clone())
        .or_else(|| options.cache_dir.as_ref().map(|dir| dir.join("usage")))
        .or(default_usage_dir);
    crate::metrics::register_build_info();
    crate::metrics::register_heap();
    let dirs = [("cache", options.cache_dir.clone()), ("usage", usage_dir.clone())];
    crate::metrics::register_disk_space(dirs.into_iter().filter_map(|(name, dir)| Some((name, dir?))).collect());
    let usage = floe_agent::UsageMeter::open(floe_agent::UsageConfig {
        enabled: options.usage_metering,
        journal_dir: usage_dir,
        report_interval: Duration::from_millis(options.usage_report_interval_ms.max(100)),
    })?;
    let agent = Agent::start(config, metadata, store, cache, usage);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some(tls_acceptor(cert, key)?),
        _ => None,
    };
    let http_config = floe_gateway::HttpConfig {
        cors_origins: options.http_cors_origins.clone(),
        require_api_key: options.http_require_api_key,
        tls: tls.clone(),
        operator_token: match &options.operator_token_file {
            Some(path) => Some(
                floe_gateway::OperatorToken::new(&super::read_operator_token(path)?)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?,
            ),
            None => None,
        },
        metrics_access: match options.http_metrics_access {
            crate::cli::MetricsAccess::Open => floe_gateway::MetricsAccess::Open,
            crate::cli::MetricsAccess::Operator => floe_gateway::MetricsAccess::Operator,
        },
        caller_limits: floe_gateway::CallerLimits {
            per_key: options.http_requests_in_flight_per_key.max(1),
            per_tenant: options.http_requests_in_flight_per_tenant.max(1),
            per_ip: options.http_requests_in_flight_per_ip.max(1),
        },
        connection_limits: floe_gateway::HttpConnectionLimits {
            max_connections: options.http_max_connections.max(1),
            max_per_ip: options.http_max_connections_per_ip.max(1),
            idle: Duration::from_millis(options.http_connections_max_idle_ms.max(1_000)),
        },
    };
    // Everything that may refuse the configuration is checked; the listeners are bound, so
    // clients already connecting wait in the backlog while the agent is announced.
    tracing::info!("announcing this agent to the metadata service");
    tokio::select! {
        announced = floe_agent::membership::announce(&agent) => {
            announced.map_err(|why| anyhow::anyhow!("the metadata service refused this agent: {why}"))?;
        }
        () = shutdown_signal() => {
            tracing::info!("stopped before the agent was announced");
            return Ok(());
        }
    }
    let server = tokio::spawn(floe_agent::kafka::server::run(agent.clone(), kafka, tls, stopped.clone()));
    let peer_server = peer.map(|(listener, advertised)| {
        tracing::info!(peer = %advertised, "peer listener ready");
        tokio::spawn(floe_agent::block_peers::server::serve(agent.clone(), listener, stopped.clone()))
    });
    if let Some(listener) = registry {
        let (agent, config, stopped) = (agent.clone(), http_config.clone(), stopped.clone());
        tokio::spawn(floe_gateway::serve_schema_registry(agent, config, listener, stopped));
    }
    tokio::spawn(floe_gateway::serve_http(agent.clone(), http_config, http, stopped));
    tracing::info!(kafka = %bound, http = %options.http_addr, object_store = %object_store_url, ?flush_interval, adaptive, "agent ready");
    // For a person at a terminal only: a log file or pipe (JSON logs above all) gets log lines.
    if metadata_is_local && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{}", dev_banner(bound, options));
    }

    shutdown_signal().await;
    // Draining: leave the cluster (other agents and this one stop listing it, so clients move),
    // stop accepting connections, refuse new batches with NOT_LEADER_OR_FOLLOWER (retried
    // elsewhere) and flush and answer the buffered ones, within the deadline.
    let began = std::time::Instant::now();
    tracing::info!("draining: leaving the cluster");
    agent.leave().await;
    let _ = stop.send(true);
    let deadline = Duration::from_secs(options.drain_timeout_secs.max(1));
    let drained = async {
        agent.shutdown().await;
        // Blocks being sent to other agents go out; then the peer listener's connections close.
        if let Some(peer_server) = peer_server {
            let _ = peer_server.await;
        }
    };
    match tokio::time::timeout(deadline, drained).await {
        Ok(()) => tracing::info!(seconds = began.elapsed().as_secs_f64(), "drained"),
        Err(_) => tracing::warn!(
            seconds = deadline.as_secs(),
            "drain deadline passed with batches unflushed; exiting (their producers were not acknowledged and retry)"
        ),
    }
    server.abort();
    Ok(())
}

pub(crate) async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// A TLS server configuration from PEM files: rustls with its safe defaults (TLS 1.2 and 1.3).
fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading certificates from {}", cert.display()))?;
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading a private key from {}", key.display()))?;
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("the TLS certificate and key do not match")?;
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// Where a newcomer's clients go, printed once `floe dev` serves, to a terminal (the log lines
/// around it are for operators).
fn dev_banner(kafka: std::net::SocketAddr, options: &AgentOptions) -> String {
    let http = options.http_addr;
    let mut lines = vec![
        format!("  Kafka            {kafka}"),
        format!("  HTTP API         http://{http}/v3/clusters"),
        format!("  console          http://{http}/console"),
        format!("  metrics          http://{http}/metrics"),
    ];
    if let Some(registry) = options.schema_registry_addr {
        lines.push(format!("  schema registry  http://{registry}"));
    }
    format!("\nfloe dev is ready:\n{}\n", lines.join("\n"))
}
