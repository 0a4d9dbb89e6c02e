//! HTTP errors as a status code and a JSON body `{error_code, message}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// An HTTP error response.
#[derive(Debug)]
pub(crate) struct HttpError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error_code": self.status.as_u16(), "message": self.message });
        (self.status, Json(body)).into_response()
    }
}

pub(crate) async fn not_found() -> HttpError {
    HttpError { status: StatusCode::NOT_FOUND, message: "no such endpoint".into() }
}
