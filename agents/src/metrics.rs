//! Agent metrics, registered in the process-wide Prometheus registry. Names follow Kafka's
//! (`BrokerTopicMetrics` bytes and messages in and out, request counts and times by API).

use std::sync::LazyLock;

use floe_metadata::locks::MutexRecovery;
use prometheus::{
    Counter, CounterVec, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    exponential_buckets, register_counter, register_counter_vec, register_histogram, register_histogram_vec,
    register_int_counter, register_int_counter_vec, register_int_gauge,
};

/// Kafka requests handled, by API.
pub static REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_kafka_requests_total", "Kafka requests handled, by API", &["api"]).expect("unique")
});
/// Time from a request being read to its response being written, by API.
pub static REQUEST_SECONDS: LazyLock<HistogramVec> = LazyLock::new(|| {
    register_histogram_vec!(
        "floe_kafka_request_duration_seconds",
        "Time from reading a Kafka request to writing its response, by API, less any quota throttle hold",
        &["api"],
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});
/// One API's request metrics, looked up once: a labelled lookup hashes its label under a lock,
/// four per response, at tens of thousands of responses a second.
#[derive(Clone, Debug)]
pub struct ApiMetrics {
    pub requests: IntCounter,
    pub request_bytes: IntCounter,
    pub response_bytes: IntCounter,
    pub seconds: Histogram,
}

/// API keys are small numbers; one slot per key up to this (Kafka's highest is below 100).
const API_KEY_SLOTS: usize = 128;

static API_METRICS: LazyLock<Vec<std::sync::OnceLock<ApiMetrics>>> =
    LazyLock::new(|| (0..API_KEY_SLOTS).map(|_| std::sync::OnceLock::new()).collect());

/// The request metrics of `api` (labelled with its name, as Kafka's `RequestMetrics` are).
pub fn api_metrics(api: kafka_protocol::messages::ApiKey) -> std::borrow::Cow<'static, ApiMetrics> {
    let make = || {
        let name = format!("{api:?}");
        ApiMetrics {
            requests: REQUESTS.with_label_values(&[&name]),
            request_bytes: REQUEST_BYTES.with_label_values(&[&name]),
            response_bytes: RESPONSE_BYTES.with_label_values(&[&name]),
            seconds: REQUEST_SECONDS.with_label_values(&[&name]),
        }
    };
    match usize::try_from(api as i16).ok().and_then(|key| API_METRICS.get(key)) {
        Some(slot) => std::borrow::Cow::Borrowed(slot.get_or_init(make)),
        None => std::borrow::Cow::Owned(make()),
    }
}

/// Kafka's `kafka_server_*_throttle_time` per tenant: seconds clients were held back.
pub static QUOTA_THROTTLE_SECONDS: LazyLock<CounterVec> = LazyLock::new(|| {
    register_counter_vec!(
        "floe_quota_throttle_seconds_total",
        "Time clients were held back for exceeding their tenant's byte-rate quota, by tenant and quota",
        &["tenant", "quota"]
    )
    .expect("unique")
});

/// Reads a waiting request made again after it was woken (a Kafka Fetch long-poll, an HTTP
/// read with `wait_ms`, an event stream), by listener (`kafka`, `http`): what waiting costs.
pub static LONG_POLL_READS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_long_poll_reads_total",
        "Reads made again by waiting requests after a wakeup, by listener",
        &["listener"]
    )
    .expect("unique")
});

/// Reads waiting now (Kafka's Fetch purgatory size, with HTTP and share reads).
pub static LONG_POLLS_WAITING: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("floe_long_polls_waiting", "Reads waiting now (Fetch long-polls, HTTP and share reads)")
        .expect("unique")
});

/// Partitions waiting reads registered to be woken by: what registering costs (a fetch session
/// keeps its registration from one fetch to the next).
pub static LONG_POLL_PARTITIONS_REGISTERED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_long_poll_partitions_registered_total",
        "Partitions waiting reads registered to be woken by"
    )
    .expect("unique")
});

/// Partitions read by Kafka Fetch, by how: `at_end` answered from the state alone (a read at the
/// partition's end), `planned` through the index and the block cache; or left out: `unchanged`,
/// `settled`, `quiet` (see the help).
pub static FETCH_PARTITION_READS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_fetch_partition_reads_total",
        "Partitions of Kafka Fetches by how they were answered (at_end: from the state; planned: read through the index; unchanged: left out, a session told all of it already; settled: left out unseen, an earlier pass of the same long poll left it out and it has not moved; quiet: left out of a session's request, its earlier answers left it out and nothing changed since)",
        &["path"]
    )
    .expect("unique")
});

