//! `floe admin`: operator views of a running cluster.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail};
use floe_metadata::groups::{GroupDescription, GroupRequest, GroupResponse, assigned_partitions};
use floe_metadata::{Command, RemoteMetadata, TxnState};
use serde::Serialize;

use crate::cli::{AdminCommand, GroupsAction, TransactionsAction};

pub(crate) async fn run(command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Cluster { metadata } => {
            let status = floe_metadata::raft::network::fetch_status(&metadata).await.map_err(|e| anyhow!(e))?;
            // Each member's versions, so a rolling upgrade's progress shows; an unreachable
            // member's is the error.
            let mut versions = serde_json::Map::new();
            for (id, addr) in &status.members {
                let hello = floe_metadata::raft::network::fetch_hello(addr).await;
                versions.insert(
                    id.to_string(),
                    hello.map_or_else(|e| serde_json::json!({"error": e}), |h| serde_json::json!(h)),
                );
            }
            let mut out = serde_json::to_value(&status)?;
            if let Some(out) = out.as_object_mut() {
                out.insert("versions".to_owned(), versions.into());
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        AdminCommand::AddMetadataNode { metadata, node_id, addr } => {
            floe_metadata::raft::network::change_membership(&metadata, Some((node_id, addr)), None)
                .await
                .map_err(|e| anyhow!(e))?;
            println!("node {node_id} is a voter");
        }
        AdminCommand::RemoveMetadataNode { metadata, node_id } => {
            floe_metadata::raft::network::change_membership(&metadata, None, Some(node_id))
                .await
                .map_err(|e| anyhow!(e))?;
            println!("node {node_id} removed from the voters");
        }
        AdminCommand::Groups { metadata, json, action } => groups(metadata, json, action).await?,
        AdminCommand::Transactions { metadata, json, action } => transactions(metadata, json, action).await?,
        AdminCommand::Tenants { metadata, action } => super::tenants::run(metadata, action).await?,
        AdminCommand::Tables { metadata, json } => tables(metadata, json).await?,
        AdminCommand::Links { metadata, action } => links(metadata, action).await?,
        AdminCommand::Usage { metadata, tenant, from, to, granularity, json } => {
            usage(metadata, tenant, from, to, granularity, json).await?
        }
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct TransactionView {
    transactional_id: String,
    producer_id: i64,
    producer_epoch: i16,
    state: &'static str,
    timeout_ms: i32,
    /// When the open transaction started; absent when none is open.
    start_ms: Option<i64>,
    partitions: Vec<TopicPartitionView>,
    groups: Vec<String>,
}

#[derive(Debug, Serialize)]
struct TopicPartitionView {
    topic: String,
    partition: i32,
}

async fn transactions(addrs: Vec<String>, json: bool, action: TransactionsAction) -> anyhow::Result<()> {
    let metadata = RemoteMetadata::connect(addrs).await?;
    match action {
        TransactionsAction::List => {
            let views: Vec<TransactionView> = {
                let state = metadata.read();
                state
                    .transactions
                    .iter()
                    .map(|(id, t)| TransactionView {
                        transactional_id: id.clone(),
                        producer_id: t.producer_id,
                        producer_epoch: t.producer_epoch,
                        state: t.state.name(),
                        timeout_ms: t.timeout_ms,
                        start_ms: (t.state == TxnState::Ongoing).then_some(t.started_ms),
                        partitions: t
                            .partitions
                            .iter()
                            .map(|(topic_id, partition)| TopicPartitionView {
                                topic: state
                                    .topics
                                    .get(topic_id)
                                    .map_or_else(|| topic_id.to_string(), |t| t.name.clone()),
                                partition: *partition,
                            })
                            .collect(),
                        groups: t.groups.iter().cloned().collect(),
                    })
                    .collect()
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&views)?);
            } else {
                println!(
                    "{:<40} {:>12} {:>6} {:<15} {:>10}  PARTITIONS",
                    "TRANSACTIONAL-ID", "PRODUCER-ID", "EPOCH", "STATE", "TIMEOUT-MS"
                );
                for v in views {
                    let partitions: Vec<String> =
                        v.partitions.iter().map(|p| format!("{}-{}", p.topic, p.partition)).collect();
                    println!(
                        "{:<40} {:>12} {:>6} {:<15} {:>10}  {}",
                        v.transactional_id,
                        v.producer_id,
                        v.producer_epoch,
                        v.state,
                        v.timeout_ms,
                        partitions.join(",")
                    );
                }
            }
        }
        TransactionsAction::Abort { transactional_id } => {
            let command =
                Command::AbortTxn { transactional_id: transactional_id.clone(), now_ms: floe_metadata::now_ms() };
            metadata.propose(command).await.map_err(|e| anyhow!("aborting {transactional_id}: {e}"))?;
            println!("aborted the open transaction of {transactional_id}; its producer is fenced");
        }
    }
    Ok(())
}

/// One table topic, as `floe admin tables` shows it.
#[derive(Debug, Serialize)]
struct TableView {
    topic: String,
    /// Commits so far; 0 before the first.
    version: u64,
    metadata_location: Option<String>,
    dead_letter_location: Option<String>,
    /// Records the table does not hold yet, up to the last stable offsets.
    lag_records: i64,
    last_commit_ms: Option<i64>,
    retired_generations: usize,
}

async fn tables(addrs: Vec<String>, json: bool) -> anyhow::Result<()> {
    let metadata = RemoteMetadata::connect(addrs).await?;
    let views: Vec<TableView> = {
        let state = metadata.read();
        state
            .topics
            .iter()
            .filter(|(_, topic)| state.table_enabled(topic))
            .map(|(topic_id, topic)| {
                let record = state.tables.get(topic_id);
                let lag_records = topic
                    .partitions
                    .iter()
                    .enumerate()
                    .map(|(index, log)| {
                        let from = state.table_hold(*topic_id, i32::try_from(index).unwrap_or(i32::MAX)).unwrap_or(0);
                        log.last_stable_offset().saturating_sub(from).max(0)
                    })
                    .sum();
                TableView {
                    topic: topic.name.clone(),
                    version: record.map_or(0, |r| r.version),
                    metadata_location: record.map(|r| r.metadata_location.clone()),
                    dead_letter_location: record.and_then(|r| r.dead_letter_location.clone()),
                    lag_records,
                    last_commit_ms: record.map(|r| r.committed_ms),
                    retired_generations: record.map_or(0, |r| r.retired.len()),
                }
            })
            .collect()
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&views)?);
    } else {
        println!("{:<40} {:>8} {:>12}  METADATA", "TOPIC", "VERSION", "LAG-RECORDS");
        for v in views {
            println!(
                "{:<40} {:>8} {:>12}  {}",
                v.topic,
                v.version,
                v.lag_records,
                v.metadata_location.as_deref().unwrap_or("-")
            );
        }
    }
    Ok(())
}

