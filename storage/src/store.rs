//! The one place an object store is built from a URL, and the typed operations Floe performs on
//! it: create-only segment PUTs, verified chunk reads, footer reads.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};

use crate::SegmentKey;
use crate::faults::{FaultSource, InjectedFaults};
use crate::hedge::PutHedging;
use crate::latency::{LatencyProfile, SimulatedLatency};
use crate::timed::TimedRequests;

/// Directory under the store prefix holding metadata archives (state snapshots).
pub const ARCHIVE_DIR: &str = "metadata";
use crate::error::{PutSegmentError, ReadFooterError, StorageError};
use crate::limits::{FOOTER_READ_BYTES, SEGMENT_BYTES_MAX};
use crate::metrics;
use crate::segment::trailer::TRAILER_BYTES;
use crate::segment::{FooterAtEnd, SegmentFooter, SegmentObject, footer_at_end};

/// Where objects live: `file:///dir`, `s3://bucket/prefix` or `memory://` (tests only).
#[derive(Clone, Debug, Default)]
pub struct ObjectStoreConfig {
    pub url: String,
    /// Endpoint of an S3-compatible server; credentials come from the standard AWS variables.
    pub s3_endpoint: Option<String>,
    /// Benchmarks only: delay every request as this profile says.
    pub latency: Option<LatencyProfile>,
    /// Reliability tests only: make requests fail as this plan says.
    pub faults: Option<FaultSource>,
    /// Send a slow segment PUT a second time (`hedge`): for remote stores, whose PUTs have a
    /// long tail.
    pub hedge_puts: bool,
}

/// What kind of store objects go to, for the defaults that depend on its latency and request
/// prices (how often to flush, whether to hedge PUTs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreClass {
    /// A local directory (or memory): fast, and requests cost nothing.
    Local,
    /// S3 Standard or an S3-compatible server: tens of milliseconds a PUT, with a long tail.
    S3Standard,
    /// S3 Express One Zone, a directory bucket (`NAME--ZONE--x-s3`): a few milliseconds a PUT.
    S3Express,
}

impl StoreClass {
    /// The class of the store at `url`, or of the remote store `simulated` stands for.
    pub fn of(url: &str, simulated: Option<LatencyProfile>) -> Self {
        if let Some(profile) = simulated {
            return profile.class;
        }
        match url::Url::parse(url) {
            Ok(url) if url.scheme() == "s3" => match url.host_str() {
                Some(bucket) if bucket.ends_with("--x-s3") => Self::S3Express,
                _ => Self::S3Standard,
            },
            _ => Self::Local,
        }
    }
}

/// An S3 client for `bucket` at `endpoint` (default: AWS), configured from `AWS_*` variables.
/// Over HTTPS the request body is sent unsigned (`UNSIGNED-PAYLOAD`): TLS protects it in transit
/// and every chunk carries its own CRC-32C, while signing it means a SHA-256 of every byte, a
/// third of an agent's produce CPU when measured. Plain-HTTP endpoints (local servers, tests)
/// keep the signed payload; `AWS_UNSIGNED_PAYLOAD` (`unsigned_payload`) decides when set.
fn s3_builder(bucket: &str, endpoint: Option<&str>, unsigned_payload: Option<std::ffi::OsString>) -> AmazonS3Builder {
    let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(endpoint) = endpoint {
        builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
    }
    let https = endpoint.is_none_or(|e| e.starts_with("https://"));
    if unsigned_payload.is_none() {
        builder = builder.with_unsigned_payload(https);
    }
    builder
}

/// Segment objects in one bucket and prefix.
#[derive(Clone, Debug)]
pub struct SegmentStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// Set for `file://` stores: segments are fsynced there before they count as written, since
    /// the local file system, unlike S3, acknowledges a write before it is durable.
    local_root: Option<PathBuf>,
    url: String,
    s3_endpoint: Option<String>,
    /// Set when slow segment PUTs are hedged.
    hedging: Option<Arc<PutHedging>>,
}