/// Kafka request bytes read (frames without their length prefix), by API.
pub static REQUEST_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_kafka_request_bytes_total", "Kafka request bytes read, by API", &["api"])
        .expect("unique")
});

/// Kafka response bytes written, by API.
pub static RESPONSE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_kafka_response_bytes_total", "Kafka response bytes written, by API", &["api"])
        .expect("unique")
});

/// Fetch requests by session kind (`sessionless`, `full`, `incremental`, `refused`; KIP-227).
pub static FETCH_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_fetch_requests_total", "Fetch requests, by fetch session kind", &["kind"])
        .expect("unique")
});

/// Incremental fetch sessions held by this agent.
pub static FETCH_SESSIONS: LazyLock<IntGauge> =
    LazyLock::new(|| register_int_gauge!("floe_fetch_sessions", "Incremental fetch sessions held").expect("unique"));

/// Partitions cached over all fetch sessions.
pub static FETCH_SESSION_PARTITIONS: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("floe_fetch_session_partitions", "Partitions cached over all fetch sessions").expect("unique")
});

/// 1 while this agent holds the job lease and runs the storage jobs, else 0.
pub static JOB_RUNNER: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!("floe_agent_job_runner", "1 while this agent runs the storage jobs (holds the job lease)")
        .expect("unique")
});

/// Fetched partitions answered with a fetch agent to read from instead (KIP-392), on an agent
/// without the fetch role.
pub static FETCHES_SENT_TO_READ_REPLICAS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_fetch_read_replica_redirects_total",
        "Fetched partitions answered with a preferred read replica (a fetch agent)"
    )
    .expect("unique")
});

/// Blocks this agent asked their owner for (`block_peers`), by result: `served`, or why it read
/// the block from the object store instead (`timeout`, `error`, `owner_down`,
/// `owner_unavailable`, `refused`, `unsupported`: an owner of an older protocol, `wrong_block`: an
/// answer naming another block, `wrong_length`). A served block whose bytes then fail their
/// checksum is counted by the block cache (`floe_block_cache_checksum_mismatches_total`).
pub static PEER_BLOCK_ASKS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let asks = register_int_counter_vec!(
        "floe_block_peer_asks_total",
        "Blocks asked of their owner agent, by result",
        &["result"]
    )
    .expect("unique");
    for result in [
        "served",
        "timeout",
        "error",
        "owner_down",
        "owner_unavailable",
        "refused",
        "unsupported",
        "wrong_block",
        "wrong_length",
    ] {
        asks.with_label_values(&[result]);
    }
    asks
});

/// Block bytes received from owners.
pub static PEER_BLOCK_BYTES_RECEIVED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_block_peer_received_bytes_total", "Block bytes received from owner agents")
        .expect("unique")
});

/// Other agents' requests for blocks this agent owns, by outcome (`served`, `invalid`,
/// `unavailable`, `connection_refused`).
pub static PEER_BLOCK_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    let requests = register_int_counter_vec!(
        "floe_block_peer_requests_total",
        "Block requests from other agents, by outcome",
        &["outcome"]
    )
    .expect("unique");
    for outcome in ["served", "invalid", "unavailable", "connection_refused"] {
        requests.with_label_values(&[outcome]);
    }
    requests
});

/// Block bytes sent to other agents.
pub static PEER_BLOCK_BYTES_SERVED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_block_peer_served_bytes_total", "Block bytes sent to other agents").expect("unique")
});

/// Record bytes this agent answered Fetch requests with, by the client's zone and this agent's
/// (`client_zone` is the zone the client stated, by `floe_az=`, its rack or `--zone-cidrs`, when
/// an agent is in it, else `unknown`; `agent_zone` is `none` for an agent without one). A pair of
/// two different zones is bytes that crossed zones.
pub static FETCH_ZONE_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_fetch_zone_bytes_total",
        "Fetched record bytes by client zone and agent zone",
        &["client_zone", "agent_zone"]
    )
    .expect("unique")
});

/// Fetch sessions opened.
pub static FETCH_SESSIONS_CREATED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_fetch_sessions_created_total", "Fetch sessions opened").expect("unique")
});

/// Fetch sessions evicted to make room, by reason (`stale`, `size`, `connection`).
pub static FETCH_SESSIONS_EVICTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_fetch_sessions_evicted_total", "Fetch sessions evicted, by reason", &["reason"])
        .expect("unique")
});

