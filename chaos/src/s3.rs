//! An S3-compatible server for a run's object store (`--s3-server`): the agents then meet the
//! faults through the real S3 client path (signed HTTP requests, multipart-free PUTs, ranged
//! GETs, listings), not only through `file://`. The server runs in the root namespace on the
//! bridge's address, which every namespace reaches.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The bucket every run writes to.
const BUCKET: &str = "floe-chaos";
/// Credentials the server accepts (it checks none) and the agents sign with.
pub(crate) const ENV: [(&str, &str); 3] =
    [("AWS_ACCESS_KEY_ID", "floe-chaos"), ("AWS_SECRET_ACCESS_KEY", "floe-chaos-secret"), ("AWS_REGION", "us-east-1")];

#[derive(Debug)]
pub(crate) struct S3Server {
    child: Child,
    pub(crate) endpoint: String,
}

impl S3Server {
    /// Starts `server` (moto_server's command line: `-H HOST -p PORT`) on `host`, waits until it
    /// answers and creates the bucket.
    pub(crate) async fn start(server: &Path, host: &str, log: &Path) -> anyhow::Result<Self> {
        let port = TcpListener::bind((host, 0)).and_then(|l| l.local_addr()).context("finding a free port")?.port();
        let log = std::fs::File::create(log)?;
        let child = Command::new(server)
            .args(["-H", host, "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", server.display()))?;
        let mut s3 = Self { child, endpoint: format!("http://{host}:{port}") };
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = s3.child.try_wait() {
                bail!("{} exited with {status}", server.display());
            }
            // The server checks no signatures: an unsigned PUT creates the bucket.
            let created = http.put(format!("{}/{BUCKET}", s3.endpoint)).timeout(Duration::from_secs(5)).send().await;
            if created.is_ok_and(|r| r.status().is_success()) {
                return Ok(s3);
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!("{} did not create a bucket on {} within 30 s", server.display(), s3.endpoint);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The object-store URL agents and metadata nodes are given.
    pub(crate) fn url(&self) -> String {
        format!("s3://{BUCKET}/objects")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
