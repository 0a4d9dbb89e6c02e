//! Hedged segment PUTs: a PUT still unanswered after the time in which nine in ten recent PUTs
//! of its size finished is sent a second time, and whichever answers first wins. Object stores
//! have a long tail (on S3 Standard a PUT's p99 is several times its median), and a produce
//! request waits for its flush's PUT, so the tail of PUTs is the tail of produce latency.
//!
//! Both attempts write the same bytes to the same fresh key with create-only semantics, so the
//! object is the same whichever lands; the loser is dropped once the winner succeeded. An attempt
//! refused as already existing proves nothing by itself: object_store answers `AlreadyExists` both
//! for 412 Precondition Failed (the object is there) and for 409 Conflict (another upload of the
//! key is still in progress, and may yet fail), so such an answer waits for the other attempt and,
//! when neither succeeded, the object is looked up before the PUT counts as landed.
//! Hedges are bounded: at most one for every [`PUTS_PER_HEDGE`] PUTs over time, so a store that
//! is slow for everyone is not sent twice the requests.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::Either;

use crate::metrics;

/// The share of PUTs expected to finish before a hedge is sent: the 90th percentile.
const HEDGE_QUANTILE: f64 = 0.9;
/// PUTs remembered per size class.
const SAMPLES_MAX: usize = 200;
/// A size class hedges only once it has seen this many PUTs: before, its percentile is a guess.
const SAMPLES_MIN: usize = 20;
/// On average at most one hedge per this many PUTs (a budget earned by every PUT).
pub const PUTS_PER_HEDGE: u32 = 10;
/// Hedges that may be saved up for a burst of slow PUTs.
const BUDGET_MAX: f64 = 20.0;
/// Never hedge sooner than this: below it a second request only adds load.
const DELAY_MIN: Duration = Duration::from_millis(5);

/// Size classes by object bytes: below 1 MiB, 1-4 MiB, 4-16 MiB, larger. Transfer time grows
/// with size, so one percentile for all sizes would hedge every large PUT.
fn size_class(bytes: u64) -> usize {
    match bytes >> 20 {
        0 => 0,
        1..4 => 1,
        4..16 => 2,
        _ => 3,
    }
}

/// Recent PUT latencies and the hedge budget of one store.
#[derive(Debug)]
pub struct PutHedging {
    state: Mutex<HedgingState>,
}

#[derive(Debug)]
struct HedgingState {
    /// Per size class, the latest PUTs' durations in microseconds.
    samples: [VecDeque<u64>; 4],
    budget: f64,
}

impl Default for PutHedging {
    fn default() -> Self {
        // The budget starts empty: it is earned by PUTs, as it will be all along.
        Self { state: Mutex::new(HedgingState { samples: Default::default(), budget: 0.0 }) }
    }
}

impl PutHedging {
    /// How long a PUT of `bytes` waits before its hedge; `None` while its size class has too
    /// few samples to know its tail.
    fn delay(&self, bytes: u64) -> Option<Duration> {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let samples = &state.samples[size_class(bytes)];
        if samples.len() < SAMPLES_MIN {
            return None;
        }
        let mut sorted: Vec<u64> = samples.iter().copied().collect();
        sorted.sort_unstable();
        let at = ((sorted.len() as f64 * HEDGE_QUANTILE) as usize).min(sorted.len() - 1);
        Some(Duration::from_micros(sorted[at]).max(DELAY_MIN))
    }

    /// Takes one hedge from the budget; `false` when it is spent.
    fn take(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.budget < 1.0 {
            return false;
        }
        state.budget -= 1.0;
        true
    }

