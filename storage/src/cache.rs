//! The hot tier: object bytes in aligned blocks, in memory and (optionally) on a local disk,
//! in front of the object store (foyer's hybrid cache).
//!
//! - The agent that wrote an object caches its blocks, so tail consumers cause no GET.
//! - A miss reads the whole block with one ranged GET; concurrent misses on one block share it.
//!   A small last block of an object comes with the block before it.
//! - Reading a block prefetches the next one, so a sequential reader finds it cached.
//! - With peers ([`PeerBlocks`]), a miss first asks the block's owner among the agents of the
//!   zone, which reads it from the object store at most once for all of them.
//! - Every block is checked before it is cached or used. A block read from the object store is
//!   checked against its object's footer, whose block checksums (segment format 2) are kept per
//!   object in memory: read with the block when it ends the object, else with one small GET
//!   alongside it. Each cached block keeps the CRC-32C of all its bytes, on the disk tier too: a
//!   block the disk tier gives back is checked against it on first use, and if damaged dropped
//!   and read from the store. A peer names that CRC-32C with the block it answers; an answer
//!   that does not match it, or the footer when this agent knows it, is refused, its owner
//!   reported ([`PeerBlocks::damaged`]), and the block read from the store. Objects of format 1
//!   have no block checksums: their blocks are checked on the disk tier and from peers, and
//!   their batches by the reader, as before.
//! - A chunk is assembled from its blocks and checked against the CRC-32C recorded at write
//!   time, so a damaged cache entry is never served. Blocks this agent wrote itself never left
//!   its memory and are marked as such ([`ChunkView::written_here`]): a reader may skip
//!   checking them again.
//! - A background job (compaction) reads through [`JobBlocks`]: blocks the hot tier holds are
//!   used, blocks it reads are kept for the job's own next reads and never enter the hot tier.

use std::collections::VecDeque;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::{Bytes, BytesMut};
use foyer::{BlockEngineConfig, Code, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder, RecoverMode};

use crate::error::{ReadChunkError, ReadFooterError, StorageError};
use crate::segment::{BlockChecksums, ChunkRef, FooterAtEnd, footer_at_end};
use crate::{SegmentKey, SegmentStore, metrics};

/// Bytes per cached block: a miss costs one GET of this size (at most 256 GETs per GiB read).
pub const BLOCK_BYTES: u64 = 4 * 1024 * 1024;

/// An object's last block, when no larger than this, is read with the block before it: one GET
/// instead of two for the tail (and footer) of every object that is not a whole number of blocks.
const TAIL_WITH_PREVIOUS_BYTES_MAX: u64 = 1024 * 1024;

/// Memory for objects' block checksums: about a hundred bytes an object (its key, a checksum per
/// block), so some eighty thousand objects.
const BLOCK_SUMS_BYTES_MAX: usize = 8 * 1024 * 1024;

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
    /// Objects' block checksums from their footers, by object key (memory only, bounded by
    /// `BLOCK_SUMS_BYTES_MAX`).
    sums: foyer::Cache<String, ObjectSums>,
    /// Set once the agent knows its peers ([`BlockCache::set_peers`]); none: every miss GETs.
    peers: Arc<OnceLock<Arc<dyn PeerBlocks>>>,
}

/// An object's block checksums when its footer has them for blocks of [`BLOCK_BYTES`]; `None`
/// for an object of format 1 (or, were the size ever changed, of another block size).
type ObjectSums = Option<Arc<BlockChecksums>>;

/// The other agents of this zone, asked for a block before the object store: each block has one
/// owner among them, which reads it from the store at most once for all.
pub trait PeerBlocks: Send + Sync + std::fmt::Debug {
    /// Block `index` of the object `key` (`object_bytes` long) from its owner; `None` when this
    /// agent owns it, no owner is known, or the owner failed or was slow: the caller GETs it.
    fn fetch(&self, key: &SegmentKey, object_bytes: u64, index: u64) -> PeerFetch;

