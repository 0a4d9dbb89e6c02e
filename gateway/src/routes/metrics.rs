//! Prometheus text exposition of the process-wide registry.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::{Encoder, TextEncoder};

use std::sync::Arc;

use floe_agent::Agent;

use crate::error::HttpError;
use crate::{MetricsAccess, OperatorToken};

/// `/metrics`, behind the operator token with [`MetricsAccess::Operator`] (which needs one).
pub(crate) fn router(
    agent: Arc<Agent>,
    access: MetricsAccess,
    token: Option<OperatorToken>,
) -> std::io::Result<Router> {
    let router = bare_router();
    Ok(match (access, token) {
        (MetricsAccess::Open, _) => router,
        (MetricsAccess::Operator, Some(token)) => router
            .layer(axum::middleware::from_fn_with_state((agent, Arc::new(token)), super::operator::require_operator)),
        (MetricsAccess::Operator, None) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "metrics for operators only needs the operator token (--operator-token-file)",
            ));
        }
    })
}

/// `/metrics` with nothing in front of it.
pub(crate) fn bare_router() -> Router {
    // CPU seconds, resident memory and open files of this process (`process_*`), which the load
    // generator's cost view divides by the bytes it moved. Registered once per process.
    static PROCESS: std::sync::Once = std::sync::Once::new();
    PROCESS.call_once(|| {
        let registered = super::process::ProcessMetrics::new().and_then(|m| prometheus::register(Box::new(m)));
        if let Err(e) = registered {
            floe_agent::log_limited!(tracing::Level::WARN, error = %e, "process metrics unavailable");
        }
    });
    Router::new().route("/metrics", get(metrics))
}

async fn metrics() -> Result<impl IntoResponse, HttpError> {
    let mut body = Vec::new();
    TextEncoder::new()
        .encode(&prometheus::gather(), &mut body)
        .map_err(|e| HttpError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("encoding metrics: {e}")))?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], body))
}
