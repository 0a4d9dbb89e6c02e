//! One Kafka connection: frames in, responses out, in request order.
//!
//! Requests are read and started in order (a Produce's batches enter the flush buffer before the
//! next request is read), then run concurrently; a writer task answers them strictly in the order
//! they arrived, so a slow long-poll Fetch is never overtaken on its connection. At most
//! [`CONNECTION_REQUESTS_IN_FLIGHT_MAX`] requests holding at most
//! [`CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX`] bytes ([`BytesInFlight`]) are in flight; past
//! either the reader waits.
//! Any framing or decoding error closes this connection only.
//!
//! Memory: a connection that is not reading a request or writing a response holds no buffer
//! ([`FrameReader`], [`ResponseWriter`]). What stays is its two tasks (the reader's future holds
//! the largest request handler's state, a few KiB; the writer's about one KiB), the in-flight
//! queue's first block (32 boxed slots, 256 bytes), its SASL session and the listener's entries:
//! by the types, about 8 KiB, so 10,000 idle unauthenticated connections take about 80 MB, not
//! counting the kernel's socket buffers (estimated, not measured). Before issue 52 each
//! connection also held a zeroed 64 KiB read buffer, a 64 KiB write buffer and a 10 KiB queue
//! block (32 unboxed `InFlight` of about 320 bytes) from its first byte on, about 140 KiB: 1.4 GB
//! for 10,000. The process keeps freed memory for reuse rather than giving it back (`heap.rs`
//! in the binary: up to 256 MiB free at the top of each glibc heap), so RSS after a burst of
//! connections stays near its peak; the lower peak is what this bounds.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use floe_metadata::Namespace;
use kafka_protocol::messages::{ApiKey, FetchResponse, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::api::groups::CommitLane;
use super::connections::Admitted;
use super::dispatch::{self, Caller, Extras, Reply};
use super::error_code;
use super::frame;
use super::resources::{self, Refused, TopicIdAliases};
use super::sasl::{Admission, Principal, Session, Verdict};
use crate::Agent;
use crate::access::Access;
use crate::fetch::sessions::Ticket;
use crate::limits::{
    CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX, CONNECTION_REQUESTS_IN_FLIGHT_MAX, FETCH_RESPONSE_BYTES_MAX,
    FRAME_BYTES_MAX,
};
use crate::quotas::{QuotaBuckets, QuotaHolder, QuotaKind};

/// Why a connection was closed by the agent.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("frame of {0} bytes is outside 8..={FRAME_BYTES_MAX}")]
    FrameSize(i64),
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    #[error("{0:?} v{1} is not supported")]
    UnsupportedVersion(ApiKey, i16),
    #[error("cannot decode request: {0}")]
    Decode(String),
    #[error("{0}")]
    Unauthenticated(&'static str),
    #[error("frame of {0} bytes before authentication (at most {1})")]
    FrameBeforeAuthentication(i64, usize),
    #[error("not authenticated within {0:?}")]
    AuthenticationTimeout(std::time::Duration),
    #[error("no request for {0:?}")]
    Idle(std::time::Duration),
    #[error("closed to make room for another connection")]
    Evicted,
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Most bytes one read of the socket (or of the TLS layer) takes: many small pipelined requests
/// arrive in one read rather than two reads each.
const READ_BYTES_MAX: usize = 64 * 1024;
/// Fewest bytes room is made for when a frame's next bytes are read: a small request and the
/// length prefix of the one behind it fit in one read.
const READ_BYTES_MIN: usize = 4 * 1024;
/// Responses smaller than this are gathered and written together; larger ones (a Fetch's
/// records) are written as their own parts.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// The bytes a connection's read, unanswered requests hold (their frames, and what a Fetch's
/// answer may grow to), bounded by [`CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX`]: the reader takes
/// a request's share before starting it and the writer gives it back once the answer is written.
#[derive(Default)]
struct BytesInFlight {
    held: std::sync::atomic::AtomicU64,
    returned: tokio::sync::Notify,
}

impl BytesInFlight {
    /// Waits until `bytes` more fit (or nothing is held, so any one request proceeds), then
    /// holds them until the returned share is dropped. Only the connection's reader takes
    /// shares, so what it checked cannot grow before it adds.
    async fn take(self: &Arc<Self>, bytes: u64) -> HeldBytes {
        use std::sync::atomic::Ordering::AcqRel;
        loop {
            let returned = self.returned.notified();
            let held = self.held.load(std::sync::atomic::Ordering::Acquire);
            if held == 0 || held.saturating_add(bytes) <= CONNECTION_REQUEST_BYTES_IN_FLIGHT_MAX {
                self.held.fetch_add(bytes, AcqRel);
                return HeldBytes { of: self.clone(), bytes };
            }
            returned.await;
        }
    }
}

/// One request's share of [`BytesInFlight`], given back when dropped.
struct HeldBytes {
    of: Arc<BytesInFlight>,
    bytes: u64,
}

impl Drop for HeldBytes {
    fn drop(&mut self) {
        self.of.held.fetch_sub(self.bytes, std::sync::atomic::Ordering::AcqRel);
        self.of.returned.notify_one();
    }
}

/// The bytes a request holds while in flight: its frame, and for a Fetch the answer it may
/// grow to (versions before 3 have no `max_bytes`: the largest answer).
fn bytes_in_flight(frame_bytes: u64, request: &RequestKind, version: i16) -> u64 {
    let answer = match request {
        RequestKind::Fetch(fetch) if version >= 3 => usize::try_from(fetch.max_bytes).unwrap_or(0),
        RequestKind::Fetch(_) => FETCH_RESPONSE_BYTES_MAX,
        _ => 0,
    };
    frame_bytes.saturating_add(answer.min(FETCH_RESPONSE_BYTES_MAX) as u64)
}

struct InFlight {
    started: std::time::Instant,
    /// The connection's quota holds ([`Connection::holds`]) when it was read.
    holds_before: u64,
    /// The request frame's length, for `floe_kafka_request_bytes_total`.
    request_bytes: u64,
    correlation_id: i32,
    api_key: ApiKey,
    version: i16,
    reply: Reply,
    finish: Finish,
    /// Its share of the connection's [`BytesInFlight`], given back when the answer is written.
    _held: Option<HeldBytes>,
}

/// What the writer needs to finish a response.
#[derive(Default)]
struct Finish {
    /// The tenant's namespace, for a connection authenticated as one of its users.
    namespace: Option<Namespace>,
    /// That tenant, for its quotas.
    tenant: Option<String>,
    /// How long to hold the response back for the tenant's produce quota.
    throttle: std::time::Duration,
    /// The caller and what the authorizer took out of its request.
    refused: Option<(Access, Refused)>,
    /// The aliases its request's walk gave other tenants' topic ids, answered as the client's.
    aliases: TopicIdAliases,
    /// The fetch session this Fetch continues or opens.
    fetch_session: Option<Ticket>,
}

/// What one connection keeps from one request to the next.
struct Connection {
    /// Its number, which owns its fetch sessions.
    id: u64,
    peer: SocketAddr,
    /// Its OffsetCommits, applied in the order it sent them.
    lane: CommitLane,
    /// Nanoseconds its responses were held back for quotas so far (the writer adds them), so a
    /// request's latency can leave out the holds it waited behind.
    holds: Arc<std::sync::atomic::AtomicU64>,
}

/// Closes a connection's fetch sessions when it goes, however it goes.
struct FetchSessionsOf<'a>(&'a Agent, u64);

impl Drop for FetchSessionsOf<'_> {
    fn drop(&mut self) {
        self.0.fetch_sessions.close_connection(self.1);
    }
}