/// One partition row of `groups describe`, as `kafka-consumer-groups --describe` shows it.
#[derive(Debug, Default, Serialize)]
struct PartitionRow {
    topic: String,
    partition: i32,
    committed_offset: Option<i64>,
    log_end_offset: Option<i64>,
    lag: Option<i64>,
    member_id: Option<String>,
    client_id: Option<String>,
    host: Option<String>,
}

#[derive(Debug, Serialize)]
struct GroupView {
    group: String,
    state: String,
    protocol_type: String,
    protocol: String,
    members: usize,
    /// Configs set on the group (the GROUP config resource); the rest are the cluster's.
    configs: BTreeMap<String, String>,
    partitions: Vec<PartitionRow>,
}

async fn groups(addrs: Vec<String>, json: bool, action: GroupsAction) -> anyhow::Result<()> {
    let metadata = RemoteMetadata::connect(addrs).await?;
    match action {
        GroupsAction::List => {
            let request = GroupRequest::List { states: Vec::new(), types: Vec::new() };
            let GroupResponse::List(groups) = metadata.group_request(request).await? else {
                bail!("the coordinator answered another request's kind");
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&groups)?);
            } else {
                println!("{:<40} {:<20} PROTOCOL-TYPE", "GROUP", "STATE");
                for g in groups {
                    println!("{:<40} {:<20} {}", g.group_id, g.state, g.protocol_type);
                }
            }
        }
        GroupsAction::Describe { group } if is_share_group(&metadata, &group) => {
            let GroupResponse::ShareDescribe(mut described) =
                metadata.group_request(GroupRequest::ShareDescribe(vec![group.clone()])).await?
            else {
                bail!("the coordinator answered another request's kind");
            };
            let description = described.pop().ok_or_else(|| anyhow!("no description of {group}"))?;
            let description = description.map_err(|(_, e)| anyhow!("describing {group}: {e}"))?;
            let view = describe_share(&metadata, description);
            if json {
                println!("{}", serde_json::to_string_pretty(&view)?);
            } else {
                print_view(&view);
            }
        }
        GroupsAction::Describe { group } => {
            let GroupResponse::Describe(mut described) =
                metadata.group_request(GroupRequest::Describe(vec![group.clone()])).await?
            else {
                bail!("the coordinator answered another request's kind");
            };
            let description = described.pop().ok_or_else(|| anyhow!("no description of {group}"))?;
            let description = description.map_err(|(_, e)| anyhow!("describing {group}: {e}"))?;
            let view = describe(&metadata, description);
            if json {
                println!("{}", serde_json::to_string_pretty(&view)?);
            } else {
                print_view(&view);
            }
        }
    }
    Ok(())
}

