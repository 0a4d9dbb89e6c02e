//! A table topic: a compacted topic with `floe.table.enable`, whose records the jobs agent
//! (whichever holds the job lease, so faults move it) converts into an upsert Iceberg table, one
//! row per partition and key. The changelog's two writers write it ([`TABLE`]): a transactional
//! one that aborts some transactions on purpose and an idempotent one, so the table must keep
//! the newest committed value of every key and nothing aborted, while compaction removes older
//! records (only those the table already holds). After the run the harness waits for the table
//! to hold the topic up to its last stable offsets (`floe admin tables`), then reads its rows
//! through the agents' Iceberg REST catalog for `check::table`.
//!
//! The rows are read with pyiceberg, in a Python child, rather than by a reader of our own: it is
//! the reader the e2e tests trust (`tests/e2e/test_tables.py`), it applies the upsert table's
//! position deletes as every Iceberg engine must, and writing a Parquet and Avro manifest reader
//! here would check Floe's files against Floe's own understanding of them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::changelog::Keyed;
use crate::cluster::Cluster;
use crate::history::History;

pub(crate) const TABLE_TOPIC: &str = "chaos-table";
pub(crate) const TABLE_PARTITIONS: i32 = 2;
/// Compacted, so its table is an upsert table; committed every 2 s, so the table keeps up
/// through a short run while its commits (five objects each) stay a small load on 2 cores;
/// compaction as on the changelog, so it runs all through the run and its hold behind the table
/// is exercised.
pub(crate) const TABLE_CONFIGS: [(&str, &str); 5] = [
    ("cleanup.policy", "compact"),
    ("floe.table.enable", "true"),
    ("floe.table.commit.interval.ms", "2000"),
    ("delete.retention.ms", "2000"),
    ("min.cleanable.dirty.ratio", "0.01"),
];
/// The changelog's writers pointed at the table topic; a transaction every half second keeps
/// the added load small.
pub(crate) const TABLE: Keyed = Keyed {
    topic: TABLE_TOPIC,
    partitions: TABLE_PARTITIONS,
    transactional_id: "chaos-table",
    txn_pause: Duration::from_millis(500),
};
/// How long the table may take to hold the topic to its end once the writers stopped: a commit
/// every 2 s, and a job lease that may have to move after the last fault.
pub(crate) const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the Python reader may take (its imports alone take seconds on a busy machine).
const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The reader's exit status when it cannot import pyiceberg.
const NO_PYICEBERG_EXIT: i32 = 3;
/// Reads of a table older than the one the metadata leader showed caught up (the catalog answers
/// from an agent's copy of the metadata, which may lag) before it is judged as read.
const READ_TRIES: u32 = 10;
const READ_RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Reads every row of a table through the REST catalog. Arguments: the catalog properties
/// (JSON), the table identifier. Prints `{"found": bool, "location": metadata location or null,
/// "rows": [[partition, offset, key, value], ...]}`; keys and values as UTF-8 text (the
/// writers' are ASCII), null when null.
const READ_TABLE_PY: &str = r#"
import json, sys
try:
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError
except ImportError as e:
    print(f"cannot import pyiceberg: {e}", file=sys.stderr)
    sys.exit(3)
catalog = load_catalog("floe", **json.loads(sys.argv[1]))
try:
    table = catalog.load_table(sys.argv[2])
except NoSuchTableError:
    print(json.dumps({"found": False, "location": None, "rows": []}))
    sys.exit(0)
text = lambda b: None if b is None else b.decode("utf-8", "replace")
rows = table.scan().to_arrow().to_pylist() if table.current_snapshot() is not None else []
print(json.dumps({"found": True, "location": table.metadata_location, "rows": [
    [r["_partition"], r["_offset"], text(r["_key"]), text(r["_value"])] for r in rows]}))
"#;

/// One row of the table: the Kafka partition and offset of its record, its key and value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TableRow {
    pub(crate) partition: i32,
    pub(crate) offset: i64,
    pub(crate) key: Option<String>,
    pub(crate) value: Option<String>,
}

/// The table read back after the run.
#[derive(Clone, Debug)]
pub(crate) struct TableRead {
    /// When the harness asked for the table's lag and heard none (run time): the table held the
    /// topic to the last stable offsets of then. `None`: it did not catch up in time.
    pub(crate) caught_up_ms: Option<u64>,
    /// Every writer of the topic had stopped before the table caught up, so no transaction began
    /// after the last one's outcome.
    pub(crate) writers_stopped: bool,
    pub(crate) rows: Vec<TableRow>,
}

#[derive(Debug, serde::Deserialize)]
struct Printed {
    found: bool,
    location: Option<String>,
    rows: Vec<(i32, i64, Option<String>, Option<String>)>,
}

/// The table caught up: when the harness asked (run time), and the metadata location the
/// answering metadata node's state named then.
#[derive(Clone, Debug)]
pub(crate) struct CaughtUp {
    pub(crate) asked_ms: u64,
    pub(crate) metadata_location: Option<String>,
}

/// The number a table metadata file's name starts with (`.../metadata/00007-UUID.metadata.json`,
/// `agents/src/tables/commit.rs`): it grows with every commit, so a larger one is a later table.
fn metadata_number(location: &str) -> Option<u64> {
    let name = location.rsplit('/').next()?;
    name.split_once('-')?.0.parse().ok()
}

/// The Python to read the table with: `given`, else `.venv/bin/python` in the working directory
/// or one above it (the repository's test venv, which `scripts/test.sh` makes).
pub(crate) fn python(given: Option<PathBuf>) -> Option<PathBuf> {
    given.or_else(|| {
        let cwd = std::env::current_dir().ok()?;
        cwd.ancestors().map(|dir| dir.join(".venv/bin/python")).find(|p| p.is_file())
    })
}

