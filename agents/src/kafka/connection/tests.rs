use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{ApiVersionsResponse, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// `body` with its length prefix, as a client sends a request.
fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = i32::try_from(body.len()).expect("small").to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// Issue 52: every connection held a 64 KiB read buffer, zeroed and so resident, from its first
/// byte to its close, idle or not, and a 64 KiB write buffer beside it.
#[tokio::test]
async fn an_idle_connection_holds_no_read_buffer() {
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let mut reader = FrameReader::new(server);
    assert_eq!(reader.pending.capacity(), 0, "no buffer before the first byte");
    // Two requests in one write, as a pipelining client sends them.
    let (first, second) = (vec![1u8; 20], vec![2u8; 30]);
    client.write_all(&[framed(&first), framed(&second)].concat()).await.expect("written");
    assert_eq!(reader.read_frame(FRAME_BYTES_MAX).await.expect("read"), Some(Bytes::from(first)));
    assert_eq!(reader.read_frame(FRAME_BYTES_MAX).await.expect("read"), Some(Bytes::from(second)));
    assert_eq!(reader.pending.capacity(), 0, "an idle connection holds no read buffer");
    drop(client);
    assert_eq!(reader.read_frame(FRAME_BYTES_MAX).await.expect("closed between frames"), None);
}

/// A client announcing a large frame and sending little pins about what it sent, not the frame.
#[tokio::test]
async fn a_frame_announced_large_holds_only_what_arrived() {
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let mut reader = FrameReader::new(server);
    let mut partial = (50i32 << 20).to_be_bytes().to_vec();
    partial.extend_from_slice(&[0u8; 100]);
    client.write_all(&partial).await.expect("written");
    let waited = tokio::time::timeout(Duration::from_millis(50), reader.read_frame(FRAME_BYTES_MAX)).await;
    assert!(waited.is_err(), "the frame is not complete");
    assert_eq!(reader.pending.len(), 104);
    assert!(reader.pending.capacity() <= READ_BYTES_MAX, "{} bytes held", reader.pending.capacity());
}

#[tokio::test]
async fn a_frame_over_the_limit_before_authentication_closes_the_connection() {
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let mut reader = FrameReader::new(server);
    client.write_all(&(1i32 << 20).to_be_bytes()).await.expect("written");
    let refused = reader.read_frame(512 * 1024).await;
    assert!(matches!(refused, Err(ConnectionError::FrameBeforeAuthentication(1_048_576, 524_288))), "{refused:?}");
}

/// The bytes of one framed response.
fn encoded(correlation_id: i32, api_key: ApiKey, version: i16, response: ResponseKind) -> Bytes {
    let mut frame = frame::encode(correlation_id, api_key, version, response).expect("encoded");
    frame.copy_to_bytes(frame.remaining())
}

/// Small responses wait in the buffer for one write; a large one is written as it is, after
/// them; after the flush that precedes every wait, no buffer is held.
#[tokio::test]
async fn responses_go_out_in_order_and_an_idle_writer_holds_no_buffer() {
    let small = || ResponseKind::ApiVersions(ApiVersionsResponse::default());
    let large = || {
        let partition = PartitionData::default().with_records(Some(Bytes::from(vec![7u8; 100_000])));
        let topic = FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![partition]);
        ResponseKind::Fetch(FetchResponse::default().with_responses(vec![topic]))
    };
    let (client, mut server) = tokio::io::duplex(1 << 20);
    let mut writer = ResponseWriter::new(client, None);
    assert_eq!(writer.buffered.capacity(), 0);
    for correlation_id in 0..2 {
        let frame = frame::encode(correlation_id, ApiKey::ApiVersions, 0, small()).expect("encoded");
        writer.write(frame).await.expect("buffered");
    }
    assert!(!writer.buffered.is_empty(), "small responses wait for one write");
    writer.write(frame::encode(2, ApiKey::Fetch, 12, large()).expect("encoded")).await.expect("written");
    assert!(writer.buffered.is_empty(), "what was buffered went out before the large response");
    writer.flush().await.expect("flushed");
    assert_eq!(writer.buffered.capacity(), 0, "an idle writer holds no buffer");

    let expected = [
        encoded(0, ApiKey::ApiVersions, 0, small()),
        encoded(1, ApiKey::ApiVersions, 0, small()),
        encoded(2, ApiKey::Fetch, 12, large()),
    ]
    .concat();
    let mut got = vec![0u8; expected.len()];
    server.read_exact(&mut got).await.expect("read");
    assert_eq!(got, expected);
}
