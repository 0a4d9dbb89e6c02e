//! Which agents are live, and which one Kafka clients are told leads each partition.
//!
//! Every agent heartbeats through the metadata service; Metadata responses list the agents heard
//! from within [`AGENT_SESSION`]. Each partition's nominal leader is chosen among them by
//! rendezvous hashing, so load spreads and moves little when agents come and go. Any agent still
//! accepts writes and reads for any partition: the leader only steers clients.
//!
//! Agents have roles (produce, fetch, jobs) and an agent group (format 9). A client is told of
//! the agents of the group of the agent it reached ([`client_pool`]); its partition leaders,
//! coordinators and read replicas are those of its zone. Leaders are the agents with the reached
//! agent's client roles, so producers that bootstrap to produce agents and consumers that
//! bootstrap to fetch agents each stay on theirs. A produce-only agent moves a consumer that names
//! its rack to a fetch agent (KIP-392, [`read_replica`]).

use std::net::IpAddr;
use std::sync::Weak;
use std::time::Duration;

use floe_metadata::now_ms;
use floe_metadata::tasks::TaskGroup;
use floe_metadata::{AgentInfo, AgentProfile, AgentRecord, AgentRoles, Command, State, TopicId};
use tokio_util::sync::CancellationToken;

use crate::Agent;

/// How often an agent announces itself.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// An agent not heard from for this long is not listed.
pub const AGENT_SESSION: Duration = Duration::from_secs(10);

/// Heartbeats proposed at once at most: a commit can take up to the propose deadline while the
/// metadata service fails over, and later ticks must not wait for it (see [`heartbeat`]).
const HEARTBEATS_IN_FLIGHT_MAX: usize = 8;
/// How long an announcing agent waits for every metadata node to apply its first heartbeat: a
/// follower learns of a commit only with the leader's next message, and an agent mirroring it
/// would list this agent that much later.
const ANNOUNCE_NODES_PATIENCE: Duration = Duration::from_secs(5);
/// How long other agents' mirrors are then given to receive it: nodes push each applied command
/// at once, so this is a margin for the push, not a guarantee.
const ANNOUNCE_SETTLE: Duration = Duration::from_millis(250);

/// With the agent's profile once the cluster applies format 9, and its peer listener once it
/// applies format 10 (before, no node could read them).
fn heartbeat_command(agent: &Agent) -> Command {
    let state = agent.metadata.read();
    if state.applies_format(10) {
        Command::AgentHeartbeatWithPeer {
            agent: agent.info().into(),
            profile: agent.profile().into(),
            peer_addr: agent.config.peer_addr.clone(),
            now_ms: now_ms(),
        }
    } else if state.applies_format(9) {
        Command::AgentHeartbeatWithProfile {
            agent: agent.info().into(),
            profile: agent.profile().into(),
            now_ms: now_ms(),
        }
    } else {
        Command::AgentHeartbeat { agent: agent.info().into(), now_ms: now_ms() }
    }
}

/// Returns once this agent's first heartbeat is committed and applied by every metadata node, so
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
    let behind = agent.metadata.wait_applied_by_every_node(ANNOUNCE_NODES_PATIENCE).await;
    if !behind.is_empty() {
        tracing::warn!(?behind, "metadata nodes have not applied this agent's first heartbeat; serving anyway");
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

/// Zones by client address: `ZONE=CIDR` pairs, comma-separated.
#[derive(Clone, Debug, Default)]
pub struct ZoneCidrs(Vec<(ipnet::IpNet, String)>);

impl ZoneCidrs {
    /// The zone of the narrowest range holding `address`.
    pub fn zone_of(&self, address: IpAddr) -> Option<&str> {
        let address = match address {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
            v4 => v4,
        };
        self.0
            .iter()
            .filter(|(net, _)| net.contains(&address))
            .max_by_key(|(net, _)| net.prefix_len())
            .map(|(_, z)| z.as_str())
    }
}

impl std::str::FromStr for ZoneCidrs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let pairs = s.split(',').map(str::trim).filter(|p| !p.is_empty()).map(|pair| {
            let (zone, cidr) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not ZONE=CIDR"))?;
            let net = cidr.trim().parse::<ipnet::IpNet>().map_err(|e| format!("{cidr:?}: {e}"))?;
            let zone = zone.trim();
            if zone.is_empty() || zone.len() > 255 {
                return Err(format!("{pair:?}: a zone name is 1 to 255 bytes"));
            }
            Ok((net, zone.to_owned()))
        });
        let pairs = pairs.collect::<Result<Vec<_>, String>>()?;
        if pairs.len() > ZONE_CIDRS_MAX {
            return Err(format!("at most {ZONE_CIDRS_MAX} ranges"));
        }
        Ok(Self(pairs))
    }
}

/// Ranges `--zone-cidrs` may map (each client's zone is a scan of them).
const ZONE_CIDRS_MAX: usize = 256;

