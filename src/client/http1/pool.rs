//! The idle connections of the HTTP/1.1 transport, per runtime (`per_runtime.rs` says why), and
//! which one a request takes: the most recently used one that is still open.

use std::time::{Duration, Instant};

use super::connection::Conn;
use crate::client::idle_limit::{IdleLimit, IDLE_TIMEOUT};
use crate::client::per_runtime::PerRuntime;

/// Taken off a server's `Keep-Alive: timeout=`: the pool gives a connection up this much
/// before the server does.
const KEEP_ALIVE_MARGIN: Duration = Duration::from_millis(500);
/// Idle connections kept per runtime; more are closed when they come back.
const MAX_IDLE: usize = 512;

/// The most recently used idle connection that is still open, and how long it was idle.
/// Connections idle past the limit (ours, the server's `Keep-Alive: timeout=` less a margin,
/// or what the pool learned of the server) are closed; one found closed teaches `learning`.
pub(super) fn checkout(idle: &PerRuntime<Conn>, learning: &IdleLimit) -> Option<(Conn, Duration)> {
    let mut learned = learning.learned();
    // The shortest idleness of a connection found closed here: taught after the lock is
    // released (teaching may log, and logging may wait for the GIL, which a thread closing
    // the client holds while it waits for this lock).
    let mut closed_after: Option<Duration> = None;
    let found = idle.with(|list| {
        while let Some(mut conn) = list.pop() {
            let mut limit = conn.keep_alive.map_or(IDLE_TIMEOUT, |server| {
                IDLE_TIMEOUT.min(server.saturating_sub(KEEP_ALIVE_MARGIN))
            });
            if let Some(learned) = learned {
                limit = limit.min(learned);
            }
            let idle_for = conn.idle_since.elapsed();
            if idle_for >= limit {
                continue;
            }
            if conn.is_open() {
                return Some((conn, idle_for));
            }
            // Only a connection that carried an exchange teaches the server's idle limit.
            if !conn.has_answered() {
                continue;
            }
            closed_after = Some(closed_after.map_or(idle_for, |shortest| shortest.min(idle_for)));
            // The connections after it in this checkout are judged by what it teaches.
            if let Some(taught) = IdleLimit::after_close(idle_for) {
                learned = Some(learned.map_or(taught, |known| known.min(taught)));
            }
        }
        None
    });
    if let Some(idle_for) = closed_after {
        learning.closed(idle_for);
    }
    found
}

/// Puts a connection that finished its exchange cleanly back, to be reused.
pub(super) fn check_in(idle: &PerRuntime<Conn>, mut conn: Conn) {
    conn.idle_since = Instant::now();
    idle.with(|list| {
        if list.len() < MAX_IDLE {
            list.push(conn);
        }
    });
}
