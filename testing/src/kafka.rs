//! A Kafka client for tests, over the in-memory duplex of [`crate::TestAgent::kafka`]: requests
//! framed and encoded with `kafka-protocol`, sent one after another without waiting (so a test
//! can pipeline them), and responses read back in order. Also the requests most tests send, the
//! record batches they carry, and the records of a Fetch answer as a consumer decodes them.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use floe_agent::record_batch::build::{BatchProducer, NewRecord, build_batch};
use floe_agent::record_batch::{ATTRIBUTE_TRANSACTIONAL, BatchHeader};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, FetchRequest, InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest, ProduceResponse, ProducerId, RequestHeader, ResponseHeader, TopicName, TransactionalId,
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
/// InitProducerId v5: flexible, as Kafka 4 clients send it.
pub const INIT_PRODUCER_ID_VERSION: i16 = 5;
/// Metadata v12: flexible, with topic ids.
pub const METADATA_VERSION: i16 = 12;

/// ListOffsets' timestamp for the log end offset (the high watermark).
const LATEST: i64 = -1;
/// Longest wait for one response: a test fails rather than hangs.
const RESPONSE_WAIT: Duration = Duration::from_secs(30);
/// Bytes a Fetch asks for per partition: far more than a test produces.
const FETCH_PARTITION_BYTES_MAX: i32 = 1 << 20;
/// The client id requests carry, as the agent's logs name it.
const CLIENT_ID: &str = "floe-testing";
/// `transaction.timeout.ms` of the transactional producers [`KafkaClient::init_producer_id`]
/// starts: longer than any test, so no transaction times out under one.
const TRANSACTION_TIMEOUT_MS: i32 = 60_000;
/// Where a v2 batch's CRC-32C is (bytes 17..21); it covers bytes 21 (the attributes) to the end.
const CRC_AT: usize = 17;
const CRC_START: usize = 21;

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

    /// A producer id and epoch through InitProducerId: an idempotent producer's without
    /// `transactional_id`, a transactional one's with it; panics on an error.
    pub async fn init_producer_id(&mut self, transactional_id: Option<&str>) -> (i64, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(transactional_id.map(|id| TransactionalId(StrBytes::from_string(id.to_owned()))))
            .with_transaction_timeout_ms(TRANSACTION_TIMEOUT_MS)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let response = self.call(&request, INIT_PRODUCER_ID_VERSION).await;
        assert_eq!(response.error_code, 0, "InitProducerId for {transactional_id:?}");
        (response.producer_id.0, response.producer_epoch)
    }

    /// The topic's id through Metadata (which creates nothing); panics if the topic is unknown.
    pub async fn topic_id(&mut self, topic: &str) -> uuid::Uuid {
        let wanted = MetadataRequestTopic::default().with_name(Some(topic_name(topic)));
        let request = MetadataRequest::default().with_topics(Some(vec![wanted])).with_allow_auto_topic_creation(false);
        let response = self.call(&request, METADATA_VERSION).await;
        let answer = response.topics.first().expect("the topic is answered");
        assert_eq!(answer.error_code, 0, "Metadata of {topic}");
        answer.topic_id
    }

    /// Writes `bytes` as they are, framed or not, for input no client sends. The error of a
    /// connection the agent has closed already is returned, not a panic.
    pub async fn write_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Whether the agent closes the connection within `wait`; whatever it sends before closing
    /// is read and dropped.
    pub async fn closed_by_peer(&mut self, wait: Duration) -> bool {
        let mut buffer = vec![0u8; 64 << 10];
        let read_to_end = async {
            // Ends at the end of the stream or on an error (a reset), as a socket's reader does.
            while let Ok(read) = self.stream.read(&mut buffer).await {
                if read == 0 {
                    break;
                }
            }
        };
        tokio::time::timeout(wait, read_to_end).await.is_ok()
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A Produce request of `records` to one partition.
pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    produce_request_to(topic, vec![(partition, records)], acks)
}

/// A Produce request of records to several partitions of a topic, as a producer sends a
/// broker's batches together.
pub fn produce_request_to(topic: &str, batches: Vec<(i32, Bytes)>, acks: i16) -> ProduceRequest {
    let data = batches
        .into_iter()
        .map(|(partition, records)| PartitionProduceData::default().with_index(partition).with_records(Some(records)))
        .collect();
    let topic = TopicProduceData::default().with_name(topic_name(topic)).with_partition_data(data);
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
    build_batch(&new_records(values), None, 0).expect("a batch of one record or more")
}

/// [`record_batch`] as an idempotent producer sends it: with its producer id and epoch, and the
/// sequence of its first record.
pub fn producer_batch(values: &[&str], producer: BatchProducer) -> Bytes {
    build_batch(&new_records(values), Some(producer), 0).expect("a batch of one record or more")
}

/// [`producer_batch`] marked transactional, as a transactional producer sends it inside a
/// transaction.
pub fn transactional_batch(values: &[&str], producer: BatchProducer) -> Bytes {
    let mut batch = BytesMut::from(&producer_batch(values, producer)[..]);
    let attributes = i16::from_be_bytes([batch[CRC_START], batch[CRC_START + 1]]) | ATTRIBUTE_TRANSACTIONAL;
    batch[CRC_START..CRC_START + 2].copy_from_slice(&attributes.to_be_bytes());
    // The attributes are under the CRC.
    let crc = crc32c::crc32c(&batch[CRC_START..]);
    batch[CRC_AT..CRC_START].copy_from_slice(&crc.to_be_bytes());
    batch.freeze()
}

/// Records holding `values`, without keys, stamped now.
fn new_records(values: &[&str]) -> Vec<NewRecord> {
    let timestamp = floe_metadata::now_ms();
    values
        .iter()
        .map(|v| NewRecord { timestamp, value: Some(Bytes::copy_from_slice(v.as_bytes())), ..NewRecord::default() })
        .collect()
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