/// Serves one connection: a TCP stream, or a TLS stream over one. `admitted` is its place in
/// the listener; it is closed early if the listener needs that place for another.
pub(super) async fn serve<S>(agent: Arc<Agent>, stream: S, peer: SocketAddr, admitted: Admitted)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (reader, writer) = tokio::io::split(stream);
    let reader = FrameReader::new(reader);
    // Boxed, so the queue's blocks (32 slots each, the first made with the queue) stay small.
    let (in_flight, queue) = mpsc::channel::<Box<InFlight>>(CONNECTION_REQUESTS_IN_FLIGHT_MAX);
    let holds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let writer = tokio::spawn(write_responses(agent.clone(), writer, queue, holds.clone()));
    let mut sasl = agent.config.sasl.clone().map(Session::new);
    let connection = Connection { id: agent.fetch_sessions.connection(), peer, lane: CommitLane::default(), holds };
    let _sessions = FetchSessionsOf(&agent, connection.id);
    let closed = tokio::select! {
        closed = read_requests(&agent, reader, in_flight, connection, &mut sasl, &admitted) => closed,
        () = admitted.evicted() => Err(ConnectionError::Evicted),
    };
    match &closed {
        Ok(()) => tracing::debug!(%peer, "connection closed by client"),
        Err(e) => crate::log_limited!(tracing::Level::INFO, %peer, error = %e, "closing connection"),
    }
    if let Some(reason) = closed.as_ref().err().and_then(ConnectionError::limit) {
        crate::metrics::CONNECTIONS_CLOSED.with_label_values(&[reason]).inc();
    }
    // A SCRAM exchange left half-way (the server-first message read, no final one sent) is
    // what a client probing for user names does, and also what a client torn down mid-exchange
    // leaves: it counts a tenth of a wrong password.
    if sasl.as_ref().is_some_and(Session::exchange_pending) {
        crate::metrics::AUTHENTICATIONS.with_label_values(&["abandoned"]).inc();
        agent.auth_failures.record_abandoned(peer.ip(), std::time::Instant::now());
        crate::log_limited!(tracing::Level::INFO, %peer, "SASL exchange abandoned before its last step");
    }
    let _ = writer.await;
}

