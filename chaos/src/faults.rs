//! The fault schedule: faults held for a while and then healed, with quiet gaps between, drawn
//! from a seeded generator so a run can be repeated with `--seed`. One at a time, or with
//! `--overlap` half of them joined midway by a second fault of another class (a process, the
//! network, the object store), healed before the first. Also the watch for processes that exit
//! on their own, which the verdict counts as a problem.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cluster::{Cluster, NetworkMode, agent_name, metadata_name};
use crate::history::{Event, History};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FaultKind {
    /// SIGKILL an agent; start it again when the fault ends.
    KillAgent,
    /// SIGSTOP an agent; SIGCONT when the fault ends.
    PauseAgent,
    KillMetadataLeader,
    KillMetadataFollower,
    PauseMetadataLeader,
    PauseMetadataFollower,
    /// Cut the metadata leader off from the other metadata nodes (agents still reach it).
    PartitionMetadataLeader,
    /// Cut an agent off from every metadata node (clients still reach it).
    PartitionAgentFromMetadata,
    /// Object-store PUT and GET errors, 503 SlowDown, PUTs stored with their answer lost.
    ObjectStoreErrors,
    /// Slow PUTs (3 s) and requests that hang until they time out (8 s).
    ObjectStoreSlow,
    /// An S3 brownout, held 40 s whatever the schedule's hold: half the PUTs take 10 s for 10 s,
    /// then every request is answered 503 SlowDown for 30 s.
    ObjectStoreBrownout,
}

impl FaultKind {
    pub(crate) fn all() -> Vec<FaultKind> {
        use clap::ValueEnum;
        Self::value_variants().to_vec()
    }

    /// The kinds drawn when `--faults` names none: every kind whose own hold takes at most a
    /// third of the run. A round of the short kinds takes about 65 s, so in the 90 s CI run a
    /// 40 s brownout would push about three of them out of it; runs of 2 minutes or more draw it.
    pub(crate) fn defaults(run: Duration) -> Vec<FaultKind> {
        Self::all().into_iter().filter(|k| k.own_hold().is_none_or(|hold| hold * 3 <= run)).collect()
    }

    /// How long a fault of this kind is held when not for the schedule's hold: what it imitates
    /// lasts longer than the schedule's few seconds.
    pub(crate) fn own_hold(self) -> Option<Duration> {
        match self {
            Self::ObjectStoreBrownout => Some(BROWNOUT_SLOW_PUTS_HOLD + BROWNOUT_SLOWDOWN_HOLD),
            _ => None,
        }
    }

    fn needs_netns(self) -> bool {
        matches!(self, Self::PartitionMetadataLeader | Self::PartitionAgentFromMetadata)
    }

    /// Faults of one class share what they change (processes, links, the fault file), so only
    /// faults of different classes overlap.
    fn class(self) -> u8 {
        match self {
            Self::PartitionMetadataLeader | Self::PartitionAgentFromMetadata => 1,
            Self::ObjectStoreErrors | Self::ObjectStoreSlow | Self::ObjectStoreBrownout => 2,
            _ => 0,
        }
    }

    pub(crate) fn name(self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    }
}

/// Object-store fault rates written to the agents' fault file.
const OBJECT_STORE_ERRORS: &str = "put-error=0.15,put-lost-ack=0.1,slowdown=0.1,get-error=0.2";
/// Slow PUTs are hedged, and a hedge overlapping its first attempt is answered 409, as some
/// S3-compatible stores do.
const OBJECT_STORE_SLOW: &str = "slow-put=0.3,slow-put-ms=3000,timeout=0.05,timeout-ms=8000,put-conflict=1";
/// A brownout's first phase: PUT latency spikes, half the PUTs waiting 10 s before they are sent.
const BROWNOUT_SLOW_PUTS: &str = "slow-put=0.5,slow-put-ms=10000";
const BROWNOUT_SLOW_PUTS_HOLD: Duration = Duration::from_secs(10);
/// Its second phase: every request (PUT, GET, HEAD, LIST, DELETE, COPY) answered 503 SlowDown,
/// for longer than an agent's commit deadline (15 s here) and the workloads' transaction timeout
/// (20 s).
const BROWNOUT_SLOWDOWN: &str = "slowdown=1";
const BROWNOUT_SLOWDOWN_HOLD: Duration = Duration::from_secs(30);