/// Fetch sessions not opened or not kept, by the bound in the way (`agent`, `tenant`, `partitions`).
pub static FETCH_SESSIONS_REFUSED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_fetch_sessions_refused_total", "Fetch sessions refused, by bound", &["bound"])
        .expect("unique")
});

/// Incremental fetches refused, by Kafka error name.
pub static FETCH_SESSION_ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_fetch_session_errors_total", "Incremental fetches refused, by error", &["error"])
        .expect("unique")
});

/// Partitions left out of incremental fetch answers because nothing changed in them.
pub static FETCH_SESSION_PARTITIONS_OMITTED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_fetch_session_partitions_omitted_total",
        "Partitions left out of incremental fetch answers as unchanged"
    )
    .expect("unique")
});

/// SASL authentications on the Kafka listener, by result (`ok`, `failed`, `abandoned`: a SCRAM
/// exchange left after the server's first message).
pub static AUTHENTICATIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_kafka_authentications_total", "SASL authentications, by result", &["result"])
        .expect("unique")
});
/// Kafka connections the agent closed or refused for a limit, by reason (`per_ip`, `full`,
/// `evicted`: unproven and closed to make room, `idle`, `authentication_timeout`,
/// `frame_before_authentication`).
pub static CONNECTIONS_CLOSED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_kafka_connections_closed_total",
        "Kafka connections closed or refused by a connection limit, by reason",
        &["reason"]
    )
    .expect("unique")
});
/// Offset-commit proposals sent to the metadata leader, by how many OffsetCommit requests each
/// carried merged (`1`, `2-16`, `17+`): a connection's commits queued behind a proposal go in
/// the next one.
pub static OFFSET_COMMIT_PROPOSALS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_group_offset_commit_proposals_total",
        "Offset-commit proposals to the metadata leader, by OffsetCommit requests merged into each",
        &["merged"]
    )
    .expect("unique")
});
/// Record batch bytes accepted by Produce, by topic (Kafka's BytesInPerSec).
pub static BYTES_IN: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_bytes_in_total", "Produced bytes committed, by topic", &["topic"])
        .expect("unique")
});
/// Records accepted by Produce, by topic (Kafka's MessagesInPerSec).
pub static MESSAGES_IN: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_messages_in_total", "Produced records committed, by topic", &["topic"])
        .expect("unique")
});
/// Table commits of table topics, by outcome (`ok`, `failed`: lost a race, an I/O error).
pub static TABLE_COMMITS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_table_commits_total", "Table commits of table topics, by outcome", &["outcome"])
        .expect("unique")
});
/// Records written into table topics' tables (counted when their commit lands).
pub static TABLE_ROWS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_rows_total", "Records committed into table topics' tables").expect("unique")
});
/// Records of table topics that went to their dead-letter table (no schema, or one that does
/// not decode or that the table cannot evolve to).
pub static TABLE_DEAD_LETTERS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_table_dead_letter_records_total",
        "Records of table topics written to their dead-letter table"
    )
    .expect("unique")
});
/// Rows of upsert tables deleted by position (a newer record or a tombstone of their key).
pub static TABLE_ROWS_DELETED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_rows_deleted_total", "Upsert table rows deleted by a newer record or tombstone")
        .expect("unique")
});
/// Small table data files rewritten into larger ones.
pub static TABLE_FILES_MERGED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_files_merged_total", "Small table data files merged into larger ones")
        .expect("unique")
});
/// Times a table's manifests were merged into one per partition spec.
pub static TABLE_MANIFEST_MERGES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_manifest_merges_total", "Times a table's manifests were merged").expect("unique")
});
/// Parquet data files written for table topics.
pub static TABLE_FILES: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_files_total", "Parquet data files written for table topics").expect("unique")
});
/// Bytes of table files written (data, manifests, metadata).
pub static TABLE_BYTES_WRITTEN: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_bytes_written_total", "Bytes of table files written (data and metadata)")
        .expect("unique")
});
/// Record bytes (as stored) the table job read from topics to convert.
pub static TABLE_BYTES_READ: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_table_read_bytes_total", "Record bytes, as stored, the table job read to convert")
        .expect("unique")
});
/// Object-store requests of the table job (its files, not the topic reads), by operation.
pub static TABLE_OBJECT_REQUESTS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_table_object_requests_total",
        "Object-store requests the table job made for table files",
        &["operation"]
    )
    .expect("unique")
});
/// Wall time spent in successful table commits (reading, encoding, writing, committing).
pub static TABLE_CONVERT_SECONDS: LazyLock<Counter> = LazyLock::new(|| {
    register_counter!("floe_table_convert_seconds_total", "Wall time spent in successful table commits")
        .expect("unique")
});
/// Segment objects garbage collection deleted, by why (`unreferenced`, `orphan`, `table`: a
/// table file no metadata refers to).
pub static GC_DELETED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_gc_objects_deleted_total",
        "Segment objects deleted by garbage collection",
        &["reason"]
    )
    .expect("unique")
});
/// Compaction runs, by outcome (`ok`, `failed`: lost a race or an I/O error).
pub static COMPACTIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_compaction_runs_total", "Compaction runs, by outcome", &["outcome"])
        .expect("unique")
});
/// Objects compaction wrote: from format 14 one holds the runs of many partitions.
pub static COMPACTION_OBJECTS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_compaction_objects_total", "Objects written by compaction").expect("unique")
});
/// Key compaction passes over a compacted topic's partition, by outcome.
pub static KEY_COMPACTIONS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_key_compaction_runs_total", "Key compaction passes, by outcome", &["outcome"])
        .expect("unique")
});
/// Bytes compaction read (chunks) and wrote (objects): written over produced is its write
/// amplification.
pub static COMPACTION_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_compaction_bytes_total", "Bytes compaction read and wrote", &["direction"])
        .expect("unique")
});
/// Record bytes returned by Fetch, by topic (Kafka's BytesOutPerSec).
pub static BYTES_OUT: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_broker_topic_bytes_out_total", "Fetched bytes, by topic", &["topic"])
        .expect("unique")
});
/// Bytes of each flushed segment object.
pub static FLUSH_SEGMENT_BYTES: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_flush_segment_bytes",
        "Size of each flushed segment object",
        exponential_buckets(1024.0, 4.0, 12).expect("valid buckets")
    )
    .expect("unique")
});
/// Age of a flush's oldest batch when the flush starts: how long the flush interval or size
/// made it wait.
pub static FLUSH_AGE_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_flush_age_seconds",
        "Age of the oldest buffered batch when its flush starts",
        exponential_buckets(0.001, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});