impl SegmentStore {
    pub fn open(config: &ObjectStoreConfig) -> Result<Self, StorageError> {
        let invalid = |reason: &str| StorageError::InvalidUrl { url: config.url.clone(), reason: reason.to_owned() };
        let url = url::Url::parse(&config.url).map_err(|e| invalid(&e.to_string()))?;
        let (store, prefix, local_root): (Arc<dyn ObjectStore>, Path, Option<PathBuf>) = match url.scheme() {
            "file" => {
                let root = url.to_file_path().map_err(|()| invalid("file URLs need an absolute path"))?;
                std::fs::create_dir_all(&root)?;
                let store = LocalFileSystem::new_with_prefix(&root)?;
                (Arc::new(store), Path::default(), Some(root))
            }
            "memory" => (Arc::new(InMemory::new()), Path::default(), None),
            "s3" => {
                let bucket = url.host_str().filter(|b| !b.is_empty()).ok_or_else(|| invalid("no bucket name"))?;
                let builder =
                    s3_builder(bucket, config.s3_endpoint.as_deref(), std::env::var_os("AWS_UNSIGNED_PAYLOAD"));
                let prefix = Path::from(url.path().trim_matches('/'));
                (Arc::new(builder.build()?), prefix, None)
            }
            other => return Err(invalid(&format!("unsupported scheme {other:?}; use file://, s3:// or memory://"))),
        };
        let store: Arc<dyn ObjectStore> = match config.faults.clone() {
            Some(source) => Arc::new(InjectedFaults::new(store, source)),
            None => store,
        };
        let store = match config.latency {
            Some(profile) => Arc::new(SimulatedLatency::new(store, profile)),
            None => store,
        };
        let store: Arc<dyn ObjectStore> = Arc::new(TimedRequests::new(store));
        let s3_endpoint = config.s3_endpoint.clone().filter(|_| url.scheme() == "s3");
        let hedging = config.hedge_puts.then(|| Arc::new(PutHedging::default()));
        Ok(Self { store, prefix, local_root, url: config.url.clone(), s3_endpoint, hedging })
    }

    /// The URL the store was opened with, for logs and `floe admin`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The S3-compatible server an `s3://` store talks to, when not AWS itself.
    pub fn s3_endpoint(&self) -> Option<&str> {
        self.s3_endpoint.as_deref()
    }

    fn path(&self, key: &SegmentKey) -> Path {
        self.object_path(key.as_str())
    }

    /// Where an object of any kind lives: `key` under the store's prefix.
    pub(crate) fn object_path(&self, key: &str) -> Path {
        if self.prefix.as_ref().is_empty() { Path::from(key) } else { Path::from(format!("{}/{key}", self.prefix)) }
    }

    /// Bytes of a listed location that are the prefix (and its slash), before the key.
    pub(crate) fn prefix_len(&self) -> usize {
        if self.prefix.as_ref().is_empty() { 0 } else { self.prefix.as_ref().len() + 1 }
    }

    pub(crate) fn object_store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    /// For `file://` stores, makes a written object durable (the local file system, unlike S3,
    /// acknowledges a write before it is).
    pub(crate) async fn sync_local(&self, path: &Path) -> Result<(), StorageError> {
        if let Some(root) = &self.local_root {
            let file = root.join(path.as_ref());
            tokio::task::spawn_blocking(move || sync_file_and_parent(&file))
                .await
                .map_err(|e| StorageError::Io(std::io::Error::other(e)))??;
        }
        Ok(())
    }

    /// `payload` in one part for a `file://` store, which writes each part with a write(2) of
    /// its own: a flush at 2,000 partitions is some 150 parts, 13,000 system calls a second
    /// where one copy of the object's bytes does. Other stores stream the parts as they are.
    fn joined_for_local(&self, payload: object_store::PutPayload) -> object_store::PutPayload {
        if self.local_root.is_none() || payload.as_ref().len() <= 1 {
            return payload;
        }
        let mut joined = Vec::with_capacity(payload.content_length());
        for part in payload.iter() {
            joined.extend_from_slice(part);
        }
        Bytes::from(joined).into()
    }