impl ConnectionError {
    /// The `floe_kafka_connections_closed_total` reason, for a connection closed by a limit.
    fn limit(&self) -> Option<&'static str> {
        match self {
            Self::FrameBeforeAuthentication(..) => Some("frame_before_authentication"),
            Self::AuthenticationTimeout(_) => Some("authentication_timeout"),
            Self::Idle(_) => Some("idle"),
            _ => None,
        }
    }
}

/// The read side of a connection: request frames, in a buffer that exists only while a frame is
/// under way. A connection waiting for its next request holds no read buffer (the first bytes
/// are waited for in four bytes of its task), and a frame's buffer grows as its bytes arrive, by
/// at most [`READ_BYTES_MAX`] a read, so a client announcing a large frame and sending nothing
/// pins only what it sent. A frame is a slice of that buffer: it is freed when the request (and
/// whatever keeps its records) is done with it.
struct FrameReader<R> {
    inner: R,
    /// Bytes read and not yet returned in a frame: the frame under way and what arrived behind
    /// it. Without an allocation whenever it is empty.
    pending: BytesMut,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    fn new(inner: R) -> Self {
        Self { inner, pending: BytesMut::new() }
    }

    /// The next frame, without its length prefix; `None` when the client closed the connection
    /// between frames. A frame longer than `bytes_max` (below [`FRAME_BYTES_MAX`] before
    /// authentication) closes the connection.
    async fn read_frame(&mut self, bytes_max: usize) -> Result<Option<Bytes>, ConnectionError> {
        if self.pending.is_empty() {
            let mut first = [0u8; 4];
            let read = self.inner.read(&mut first).await?;
            if read == 0 {
                return Ok(None);
            }
            self.pending.reserve(READ_BYTES_MIN);
            self.pending.extend_from_slice(&first[..read]);
        }
        while self.pending.len() < 4 {
            if !self.fill(4).await? {
                // Closed inside a length prefix, as when between frames.
                return Ok(None);
            }
        }
        let prefix = [self.pending[0], self.pending[1], self.pending[2], self.pending[3]];
        let length = i64::from(i32::from_be_bytes(prefix));
        if length > bytes_max as i64 && bytes_max < FRAME_BYTES_MAX {
            return Err(ConnectionError::FrameBeforeAuthentication(length, bytes_max));
        }
        if !(8..=FRAME_BYTES_MAX as i64).contains(&length) {
            return Err(ConnectionError::FrameSize(length));
        }
        let end = 4 + length as usize;
        while self.pending.len() < end {
            if !self.fill(end).await? {
                return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
            }
        }
        self.pending.advance(4);
        let frame = self.pending.split_to(end - 4).freeze();
        if self.pending.is_empty() {
            // The buffer goes with the frame; the next one gets its own when its bytes come.
            self.pending = BytesMut::new();
        }
        Ok(Some(frame))
    }

