//! Background tasks that stop together: each one is handed the group's stop token, sees it at
//! its next wait, finishes what it was doing and returns; [`TaskGroup::stop`] waits for all of
//! them. A process shuts down by stopping its groups in order (an agent: heartbeats before it
//! leaves the cluster, jobs while its flushes drain, reporters last).

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Clone, Debug, Default)]
pub struct TaskGroup {
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl TaskGroup {
    /// Spawns `task` with the group's stop token.
    pub fn spawn<F>(&self, task: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(task(self.stop.clone()));
    }

    /// Spawns `task` with the group's stop token on `runtime` (another runtime's threads).
    pub fn spawn_on<F>(&self, runtime: &tokio::runtime::Handle, task: impl FnOnce(CancellationToken) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn_on(task(self.stop.clone()), runtime);
    }

    /// Spawns a task that is dropped at its next await once the group stops: for loops whose
    /// every step may be cut (each is safe to lose half-way).
    pub fn spawn_cancellable(&self, task: impl Future<Output = ()> + Send + 'static) {
        let stop = self.stop.clone();
        self.tracker.spawn(async move {
            stop.run_until_cancelled(task).await;
        });
    }

    /// Tells every task to stop and waits until all have returned. Tasks spawned afterwards stop
    /// at once.
    pub async fn stop(&self) {
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Whether [`TaskGroup::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }
}

/// Sleeps `wait`, unless `stop` fires first: `false` then, and the caller returns.
pub async fn sleep_unless_stopped(stop: &CancellationToken, wait: std::time::Duration) -> bool {
    stop.run_until_cancelled(tokio::time::sleep(wait)).await.is_some()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn stop_lets_a_task_finish_its_step_and_waits_for_it() {
        let group = TaskGroup::default();
        let finished = Arc::new(AtomicBool::new(false));
        let (started_tx, started) = tokio::sync::oneshot::channel();
        let done = finished.clone();
        group.spawn(|stop| async move {
            let _ = started_tx.send(());
            // A step that does not look at the token: it runs to its end.
            tokio::time::sleep(Duration::from_millis(100)).await;
            done.store(true, Ordering::SeqCst);
            while sleep_unless_stopped(&stop, Duration::from_secs(3600)).await {}
        });
        let cut = Arc::new(AtomicBool::new(true));
        let never = cut.clone();
        group.spawn_cancellable(async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            never.store(false, Ordering::SeqCst);
        });
        started.await.expect("started");
        tokio::time::timeout(Duration::from_secs(5), group.stop()).await.expect("stopped in time");
        assert!(finished.load(Ordering::SeqCst), "stop waited for the step in progress");
        assert!(cut.load(Ordering::SeqCst), "the cancellable task was dropped at its wait");
        assert!(group.is_stopped());
    }
}
