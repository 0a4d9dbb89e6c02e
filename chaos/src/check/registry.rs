//! The registry's part of the check: every acknowledged schema version must still be there under
//! its subject with the id it was given, that id must give back the same schema, and no two
//! different schemas may share an id (nor one schema have two).

use std::collections::HashMap;

use serde::Serialize;

use super::{Checked, context, violation};
use crate::history::{Entry, Event};
use crate::workloads::registry::REGISTRY_PREFIX;

#[derive(Debug, Default, Serialize)]
pub(crate) struct RegistryFigures {
    pub(crate) registered: usize,
    pub(crate) failed_or_unknown: usize,
    pub(crate) versions_lost: usize,
    pub(crate) versions_changed: usize,
    pub(crate) ids_shared: usize,
}

/// What the registry answers now, read back after the faults.
#[derive(Debug, Default)]
pub(crate) struct ReadBack {
    /// By (subject, version): the id and schema text, or `None` when the version is gone.
    pub(crate) versions: HashMap<(String, i32), Option<(i32, String)>>,
    /// By id: the schema text, or `None` when the id is gone.
    pub(crate) ids: HashMap<i32, Option<String>>,
}

#[derive(Debug, serde::Deserialize)]
struct Version {
    id: i32,
    schema: String,
}

#[derive(Debug, serde::Deserialize)]
struct ById {
    schema: String,
}

fn registered(history: &[Entry]) -> impl Iterator<Item = (&Entry, &str, &str, i32, i32)> {
    history.iter().filter_map(|e| match &e.event {
        Event::SchemaRegistered { subject, schema, id, version } => {
            Some((e, subject.as_str(), schema.as_str(), *id, *version))
        }
        _ => None,
    })
}

/// A GET of `url`: `None` on 404, the body otherwise; other failures are tried again a few
/// times (the cluster has healed, but a connection may still be cut).
async fn get(http: &reqwest::Client, url: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let mut tries = 0;
    loop {
        tries += 1;
        let answer = http.get(url).timeout(crate::workloads::HTTP_REQUEST_TIMEOUT).send().await;
        let failed = match answer {
            Ok(a) if a.status() == reqwest::StatusCode::NOT_FOUND => return Ok(None),
            Ok(a) if a.status().is_success() => match a.bytes().await {
                Ok(body) => return Ok(Some(body.to_vec())),
                Err(e) => e.to_string(),
            },
            Ok(a) => format!("HTTP {}", a.status()),
            Err(e) => e.to_string(),
        };
        if tries == READ_TRIES {
            anyhow::bail!("GET {url}: {failed}");
        }
        tokio::time::sleep(crate::workloads::HTTP_RETRY_PAUSE).await;
    }
}

const READ_TRIES: usize = 5;

/// Reads every acknowledged version, and each id once, through `url` (an agent's HTTP listener).
pub(crate) async fn read_back(http: &reqwest::Client, url: &str, history: &[Entry]) -> anyhow::Result<ReadBack> {
    let mut out = ReadBack::default();
    for (_, subject, _, id, version) in registered(history) {
        let found = get(http, &format!("{url}{REGISTRY_PREFIX}/subjects/{subject}/versions/{version}")).await?;
        let found = match found {
            Some(body) => serde_json::from_slice::<Version>(&body).map(|v| Some((v.id, v.schema)))?,
            None => None,
        };
        out.versions.insert((subject.to_owned(), version), found);
        if let std::collections::hash_map::Entry::Vacant(slot) = out.ids.entry(id) {
            let found = match get(http, &format!("{url}{REGISTRY_PREFIX}/schemas/ids/{id}")).await? {
                Some(body) => Some(serde_json::from_slice::<ById>(&body)?.schema),
                None => None,
            };
            slot.insert(found);
        }
    }
    Ok(out)
}

/// A schema's meaning for comparison: its JSON, whatever order or spacing the registry keeps.
fn meaning(text: &str) -> Option<serde_json::Value> {
    serde_json::from_str(text).ok()
}

/// Holds what the registry answers against what it acknowledged.
pub(crate) fn check(history: &[Entry], now: &ReadBack, out: &mut Checked) {
    out.registry.failed_or_unknown = history.iter().filter(|e| matches!(e.event, Event::SchemaFailed { .. })).count();
    let mut by_id: HashMap<i32, &str> = HashMap::new();
    let mut id_of: HashMap<&str, i32> = HashMap::new();
    for (entry, subject, schema, id, version) in registered(history) {
        out.registry.registered += 1;
        let quote = || {
            context(history, entry.t_ms, |e| match e {
                Event::SchemaRegistered { subject: s, id: i, .. } => s == subject || *i == id,
                Event::SchemaFailed { subject: s, .. } => s == subject,
                _ => false,
            })
        };
        if *by_id.entry(id).or_insert(schema) != schema {
            out.registry.ids_shared += 1;
            violation(out, "schema id shared", format!("id {id} was given to two different schemas"), quote);
        }
        if *id_of.entry(schema).or_insert(id) != id {
            out.registry.ids_shared += 1;
            violation(out, "schema id shared", format!("one schema of {subject:?} was given two ids"), quote);
        }
        match now.versions.get(&(subject.to_owned(), version)) {
            Some(Some((now_id, text))) if *now_id == id && meaning(text) == meaning(schema) => {}
            Some(Some((now_id, text))) => {
                out.registry.versions_changed += 1;
                let detail = format!("version {version} of {subject:?} was id {id}, is now id {now_id}: {text}");
                violation(out, "schema version changed", detail, quote);
                continue;
            }
            Some(None) | None => {
                out.registry.versions_lost += 1;
                violation(
                    out,
                    "schema version lost",
                    format!("version {version} of {subject:?} (id {id}) is gone"),
                    quote,
                );
                continue;
            }
        }
        if now.ids.get(&id).and_then(|t| t.as_deref()).and_then(meaning) != meaning(schema) {
            out.registry.versions_changed += 1;
            let detail = format!("id {id} no longer gives the schema version {version} of {subject:?} was given");
            violation(out, "schema version changed", detail, quote);
        }
    }
}
