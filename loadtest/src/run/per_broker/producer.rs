//! The producer: each partition's records gather in a batch, and once any batch for a broker
//! is `linger.ms` old (or full), one Produce request carries every partition's open batch to
//! that broker, with at most five requests in flight per connection.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, RequestHeader, ResponseHeader, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Notify, mpsc};

use super::{Leaders, leaders};
use crate::run::RunArgs;
use crate::run::producer::{RecordSource, locate};
use crate::run::stats::{Stats, wall_micros};

/// Requests in flight per connection (the Java client's `max.in.flight.requests.per.connection`).
const IN_FLIGHT_MAX: usize = 5;
/// Produce version sent (flexible, as current clients send).
const PRODUCE_VERSION: i16 = 9;
/// The broker's wait for acks=all, sent in each request (the Java client's `request.timeout.ms`).
const ACK_TIMEOUT_MS: i32 = 30_000;
/// Longest wait for outstanding answers at the end.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest the send loop sleeps, so it sees the end of the run and stop requests.
const IDLE_WAKE: Duration = Duration::from_millis(50);
/// Record bytes waiting to be sent, over all brokers (the Java client's `buffer.memory`): past
/// it no record is added until requests go out.
const BUFFER_BYTES_MAX: usize = 32 * 1024 * 1024;

/// A partition's open batch: its records' send times, sizes and the records themselves.
#[derive(Default)]
struct OpenBatch {
    records: Vec<Record>,
    sent: SendTimes,
    bytes: usize,
}

/// A partition this producer writes, and the broker leading it.
struct Target {
    topic: TopicName,
    partition: i32,
    broker: usize,
    batch: OpenBatch,
}

/// Each record's send time and bytes, in a batch.
type SendTimes = Vec<(Instant, u64)>;

/// What a request in flight carried, to be matched with its answer (answers come in order).
struct InFlight {
    correlation: i32,
    /// Per topic and partition, the records' send times and sizes.
    partitions: Vec<(TopicName, i32, SendTimes)>,
}

/// One connection to a broker and the partitions it leads that have records waiting.
struct Broker {
    writer: OwnedWriteHalf,
    in_flight: mpsc::UnboundedSender<InFlight>,
    /// Requests sent and not answered; the reader decrements it.
    outstanding: Arc<std::sync::atomic::AtomicUsize>,
    waiting: Vec<usize>,
    oldest: Option<Instant>,
    bytes: usize,
    correlation: i32,
}

pub(in crate::run) fn run(
    args: &RunArgs,
    index: usize,
    stats: &Arc<Stats>,
    topics: &[(String, i32)],
    end: Instant,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let result = runtime.block_on(produce_until(args, index, stats, topics, end));
    if let Err(e) = &result {
        // One failed producer ends the whole run rather than skewing it quietly.
        stats.error(format!("producer: {e:#}"));
        stats.stop.store(true, Ordering::Relaxed);
    }
    result
}

