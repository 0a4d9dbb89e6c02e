//! A Kafka protocol client for reading another cluster, as a link does: the brokers and
//! partitions, log start and end offsets, record batches as raw bytes (never decoded or
//! re-encoded, so they can be stored byte for byte), topic configs, ACLs, and groups' committed
//! offsets. Over TCP or TLS, with SASL PLAIN or SCRAM. Each broker's ApiVersions answer picks
//! the versions used.

mod cluster;
mod connection;

pub use cluster::{
    FetchedPartition, GroupOffset, SourceAcl, SourceCluster, SourceMetadata, SourcePartition, SourceTopic,
};
pub use connection::{BrokerConnection, Sasl, SourceConfig};

/// Why a request to the source failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect { addr: String, source: std::io::Error },
    #[error("talking to {addr}: {source}")]
    Io { addr: String, source: std::io::Error },
    #[error("{addr} did not answer within {seconds} s")]
    Timeout { addr: String, seconds: u64 },
    #[error("TLS to {addr}: {reason}")]
    Tls { addr: String, reason: String },
    #[error("authentication with {addr} failed: {reason}")]
    Authentication { addr: String, reason: String },
    #[error("{addr} speaks no version of {api} that this client does")]
    Unsupported { addr: String, api: &'static str },
    #[error("{addr} sent a malformed {api} response: {reason}")]
    Malformed { addr: String, api: &'static str, reason: String },
    /// A Kafka error code for the request as a whole.
    #[error("{api} failed with Kafka error {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Kafka { api: &'static str, code: i16, message: Option<String> },
    #[error("no broker of the source answered: {0}")]
    NoBroker(String),
}

impl ClientError {
    /// Whether the source refused the link's identity (as against being unreachable or slow):
    /// retrying will not help until an operator fixes the credentials.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Self::Authentication { .. } | Self::Tls { .. })
            || matches!(self, Self::Kafka { code, .. } if matches!(code, 29..=31 | 58))
    }
}
