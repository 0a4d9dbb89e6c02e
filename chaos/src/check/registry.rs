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

#[derive(Debug, serde::Deserialize)]
struct Version {
    id: i32,
    schema: String,
}

#[derive(Debug, serde::Deserialize)]
struct ById {
    schema: String,
}

/// A schema's meaning for comparison: its JSON, whatever order or spacing the registry keeps.
fn meaning(text: &str) -> Option<serde_json::Value> {
    serde_json::from_str(text).ok()
}

fn related(history: &[Entry], t_ms: u64, subject: &str, id: i32) -> Vec<Entry> {
    context(history, t_ms, |e| match e {
        Event::SchemaRegistered { subject: s, id: i, .. } => s == subject || *i == id,
        Event::SchemaFailed { subject: s, .. } => s == subject,
        _ => false,
    })
}

/// Reads each acknowledged version back through `url` (an agent's HTTP listener).
pub(crate) async fn check(
    http: &reqwest::Client,
    url: &str,
    history: &[Entry],
    out: &mut Checked,
) -> anyhow::Result<()> {
    let mut by_id: HashMap<i32, &str> = HashMap::new();
    let mut id_of: HashMap<&str, i32> = HashMap::new();
    let mut fetched: HashMap<i32, Option<serde_json::Value>> = HashMap::new();
    for entry in history {
        let (subject, schema, id, version) = match &entry.event {
            Event::SchemaRegistered { subject, schema, id, version } => (subject, schema, *id, *version),
            Event::SchemaFailed { .. } => {
                out.registry.failed_or_unknown += 1;
                continue;
            }
            _ => continue,
        };
        out.registry.registered += 1;
        let quote = || related(history, entry.t_ms, subject, id);
        if *by_id.entry(id).or_insert(schema) != schema.as_str() {
            out.registry.ids_shared += 1;
            violation(out, "schema id shared", format!("id {id} was given to two different schemas"), quote);
        }
        if *id_of.entry(schema).or_insert(id) != id {
            out.registry.ids_shared += 1;
            violation(out, "schema id shared", format!("one schema of {subject:?} was given two ids"), quote);
        }
        let answer = http.get(format!("{url}{REGISTRY_PREFIX}/subjects/{subject}/versions/{version}")).send().await?;
        if answer.status() == reqwest::StatusCode::NOT_FOUND {
            out.registry.versions_lost += 1;
            let detail = format!("version {version} of {subject:?} (id {id}) is gone: {}", answer.text().await?);
            violation(out, "schema version lost", detail, quote);
            continue;
        }
        let answer: Version = serde_json::from_slice(&answer.error_for_status()?.bytes().await?)?;
        if answer.id != id || meaning(&answer.schema) != meaning(schema) {
            out.registry.versions_changed += 1;
            let detail =
                format!("version {version} of {subject:?} was id {id}, now id {}: {}", answer.id, answer.schema);
            violation(out, "schema version changed", detail, quote);
            continue;
        }
        let stored = match fetched.get(&id) {
            Some(stored) => stored.clone(),
            None => {
                let answer = http.get(format!("{url}{REGISTRY_PREFIX}/schemas/ids/{id}")).send().await?;
                let stored = if answer.status().is_success() {
                    meaning(&serde_json::from_slice::<ById>(&answer.bytes().await?)?.schema)
                } else {
                    None
                };
                fetched.insert(id, stored.clone());
                stored
            }
        };
        if stored != meaning(schema) {
            out.registry.versions_changed += 1;
            let detail = format!("id {id} no longer gives the schema version {version} of {subject:?} was given");
            violation(out, "schema version changed", detail, quote);
        }
    }
    Ok(())
}
