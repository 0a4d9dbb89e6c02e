//! The agents' vital signs while the hostile tenant attacks (`--hostile-tenant`): how long each
//! takes to answer `/healthz`, asked every 200 ms from the harness, and its resident memory
//! (`VmRSS` in `/proc/PID/status`), sampled as often. The verdict holds the first to
//! [`Profile::health_answer_max`]; the second goes to the report, the peak beside the first
//! sample.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::task::JoinSet;

use crate::cluster::AgentProcess;
use crate::history::History;
use crate::workloads::Stop;

/// The longest a release build of an agent may take to answer a health check (issue 52's
/// bound): orchestrators give a liveness probe a second by default (Kubernetes'
/// `timeoutSeconds`) and restart an agent that misses a few, so a tenant that slows health
/// checks past it takes agents down.
const HEALTH_ANSWER_MAX: Duration = Duration::from_secs(1);
/// The same for a debug build (CI's): it runs the same work tens of times slower (the other
/// tenant's produce p99 before the attack: 27 ms on release, 0.3 to 1.2 s on debug, 2 cores),
/// and its slowest health check under the attack measured 0.3 to 2.1 s where release's took
/// 26 to 250 ms (docs/RELIABILITY.md). This bound still fails an agent that stalls for seconds.
const HEALTH_ANSWER_MAX_DEBUG: Duration = Duration::from_secs(3);

/// How the agents under test were built (`floe_build_info`'s `profile`): the verdict's bounds
/// are release's, and looser for a debug build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Profile {
    Release,
    Debug,
}

impl Profile {
    /// The profile the agent at `http_url` reports on `/metrics`; release (the strict bounds)
    /// when it cannot be read.
    pub(crate) async fn of(http_url: &str) -> Self {
        let text = async {
            let response = reqwest::get(format!("{http_url}/metrics")).await.ok()?;
            response.text().await.ok()
        };
        let text = tokio::time::timeout(CHECK_TIMEOUT, text).await.ok().flatten().unwrap_or_default();
        let debug =
            text.lines().any(|line| line.starts_with("floe_build_info{") && line.contains(r#"profile="debug""#));
        if debug { Self::Debug } else { Self::Release }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Debug => "debug",
        }
    }

    pub(crate) fn health_answer_max(self) -> Duration {
        match self {
            Self::Release => HEALTH_ANSWER_MAX,
            Self::Debug => HEALTH_ANSWER_MAX_DEBUG,
        }
    }
}
/// How often each agent is asked.
const CHECK_EVERY: Duration = Duration::from_millis(200);
/// How long one check waits for its answer: well past the bound, so a late answer is measured
/// rather than cut off.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// One agent's vital signs over a watch.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct Vitals {
    pub(crate) agent: String,
    /// Health checks sent, and those not answered 200 within [`CHECK_TIMEOUT`].
    pub(crate) health_checks: u64,
    pub(crate) health_unanswered: u64,
    /// Checks answered later than the bound the watch was given.
    pub(crate) health_slow: u64,
    /// The slowest answer, and when its check was sent (ms into the run).
    pub(crate) health_worst_ms: u64,
    pub(crate) health_worst_at_ms: u64,
    /// Resident memory at the first sample and the most sampled; none when `/proc` could not
    /// be read (the process down).
    pub(crate) rss_first_bytes: Option<u64>,
    pub(crate) rss_peak_bytes: Option<u64>,
}

/// A watch of every agent, running until [`Watch::stop`]. It runs on a thread of its own: on
/// the harness's runtime, beside the workloads' tasks, a check waited for a worker too, and the
/// harness's own delays counted as the agent's.
pub(crate) struct Watch {
    stop: Stop,
    thread: std::thread::JoinHandle<Vec<Vitals>>,
}

