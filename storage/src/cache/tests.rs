//! Block cache: chunks across block boundaries, reads without the store, damage detection (on the
//! disk tier, from peers, from the store).

use bytes::Bytes;

use super::*;
use crate::ObjectStoreConfig;
use crate::segment::{ChunkStats, SegmentWriter, TopicPartition};

/// An empty in-memory object store of its own.
fn memory_store() -> SegmentStore {
    let config = ObjectStoreConfig { url: "memory://".into(), ..Default::default() };
    SegmentStore::open(&config).expect("store")
}

async fn memory_cache(bytes: u64) -> BlockCache {
    BlockCache::open(&BlockCacheConfig { memory_bytes: bytes, disk: None }).await.expect("cache")
}

/// An object of three chunks whose middle one spans a block boundary.
fn object() -> (crate::segment::SegmentObject, Vec<Bytes>) {
    let sizes = [BLOCK_BYTES as usize - 10, 100, 5000];
    let stats = ChunkStats { batch_count: 1, record_count: 1, timestamp_min: 0, timestamp_max: 0 };
    let mut writer = SegmentWriter::new();
    let mut datas = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let data = Bytes::from((0..*size).map(|b| (b * 7 + i) as u8).collect::<Vec<u8>>());
        let tp = TopicPartition { topic_id: uuid::Uuid::nil(), partition: i as i32 };
        writer.push_chunk(tp, [data.clone()], stats);
        datas.push(data);
    }
    (writer.finish(), datas)
}

fn chunk_ref(key: &SegmentKey, e: &crate::ChunkEntry) -> ChunkRef {
    ChunkRef { key: key.clone(), byte_start: e.byte_start, byte_len: e.byte_len, crc32c: e.crc32c }
}

#[tokio::test]
async fn chunks_spanning_blocks_read_back_from_the_store_and_from_the_writers_copy() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes, blocks) = (object.chunks.clone(), object.object_bytes, object.blocks.clone());
    let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");

    let cold = memory_cache(64 << 20).await;
    for (entry, data) in chunks.iter().zip(&datas) {
        assert_eq!(&cold.read_chunk(&store, &chunk_ref(&key, entry), object_bytes).await.expect("read"), data);
    }

    // The writer's copy: readable with the object gone from the store.
    let warm = memory_cache(64 << 20).await;
    warm.insert_object(&key, &parts, &blocks, WrittenTier::Memory);
    let other = memory_store();
    for (entry, data) in chunks.iter().zip(&datas) {
        assert_eq!(&warm.read_chunk(&other, &chunk_ref(&key, entry), object_bytes).await.expect("cached"), data);
    }
}

#[tokio::test]
async fn a_damaged_block_is_refused_and_dropped() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes, blocks) = (object.chunks.clone(), object.object_bytes, object.blocks.clone());
    let mut parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    let mut damaged = parts[2].to_vec();
    damaged[0] ^= 1;
    parts[2] = Bytes::from(damaged);
    let cache = memory_cache(64 << 20).await;
    cache.insert_object(&key, &parts, &blocks, WrittenTier::Memory);
    let third = chunk_ref(&key, &chunks[2]);
    assert!(matches!(
        cache.read_chunk(&store, &third, object_bytes).await,
        Err(ReadChunkError::ChecksumMismatch { .. })
    ));
    // The bad block was dropped: the next read goes to the store and succeeds.
    assert_eq!(&cache.read_chunk(&store, &third, object_bytes).await.expect("re-read"), &datas[2]);
}

#[tokio::test]
async fn a_view_slices_any_range_of_a_chunk_and_refuses_ranges_past_it() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    let cache = memory_cache(64 << 20).await;
    // The first chunk ends 10 bytes before a block boundary; the second crosses it.
    for (entry, data) in chunks.iter().zip(&datas).take(2) {
        let mut view = cache.view(&store, chunk_ref(&key, entry), object_bytes);
        let len = data.len() as u64;
        for range in [0..len, 0..1, len - 1..len, len / 2..len, 3..len / 2 + 7, 5..5] {
            let got = view.slice(range.clone()).await.expect("slice");
            assert_eq!(&got[..], &data[range.start as usize..range.end as usize], "{range:?}");
        }
        assert!(matches!(view.slice(0..len + 1).await, Err(ReadChunkError::Truncated { .. })));
    }
}

