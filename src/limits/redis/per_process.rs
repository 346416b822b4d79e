//! What one process keeps of the shared limits: its connection, the slots it reserved, its
//! copies of the service's pause and of each sender's spaced pairs; and what it does when
//! another process announces a pause.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::from_micros;
use super::link::Link;
use super::slots::Pool;
use crate::limits::Scope;
use crate::sync::lock;

/// What one process keeps.
pub(super) struct PerProcess {
    pub(super) pid: u32,
    /// Tells this process's announcements of pauses from others'.
    pub(super) origin: u64,
    /// Reservations made so far: with `origin`, each one's token (`scripts.rs`'s `by`).
    pub(super) reservations: AtomicU64,
    pub(super) link: Link,
    /// Reserved slots, by pace.
    pub(super) pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
    /// Each sender's spaced pairs as last read.
    pub(super) pairs: Mutex<HashMap<String, Pairs>>,
    /// The service's pause as last read: (read at, paused until).
    pub(super) service_pause: Mutex<Option<(Instant, Instant)>>,
}

/// A pool's pace: the sender's and/or the campaign's, with their periods in µs.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct PoolKey {
    pub(super) sender: Option<(String, u64)>,
    pub(super) campaign: Option<(String, u64)>,
}

#[derive(Default)]
pub(super) struct Pairs {
    pub(super) read_at: Option<Instant>,
    pub(super) reading: bool,
    pub(super) until: HashMap<String, Instant>,
}

impl Pairs {
    /// How long a message to `recipient` still waits for its pair, as this copy knows.
    pub(super) fn wait_for(&self, recipient: &str) -> Duration {
        self.until.get(recipient).map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        })
    }
}

/// Marks a sender's pairs as being read; cleared however the reading ends.
pub(super) struct Reading<'a> {
    pub(super) here: &'a PerProcess,
    pub(super) sender: &'a str,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if let Some(pairs) = lock(&self.here.pairs).get_mut(self.sender) {
            pairs.reading = false;
        }
    }
}

impl PerProcess {
    /// Drops the reserved slots a pause of `scope` holds back.
    pub(super) fn drop_slots(&self, scope: Scope<'_>) {
        for (key, pool) in lock(&self.pools).iter() {
            let held = match scope {
                Scope::Service => true,
                Scope::Sender(sender) => key
                    .sender
                    .as_ref()
                    .is_some_and(|(paused, _)| paused == sender),
            };
            if held {
                pool.pause();
            }
        }
    }

    /// The announcement of a pause (`<µs left> <origin> s` or `<µs left> <origin> h
    /// <sender>`, see `scripts::PAUSE`): another process's pause drops this one's slots.
    pub(super) fn heard(&self, message: &[u8]) {
        let Ok(message) = std::str::from_utf8(message) else {
            return;
        };
        let mut parts = message.splitn(4, ' ');
        let (Some(left), Some(origin), Some(kind)) = (parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Ok(left), Ok(origin)) = (left.parse::<i64>(), origin.parse::<u64>()) else {
            return;
        };
        if origin == self.origin || left <= 0 {
            return;
        }
        match (kind, parts.next()) {
            ("s", None) => {
                self.drop_slots(Scope::Service);
                let now = Instant::now();
                *lock(&self.service_pause) = Some((now, now + from_micros(left)));
            }
            ("h", Some(sender)) => self.drop_slots(Scope::Sender(sender)),
            _ => {}
        }
    }

    pub(super) fn pool(&self, key: &PoolKey) -> Arc<Pool> {
        let mut pools = lock(&self.pools);
        if let Some(pool) = pools.get(key) {
            return Arc::clone(pool);
        }
        if pools.len() >= 4096 {
            // Paces no longer used (finished campaigns, senders gone quiet).
            pools.retain(|_, pool| Arc::strong_count(pool) > 1);
        }
        let spacing = key
            .sender
            .iter()
            .chain(key.campaign.iter())
            .map(|(_, period)| *period)
            .max()
            .unwrap_or(1);
        let pool = Arc::new(Pool::new(Duration::from_micros(spacing)));
        pools.insert(key.clone(), Arc::clone(&pool));
        pool
    }
}
