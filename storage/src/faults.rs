//! Injected object-store faults, for reliability tests only: a wrapper that makes requests of the
//! store beneath it fail at given rates, the way S3 misbehaves: errors, `503 SlowDown` (for any
//! kind of request, as S3 answers every request to a prefix over its request rate), slow PUTs,
//! requests that hang until they time out, a PUT that stored the object but whose answer was
//! lost, and a create-only PUT refused with 409 while another upload of its key is in progress
//! (some S3-compatible stores answer one of two concurrent `If-None-Match: *` PUTs so). The agent
//! uses it only when started with `--test-object-store-faults`, and says so in its log at start.
//! The rates are fixed, or read from a file that is re-read every half second, so a fault harness
//! can switch faults on and off while the agent runs.

use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMode,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};
use prometheus::{IntCounterVec, register_int_counter_vec};

/// Longest injected PUT delay or hang.
const DELAY_MS_MAX: u64 = 120_000;
/// Largest `slow-put-every`.
const SLOW_PUT_EVERY_MAX: u64 = 1_000_000;
/// How often a fault file is read again.
const FAULT_FILE_POLL: Duration = Duration::from_millis(500);
/// Longest fault spec accepted.
const SPEC_BYTES_MAX: usize = 1024;

static INJECTED: LazyLock<IntCounterVec> = LazyLock::new(|| {
    register_int_counter_vec!(
        "floe_object_store_injected_faults_total",
        "Object-store faults injected by --test-object-store-faults, by kind",
        &["kind"]
    )
    .expect("metric names are unique")
});

/// How often each fault happens: probabilities per request, 0 to 1.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// A PUT fails before anything is stored.
    pub put_error: f64,
    /// A PUT stores the object, then answers with an error (the answer was lost).
    pub put_lost_ack: f64,
    /// A request of any kind (PUT, GET, HEAD, LIST, DELETE, COPY) is refused with 503 SlowDown:
    /// at 1, an S3 brownout in which nothing gets through.
    pub slowdown: f64,
    /// A GET fails.
    pub get_error: f64,
    /// A PUT waits `slow_put_ms` before it is sent.
    pub slow_put: f64,
    pub slow_put_ms: u64,
    /// Every this many PUTs, one waits `slow_put_ms` (0: none): a slow tail a test can count on.
    pub slow_put_every: u64,
    /// A PUT or GET hangs for `timeout_ms`, then fails as timed out (nothing stored).
    pub timeout: f64,
    pub timeout_ms: u64,
    /// A create-only PUT overlapping another create-only PUT of the same key is refused with
    /// 409 Conflict, which object_store reports as `AlreadyExists` although nothing is stored yet.
    pub put_conflict: f64,
}

impl FromStr for FaultPlan {
    type Err = String;

    /// `put-error=0.1,put-lost-ack=0.05,slowdown=0.05,get-error=0.02,slow-put=0.01,slow-put-ms=3000,slow-put-every=20,timeout=0.01,timeout-ms=10000,put-conflict=1`
    fn from_str(spec: &str) -> Result<Self, String> {
        if spec.len() > SPEC_BYTES_MAX {
            return Err(format!("fault spec longer than {SPEC_BYTES_MAX} bytes"));
        }
        let mut plan = FaultPlan { slow_put_ms: 2000, timeout_ms: 10_000, ..FaultPlan::default() };
        for part in spec.trim().split(',').filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
            if key == "slow-put-every" {
                plan.slow_put_every = value
                    .parse()
                    .ok()
                    .filter(|n| *n <= SLOW_PUT_EVERY_MAX)
                    .ok_or_else(|| format!("slow-put-every must be 0..={SLOW_PUT_EVERY_MAX}"))?;
                continue;
            }
            if let Some(delay) = match key {
                "slow-put-ms" => Some(&mut plan.slow_put_ms),
                "timeout-ms" => Some(&mut plan.timeout_ms),
                _ => None,
            } {
                *delay = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms <= DELAY_MS_MAX)
                    .ok_or_else(|| format!("{key} must be 0..={DELAY_MS_MAX}"))?;
                continue;
            }
            let rate: f64 = value
                .parse()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| format!("{key}: {value:?} is not a probability in 0..=1"))?;
            match key {
                "put-error" => plan.put_error = rate,
                "put-lost-ack" => plan.put_lost_ack = rate,
                "slowdown" => plan.slowdown = rate,
                "get-error" => plan.get_error = rate,
                "slow-put" => plan.slow_put = rate,
                "timeout" => plan.timeout = rate,
                "put-conflict" => plan.put_conflict = rate,
                other => {
                    return Err(format!(
                        "unknown fault {other:?}; known: put-error, put-lost-ack, slowdown, get-error, slow-put, \
                         slow-put-ms, slow-put-every, timeout, timeout-ms, put-conflict"
                    ));
                }
            }
        }
        Ok(plan)
    }
}