/// Joins the coordinator's view (members and their assignments) with the committed offsets
/// and log end offsets of the metadata state.
fn describe(metadata: &RemoteMetadata, group: GroupDescription) -> GroupView {
    let state = metadata.read();
    let mut rows: BTreeMap<(String, i32), PartitionRow> = BTreeMap::new();
    for lag in state.group_lag(&group.group_id) {
        rows.insert(
            (lag.topic.clone(), lag.partition),
            PartitionRow {
                topic: lag.topic,
                partition: lag.partition,
                committed_offset: Some(lag.committed),
                log_end_offset: Some(lag.log_end),
                lag: Some(lag.lag),
                ..Default::default()
            },
        );
    }
    if group.protocol_type == "consumer" {
        for member in &group.members {
            for (topic, partitions) in assigned_partitions(&member.assignment) {
                for partition in partitions {
                    let row = rows.entry((topic.clone(), partition)).or_insert_with(|| {
                        let log_end = state
                            .topic_by_name(&topic)
                            .and_then(|t| state.partition(t.topic_id, partition))
                            .map(|p| p.next_offset);
                        PartitionRow { topic: topic.clone(), partition, log_end_offset: log_end, ..Default::default() }
                    });
                    row.member_id = Some(member.member_id.clone());
                    row.client_id = Some(member.client_id.clone());
                    row.host = Some(member.client_host.clone());
                }
            }
        }
    }
    GroupView {
        configs: state.group_configs.get(&group.group_id).cloned().unwrap_or_default(),
        group: group.group_id,
        state: group.state,
        protocol_type: group.protocol_type,
        protocol: group.protocol,
        members: group.members.len(),
        partitions: rows.into_values().collect(),
    }
}

fn is_share_group(metadata: &RemoteMetadata, group: &str) -> bool {
    let state = metadata.read();
    state.groups.get(group).is_some_and(|g| g.membership.kind == floe_metadata::GroupKind::Share)
        || state.share_partitions.keys().any(|(g, _, _)| g == group)
}

