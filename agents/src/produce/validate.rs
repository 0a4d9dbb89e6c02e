//! Checks produced record batches without decompressing them (except to find keyless records
//! for compacted topics, to check the schemas of topics with schema validation, and the records
//! of a batch whose timestamps are out of bounds), and applies the topic's timestamp policy. A refusal that concerns some records names them
//! (KIP-467), so a client fails those and may send the others again. Pure: no I/O, no shared
//! state but the parsed-schema cache behind a [`SchemaCheck`].
//!
//! Timestamp bounds are checked on the batch header's first and largest timestamps: a record
//! whose timestamp is below its batch's first one is not checked against
//! `message.timestamp.before.max.ms` (which would need every batch decompressed).

use std::cell::{Cell, OnceCell};
use std::ops::ControlFlow;

use bytes::Bytes;
use floe_metadata::{ChunkProducer, State, Topic};

use super::schemas::SchemaCheck;

use crate::limits::{BATCH_BYTES_MAX, BATCH_DECOMPRESSED_BYTES_MAX, BATCH_RECORD_COUNT_MAX, RECORD_BYTES_MIN};
use crate::record_batch::records::{self, RecordsError};
use crate::record_batch::{self, BatchError, BatchHeader};

/// What a topic's configs say about accepting batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopicPolicy {
    /// `max.message.bytes`, clamped to [`BATCH_BYTES_MAX`].
    pub max_message_bytes: usize,
    /// `message.timestamp.type=LogAppendTime`.
    pub log_append_time: bool,
    /// `cleanup.policy` includes `compact`: every record needs a key.
    pub compacted: bool,
    /// `message.timestamp.before.max.ms` and `message.timestamp.after.max.ms` (each at most
    /// the deprecated `message.timestamp.difference.max.ms`): how far a CreateTime timestamp
    /// may be behind or ahead of the append time.
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
}

impl TopicPolicy {
    /// Reads the policy from the topic's configs, then the cluster's dynamic broker defaults,
    /// then Kafka's defaults.
    pub fn for_topic(state: &State, topic: &Topic) -> Self {
        let value = |name: &str| state.topic_config_value(topic, name);
        let max_message_bytes =
            value("max.message.bytes").and_then(|v| v.parse::<usize>().ok()).unwrap_or(1_048_588).min(BATCH_BYTES_MAX);
        let log_append_time = value("message.timestamp.type") == Some("LogAppendTime");
        let compacted = value("cleanup.policy").is_some_and(|p| p.split(',').any(|p| p.trim() == "compact"));
        let long = |name: &str| value(name).and_then(|v| v.parse::<i64>().ok()).unwrap_or(i64::MAX).max(0);
        let difference = long("message.timestamp.difference.max.ms");
        Self {
            max_message_bytes,
            log_append_time,
            compacted,
            timestamp_before_max_ms: long("message.timestamp.before.max.ms").min(difference),
            timestamp_after_max_ms: long("message.timestamp.after.max.ms").min(difference),
        }
    }
}

/// A batch that passed validation, ready for the flush buffer.
#[derive(Clone, Debug)]
pub struct ValidatedBatch {
    pub bytes: Bytes,
    /// Offsets the batch occupies (`lastOffsetDelta + 1`).
    pub offset_count: u32,
    pub record_count: u32,
    pub timestamp_min: i64,
    pub timestamp_max: i64,
    /// `baseSequence`; -1 for batches without a producer id.
    pub base_sequence: i32,
    /// The batch's bytes with its records uncompressed (usage metering).
    pub uncompressed_bytes: u64,
}

/// Why a partition's batches were refused. Nothing of a refused partition is written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProduceError {
    #[error("corrupt record batch: {0}")]
    CorruptBatch(#[from] BatchError),
    #[error("record batch of {bytes} bytes exceeds max.message.bytes {max}")]
    BatchTooLarge { bytes: usize, max: usize },
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    #[error("compression codec {0} is not supported")]
    UnsupportedCompression(i16),
    #[error("unknown topic or partition")]
    UnknownTopicOrPartition,
    #[error("invalid required acks {0}: use 0, 1 or -1")]
    InvalidRequiredAcks(i16),
    #[error("transactional batches need the request's transactional id")]
    TransactionalIdRequired,
    #[error("{0}")]
    StorageQuotaExceeded(String),
    /// The topic mirrors another cluster through a link: it takes no writes until promoted.
    #[error("topic is a mirror of link {0:?}; it takes writes once the link is promoted")]
    MirrorTopic(String),
    /// Some records of the batches are refused, and with them the whole request's partition;
    /// each is named by its index among the partition's records.
    #[error("{} of the records refused: {}", .records.len(), .records.first().map_or("", |r| r.message.as_str()))]
    RecordsRefused { why: RecordRefusal, records: Vec<RecordError> },
}

