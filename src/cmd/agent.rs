//! `floe agent`: a stateless agent in its own process, mirroring a metadata cluster.

use anyhow::anyhow;
use floe_metadata::{Metadata, RemoteMetadata};

use crate::cli::AgentArgs;

pub(crate) async fn run(args: AgentArgs) -> anyhow::Result<()> {
    let tls = super::install_metadata_tls(&args.tls)?;
    if let Some(peer) = args.placement.peer_addr
        && !tls
        && !args.placement.peer_allow_plaintext
        && !peer.ip().is_loopback()
    {
        anyhow::bail!(
            "--peer-addr {peer} is not a loopback address: give --metadata-tls-cert, --metadata-tls-key and \
             --metadata-tls-ca (the peer listener uses the metadata identities), or --peer-allow-plaintext on a \
             network nobody else reaches"
        );
    }
    if let Some(path) = &args.agent.operator_token_file {
        // Relayed with the operator commands the HTTP operator API proposes (over TLS only).
        floe_metadata::tls::install_operator_token(&super::read_operator_token(path)?)?;
    }
    let remote = RemoteMetadata::connect(args.metadata.clone())
        .await
        .map_err(|e| anyhow!("connecting to metadata {:?}: {e}", args.metadata))?;
    tracing::info!(
        metadata = ?args.metadata,
        zone = ?args.placement.zone,
        roles = %args.placement.roles,
        agent_group = %args.placement.agent_group,
        "mirroring metadata"
    );
    super::serve_agent::run(&args.agent, &args.object_store, args.placement, Metadata::Remote(remote), None).await
}
