//! Links, shared by the operator HTTP API (`/v1/admin/links`) and `floe admin links`: the
//! command that sets one (its patterns checked here, where a regular expression engine is) and
//! the status listing, per mirror partition: its log end here, the source's as last reported,
//! and the lag between them. The source password is never shown.

use floe_metadata::{Command, LinkConfig, LinkSasl, LinkState, State};
use serde::Deserialize;
use serde_json::Value;

/// What an operator gives to create a link or change its config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRequest {
    pub name: String,
    /// The source's bootstrap servers, `HOST:PORT[,HOST:PORT...]`.
    pub source_bootstrap: String,
    /// Source topics to mirror: a regular expression matching whole names.
    pub topics: String,
    /// Groups whose committed offsets are copied.
    #[serde(default)]
    pub groups: Option<String>,
    #[serde(default)]
    pub source_tls: bool,
    /// A PEM CA bundle for the source's certificates (default: the system's roots).
    #[serde(default)]
    pub source_ca_pem: Option<String>,
    #[serde(default)]
    pub source_sasl_mechanism: Option<String>,
    #[serde(default)]
    pub source_sasl_username: Option<String>,
    #[serde(default)]
    pub source_sasl_password: Option<String>,
    /// Topic configs follow the source's (default true).
    #[serde(default = "yes")]
    pub sync_configs: bool,
}

fn yes() -> bool {
    true
}

/// The command creating (or reconfiguring) the link `request` describes.
pub fn set_link_command(request: LinkRequest, now_ms: i64) -> Result<Command, String> {
    floe_agent::links::compile_pattern(&request.topics)?;
    if let Some(groups) = &request.groups {
        floe_agent::links::compile_pattern(groups)?;
    }
    let sasl = match (request.source_sasl_mechanism, request.source_sasl_username, request.source_sasl_password) {
        (None, None, None) => None,
        (Some(mechanism), Some(username), Some(password)) => Some(LinkSasl { mechanism, username, password }),
        _ => return Err("SASL to the source needs a mechanism, a user name and a password".into()),
    };
    if request.source_ca_pem.is_some() && !request.source_tls {
        return Err("a CA bundle is for TLS: set source_tls too".into());
    }
    let config = LinkConfig {
        bootstrap: request.source_bootstrap,
        tls: request.source_tls,
        tls_ca_pem: request.source_ca_pem,
        sasl,
        topics: request.topics,
        groups: request.groups,
        sync_configs: request.sync_configs,
    };
    Ok(Command::SetLink { name: request.name, config, now_ms })
}

/// Failback: the topics of a promoted link that exist here become mirrors of link `name`, cut
/// back to their fork offsets; the others the link creates as it finds them.
pub fn adopt_commands(
    state: &State,
    name: &str,
    fork_offsets: &std::collections::BTreeMap<String, Vec<i64>>,
) -> Vec<Command> {
    fork_offsets
        .iter()
        .filter_map(|(topic, offsets)| {
            let topic = state.topic_by_name(topic)?;
            Some(Command::AdoptMirrorTopic {
                link: name.to_owned(),
                topic_id: topic.topic_id,
                fork_offsets: offsets.clone(),
            })
        })
        .collect()
}

/// Every link (or the one named) with its state, error and per-partition lag; no secrets.
pub fn links_json(state: &State, only: Option<&str>) -> Vec<Value> {
    state
        .links
        .iter()
        .filter(|(name, _)| only.is_none_or(|o| o == name.as_str()))
        .map(|(name, link)| {
            let mut total_lag = 0i64;
            let topics: Vec<Value> = state
                .mirror_topics
                .iter()
                .filter(|(_, l)| *l == name)
                .filter_map(|(topic_id, _)| state.topics.get(topic_id))
                .map(|topic| {
                    let partitions: Vec<Value> = topic
                        .partitions
                        .iter()
                        .enumerate()
                        .map(|(index, log)| {
                            let partition = i32::try_from(index).unwrap_or(i32::MAX);
                            let source_end = link.source_ends.get(&(topic.topic_id, partition)).copied();
                            let lag = source_end.map(|end| end.saturating_sub(log.next_offset).max(0));
                            total_lag += lag.unwrap_or(0);
                            serde_json::json!({
                                "partition": partition,
                                "log_end_offset": log.next_offset,
                                "source_log_end_offset": source_end,
                                "lag": lag,
                            })
                        })
                        .collect();
                    serde_json::json!({ "topic": topic.name, "partitions": partitions })
                })
                .collect();
            let (state_name, promoted) = match &link.state {
                LinkState::Mirroring => ("mirroring", Value::Null),
                LinkState::Promoted { at_ms, fork_offsets } => {
                    ("promoted", serde_json::json!({ "at_ms": at_ms, "fork_offsets": fork_offsets }))
                }
            };
            let c = &link.config;
            serde_json::json!({
                "name": name,
                "state": state_name,
                "promoted": promoted,
                "source_bootstrap": c.bootstrap,
                "source_tls": c.tls,
                "source_sasl": c.sasl.as_ref().map(|s| serde_json::json!({ "mechanism": s.mechanism, "username": s.username })),
                "topics_pattern": c.topics,
                "groups_pattern": c.groups,
                "sync_configs": c.sync_configs,
                "created_ms": link.created_ms,
                "reported_ms": link.reported_ms,
                "error": link.error,
                "lag": total_lag,
                "topics": topics,
                "deleted_at_source": link.deleted_at_source,
            })
        })
        .collect()
}