async fn produce_until(
    args: &RunArgs,
    index: usize,
    stats: &Arc<Stats>,
    topics: &[(String, i32)],
    end: Instant,
) -> anyhow::Result<()> {
    let Leaders { addresses, of: leaders } = leaders(args, topics)?;
    let slots: u64 = topics.iter().map(|(_, p)| *p as u64).sum();
    let mut targets = Vec::with_capacity(slots as usize);
    for slot in 0..slots {
        let (topic, partition) = locate(topics, slot);
        let broker = leaders
            .get(&(topic.to_owned(), partition))
            .copied()
            .with_context(|| format!("{topic}/{partition} is not in the metadata"))?;
        let name = TopicName(StrBytes::from_string(topic.to_owned()));
        targets.push(Target { topic: name, partition, broker, batch: OpenBatch::default() });
    }
    let answered = Arc::new(Notify::new());
    let mut brokers = Vec::with_capacity(addresses.len());
    let mut readers = Vec::with_capacity(addresses.len());
    for address in &addresses {
        let stream = TcpStream::connect(address).await.with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        let (reader, writer) = stream.into_split();
        let (in_flight, requests) = mpsc::unbounded_channel();
        let outstanding = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (stats, answered, outstanding_seen) = (stats.clone(), answered.clone(), outstanding.clone());
        readers.push(tokio::spawn(read_answers(BufReader::new(reader), requests, stats, answered, outstanding_seen)));
        brokers.push(Broker {
            writer,
            in_flight,
            outstanding,
            waiting: Vec::new(),
            oldest: None,
            bytes: 0,
            correlation: 0,
        });
    }

    let mut source = RecordSource::new(args, index, topics);
    let linger = Duration::from_millis(args.linger_ms);
    let rate = args.rate as f64 / args.producers as f64;
    let start = stats.start();
    let mut sent = 0u64;
    let mut out = BytesMut::new();
    let mut finished = false;
    loop {
        let now = Instant::now();
        if now >= end || stats.stop.load(Ordering::Relaxed) {
            finished = true;
        }
        // Append every record due by now (all of them at once when unpaced, up to a batch).
        let due = if finished {
            sent
        } else if rate > 0.0 {
            (now.duration_since(start).as_secs_f64() * rate) as u64
        } else {
            sent + 1000
        };
        let mut buffered: usize = brokers.iter().map(|b| b.bytes).sum();
        while sent < due && buffered < BUFFER_BYTES_MAX {
            if let Some(limit) = args.records
                && stats.claimed.fetch_add(1, Ordering::Relaxed) >= limit
            {
                finished = true;
                break;
            }
            let next = source.next();
            let target = &mut targets[next.slot as usize];
            let bytes = next.value.len() + next.key.as_ref().map_or(0, String::len);
            let broker = &mut brokers[target.broker];
            if target.batch.records.is_empty() {
                broker.waiting.push(next.slot as usize);
                broker.oldest.get_or_insert(now);
            }
            let offset = target.batch.records.len() as i64;
            target.batch.records.push(record(offset, next.key.map(Bytes::from), Bytes::copy_from_slice(next.value)));
            target.batch.sent.push((Instant::now(), bytes as u64));
            target.batch.bytes += bytes;
            broker.bytes += bytes;
            buffered += bytes;
            sent += 1;
        }
        // Send where a batch is old or full enough, and the connection has room.
        let mut next_wake = now + IDLE_WAKE;
        for broker in &mut brokers {
            let Some(oldest) = broker.oldest else { continue };
            let ready = finished || oldest + linger <= now || broker.bytes >= args.batch_bytes.min(args.request_bytes);
            if !ready {
                next_wake = next_wake.min(oldest + linger);
                continue;
            }
            if broker.outstanding.load(Ordering::Acquire) >= IN_FLIGHT_MAX {
                continue;
            }
            send(broker, &mut targets, args, &mut out).await?;
        }
        if finished && brokers.iter().all(|b| b.oldest.is_none()) {
            break;
        }
        if rate > 0.0 && !finished {
            let next_record = start + Duration::from_secs_f64((sent + 1) as f64 / rate);
            next_wake = next_wake.min(next_record);
        }
        let full = brokers.iter().any(|b| b.oldest.is_some() && b.outstanding.load(Ordering::Acquire) >= IN_FLIGHT_MAX);
        if next_wake > Instant::now() || full {
            tokio::select! {
                () = tokio::time::sleep_until(next_wake.into()) => {}
                () = answered.notified() => {}
            }
        }
    }
    // Every batch is sent; wait for the answers (the broker may not answer a closed
    // connection), then close.
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while brokers.iter().zip(&readers).any(|(b, r)| b.outstanding.load(Ordering::Acquire) > 0 && !r.is_finished()) {
        if Instant::now() >= deadline {
            bail!("answers still outstanding after {DRAIN_TIMEOUT:?}");
        }
        tokio::select! {
            () = tokio::time::sleep(IDLE_WAKE) => {}
            () = answered.notified() => {}
        }
    }
    drop(brokers);
    for reader in readers {
        reader.await.context("an answer reader panicked")??;
    }
    Ok(())
}

/// A record at `offset` within its batch (offsets in a batch run from 0; the broker assigns
/// the real ones).
fn record(offset: i64, key: Option<Bytes>, value: Bytes) -> Record {
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset,
        sequence: -1,
        timestamp: (wall_micros() / 1000) as i64,
        key,
        value: Some(value),
        headers: Default::default(),
    }
}

