//! API-key authentication of the HTTP API. With `--http-require-api-key`, every `/v3` request
//! names a key: `Authorization: Bearer fk_<id>.<secret>`, or Basic with the key id as user and
//! the secret as password (as Confluent Cloud's REST clients send it). The key's user and
//! tenant go into the request's extensions. Failures wait a second and say only that the key
//! was not accepted.

use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use floe_agent::Agent;
use std::sync::Arc;

use crate::error::HttpError;

/// Who an authenticated request acts as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) tenant: String,
    pub(crate) user: String,
}

/// How long a refused key waits for its 401: slows guessing, costs a typo little.
const FAILURE_DELAY: Duration = Duration::from_secs(1);

/// The key id and secret a request presents.
fn credentials(request: &Request) -> Option<(String, String)> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    match scheme.to_ascii_lowercase().as_str() {
        "bearer" => floe_auth::api_key::split(rest.trim()).ok().map(|(id, secret)| (id.to_owned(), secret.to_owned())),
        "basic" => {
            let decoded = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            Some((id.trim_start_matches("fk_").to_owned(), secret.to_owned()))
        }
        _ => None,
    }
}

fn caller(agent: &Agent, id: &str, secret: &str) -> Option<Caller> {
    let state = agent.metadata.read();
    let key = state.api_keys.get(id)?;
    let live = key.expires_ms.is_none_or(|at| floe_metadata::now_ms() < at);
    (live && floe_auth::api_key::secret_matches(secret, &key.secret_sha256))
        .then(|| Caller { tenant: key.tenant.clone(), user: key.user.clone() })
}

pub(crate) async fn require_api_key(State(agent): State<Arc<Agent>>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path();
    // Health, metrics and the API description stay open: probes and scrapers carry no key.
    if !path.starts_with("/v3") || request.method() == axum::http::Method::OPTIONS {
        return next.run(request).await;
    }
    match credentials(&request).and_then(|(id, secret)| caller(&agent, &id, &secret)) {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None => {
            tracing::info!(path = %request.uri().path(), "HTTP request with a missing or invalid API key");
            tokio::time::sleep(FAILURE_DELAY).await;
            let mut response =
                HttpError::new(StatusCode::UNAUTHORIZED, "a valid API key is required (Authorization: Bearer <key>)")
                    .into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer, Basic"));
            response
        }
    }
}
