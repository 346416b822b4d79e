//! Everything a request can see: shared by the [`Sandbox`](super::Sandbox) handle and every
//! connection, behind one `Arc`.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::auth::Tokens;
use super::config::SandboxConfig;
use super::faults::FaultQueue;
use super::log::RequestLog;
use super::seed;
use super::store::Store;

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) tokens: Tokens,
    pub(crate) log: RequestLog,
    pub(crate) faults: FaultQueue,
    delay: Mutex<Duration>,
}

impl Shared {
    /// Generates the seeded data: CPU-bound, so callers run it off the async workers.
    pub(crate) fn new(config: &SandboxConfig) -> Shared {
        Shared {
            store: Store::new(seed::generate(config), config.seed),
            tokens: Tokens::new(&config.tenants),
            log: RequestLog::default(),
            faults: FaultQueue::default(),
            delay: Mutex::new(config.delay),
        }
    }

    pub(crate) fn delay(&self) -> Duration {
        *lock(&self.delay)
    }

    pub(crate) fn set_delay(&self, delay: Duration) {
        *lock(&self.delay) = delay;
    }
}

/// Locks without propagating a panic of another thread: every critical section leaves its data
/// consistent, so the data behind a poisoned lock is still good.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