/// The fraction of the flush buffer's memory held by batches not yet answered (sampled with
/// the utilization): near 1, producers wait for room.
pub static FLUSH_BUFFER_FILL: LazyLock<prometheus::Gauge> = LazyLock::new(|| {
    prometheus::register_gauge!("floe_flush_buffer_fill_ratio", "Fraction of the flush buffer's memory in use")
        .expect("unique")
});
/// Time from a flush being taken to its commit being answered (upload + commit).
pub static FLUSH_SECONDS: LazyLock<Histogram> = LazyLock::new(|| {
    register_histogram!(
        "floe_flush_duration_seconds",
        "Time from taking a flush to its commit completing (upload and metadata commit)",
        exponential_buckets(0.0005, 2.0, 16).expect("valid buckets")
    )
    .expect("unique")
});
/// Producer chunks answered retriably instead of committed, held behind an earlier chunk of the
/// same producer and partition that failed uncommitted (`produce::holds`).
pub static FLUSH_HELD_CHUNKS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!(
        "floe_flush_held_chunks_total",
        "Producer chunks answered retriably behind an earlier failed chunk of their producer and partition"
    )
    .expect("unique")
});

/// Consumer group lag, computed from this agent's metadata mirror at each scrape: per group and
/// partition, the committed offset and how far the log end is past it (Kafka's consumer lag);
/// and per share group and partition, its start offset and the records not yet acknowledged.
#[derive(Debug)]
pub struct GroupLagCollector {
    metadata: floe_metadata::Metadata,
    lag: prometheus::IntGaugeVec,
    committed: prometheus::IntGaugeVec,
    share_lag: prometheus::IntGaugeVec,
    share_start: prometheus::IntGaugeVec,
    /// Scrapes rebuild the gauges from scratch; one at a time.
    scrape: std::sync::Mutex<()>,
}