impl Watch {
    /// Starts watching `agents`, counting answers later than `bound` as slow; `history` gives
    /// the run's clock.
    pub(crate) fn start(agents: Vec<AgentProcess>, history: Arc<History>, bound: Duration) -> anyhow::Result<Self> {
        // No API key: an agent answers health checks to anyone, as to a load balancer.
        let http = reqwest::Client::builder().build().context("health check client")?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("health checks")?;
        let stop = Stop::default();
        let watching = stop.clone();
        let thread = std::thread::Builder::new()
            .name("health-checks".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut tasks = JoinSet::new();
                    for agent in agents {
                        tasks.spawn(watch(agent, http.clone(), history.clone(), watching.clone(), bound));
                    }
                    let mut all = Vec::new();
                    while let Some(done) = tasks.join_next().await {
                        // A watch that panicked reports nothing; the verdict then finds its
                        // agent unchecked.
                        if let Ok(vitals) = done {
                            all.push(vitals);
                        }
                    }
                    all
                })
            })
            .context("health check thread")?;
        Ok(Self { stop, thread })
    }

    /// Stops watching (within a check's timeout) and returns each agent's vital signs, by name.
    pub(crate) async fn stop(self) -> Vec<Vitals> {
        self.stop.set();
        let thread = self.thread;
        let mut all =
            tokio::task::spawn_blocking(move || thread.join()).await.ok().and_then(Result::ok).unwrap_or_default();
        all.sort_by(|a, b| a.agent.cmp(&b.agent));
        all
    }
}

async fn watch(
    agent: AgentProcess,
    http: reqwest::Client,
    history: Arc<History>,
    stop: Stop,
    bound: Duration,
) -> Vitals {
    let mut vitals = Vitals { agent: agent.name, ..Vitals::default() };
    let url = format!("{}/healthz", agent.http_url);
    let mut ticks = tokio::time::interval(CHECK_EVERY);
    // After a slow answer the next check waits its interval, rather than several going at once.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.is_set() {
        ticks.tick().await;
        let sent_at_ms = history.now_ms();
        let sent = Instant::now();
        let answer = http.get(&url).timeout(CHECK_TIMEOUT).send().await;
        let took = sent.elapsed();
        vitals.health_checks += 1;
        if answer.is_ok_and(|r| r.status().is_success()) {
            let took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
            if took > bound {
                vitals.health_slow += 1;
            }
            if took_ms > vitals.health_worst_ms {
                (vitals.health_worst_ms, vitals.health_worst_at_ms) = (took_ms, sent_at_ms);
            }
        } else {
            vitals.health_unanswered += 1;
        }
        if let Some(rss) = agent.pid.and_then(rss_bytes) {
            vitals.rss_first_bytes = vitals.rss_first_bytes.or(Some(rss));
            vitals.rss_peak_bytes = Some(vitals.rss_peak_bytes.map_or(rss, |peak| peak.max(rss)));
        }
    }
    vitals
}

/// Process `pid`'s resident memory. Reading `/proc` reads kernel memory, so it does not block
/// the runtime's thread.
fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    // A line like "VmRSS:     123456 kB".
    let line = status.lines().find(|line| line.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// What the verdict holds against `vitals`: an agent whose health checks went unanswered,
/// answered later than `bound` (the watch's), or were never sent.
pub(crate) fn problems(vitals: &[Vitals], agents: usize, bound: Duration) -> Vec<String> {
    let bound_ms = bound.as_millis();
    let mut problems: Vec<String> = vitals
        .iter()
        .filter(|v| v.health_checks == 0 || v.health_unanswered > 0 || v.health_slow > 0)
        .map(|v| {
            format!(
                "agent {}'s health checks under attack: {} of {} unanswered within {CHECK_TIMEOUT:?}, {} answered \
                 later than {bound_ms} ms, the slowest in {} ms (sent {:.1} s into the run)",
                v.agent,
                v.health_unanswered,
                v.health_checks,
                v.health_slow,
                v.health_worst_ms,
                v.health_worst_at_ms as f64 / 1000.0
            )
        })
        .collect();
    if vitals.len() < agents {
        problems.push(format!("the health checks of {} of {agents} agents were not watched", agents - vitals.len()));
    }
    problems
}

/// One line of the verdict for `vitals`: each agent's slowest health check, and its memory.
pub(crate) fn summary(vitals: &[Vitals]) -> String {
    let mib = |bytes: Option<u64>| bytes.map_or_else(|| "?".to_owned(), |b| (b / (1024 * 1024)).to_string());
    let agents: Vec<String> = vitals
        .iter()
        .map(|v| {
            format!(
                "{} slowest {} ms of {} ({} slow, {} unanswered), RSS {} MiB first, {} MiB peak",
                v.agent,
                v.health_worst_ms,
                v.health_checks,
                v.health_slow,
                v.health_unanswered,
                mib(v.rss_first_bytes),
                mib(v.rss_peak_bytes)
            )
        })
        .collect();
    agents.join("; ")
}
