//! The agent-to-agent block protocol, version 2: one request at a time per connection.
//!
//! ```text
//! request:  u32 length | u8 version (2) | u16 key length | key | u64 object bytes | u64 block index
//! response: u8 status | u32 length | body
//!   OK, version 2: u16 key length | key | u64 block index | u32 CRC-32C | the block's bytes
//!   OK, version 1: the block's bytes
//!   otherwise:     a UTF-8 reason
//! ```
//!
//! All integers are big-endian. An answer names the block it holds and the CRC-32C of all its
//! bytes, which the owner checked them against (for segment format 2, its object's footer): the
//! asker checks both before it uses the bytes. An owner answers each request in the request's
//! version, so an agent of the version before this one still asks a newer owner and is answered
//! as before. A request of a version the owner does not speak is answered `UNSUPPORTED`; told
//! that, an asker reads from the object store instead.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The version this agent asks in.
pub const VERSION: u8 = 2;
/// The oldest version this agent answers.
pub const VERSION_MIN: u8 = 1;
/// Bytes of a request after its length: a segment key is far shorter.
pub const REQUEST_BYTES_MAX: u32 = 1024;
/// Bytes of a response body: one block and its name (a key, shorter than a request, an index
/// and a checksum), or a short reason.
pub const RESPONSE_BYTES_MAX: u32 = floe_storage::BLOCK_BYTES as u32 + REQUEST_BYTES_MAX;

/// Statuses of a response.
pub mod status {
    pub const OK: u8 = 0;
    /// The request is malformed or names no segment block.
    pub const INVALID: u8 = 1;
    /// The owner could not read the block (the object store failed, or it is busy).
    pub const UNAVAILABLE: u8 = 2;
    /// A request of a version this agent does not speak.
    pub const UNSUPPORTED: u8 = 3;
}

/// One block asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRequest {
    pub key: String,
    pub object_bytes: u64,
    pub index: u64,
}

/// A block as a version 2 answer names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAnswer {
    pub key: String,
    pub index: u64,
    /// CRC-32C of all of `bytes`, as the owner checked them.
    pub crc32c: u32,
    pub bytes: Bytes,
}

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("a frame of {0} bytes is larger than allowed")]
    TooLarge(u32),
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    #[error("request version {0} is not spoken here")]
    Version(u8),
}

pub async fn write_request(w: &mut (impl AsyncWrite + Unpin), request: &BlockRequest) -> std::io::Result<()> {
    write_request_of(w, VERSION, request).await
}

/// A request in `version`'s layout (the same in versions 1 and 2; tests ask as older agents do).
async fn write_request_of(
    w: &mut (impl AsyncWrite + Unpin),
    version: u8,
    request: &BlockRequest,
) -> std::io::Result<()> {
    let key = request.key.as_bytes();
    let key_len = u16::try_from(key.len()).map_err(|_| std::io::Error::other("key too long"))?;
    let mut frame = Vec::with_capacity(4 + 1 + 2 + key.len() + 16);
    frame.extend_from_slice(&(1 + 2 + u32::from(key_len) + 16).to_be_bytes());
    frame.push(version);
    frame.extend_from_slice(&key_len.to_be_bytes());
    frame.extend_from_slice(key);
    frame.extend_from_slice(&request.object_bytes.to_be_bytes());
    frame.extend_from_slice(&request.index.to_be_bytes());
    w.write_all(&frame).await?;
    w.flush().await
}

