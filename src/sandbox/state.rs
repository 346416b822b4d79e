//! Everything a request can see: shared by the [`Sandbox`](super::Sandbox) handle and every
//! connection, behind one `Arc`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::auth::Tokens;
use super::config::SandboxConfig;
use super::faults::FaultQueue;
use super::limits::Limits;
use super::log::RequestLog;
use super::seed;
use super::store::Store;
use super::traffic::Traffic;
use crate::sync::lock;

pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) tokens: Tokens,
    pub(crate) log: RequestLog,
    pub(crate) faults: FaultQueue,
    /// The platform's limits, when enforced.
    pub(crate) limits: Option<Limits>,
    pub(crate) stats: Stats,
    pub(crate) traffic: Traffic,
    /// Answer a repeated `Idempotency-Key` with the first answer (as the spec's service does);
    /// off, every request commits anew (a service that does not deduplicate).
    pub(crate) honour_idempotency_keys: bool,
    delay: Mutex<Duration>,
}

impl Shared {
    /// Generates the seeded data: CPU-bound, so callers run it off the async workers.
    pub(crate) fn new(config: &SandboxConfig) -> Shared {
        let tenants = match &config.data {
            Some(data) => data.tenants.iter().map(|(_, data)| data.clone()).collect(),
            None => seed::generate(config),
        };
        Shared {
            store: Store::new(tenants, config.seed),
            tokens: Tokens::new(&config.tenant_names()),
            log: RequestLog::new(config.max_logged_requests),
            faults: FaultQueue::new(config.fault_seed),
            limits: config.enforce_limits.then(Limits::default),
            stats: Stats::default(),
            traffic: Traffic::default(),
            honour_idempotency_keys: config.honour_idempotency_keys,
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

/// Counts of what the sandbox answered since it started (`Sandbox::stats`): cheap, and kept
/// whatever the request log keeps.
#[derive(Default)]
pub(crate) struct Stats {
    pub(crate) requests: AtomicU64,
    pub(crate) sends: AtomicU64,
    /// Sends committed (a message went out).
    pub(crate) accepted: AtomicU64,
    pub(crate) failed_commits: AtomicU64,
    /// Sends answered from the Idempotency-Key cache.
    pub(crate) replayed: AtomicU64,
    /// Sends refused over a number's throughput (`enforce_limits`).
    pub(crate) throttled: AtomicU64,
}

impl Stats {
    pub(crate) fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> super::SandboxStats {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        super::SandboxStats {
            requests: read(&self.requests),
            sends: read(&self.sends),
            accepted: read(&self.accepted),
            failed_commits: read(&self.failed_commits),
            replayed: read(&self.replayed),
            throttled: read(&self.throttled),
        }
    }
}
