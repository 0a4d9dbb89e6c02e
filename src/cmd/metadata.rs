//! `floe metadata`: one voter of a replicated metadata cluster, in its own process.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use floe_metadata::{MetadataNode, MetadataNodeConfig};

use floe_storage::{ObjectStoreConfig, SegmentStore};

use crate::cli::{MetadataAction, MetadataArgs};

pub(crate) async fn run(args: MetadataArgs) -> anyhow::Result<()> {
    if let Some(MetadataAction::Restore { object_store, s3_endpoint, data_dir }) = &args.action {
        let store = SegmentStore::open(&ObjectStoreConfig {
            url: object_store.clone(),
            s3_endpoint: s3_endpoint.clone(),
            ..Default::default()
        })?;
        return super::archive::restore(&store, data_dir).await;
    }
    let tls = super::install_metadata_tls(&args.tls)?;
    if !tls && !args.metadata_allow_plaintext && !is_loopback(&args.metadata_addr) {
        bail!(
            "--metadata-addr {} is not a loopback address: give --metadata-tls-cert, --metadata-tls-key and \
             --metadata-tls-ca (docs/SECURITY.md), or --metadata-allow-plaintext on a network nobody else reaches",
            args.metadata_addr
        );
    }
    if let Some(path) = &args.operator_token_file {
        floe_metadata::tls::install_operator_token(&super::read_operator_token(path)?)?;
    }
    let node_id = args.node_id.context("--node-id is required")?;
    let peers: BTreeMap<u64, String> = args.peers.iter().cloned().collect();
    if peers.len() != args.peers.len() {
        bail!("--peers lists a node id twice");
    }
    match peers.get(&node_id) {
        Some(addr) if *addr == args.metadata_addr => {}
        Some(addr) => {
            bail!("--peers gives node {} the address {addr}, but --metadata-addr is {}", node_id, args.metadata_addr)
        }
        None => bail!("--peers must include this node ({})", node_id),
    }
    let node = MetadataNode::start(MetadataNodeConfig {
        node_id,
        listen_addr: args.metadata_addr.clone(),
        data_dir: args.data_dir.clone(),
        peers,
        join: args.join,
        clock: floe_metadata::clock::Clock::system(),
    })
    .await
    .with_context(|| format!("starting metadata node {} on {}", node_id, args.metadata_addr))?;
    tracing::info!(node_id = node_id, addr = %args.metadata_addr, data_dir = %args.data_dir.display(), "metadata node running");
    crate::metrics::register_build_info();
    crate::metrics::register_heap();
    crate::metrics::register_disk_space(vec![("metadata", args.data_dir.clone())]);
    let (stop_metrics, metrics_stopped) = tokio::sync::watch::channel(false);
    if let Some(addr) = args.metrics_addr {
        let listener =
            tokio::net::TcpListener::bind(addr).await.with_context(|| format!("binding --metrics-addr {addr}"))?;
        tracing::info!(%addr, "serving /metrics");
        tokio::spawn(async move {
            if let Err(e) = floe_gateway::serve_metrics(listener, metrics_stopped).await {
                tracing::warn!(error = %e, "metrics listener stopped");
            }
        });
    }
    if let Some(url) = &args.object_store {
        let store = SegmentStore::open(&ObjectStoreConfig {
            url: url.clone(),
            s3_endpoint: args.s3_endpoint.clone(),
            ..Default::default()
        })
        .with_context(|| format!("opening the archive store {url}"))?;
        tokio::spawn(super::archive::run(node.clone(), store));
    }
    let watcher = node.clone();
    tokio::spawn(async move {
        // The first leader of a new cluster initializes the replicated state.
        if watcher.wait_for_leader(std::time::Duration::from_secs(3600)).await.is_ok()
            && let Err(e) = watcher.ensure_initialized().await
        {
            tracing::warn!(error = %e, "initializing cluster state");
        }
    });
    let result = tokio::select! {
        () = super::serve_agent::shutdown_signal() => Ok(()),
        fault = node.stopped_by_fault() => Err(stopped_by_fault(&fault)),
    };
    stop_metrics.send_replace(true);
    node.shutdown().await;
    result
}

/// A node whose Raft stopped on a fatal error serves nothing until it starts again from its
/// files: the process exits non-zero so that its supervisor restarts it.
pub(crate) fn stopped_by_fault(fault: &str) -> anyhow::Error {
    tracing::error!(%fault, "the metadata node's Raft stopped; exiting so that it restarts from its files");
    anyhow::anyhow!("the metadata node's Raft stopped: {fault}")
}

/// Whether `addr` (HOST:PORT) only listens on this machine.
fn is_loopback(addr: &str) -> bool {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host).trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
