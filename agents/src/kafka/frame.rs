//! Response framing. A Fetch response is mostly record batches the partition reads already hold
//! in buffers of their own; encoding it through the codec would copy every byte into one more
//! buffer (megabytes per response, freshly allocated and faulted in). Instead the frame is a list
//! of parts, the encoded fields and those record buffers side by side, written with vectored
//! writes.
//!
//! A Fetch response's fields are written here, field by field in one pass, as the codec
//! (kafka-protocol 0.18, `messages/fetch_response.rs`) writes them for versions 4 to 18: every
//! length prefix the protocol needs is a count or a byte length known before its contents, so
//! nothing is encoded twice, and the frame's own buffer is sized once, up front, for every field
//! and every record buffer too small to share. At 2,000 partitions, mostly empty, all their
//! fields go into that one buffer, with no per-partition allocation or copy. (Before issue 53 each
//! topic, and each partition with records, was encoded twice more through the codec into fresh
//! buffers to find where its variable-length field sat.) The tests compare every version byte for
//! byte with the codec's `FetchResponse::encode`.

use std::collections::{BTreeMap, VecDeque};
use std::io::IoSlice;
use std::ops::RangeInclusive;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, PartitionData, SnapshotId,
};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

/// Record buffers smaller than this are copied into the frame rather than written as parts of
/// their own: a vectored write of many tiny slices costs more than the copy.
const SHARED_RECORDS_BYTES_MIN: usize = 16 * 1024;

/// The Fetch versions written here; any other goes through the codec whole (records copied).
/// These are the versions of kafka-protocol 0.18's FetchResponse, all the agent answers
/// (`api/fetch.rs`). On upgrading the codec, compare its `fetch_response.rs` with the writers
/// below: a tagged field can be added to a version that exists.
const FETCH_VERSIONS_WRITTEN: RangeInclusive<i16> = 4..=18;

/// Most bytes a response header takes: its correlation id and, in flexible versions, an empty
/// tagged-field count.
const RESPONSE_HEADER_BYTES_MAX: usize = 5;

/// The codec's words for a field set that the version cannot carry.
const NOT_IN_VERSION: &str = "A field is set that is not available on the selected protocol version";

/// One framed response: its 4-byte length and everything after it, as parts written in order.
#[derive(Debug, Default)]
pub(super) struct ResponseFrame {
    parts: VecDeque<Bytes>,
    remaining: usize,
}

impl ResponseFrame {
    /// All parts copied into one buffer (tests and fuzzing compare frames this way).
    #[cfg(test)]
    fn to_vec(&self) -> Vec<u8> {
        self.parts.iter().flat_map(|p| p.iter().copied()).collect()
    }
}

impl Buf for ResponseFrame {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], |p| p)
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for (slot, part) in dst.iter_mut().zip(&self.parts) {
            *slot = IoSlice::new(part);
            filled += 1;
        }
        filled
    }

    fn advance(&mut self, mut count: usize) {
        self.remaining = self.remaining.saturating_sub(count);
        while count > 0 {
            let Some(front) = self.parts.front_mut() else { return };
            if count < front.len() {
                front.advance(count);
                return;
            }
            count -= front.len();
            self.parts.pop_front();
        }
    }
}

/// Collects a frame's parts: small pieces go into an open buffer, large record buffers are
/// shared as parts of their own.
#[derive(Default)]
struct FrameBuilder {
    parts: VecDeque<Bytes>,
    open: BytesMut,
}

impl FrameBuilder {
    fn put_records(&mut self, records: &Bytes) {
        if records.len() < SHARED_RECORDS_BYTES_MIN {
            self.open.extend_from_slice(records);
        } else {
            self.seal();
            self.parts.push_back(records.clone());
        }
    }

    fn seal(&mut self) {
        if !self.open.is_empty() {
            self.parts.push_back(self.open.split().freeze());
        }
    }

    /// The frame, with its length in front.
    fn finish(mut self) -> Result<ResponseFrame, String> {
        self.seal();
        let remaining: usize = self.parts.iter().map(Bytes::len).sum();
        let length = i32::try_from(remaining).map_err(|_| "response over 2 GiB".to_owned())?;
        self.parts.push_front(Bytes::copy_from_slice(&length.to_be_bytes()));
        Ok(ResponseFrame { parts: self.parts, remaining: remaining + 4 })
    }
}

