//! What the pool learns of how long the server keeps an idle connection open.
//!
//! The keep-alive race: a request written on a pooled connection just as the server closes it
//! for being idle is lost, and the send's outcome is unknown (the server may, for all the
//! client can tell, have read it). A server that says its limit (`Keep-Alive: timeout=`) is
//! believed; most do not (nginx, HAProxy, load balancers), so the pool watches: a connection
//! found closed after `x` of idleness proves the server's limit is at most `x`; one reused
//! after `y` with an answer proves it is more than `y`. From the first close on, the pool stops
//! reusing connections idle for more than three quarters of the shortest close it saw, well
//! before the server acts.
//!
//! A close that contradicts a longer idleness the server allowed (a restart, a connection cap)
//! says nothing about the idle limit, and is not learned from: otherwise one restart would stop
//! the pool reusing anything.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Closes after less idleness than this are not taken for the server's idle limit: reusing a
/// connection after a few milliseconds is what a busy client does, and always worth it.
const SHORTEST_LIMIT: Duration = Duration::from_millis(50);

#[derive(Debug)]
pub(super) struct IdleLimit {
    /// The shortest idleness (ms) after which a connection was found closed by the server;
    /// `u64::MAX` while none was.
    closed_after: AtomicU64,
    /// The longest idleness (ms) after which a reused connection got its answer.
    reused_after: AtomicU64,
}

impl Default for IdleLimit {
    fn default() -> Self {
        IdleLimit {
            closed_after: AtomicU64::new(u64::MAX),
            reused_after: AtomicU64::new(0),
        }
    }
}

impl IdleLimit {
    /// How long a connection may stay idle and still be reused, as far as the pool learned:
    /// `None` until the server closed one.
    pub(super) fn learned(&self) -> Option<Duration> {
        match self.closed_after.load(Ordering::Relaxed) {
            u64::MAX => None,
            closed => Some(Duration::from_millis(closed.saturating_mul(3) / 4)),
        }
    }

    /// A connection idle for `idle` was found closed by the server (at checkout, or ended
    /// without an answer to the request written on it).
    pub(super) fn closed(&self, idle: Duration) {
        let idle = millis(idle);
        if idle < millis(SHORTEST_LIMIT) || idle <= self.reused_after.load(Ordering::Relaxed) {
            return;
        }
        let before = self.closed_after.fetch_min(idle, Ordering::Relaxed);
        if idle < before {
            log::debug!(
                target: "bizmsg",
                "the server closed a connection idle for {idle} ms: connections idle longer \
                 than {} ms are no longer reused",
                idle.saturating_mul(3) / 4
            );
        }
    }

    /// A connection idle for `idle` was reused and answered.
    pub(super) fn reused(&self, idle: Duration) {
        self.reused_after.fetch_max(millis(idle), Ordering::Relaxed);
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn the_first_close_sets_the_limit_and_shorter_ones_lower_it() {
        let limit = IdleLimit::default();
        assert_eq!(limit.learned(), None);
        limit.reused(MS(300));
        limit.closed(MS(1_020));
        assert_eq!(limit.learned(), Some(MS(765)));
        limit.closed(MS(1_400));
        assert_eq!(limit.learned(), Some(MS(765)));
        limit.closed(MS(1_004));
        assert_eq!(limit.learned(), Some(MS(753)));
    }

    #[test]
    fn a_close_the_server_contradicted_or_a_busy_reuse_is_not_learned() {
        let limit = IdleLimit::default();
        limit.reused(MS(900));
        // A restart closing connections after 200 ms, while 900 ms was allowed: no limit.
        limit.closed(MS(200));
        limit.closed(MS(900));
        assert_eq!(limit.learned(), None);
        limit.closed(MS(20));
        assert_eq!(limit.learned(), None);
        limit.closed(MS(1_000));
        assert_eq!(limit.learned(), Some(MS(750)));
    }
}
