//! The idle connections of the direct transport, per runtime (`per_runtime.rs` says why), and
//! which one a request takes: the most recently used one that is still open.

use std::time::{Duration, Instant};

use super::connection::Conn;
use crate::client::per_runtime::PerRuntime;

/// Below the 60 s idle limit common to servers and load balancers, so the pool drops an idle
/// connection before the server does (reusing one the server is closing makes a send's
/// outcome unknown).
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(50);
/// Idle connections kept per runtime; more are closed when they come back.
const MAX_IDLE: usize = 512;

/// The most recently used idle connection that is still open.
pub(super) fn checkout(idle: &PerRuntime<Conn>) -> Option<Conn> {
    idle.with(|list| {
        while let Some(mut conn) = list.pop() {
            if conn.idle_since.elapsed() < IDLE_TIMEOUT && conn.is_open() {
                return Some(conn);
            }
        }
        None
    })
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
