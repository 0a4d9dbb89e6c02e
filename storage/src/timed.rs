//! Object-store request latency by operation: the outermost wrapper of every store, so what it
//! measures is what Floe waited for (simulated latency and injected faults included).
//!
//! A GET is timed until its body has been read (or abandoned), not to its first byte: a block
//! read waits for all of it. A listing is timed until its stream ends.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

use crate::metrics::OBJECT_REQUEST_SECONDS;

/// Records one request's duration when dropped: at the end of a body or listing stream, or when
/// its reader gives up on it.
struct RequestTimer {
    operation: &'static str,
    started: Instant,
}

impl RequestTimer {
    fn start(operation: &'static str) -> Self {
        Self { operation, started: Instant::now() }
    }
}

impl Drop for RequestTimer {
    fn drop(&mut self) {
        OBJECT_REQUEST_SECONDS.with_label_values(&[self.operation]).observe(self.started.elapsed().as_secs_f64());
    }
}

/// An object store whose requests are timed into `floe_object_store_request_duration_seconds`.
#[derive(Debug)]
pub struct TimedRequests {
    inner: Arc<dyn ObjectStore>,
}

impl TimedRequests {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner }
    }
}

impl fmt::Display for TimedRequests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TimedRequests({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for TimedRequests {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let _timer = RequestTimer::start("put");
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        // Floe writes whole objects; only the upload's creation is timed.
        let _timer = RequestTimer::start("put_multipart");
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
        let timer = RequestTimer::start(if options.head { "head" } else { "get" });
        let mut result = self.inner.get_opts(location, options).await?;
        result.payload = match result.payload {
            // The timer moves into the stream and records when the body has been read.
            GetResultPayload::Stream(stream) => GetResultPayload::Stream(
                stream
                    .map(move |chunk| {
                        let _ = &timer;
                        chunk
                    })
                    .boxed(),
            ),
            file => file,
        };
        Ok(result)
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
        let _timer = RequestTimer::start("get");
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // A bulk delete is timed as a whole: S3 deletes up to 1,000 keys per request.
        let timer = RequestTimer::start("delete");
        self.inner
            .delete_stream(locations)
            .map(move |deleted| {
                let _ = &timer;
                deleted
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let timer = RequestTimer::start("list");
        self.inner
            .list(prefix)
            .map(move |meta| {
                let _ = &timer;
                meta
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let _timer = RequestTimer::start("list");
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
        let _timer = RequestTimer::start("copy");
        self.inner.copy_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;

    use super::*;

    fn count(operation: &str) -> u64 {
        OBJECT_REQUEST_SECONDS.with_label_values(&[operation]).get_sample_count()
    }

    #[tokio::test]
    async fn each_operation_is_timed_once() {
        let store = TimedRequests::new(Arc::new(InMemory::new()));
        let path = Path::from("timed/a");
        let (puts, gets, heads, lists, deletes) =
            (count("put"), count("get"), count("head"), count("list"), count("delete"));
        store.put(&path, PutPayload::from_static(b"abc")).await.expect("put");
        let bytes = store.get_range(&path, 0..2).await.expect("get");
        assert_eq!(&bytes[..], b"ab");
        store.head(&path).await.expect("head");
        let listed: Vec<_> = store.list(Some(&Path::from("timed"))).collect().await;
        assert_eq!(listed.len(), 1);
        store.delete(&path).await.expect("delete");
        // Other tests in this process may time requests too; these counts only grow by ours.
        assert!(count("put") > puts);
        assert!(count("get") > gets);
        assert!(count("head") > heads);
        assert!(count("list") > lists);
        assert!(count("delete") > deletes);
    }
}