    /// The block [`Self::fetch`] answered failed its check (against the CRC-32C its owner named,
    /// or the object's footer): the caller reads it from the store, and the owner should not be
    /// asked again for a while.
    fn damaged(&self, key: &SegmentKey, object_bytes: u64, index: u64);
}

/// What [`PeerBlocks::fetch`] returns.
pub type PeerFetch = Pin<Box<dyn Future<Output = Option<PeerBlock>> + Send + 'static>>;

/// A block as its owner serves it to the zone's other agents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerBlock {
    pub bytes: Bytes,
    /// CRC-32C of all of `bytes`, which the owner checked them against: for an object of format
    /// 2, the footer's checksum of the block carried on over any footer bytes in it.
    pub crc32c: u32,
}

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
/// or built by compaction here) rather than read them from the object store, a peer or the disk
/// tier.
#[derive(Clone, Debug)]
struct CachedBlock {
    bytes: Bytes,
    written_here: bool,
    /// CRC-32C of all of `bytes`, which they matched when cached: the object's footer checksum
    /// for the block, carried on over any footer bytes in it (format 2), else computed from the
    /// bytes as read. Kept with them on the disk tier and named to peers.
    crc32c: u32,
    /// Whether `bytes` were checked against `crc32c` since the disk tier gave them back: true for
    /// every block but those, which their first use checks (clones share it).
    checked: Arc<AtomicBool>,
}

impl CachedBlock {
    fn new(bytes: Bytes, written_here: bool, crc32c: u32) -> Self {
        Self { bytes, written_here, crc32c, checked: Arc::new(AtomicBool::new(true)) }
    }
}

/// On disk a block is its CRC-32C (4 bytes, little-endian), then its bytes (as foyer stores
/// `Bytes`). It reads back as neither written here nor checked: the disk may have damaged it.
impl Code for CachedBlock {
    fn encode(&self, writer: &mut impl std::io::Write) -> foyer::Result<()> {
        writer.write_all(&self.crc32c.to_le_bytes()).map_err(foyer::Error::io_error)?;
        self.bytes.encode(writer)
    }

    fn decode(reader: &mut impl std::io::Read) -> foyer::Result<Self> {
        let mut crc32c = [0u8; 4];
        reader.read_exact(&mut crc32c).map_err(foyer::Error::io_error)?;
        let bytes = Bytes::decode(reader)?;
        Ok(Self {
            bytes,
            written_here: false,
            crc32c: u32::from_le_bytes(crc32c),
            checked: Arc::new(AtomicBool::new(false)),
        })
    }

    fn estimated_size(&self) -> usize {
        4 + self.bytes.estimated_size()
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
    /// A background job read it ([`JobBlocks`]); not cached.
    Job,
}

impl Cause {
    fn label(self) -> &'static str {
        match self {
            Self::Miss => "miss",
            Self::Prefetch => "prefetch",
            Self::Peer => "peer",
            Self::Job => "job",
        }
    }
}

/// The hot tier's format, named in every block's key: a block is the bytes of the
/// [`BLOCK_BYTES`]-aligned range `index` of an object, as they were read or written. The disk
/// tier outlives the process, so a change to what a key names needs a new version (the block
/// size is in the key too): a restarted agent then misses the old blocks, which age out, rather
/// than reading a block of another layout. Keys are `b{BLOCK_FORMAT}.{BLOCK_BYTES}/{object}#{index}`;
/// version 2 stores each block after its CRC-32C, version 1 (never read now) stored the bytes
/// alone, and keys without a version (before it) are never read either.
const BLOCK_FORMAT: u32 = 2;

fn block_key(key: &SegmentKey, block: u64) -> String {
    format!("b{BLOCK_FORMAT}.{BLOCK_BYTES}/{}#{block}", key.as_str())
}

