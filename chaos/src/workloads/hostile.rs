//! The hostile tenant (`--hostile-tenant`): while the other workloads run as tenant `chaos`,
//! tenant `hostile` attacks the agents from an address of its own, as a customer sharing the
//! endpoint could: idle Kafka connections up to and past the per-address limit, oversized and
//! malformed frames before authentication, HTTP long-polls up to and past its in-flight limits,
//! produce far over its byte-rate quota, issue 52's shared-type schemas against the registry
//! ([`schemas`]) and on table topics ([`tables`]), and connections opened and dropped as fast
//! as it can ([`churn`]). It checks nothing itself: the verdict holds the other tenant to its
//! guarantees and its produce latency to a bound, the agents' health checks to an answer within
//! a second, and the schema requests to an answer that is a success or a refusal.
//!
//! The attack runs in a child process of its own ([`spawn`]), niced: on a real endpoint the
//! attacker's CPU is its own, while here it shares the machine with the other tenant's
//! clients, which must not be slowed by the attacker's client side rather than by the agents.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;

use super::Stop;

mod churn;
mod schemas;
mod shared_types;
mod tables;
#[cfg(test)]
mod tests;

/// The hostile tenant's topic: the flood goes to partition 0, long-polls wait on the others.
pub(crate) const FLOOD_TOPIC: &str = "flood";
pub(crate) const FLOOD_PARTITIONS: i32 = 3;
/// The hostile tenant's produce quota (cluster-wide, bytes per second).
pub(crate) const PRODUCE_QUOTA_BYTES_PER_SEC: u64 = 256 * 1024;
/// Idle connections kept open per agent: past the agents' 1,000 per address.
const IDLE_PER_AGENT: usize = 1_200;
/// HTTP long-polls kept open per agent: past the 1,000 in flight per key.
const LONG_POLLS_PER_AGENT: usize = 1_100;
/// How long an idle connection the agent closed at once (past the per-address limit) waits
/// before the next: the attack holds connections rather than storming the harness's own CPU,
/// which the other tenant shares on one machine.
const REFUSED_BACKOFF: Duration = Duration::from_secs(1);
/// Connections sending bad frames at once (each waits up to 2 s for an answer).
const BAD_FRAME_SENDERS: usize = 8;
/// Bytes of each record of the quota-busting producer.
const FLOOD_RECORD_BYTES: usize = 16 * 1024;

impl AttackKind {
    /// The attacks made unless `--attacks` names others (as CI runs them): all of them.
    pub(crate) const DEFAULT: [Self; 7] =
        [Self::Idle, Self::Frames, Self::LongPolls, Self::Flood, Self::Schemas, Self::Tables, Self::Churn];
}

/// One kind of attack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
pub(crate) enum AttackKind {
    /// Idle Kafka connections, past the per-address limit.
    Idle,
    /// Oversized and malformed frames before authentication.
    Frames,
    /// HTTP long-polls, past the in-flight limit per key.
    LongPolls,
    /// Produce far past the tenant's byte-rate quota.
    Flood,
    /// Shared-type schemas registered and checked through the registry, and records validated
    /// against one.
    Schemas,
    /// Shared-type schemas as table topics' value schemas, with records written with them.
    Tables,
    /// Kafka connections opened and dropped at once, some after half a frame.
    Churn,
}

/// Where and as whom the hostile tenant attacks.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Target {
    pub(crate) kafka: Vec<SocketAddr>,
    pub(crate) http: Vec<String>,
    pub(crate) bootstrap: String,
    pub(crate) cluster_id: String,
    /// The attacker's own source address.
    pub(crate) source: IpAddr,
    pub(crate) user: String,
    pub(crate) password: String,
    pub(crate) api_key: String,
    /// A second key of the tenant's, for the schema attacks: the long-polls keep their key at
    /// its 1,000 requests in flight, which would refuse the schemas before the registry saw
    /// them.
    pub(crate) schema_api_key: String,
    pub(crate) attacks: Vec<AttackKind>,
}