    /// Earns the budget a PUT's share and remembers that a PUT of `bytes` succeeded in `elapsed`
    /// (from its first attempt to its answer: a hedged PUT counts as at least that slow). A
    /// failed PUT's time says nothing of the store's usual latency.
    fn record(&self, bytes: u64, succeeded_in: Option<Duration>) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.budget = (state.budget + 1.0 / f64::from(PUTS_PER_HEDGE)).min(BUDGET_MAX);
        let Some(elapsed) = succeeded_in else { return };
        let samples = &mut state.samples[size_class(bytes)];
        if samples.len() == SAMPLES_MAX {
            samples.pop_front();
        }
        samples.push_back(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    /// A PUT of `bytes` made by `attempt`, made again if the first is slower than nine in ten
    /// recent ones of its size; whichever attempt succeeds first answers. The key is fresh and
    /// only these attempts write it, with the same bytes. When neither attempt succeeded but one
    /// was refused as already existing, `stored` says whether the object is there, whole.
    pub async fn put<F, Fut, S, SFut>(&self, bytes: u64, attempt: F, stored: S) -> object_store::Result<()>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = object_store::Result<()>>,
        S: FnOnce() -> SFut,
        SFut: Future<Output = bool>,
    {
        let started = tokio::time::Instant::now();
        let first = attempt();
        tokio::pin!(first);
        let result = match self.delay(bytes) {
            None => first.await,
            Some(delay) => tokio::select! {
                result = &mut first => result,
                () = tokio::time::sleep(delay) => {
                    if self.take() { race(first, attempt(), stored).await } else { first.await }
                }
            },
        };
        self.record(bytes, result.is_ok().then(|| started.elapsed()));
        result
    }
}

/// The first attempt's answer against its hedge's: the first success wins and the other attempt
/// is dropped unanswered; a failure, `AlreadyExists` included, waits for the other attempt. If
/// neither succeeded and one found the key taken, the PUT landed only if `stored` finds it.
async fn race<S, SFut>(
    first: impl Future<Output = object_store::Result<()>>,
    hedge: impl Future<Output = object_store::Result<()>>,
    stored: S,
) -> object_store::Result<()>
where
    S: FnOnce() -> SFut,
    SFut: Future<Output = bool>,
{
    let counted = |hedge_won: bool| {
        metrics::PUT_HEDGES.with_label_values(&[if hedge_won { "won" } else { "lost" }]).inc();
    };
    tokio::pin!(first, hedge);
    let (result, hedge_answered, other) = tokio::select! {
        result = &mut first => (result, false, Either::Left(hedge)),
        result = &mut hedge => (result, true, Either::Right(first)),
    };
    if result.is_ok() {
        counted(hedge_answered);
        metrics::OBJECT_PUTS_ABANDONED.inc();
        return result;
    }
    let other = other.await;
    if other.is_ok() {
        counted(!hedge_answered);
        return other;
    }
    let taken = |r: &object_store::Result<()>| matches!(r, Err(object_store::Error::AlreadyExists { .. }));
    if (taken(&result) || taken(&other)) && stored().await {
        // Which attempt wrote it is unknown: an earlier try inside the client, or a 409's rival.
        return Ok(());
    }
    // Report a real failure rather than a key found taken that proved to be empty.
    if taken(&result) { other } else { result }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_is_the_90th_percentile_of_the_size_class() {
        let hedging = PutHedging::default();
        for ms in 1..=(SAMPLES_MIN as u64 - 1) {
            hedging.record(1000, Some(Duration::from_millis(ms * 10)));
        }
        assert_eq!(hedging.delay(1000), None, "too few samples to know the tail");
        for ms in 1..=100 {
            hedging.record(2000, Some(Duration::from_millis(ms)));
        }
        // 119 samples, 10..190 ms in tens and 1..100 ms: the 107th smallest is 99 ms.
        assert_eq!(hedging.delay(500), Some(Duration::from_millis(99)));
        assert_eq!(hedging.delay(8 << 20), None, "another size class has its own samples");
    }

    /// Hedging that has seen PUTs of 40 ms: it hedges after 40 ms, with the budget to.
    fn warmed() -> PutHedging {
        let hedging = PutHedging::default();
        for _ in 0..SAMPLES_MIN * PUTS_PER_HEDGE as usize {
            hedging.record(10, Some(Duration::from_millis(40)));
        }
        hedging
    }

    fn failed() -> object_store::Error {
        object_store::Error::Generic { store: "test", source: "refused".into() }
    }

    /// One attempt of a scripted PUT: after how many milliseconds it answers, and how.
    type Attempt = (u64, fn() -> object_store::Result<()>);

    /// A PUT whose attempts answer as `script` says, in order; the object is found `stored` if
    /// looked up.
    async fn put_found(
        hedging: &PutHedging,
        script: Vec<Attempt>,
        stored: bool,
    ) -> (object_store::Result<()>, usize, Duration) {
        let attempts = std::sync::atomic::AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let result = hedging
            .put(
                10,
                || {
                    let (ms, answer) = script[attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst)];
                    async move {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                        answer()
                    }
                },
                || async move { stored },
            )
            .await;
        (result, attempts.into_inner(), started.elapsed())
    }