/// A live agent: how clients reach it and what it does.
#[derive(Clone, Debug)]
pub struct LiveAgent {
    pub info: AgentInfo,
    pub profile: AgentProfile,
}

/// The live agents of every group, ordered by id, including `agent` (it is serving the request)
/// unless it is draining and another agent is live: clients then move off it.
pub fn live_agents(state: &State, agent: &Agent) -> Vec<LiveAgent> {
    live(state, agent, false)
}

/// [`live_agents`] of `agent`'s own group only.
fn live(state: &State, agent: &Agent, own_group: bool) -> Vec<LiveAgent> {
    let this = LiveAgent { info: agent.info(), profile: agent.effective_profile(state) };
    let session_ms = i64::try_from(AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
    let mut agents: Vec<LiveAgent> = state
        .live_agents(now_ms(), session_ms)
        .filter(|r: &&AgentRecord| r.info.agent_id != this.info.agent_id)
        .map(|r| LiveAgent { info: r.info.clone(), profile: state.agent_profile(r.info.agent_id) })
        .filter(|a| !own_group || a.profile.group == this.profile.group)
        .collect();
    if !agent.is_draining() || agents.is_empty() {
        agents.push(this);
    }
    agents.sort_by_key(|a| a.info.agent_id);
    agents
}

/// What an agent knows of the client it serves.
#[derive(Clone, Debug, Default)]
pub struct ClientHints {
    pub client_id: Option<String>,
    pub address: Option<IpAddr>,
    /// The rack a Fetch names (`client.rack`, Fetch v11+).
    pub rack: Option<String>,
}

/// The zone a client says it is in: `floe_az=ZONE` in its client id, else the rack its Fetch
/// names, else its address's zone in `--zone-cidrs`.
pub fn stated_zone<'a>(agent: &'a Agent, hints: &'a ClientHints) -> Option<&'a str> {
    let from_id = hints.client_id.as_deref().and_then(|id| {
        id.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
            .find_map(|part| part.strip_prefix("floe_az="))
            .filter(|z| !z.is_empty())
    });
    from_id
        .or(hints.rack.as_deref().filter(|r| !r.is_empty()))
        .or_else(|| hints.address.and_then(|ip| agent.config.zone_cidrs.zone_of(ip)))
}

/// The agents a client is told of.
#[derive(Clone, Debug)]
pub struct ClientPool {
    /// The live agents of the reached agent's group: the brokers a client may connect to (all
    /// zones, so it can move when its zone's agents are gone).
    pub group: Vec<LiveAgent>,
    /// Those of the client's zone (the one it states, else the reached agent's) when that zone
    /// has any, else all of `group`: its leaders, coordinators and read replicas come from here,
    /// so no byte crosses zones.
    pub local: Vec<LiveAgent>,
}

/// The pool of a client that reached `agent`.
pub fn client_pool(state: &State, agent: &Agent, hints: &ClientHints) -> ClientPool {
    let group = live(state, agent, true);
    let local = in_zone(group.clone(), stated_zone(agent, hints).or(agent.config.zone.as_deref()));
    ClientPool { group, local }
}

/// The agents of `pool` in `zone`, or all of them when it has none there.
fn in_zone(pool: Vec<LiveAgent>, zone: Option<&str>) -> Vec<LiveAgent> {
    let Some(zone) = zone else { return pool };
    let local: Vec<LiveAgent> = pool.iter().filter(|a| a.info.zone.as_deref() == Some(zone)).cloned().collect();
    if local.is_empty() { pool } else { local }
}

/// The agents of `pool` whose roles pass `wanted`; all of `pool` when none does (any agent
/// can serve anything: a missing role costs locality, not availability).
pub fn with_roles(pool: &[LiveAgent], wanted: impl Fn(&AgentRoles) -> bool) -> Vec<AgentInfo> {
    let chosen: Vec<AgentInfo> = pool.iter().filter(|a| wanted(&a.profile.roles)).map(|a| a.info.clone()).collect();
    if chosen.is_empty() { pool.iter().map(|a| a.info.clone()).collect() } else { chosen }
}

/// The partition leaders for a client that reached an agent of `roles`: agents with the same
/// client roles (produce, fetch), so a client stays on the kind of agent it bootstrapped to.
pub fn leaders(pool: &[LiveAgent], roles: AgentRoles) -> Vec<AgentInfo> {
    let serves_clients = |r: &AgentRoles| r.produce || r.fetch;
    let same = |r: &AgentRoles| serves_clients(r) && (!roles.produce || r.produce) && (!roles.fetch || r.fetch);
    if pool.iter().any(|a| same(&a.profile.roles)) { with_roles(pool, same) } else { with_roles(pool, serves_clients) }
}

/// The fetch agent a consumer should read `partition` from instead of an agent of `roles`
/// (KIP-392's preferred read replica), when that agent does not fetch and a fetch agent of
/// `pool` does; `None`: the agent serves the read itself.
pub fn read_replica(pool: &[LiveAgent], roles: AgentRoles, topic_id: TopicId, partition: i32) -> Option<i32> {
    if roles.fetch {
        return None;
    }
    let fetchers: Vec<AgentInfo> = pool.iter().filter(|a| a.profile.roles.fetch).map(|a| a.info.clone()).collect();
    (!fetchers.is_empty()).then(|| partition_leader(&fetchers, topic_id, partition))
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

/// The agent of `agents` that owns `key` (an object block's name): the same whichever agent asks.
pub fn owner_of(agents: &[AgentInfo], key: &[u8]) -> Option<i32> {
    rendezvous(agents, u64::from(crc32c::crc32c(key))).map(|a| a.agent_id)
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

    fn live(specs: &[(i32, Option<&str>, &str)]) -> Vec<LiveAgent> {
        specs
            .iter()
            .map(|(id, zone, roles)| LiveAgent {
                info: AgentInfo { agent_id: *id, host: "h".into(), port: 1, zone: zone.map(str::to_owned) },
                profile: AgentProfile { roles: roles.parse().expect("roles"), group: String::new() },
            })
            .collect()
    }

    fn ids<'a>(list: impl IntoIterator<Item = &'a AgentInfo>) -> Vec<i32> {
        list.into_iter().map(|a| a.agent_id).collect()
    }

    #[test]
    fn client_addresses_map_to_the_narrowest_zone_range() {
        let cidrs: ZoneCidrs = "a=10.0.0.0/16, b=10.0.5.0/24,v6=fd00::/8".parse().expect("parses");
        let zone = |ip: &str| cidrs.zone_of(ip.parse().expect("ip")).map(str::to_owned);
        assert_eq!(zone("10.0.1.9").as_deref(), Some("a"));
        assert_eq!(zone("10.0.5.9").as_deref(), Some("b"));
        assert_eq!(zone("::ffff:10.0.5.9").as_deref(), Some("b"), "IPv4-mapped");
        assert_eq!(zone("fd00::1").as_deref(), Some("v6"));
        assert_eq!(zone("192.168.0.1"), None);
        assert!("a=10.0.0.0".parse::<ZoneCidrs>().is_err() && "10.0.0.0/8".parse::<ZoneCidrs>().is_err());
        assert!("=10.0.0.0/8".parse::<ZoneCidrs>().is_err());
    }

    #[test]
    fn clients_get_their_zones_agents_or_everyone_when_it_has_none() {
        let all = live(&[(1, Some("a"), "produce,fetch"), (2, Some("b"), "produce,fetch"), (3, Some("a"), "fetch")]);
        let zone = |z| ids(in_zone(all.clone(), z).iter().map(|a| &a.info));
        assert_eq!(zone(Some("a")), vec![1, 3]);
        assert_eq!(zone(Some("b")), vec![2]);
        assert_eq!(zone(Some("c")), vec![1, 2, 3], "unknown zone: everyone");
        assert_eq!(zone(None), vec![1, 2, 3]);
    }

    #[test]
    fn leaders_have_the_reached_agents_client_roles() {
        let pool = live(&[(1, None, "produce"), (2, None, "fetch"), (3, None, "fetch,jobs"), (4, None, "jobs")]);
        let roles = |r: &str| r.parse::<AgentRoles>().expect("roles");
        assert_eq!(ids(&leaders(&pool, roles("produce"))), vec![1]);
        assert_eq!(ids(&leaders(&pool, roles("fetch"))), vec![2, 3]);
        // No agent does both: every agent that serves clients leads; a jobs agent never does.
        assert_eq!(ids(&leaders(&pool, roles("produce,fetch,jobs"))), vec![1, 2, 3]);
        assert_eq!(ids(&leaders(&pool, roles("jobs"))), vec![1, 2, 3]);
        let jobs_only = live(&[(4, None, "jobs")]);
        assert_eq!(ids(&leaders(&jobs_only, roles("produce"))), vec![4], "someone leads");
        assert_eq!(ids(&with_roles(&pool, |r| r.produce)), vec![1]);
    }

    #[test]
    fn a_produce_agent_names_a_fetch_agent_per_partition_and_a_fetch_agent_none() {
        let topic = uuid::Uuid::from_bytes([3; 16]);
        let pool = live(&[(1, None, "produce"), (2, None, "fetch"), (3, None, "fetch")]);
        let produce = "produce".parse::<AgentRoles>().expect("roles");
        let chosen: Vec<Option<i32>> = (0..40).map(|p| read_replica(&pool, produce, topic, p)).collect();
        assert!(chosen.iter().all(|c| matches!(c, Some(2 | 3))), "{chosen:?}");
        assert!(chosen.contains(&Some(2)) && chosen.contains(&Some(3)), "partitions spread: {chosen:?}");
        assert_eq!(read_replica(&pool, AgentRoles::ALL, topic, 0), None, "a fetch agent serves");
        assert_eq!(read_replica(&live(&[(1, None, "produce")]), produce, topic, 0), None, "no fetch agent");
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