impl GroupLagCollector {
    fn new(metadata: floe_metadata::Metadata) -> Self {
        let labels = &["group", "topic", "partition"];
        let gauge = |name: &str, help: &str| {
            prometheus::IntGaugeVec::new(prometheus::Opts::new(name, help), labels).expect("valid metric definition")
        };
        Self {
            metadata,
            lag: gauge("floe_consumer_group_lag", "Log end offset minus the group's committed offset"),
            committed: gauge("floe_consumer_group_committed_offset", "The group's committed offset"),
            share_lag: gauge(
                "floe_share_group_lag",
                "Records of a partition a share group has not acknowledged yet (start offset to log end)",
            ),
            share_start: gauge("floe_share_group_start_offset", "A share group's start offset in a partition"),
            scrape: std::sync::Mutex::new(()),
        }
    }

    /// Registers a collector for `metadata` in the process-wide registry (once per process).
    pub fn register(metadata: floe_metadata::Metadata) {
        if let Err(e) = prometheus::register(Box::new(Self::new(metadata))) {
            tracing::debug!(error = %e, "consumer group lag collector already registered");
        }
    }
}

impl prometheus::core::Collector for GroupLagCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        [&self.lag, &self.committed, &self.share_lag, &self.share_start].into_iter().flat_map(|g| g.desc()).collect()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let _one = self.scrape.lock_recovered();
        let gauges = [&self.lag, &self.committed, &self.share_lag, &self.share_start];
        gauges.iter().for_each(|g| g.reset());
        let state = self.metadata.read();
        let mut series = 0;
        'groups: for group in state.groups.keys() {
            for p in state.group_lag(group) {
                if series >= crate::limits::GROUP_LAG_SERIES_MAX {
                    break 'groups;
                }
                series += 1;
                let partition = p.partition.to_string();
                let labels = [group.as_str(), p.topic.as_str(), partition.as_str()];
                self.lag.with_label_values(&labels).set(p.lag);
                self.committed.with_label_values(&labels).set(p.committed);
            }
        }
        let share_groups: std::collections::BTreeSet<&str> =
            state.share_partitions.keys().map(|(group, _, _)| group.as_str()).collect();
        'share: for group in share_groups {
            for p in state.share_lag(group) {
                if series >= crate::limits::GROUP_LAG_SERIES_MAX {
                    break 'share;
                }
                series += 1;
                let partition = p.partition.to_string();
                let labels = [group, p.topic.as_str(), partition.as_str()];
                self.share_lag.with_label_values(&labels).set(p.lag);
                self.share_start.with_label_values(&labels).set(p.start_offset);
            }
        }
        gauges.iter().flat_map(|g| g.collect()).collect()
    }
}

/// Table topics' lag, computed from this agent's metadata mirror at each scrape: per table topic,
/// the records its table does not hold yet (up to the last stable offset) and the age of the
/// oldest of them (from the index: the newest timestamp of the first entry the table lacks, so
/// a lower bound).
#[derive(Debug)]
pub struct TableLagCollector {
    metadata: floe_metadata::Metadata,
    records: prometheus::IntGaugeVec,
    seconds: prometheus::GaugeVec,
    scrape: std::sync::Mutex<()>,
}

impl TableLagCollector {
    fn new(metadata: floe_metadata::Metadata) -> Self {
        let opts = |name: &str, help: &str| prometheus::Opts::new(name, help);
        Self {
            metadata,
            records: prometheus::IntGaugeVec::new(
                opts("floe_table_lag_records", "Records of a table topic its table does not hold yet"),
                &["topic"],
            )
            .expect("valid metric definition"),
            seconds: prometheus::GaugeVec::new(
                opts("floe_table_lag_seconds", "Age of the oldest record of a table topic its table does not hold yet"),
                &["topic"],
            )
            .expect("valid metric definition"),
            scrape: std::sync::Mutex::new(()),
        }
    }

    /// Registers a collector for `metadata` in the process-wide registry (once per process).
    pub fn register(metadata: floe_metadata::Metadata) {
        if let Err(e) = prometheus::register(Box::new(Self::new(metadata))) {
            tracing::debug!(error = %e, "table lag collector already registered");
        }
    }
}

