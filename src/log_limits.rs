//! Other crates' warnings and errors, under the limit Floe's own client-caused lines have
//! (`floe_agent::log_limit`): per call site a burst, then a line a second, and the count of the
//! lines dropped written before the next one. `h2` warns once per HTTP/2 connection that resets
//! too many streams ("remotely-reset pending-accept streams reached limit"), so a 15-second
//! rapid-reset flood wrote 48,000 warnings (issue 52); now it writes about 35.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use floe_agent::log_limit::LogLimit;
use floe_metadata::locks::MutexRecovery;
use tracing::callsite::Identifier;
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::DynFilterFn;

/// Whether a call site's events are limited here: other crates' warnings and errors. Floe's
/// own call sites that a client can trigger use `floe_agent::log_limited!`.
fn limited(metadata: &Metadata<'_>) -> bool {
    metadata.is_event() && *metadata.level() <= Level::WARN && !metadata.target().starts_with("floe")
}

/// Limited call sites are asked about at each event; every other is left to the log filter.
fn interest(metadata: &'static Metadata<'static>) -> Interest {
    if limited(metadata) { Interest::sometimes() } else { Interest::always() }
}

/// Whether an event may be written. The count of dropped ones is written just before the next
/// one of their call site, from inside the filter (with no lock held); were a scoped dispatcher
/// in use, tracing would drop that nested line, never the event itself.
fn admit(metadata: &Metadata<'_>) -> bool {
    /// A limit per call site: call sites are statics, so the program bounds the map.
    static LIMITS: LazyLock<Mutex<HashMap<Identifier, Arc<LogLimit>>>> = LazyLock::new(Mutex::default);
    if !limited(metadata) {
        return true;
    }
    let limit = {
        let mut limits = LIMITS.lock_recovered();
        limits.entry(metadata.callsite()).or_default().clone()
    };
    match limit.admit(std::time::Instant::now()) {
        None => false,
        Some(0) => true,
        Some(suppressed) => {
            let (of, callsite) = (metadata.target(), metadata.name());
            tracing::warn!(suppressed, of, callsite, "similar log lines suppressed");
            true
        }
    }
}

/// The limit, as a layer over the process's subscriber.
pub(crate) fn layer<S: Subscriber>() -> impl Layer<S> {
    DynFilterFn::new(|metadata, _| admit(metadata)).with_callsite_filter(interest)
}
