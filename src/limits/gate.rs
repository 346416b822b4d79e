//! A pause shared by many calls: when one call of a batch is told to wait (`429` or `503`
//! with `Retry-After`), every call of the batch waits, not only the one that was told. A limit
//! kept in this process (`local.rs` pauses a campaign through it); the attempt loop
//! (`client/execute.rs`) waits at it, and pauses it on a `Retry-After`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub struct Gate {
    closed_until: Mutex<Option<Instant>>,
    /// Set by the first pause. Until then (a campaign's usual case) the gate is known open
    /// without a lock: every message checks it.
    ever_paused: AtomicBool,
}

impl Gate {
    pub fn new() -> Self {
        Gate::default()
    }

    /// Keeps the gate closed for `wait` from now (a longer pause already set is kept).
    pub fn pause(&self, wait: Duration) {
        let Some(until) = now().checked_add(wait) else {
            return;
        };
        let mut closed = crate::sync::lock(&self.closed_until);
        if closed.is_none_or(|current| current < until) {
            *closed = Some(until);
        }
        self.ever_paused.store(true, Ordering::Release);
    }

    /// When the gate opens again, if it is closed now.
    pub fn closed_until(&self) -> Option<Instant> {
        if !self.ever_paused.load(Ordering::Acquire) {
            return None;
        }
        let closed = *crate::sync::lock(&self.closed_until);
        closed.filter(|until| *until > now())
    }

    /// Waits until the gate is open (it may be closed again while waiting).
    pub async fn wait(&self) {
        while let Some(until) = self.closed_until() {
            tokio::time::sleep_until(until.into()).await;
        }
    }
}

/// Tokio's clock: the system's monotonic clock, except in a test on tokio's paused clock,
/// where pauses then keep the same time as the sleeps and the paces that wait for them
/// (`limits/local.rs`'s tests).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pause_holds_every_waiter_and_the_longest_pause_wins() {
        let gate = Gate::new();
        assert!(gate.closed_until().is_none());
        gate.pause(Duration::from_millis(80));
        gate.pause(Duration::from_millis(10));
        let started = Instant::now();
        gate.wait().await;
        assert!(started.elapsed() >= Duration::from_millis(75));
        assert!(gate.closed_until().is_none());
    }
}