impl prometheus::core::Collector for TableLagCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.records.desc().into_iter().chain(self.seconds.desc()).collect()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let _one = self.scrape.lock_recovered();
        self.records.reset();
        self.seconds.reset();
        let state = self.metadata.read();
        let now_ms = floe_metadata::now_ms();
        for (topic_id, topic) in
            state.topics.iter().filter(|(_, t)| state.table_enabled(t)).take(crate::limits::TABLE_LAG_SERIES_MAX)
        {
            let (mut lag, mut oldest_ms) = (0i64, None::<i64>);
            for (index, log) in topic.partitions.iter().enumerate() {
                let from = state.table_hold(*topic_id, i32::try_from(index).unwrap_or(i32::MAX)).unwrap_or(0);
                let behind = log.last_stable_offset().saturating_sub(from);
                if behind > 0 {
                    lag += behind;
                    if let Some(entry) = log.entries_from(from).next() {
                        oldest_ms = Some(oldest_ms.map_or(entry.timestamp_max, |t| t.min(entry.timestamp_max)));
                    }
                }
            }
            self.records.with_label_values(&[topic.name.as_str()]).set(lag);
            let age = oldest_ms.map_or(0.0, |t| now_ms.saturating_sub(t).max(0) as f64 / 1000.0);
            self.seconds.with_label_values(&[topic.name.as_str()]).set(age);
        }
        self.records.collect().into_iter().chain(self.seconds.collect()).collect()
    }
}
/// Link lag, computed from this agent's metadata mirror at each scrape: per mirror partition,
/// the source's log end as the link's job last reported it minus the mirror's log end.
#[derive(Debug)]
pub struct LinkLagCollector {
    metadata: floe_metadata::Metadata,
    records: prometheus::IntGaugeVec,
    scrape: std::sync::Mutex<()>,
}

impl LinkLagCollector {
    fn new(metadata: floe_metadata::Metadata) -> Self {
        let opts = prometheus::Opts::new(
            "floe_link_lag_records",
            "Records of a mirror partition the link has not mirrored yet, as of its last report",
        );
        Self {
            metadata,
            records: prometheus::IntGaugeVec::new(opts, &["link", "topic", "partition"])
                .expect("valid metric definition"),
            scrape: std::sync::Mutex::new(()),
        }
    }

    /// Registers a collector for `metadata` in the process-wide registry (once per process).
    pub fn register(metadata: floe_metadata::Metadata) {
        if let Err(e) = prometheus::register(Box::new(Self::new(metadata))) {
            tracing::debug!(error = %e, "link lag collector already registered");
        }
    }
}

impl prometheus::core::Collector for LinkLagCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.records.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let _one = self.scrape.lock_recovered();
        self.records.reset();
        let state = self.metadata.read();
        let mut series = 0usize;
        for (name, link) in &state.links {
            for ((topic_id, partition), source_end) in &link.source_ends {
                if series >= crate::limits::LINK_LAG_SERIES_MAX {
                    break;
                }
                let (Some(topic), Some(log)) = (state.topics.get(topic_id), state.partition(*topic_id, *partition))
                else {
                    continue;
                };
                let lag = source_end.saturating_sub(log.next_offset).max(0);
                self.records.with_label_values(&[name.as_str(), topic.name.as_str(), &partition.to_string()]).set(lag);
                series += 1;
            }
        }
        self.records.collect()
    }
}

/// Record bytes links wrote into mirror topics, by link.
pub static LINK_BYTES: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_link_mirrored_bytes_total",
        "Record bytes links wrote into mirror topics",
        &["link"]
    )
    .expect("unique")
});
/// Link rounds that failed (unreachable source, refused credentials, a refused commit), by link.
pub static LINK_ERRORS: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!("floe_link_errors_total", "Link rounds that failed, by link", &["link"]).expect("unique")
});

/// Usage reports this agent proposed (each a numbered batch of per-tenant, per-minute counts).
pub static USAGE_REPORTS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_usage_reports_total", "Usage reports this agent proposed to metadata").expect("unique")
});
/// Hourly usage files this agent wrote (first exports and corrected revisions).
pub static USAGE_EXPORTS: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_usage_exports_total", "Hourly usage Parquet files this agent wrote").expect("unique")
});
/// This agent's utilization over the last window, as a ratio to its targets (1: at target): the
/// highest of its components. What an autoscaler tracks.
pub static AGENT_UTILIZATION: LazyLock<prometheus::Gauge> = LazyLock::new(|| {
    prometheus::register_gauge!(
        "floe_agent_utilization",
        "Agent utilization over the last window as a ratio to its targets (1 = at target): the highest component"
    )
    .expect("unique")
});
/// The components of [`AGENT_UTILIZATION`].
pub static AGENT_UTILIZATION_COMPONENT: LazyLock<prometheus::GaugeVec> = LazyLock::new(|| {
    prometheus::register_gauge_vec!(
        "floe_agent_utilization_component",
        "Agent utilization by component (cpu, buffer, produce_latency) as a ratio to its target",
        &["component"]
    )
    .expect("unique")
});
/// Agents the pool needs for each to run at its targets (cluster-wide, the same on every agent).
pub static POOL_DESIRED_AGENTS: LazyLock<IntGauge> = LazyLock::new(|| {
    register_int_gauge!(
        "floe_agent_pool_desired_agents",
        "Agents the pool needs for each to run at its targets: live agents' utilizations summed, rounded up"
    )
    .expect("unique")
});
/// Live agents, as the desired count is computed over.
pub static POOL_LIVE_AGENTS: LazyLock<IntGauge> =
    LazyLock::new(|| register_int_gauge!("floe_agent_pool_live_agents", "Live agents in the pool").expect("unique"));