/// Where the rates come from: a spec given at start, or `@PATH`, a file holding a spec that is
/// read again every half second (missing or empty: no faults; unreadable: the last rates stay),
/// or a switch the process itself sets (tests that run the store in process).
#[derive(Clone, Debug, PartialEq)]
pub enum FaultSource {
    Fixed(FaultPlan),
    File(PathBuf),
    Switch(FaultSwitch),
}

/// Rates shared with the store: a change applies to its next request, with no file to poll.
#[derive(Clone, Debug, Default)]
pub struct FaultSwitch(Arc<RwLock<FaultPlan>>);

impl FaultSwitch {
    pub fn set(&self, plan: FaultPlan) {
        *self.0.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = plan;
    }
}

impl PartialEq for FaultSwitch {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl FromStr for FaultSource {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        match spec.strip_prefix('@') {
            Some(path) if !path.is_empty() => Ok(Self::File(PathBuf::from(path))),
            Some(_) => Err("@ must be followed by a file path".to_owned()),
            None => spec.parse().map(Self::Fixed),
        }
    }
}

/// The plan in `path` now: none when the file is missing, an error when it cannot be read or parsed.
fn read_plan(path: &std::path::Path) -> Result<FaultPlan, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => text.parse(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FaultPlan::default()),
        Err(e) => Err(e.to_string()),
    }
}

/// Re-reads `path` into `plan` until the store holding `plan` is dropped. A thread, not a task:
/// stores are opened outside any runtime too.
fn watch_fault_file(path: PathBuf, plan: Weak<RwLock<FaultPlan>>) {
    let spawned = std::thread::Builder::new().name("fault-file".into()).spawn(move || {
        while let Some(plan) = plan.upgrade() {
            match read_plan(&path) {
                Ok(now) => {
                    let mut current = plan.write().unwrap_or_else(|poisoned| poisoned.into_inner());
                    if *current != now {
                        tracing::warn!(?now, path = %path.display(), "injected object-store faults changed");
                        *current = now;
                    }
                }
                Err(error) => tracing::warn!(%error, path = %path.display(), "fault file unreadable; rates kept"),
            }
            drop(plan);
            std::thread::sleep(FAULT_FILE_POLL);
        }
    });
    if let Err(error) = spawned {
        tracing::error!(%error, "cannot watch the fault file; its rates stay as first read");
    }
}

/// True with probability `rate`, counting the fault when it happens.
fn roll(rate: f64, kind: &str) -> bool {
    let hit = rate > 0.0 && rand::random::<f64>() < rate;
    if hit {
        INJECTED.with_label_values(&[kind]).inc();
    }
    hit
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "injected-faults", source: what.to_owned().into() }
}

/// The answer S3 gives a request over a prefix's request rate.
fn slow_down() -> object_store::Error {
    injected("503 SlowDown: please reduce your request rate")
}

/// An object store whose requests fail as `plan` says.
#[derive(Debug)]
pub struct InjectedFaults {
    inner: Arc<dyn ObjectStore>,
    plan: Arc<RwLock<FaultPlan>>,
    /// PUTs so far, for `slow_put_every`.
    puts: AtomicU64,
    /// Keys with a create-only PUT in progress, for `put_conflict`.
    creating: Arc<Mutex<HashSet<Path>>>,
}

/// A create-only PUT in progress: its key leaves `creating` when the PUT ends or is dropped.
struct Creating {
    keys: Arc<Mutex<HashSet<Path>>>,
    key: Path,
}

impl Drop for Creating {
    fn drop(&mut self) {
        self.keys.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(&self.key);
    }
}

