//! Checks produced record batches without decompressing them (except to find keyless records
//! for compacted topics), and applies the topic's timestamp policy. Pure: no I/O, no shared state.

use bytes::Bytes;
use floe_metadata::{ChunkProducer, State, Topic};

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
        Self { max_message_bytes, log_append_time, compacted }
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
}

/// One partition's validated batches and the producer that wrote them, if it has an id.
#[derive(Clone, Debug)]
pub struct PartitionBatches {
    pub batches: Vec<ValidatedBatch>,
    pub producer: Option<ChunkProducer>,
}

/// Validates one partition's record set. `now_ms` stamps LogAppendTime topics;
/// `transactional_id` is the request's, which transactional batches require.
pub fn partition_records(
    records: Option<&Bytes>,
    policy: &TopicPolicy,
    now_ms: i64,
    transactional_id: Option<&str>,
) -> Result<PartitionBatches, ProduceError> {
    let records =
        records.filter(|r| !r.is_empty()).ok_or_else(|| ProduceError::InvalidRecord("no record batches".into()))?;
    let mut batches = Vec::new();
    let mut producer: Option<Option<ChunkProducer>> = None;
    for part in record_batch::split(records) {
        let (header, bytes) = part?;
        let this = batch_producer(&header, transactional_id)?;
        // Sequencing and deduplication work per producer: one request's batches for a
        // partition all come from one producer (as every Kafka client sends them).
        if producer.is_some_and(|p| p != this) {
            return Err(ProduceError::InvalidRecord("batches of one partition from different producers".into()));
        }
        producer = Some(this);
        batches.push(batch(header, bytes, policy, now_ms)?);
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

fn batch(header: BatchHeader, bytes: Bytes, policy: &TopicPolicy, now_ms: i64) -> Result<ValidatedBatch, ProduceError> {
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
    if policy.compacted {
        every_record_has_a_key(&header, &bytes)?;
    }
    let (bytes, timestamp_min, timestamp_max) = if policy.log_append_time {
        (record_batch::set_log_append_time(&bytes, &header, now_ms), now_ms, now_ms)
    } else {
        (bytes, header.base_timestamp, header.max_timestamp)
    };
    let count = u32::try_from(header.record_count).map_err(|_| ProduceError::InvalidRecord("record count".into()))?;
    Ok(ValidatedBatch {
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
fn every_record_has_a_key(header: &BatchHeader, bytes: &Bytes) -> Result<(), ProduceError> {
    let invalid = |e: RecordsError| ProduceError::InvalidRecord(e.to_string());
    let payload = records::decompress(header, bytes, BATCH_DECOMPRESSED_BYTES_MAX).map_err(invalid)?;
    let mut count = 0i32;
    for record in records::records(&payload) {
        if record.map_err(invalid)?.key.is_none() {
            return Err(ProduceError::InvalidRecord("a compacted topic cannot accept a record without a key".into()));
        }
        count += 1;
    }
    if count != header.record_count {
        return Err(ProduceError::InvalidRecord(format!(
            "batch claims {} records and holds {count}",
            header.record_count
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
