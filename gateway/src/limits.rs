//! Limits of the HTTP API, each with the reason for its value.

use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::HttpError;

/// A body read whole (bulk, compressed, or under an `Idempotency-Key`), as sent and decoded: the
/// Kafka listener's largest batch, so one request cannot hold more than one Kafka produce.
pub(crate) const REQUEST_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Records in a body read whole; each gets a delivery report in the response.
pub(crate) const REQUEST_RECORDS_MAX: usize = 100_000;
/// Records in one streamed request; a client streaming more opens another request.
pub(crate) const STREAM_RECORDS_MAX: usize = 10_000_000;
/// JSON text of one record in a stream: what may be buffered while waiting for its end.
/// Room for a 4 MiB value in base64.
pub(crate) const RECORD_JSON_BYTES_MAX: usize = 8 * 1024 * 1024;
/// Records of a stream appended to the flush buffer as one group (those that arrived together).
pub(crate) const STREAM_GROUP_RECORDS_MAX: usize = 10_000;
/// Groups of a stream waiting for their flush: bounds what one stream holds in memory before
/// it stops reading.
pub(crate) const STREAM_GROUPS_IN_FLIGHT_MAX: usize = 64;
/// Longest wait for the next piece of a request body.
pub(crate) const BODY_IDLE: Duration = Duration::from_secs(30);
/// Longest time to receive a body that is read whole: a client trickling bytes just inside
/// [`BODY_IDLE`] cannot hold a request (and its buffer) open for hours.
pub(crate) const BODY_READ_MAX: Duration = Duration::from_secs(300);
/// HTTP requests one agent handles at once (event streams and long-polls included); past it,
/// 503 with Retry-After. Each holds a task and at most one body's buffer.
pub(crate) const REQUESTS_IN_FLIGHT_MAX: usize = 10_000;
/// Record bytes one HTTP read returns (Kafka's `fetch.max.bytes` default is 50 MiB; JSON with
/// base64 is larger still, so less here).
pub(crate) const CONSUME_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Records one HTTP read returns.
pub(crate) const CONSUME_RECORDS_MAX: usize = 10_000;
/// Longest long-poll of an HTTP read.
pub(crate) const CONSUME_WAIT_MAX: Duration = Duration::from_secs(30);
/// Server-Sent Event streams one agent serves at once; each holds a task and a read buffer.
pub(crate) const FOLLOW_STREAMS_MAX: usize = 1024;
/// Offsets one HTTP commit may carry.
pub(crate) const GROUP_COMMIT_OFFSETS_MAX: usize = 10_000;
/// Configs one admin request may set.
pub(crate) const ADMIN_CONFIGS_MAX: usize = 256;

static REQUEST_SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT_MAX)));

/// Refuses a request past [`REQUESTS_IN_FLIGHT_MAX`]; the slot is held until the response body
/// is sent or dropped (an event stream holds it for its life).
pub(crate) async fn requests_in_flight(request: Request, next: Next) -> Response {
    let Ok(slot) = REQUEST_SLOTS.clone().try_acquire_owned() else {
        return HttpError::unavailable(format!("{REQUESTS_IN_FLIGHT_MAX} requests in flight")).into_response();
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(parts, axum::body::Body::new(SlotBody { body, _slot: slot }))
}

/// A response body that holds its request's slot until it is dropped.
struct SlotBody {
    body: axum::body::Body,
    _slot: OwnedSemaphorePermit,
}

impl http_body::Body for SlotBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
