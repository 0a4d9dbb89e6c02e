//! `floe admin`: operator views of a running cluster.

use anyhow::anyhow;

use crate::cli::AdminCommand;

pub(crate) async fn run(command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Cluster { metadata } => {
            let status = floe_metadata::raft::network::fetch_status(&metadata).await.map_err(|e| anyhow!(e))?;
            println!("{}", serde_json::to_string_pretty(&status)?);
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
    }
    Ok(())
}
