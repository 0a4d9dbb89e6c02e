//! The Floe agent: a stateless Kafka endpoint. It validates and buffers produced batches, writes
//! one segment object per flush, commits it to the metadata service, and serves fetches from
//! the offset index through a chunk cache in front of the object store.

pub mod access;
pub mod agent;
pub mod block_peers;
pub mod cleaner;
pub mod compaction;
pub mod fetch;
pub mod gc;
pub mod job_runtime;
pub mod kafka;
pub mod limits;
pub mod links;
pub mod load;
pub mod log_limit;
pub mod membership;
pub mod metrics;
pub mod produce;
pub mod quotas;
pub mod record_batch;
pub mod share_sessions;
pub mod tables;
pub mod usage;

pub use agent::{Agent, AgentConfig, Fault, FlushConfig};
pub use compaction::CompactionConfig;
pub use gc::GcConfig;
pub use tables::TableJobConfig;
pub use usage::{UsageConfig, UsageMeter};
