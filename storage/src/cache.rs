//! The hot tier: object bytes in aligned blocks, in memory and (optionally) on a local disk,
//! in front of the object store (foyer's hybrid cache).
//!
//! - The agent that wrote an object caches its blocks, so tail consumers cause no GET.
//! - A miss reads the whole block with one ranged GET; concurrent misses on one block share it.
//!   A small last block of an object comes with the block before it.
//! - Reading a block prefetches the next one, so a sequential reader finds it cached.
//! - With peers ([`PeerBlocks`]), a miss first asks the block's owner among the agents of the
//!   zone, which reads it from the object store at most once for all of them.
//! - A chunk is assembled from its blocks and checked against the CRC-32C recorded at write
//!   time, so a damaged cache entry is never served. Blocks this agent wrote itself never left
//!   its memory and are marked as such ([`ChunkView::written_here`]): a reader may skip
//!   checking them again.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use foyer::{BlockEngineConfig, Code, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder, RecoverMode};

use crate::error::{ReadChunkError, StorageError};
use crate::segment::ChunkRef;
use crate::{SegmentKey, SegmentStore, metrics};

/// Bytes per cached block: a miss costs one GET of this size (at most 256 GETs per GiB read).
pub const BLOCK_BYTES: u64 = 4 * 1024 * 1024;

/// An object's last block, when no larger than this, is read with the block before it: one GET
/// instead of two for the tail (and footer) of every object that is not a whole number of blocks.
const TAIL_WITH_PREVIOUS_BYTES_MAX: u64 = 1024 * 1024;

/// Where and how much to cache.
#[derive(Clone, Debug, Default)]
pub struct BlockCacheConfig {
    pub memory_bytes: u64,
    /// A local directory for the disk tier and its size; `None`: memory only.
    pub disk: Option<(PathBuf, u64)>,
}

/// Cached blocks keyed by `"{object key}#{block index}"`; cheap to clone.
#[derive(Clone)]
pub struct BlockCache {
    cache: HybridCache<String, CachedBlock>,
    /// Set once the agent knows its peers ([`BlockCache::set_peers`]); none: every miss GETs.
    peers: Arc<OnceLock<Arc<dyn PeerBlocks>>>,
}

/// The other agents of this zone, asked for a block before the object store: each block has one
/// owner among them, which reads it from the store at most once for all.
pub trait PeerBlocks: Send + Sync + std::fmt::Debug {
    /// Block `index` of the object `key` (`object_bytes` long) from its owner; `None` when this
    /// agent owns it, no owner is known, or the owner failed or was slow: the caller GETs it.
    fn fetch(&self, key: &SegmentKey, object_bytes: u64, index: u64) -> PeerFetch;
}

/// What [`PeerBlocks::fetch`] returns.
pub type PeerFetch = Pin<Box<dyn Future<Output = Option<Bytes>> + Send + 'static>>;

/// The block whose owner also owns block `index`: an object's small last block goes with the
/// block before it, which one GET reads together with it.
pub fn owner_block(object_bytes: u64, index: u64) -> u64 {
    let start = index * BLOCK_BYTES;
    let small_tail = index > 0 && start < object_bytes && object_bytes - start <= TAIL_WITH_PREVIOUS_BYTES_MAX;
    let last = object_bytes.div_ceil(BLOCK_BYTES).saturating_sub(1);
    if small_tail && index == last { index - 1 } else { index }
}

/// Bytes of block `index` of an object `object_bytes` long (0 past its end).
pub fn block_len(object_bytes: u64, index: u64) -> u64 {
    let start = index.saturating_mul(BLOCK_BYTES);
    object_bytes.min(start.saturating_add(BLOCK_BYTES)).saturating_sub(start)
}

/// A block's bytes, and whether this agent wrote them (every batch in them was checked at produce
/// or built by compaction here) rather than read them from the object store or the disk tier.
#[derive(Clone, Debug)]
struct CachedBlock {
    bytes: Bytes,
    written_here: bool,
}

/// On disk a block is its bytes only (as foyer stores `Bytes`), so it reads back as not written
/// here: the disk may have damaged it.
impl Code for CachedBlock {
    fn encode(&self, writer: &mut impl std::io::Write) -> foyer::Result<()> {
        self.bytes.encode(writer)
    }

