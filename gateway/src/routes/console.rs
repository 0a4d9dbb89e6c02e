//! The web console at `/console`: a static page and its script and styles, built into the
//! binary, over the HTTP API (see `gateway/console/`). The page holds no data; everything it
//! shows comes from API calls made with the signed-in key, which decides what may be seen.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../../console/index.html");
const CONSOLE_JS: &str = include_str!("../../console/console.js");
const CONSOLE_CSS: &str = include_str!("../../console/console.css");

/// Scripts only from this origin (no inline script), no framing, no referrer leaving the page.
const SECURITY_HEADERS: [(header::HeaderName, &str); 5] = [
    (
        header::CONTENT_SECURITY_POLICY,
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
         connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (header::X_FRAME_OPTIONS, "DENY"),
    (header::REFERRER_POLICY, "no-referrer"),
    (header::CACHE_CONTROL, "no-cache"),
];

pub(crate) fn router() -> Router {
    Router::new()
        .route("/console", get(|| asset("text/html; charset=utf-8", INDEX_HTML)))
        .route("/console/", get(|| asset("text/html; charset=utf-8", INDEX_HTML)))
        .route("/console/console.js", get(|| asset("text/javascript; charset=utf-8", CONSOLE_JS)))
        .route("/console/console.css", get(|| asset("text/css; charset=utf-8", CONSOLE_CSS)))
}

async fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    let [a, b, c, d, e] = SECURITY_HEADERS;
    ([(header::CONTENT_TYPE, content_type), a, b, c, d, e], body)
}
