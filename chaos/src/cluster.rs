//! The cluster under test: three metadata nodes and two or three agents, real `floe` processes
//! sharing a `file://` object store. With `--network netns` every process runs in its own
//! network namespace on a bridge, so links between two of them can be cut (a blackhole route on
//! each side); with `--network loopback` everything listens on 127.0.0.1 and partitions are
//! not available. A process that ends without the harness killing it is noticed whenever the
//! harness looks at it, and kept until [`Cluster::take_exits`] reports it.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

/// Prefix of every namespace this harness makes; stale ones of dead runs are removed at start.
const NETNS_PREFIX: &str = "floe-chaos-";
const METADATA_PORT: u16 = 9093;
const KAFKA_PORT: u16 = 9092;
const HTTP_PORT: u16 = 8080;
/// How long one `floe admin cluster` query may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum NetworkMode {
    /// A network namespace per process on a bridge (needs root and `ip`); partitions possible.
    Netns,
    /// Every process on 127.0.0.1; no partitions.
    Loopback,
}

/// Where a process listens, and in which namespace it runs.
#[derive(Clone, Debug)]
pub(crate) struct Host {
    pub(crate) name: String,
    pub(crate) ip: String,
    netns: Option<String>,
    /// Port offset on loopback, where every host shares one address.
    port_offset: u16,
}

impl Host {
    fn port(&self, base: u16) -> u16 {
        base + self.port_offset
    }
}

/// The namespaces and bridge of one run, and the links cut now.
#[derive(Debug)]
pub(crate) struct Network {
    mode: NetworkMode,
    bridge: String,
    /// The root namespace's address on the bridge (or loopback): where servers the harness runs
    /// itself listen.
    pub(crate) gateway: String,
    /// A second address of the root namespace, which the hostile tenant's connections come
    /// from, so per-address limits on it do not hold back the other workloads.
    pub(crate) attacker: String,
    hosts: Vec<Host>,
    cut: BTreeSet<(String, String)>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Whether process `pid` still runs.
fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes namespaces and bridges left by runs whose harness process is gone.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !pid_alive(pid) {
            let _ = ip(&["netns", "del", name]);
            let _ = ip(&["link", "del", &format!("fcb{}", pid % 100_000)]);
        }
    }
}

impl Network {
    /// Sets up `names` as hosts: namespaces, veth pairs and a bridge, or loopback ports.
    pub(crate) fn create(mode: NetworkMode, names: &[String]) -> anyhow::Result<Self> {
        let tag = std::process::id();
        let bridge = format!("fcb{}", tag % 100_000);
        // One /24 per run, so runs side by side do not share routes.
        let subnet = format!("10.{}.{}", 100 + (tag / 250) % 100, tag % 250);
        let hosts: Vec<Host> = names
            .iter()
            .enumerate()
            .map(|(i, name)| match mode {
                NetworkMode::Netns => Host {
                    name: name.clone(),
                    ip: format!("{subnet}.{}", i + 10),
                    netns: Some(format!("{NETNS_PREFIX}{tag}-{name}")),
                    port_offset: 0,
                },
                NetworkMode::Loopback => Host {
                    name: name.clone(),
                    ip: "127.0.0.1".into(),
                    netns: None,
                    // Kafka and metadata ports are one apart, so hosts are two apart.
                    port_offset: 20_000 + (tag % 200) as u16 * 20 + 2 * i as u16,
                },
            })
            .collect();
        let (gateway, attacker) = match mode {
            NetworkMode::Netns => (format!("{subnet}.1"), format!("{subnet}.2")),
            // Every 127/8 address is the loopback's.
            NetworkMode::Loopback => ("127.0.0.1".into(), "127.0.0.2".into()),
        };
        let net = Self { mode, bridge, gateway, attacker, hosts, cut: BTreeSet::new() };
        if mode == NetworkMode::Netns {
            remove_stale();
            net.build(&subnet).context("setting up network namespaces (run as root, or use --network loopback)")?;
        }
        Ok(net)
    }