/// Frames one response. The codec reports errors as `anyhow::Error`; they become text here.
pub(super) fn encode(
    correlation_id: i32,
    api_key: ApiKey,
    version: i16,
    response: ResponseKind,
) -> Result<ResponseFrame, String> {
    // ApiVersions responses always use header v0, even for flexible versions.
    let header_version = if api_key == ApiKey::ApiVersions { 0 } else { api_key.response_header_version(version) };
    let mut frame = FrameBuilder::default();
    if let ResponseKind::Fetch(fetch) = &response {
        // Room for every byte not shared, so the buffer is allocated once and never moved.
        frame.open.reserve(RESPONSE_HEADER_BYTES_MAX + fetch_open_bytes(fetch, version));
    }
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut frame.open, header_version)
        .map_err(|e| e.to_string())?;
    match response {
        ResponseKind::Fetch(fetch) if FETCH_VERSIONS_WRITTEN.contains(&version) => {
            encode_fetch(&mut frame, version, &fetch)?;
        }
        other => other.encode(&mut frame.open, version).map_err(|e| e.to_string())?,
    }
    frame.finish()
}

/// The bytes of an unsigned varint.
fn unsigned_varint_bytes(value: u32) -> usize {
    (u32::BITS - (value | 1).leading_zeros()).div_ceil(7) as usize
}

/// The bytes of an array's or a byte string's length: an i32, or in compact (flexible) versions
/// an unsigned varint of the length plus one (zero for null).
fn length_bytes(compact: bool, length: Option<usize>) -> usize {
    match (compact, length) {
        (false, _) => 4,
        (true, None) => 1,
        (true, Some(length)) => unsigned_varint_bytes(u32::try_from(length).unwrap_or(u32::MAX).saturating_add(1)),
    }
}

/// The bytes of `response` that go into the frame's own buffer: every field, and the records too
/// small to be shared. Exact but for the contents of tagged fields (the agent sets none; the
/// buffer grows for them) and aborted transactions' unknown tagged fields.
fn fetch_open_bytes(response: &FetchResponse, version: i16) -> usize {
    let flexible = version >= 12;
    let tagged_count = usize::from(flexible);
    // Throttle time, then from v7 error code and session id; topics' count, tagged-field count.
    let mut bytes: usize = if version >= 7 { 4 + 2 + 4 } else { 4 };
    bytes += length_bytes(flexible, Some(response.responses.len())) + tagged_count;
    // Partition index, error code, high watermark, last stable offset, log start offset (v5),
    // preferred read replica (v11), tagged-field count.
    let log_start_offset = if version >= 5 { 8 } else { 0 };
    let preferred_read_replica = if version >= 11 { 4 } else { 0 };
    let partition_fixed = 4 + 2 + 8 + 8 + log_start_offset + preferred_read_replica + tagged_count;
    // Producer id, first offset, tagged-field count.
    let aborted_fixed = 8 + 8 + tagged_count;
    for topic in &response.responses {
        let name = topic.topic.0.len();
        // The name up to v12 (its length an i16, then compact), the id from v13.
        bytes += if version < 12 {
            2 + name
        } else if version == 12 {
            length_bytes(true, Some(name)) + name
        } else {
            16
        };
        bytes += length_bytes(flexible, Some(topic.partitions.len())) + tagged_count;
        for partition in &topic.partitions {
            let aborted = partition.aborted_transactions.as_ref().map(Vec::len);
            let records = partition.records.as_ref().map(Bytes::len);
            bytes += partition_fixed + length_bytes(flexible, aborted) + aborted.unwrap_or(0) * aborted_fixed;
            bytes += length_bytes(flexible, records) + records.filter(|&r| r < SHARED_RECORDS_BYTES_MIN).unwrap_or(0);
        }
    }
    bytes
}

