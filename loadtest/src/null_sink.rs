//! `null-sink`: a Kafka-protocol endpoint that acknowledges Produce requests and stores nothing.
//!
//! It is the raw floor of the benchmark. The load generator's librdkafka producers send it the
//! same bytes over the same loopback TCP they would send Floe, and it answers as soon as a frame
//! is parsed: records are counted and dropped. Whatever throughput it reaches is what the machine
//! and the generator can do with no storage at all, which shows the generator is not the
//! bottleneck. It is never a Kafka service: topics exist because they are asked about, offsets
//! are made up from counters, and only what a producer and the AdminClient's CreateTopics need is
//! answered (ApiVersions, Metadata, Produce, InitProducerId, CreateTopics). Anything else closes
//! the connection; Fetch and FindCoordinator are advertised without being served, only so that
//! librdkafka producers use v2 record batches and every codec (see [`ADVERTISED_ONLY`]).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, CreateTopicsRequest, CreateTopicsResponse,
    InitProducerIdRequest, InitProducerIdResponse, MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse,
    ProducerId, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, clap::Args)]
pub(crate) struct NullSinkArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:19092")]
    listen: std::net::SocketAddr,
    /// Partitions every topic appears to have.
    #[arg(long, default_value_t = 8)]
    partitions: i32,
}

/// Frames outside this range close the connection (a request header alone is 8 bytes).
const FRAME_BYTES_MIN: u32 = 8;
const FRAME_BYTES_MAX: u32 = 128 * 1024 * 1024;
/// A frame's buffer grows by at most this much per read, so a peer announcing a huge frame and
/// then sending nothing does not pin that much memory.
const FRAME_READ_STEP: usize = 1024 * 1024;
/// Per-connection socket buffers: big enough that a stream of small requests costs few syscalls.
const SOCKET_BUFFER_BYTES: usize = 64 * 1024;
/// A topic created with more partitions than this is refused: every Metadata answer lists them
/// all, so an absurd count would only exhaust memory.
const PARTITIONS_MAX: i32 = 100_000;

const NODE_ID: i32 = 1;
const CLUSTER_ID: &str = "floe-null-sink";

/// Topics the sink keeps counters for (created, or produced to); past this, CreateTopics fails
/// with POLICY_VIOLATION and produce to a new topic with UNKNOWN_TOPIC_OR_PARTITION.
const TOPICS_MAX: usize = 10_000;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const POLICY_VIOLATION: i16 = 44;
const UNSUPPORTED_VERSION: i16 = 35;
const TOPIC_ALREADY_EXISTS: i16 = 36;
const INVALID_PARTITIONS: i16 = 37;
const UNKNOWN_TOPIC_ID: i16 = 100;

/// Highest ApiVersions version served; a newer request gets the v0 error answer.
const API_VERSIONS_MAX: i16 = 3;

/// Everything answered. CreateTopics starts at v2 because kafka-protocol 0.18 decodes nothing
/// older (Kafka 4 dropped v0–1 too).
const SERVED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, API_VERSIONS_MAX),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::InitProducerId, 0, 4),
];

/// Advertised in ApiVersions but never served. librdkafka derives its features from the APIs a
/// broker lists: v2 record batches need Fetch v4+ listed (idempotence needs v2 batches), zstd
/// needs Fetch v10+, lz4 needs FindCoordinator. Without these a producer sends legacy message
/// sets or refuses the codec, and the floor would not see the bytes Floe sees. Producers do not
/// send these requests; one that arrives closes its connection like any unserved request.
const ADVERTISED_ONLY: &[(ApiKey, i16, i16)] = &[(ApiKey::Fetch, 4, 12), (ApiKey::FindCoordinator, 0, 0)];

/// State shared by all connections. Nothing here holds record bytes.
#[derive(Debug)]
struct Sink {
    /// The address advertised as the one broker.
    listen: SocketAddr,
    /// Partition count of any topic not created with an explicit count.
    partitions: i32,
    /// Topics created with CreateTopics, with their partition counts.
    topics: Mutex<BTreeMap<String, i32>>,
    /// Next offset of each partition that has been produced to, by topic then partition.
    offsets: Mutex<HashMap<String, HashMap<i32, i64>>>,
    next_producer_id: AtomicI64,
    /// Frame bytes received (length prefixes included), for the progress line.
    bytes_received: AtomicU64,
    /// Records in the Produce requests answered, for the progress line.
    records_acked: AtomicU64,
}