    fn decode(reader: &mut impl std::io::Read) -> foyer::Result<Self> {
        Ok(Self { bytes: Bytes::decode(reader)?, written_here: false })
    }

    fn estimated_size(&self) -> usize {
        self.bytes.estimated_size()
    }
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("hybrid", &self.cache.is_hybrid())
            .field("peers", &self.peers.get().is_some())
            .finish()
    }
}

/// Why a block was read from the object store.
#[derive(Clone, Copy, Debug)]
enum Cause {
    /// A fetch needed it.
    Miss,
    /// A read of the block before it.
    Prefetch,
    /// Another agent asked for it: this one owns it. Never asked of peers again.
    Peer,
}

impl Cause {
    fn label(self) -> &'static str {
        match self {
            Self::Miss => "miss",
            Self::Prefetch => "prefetch",
            Self::Peer => "peer",
        }
    }
}

/// The hot tier's format, named in every block's key: a block is the bytes of the
/// [`BLOCK_BYTES`]-aligned range `index` of an object, as they were read or written. The disk
/// tier outlives the process, so a change to what a key names needs a new version (the block
/// size is in the key too): a restarted agent then misses the old blocks, which age out, rather
/// than reading a block of another layout. Version 1 keys are `b1.{BLOCK_BYTES}/{object}#{index}`;
/// keys without a version (before it) are never read.
const BLOCK_FORMAT: u32 = 1;

fn block_key(key: &SegmentKey, block: u64) -> String {
    format!("b{BLOCK_FORMAT}.{BLOCK_BYTES}/{}#{block}", key.as_str())
}

/// Blocks `first..=last` that hold bytes `start..start + len`.
fn blocks_of(start: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    start / BLOCK_BYTES..=(start + len.max(1) - 1) / BLOCK_BYTES
}

impl BlockCache {
    /// Opens the cache; with a disk tier, blocks cached before a restart are found again.
    pub async fn open(config: &BlockCacheConfig) -> Result<Self, StorageError> {
        let memory = usize::try_from(config.memory_bytes).unwrap_or(usize::MAX).max(1);
        let builder = HybridCacheBuilder::new()
            .with_name("floe-blocks")
            // Entries in memory at shutdown go to disk, so a restarted agent keeps them.
            .with_flush_on_close(true)
            .memory(memory)
            .with_weighter(|key: &String, value: &CachedBlock| key.len() + value.bytes.len())
            .storage();
        let builder = match &config.disk {
            Some((dir, bytes)) => {
                std::fs::create_dir_all(dir)?;
                let device = FsDeviceBuilder::new(dir)
                    .with_capacity(usize::try_from(*bytes).unwrap_or(usize::MAX))
                    .build()
                    .map_err(|e| StorageError::Io(std::io::Error::other(e)))?;
                // foyer blocks must hold a whole entry; ours are BLOCK_BYTES plus the key.
                let engine = BlockEngineConfig::new(device).with_block_size(4 * BLOCK_BYTES as usize);
                builder.with_engine_config(engine).with_recover_mode(RecoverMode::Quiet)
            }
            None => builder,
        };
        let cache = builder.build().await.map_err(|e| StorageError::Io(std::io::Error::other(e)))?;
        Ok(Self { cache, peers: Arc::default() })
    }

    /// Asks `peers` for missed blocks from now on (set once; later calls are ignored).
    pub fn set_peers(&self, peers: Arc<dyn PeerBlocks>) {
        let _ = self.peers.set(peers);
    }

    /// Block `index` of an object `object_bytes` long, for another agent that asked this one, its
    /// owner: from the cache, or read from the object store here (never asked of a peer, so two
    /// agents with different views of the zone never ask each other in a circle).
    pub async fn block_for_peer(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
    ) -> Result<Bytes, StorageError> {
        Ok(self.block(store, key, object_bytes, index, Cause::Peer).await?.bytes)
    }

    /// Writes memory-resident blocks to the disk tier (on shutdown).
    pub async fn close(&self) {
        if let Err(e) = self.cache.close().await {
            tracing::warn!(error = %e, "closing the block cache");
        }
    }

