//! Injected object-store faults, for reliability tests only: a wrapper that makes requests of the
//! store beneath it fail at given rates, the way S3 misbehaves: errors, `503 SlowDown`, slow
//! PUTs, and a PUT that stored the object but whose answer was lost. The agent uses it only when
//! started with `--test-object-store-faults`, and says so in its log at start.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};
use prometheus::{IntCounterVec, register_int_counter_vec};

/// Longest injected PUT delay.
const SLOW_PUT_MS_MAX: u64 = 120_000;
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
    /// A PUT or GET is refused with 503 SlowDown.
    pub slowdown: f64,
    /// A GET fails.
    pub get_error: f64,
    /// A PUT waits `slow_put_ms` before it is sent.
    pub slow_put: f64,
    pub slow_put_ms: u64,
}

impl FromStr for FaultPlan {
    type Err = String;

    /// `put-error=0.1,put-lost-ack=0.05,slowdown=0.05,get-error=0.02,slow-put=0.01,slow-put-ms=3000`
    fn from_str(spec: &str) -> Result<Self, String> {
        if spec.len() > SPEC_BYTES_MAX {
            return Err(format!("fault spec longer than {SPEC_BYTES_MAX} bytes"));
        }
        let mut plan = FaultPlan { slow_put_ms: 2000, ..FaultPlan::default() };
        for part in spec.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = part.split_once('=').ok_or_else(|| format!("{part:?} is not KEY=VALUE"))?;
            if key == "slow-put-ms" {
                plan.slow_put_ms = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms <= SLOW_PUT_MS_MAX)
                    .ok_or_else(|| format!("slow-put-ms must be 0..={SLOW_PUT_MS_MAX}"))?;
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
                other => {
                    return Err(format!(
                        "unknown fault {other:?}; known: put-error, put-lost-ack, slowdown, get-error, slow-put, slow-put-ms"
                    ));
                }
            }
        }
        Ok(plan)
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

/// An object store whose requests fail as `plan` says.
#[derive(Debug)]
pub struct InjectedFaults {
    inner: Arc<dyn ObjectStore>,
    plan: FaultPlan,
}

impl InjectedFaults {
    pub fn new(inner: Arc<dyn ObjectStore>, plan: FaultPlan) -> Self {
        Self { inner, plan }
    }
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
        if roll(self.plan.slowdown, "slowdown") {
            return Err(injected("503 SlowDown: please reduce your request rate"));
        }
        if roll(self.plan.put_error, "put_error") {
            return Err(injected("PUT failed"));
        }
        if roll(self.plan.slow_put, "slow_put") {
            tokio::time::sleep(Duration::from_millis(self.plan.slow_put_ms)).await;
        }
        let result = self.inner.put_opts(location, payload, opts).await?;
        if roll(self.plan.put_lost_ack, "put_lost_ack") {
            return Err(injected("PUT stored the object but its answer was lost"));
        }
        Ok(result)
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        if roll(self.plan.slowdown, "slowdown") {
            return Err(injected("503 SlowDown: please reduce your request rate"));
        }
        if roll(self.plan.get_error, "get_error") {
            return Err(injected("GET failed"));
        }
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        if roll(self.plan.get_error, "get_error") {
            return Err(injected("GET failed"));
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
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
        for bad in ["put-error=2", "put-error", "teleport=0.1", "slow-put-ms=999999999", "get-error=x"] {
            assert!(bad.parse::<FaultPlan>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_lost_ack_put_is_stored_and_reported_failed() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let store = InjectedFaults::new(inner.clone(), FaultPlan { put_lost_ack: 1.0, ..FaultPlan::default() });
        let path = Path::from("a");
        assert!(store.put(&path, PutPayload::from_static(b"x")).await.is_err());
        assert!(inner.head(&path).await.is_ok(), "the object was stored");
        let failing = InjectedFaults::new(inner.clone(), FaultPlan { put_error: 1.0, ..FaultPlan::default() });
        let other = Path::from("b");
        assert!(failing.put(&other, PutPayload::from_static(b"x")).await.is_err());
        assert!(inner.head(&other).await.is_err(), "nothing was stored");
    }
}
