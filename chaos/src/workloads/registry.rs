//! Schema registrations: each loop registers new Avro schemas through the registry's HTTP API,
//! one after another, retrying the same body through the next agent until an answer names an id.
//! Schema `n` of a loop goes to subject `chaos-{loop}-{n / VERSIONS_PER_SUBJECT}` and is a record
//! with one more defaulted field than the one before it, so each version is BACKWARD compatible
//! with the last. A registration whose answer was lost is registered again by the retry, which
//! must name the same id and version. The checker reads every acknowledged version back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    HTTP_GIVE_UP_AFTER as GIVE_UP_AFTER, HTTP_REQUEST_TIMEOUT as REQUEST_TIMEOUT, HTTP_RETRY_PAUSE as RETRY_PAUSE, Stop,
};
use crate::history::{Event, History};

/// Where the agents serve the registry on their HTTP listener.
pub(crate) const REGISTRY_PREFIX: &str = "/schema-registry";
const VERSIONS_PER_SUBJECT: u64 = 20;
/// Pause between one loop's registrations: the registry is not the service's hot path.
const REGISTER_EVERY: Duration = Duration::from_millis(100);
/// Registrations per loop, well inside a tenant's share of schemas, so a long run stays valid.
const REGISTRATIONS_MAX: u64 = 3_000;

#[derive(Debug, serde::Deserialize)]
struct Registered {
    id: i32,
    version: i32,
}

/// Schema `n` of loop `id`: its subject and text.
pub(crate) fn schema(id: usize, n: u64) -> (String, String) {
    let subject = format!("chaos-{id}-{}", n / VERSIONS_PER_SUBJECT);
    let fields: Vec<serde_json::Value> = (0..=n % VERSIONS_PER_SUBJECT)
        .map(|f| serde_json::json!({"name": format!("f{f}"), "type": "long", "default": 0}))
        .collect();
    let name = format!("Chaos{id}_{}", n / VERSIONS_PER_SUBJECT);
    let text = serde_json::json!({"type": "record", "name": name, "fields": fields}).to_string();
    (subject, text)
}

/// Registers schemas until `stop`; `id` keeps the loops' subjects apart.
pub(crate) async fn run(urls: Vec<String>, id: usize, stop: Stop, history: Arc<History>) -> anyhow::Result<()> {
    let http = super::http_client()?;
    let mut attempt = id;
    for n in 0..REGISTRATIONS_MAX {
        if stop.is_set() {
            break;
        }
        let (subject, schema) = schema(id, n);
        let body = serde_json::json!({"schema": schema}).to_string();
        let started = Instant::now();
        let outcome = loop {
            let base = &urls[attempt % urls.len()];
            attempt += 1;
            let url = format!("{base}{REGISTRY_PREFIX}/subjects/{subject}/versions");
            let sent = http
                .post(&url)
                .header("Content-Type", "application/vnd.schemaregistry.v1+json")
                .body(body.clone())
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await;
            let error = match sent {
                Ok(response) if response.status().is_success() => {
                    match response.bytes().await.map(|b| serde_json::from_slice::<Registered>(&b)) {
                        Ok(Ok(answer)) => break Ok(answer),
                        Ok(Err(e)) => format!("answer not understood: {e}"),
                        Err(e) => format!("answer cut short: {e}"),
                    }
                }
                // An incompatible or invalid schema stays one on a retry.
                Ok(response) if matches!(response.status().as_u16(), 409 | 422) => {
                    break Err(format!("{}: {}", response.status(), response.text().await.unwrap_or_default()));
                }
                Ok(response) => format!("HTTP {}", response.status()),
                Err(e) => e.to_string(),
            };
            if started.elapsed() > GIVE_UP_AFTER {
                break Err(format!("no id in {GIVE_UP_AFTER:?}; last: {error}"));
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        };
        history.push(match outcome {
            Ok(Registered { id, version }) => Event::SchemaRegistered { subject, schema, id, version },
            Err(error) => Event::SchemaFailed { subject, schema, error },
        });
        tokio::time::sleep(REGISTER_EVERY).await;
    }
    Ok(())
}
