//! A Kafka client for tests, over the in-memory duplex of [`crate::TestAgent::kafka`]: requests
//! framed and encoded with `kafka-protocol`, sent one after another without waiting (so a test
//! can pipeline them), and responses read back in order. Also the requests most tests send, the
//! record batches they carry, and the records of a Fetch answer as a consumer decodes them.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use floe_agent::record_batch::BatchHeader;
use floe_agent::record_batch::build::{NewRecord, build_batch};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, FetchRequest, ListOffsetsRequest, ProduceRequest, ProduceResponse,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{Record, RecordBatchDecoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// Produce v9: flexible, topics by name (v13 names them by id).
pub const PRODUCE_VERSION: i16 = 9;
/// Fetch v12: flexible, topics by name (v13 names them by id).
pub const FETCH_VERSION: i16 = 12;
/// ListOffsets v7: flexible, with leader epochs.
pub const LIST_OFFSETS_VERSION: i16 = 7;
/// CreateTopics v7: answers with the topic's id.
pub const CREATE_TOPICS_VERSION: i16 = 7;

/// ListOffsets' timestamp for the log end offset (the high watermark).
const LATEST: i64 = -1;
/// Longest wait for one response: a test fails rather than hangs.
const RESPONSE_WAIT: Duration = Duration::from_secs(30);
/// Bytes a Fetch asks for per partition: far more than a test produces.
const FETCH_PARTITION_BYTES_MAX: i32 = 1 << 20;
/// The client id requests carry, as the agent's logs name it.
const CLIENT_ID: &str = "floe-testing";

/// One Kafka connection to a [`crate::TestAgent`].
#[derive(Debug)]
pub struct KafkaClient {
    stream: DuplexStream,
    /// The correlation id of the last request sent.
    correlation_id: i32,
}

impl KafkaClient {
    pub(crate) fn new(stream: DuplexStream) -> Self {
        Self { stream, correlation_id: 0 }
    }

    /// Sends `request` at `version` without waiting for its answer; returns its correlation id.
    pub async fn send<R: Request>(&mut self, request: &R, version: i16) -> i32 {
        let mut body = BytesMut::new();
        request.encode(&mut body, version).expect("request encodes");
        self.write_request(R::KEY, version, R::header_version(version), &body).await
    }

    /// Sends `body` as a request of `api_key` at `version`, under the header that version takes,
    /// without encoding or checking anything of it: for requests `kafka-protocol` will not
    /// encode, such as a version newer than any it knows. Returns its correlation id.
    pub async fn send_raw(&mut self, api_key: ApiKey, version: i16, body: &[u8]) -> i32 {
        self.write_request(api_key as i16, version, api_key.request_header_version(version), body).await
    }

    /// Frames a request header and `body` and writes them; returns the request's correlation id.
    async fn write_request(&mut self, api_key: i16, version: i16, header_version: i16, body: &[u8]) -> i32 {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
        let mut frame = BytesMut::new();
        frame.put_i32(0); // The length, written below.
        header.encode(&mut frame, header_version).expect("request header encodes");
        frame.put_slice(body);
        let length = i32::try_from(frame.len() - 4).expect("a request under 2 GiB");
        frame[..4].copy_from_slice(&length.to_be_bytes());
        self.stream.write_all(&frame).await.expect("request written");
        self.correlation_id
    }

    /// Reads the next response, which the agent sends in request order, as an answer to `R` at
    /// `version`; returns its correlation id with it.
    pub async fn recv<R: Request>(&mut self, version: i16) -> (i32, R::Response) {
        let read = async {
            let length = self.stream.read_i32().await?;
            let mut body = vec![0u8; usize::try_from(length).expect("a response length is not negative")];
            self.stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(Bytes::from(body))
        };
        let mut body =
            tokio::time::timeout(RESPONSE_WAIT, read).await.expect("answered in time").expect("response read");
        let header_version = <R::Response as HeaderVersion>::header_version(version);
        let header = ResponseHeader::decode(&mut body, header_version).expect("response header decodes");
        let response = <R::Response as Decodable>::decode(&mut body, version).unwrap_or_else(|e| {
            panic!("response {} is not an answer of API key {} v{version}: {e}", header.correlation_id, R::KEY)
        });
        (header.correlation_id, response)
    }

    /// Sends `request` and waits for its answer, checking it is the next one.
    pub async fn call<R: Request>(&mut self, request: &R, version: i16) -> R::Response {
        let sent = self.send(request, version).await;
        let (answered, response) = self.recv::<R>(version).await;
        assert_eq!(answered, sent, "the next response answers the request sent last");
        response
    }

    /// Creates `name` with `partition_count` partitions through CreateTopics; panics on an error.
    pub async fn create_topic(&mut self, name: &str, partition_count: i32) {
        let topic = CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partition_count)
            .with_replication_factor(-1);
        let request = CreateTopicsRequest::default().with_topics(vec![topic]).with_timeout_ms(30_000);
        let response = self.call(&request, CREATE_TOPICS_VERSION).await;
        let result = response.topics.first().expect("the topic is answered");
        assert_eq!(result.error_code, 0, "creating topic {name}: {:?}", result.error_message);
    }

    /// Produces `records` (whole v2 batches, as [`record_batch`] makes) to one partition and
    /// returns the partition's answer; with `acks` 0 the agent answers nothing and neither does
    /// this.
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
    ) -> Option<PartitionProduceResponse> {
        let request = produce_request(topic, partition, records, acks);
        if acks == 0 {
            self.send(&request, PRODUCE_VERSION).await;
            return None;
        }
        Some(partition_answer(self.call(&request, PRODUCE_VERSION).await))
    }

    /// Fetches one partition from `offset`, answered at once with what is there (no long poll).
    pub async fn fetch(&mut self, topic: &str, partition: i32, offset: i64) -> PartitionData {
        let response = self.call(&fetch_request(topic, partition, offset), FETCH_VERSION).await;
        assert_eq!(response.error_code, 0, "fetch failed as a whole");
        response.responses.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered")
    }

    /// The partition's log end offset (its high watermark) through ListOffsets; panics on an error.
    pub async fn end_offset(&mut self, topic: &str, partition: i32) -> i64 {
        let response = self.call(&list_offsets_request(topic, partition, LATEST), LIST_OFFSETS_VERSION).await;
        let answer = response.topics.into_iter().flat_map(|t| t.partitions).next().expect("the partition is answered");
        assert_eq!(answer.error_code, 0, "ListOffsets of {topic}-{partition}");
        answer.offset
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A Produce request of `records` to one partition.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    let data = PartitionProduceData::default().with_index(partition).with_records(Some(records));
    let topic = TopicProduceData::default().with_name(topic_name(topic)).with_partition_data(vec![data]);
    ProduceRequest::default().with_acks(acks).with_timeout_ms(30_000).with_topic_data(vec![topic])
}