    /// A PUT whose attempts answer as `script` says, in order, of an object not found if looked up.
    async fn put_scripted(hedging: &PutHedging, script: Vec<Attempt>) -> (object_store::Result<()>, usize, Duration) {
        put_found(hedging, script, false).await
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_put_is_answered_by_its_hedge() {
        let (result, attempts, took) = put_scripted(&warmed(), vec![(10_000, || Ok(())), (30, || Ok(()))]).await;
        assert!(result.is_ok());
        assert_eq!(attempts, 2);
        assert_eq!(took, Duration::from_millis(70), "hedged after 40 ms, answered 30 ms later");
    }

    #[tokio::test(start_paused = true)]
    async fn a_put_within_the_usual_time_is_not_hedged() {
        let (result, attempts, _) = put_scripted(&warmed(), vec![(39, || Ok(())), (1, || Ok(()))]).await;
        assert!(result.is_ok());
        assert_eq!(attempts, 1);
    }

    fn taken() -> object_store::Result<()> {
        Err(object_store::Error::AlreadyExists { path: "k".into(), source: "exists".into() })
    }

    #[tokio::test(start_paused = true)]
    async fn a_hedge_finding_the_key_taken_waits_for_the_first_attempt() {
        // A 409 (another upload of the key in progress) reads as AlreadyExists too: the first
        // attempt is still the one that must land.
        let (result, attempts, took) = put_scripted(&warmed(), vec![(10_000, || Ok(())), (5, taken)]).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!((attempts, took), (2, Duration::from_secs(10)), "answered by the first attempt");
        let (result, _, took) = put_scripted(&warmed(), vec![(10_000, || Err(failed())), (5, taken)]).await;
        assert!(result.is_err(), "neither attempt stored it: {result:?}");
        assert_eq!(took, Duration::from_secs(10));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_found_taken_lands_only_if_the_object_is_there() {
        let (result, _, _) = put_found(&warmed(), vec![(100, || Err(failed())), (5, taken)], true).await;
        assert!(result.is_ok(), "412: the object is there: {result:?}");
        let (result, _, _) = put_found(&warmed(), vec![(100, taken), (5, taken)], false).await;
        assert!(matches!(result, Err(object_store::Error::AlreadyExists { .. })), "{result:?}");
    }

    /// Finding 2 of issue 51, against a store that answers an overlapping create-only PUT with
    /// 409: before, the hedge's 409 was taken for "landed", the slow first attempt was dropped
    /// and the PUT was acknowledged with no object behind it.
    #[tokio::test(start_paused = true)]
    async fn a_conflicting_hedge_never_acknowledges_a_missing_object() {
        use object_store::memory::InMemory;
        use object_store::path::Path;
        use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

        use crate::faults::{FaultPlan, FaultSource, InjectedFaults};

        let inner: std::sync::Arc<dyn ObjectStore> = std::sync::Arc::new(InMemory::new());
        let plan = FaultPlan { put_conflict: 1.0, slow_put_every: 2, slow_put_ms: 10_000, ..FaultPlan::default() };
        let store = InjectedFaults::new(inner.clone(), FaultSource::Fixed(plan));
        let path = Path::from("segment");
        // The store's first PUT is fast; the second (this test's first attempt) is slow.
        store.put(&Path::from("warm-up"), PutPayload::from_static(b"w")).await.expect("put");
        let put = || {
            let options = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
            let store = &store;
            let path = &path;
            async move { store.put_opts(path, PutPayload::from_static(b"object"), options).await.map(drop) }
        };
        let stored = || async { inner.head(&path).await.is_ok_and(|meta| meta.size == 6) };
        let result = warmed().put(6, put, stored).await;
        assert!(result.is_ok(), "{result:?}");
        assert!(inner.head(&path).await.is_ok(), "the PUT was answered as landed, so the object must exist");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_attempt_waits_for_the_other() {
        // The first fails after the hedge was sent; the hedge lands later.
        let (result, _, took) = put_scripted(&warmed(), vec![(50, || Err(failed())), (60, || Ok(()))]).await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!(took, Duration::from_millis(100));
        let (result, _, _) = put_scripted(&warmed(), vec![(50, || Err(failed())), (60, || Err(failed()))]).await;
        assert!(result.is_err(), "both failed");
    }

    #[tokio::test(start_paused = true)]
    async fn no_hedge_without_samples_or_budget() {
        let cold = PutHedging::default();
        let (_, attempts, took) = put_scripted(&cold, vec![(1_000, || Ok(())), (1, || Ok(()))]).await;
        assert_eq!((attempts, took), (1, Duration::from_secs(1)));
        let spent = warmed();
        while spent.take() {}
        let (_, attempts, _) = put_scripted(&spent, vec![(1_000, || Ok(())), (1, || Ok(()))]).await;
        assert_eq!(attempts, 1);
    }

    #[test]
    fn the_delay_is_never_below_the_floor() {
        let hedging = PutHedging::default();
        for _ in 0..SAMPLES_MIN {
            hedging.record(10, Some(Duration::from_micros(100)));
        }
        assert_eq!(hedging.delay(10), Some(DELAY_MIN));
    }

    #[test]
    fn hedges_are_at_most_one_per_ten_puts() {
        let hedging = PutHedging::default();
        assert!(!hedging.take(), "no PUT has earned a hedge yet");
        let mut later = 0;
        for _ in 0..1000 {
            hedging.record(10, None);
            if hedging.take() {
                later += 1;
            }
        }
        // Floating-point sums may lose the last tenth.
        assert!((99..=100).contains(&later), "{later} hedges for 1000 PUTs");
    }
}