/// Serves until the process is killed; returns only if the listener cannot be set up.
pub(crate) fn run(args: NullSinkArgs) -> anyhow::Result<()> {
    if !(1..=PARTITIONS_MAX).contains(&args.partitions) {
        bail!("--partitions must be in 1..={PARTITIONS_MAX}, not {}", args.partitions);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("tokio runtime")?;
    runtime.block_on(serve(args))
}

async fn serve(args: NullSinkArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.listen).await.with_context(|| format!("listening on {}", args.listen))?;
    // With port 0 the kernel picks one; advertise the one actually bound.
    let listen = listener.local_addr().unwrap_or(args.listen);
    let sink = Arc::new(Sink {
        listen,
        partitions: args.partitions,
        topics: Mutex::new(BTreeMap::new()),
        offsets: Mutex::new(HashMap::new()),
        next_producer_id: AtomicI64::new(1),
        bytes_received: AtomicU64::new(0),
        records_acked: AtomicU64::new(0),
    });
    eprintln!(
        "null-sink: listening on {listen} ({} partitions per topic); acknowledges produce requests and stores nothing",
        args.partitions
    );
    tokio::spawn(report_progress(sink.clone()));
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let sink = sink.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_connection(&sink, stream).await {
                        // Some codec errors end in a newline; keep one line per connection.
                        let reason = format!("{e:#}");
                        eprintln!("null-sink: closing connection from {peer}: {}", reason.trim_end());
                    }
                });
            }
            Err(e) => {
                // Usually out of file descriptors: back off instead of spinning, keep serving.
                eprintln!("null-sink: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Once a second while bytes arrive: the receive rate and the records acknowledged.
async fn report_progress(sink: Arc<Sink>) {
    let started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let (mut last_bytes, mut last_records, mut last_at) = (0u64, 0u64, Instant::now());
    loop {
        ticker.tick().await;
        let now = Instant::now();
        let bytes = sink.bytes_received.load(Ordering::Relaxed);
        let records = sink.records_acked.load(Ordering::Relaxed);
        // Measured, not assumed to be one second: ticks can be late on a loaded machine.
        let seconds = now.duration_since(last_at).as_secs_f64();
        if bytes > last_bytes && seconds > 0.0 {
            let megabytes = (bytes - last_bytes) as f64 / 1e6;
            eprintln!(
                "[{:>4}s] {:.1} MB/s received, {} records acked",
                started.elapsed().as_secs(),
                megabytes / seconds,
                records.saturating_sub(last_records)
            );
        }
        (last_bytes, last_records, last_at) = (bytes, records, now);
    }
}

/// Answers one connection's requests in order until it closes or sends something unserved.
async fn serve_connection(sink: &Sink, stream: TcpStream) -> anyhow::Result<()> {
    stream.set_nodelay(true).context("setting TCP_NODELAY")?;
    let (reader, writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(SOCKET_BUFFER_BYTES, reader);
    let mut writer = BufWriter::with_capacity(SOCKET_BUFFER_BYTES, writer);
    let mut response = BytesMut::with_capacity(4096);
    while let Some(frame) = read_frame(&mut reader).await? {
        let frame_bytes = u64::try_from(frame.len()).unwrap_or(u64::MAX).saturating_add(4);
        sink.bytes_received.fetch_add(frame_bytes, Ordering::Relaxed);
        response.clear();
        if handle(sink, frame, &mut response)? {
            writer.write_all(&response).await.context("writing a response")?;
        }
        // Hold answers back only while the next request is already arriving: its sender is not
        // waiting for them, and answers to pipelined requests then share one write.
        if reader.buffer().is_empty() {
            writer.flush().await.context("writing a response")?;
        }
    }
    // The client is gone; whatever it did not read no longer matters.
    let _ = writer.flush().await;
    Ok(())
}

/// One request frame without its length prefix, or `None` at a clean end of stream.
pub(crate) async fn read_frame(reader: &mut (impl AsyncRead + Unpin)) -> anyhow::Result<Option<Bytes>> {
    let mut prefix = [0u8; 4];
    match reader.read_exact(&mut prefix).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e).context("reading a frame length"),
    }
    let announced = i32::from_be_bytes(prefix);
    let length = match u32::try_from(announced) {
        Ok(length) if (FRAME_BYTES_MIN..=FRAME_BYTES_MAX).contains(&length) => length,
        _ => bail!("frame of {announced} bytes is outside {FRAME_BYTES_MIN}..={FRAME_BYTES_MAX}"),
    };
    let length = usize::try_from(length).context("frame length")?;
    let mut frame = BytesMut::with_capacity(length.min(FRAME_READ_STEP));
    while frame.len() < length {
        let missing = length - frame.len();
        if frame.len() == frame.capacity() {
            frame.reserve(missing.min(FRAME_READ_STEP));
        }
        let mut rest = (&mut *reader).take(u64::try_from(missing).context("frame length")?);
        if rest.read_buf(&mut frame).await.context("reading a frame")? == 0 {
            bail!("connection closed after {} of {length} frame bytes", frame.len());
        }
    }
    Ok(Some(frame.freeze()))
}

/// Decodes one request and encodes its answer into `out`. Returns whether there is an answer
/// (Produce with acks=0 has none); an error means the connection must close.
fn handle(sink: &Sink, mut frame: Bytes, out: &mut BytesMut) -> anyhow::Result<bool> {
    let (Some(key), Some(version), Some(correlation_id)) = (be_i16(&frame, 0), be_i16(&frame, 2), be_i32(&frame, 4))
    else {
        bail!("frame too short for a request header");
    };
    let api_key = ApiKey::try_from(key).map_err(|()| anyhow!("unknown API key {key}"))?;
    if !is_served(api_key, version) {
        if api_key == ApiKey::ApiVersions && version > API_VERSIONS_MAX {
            // As Kafka does: a v0 answer with our ranges, so the client retries with one it knows.
            // Its header is not decoded; the correlation id sits at the same offset in every one.
            let body =
                ApiVersionsResponse::default().with_error_code(UNSUPPORTED_VERSION).with_api_keys(api_versions());
            encode_response(out, correlation_id, 0, &body, 0)?;
            return Ok(true);
        }
        bail!("{api_key:?} v{version} is not served by the null sink");
    }
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(version))
        .context("decoding request header")?;
    let correlation_id = header.correlation_id;
    // ApiVersions answers always use header v0, so any client can read them.
    let header_version = if api_key == ApiKey::ApiVersions { 0 } else { api_key.response_header_version(version) };
    let decoding = || format!("decoding {api_key:?} v{version}");
    match api_key {
        ApiKey::ApiVersions => {
            ApiVersionsRequest::decode(&mut frame, version).with_context(decoding)?;
            let body = ApiVersionsResponse::default().with_api_keys(api_versions());
            encode_response(out, correlation_id, header_version, &body, version)?;
        }
        ApiKey::Metadata => {
            let request = MetadataRequest::decode(&mut frame, version).with_context(decoding)?;
            encode_response(out, correlation_id, header_version, &metadata(sink, version, request), version)?;
        }
        ApiKey::Produce => {
            let request = ProduceRequest::decode(&mut frame, version).with_context(decoding)?;
            let acks = request.acks;
            let body = produce(sink, request);
            // acks=0: the producer expects no answer at all.
            if acks == 0 {
                return Ok(false);
            }
            encode_response(out, correlation_id, header_version, &body, version)?;
        }
        ApiKey::InitProducerId => {
            InitProducerIdRequest::decode(&mut frame, version).with_context(decoding)?;
            let producer_id = sink.next_producer_id.fetch_add(1, Ordering::Relaxed);
            let body =
                InitProducerIdResponse::default().with_producer_id(ProducerId(producer_id)).with_producer_epoch(0);
            encode_response(out, correlation_id, header_version, &body, version)?;
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::decode(&mut frame, version).with_context(decoding)?;
            encode_response(out, correlation_id, header_version, &create_topics(sink, request), version)?;
        }
        // is_served admits only the keys above.
        other => bail!("{other:?} is not served by the null sink"),
    }
    Ok(true)
}

