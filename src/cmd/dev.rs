//! `floe dev`: one metadata node, one agent and the HTTP endpoints in one process.

use std::time::Duration;

use anyhow::Context;
use floe_agent::{Agent, AgentConfig, FlushConfig};
use floe_metadata::{MetadataNode, MetadataNodeConfig};
use floe_storage::{ObjectStoreConfig, SegmentStore};
use tokio::net::TcpListener;

use crate::cli::DevArgs;

pub(crate) async fn run(args: DevArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let data_dir = args.data_dir.canonicalize()?;
    let url = match &args.object_store {
        Some(url) => url.clone(),
        None => format!("file://{}", data_dir.join("objects").display()),
    };
    let store = SegmentStore::open(&ObjectStoreConfig { url: url.clone(), s3_endpoint: args.s3_endpoint.clone() })?;
    // A one-voter metadata cluster; its protocol listens on --metadata-addr.
    let metadata_addr = args.metadata_addr.to_string();
    let metadata = MetadataNode::start(MetadataNodeConfig {
        node_id: 1,
        listen_addr: metadata_addr.clone(),
        data_dir: data_dir.join("metadata"),
        peers: [(1, metadata_addr)].into_iter().collect(),
    })
    .await
    .with_context(|| format!("starting the metadata node on {}", args.metadata_addr))?;
    metadata.wait_for_leader(Duration::from_secs(10)).await?;
    metadata.ensure_initialized().await?;

    if args.num_partitions < 1 {
        anyhow::bail!("--num-partitions must be at least 1");
    }
    let flush_interval =
        Duration::from_millis(args.flush_interval_ms.unwrap_or(if url.starts_with("s3://") { 250 } else { 10 }));
    let flush = FlushConfig {
        flush_bytes: args.flush_bytes.max(1),
        flush_interval,
        buffer_bytes_max: args.buffer_bytes.unwrap_or((4 * args.flush_bytes).max(64 * 1024 * 1024)),
        uploads_in_flight_max: 4,
    };
    let http =
        TcpListener::bind(args.http_addr).await.with_context(|| format!("binding HTTP listener {}", args.http_addr))?;
    let kafka = TcpListener::bind(args.kafka_addr)
        .await
        .with_context(|| format!("binding Kafka listener {}", args.kafka_addr))?;
    let bound = kafka.local_addr()?;
    let (advertised_host, advertised_port) = match &args.advertised_addr {
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
    let config = AgentConfig {
        node_id: args.node_id,
        advertised_host,
        advertised_port,
        flush,
        cache_bytes: args.cache_bytes,
        auto_create_topics: args.auto_create_topics,
        default_partition_count: args.num_partitions,
    };
    let agent = Agent::start(config, metadata.clone(), store);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(floe_agent::kafka::server::run(agent.clone(), kafka, stopped.clone()));
    tokio::spawn(floe_gateway::serve_http(agent.clone(), http, stopped));
    tracing::info!(kafka = %bound, http = %args.http_addr, metadata = %args.metadata_addr, object_store = %url, data_dir = %data_dir.display(), ?flush_interval, "floe dev ready");

    shutdown_signal().await;
    tracing::info!("shutting down: flushing buffered batches");
    let _ = stop.send(true);
    agent.shutdown().await;
    server.abort();
    metadata.shutdown().await;
    Ok(())
}

async fn shutdown_signal() {
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
