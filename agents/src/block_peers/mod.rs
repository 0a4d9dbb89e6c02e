//! One GET per block per zone. Each object block has an owner among the zone's live fetch agents
//! (of any agent group) that have a peer listener (rendezvous hashing, [`block_owner`]). An agent
//! that misses a block in its hot tier asks the owner ([`client`]), which reads it from the object
//! store at most once for all askers and keeps it ([`server`]); when the owner fails or is slow,
//! the asker reads the block itself, so no client sees an error. An answer names the block and
//! the CRC-32C the owner checked it against ([`wire`]); one that names another block, or whose
//! bytes do not match (the block cache checks them), is refused, the block read from the store,
//! and the owner not asked for a while.
//!
//! Blocks travel over the metadata identities' mutual TLS (both sides of role agent), or in
//! plaintext when the metadata port is plaintext too (`floe dev`, tests).

pub mod client;
pub mod server;
pub mod wire;

use std::sync::{Arc, Weak};
use std::time::Duration;

use floe_metadata::{AgentInfo, State};
use floe_storage::{PeerBlocks, PeerFetch, SegmentKey};

use crate::Agent;

/// How long an asker waits for an owner before reading the block from the object store: above
/// an S3 GET of a block (the owner may be reading it), below what a consumer would notice.
pub const OWNER_DEADLINE: Duration = Duration::from_millis(1_500);

/// The zone's owners of blocks, as the block cache asks them.
#[derive(Debug)]
pub struct ZonePeers {
    agent: Weak<Agent>,
    client: Arc<client::PeerClient>,
}

impl ZonePeers {
    pub fn new(agent: Weak<Agent>, deadline: Duration) -> Self {
        Self { agent, client: Arc::new(client::PeerClient::new(deadline)) }
    }

    /// The peer address of the owner of block `index` of the object `key`, if another agent.
    fn owner(&self, key: &SegmentKey, object_bytes: u64, index: u64) -> Option<String> {
        let agent = self.agent.upgrade()?;
        let state = agent.metadata.read();
        block_owner(&state, &agent, key.as_str(), floe_storage::owner_block(object_bytes, index))
    }
}

impl PeerBlocks for ZonePeers {
    fn fetch(&self, key: &SegmentKey, object_bytes: u64, index: u64) -> PeerFetch {
        let Some(addr) = self.owner(key, object_bytes, index) else { return Box::pin(std::future::ready(None)) };
        let client = self.client.clone();
        let request = wire::BlockRequest { key: key.as_str().to_owned(), object_bytes, index };
        let expected = floe_storage::block_len(object_bytes, index);
        Box::pin(async move { client.fetch(&addr, request, expected).await })
    }

    fn damaged(&self, key: &SegmentKey, object_bytes: u64, index: u64) {
        // The owner `fetch` asked: ownership moves only as agents come and go.
        if let Some(addr) = self.owner(key, object_bytes, index) {
            tracing::warn!(owner = addr, %key, index, "an owner answered a block that failed its checksum");
            self.client.mark_down(&addr);
        }
    }
}

/// The peer address of the owner of block `block` of object `key`, among the live fetch agents
/// with a peer listener in `agent`'s zone (any agent group: blocks are the zone's); `None` when
/// `agent` owns it itself or there is no such agent (before format 10, or without
/// `--peer-addr`).
pub fn block_owner(state: &State, agent: &Agent, key: &str, block: u64) -> Option<String> {
    let own = agent.config.peer_addr.as_deref()?;
    let zone = agent.config.zone.as_deref();
    let candidates: Vec<(AgentInfo, String)> = crate::membership::live_agents(state, agent)
        .into_iter()
        .filter(|a| a.profile.roles.fetch && a.info.zone.as_deref() == zone)
        .filter_map(|a| {
            let addr = if a.info.agent_id == agent.config.node_id {
                Some(own.to_owned())
            } else {
                state.agent_peer(a.info.agent_id).map(str::to_owned)
            };
            addr.map(|addr| (a.info, addr))
        })
        .collect();
    let infos: Vec<AgentInfo> = candidates.iter().map(|(info, _)| info.clone()).collect();
    let mut hashed = Vec::with_capacity(key.len() + 9);
    hashed.extend_from_slice(key.as_bytes());
    hashed.push(b'#');
    hashed.extend_from_slice(&block.to_be_bytes());
    let owner = crate::membership::owner_of(&infos, &hashed)?;
    (owner != agent.config.node_id)
        .then(|| candidates.into_iter().find(|(info, _)| info.agent_id == owner))
        .flatten()
        .map(|(_, addr)| addr)
}