    /// Writes a segment with create-only semantics and returns once it is durable.
    pub async fn put_segment(&self, key: &SegmentKey, object: SegmentObject) -> Result<(), PutSegmentError> {
        if object.object_bytes > SEGMENT_BYTES_MAX {
            return Err(PutSegmentError::TooLarge { bytes: object.object_bytes, max: SEGMENT_BYTES_MAX });
        }
        let path = self.path(key);
        let result = match &self.hedging {
            Some(hedging) => {
                let payload = object.payload;
                let stored =
                    || async { self.store.head(&path).await.is_ok_and(|meta| meta.size == object.object_bytes) };
                hedging.put(object.object_bytes, || self.put_create(&path, payload.clone()), stored).await
            }
            None => self.put_create(&path, object.payload).await,
        };
        match result {
            Ok(()) => metrics::OBJECT_PUT_BYTES.inc_by(object.object_bytes),
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(PutSegmentError::KeyExists { key: key.clone() });
            }
            Err(e) => return Err(PutSegmentError::Io(e.into())),
        }
        Ok(self.sync_local(&path).await?)
    }

    /// One create-only PUT, counted by its outcome.
    async fn put_create(&self, path: &Path, payload: object_store::PutPayload) -> object_store::Result<()> {
        let payload = self.joined_for_local(payload);
        let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
        let result = self.store.put_opts(path, payload, options).await.map(drop);
        metrics::OBJECT_PUTS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        result
    }

    /// Reads bytes `range` of a segment object (one ranged GET); callers check what they read.
    pub async fn get_range(&self, key: &SegmentKey, range: std::ops::Range<u64>) -> Result<Bytes, StorageError> {
        let result = self.store.get_range(&self.path(key), range).await;
        metrics::OBJECT_GETS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        let bytes = result?;
        metrics::OBJECT_GET_BYTES.inc_by(bytes.len() as u64);
        Ok(bytes)
    }

    /// Reads and checks a segment's trailer and footer (a HEAD for its size, then as
    /// [`Self::read_footer_at`]).
    pub async fn read_footer(&self, key: &SegmentKey) -> Result<SegmentFooter, ReadFooterError> {
        let object_bytes = self.store.head(&self.path(key)).await.map_err(StorageError::from)?.size;
        self.read_footer_at(key, object_bytes).await
    }

    /// Reads and checks the trailer and footer of a segment `object_bytes` long: one ranged GET of
    /// its last [`FOOTER_READ_BYTES`], and a second for a footer that starts before them.
    pub async fn read_footer_at(&self, key: &SegmentKey, object_bytes: u64) -> Result<SegmentFooter, ReadFooterError> {
        let corrupt = |reason: String| ReadFooterError::Corrupt { key: key.to_string(), reason };
        if object_bytes < TRAILER_BYTES as u64 {
            return Err(corrupt(format!("{object_bytes} bytes is too short for a trailer")));
        }
        let end_start = object_bytes.saturating_sub(FOOTER_READ_BYTES);
        let end = self.get_range(key, end_start..object_bytes).await?;
        if end.len() as u64 != object_bytes - end_start {
            let asked = object_bytes - end_start;
            return Err(corrupt(format!("{} bytes at the object's end where {asked} were asked for", end.len())));
        }
        match footer_at_end(&end, object_bytes).map_err(corrupt)? {
            FooterAtEnd::Within(footer) => Ok(footer),
            FooterAtEnd::Before { footer_start, trailer } => {
                let trailer_at = end.len() - TRAILER_BYTES;
                let head = self.get_range(key, footer_start..end_start).await?;
                let mut footer = Vec::with_capacity(head.len() + trailer_at);
                footer.extend_from_slice(&head);
                footer.extend_from_slice(&end[..trailer_at]);
                SegmentFooter::decode(&footer, &trailer, footer_start).map_err(corrupt)
            }
            FooterAtEnd::NoTrailer => Err(corrupt(format!("{} bytes is too short for a trailer", end.len()))),
        }
    }
}

impl SegmentStore {
    fn archive_path(&self, name: &str) -> Path {
        self.object_path(&format!("{ARCHIVE_DIR}/{name}"))
    }

    /// Stores a metadata archive object (a state snapshot) under `metadata/NAME`, durably.
    pub async fn put_archive(&self, name: &str, bytes: Bytes) -> Result<(), StorageError> {
        let path = self.archive_path(name);
        let size = bytes.len() as u64;
        let result = self.store.put(&path, bytes.into()).await;
        metrics::OBJECT_PUTS.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        result?;
        metrics::OBJECT_PUT_BYTES.inc_by(size);
        self.sync_local(&path).await
    }

