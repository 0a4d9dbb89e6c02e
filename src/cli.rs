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
}

#[derive(Debug, clap::Args)]
pub(crate) struct DevArgs {
    /// Directory for metadata (journal, snapshots) and, by default, objects.
    #[arg(long, default_value = "./floe-data")]
    pub(crate) data_dir: PathBuf,
    /// Kafka listener.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub(crate) kafka_addr: SocketAddr,
    /// Address given to Kafka clients in Metadata responses (default: the Kafka listener's).
    #[arg(long)]
    pub(crate) advertised_addr: Option<String>,
    /// HTTP listener: /healthz, /readyz, /metrics, /v1/cluster.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) http_addr: SocketAddr,
    /// Metadata protocol listener (Raft between metadata nodes, proposals, status).
    #[arg(long, default_value = "127.0.0.1:9093")]
    pub(crate) metadata_addr: SocketAddr,
    /// Object store URL: file:///dir, s3://bucket/prefix or memory:// (default: file://DATA_DIR/objects).
    #[arg(long)]
    pub(crate) object_store: Option<String>,
    /// Endpoint of an S3-compatible server for s3:// URLs (credentials from AWS_* variables).
    #[arg(long)]
    pub(crate) s3_endpoint: Option<String>,
    /// Flush when the oldest buffered batch is this old (default 250 for s3://, 10 otherwise).
    #[arg(long)]
    pub(crate) flush_interval_ms: Option<u64>,
    /// Flush when this many bytes are buffered.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub(crate) flush_bytes: usize,
    /// Memory for buffered and uploading batches; producers wait beyond it (default 4 x flush-bytes, at least 64 MiB).
    #[arg(long)]
    pub(crate) buffer_bytes: Option<usize>,
    /// Memory for recently written and read chunks.
    #[arg(long, default_value_t = 256 * 1024 * 1024)]
    pub(crate) cache_bytes: u64,
    /// Kafka's auto.create.topics.enable.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub(crate) auto_create_topics: bool,
    /// Kafka's num.partitions: partitions of auto-created topics.
    #[arg(long, default_value_t = 1)]
    pub(crate) num_partitions: i32,
    /// Broker id of this agent in Kafka Metadata responses.
    #[arg(long, default_value_t = 1)]
    pub(crate) node_id: i32,
}
