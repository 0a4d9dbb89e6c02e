//! Metadata node metrics, in the process-wide Prometheus registry: Raft's view of the cluster
//! (term, leader, indexes, each follower's lag), commit latency, the snapshot's and the archive's
//! age, and what the state holds (topics, partitions, groups, transactions by state).
//!
//! The gauges are read from the node at each scrape, so they cost nothing between scrapes; a
//! process that runs no node (an agent against a remote cluster) exports none of them.

use std::sync::{LazyLock, Mutex};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Gauge, Histogram, IntCounterVec, IntGauge, IntGaugeVec, Opts, exponential_buckets, register_gauge,
    register_histogram, register_int_counter_vec,
};

use crate::MetadataNode;
use crate::locks::MutexRecovery;

/// Time for this node, leading, to commit and apply one entry (Raft `client_write`): the wait
/// every proposal sees on top of forwarding.
pub static COMMIT_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_metadata_commit_duration_seconds",
        "Time for the leader to commit and apply one Raft entry",
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("metric names are unique")
});

/// Bytes this node wrote to its data directory, by file (`raft-log`: entries, votes, purges and
/// rewrites; `raft-snapshot`): the metadata write volume, to set against the bytes produced.
pub static WRITTEN_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_metadata_written_bytes_total",
        "Bytes this metadata node wrote to its data directory, by file",
        &["file"]
    )
    .expect("metric names are unique")
});

/// When the leader last archived the state to the object store (Unix seconds); 0 before the
/// first archive. Alert on `time() - floe_metadata_archive_last_success_timestamp_seconds`.
pub static ARCHIVE_LAST_SUCCESS: LazyLock<Gauge> = LazyLock::new(|| {
    register_gauge!(
        "floe_metadata_archive_last_success_timestamp_seconds",
        "When this node last archived the metadata state to the object store (Unix seconds)"
    )
    .expect("metric names are unique")
});

/// The node gauges, rebuilt from the node at each scrape.
#[derive(Debug)]
pub struct NodeCollector {
    node: MetadataNode,
    term: IntGauge,
    leader: IntGauge,
    leader_id: IntGauge,
    last_log_index: IntGauge,
    applied_index: IntGauge,
    voters: IntGauge,
    follower_lag: IntGaugeVec,
    snapshot_index: IntGauge,
    snapshot_age: Gauge,
    topics: IntGauge,
    partitions: IntGauge,
    index_entries: IntGauge,
    format: IntGauge,
    objects: IntGauge,
    recent_commit_chunks: IntGauge,
    tenants: IntGauge,
    groups: IntGaugeVec,
    transactions: IntGaugeVec,
    tenant_storage: IntGaugeVec,
    tenant_storage_quota: IntGaugeVec,
    /// Scrapes reset the labelled gauges; one at a time.
    scrape: Mutex<()>,
}

fn int_gauge(name: &str, help: &str) -> IntGauge {
    IntGauge::with_opts(Opts::new(name, help)).expect("valid metric definition")
}

fn int_gauge_vec(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric definition")
}

impl NodeCollector {
    pub(crate) fn new(node: MetadataNode) -> Self {
        Self {
            node,
            term: int_gauge("floe_metadata_raft_term", "Current Raft term"),
            leader: int_gauge("floe_metadata_raft_is_leader", "1 if this node is the Raft leader"),
            leader_id: int_gauge("floe_metadata_raft_leader_id", "The leader this node knows of (-1: none)"),
            last_log_index: int_gauge("floe_metadata_raft_last_log_index", "Index of the last entry in the log"),
            applied_index: int_gauge("floe_metadata_raft_applied_index", "Index of the last applied entry"),
            voters: int_gauge("floe_metadata_raft_voters", "Voters in the cluster's membership"),
            follower_lag: int_gauge_vec(
                "floe_metadata_raft_follower_lag_entries",
                "On the leader: entries each follower has not yet acknowledged",
                &["follower"],
            ),
            snapshot_index: int_gauge("floe_metadata_snapshot_index", "Last log index in this node's snapshot"),
            snapshot_age: Gauge::with_opts(Opts::new(
                "floe_metadata_snapshot_age_seconds",
                "Seconds since this node last wrote its snapshot file",
            ))
            .expect("valid metric definition"),
            topics: int_gauge("floe_metadata_topics", "Topics in the state"),
            partitions: int_gauge("floe_metadata_partitions", "Partitions in the state"),
            index_entries: int_gauge(
                "floe_metadata_index_entries",
                "Offset index entries in the state, over all partitions (one per chunk until compaction merges them)",
            ),
            format: int_gauge(
                "floe_metadata_format",
                "Metadata format the cluster applies (below this binary's until every voter runs it: a rolling upgrade not yet finished)",
            ),
            objects: int_gauge("floe_metadata_objects", "Segment objects the state refers to"),
            recent_commit_chunks: int_gauge(
                "floe_metadata_recent_commit_chunks",
                "Chunks of the segment commits whose answers the state keeps for retries",
            ),
            tenants: int_gauge("floe_metadata_tenants", "Tenants in the state"),
            groups: int_gauge_vec(
                "floe_metadata_groups",
                "Consumer groups by protocol and whether they have members (empty, active)",
                &["kind", "state"],
            ),
            transactions: int_gauge_vec(
                "floe_metadata_transactions",
                "Transactional ids by transaction state",
                &["state"],
            ),
            tenant_storage: int_gauge_vec(
                "floe_tenant_storage_bytes",
                "Bytes stored by a tenant with a storage quota (the tenants nearest their quotas)",
                &["tenant"],
            ),
            tenant_storage_quota: int_gauge_vec(
                "floe_tenant_storage_quota_bytes",
                "A tenant's storage quota (the tenants nearest their quotas)",
                &["tenant"],
            ),
            scrape: Mutex::new(()),
        }
    }