/// One Produce request with every open batch of `broker`'s partitions, up to the request bound
/// (the rest wait for the next request).
async fn send(broker: &mut Broker, targets: &mut [Target], args: &RunArgs, out: &mut BytesMut) -> anyhow::Result<()> {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    let mut carried = Vec::new();
    let mut request_bytes = 0usize;
    let mut left = Vec::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    for slot in std::mem::take(&mut broker.waiting) {
        let target = &mut targets[slot];
        if request_bytes > 0 && request_bytes + target.batch.bytes > args.request_bytes {
            left.push(slot);
            continue;
        }
        let batch = std::mem::take(&mut target.batch);
        request_bytes += batch.bytes;
        broker.bytes -= batch.bytes;
        let mut encoded = BytesMut::new();
        RecordBatchEncoder::encode(&mut encoded, &batch.records, &options).context("encoding a record batch")?;
        let data = PartitionProduceData::default().with_index(target.partition).with_records(Some(encoded.freeze()));
        // Slots run through topics in turn, so a topic's partitions are rarely adjacent: group them.
        match topics.iter_mut().find(|t| t.name == target.topic) {
            Some(topic) => topic.partition_data.push(data),
            None => {
                topics.push(TopicProduceData::default().with_name(target.topic.clone()).with_partition_data(vec![data]))
            }
        }
        carried.push((target.topic.clone(), target.partition, batch.sent));
    }
    broker.oldest = if left.is_empty() { None } else { Some(Instant::now()) };
    broker.waiting = left;
    let acks: i16 = if args.acks == "1" { 1 } else { -1 };
    let request = ProduceRequest::default().with_acks(acks).with_timeout_ms(ACK_TIMEOUT_MS).with_topic_data(topics);
    broker.correlation = broker.correlation.wrapping_add(1);
    let mut header = RequestHeader::default();
    header.request_api_key = ProduceRequest::KEY;
    header.request_api_version = PRODUCE_VERSION;
    header.correlation_id = broker.correlation;
    header.client_id = Some(StrBytes::from_static_str("floe-loadtest"));
    out.clear();
    out.extend_from_slice(&[0; 4]);
    header.encode(out, ProduceRequest::header_version(PRODUCE_VERSION)).context("encoding a request header")?;
    request.encode(out, PRODUCE_VERSION).context("encoding a Produce request")?;
    let length = i32::try_from(out.len() - 4).context("request size")?;
    out[..4].copy_from_slice(&length.to_be_bytes());
    broker.outstanding.fetch_add(1, Ordering::AcqRel);
    broker
        .in_flight
        .send(InFlight { correlation: broker.correlation, partitions: carried })
        .map_err(|_| anyhow::anyhow!("the connection's answer reader stopped"))?;
    broker.writer.write_all(out).await.context("sending a Produce request")?;
    Ok(())
}

/// Reads one connection's answers in order and reports each record's delivery; a failure stops
/// the run.
async fn read_answers(
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    requests: mpsc::UnboundedReceiver<InFlight>,
    stats: Arc<Stats>,
    answered: Arc<Notify>,
    outstanding: Arc<std::sync::atomic::AtomicUsize>,
) -> anyhow::Result<()> {
    let result = read_answers_in_order(reader, requests, &stats, &answered, &outstanding).await;
    if let Err(e) = &result {
        stats.error(format!("producer: {e:#}"));
        stats.stop.store(true, Ordering::Relaxed);
        answered.notify_one();
    }
    result
}

async fn read_answers_in_order(
    mut reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    mut requests: mpsc::UnboundedReceiver<InFlight>,
    stats: &Stats,
    answered: &Notify,
    outstanding: &std::sync::atomic::AtomicUsize,
) -> anyhow::Result<()> {
    while let Some(sent) = requests.recv().await {
        let Some(mut frame) = crate::null_sink::read_frame(&mut reader).await? else {
            bail!("the broker closed the connection with requests unanswered");
        };
        let header = ResponseHeader::decode(&mut frame, ProduceResponse::header_version(PRODUCE_VERSION))
            .context("decoding a Produce answer's header")?;
        if header.correlation_id != sent.correlation {
            bail!("answer {} arrived for request {}", header.correlation_id, sent.correlation);
        }
        let response = ProduceResponse::decode(&mut frame, PRODUCE_VERSION).context("decoding a Produce answer")?;
        let mut codes: HashMap<(&TopicName, i32), i16> = HashMap::new();
        for topic in &response.responses {
            for p in &topic.partition_responses {
                codes.insert((&topic.name, p.index), p.error_code);
            }
        }
        for (topic, partition, records) in &sent.partitions {
            match codes.get(&(topic, *partition)).copied() {
                Some(0) => records.iter().for_each(|(at, bytes)| stats.delivered(*bytes, *at)),
                Some(code) => records.iter().for_each(|_| stats.error(format!("produce: Kafka error {code}"))),
                None => records.iter().for_each(|_| stats.error("produce: partition missing from the answer".into())),
            }
        }
        outstanding.fetch_sub(1, Ordering::AcqRel);
        answered.notify_one();
    }
    Ok(())
}