    /// One read toward `end` bytes pending, after making room if there is none: what is
    /// missing, at least [`READ_BYTES_MIN`] and at most [`READ_BYTES_MAX`]. `false` at the end
    /// of the stream.
    async fn fill(&mut self, end: usize) -> std::io::Result<bool> {
        if self.pending.capacity() == self.pending.len() {
            let missing = end.saturating_sub(self.pending.len());
            self.pending.reserve(missing.clamp(READ_BYTES_MIN, READ_BYTES_MAX));
        }
        Ok(self.inner.read_buf(&mut self.pending).await? > 0)
    }
}

/// The write side of a connection: small responses gathered into one write, in a buffer that
/// exists from the first response of a burst to the flush that ends it (before every wait), so
/// a connection with nothing to send holds no write buffer. A response of
/// [`WRITE_BUFFER_BYTES`] or more is written as its own parts, with vectored writes.
struct ResponseWriter<W> {
    inner: W,
    buffered: Vec<u8>,
    usage: PendingUsage,
}

/// Usage of the responses not written yet, journaled once before the write that sends them (or
/// when the connection ends) rather than once per response: a journal record costs an encode, a
/// CRC and a write(2), 3% of the agent's CPU at one partition per Produce. Still journaled
/// before the bytes leave, so a SIGKILL never loses the usage of an answered request.
struct PendingUsage {
    /// Whose meter counts them; none where nothing is metered (tests of the writer).
    agent: Option<Arc<Agent>>,
    tenant: String,
    counts: Vec<(floe_metadata::Meter, u64)>,
}

impl PendingUsage {
    fn add(&mut self, tenant: &str, counts: &[(floe_metadata::Meter, u64)]) {
        if tenant != self.tenant {
            self.journal();
            tenant.clone_into(&mut self.tenant);
        }
        for &(meter, count) in counts {
            match self.counts.iter_mut().find(|(m, _)| *m == meter) {
                Some((_, sum)) => *sum += count,
                None => self.counts.push((meter, count)),
            }
        }
    }

    fn journal(&mut self) {
        if let Some(agent) = &self.agent
            && !self.counts.is_empty()
        {
            agent.usage.record(&self.tenant, &self.counts);
        }
        self.counts.clear();
    }
}

impl Drop for PendingUsage {
    fn drop(&mut self) {
        self.journal();
    }
}

impl<W: AsyncWrite + Unpin> ResponseWriter<W> {
    fn new(inner: W, agent: Option<Arc<Agent>>) -> Self {
        Self { inner, buffered: Vec::new(), usage: PendingUsage { agent, tenant: String::new(), counts: Vec::new() } }
    }

    /// Sends `frame` after the responses before it: buffered if small, else at once.
    async fn write(&mut self, mut frame: frame::ResponseFrame) -> std::io::Result<()> {
        let bytes = frame.remaining();
        if self.buffered.len() + bytes > WRITE_BUFFER_BYTES {
            self.write_buffered().await?;
        }
        if bytes >= WRITE_BUFFER_BYTES {
            self.usage.journal();
            return self.inner.write_all_buf(&mut frame).await;
        }
        if self.buffered.capacity() == 0 {
            self.buffered.reserve_exact(WRITE_BUFFER_BYTES);
        }
        bytes::BufMut::put(&mut self.buffered, frame);
        Ok(())
    }

    /// Writes what is buffered, flushes, and gives the buffer up.
    async fn flush(&mut self) -> std::io::Result<()> {
        self.usage.journal();
        self.write_buffered().await?;
        self.buffered = Vec::new();
        self.inner.flush().await
    }

    async fn write_buffered(&mut self) -> std::io::Result<()> {
        if !self.buffered.is_empty() {
            self.usage.journal();
            self.inner.write_all(&self.buffered).await?;
            self.buffered.clear();
        }
        Ok(())
    }
}

/// A request frame after decoding.
#[derive(Debug)]
pub enum Decoded {
    Request {
        header: RequestHeader,
        api_key: ApiKey,
        request: Box<RequestKind>,
    },
    /// ApiVersions in a version newer than ours: answered in v0 with our ranges.
    NewerApiVersions(RequestHeader),
}

