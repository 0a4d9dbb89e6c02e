//! Floe's storage layer: object-store access by URL, the segment object format and the
//! chunk cache in front of it.
//!
//! Nothing here knows Kafka offsets: the storage layer speaks keys, byte ranges and checksums.
//! Offsets live only in the metadata service and are stamped onto batches by the fetch path.

pub mod cache;
pub mod error;
pub mod faults;
pub mod hedge;
pub mod keys;
pub mod latency;
pub mod limits;
pub mod metrics;
pub mod segment;
pub mod store;
pub mod tables;
pub mod timed;
pub mod usage;

pub use cache::{
    BLOCK_BYTES, BlockCache, BlockCacheConfig, ChunkView, JobBlocks, LastBlock, PeerBlock, PeerBlocks, PeerFetch,
    WrittenTier, block_len, owner_block,
};
pub use error::{PutSegmentError, ReadChunkError, ReadFooterError, StorageError};
pub use faults::{FaultPlan, FaultSource, FaultSwitch};
pub use keys::SegmentKey;
pub use latency::LatencyProfile;
pub use segment::{BlockChecksums, ChunkEntry, ChunkRef, SegmentFooter, SegmentWriter, TopicPartition};
pub use store::{ListedSegment, ObjectStoreConfig, SegmentStore, StoreClass};
pub use tables::{ListedTableObject, TableObjectKey};
pub use usage::UsagePut;