/// The answer of the one partition a Produce request named.
pub fn partition_answer(response: ProduceResponse) -> PartitionProduceResponse {
    response.responses.into_iter().flat_map(|t| t.partition_responses).next().expect("the partition is answered")
}

/// A sessionless Fetch of one partition from `offset` that waits for nothing.
pub fn fetch_request(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    let wanted = FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(FETCH_PARTITION_BYTES_MAX);
    let topic = FetchTopic::default().with_topic(topic_name(topic)).with_partitions(vec![wanted]);
    FetchRequest::default().with_max_wait_ms(0).with_min_bytes(1).with_topics(vec![topic])
}

/// A ListOffsets request of one partition: `timestamp` -1 for the end, -2 for the start, or a
/// time in milliseconds.
pub fn list_offsets_request(topic: &str, partition: i32, timestamp: i64) -> ListOffsetsRequest {
    let wanted = ListOffsetsPartition::default().with_partition_index(partition).with_timestamp(timestamp);
    let topic = ListOffsetsTopic::default().with_name(topic_name(topic)).with_partitions(vec![wanted]);
    // As a consumer asks (replica -1); the request's default, 0, is a broker's id.
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![topic])
}

/// One uncompressed v2 batch holding `values` (no keys), stamped now, as a producer that is not
/// idempotent sends it.
pub fn record_batch(values: &[&str]) -> Bytes {
    let timestamp = floe_metadata::now_ms();
    let records: Vec<NewRecord> = values
        .iter()
        .map(|v| NewRecord { timestamp, value: Some(Bytes::copy_from_slice(v.as_bytes())), ..NewRecord::default() })
        .collect();
    build_batch(&records, None, 0).expect("a batch of one record or more")
}

/// The batches of a Fetch answer's records, each with its header (the offset it was served at).
pub fn split_batches(records: Option<&Bytes>) -> Vec<(BatchHeader, Bytes)> {
    let Some(records) = records else { return Vec::new() };
    floe_agent::record_batch::split(records).map(|batch| batch.expect("the agent serves whole v2 batches")).collect()
}

/// The records of a Fetch answer's batches, decoded as a Kafka consumer reads them: each with
/// its offset, timestamp, key, value and headers.
pub fn decode_records(records: Option<&Bytes>) -> Vec<Record> {
    let Some(records) = records else { return Vec::new() };
    let mut records = records.clone();
    let batches = RecordBatchDecoder::decode_all(&mut records).expect("the agent serves whole v2 batches");
    batches.into_iter().flat_map(|batch| batch.records).collect()
}
