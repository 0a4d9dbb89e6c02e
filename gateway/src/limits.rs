//! Limits of the HTTP API, each with the reason for its value.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use floe_metadata::locks::MutexRecovery;
use tokio::sync::Semaphore;

use crate::auth::{Caller, Peer};
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
/// The streams of one tenant among them, so that one tenant cannot take every slot. Callers
/// without a key (a cluster that does not require keys) have only the agent's limit.
pub(crate) const FOLLOW_TENANT_STREAMS_MAX: usize = 256;
/// Record bytes one event-stream round reads, across all its partitions (one batch more at
/// most: a read returns its first batch whole). A topic stream takes its partitions in turn.
pub(crate) const FOLLOW_ROUND_BYTES_MAX: usize = 1024 * 1024;
/// Record bytes all event streams of one agent hold at once (read, not yet sent); a round
/// waits for room.
pub(crate) const FOLLOW_BUFFER_BYTES_MAX: usize = 256 * 1024 * 1024;
/// The same for the streams of one tenant (or of all callers without a key).
pub(crate) const FOLLOW_TENANT_BUFFER_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Decompressed request-body bytes one agent holds at once; a compressed body's inflation
/// waits for room (up to [`INFLATE_WAIT`]), then is refused with 503.
pub(crate) const INFLATE_BYTES_MAX: usize = 256 * 1024 * 1024;
/// The same for the requests of one tenant (or of all callers without a key).
pub(crate) const INFLATE_TENANT_BYTES_MAX: usize = 128 * 1024 * 1024;
/// Longest wait for inflation room before a 503.
pub(crate) const INFLATE_WAIT: Duration = Duration::from_secs(5);
/// Bytes of bodies being received whole that one agent holds at once, as sent: each may be up
/// to [`REQUEST_BYTES_MAX`], and thousands of slow ones would otherwise add up without bound.
/// A body that finds no room (after [`INFLATE_WAIT`] for its first step) gets 503.
pub(crate) const RECEIVE_BYTES_MAX: usize = 512 * 1024 * 1024;
/// The same for the requests of one tenant (or of all callers without a key).
pub(crate) const RECEIVE_TENANT_BYTES_MAX: usize = 256 * 1024 * 1024;
/// Schema registry requests parsing or checking schemas at once, per agent. Each holds a thread
/// of the blocking pool (tokio's default is 512) for as long as its bounds allow: a 1 MiB text
/// to parse, 1,000,000 steps per Avro comparison and 300,000 per JSON Schema one, each earlier
/// version a transitive level checks, and the table topic's schema to evolve: well under a
/// second of CPU each, so a registry this busy is served by a few cores without taking the
/// whole pool.
pub(crate) const REGISTRY_CHECKS_MAX: usize = 32;
/// The same for one tenant (callers without a key share one entry), so one tenant's burst of
/// registrations waits on its own share.
pub(crate) const REGISTRY_TENANT_CHECKS_MAX: usize = 4;
/// Longest wait for a check slot before the request is refused (50003) rather than queued on.
pub(crate) const REGISTRY_CHECK_WAIT: Duration = Duration::from_secs(10);
/// Offsets one HTTP commit may carry.
pub(crate) const GROUP_COMMIT_OFFSETS_MAX: usize = 10_000;
/// Configs one admin request may set.
pub(crate) const ADMIN_CONFIGS_MAX: usize = 256;

/// Units of one resource held at once: the agent's whole share, and each tenant's (callers
/// without a key share the `""` entry where the caller names it). A reservation holds both
/// until dropped.
pub(crate) struct Shares {
    agent: Arc<Semaphore>,
    per_tenant: usize,
    tenants: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Room taken from [`Shares`], given back when dropped.
#[derive(Default)]
pub(crate) struct Reservation(Vec<tokio::sync::OwnedSemaphorePermit>);

impl Reservation {
    fn absorb(&mut self, other: Reservation) {
        self.0.extend(other.0);
    }
}

/// Whose share was used up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SharesFull {
    Tenant,
    Agent,
}

