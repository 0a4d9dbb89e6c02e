//! The produce pipeline: validate batches ([`validate`]), buffer them across all connections
//! and partitions ([`FlushBuffer`]), write one segment object per flush and commit it to the
//! metadata service in flush order, holding a producer's chunks back behind its failed one
//! (`holds`), then answer each producer with its offsets.

mod buffer;
mod holds;
mod policies;
pub mod schemas;
pub mod validate;

pub use buffer::{AppendError, AppendResult, FlushBuffer, Pipeline, Ticket};
pub use policies::TopicPolicies;
pub use validate::{PartitionBatches, ProduceError, RecordError, RecordRefusal, TopicPolicy, ValidatedBatch};

use floe_metadata::ChunkProducer;
use floe_storage::TopicPartition;

/// One partition's accepted batches from one produce request, appended together so they land
/// in one flush, contiguously and in order.
#[derive(Debug)]
pub struct PartitionAppend {
    pub topic_partition: TopicPartition,
    pub batches: Vec<ValidatedBatch>,
    /// Set for idempotent and transactional producers: their batches get a chunk of their own,
    /// which metadata sequences (or answers as a duplicate, or refuses) as a whole.
    pub producer: Option<ChunkProducer>,
}