/// Decodes one request frame (without its length prefix) as the connection does before
/// dispatching it: API key, header, the supported-version check, the body. Pure, so the fuzz
/// targets can drive it. `extras`: the APIs the listener serves beyond the common ones.
pub fn decode_request(mut frame: Bytes, extras: Extras) -> Result<Decoded, ConnectionError> {
    if frame.len() < 4 {
        return Err(ConnectionError::FrameSize(frame.len() as i64));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api_key = ApiKey::try_from(key).map_err(|()| ConnectionError::UnknownApiKey(key))?;
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(version))
        .map_err(|e| ConnectionError::Decode(e.to_string()))?;
    if !dispatch::is_supported(api_key, version, extras) {
        if api_key == ApiKey::ApiVersions {
            return Ok(Decoded::NewerApiVersions(header));
        }
        return Err(ConnectionError::UnsupportedVersion(api_key, version));
    }
    let request =
        RequestKind::decode(api_key, &mut frame, version).map_err(|e| ConnectionError::Decode(e.to_string()))?;
    Ok(Decoded::Request { header, api_key, request: Box::new(request) })
}

async fn read_requests(
    agent: &Arc<Agent>,
    mut reader: FrameReader<impl AsyncRead + Unpin>,
    in_flight: mpsc::Sender<Box<InFlight>>,
    mut connection: Connection,
    sasl: &mut Option<Session>,
    admitted: &Admitted,
) -> Result<(), ConnectionError> {
    let extras = dispatch::extras(agent);
    let peer = connection.peer;
    let limits = agent.config.connections.clone();
    let budget = Arc::new(BytesInFlight::default());
    let authenticate_by = tokio::time::Instant::now() + limits.authentication_timeout;
    let mut proven = false;
    loop {
        let authenticated = sasl.as_ref().is_none_or(|s| s.principal().is_some());
        if authenticated && !proven && sasl.is_some() {
            admitted.proven();
            proven = true;
        }
        // Until it authenticates a connection has a deadline and small frames: a stranger can
        // hold neither a connection nor much memory for long.
        let (bytes_max, read_by, timed_out) = if authenticated {
            let idle = limits.idle;
            (FRAME_BYTES_MAX, tokio::time::Instant::now() + idle, ConnectionError::Idle(idle))
        } else {
            let timeout = limits.authentication_timeout;
            (limits.unauthenticated_frame_bytes_max, authenticate_by, ConnectionError::AuthenticationTimeout(timeout))
        };
        let frame = match tokio::time::timeout_at(read_by, reader.read_frame(bytes_max)).await {
            Ok(frame) => frame?,
            Err(_) => return Err(timed_out),
        };
        let Some(frame) = frame else { return Ok(()) };
        let frame_bytes = frame.len() as u64;
        let started = std::time::Instant::now();
        let (header, api_key, version, request) = match decode_request(frame, extras)? {
            Decoded::Request { header, api_key, request } => {
                let version = header.request_api_version;
                if !proven && sasl.is_none() {
                    admitted.proven();
                    proven = true;
                }
                (header, api_key, version, *request)
            }
            Decoded::NewerApiVersions(header) => {
                // Newer clients than us: answer in v0 with the ranges we have, so they retry.
                let reply = Reply::Now(Box::new(ResponseKind::ApiVersions(dispatch::api_versions_unsupported(extras))));
                let correlation_id = header.correlation_id;
                let (api_key, version, finish) = (ApiKey::ApiVersions, 0, Finish::default());
                let request_bytes = frame_bytes;
                let holds_before = connection.holds.load(std::sync::atomic::Ordering::Relaxed);
                let request = InFlight {
                    started,
                    holds_before,
                    request_bytes,
                    correlation_id,
                    api_key,
                    version,
                    reply,
                    finish,
                    _held: None,
                };
                let _ = in_flight.send(Box::new(request)).await;
                continue;
            }
        };
        let correlation_id = header.correlation_id;
        let held = Some(budget.take(bytes_in_flight(frame_bytes, &request, version)).await);
        let mut close = false;
        let (reply, finish) = match (&mut *sasl, request) {
            // Authentication changes what the next request may do, so it is answered here, in
            // order, before the next request is read.
            (Some(session), RequestKind::SaslHandshake(request)) => {
                (Reply::Now(Box::new(ResponseKind::SaslHandshake(session.handshake(&request)))), Finish::default())
            }
            (Some(session), RequestKind::SaslAuthenticate(request)) => {
                let now = std::time::Instant::now();
                let (response, verdict) = match agent.auth_failures.blocked(peer.ip(), now) {
                    // Refused without checking the credentials: guessing gains nothing here.
                    Some(wait) => session.refuse(&floe_auth::AuthError::TooManyFailures(wait.as_secs().max(1)), peer),
                    None => {
                        let answered = session.authenticate(&request, &agent.metadata.read(), peer);
                        if let Verdict::Close = answered.1 {
                            agent.auth_failures.record_failure(peer.ip(), now);
                        }
                        // Authenticated: it takes one of its tenant's places, if one is free.
                        let tenant = session.principal().map(|p| p.tenant.clone());
                        match tenant.map(|t| admitted.proven_as(&t)) {
                            Some(Err(refusal)) => {
                                crate::metrics::CONNECTIONS_CLOSED.with_label_values(&["per_tenant"]).inc();
                                session.refuse(&floe_auth::AuthError::OverLimit(refusal.to_string()), peer)
                            }
                            _ => answered,
                        }
                    }
                };
                if let Verdict::Close = verdict {
                    tokio::time::sleep(session.failure_delay()).await;
                    close = true;
                }
                (Reply::Now(Box::new(ResponseKind::SaslAuthenticate(response))), Finish::default())
            }
            (Some(session), request) => {
                let admission = session.admit(api_key, &agent.metadata.read());
                match admission {
                    Admission::Refuse(why) => return Err(ConnectionError::Unauthenticated(why)),
                    Admission::Serve => {
                        let principal = session.principal().cloned();
                        start(agent, &header, request, principal.as_ref(), frame_bytes, &mut connection).await
                    }
                }
            }
            (None, request) => start(agent, &header, request, None, frame_bytes, &mut connection).await,
        };
        let request_bytes = frame_bytes;
        let holds_before = connection.holds.load(std::sync::atomic::Ordering::Relaxed);
        // A tenant over its request or produce quota is muted for its hold, as Kafka mutes a
        // throttled channel, beside its answer's hold: however many requests it pipelines, it
        // is read no faster than its share (an acks=0 produce was held before it started).
        let mute = (!matches!(reply, Reply::None)).then_some(finish.throttle).filter(|t| !t.is_zero());
        let in_flight_request = InFlight {
            started,
            holds_before,
            request_bytes,
            correlation_id,
            api_key,
            version,
            reply,
            finish,
            _held: held,
        };
        if in_flight.send(Box::new(in_flight_request)).await.is_err() || close {
            return Ok(());
        }
        if let Some(hold) = mute {
            tokio::time::sleep(hold).await;
        }
    }
}

