use bytes::Bytes;
use proptest::prelude::*;

use super::footer::SegmentFooter;
use super::trailer::{SegmentTrailer, TRAILER_BYTES};
use super::*;
use crate::{ObjectStoreConfig, ReadChunkError, ReadFooterError, SegmentStore};

fn tp(n: u8, partition: i32) -> TopicPartition {
    TopicPartition { topic_id: uuid::Uuid::from_bytes([n; 16]), partition }
}

fn stats(batch_count: u32) -> ChunkStats {
    ChunkStats { batch_count, record_count: batch_count * 2, timestamp_min: 10, timestamp_max: 20 }
}

/// A segment of `chunks` (each a list of batches) and its bytes as stored.
fn build(chunks: &[Vec<Vec<u8>>]) -> (SegmentObject, Vec<u8>) {
    let mut writer = SegmentWriter::new();
    for (i, batches) in chunks.iter().enumerate() {
        let batch_count = batches.len() as u32;
        writer.push_chunk(tp(1, i as i32), batches.iter().map(|b| Bytes::from(b.clone())), stats(batch_count));
    }
    let object = writer.finish();
    let bytes: Vec<u8> = object.payload.iter().flat_map(|b| b.iter().copied()).collect();
    (object, bytes)
}

/// Decodes footer and trailer from raw object bytes, as a reader does.
fn decode(bytes: &[u8]) -> Result<SegmentFooter, String> {
    let trailer_start = bytes.len().checked_sub(TRAILER_BYTES).ok_or("short")?;
    let trailer = SegmentTrailer::decode(&bytes[trailer_start..])?;
    let footer_start = trailer_start.checked_sub(trailer.footer_bytes as usize).ok_or("footer too long")?;
    SegmentFooter::decode(&bytes[footer_start..trailer_start], &trailer, footer_start as u64)
}

#[test]
fn footer_round_trips_and_chunks_are_back_to_back() {
    let (object, bytes) = build(&[vec![b"abc".to_vec(), b"de".to_vec()], vec![], vec![b"xyz".to_vec()]]);
    assert_eq!(object.object_bytes as usize, bytes.len());
    let footer = decode(&bytes).expect("decodes");
    assert_eq!(footer.chunks, object.chunks);
    assert_eq!(footer.chunks[0].byte_len, 5);
    assert_eq!(footer.chunks[1].byte_start, 5);
    assert_eq!(footer.chunks[2].byte_start, 5);
    let c = footer.chunks[2];
    assert_eq!(&bytes[c.byte_start as usize..][..c.byte_len as usize], b"xyz");
    assert_eq!(c.crc32c, crc32c::crc32c(b"xyz"));
}

#[test]
fn every_single_byte_flip_in_footer_or_trailer_is_detected() {
    let (object, bytes) = build(&[vec![b"hello".to_vec()], vec![b"world".to_vec()]]);
    let data = object.chunks.iter().map(|c| c.byte_len as usize).sum::<usize>();
    for at in data..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x40;
        assert!(decode(&damaged).is_err(), "flip at byte {at} went unnoticed");
    }
}

#[test]
fn every_truncation_is_detected() {
    let (_, bytes) = build(&[vec![b"hello".to_vec()], vec![b"world".to_vec()]]);
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "truncation to {len} bytes went unnoticed");
    }
}