/// What the attack did, for the report.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Counts {
    /// Idle connections opened, and how many of them the agents closed (at the authentication
    /// deadline or past the per-address limit).
    pub(crate) idle_opened: u64,
    pub(crate) idle_closed: u64,
    /// Connections refused outright (the agent's listen queue or limits).
    pub(crate) connect_failed: u64,
    /// Oversized or malformed frames sent, and how many were answered with anything other than
    /// a closed connection.
    pub(crate) bad_frames: u64,
    pub(crate) bad_frames_answered: u64,
    /// Long-polls by their HTTP status (0: no answer, the connection failed).
    pub(crate) long_polls: BTreeMap<u16, u64>,
    /// Records of the quota-busting producer acknowledged, and those that failed.
    pub(crate) flood_acked: u64,
    pub(crate) flood_failed: u64,
    /// HTTP answers to the schema attacks by what was asked and how it was answered: the
    /// status, with the registry's error code or a compatibility check's verdict.
    pub(crate) schema_answers: BTreeMap<String, u64>,
    /// Of those, the ones neither a success nor a refusal: no answer within the request
    /// timeout, a failed connection, or a server error other than the registry's 50003 (retry).
    pub(crate) schema_failed: u64,
    /// The slowest answer (or wait for one) to each kind of schema request, in milliseconds.
    #[serde(default)]
    pub(crate) schema_slowest_ms: BTreeMap<String, u64>,
    /// Records written with the shared-type schemas over Kafka, by what they were and how each
    /// was answered.
    pub(crate) schema_records: BTreeMap<String, u64>,
    /// Connections opened and dropped, those that sent half a frame first, and those that
    /// could not be made.
    pub(crate) churned: u64,
    pub(crate) churned_half_frames: u64,
    pub(crate) churn_connect_failed: u64,
}

#[derive(Default)]
struct Counters {
    idle_opened: AtomicU64,
    idle_closed: AtomicU64,
    connect_failed: AtomicU64,
    bad_frames: AtomicU64,
    bad_frames_answered: AtomicU64,
    long_polls: Mutex<BTreeMap<u16, u64>>,
    flood_acked: AtomicU64,
    flood_failed: AtomicU64,
    schema_answers: Mutex<BTreeMap<String, u64>>,
    schema_failed: AtomicU64,
    schema_slowest_ms: Mutex<BTreeMap<String, u64>>,
    schema_records: Mutex<BTreeMap<String, u64>>,
    churned: AtomicU64,
    churned_half_frames: AtomicU64,
    churn_connect_failed: AtomicU64,
}

/// Adds one to `key`'s count.
fn bump<K: Ord>(counts: &Mutex<BTreeMap<K, u64>>, key: K) {
    *counts.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default() += 1;
}

/// Takes a count map out of its lock, for the report.
fn taken<K: Ord>(counts: &Mutex<BTreeMap<K, u64>>) -> BTreeMap<K, u64> {
    std::mem::take(&mut *counts.lock().unwrap_or_else(|p| p.into_inner()))
}

async fn connect_from(source: IpAddr, to: SocketAddr) -> std::io::Result<tokio::net::TcpStream> {
    let socket = if source.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.bind(SocketAddr::new(source, 0))?;
    tokio::time::timeout(Duration::from_secs(5), socket.connect(to)).await.map_err(std::io::Error::other)?
}

/// Keeps one idle connection to `to` open, opening another whenever the agent closes it.
async fn idle(source: IpAddr, to: SocketAddr, stop: Stop, counters: Arc<Counters>) {
    let mut buf = [0u8; 64];
    while !stop.is_set() {
        let Ok(mut conn) = connect_from(source, to).await else {
            counters.connect_failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        };
        counters.idle_opened.fetch_add(1, Ordering::Relaxed);
        let opened = std::time::Instant::now();
        // Sends nothing; reads until the agent closes it, or the attack ends.
        loop {
            tokio::select! {
                read = conn.read(&mut buf) => {
                    if matches!(read, Ok(0) | Err(_)) {
                        counters.idle_closed.fetch_add(1, Ordering::Relaxed);
                        if opened.elapsed() < REFUSED_BACKOFF {
                            tokio::time::sleep(REFUSED_BACKOFF).await;
                        }
                        break;
                    }
                }
                () = tokio::time::sleep(Duration::from_millis(500)) => {
                    if stop.is_set() {
                        return;
                    }
                }
            }
        }
    }
}

