//! The fetch path: find a partition's chunks in the offset index, read them through the chunk
//! cache, and return whole batches stamped with their offsets.

mod read;
mod records;
pub mod sessions;
pub mod wakeups;

pub use read::{
    FetchError, PartitionRead, ReadLimits, TimestampHit, read_at_end, read_partition, records_at_timestamp,
};
pub(crate) use read::{ObjectAt, batches_with_offsets, entry_bytes};
pub use records::{FetchedRecord, consumer_batches, fetched_records, record_runs};