impl Shares {
    pub(crate) fn new(agent_units: usize, tenant_units: usize) -> Self {
        Self { agent: Arc::new(Semaphore::new(agent_units)), per_tenant: tenant_units, tenants: Mutex::default() }
    }

    fn tenant(&self, tenant: &str) -> Arc<Semaphore> {
        let mut tenants = self.tenants.lock_recovered();
        tenants.entry(tenant.to_owned()).or_insert_with(|| Arc::new(Semaphore::new(self.per_tenant))).clone()
    }

    /// `units` for `tenant`, waited for (the tenant's share first, so one tenant's backlog
    /// queues on its own share rather than the agent's).
    pub(crate) async fn take(&self, tenant: &str, units: u32) -> Option<Reservation> {
        let tenant = self.tenant(tenant).acquire_many_owned(units).await.ok()?;
        let agent = self.agent.clone().acquire_many_owned(units).await.ok()?;
        Some(Reservation(vec![tenant, agent]))
    }

    /// `units` for `tenant` now (the agent's share alone for `None`), or whose share is full.
    pub(crate) fn try_take(&self, tenant: Option<&str>, units: u32) -> Result<Reservation, SharesFull> {
        let mut held = Reservation::default();
        if let Some(tenant) = tenant {
            held.0.push(self.tenant(tenant).try_acquire_many_owned(units).map_err(|_| SharesFull::Tenant)?);
        }
        held.0.push(self.agent.clone().try_acquire_many_owned(units).map_err(|_| SharesFull::Agent)?);
        Ok(held)
    }
}

/// Memory held at once for one purpose: [`Shares`] counted in KiB.
pub(crate) struct MemoryBudget(Shares);

fn kib(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

impl MemoryBudget {
    pub(crate) fn new(agent_bytes: usize, tenant_bytes: usize) -> Self {
        Self(Shares::new(agent_bytes / 1024, tenant_bytes / 1024))
    }

    /// `bytes` of room for `tenant`, waited for.
    pub(crate) async fn reserve(&self, tenant: &str, bytes: usize) -> Option<Reservation> {
        self.0.take(tenant, kib(bytes)).await
    }

    /// `bytes` more room for `tenant` now, or `None`: for code that must not wait.
    pub(crate) fn try_reserve(&self, tenant: &str, bytes: usize) -> Option<Reservation> {
        self.0.try_take(Some(tenant), kib(bytes)).ok()
    }
}

/// Room for decompressed request bodies.
pub(crate) static INFLATE_BUDGET: LazyLock<MemoryBudget> =
    LazyLock::new(|| MemoryBudget::new(INFLATE_BYTES_MAX, INFLATE_TENANT_BYTES_MAX));

/// Slots for schema registry work on the blocking pool (one unit a request).
pub(crate) static REGISTRY_CHECKS: LazyLock<Shares> =
    LazyLock::new(|| Shares::new(REGISTRY_CHECKS_MAX, REGISTRY_TENANT_CHECKS_MAX));

/// Room for request bodies being received whole.
pub(crate) static RECEIVE_BUDGET: LazyLock<MemoryBudget> =
    LazyLock::new(|| MemoryBudget::new(RECEIVE_BYTES_MAX, RECEIVE_TENANT_BYTES_MAX));

/// Grows `held` by `bytes` of `budget` for `tenant`, without waiting.
pub(crate) fn grow(budget: &MemoryBudget, tenant: &str, held: &mut Reservation, bytes: usize) -> bool {
    match budget.try_reserve(tenant, bytes) {
        Some(more) => {
            held.absorb(more);
            true
        }
        None => false,
    }
}

static REQUEST_SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT_MAX)));

/// Health, readiness and metrics: never refused by a request limit, so a flood of other
/// requests cannot take an agent out of its load balancer or out of sight.
fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz" | "/metrics")
}