    fn build(&self, subnet: &str) -> anyhow::Result<()> {
        ip(&["link", "add", &self.bridge, "type", "bridge"])?;
        ip(&["addr", "add", &format!("{subnet}.1/24"), "dev", &self.bridge])?;
        ip(&["addr", "add", &format!("{subnet}.2/24"), "dev", &self.bridge])?;
        ip(&["link", "set", &self.bridge, "up"])?;
        for (i, host) in self.hosts.iter().enumerate() {
            let ns = host.netns.as_deref().unwrap_or_default();
            let veth = format!("{}v{i}", self.bridge);
            ip(&["netns", "add", ns])?;
            ip(&["link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns])?;
            ip(&["link", "set", &veth, "master", &self.bridge, "up"])?;
            ip(&["-n", ns, "addr", "add", &format!("{}/24", host.ip), "dev", "eth0"])?;
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    pub(crate) fn mode(&self) -> NetworkMode {
        self.mode
    }

    pub(crate) fn host(&self, name: &str) -> anyhow::Result<&Host> {
        self.hosts.iter().find(|h| h.name == name).with_context(|| format!("no host {name}"))
    }

    /// Cuts the link between hosts `a` and `b` both ways: each drops what it would send the other.
    pub(crate) fn cut(&mut self, a: &str, b: &str) -> anyhow::Result<()> {
        if self.mode != NetworkMode::Netns {
            bail!("partitions need --network netns");
        }
        let (ha, hb) = (self.host(a)?.clone(), self.host(b)?.clone());
        for (from, to) in [(&ha, &hb), (&hb, &ha)] {
            let ns = from.netns.as_deref().unwrap_or_default();
            ip(&["-n", ns, "route", "add", "blackhole", &format!("{}/32", to.ip)])?;
        }
        self.cut.insert((a.to_owned(), b.to_owned()));
        Ok(())
    }

    /// Restores every cut link.
    pub(crate) fn heal(&mut self) -> anyhow::Result<()> {
        for (a, b) in std::mem::take(&mut self.cut) {
            let (ha, hb) = (self.host(&a)?.clone(), self.host(&b)?.clone());
            for (from, to) in [(&ha, &hb), (&hb, &ha)] {
                let ns = from.netns.as_deref().unwrap_or_default();
                ip(&["-n", ns, "route", "del", "blackhole", &format!("{}/32", to.ip)])?;
            }
        }
        Ok(())
    }
}

impl Network {
    /// Removes the namespaces and the bridge.
    pub(crate) fn teardown(&mut self) {
        if self.mode == NetworkMode::Netns {
            for host in &self.hosts {
                if let Some(ns) = &host.netns {
                    let _ = ip(&["netns", "del", ns]);
                }
            }
            let _ = ip(&["link", "del", &self.bridge]);
            self.mode = NetworkMode::Loopback;
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// One `floe` process: started, SIGKILLed, paused and resumed by the harness.
#[derive(Debug)]
pub(crate) struct Proc {
    pub(crate) name: String,
    host: Host,
    args: Vec<String>,
    /// Environment beyond the harness's own (the S3 server's credentials).
    env: Vec<(String, String)>,
    floe: PathBuf,
    log: PathBuf,
    /// The running process; `None` while it is down (killed by the harness, or its exit noticed).
    child: Option<Child>,
    paused: bool,
    /// How the process ended each time it ended without the harness killing it, until taken by
    /// [`Cluster::take_exits`]. Bounded by the restarts of one run.
    exits: Vec<ExitStatus>,
}

impl Proc {
    /// Starts the process, unless it runs already (a second copy could not bind its ports).
    pub(crate) fn start(&mut self) -> anyhow::Result<()> {
        use std::io::Write;
        if self.alive() {
            return Ok(());
        }
        let mut log = OpenOptions::new().create(true).append(true).open(&self.log)?;
        writeln!(log, "===== floe-chaos starts {}: {}", self.name, self.args.join(" "))?;
        let mut command = match &self.host.netns {
            // `ip netns exec` execs in place, so the child's pid is floe's own.
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.floe);
                c
            }
            None => Command::new(&self.floe),
        };
        let child = command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        self.child = Some(child);
        self.paused = false;
        Ok(())
    }

    pub(crate) fn alive(&mut self) -> bool {
        self.reap();
        self.child.is_some()
    }

    /// Notices that the process ended without the harness killing it: it counts as down from
    /// now on, and its exit is kept for [`Cluster::take_exits`].
    fn reap(&mut self) {
        let Some(status) = self.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) else { return };
        self.exits.push(status);
        self.child = None;
        self.paused = false;
    }

    pub(crate) fn sigkill(&mut self) {
        // An exit before the kill was not the harness's doing.
        self.reap();
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.child = None;
        self.paused = false;
    }

    fn signal(&mut self, signal: &str) -> anyhow::Result<()> {
        let pid = self.child.as_ref().map(Child::id).with_context(|| format!("{} is not running", self.name))?;
        let status = Command::new("kill").args([signal, &pid.to_string()]).status()?;
        if !status.success() {
            bail!("kill {signal} {pid} failed");
        }
        Ok(())
    }

    pub(crate) fn pause(&mut self) -> anyhow::Result<()> {
        self.signal("-STOP")?;
        self.paused = true;
        Ok(())
    }

    pub(crate) fn resume(&mut self) -> anyhow::Result<()> {
        if self.paused {
            self.signal("-CONT")?;
            self.paused = false;
        }
        Ok(())
    }
}

/// An agent as a watcher outside it sees it: where it answers HTTP, and its process.
#[derive(Clone, Debug)]
pub(crate) struct AgentProcess {
    pub(crate) name: String,
    pub(crate) http_url: String,
    /// The process id (floe's own, as `ip netns exec` execs in place); none while it is down.
    pub(crate) pid: Option<u32>,
}

/// The processes and their addresses.
#[derive(Debug)]
pub(crate) struct Cluster {
    pub(crate) net: Network,
    pub(crate) metadata: Vec<Proc>,
    pub(crate) agents: Vec<Proc>,
    floe: PathBuf,
    /// The file agents read their object-store fault rates from.
    pub(crate) fault_file: PathBuf,
    /// The S3 server holding the objects, with `--s3-server`; `file://` otherwise.
    s3: Option<crate::s3::S3Server>,
    /// `floe admin`'s metadata TLS flags (an operator certificate), when the port runs TLS.
    admin_tls: Vec<String>,
}

pub(crate) fn metadata_name(i: usize) -> String {
    format!("m{}", i + 1)
}

pub(crate) fn agent_name(i: usize) -> String {
    format!("a{}", i + 1)
}

impl Cluster {
    /// Sets up the network and the processes (not started). With `s3_server`, that S3 server is
    /// started and holds the objects; with `certs_script`, the metadata port runs mutual TLS;
    /// `secured` agents require SASL/SCRAM and API keys.
    pub(crate) async fn new(
        floe: &Path,
        dir: &Path,
        mode: NetworkMode,
        agents: usize,
        s3_server: Option<&Path>,
        certs_script: Option<&Path>,
        secured: bool,
    ) -> anyhow::Result<Self> {
        let names: Vec<String> = (0..3).map(metadata_name).chain((0..agents).map(agent_name)).collect();
        let net = Network::create(mode, &names)?;
        let s3 = match s3_server {
            Some(server) => Some(crate::s3::S3Server::start(server, &net.gateway, &dir.join("s3.log")).await?),
            None => None,
        };
        let (objects, store_args, env) = match &s3 {
            Some(s3) => (
                s3.url(),
                vec!["--s3-endpoint".to_owned(), s3.endpoint.clone()],
                crate::s3::ENV.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            ),
            None => (format!("file://{}", dir.join("objects").display()), Vec::new(), Vec::new()),
        };
        let fault_file = dir.join("object-store-faults");
        std::fs::write(&fault_file, "")?;
        let meta_hosts: Vec<Host> = (0..3).map(|i| net.host(&metadata_name(i)).cloned()).collect::<Result<_, _>>()?;
        let metadata_addr = |h: &Host| format!("{}:{}", h.ip, h.port(METADATA_PORT));
        let peers = meta_hosts.iter().enumerate().map(|(i, h)| format!("{}={}", i + 1, metadata_addr(h)));
        let peers = peers.collect::<Vec<_>>().join(",");
        let all_metadata = meta_hosts.iter().map(metadata_addr).collect::<Vec<_>>().join(",");
        let agent_hosts: Vec<Host> =
            (0..agents).map(|i| net.host(&agent_name(i)).cloned()).collect::<Result<_, _>>()?;
        let tls = match certs_script {
            Some(script) => Some(issue_certificates(script, &dir.join("certs"), &meta_hosts, agent_hosts.len())?),
            None => None,
        };
        let tls_args = |name: &str| -> Vec<String> {
            match &tls {
                Some(certs) => vec![
                    "--metadata-tls-cert".into(),
                    certs.join(format!("{name}.pem")).display().to_string(),
                    "--metadata-tls-key".into(),
                    certs.join(format!("{name}-key.pem")).display().to_string(),
                    "--metadata-tls-ca".into(),
                    certs.join("ca.pem").display().to_string(),
                ],
                None if name.starts_with("peer") => vec!["--metadata-allow-plaintext".into()],
                None => Vec::new(),
            }
        };
        let proc = |name: String, host: Host, mut args: Vec<String>| Proc {
            log: dir.join(format!("{name}.log")),
            name,
            host,
            args: {
                args.extend(store_args.iter().cloned());
                args
            },
            env: env.clone(),
            floe: floe.to_owned(),
            child: None,
            paused: false,
            exits: Vec::new(),
        };
        let metadata = meta_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let args = vec![
                    "metadata".into(),
                    "--node-id".into(),
                    (i + 1).to_string(),
                    "--metadata-addr".into(),
                    metadata_addr(h),
                    "--data-dir".into(),
                    dir.join(format!("{}-data", h.name)).display().to_string(),
                    "--peers".into(),
                    peers.clone(),
                    "--object-store".into(),
                    objects.clone(),
                ];
                let args = [args, tls_args(&format!("peer-{}", i + 1))].concat();
                proc(h.name.clone(), h.clone(), args)
            })
            .collect();
        let agents = agent_hosts
            .into_iter()
            .enumerate()
            .map(|(i, h)| -> anyhow::Result<Proc> {
                let args = vec![
                    "agent".into(),
                    "--metadata".into(),
                    all_metadata.clone(),
                    "--object-store".into(),
                    objects.clone(),
                    "--kafka-addr".into(),
                    format!("{}:{}", h.ip, h.port(KAFKA_PORT)),
                    "--http-addr".into(),
                    format!("{}:{}", h.ip, h.port(HTTP_PORT)),
                    "--node-id".into(),
                    (i + 1).to_string(),
                    "--zone".into(),
                    ["a", "b", "c"][i % 3].into(),
                    "--cache-dir".into(),
                    dir.join(format!("{}-cache", h.name)).display().to_string(),
                    // Compaction and garbage collection run all through the run, so their
                    // index swaps and deletes meet the faults too.
                    "--compaction-interval-secs".into(),
                    "5".into(),
                    "--compaction-min-run".into(),
                    "4".into(),
                    "--gc-interval-secs".into(),
                    "3".into(),
                    "--orphan-grace-secs".into(),
                    "30".into(),
                    "--test-object-store-faults".into(),
                    format!("@{}", fault_file.display()),
                    // Slow PUTs are hedged, so a hedge meets a store that answers it 409.
                    "--hedge-puts".into(),
                ];
                let auth: Vec<String> = if secured {
                    ["--sasl-mechanisms", "SCRAM-SHA-256", "--http-require-api-key"].map(String::from).to_vec()
                } else {
                    Vec::new()
                };
                let args = [args, auth, tls_args(&format!("agent-{}", i + 1))].concat();
                Ok(proc(h.name.clone(), h, args))
            })
            .collect::<anyhow::Result<_>>()?;
        let admin_tls = if tls.is_some() { tls_args("operator-chaos") } else { Vec::new() };
        Ok(Self { net, metadata, agents, floe: floe.to_owned(), fault_file, s3, admin_tls })
    }

    pub(crate) fn start(&mut self) -> anyhow::Result<()> {
        for p in self.metadata.iter_mut().chain(self.agents.iter_mut()) {
            p.start()?;
        }
        Ok(())
    }

    /// Where the objects are, for the run's log.
    pub(crate) fn object_store(&self) -> String {
        match &self.s3 {
            Some(s3) => format!("{} on {}", s3.url(), s3.endpoint),
            None => "file://".into(),
        }
    }

    /// Whether the objects are in an S3 server (`--s3-server`) rather than `file://`.
    pub(crate) fn uses_s3(&self) -> bool {
        self.s3.is_some()
    }

    /// Kafka bootstrap list of every agent.
    pub(crate) fn bootstrap(&self) -> String {
        self.agents.iter().map(|a| format!("{}:{}", a.host.ip, a.host.port(KAFKA_PORT))).collect::<Vec<_>>().join(",")
    }

    pub(crate) fn http_urls(&self) -> Vec<String> {
        self.agents.iter().map(|a| format!("http://{}:{}", a.host.ip, a.host.port(HTTP_PORT))).collect()
    }

    /// Every agent, in order, with its HTTP address and process as they are now.
    pub(crate) fn agent_processes(&self) -> Vec<AgentProcess> {
        self.agents
            .iter()
            .map(|a| AgentProcess {
                name: a.name.clone(),
                http_url: format!("http://{}:{}", a.host.ip, a.host.port(HTTP_PORT)),
                pid: a.child.as_ref().map(Child::id),
            })
            .collect()
    }

    fn metadata_addr(&self, i: usize) -> String {
        let h = &self.metadata[i].host;
        format!("{}:{}", h.ip, h.port(METADATA_PORT))
    }

    /// The leader node `i` knows of (1-based id), if it answers.
    pub(crate) async fn leader_seen_by(&self, i: usize) -> Option<u64> {
        let query = tokio::process::Command::new(&self.floe)
            .arg("admin")
            .args(&self.admin_tls)
            .args(["cluster", "--metadata", &self.metadata_addr(i)])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(ADMIN_TIMEOUT, query).await.ok()?.ok()?;
        if !out.status.success() {
            return None;
        }
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        status.get("leader")?.as_u64()
    }

    /// Runs `floe admin tenants ARGS` (with `stdin`) against the first metadata node that
    /// answers; its standard output.
    pub(crate) async fn admin_tenants(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        self.admin("tenants", args, stdin).await
    }

    /// Runs `floe admin COMMAND ARGS` (with `stdin`) against the first metadata node that
    /// answers; its standard output.
    pub(crate) async fn admin(&self, command: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        use tokio::io::AsyncWriteExt;
        let mut last = String::new();
        for i in 0..self.metadata.len() {
            let mut child = tokio::process::Command::new(&self.floe)
                .arg("admin")
                .args(&self.admin_tls)
                .args([command, "--metadata", &self.metadata_addr(i)])
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("running floe admin {command}"))?;
            if let (Some(mut input), Some(text)) = (child.stdin.take(), stdin) {
                input.write_all(text.as_bytes()).await?;
            }
            let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await??;
            if out.status.success() {
                return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            last = String::from_utf8_lossy(&out.stderr).into_owned();
        }
        bail!("floe admin {command} {}: {}", args.join(" "), last.trim())
    }

    /// Kafka listener addresses of every agent.
    pub(crate) fn kafka_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.agents.iter().filter_map(|a| format!("{}:{}", a.host.ip, a.host.port(KAFKA_PORT)).parse().ok()).collect()
    }

    /// The metadata leader's index, asking the live, unpaused nodes.
    pub(crate) async fn leader(&mut self) -> Option<usize> {
        for i in 0..self.metadata.len() {
            if !self.metadata[i].alive() || self.metadata[i].paused {
                continue;
            }
            if let Some(id) = self.leader_seen_by(i).await {
                let index = usize::try_from(id).ok()?.checked_sub(1)?;
                if index < self.metadata.len() {
                    return Some(index);
                }
            }
        }
        None
    }

    /// The processes that ended without the harness killing them since the last call, each with
    /// how it ended. They are down until started again.
    pub(crate) fn take_exits(&mut self) -> Vec<(String, ExitStatus)> {
        let mut exits = Vec::new();
        for p in self.metadata.iter_mut().chain(self.agents.iter_mut()) {
            p.reap();
            let name = p.name.clone();
            exits.extend(p.exits.drain(..).map(|status| (name.clone(), status)));
        }
        exits
    }

    /// Starts the process named `name` unless it runs.
    pub(crate) fn start_process(&mut self, name: &str) -> anyhow::Result<()> {
        let p = self.metadata.iter_mut().chain(self.agents.iter_mut()).find(|p| p.name == name);
        p.with_context(|| format!("no process {name}"))?.start()
    }

    /// Every process: resumed if paused, started again if dead. Returns the names restarted.
    pub(crate) fn revive_all(&mut self) -> anyhow::Result<Vec<String>> {
        let mut restarted = Vec::new();
        for p in self.metadata.iter_mut().chain(self.agents.iter_mut()) {
            p.resume()?;
            if !p.alive() {
                p.start()?;
                restarted.push(p.name.clone());
            }
        }
        Ok(restarted)
    }

    pub(crate) fn stop(&mut self) {
        for p in self.agents.iter_mut().chain(self.metadata.iter_mut()) {
            let _ = p.resume();
            p.sigkill();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Issues the cluster CA, a certificate per metadata node (for its address) and agent, and the
/// operator certificate the harness asks `floe admin` with, into
/// `out` with `script` (scripts/metadata-certs.sh).
fn issue_certificates(script: &Path, out: &Path, metadata: &[Host], agents: usize) -> anyhow::Result<PathBuf> {
    let mut command = Command::new("bash");
    command.arg(script).arg(out).arg("floe-chaos");
    for (i, h) in metadata.iter().enumerate() {
        command.arg("--peer").arg(format!("{}={}", i + 1, h.ip));
    }
    for i in 0..agents {
        command.arg("--agent").arg((i + 1).to_string());
    }
    command.arg("--operator").arg("chaos");
    let output = command.output().with_context(|| format!("running {}", script.display()))?;
    if !output.status.success() {
        bail!("{} failed: {}", script.display(), String::from_utf8_lossy(&output.stderr));
    }
    Ok(out.to_owned())
}

#[cfg(test)]
mod tests;