/// Why records were refused one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordRefusal {
    /// A record without a key for a compacted topic (INVALID_RECORD).
    NoKey,
    /// A CreateTime timestamp out of the topic's bounds (INVALID_TIMESTAMP).
    Timestamp,
    /// A key or value without a valid schema, on a topic with schema validation (INVALID_RECORD).
    Schema,
}

/// One refused record: its index among the partition's records in the request, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

/// The most refused records named in one answer. Past it records are not checked for refusals
/// any more: the partition is refused already, and the others may be sent again.
const RECORD_ERRORS_NAMED_MAX: usize = 1000;
/// Longest message given for one refused record (a JSON Schema error may quote the record).
const RECORD_ERROR_MESSAGE_BYTES_MAX: usize = 256;

/// Where a batch's records stand among the partition's records in the request, and how many
/// more refused records may be named.
#[derive(Clone, Copy, Debug)]
struct Place {
    first_index: i32,
    room: usize,
}

/// One partition's validated batches and the producer that wrote them, if it has an id.
#[derive(Clone, Debug)]
pub struct PartitionBatches {
    pub batches: Vec<ValidatedBatch>,
    pub producer: Option<ChunkProducer>,
}

/// Validates one partition's record set. `now_ms` stamps LogAppendTime topics;
/// `transactional_id` is the request's, which transactional batches require; `schemas` is set
/// for topics with schema validation.
pub fn partition_records(
    records: Option<&Bytes>,
    policy: &TopicPolicy,
    now_ms: i64,
    transactional_id: Option<&str>,
    schemas: Option<&SchemaCheck<'_>>,
) -> Result<PartitionBatches, ProduceError> {
    let records =
        records.filter(|r| !r.is_empty()).ok_or_else(|| ProduceError::InvalidRecord("no record batches".into()))?;
    let mut batches = Vec::new();
    let mut producer: Option<Option<ChunkProducer>> = None;
    let mut refused: Option<(RecordRefusal, Vec<RecordError>)> = None;
    let mut first_index = 0i32;
    for part in record_batch::split(records) {
        let (header, bytes) = part?;
        let this = batch_producer(&header, transactional_id)?;
        // Sequencing and deduplication work per producer: one request's batches for a
        // partition all come from one producer (as every Kafka client sends them).
        if producer.is_some_and(|p| p != this) {
            return Err(ProduceError::InvalidRecord("batches of one partition from different producers".into()));
        }
        producer = Some(this);
        let count = header.record_count;
        let named = refused.as_ref().map_or(0, |(_, r): &(RecordRefusal, Vec<RecordError>)| r.len());
        let place = Place { first_index, room: RECORD_ERRORS_NAMED_MAX.saturating_sub(named) };
        match batch(header, bytes, policy, now_ms, place, schemas) {
            Ok(batch) => batches.push(batch),
            // Every batch is checked, so the answer names all the refused records of the kind
            // first found.
            Err(ProduceError::RecordsRefused { why, records }) => match &mut refused {
                Some((kind, named)) if *kind == why => named.extend(records),
                Some(_) => {}
                None => refused = Some((why, records)),
            },
            Err(e) => return Err(e),
        }
        first_index = first_index.saturating_add(count);
    }
    if let Some((why, mut records)) = refused {
        records.truncate(RECORD_ERRORS_NAMED_MAX);
        return Err(ProduceError::RecordsRefused { why, records });
    }
    Ok(PartitionBatches { batches, producer: producer.flatten() })
}

