//! Response framing. A Fetch response is mostly record batches the partition reads already hold
//! in buffers of their own; encoding it through the codec would copy every byte into one more
//! buffer (megabytes per response, freshly allocated and faulted in). Instead the frame is a list
//! of parts, the encoded fields and those record buffers side by side, written with vectored
//! writes.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;

/// Record buffers smaller than this are copied into the frame rather than written as parts of
/// their own: a vectored write of many tiny slices costs more than the copy.
const SHARED_RECORDS_BYTES_MIN: usize = 16 * 1024;

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
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut frame.open, header_version)
        .map_err(|e| e.to_string())?;
    match response {
        ResponseKind::Fetch(fetch) => encode_fetch(&mut frame, version, fetch)?,
        other => other.encode(&mut frame.open, version).map_err(|e| e.to_string())?,
    }
    frame.finish()
}

/// How a message encodes around its variable-length field (records, or an array): the bytes
/// before the field's length and the bytes after its contents.
struct AroundField {
    before: Bytes,
    after: Bytes,
}

impl AroundField {
    /// Found from two encodings of the same message, `empty` with that field empty and `one` with
    /// one byte or element in it: they first differ in the last byte of the field's length
    /// (`0` against `1`, or varint `1` against `2`), so the field starts there, and everything
    /// after the empty field's length is the rest of the message (its tagged fields). Found this
    /// way, not by counting the codec's fields, it stays right whatever the message version holds.
    fn find(empty: Bytes, one: &[u8], compact: bool) -> Result<Self, String> {
        let length_bytes = if compact { 1 } else { 4 };
        let differs = empty.iter().zip(one).position(|(a, b)| a != b).ok_or("field not found in encoding")?;
        let start = (differs + 1).checked_sub(length_bytes).ok_or("field length before message start")?;
        let empty_length: &[u8] = if compact { &[1] } else { &[0, 0, 0, 0] };
        if empty.get(start..start + length_bytes) != Some(empty_length) {
            return Err("field length not where expected".to_owned());
        }
        Ok(AroundField { before: empty.slice(..start), after: empty.slice(start + length_bytes..) })
    }

    /// Writes the message with a field of `length` elements or bytes, whose contents `contents`
    /// writes.
    fn write(
        &self,
        frame: &mut FrameBuilder,
        compact: bool,
        length: usize,
        contents: impl FnOnce(&mut FrameBuilder) -> Result<(), String>,
    ) -> Result<(), String> {
        frame.open.extend_from_slice(&self.before);
        let length = u32::try_from(length).map_err(|_| "field over 4 G elements".to_owned())?;
        if compact {
            put_unsigned_varint(&mut frame.open, length.saturating_add(1));
        } else {
            let length = i32::try_from(length).map_err(|_| "field over 2 G elements".to_owned())?;
            frame.open.put_i32(length);
        }
        contents(frame)?;
        frame.open.extend_from_slice(&self.after);
        Ok(())
    }
}

/// The protocol's unsigned varint (the codec keeps its own encoder private).
fn put_unsigned_varint(out: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

fn encoded(message: &impl Encodable, version: i16) -> Result<Bytes, String> {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).map_err(|e| e.to_string())?;
    Ok(out.freeze())
}

/// A Fetch response, its records shared rather than copied.
fn encode_fetch(frame: &mut FrameBuilder, version: i16, mut response: FetchResponse) -> Result<(), String> {
    // Fetch v12 and later use compact lengths.
    let compact = version >= 12;
    let topics = std::mem::take(&mut response.responses);
    let empty = encoded(&response, version)?;
    response.responses = vec![FetchableTopicResponse::default()];
    let around = AroundField::find(empty, &encoded(&response, version)?, compact)?;
    around.write(frame, compact, topics.len(), |frame| {
        topics.into_iter().try_for_each(|topic| encode_fetch_topic(frame, version, compact, topic))
    })
}

fn encode_fetch_topic(
    frame: &mut FrameBuilder,
    version: i16,
    compact: bool,
    mut topic: FetchableTopicResponse,
) -> Result<(), String> {
    let partitions = std::mem::take(&mut topic.partitions);
    let empty = encoded(&topic, version)?;
    topic.partitions = vec![PartitionData::default()];
    let around = AroundField::find(empty, &encoded(&topic, version)?, compact)?;
    around.write(frame, compact, partitions.len(), |frame| {
        partitions.into_iter().try_for_each(|partition| encode_fetch_partition(frame, version, compact, partition))
    })
}

fn encode_fetch_partition(
    frame: &mut FrameBuilder,
    version: i16,
    compact: bool,
    mut partition: PartitionData,
) -> Result<(), String> {
    let records = match partition.records.take() {
        Some(records) if !records.is_empty() => records,
        // Nothing to share: the codec writes it whole (a null or empty records field).
        records => {
            partition.records = records;
            return partition.encode(&mut frame.open, version).map_err(|e| e.to_string());
        }
    };
    partition.records = Some(Bytes::new());
    let empty = encoded(&partition, version)?;
    partition.records = Some(Bytes::from_static(b"-"));
    let around = AroundField::find(empty, &encoded(&partition, version)?, compact)?;
    around.write(frame, compact, records.len(), |frame| {
        frame.put_records(&records);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::AbortedTransaction;
    use kafka_protocol::messages::{ProducerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    use uuid::Uuid;

    use super::*;

    /// The frame the codec writes in one buffer, as the connection wrote every response before.
    fn codec_frame(correlation_id: i32, version: i16, response: &ResponseKind) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_i32(0);
        let header_version = ApiKey::Fetch.response_header_version(version);
        ResponseHeader::default().with_correlation_id(correlation_id).encode(&mut out, header_version).unwrap();
        response.encode(&mut out, version).unwrap();
        let length = (out.len() - 4) as i32;
        out[0..4].copy_from_slice(&length.to_be_bytes());
        out.to_vec()
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

    fn response() -> FetchResponse {
        let large = Bytes::from((0..100_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let small = Bytes::from_static(b"a small batch");
        let mut tagged = partition(3, Some(large.clone()));
        // Tagged fields after the records: the frame must carry them after the shared part.
        tagged.current_leader.leader_id = kafka_protocol::messages::BrokerId(2);
        tagged.current_leader.leader_epoch = 9;
        let orders = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("orders")))
            .with_topic_id(Uuid::from_u128(7))
            .with_partitions(vec![
                partition(0, Some(large.clone())),
                partition(1, Some(small)),
                partition(2, None),
                partition(4, Some(Bytes::new())),
                tagged,
            ]);
        let empty_topic = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("empty")))
            .with_topic_id(Uuid::from_u128(8));
        FetchResponse::default().with_throttle_time_ms(12).with_session_id(0).with_responses(vec![
            orders,
            empty_topic,
            FetchableTopicResponse::default(),
        ])
    }

    #[test]
    fn a_fetch_frame_with_shared_records_is_byte_for_byte_the_codecs_in_every_version() {
        for version in 4..=18 {
            let response = ResponseKind::Fetch(response());
            let expected = codec_frame(77, version, &response);
            let frame = encode(77, ApiKey::Fetch, version, response).unwrap();
            assert_eq!(frame.remaining(), expected.len(), "v{version}");
            assert_eq!(frame.to_vec(), expected, "v{version}");
            // The large records went out as parts of their own, not copied.
            assert!(frame.parts.iter().any(|p| p.len() == 100_000), "v{version}");
        }
    }

    #[test]
    fn a_frame_written_in_pieces_of_any_size_is_the_whole_frame() {
        let response = ResponseKind::Fetch(response());
        let expected = codec_frame(1, 16, &response);
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
