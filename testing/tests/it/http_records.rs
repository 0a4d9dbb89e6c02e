//! Produce and read over the HTTP API's REST v3 records endpoints: the status and JSON error
//! `{error_code, message}` a bad request gets, and a good record as HTTP and Kafka readers see it.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use bytes::Bytes;
use floe_testing::{TestAgent, TestOptions, decode_records};
use serde_json::{Value, json};

/// What a body read whole may hold, as sent (`REQUEST_BYTES_MAX` of the gateway's limits: the
/// Kafka listener's largest batch).
const REQUEST_BYTES_MAX: usize = 64 * 1024 * 1024;

/// Each bad request to the records endpoints gets its status, with a JSON body whose
/// `error_code` is that status and whose message says what was wrong: a body that is not JSON
/// (400), an unknown topic, cluster or partition (404), a wrong method (405), a body over the
/// size limit (413), an unknown media type or content coding (415), a record that cannot be
/// read (422), and for reads a bad offset (400) or one past the end (416). None of it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_record_requests_get_their_status_and_a_json_error_and_write_nothing() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("orders", 2).await;
    let cluster = floe.cluster_id();
    let topic = format!("/v3/clusters/{cluster}/topics/orders");
    let records = format!("{topic}/records");
    let json_type = "application/json";
    let value = json!({ "type": "STRING", "data": "fine" });
    let fine = json!({ "value": value }).to_string();
    let cases: Vec<(&str, Request<Body>, u16, &str)> = vec![
        ("not JSON", post(&records, json_type, None, "{\"value\": "), 400, "is not JSON records"),
        ("empty body", post(&records, json_type, None, ""), 400, "the request holds no records"),
        ("bad gzip", post(&records, json_type, Some("gzip"), "not gzip"), 400, "does not decompress"),
        (
            "unknown topic",
            post(&format!("/v3/clusters/{cluster}/topics/nope/records"), json_type, None, fine.as_str()),
            404,
            "topic \"nope\" not found",
        ),
        (
            "unknown cluster",
            post("/v3/clusters/other/topics/orders/records", json_type, None, fine.as_str()),
            404,
            "cluster \"other\" not found",
        ),
        (
            "unknown partition",
            post(&records, json_type, None, json!({ "partition_id": 9, "value": value }).to_string()),
            404,
            "partition 9 of topic",
        ),
        ("wrong method", get(&records), 405, "method not allowed"),
        ("wrong method on bulk", get(&format!("{records}:bulk")), 405, "method not allowed"),
        (
            "body too large",
            post(&records, json_type, None, vec![b' '; REQUEST_BYTES_MAX + 1]),
            413,
            "request body exceeds 67108864 bytes",
        ),
        ("wrong media type", post(&records, "text/plain", None, fine.as_str()), 415, "Content-Type \"text/plain\""),
        ("unknown coding", post(&records, json_type, Some("br"), fine.as_str()), 415, "Content-Encoding \"br\""),
        (
            "bad base64",
            post(&records, json_type, None, json!({ "value": { "type": "BINARY", "data": "!!" } }).to_string()),
            422,
            "value is not base64",
        ),
        (
            "unknown field",
            post(&records, json_type, None, json!({ "value": value, "colour": "red" }).to_string()),
            422,
            "unknown field",
        ),
        ("read offset not a number", get(&format!("{topic}/partitions/0/records?offset=soon")), 400, "is not a number"),
        ("read past the end", get(&format!("{topic}/partitions/0/records?offset=99")), 416, "offset 99 is outside"),
        ("partition not a number", get(&format!("{topic}/partitions/x/records")), 400, ""),
    ];
    for (what, request, status, said) in cases {
        let (answered, content_type, json) = answer(&floe, request).await;
        assert_eq!(answered.as_u16(), status, "{what}: {json}");
        assert!(content_type.starts_with("application/json"), "{what}: {content_type}");
        assert_eq!(json["error_code"], status, "{what}: {json}");
        let message = json["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty() && message.contains(said), "{what}: {json}");
    }
    for partition in [0, 1] {
        assert_eq!(kafka.end_offset("orders", partition).await, 0, "nothing was written to partition {partition}");
    }
    floe.shutdown().await;
}

/// A record produced over HTTP gets a 200 delivery report with its partition and offset, and is
/// read back as it was sent: over HTTP at that offset, and by a Kafka Fetch with its key, value
/// and offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_produced_over_http_is_read_back_over_http_and_kafka() {
    let floe = TestAgent::start(TestOptions::default()).await;
    let mut kafka = floe.kafka();
    kafka.create_topic("greetings", 1).await;
    let topic = format!("/v3/clusters/{}/topics/greetings", floe.cluster_id());
    let record = json!({
        "partition_id": 0,
        "key": { "type": "STRING", "data": "visitor" },
        "value": { "type": "STRING", "data": "hello" },
    });
    let produce = post(&format!("{topic}/records"), "application/json", None, record.to_string());
    let (status, _, report) = answer(&floe, produce).await;
    assert_eq!(status, StatusCode::OK, "{report}");
    assert_eq!(report["error_code"], 200, "{report}");
    assert_eq!(report["topic_name"], "greetings", "{report}");
    assert_eq!((report["partition_id"].as_i64(), report["offset"].as_i64()), (Some(0), Some(0)), "{report}");
    assert_eq!(report["value"], json!({ "type": "STRING", "size": 5 }), "{report}");

    let (status, _, read) = answer(&floe, get(&format!("{topic}/partitions/0/records?offset=0&format=string"))).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!((read["high_watermark"].as_i64(), read["next_offset"].as_i64()), (Some(1), Some(1)), "{read}");
    let records = read["records"].as_array().expect("a list of records");
    assert_eq!(records.len(), 1, "{read}");
    assert_eq!(records[0]["offset"], 0, "{read}");
    assert_eq!(records[0]["key"], json!({ "type": "STRING", "data": "visitor" }), "{read}");
    assert_eq!(records[0]["value"], json!({ "type": "STRING", "data": "hello" }), "{read}");

    let fetched = kafka.fetch("greetings", 0, 0).await;
    assert_eq!((fetched.error_code, fetched.high_watermark), (0, 1));
    let consumed: Vec<(i64, Option<Bytes>, Option<Bytes>)> =
        decode_records(fetched.records.as_ref()).into_iter().map(|r| (r.offset, r.key, r.value)).collect();
    let sent = (0, Some(Bytes::from_static(b"visitor")), Some(Bytes::from_static(b"hello")));
    assert_eq!(consumed, vec![sent]);
    floe.shutdown().await;
}

/// A POST of `body` as `content_type` (coded as `encoding`, if given) with its Content-Length,
/// as a client sends a body it holds whole: the records endpoint reads a body without one as a
/// stream.
fn post(path: &str, content_type: &str, encoding: Option<&str>, body: impl Into<Vec<u8>>) -> Request<Body> {
    let body = body.into();
    let mut request = Request::post(path)
        .header(header::CONTENT_TYPE, content_type)
        .header(header::CONTENT_LENGTH, body.len().to_string());
    if let Some(encoding) = encoding {
        request = request.header(header::CONTENT_ENCODING, encoding);
    }
    request.body(Body::from(body)).expect("a request")
}

/// A GET of `path`.
fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("a request")
}

/// Sends `request` and returns the answer's status, Content-Type and JSON body.
async fn answer(floe: &TestAgent, request: Request<Body>) -> (StatusCode, String, Value) {
    let response = floe.http(request).await;
    let status = response.status();
    let content_type =
        response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.expect("the body is read");
    let json = serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{status}: not a JSON body ({e}): {body:?}"));
    (status, content_type, json)
}
