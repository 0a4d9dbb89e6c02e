//! `process_*` metrics of this process, read from /proc at each scrape. The prometheus crate's
//! own process collector rounds CPU time down to whole seconds, too coarse for the load
//! generator's per-GiB figures over a run of a few seconds.

use std::sync::Mutex;

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Counter, Gauge, Opts};

#[derive(Debug)]
pub(crate) struct ProcessMetrics {
    /// Held while the counter catches up with the kernel's total, so two scrapes at once do
    /// not both add the same time.
    cpu_seconds: Mutex<Counter>,
    resident_bytes: Gauge,
    threads: Gauge,
    descs: Vec<Desc>,
}

impl ProcessMetrics {
    pub(crate) fn new() -> prometheus::Result<Self> {
        let cpu_seconds = Counter::with_opts(Opts::new(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds",
        ))?;
        let resident_bytes =
            Gauge::with_opts(Opts::new("process_resident_memory_bytes", "Resident memory size in bytes"))?;
        let threads = Gauge::with_opts(Opts::new("process_threads", "Number of OS threads in the process"))?;
        let mut descs: Vec<Desc> = cpu_seconds.desc().into_iter().cloned().collect();
        descs.extend(resident_bytes.desc().into_iter().cloned());
        descs.extend(threads.desc().into_iter().cloned());
        Ok(Self { cpu_seconds: Mutex::new(cpu_seconds), resident_bytes, threads, descs })
    }
}

impl Collector for ProcessMetrics {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(stat) = procfs::process::Process::myself().and_then(|p| p.stat()) else {
            return Vec::new();
        };
        let mut families = Vec::new();
        if let Ok(cpu) = self.cpu_seconds.lock() {
            let total = (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64;
            cpu.inc_by((total - cpu.get()).max(0.0));
            families.extend(cpu.collect());
        }
        self.resident_bytes.set((stat.rss * procfs::page_size()) as f64);
        self.threads.set(stat.num_threads as f64);
        families.extend(self.resident_bytes.collect());
        families.extend(self.threads.collect());
        families
    }
}
