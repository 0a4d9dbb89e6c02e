//! The HTTP API's error answers: a status code and a JSON body `{error_code, message}`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use floe_testing::{TestAgent, TestOptions};

/// GET of a topic that does not exist answers 404 with a JSON body naming the topic; a path no
/// route serves answers 404 in the same shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topics_and_paths_answer_404_with_a_json_body() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let cluster = floe.cluster_id();
    let cases = [
        (format!("/v3/clusters/{cluster}/topics/missing"), "\"missing\" not found"),
        ("/no-such-endpoint".to_owned(), "no such endpoint"),
    ];
    for (path, said) in cases {
        let request = Request::get(path.as_str()).body(Body::empty()).expect("a request");
        let response = floe.http(request).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("the body is read");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("a JSON body");
        assert_eq!(json["error_code"], 404, "{path}: {json}");
        assert!(json["message"].as_str().is_some_and(|m| m.contains(said)), "{path}: {json}");
    }
    floe.shutdown().await;
}