#[tokio::test]
async fn only_blocks_this_agent_wrote_count_as_written_here_and_the_disk_tier_forgets_it() {
    let store = memory_store();
    let (object, _) = object();
    let (chunks, object_bytes, blocks) = (object.chunks.clone(), object.object_bytes, object.blocks.clone());
    let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    // The chunk across the block boundary, read whole.
    let empty = memory_store();
    let written_here = |cache: BlockCache, store: &SegmentStore| {
        let (store, chunk) = (store.clone(), chunk_ref(&key, &chunks[1]));
        async move {
            let mut view = cache.view(&store, chunk, object_bytes);
            let len = view.len();
            view.slice(0..len).await.expect("slice");
            view.written_here(0..len)
        }
    };
    let cold = memory_cache(64 << 20).await;
    assert!(!written_here(cold, &store).await, "read from the store");
    let warm = memory_cache(64 << 20).await;
    warm.insert_object(&key, &parts, &blocks, WrittenTier::Memory);
    assert!(written_here(warm, &empty).await, "the writer's own copy");

    let dir = std::env::temp_dir().join(format!("floe-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = BlockCacheConfig { memory_bytes: 64 << 20, disk: Some((dir.clone(), 256 << 20)) };
    let hybrid = BlockCache::open(&config).await.expect("cache");
    hybrid.insert_object(&key, &parts, &blocks, WrittenTier::Memory);
    hybrid.close().await;
    let reopened = BlockCache::open(&config).await.expect("cache");
    // The store used here does not hold the object: the bytes come from the disk tier.
    assert!(!written_here(reopened, &empty).await, "read back from the disk tier");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_small_last_block_comes_with_the_block_before_it() {
    let (store, empty) = (memory_store(), memory_store());
    // Chunks 0 and 1 end in block 0 and just past it; chunk 2 and the footer are the object's
    // small last block.
    let (object, datas) = object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    assert!(object_bytes > BLOCK_BYTES && object_bytes - BLOCK_BYTES <= TAIL_WITH_PREVIOUS_BYTES_MAX);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    let cache = memory_cache(64 << 20).await;
    // Block 0 alone (no prefetch): its GET brings the last block too, so chunk 2 reads from the
    // cache with a store that does not hold the object.
    cache.block(&store, &key, object_bytes, 0, Cause::Miss).await.expect("block 0");
    let third = cache.read_chunk(&empty, &chunk_ref(&key, &chunks[2]), object_bytes).await.expect("from the cache");
    assert_eq!(&third, &datas[2]);
    let second = cache.read_chunk(&empty, &chunk_ref(&key, &chunks[1]), object_bytes).await.expect("across both");
    assert_eq!(&second, &datas[1]);
}

/// The disk tier outlives the process: a block cached under another format's key (here, the
/// unversioned keys from before block formats) is never read, and today's key names its format
/// and block size.
#[tokio::test]
async fn a_block_of_another_format_on_the_disk_tier_is_never_read() {
    let store = memory_store();
    let (object, _) = object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");

    let dir = std::env::temp_dir().join(format!("floe-cache-format-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = BlockCacheConfig { memory_bytes: 64 << 20, disk: Some((dir.clone(), 256 << 20)) };
    let old = BlockCache::open(&config).await.expect("cache");
    let garbage = Bytes::from(vec![0xee; BLOCK_BYTES as usize]);
    let crc32c = crc32c::crc32c(&garbage);
    old.cache.insert(format!("{}#0", key.as_str()), CachedBlock::new(garbage, false, crc32c));
    old.close().await;

    let reopened = BlockCache::open(&config).await.expect("cache");
    let mut view = reopened.view(&store, chunk_ref(&key, &chunks[0]), object_bytes);
    let len = view.len();
    let bytes = view.slice(0..len).await.expect("read from the store, not the old block");
    assert!(!bytes.iter().all(|b| *b == 0xee), "the old format's block was read");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(block_key(&key, 3), format!("b2.4194304/{}#3", key.as_str()));
}

/// Stands in for the zone's owner of every block: another agent's cache and store.
#[derive(Debug)]
struct Owner {
    cache: BlockCache,
    store: SegmentStore,
    /// What it answers instead of the block: `None` the real block, `Some(None)` nothing (down),
    /// `Some(Some(b))` the block `b`.
    answer: Option<Option<PeerBlock>>,
    asked: std::sync::atomic::AtomicUsize,
    /// Answers the asker found damaged.
    damaged: std::sync::atomic::AtomicUsize,
}

impl PeerBlocks for Owner {
    fn fetch(&self, key: &SegmentKey, object_bytes: u64, index: u64) -> PeerFetch {
        self.asked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Some(answer) = self.answer.clone() {
            return Box::pin(std::future::ready(answer));
        }
        let (cache, store, key) = (self.cache.clone(), self.store.clone(), key.clone());
        Box::pin(async move { cache.block_for_peer(&store, &key, object_bytes, index).await.ok() })
    }

    fn damaged(&self, _key: &SegmentKey, _object_bytes: u64, _index: u64) {
        self.damaged.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

#[tokio::test]
async fn missed_blocks_come_from_their_owner_which_reads_each_once_and_a_failed_owner_falls_back() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    let owner = |answer| {
        let cache = memory_cache(64 << 20);
        let store = store.clone();
        async move {
            let (asked, damaged) = Default::default();
            Owner { cache: cache.await, store, answer, asked, damaged }
        }
    };
    let peer_gets = || metrics::BLOCK_GETS.with_label_values(&["peer"]).get();

    // Three askers whose own store has nothing: every byte they read came from the owner, which
    // read the object's two blocks (the small last one with the first) with one GET for all.
    let zone_owner = Arc::new(owner(None).await);
    for _ in 0..3 {
        let asker = memory_cache(64 << 20).await;
        asker.set_peers(zone_owner.clone());
        for (entry, data) in chunks.iter().zip(&datas) {
            let read = asker.read_chunk(&memory_store(), &chunk_ref(&key, entry), object_bytes).await;
            assert_eq!(&read.expect("from the owner"), data);
        }
    }
    assert_eq!(peer_gets(), 1, "one GET for all askers");
    assert_eq!(zone_owner.asked.load(std::sync::atomic::Ordering::Relaxed), 6, "two blocks per asker");

    // An owner that is down, or answers a block of the wrong length: the asker GETs it itself.
    let short = PeerBlock { bytes: Bytes::from_static(b"short"), crc32c: crc32c::crc32c(b"short") };
    for answer in [None, Some(short)] {
        let asker = memory_cache(64 << 20).await;
        asker.set_peers(Arc::new(owner(Some(answer)).await));
        for (entry, data) in chunks.iter().zip(&datas) {
            assert_eq!(&asker.read_chunk(&store, &chunk_ref(&key, entry), object_bytes).await.expect("GET"), data);
        }
    }
    assert_eq!(peer_gets(), 1);
}

#[test]
fn a_small_last_block_has_the_owner_of_the_block_before() {
    let tail = TAIL_WITH_PREVIOUS_BYTES_MAX;
    assert_eq!(owner_block(2 * BLOCK_BYTES + tail, 2), 1);
    assert_eq!(owner_block(2 * BLOCK_BYTES + tail + 1, 2), 2, "a large last block has its own");
    assert_eq!(owner_block(2 * BLOCK_BYTES + 10, 1), 1);
    assert_eq!(owner_block(10, 0), 0, "a one-block object");
    assert_eq!(block_len(2 * BLOCK_BYTES + 10, 2), 10);
    assert_eq!(block_len(2 * BLOCK_BYTES + 10, 1), BLOCK_BYTES);
    assert_eq!(block_len(2 * BLOCK_BYTES + 10, 3), 0, "past the end");
    assert_eq!(block_len(10, u64::MAX), 0);
}

/// The writer hands the hot tier its chunks as one buffer: whole blocks inside it are shared,
/// the block across its end and the footer is copied; every chunk reads back without the store.
#[tokio::test]
async fn a_writers_buffer_is_cached_in_shared_and_copied_blocks_alike() {
    let sizes = [2 * BLOCK_BYTES as usize + 10, 100, BLOCK_BYTES as usize];
    let stats = ChunkStats { batch_count: 1, record_count: 1, timestamp_min: 0, timestamp_max: 0 };
    let mut writer = SegmentWriter::new();
    let mut data = bytes::BytesMut::new();
    let mut datas = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let chunk = Bytes::from((0..*size).map(|b| (b * 13 + i) as u8).collect::<Vec<u8>>());
        data.extend_from_slice(&chunk);
        writer.push_chunk(TopicPartition { topic_id: uuid::Uuid::nil(), partition: i as i32 }, [chunk.clone()], stats);
        datas.push(chunk);
    }
    let object = writer.finish();
    let parts: Vec<Bytes> =
        std::iter::once(data.freeze()).chain(object.payload.iter().skip(sizes.len()).cloned()).collect();
    let key = SegmentKey::generate();
    // Room for every block in each of the cache's shards: eviction is not what this tests.
    let warm = memory_cache(512 << 20).await;
    warm.insert_object(&key, &parts, &object.blocks, WrittenTier::Memory);
    for (entry, data) in object.chunks.iter().zip(&datas) {
        let read = warm.read_chunk(&memory_store(), &chunk_ref(&key, entry), object.object_bytes).await;
        assert_eq!(&read.expect("cached"), data);
    }
}

/// An object of three chunks whose first two blocks are whole and so of the same length; the
/// third chunk and the footer end in the small last block.
fn two_block_object() -> (crate::segment::SegmentObject, Vec<Bytes>) {
    let sizes = [BLOCK_BYTES as usize - 10, 100, BLOCK_BYTES as usize + 5000];
    let stats = ChunkStats { batch_count: 1, record_count: 1, timestamp_min: 0, timestamp_max: 0 };
    let mut writer = SegmentWriter::new();
    let mut datas = Vec::new();
    for (i, size) in sizes.iter().enumerate() {
        let data = Bytes::from((0..*size).map(|b| (b * 11 + i) as u8).collect::<Vec<u8>>());
        let tp = TopicPartition { topic_id: uuid::Uuid::nil(), partition: i as i32 };
        writer.push_chunk(tp, [data.clone()], stats);
        datas.push(data);
    }
    (writer.finish(), datas)
}

/// Each chunk of `key` read whole through a view of `cache`: a view, unlike `read_chunk`, checks
/// no chunk checksum, as a fetch walks a chunk.
async fn view_all(
    cache: &BlockCache,
    store: &SegmentStore,
    key: &SegmentKey,
    chunks: &[crate::ChunkEntry],
    object_bytes: u64,
) -> Result<Vec<Bytes>, ReadChunkError> {
    let mut read = Vec::new();
    for entry in chunks {
        let mut view = cache.view(store, chunk_ref(key, entry), object_bytes);
        let len = view.len();
        read.push(view.slice(0..len).await?);
    }
    Ok(read)
}

/// The writer records the CRC-32C of every block of the data section, the last one ending where
/// the footer starts.
#[test]
fn the_writer_sums_each_block_of_the_data_section() {
    let (object, datas) = object();
    let data = datas.concat();
    let blocks = &object.blocks;
    assert_eq!((blocks.block_bytes, blocks.data_bytes), (BLOCK_BYTES as u32, data.len() as u64));
    let block = BLOCK_BYTES as usize;
    assert_eq!(blocks.crc32c, vec![crc32c::crc32c(&data[..block]), crc32c::crc32c(&data[block..])]);
    assert_eq!(blocks.block(1), Some((blocks.crc32c[1], (data.len() - block) as u64)));
    assert_eq!(blocks.block(2), None);
}

/// Before block checksums, a block the disk tier gave back was served as it was: a byte flipped
/// after it was cached (the disk's own entry checksum taken after the damage) reached the reader,
/// and a fetch walking its headers could take offsets from it. Now the block is checked against
/// the CRC-32C kept with it, dropped, and read again from the store.
#[tokio::test]
async fn a_block_damaged_on_the_disk_tier_is_read_again_from_the_store() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");

    let dir = std::env::temp_dir().join(format!("floe-cache-damage-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = BlockCacheConfig { memory_bytes: 64 << 20, disk: Some((dir.clone(), 256 << 20)) };
    let cache = BlockCache::open(&config).await.expect("cache");
    let block = store.get_range(&key, 0..BLOCK_BYTES).await.expect("block 0");
    let mut damaged = block.to_vec();
    damaged[100] ^= 0x10;
    cache.cache.insert(block_key(&key, 0), CachedBlock::new(Bytes::from(damaged), false, crc32c::crc32c(&block)));
    cache.close().await;

    let disk_mismatches = || metrics::BLOCK_CHECKSUM_MISMATCHES.with_label_values(&["disk"]).get();
    let before = disk_mismatches();
    let reopened = BlockCache::open(&config).await.expect("cache");
    let read = view_all(&reopened, &store, &key, &chunks[..1], object_bytes).await.expect("read");
    assert_eq!(read[0], datas[0], "the store's bytes, not the disk tier's");
    assert!(disk_mismatches() > before);
    // The good block replaced the damaged one.
    let again = view_all(&reopened, &memory_store(), &key, &chunks[..1], object_bytes).await.expect("cached");
    assert_eq!(again[0], datas[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Before block names and checksums, an owner's answer was taken on its length alone: a block
/// damaged on the way, or another block of the same length, was served as the one asked for.
/// Now the first fails the CRC-32C the owner named, the second the object's footer checksum
/// (known here from an earlier read); either way the owner is reported and the store serves.
#[tokio::test]
async fn a_peers_damaged_or_wrong_block_is_refused_and_read_from_the_store() {
    let store = memory_store();
    let (object, datas) = two_block_object();
    let (chunks, object_bytes) = (object.chunks.clone(), object.object_bytes);
    let key = SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");
    assert_eq!(block_len(object_bytes, 0), block_len(object_bytes, 1));
    let block = |index: u64| store.get_range(&key, index * BLOCK_BYTES..(index + 1) * BLOCK_BYTES);
    let (block_0, block_1) = (block(0).await.expect("block 0"), block(1).await.expect("block 1"));
    let liar = |bytes: Bytes, crc32c: u32| {
        let cache = memory_cache(64 << 20);
        let store = memory_store();
        async move {
            let (asked, damaged) = Default::default();
            let answer = Some(Some(PeerBlock { bytes, crc32c }));
            Arc::new(Owner { cache: cache.await, store, answer, asked, damaged })
        }
    };
    let damaged = |owner: &Owner| owner.damaged.load(std::sync::atomic::Ordering::Relaxed);

    // Block 0 with a byte flipped, under the checksum of the block as it was.
    let mut flipped = block_0.to_vec();
    flipped[7] ^= 1;
    let owner = liar(Bytes::from(flipped), crc32c::crc32c(&block_0)).await;
    let asker = memory_cache(64 << 20).await;
    asker.set_peers(owner.clone());
    let read = view_all(&asker, &store, &key, &chunks[..1], object_bytes).await.expect("from the store");
    assert_eq!(read[0], datas[0]);
    assert!(damaged(&owner) >= 1, "the owner was reported");

    // Block 1, consistent with the checksum it names, answered for block 0.
    let owner = liar(block_1.clone(), crc32c::crc32c(&block_1)).await;
    let asker = memory_cache(64 << 20).await;
    // The last chunk, read before there are peers, brings the object's footer with its end.
    let last = view_all(&asker, &store, &key, &chunks[2..], object_bytes).await.expect("from the store");
    assert_eq!(last[0], datas[2]);
    asker.set_peers(owner.clone());
    let read = view_all(&asker, &store, &key, &chunks[..1], object_bytes).await.expect("from the store");
    assert_eq!(read[0], datas[0], "block 0, not block 1");
    assert_eq!(damaged(&owner), 1, "the owner was reported");
}

/// A block the store returns that does not match its object's footer is neither cached nor served
/// through a view; a whole-chunk read of an intact chunk in it still succeeds on the chunk's own
/// checksum, and the damaged chunk fails on it.
#[tokio::test]
async fn a_block_that_does_not_match_its_footer_is_not_served() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes, blocks) = (object.chunks.clone(), object.object_bytes, object.blocks.clone());
    let mut bytes: Vec<u8> = object.payload.iter().flat_map(|b| b.iter().copied()).collect();
    bytes[5] ^= 1;
    let damaged = crate::segment::SegmentObject {
        payload: object_store::PutPayload::from(Bytes::from(bytes)),
        chunks: chunks.clone(),
        blocks,
        object_bytes,
    };
    let key = SegmentKey::generate();
    store.put_segment(&key, damaged).await.expect("put");
    let cache = memory_cache(64 << 20).await;
    let read = view_all(&cache, &store, &key, &chunks[..1], object_bytes).await;
    assert!(matches!(read, Err(ReadChunkError::BlockChecksumMismatch { index: 0, .. })), "{read:?}");
    assert!(!cache.cache.contains(&block_key(&key, 0)), "not cached");
    let second = cache.read_chunk(&store, &chunk_ref(&key, &chunks[1]), object_bytes).await.expect("intact chunk");
    assert_eq!(second, datas[1]);
    let first = cache.read_chunk(&store, &chunk_ref(&key, &chunks[0]), object_bytes).await;
    assert!(matches!(first, Err(ReadChunkError::ChecksumMismatch { .. })), "{first:?}");
}

#[tokio::test]
async fn rewritten_objects_skip_the_memory_tier() {
    let store = memory_store();
    let (object, datas) = object();
    let (chunks, object_bytes, blocks) = (object.chunks.clone(), object.object_bytes, object.blocks.clone());
    let parts: Vec<Bytes> = object.payload.iter().cloned().collect();
    let key = SegmentKey::generate_compacted();
    store.put_segment(&key, object).await.expect("put");
    // The reads below go to a store without the object: they succeed only from a cache tier.
    let empty = memory_store();
    let first = chunk_ref(&key, &chunks[0]);

    let memory_only = memory_cache(64 << 20).await;
    memory_only.insert_object(&key, &parts, &blocks, WrittenTier::Disk);
    assert_eq!(memory_only.cache.memory().usage(), 0, "nothing of it in memory");
    assert!(memory_only.read_chunk(&empty, &first, object_bytes).await.is_err(), "no disk tier: not cached");

    let dir = std::env::temp_dir().join(format!("floe-cache-test-rewritten-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = BlockCacheConfig { memory_bytes: 64 << 20, disk: Some((dir.clone(), 256 << 20)) };
    let hybrid = BlockCache::open(&config).await.expect("cache");
    hybrid.insert_object(&key, &parts, &blocks, WrittenTier::Disk);
    assert_eq!(hybrid.cache.memory().usage(), 0, "nothing of it in memory");
    hybrid.close().await;
    let reopened = BlockCache::open(&config).await.expect("cache");
    assert_eq!(&reopened.read_chunk(&empty, &first, object_bytes).await.expect("from the disk tier"), &datas[0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_jobs_reads_keep_out_of_the_memory_tier_and_each_block_is_read_once() {
    let (store, empty) = (memory_store(), memory_store());
    let (compacted, datas) = object();
    let (chunks, object_bytes) = (compacted.chunks.clone(), compacted.object_bytes);
    let key = SegmentKey::generate_compacted();
    store.put_segment(&key, compacted).await.expect("put");
    let cache = memory_cache(64 << 20).await;
    let job = JobBlocks::default();

    // Chunk 0's GET brings block 0 and the small last block: the job keeps both, the hot tier
    // neither (and nothing is prefetched into it).
    let first = cache.read_chunk_for_job(&store, &chunk_ref(&key, &chunks[0]), object_bytes, &job).await;
    assert_eq!(&first.expect("read"), &datas[0]);
    assert_eq!(job.bytes() as u64, object_bytes);
    tokio::task::yield_now().await;
    assert_eq!(cache.cache.memory().usage(), 0, "nothing of it in memory");
    // The job's next reads need no store; a reader's do.
    for (entry, data) in chunks.iter().zip(&datas) {
        let read = cache.read_chunk_for_job(&empty, &chunk_ref(&key, entry), object_bytes, &job).await;
        assert_eq!(&read.expect("from the job's blocks"), data);
    }
    assert!(cache.read_chunk(&empty, &chunk_ref(&key, &chunks[0]), object_bytes).await.is_err());

    // Blocks the hot tier holds serve a job without a GET, and stay where they are.
    let (written, written_datas) = object();
    let (written_chunks, written_bytes, blocks) =
        (written.chunks.clone(), written.object_bytes, written.blocks.clone());
    let parts: Vec<Bytes> = written.payload.iter().cloned().collect();
    let written_key = SegmentKey::generate();
    cache.insert_object(&written_key, &parts, &blocks, WrittenTier::Memory);
    let usage = cache.cache.memory().usage();
    let other_job = JobBlocks::default();
    let second = chunk_ref(&written_key, &written_chunks[1]);
    let read = cache.read_chunk_for_job(&empty, &second, written_bytes, &other_job).await;
    assert_eq!(&read.expect("from the hot tier"), &written_datas[1]);
    assert_eq!((other_job.bytes(), cache.cache.memory().usage()), (0, usage));
}

#[test]
fn a_job_keeps_its_newest_blocks_up_to_its_bound() {
    let job = JobBlocks::default();
    let block = CachedBlock::new(Bytes::from(vec![0u8; BLOCK_BYTES as usize]), false, 0);
    let count = JOB_BLOCKS_BYTES_MAX / BLOCK_BYTES as usize + 2;
    for index in 0..count {
        job.keep(format!("b#{index}"), block.clone());
        assert!(job.bytes() <= JOB_BLOCKS_BYTES_MAX);
    }
    assert!(job.get("b#0").is_none() && job.get("b#1").is_none(), "the oldest went first");
    assert!(job.get(&format!("b#{}", count - 1)).is_some());
    job.forget(&format!("b#{}", count - 1));
    assert_eq!(job.bytes(), JOB_BLOCKS_BYTES_MAX - BLOCK_BYTES as usize);
}

#[tokio::test]
async fn a_reader_keeps_its_last_block_for_the_next_chunk_of_the_same_object_only() {
    let empty = memory_store();
    let (written, datas) = object();
    let (chunks, object_bytes, blocks) = (written.chunks.clone(), written.object_bytes, written.blocks.clone());
    let parts: Vec<Bytes> = written.payload.iter().cloned().collect();
    let key = SegmentKey::generate();
    let cache = memory_cache(64 << 20).await;
    cache.insert_object(&key, &parts, &blocks, WrittenTier::Memory);

    // Chunk 1 ends in block 1, which the reader keeps; then the cache and the store lose it.
    let mut held = LastBlock::default();
    let mut view = cache.view_holding(&empty, chunk_ref(&key, &chunks[1]), object_bytes, &mut held);
    assert_eq!(view.slice(0..view.len()).await.expect("cached"), datas[1]);
    view.hold(&mut held);
    cache.cache.memory().clear();

    // Chunk 2 lies in block 1: read from the kept block, with nothing else to read it from.
    let mut view = cache.view_holding(&empty, chunk_ref(&key, &chunks[2]), object_bytes, &mut held);
    assert_eq!(view.slice(0..view.len()).await.expect("the kept block"), datas[2]);
    view.hold(&mut held);
    // The same range of another object is not this one's block, nor is block 0 (chunk 0).
    let other = ChunkRef { key: SegmentKey::generate(), ..chunk_ref(&key, &chunks[2]) };
    let mut view = cache.view_holding(&empty, other, object_bytes, &mut held);
    assert!(view.slice(0..view.len()).await.is_err());
    let mut view = cache.view_holding(&empty, chunk_ref(&key, &chunks[0]), object_bytes, &mut held);
    assert!(view.slice(0..view.len()).await.is_err());
}