#[derive(Clone, Debug)]
pub(crate) struct Schedule {
    pub(crate) kinds: Vec<FaultKind>,
    /// How long each fault is held.
    pub(crate) hold: (Duration, Duration),
    /// Quiet time between faults.
    pub(crate) gap: (Duration, Duration),
    /// Half the faults are joined by a second one of another class while they are held.
    pub(crate) overlap: bool,
}

impl Schedule {
    /// The kinds this network mode allows; partitions are left out on loopback.
    pub(crate) fn usable(mut self, mode: NetworkMode) -> Self {
        if mode != NetworkMode::Netns {
            self.kinds.retain(|k| !k.needs_netns());
        }
        self
    }
}

fn between(rng: &mut fastrand::Rng, (low, high): (Duration, Duration)) -> Duration {
    let span = high.saturating_sub(low).as_millis() as u64;
    low + Duration::from_millis(if span == 0 { 0 } else { rng.u64(0..=span) })
}

#[derive(Clone, Copy)]
enum Target {
    Metadata(usize),
    Agent(usize),
}

/// What is done now and must be undone when the fault ends.
enum Applied {
    Killed(Target),
    Paused(Target),
    Partitioned,
    /// The fault file is written; with the task that moves a fault of phases on to the next.
    ObjectStore(Option<NextPhase>),
    Nothing,
}

/// A task that writes a fault's next phase into the fault file when its time comes. Cancelled
/// when the fault heals, and aborted if dropped on an error, so no phase outlives its fault.
struct NextPhase(tokio::task::JoinHandle<()>);

impl NextPhase {
    fn after(wait: Duration, file: std::path::PathBuf, spec: &'static str) -> Self {
        Self(tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            if let Err(e) = std::fs::write(&file, spec) {
                eprintln!("floe-chaos: writing the fault file: {e}");
            }
        }))
    }

    /// Stops the task and waits until it has stopped, so it writes nothing after this returns.
    async fn cancel(mut self) {
        self.0.abort();
        let _ = (&mut self.0).await;
    }
}