/// Usage reports metadata refused (their counts are dropped; the log says why).
pub static USAGE_REPORTS_REFUSED: LazyLock<IntCounter> = LazyLock::new(|| {
    register_int_counter!("floe_usage_reports_refused_total", "Usage reports metadata refused (counts dropped)")
        .expect("unique")
});

/// Registers the agent's metrics without labels (and the storage layer's) now, at zero, rather
/// than at their first use: a dashboard or alert on a rate sees 0 from the start, not no series.
pub fn register() {
    floe_storage::metrics::register();
    for counter in [
        &FETCH_SESSIONS_CREATED,
        &FETCH_SESSION_PARTITIONS_OMITTED,
        &USAGE_REPORTS,
        &USAGE_EXPORTS,
        &FETCHES_SENT_TO_READ_REPLICAS,
        &PEER_BLOCK_BYTES_RECEIVED,
        &PEER_BLOCK_BYTES_SERVED,
        &FLUSH_HELD_CHUNKS,
    ] {
        LazyLock::force(counter);
    }
    for histogram in [&FLUSH_SEGMENT_BYTES, &FLUSH_AGE_SECONDS, &FLUSH_SECONDS] {
        LazyLock::force(histogram);
    }
    LazyLock::force(&FLUSH_BUFFER_FILL);
    LazyLock::force(&PEER_BLOCK_ASKS);
    LazyLock::force(&PEER_BLOCK_REQUESTS);
    LazyLock::force(&FETCH_ZONE_BYTES);
    LazyLock::force(&FETCH_SESSIONS);
    LazyLock::force(&FETCH_SESSION_PARTITIONS);
    // Not the utilization and pool gauges: they appear with their first measurement, since an
    // autoscaler reading 0 before it would scale the pool in.
}

/// Label values of one kind (topics, tenants) that get series of their own: the first `max`
/// seen in this process; later ones share `_other`, so a cluster of very many topics or tenants
/// keeps a bounded scrape.
#[derive(Debug)]
pub struct LabelCap {
    max: usize,
    seen: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl LabelCap {
    pub const fn new(max: usize) -> Self {
        Self { max, seen: std::sync::Mutex::new(std::collections::BTreeSet::new()) }
    }

    /// The label for `value`: itself while it has or may get a series, else `_other`.
    pub fn label<'a>(&self, value: &'a str) -> &'a str {
        let mut seen = self.seen.lock_recovered();
        if seen.contains(value) {
            return value;
        }
        if seen.len() < self.max {
            seen.insert(value.to_owned());
            return value;
        }
        "_other"
    }
}

/// Topics labelled in `floe_broker_topic_*` ([`crate::limits::TOPIC_SERIES_MAX`]).
pub static TOPIC_LABELS: LabelCap = LabelCap::new(crate::limits::TOPIC_SERIES_MAX);
/// Tenants labelled in `floe_quota_throttle_seconds_total`.
pub static TENANT_LABELS: LabelCap = LabelCap::new(crate::limits::CONNECTION_TENANT_SERIES_MAX);

/// What a listener reports of its connections: how many it holds, and how many of them
/// authenticated as each tenant's users.
pub trait ListenerConnections: Send + Sync + std::fmt::Debug {
    fn connection_counts(&self) -> (usize, Vec<(String, usize)>);
}