/// A frame no client should send before authenticating: `kind` picks an oversized length, a
/// frame of random bytes, or a request header naming an API that does not exist.
fn bad_frame(kind: u64) -> Vec<u8> {
    match kind % 3 {
        // Over the 512 KiB allowed before authentication; only the length is sent at first.
        0 => (600 * 1024u32).to_be_bytes().to_vec(),
        1 => {
            let len = fastrand::usize(1..4096);
            let mut frame = (len as u32).to_be_bytes().to_vec();
            frame.extend((0..len).map(|_| fastrand::u8(..)));
            frame
        }
        _ => {
            // api_key 9999, version 0, correlation id 1, no client id.
            let body = [0x27u8, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff];
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            frame
        }
    }
}

async fn bad_frames(source: IpAddr, targets: Vec<SocketAddr>, stop: Stop, counters: Arc<Counters>) {
    let mut n = 0u64;
    while !stop.is_set() {
        let to = targets[(n as usize) % targets.len()];
        n += 1;
        let Ok(mut conn) = connect_from(source, to).await else {
            counters.connect_failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        counters.bad_frames.fetch_add(1, Ordering::Relaxed);
        if conn.write_all(&bad_frame(n)).await.is_ok() {
            let mut answer = [0u8; 4];
            let read = tokio::time::timeout(Duration::from_secs(2), conn.read(&mut answer)).await;
            if matches!(read, Ok(Ok(n)) if n > 0) {
                counters.bad_frames_answered.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Returns once `stop` is set.
async fn stopped(stop: &Stop) {
    while !stop.is_set() {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One long-poll after another at the end of the flood topic, each up to 30 s.
async fn long_poll(http: reqwest::Client, url: String, stop: Stop, counters: Arc<Counters>) {
    while !stop.is_set() {
        let answer = async {
            let r = http.get(&url).timeout(Duration::from_secs(40)).send().await?;
            let status = r.status().as_u16();
            r.bytes().await.map(|_| status)
        };
        let status = tokio::select! {
            answer = answer => answer.unwrap_or(0),
            () = stopped(&stop) => return,
        };
        bump(&counters.long_polls, status);
        if status != 200 {
            // Refused (429, 503): try again soon, as a client retrying in a loop would.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

fn hostile_client(target: &Target) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &target.bootstrap)
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "SCRAM-SHA-256")
        .set("sasl.username", &target.user)
        .set("sasl.password", &target.password);
    config
}

/// Creates the hostile tenant's topics, as the hostile tenant: the flood topic, and those of
/// the schema attacks it makes (one that validates records, table topics).
pub(crate) async fn create_topics(target: &Target) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        hostile_client(target).create().context("hostile admin client")?;
    let mut topics = vec![NewTopic::new(FLOOD_TOPIC, FLOOD_PARTITIONS, TopicReplication::Fixed(-1))];
    if target.attacks.contains(&AttackKind::Schemas) {
        let validated = NewTopic::new(schemas::VALIDATED_TOPIC, 1, TopicReplication::Fixed(-1))
            .set("confluent.value.schema.validation", "true")
            .set("floe.schema.validation.mode", "full");
        topics.push(validated);
    }
    if target.attacks.contains(&AttackKind::Tables) {
        for (name, _, _) in tables::TOPICS {
            let table = NewTopic::new(name, 1, TopicReplication::Fixed(-1))
                .set("floe.table.enable", "true")
                .set("floe.table.commit.interval.ms", tables::COMMIT_INTERVAL_MS);
            topics.push(table);
        }
    }
    let options = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for result in admin.create_topics(&topics, &options).await? {
        if let Err((name, code)) = result
            && code != rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists
        {
            anyhow::bail!("creating topic {name}: {code}");
        }
    }
    Ok(())
}

/// Produces to the flood topic as fast as librdkafka queues, far past the tenant's quota.
async fn flood(target: Target, stop: Stop, counters: Arc<Counters>) -> anyhow::Result<()> {
    let producer: FutureProducer = hostile_client(&target)
        .set("acks", "all")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .set("queue.buffering.max.kbytes", "65536")
        .create()
        .context("flood producer")?;
    let payload = vec![b'x'; FLOOD_RECORD_BYTES];
    let mut reports = JoinSet::new();
    while !stop.is_set() {
        while reports.try_join_next().is_some() {}
        let record = FutureRecord::<(), [u8]>::to(FLOOD_TOPIC).payload(&payload).partition(0);
        match producer.send_result(record) {
            Ok(delivery) => {
                let counters = counters.clone();
                reports.spawn(async move {
                    let counter = match delivery.await {
                        Ok(Ok(_)) => &counters.flood_acked,
                        _ => &counters.flood_failed,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
            // The local queue is full: the quota is holding the producer back.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    reports.abort_all();
    Ok(())
}

/// A running attack in its child process.
pub(crate) struct Attack {
    child: tokio::process::Child,
}

/// Starts the attack on `target` in a child process (this executable, `--hostile-attack`),
/// niced, writing its log to `log`.
pub(crate) fn spawn(target: &Target, log: &std::path::Path) -> anyhow::Result<Attack> {
    let exe = std::env::current_exe().context("this executable")?;
    let log = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let child = tokio::process::Command::new("nice")
        .args(["-n", "10"])
        .arg(exe)
        .arg("--hostile-attack")
        .arg(serde_json::to_string(target)?)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .context("starting the hostile tenant's process")?;
    Ok(Attack { child })
}

impl Attack {
    /// Tells the attack to stop (closing its standard input) and returns what it did.
    pub(crate) async fn stop(mut self) -> anyhow::Result<Counts> {
        drop(self.child.stdin.take());
        let out = tokio::time::timeout(Duration::from_secs(60), self.child.wait_with_output())
            .await
            .context("the hostile tenant's process did not stop")??;
        if !out.status.success() {
            anyhow::bail!("the hostile tenant's process failed: {}", out.status);
        }
        serde_json::from_slice(&out.stdout).context("the hostile tenant's counts")
    }
}

/// The child process's side of [`spawn`]: attacks until its standard input closes, then prints
/// what it did as JSON.
pub(crate) async fn run_child(target: &str) -> anyhow::Result<()> {
    let target: Target = serde_json::from_str(target).context("--hostile-attack target")?;
    let stop = Stop::default();
    {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut input = tokio::io::stdin();
            let mut buf = [0u8; 64];
            while matches!(input.read(&mut buf).await, Ok(n) if n > 0) {}
            stop.set();
        });
    }
    let counts = run(target, stop).await?;
    println!("{}", serde_json::to_string(&counts)?);
    Ok(())
}

/// An HTTP client from the attacker's address, authenticating with `api_key`, that keeps up to
/// `idle_per_host` connections per agent open for reuse.
fn http_client(target: &Target, api_key: &str, idle_per_host: usize) -> anyhow::Result<reqwest::Client> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {api_key}").parse().context("API key header")?);
    reqwest::Client::builder()
        .local_address(target.source)
        .default_headers(headers)
        .pool_max_idle_per_host(idle_per_host)
        .build()
        .context("hostile HTTP client")
}

/// The schema attacks ([`schemas`]) and the table attacks ([`tables`]) that `target` asks for,
/// until `stop`: a few requests at a time per agent.
async fn schema_attacks(target: Target, stop: Stop, counters: Arc<Counters>) -> anyhow::Result<()> {
    let on = |kind| target.attacks.contains(&kind);
    let http = http_client(&target, &target.schema_api_key, shared_types::Language::ALL.len() + 2)?;
    let mut tasks = JoinSet::new();
    if on(AttackKind::Schemas) {
        for (agent, base) in target.http.iter().enumerate() {
            for language in shared_types::Language::ALL {
                let (http, base) = (http.clone(), base.clone());
                tasks.spawn(schemas::registry(http, base, agent, language, stop.clone(), counters.clone()));
            }
        }
        tasks.spawn(schemas::validated_records(target.clone(), http.clone(), stop.clone(), counters.clone()));
    }
    for topic in tables::TOPICS.into_iter().filter(|_| on(AttackKind::Tables)) {
        tasks.spawn(tables::run(target.clone(), http.clone(), topic, stop.clone(), counters.clone()));
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Runs every attack until `stop`, then returns what they did.
pub(crate) async fn run(target: Target, stop: Stop) -> anyhow::Result<Counts> {
    let counters = Arc::new(Counters::default());
    let mut tasks = JoinSet::new();
    let on = |kind| target.attacks.contains(&kind);
    for &agent in target.kafka.iter().filter(|_| on(AttackKind::Idle)) {
        for _ in 0..IDLE_PER_AGENT {
            tasks.spawn(idle(target.source, agent, stop.clone(), counters.clone()));
        }
    }
    for _ in 0..BAD_FRAME_SENDERS * usize::from(on(AttackKind::Frames)) {
        tasks.spawn(bad_frames(target.source, target.kafka.clone(), stop.clone(), counters.clone()));
    }
    let http = http_client(&target, &target.api_key, LONG_POLLS_PER_AGENT)?;
    let long_polls = if on(AttackKind::LongPolls) { LONG_POLLS_PER_AGENT * target.http.len() } else { 0 };
    for i in 0..long_polls {
        let base = &target.http[i % target.http.len()];
        let url = format!(
            "{base}/v3/clusters/{}/topics/{FLOOD_TOPIC}/partitions/{}/records?offset=latest&wait_ms=29999",
            target.cluster_id,
            1 + i % 2
        );
        tasks.spawn(long_poll(http.clone(), url, stop.clone(), counters.clone()));
    }
    if on(AttackKind::Flood) {
        let (target, stop, counters) = (target.clone(), stop.clone(), counters.clone());
        tasks.spawn(async move {
            if let Err(e) = flood(target, stop, counters).await {
                eprintln!("floe-chaos: the hostile flood producer failed: {e:#}");
            }
        });
    }
    // The schema and table attacks judge each answer by how long it took, so they run on a
    // thread and runtime of their own: the churn's and the floods' tasks, busy on a niced
    // process, would otherwise delay reading an answer past the request's timeout (CI saw
    // answers the agents gave in under 0.3 s time out after 15 s on the client).
    let answers = if on(AttackKind::Schemas) || on(AttackKind::Tables) {
        let (target, stop, counters) = (target.clone(), stop.clone(), counters.clone());
        let thread = std::thread::Builder::new()
            .name("hostile-schemas".into())
            .spawn(move || -> anyhow::Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(schema_attacks(target, stop, counters))
            })
            .context("starting the schema attacks' thread")?;
        Some(thread)
    } else {
        None
    };
    for first in 0..churn::CHURNERS * usize::from(on(AttackKind::Churn)) {
        tasks.spawn(churn::run(target.source, target.kafka.clone(), first, stop.clone(), counters.clone()));
    }
    while tasks.join_next().await.is_some() {}
    if let Some(thread) = answers {
        let joined = tokio::task::spawn_blocking(move || thread.join()).await.context("joining the schema attacks")?;
        joined.map_err(|_| anyhow::anyhow!("the schema attacks' thread panicked"))??;
    }
    let c = &counters;
    Ok(Counts {
        idle_opened: c.idle_opened.load(Ordering::Relaxed),
        idle_closed: c.idle_closed.load(Ordering::Relaxed),
        connect_failed: c.connect_failed.load(Ordering::Relaxed),
        bad_frames: c.bad_frames.load(Ordering::Relaxed),
        bad_frames_answered: c.bad_frames_answered.load(Ordering::Relaxed),
        long_polls: taken(&c.long_polls),
        flood_acked: c.flood_acked.load(Ordering::Relaxed),
        flood_failed: c.flood_failed.load(Ordering::Relaxed),
        schema_answers: taken(&c.schema_answers),
        schema_failed: c.schema_failed.load(Ordering::Relaxed),
        schema_slowest_ms: taken(&c.schema_slowest_ms),
        schema_records: taken(&c.schema_records),
        churned: c.churned.load(Ordering::Relaxed),
        churned_half_frames: c.churned_half_frames.load(Ordering::Relaxed),
        churn_connect_failed: c.churn_connect_failed.load(Ordering::Relaxed),
    })
}
