//! Which agents are live, and which one Kafka clients are told leads each partition.
//!
//! Every agent heartbeats through the metadata service; Metadata responses list the agents heard
//! from within [`AGENT_SESSION`]. Each partition's nominal leader is chosen among them by
//! rendezvous hashing, so load spreads and moves little when agents come and go. Any agent still
//! accepts writes and reads for any partition: the leader only steers clients.

use std::sync::Weak;
use std::time::Duration;

use floe_metadata::now_ms;
use floe_metadata::tasks::TaskGroup;
use floe_metadata::{AgentInfo, AgentRecord, Command, State, TopicId};
use tokio_util::sync::CancellationToken;

use crate::Agent;

/// How often an agent announces itself.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// An agent not heard from for this long is not listed.
pub const AGENT_SESSION: Duration = Duration::from_secs(10);

/// Heartbeats proposed at once at most: a commit can take up to the propose deadline while the
/// metadata service fails over, and later ticks must not wait for it (see [`heartbeat`]).
const HEARTBEATS_IN_FLIGHT_MAX: usize = 8;
/// How long other agents' mirrors are given to apply this agent's first heartbeat after its own
/// mirror has: mirrors are pushed each commit, so this is a margin, not a guarantee.
const ANNOUNCE_SETTLE: Duration = Duration::from_millis(250);

fn heartbeat_command(agent: &Agent) -> Command {
    Command::AgentHeartbeat { agent: agent.info(), now_ms: now_ms() }
}

/// Returns once this agent's first heartbeat is committed (and applied by its own mirror), so
/// that every agent's Metadata answer lists it before any client is told about it: librdkafka
/// drops a broker that a Metadata answer leaves out, failing what it had in flight there.
/// Retries while the metadata service is unavailable (an agent it cannot hear has nothing to
/// serve); a refusal (an invalid address, the cluster's agent limit) is returned.
pub async fn announce(agent: &Agent) -> Result<(), floe_metadata::CommandError> {
    let mut backoff = Duration::from_millis(100);
    loop {
        match agent.metadata.propose(heartbeat_command(agent)).await {
            Ok(_) => break,
            Err(floe_metadata::NodeError::Rejected(why)) => return Err(why),
            Err(e) => {
                tracing::warn!(error = %e, "announcing this agent failed; retrying before serving clients");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(HEARTBEAT_INTERVAL);
            }
        }
    }
    tokio::time::sleep(ANNOUNCE_SETTLE).await;
    Ok(())
}

/// Runs until `stop` (or the agent is dropped). Ticks on a fixed interval and proposes each
/// heartbeat in a task of its own in `tasks` (so stopping waits for it), stamped when it is sent:
/// waiting for a slow commit before the next would let two stamps lie further apart than
/// [`AGENT_SESSION`], and the agent would drop out of Metadata.
pub(crate) async fn heartbeat(agent: Weak<Agent>, tasks: TaskGroup, stop: CancellationToken) {
    let in_flight = std::sync::Arc::new(tokio::sync::Semaphore::new(HEARTBEATS_IN_FLIGHT_MAX));
    let mut ticks = tokio::time::interval(HEARTBEAT_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while stop.run_until_cancelled(ticks.tick()).await.is_some() {
        let Some(strong) = agent.upgrade() else { return };
        if strong.is_draining() {
            return;
        }
        let Ok(permit) = in_flight.clone().try_acquire_owned() else {
            tracing::warn!("agent heartbeats are not being committed; skipping one");
            continue;
        };
        let command = heartbeat_command(&strong);
        let metadata = strong.metadata.clone();
        drop(strong);
        tasks.spawn(|_| async move {
            if let Err(e) = metadata.propose(command).await {
                tracing::warn!(error = %e, "agent heartbeat failed");
            }
            drop(permit);
        });
    }
}

/// The live agents, ordered by id, including `agent` (it is serving the request) unless it is
/// draining and another agent is live: clients then move off it.
pub fn live_agents(state: &State, agent: &Agent) -> Vec<AgentInfo> {
    let this = agent.info();
    let session_ms = i64::try_from(AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
    let mut agents: Vec<AgentInfo> = state
        .live_agents(now_ms(), session_ms)
        .map(|r: &AgentRecord| r.info.clone())
        .filter(|a| a.agent_id != this.agent_id)
        .collect();
    if !agent.is_draining() || agents.is_empty() {
        agents.push(this);
    }
    agents.sort_by_key(|a| a.agent_id);
    agents
}

/// The agents a client should use: those of its zone when its `client.id` carries
/// `floe_az=ZONE` and that zone has live agents (so no byte crosses zones), otherwise all.
pub fn for_client_zone(agents: Vec<AgentInfo>, client_id: Option<&str>) -> Vec<AgentInfo> {
    let zone = client_id.and_then(|id| {
        id.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .find_map(|part| part.strip_prefix("floe_az="))
            .filter(|z| !z.is_empty())
    });
    let Some(zone) = zone else { return agents };
    let local: Vec<AgentInfo> = agents.iter().filter(|a| a.zone.as_deref() == Some(zone)).cloned().collect();
    if local.is_empty() { agents } else { local }
}

/// The agent with the highest rendezvous score for this partition.
pub fn partition_leader(agents: &[AgentInfo], topic_id: TopicId, partition: i32) -> i32 {
    let mut key = [0u8; 20];
    key[..16].copy_from_slice(topic_id.as_bytes());
    key[16..20].copy_from_slice(&partition.to_be_bytes());
    rendezvous(agents, u64::from(crc32c::crc32c(&key))).map_or(-1, |a| a.agent_id)
}

/// The agent named coordinator of a group or transactional id (`key`, as stored): the same
/// agent whichever agent is asked, so a client keeps one coordinator connection and its
/// pipelined commits travel, and are stamped, in the order it sent them.
pub fn coordinator<'a>(agents: &'a [AgentInfo], key: &str) -> Option<&'a AgentInfo> {
    rendezvous(agents, u64::from(crc32c::crc32c(key.as_bytes())))
}