proptest! {
    #[test]
    fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn any_segment_round_trips(chunks in proptest::collection::vec(
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..4), 0..8)) {
        let (object, bytes) = build(&chunks);
        let footer = decode(&bytes).expect("decodes");
        prop_assert_eq!(&footer.chunks, &object.chunks);
        prop_assert_eq!(footer.blocks.as_ref(), Some(&object.blocks));
        for (entry, batches) in footer.chunks.iter().zip(&chunks) {
            let expected: Vec<u8> = batches.concat();
            let got = &bytes[entry.byte_start as usize..][..entry.byte_len as usize];
            prop_assert_eq!(got, &expected[..]);
        }
    }
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("floe-storage-{name}-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test]
async fn store_round_trip_and_damage_detection_on_file_store() {
    let root = temp_dir("file");
    let store = SegmentStore::open(&ObjectStoreConfig {
        url: format!("file://{}", root.display()),
        s3_endpoint: None,
        ..Default::default()
    })
    .expect("opens");
    let (object, _) = build(&[vec![b"first".to_vec()], vec![b"second".to_vec()]]);
    let chunks = object.chunks.clone();
    let object_bytes = object.object_bytes;
    let key = crate::SegmentKey::generate();
    store.put_segment(&key, object).await.expect("put");

    let footer = store.read_footer(&key).await.expect("footer");
    assert_eq!(footer.chunks, chunks);
    let chunk_ref = |c: &ChunkEntry| ChunkRef {
        key: key.clone(),
        byte_start: c.byte_start,
        byte_len: c.byte_len,
        crc32c: c.crc32c,
    };
    // Each read through a fresh cache, so it goes to the store.
    let read = |c: ChunkRef| {
        let store = store.clone();
        async move {
            let cache = crate::BlockCache::open(&crate::BlockCacheConfig { memory_bytes: 1 << 20, disk: None })
                .await
                .expect("cache");
            cache.read_chunk(&store, &c, object_bytes).await
        }
    };
    assert_eq!(&read(chunk_ref(&chunks[1])).await.expect("chunk")[..], b"second");

    // Keys are never reused: a second PUT to the same key fails instead of overwriting.
    let (again, _) = build(&[vec![b"other".to_vec()]]);
    assert!(matches!(store.put_segment(&key, again).await, Err(crate::PutSegmentError::KeyExists { .. })));

    // Flip one byte of the second chunk on disk: the chunk read notices, the first chunk still reads.
    let file = root.join(key.as_str());
    let mut bytes = std::fs::read(&file).expect("read back");
    bytes[chunks[1].byte_start as usize] ^= 1;
    std::fs::write(&file, &bytes).expect("rewrite");
    assert!(matches!(read(chunk_ref(&chunks[1])).await, Err(ReadChunkError::ChecksumMismatch { .. })));
    assert_eq!(&read(chunk_ref(&chunks[0])).await.expect("chunk")[..], b"first");

    // Truncate the object: the footer read reports corruption rather than misreading.
    std::fs::write(&file, &bytes[..bytes.len() - 3]).expect("truncate");
    assert!(matches!(store.read_footer(&key).await, Err(ReadFooterError::Corrupt { .. })));
    assert!(matches!(read(chunk_ref(&chunks[1])).await, Err(ReadChunkError::ChecksumMismatch { .. })));
    let _ = std::fs::remove_dir_all(root);
}

#[tokio::test]
async fn unsupported_urls_are_rejected() {
    for url in ["ftp://x/y", "not a url", "s3:///prefix"] {
        let result =
            SegmentStore::open(&ObjectStoreConfig { url: url.to_owned(), s3_endpoint: None, ..Default::default() });
        assert!(result.is_err(), "{url} should be rejected");
    }
}

/// Where the golden files live (the test runner's `CARGO_MANIFEST_DIR` first, as cargo may reuse
/// a test binary built in another checkout).
fn golden_dir() -> std::path::PathBuf {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")), std::path::PathBuf::from);
    crate_dir.join("tests").join("golden")
}

/// The chunks of the golden segments.
fn golden_chunks() -> Vec<Vec<Vec<u8>>> {
    vec![
        vec![b"first batch".to_vec(), b"second batch of partition 0".to_vec()],
        vec![],
        vec![(0..=255u8).collect(), vec![0; 1000]],
    ]
}

/// A segment object of format 1, written once by the format 1 writer and kept: today's reader
/// finds its footer, every chunk where the footer says, with its checksum and stats, and no block
/// checksums. A change to the layout that breaks this needs the next format version and a reader
/// for this one. (Today's writer writes format 2, so this file is never written again.)
#[test]
fn a_golden_segment_of_format_1_still_reads() {
    let bytes = std::fs::read(golden_dir().join("segment-v1.bin")).expect("golden segment of format 1");
    let trailer = SegmentTrailer::decode(&bytes[bytes.len() - TRAILER_BYTES..]).expect("trailer");
    assert_eq!((trailer.chunk_count, trailer.format_version), (3, 1));
    let footer = decode(&bytes).expect("footer");
    assert_eq!(footer.blocks, None);
    check_golden_chunks(&bytes, &footer);
}

/// A segment object of format 2, written once (`FLOE_WRITE_GOLDEN=1`) and kept: as format 1,
/// and its one block's checksum covers the data section up to the footer.
#[test]
fn a_golden_segment_of_format_2_still_reads() {
    let path = golden_dir().join("segment-v2.bin");
    if std::env::var_os("FLOE_WRITE_GOLDEN").is_some() {
        let (_, bytes) = build(&golden_chunks());
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, bytes).expect("write golden segment");
    }
    let bytes = std::fs::read(&path).expect("golden segment (FLOE_WRITE_GOLDEN=1 writes it)");
    let trailer = SegmentTrailer::decode(&bytes[bytes.len() - TRAILER_BYTES..]).expect("trailer");
    assert_eq!((trailer.chunk_count, trailer.format_version), (3, 2));
    let footer = decode(&bytes).expect("footer");
    let data_bytes = footer.chunks.iter().map(|c| u64::from(c.byte_len)).sum::<u64>();
    let blocks = footer.blocks.as_ref().expect("block checksums");
    assert_eq!((u64::from(blocks.block_bytes), blocks.data_bytes), (crate::BLOCK_BYTES, data_bytes));
    assert_eq!(blocks.crc32c, vec![crc32c::crc32c(&bytes[..data_bytes as usize])]);
    check_golden_chunks(&bytes, &footer);
}

