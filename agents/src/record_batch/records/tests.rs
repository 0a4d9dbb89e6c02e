use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::*;
use crate::record_batch::tests::encode_batch;
use crate::record_batch::{BatchHeader, crc_matches};

const CODECS: [(Compression, i16); 5] = [
    (Compression::None, 0),
    (Compression::Gzip, 1),
    (Compression::Snappy, 2),
    (Compression::Lz4, 3),
    (Compression::Zstd, 4),
];

#[test]
fn walks_the_records_of_every_codec() {
    for (compression, _) in CODECS {
        let batch = encode_batch(6, compression);
        let header = BatchHeader::parse(&batch).expect("parses");
        let payload = decompress(&header, &batch, 1 << 20).expect("decompresses");
        let views: Vec<RecordView> = records(&payload).collect::<Result<_, _>>().expect("walks");
        assert_eq!(views.len(), 6, "{compression:?}");
        for (i, view) in views.iter().enumerate() {
            assert_eq!(view.offset_delta, i as i32);
            assert_eq!(view.timestamp_delta, i as i64);
            assert_eq!(view.key.as_deref(), Some(format!("k{i}").as_bytes()));
            // encode_batch gives every third record a null value.
            assert_eq!(view.value.is_none(), i % 3 == 0);
        }
        // The borrowing walk reads the same fields.
        let refs: Vec<RecordRef<'_>> = record_refs(&payload).collect::<Result<_, _>>().expect("walks");
        assert_eq!(refs.len(), views.len());
        for (r, view) in refs.iter().zip(&views) {
            assert_eq!((r.offset_delta, r.timestamp_delta), (view.offset_delta, view.timestamp_delta));
            assert_eq!((r.key, r.value), (view.key.as_deref(), view.value.as_deref()));
        }
    }
}

#[test]
fn a_delete_horizon_becomes_the_base_timestamp_and_every_record_keeps_its_timestamp() {
    for (from, _) in CODECS {
        for (_, to) in CODECS {
            let batch = encode_batch(6, from);
            let header = BatchHeader::parse(&batch).expect("parses");
            assert_eq!(header.delete_horizon(), None);
            let payload = decompress(&header, &batch, 1 << 20).expect("decompresses");
            let kept: Vec<RecordView> =
                records(&payload).filter_map(Result::ok).filter(|r| r.offset_delta > 0).collect();
            // Far past the records' timestamps, so every delta turns negative and takes more bytes.
            let horizon = header.base_timestamp + 1_000_000_000_000;
            let rebuilt = rebuild(&header, &batch, 100, &kept, to, Some(horizon)).expect("rebuilds");
            let new_header = BatchHeader::parse(&rebuilt).expect("parses");
            assert!(crc_matches(&rebuilt, &new_header));
            assert_eq!(new_header.delete_horizon(), Some(horizon));
            assert_eq!(new_header.first_timestamp(), header.max_timestamp);
            assert_eq!((new_header.max_timestamp, new_header.record_count), (header.max_timestamp, 5));
            let decoded = RecordBatchDecoder::decode(&mut rebuilt.clone()).expect("decodes").records;
            let original = RecordBatchDecoder::decode(&mut batch.clone()).expect("decodes").records;
            assert_eq!(decoded.len(), 5);
            for r in &decoded {
                let o = &original[(r.offset - 100) as usize];
                assert_eq!((&r.key, &r.value, r.timestamp, &r.headers), (&o.key, &o.value, o.timestamp, &o.headers));
            }
            // Rebuilt again without a new horizon (a later pass), the horizon and timestamps stay.
            let payload = decompress(&new_header, &rebuilt, 1 << 20).expect("decompresses");
            let fewer: Vec<RecordView> = records(&payload).filter_map(Result::ok).skip(1).collect();
            let again = rebuild(&new_header, &rebuilt, 100, &fewer, 0, None).expect("rebuilds");
            let again_header = BatchHeader::parse(&again).expect("parses");
            assert_eq!(again_header.delete_horizon(), Some(horizon));
            let decoded = RecordBatchDecoder::decode(&mut again.clone()).expect("decodes").records;
            assert_eq!(decoded.len(), 4);
            for r in &decoded {
                assert_eq!(r.timestamp, original[(r.offset - 100) as usize].timestamp);
            }
        }
    }
}

