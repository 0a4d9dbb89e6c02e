//! Rate quotas over HTTP, in the same buckets as the Kafka listener (`floe_agent::quotas`): the
//! caller's tenant's, and its API key's own where the key has them. A request from a caller
//! still paying back an excess of either is refused with 429 and `Retry-After`, and the bytes a
//! request uses are charged to both as it uses them. Every request counts against the request
//! rates (`requests`, a middleware).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use floe_agent::Agent;
use floe_agent::quotas::{QuotaBuckets, QuotaHolder, QuotaKind};

use crate::error::HttpError;
use crate::extract::Scope;

/// The quota holders a caller of `tenant` with API key `key_id` is charged to.
fn holders<'a>(tenant: &'a str, key_id: &'a str) -> [(QuotaHolder<'a>, &'static str); 2] {
    [(QuotaHolder::Tenant(tenant), "tenant"), (QuotaHolder::ApiKey(key_id), "API key")]
}

/// A 429 while any of the caller's holders is over its `kind` share on this agent.
fn refuse_while_over(
    agent: &Agent,
    tenant: &str,
    key_id: &str,
    kind: QuotaKind,
    now: Instant,
) -> Result<(), HttpError> {
    let state = agent.metadata.read();
    for (holder, what) in holders(tenant, key_id) {
        let Some(rate) = QuotaBuckets::share(&state, holder, kind) else { continue };
        let wait = agent.quotas.pending(holder, kind, rate, now);
        if !wait.is_zero() {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            return Err(HttpError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                format!("{what} over its {} quota; retry in {secs} s", kind.name()),
            )
            .with_retry_after(secs));
        }
    }
    Ok(())
}

/// Charges `amount` to every holder of the caller and returns the longest it is now over.
fn charge_all(agent: &Agent, tenant: &str, key_id: &str, kind: QuotaKind, amount: u64, now: Instant) -> Duration {
    let state = agent.metadata.read();
    holders(tenant, key_id)
        .into_iter()
        .filter_map(|(holder, _)| {
            let rate = QuotaBuckets::share(&state, holder, kind)?;
            Some(agent.quotas.charge(holder, kind, rate, amount, now))
        })
        .max()
        .unwrap_or(Duration::ZERO)
}

/// Refuses the request while the caller's tenant or key is over its `kind` share on this agent.
pub(crate) fn admit(agent: &Agent, scope: &Scope, kind: QuotaKind) -> Result<(), HttpError> {
    let (Some(tenant), Some(key_id)) = (scope.tenant(), scope.key_id()) else { return Ok(()) };
    refuse_while_over(agent, tenant, key_id, kind, Instant::now())
}

/// Counts records an HTTP read returns for usage metering: their number and their keys', values'
/// and headers' bytes (uncompressed; an HTTP read returns records, not stored batches).
pub(crate) fn meter_read(agent: &Agent, scope: &Scope, records: usize, bytes: usize) {
    use floe_metadata::Meter;
    let counts = [(Meter::FetchedRecords, records as u64), (Meter::FetchedUncompressedBytes, bytes as u64)];
    agent.usage.record(scope.tenant().unwrap_or_default(), &counts);
}

/// Charges `bytes` to the caller's tenant and key and returns how long it is now over a share.
pub(crate) fn charge(agent: &Agent, scope: &Scope, kind: QuotaKind, bytes: usize) -> Duration {
    let (Some(tenant), Some(key_id)) = (scope.tenant(), scope.key_id()) else { return Duration::ZERO };
    charge_all(agent, tenant, key_id, kind, bytes as u64, Instant::now())
}

/// Counts each request of an API key against its own and its tenant's request rates, refusing
/// it with 429 while either is over its share.
/// Also counts the call for usage metering: a tenant's, or without API keys one of no tenant
/// (the operator API and health, metrics and status probes are not usage).
pub(crate) async fn requests(State(agent): State<Arc<Agent>>, request: Request, next: Next) -> Response {
    let Some(caller) = request.extensions().get::<crate::auth::Caller>().cloned() else {
        const NOT_USAGE: [&str; 6] = ["/v1/admin/", "/metrics", "/healthz", "/readyz", "/v1/cluster", "/console"];
        if !NOT_USAGE.iter().any(|p| request.uri().path().starts_with(p)) {
            agent.usage.record("", &[(floe_metadata::Meter::HttpRequests, 1)]);
        }
        return next.run(request).await;
    };
    agent.usage.record(&caller.tenant, &[(floe_metadata::Meter::HttpRequests, 1)]);
    let now = Instant::now();
    if let Err(refused) = refuse_while_over(&agent, &caller.tenant, &caller.key_id, QuotaKind::Requests, now) {
        return refused.into_response();
    }
    charge_all(&agent, &caller.tenant, &caller.key_id, QuotaKind::Requests, 1, now);
    next.run(request).await
}
