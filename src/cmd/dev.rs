//! `floe dev`: a one-voter metadata cluster, one agent and the HTTP endpoints in one process, on
//! a local directory.

use std::time::Duration;

use anyhow::Context;
use floe_metadata::{Metadata, MetadataNode, MetadataNodeConfig};
use floe_storage::{ObjectStoreConfig, SegmentStore};

use crate::cli::DevArgs;

pub(crate) async fn run(args: DevArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir).with_context(|| format!("creating {}", args.data_dir.display()))?;
    let data_dir = args.data_dir.canonicalize()?;
    let url = match &args.object_store {
        Some(url) => url.clone(),
        None => format!("file://{}", data_dir.join("objects").display()),
    };
    let metadata_addr = args.metadata_addr.to_string();
    let metadata = MetadataNode::start(MetadataNodeConfig {
        node_id: 1,
        listen_addr: metadata_addr.clone(),
        data_dir: data_dir.join("metadata"),
        peers: [(1, metadata_addr)].into_iter().collect(),
        join: false,
        clock: floe_metadata::clock::Clock::system(),
    })
    .await
    .with_context(|| format!("starting the metadata node on {}", args.metadata_addr))?;
    metadata.wait_for_leader(Duration::from_secs(10)).await?;
    metadata.ensure_initialized().await?;
    let archive_store = SegmentStore::open(&ObjectStoreConfig {
        url: url.clone(),
        s3_endpoint: args.agent.s3_endpoint.clone(),
        ..Default::default()
    })?;
    tokio::spawn(super::archive::run(metadata.clone(), archive_store));
    tracing::info!(data_dir = %data_dir.display(), metadata = %args.metadata_addr, "floe dev ready");
    let serve = super::serve_agent::run(
        &args.agent,
        &url,
        crate::cli::Placement::single(),
        Metadata::Local(metadata.clone()),
        Some(data_dir.join("usage")),
    );
    let result = tokio::select! {
        result = serve => result,
        fault = metadata.stopped_by_fault() => Err(super::metadata::stopped_by_fault(&fault)),
    };
    metadata.shutdown().await;
    result
}
