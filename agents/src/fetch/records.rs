//! The records of a partition read, one by one, for readers that are not Kafka clients (the
//! HTTP API): control batches are left out, and for read_committed so are the records of
//! aborted transactions, as a Kafka consumer would leave them out.

use bytes::Bytes;

use super::PartitionRead;
use crate::limits::BATCH_DECOMPRESSED_BYTES_MAX;
use crate::record_batch::records::{self, RecordsError};
use crate::record_batch::{self, ATTRIBUTE_LOG_APPEND_TIME, ATTRIBUTE_TRANSACTIONAL, BatchHeader};

/// One record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchedRecord {
    pub offset: i64,
    pub timestamp: i64,
    /// Whether `timestamp` is the log append time.
    pub log_append_time: bool,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(Bytes, Option<Bytes>)>,
}

/// The batches of `read` in order, each with whether a consumer gets its records: not a control
/// batch, and for read_committed not in an aborted transaction.
pub fn consumer_batches(
    read: &PartitionRead,
    read_committed: bool,
) -> Result<Vec<(BatchHeader, Bytes, bool)>, RecordsError> {
    let mut aborted: Vec<_> = if read_committed { read.aborted_transactions.clone() } else { Vec::new() };
    aborted.sort_by_key(|a| a.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    // Producers whose aborted transaction the batches read so far are inside.
    let mut aborting: Vec<i64> = Vec::new();
    let mut out = Vec::new();
    for batch in record_batch::split(&read.records) {
        let (header, bytes) = batch.map_err(|e| RecordsError::Decompress(e.to_string()))?;
        while let Some(a) = aborted.next_if(|a| a.first_offset <= header.base_offset) {
            aborting.push(a.producer_id);
        }
        if header.is_control() {
            // A marker ends its producer's transaction either way.
            aborting.retain(|p| *p != header.producer_id);
            out.push((header, bytes, false));
            continue;
        }
        let transactional = header.attributes & ATTRIBUTE_TRANSACTIONAL != 0;
        let delivered = !(transactional && aborting.contains(&header.producer_id));
        out.push((header, bytes, delivered));
    }
    Ok(out)
}

/// The records of `read` at or after `from_offset`, in offset order, at most `max_records`.
pub fn fetched_records(
    read: &PartitionRead,
    from_offset: i64,
    read_committed: bool,
    max_records: usize,
) -> Result<Vec<FetchedRecord>, RecordsError> {
    let mut out = Vec::new();
    for (header, bytes, delivered) in consumer_batches(read, read_committed)? {
        if !delivered || header.base_offset + i64::from(header.last_offset_delta) < from_offset {
            continue;
        }
        push_records(&header, &bytes, from_offset, max_records, &mut out)?;
        if out.len() >= max_records {
            break;
        }
    }
    Ok(out)
}

/// The offsets a batch holds records at, as sorted runs of consecutive offsets within the
/// batch's span: the whole span, or, where key compaction removed records inside it, the runs
/// around the holes. Offset deltas are the producer's, so they are sorted and clipped here.
pub fn record_runs(header: &BatchHeader, batch: &Bytes) -> Result<Vec<(i64, i64)>, RecordsError> {
    let end = header.base_offset + i64::from(header.last_offset_delta);
    if i64::from(header.record_count) > i64::from(header.last_offset_delta) {
        return Ok(vec![(header.base_offset, end)]);
    }
    let payload = records::decompress(header, batch, BATCH_DECOMPRESSED_BYTES_MAX)?;
    let mut offsets = Vec::new();
    for view in records::records(&payload) {
        let offset = header.base_offset + i64::from(view?.offset_delta);
        if (header.base_offset..=end).contains(&offset) {
            offsets.push(offset);
        }
    }
    offsets.sort_unstable();
    let mut runs: Vec<(i64, i64)> = Vec::new();
    for offset in offsets {
        match runs.last_mut() {
            Some((_, last)) if *last >= offset - 1 => *last = (*last).max(offset),
            _ => runs.push((offset, offset)),
        }
    }
    Ok(runs)
}

fn push_records(
    header: &BatchHeader,
    batch: &Bytes,
    from_offset: i64,
    max_records: usize,
    out: &mut Vec<FetchedRecord>,
) -> Result<(), RecordsError> {
    let payload = records::decompress(header, batch, BATCH_DECOMPRESSED_BYTES_MAX)?;
    let log_append_time = header.attributes & ATTRIBUTE_LOG_APPEND_TIME != 0;
    for view in records::records(&payload) {
        let view = view?;
        let offset = header.base_offset + i64::from(view.offset_delta);
        if offset < from_offset {
            continue;
        }
        if out.len() >= max_records {
            break;
        }
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(view.timestamp_delta)
        };
        let headers = view.headers()?;
        out.push(FetchedRecord { offset, timestamp, log_append_time, key: view.key, value: view.value, headers });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::records::Compression;

    use super::*;
    use crate::record_batch::tests::encode_batch;

    /// A whole batch is one run; one key compaction left holes in splits around them, in every
    /// codec.
    #[test]
    fn record_runs_skip_the_holes_key_compaction_left_inside_a_batch() {
        for (compression, codec) in [(Compression::None, 0), (Compression::Lz4, 3), (Compression::Zstd, 4)] {
            let batch = encode_batch(8, compression);
            let header = BatchHeader::parse(&batch).expect("parses");
            assert_eq!(record_runs(&header, &batch).expect("runs"), vec![(0, 7)]);
            let payload = records::decompress(&header, &batch, 1 << 20).expect("decompresses");
            let kept: Vec<records::RecordView> = records::records(&payload)
                .filter_map(Result::ok)
                .filter(|r| ![1, 2, 5].contains(&r.offset_delta))
                .collect();
            let cleaned = records::rebuild(&header, &batch, 100, &kept, codec, None).expect("rebuilds");
            let header = BatchHeader::parse(&cleaned).expect("parses");
            let runs = record_runs(&header, &cleaned).expect("runs");
            assert_eq!(runs, vec![(100, 100), (103, 104), (106, 107)], "{compression:?}");
        }
    }

    /// Offset deltas are the producer's: out of order, repeated or past the batch's span, the
    /// runs still come out sorted, apart and within the batch.
    #[test]
    fn record_runs_are_sorted_and_clipped_whatever_the_deltas() {
        let batch = encode_batch(8, Compression::None);
        let header = BatchHeader::parse(&batch).expect("parses");
        let payload = records::decompress(&header, &batch, 1 << 20).expect("decompresses");
        let views: Vec<records::RecordView> = records::records(&payload).filter_map(Result::ok).collect();
        let pick = |delta: i32| views.iter().find(|v| v.offset_delta == delta).cloned().expect("a record");
        let kept = [pick(7), pick(0), pick(4), pick(3), pick(4)];
        let shuffled = records::rebuild(&header, &batch, 100, &kept, 0, None).expect("rebuilds");
        let header = BatchHeader::parse(&shuffled).expect("parses");
        assert_eq!(record_runs(&header, &shuffled).expect("runs"), vec![(100, 100), (103, 104), (107, 107)]);
    }
}