/// Starts one request that is not part of SASL. An API that acts for its caller (the credential
/// and ACL APIs, `dispatch::acts_for_caller`) goes to dispatch as it is; every other is checked
/// against ACLs, charged to the tenant's quotas, scoped to its namespace and then dispatched.
async fn start(
    agent: &Arc<Agent>,
    header: &RequestHeader,
    mut request: RequestKind,
    principal: Option<&Principal>,
    frame_bytes: u64,
    connection: &mut Connection,
) -> (Reply, Finish) {
    let peer = connection.peer;
    let user = principal.map(|p| p.user.as_str());
    let access = Access::new(&agent.config, user, principal.map(|p| p.tenant.as_str()), peer.ip());
    if ApiKey::try_from(header.request_api_key).is_ok_and(dispatch::acts_for_caller) {
        let caller = Caller { principal, access: access.as_ref(), peer, tenant: None, fetch_session: None };
        return (dispatch::start(agent, header, request, &caller, &mut connection.lane).await, Finish::default());
    }
    let mut finish = Finish {
        namespace: principal.map(|p| p.namespace.clone()),
        tenant: principal.map(|p| p.tenant.clone()),
        ..Finish::default()
    };
    if let RequestKind::Fetch(fetch) = &mut request {
        // Before the authorizer: it checks every partition of the session, as Kafka does.
        let (id, tenant, version) = (connection.id, finish.tenant.as_deref(), header.request_api_version);
        let began = {
            let journal = &agent.metadata.read().changed;
            agent.fetch_sessions.begin(id, tenant, version, fetch, journal, std::time::Instant::now())
        };
        match began {
            Ok(ticket) => finish.fetch_session = ticket,
            Err(e) => {
                let code = error_code::for_fetch_session(&e).code();
                let answer = FetchResponse::default().with_error_code(code);
                return (Reply::Now(Box::new(ResponseKind::Fetch(answer))), finish);
            }
        }
    }
    if let Some(access) = &access {
        let (state, ns) = (&agent.metadata.read(), finish.namespace.as_ref());
        match resources::authorize_request(access, ns, state, header.request_api_version, &mut request) {
            Ok(refused) => finish.refused = Some((access.clone(), refused)),
            // An acks=0 producer reads no answers, even refusals.
            Err(_) if matches!(&request, RequestKind::Produce(p) if p.acks == 0) => {
                return (Reply::None, finish);
            }
            Err(answer) => return (Reply::Now(answer), finish),
        }
    }
    if let Some(tenant) = &finish.tenant {
        let share = QuotaBuckets::share(&agent.metadata.read(), QuotaHolder::Tenant(tenant), QuotaKind::Requests);
        if let Some(rate) = share {
            let now = std::time::Instant::now();
            finish.throttle = agent.quotas.charge(QuotaHolder::Tenant(tenant), QuotaKind::Requests, rate, 1, now);
        }
    }
    if let (Some(tenant), RequestKind::Produce(produce)) = (&finish.tenant, &request) {
        let share = QuotaBuckets::share(&agent.metadata.read(), QuotaHolder::Tenant(tenant), QuotaKind::Produce);
        if let Some(rate) = share {
            let now = std::time::Instant::now();
            let held = agent.quotas.charge(QuotaHolder::Tenant(tenant), QuotaKind::Produce, rate, frame_bytes, now);
            finish.throttle = finish.throttle.max(held);
        }
        if produce.acks == 0 && !finish.throttle.is_zero() {
            // No response to hold back: the connection is muted instead (its next
            // request is not read), as Kafka brokers mute a throttled channel.
            tokio::time::sleep(finish.throttle).await;
        }
    }
    let scoped = match &finish.namespace {
        Some(ns) => resources::scope_request(ns, &agent.metadata.read(), header.request_api_version, &mut request),
        None => Ok(TopicIdAliases::default()),
    };
    let reply = match scoped {
        Ok(aliases) => {
            finish.aliases = aliases;
            let tenant = finish.namespace.as_ref().map(Namespace::key);
            let fetch_session = finish.fetch_session.as_ref().map(Ticket::view);
            let caller = Caller { principal, access: access.as_ref(), peer, tenant, fetch_session };
            dispatch::start(agent, header, request, &caller, &mut connection.lane).await
        }
        Err(answer) => Reply::Now(answer),
    };
    (reply, finish)
}