/// The agent with the highest rendezvous score for `key_hash`.
fn rendezvous(agents: &[AgentInfo], key_hash: u64) -> Option<&AgentInfo> {
    // CRC is linear, so scores are mixed with a 64-bit finalizer (MurmurHash3's fmix64) to make
    // each agent's score independent of the others'.
    let score = |agent_id: i32| {
        let mut h = key_hash ^ (u64::from(agent_id as u32).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    };
    agents.iter().max_by_key(|a| (score(a.agent_id), a.agent_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents(ids: &[i32]) -> Vec<AgentInfo> {
        ids.iter().map(|id| AgentInfo { agent_id: *id, host: "h".into(), port: 1, zone: None }).collect()
    }

    #[test]
    fn clients_naming_a_zone_get_that_zones_agents() {
        let mut all = agents(&[1, 2, 3]);
        all[0].zone = Some("a".into());
        all[1].zone = Some("b".into());
        all[2].zone = Some("a".into());
        let ids = |list: Vec<AgentInfo>| list.into_iter().map(|a| a.agent_id).collect::<Vec<_>>();
        assert_eq!(ids(for_client_zone(all.clone(), Some("app-7,floe_az=a"))), vec![1, 3]);
        assert_eq!(ids(for_client_zone(all.clone(), Some("floe_az=b"))), vec![2]);
        assert_eq!(ids(for_client_zone(all.clone(), Some("floe_az=c"))), vec![1, 2, 3], "unknown zone: everyone");
        assert_eq!(ids(for_client_zone(all, None)), vec![1, 2, 3]);
    }

    #[test]
    fn leaders_spread_and_move_little_when_an_agent_leaves() {
        let topic = uuid::Uuid::from_bytes([7; 16]);
        let three = agents(&[1, 2, 3]);
        let leaders: Vec<i32> = (0..300).map(|p| partition_leader(&three, topic, p)).collect();
        for id in [1, 2, 3] {
            let n = leaders.iter().filter(|l| **l == id).count();
            assert!((60..=140).contains(&n), "agent {id} leads {n} of 300 partitions");
        }
        let two = agents(&[1, 3]);
        for (p, before) in leaders.iter().enumerate() {
            let after = partition_leader(&two, topic, p as i32);
            if *before != 2 {
                assert_eq!(after, *before, "partition {p} moved although its leader stayed");
            }
        }
    }

    #[test]
    fn every_agent_names_the_same_coordinator_and_groups_spread() {
        let three = agents(&[1, 2, 3]);
        let mut reversed = three.clone();
        reversed.reverse();
        let mut counts = [0usize; 4];
        for g in 0..300 {
            let key = format!("acme~group-{g}");
            let chosen = coordinator(&three, &key).map(|a| a.agent_id);
            assert_eq!(chosen, coordinator(&reversed, &key).map(|a| a.agent_id), "order of the agent list matters");
            counts[chosen.unwrap_or(0) as usize] += 1;
        }
        assert!(counts[1..].iter().all(|n| (60..=140).contains(n)), "coordinators per agent: {counts:?}");
        assert!(coordinator(&[], "g").is_none());
    }
}