/// Refuses a request past [`REQUESTS_IN_FLIGHT_MAX`]; the slot is held until the response body
/// is sent or dropped (an event stream holds it for its life).
pub(crate) async fn requests_in_flight(request: Request, next: Next) -> Response {
    if is_probe(request.uri().path()) {
        return next.run(request).await;
    }
    let Ok(slot) = REQUEST_SLOTS.clone().try_acquire_owned() else {
        return HttpError::unavailable(format!("{REQUESTS_IN_FLIGHT_MAX} requests in flight")).into_response();
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(parts, axum::body::Body::new(SlotBody { body, _slot: Box::new(slot) }))
}

/// Requests in flight allowed per API key, per tenant (all its keys together) and per client
/// address (requests without a key), so that one caller cannot use up the agent's
/// [`REQUESTS_IN_FLIGHT_MAX`] for everyone.
#[derive(Clone, Copy, Debug)]
pub struct CallerLimits {
    pub per_key: usize,
    pub per_tenant: usize,
    pub per_ip: usize,
}

impl Default for CallerLimits {
    fn default() -> Self {
        Self { per_key: 1_000, per_tenant: 4_000, per_ip: 1_000 }
    }
}

/// Requests in flight by caller.
#[derive(Debug, Default)]
pub(crate) struct CallersInFlight {
    counts: Mutex<HashMap<CallerKey, usize>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum CallerKey {
    ApiKey(String),
    Tenant(String),
    Address(std::net::IpAddr),
}

/// One request's places in [`CallersInFlight`], given back when dropped.
struct CallerSlots {
    table: Arc<CallersInFlight>,
    keys: Vec<CallerKey>,
}

impl CallersInFlight {
    /// Takes a place under each of `wanted` (key, limit), or none if one is full.
    fn acquire(self: &Arc<Self>, wanted: Vec<(CallerKey, usize)>) -> Result<CallerSlots, CallerKey> {
        let mut counts = self.counts.lock_recovered();
        if let Some((full, _)) = wanted.iter().find(|(key, limit)| counts.get(key).copied().unwrap_or(0) >= *limit) {
            return Err(full.clone());
        }
        for (key, _) in &wanted {
            *counts.entry(key.clone()).or_default() += 1;
        }
        Ok(CallerSlots { table: self.clone(), keys: wanted.into_iter().map(|(key, _)| key).collect() })
    }
}

impl Drop for CallerSlots {
    fn drop(&mut self) {
        let mut counts = self.table.counts.lock_recovered();
        for key in &self.keys {
            if let Some(n) = counts.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(key);
                }
            }
        }
    }
}

/// Refuses a request past its caller's [`CallerLimits`] with 429: its API key's and tenant's
/// (after the key was checked), or its address's without a key.
pub(crate) async fn callers_in_flight(
    State((limits, table)): State<(CallerLimits, Arc<CallersInFlight>)>,
    ConnectInfo(Peer(peer, _)): ConnectInfo<Peer>,
    request: Request,
    next: Next,
) -> Response {
    if is_probe(request.uri().path()) {
        return next.run(request).await;
    }
    let wanted = match request.extensions().get::<Caller>() {
        Some(caller) => vec![
            (CallerKey::ApiKey(caller.key_id.clone()), limits.per_key),
            (CallerKey::Tenant(caller.tenant.clone()), limits.per_tenant),
        ],
        None => vec![(CallerKey::Address(peer.ip()), limits.per_ip)],
    };
    let slots = match table.acquire(wanted) {
        Ok(slots) => slots,
        Err(full) => {
            let (what, limit) = match full {
                CallerKey::ApiKey(_) => ("this API key", limits.per_key),
                CallerKey::Tenant(_) => ("this tenant", limits.per_tenant),
                CallerKey::Address(_) => ("this address", limits.per_ip),
            };
            return HttpError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                format!("{what} has {limit} requests in flight; retry when one has finished"),
            )
            .with_retry_after(1)
            .into_response();
        }
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(parts, axum::body::Body::new(SlotBody { body, _slot: Box::new(slots) }))
}

/// A response body that holds its request's slots until it is dropped.
struct SlotBody {
    body: axum::body::Body,
    _slot: Box<dyn Send + Sync>,
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
