//! Prometheus text exposition of the process-wide registry.

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus::{Encoder, TextEncoder};

use crate::error::HttpError;

pub(crate) fn router() -> Router {
    Router::new().route("/metrics", get(metrics))
}

async fn metrics() -> Result<impl IntoResponse, HttpError> {
    let mut body = Vec::new();
    TextEncoder::new().encode(&prometheus::gather(), &mut body).map_err(|e| HttpError {
        status: StatusCode::INTERNAL_SERVER_ERROR,
        message: format!("encoding metrics: {e}"),
    })?;
    Ok(([(header::CONTENT_TYPE, prometheus::TEXT_FORMAT)], body))
}
