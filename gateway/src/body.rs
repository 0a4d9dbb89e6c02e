//! Request bodies: media types, `Content-Encoding` (gzip, zstd) and size limits. A compressed
//! body is read whole and inflated with a bound, so a small body cannot expand without limit.

use std::io::Read;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use bytes::{Bytes, BytesMut};
use futures::StreamExt;

use crate::error::HttpError;
use crate::limits::{BODY_READ_MAX, INFLATE_BUDGET, INFLATE_WAIT, RECEIVE_BUDGET, grow};

/// How a request body is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Identity,
    Gzip,
    Zstd,
}

impl Encoding {
    pub(crate) fn of(headers: &HeaderMap) -> Result<Self, HttpError> {
        let Some(value) = headers.get(header::CONTENT_ENCODING) else { return Ok(Self::Identity) };
        // An empty or non-ASCII value is refused like any unknown coding (as the API document's
        // enum says), not read as no coding.
        match value.to_str().map(|v| v.trim().to_ascii_lowercase()).unwrap_or_default().as_str() {
            "identity" => Ok(Self::Identity),
            "gzip" | "x-gzip" => Ok(Self::Gzip),
            "zstd" => Ok(Self::Zstd),
            other => Err(HttpError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("Content-Encoding {other:?} is not supported; use gzip, zstd or none"),
            )),
        }
    }
}

/// Refuses a body whose media type is not one of `accepted` (parameters such as charset are
/// ignored).
pub(crate) fn require_media_type(headers: &HeaderMap, accepted: &[&str]) -> Result<(), HttpError> {
    match media_type(headers) {
        Some(t) if accepted.contains(&t.as_str()) => Ok(()),
        other => Err(HttpError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "Content-Type {:?} is not accepted here; send {}",
                other.unwrap_or_default(),
                accepted.join(" or ")
            ),
        )),
    }
}

/// The request's media type (`Content-Type` without parameters), lower case.
pub(crate) fn media_type(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim().to_ascii_lowercase())
}

/// The next piece of a body, or `None` at its end; waits at most `idle` for it.
pub(crate) async fn next_chunk(
    stream: &mut axum::body::BodyDataStream,
    idle: Duration,
) -> Result<Option<Bytes>, HttpError> {
    match tokio::time::timeout(idle, stream.next()).await {
        Err(_) => {
            Err(HttpError::new(StatusCode::REQUEST_TIMEOUT, format!("no request bytes for {} s", idle.as_secs())))
        }
        Ok(None) => Ok(None),
        Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
        Ok(Some(Err(e))) => Err(HttpError::bad_request(format!("reading the request body: {e}"))),
    }
}