/// The producer a batch names, checked for consistency with its attributes.
fn batch_producer(header: &BatchHeader, transactional_id: Option<&str>) -> Result<Option<ChunkProducer>, ProduceError> {
    let transactional = header.attributes & record_batch::ATTRIBUTE_TRANSACTIONAL != 0;
    if header.producer_id < 0 {
        if transactional {
            return Err(ProduceError::InvalidRecord("transactional batch without a producer id".into()));
        }
        return Ok(None);
    }
    if header.producer_epoch < 0 || header.base_sequence < 0 {
        return Err(ProduceError::InvalidRecord(format!(
            "producer {} with epoch {} and base sequence {}",
            header.producer_id, header.producer_epoch, header.base_sequence
        )));
    }
    if transactional && transactional_id.is_none_or(str::is_empty) {
        return Err(ProduceError::TransactionalIdRequired);
    }
    Ok(Some(ChunkProducer { producer_id: header.producer_id, producer_epoch: header.producer_epoch, transactional }))
}

/// Validates one batch, at `place` among the partition's records.
fn batch(
    header: BatchHeader,
    bytes: Bytes,
    policy: &TopicPolicy,
    now_ms: i64,
    place: Place,
    schemas: Option<&SchemaCheck<'_>>,
) -> Result<ValidatedBatch, ProduceError> {
    if header.batch_bytes > policy.max_message_bytes {
        return Err(ProduceError::BatchTooLarge { bytes: header.batch_bytes, max: policy.max_message_bytes });
    }
    if !record_batch::crc_matches(&bytes, &header) {
        return Err(BatchError::CrcMismatch.into());
    }
    if header.compression() > 4 {
        return Err(ProduceError::UnsupportedCompression(header.compression()));
    }
    if header.is_control() {
        return Err(ProduceError::InvalidRecord("clients may not produce control batches".into()));
    }
    if header.record_count < 1 || header.last_offset_delta != header.record_count - 1 {
        return Err(ProduceError::InvalidRecord(format!(
            "{} records with lastOffsetDelta {}",
            header.record_count, header.last_offset_delta
        )));
    }
    let record_bytes = header.batch_bytes - record_batch::HEADER_BYTES;
    let uncompressed_room = i64::try_from(record_bytes / RECORD_BYTES_MIN).unwrap_or(i64::MAX);
    if header.record_count > BATCH_RECORD_COUNT_MAX
        || (header.compression() == 0 && i64::from(header.record_count) > uncompressed_room)
    {
        return Err(ProduceError::InvalidRecord(format!(
            "{} records cannot fit in {record_bytes} bytes of records (at most {BATCH_RECORD_COUNT_MAX} per batch)",
            header.record_count
        )));
    }
    let records = BatchRecords::new(&header, &bytes);
    if policy.compacted {
        every_record_has_a_key(&records, place)?;
    }
    if let Some(check) = schemas {
        refuse_records(&records, place, RecordRefusal::Schema, |record| check.refusal(record))?;
    }
    if !policy.log_append_time {
        timestamps_within_bounds(&records, policy, now_ms, place)?;
    }
    // Records a check already decompressed are counted as they are.
    let uncompressed_bytes = match records.payload.get() {
        Some(payload) => (record_batch::HEADER_BYTES + payload.len()) as u64,
        None => records::uncompressed_len(&header, &bytes, BATCH_DECOMPRESSED_BYTES_MAX),
    };
    let (bytes, timestamp_min, timestamp_max) = if policy.log_append_time {
        (record_batch::set_log_append_time(&bytes, &header, now_ms), now_ms, now_ms)
    } else {
        (bytes, header.base_timestamp, header.max_timestamp)
    };
    let count = u32::try_from(header.record_count).map_err(|_| ProduceError::InvalidRecord("record count".into()))?;
    Ok(ValidatedBatch {
        uncompressed_bytes,
        bytes,
        offset_count: count,
        record_count: count,
        timestamp_min,
        timestamp_max,
        base_sequence: header.base_sequence,
    })
}

/// Key compaction keeps the latest record per key, so a compacted topic refuses keyless
/// records (as Kafka does). This is the one check that decompresses, with a bound.
fn every_record_has_a_key(records: &BatchRecords<'_>, place: Place) -> Result<(), ProduceError> {
    refuse_records(records, place, RecordRefusal::NoKey, |record| {
        record.key.is_none().then(|| "a compacted topic cannot accept a record without a key".to_owned())
    })
}

