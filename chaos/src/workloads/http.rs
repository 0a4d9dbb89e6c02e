//! An HTTP producer with idempotency keys: requests of ten records to `records:bulk`, each with
//! its own `Idempotency-Key`, retried with the same key and body (through the next agent) until
//! one answer reports every record written. The service must write each request once.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;

use super::{
    HTTP_GIVE_UP_AFTER as GIVE_UP_AFTER, HTTP_REQUEST_TIMEOUT as REQUEST_TIMEOUT, HTTP_RETRY_PAUSE as RETRY_PAUSE, Stop,
};
use crate::history::{Event, History};

const RECORDS_PER_REQUEST: usize = 10;

#[derive(Debug, serde::Deserialize)]
struct BulkAnswer {
    error_count: usize,
    partition_ids: Vec<i32>,
    offsets: Vec<i64>,
}

/// The cluster id the HTTP API's paths need, asked of any agent that answers.
async fn cluster_id(http: &reqwest::Client, urls: &[String], stop: &Stop) -> anyhow::Result<String> {
    for attempt in 0.. {
        if stop.is_set() {
            break;
        }
        let url = format!("{}/v3/clusters", urls[attempt % urls.len()]);
        if let Ok(response) = http.get(&url).timeout(REQUEST_TIMEOUT).send().await
            && response.status().is_success()
            && let Ok(body) = response.bytes().await
            && let Ok(list) = serde_json::from_slice::<serde_json::Value>(&body)
            && let Some(id) = list["data"][0]["cluster_id"].as_str()
        {
            return Ok(id.to_owned());
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    anyhow::bail!("no agent answered /v3/clusters")
}

/// Sends requests one after another until `stop`; `id` keeps keys and values apart between loops.
pub(crate) async fn run(
    urls: Vec<String>,
    topic: &'static str,
    partitions: i32,
    id: usize,
    stop: Stop,
    history: Arc<History>,
) -> anyhow::Result<()> {
    let http = super::http_client().context("HTTP client")?;
    let cluster = cluster_id(&http, &urls, &stop).await?;
    let run = std::process::id();
    let mut attempt = id;
    for request in 0u64.. {
        if stop.is_set() {
            break;
        }
        let values: Vec<String> = (0..RECORDS_PER_REQUEST).map(|i| format!("http-{id}-{request:06}-{i}")).collect();
        let body: String = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let partition = (request as usize * RECORDS_PER_REQUEST + i) % partitions as usize;
                serde_json::json!({"partition_id": partition, "value": {"type": "STRING", "data": v}}).to_string()
                    + "\n"
            })
            .collect();
        let key = format!("chaos-{run}-{id}-{request}");
        let started = Instant::now();
        let outcome = loop {
            let url = format!("{}/v3/clusters/{cluster}/topics/{topic}/records:bulk", urls[attempt % urls.len()]);
            attempt += 1;
            let sent = http
                .post(&url)
                .header("Content-Type", "application/x-ndjson")
                .header("Idempotency-Key", &key)
                .body(body.clone())
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await;
            let error = match sent {
                Ok(response) if response.status().is_success() => {
                    match response.bytes().await.map(|b| serde_json::from_slice::<BulkAnswer>(&b)) {
                        Ok(Ok(answer)) if answer.error_count == 0 && answer.offsets.len() == values.len() => {
                            break Ok(answer);
                        }
                        Ok(Ok(answer)) => format!("{} of {} records failed", answer.error_count, values.len()),
                        Ok(Err(e)) => format!("answer not understood: {e}"),
                        Err(e) => format!("answer cut short: {e}"),
                    }
                }
                // A refusal of the body itself will not change on a retry.
                Ok(response) if response.status() == reqwest::StatusCode::UNPROCESSABLE_ENTITY => {
                    break Err(format!("422: {}", response.text().await.unwrap_or_default()));
                }
                Ok(response) => format!("HTTP {}", response.status()),
                Err(e) => e.to_string(),
            };
            if started.elapsed() > GIVE_UP_AFTER {
                break Err(format!("no complete answer in {GIVE_UP_AFTER:?}; last: {error}"));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        };
        match outcome {
            Ok(answer) => {
                for ((value, partition), offset) in values.into_iter().zip(answer.partition_ids).zip(answer.offsets) {
                    history.push(Event::Acked { topic: topic.into(), partition, offset, value });
                }
            }
            Err(error) => {
                for value in values {
                    history.push(Event::Failed { topic: topic.into(), value, error: error.clone() });
                }
            }
        }
    }
    Ok(())
}