fn check_golden_chunks(bytes: &[u8], footer: &SegmentFooter) {
    let chunks = golden_chunks();
    assert_eq!(footer.chunks.len(), 3);
    for (i, (entry, batches)) in footer.chunks.iter().zip(&chunks).enumerate() {
        assert_eq!(entry.topic_partition, tp(1, i as i32));
        let data = &bytes[entry.byte_start as usize..][..entry.byte_len as usize];
        assert_eq!(data, batches.concat().as_slice(), "chunk {i}");
        assert_eq!(entry.crc32c, crc32c::crc32c(data), "chunk {i}");
        assert_eq!(entry.batch_count, batches.len() as u32);
        assert_eq!(entry.record_count, batches.len() as u32 * 2);
    }
}

/// A footer longer than the first read of an object's end is read with a second GET; a footer
/// within it, with the first alone.
#[tokio::test]
async fn a_footer_is_read_from_the_end_of_its_object_however_long() {
    let store =
        SegmentStore::open(&ObjectStoreConfig { url: "memory://".into(), ..Default::default() }).expect("store");
    for chunk_count in [3usize, 2000] {
        let chunks: Vec<Vec<Vec<u8>>> = (0..chunk_count).map(|i| vec![vec![i as u8; i % 7]]).collect();
        let (object, _) = build(&chunks);
        let expected = (object.chunks.clone(), object.blocks.clone(), object.object_bytes);
        let footer_bytes = object.object_bytes - object.blocks.data_bytes - TRAILER_BYTES as u64;
        assert_eq!(footer_bytes > crate::limits::FOOTER_READ_BYTES, chunk_count == 2000);
        let key = crate::SegmentKey::generate();
        store.put_segment(&key, object).await.expect("put");
        let footer = store.read_footer_at(&key, expected.2).await.expect("footer");
        assert_eq!((footer.chunks, footer.blocks), (expected.0, Some(expected.1)), "{chunk_count} chunks");
        // An object that is not as long as the index says is refused, not misread.
        let short = store.read_footer_at(&key, expected.2 + 1).await;
        assert!(matches!(short, Err(ReadFooterError::Corrupt { .. })), "{chunk_count} chunks");
    }
}

/// Block checksums that disagree with the data section's size are refused, so a reader never
/// checks a block against another block's checksum.
#[test]
fn block_checksums_must_fit_the_data_section() {
    let (object, bytes) = build(&[vec![b"hello".to_vec()]]);
    let data_bytes = object.blocks.data_bytes;
    let with = |blocks: BlockChecksums| {
        let footer = SegmentFooter { chunks: object.chunks.clone(), blocks: Some(blocks) };
        let encoded = footer.encode();
        let trailer = SegmentTrailer {
            footer_bytes: encoded.len() as u32,
            footer_crc32c: crc32c::crc32c(&encoded),
            chunk_count: 1,
            format_version: 2,
        };
        SegmentFooter::decode(&encoded, &trailer, data_bytes)
    };
    assert!(with(object.blocks.clone()).is_ok());
    let two = BlockChecksums { crc32c: vec![1, 2], ..object.blocks.clone() };
    assert!(with(two).is_err(), "two checksums for one block");
    let tiny = BlockChecksums { block_bytes: 1, crc32c: vec![0; 5], ..object.blocks.clone() };
    assert!(with(tiny).is_err(), "blocks below the limit");
    // Format 1 has no block checksums: a footer of format 1 with bytes after its entries is refused.
    let trailer = SegmentTrailer::decode(&bytes[bytes.len() - TRAILER_BYTES..]).expect("trailer");
    let footer_start = data_bytes as usize;
    let footer = &bytes[footer_start..bytes.len() - TRAILER_BYTES];
    assert!(SegmentFooter::decode(footer, &SegmentTrailer { format_version: 1, ..trailer }, data_bytes).is_err());
}
