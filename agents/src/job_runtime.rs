//! The runtime the agent's jobs run on (compaction, GC, tables, links): threads of their own,
//! apart from the workers that serve Kafka and HTTP. A job's step is CPU work between awaits (a
//! table commit decodes and maps every record it reads, a compaction round merges its runs), and
//! on the serving workers it holds up every client of the agent: a table of 10,000 columns
//! delayed its agent's health checks past a second (issue 52). On threads of their own the
//! kernel shares the cores between both, so a client waits a scheduler slice, not a job step.

use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

/// Built on first use and kept for the process (a runtime cannot be dropped inside another).
static JOB_RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();

/// The jobs' runtime, or the caller's when its threads could not be started.
pub fn handle() -> Handle {
    let runtime = JOB_RUNTIME.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(1, usize::from);
        match Builder::new_multi_thread().worker_threads(threads).thread_name("floe-jobs").enable_all().build() {
            Ok(runtime) => Some(runtime),
            Err(e) => {
                tracing::warn!(error = %e, "no threads for the jobs; they share the serving workers");
                None
            }
        }
    });
    match runtime {
        Some(runtime) => runtime.handle().clone(),
        None => Handle::current(),
    }
}