/// Whether a stored topic name (`floe admin tables`) is the table topic: as it is, or in a
/// tenant's namespace (`KEY~NAME`).
fn is_table_topic(stored: &str) -> bool {
    stored == TABLE_TOPIC || stored.rsplit_once('~').is_some_and(|(_, name)| name == TABLE_TOPIC)
}

/// Waits up to [`CATCH_UP_TIMEOUT`] for the table to hold the topic to its last stable offsets;
/// when it did, when that was asked and the table then, else why not.
pub(crate) async fn wait_caught_up(
    cluster: &tokio::sync::Mutex<Cluster>,
    history: &History,
) -> Result<CaughtUp, String> {
    let started = Instant::now();
    let mut last = String::from("never answered");
    while started.elapsed() < CATCH_UP_TIMEOUT {
        let asked_ms = history.now_ms();
        let listed = cluster.lock().await.admin("tables", &["--json"], None).await;
        match listed.map(|out| serde_json::from_str::<serde_json::Value>(&out)) {
            Ok(Ok(views)) => {
                let view =
                    views.as_array().into_iter().flatten().find(|v| v["topic"].as_str().is_some_and(is_table_topic));
                match view.and_then(|v| v["lag_records"].as_i64()) {
                    Some(0) => {
                        let metadata_location = view.and_then(|v| v["metadata_location"].as_str()).map(String::from);
                        return Ok(CaughtUp { asked_ms, metadata_location });
                    }
                    Some(lag) => last = format!("{lag} records behind"),
                    None => last = "not listed".into(),
                }
            }
            Ok(Err(e)) => last = format!("floe admin tables printed no JSON: {e}"),
            Err(e) => last = format!("{e:#}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Err(format!("the table of {TABLE_TOPIC} did not catch up within {CATCH_UP_TIMEOUT:?}: {last}"))
}

/// Runs the reader once.
async fn read_once(python: &Path, properties: &serde_json::Value, identifier: &str) -> anyhow::Result<Option<Printed>> {
    let child = tokio::process::Command::new(python)
        .args(["-c", READ_TABLE_PY, &properties.to_string(), identifier])
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(READ_TIMEOUT, child).await {
        Err(_) => bail!("reading the table with {} took over {READ_TIMEOUT:?}", python.display()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Ok(Err(e)) => return Err(e).with_context(|| format!("running {}", python.display())),
        Ok(Ok(out)) => out,
    };
    if out.status.code() == Some(NO_PYICEBERG_EXIT) {
        return Ok(None);
    }
    if !out.status.success() {
        bail!("reading the table with pyiceberg: {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(Some(serde_json::from_slice(&out.stdout).context("the table reader's output")?))
}

/// Every row of the table, read with `python` through the catalog at `http_url` (an agent), at
/// least as late as the table at `at_least` (a metadata location) if the agent's copy of the
/// metadata gets there within [`READ_TRIES`]; `None` when that Python cannot be run or has no
/// pyiceberg. With `s3`, pyiceberg signs its reads with the run's S3 credentials (the catalog
/// hands out the endpoint, never credentials).
pub(crate) async fn read_rows(
    python: &Path,
    http_url: &str,
    s3: bool,
    at_least: Option<&str>,
) -> anyhow::Result<Option<Vec<TableRow>>> {
    let mut properties = serde_json::json!({"type": "rest", "uri": format!("{http_url}/iceberg")});
    if let Some(key) = super::api_key() {
        properties["token"] = key.into();
    }
    if s3 {
        for (name, env) in
            [("s3.access-key-id", "AWS_ACCESS_KEY_ID"), ("s3.secret-access-key", "AWS_SECRET_ACCESS_KEY")]
        {
            if let Some((_, value)) = crate::s3::ENV.iter().find(|(k, _)| *k == env) {
                properties[name] = (*value).into();
            }
        }
    }
    // A dotless topic is table NAME in namespace `default` (the catalog's mapping).
    let identifier = format!("default.{TABLE_TOPIC}");
    let wanted = at_least.and_then(metadata_number);
    let mut tries = 0;
    let printed = loop {
        tries += 1;
        let Some(printed) = read_once(python, &properties, &identifier).await? else { return Ok(None) };
        let read = printed.location.as_deref().and_then(metadata_number);
        if tries >= READ_TRIES || wanted.is_none_or(|wanted| read.is_some_and(|read| read >= wanted)) {
            break printed;
        }
        tokio::time::sleep(READ_RETRY_PAUSE).await;
    };
    if !printed.found {
        return Ok(Some(Vec::new()));
    }
    Ok(Some(
        printed
            .rows
            .into_iter()
            .map(|(partition, offset, key, value)| TableRow { partition, offset, key, value })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_files_are_numbered_by_commit() {
        let location = "file:///tmp/x/objects/tables/0190-ab/metadata/00012-0190abcd.metadata.json";
        assert_eq!(metadata_number(location), Some(12));
        assert_eq!(metadata_number("s3://b/tables/t/metadata/v1.metadata.json"), None);
    }

    #[test]
    fn the_table_topic_is_found_in_a_tenants_namespace() {
        assert!(is_table_topic("chaos-table"));
        assert!(is_table_topic("chaos#1~chaos-table"));
        assert!(!is_table_topic("chaos#1~chaos-table2"));
        assert!(!is_table_topic("hostile#2~dag_avro"));
    }
}