/// A share group's members and, per partition, its start offset (as CURRENT-OFFSET), the log
/// end and the records not yet acknowledged (LAG), with every member the partition is assigned
/// to.
fn describe_share(metadata: &RemoteMetadata, group: floe_metadata::groups::ShareGroupDescription) -> GroupView {
    let state = metadata.read();
    let mut rows: BTreeMap<(String, i32), PartitionRow> = BTreeMap::new();
    for lag in state.share_lag(&group.group_id) {
        let row = PartitionRow {
            topic: lag.topic.clone(),
            partition: lag.partition,
            committed_offset: Some(lag.start_offset),
            log_end_offset: Some(lag.log_end),
            lag: Some(lag.lag),
            ..Default::default()
        };
        rows.insert((lag.topic, lag.partition), row);
    }
    for member in &group.members {
        for (_, topic, partitions) in &member.assignment {
            for partition in partitions {
                let row = rows.entry((topic.clone(), *partition)).or_insert_with(|| PartitionRow {
                    topic: topic.clone(),
                    partition: *partition,
                    ..Default::default()
                });
                let joined = |old: Option<String>, new: &str| {
                    Some(old.map_or_else(|| new.to_owned(), |old| format!("{old},{new}")))
                };
                row.member_id = joined(row.member_id.take(), &member.member_id);
                row.client_id = joined(row.client_id.take(), &member.client_id);
                row.host = joined(row.host.take(), &member.client_host);
            }
        }
    }
    GroupView {
        configs: state.group_configs.get(&group.group_id).cloned().unwrap_or_default(),
        group: group.group_id,
        state: group.state,
        protocol_type: "share".into(),
        protocol: group.assignor,
        members: group.members.len(),
        partitions: rows.into_values().collect(),
    }
}

fn print_view(view: &GroupView) {
    println!(
        "group {} is {} ({} members, protocol {} {})\n",
        view.group, view.state, view.members, view.protocol_type, view.protocol
    );
    if !view.configs.is_empty() {
        let set: Vec<String> = view.configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("configs: {}\n", set.join(", "));
    }
    let dash = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
    println!(
        "{:<30} {:>9} {:>14} {:>14} {:>10}  {:<50} {:<16} CLIENT-ID",
        "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST"
    );
    for r in &view.partitions {
        println!(
            "{:<30} {:>9} {:>14} {:>14} {:>10}  {:<50} {:<16} {}",
            r.topic,
            r.partition,
            dash(r.committed_offset),
            dash(r.log_end_offset),
            dash(r.lag),
            r.member_id.as_deref().unwrap_or("-"),
            r.host.as_deref().unwrap_or("-"),
            r.client_id.as_deref().unwrap_or("-")
        );
    }
}

async fn usage(
    addrs: Vec<String>,
    tenant: Option<String>,
    from: Option<String>,
    to: Option<String>,
    granularity: String,
    json: bool,
) -> anyhow::Result<()> {
    let query = floe_gateway::usage::UsageQuery::parse(tenant, from.as_deref(), to.as_deref(), Some(&granularity))
        .map_err(|e| anyhow!(e))?;
    let metadata = RemoteMetadata::connect(addrs).await?;
    metadata.catch_up().await?;
    let answer = query.answer(&metadata.read().usage).map_err(|e| anyhow!(e))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
        return Ok(());
    }
    let columns: Vec<&str> = floe_metadata::Meter::ALL.iter().map(|m| m.name()).collect();
    println!("{:<21} {:<16} {}", "start", "tenant", columns.join(" "));
    for row in answer["rows"].as_array().into_iter().flatten() {
        let values: Vec<String> = columns
            .iter()
            .map(|c| format!("{:>width$}", row["meters"][c].as_u64().unwrap_or(0), width = c.len()))
            .collect();
        let tenant = row["tenant"].as_str().filter(|t| !t.is_empty()).unwrap_or("-");
        println!("{:<21} {:<16} {}", row["start"].as_str().unwrap_or(""), tenant, values.join(" "));
    }
    if let Some(closed) = answer["closed_through"].as_str() {
        println!("(minutes closed through {closed}; later ones may still grow)");
    }
    Ok(())
}