fn is_served(api_key: ApiKey, version: i16) -> bool {
    SERVED.iter().any(|&(key, min, max)| key == api_key && (min..=max).contains(&version))
}

fn api_versions() -> Vec<ApiVersion> {
    SERVED
        .iter()
        .chain(ADVERTISED_ONLY)
        .map(|&(key, min, max)| {
            ApiVersion::default().with_api_key(key as i16).with_min_version(min).with_max_version(max)
        })
        .collect()
}

/// Appends one framed response (length prefix, header, body) to `out`, which must be empty.
fn encode_response<M: Encodable>(
    out: &mut BytesMut,
    correlation_id: i32,
    header_version: i16,
    body: &M,
    version: i16,
) -> anyhow::Result<()> {
    out.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(out, header_version)
        .context("encoding response header")?;
    body.encode(out, version).context("encoding response")?;
    let length = i32::try_from(out.len().saturating_sub(4)).context("response over 2 GiB")?;
    let prefix = out.get_mut(0..4).ok_or_else(|| anyhow!("response buffer lost its length prefix"))?;
    prefix.copy_from_slice(&length.to_be_bytes());
    Ok(())
}

/// One broker (this one) leading every partition of every topic asked about.
fn metadata(sink: &Sink, version: i16, request: MetadataRequest) -> MetadataResponse {
    let created = sink.topics.lock().unwrap_or_else(PoisonError::into_inner);
    // v0 has no null list: there an empty list means all topics. From v1 null means all topics
    // and an empty list means none (what clients send when they only want the brokers).
    let requested = match request.topics {
        Some(topics) if topics.is_empty() && version == 0 => None,
        requested => requested,
    };
    let topics = match requested {
        None => created.iter().map(|(name, &partitions)| describe_topic(name, partitions)).collect(),
        Some(requested) => requested
            .into_iter()
            .map(|wanted| match wanted.name {
                Some(name) => {
                    let partitions = created.get(name.as_str()).copied().unwrap_or(sink.partitions);
                    describe_topic(name.as_str(), partitions)
                }
                // v10+ may ask by id alone: only ids handed out for created topics are known.
                None => match created.iter().find(|(name, _)| topic_id(name) == wanted.topic_id) {
                    Some((name, &partitions)) => describe_topic(name, partitions),
                    None => MetadataResponseTopic::default()
                        .with_error_code(UNKNOWN_TOPIC_ID)
                        .with_topic_id(wanted.topic_id),
                },
            })
            .collect(),
    };
    let broker = MetadataResponseBroker::default()
        .with_node_id(BrokerId(NODE_ID))
        .with_host(StrBytes::from_string(sink.listen.ip().to_string()))
        .with_port(i32::from(sink.listen.port()));
    MetadataResponse::default()
        .with_brokers(vec![broker])
        .with_cluster_id(Some(StrBytes::from_static_str(CLUSTER_ID)))
        .with_controller_id(BrokerId(NODE_ID))
        .with_topics(topics)
}

