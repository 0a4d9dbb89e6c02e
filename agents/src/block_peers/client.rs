//! Asking owners for blocks: a few pooled connections per owner, a bound on requests in flight to
//! each, and a deadline after which the asker reads the block from the object store itself. An
//! answer must name the block asked for; its bytes are checked against the checksum it names by
//! the block cache, which reports a mismatch ([`PeerClient::mark_down`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use floe_metadata::locks::MutexRecovery;
use floe_metadata::tls::MetadataStream;
use floe_storage::PeerBlock;

use super::wire::{self, BlockRequest, status};
use crate::metrics::{PEER_BLOCK_ASKS, PEER_BLOCK_BYTES_RECEIVED};

/// Requests in flight to one owner; more wait, within the deadline.
const IN_FLIGHT_PER_OWNER_MAX: usize = 8;
/// Idle connections kept per owner.
const IDLE_PER_OWNER_MAX: usize = 4;
/// Owners remembered; past this the pool starts again (addresses change as agents come and go).
const OWNERS_MAX: usize = 256;
/// How long an owner that refused a connection, failed a request, let one time out (a paused or
/// overloaded owner would cost every ask the whole deadline) or answered a wrong or damaged block
/// is not asked again.
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
        let mut owners = self.owners.lock_recovered();
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
    /// down, did not answer within the deadline, or answered another block or one not
    /// `expected_len` long.
    pub async fn fetch(&self, addr: &str, request: BlockRequest, expected_len: u64) -> Option<PeerBlock> {
        let owner = self.owner(addr);
        let down = owner.down_until.lock_recovered().is_some_and(|t| Instant::now() < t);
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
            Ok(Ok((code, body))) => match accept(&request, expected_len, code, &body) {
                Ok(block) => {
                    PEER_BLOCK_ASKS.with_label_values(&["served"]).inc();
                    PEER_BLOCK_BYTES_RECEIVED.inc_by(block.bytes.len() as u64);
                    return Some(block);
                }
                Err(reason) => reason,
            },
            Ok(Err(_)) => "error",
            Err(_) => "timeout",
        };
        *owner.down_until.lock_recovered() = Some(Instant::now() + DOWN_FOR);
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

    /// Stops asking the owner at `addr` for a while: a block it answered failed its checksum.
    pub fn mark_down(&self, addr: &str) {
        *self.owner(addr).down_until.lock_recovered() = Some(Instant::now() + DOWN_FOR);
    }
}

/// The block an answer holds if it is the one asked for, or why not (a reason counted in
/// `floe_block_peer_asks_total`). Its bytes are checked against the checksum it names by the
/// block cache, which knows the object's footer.
fn accept(request: &BlockRequest, expected_len: u64, code: u8, body: &Bytes) -> Result<PeerBlock, &'static str> {
    match code {
        status::OK => {}
        status::UNAVAILABLE => return Err("owner_unavailable"),
        // An owner of the version before block names: it is asked again once it is back from
        // being down (an upgraded one answers), and meanwhile the store serves.
        status::UNSUPPORTED => return Err("unsupported"),
        _ => return Err("refused"),
    }
    let answer = wire::decode_block(body).map_err(|_| "wrong_block")?;
    if answer.key != request.key || answer.index != request.index {
        return Err("wrong_block");
    }
    if answer.bytes.len() as u64 != expected_len {
        return Err("wrong_length");
    }
    Ok(PeerBlock { bytes: answer.bytes, crc32c: answer.crc32c })
}

/// One request on a pooled connection (once more on a new one if the pooled one had closed).
async fn ask(owner: &Owner, addr: &str, request: &BlockRequest) -> std::io::Result<(u8, Bytes)> {
    let pooled = owner.idle.lock_recovered().pop();
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
    let mut idle = owner.idle.lock_recovered();
    if idle.len() < IDLE_PER_OWNER_MAX {
        idle.push(stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(key: &str, index: u64, bytes: &'static [u8]) -> Bytes {
        let mut body = Vec::new();
        body.extend_from_slice(&u16::try_from(key.len()).expect("short").to_be_bytes());
        body.extend_from_slice(key.as_bytes());
        body.extend_from_slice(&index.to_be_bytes());
        body.extend_from_slice(&crc32c::crc32c(bytes).to_be_bytes());
        body.extend_from_slice(bytes);
        Bytes::from(body)
    }

    /// Before block names, an answer of the right length was taken for the block asked: another
    /// block of the same object (or of another object) of the same length was served as it.
    #[test]
    fn an_answer_naming_another_block_is_refused() {
        let request = BlockRequest { key: "segments/a.seg".into(), object_bytes: 9 << 20, index: 1 };
        let check = |code, body: Bytes| accept(&request, 5, code, &body).map(|b| (b.bytes, b.crc32c));
        assert_eq!(
            check(status::OK, answer("segments/a.seg", 1, b"right")),
            Ok((Bytes::from_static(b"right"), crc32c::crc32c(b"right")))
        );
        assert_eq!(check(status::OK, answer("segments/a.seg", 0, b"other")), Err("wrong_block"));
        assert_eq!(check(status::OK, answer("segments/b.seg", 1, b"other")), Err("wrong_block"));
        assert_eq!(check(status::OK, answer("segments/a.seg", 1, b"long block")), Err("wrong_length"));
        // A version 1 answer (the bytes alone) does not parse as a named block.
        assert_eq!(check(status::OK, Bytes::from_static(b"right")), Err("wrong_block"));
        assert_eq!(check(status::UNSUPPORTED, Bytes::from_static(b"version 2")), Err("unsupported"));
        assert_eq!(check(status::UNAVAILABLE, Bytes::new()), Err("owner_unavailable"));
        assert_eq!(check(status::INVALID, Bytes::new()), Err("refused"));
    }
}