/// `floe_connections{listener, tenant}`, read from the listeners' own tables at each scrape.
/// `tenant` is `_none` for connections not authenticated as a tenant (HTTP connections, whose
/// requests authenticate one by one, are all `_none`); past
/// [`crate::limits::CONNECTION_TENANT_SERIES_MAX`] tenants per listener, those with the fewest
/// connections are summed as `_other`.
#[derive(Debug)]
struct ConnectionCollector {
    open: IntGaugeVec,
    listeners: std::sync::Mutex<Vec<(&'static str, std::sync::Weak<dyn ListenerConnections>)>>,
}

static CONNECTION_COLLECTOR: LazyLock<std::sync::Arc<ConnectionCollector>> = LazyLock::new(|| {
    let open = IntGaugeVec::new(
        prometheus::Opts::new("floe_connections", "Connections held, by listener and authenticated tenant"),
        &["listener", "tenant"],
    )
    .expect("valid metric definition");
    let collector = std::sync::Arc::new(ConnectionCollector { open, listeners: Default::default() });
    if let Err(e) = prometheus::register(Box::new(SharedConnectionCollector(collector.clone()))) {
        tracing::debug!(error = %e, "connection collector already registered");
    }
    collector
});

/// Reports `table`'s connections as `listener`'s while it lives.
pub fn count_connections(listener: &'static str, table: std::sync::Weak<dyn ListenerConnections>) {
    CONNECTION_COLLECTOR.listeners.lock_recovered().push((listener, table));
}

/// One listener's series: `_none` for connections with no tenant, the `max` tenants with the
/// most connections, and `_other` for the rest.
fn connection_series(total: usize, mut tenants: Vec<(String, usize)>, max: usize) -> Vec<(String, usize)> {
    tenants.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let authenticated: usize = tenants.iter().map(|(_, n)| n).sum();
    let mut series = vec![("_none".to_owned(), total.saturating_sub(authenticated))];
    let shown = tenants.len().min(max);
    let other: usize = tenants[shown..].iter().map(|(_, n)| n).sum();
    tenants.truncate(shown);
    series.extend(tenants);
    if other > 0 {
        series.push(("_other".to_owned(), other));
    }
    series
}

#[derive(Debug)]
struct SharedConnectionCollector(std::sync::Arc<ConnectionCollector>);

impl prometheus::core::Collector for SharedConnectionCollector {
    fn desc(&self) -> Vec<&prometheus::core::Desc> {
        self.0.open.desc()
    }

    fn collect(&self) -> Vec<prometheus::proto::MetricFamily> {
        let mut listeners = self.0.listeners.lock_recovered();
        listeners.retain(|(_, table)| table.strong_count() > 0);
        self.0.open.reset();
        for (listener, table) in listeners.iter() {
            let Some(table) = table.upgrade() else { continue };
            let (total, tenants) = table.connection_counts();
            for (tenant, n) in connection_series(total, tenants, crate::limits::CONNECTION_TENANT_SERIES_MAX) {
                self.0.open.with_label_values(&[listener, tenant.as_str()]).add(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        self.0.open.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_past_the_cap_are_other() {
        let cap = LabelCap::new(2);
        assert_eq!([cap.label("a"), cap.label("b"), cap.label("c"), cap.label("a")], ["a", "b", "_other", "a"]);
    }

    #[test]
    fn tenants_past_the_cap_are_summed_as_other() {
        let tenants = vec![("a".to_owned(), 1), ("b".to_owned(), 5), ("c".to_owned(), 3), ("d".to_owned(), 2)];
        let series = connection_series(15, tenants, 2);
        let expected = [("_none", 4), ("b", 5), ("c", 3), ("_other", 3)];
        assert_eq!(series, expected.map(|(t, n)| (t.to_owned(), n)));
        assert_eq!(connection_series(2, Vec::new(), 2), vec![("_none".to_owned(), 2)]);
    }

    /// A listener's table is read at each scrape, and forgotten once dropped.
    #[test]
    fn connections_are_read_from_live_tables() {
        #[derive(Debug)]
        struct Fixed;
        impl ListenerConnections for Fixed {
            fn connection_counts(&self) -> (usize, Vec<(String, usize)>) {
                (3, vec![("acme".to_owned(), 2)])
            }
        }
        let table = std::sync::Arc::new(Fixed);
        let weak = std::sync::Arc::downgrade(&table);
        count_connections("test_listener", weak);
        let read = |tenant: &str| {
            prometheus::gather()
                .iter()
                .filter(|f| f.name() == "floe_connections")
                .flat_map(|f| f.get_metric().to_vec())
                .find(|m| {
                    let labels: Vec<(&str, &str)> = m.get_label().iter().map(|l| (l.name(), l.value())).collect();
                    labels.contains(&("listener", "test_listener")) && labels.contains(&("tenant", tenant))
                })
                .map(|m| m.get_gauge().get_value())
        };
        assert_eq!(read("acme"), Some(2.0));
        assert_eq!(read("_none"), Some(1.0));
        drop(table);
        assert_eq!(read("acme"), None);
    }
}