/// Blocks `first..=last` that hold bytes `start..start + len`.
fn blocks_of(start: u64, len: u64) -> std::ops::RangeInclusive<u64> {
    start / BLOCK_BYTES..=(start + len.max(1) - 1) / BLOCK_BYTES
}

/// Where an object the agent wrote is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrittenTier {
    /// Memory first (then disk as it is evicted): a flush, which tailing readers read next.
    Memory,
    /// The disk tier only, none without one: a rewrite of data already read (compaction, the
    /// cleaner). In memory it sat beside the flush objects it replaced: at 2,000 partitions,
    /// where every chunk is small enough to compact, 247 MiB of a 558 MiB heap (issue 53).
    Disk,
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
        let sums: foyer::Cache<String, ObjectSums> = foyer::CacheBuilder::new(BLOCK_SUMS_BYTES_MAX)
            .with_name("floe-block-sums")
            .with_weighter(|key: &String, sums: &ObjectSums| {
                key.len() + 32 + sums.as_ref().map_or(0, |sums| 4 * sums.crc32c.len())
            })
            .build();
        Ok(Self { cache, sums, peers: Arc::default() })
    }

    /// Asks `peers` for missed blocks from now on (set once; later calls are ignored).
    pub fn set_peers(&self, peers: Arc<dyn PeerBlocks>) {
        let _ = self.peers.set(peers);
    }

    /// Block `index` of an object `object_bytes` long, for another agent that asked this one, its
    /// owner: from the cache, or read from the object store here (never asked of a peer, so two
    /// agents with different views of the zone never ask each other in a circle), checked as
    /// every block is, with the CRC-32C it was checked against.
    pub async fn block_for_peer(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
    ) -> Result<PeerBlock, ReadChunkError> {
        let block = self.block(store, key, object_bytes, index, Cause::Peer).await?;
        Ok(PeerBlock { bytes: block.bytes, crc32c: block.crc32c })
    }

    /// Writes memory-resident blocks to the disk tier (on shutdown).
    pub async fn close(&self) {
        if let Err(e) = self.cache.close().await {
            tracing::warn!(error = %e, "closing the block cache");
        }
    }

    /// Caches the data of an object this agent just wrote, in `tier`: `parts` are its bytes
    /// from offset 0, `blocks` the block checksums its writer computed
    /// ([`crate::segment::SegmentObject`]). A block that lies within one part shares its bytes
    /// (so the part's memory lives while any of its blocks is cached: at most an object's worth
    /// more than the cache counts); only blocks across parts are copied.
    pub fn insert_object(&self, key: &SegmentKey, parts: &[Bytes], blocks: &BlockChecksums, tier: WrittenTier) {
        let sums = usable_sums(Some(blocks.clone()));
        let location = match tier {
            WrittenTier::Memory => foyer::Location::Default,
            WrittenTier::Disk => foyer::Location::OnDisk,
        };
        let insert = |index: u64, bytes: Bytes| {
            let crc32c = written_block_crc32c(sums.as_deref(), index, &bytes);
            let properties = foyer::HybridCacheProperties::default().with_location(location);
            self.cache.insert_with_properties(block_key(key, index), CachedBlock::new(bytes, true, crc32c), properties);
        };
        let mut block = BytesMut::new();
        let mut index = 0u64;
        // Bytes not yet put in a block: the last block is reserved at its own size, not a whole
        // block's, which it would pin in the cache while the cache weighs only its length.
        let mut unplaced: usize = parts.iter().map(Bytes::len).sum();
        for part in parts {
            let mut rest = &part[..];
            while !rest.is_empty() {
                if block.is_empty() && rest.len() >= BLOCK_BYTES as usize {
                    let at = part.len() - rest.len();
                    insert(index, part.slice(at..at + BLOCK_BYTES as usize));
                    index += 1;
                    rest = &rest[BLOCK_BYTES as usize..];
                    unplaced -= BLOCK_BYTES as usize;
                    continue;
                }
                block.reserve((BLOCK_BYTES as usize - block.len()).min(unplaced));
                let take = rest.len().min(BLOCK_BYTES as usize - block.len());
                block.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                unplaced -= take;
                if block.len() == BLOCK_BYTES as usize {
                    insert(index, block.split().freeze());
                    index += 1;
                }
            }
        }
        // The last, partial block: a reader's GET of it would end at the object's end too.
        if !block.is_empty() {
            insert(index, block.freeze());
        }
        self.sums.insert(key.as_str().to_owned(), sums);
        self.count_memory();
    }

    fn count_memory(&self) {
        let bytes = i64::try_from(self.cache.memory().usage()).unwrap_or(i64::MAX);
        crate::metrics::BLOCK_CACHE_MEMORY_BYTES.set(bytes);
    }

    /// One block of an object `object_bytes` long: cached, or from its owner, or read with one
    /// GET; checked before it is cached or returned (see the module's doc).
    async fn block(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
        cause: Cause,
    ) -> Result<CachedBlock, ReadChunkError> {
        let (this, miss_store, path_key) = (self.clone(), store.clone(), key.clone());
        let peers = self.peers.get().filter(|_| !matches!(cause, Cause::Peer)).cloned();
        let entry = self
            .cache
            .get_or_fetch(&block_key(key, index), move || async move {
                if let Some(peers) = peers
                    && let Some(answer) = peers.fetch(&path_key, object_bytes, index).await
                {
                    if let Some(block) = this.peer_answer(&path_key, object_bytes, index, answer) {
                        return Ok(block);
                    }
                    metrics::BLOCK_CHECKSUM_MISMATCHES.with_label_values(&["peer"]).inc();
                    tracing::warn!(key = %path_key, index, "a peer's block failed its checksum; reading the store");
                    peers.damaged(&path_key, object_bytes, index);
                }
                this.read_from_store(&miss_store, &path_key, object_bytes, index, cause, None).await
            })
            .await
            .map_err(|e| fetch_failed(&e))?;
        let block = entry.value().clone();
        if self.sound(key, index, &block) {
            return Ok(block);
        }
        let block = self.read_from_store(store, key, object_bytes, index, cause, None).await?;
        self.cache.insert(block_key(key, index), block.clone());
        self.count_memory();
        Ok(block)
    }

    /// Whether a cached block may be used: checked when cached, or given back by the disk tier
    /// and checked now, on its first use. One that fails is dropped from the cache.
    fn sound(&self, key: &SegmentKey, index: u64, block: &CachedBlock) -> bool {
        if block.checked.load(Ordering::Relaxed) {
            return true;
        }
        if crc32c::crc32c(&block.bytes) == block.crc32c {
            block.checked.store(true, Ordering::Relaxed);
            return true;
        }
        metrics::BLOCK_CHECKSUM_MISMATCHES.with_label_values(&["disk"]).inc();
        tracing::warn!(key = %key, index, "a block from the disk tier failed its checksum; reading it from the store");
        self.cache.remove(&block_key(key, index));
        false
    }

    /// One block for a background job: from `job`'s own blocks, the hot tier's memory or disk
    /// (without moving it to memory), or one GET whose block `job` keeps and the hot tier never
    /// sees. Never asked of peers: the owner would cache it for the job.
    async fn job_block(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
        job: &JobBlocks,
    ) -> Result<CachedBlock, ReadChunkError> {
        let name = block_key(key, index);
        if let Some(block) = job.get(&name) {
            return Ok(block);
        }
        let cached = match self.cache.memory().get(&name) {
            Some(entry) => Some(entry.value().clone()),
            // A miss, a throttled or failing disk: the store has it.
            None => match self.cache.storage().load(&name).await {
                Ok(foyer::Load::Entry { value, .. }) => Some(value),
                Ok(foyer::Load::Piece { piece, .. }) => Some(piece.value().clone()),
                _ => None,
            },
        };
        if let Some(block) = cached
            && self.sound(key, index, &block)
        {
            return Ok(block);
        }
        let block = self.read_from_store(store, key, object_bytes, index, Cause::Job, Some(job)).await?;
        job.keep(name, block.clone());
        Ok(block)
    }

    /// Block `index` read with one ranged GET (with the object's small last block when that
    /// follows, which is cached too, or kept by `job`) and checked against the object's footer.
    async fn read_from_store(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        index: u64,
        cause: Cause,
        job: Option<&JobBlocks>,
    ) -> Result<CachedBlock, ReadChunkError> {
        // Misses are inserted by the cache itself: the gauge lags them by this one block.
        self.count_memory();
        let start = index * BLOCK_BYTES;
        let end = (start + BLOCK_BYTES).min(object_bytes);
        let tail = object_bytes - end;
        let with_tail = tail > 0 && tail <= TAIL_WITH_PREVIOUS_BYTES_MAX;
        let read_end = if with_tail { object_bytes } else { end };
        metrics::BLOCK_GETS.with_label_values(&[cause.label()]).inc();
        let get = async {
            let bytes = store.get_range(key, start..read_end).await?;
            if bytes.len() as u64 != read_end - start {
                return Err(ReadChunkError::Truncated {
                    key: key.to_string(),
                    byte_start: start,
                    byte_len: u32::try_from(read_end - start).unwrap_or(u32::MAX),
                    got: bytes.len(),
                });
            }
            Ok::<_, ReadChunkError>(bytes)
        };
        let (mut bytes, sums) = if read_end == object_bytes {
            // The object's end: its trailer and, as a rule, its whole footer come with the block.
            let bytes = get.await?;
            let sums = self.sums_from_end(store, key, object_bytes, &bytes).await?;
            (bytes, sums)
        } else {
            tokio::try_join!(get, self.sums(store, key, object_bytes))?
        };
        let tail = (with_tail && bytes.len() as u64 > BLOCK_BYTES).then(|| bytes.split_off(BLOCK_BYTES as usize));
        let block = checked_block(key, index, bytes, sums.as_deref()).inspect_err(|_| {
            metrics::BLOCK_CHECKSUM_MISMATCHES.with_label_values(&["store"]).inc();
            tracing::warn!(key = %key, index, "a block read from the store does not match its object's footer");
        })?;
        if let Some(tail) = tail {
            // A tail that fails is not cached: a read of it GETs it again, and reports it then.
            match checked_block(key, index + 1, tail, sums.as_deref()) {
                Ok(tail) => match job {
                    Some(job) => job.keep(block_key(key, index + 1), tail),
                    None => {
                        self.cache.insert(block_key(key, index + 1), tail);
                    }
                },
                Err(_) => metrics::BLOCK_CHECKSUM_MISMATCHES.with_label_values(&["store"]).inc(),
            }
        }
        Ok(block)
    }

    /// The block checksums of the object `key` (`object_bytes` long): remembered, or read from
    /// its footer with one ranged GET of its end (shared by concurrent readers).
    async fn sums(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
    ) -> Result<ObjectSums, ReadChunkError> {
        let (store, path_key) = (store.clone(), key.clone());
        let entry = self
            .sums
            .get_or_fetch(key.as_str(), move || async move {
                metrics::FOOTER_GETS.inc();
                match store.read_footer_at(&path_key, object_bytes).await {
                    Ok(footer) => Ok(usable_sums(footer.blocks)),
                    Err(ReadFooterError::Io(e)) => Err(ReadChunkError::Io(e)),
                    Err(ReadFooterError::Corrupt { key, reason }) => Err(ReadChunkError::CorruptFooter { key, reason }),
                }
            })
            .await
            .map_err(|e| fetch_failed(&e))?;
        Ok(entry.value().clone())
    }

    /// The block checksums of the object `key`, from `end`, its last bytes, when they hold its
    /// footer (else as [`Self::sums`]).
    async fn sums_from_end(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        object_bytes: u64,
        end: &[u8],
    ) -> Result<ObjectSums, ReadChunkError> {
        if let Some(entry) = self.sums.get(key.as_str()) {
            return Ok(entry.value().clone());
        }
        match footer_at_end(end, object_bytes) {
            Ok(FooterAtEnd::Within(footer)) => {
                let sums = usable_sums(footer.blocks);
                self.sums.insert(key.as_str().to_owned(), sums.clone());
                Ok(sums)
            }
            Ok(FooterAtEnd::Before { .. } | FooterAtEnd::NoTrailer) => self.sums(store, key, object_bytes).await,
            Err(reason) => Err(ReadChunkError::CorruptFooter { key: key.to_string(), reason }),
        }
    }

    /// The block an owner answered, if it holds: the block's length, the CRC-32C the owner named
    /// and, when this agent knows them, the object's footer checksums. An owner names the
    /// checksum it checked the block against, the footer's for format 2, so an asker need not
    /// read every object's footer itself (which would cost a GET per object and agent).
    fn peer_answer(&self, key: &SegmentKey, object_bytes: u64, index: u64, answer: PeerBlock) -> Option<CachedBlock> {
        if answer.bytes.len() as u64 != block_len(object_bytes, index) {
            return None;
        }
        let sums = self.sums.get(key.as_str()).and_then(|entry| entry.value().clone());
        let block = checked_block(key, index, answer.bytes, sums.as_deref()).ok()?;
        (block.crc32c == answer.crc32c).then_some(block)
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
        ChunkView { cache: self.clone(), store: store.clone(), chunk, object_bytes, blocks: Vec::new(), job: None }
    }

    /// [`Self::view`] starting with the block `held` kept from the reader's last chunk, if that
    /// was of the same object; [`ChunkView::hold`] gives one back.
    pub fn view_holding(
        &self,
        store: &SegmentStore,
        chunk: ChunkRef,
        object_bytes: u64,
        held: &mut LastBlock,
    ) -> ChunkView {
        let mut view = self.view(store, chunk, object_bytes);
        if held.key.as_ref() == Some(&view.chunk.key) {
            view.blocks.extend(held.block.take());
        }
        view
    }

    /// A whole chunk, checked against the CRC-32C recorded at write time; blocks that fail the
    /// check are dropped so the next read fetches them again.
    pub async fn read_chunk(
        &self,
        store: &SegmentStore,
        chunk: &ChunkRef,
        object_bytes: u64,
    ) -> Result<Bytes, ReadChunkError> {
        self.read_chunk_of(self.view(store, chunk.clone(), object_bytes), store).await
    }

    /// [`Self::read_chunk`] for a background job: blocks read from the store go to `job`, not
    /// to the hot tier, and start no prefetch.
    pub async fn read_chunk_for_job(
        &self,
        store: &SegmentStore,
        chunk: &ChunkRef,
        object_bytes: u64,
        job: &JobBlocks,
    ) -> Result<Bytes, ReadChunkError> {
        let mut view = self.view(store, chunk.clone(), object_bytes);
        view.job = Some(job.clone());
        self.read_chunk_of(view, store).await
    }

    /// Bytes `range` of an object for a background job, through the blocks as
    /// [`Self::read_chunk_for_job`] reads them, but unchecked: the range holds several chunks
    /// (a compaction's adjacent chunks of one object, read in one go rather than one block
    /// lookup each), which the caller checks against their own CRC-32Cs.
    pub async fn read_range_for_job(
        &self,
        store: &SegmentStore,
        key: &SegmentKey,
        range: std::ops::Range<u64>,
        object_bytes: u64,
        job: &JobBlocks,
    ) -> Result<Bytes, ReadChunkError> {
        let byte_len = u32::try_from(range.end.saturating_sub(range.start)).unwrap_or(u32::MAX);
        let chunk = ChunkRef { key: key.clone(), byte_start: range.start, byte_len, crc32c: 0 };
        let mut view = self.view(store, chunk, object_bytes);
        view.job = Some(job.clone());
        view.slice(0..u64::from(byte_len)).await
    }

    async fn read_chunk_of(&self, mut view: ChunkView, store: &SegmentStore) -> Result<Bytes, ReadChunkError> {
        let len = view.len();
        let bytes = match view.slice(0..len).await {
            // A block of the chunk does not match its object's footer, the footer is damaged or
            // the object is short: the chunk itself may be whole, and its own checksum decides,
            // as for an object of format 1.
            Err(
                ReadChunkError::BlockChecksumMismatch { .. }
                | ReadChunkError::CorruptFooter { .. }
                | ReadChunkError::Truncated { .. },
            ) => {
                let chunk = &view.chunk;
                store.get_range(&chunk.key, chunk.byte_start..chunk.byte_start + len).await?
            }
            read => read?,
        };
        if crc32c::crc32c(&bytes) != view.chunk.crc32c {
            return Err(view.damaged());
        }
        Ok(bytes)
    }
}

