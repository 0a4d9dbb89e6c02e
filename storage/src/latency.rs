//! Simulated object-store latency, for benchmarks only: a wrapper that delays each request of
//! the store beneath it by a time drawn from a named profile, so produce and end-to-end latency
//! can be studied on a laptop without a cloud account. It is a model, not a measurement: each
//! operation waits a log-normal time fitted to a median and a 99th percentile, plus a transfer
//! time per MiB. The agent uses it only when started with `--object-store-latency`.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;

use crate::store::StoreClass;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
    PutOptions, PutPayload, PutResult,
};

/// The latency of one kind of request: log-normal, given by its median and 99th percentile, plus
/// the time to move the bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestLatency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Milliseconds per MiB moved, on top of the first-byte time.
    pub ms_per_mib: f64,
}

impl RequestLatency {
    /// One draw for a request moving `bytes`.
    fn sample(&self, bytes: u64) -> Duration {
        // z of the 99th percentile of a standard normal.
        const Z_P99: f64 = 2.326_348;
        let sigma = (self.p99_ms / self.p50_ms).ln().max(0.0) / Z_P99;
        let first_byte_ms = self.p50_ms * (sigma * standard_normal()).exp();
        let transfer_ms = self.ms_per_mib * bytes as f64 / (1024.0 * 1024.0);
        // Capped so one unlucky draw cannot stall a benchmark for minutes.
        Duration::from_secs_f64(((first_byte_ms + transfer_ms) / 1000.0).clamp(0.0, 30.0))
    }
}

/// A standard normal draw (Box–Muller).
fn standard_normal() -> f64 {
    let u1: f64 = rand::random::<f64>().max(f64::MIN_POSITIVE);
    let u2: f64 = rand::random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A named latency profile: what each kind of request waits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyProfile {
    pub name: &'static str,
    /// The kind of store it simulates, whose defaults apply under it.
    pub class: StoreClass,
    pub put: RequestLatency,
    pub get: RequestLatency,
    /// HEAD, LIST, DELETE and COPY.
    pub other: RequestLatency,
}

impl LatencyProfile {
    /// The profiles `--object-store-latency` accepts. Rough figures for a request from a VM in
    /// the same region, as commonly reported for S3 Standard (tens of milliseconds to the first
    /// byte, a long tail) and S3 Express One Zone (single-digit milliseconds).
    pub const PROFILES: [LatencyProfile; 2] = [
        LatencyProfile {
            name: "s3-standard",
            class: StoreClass::S3Standard,
            put: RequestLatency { p50_ms: 40.0, p99_ms: 200.0, ms_per_mib: 10.0 },
            get: RequestLatency { p50_ms: 20.0, p99_ms: 100.0, ms_per_mib: 10.0 },
            other: RequestLatency { p50_ms: 15.0, p99_ms: 60.0, ms_per_mib: 0.0 },
        },
        LatencyProfile {
            name: "s3-express",
            class: StoreClass::S3Express,
            put: RequestLatency { p50_ms: 5.0, p99_ms: 15.0, ms_per_mib: 2.5 },
            get: RequestLatency { p50_ms: 3.0, p99_ms: 10.0, ms_per_mib: 2.5 },
            other: RequestLatency { p50_ms: 3.0, p99_ms: 10.0, ms_per_mib: 0.0 },
        },
    ];

    pub fn named(name: &str) -> Option<Self> {
        Self::PROFILES.into_iter().find(|p| p.name == name)
    }

    /// The names, for error messages and `--help`.
    pub fn names() -> String {
        Self::PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
    }
}

/// An object store whose requests wait as `profile` says before they are answered.
#[derive(Debug)]
pub struct SimulatedLatency {
    inner: Arc<dyn ObjectStore>,
    profile: LatencyProfile,
}

impl SimulatedLatency {
    pub fn new(inner: Arc<dyn ObjectStore>, profile: LatencyProfile) -> Self {
        Self { inner, profile }
    }
}

impl fmt::Display for SimulatedLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimulatedLatency({}, {})", self.profile.name, self.inner)
    }
}

async fn wait(latency: &RequestLatency, bytes: u64) {
    tokio::time::sleep(latency.sample(bytes)).await;
}

#[async_trait]
impl ObjectStore for SimulatedLatency {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        wait(&self.profile.put, payload.content_length() as u64).await;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        // Floe writes whole objects; a multipart upload waits once, at its start.
        wait(&self.profile.put, 0).await;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let result = self.inner.get_opts(location, options).await?;
        let Range { start, end } = result.range;
        wait(&self.profile.get, end.saturating_sub(start)).await;
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        let bytes: u64 = ranges.iter().map(|r| r.end.saturating_sub(r.start)).sum();
        wait(&self.profile.get, bytes).await;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let other = self.profile.other;
        self.inner
            .delete_stream(locations)
            .then(move |deleted| async move {
                wait(&other, 0).await;
                deleted
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        // One wait per listing page of 1000 keys, as S3 answers them.
        let other = self.profile.other;
        self.inner
            .list(prefix)
            .enumerate()
            .then(move |(i, meta)| async move {
                if i % 1000 == 0 {
                    wait(&other, 0).await;
                }
                meta
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        wait(&self.profile.other, 0).await;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        wait(&self.profile.other, 0).await;
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_follow_the_profile_median_and_tail() {
        let latency = RequestLatency { p50_ms: 20.0, p99_ms: 100.0, ms_per_mib: 0.0 };
        let mut ms: Vec<f64> = (0..20_000).map(|_| latency.sample(0).as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let (p50, p99) = (ms[10_000], ms[19_800]);
        assert!((17.0..23.0).contains(&p50), "p50 {p50}");
        assert!((80.0..125.0).contains(&p99), "p99 {p99}");
    }

    #[test]
    fn transfer_time_scales_with_bytes() {
        let latency = RequestLatency { p50_ms: 1.0, p99_ms: 1.0, ms_per_mib: 10.0 };
        let ms = latency.sample(8 * 1024 * 1024).as_secs_f64() * 1000.0;
        assert!((80.0..82.0).contains(&ms), "{ms}");
    }

    #[test]
    fn profiles_are_found_by_name() {
        assert_eq!(LatencyProfile::named("s3-express").map(|p| p.name), Some("s3-express"));
        assert!(LatencyProfile::named("s3-glacier").is_none());
    }
}
