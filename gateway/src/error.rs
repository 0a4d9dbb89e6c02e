//! HTTP errors as a status code and a JSON body `{error_code, message}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An HTTP error response.
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
    /// Seconds a client should wait before retrying (429 and 503).
    pub(crate) retry_after_secs: Option<u32>,
}

impl HttpError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        let retry_after_secs =
            matches!(status, StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE).then_some(1);
        Self { status, message: message.into(), retry_after_secs }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub(crate) fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, message)
    }

    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    pub(crate) fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    pub(crate) fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after_secs = Some(u32::try_from(secs).unwrap_or(u32::MAX));
        self
    }
}

/// The JSON body of an error, also used for one failed record inside a stream of reports.
pub(crate) fn error_body(status: StatusCode, message: &str) -> serde_json::Value {
    serde_json::json!({ "error_code": status.as_u16(), "message": message })
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(error_body(self.status, &self.message))).into_response();
        if let Some(secs) = self.retry_after_secs {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

pub(crate) async fn not_found() -> HttpError {
    HttpError::not_found("no such endpoint")
}

pub(crate) async fn method_not_allowed() -> HttpError {
    HttpError::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed on this endpoint")
}