/// Blocks a background job read from the object store, kept for its own next reads instead of
/// the hot tier: a compaction reads each block of an earlier compaction's object once or a few
/// times in a row, and in the memory tier those 4 MiB blocks (7 MiB/s at 2,000 partitions)
/// pushed out the flush blocks tailing readers need and, evicted, left freed memory that made
/// the agent's RSS spike (issue 53). Holds at most [`JOB_BLOCKS_BYTES_MAX`], the oldest going
/// first; cheap to clone (clones share the blocks), freed with the last clone.
#[derive(Clone, Debug, Default)]
pub struct JobBlocks(Arc<Mutex<HeldBlocks>>);

#[derive(Debug, Default)]
struct HeldBlocks {
    blocks: VecDeque<(String, CachedBlock)>,
    bytes: usize,
}

/// Bytes of blocks a job keeps: a compaction reads its inputs in the order they lie in their
/// objects, so its next read falls in the block it read last or the next one.
pub const JOB_BLOCKS_BYTES_MAX: usize = 8 * BLOCK_BYTES as usize;

impl JobBlocks {
    /// The blocks, taken back from poison: every critical section below leaves them consistent.
    fn held(&self) -> std::sync::MutexGuard<'_, HeldBlocks> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn get(&self, name: &str) -> Option<CachedBlock> {
        let held = self.held();
        held.blocks.iter().find(|(n, _)| n == name).map(|(_, block)| block.clone())
    }

    fn keep(&self, name: String, block: CachedBlock) {
        let mut held = self.held();
        held.bytes += block.bytes.len();
        held.blocks.push_back((name, block));
        while held.bytes > JOB_BLOCKS_BYTES_MAX
            && let Some((_, oldest)) = held.blocks.pop_front()
        {
            held.bytes -= oldest.bytes.len();
        }
    }

    fn forget(&self, name: &str) {
        let mut held = self.held();
        if let Some(at) = held.blocks.iter().position(|(n, _)| n == name)
            && let Some((_, block)) = held.blocks.remove(at)
        {
            held.bytes -= block.bytes.len();
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.held().bytes
    }
}

