//! `floe admin`: operator views of a running cluster.

use anyhow::anyhow;

use crate::cli::AdminCommand;

pub(crate) async fn run(command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Cluster { metadata } => {
            let status = floe_metadata::raft::network::fetch_status(&metadata).await.map_err(|e| anyhow!(e))?;
            println!("{}", serde_json::to_string_pretty(&status)?);
        }
    }
    Ok(())
}
