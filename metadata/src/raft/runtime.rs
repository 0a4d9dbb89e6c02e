//! openraft's async runtime: Tokio, except for randomness. openraft draws its election timeouts
//! from the runtime's generator; here that is a per-thread generator seeded from entropy, which
//! a simulation reseeds (`seed_this_thread`, in tests) so that a seed replays the same elections.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

use openraft::{AsyncRuntime, OptionalSend, TokioRuntime};
use rand08::SeedableRng;
use rand08::rngs::StdRng;

thread_local! {
    static RNG: RefCell<StdRng> = RefCell::new(StdRng::from_entropy());
}

/// Reseeds this thread's generator (a simulation on a current-thread runtime).
#[cfg(test)]
pub(crate) fn seed_this_thread(seed: u64) {
    RNG.with(|rng| *rng.borrow_mut() = StdRng::seed_from_u64(seed));
}

/// A random (version 4) UUID from this thread's generator: the group coordinator's member ids,
/// which a simulation's seed then decides too.
pub(crate) fn random_uuid() -> uuid::Uuid {
    let mut bytes = [0u8; 16];
    rand08::RngCore::fill_bytes(&mut ThreadRng, &mut bytes);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// This thread's generator.
#[derive(Debug)]
pub struct ThreadRng;

impl rand08::RngCore for ThreadRng {
    fn next_u32(&mut self) -> u32 {
        RNG.with(|rng| rng.borrow_mut().next_u32())
    }

    fn next_u64(&mut self) -> u64 {
        RNG.with(|rng| rng.borrow_mut().next_u64())
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        RNG.with(|rng| rng.borrow_mut().fill_bytes(dest));
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand08::Error> {
        RNG.with(|rng| rng.borrow_mut().try_fill_bytes(dest))
    }
}

/// Tokio, with [`ThreadRng`].
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FloeRuntime;

impl AsyncRuntime for FloeRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = ThreadRng;
    type OneshotSender<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError = <TokioRuntime as AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: OptionalSend> = <TokioRuntime as AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        ThreadRng
    }

    fn oneshot<T: OptionalSend>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>) {
        TokioRuntime::oneshot()
    }
}
