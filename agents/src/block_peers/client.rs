//! Asking owners for blocks: a few pooled connections per owner, a bound on requests in flight to
//! each, and a deadline after which the asker reads the block from the object store itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_metadata::tls::MetadataStream;

use super::wire::{self, BlockRequest, status};
use crate::metrics::{PEER_BLOCK_ASKS, PEER_BLOCK_BYTES_RECEIVED};

/// Requests in flight to one owner; more wait, within the deadline.
const IN_FLIGHT_PER_OWNER_MAX: usize = 8;
/// Idle connections kept per owner.
const IDLE_PER_OWNER_MAX: usize = 4;
/// Owners remembered; past this the pool starts again (addresses change as agents come and go).
const OWNERS_MAX: usize = 256;
/// How long an owner that refused a connection, failed a request or let one time out (a paused
/// or overloaded owner would cost every ask the whole deadline) is not asked again.
const DOWN_FOR: Duration = Duration::from_secs(2);

/// Connections to the owners this agent asks.
#[derive(Debug)]
pub struct PeerClient {
    owners: Mutex<HashMap<String, Arc<Owner>>>,
    /// After this, the asker GETs the block itself.
    deadline: Duration,
}

#[derive(Debug)]
struct Owner {
    idle: Mutex<Vec<MetadataStream>>,
    in_flight: tokio::sync::Semaphore,
    down_until: Mutex<Option<Instant>>,
}

impl PeerClient {
    pub fn new(deadline: Duration) -> Self {
        Self { owners: Mutex::default(), deadline }
    }

    fn owner(&self, addr: &str) -> Arc<Owner> {
        let mut owners = self.owners.lock().unwrap_or_else(|p| p.into_inner());
        if !owners.contains_key(addr) && owners.len() >= OWNERS_MAX {
            owners.clear();
        }
        owners
            .entry(addr.to_owned())
            .or_insert_with(|| {
                Arc::new(Owner {
                    idle: Mutex::default(),
                    in_flight: tokio::sync::Semaphore::new(IN_FLIGHT_PER_OWNER_MAX),
                    down_until: Mutex::default(),
                })
            })
            .clone()
    }

    /// The block from the owner at `addr`, or `None` (counted by reason) when it failed, was
    /// down, or did not answer within the deadline, or answered something not `expected_len` long.
    pub async fn fetch(&self, addr: &str, request: BlockRequest, expected_len: u64) -> Option<Bytes> {
        let owner = self.owner(addr);
        let down = owner.down_until.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|t| Instant::now() < t);
        if down {
            PEER_BLOCK_ASKS.with_label_values(&["owner_down"]).inc();
            return None;
        }
        let answer = tokio::time::timeout(self.deadline, async {
            let _permit = owner.in_flight.acquire().await.map_err(|_| std::io::Error::other("closed"))?;
            ask(&owner, addr, &request).await
        })
        .await;
        let reason = match answer {
            Ok(Ok((status::OK, bytes))) if bytes.len() as u64 == expected_len => {
                PEER_BLOCK_ASKS.with_label_values(&["served"]).inc();
                PEER_BLOCK_BYTES_RECEIVED.inc_by(bytes.len() as u64);
                return Some(bytes);
            }
            Ok(Ok((status::OK, _))) => "wrong_length",
            Ok(Ok((status::UNAVAILABLE, _))) => "owner_unavailable",
            Ok(Ok(_)) => "refused",
            Ok(Err(_)) => "error",
            Err(_) => "timeout",
        };
        *owner.down_until.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now() + DOWN_FOR);
        tracing::debug!(
            owner = addr,
            key = request.key,
            index = request.index,
            reason,
            "block read from the store instead"
        );
        PEER_BLOCK_ASKS.with_label_values(&[reason]).inc();
        None
    }
}

/// One request on a pooled connection (once more on a new one if the pooled one had closed).
async fn ask(owner: &Owner, addr: &str, request: &BlockRequest) -> std::io::Result<(u8, Bytes)> {
    let pooled = owner.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
    if let Some(mut stream) = pooled
        && let Ok(answer) = round_trip(&mut stream, request).await
    {
        keep(owner, stream);
        return Ok(answer);
    }
    let mut stream = floe_metadata::tls::dial_agent(addr, floe_metadata::tls::HANDSHAKE_TIMEOUT).await?;
    let answer = round_trip(&mut stream, request).await?;
    keep(owner, stream);
    Ok(answer)
}

async fn round_trip(stream: &mut MetadataStream, request: &BlockRequest) -> std::io::Result<(u8, Bytes)> {
    wire::write_request(stream, request).await?;
    wire::read_response(stream).await.map_err(|e| match e {
        wire::WireError::Io(e) => e,
        other => std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
    })
}

fn keep(owner: &Owner, stream: MetadataStream) {
    let mut idle = owner.idle.lock().unwrap_or_else(|p| p.into_inner());
    if idle.len() < IDLE_PER_OWNER_MAX {
        idle.push(stream);
    }
}
