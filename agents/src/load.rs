//! The autoscaling signal. Every agent measures its utilization, a ratio to its targets (1.0:
//! at target): the highest of CPU over the CPU target, flush-buffer fill over the fill target,
//! and produce p99 latency over the latency target, each over the last sampling window. It
//! exports it (`floe_agent_utilization`) and reports it to metadata
//! ([`floe_metadata::Command::ReportAgentLoad`]), so every agent also exports the same
//! cluster-wide `floe_agent_pool_desired_agents` (`State::desired_agents`): what an autoscaler
//! scales the pool to.

use std::sync::Weak;
use std::time::{Duration, Instant};

use floe_metadata::Command;
use prometheus::core::Collector;

use crate::Agent;

/// How often utilization is measured and reported.
pub const LOAD_SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

/// What counts as fully used.
#[derive(Clone, Copy, Debug)]
pub struct LoadTargets {
    /// Fraction of the machine's cores.
    pub cpu: f64,
    /// Fraction of `buffer_bytes_max` held by batches not yet answered.
    pub buffer_fill: f64,
    /// Produce request p99 latency.
    pub produce_p99: Duration,
}

/// One window's measurements, each as a ratio to its target.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Utilization {
    pub cpu: f64,
    pub buffer: f64,
    pub produce_latency: f64,
}

impl Utilization {
    /// The highest component: the resource that runs out first.
    pub fn overall(&self) -> f64 {
        self.cpu.max(self.buffer).max(self.produce_latency)
    }
}

/// CPU seconds this process used (user and system), from `/proc/self/stat` (Linux; `USER_HZ`
/// is 100 in its ABI).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces: state is the
    // first, utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(") ")?.1;
    let mut fields = rest.split_ascii_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A snapshot of the produce latency histogram: cumulative counts by upper bound (seconds), and
/// the total count (which also holds requests past the last bound).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencySnapshot {
    pub buckets: Vec<(f64, u64)>,
    pub count: u64,
}

fn produce_latency() -> LatencySnapshot {
    let histogram = crate::metrics::REQUEST_SECONDS.with_label_values(&["Produce"]);
    let buckets = (histogram.collect().iter())
        .flat_map(|f| f.get_metric())
        .flat_map(|m| m.get_histogram().get_bucket())
        .map(|b| (b.upper_bound(), b.cumulative_count()))
        .collect();
    LatencySnapshot { buckets, count: histogram.get_sample_count() }
}

/// The p99 latency of the requests between two snapshots: the upper bound of the bucket it falls
/// in (past the last bound, twice that bound); `None` without requests.
pub fn p99_between(before: &LatencySnapshot, after: &LatencySnapshot) -> Option<f64> {
    let total = after.count.checked_sub(before.count).filter(|t| *t > 0)?;
    let wanted = (total as f64 * 0.99).ceil() as u64;
    let earlier = |bound: f64| before.buckets.iter().find(|(b, _)| *b == bound).map_or(0, |(_, c)| *c);
    after
        .buckets
        .iter()
        .find(|(bound, count)| count.saturating_sub(earlier(*bound)) >= wanted)
        .map(|(bound, _)| *bound)
        .or_else(|| after.buckets.last().map(|(bound, _)| bound * 2.0))
}

/// Measures and reports utilization every [`LOAD_SAMPLE_INTERVAL`] until `stop` (or the agent is
/// dropped).
pub(crate) async fn run(agent: Weak<Agent>, targets: LoadTargets, stop: tokio_util::sync::CancellationToken) {
    let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
    let mut last = (Instant::now(), process_cpu_seconds(), produce_latency());
    while floe_metadata::tasks::sleep_unless_stopped(&stop, LOAD_SAMPLE_INTERVAL).await {
        let Some(agent) = agent.upgrade() else { return };
        if agent.is_draining() {
            return;
        }
        let now = (Instant::now(), process_cpu_seconds(), produce_latency());
        let wall = now.0.duration_since(last.0).as_secs_f64().max(0.001);
        let cpu = match (last.1, now.1) {
            (Some(before), Some(after)) => (after - before).max(0.0) / wall / cores,
            _ => 0.0,
        };
        let p99 = p99_between(&last.2, &now.2).unwrap_or(0.0);
        last = now;
        let fill = agent.buffer.fill();
        crate::metrics::FLUSH_BUFFER_FILL.set(fill);
        let utilization = Utilization {
            cpu: cpu / targets.cpu.max(0.01),
            buffer: fill / targets.buffer_fill.max(0.01),
            produce_latency: p99 / targets.produce_p99.as_secs_f64().max(0.001),
        };
        crate::metrics::AGENT_UTILIZATION.set(utilization.overall());
        for (component, value) in
            [("cpu", utilization.cpu), ("buffer", utilization.buffer), ("produce_latency", utilization.produce_latency)]
        {
            crate::metrics::AGENT_UTILIZATION_COMPONENT.with_label_values(&[component]).set(value);
        }
        let milli = (utilization.overall() * 1000.0).round().clamp(0.0, f64::from(u32::MAX)) as u32;
        let now_ms = floe_metadata::now_ms();
        let report = Command::ReportAgentLoad { agent_id: agent.config.node_id, utilization_milli: milli, now_ms };
        if let Err(e) = agent.metadata.propose(report).await {
            tracing::debug!(error = %e, "agent load report not committed");
        }
        let session_ms = i64::try_from(crate::membership::AGENT_SESSION.as_millis()).unwrap_or(i64::MAX);
        let state = agent.metadata.read();
        crate::metrics::POOL_DESIRED_AGENTS.set(i64::from(state.desired_agents(now_ms, session_ms)));
        crate::metrics::POOL_LIVE_AGENTS.set(state.live_agents(now_ms, session_ms).count() as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(buckets: &[(f64, u64)], count: u64) -> LatencySnapshot {
        LatencySnapshot { buckets: buckets.to_vec(), count }
    }

    #[test]
    fn the_p99_is_read_from_the_window_between_snapshots() {
        let before = snapshot(&[(0.1, 50), (0.5, 100), (1.0, 100)], 100);
        // 100 more requests: 98 under 0.1 s, 2 under 0.5 s.
        let after = snapshot(&[(0.1, 148), (0.5, 200), (1.0, 200)], 200);
        assert_eq!(p99_between(&before, &after), Some(0.5));
        let slow = snapshot(&[(0.1, 148), (0.5, 150), (1.0, 150)], 200);
        assert_eq!(p99_between(&before, &slow), Some(2.0), "past the last bound");
        assert_eq!(p99_between(&after, &after), None);
    }

    #[test]
    fn utilization_is_its_highest_component_and_cpu_is_read() {
        let u = Utilization { cpu: 0.4, buffer: 1.3, produce_latency: 0.2 };
        assert_eq!(u.overall(), 1.3);
        assert!(process_cpu_seconds().is_some_and(|s| s >= 0.0));
    }
}