impl Drop for NextPhase {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn process(c: &mut Cluster, target: Target) -> &mut crate::cluster::Proc {
    match target {
        Target::Metadata(i) => &mut c.metadata[i],
        Target::Agent(i) => &mut c.agents[i],
    }
}

async fn apply(
    cluster: &tokio::sync::Mutex<Cluster>,
    kind: FaultKind,
    rng: &mut fastrand::Rng,
) -> anyhow::Result<(Applied, String)> {
    let mut c = cluster.lock().await;
    let agents = c.agents.len();
    let pick_follower = |rng: &mut fastrand::Rng, leader: usize| (leader + 1 + rng.usize(0..2)) % 3;
    Ok(match kind {
        FaultKind::KillAgent | FaultKind::PauseAgent => {
            let a = rng.usize(0..agents);
            if kind == FaultKind::KillAgent {
                c.agents[a].sigkill();
                (Applied::Killed(Target::Agent(a)), agent_name(a))
            } else {
                c.agents[a].pause()?;
                (Applied::Paused(Target::Agent(a)), agent_name(a))
            }
        }
        FaultKind::KillMetadataLeader
        | FaultKind::KillMetadataFollower
        | FaultKind::PauseMetadataLeader
        | FaultKind::PauseMetadataFollower => {
            let Some(leader) = c.leader().await else { return Ok((Applied::Nothing, "no leader known".into())) };
            let node = match kind {
                FaultKind::KillMetadataLeader | FaultKind::PauseMetadataLeader => leader,
                _ => pick_follower(rng, leader),
            };
            let kill = matches!(kind, FaultKind::KillMetadataLeader | FaultKind::KillMetadataFollower);
            if kill {
                c.metadata[node].sigkill();
                (Applied::Killed(Target::Metadata(node)), metadata_name(node))
            } else {
                c.metadata[node].pause()?;
                (Applied::Paused(Target::Metadata(node)), metadata_name(node))
            }
        }
        FaultKind::PartitionMetadataLeader => {
            let Some(leader) = c.leader().await else { return Ok((Applied::Nothing, "no leader known".into())) };
            for other in (0..3).filter(|&o| o != leader) {
                c.net.cut(&metadata_name(leader), &metadata_name(other))?;
            }
            (Applied::Partitioned, format!("{} | others", metadata_name(leader)))
        }
        FaultKind::PartitionAgentFromMetadata => {
            let a = rng.usize(0..agents);
            for m in 0..3 {
                c.net.cut(&agent_name(a), &metadata_name(m))?;
            }
            (Applied::Partitioned, format!("{} | metadata", agent_name(a)))
        }
        FaultKind::ObjectStoreErrors | FaultKind::ObjectStoreSlow => {
            let spec = if kind == FaultKind::ObjectStoreErrors { OBJECT_STORE_ERRORS } else { OBJECT_STORE_SLOW };
            std::fs::write(&c.fault_file, spec).context("writing the fault file")?;
            (Applied::ObjectStore(None), spec.to_owned())
        }
        FaultKind::ObjectStoreBrownout => {
            std::fs::write(&c.fault_file, BROWNOUT_SLOW_PUTS).context("writing the fault file")?;
            let next = NextPhase::after(BROWNOUT_SLOW_PUTS_HOLD, c.fault_file.clone(), BROWNOUT_SLOWDOWN);
            let phases = format!(
                "{BROWNOUT_SLOW_PUTS} for {} s, then {BROWNOUT_SLOWDOWN} for {} s",
                BROWNOUT_SLOW_PUTS_HOLD.as_secs(),
                BROWNOUT_SLOWDOWN_HOLD.as_secs()
            );
            (Applied::ObjectStore(Some(next)), phases)
        }
    })
}

async fn heal(cluster: &tokio::sync::Mutex<Cluster>, applied: Applied) -> anyhow::Result<()> {
    let mut c = cluster.lock().await;
    match applied {
        Applied::Killed(target) => process(&mut c, target).start()?,
        Applied::Paused(target) => process(&mut c, target).resume()?,
        Applied::Partitioned => c.net.heal()?,
        Applied::ObjectStore(next) => {
            if let Some(next) = next {
                next.cancel().await;
            }
            std::fs::write(&c.fault_file, "")?;
        }
        Applied::Nothing => {}
    }
    Ok(())
}

/// Runs the schedule until `end`, then leaves every fault healed. Returns how many of each kind
/// were injected.
pub(crate) async fn run(
    cluster: Arc<tokio::sync::Mutex<Cluster>>,
    schedule: Schedule,
    seed: u64,
    end: Instant,
    history: Arc<History>,
) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut counts = BTreeMap::new();
    if schedule.kinds.is_empty() {
        tokio::time::sleep_until(end.into()).await;
        return Ok(counts);
    }
    // Every kind once per round, in a new order each round, so a short run still meets them all.
    // A kind with a hold of its own that no longer fits in the run is left out of the rounds,
    // so the short kinds have the rest of it.
    let mut kinds = schedule.kinds.clone();
    let mut round: Vec<FaultKind> = Vec::new();
    loop {
        let gap = between(&mut rng, schedule.gap);
        let drawn = between(&mut rng, schedule.hold);
        if round.is_empty() {
            round = kinds.clone();
            rng.shuffle(&mut round);
        }
        let Some(&kind) = round.last() else { break };
        let hold = kind.own_hold().unwrap_or(drawn);
        if Instant::now() + gap + hold >= end {
            if hold > drawn && Instant::now() + gap + drawn < end {
                round.pop();
                kinds.retain(|k| *k != kind);
                history.note(format!(
                    "{} left out: its {} s hold no longer fits in the run",
                    kind.name(),
                    hold.as_secs()
                ));
                continue;
            }
            break;
        }
        tokio::time::sleep(gap).await;
        round.pop();
        let (applied, target) = apply(&cluster, kind, &mut rng).await?;
        if matches!(applied, Applied::Nothing) {
            history.note(format!("{} skipped: {target}", kind.name()));
            continue;
        }
        started(&history, &mut counts, kind, &target, hold);
        // A kind with a hold of its own is never the second fault: the first's would cut it short.
        let others: Vec<FaultKind> =
            kinds.iter().copied().filter(|k| k.class() != kind.class() && k.own_hold().is_none()).collect();
        if schedule.overlap && !others.is_empty() && rng.bool() {
            // The second fault starts 20-60 % into the first and ends with it; joining a fault
            // held longer than the schedule's hold, it ends after the schedule's hold instead.
            let before = hold.mul_f64(0.2 + 0.4 * rng.f64());
            let second_hold = (hold - before).min(drawn);
            tokio::time::sleep(before).await;
            let second = others[rng.usize(0..others.len())];
            let (applied2, target2) = apply(&cluster, second, &mut rng).await?;
            if matches!(applied2, Applied::Nothing) {
                history.note(format!("{} skipped: {target2}", second.name()));
                tokio::time::sleep(hold - before).await;
            } else {
                started(&history, &mut counts, second, &target2, second_hold);
                tokio::time::sleep(second_hold).await;
                heal(&cluster, applied2).await?;
                history.push(Event::FaultEnd { fault: second.name(), target: target2 });
                tokio::time::sleep(hold - before - second_hold).await;
            }
        } else {
            tokio::time::sleep(hold).await;
        }
        heal(&cluster, applied).await?;
        history.push(Event::FaultEnd { fault: kind.name(), target });
    }
    tokio::time::sleep_until(end.into()).await;
    Ok(counts)
}