#[test]
fn a_rebuilt_batch_keeps_offsets_timestamps_and_values_in_any_codec() {
    for (from, _) in CODECS {
        for (_, to) in CODECS {
            let batch = encode_batch(6, from);
            let header = BatchHeader::parse(&batch).expect("parses");
            let payload = decompress(&header, &batch, 1 << 20).expect("decompresses");
            let kept: Vec<RecordView> =
                records(&payload).filter_map(Result::ok).filter(|r| r.offset_delta % 2 == 1).collect();
            let rebuilt = rebuild(&header, &batch, 100, &kept, to, None).expect("rebuilds");
            let new_header = BatchHeader::parse(&rebuilt).expect("parses");
            assert!(crc_matches(&rebuilt, &new_header));
            assert_eq!(new_header.compression(), to);
            assert_eq!(new_header.record_count, 3);
            assert_eq!(new_header.last_offset_delta, header.last_offset_delta);
            let decoded = RecordBatchDecoder::decode(&mut rebuilt.clone()).expect("decodes").records;
            let offsets: Vec<i64> = decoded.iter().map(|r| r.offset).collect();
            assert_eq!(offsets, vec![101, 103, 105]);
            let original = RecordBatchDecoder::decode(&mut batch.clone()).expect("decodes").records;
            for r in &decoded {
                let o = &original[(r.offset - 100) as usize];
                assert_eq!((&r.key, &r.value, r.timestamp, &r.headers), (&o.key, &o.value, o.timestamp, &o.headers));
            }
        }
    }
}

#[test]
fn a_decompression_bomb_is_refused_without_expanding_it() {
    let zeros = vec![0u8; 8 << 20];
    for (compression, codec) in CODECS.into_iter().skip(1) {
        let compressed = compress(codec, &zeros).expect("compresses");
        assert!(compressed.len() < 1 << 20, "{compression:?} compressed to {}", compressed.len());
        let batch = encode_batch(1, compression);
        let header = BatchHeader::parse(&batch).expect("parses");
        let mut bomb = BytesMut::from(&batch[..crate::record_batch::HEADER_BYTES]);
        bomb.extend_from_slice(&compressed);
        let bomb = Bytes::from(bomb);
        let header = BatchHeader { batch_bytes: bomb.len(), ..header };
        assert_eq!(
            decompress(&header, &bomb, 1 << 20),
            Err(RecordsError::TooLarge { max: 1 << 20 }),
            "{compression:?}"
        );
        assert_eq!(decompress(&header, &bomb, 8 << 20).map(|b| b.len()), Ok(8 << 20), "{compression:?}");
    }
}

#[test]
fn malformed_records_are_errors_not_panics() {
    for bytes in [&[0x80u8][..], &[0x02, 0x00], &[0x7f, 0, 0, 0], &[0x0e, 0, 0, 0, 0x7f, 0, 0, 0]] {
        let payload = Bytes::copy_from_slice(bytes);
        assert!(records(&payload).any(|r| r.is_err()), "{bytes:?}");
    }
}

#[test]
fn a_header_is_found_by_name_without_allocating() {
    let encode = |headers: &[(&[u8], Option<&[u8]>)]| {
        let mut out = vec![(headers.len() as u8) << 1];
        for (name, value) in headers {
            out.push((name.len() as u8) << 1);
            out.extend_from_slice(name);
            match value {
                Some(v) => {
                    out.push((v.len() as u8) << 1);
                    out.extend_from_slice(v);
                }
                None => out.push(1), // -1
            }
        }
        out
    };
    let headers = encode(&[(b"a", Some(b"1")), (b"__value_schema_id", None), (b"b", Some(b"22")), (b"b", Some(b"3"))]);
    assert_eq!(header(&headers, b"a"), Header::One(Some(&b"1"[..])));
    assert_eq!(header(&headers, b"__value_schema_id"), Header::One(None), "a null value");
    assert_eq!(header(&headers, b"b"), Header::Repeated);
    assert_eq!(header(&headers, b"c"), Header::Absent);
    assert_eq!(header(&[0], b"a"), Header::Absent, "no headers");
    assert_eq!(header(&headers[..4], b"a"), Header::Absent, "cut short");
    assert_eq!(header(&[], b"a"), Header::Absent);
}
