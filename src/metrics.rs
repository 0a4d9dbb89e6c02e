//! Metrics every `floe` process exports, whatever it runs: `floe_build_info`, the space left on
//! the file systems holding its directories (the disk tier, the usage journal, the Raft log), and
//! what the allocator's heaps hold (`floe_heap_*`).

use std::path::PathBuf;
use std::sync::Mutex;

use floe_metadata::locks::MutexRecovery;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{GaugeVec, IntCounter, IntGauge, IntGaugeVec, Opts};

/// `floe_build_info{version, profile}` = 1, Prometheus's convention for what is running.
pub(crate) fn register_build_info() {
    let info = IntGaugeVec::new(
        Opts::new("floe_build_info", "The running Floe's version and build profile (always 1)"),
        &["version", "profile"],
    )
    .and_then(|info| {
        let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
        info.with_label_values(&[env!("CARGO_PKG_VERSION"), profile]).set(1);
        prometheus::register(Box::new(info))
    });
    if let Err(e) = registered_once(info) {
        tracing::warn!(error = %e, "floe_build_info unavailable");
    }
}

/// `floe_disk_available_bytes{dir}` and `floe_disk_capacity_bytes{dir}` for the file system of
/// each named directory, read at each scrape (`dir` is the role: `cache`, `usage`, `metadata`,
/// `data`).
pub(crate) fn register_disk_space(dirs: Vec<(&'static str, PathBuf)>) {
    let collector = DiskSpace::new(dirs).and_then(|c| prometheus::register(Box::new(c)));
    if let Err(e) = registered_once(collector) {
        tracing::warn!(error = %e, "disk space metrics unavailable");
    }
}

/// `floe_heap_in_use_bytes`, `floe_heap_free_bytes` and `floe_heap_returned_bytes_total`, read at
/// each scrape: when the process's RSS grows, whether live allocations grew or the allocator kept
/// what was freed.
pub(crate) fn register_heap() {
    let collector = Heap::new().and_then(|c| prometheus::register(Box::new(c)));
    if let Err(e) = registered_once(collector) {
        tracing::warn!(error = %e, "heap metrics unavailable");
    }
}

/// A second registration (a second agent in one process) is not an error.
fn registered_once(result: prometheus::Result<()>) -> prometheus::Result<()> {
    match result {
        Err(prometheus::Error::AlreadyReg) => Ok(()),
        other => other,
    }
}

#[derive(Debug)]
struct DiskSpace {
    dirs: Vec<(&'static str, PathBuf)>,
    available: GaugeVec,
    capacity: GaugeVec,
    /// Scrapes reset the gauges; one at a time.
    scrape: Mutex<()>,
}

impl DiskSpace {
    fn new(dirs: Vec<(&'static str, PathBuf)>) -> prometheus::Result<Self> {
        Ok(Self {
            dirs,
            available: GaugeVec::new(
                Opts::new("floe_disk_available_bytes", "Bytes available to Floe on the file system of a directory"),
                &["dir"],
            )?,
            capacity: GaugeVec::new(
                Opts::new("floe_disk_capacity_bytes", "Size of the file system of a directory"),
                &["dir"],
            )?,
            scrape: Mutex::new(()),
        })
    }
}

impl Collector for DiskSpace {
    fn desc(&self) -> Vec<&Desc> {
        self.available.desc().into_iter().chain(self.capacity.desc()).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.scrape.lock_recovered();
        self.available.reset();
        self.capacity.reset();
        for (name, dir) in &self.dirs {
            // A directory not made yet (no usage journal written) is left out, not an error.
            if let Ok(stats) = fs4::statvfs(dir) {
                self.available.with_label_values(&[name]).set(stats.available_space() as f64);
                self.capacity.with_label_values(&[name]).set(stats.total_space() as f64);
            }
        }
        self.available.collect().into_iter().chain(self.capacity.collect()).collect()
    }
}

#[derive(Debug)]
struct Heap {
    in_use: IntGauge,
    free: IntGauge,
    returned: IntCounter,
    /// Scrapes set the gauges; one at a time.
    scrape: Mutex<()>,
}

impl Heap {
    fn new() -> prometheus::Result<Self> {
        Ok(Self {
            in_use: IntGauge::new("floe_heap_in_use_bytes", "Bytes of live allocations in the process's heaps")?,
            free: IntGauge::new(
                "floe_heap_free_bytes",
                "Bytes in the allocator's free lists: in no live allocation, and resident unless returned to the kernel",
            )?,
            returned: IntCounter::new(
                "floe_heap_returned_bytes_total",
                "Resident bytes the allocator's free memory gave back to the kernel (checked every 5 s)",
            )?,
            scrape: Mutex::new(()),
        })
    }
}

impl Collector for Heap {
    fn desc(&self) -> Vec<&Desc> {
        self.in_use.desc().into_iter().chain(self.free.desc()).chain(self.returned.desc()).collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let _one = self.scrape.lock_recovered();
        let usage = crate::heap::usage();
        self.in_use.set(i64::try_from(usage.in_use).unwrap_or(i64::MAX));
        self.free.set(i64::try_from(usage.free).unwrap_or(i64::MAX));
        self.returned.inc_by(crate::heap::returned_bytes().saturating_sub(self.returned.get()));
        let families = [self.in_use.collect(), self.free.collect(), self.returned.collect()];
        families.into_iter().flatten().collect()
    }
}
