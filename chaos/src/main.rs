//! `floe-chaos`: starts a local Floe cluster (3 metadata nodes, 2–3 agents, a `file://` object
//! store), runs real workloads against it (idempotent producers, a transactional
//! consume-transform-produce loop, committing consumer groups (one of them restarting every few
//! seconds), HTTP producers with idempotency keys, a compacted changelog, topics whose log start
//! DeleteRecords and time and size retention move, a table topic), injects faults on a seeded
//! schedule (SIGKILL and SIGSTOP of agents and metadata leaders and followers, network
//! partitions, object-store errors, slowness and brownouts), heals them, checks that everything
//! recovered, and holds what was read back against what was acknowledged. Prints a verdict;
//! exits 1 when anything was lost, duplicated, reordered, torn or went back, or when a process
//! exited without the harness killing it. Also reachable as `floe chaos`.

mod check;
mod cluster;
mod faults;
mod health;
mod history;
mod plot;
mod s3;
mod workloads;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use clap::Parser;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use cluster::{Cluster, NetworkMode};
use faults::{FaultKind, Schedule};
use history::History;
use workloads::{Stop, changelog, groups, http, produce, registry, retained, table, transactions};

/// Longest run.
const DURATION_MAX: Duration = Duration::from_secs(24 * 3600);
/// How long the cluster may take to recover once every fault is healed.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the workload threads may take to stop once told to.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// How long the transform may take to catch up with its input at the end.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Parser)]
#[command(
    name = "floe-chaos",
    version,
    about = "Fault-injection harness: a local Floe cluster, real workloads, scheduled faults and a checker",
    long_about = "Starts 3 metadata nodes and 2-3 agents, runs idempotent, transactional, consumer-group \
        and HTTP workloads while injecting faults on a seeded schedule, heals everything, waits for \
        recovery and checks every acknowledged record. Exit status 0: no violation.\n\n\
        Examples:\n  \
        floe-chaos --duration 90s                 (the short schedule CI runs)\n  \
        floe-chaos --long                         (30 minutes, longer faults)\n  \
        floe-chaos --seed 42 --faults kill-agent,partition-metadata-leader"
)]
struct Args {
    /// The floe binary to run (default: the one beside this executable, else `floe` on PATH).
    #[arg(long)]
    floe: Option<PathBuf>,
    /// Directory for logs, data, the object store, the history and the report (default: a new
    /// directory under the system temp dir).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// How long faults are injected.
    #[arg(long, default_value = "90s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// 30 minutes, faults held up to 15 s: the long mode.
    #[arg(long)]
    long: bool,
    /// Seed of the fault schedule (default: from the clock; printed, so a run can be repeated).
    #[arg(long)]
    seed: Option<u64>,
    /// Faults to draw from (default: all the network mode allows).
    #[arg(long, value_delimiter = ',')]
    faults: Vec<FaultKind>,
    #[arg(long, value_enum, default_value = "netns")]
    network: NetworkMode,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(2..=3))]
    agents: u8,
    /// Shortest and longest time a fault is held (default 2s and 6s; 2s and 15s with --long).
    #[arg(long, value_parser = humantime::parse_duration)]
    hold_min: Option<Duration>,
    #[arg(long, value_parser = humantime::parse_duration)]
    hold_max: Option<Duration>,
    /// Records per second of each idempotent producer (two of them).
    #[arg(long, default_value_t = 200)]
    rate: u32,
    /// Half the faults are joined midway by a second fault of another class (a process, the
    /// network, the object store).
    #[arg(long)]
    overlap: bool,
    /// Keep the objects in S3: start this S3-compatible server (moto_server, from the test
    /// venv) for the run instead of a `file://` store.
    #[arg(long)]
    s3_server: Option<PathBuf>,
    /// Issue the metadata certificates with this script (the repository's
    /// scripts/metadata-certs.sh) and run every metadata connection on mutual TLS; without it
    /// the metadata nodes run with --metadata-allow-plaintext.
    #[arg(long)]
    metadata_certs_script: Option<PathBuf>,
    /// The hostile-tenant mode: agents require SCRAM and API keys, the workloads run as tenant
    /// `chaos`, and for the duration tenant `hostile` floods idle connections, bad frames,
    /// long-polls and produce past its quota, sends schemas of shared types to the registry and
    /// to table topics, and churns connections (no faults unless --faults names some). The
    /// verdict also holds the `chaos` tenant's produce p99 under attack to a bound, every
    /// agent's health checks to an answer within 1 s, and the schema requests to a success or
    /// a refusal.
    #[arg(long)]
    hostile_tenant: bool,
    /// With --hostile-tenant: the attacks it makes (default: all seven).
    #[arg(long, value_enum, value_delimiter = ',', requires = "hostile_tenant")]
    attacks: Vec<workloads::hostile::AttackKind>,
    /// The Python that reads the table topic's Iceberg table back through the agents' REST
    /// catalog, with pyiceberg (default: `.venv/bin/python` in the working directory or one
    /// above it, the e2e tests' venv; when there is none, the table is not judged). Given, a
    /// Python that cannot read it is a problem.
    #[arg(long)]
    python: Option<PathBuf>,
    /// Internal: run as the hostile tenant's process, attacking this target (JSON) until
    /// standard input closes.
    #[arg(long, hide = true)]
    hostile_attack: Option<String>,
}

