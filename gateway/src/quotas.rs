//! Tenants' rate quotas over HTTP, in the same buckets as the Kafka listener
//! (`floe_agent::quotas`): a request from a tenant still paying back an excess is refused with 429
//! and `Retry-After`, and the bytes a request uses are charged as it uses them. Every request of
//! a tenant counts against its request rate (`requests`, a middleware).

use std::time::{Duration, Instant};

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use floe_agent::Agent;
use floe_agent::quotas::{QuotaKind, TenantThrottle};

use crate::error::HttpError;
use crate::extract::Scope;

/// Refuses the request while the caller's tenant is over its `kind` share on this agent.
pub(crate) fn admit(agent: &Agent, scope: &Scope, kind: QuotaKind) -> Result<(), HttpError> {
    let Some(tenant) = scope.tenant() else { return Ok(()) };
    let Some(rate) = TenantThrottle::share(&agent.metadata.read(), tenant, kind) else { return Ok(()) };
    let wait = agent.quotas.pending(tenant, kind, rate, Instant::now());
    if wait.is_zero() {
        return Ok(());
    }
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    Err(HttpError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        format!("tenant over its {} quota; retry in {secs} s", kind.name()),
    )
    .with_retry_after(secs))
}

/// Charges `bytes` to the caller's tenant and returns how long it is now over its share.
pub(crate) fn charge(agent: &Agent, scope: &Scope, kind: QuotaKind, bytes: usize) -> Duration {
    let Some(tenant) = scope.tenant() else { return Duration::ZERO };
    let Some(rate) = TenantThrottle::share(&agent.metadata.read(), tenant, kind) else { return Duration::ZERO };
    agent.quotas.charge(tenant, kind, rate, bytes as u64, Instant::now())
}

/// Counts each request of a tenant (named by its API key) against its request rate, refusing it
/// with 429 while the tenant is over its share.
pub(crate) async fn requests(State(agent): State<Arc<Agent>>, request: Request, next: Next) -> Response {
    let Some(tenant) = request.extensions().get::<crate::auth::Caller>().map(|c| c.tenant.clone()) else {
        return next.run(request).await;
    };
    let Some(rate) = TenantThrottle::share(&agent.metadata.read(), &tenant, QuotaKind::Requests) else {
        return next.run(request).await;
    };
    let now = Instant::now();
    let wait = agent.quotas.pending(&tenant, QuotaKind::Requests, rate, now);
    if !wait.is_zero() {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let message = format!("tenant over its requests quota; retry in {secs} s");
        return HttpError::new(axum::http::StatusCode::TOO_MANY_REQUESTS, message)
            .with_retry_after(secs)
            .into_response();
    }
    agent.quotas.charge(&tenant, QuotaKind::Requests, rate, 1, now);
    next.run(request).await
}
