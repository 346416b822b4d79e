//! How many times the shared limits' store became unreachable in this process (an outage is
//! counted once, when it starts, where `redis/link.rs` logs it): one counter the
//! instrumentation reads when its metrics are collected (`bizmsg.shared_state.outages`), and
//! whether one is going on now.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

static STARTED: AtomicU64 = AtomicU64::new(0);
static ONGOING: AtomicI64 = AtomicI64::new(0);

/// A store became unreachable.
pub fn started() {
    STARTED.fetch_add(1, Ordering::Relaxed);
    ONGOING.fetch_add(1, Ordering::Relaxed);
}

/// A store that was unreachable answers again.
pub fn ended() {
    ONGOING.fetch_sub(1, Ordering::Relaxed);
}

/// Outages of the shared limits' stores since the process started.
pub fn total() -> u64 {
    STARTED.load(Ordering::Relaxed)
}

/// Stores unreachable now (every store of the process: one per `shared_limits=` URL).
pub fn ongoing() -> u64 {
    u64::try_from(ONGOING.load(Ordering::Relaxed)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_is_counted_when_it_starts_and_ongoing_until_it_ends() {
        let before = total();
        started();
        assert!(total() > before);
        assert!(ongoing() >= 1);
        ended();
    }
}