fn describe_topic(name: &str, partitions: i32) -> MetadataResponseTopic {
    let partitions = (0..partitions)
        .map(|index| {
            MetadataResponsePartition::default()
                .with_partition_index(index)
                .with_leader_id(BrokerId(NODE_ID))
                .with_leader_epoch(0)
                .with_replica_nodes(vec![BrokerId(NODE_ID)])
                .with_isr_nodes(vec![BrokerId(NODE_ID)])
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
        .with_topic_id(topic_id(name))
        .with_partitions(partitions)
}

/// Acknowledges every partition, at offsets that only count the records seen.
fn produce(sink: &Sink, request: ProduceRequest) -> ProduceResponse {
    let mut records_total = 0u64;
    // Lock order: topics, then offsets (the other handlers take only topics).
    let created = sink.topics.lock().unwrap_or_else(PoisonError::into_inner);
    let mut offsets = sink.offsets.lock().unwrap_or_else(PoisonError::into_inner);
    let mut responses = Vec::with_capacity(request.topic_data.len());
    for topic in request.topic_data {
        let name = topic.name.as_str();
        let partitions = created.get(name).copied().unwrap_or(sink.partitions);
        // Counters only for topics kept and partitions they have, so a client cannot grow them
        // without end.
        if !offsets.contains_key(name) && offsets.len() < TOPICS_MAX {
            offsets.insert(name.to_owned(), HashMap::new());
        }
        let mut next_offsets = offsets.get_mut(name);
        let mut partition_responses = Vec::with_capacity(topic.partition_data.len());
        for partition in topic.partition_data {
            let next_offsets = match next_offsets.as_mut() {
                Some(map) if (0..partitions).contains(&partition.index) => map,
                _ => {
                    partition_responses.push(
                        PartitionProduceResponse::default()
                            .with_index(partition.index)
                            .with_error_code(UNKNOWN_TOPIC_OR_PARTITION)
                            .with_base_offset(-1),
                    );
                    continue;
                }
            };
            let records = partition.records.as_deref().map_or(0, count_records);
            records_total = records_total.saturating_add(records);
            let next = next_offsets.entry(partition.index).or_insert(0);
            let base_offset = *next;
            *next = next.saturating_add(i64::try_from(records).unwrap_or(i64::MAX));
            partition_responses.push(
                PartitionProduceResponse::default()
                    .with_index(partition.index)
                    .with_base_offset(base_offset)
                    .with_log_append_time_ms(-1)
                    .with_log_start_offset(0),
            );
        }
        responses
            .push(TopicProduceResponse::default().with_name(topic.name).with_partition_responses(partition_responses));
    }
    drop(offsets);
    drop(created);
    sink.records_acked.fetch_add(records_total, Ordering::Relaxed);
    ProduceResponse::default().with_responses(responses)
}

/// Records in a partition's record batches: the sum of each v2 batch's record count. Stops at
/// the first batch that is cut short; batches of other magic values are skipped, not counted.
fn count_records(mut batches: &[u8]) -> u64 {
    // Offsets in a v2 batch header; the batch length counts the bytes after its own field.
    const LENGTH_AT: usize = 8;
    const LENGTH_END: usize = 12;
    const MAGIC_AT: usize = 16;
    const RECORD_COUNT_AT: usize = 57;
    let mut total = 0u64;
    while let Some(length) = be_i32(batches, LENGTH_AT) {
        let Some(end) = usize::try_from(length).ok().and_then(|length| length.checked_add(LENGTH_END)) else {
            break;
        };
        let (Some(batch), Some(rest)) = (batches.get(..end), batches.get(end..)) else {
            break;
        };
        if batch.get(MAGIC_AT) == Some(&2) {
            let count = be_i32(batch, RECORD_COUNT_AT).and_then(|count| u64::try_from(count).ok());
            total = total.saturating_add(count.unwrap_or(0));
        }
        batches = rest;
    }
    total
}

/// Records the topics (nothing else) and answers success, or TOPIC_ALREADY_EXISTS on a repeat.
fn create_topics(sink: &Sink, request: CreateTopicsRequest) -> CreateTopicsResponse {
    let mut created = sink.topics.lock().unwrap_or_else(PoisonError::into_inner);
    let results = request
        .topics
        .into_iter()
        .map(|topic| {
            let name = topic.name.as_str().to_owned();
            let partitions = if topic.num_partitions > 0 {
                topic.num_partitions
            } else if !topic.assignments.is_empty() {
                // An explicit assignment (num_partitions -1) gives the count by its length.
                i32::try_from(topic.assignments.len()).unwrap_or(i32::MAX)
            } else {
                sink.partitions
            };
            let failed = |code: i16, message: String| {
                CreatableTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message)))
                    .with_configs(None)
            };
            if created.contains_key(&name) {
                return failed(TOPIC_ALREADY_EXISTS, format!("Topic '{name}' already exists."));
            }
            if created.len() >= TOPICS_MAX {
                return failed(POLICY_VIOLATION, format!("the null sink keeps at most {TOPICS_MAX} topics"));
            }
            if partitions > PARTITIONS_MAX {
                return failed(INVALID_PARTITIONS, format!("at most {PARTITIONS_MAX} partitions, not {partitions}"));
            }
            let result = CreatableTopicResult::default()
                .with_name(topic.name.clone())
                .with_topic_id(topic_id(&name))
                .with_error_message(None)
                .with_num_partitions(partitions)
                .with_replication_factor(1)
                .with_configs(Some(Vec::new()));
            if !request.validate_only {
                created.insert(name, partitions);
            }
            result
        })
        .collect();
    CreateTopicsResponse::default().with_topics(results)
}

