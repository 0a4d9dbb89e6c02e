//! The agent-to-agent block protocol, version 1: one request at a time per connection.
//!
//! ```text
//! request:  u32 length | u8 version (1) | u16 key length | key | u64 object bytes | u64 block index
//! response: u8 status | u32 length | body (the block's bytes when the status is OK, else a
//!           UTF-8 reason)
//! ```
//!
//! All integers are big-endian. A request of another version is answered `UNSUPPORTED`, so a
//! newer agent can tell an older owner apart and read from the object store instead.

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub const VERSION: u8 = 1;
/// Bytes of a request after its length: a segment key is far shorter.
pub const REQUEST_BYTES_MAX: u32 = 1024;
/// Bytes of a response body: one block, or a short reason.
pub const RESPONSE_BYTES_MAX: u32 = floe_storage::BLOCK_BYTES as u32;

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
    let key = request.key.as_bytes();
    let key_len = u16::try_from(key.len()).map_err(|_| std::io::Error::other("key too long"))?;
    let mut frame = Vec::with_capacity(4 + 1 + 2 + key.len() + 16);
    frame.extend_from_slice(&(1 + 2 + u32::from(key_len) + 16).to_be_bytes());
    frame.push(VERSION);
    frame.extend_from_slice(&key_len.to_be_bytes());
    frame.extend_from_slice(key);
    frame.extend_from_slice(&request.object_bytes.to_be_bytes());
    frame.extend_from_slice(&request.index.to_be_bytes());
    w.write_all(&frame).await?;
    w.flush().await
}

/// Reads one request; `Ok(None)` when the connection closed between requests.
pub async fn read_request(r: &mut (impl AsyncRead + Unpin)) -> Result<Option<BlockRequest>, WireError> {
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

fn decode_request(body: &[u8]) -> Result<BlockRequest, WireError> {
    let (&version, rest) = body.split_first().ok_or(WireError::Malformed("empty"))?;
    if version != VERSION {
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
    Ok(BlockRequest { key, object_bytes: number(object_bytes)?, index: number(index)? })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requests_and_responses_round_trip_and_bad_frames_are_refused() {
        let request = BlockRequest { key: "segments/0191.seg".into(), object_bytes: 9 << 20, index: 2 };
        let mut bytes = Vec::new();
        write_request(&mut bytes, &request).await.expect("write");
        assert_eq!(read_request(&mut bytes.as_slice()).await.expect("read"), Some(request.clone()));
        assert!(read_request(&mut &[][..]).await.expect("closed").is_none());

        let mut newer = bytes.clone();
        newer[4] = 2;
        assert!(matches!(read_request(&mut newer.as_slice()).await, Err(WireError::Version(2))));
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
}