fn started(history: &History, counts: &mut BTreeMap<String, u64>, kind: FaultKind, target: &str, hold: Duration) {
    eprintln!(
        "floe-chaos: {:>6.1}s  {} {target} for {:.1}s",
        history.now_ms() as f64 / 1000.0,
        kind.name(),
        hold.as_secs_f64()
    );
    history.push(Event::FaultStart { fault: kind.name(), target: target.to_owned() });
    *counts.entry(kind.name()).or_insert(0) += 1;
}

/// How often the harness looks for processes that exited on their own.
const EXIT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Every second until aborted: notes the processes that exited on their own ([`record_exits`])
/// and starts each again, as a supervisor would, so the rest of the run still exercises it.
pub(crate) async fn watch_exits(
    cluster: Arc<tokio::sync::Mutex<Cluster>>,
    history: Arc<History>,
    problems: Arc<std::sync::Mutex<Vec<String>>>,
) {
    loop {
        tokio::time::sleep(EXIT_CHECK_EVERY).await;
        let mut c = cluster.lock().await;
        for name in record_exits(&mut c, &history, &problems) {
            if let Err(e) = c.start_process(&name) {
                eprintln!("floe-chaos: {name} could not be started again: {e:#}");
            }
        }
    }
}

/// Notes each process that ended since the last call without the harness killing it (a panic,
/// an exit on an error, a signal from elsewhere) in the history and, as a problem for the
/// verdict, in `problems`. Returns their names.
pub(crate) fn record_exits(
    c: &mut Cluster,
    history: &History,
    problems: &std::sync::Mutex<Vec<String>>,
) -> Vec<String> {
    let mut names = Vec::new();
    for (name, status) in c.take_exits() {
        let t = history.now_ms() as f64 / 1000.0;
        eprintln!("floe-chaos: {t:>6.1}s  {name} exited on its own ({status})");
        history.push(Event::ProcessExited { process: name.clone(), status: status.to_string() });
        let problem = format!("{name} exited on its own at {t:.1} s ({status}); see {name}.log");
        problems.lock().unwrap_or_else(|p| p.into_inner()).push(problem);
        names.push(name);
    }
    names
}

#[cfg(test)]
mod tests;