impl InjectedFaults {
    pub fn new(inner: Arc<dyn ObjectStore>, source: FaultSource) -> Self {
        let plan = match source {
            FaultSource::Fixed(plan) => Arc::new(RwLock::new(plan)),
            FaultSource::File(path) => {
                let plan = Arc::new(RwLock::new(read_plan(&path).unwrap_or_default()));
                watch_fault_file(path, Arc::downgrade(&plan));
                plan
            }
            FaultSource::Switch(switch) => switch.0,
        };
        Self { inner, plan, puts: AtomicU64::new(0), creating: Arc::default() }
    }

    fn plan(&self) -> FaultPlan {
        *self.plan.read().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Waits as a request that never got an answer does, then fails.
async fn hang(plan: &FaultPlan) -> object_store::Error {
    tokio::time::sleep(Duration::from_millis(plan.timeout_ms)).await;
    injected("request timed out")
}

impl fmt::Display for InjectedFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InjectedFaults({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for InjectedFaults {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let plan = self.plan();
        if roll(plan.slowdown, "slowdown") {
            return Err(slow_down());
        }
        if roll(plan.put_error, "put_error") {
            return Err(injected("PUT failed"));
        }
        if roll(plan.timeout, "timeout") {
            return Err(hang(&plan).await);
        }
        let _creating = match opts.mode {
            PutMode::Create => {
                let mut keys = self.creating.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                if keys.insert(location.clone()) {
                    Some(Creating { keys: self.creating.clone(), key: location.clone() })
                } else if roll(plan.put_conflict, "put_conflict") {
                    return Err(object_store::Error::AlreadyExists {
                        path: location.to_string(),
                        source: "409 ConditionalRequestConflict: another upload of this key is in progress".into(),
                    });
                } else {
                    None
                }
            }
            _ => None,
        };
        let nth = self.puts.fetch_add(1, Ordering::Relaxed) + 1;
        let every = plan.slow_put_every > 0 && nth.is_multiple_of(plan.slow_put_every);
        if every {
            INJECTED.with_label_values(&["slow_put"]).inc();
        }
        if every || roll(plan.slow_put, "slow_put") {
            tokio::time::sleep(Duration::from_millis(plan.slow_put_ms)).await;
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        if roll(plan.put_lost_ack, "put_lost_ack") {
            return Err(injected("PUT stored the object but its answer was lost"));
        }
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        if roll(self.plan().slowdown, "slowdown") {
            return Err(slow_down());
        }
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let plan = self.plan();
        if roll(plan.slowdown, "slowdown") {
            return Err(slow_down());
        }
        if roll(plan.get_error, "get_error") {
            return Err(injected("GET failed"));
        }
        if roll(plan.timeout, "timeout") {
            return Err(hang(&plan).await);
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        let plan = self.plan();
        if roll(plan.slowdown, "slowdown") {
            return Err(slow_down());
        }
        if roll(plan.get_error, "get_error") {
            return Err(injected("GET failed"));
        }
        if roll(plan.timeout, "timeout") {
            return Err(hang(&plan).await);
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        if roll(self.plan().slowdown, "slowdown") {
            // One bulk delete refused whole: every location is answered with the 503.
            return locations.map(|location| location.and_then(|_| Err::<Path, _>(slow_down()))).boxed();
        }
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        if roll(self.plan().slowdown, "slowdown") {
            return futures::stream::once(std::future::ready(Err::<ObjectMeta, _>(slow_down()))).boxed();
        }
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        if roll(self.plan().slowdown, "slowdown") {
            return Err(slow_down());
        }
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        if roll(self.plan().slowdown, "slowdown") {
            return Err(slow_down());
        }
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        let plan: FaultPlan = "put-error=0.1,put-lost-ack=0.05,slow-put-ms=10".parse().expect("valid");
        assert_eq!((plan.put_error, plan.put_lost_ack, plan.slow_put_ms), (0.1, 0.05, 10));
        for bad in ["put-error=2", "put-error", "teleport=0.1", "slow-put-ms=999999999", "get-error=x", "timeout-ms=-1"]
        {
            assert!(bad.parse::<FaultPlan>().is_err(), "{bad}");
        }
        assert_eq!("slow-put-every=20".parse::<FaultPlan>().map(|p| p.slow_put_every), Ok(20));
        assert!("slow-put-every=-1".parse::<FaultPlan>().is_err());
        assert_eq!("@/tmp/f".parse::<FaultSource>(), Ok(FaultSource::File("/tmp/f".into())));
        assert!("@".parse::<FaultSource>().is_err());
    }

    #[tokio::test]
    async fn a_fault_file_switches_faults_on_and_off() {
        let dir = std::env::temp_dir().join(format!("floe-fault-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("faults");
        let _ = std::fs::remove_file(&file);
        let store = InjectedFaults::new(Arc::new(InMemory::new()), FaultSource::File(file.clone()));
        let path = Path::from("a");
        assert!(store.put(&path, PutPayload::from_static(b"x")).await.is_ok(), "no file: no faults");
        // The watcher's next read applies the file; wait for the plan to change, not a timer.
        let plan_becomes = |wanted: f64| {
            let plan = store.plan.clone();
            async move {
                while plan.read().map(|p| p.put_error).unwrap_or_default() != wanted {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        std::fs::write(&file, "put-error=1").expect("write");
        tokio::time::timeout(FAULT_FILE_POLL * 20, plan_becomes(1.0)).await.expect("faults switched on in time");
        assert!(store.put(&path, PutPayload::from_static(b"x")).await.is_err(), "faults switched on");
        std::fs::write(&file, "").expect("write");
        tokio::time::timeout(FAULT_FILE_POLL * 20, plan_becomes(0.0)).await.expect("faults switched off in time");
        assert!(store.put(&path, PutPayload::from_static(b"x")).await.is_ok(), "faults switched off");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test(start_paused = true)]
    async fn every_nth_put_is_slow() {
        let plan = FaultPlan { slow_put_every: 3, slow_put_ms: 1000, ..FaultPlan::default() };
        let store = InjectedFaults::new(Arc::new(InMemory::new()), FaultSource::Fixed(plan));
        let mut slow = Vec::new();
        for n in 1..=7 {
            let started = tokio::time::Instant::now();
            store.put(&Path::from(format!("o{n}")), PutPayload::from_static(b"x")).await.expect("put");
            slow.push(started.elapsed() >= Duration::from_secs(1));
        }
        assert_eq!(slow, [false, false, true, false, false, true, false]);
    }

    #[tokio::test]
    async fn a_slowdown_refuses_every_kind_of_request() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = Path::from("a");
        inner.put(&path, PutPayload::from_static(b"x")).await.expect("put");
        let store = InjectedFaults::new(inner, FaultSource::Fixed(FaultPlan { slowdown: 1.0, ..FaultPlan::default() }));
        assert!(store.put(&Path::from("b"), PutPayload::from_static(b"x")).await.is_err(), "PUT");
        assert!(store.get(&path).await.is_err(), "GET");
        assert!(store.head(&path).await.is_err(), "HEAD");
        let ranges: Vec<Range<u64>> = std::iter::once(0..1).collect();
        assert!(store.get_ranges(&path, &ranges).await.is_err(), "ranged GETs");
        let listed: Vec<_> = store.list(None).collect().await;
        assert!(matches!(listed.as_slice(), [Err(_)]), "LIST");
        assert!(store.list_with_delimiter(None).await.is_err(), "LIST with a delimiter");
        assert!(store.delete(&path).await.is_err(), "DELETE");
        assert!(store.copy(&path, &Path::from("c")).await.is_err(), "COPY");
    }

    #[tokio::test]
    async fn a_lost_ack_put_is_stored_and_reported_failed() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let store = InjectedFaults::new(
            inner.clone(),
            FaultSource::Fixed(FaultPlan { put_lost_ack: 1.0, ..FaultPlan::default() }),
        );
        let path = Path::from("a");
        assert!(store.put(&path, PutPayload::from_static(b"x")).await.is_err());
        assert!(inner.head(&path).await.is_ok(), "the object was stored");
        let failing = InjectedFaults::new(
            inner.clone(),
            FaultSource::Fixed(FaultPlan { put_error: 1.0, ..FaultPlan::default() }),
        );
        let other = Path::from("b");
        assert!(failing.put(&other, PutPayload::from_static(b"x")).await.is_err());
        assert!(inner.head(&other).await.is_err(), "nothing was stored");
    }
}