    /// Caches the data of an object this agent just wrote: `parts` are its bytes from offset 0.
    /// A block that lies within one part shares its bytes (so the part's memory lives while any
    /// of its blocks is cached: at most an object's worth more than the cache counts); only
    /// blocks across parts are copied.
    pub fn insert_object(&self, key: &SegmentKey, parts: &[Bytes]) {
        let mut block = BytesMut::new();
        let mut index = 0u64;
        for part in parts {
            let mut rest = &part[..];
            while !rest.is_empty() {
                if block.is_empty() && rest.len() >= BLOCK_BYTES as usize {
                    let at = part.len() - rest.len();
                    let bytes = part.slice(at..at + BLOCK_BYTES as usize);
                    self.cache.insert(block_key(key, index), CachedBlock { bytes, written_here: true });
                    index += 1;
                    rest = &rest[BLOCK_BYTES as usize..];
                    continue;
                }
                block.reserve(BLOCK_BYTES as usize - block.len());
                let take = rest.len().min(BLOCK_BYTES as usize - block.len());
                block.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if block.len() == BLOCK_BYTES as usize {
                    let bytes = block.split().freeze();
                    self.cache.insert(block_key(key, index), CachedBlock { bytes, written_here: true });
                    index += 1;
                }
            }
        }
        // The last, partial block: a reader's GET of it would end at the object's end too.
        if !block.is_empty() {
            self.cache.insert(block_key(key, index), CachedBlock { bytes: block.freeze(), written_here: true });
        }
    }

    /// One block of an object `object_bytes` long, cached or read with one GET.
    async fn block(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
        cause: Cause,
    ) -> Result<CachedBlock, StorageError> {
        let start = index * BLOCK_BYTES;
        let end = (start + BLOCK_BYTES).min(object_bytes);
        let tail = object_bytes - end;
        let with_tail = tail > 0 && tail <= TAIL_WITH_PREVIOUS_BYTES_MAX;
        let (store, path_key, cache) = (store.clone(), key.clone(), self.cache.clone());
        let peers = self.peers.get().filter(|_| !matches!(cause, Cause::Peer)).cloned();
        let entry = self
            .cache
            .get_or_fetch(&block_key(key, index), move || async move {
                if let Some(peers) = peers
                    && let Some(bytes) = peers.fetch(&path_key, object_bytes, index).await
                    && bytes.len() as u64 == end - start
                {
                    return Ok(CachedBlock { bytes, written_here: false });
                }
                metrics::BLOCK_GETS.with_label_values(&[cause.label()]).inc();
                let mut bytes = store.get_range(&path_key, start..if with_tail { object_bytes } else { end }).await?;
                if with_tail && bytes.len() as u64 > BLOCK_BYTES {
                    let tail = CachedBlock { bytes: bytes.split_off(BLOCK_BYTES as usize), written_here: false };
                    cache.insert(block_key(&path_key, index + 1), tail);
                }
                Ok::<_, StorageError>(CachedBlock { bytes, written_here: false })
            })
            .await
            .map_err(|e| StorageError::Io(std::io::Error::other(e.to_string())))?;
        Ok(entry.value().clone())
    }

    /// Starts loading the block holding byte `at` of an object `object_bytes` long unless it is
    /// cached: a reader that will need blocks of several objects has them loaded at once rather
    /// than one GET after another.
    pub fn prefetch(&self, store: &SegmentStore, key: &SegmentKey, object_bytes: u64, at: u64) {
        let index = at / BLOCK_BYTES;
        if at >= object_bytes || self.cache.contains(&block_key(key, index)) {
            return;
        }
        let (cache, store, key) = (self.clone(), store.clone(), key.clone());
        tokio::spawn(async move {
            let _ = cache.block(&store, &key, object_bytes, index, Cause::Prefetch).await;
        });
    }

    /// A view of one chunk that loads its blocks as they are needed.
    pub fn view(&self, store: &SegmentStore, chunk: ChunkRef, object_bytes: u64) -> ChunkView {
        ChunkView { cache: self.clone(), store: store.clone(), chunk, object_bytes, blocks: Vec::new() }
    }

