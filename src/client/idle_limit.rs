//! What a transport learns of how long the server keeps an idle connection open: the HTTP/1.1
//! transport's pool (`http1/pool.rs`), and the HTTP/2 transport (`http2/idleness.rs`), whose
//! connection is reqwest's.
//!
//! The keep-alive race: a request written on a pooled connection just as the server closes it
//! for being idle is lost, and the send's outcome is unknown (the server may, for all the
//! client can tell, have read it). A server that says its limit (`Keep-Alive: timeout=`) is
//! believed; most do not (nginx, HAProxy, Squid, load balancers), so the pool watches: a
//! connection found closed after `x` of idleness (at checkout, or when a request written on it
//! got no answer) proves the server may close connections idle that long. From the first such
//! close on, the pool stops reusing connections idle for more than three quarters of the
//! shortest it saw, well before the server acts.
//!
//! What it cannot tell apart: a close for another reason (a restart, a connection cap) after
//! a long idleness also lowers the limit, and only connections idle that long are affected
//! (they are replaced by new ones, a handshake each); a busy client, whose connections are
//! idle for milliseconds, does not learn from them (`SHORTEST_LIMIT`). So what was learned is
//! forgotten `FORGET_AFTER` the last time it was lowered, and learned again from the next
//! close: a close for another reason (a reload of nginx drops every idle connection at once)
//! costs handshakes for minutes, not for the life of the client. (The rule "ignore a close
//! after less idleness than one the server allowed" was tried and fails with Squid, which
//! checks its idle timeouts once a second: it allows up to a second more than its limit, then
//! closes anything past it at its next tick.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Closes after less idleness than this are not taken for the server's idle limit: reusing a
/// connection after a few milliseconds is what a busy client does, and always worth it.
const SHORTEST_LIMIT: Duration = Duration::from_millis(50);
/// How long a learned limit holds after it was last lowered.
const FORGET_AFTER: Duration = Duration::from_secs(600);

/// How long an idle connection is kept: below the idle limits of the usual servers in front of
/// a service (Apache and Node.js close after 5 s, nginx after 75 s, load balancers after
/// 60 s), so a transport drops an idle connection before the server does: reusing one the
/// server is closing is the keep-alive race, where a send's outcome becomes unknown. Both
/// transports keep connections this long at most (the HTTP/1.1 pool, reqwest's for HTTP/2). A
/// campaign sends far more often than this; a connection made again costs a handshake.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Debug)]
pub(crate) struct IdleLimit {
    /// The shortest idleness (ms) after which a connection was found closed by the server;
    /// `u64::MAX` while none was.
    closed_after: AtomicU64,
    /// When (ms after `since`) `closed_after` was last lowered.
    lowered_at: AtomicU64,
    since: Instant,
}

impl Default for IdleLimit {
    fn default() -> Self {
        IdleLimit {
            closed_after: AtomicU64::new(u64::MAX),
            lowered_at: AtomicU64::new(0),
            since: Instant::now(),
        }
    }
}

impl IdleLimit {
    /// How long a connection may stay idle and still be reused, as far as the pool learned:
    /// `None` until the server closed one (or since it was forgotten).
    pub(crate) fn learned(&self) -> Option<Duration> {
        let closed = self.closed_after.load(Ordering::Acquire);
        if closed == u64::MAX {
            return None;
        }
        let age = self
            .now()
            .saturating_sub(self.lowered_at.load(Ordering::Acquire));
        if age > millis(FORGET_AFTER) {
            // Only if no close lowered it meanwhile.
            let _ = self.closed_after.compare_exchange(
                closed,
                u64::MAX,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            return None;
        }
        Some(Duration::from_millis(closed.saturating_mul(3) / 4))
    }

    /// The limit a close after `idle` would teach (see [`IdleLimit::closed`]), without
    /// teaching it: for the connections still to be judged in the same checkout.
    pub(crate) fn after_close(idle: Duration) -> Option<Duration> {
        let idle = millis(idle);
        (idle >= millis(SHORTEST_LIMIT)).then(|| Duration::from_millis(idle.saturating_mul(3) / 4))
    }

    /// A connection idle for `idle` was found closed by the server (at checkout, or ended
    /// without an answer to the request written on it). Not called under the pool's lock: it
    /// may log, and a log record may wait for Python's GIL.
    pub(crate) fn closed(&self, idle: Duration) {
        let idle = millis(idle);
        if idle < millis(SHORTEST_LIMIT) {
            return;
        }
        let before = self.closed_after.fetch_min(idle, Ordering::AcqRel);
        if idle < before {
            self.lowered_at.store(self.now(), Ordering::Release);
            log::debug!(
                target: "bizmsg",
                "the server closed a connection idle for {idle} ms: connections idle longer \
                 than {} ms are not reused for the next {} s",
                idle.saturating_mul(3) / 4,
                FORGET_AFTER.as_secs()
            );
        }
    }

    fn now(&self) -> u64 {
        millis(self.since.elapsed())
    }
}

/// Whole milliseconds, saturating.
pub(crate) fn millis(duration: Duration) -> u64 {
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
        limit.closed(MS(1_020));
        assert_eq!(limit.learned(), Some(MS(765)));
        limit.closed(MS(1_400));
        assert_eq!(limit.learned(), Some(MS(765)));
        limit.closed(MS(1_004));
        assert_eq!(limit.learned(), Some(MS(753)));
    }

    #[test]
    fn what_was_learned_is_forgotten_after_a_while() {
        let limit = IdleLimit::default();
        limit.closed(MS(60));
        assert_eq!(limit.learned(), Some(MS(45)));
        // As if lowered longer ago than FORGET_AFTER.
        limit.lowered_at.store(0, Ordering::Release);
        let limit = IdleLimit {
            since: Instant::now()
                .checked_sub(FORGET_AFTER + MS(1_000))
                .unwrap_or_else(Instant::now),
            ..limit
        };
        assert_eq!(limit.learned(), None);
        limit.closed(MS(1_000));
        assert_eq!(limit.learned(), Some(MS(750)));
    }

    #[test]
    fn a_busy_connection_closed_teaches_nothing() {
        let limit = IdleLimit::default();
        limit.closed(MS(20));
        assert_eq!(limit.learned(), None);
    }
}
