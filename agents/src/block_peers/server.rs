//! The peer listener: other agents of the zone ask this one for the blocks it owns.

use std::sync::Arc;
use std::time::Duration;

use floe_storage::SegmentKey;
use tokio::net::TcpListener;

use super::wire::{self, status};
use crate::Agent;
use crate::metrics::{PEER_BLOCK_BYTES_SERVED, PEER_BLOCK_REQUESTS};

/// Connections from other agents at once; more are closed when accepted.
const CONNECTIONS_MAX: usize = 512;
/// Blocks being read for peers at once (each up to a block in memory); more wait.
const SERVING_MAX: usize = 64;
/// A connection with no request for this long is closed.
const IDLE: Duration = Duration::from_secs(60);
/// Time to read a block for a request, and to write the answer.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Objects larger than this are not segments (compaction and flushes write megabytes).
const OBJECT_BYTES_MAX: u64 = 1 << 40;

/// Serves the peer listener until `stopped` turns true, then waits for its connections: each
/// ends once the answer it is writing (if any) is out, so none outlives the agent's shutdown.
pub async fn serve(agent: Arc<Agent>, listener: TcpListener, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let connections = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS_MAX));
    let serving = Arc::new(tokio::sync::Semaphore::new(SERVING_MAX));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopped.wait_for(|s| *s) => break,
        };
        let (stream, from) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "peer listener accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            PEER_BLOCK_REQUESTS.with_label_values(&["connection_refused"]).inc();
            continue;
        };
        let (agent, serving, mut stopped) = (agent.clone(), serving.clone(), stopped.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let accepted = tokio::select! {
                accepted = floe_metadata::tls::accept_agent(stream) => accepted,
                _ = stopped.wait_for(|s| *s) => return,
            };
            match accepted {
                Ok(stream) => connection(&agent, stream, &serving, stopped).await,
                Err(e) => tracing::info!(%from, error = %e, "peer connection refused"),
            }
        });
    }
    let all = u32::try_from(CONNECTIONS_MAX).unwrap_or(u32::MAX);
    if tokio::time::timeout(READ_TIMEOUT + WRITE_TIMEOUT, connections.acquire_many(all)).await.is_err() {
        tracing::warn!("peer connections still open at shutdown");
    }
}

async fn connection(
    agent: &Agent,
    mut stream: floe_metadata::tls::MetadataStream,
    serving: &tokio::sync::Semaphore,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let read = tokio::select! {
            read = tokio::time::timeout(IDLE, wire::read_request(&mut stream)) => read,
            _ = stopped.wait_for(|s| *s) => return,
        };
        let (version, request) = match read {
            Err(_) | Ok(Ok(None)) => return,
            Ok(Ok(Some(asked))) => asked,
            Ok(Err(e)) => {
                let code = if matches!(e, wire::WireError::Version(_)) { status::UNSUPPORTED } else { status::INVALID };
                PEER_BLOCK_REQUESTS.with_label_values(&["invalid"]).inc();
                let _ = wire::write_response(&mut stream, code, e.to_string().as_bytes()).await;
                return;
            }
        };
        let key = SegmentKey::parse(&request.key);
        let answer = match key {
            Some(key)
                if request.object_bytes <= OBJECT_BYTES_MAX
                    && floe_storage::block_len(request.object_bytes, request.index) > 0 =>
            {
                let read = async {
                    let _permit = serving.acquire().await.map_err(|_| "closing".to_owned())?;
                    agent
                        .cache
                        .block_for_peer(&agent.store, &key, request.object_bytes, request.index)
                        .await
                        .map_err(|e| e.to_string())
                };
                match tokio::time::timeout(READ_TIMEOUT, read).await {
                    Ok(Ok(block)) => {
                        PEER_BLOCK_REQUESTS.with_label_values(&["served"]).inc();
                        PEER_BLOCK_BYTES_SERVED.inc_by(block.bytes.len() as u64);
                        Ok(wire::BlockAnswer {
                            key: request.key,
                            index: request.index,
                            crc32c: block.crc32c,
                            bytes: block.bytes,
                        })
                    }
                    Ok(Err(why)) => {
                        PEER_BLOCK_REQUESTS.with_label_values(&["unavailable"]).inc();
                        Err((status::UNAVAILABLE, bytes::Bytes::from(why)))
                    }
                    Err(_) => {
                        PEER_BLOCK_REQUESTS.with_label_values(&["unavailable"]).inc();
                        Err((status::UNAVAILABLE, bytes::Bytes::from_static(b"reading the block timed out")))
                    }
                }
            }
            _ => {
                PEER_BLOCK_REQUESTS.with_label_values(&["invalid"]).inc();
                Err((status::INVALID, bytes::Bytes::from_static(b"no segment block of that object")))
            }
        };
        let write = async {
            match answer {
                // An agent of version 1 is answered the bytes alone, as it expects.
                Ok(block) if version == 1 => wire::write_response(&mut stream, status::OK, &block.bytes).await,
                Ok(block) => wire::write_block(&mut stream, &block).await,
                Err((code, reason)) => wire::write_response(&mut stream, code, &reason).await,
            }
        };
        if !matches!(tokio::time::timeout(WRITE_TIMEOUT, write).await, Ok(Ok(()))) {
            return;
        }
    }
}