    /// A whole chunk, checked against the CRC-32C recorded at write time; blocks that fail the
    /// check are dropped so the next read fetches them again.
    pub async fn read_chunk(
        &self,
        store: &SegmentStore,
        chunk: &ChunkRef,
        object_bytes: u64,
    ) -> Result<Bytes, ReadChunkError> {
        let mut view = self.view(store, chunk.clone(), object_bytes);
        let bytes = view.slice(0..u64::from(chunk.byte_len)).await?;
        if crc32c::crc32c(&bytes) != chunk.crc32c {
            return Err(view.damaged());
        }
        Ok(bytes)
    }
}

/// Random access to one chunk through the cache: each block is loaded on first use (so a read
/// touches only the blocks up to what it returns), a slice within one block is not copied, and
/// loading a block starts a prefetch of the next one for sequential readers.
#[derive(Debug)]
pub struct ChunkView {
    cache: BlockCache,
    store: SegmentStore,
    chunk: ChunkRef,
    object_bytes: u64,
    /// Blocks loaded so far, by index; a chunk spans few blocks.
    blocks: Vec<(u64, CachedBlock)>,
}

impl ChunkView {
    pub fn len(&self) -> u64 {
        u64::from(self.chunk.byte_len)
    }

    pub fn is_empty(&self) -> bool {
        self.chunk.byte_len == 0
    }

    fn truncated(&self, got: usize) -> ReadChunkError {
        ReadChunkError::Truncated {
            key: self.chunk.key.to_string(),
            byte_start: self.chunk.byte_start,
            byte_len: self.chunk.byte_len,
            got,
        }
    }

    /// Bytes `range` of the chunk (offsets from the chunk's start).
    pub async fn slice(&mut self, range: std::ops::Range<u64>) -> Result<Bytes, ReadChunkError> {
        if range.start > range.end || range.end > self.len() {
            return Err(self.truncated(0));
        }
        let start = self.chunk.byte_start + range.start;
        let end = self.chunk.byte_start + range.end;
        let blocks = blocks_of(start, end - start);
        let mut parts = Vec::new();
        for index in blocks {
            let block = self.block(index).await?.bytes;
            let block_start = index * BLOCK_BYTES;
            let from = start.max(block_start) - block_start;
            let to = end.min(block_start + BLOCK_BYTES) - block_start;
            if to > block.len() as u64 {
                return Err(self.truncated(parts.iter().map(Bytes::len).sum()));
            }
            parts.push(block.slice(from as usize..to as usize));
        }
        match parts.len() {
            1 => Ok(parts.swap_remove(0)),
            _ => {
                let mut out = BytesMut::with_capacity((end - start) as usize);
                for part in parts {
                    out.extend_from_slice(&part);
                }
                Ok(out.freeze())
            }
        }
    }

    /// Whether every block holding bytes `range` of the chunk (loaded by [`Self::slice`]) was
    /// written by this agent.
    pub fn written_here(&self, range: std::ops::Range<u64>) -> bool {
        let start = self.chunk.byte_start + range.start;
        blocks_of(start, range.end.saturating_sub(range.start))
            .all(|index| self.blocks.iter().any(|(i, block)| *i == index && block.written_here))
    }

    async fn block(&mut self, index: u64) -> Result<CachedBlock, ReadChunkError> {
        if let Some((_, block)) = self.blocks.iter().find(|(i, _)| *i == index) {
            return Ok(block.clone());
        }
        metrics::BLOCK_READS.inc();
        let block = self.cache.block(&self.store, &self.chunk.key, self.object_bytes, index, Cause::Miss).await?;
        self.cache.prefetch(&self.store, &self.chunk.key, self.object_bytes, (index + 1) * BLOCK_BYTES);
        self.blocks.push((index, block.clone()));
        Ok(block)
    }

    /// Bytes read through this view failed their checksum: drops the blocks it loaded, so the
    /// next read fetches them again, and returns the error to report.
    pub fn damaged(&self) -> ReadChunkError {
        for (index, _) in &self.blocks {
            self.cache.cache.remove(&block_key(&self.chunk.key, *index));
        }
        ReadChunkError::ChecksumMismatch {
            key: self.chunk.key.to_string(),
            byte_start: self.chunk.byte_start,
            byte_len: self.chunk.byte_len,
        }
    }
}

#[cfg(test)]
mod tests;