/// `blocks` when they are of the cache's blocks.
fn usable_sums(blocks: Option<BlockChecksums>) -> ObjectSums {
    blocks.filter(|blocks| u64::from(blocks.block_bytes) == BLOCK_BYTES).map(Arc::new)
}

/// A block read from the object store or answered by a peer, checked against its object's footer
/// when that has block checksums, with the CRC-32C of all its bytes to keep with it.
fn checked_block(
    key: &SegmentKey,
    index: u64,
    bytes: Bytes,
    sums: Option<&BlockChecksums>,
) -> Result<CachedBlock, ReadChunkError> {
    let crc32c = match sums.and_then(|sums| sums.block(index)) {
        Some((expected, covered)) => {
            let covered = usize::try_from(covered).unwrap_or(usize::MAX);
            if bytes.get(..covered).map(crc32c::crc32c) != Some(expected) {
                return Err(ReadChunkError::BlockChecksumMismatch { key: key.to_string(), index });
            }
            crc32c::crc32c_append(expected, &bytes[covered..])
        }
        None => crc32c::crc32c(&bytes),
    };
    Ok(CachedBlock::new(bytes, false, crc32c))
}

/// The CRC-32C of all of a block this agent wrote, from its writer's checksum of the block's
/// data (only the footer bytes in it, if any, are read).
fn written_block_crc32c(sums: Option<&BlockChecksums>, index: u64, bytes: &[u8]) -> u32 {
    match sums.and_then(|sums| sums.block(index)) {
        Some((crc32c, covered)) if covered <= bytes.len() as u64 => {
            crc32c::crc32c_append(crc32c, &bytes[covered as usize..])
        }
        _ => crc32c::crc32c(bytes),
    }
}