    /// Registers a collector for `node` in the process-wide registry (once per process: a
    /// second node in the same process, as in tests, is not reported).
    pub fn register(node: MetadataNode) {
        if let Err(e) = prometheus::register(Box::new(Self::new(node))) {
            tracing::debug!(error = %e, "metadata node collector already registered");
        }
    }

    fn gauges(&self) -> [&IntGauge; 14] {
        [
            &self.index_entries,
            &self.format,
            &self.objects,
            &self.recent_commit_chunks,
            &self.tenants,
            &self.term,
            &self.leader,
            &self.leader_id,
            &self.last_log_index,
            &self.applied_index,
            &self.voters,
            &self.snapshot_index,
            &self.topics,
            &self.partitions,
        ]
    }

    fn vecs(&self) -> [&IntGaugeVec; 5] {
        [&self.follower_lag, &self.groups, &self.transactions, &self.tenant_storage, &self.tenant_storage_quota]
    }
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for NodeCollector {
    fn desc(&self) -> Vec<&Desc> {
        let mut descs: Vec<&Desc> = self.gauges().into_iter().flat_map(|g| g.desc()).collect();
        descs.extend(self.vecs().into_iter().flat_map(|v| v.desc()));
        descs.extend(self.snapshot_age.desc());
        descs
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.scrape.lock_recovered();
        let raft = self.node.raft.metrics().borrow().clone();
        let node_id = self.node.node_id();
        self.term.set(as_i64(raft.current_term));
        self.leader.set(i64::from(raft.current_leader == Some(node_id)));
        self.leader_id.set(raft.current_leader.map_or(-1, as_i64));
        let last_log = raft.last_log_index.unwrap_or(0);
        self.last_log_index.set(as_i64(last_log));
        self.applied_index.set(as_i64(raft.last_applied.map_or(0, |l| l.index)));
        self.voters.set(raft.membership_config.membership().voter_ids().count() as i64);
        self.follower_lag.reset();
        for (follower, matched) in raft.replication.iter().flatten() {
            if *follower == node_id {
                continue;
            }
            let matched = matched.map_or(0, |l| l.index);
            self.follower_lag.with_label_values(&[&follower.to_string()]).set(as_i64(last_log.saturating_sub(matched)));
        }
        self.snapshot_index.set(as_i64(raft.snapshot.map_or(0, |l| l.index)));
        let mut families = Vec::new();
        if let Some(age) = self.node.snapshot_age() {
            self.snapshot_age.set(age.as_secs_f64());
            families.extend(self.snapshot_age.collect());
        }
        {
            let state = self.node.read();
            self.topics.set(state.topics.len() as i64);
            self.partitions.set(state.topics.values().map(|t| t.partitions.len() as i64).sum());
            let index_entries = state.topics.values().flat_map(|t| &t.partitions).map(|p| p.index.len()).sum::<usize>();
            self.index_entries.set(index_entries as i64);
            self.format.set(i64::from(state.format));
            self.objects.set(state.objects.len() as i64);
            self.recent_commit_chunks.set(state.recent_commit_chunks as i64);
            self.tenants.set(state.tenants.len() as i64);
            self.groups.reset();
            for group in state.groups.values() {
                let kind = match group.membership.kind {
                    crate::GroupKind::Classic => "classic",
                    crate::GroupKind::Consumer => "consumer",
                    crate::GroupKind::Share => "share",
                };
                let status = if group.membership.members.is_empty() { "empty" } else { "active" };
                self.groups.with_label_values(&[kind, status]).inc();
            }
            self.transactions.reset();
            for transaction in state.transactions.values() {
                self.transactions.with_label_values(&[transaction.state.name()]).inc();
            }
            self.tenant_storage.reset();
            self.tenant_storage_quota.reset();
            for (tenant, used, quota) in tenants_nearest_storage_quota(&state, crate::limits::TENANT_SERIES_MAX) {
                self.tenant_storage.with_label_values(&[tenant]).set(as_i64(used));
                self.tenant_storage_quota.with_label_values(&[tenant]).set(as_i64(quota));
            }
        }
        families.extend(self.gauges().into_iter().flat_map(|g| g.collect()));
        families.extend(self.vecs().into_iter().flat_map(|v| v.collect()));
        families
    }
}

/// Tenants with a storage quota, with the bytes they store and the quota: the `max` that have
/// used the largest share of it.
fn tenants_nearest_storage_quota(state: &crate::State, max: usize) -> Vec<(&str, u64, u64)> {
    let mut tenants: Vec<(&str, u64, u64)> = state
        .tenants
        .iter()
        .filter_map(|(name, record)| {
            let quota = record.quotas.storage_bytes?;
            Some((name.as_str(), state.tenant_stored_bytes(name), quota))
        })
        .collect();
    let share = |&(_, used, quota): &(&str, u64, u64)| used as f64 / quota.max(1) as f64;
    tenants.sort_by(|a, b| share(b).total_cmp(&share(a)).then_with(|| a.0.cmp(b.0)));
    tenants.truncate(max);
    tenants
}