    /// Names of the metadata archive objects, sorted.
    pub async fn list_archives(&self) -> Result<Vec<String>, StorageError> {
        use futures::TryStreamExt;
        let dir = self.archive_path("");
        let listed: Vec<_> = self.store.list(Some(&dir)).try_collect().await?;
        let mut names: Vec<String> =
            listed.into_iter().filter_map(|m| m.location.filename().map(str::to_owned)).collect();
        names.sort();
        Ok(names)
    }

    pub async fn get_archive(&self, name: &str) -> Result<Bytes, StorageError> {
        Ok(self.store.get(&self.archive_path(name)).await?.bytes().await?)
    }

    pub async fn delete_archive(&self, name: &str) -> Result<(), StorageError> {
        Ok(self.store.delete(&self.archive_path(name)).await?)
    }
}

/// A segment object found by listing the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedSegment {
    pub key: SegmentKey,
    /// When the store last wrote it, in milliseconds since the Unix epoch.
    pub last_modified_ms: i64,
}

impl SegmentStore {
    /// Up to `max` segment objects in the store (oldest first on S3, whose listings are sorted
    /// and whose keys are time-ordered), as garbage collection looks for orphans.
    pub async fn list_segments(&self, max: usize) -> Result<Vec<ListedSegment>, StorageError> {
        use futures::{StreamExt, TryStreamExt};
        let dir = self.path(&SegmentKey::from_stored(crate::keys::SEGMENTS_DIR.to_owned()));
        let listed: Vec<_> = self.store.list(Some(&dir)).take(max).try_collect().await?;
        metrics::OBJECT_LISTS.inc();
        let skip = self.prefix_len();
        Ok(listed
            .into_iter()
            .filter_map(|m| {
                let key = m.location.as_ref().get(skip..)?.to_owned();
                Some(ListedSegment {
                    key: SegmentKey::from_stored(key),
                    last_modified_ms: m.last_modified.timestamp_millis(),
                })
            })
            .collect())
    }

    /// Deletes a segment object; deleting one that is already gone succeeds.
    pub async fn delete_segment(&self, key: &SegmentKey) -> Result<(), StorageError> {
        let result = match self.store.delete(&self.path(key)).await {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            other => other,
        };
        metrics::OBJECT_DELETES.with_label_values(&[if result.is_ok() { "ok" } else { "error" }]).inc();
        Ok(result?)
    }
}

fn sync_file_and_parent(file: &std::path::Path) -> Result<(), StorageError> {
    std::fs::File::open(file)?.sync_all()?;
    if let Some(dir) = file.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use object_store::aws::AmazonS3ConfigKey;

    use super::s3_builder;

    fn unsigned(endpoint: Option<&str>, env: Option<&str>) -> Option<String> {
        s3_builder("b", endpoint, env.map(Into::into)).get_config_value(&AmazonS3ConfigKey::UnsignedPayload)
    }

    #[test]
    fn store_classes_come_from_the_url_or_the_simulated_profile() {
        use super::StoreClass;
        use crate::LatencyProfile;
        assert_eq!(StoreClass::of("file:///tmp/x", None), StoreClass::Local);
        assert_eq!(StoreClass::of("memory://", None), StoreClass::Local);
        assert_eq!(StoreClass::of("s3://bucket/prefix", None), StoreClass::S3Standard);
        assert_eq!(StoreClass::of("s3://logs--use1-az4--x-s3/p", None), StoreClass::S3Express);
        let express = LatencyProfile::named("s3-express");
        assert_eq!(StoreClass::of("file:///tmp/x", express), StoreClass::S3Express);
        assert_eq!(StoreClass::of("file:///tmp/x", LatencyProfile::named("s3-standard")), StoreClass::S3Standard);
    }

    #[test]
    fn payloads_are_signed_only_over_plain_http_unless_the_environment_says() {
        assert_eq!(unsigned(None, None).as_deref(), Some("true"), "AWS itself: HTTPS");
        assert_eq!(unsigned(Some("https://s3.example:9000"), None).as_deref(), Some("true"));
        assert_eq!(unsigned(Some("http://127.0.0.1:9000"), None).as_deref(), Some("false"));
        // Set in the environment, `from_env` has read it (here: not set, so the client's default,
        // signed) and the HTTPS default stays out of the way.
        assert_eq!(unsigned(Some("https://s3.example:9000"), Some("false")).as_deref(), Some("false"));
    }
}
