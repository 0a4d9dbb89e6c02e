//! What a link takes from a fetch answer: whole batches from the mirror's log end on, checksums
//! checked, and the transaction events of transactional and control batches.

use bytes::{Bytes, BytesMut};
use floe_metadata::{MirrorTxnEvent, TxnMarker};

use super::link_batches;
use crate::record_batch::build::{BatchProducer, NewRecord, build_batch};
use crate::record_batch::{ATTRIBUTE_TRANSACTIONAL, CRC_START, control_batch, stamp};

const PRODUCER: i64 = 4_000;

fn records(n: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            timestamp: 1_000 + i as i64,
            value: Some(Bytes::from(vec![b'v'; 10])),
            ..Default::default()
        })
        .collect()
}

/// A batch as the source serves it: at `base_offset`, transactional if asked.
fn batch(base_offset: i64, count: usize, transactional: bool) -> Bytes {
    let producer = BatchProducer { producer_id: PRODUCER, producer_epoch: 2, base_sequence: 0 };
    let built = build_batch(&records(count), Some(producer), 0).expect("batch");
    let mut out = BytesMut::from(&built[..]);
    if transactional {
        let attributes = i16::from_be_bytes([out[21], out[22]]) | ATTRIBUTE_TRANSACTIONAL;
        out[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = crc32c::crc32c(&out[CRC_START..]);
        out[17..21].copy_from_slice(&crc.to_be_bytes());
    }
    stamp(&mut out, base_offset, 7);
    out.freeze()
}

fn marker(base_offset: i64, commit: bool) -> Bytes {
    let mut out =
        BytesMut::from(&control_batch(&TxnMarker { producer_id: PRODUCER, producer_epoch: 2, commit }, 2_000)[..]);
    stamp(&mut out, base_offset, 7);
    out.freeze()
}

fn answer(parts: &[Bytes]) -> Bytes {
    parts.iter().flat_map(|b| b.iter().copied()).collect::<Vec<u8>>().into()
}

#[test]
fn whole_batches_from_the_log_end_with_their_transaction_events() {
    let cut = batch(16, 4, false);
    let parts = [batch(10, 3, false), batch(13, 2, true), marker(15, false), cut.slice(..cut.len() - 5)];
    let got = link_batches(&answer(&parts), 10).expect("batches");
    assert_eq!(got.batches, parts[..3].to_vec(), "stored as the source sent them; the cut batch waits");
    assert_eq!((got.base_offset, got.last_offset, got.record_count), (10, 15, 6));
    assert_eq!(
        got.transactions,
        vec![
            MirrorTxnEvent::Data { producer_id: PRODUCER, offset: 13 },
            MirrorTxnEvent::Marker { producer_id: PRODUCER, producer_epoch: 2, offset: 15, commit: false },
        ]
    );
    let later = link_batches(&answer(&parts), 13).expect("batches");
    assert_eq!((later.base_offset, later.batches.len()), (13, 2), "batches below the log end are skipped");
    assert!(link_batches(&answer(&parts), 16).expect("nothing whole").batches.is_empty());
}

#[test]
fn a_batch_across_the_log_end_or_with_a_bad_checksum_is_refused() {
    let parts = [batch(10, 3, false), batch(13, 2, false)];
    let across = link_batches(&answer(&parts), 11);
    assert!(across.is_err_and(|e| e.contains("across")), "a batch spanning the mirror's log end");
    let mut damaged = BytesMut::from(&answer(&parts)[..]);
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    assert!(link_batches(&damaged.freeze(), 10).is_err_and(|e| e.contains("checksum")));
}

#[test]
fn a_cut_keeps_the_batches_before_the_fork_offset() {
    let parts = [batch(10, 3, false), batch(13, 2, false), marker(15, false)];
    let chunk = answer(&parts);
    let cut = super::source::cut_at(&chunk, 10, true, 15).expect("a batch boundary");
    let kept = parts[0].len() + parts[1].len();
    assert_eq!((cut.byte_len as usize, cut.crc32c), (kept, crc32c::crc32c(&chunk[..kept])));
    assert!(super::source::cut_at(&chunk, 10, true, 14).is_err(), "inside a batch");
    // Stored by a producer, batches carry no offsets: they follow from the entry's base.
    let stored = answer(&[batch(0, 3, false), batch(0, 2, false)]);
    let cut = super::source::cut_at(&stored, 100, false, 103).expect("a batch boundary");
    assert_eq!(cut.byte_len as usize, parts[0].len());
}