/// How long the workloads run before the attack; their produce latency unattacked is measured
/// over its part after HOSTILE_WARM_UP (the clients' start, SCRAM logins, the first joins).
const HOSTILE_BASELINE: Duration = Duration::from_secs(25);
const HOSTILE_WARM_UP_MS: u64 = 10_000;

/// The bound on the other tenant's produce p99 while the hostile tenant attacks: at most this
/// many times its p99 before the attack, or this much above it, or the floor, whichever is
/// largest. The floor: on 2 cores the attacker shares the CPU with the cluster, and the same
/// binary measured 0.4 to 1.4 s under attack from run to run while its p99 before varied from
/// 95 to 700 ms, so a bound from the baseline alone failed on the baseline's noise. The floor
/// still fails the regressions this mode exists for (2.4 and 2.7 s, docs/RELIABILITY.md).
const HOSTILE_P99_RATIO_MAX: u64 = 4;
const HOSTILE_P99_EXTRA_MAX_MS: u64 = 500;
const HOSTILE_P99_FLOOR_MS: u64 = 1_500;
/// The floor for a debug build of the agents (CI's): the same attack measured the other
/// tenant's p99 at 1.5 to 2.6 s on debug (0.13 s on release, 2 cores), over baselines from 0.3
/// to 1.2 s, so release's floor decided on noise there.
const HOSTILE_P99_FLOOR_DEBUG_MS: u64 = 3_000;
/// Both p99s are the median of this long windows' p99s: one burst of CPU contention on 2 cores
/// (one window's p99 at 3 s while the others' were under 1 s) no longer decides the verdict,
/// while a tenant slowed for the whole attack, as the regressions were, still fails it.
const HOSTILE_P99_WINDOW_MS: u64 = 5_000;

/// The median of windows' p99s ([`HOSTILE_P99_WINDOW_MS`]) and the writes they hold.
fn windowed_p99(history: &History, from: u64, to: u64) -> (u64, usize, Vec<u64>) {
    let windows = history.produce_p99_windows(from, to, HOSTILE_P99_WINDOW_MS);
    let mut p99s: Vec<u64> = windows.iter().map(|w| w.0).collect();
    let writes = windows.iter().map(|w| w.1).sum();
    let shown = p99s.clone();
    p99s.sort_unstable();
    (p99s.get(p99s.len() / 2).copied().unwrap_or(0), writes, shown)
}

/// Creates tenants `chaos` (the workloads) and `hostile` (the attacker, with a produce quota, a
/// second API key and its topics), and makes every workload client act as `chaos`. Returns the
/// attacker's target.
async fn set_up_tenants(
    cluster: &Cluster,
    bootstrap: &str,
    attacks: Vec<workloads::hostile::AttackKind>,
) -> anyhow::Result<workloads::hostile::Target> {
    let password = format!("pw-{}", seed_from_clock());
    let mut keys = Vec::new();
    for tenant in ["chaos", "hostile"] {
        cluster.admin_tenants(&["create", tenant], None).await?;
        let add = ["add-user", "--tenant", tenant, tenant, "--password-stdin"];
        cluster.admin_tenants(&add, Some(&format!("{password}\n"))).await?;
        keys.push(create_api_key(cluster, tenant).await?);
    }
    let quota = workloads::hostile::PRODUCE_QUOTA_BYTES_PER_SEC.to_string();
    cluster.admin_tenants(&["set-quotas", "--tenant", "hostile", "--produce-bytes-per-sec", &quota], None).await?;
    let target = workloads::hostile::Target {
        kafka: cluster.kafka_addrs(),
        http: cluster.http_urls(),
        bootstrap: bootstrap.to_owned(),
        cluster_id: String::new(),
        source: cluster.net.attacker.parse().context("attacker address")?,
        user: "hostile".into(),
        password: password.clone(),
        api_key: keys[1].clone(),
        schema_api_key: create_api_key(cluster, "hostile").await?,
        attacks,
    };
    workloads::hostile::create_topics(&target).await?;
    workloads::act_as(workloads::Credentials { user: "chaos".into(), password, api_key: keys[0].clone() });
    Ok(target)
}

/// A new API key of `tenant`'s user of the same name: its token.
async fn create_api_key(cluster: &Cluster, tenant: &str) -> anyhow::Result<String> {
    let created = cluster.admin_tenants(&["create-api-key", "--tenant", tenant, "--user", tenant], None).await?;
    let created: serde_json::Value = serde_json::from_str(&created).context("create-api-key output")?;
    Ok(created["token"].as_str().context("no API key token")?.to_owned())
}

fn floe_binary(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join("floe")))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("floe"))
    })
}

fn seed_from_clock() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
}

