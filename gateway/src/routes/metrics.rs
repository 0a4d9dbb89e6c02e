//! Prometheus text exposition of the process-wide registry.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::{Encoder, TextEncoder};

use crate::error::HttpError;

pub(crate) fn router() -> Router {
    // CPU seconds, resident memory and open files of this process (`process_*`), which the load
    // generator's cost view divides by the bytes it moved. Registered once per process.
    static PROCESS: std::sync::Once = std::sync::Once::new();
    PROCESS.call_once(|| {
        let registered = super::process::ProcessMetrics::new().and_then(|m| prometheus::register(Box::new(m)));
        if let Err(e) = registered {
            tracing::warn!(error = %e, "process metrics unavailable");
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