/// A made-up topic id, the same for a name every time (and in every run): two FNV-1a hashes of
/// the name, shaped as a version-4 uuid so it is never nil.
fn topic_id(name: &str) -> uuid::Uuid {
    let fnv = |basis: u64| {
        name.bytes().fold(basis, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3))
    };
    let high = fnv(0xcbf2_9ce4_8422_2325).to_be_bytes();
    let low = fnv(0x6c62_272e_07bb_0142).to_be_bytes();
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&high);
    bytes[8..].copy_from_slice(&low);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

fn be_i16(bytes: &[u8], at: usize) -> Option<i16> {
    let raw: [u8; 2] = bytes.get(at..at.checked_add(2)?)?.try_into().ok()?;
    Some(i16::from_be_bytes(raw))
}

fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let raw: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(i32::from_be_bytes(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v2 batch header with the given record count, padded to `length` bytes after the length
    /// field.
    fn batch(records: i32, length: i32) -> Vec<u8> {
        let mut bytes = vec![0u8; 12];
        bytes[8..12].copy_from_slice(&length.to_be_bytes());
        bytes.resize(12 + usize::try_from(length).unwrap_or(0), 0);
        if bytes.len() >= 61 {
            bytes[16] = 2;
            bytes[57..61].copy_from_slice(&records.to_be_bytes());
        }
        bytes
    }

    #[test]
    fn produce_counts_offsets_only_for_partitions_a_topic_has() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let sink = Sink {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            partitions: 2,
            topics: Mutex::new(BTreeMap::new()),
            offsets: Mutex::new(HashMap::new()),
            next_producer_id: AtomicI64::new(1),
            bytes_received: AtomicU64::new(0),
            records_acked: AtomicU64::new(0),
        };
        let request = |partition: i32| {
            ProduceRequest::default().with_topic_data(vec![
                TopicProduceData::default().with_name(TopicName(StrBytes::from_static_str("t"))).with_partition_data(
                    vec![
                        PartitionProduceData::default()
                            .with_index(partition)
                            .with_records(Some(Bytes::from(batch(3, 60)))),
                    ],
                ),
            ])
        };
        let answer = |partition| {
            let response = produce(&sink, request(partition));
            let p = &response.responses[0].partition_responses[0];
            (p.error_code, p.base_offset)
        };
        assert_eq!(answer(1), (0, 0));
        assert_eq!(answer(1), (0, 3));
        assert_eq!(answer(2), (UNKNOWN_TOPIC_OR_PARTITION, -1));
        assert_eq!(answer(-1), (UNKNOWN_TOPIC_OR_PARTITION, -1));
        assert_eq!(sink.offsets.lock().map(|o| o["t"].len()).unwrap_or(0), 1);
    }

    #[test]
    fn counts_records_of_whole_batches() {
        let mut bytes = batch(3, 60);
        bytes.extend(batch(5, 49));
        assert_eq!(count_records(&bytes), 8);
        // A trailing partial batch and garbage are ignored.
        bytes.extend(&batch(7, 60)[..30]);
        assert_eq!(count_records(&bytes), 8);
        assert_eq!(count_records(&[]), 0);
        assert_eq!(count_records(&[0xff; 11]), 0);
        assert_eq!(count_records(&[0xff; 200]), 0);
        assert_eq!(count_records(&batch(-4, 60)), 0);
    }

    #[test]
    fn topic_ids_are_stable_and_distinct() {
        assert_eq!(topic_id("a"), topic_id("a"));
        assert_ne!(topic_id("a"), topic_id("b"));
        assert!(!topic_id("").is_nil());
    }

    #[test]
    fn api_versions_encode_in_v0_and_v3() {
        let body = ApiVersionsResponse::default().with_api_keys(api_versions());
        for version in [0, 3] {
            let mut out = BytesMut::new();
            assert!(encode_response(&mut out, 7, 0, &body, version).is_ok());
            assert_eq!(be_i32(&out, 0), i32::try_from(out.len() - 4).ok());
            assert_eq!(be_i32(&out, 4), Some(7));
        }
    }
}