/// The time a tenant's response is held back: `held`, charged when its request was read (its
/// request rate, and its produce bytes), or the fetch bytes it returns charged now, whichever is
/// longer. Produce and Fetch report it in `throttle_time_ms`.
fn quota_throttle(
    agent: &Agent,
    tenant: &str,
    held: std::time::Duration,
    version: i16,
    response: &mut ResponseKind,
) -> std::time::Duration {
    let millis = |d: std::time::Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
    match response {
        ResponseKind::Produce(r) => {
            r.throttle_time_ms = r.throttle_time_ms.max(millis(held));
            held
        }
        ResponseKind::Fetch(r) => {
            let Some(rate) = QuotaBuckets::share(&agent.metadata.read(), QuotaHolder::Tenant(tenant), QuotaKind::Fetch)
            else {
                return held;
            };
            let bytes = r.compute_size(version).unwrap_or(0) as u64;
            let throttle = agent.quotas.charge(
                QuotaHolder::Tenant(tenant),
                QuotaKind::Fetch,
                rate,
                bytes,
                std::time::Instant::now(),
            );
            let throttle = throttle.max(held);
            r.throttle_time_ms = r.throttle_time_ms.max(millis(throttle));
            throttle
        }
        _ => held,
    }
}

/// Counts a response for usage metering, before it is written: one Kafka request, and a Fetch's
/// record batches.
fn meter_response(usage: &mut PendingUsage, tenant: &str, response: &ResponseKind) {
    usage.add(tenant, &[(floe_metadata::Meter::KafkaRequests, 1)]);
    if let ResponseKind::Fetch(fetch) = response {
        let batches = fetch.responses.iter().flat_map(|t| &t.partitions).filter_map(|p| p.records.as_ref());
        for records in batches.filter(|r| !r.is_empty()) {
            usage.add(tenant, &crate::usage::fetched_batches(records));
        }
    }
}

