"""Writes floe.json, the Grafana dashboard, from the panel list below: edit here, then run
`python3 deploy/grafana/dashboard.py`. The e2e suite (tests/e2e/test_observability.py) checks
floe.json is what this writes, and evaluates every query in it against a real Prometheus."""

import json
from pathlib import Path

RATE = "$__rate_interval"

# (row, [(title, unit, kind, [(expr, legend)], description)])
ROWS = [
    ("Cluster", [
        ("Produce and fetch throughput", "Bps", "timeseries", [
            (f"sum(rate(floe_broker_topic_bytes_in_total[{RATE}]))", "produced"),
            (f"sum(rate(floe_broker_topic_bytes_out_total[{RATE}]))", "fetched"),
        ], "Bytes committed by produce (Kafka and HTTP) and bytes returned by fetch, all agents."),
        ("Records produced", "short", "timeseries", [
            (f"sum(rate(floe_broker_topic_messages_in_total[{RATE}]))", "records/s"),
        ], "Records committed per second."),
        ("Kafka requests by API", "reqps", "timeseries", [
            (f"sum by (api) (rate(floe_kafka_requests_total[{RATE}]))", "{{api}}"),
        ], "Requests handled per second, by Kafka API."),
        ("Produce latency", "s", "timeseries", [
            (f'histogram_quantile(0.5, sum by (le) (rate(floe_kafka_request_duration_seconds_bucket{{api="Produce"}}[{RATE}])))', "p50"),
            (f'histogram_quantile(0.99, sum by (le) (rate(floe_kafka_request_duration_seconds_bucket{{api="Produce"}}[{RATE}])))', "p99"),
        ], "Time from a Produce request's arrival to its response: mostly the flush (PUT and commit)."),
        ("HTTP requests by status", "reqps", "timeseries", [
            (f"sum by (status) (rate(floe_http_requests_total[{RATE}]))", "{{status}}"),
        ], "HTTP API requests answered per second, by status code."),
        ("Agents", "short", "timeseries", [
            ("max(floe_agent_pool_live_agents)", "live"),
            ("max(floe_agent_pool_desired_agents)", "desired"),
        ], "Live agents and what the autoscaling signal asks for (docs/OPERATIONS.md, Scaling)."),
        ("Versions running", "short", "stat", [
            ("count by (version) (floe_build_info)", "{{version}}"),
        ], "Processes per Floe version: more than one during a rolling upgrade."),
    ]),
    ("Agents", [
        ("Utilization", "percentunit", "timeseries", [
            ("floe_agent_utilization", "{{instance}}"),
        ], "Each agent's load against its targets (1 = at target): what the autoscaler tracks."),
        ("Flush buffer fill", "percentunit", "timeseries", [
            ("floe_flush_buffer_fill_ratio", "{{instance}}"),
        ], "Share of the flush buffer held by unanswered batches; near 1, producers wait."),
        ("Flush age and duration (p99)", "s", "timeseries", [
            (f"histogram_quantile(0.99, sum by (le) (rate(floe_flush_age_seconds_bucket[{RATE}])))", "oldest batch age at flush"),
            (f"histogram_quantile(0.99, sum by (le) (rate(floe_flush_duration_seconds_bucket[{RATE}])))", "PUT + commit"),
        ], "How long batches wait for a flush, and how long a flush takes."),
        ("Flush size (p50)", "bytes", "timeseries", [
            (f"histogram_quantile(0.5, sum by (le) (rate(floe_flush_segment_bytes_bucket[{RATE}])))", "segment object"),
        ], "Size of each segment object written: larger flushes mean fewer PUTs per GiB."),
        ("Connections by listener", "short", "timeseries", [
            ("sum by (listener) (floe_connections)", "{{listener}}"),
        ], "Connections held, by listener."),
        ("CPU and memory", "short", "timeseries", [
            (f"rate(process_cpu_seconds_total[{RATE}])", "{{instance}} CPU cores"),
            ("process_resident_memory_bytes / 2^30", "{{instance}} RSS GiB"),
        ], "CPU cores used and resident memory of each process."),
    ]),
    ("Object store", [
        ("Request latency (p99) by operation", "s", "timeseries", [
            (f"histogram_quantile(0.99, sum by (operation, le) (rate(floe_object_store_request_duration_seconds_bucket[{RATE}])))", "{{operation}}"),
        ], "Object-store request latency as agents see it (a GET until its body is read)."),
        ("Requests", "reqps", "timeseries", [
            (f"sum by (outcome) (rate(floe_object_store_put_requests_total[{RATE}]))", "PUT {{outcome}}"),
            (f"sum by (outcome) (rate(floe_object_store_get_requests_total[{RATE}]))", "GET {{outcome}}"),
        ], "PUTs and GETs per second by outcome: what the bucket bills."),
        ("Bytes moved", "Bps", "timeseries", [
            (f"sum(rate(floe_object_store_put_bytes_total[{RATE}]))", "written"),
            (f"sum(rate(floe_object_store_get_bytes_total[{RATE}]))", "read"),
        ], "Bytes written to and read from the object store."),
        ("Block cache hit ratio", "percentunit", "timeseries", [
            (f'1 - sum(rate(floe_block_cache_object_gets_total{{cause="miss"}}[{RATE}])) / sum(rate(floe_block_cache_reads_total[{RATE}]))', "hits"),
        ], "Share of block reads served by the memory or disk tier rather than a GET."),
        ("Disk space available", "percentunit", "timeseries", [
            ("floe_disk_available_bytes / floe_disk_capacity_bytes", "{{instance}} {{dir}}"),
        ], "Free share of the file systems holding the disk tier, usage journal and Raft log."),
    ]),
    ("Groups and lag", [
        ("Consumer lag by group", "short", "timeseries", [
            ("sum by (group) (max by (group, topic, partition) (floe_consumer_group_lag))", "{{group}}"),
        ], "Records between each group's committed offsets and the log ends (every agent reports the same; max dedupes)."),
        ("Groups", "short", "timeseries", [
            ("max by (kind, state) (floe_metadata_groups)", "{{kind}} {{state}}"),
        ], "Consumer groups by protocol and whether they have members."),
        ("Transactions by state", "short", "timeseries", [
            ("max by (state) (floe_metadata_transactions)", "{{state}}"),
        ], "Transactional ids by the state of their current transaction."),
        ("Offset commits", "short", "timeseries", [
            (f"sum(rate(floe_group_offset_commit_proposals_total[{RATE}]))", "proposals/s"),
        ], "Offset commit proposals per second (several commits may share one)."),
    ]),
    ("Tenants", [
        ("Quota throttling", "s", "timeseries", [
            (f"sum by (tenant, quota) (rate(floe_quota_throttle_seconds_total[{RATE}]))", "{{tenant}} {{quota}}"),
        ], "Seconds of throttle per second handed to each tenant's clients, by quota."),
        ("Storage against quota", "percentunit", "timeseries", [
            ("max by (tenant) (floe_tenant_storage_bytes) / max by (tenant) (floe_tenant_storage_quota_bytes)", "{{tenant}}"),
        ], "Share of its storage quota each tenant uses (the tenants nearest their quotas)."),
        ("Kafka connections by tenant", "short", "timeseries", [
            ('sum by (tenant) (floe_connections{listener="kafka"})', "{{tenant}}"),
        ], "Authenticated Kafka connections per tenant (_none: not authenticated as a tenant)."),
        ("Tenants and topics", "short", "stat", [
            ("max(floe_metadata_tenants)", "tenants"),
            ("max(floe_metadata_topics)", "topics"),
            ("max(floe_metadata_partitions)", "partitions"),
        ], "What the metadata state holds."),
    ]),
    ("Metadata", [
        ("Leader and term", "short", "stat", [
            ("max(floe_metadata_raft_leader_id)", "leader"),
            ("max(floe_metadata_raft_term)", "term"),
        ], "The Raft leader's node id (-1: none) and the current term."),
        ("Commit latency", "s", "timeseries", [
            (f"histogram_quantile(0.99, sum by (le) (rate(floe_metadata_commit_duration_seconds_bucket[{RATE}])))", "p99"),
            (f"histogram_quantile(0.5, sum by (le) (rate(floe_metadata_commit_duration_seconds_bucket[{RATE}])))", "p50"),
        ], "Time for the leader to commit and apply one entry."),
        ("Follower lag", "short", "timeseries", [
            ("max by (follower) (floe_metadata_raft_follower_lag_entries)", "node {{follower}}"),
        ], "Entries each follower has not acknowledged, as the leader sees it."),
        ("Raft indexes", "short", "timeseries", [
            ("floe_metadata_raft_applied_index", "{{instance}} applied"),
            ("floe_metadata_snapshot_index", "{{instance}} snapshot"),
        ], "Each node's applied index and the last index in its snapshot."),
        ("Archive age", "s", "timeseries", [
            ("time() - max(floe_metadata_archive_last_success_timestamp_seconds)", "since last archive"),
        ], "How far behind the bucket archive is: what a restore would lose."),
    ]),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def panel(id_, title, unit, kind, targets, description, x, y):
    w = 8
    p = {
        "id": id_,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 7, "w": w, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(targets)
        ],
    }
    if kind == "timeseries":
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
    else:
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"}
    return p


def dashboard():
    panels, next_id, y = [], 1, 0
    for row, row_panels in ROWS:
        panels.append({"id": next_id, "type": "row", "title": row, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id += 1
        y += 1
        for i, spec in enumerate(row_panels):
            panels.append(panel(next_id, *spec, x=(i % 3) * 8, y=y + (i // 3) * 7))
            next_id += 1
        y += ((len(row_panels) + 2) // 3) * 7
    return {
        "title": "Floe",
        "uid": "floe-overview",
        "description": "Floe cluster, agents, object store, groups and lag, tenants and metadata.",
        "tags": ["floe", "kafka"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [{
            "name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
            "current": {}, "hide": 0,
        }]},
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    Path(__file__).with_name("floe.json").write_text(render())
