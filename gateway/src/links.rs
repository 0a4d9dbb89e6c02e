//! Links, shared by the operator HTTP API (`/v1/admin/links`) and `floe admin links`: the
//! command that sets one (its patterns checked here, where a regular expression engine is) and
//! the status listing, per mirror partition: its log end here, the source's as last reported,
//! and the lag between them. The source password is never shown.

use std::collections::BTreeMap;

use floe_metadata::{Command, LinkConfig, LinkSasl, LinkState, State};
use serde::Deserialize;
use serde_json::Value;

/// What an operator gives to create a link or change its config.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRequest {
    /// Given by the path when reversing a link.
    #[serde(default)]
    pub name: String,
    /// The source's bootstrap servers, `HOST:PORT[,HOST:PORT...]`.
    pub source_bootstrap: String,
    /// Source topics to mirror: a regular expression matching whole names (a reversed link
    /// takes the promoted link's topics).
    #[serde(default)]
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
    /// Mirror into this tenant's namespace, under its quotas (default: the cluster's names).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Copy the source's ACLs on the mirrored topics and groups.
    #[serde(default)]
    pub acls: bool,
}

/// Failback: a link from the cluster a link was promoted on, back into this one.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReverseRequest {
    /// The new link; its source is the promoted cluster, its topics the promoted link's.
    pub link: LinkRequest,
    /// The promoted link's fork offsets (`promoted.fork_offsets` of its status there): per
    /// topic, each partition's last offset both sides share.
    pub fork_offsets: BTreeMap<String, Vec<i64>>,
}

fn yes() -> bool {
    true
}

/// The command creating (or reconfiguring) the link `request` describes, for a cluster in
/// `state`. Refused until every metadata node runs format 12: a link's config is written in that
/// format's layout, which a node still on format 11 cannot read.
pub fn set_link_command(state: &State, request: LinkRequest, now_ms: i64) -> Result<Command, String> {
    if !state.applies_format(12) {
        return Err(format!(
            "links are set once every metadata node runs metadata format 12 (the cluster applies {}): finish \
             the upgrade first",
            state.format
        ));
    }
    if request.topics.is_empty() {
        return Err("a link needs a topics pattern".into());
    }
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
        tenant: request.tenant,
        acls: request.acls,
    };
    Ok(Command::SetLink { name: request.name, config: config.into(), now_ms })
}

/// Failback, in order: the reversed link, then for each of the promoted link's topics that
/// exists here, its adoption (cut back to its fork offsets, then mirrored on); the others the
/// link creates as it finds them.
pub fn reverse_commands(state: &State, request: ReverseRequest, now_ms: i64) -> Result<Vec<Command>, String> {
    let ReverseRequest { mut link, fork_offsets } = request;
    if fork_offsets.is_empty() {
        return Err("the promoted link has no fork offsets: it mirrored no topic".into());
    }
    if !link.topics.is_empty() {
        return Err("a reversed link mirrors the promoted link's topics: leave the topics pattern out".into());
    }
    link.topics = floe_agent::links::exact_names_pattern(fork_offsets.keys());
    let ns = match &link.tenant {
        Some(tenant) => Some(state.tenant_namespace(tenant).ok_or_else(|| format!("no tenant named {tenant:?}"))?),
        None => None,
    };
    let name = link.name.clone();
    let mut commands = vec![set_link_command(state, link, now_ms)?];
    for (topic, offsets) in fork_offsets {
        let stored = ns.as_ref().map_or_else(|| topic.clone(), |ns| ns.scope(&topic));
        if let Some(topic) = state.topic_by_name(&stored) {
            commands.push(Command::AdoptMirrorTopic {
                link: name.clone(),
                topic_id: topic.topic_id,
                fork_offsets: offsets,
            });
        }
    }
    Ok(commands)
}

/// Every link (or the one named) with its state, error and per-partition lag; no secrets.
pub fn links_json(state: &State, only: Option<&str>) -> Vec<Value> {
    state
        .links
        .iter()
        .filter(|(name, _)| only.is_none_or(|o| o == name.as_str()))
        .map(|(name, link)| {
            let mut total_lag = 0i64;
            let ns = link.config.tenant.as_deref().and_then(|t| state.tenant_namespace(t));
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
                    let shown = ns.as_ref().and_then(|ns| ns.unscope(&topic.name)).unwrap_or(&topic.name);
                    serde_json::json!({ "topic": shown, "partitions": partitions })
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
                "tenant": c.tenant,
                "acls": c.acls,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> LinkRequest {
        serde_json::from_value(serde_json::json!({ "name": "east", "source_bootstrap": "kafka:9092", "topics": "a.*" }))
            .expect("a link request")
    }

    #[test]
    fn links_are_set_only_once_every_node_writes_format_12() {
        let mut state = State { format: 11, ..State::default() };
        let refused = set_link_command(&state, request(), 1).expect_err("format 11 refuses");
        assert!(refused.contains("format 12") && refused.contains("applies 11"), "{refused}");
        state.format = 12;
        assert!(matches!(set_link_command(&state, request(), 1), Ok(Command::SetLink { .. })));
        let no_topics = LinkRequest { topics: String::new(), ..request() };
        assert!(set_link_command(&state, no_topics, 1).is_err_and(|e| e.contains("topics")));
    }
}
