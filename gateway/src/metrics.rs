//! HTTP metrics: requests by route, method and status, and their durations by route. Routes are
//! the matched path templates, so a scrape cannot grow with the topics or ids clients send.

use std::sync::LazyLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use prometheus::{HistogramVec, IntCounterVec, exponential_buckets, register_histogram_vec, register_int_counter_vec};

static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_http_requests_total",
        "HTTP requests answered, by route, method and status",
        &["route", "method", "status"]
    )
    .expect("unique")
});

static REQUEST_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "floe_http_request_duration_seconds",
        "Time from an HTTP request's arrival to its response headers (streams: to the first report)",
        &["route"],
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});

pub(crate) async fn record(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |p| p.as_str()).to_owned();
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    REQUEST_SECONDS.with_label_values(&[&route]).observe(started.elapsed().as_secs_f64());
    REQUESTS.with_label_values(&[&route, &method, response.status().as_str()]).inc();
    response
}