/// Waits for every agent's /readyz.
async fn agents_ready(http: &reqwest::Client, urls: &[String], timeout: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    for url in urls {
        loop {
            let ready = http.get(format!("{url}/readyz")).timeout(Duration::from_secs(2)).send().await;
            if ready.is_ok_and(|r| r.status().is_success()) {
                break;
            }
            if started.elapsed() > timeout {
                bail!("{url}/readyz not ready after {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

async fn create_topics(bootstrap: &str) -> anyhow::Result<()> {
    use workloads::*;
    // Before the list that borrows them.
    let retention = retained::retention_topics();
    let admin: AdminClient<DefaultClientContext> = client(bootstrap).create().context("admin client")?;
    let topics = [
        (IDEMPOTENT_TOPIC, IDEMPOTENT_PARTITIONS),
        (HTTP_TOPIC, HTTP_PARTITIONS),
        (TXN_INPUT_TOPIC, TXN_PARTITIONS),
        (TXN_OUTPUT_TOPIC, TXN_PARTITIONS),
        (PROBE_TOPIC, 1),
        (retained::RETAINED_TOPIC, retained::RETAINED_PARTITIONS),
    ];
    let mut new: Vec<_> = topics.iter().map(|(t, p)| NewTopic::new(t, *p, TopicReplication::Fixed(-1))).collect();
    let mut compacted =
        NewTopic::new(changelog::CHANGELOG_TOPIC, changelog::CHANGELOG_PARTITIONS, TopicReplication::Fixed(-1));
    for (name, value) in changelog::CHANGELOG_CONFIGS {
        compacted = compacted.set(name, value);
    }
    new.push(compacted);
    new.extend(retention.iter().map(|(topic, partitions, configs)| retained::new_topic(topic, *partitions, configs)));
    let mut table_topic = NewTopic::new(table::TABLE_TOPIC, table::TABLE_PARTITIONS, TopicReplication::Fixed(-1));
    for (name, value) in table::TABLE_CONFIGS {
        table_topic = table_topic.set(name, value);
    }
    new.push(table_topic);
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin.create_topics(&new, &options).await? {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((name, code)) => bail!("creating topic {name}: {code}"),
        }
    }
    Ok(())
}

/// After the faults: every process up, one leader all metadata nodes agree on, every agent
/// ready and able to write and read a record over HTTP. Returns how long that took.
async fn recover(cluster: &tokio::sync::Mutex<Cluster>, http: &reqwest::Client) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let urls = {
        let mut c = cluster.lock().await;
        c.net.heal()?;
        std::fs::write(&c.fault_file, "")?;
        let restarted = c.revive_all()?;
        if !restarted.is_empty() {
            eprintln!("floe-chaos: restarted {restarted:?}");
        }
        c.http_urls()
    };
    loop {
        let c = cluster.lock().await;
        let mut seen = Vec::new();
        for i in 0..c.metadata.len() {
            seen.push(c.leader_seen_by(i).await);
        }
        drop(c);
        if seen[0].is_some() && seen.iter().all(|s| *s == seen[0]) {
            break;
        }
        if started.elapsed() > RECOVERY_TIMEOUT {
            bail!("the metadata nodes did not agree on a leader within {RECOVERY_TIMEOUT:?}: {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    agents_ready(http, &urls, RECOVERY_TIMEOUT.saturating_sub(started.elapsed())).await?;
    let cluster_id = {
        let body = http.get(format!("{}/v3/clusters", urls[0])).send().await?.bytes().await?;
        let list: serde_json::Value = serde_json::from_slice(&body)?;
        list["data"][0]["cluster_id"].as_str().context("no cluster id")?.to_owned()
    };
    for url in &urls {
        loop {
            if probe(http, url, &cluster_id).await.is_ok() {
                break;
            }
            if started.elapsed() > RECOVERY_TIMEOUT {
                let error = probe(http, url, &cluster_id).await.err().unwrap_or_default();
                bail!("{url} could not write and read a record within {RECOVERY_TIMEOUT:?}: {error}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(started.elapsed())
}

/// Writes one record through the agent at `url` and reads it back there.
async fn probe(http: &reqwest::Client, url: &str, cluster: &str) -> Result<(), String> {
    let topic = workloads::PROBE_TOPIC;
    let body = serde_json::json!({"partition_id": 0, "value": {"type": "STRING", "data": format!("probe-{url}")}});
    let written = http
        .post(format!("{url}/v3/clusters/{cluster}/topics/{topic}/records"))
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !written.status().is_success() {
        return Err(format!("write: HTTP {}", written.status()));
    }
    let answer: serde_json::Value =
        serde_json::from_slice(&written.bytes().await.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let offset = answer["offset"].as_i64().ok_or("write: no offset")?;
    let read = http
        .get(format!("{url}/v3/clusters/{cluster}/topics/{topic}/partitions/0/records?offset={offset}&max_records=1"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !read.status().is_success() {
        return Err(format!("read: HTTP {}", read.status()));
    }
    Ok(())
}

/// Waits until the transform has committed offsets at the end of its input.
async fn transform_caught_up(bootstrap: &str) -> anyhow::Result<()> {
    use workloads::{TXN_GROUP, TXN_INPUT_TOPIC, TXN_PARTITIONS};
    let started = Instant::now();
    loop {
        let ends = {
            let bootstrap = bootstrap.to_owned();
            tokio::task::spawn_blocking(move || -> anyhow::Result<(Vec<i64>, Vec<Option<i64>>)> {
                let ends = check::end_offsets(&bootstrap, TXN_INPUT_TOPIC, TXN_PARTITIONS, true)?;
                let committed = groups::committed(&bootstrap, TXN_GROUP, TXN_INPUT_TOPIC, TXN_PARTITIONS)?;
                Ok((ends, committed))
            })
            .await?
        };
        match ends {
            Ok((ends, committed)) if ends.iter().zip(&committed).all(|(e, c)| *e == 0 || *c == Some(*e)) => {
                return Ok(());
            }
            Ok((ends, committed)) if started.elapsed() > CATCH_UP_TIMEOUT => {
                bail!(
                    "the transform did not catch up within {CATCH_UP_TIMEOUT:?}: input ends {ends:?}, committed {committed:?}"
                )
            }
            Err(e) if started.elapsed() > CATCH_UP_TIMEOUT => return Err(e),
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

fn print_verdict(checked: &check::Checked, faults: &std::collections::BTreeMap<String, u64>, problems: &[String]) {
    let pass = checked.violations.is_empty() && problems.is_empty();
    println!("\nfloe-chaos: {}", if pass { "PASS" } else { "FAIL" });
    let injected: u64 = faults.values().sum();
    println!("  faults injected: {injected} {faults:?}");
    for (topic, f) in &checked.topics {
        println!(
            "  {topic}: {} acknowledged, {} failed or unknown, {} read; lost {}, duplicated {}, misplaced {}, out of order {}, gaps {}",
            f.acknowledged, f.failed_or_unknown, f.read, f.lost, f.duplicated, f.misplaced, f.out_of_order, f.gaps
        );
    }
    let t = &checked.transactions;
    println!(
        "  transactions: {} committed, {} aborted, {} unknown ({} of them visible); {} inputs, {} outputs; \
         partial {}, aborted visible {}, inputs missing {}, inputs repeated {}",
        t.committed,
        t.aborted,
        t.unknown,
        t.unknown_visible,
        t.inputs,
        t.outputs,
        t.partial,
        t.aborted_visible,
        t.inputs_missing,
        t.inputs_repeated
    );
    println!(
        "  group offsets: {} observations, {} applied out of order or went back, {} went back to a commit librdkafka resent",
        checked.offset_observations, checked.offsets_backwards, checked.offsets_resent_back
    );
    let r = &checked.registry;
    println!(
        "  schemas: {} registered, {} failed or unknown; versions lost {}, changed {}, ids shared {}",
        r.registered, r.failed_or_unknown, r.versions_lost, r.versions_changed, r.ids_shared
    );
    let c = &checked.changelog;
    println!(
        "  changelog (compacted, transactional): {} committed, {} aborted, {} unknown writes; {} read_committed and {} \
         read_uncommitted restores, {} records read; aborted visible {}, committed hidden {}, older after newer {}, \
         offsets moved {}",
        c.committed,
        c.aborted,
        c.unknown,
        c.restores_read_committed,
        c.restores_read_uncommitted,
        c.records_read,
        c.aborted_visible,
        c.committed_hidden,
        c.older_after_newer,
        c.offsets_moved
    );
    for (topic, r) in &checked.retained {
        println!(
            "  log start moved ({topic}): {} cuts answered, {} reads, {} records read, log starts reached {} (summed); \
             deleted visible {}, went back {}, lost {}, misplaced {}, gaps {}",
            r.cuts_answered,
            r.reads,
            r.records_read,
            r.log_start_max,
            r.deleted_visible,
            r.log_start_back,
            r.lost,
            r.misplaced,
            r.gaps
        );
    }
    let g = &checked.restarts;
    println!(
        "  restarting group ({}): {} incarnations, {} records consumed ({} again after a restart), {} offsets \
         committed, {} records removed before read; read below committed {}, skipped {}, misplaced {}",
        workloads::RESTART_GROUP,
        g.incarnations,
        g.records_consumed,
        g.reread,
        g.commits_stored,
        g.removed_before_read,
        g.read_below_committed,
        g.skipped,
        g.misplaced
    );
    let t = &checked.table;
    if t.read_back {
        println!(
            "  table ({}, upsert): {} committed, {} aborted, {} unknown writes; {} rows{}; aborted visible {}, keys \
             twice {}, never written {}, missing {}, stale {}",
            table::TABLE_TOPIC,
            t.committed,
            t.aborted,
            t.unknown,
            t.rows,
            if t.caught_up { "" } else { " (did not catch up)" },
            t.aborted_visible,
            t.keys_twice,
            t.never_written,
            t.missing,
            t.stale
        );
    } else {
        println!("  table ({}): not read back (no Python with pyiceberg; see --python)", table::TABLE_TOPIC);
    }
    let by_fault: Vec<String> = checked.longest_stall_by_fault_s.iter().map(|(f, s)| format!("{f} {s:.1}")).collect();
    println!(
        "  availability: longest time without an acknowledged write {:.1} s; by fault (s): {}",
        checked.longest_stall_s,
        by_fault.join(", ")
    );
    if !checked.violations_by_kind.is_empty() {
        println!("  violations by kind: {:?}", checked.violations_by_kind);
    }
    for problem in problems {
        println!("  PROBLEM: {problem}");
    }
    for v in checked.violations.iter().take(check::VIOLATIONS_SHOWN) {
        println!("  VIOLATION {}: {}", v.kind, v.detail);
        for entry in &v.history {
            println!("      {}", serde_json::to_string(entry).unwrap_or_default());
        }
    }
    if checked.violations.len() > check::VIOLATIONS_SHOWN {
        println!("  ... and {} more violations (see the report)", checked.violations.len() - check::VIOLATIONS_SHOWN);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if let Some(target) = &args.hostile_attack {
        return workloads::hostile::run_child(target).await;
    }
    let duration = if args.long { Duration::from_secs(1800) } else { args.duration };
    if duration.is_zero() || duration > DURATION_MAX {
        bail!("--duration must be between 1 s and {DURATION_MAX:?}");
    }
    let seed = args.seed.unwrap_or_else(seed_from_clock);
    let floe = floe_binary(args.floe);
    let python_given = args.python.is_some();
    let python = table::python(args.python.clone());
    let work_dir =
        args.work_dir.unwrap_or_else(|| std::env::temp_dir().join(format!("floe-chaos-{}-{seed}", std::process::id())));
    std::fs::create_dir_all(&work_dir).with_context(|| format!("creating {}", work_dir.display()))?;
    let kinds = if args.faults.is_empty() { FaultKind::defaults(duration) } else { args.faults.clone() };
    let (hold, gap) = if args.long {
        ((Duration::from_secs(2), Duration::from_secs(15)), (Duration::from_secs(1), Duration::from_secs(10)))
    } else {
        ((Duration::from_secs(2), Duration::from_secs(6)), (Duration::from_secs(1), Duration::from_secs(4)))
    };
    let hold = (args.hold_min.unwrap_or(hold.0), args.hold_max.unwrap_or(hold.1));
    if hold.0 > hold.1 || hold.1 > duration {
        bail!("--hold-min must not exceed --hold-max, nor --hold-max the duration");
    }
    let schedule = Schedule { kinds, hold, gap, overlap: args.overlap }.usable(args.network);
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let drawn: Vec<String> = if args.hostile_tenant && args.faults.is_empty() {
        Vec::new()
    } else {
        schedule.kinds.iter().map(|k| k.name()).collect()
    };
    eprintln!(
        "floe-chaos: seed {seed}, {duration:?} of faults from {drawn:?}{}, network {:?}, {} agents, {cores} cores; work dir {}",
        if args.hostile_tenant { " and a hostile tenant" } else { "" },
        args.network,
        args.agents,
        work_dir.display()
    );

    let mut cluster = Cluster::new(
        &floe,
        &work_dir,
        args.network,
        args.agents as usize,
        args.s3_server.as_deref(),
        args.metadata_certs_script.as_deref(),
        args.hostile_tenant,
    )
    .await?;
    eprintln!("floe-chaos: objects in {}", cluster.object_store());
    cluster.start()?;
    let bootstrap = cluster.bootstrap();
    let urls = cluster.http_urls();
    let network = cluster.net.mode();
    let cluster = Arc::new(tokio::sync::Mutex::new(cluster));
    {
        // Interrupted: stop every process and remove the namespaces before exiting.
        let cluster = cluster.clone();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            let mut c = cluster.lock().await;
            c.stop();
            c.net.teardown();
            eprintln!("floe-chaos: interrupted; every process stopped");
            std::process::exit(130);
        });
    }
    // Everything after the start runs in here, so the cluster is stopped however it ends.
    let outcome: anyhow::Result<bool> = async {
        agents_ready(&workloads::http_client()?, &urls, Duration::from_secs(60)).await?;
        let hostile_target = if args.hostile_tenant {
            let attacks = if args.attacks.is_empty() {
                workloads::hostile::AttackKind::DEFAULT.to_vec()
            } else {
                args.attacks.clone()
            };
            let mut target = set_up_tenants(&*cluster.lock().await, &bootstrap, attacks).await?;
            let http = workloads::http_client()?;
            let body = http.get(format!("{}/v3/clusters", urls[0])).send().await?.bytes().await?;
            let list: serde_json::Value = serde_json::from_slice(&body).context("/v3/clusters")?;
            list["data"][0]["cluster_id"].as_str().context("no cluster id")?.clone_into(&mut target.cluster_id);
            Some(target)
        } else {
            None
        };
        // Made after `set_up_tenants`, so it carries the workloads' API key.
        let http_client = workloads::http_client()?;
        create_topics(&bootstrap).await?;
        if args.hostile_tenant {
            eprintln!(
                "floe-chaos: as a tenant the workloads may alter no broker config, so retention keeps its default \
                 check interval and likely removes nothing from the retention topics"
            );
        } else {
            retained::set_retention_check_interval(&bootstrap).await?;
        }

        let history = Arc::new(History::new());
        // Processes that exited on their own: each a problem. The watch stops when the set is
        // dropped, however this block ends.
        let exits = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut exit_watch = tokio::task::JoinSet::new();
        exit_watch.spawn(faults::watch_exits(cluster.clone(), history.clone(), exits.clone()));
        let (writers, transform, readers) = (Stop::default(), Stop::default(), Stop::default());
        let mut producers = tokio::task::JoinSet::new();
        for id in 0..2 {
            let spec = produce::ProduceSpec {
                topic: workloads::IDEMPOTENT_TOPIC,
                partitions: workloads::IDEMPOTENT_PARTITIONS,
                prefix: "idem",
                id,
                per_second: args.rate,
                stamped: false,
            };
            producers.spawn(produce::run(bootstrap.clone(), spec, writers.clone(), history.clone()));
            producers.spawn(http::run(
                urls.clone(),
                workloads::HTTP_TOPIC,
                workloads::HTTP_PARTITIONS,
                id,
                writers.clone(),
                history.clone(),
            ));
            producers.spawn(registry::run(urls.clone(), id, writers.clone(), history.clone()));
        }
        let input = produce::ProduceSpec {
            topic: workloads::TXN_INPUT_TOPIC,
            partitions: workloads::TXN_PARTITIONS,
            prefix: "in",
            id: 0,
            per_second: (args.rate / 4).max(1),
            stamped: false,
        };
        producers.spawn(produce::run(bootstrap.clone(), input, writers.clone(), history.clone()));
        producers.spawn(changelog::run_idempotent(
            bootstrap.clone(),
            changelog::CHANGELOG,
            (args.rate / 4).max(1),
            writers.clone(),
            history.clone(),
        ));
        let mut threads = Vec::new();
        let restores = changelog::Restores::default();
        let retained_reads = retained::Reads::default();
        producers.spawn(retained::run_producer(bootstrap.clone(), (args.rate / 4).max(1), writers.clone(), history.clone()));
        producers.spawn(retained::run_deleter(bootstrap.clone(), writers.clone(), history.clone()));
        for topic in [retained::RETENTION_TIME_TOPIC, retained::RETENTION_SIZE_TOPIC] {
            let spec = retained::retention_producer_spec(topic, (args.rate / 8).max(1));
            producers.spawn(produce::run(bootstrap.clone(), spec, writers.clone(), history.clone()));
        }
        // The table topic's writers: the changelog's, at half its idempotent rate and a
        // transaction every half second.
        producers.spawn(changelog::run_idempotent(
            bootstrap.clone(),
            table::TABLE,
            (args.rate / 8).max(1),
            writers.clone(),
            history.clone(),
        ));
        {
            let (b, s, h) = (bootstrap.clone(), writers.clone(), history.clone());
            let trace = work_dir.join("table-client.log");
            let writer = move || changelog::run_transactional(b, table::TABLE, s, h, &trace);
            threads.push(("table writer", std::thread::spawn(writer)));
        }
        let incarnations = groups::Incarnations::default();
        let restart = groups::RestartSpec {
            group: workloads::RESTART_GROUP,
            topic: retained::RETENTION_TIME_TOPIC,
            partitions: retained::RETENTION_PARTITIONS,
        };
        {
            let (b, s, h, i) = (bootstrap.clone(), readers.clone(), history.clone(), incarnations.clone());
            let member = move || groups::restarting_member(b, restart, s, h, i);
            threads.push(("restarting group member", std::thread::spawn(member)));
        }
        {
            let (b, s, h, r) = (bootstrap.clone(), readers.clone(), history.clone(), retained_reads.clone());
            threads.push(("retained reader", std::thread::spawn(move || retained::run_reader(b, s, h, r))));
        }
        {
            let (b, s, h) = (bootstrap.clone(), writers.clone(), history.clone());
            let trace = work_dir.join("changelog-client.log");
            let writer = move || changelog::run_transactional(b, changelog::CHANGELOG, s, h, &trace);
            threads.push(("changelog writer", std::thread::spawn(writer)));
            let (b, s, h, r) = (bootstrap.clone(), readers.clone(), history.clone(), restores.clone());
            threads.push(("changelog restorer", std::thread::spawn(move || changelog::run_restorer(b, s, h, r))));
        }
        {
            let (b, s, h) = (bootstrap.clone(), transform.clone(), history.clone());
            let trace = work_dir.join("transform-client.log");
            threads.push(("transform", std::thread::spawn(move || transactions::run(b, s, h, &trace))));
        }
        for commits in [groups::Commits::OneAtATime, groups::Commits::Pipelined] {
            let (b, s, h) = (bootstrap.clone(), readers.clone(), history.clone());
            let (group, topic) = (workloads::READER_GROUP, workloads::IDEMPOTENT_TOPIC);
            let member = move || groups::member(b, group, topic, commits, s, h);
            threads.push(("group member", std::thread::spawn(member)));
        }
        for (group, topic, partitions) in [
            (workloads::READER_GROUP, workloads::IDEMPOTENT_TOPIC, workloads::IDEMPOTENT_PARTITIONS),
            (workloads::TXN_GROUP, workloads::TXN_INPUT_TOPIC, workloads::TXN_PARTITIONS),
            (workloads::RESTART_GROUP, retained::RETENTION_TIME_TOPIC, retained::RETENTION_PARTITIONS),
        ] {
            let (b, s, h) = (bootstrap.clone(), readers.clone(), history.clone());
            threads.push((
                "offset observer",
                std::thread::spawn(move || groups::observe(b, group, topic, partitions, s, h)),
            ));
        }

        let progress = {
            let (history, writers) = (history.clone(), writers.clone());
            tokio::spawn(async move {
                while !writers.is_set() {
                    tokio::time::sleep(PROGRESS_EVERY).await;
                    let (acked, failed, txns) = history.tally();
                    let t = history.now_ms() as f64 / 1000.0;
                    eprintln!(
                        "floe-chaos: {t:>6.1}s  {acked} acknowledged, {failed} failed, {txns} transactions committed"
                    );
                }
            })
        };
        let attack = match hostile_target {
            Some(target) => {
                // The first seconds include the clients' own start; the rest is the baseline,
                // over which the agents' health checks are watched too.
                let from = history.now_ms() + HOSTILE_WARM_UP_MS;
                let warm_up = Duration::from_millis(HOSTILE_WARM_UP_MS);
                tokio::time::sleep(warm_up).await;
                let agents = cluster.lock().await.agent_processes();
                let profile = match agents.first() {
                    Some(agent) => health::Profile::of(&agent.http_url).await,
                    None => health::Profile::Release,
                };
                let health_bound = profile.health_answer_max();
                let watch = health::Watch::start(agents.clone(), history.clone(), health_bound)?;
                tokio::time::sleep(HOSTILE_BASELINE.saturating_sub(warm_up)).await;
                let before = watch.stop().await;
                eprintln!("floe-chaos: the hostile tenant attacks for {duration:?}");
                let running = workloads::hostile::spawn(&target, &work_dir.join("hostile-tenant.log"))?;
                let watch = health::Watch::start(agents, history.clone(), health_bound)?;
                Some((from, history.now_ms(), running, before, watch, profile))
            }
            None => None,
        };
        let end = Instant::now() + duration;
        let fault_counts = if args.hostile_tenant && args.faults.is_empty() {
            tokio::time::sleep_until(end.into()).await;
            Default::default()
        } else {
            faults::run(cluster.clone(), schedule, seed, end, history.clone()).await?
        };
        let mut problems = Vec::new();
        // Lines of the verdict about the hostile tenant's attacks beyond its p99s.
        let mut hostile_lines = Vec::new();
        let hostile = match attack {
            Some((baseline_from, attack_from, running, vitals_before, watch, profile)) => {
                let health_bound = profile.health_answer_max();
                let floor = match profile {
                    health::Profile::Release => HOSTILE_P99_FLOOR_MS,
                    health::Profile::Debug => HOSTILE_P99_FLOOR_DEBUG_MS,
                };
                let attack_to = history.now_ms();
                let vitals = watch.stop().await;
                let counts = running.stop().await?;
                let (baseline, baseline_n, baseline_windows) = windowed_p99(&history, baseline_from, attack_from);
                let (attacked, attacked_n, attacked_windows) = windowed_p99(&history, attack_from, attack_to);
                let (overall, _) = history.produce_p99(attack_from, attack_to);
                let bound = (baseline * HOSTILE_P99_RATIO_MAX)
                    .max(baseline + HOSTILE_P99_EXTRA_MAX_MS)
                    .max(floor);
                if attacked > bound || attacked_n == 0 {
                    problems.push(format!(
                        "tenant chaos's produce p99 under attack (median of {HOSTILE_P99_WINDOW_MS} ms windows) was {attacked} ms over {attacked_n} writes, past the \
                         bound of {bound} ms ({HOSTILE_P99_RATIO_MAX} x or +{HOSTILE_P99_EXTRA_MAX_MS} ms of the {baseline} ms before, at least \
                         {floor} ms for a {} build)",
                        profile.name()
                    ));
                }
                // A fault (an agent paused, killed or cut off) keeps health checks and schema
                // requests from being answered by design: those are judged only without faults.
                if fault_counts.values().sum::<u64>() == 0 {
                    problems.extend(health::problems(&vitals, urls.len(), health_bound));
                    if counts.schema_failed > 0 {
                        problems.push(format!(
                            "{} of the hostile tenant's schema requests were neither answered nor refused (timed out \
                             after {:?}, the connection failed, or a server error other than 50003): {:?}",
                            counts.schema_failed,
                            workloads::HTTP_REQUEST_TIMEOUT,
                            counts.schema_answers
                        ));
                    }
                }
                hostile_lines.push(format!(
                    "health checks under attack (bound {} ms): {}",
                    health_bound.as_millis(),
                    health::summary(&vitals)
                ));
                hostile_lines.push(format!("health checks before: {}", health::summary(&vitals_before)));
                hostile_lines.push(format!(
                    "shared-type schemas: {} neither answered nor refused; answers {:?}; slowest answer (ms) {:?}; records {:?}",
                    counts.schema_failed, counts.schema_answers, counts.schema_slowest_ms, counts.schema_records
                ));
                hostile_lines.push(format!(
                    "connection churn: {} connections dropped ({} after half a frame), {} not made",
                    counts.churned, counts.churned_half_frames, counts.churn_connect_failed
                ));
                Some(serde_json::json!({
                    "produce_p99_ms_before": baseline,
                    "writes_before": baseline_n,
                    "produce_p99_ms_under_attack": attacked,
                    "writes_under_attack": attacked_n,
                    "produce_p99_ms_by_window_before": baseline_windows,
                    "produce_p99_ms_by_window_under_attack": attacked_windows,
                    "produce_p99_ms_overall_under_attack": overall,
                    "bound_ms": bound,
                    "health_answer_max_ms": health_bound.as_millis() as u64,
                    "build_profile": profile.name(),
                    "agents_before": vitals_before,
                    "agents_under_attack": vitals,
                    "attack": counts,
                }))
            }
            None => None,
        };
        eprintln!("floe-chaos: faults over; healing and waiting for recovery");
        let recovery = match recover(&cluster, &http_client).await {
            Ok(took) => Some(took),
            Err(e) => {
                problems.push(format!("did not recover: {e:#}"));
                None
            }
        };
        writers.set();
        while let Some(done) = producers.join_next().await {
            if let Err(e) = done? {
                problems.push(format!("a writer failed: {e:#}"));
            }
        }
        progress.abort();
        eprintln!("floe-chaos: writers done; waiting for the transform to catch up");
        if let Err(e) = transform_caught_up(&bootstrap).await {
            problems.push(format!("{e:#}"));
        }
        transform.set();
        readers.set();
        let stopping = Instant::now();
        let mut left_behind = Vec::new();
        for (name, thread) in threads {
            // A client call stuck inside librdkafka (some wait without a bound) must not hang the
            // run: a workload that does not stop in time is a problem, and is left behind.
            while !thread.is_finished() && stopping.elapsed() < STOP_TIMEOUT {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            if !thread.is_finished() {
                problems.push(format!("the {name} did not stop within {STOP_TIMEOUT:?} (a client call is stuck)"));
                left_behind.push(name);
                continue;
            }
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!("the {name} failed: {e:#}")),
                Err(_) => problems.push(format!("the {name} panicked")),
            }
        }
        eprintln!("floe-chaos: checking");
        // A last restore of the changelog with each isolation level, after every fault healed.
        for read_committed in [true, false] {
            let (b, h) = (bootstrap.clone(), history.clone());
            match tokio::task::spawn_blocking(move || changelog::restore(&b, read_committed, &h)).await? {
                Ok(read) => restores.lock().unwrap_or_else(|p| p.into_inner()).push(read),
                Err(e) => problems.push(format!("the last changelog restore (read_committed {read_committed}): {e:#}")),
            }
        }
        for t in retained::LOG_START_TOPICS {
            let (b, h) = (bootstrap.clone(), history.clone());
            match tokio::task::spawn_blocking(move || retained::read(&b, t, &h)).await? {
                Ok(read) => retained_reads.lock().unwrap_or_else(|p| p.into_inner()).push(read),
                Err(e) => problems.push(format!("the last read of {}: {e:#}", t.topic)),
            }
        }
        // The table, once it holds the topic to its end (its writers have stopped by now, unless
        // one was left behind).
        let table_read = match &python {
            Some(python) => {
                let caught_up = match table::wait_caught_up(&cluster, &history).await {
                    Ok(caught_up) => Some(caught_up),
                    Err(e) => {
                        problems.push(e);
                        None
                    }
                };
                let s3 = cluster.lock().await.uses_s3();
                let at_least = caught_up.as_ref().and_then(|c| c.metadata_location.as_deref());
                match table::read_rows(python, &urls[0], s3, at_least).await {
                    Ok(Some(rows)) => {
                        let caught_up_ms = caught_up.as_ref().map(|c| c.asked_ms);
                        let writers_stopped = !left_behind.contains(&"table writer");
                        Some(table::TableRead { caught_up_ms, writers_stopped, rows })
                    }
                    Ok(None) => {
                        let why = format!("{} does not run or has no pyiceberg", python.display());
                        if python_given {
                            problems.push(format!("the table of {} was not read: {why}", table::TABLE_TOPIC));
                        } else {
                            eprintln!("floe-chaos: the table is not judged: {why}");
                        }
                        None
                    }
                    Err(e) => {
                        problems.push(format!("reading the table of {}: {e:#}", table::TABLE_TOPIC));
                        None
                    }
                }
            }
            None => None,
        };
        let entries = history.snapshot();
        let mut checked = {
            let (b, e) = (bootstrap.clone(), entries.clone());
            tokio::task::spawn_blocking(move || check::run(&b, &e)).await??
        };
        check::changelog::check(&entries, &restores.lock().unwrap_or_else(|p| p.into_inner()), &mut checked);
        check::retained::check(&entries, &retained_reads.lock().unwrap_or_else(|p| p.into_inner()), &mut checked);
        check::restarts::check(&entries, restart, &incarnations.lock().unwrap_or_else(|p| p.into_inner()), &mut checked);
        check::table::check(&entries, table_read.as_ref(), &mut checked);
        let schemas = check::registry::read_back(&http_client, &urls[0], &entries).await?;
        check::registry::check(&entries, &schemas, &mut checked);
        exit_watch.shutdown().await;
        {
            let mut c = cluster.lock().await;
            faults::record_exits(&mut c, &history, &exits);
            c.stop();
        }
        problems.append(&mut exits.lock().unwrap_or_else(|p| p.into_inner()));
        print_verdict(&checked, &fault_counts, &problems);
        if let Some(h) = &hostile {
            println!(
                "  hostile tenant: tenant chaos's produce p99 {} ms before ({} writes), {} ms under attack ({} writes; \
                 median of 5 s windows {}, overall {} ms), bound {} ms",
                h["produce_p99_ms_before"],
                h["writes_before"],
                h["produce_p99_ms_under_attack"],
                h["writes_under_attack"],
                h["produce_p99_ms_by_window_under_attack"],
                h["produce_p99_ms_overall_under_attack"],
                h["bound_ms"]
            );
            println!("  attack: {}", h["attack"]);
        }
        for line in &hostile_lines {
            println!("  {line}");
        }
        let pass = checked.violations.is_empty() && problems.is_empty();
        if let Some(took) = recovery {
            println!("  recovery after the last fault healed: {:.1} s", took.as_secs_f64());
        }
        history.write_jsonl(&work_dir.join("history.jsonl"))?;
        if let Err(e) = plot::write(&work_dir.join("timeline.svg"), &entries) {
            eprintln!("floe-chaos: no plot: {e:#}");
        }
        let report = serde_json::json!({
            "format": "floe-chaos-report/1",
            "verdict": if pass { "pass" } else { "fail" },
            "seed": seed,
            "duration_s": duration.as_secs_f64(),
            "network": format!("{network:?}").to_lowercase(),
            "agents": args.agents,
            "cores": cores,
            "faults": fault_counts,
            "recovery_s": recovery.map(|d| d.as_secs_f64()),
            "problems": problems,
            "hostile_tenant": hostile,
            "checked": checked,
        });
        std::fs::write(work_dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
        println!("  report, history and plot: {}/{{report.json,history.jsonl,timeline.svg}}", work_dir.display());
        if !pass {
            println!("  process logs: {}/*.log; repeat with --seed {seed}", work_dir.display());
        }
        Ok(pass)
    }
    .await;
    let mut c = cluster.lock().await;
    c.stop();
    c.net.teardown();
    drop(c);
    if !outcome? {
        std::process::exit(1);
    }
    Ok(())
}