/// A read that failed inside foyer, which keeps what the fetch returned as the error's source.
fn fetch_failed(e: &foyer::Error) -> ReadChunkError {
    match e.downcast_ref::<ReadChunkError>() {
        Some(ReadChunkError::BlockChecksumMismatch { key, index }) => {
            ReadChunkError::BlockChecksumMismatch { key: key.clone(), index: *index }
        }
        Some(ReadChunkError::CorruptFooter { key, reason }) => {
            ReadChunkError::CorruptFooter { key: key.clone(), reason: reason.clone() }
        }
        Some(ReadChunkError::Truncated { key, byte_start, byte_len, got }) => {
            ReadChunkError::Truncated { key: key.clone(), byte_start: *byte_start, byte_len: *byte_len, got: *got }
        }
        _ => ReadChunkError::Io(StorageError::Io(std::io::Error::other(e.to_string()))),
    }
}

/// The block a reader keeps from one chunk to the next: a Fetch of many partitions reads a chunk
/// of each from the same flush object, and looking its block up for each (a key built, a cache
/// lookup) was 5 % of the agent's CPU at 10,000 partitions. One block at most, so a reader
/// pins no more than one beyond what it reads.
#[derive(Debug, Default)]
pub struct LastBlock {
    key: Option<SegmentKey>,
    block: Option<(u64, CachedBlock)>,
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
    /// The job reading, whose blocks keep out of the hot tier; none for a reader's view.
    job: Option<JobBlocks>,
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
        let (store, key, object_bytes) = (&self.store, &self.chunk.key, self.object_bytes);
        let block = match &self.job {
            Some(job) => self.cache.job_block(store, key, object_bytes, index, job).await?,
            None => {
                let block = self.cache.block(store, key, object_bytes, index, Cause::Miss).await?;
                self.cache.prefetch(store, key, object_bytes, (index + 1) * BLOCK_BYTES);
                block
            }
        };
        self.blocks.push((index, block.clone()));
        Ok(block)
    }

    /// Keeps the block this view loaded last in `held`, for the reader's next chunk.
    pub fn hold(mut self, held: &mut LastBlock) {
        held.block = self.blocks.pop();
        held.key = Some(self.chunk.key);
    }

    /// Bytes read through this view failed their checksum: drops the blocks it loaded, so the
    /// next read fetches them again, and returns the error to report.
    pub fn damaged(&self) -> ReadChunkError {
        for (index, _) in &self.blocks {
            let name = block_key(&self.chunk.key, *index);
            if let Some(job) = &self.job {
                job.forget(&name);
            }
            self.cache.cache.remove(&name);
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