/// Writes responses in request order. Responses are buffered while the next one is already
/// available, and flushed before any wait (for the next request or a pending handler), so a
/// finished response never sits in the buffer behind a slow one.
async fn write_responses(
    agent: Arc<Agent>,
    writer: impl AsyncWrite + Unpin,
    mut queue: mpsc::Receiver<Box<InFlight>>,
    holds: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut writer = ResponseWriter::new(writer, Some(agent.clone()));
    loop {
        let request = match queue.try_recv() {
            Ok(request) => *request,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                if writer.flush().await.is_err() {
                    return;
                }
                match queue.recv().await {
                    Some(request) => *request,
                    None => break,
                }
            }
        };
        let metrics = crate::metrics::api_metrics(request.api_key);
        metrics.requests.inc();
        // With SASL, requests before authentication (and of users without a tenant) are not
        // usage; without it every request is usage of no tenant.
        let metered = agent.config.sasl.is_none() || request.finish.tenant.is_some();
        let tenant = request.finish.tenant.as_deref().unwrap_or_default();
        let mut response = match request.reply {
            Reply::None => {
                if metered {
                    writer.usage.add(tenant, &[(floe_metadata::Meter::KafkaRequests, 1)]);
                }
                continue;
            }
            Reply::Now(response) => *response,
            Reply::Waiting(dispatch::WaitingAnswer(mut answer)) => {
                let ready = answer.as_mut().poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
                match ready {
                    std::task::Poll::Ready(response) => response,
                    std::task::Poll::Pending => {
                        if writer.flush().await.is_err() {
                            return;
                        }
                        answer.await
                    }
                }
            }
            Reply::Later(handle) => {
                if !handle.is_finished() && writer.flush().await.is_err() {
                    return;
                }
                match handle.await {
                    Ok(response) => response,
                    Err(e) => {
                        crate::log_limited!(
                            tracing::Level::ERROR,
                            api = ?request.api_key,
                            error = %e,
                            "request handler failed; closing connection"
                        );
                        return;
                    }
                }
            }
        };
        let finish = request.finish;
        if let Some(ns) = &finish.namespace {
            resources::unscope_answer(ns, &finish.aliases, &mut response);
        }
        if let Some((access, refused)) = finish.refused {
            resources::complete_answer(
                &access,
                finish.namespace.as_ref(),
                &agent.metadata.read(),
                refused,
                &mut response,
            );
        }
        if let (Some(ticket), ResponseKind::Fetch(fetch)) = (finish.fetch_session, &mut response) {
            agent.fetch_sessions.finish(ticket, fetch);
        }
        let throttle = match &finish.tenant {
            Some(tenant) => quota_throttle(&agent, tenant, finish.throttle, request.version, &mut response),
            None => std::time::Duration::ZERO,
        };
        if metered {
            meter_response(&mut writer.usage, finish.tenant.as_deref().unwrap_or_default(), &response);
        }
        if !throttle.is_zero() {
            // Held back as Kafka brokers before KIP-219 did: the client's in-flight window fills
            // and it sends no faster than its share. Responses after it on this connection wait too.
            if writer.flush().await.is_err() {
                return;
            }
            tokio::time::sleep(throttle).await;
            let nanos = u64::try_from(throttle.as_nanos()).unwrap_or(u64::MAX);
            holds.fetch_add(nanos, std::sync::atomic::Ordering::Relaxed);
        }
        let frame = match frame::encode(request.correlation_id, request.api_key, request.version, response) {
            Ok(frame) => frame,
            Err(e) => {
                crate::log_limited!(
                    tracing::Level::ERROR,
                    api = ?request.api_key,
                    error = %e,
                    "cannot encode response; closing connection"
                );
                return;
            }
        };
        metrics.request_bytes.inc_by(request.request_bytes);
        metrics.response_bytes.inc_by(frame.remaining() as u64);
        if writer.write(frame).await.is_err() {
            return;
        }
        // Quota holds (its own, and those of earlier responses it waited behind) are the tenant's
        // wait, not the agent's: counted, they would make one tenant producing past its share
        // look like an overloaded agent (autoscaling reads this histogram).
        // `floe_quota_throttle_seconds_total` counts the holds.
        let held = holds.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(request.holds_before);
        let served = request.started.elapsed().saturating_sub(std::time::Duration::from_nanos(held));
        metrics.seconds.observe(served.as_secs_f64());
    }
    let _ = writer.flush().await;
}

#[cfg(test)]
mod tests;