/// Reads one request and the version it was asked in; `Ok(None)` when the connection closed
/// between requests.
pub async fn read_request(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<(u8, BlockRequest)>, WireError> {
    let len = match r.read_u32().await {
        Ok(len) => len,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if len > REQUEST_BYTES_MAX {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    decode_request(&body).map(Some)
}

fn decode_request(body: &[u8]) -> Result<(u8, BlockRequest), WireError> {
    let (&version, rest) = body.split_first().ok_or(WireError::Malformed("empty"))?;
    if !(VERSION_MIN..=VERSION).contains(&version) {
        return Err(WireError::Version(version));
    }
    let (key_len, rest) = rest.split_first_chunk::<2>().ok_or(WireError::Malformed("no key length"))?;
    let key_len = usize::from(u16::from_be_bytes(*key_len));
    if rest.len() != key_len + 16 {
        return Err(WireError::Malformed("length does not match the key"));
    }
    let (key, rest) = rest.split_at(key_len);
    let key = std::str::from_utf8(key).map_err(|_| WireError::Malformed("key is not UTF-8"))?.to_owned();
    let (object_bytes, index) = rest.split_at(8);
    let number = |b: &[u8]| b.try_into().map(u64::from_be_bytes).map_err(|_| WireError::Malformed("short number"));
    Ok((version, BlockRequest { key, object_bytes: number(object_bytes)?, index: number(index)? }))
}

pub async fn write_response(w: &mut (impl AsyncWrite + Unpin), status: u8, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| std::io::Error::other("response too long"))?;
    let mut head = [0u8; 5];
    head[0] = status;
    head[1..].copy_from_slice(&len.to_be_bytes());
    w.write_all(&head).await?;
    w.write_all(body).await?;
    w.flush().await
}

/// Writes a version 2 `OK` answer: the block named, then its bytes (not copied).
pub async fn write_block(w: &mut (impl AsyncWrite + Unpin), answer: &BlockAnswer) -> std::io::Result<()> {
    let key = answer.key.as_bytes();
    let key_len = u16::try_from(key.len()).map_err(|_| std::io::Error::other("key too long"))?;
    let len = u32::try_from(2 + key.len() + 8 + 4 + answer.bytes.len())
        .map_err(|_| std::io::Error::other("response too long"))?;
    let mut head = Vec::with_capacity(5 + 2 + key.len() + 12);
    head.push(status::OK);
    head.extend_from_slice(&len.to_be_bytes());
    head.extend_from_slice(&key_len.to_be_bytes());
    head.extend_from_slice(key);
    head.extend_from_slice(&answer.index.to_be_bytes());
    head.extend_from_slice(&answer.crc32c.to_be_bytes());
    w.write_all(&head).await?;
    w.write_all(&answer.bytes).await?;
    w.flush().await
}

/// Reads one response: its status and body.
pub async fn read_response(r: &mut (impl AsyncRead + Unpin)) -> Result<(u8, Bytes), WireError> {
    let status = r.read_u8().await?;
    let len = r.read_u32().await?;
    if len > RESPONSE_BYTES_MAX {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    Ok((status, Bytes::from(body)))
}

/// The block a version 2 `OK` body names, and its bytes (sharing the body's memory).
pub fn decode_block(body: &Bytes) -> Result<BlockAnswer, WireError> {
    let (key_len, rest) = body.split_first_chunk::<2>().ok_or(WireError::Malformed("no key length"))?;
    let key_len = usize::from(u16::from_be_bytes(*key_len));
    let key = rest.get(..key_len).ok_or(WireError::Malformed("shorter than its key"))?;
    let key = std::str::from_utf8(key).map_err(|_| WireError::Malformed("key is not UTF-8"))?.to_owned();
    let (index, rest) = rest[key_len..].split_first_chunk::<8>().ok_or(WireError::Malformed("no block index"))?;
    let (crc32c, _) = rest.split_first_chunk::<4>().ok_or(WireError::Malformed("no checksum"))?;
    let name_bytes = 2 + key_len + 8 + 4;
    Ok(BlockAnswer {
        key,
        index: u64::from_be_bytes(*index),
        crc32c: u32::from_be_bytes(*crc32c),
        bytes: body.slice(name_bytes..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_and_responses_round_trip_and_bad_frames_are_refused() {
        let request = BlockRequest { key: "segments/0191.seg".into(), object_bytes: 9 << 20, index: 2 };
        let mut bytes = Vec::new();
        write_request(&mut bytes, &request).await.expect("write");
        assert_eq!(read_request(&mut bytes.as_slice()).await.expect("read"), Some((VERSION, request.clone())));
        assert!(read_request(&mut &[][..]).await.expect("closed").is_none());

        let mut newer = bytes.clone();
        newer[4] = VERSION + 1;
        assert!(matches!(read_request(&mut newer.as_slice()).await, Err(WireError::Version(3))));
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&(REQUEST_BYTES_MAX + 1).to_be_bytes());
        assert!(matches!(read_request(&mut huge.as_slice()).await, Err(WireError::TooLarge(_))));
        let mut short_key = bytes.clone();
        short_key[6] += 1;
        assert!(matches!(read_request(&mut short_key.as_slice()).await, Err(WireError::Malformed(_))));

        let mut response = Vec::new();
        write_response(&mut response, status::OK, b"block").await.expect("write");
        let (status, body) = read_response(&mut response.as_slice()).await.expect("read");
        assert_eq!((status, &body[..]), (status::OK, &b"block"[..]));
        let mut oversized = vec![status::OK];
        oversized.extend_from_slice(&(RESPONSE_BYTES_MAX + 1).to_be_bytes());
        assert!(matches!(read_response(&mut oversized.as_slice()).await, Err(WireError::TooLarge(_))));
    }

    /// An agent of version 1 asks in version 1, and is told which version it asked in, so its
    /// owner answers with the bytes alone, as before.
    #[tokio::test]
    async fn a_version_1_request_still_reads() {
        let request = BlockRequest { key: "segments/0191.seg".into(), object_bytes: 9 << 20, index: 2 };
        let mut bytes = Vec::new();
        write_request_of(&mut bytes, 1, &request).await.expect("write");
        assert_eq!(read_request(&mut bytes.as_slice()).await.expect("read"), Some((1, request)));
    }

    /// A version 2 answer names its block and checksum; a body too short for its name is refused.
    #[tokio::test]
    async fn answers_name_their_block_and_checksum() {
        let answer = BlockAnswer {
            key: "segments/0191.seg".into(),
            index: 7,
            crc32c: 0xdead_beef,
            bytes: Bytes::from_static(b"the block"),
        };
        let mut response = Vec::new();
        write_block(&mut response, &answer).await.expect("write");
        let (status, body) = read_response(&mut response.as_slice()).await.expect("read");
        assert_eq!(status, status::OK);
        assert_eq!(decode_block(&body).expect("decodes"), answer);
        for len in 0..2 + answer.key.len() + 12 {
            assert!(decode_block(&body.slice(..len)).is_err(), "a body of {len} bytes");
        }
        let empty = BlockAnswer { bytes: Bytes::new(), ..answer };
        let mut response = Vec::new();
        write_block(&mut response, &empty).await.expect("write");
        let (_, body) = read_response(&mut response.as_slice()).await.expect("read");
        assert_eq!(decode_block(&body).expect("an empty block decodes"), empty);
    }
}