/// The whole body, decoded, of at most `max_bytes` both as sent and decoded. While it is
/// received, the body is held in `tenant`'s share of the agent's receive budget, and what a
/// compressed body inflates to in its share of the inflation budget.
pub(crate) async fn read_whole(
    body: Body,
    encoding: Encoding,
    max_bytes: usize,
    idle: Duration,
    tenant: &str,
) -> Result<Bytes, HttpError> {
    let too_large = || HttpError::too_large(format!("request body exceeds {max_bytes} bytes"));
    let mut stream = body.into_data_stream();
    let mut raw = BytesMut::new();
    let receiving = || HttpError::unavailable(RECEIVE_BUSY).with_retry_after(1);
    let receive = async {
        let mut held = tokio::time::timeout(INFLATE_WAIT, RECEIVE_BUDGET.reserve(tenant, RECEIVE_STEP_BYTES))
            .await
            .ok()
            .flatten()
            .ok_or_else(receiving)?;
        let mut room = RECEIVE_STEP_BYTES;
        while let Some(chunk) = next_chunk(&mut stream, idle).await? {
            let len = raw.len() + chunk.len();
            if len > max_bytes {
                return Err(too_large());
            }
            if len > room {
                let more = (len - room).next_multiple_of(RECEIVE_STEP_BYTES);
                if !grow(&RECEIVE_BUDGET, tenant, &mut held, more) {
                    return Err(receiving());
                }
                room += more;
            }
            raw.extend_from_slice(&chunk);
        }
        Ok(held)
    };
    // Held until the body is decoded: then it moves on to the flush buffer, bounded by itself.
    let _received = tokio::time::timeout(BODY_READ_MAX, receive).await.map_err(|_| {
        HttpError::new(StatusCode::REQUEST_TIMEOUT, format!("the body took more than {} s", BODY_READ_MAX.as_secs()))
    })??;
    if encoding == Encoding::Identity {
        return Ok(raw.freeze());
    }
    // The first step of room is waited for; each further one is taken as the output grows, or
    // the body is refused: a flood of compressed bodies queues here, not in memory.
    let busy = || HttpError::unavailable(INFLATE_BUSY).with_retry_after(1);
    let first = tokio::time::timeout(INFLATE_WAIT, INFLATE_BUDGET.reserve(tenant, BUDGET_STEP_BYTES))
        .await
        .ok()
        .flatten()
        .ok_or_else(busy)?;
    // Inflating up to 64 MiB takes long enough to stall the other requests of a runtime
    // thread: it runs on the blocking pool.
    let raw = raw.freeze();
    let tenant = tenant.to_owned();
    let (inflated, held) = tokio::task::spawn_blocking(move || {
        let mut held = first;
        let mut room = BUDGET_STEP_BYTES;
        let room_for = |len: usize| {
            while len > room {
                if !grow(&INFLATE_BUDGET, &tenant, &mut held, BUDGET_STEP_BYTES) {
                    return false;
                }
                room += BUDGET_STEP_BYTES;
            }
            true
        };
        (inflate(&raw, encoding, max_bytes, room_for), held)
    })
    .await
    .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("inflating the body failed: {e}")))?;
    // The decoded body is handed on; its room is given back as the request moves to the flush
    // buffer, which has its own bound.
    drop(held);
    inflated
}

const INFLATE_BUSY: &str = "too many compressed request bodies are being inflated at once; retry";
const RECEIVE_BUSY: &str = "too many large request bodies are being received at once; retry";

/// Room taken from the inflation budget at a time.
const BUDGET_STEP_BYTES: usize = 1024 * 1024;
/// Room a body being received takes at first, and the unit it grows by: small, so that small
/// bodies (an edge client's record under an `Idempotency-Key`) are not limited to a few hundred
/// at once by room they never use.
const RECEIVE_STEP_BYTES: usize = 64 * 1024;

/// `raw` decoded from `encoding`, refused past `max_bytes` or when `room` cannot be given for
/// the output's length.
fn inflate(
    raw: &[u8],
    encoding: Encoding,
    max_bytes: usize,
    mut room: impl FnMut(usize) -> bool,
) -> Result<Bytes, HttpError> {
    let mut bounded = |reader: &mut dyn Read| -> Result<Bytes, HttpError> {
        let mut out = Vec::new();
        let mut reader = reader.take(max_bytes as u64 + 1);
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = reader
                .read(&mut chunk)
                .map_err(|e| HttpError::bad_request(format!("request body does not decompress: {e}")))?;
            if n == 0 {
                break;
            }
            if !room(out.len() + n) {
                return Err(HttpError::unavailable(INFLATE_BUSY).with_retry_after(1));
            }
            out.extend_from_slice(&chunk[..n]);
        }
        if out.len() > max_bytes {
            return Err(HttpError::too_large(format!("request body decompresses to more than {max_bytes} bytes")));
        }
        Ok(Bytes::from(out))
    };
    match encoding {
        Encoding::Identity => Ok(Bytes::copy_from_slice(raw)),
        Encoding::Gzip => bounded(&mut flate2::read::MultiGzDecoder::new(raw)),
        Encoding::Zstd => bounded(
            &mut zstd::stream::read::Decoder::new(raw)
                .map_err(|e| HttpError::bad_request(format!("request body does not decompress: {e}")))?,
        ),
    }
}