async fn links(addrs: Vec<String>, action: crate::cli::LinksAction) -> anyhow::Result<()> {
    use crate::cli::LinksAction;
    use floe_gateway::links;
    let metadata = RemoteMetadata::connect(addrs).await?;
    metadata.catch_up().await?;
    let propose = |command: Command| {
        let metadata = metadata.clone();
        async move { metadata.propose(command).await.map_err(|e| anyhow::anyhow!("{e}")) }
    };
    let show = |name: Option<&str>| -> anyhow::Result<()> {
        let mut listed = links::links_json(&metadata.read(), name);
        let json = match name {
            Some(name) => listed.pop().ok_or_else(|| anyhow::anyhow!("link {name:?} not found"))?,
            None => serde_json::Value::Array(listed),
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
        Ok(())
    };
    match action {
        LinksAction::List => show(None)?,
        LinksAction::Status { name } => show(Some(&name))?,
        LinksAction::Create { name, source, topics, groups, no_sync_configs, target } => {
            let request = link_request(name.clone(), source, topics, groups, !no_sync_configs, target)?;
            let command = links::set_link_command(&metadata.read(), request, floe_metadata::now_ms())
                .map_err(|e| anyhow::anyhow!(e))?;
            propose(command).await?;
            show(Some(&name))?;
        }
        LinksAction::Reverse { name, promoted_link, promoted_metadata, source, target } => {
            let there = RemoteMetadata::connect(promoted_metadata).await?;
            let promoted = there
                .read()
                .links
                .get(&promoted_link)
                .cloned()
                .ok_or_else(|| anyhow::anyhow!("no link {promoted_link:?} on the promoted cluster"))?;
            let floe_metadata::LinkState::Promoted { fork_offsets, .. } = &promoted.state else {
                bail!("link {promoted_link:?} is not promoted: promote it there first");
            };
            let groups = promoted.config.groups.clone();
            let link = link_request(name.clone(), source, String::new(), groups, promoted.config.sync_configs, target)?;
            let request = links::ReverseRequest { link, fork_offsets: fork_offsets.clone() };
            let commands = links::reverse_commands(&metadata.read(), request, floe_metadata::now_ms())
                .map_err(|e| anyhow::anyhow!(e))?;
            for command in commands {
                propose(command).await?;
            }
            show(Some(&name))?;
        }
        LinksAction::Promote { name } => {
            propose(Command::PromoteLink { name: name.clone(), now_ms: floe_metadata::now_ms() }).await?;
            show(Some(&name))?;
        }
        LinksAction::Delete { name } => {
            propose(Command::DeleteLink { name: name.clone() }).await?;
            println!("link {name} deleted");
        }
    }
    Ok(())
}

/// A link request from the CLI's flags; the source password, if any, is read from stdin.
fn link_request(
    name: String,
    source: crate::cli::LinkSourceArgs,
    topics: String,
    groups: Option<String>,
    sync_configs: bool,
    target: crate::cli::LinkTargetArgs,
) -> anyhow::Result<floe_gateway::links::LinkRequest> {
    let source_ca_pem = match source.source_ca_file {
        Some(path) => Some(std::fs::read_to_string(&path).map_err(|e| anyhow!("reading {}: {e}", path.display()))?),
        None => None,
    };
    let source_sasl_password = match source.source_sasl_mechanism {
        Some(_) => {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .map_err(|e| anyhow!("reading the source password from stdin: {e}"))?;
            Some(password.trim_end_matches(['\r', '\n']).to_owned())
        }
        None => None,
    };
    Ok(floe_gateway::links::LinkRequest {
        name,
        source_bootstrap: source.source_bootstrap,
        topics,
        groups,
        source_tls: source.source_tls,
        source_ca_pem,
        source_sasl_mechanism: source.source_sasl_mechanism,
        source_sasl_username: source.source_sasl_username,
        source_sasl_password,
        sync_configs,
        tenant: target.tenant,
        acls: target.acls,
    })
}