/// Refuses the records whose CreateTime timestamps are out of the topic's bounds around
/// `now_ms`. Decompresses only when the batch header's timestamps are out of them.
fn timestamps_within_bounds(
    records: &BatchRecords<'_>,
    policy: &TopicPolicy,
    now_ms: i64,
    place: Place,
) -> Result<(), ProduceError> {
    let header = records.header;
    let (earliest, latest) =
        (now_ms.saturating_sub(policy.timestamp_before_max_ms), now_ms.saturating_add(policy.timestamp_after_max_ms));
    if header.base_timestamp >= earliest && header.max_timestamp <= latest {
        return Ok(());
    }
    refuse_records(records, place, RecordRefusal::Timestamp, |record| {
        let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
        if timestamp < earliest {
            Some(format!(
                "timestamp {timestamp} is more than message.timestamp.before.max.ms ({} ms) before the append time {now_ms}",
                policy.timestamp_before_max_ms
            ))
        } else if timestamp > latest {
            Some(format!(
                "timestamp {timestamp} is more than message.timestamp.after.max.ms ({} ms) after the append time {now_ms}",
                policy.timestamp_after_max_ms
            ))
        } else {
            None
        }
    })
}

/// A batch's records, decompressed (bounded) on first use, once for every check; each check
/// walks them borrowing (no allocation or reference count per record).
struct BatchRecords<'a> {
    header: &'a BatchHeader,
    bytes: &'a Bytes,
    payload: OnceCell<Bytes>,
    /// Set once a walk has read every record and found as many as the header claims; until
    /// then each walk checks that as it goes, so one check costs one pass over the records.
    whole: Cell<bool>,
}

impl<'a> BatchRecords<'a> {
    fn new(header: &'a BatchHeader, bytes: &'a Bytes) -> Self {
        Self { header, bytes, payload: OnceCell::new(), whole: Cell::new(false) }
    }

    /// Gives `visit` each record in order until it breaks. A batch whose records do not parse
    /// or do not number what its header claims is refused, unless `visit` broke before the
    /// walk found out (which it does only to refuse the batch anyway).
    fn walk(&self, mut visit: impl FnMut(records::RecordRef<'_>) -> ControlFlow<()>) -> Result<(), ProduceError> {
        let invalid = |e: RecordsError| ProduceError::InvalidRecord(e.to_string());
        let payload = match self.payload.get() {
            Some(payload) => payload,
            None => {
                let payload =
                    records::decompress(self.header, self.bytes, BATCH_DECOMPRESSED_BYTES_MAX).map_err(invalid)?;
                self.payload.get_or_init(|| payload)
            }
        };
        if self.whole.get() {
            // Every record was read once before, so none fails now.
            for record in records::record_refs(payload).map_while(Result::ok) {
                if visit(record).is_break() {
                    break;
                }
            }
            return Ok(());
        }
        let mut count = 0usize;
        for record in records::record_refs(payload) {
            count += 1;
            if visit(record.map_err(invalid)?).is_break() {
                return Ok(());
            }
        }
        if count != usize::try_from(self.header.record_count).unwrap_or(usize::MAX) {
            return Err(ProduceError::InvalidRecord(format!(
                "batch claims {} records and holds {count}",
                self.header.record_count
            )));
        }
        self.whole.set(true);
        Ok(())
    }
}

/// Refuses the records `refusal` gives a reason for, each named by its index among the
/// partition's records, as many as `place` has room for. With no room left the partition is
/// refused already and the batch is not even decompressed.
fn refuse_records(
    records: &BatchRecords<'_>,
    place: Place,
    why: RecordRefusal,
    refusal: impl Fn(&records::RecordRef<'_>) -> Option<String>,
) -> Result<(), ProduceError> {
    if place.room == 0 {
        return Ok(());
    }
    let mut refused = Vec::new();
    let mut index = place.first_index;
    records.walk(|record| {
        if let Some(mut message) = refusal(&record) {
            if message.len() > RECORD_ERROR_MESSAGE_BYTES_MAX {
                let mut end = RECORD_ERROR_MESSAGE_BYTES_MAX;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
                message.push('…');
            }
            refused.push(RecordError { batch_index: index, message });
            if refused.len() == place.room {
                return ControlFlow::Break(());
            }
        }
        index = index.saturating_add(1);
        ControlFlow::Continue(())
    })?;
    if refused.is_empty() { Ok(()) } else { Err(ProduceError::RecordsRefused { why, records: refused }) }
}

#[cfg(test)]
mod tests;