/// The protocol's unsigned varint (the codec keeps its own encoder private).
fn put_unsigned_varint(out: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// An array's or a byte string's length, with the codec's limits: an i32, or in compact
/// (flexible) versions the length plus one as an unsigned varint.
fn put_length(out: &mut BytesMut, compact: bool, length: usize) -> Result<(), String> {
    if compact {
        let length = u32::try_from(length).ok().and_then(|l| l.checked_add(1)).ok_or("length over 4 G")?;
        put_unsigned_varint(out, length);
    } else {
        out.put_i32(i32::try_from(length).map_err(|_| "length over 2 G".to_owned())?);
    }
    Ok(())
}

/// A null array or byte string.
fn put_null(out: &mut BytesMut, compact: bool) {
    if compact {
        out.put_u8(0);
    } else {
        out.put_i32(-1);
    }
}

fn put_tagged_count(out: &mut BytesMut, count: usize) -> Result<(), String> {
    put_unsigned_varint(out, u32::try_from(count).map_err(|_| "too many tagged fields".to_owned())?);
    Ok(())
}

/// A tagged field holding a struct: its tag, its size (the codec's `compute_size`, arithmetic
/// on a few fields) and the struct.
fn put_tagged_struct(out: &mut BytesMut, tag: u32, value: &impl Encodable, version: i16) -> Result<(), String> {
    let size = value.compute_size(version).map_err(|e| e.to_string())?;
    put_unsigned_varint(out, tag);
    put_unsigned_varint(out, u32::try_from(size).map_err(|_| "tagged field over 4 GiB".to_owned())?);
    value.encode(out, version).map_err(|e| e.to_string())
}

/// A message's unknown tagged fields as the codec writes them: those from tag `first` on (its
/// count includes them all).
fn put_unknown_tagged_fields(out: &mut BytesMut, fields: &BTreeMap<i32, Bytes>, first: i32) -> Result<(), String> {
    for (&tag, value) in fields.range(first..) {
        let length = u32::try_from(value.len()).map_err(|_| "tagged field over 4 GiB".to_owned())?;
        put_unsigned_varint(out, tag as u32);
        put_unsigned_varint(out, length);
        out.extend_from_slice(value);
    }
    Ok(())
}

/// A partition's tagged structs as the codec leaves them out: at their defaults.
struct PartitionTagDefaults {
    diverging_epoch: EpochEndOffset,
    current_leader: LeaderIdAndEpoch,
    snapshot_id: SnapshotId,
}

/// A Fetch response (versions [`FETCH_VERSIONS_WRITTEN`]), its records shared rather than
/// copied. Field for field the codec's `FetchResponse::encode`, with its checks.
fn encode_fetch(frame: &mut FrameBuilder, version: i16, response: &FetchResponse) -> Result<(), String> {
    // Fetch v12 and later are flexible: compact lengths and tagged fields.
    let flexible = version >= 12;
    let out = &mut frame.open;
    out.put_i32(response.throttle_time_ms);
    if version >= 7 {
        out.put_i16(response.error_code);
        out.put_i32(response.session_id);
    } else if response.session_id != 0 {
        return Err(NOT_IN_VERSION.to_owned());
    }
    put_length(out, flexible, response.responses.len())?;
    let defaults = PartitionTagDefaults {
        diverging_epoch: EpochEndOffset::default(),
        current_leader: LeaderIdAndEpoch::default(),
        snapshot_id: SnapshotId::default(),
    };
    for topic in &response.responses {
        encode_fetch_topic(frame, version, &defaults, topic)?;
    }
    if !flexible {
        return Ok(());
    }
    let out = &mut frame.open;
    let endpoints = &response.node_endpoints;
    let with_endpoints = version >= 16 && !endpoints.is_empty();
    put_tagged_count(out, response.unknown_tagged_fields.len() + usize::from(with_endpoints))?;
    if with_endpoints {
        let mut size = length_bytes(true, Some(endpoints.len()));
        for endpoint in endpoints {
            size += endpoint.compute_size(version).map_err(|e| e.to_string())?;
        }
        put_unsigned_varint(out, 0);
        put_unsigned_varint(out, u32::try_from(size).map_err(|_| "tagged field over 4 GiB".to_owned())?);
        put_length(out, true, endpoints.len())?;
        for endpoint in endpoints {
            endpoint.encode(out, version).map_err(|e| e.to_string())?;
        }
    }
    put_unknown_tagged_fields(out, &response.unknown_tagged_fields, 1)
}

fn encode_fetch_topic(
    frame: &mut FrameBuilder,
    version: i16,
    defaults: &PartitionTagDefaults,
    topic: &FetchableTopicResponse,
) -> Result<(), String> {
    let flexible = version >= 12;
    let out = &mut frame.open;
    // The name up to v12, the id from v13.
    if version <= 12 {
        let name = topic.topic.0.as_str().as_bytes();
        if flexible {
            put_length(out, true, name.len())?;
        } else {
            out.put_i16(i16::try_from(name.len()).map_err(|_| "topic name over 32 KiB".to_owned())?);
        }
        out.extend_from_slice(name);
    }
    if version >= 13 {
        out.extend_from_slice(topic.topic_id.as_bytes());
    }
    put_length(out, flexible, topic.partitions.len())?;
    for partition in &topic.partitions {
        encode_fetch_partition(frame, version, defaults, partition)?;
    }
    if flexible {
        let out = &mut frame.open;
        put_tagged_count(out, topic.unknown_tagged_fields.len())?;
        put_unknown_tagged_fields(out, &topic.unknown_tagged_fields, 0)?;
    }
    Ok(())
}

fn encode_fetch_partition(
    frame: &mut FrameBuilder,
    version: i16,
    defaults: &PartitionTagDefaults,
    partition: &PartitionData,
) -> Result<(), String> {
    let flexible = version >= 12;
    let out = &mut frame.open;
    out.put_i32(partition.partition_index);
    out.put_i16(partition.error_code);
    out.put_i64(partition.high_watermark);
    out.put_i64(partition.last_stable_offset);
    if version >= 5 {
        out.put_i64(partition.log_start_offset);
    }
    match &partition.aborted_transactions {
        None => put_null(out, flexible),
        Some(aborted) => {
            put_length(out, flexible, aborted.len())?;
            for transaction in aborted {
                transaction.encode(out, version).map_err(|e| e.to_string())?;
            }
        }
    }
    if version >= 11 {
        out.put_i32(partition.preferred_read_replica.0);
    } else if partition.preferred_read_replica.0 != -1 {
        return Err(NOT_IN_VERSION.to_owned());
    }
    match &partition.records {
        None => put_null(out, flexible),
        Some(records) => {
            put_length(out, flexible, records.len())?;
            frame.put_records(records);
        }
    }
    if !flexible {
        return Ok(());
    }
    let out = &mut frame.open;
    let diverging_epoch = partition.diverging_epoch != defaults.diverging_epoch;
    let current_leader = partition.current_leader != defaults.current_leader;
    let snapshot_id = partition.snapshot_id != defaults.snapshot_id;
    let known = usize::from(diverging_epoch) + usize::from(current_leader) + usize::from(snapshot_id);
    put_tagged_count(out, partition.unknown_tagged_fields.len() + known)?;
    if diverging_epoch {
        put_tagged_struct(out, 0, &partition.diverging_epoch, version)?;
    }
    if current_leader {
        put_tagged_struct(out, 1, &partition.current_leader, version)?;
    }
    if snapshot_id {
        put_tagged_struct(out, 2, &partition.snapshot_id, version)?;
    }
    put_unknown_tagged_fields(out, &partition.unknown_tagged_fields, 3)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::{AbortedTransaction, NodeEndpoint};
    use kafka_protocol::messages::{BrokerId, ProducerId, TopicName};
    use kafka_protocol::protocol::{Message, StrBytes};
    use uuid::Uuid;

    use super::*;

    /// The frame the codec writes in one buffer, as the connection wrote every response before;
    /// `None` where the codec refuses the response in that version.
    fn codec_frame(correlation_id: i32, version: i16, response: &ResponseKind) -> Option<Vec<u8>> {
        let mut out = BytesMut::new();
        out.put_i32(0);
        let header_version = ApiKey::Fetch.response_header_version(version);
        ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut out, header_version).unwrap();
        response.encode(&mut out, version).ok()?;
        let length = (out.len() - 4) as i32;
        out[0..4].copy_from_slice(&length.to_be_bytes());
        Some(out.to_vec())
    }

    fn partition(index: i32, records: Option<Bytes>) -> PartitionData {
        PartitionData::default()
            .with_partition_index(index)
            .with_high_watermark(1_000 + i64::from(index))
            .with_last_stable_offset(900)
            .with_log_start_offset(7)
            .with_aborted_transactions(Some(vec![
                AbortedTransaction::default().with_producer_id(ProducerId(42)).with_first_offset(5),
            ]))
            .with_records(records)
    }

    fn topic(name: &'static str, id: u128, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str(name)))
            .with_topic_id(Uuid::from_u128(id))
            .with_partitions(partitions)
    }

    fn large_records() -> Bytes {
        Bytes::from((0..100_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>())
    }

    fn response(large: &Bytes) -> FetchResponse {
        let small = Bytes::from_static(b"a small batch");
        let mut tagged = partition(3, Some(large.clone()));
        // Tagged fields after the records: the frame must carry them after the shared part.
        tagged.current_leader.leader_id = BrokerId(2);
        tagged.current_leader.leader_epoch = 9;
        let orders = topic(
            "orders",
            7,
            vec![
                partition(0, Some(large.clone())),
                partition(1, Some(small)),
                partition(2, None),
                partition(4, Some(Bytes::new())),
                tagged,
            ],
        );
        FetchResponse::default().with_throttle_time_ms(12).with_session_id(0).with_responses(vec![
            orders,
            topic("empty", 8, vec![]),
            FetchableTopicResponse::default(),
        ])
    }

    /// What the agent answers a consumer of many partitions with nothing new: 20 topics of 100
    /// partitions and one of 2,000 (a partition count over a one-byte varint), their records
    /// empty or null.
    fn empty_partitions() -> FetchResponse {
        let empty = |index: i32| {
            let records = if index % 2 == 0 { Some(Bytes::new()) } else { None };
            PartitionData::default()
                .with_partition_index(index)
                .with_high_watermark(123_456 + i64::from(index))
                .with_last_stable_offset(123_456)
                .with_log_start_offset(100)
                .with_records(records)
        };
        const NAMES: [&str; 20] = [
            "t00", "t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09", "t10", "t11", "t12", "t13", "t14",
            "t15", "t16", "t17", "t18", "t19",
        ];
        let mut topics: Vec<_> =
            NAMES.into_iter().zip(1u128..).map(|(name, id)| topic(name, id, (0..100).map(empty).collect())).collect();
        topics.push(topic("one-topic-of-two-thousand-partitions", 99, (0..2_000).map(empty).collect()));
        FetchResponse::default().with_responses(topics)
    }

    /// Partitions with no, empty and several aborted transactions, records small and large.
    fn aborted_transactions(large: &Bytes) -> FetchResponse {
        let aborted = |producer: i64, first: i64| {
            AbortedTransaction::default().with_producer_id(ProducerId(producer)).with_first_offset(first)
        };
        let partitions = vec![
            partition(0, Some(Bytes::from_static(b"batch"))).with_aborted_transactions(None),
            partition(1, Some(Bytes::from_static(b"batch"))).with_aborted_transactions(Some(vec![])),
            partition(2, Some(large.clone())).with_aborted_transactions(Some(vec![
                aborted(1, 10),
                aborted(2, 20),
                aborted(3, 30),
            ])),
            partition(3, None).with_aborted_transactions(Some((0..200).map(|i| aborted(i, i * 2)).collect())),
        ];
        FetchResponse::default().with_responses(vec![topic("transactions", 3, partitions)])
    }

    /// A read replica preferred (v11 on; before, the codec refuses it).
    fn preferred_read_replica() -> FetchResponse {
        let partitions = vec![
            partition(0, Some(Bytes::new())).with_preferred_read_replica(BrokerId(2)),
            partition(1, Some(Bytes::from_static(b"batch"))),
        ];
        FetchResponse::default().with_responses(vec![topic("replicated", 4, partitions)])
    }

    /// Errors: the response's (written from v7) and partitions'.
    fn errors() -> FetchResponse {
        let failed = |index: i32, code: i16| {
            PartitionData::default()
                .with_partition_index(index)
                .with_error_code(code)
                .with_high_watermark(-1)
                .with_records(Some(Bytes::new()))
        };
        let partitions = vec![failed(0, 3), failed(1, 6), failed(2, 1), partition(3, Some(Bytes::from_static(b"ok")))];
        FetchResponse::default()
            .with_throttle_time_ms(250)
            .with_error_code(0)
            .with_responses(vec![topic("failing", 5, partitions), topic("unknown", 6, vec![failed(0, 100)])])
    }

    /// A whole response refused (no topics), as for a fetch session error.
    fn session_error() -> FetchResponse {
        FetchResponse::default().with_error_code(70)
    }

    /// A fetch session's id (v7 on; before, the codec refuses it).
    fn session() -> FetchResponse {
        FetchResponse::default().with_session_id(123_456_789).with_responses(vec![topic(
            "session",
            9,
            vec![partition(0, Some(Bytes::from_static(b"batch")))],
        )])
    }

    /// Every tagged field (v12 on; before, the codec leaves them out), with unknown ones at every
    /// level, some of them under a known tag (the codec counts those and does not write them).
    fn tagged_fields(large: &Bytes) -> FetchResponse {
        let tag = Bytes::from_static(b"unknown tagged field");
        let diverging = partition(0, Some(Bytes::from_static(b"batch"))).with_diverging_epoch(
            EpochEndOffset::default().with_epoch(4).with_end_offset(1_234).with_unknown_tagged_field(1, tag.clone()),
        );
        let leader = partition(1, Some(large.clone()))
            .with_current_leader(LeaderIdAndEpoch::default().with_leader_id(BrokerId(3)).with_leader_epoch(11))
            .with_unknown_tagged_field(7, tag.clone());
        let snapshot = partition(2, None)
            .with_snapshot_id(SnapshotId::default().with_end_offset(99).with_epoch(2))
            .with_aborted_transactions(Some(vec![
                AbortedTransaction::default().with_producer_id(ProducerId(8)).with_unknown_tagged_field(4, tag.clone()),
            ]));
        let all = partition(3, Some(Bytes::new()))
            .with_diverging_epoch(EpochEndOffset::default().with_epoch(1).with_end_offset(10))
            .with_current_leader(LeaderIdAndEpoch::default().with_leader_id(BrokerId(1)).with_leader_epoch(1))
            .with_snapshot_id(SnapshotId::default().with_end_offset(5).with_epoch(1))
            .with_unknown_tagged_field(1, tag.clone())
            .with_unknown_tagged_field(300, Bytes::from(vec![9u8; 200]));
        let endpoints = vec![
            NodeEndpoint::default()
                .with_node_id(BrokerId(3))
                .with_host(StrBytes::from_static_str("agent-3.floe"))
                .with_port(9092)
                .with_rack(Some(StrBytes::from_static_str("zone-a"))),
            NodeEndpoint::default().with_node_id(BrokerId(1)).with_host(StrBytes::from_static_str("agent-1")),
        ];
        let tagged_topic = topic("tagged", 10, vec![diverging, leader, snapshot, all])
            .with_unknown_tagged_field(0, tag.clone())
            .with_unknown_tagged_field(2, tag.clone());
        FetchResponse::default()
            .with_responses(vec![tagged_topic])
            .with_node_endpoints(endpoints)
            .with_unknown_tagged_field(0, tag.clone())
            .with_unknown_tagged_field(5, tag)
    }

    /// Each response in every version: byte for byte the codec's frame, or refused where the
    /// codec refuses it (and written from `from` on).
    #[test]
    fn every_fetch_field_is_written_as_the_codec_writes_it_in_every_version() {
        let large = large_records();
        let cases: [(&str, i16, FetchResponse); 9] = [
            ("records", 4, response(&large)),
            ("empty partitions", 4, empty_partitions()),
            ("aborted transactions", 4, aborted_transactions(&large)),
            ("preferred read replica", 11, preferred_read_replica()),
            ("errors", 4, errors()),
            ("session error", 4, session_error()),
            ("session", 7, session()),
            ("tagged fields", 4, tagged_fields(&large)),
            ("no topics", 4, FetchResponse::default()),
        ];
        for (name, from, response) in cases {
            for version in 4..=18 {
                let response = ResponseKind::Fetch(response.clone());
                let expected = codec_frame(77, version, &response);
                assert_eq!(expected.is_some(), version >= from, "{name} v{version}: the codec's verdict");
                match (encode(77, ApiKey::Fetch, version, response), expected) {
                    (Ok(frame), Some(expected)) => {
                        assert_eq!(frame.remaining(), expected.len(), "{name} v{version}");
                        assert_eq!(frame.to_vec(), expected, "{name} v{version}");
                    }
                    (Err(_), None) => {}
                    (ours, codec) => panic!("{name} v{version}: ours {:?}, codec's {}", ours.err(), codec.is_some()),
                }
            }
        }
    }

    #[test]
    fn a_fetch_frame_shares_large_records_and_copies_small_ones() {
        let large = large_records();
        for version in 4..=18 {
            let frame = encode(77, ApiKey::Fetch, version, ResponseKind::Fetch(response(&large))).unwrap();
            // The large records went out as parts of their own, the very buffers, not copies:
            // the length, then fields, records, fields, records, fields (the small batch copied).
            let shared: Vec<_> = frame.parts.iter().filter(|p| p.as_ptr() == large.as_ptr()).collect();
            assert_eq!(shared.len(), 2, "v{version}");
            assert!(shared.iter().all(|p| p.len() == large.len()), "v{version}");
            assert_eq!(frame.parts.len(), 6, "v{version}");
        }
    }

    /// Empty partitions cost their fields' bytes: all of them in one buffer, allocated once at
    /// its final size.
    #[test]
    fn empty_partitions_go_into_one_buffer_sized_up_front() {
        for version in 4..=18 {
            let response = empty_partitions();
            let sized = fetch_open_bytes(&response, version);
            let frame = encode(1, ApiKey::Fetch, version, ResponseKind::Fetch(response)).unwrap();
            assert_eq!(frame.parts.len(), 2, "v{version}: the length, then one buffer");
            let header = if ApiKey::Fetch.response_header_version(version) >= 1 { 5 } else { 4 };
            assert_eq!(frame.remaining(), 4 + header + sized, "v{version}: sized exactly");
        }
    }

    #[test]
    fn the_size_reserved_is_exact_without_tagged_fields() {
        let large = large_records();
        for version in 4..=18 {
            for response in [aborted_transactions(&large), errors(), FetchResponse::default()] {
                let sized = fetch_open_bytes(&response, version);
                let frame = encode(1, ApiKey::Fetch, version, ResponseKind::Fetch(response)).unwrap();
                let header = if ApiKey::Fetch.response_header_version(version) >= 1 { 5 } else { 4 };
                let shared: usize = frame.parts.iter().filter(|p| p.as_ptr() == large.as_ptr()).map(|p| p.len()).sum();
                assert_eq!(frame.remaining(), 4 + header + sized + shared, "v{version}");
            }
        }
    }

    /// The fields are written here for the codec's Fetch versions; a codec with more must be
    /// compared with these writers before the agent answers them.
    #[test]
    fn the_fetch_versions_written_are_the_codecs() {
        let codec = FetchResponse::VERSIONS;
        assert_eq!(
            (codec.min, codec.max),
            (*FETCH_VERSIONS_WRITTEN.start(), *FETCH_VERSIONS_WRITTEN.end()),
            "kafka-protocol's FetchResponse versions changed: compare its fetch_response.rs with encode_fetch*"
        );
        // Any other version is the codec's to refuse (or, in a newer codec, to write whole).
        assert!(encode(1, ApiKey::Fetch, 19, ResponseKind::Fetch(FetchResponse::default())).is_err());
    }

    #[test]
    fn a_frame_written_in_pieces_of_any_size_is_the_whole_frame() {
        let response = ResponseKind::Fetch(response(&large_records()));
        let expected = codec_frame(1, 16, &response).unwrap();
        let mut frame = encode(1, ApiKey::Fetch, 16, response).unwrap();
        let mut written = Vec::new();
        let mut step = 1;
        while frame.has_remaining() {
            let mut slices = [IoSlice::new(&[]); 8];
            let count = frame.chunks_vectored(&mut slices);
            let available: usize = slices[..count].iter().map(|s| s.len()).sum();
            // A short write: part of the first slices only.
            let take = step.min(available);
            let mut left = take;
            for slice in &slices[..count] {
                let n = left.min(slice.len());
                written.extend_from_slice(&slice[..n]);
                left -= n;
            }
            frame.advance(take);
            step = step * 3 + 1;
        }
        assert_eq!(written, expected);
    }

    #[test]
    fn other_responses_are_framed_whole() {
        let response = ResponseKind::ApiVersions(Default::default());
        let frame = encode(5, ApiKey::ApiVersions, 3, response).unwrap();
        assert_eq!(frame.parts.len(), 2);
        let bytes = frame.to_vec();
        assert_eq!(i32::from_be_bytes(bytes[0..4].try_into().unwrap()) as usize, bytes.len() - 4);
        assert_eq!(i32::from_be_bytes(bytes[4..8].try_into().unwrap()), 5);
    }
}
