//! The current process id, without a system call.
//!
//! Pools, runtimes and page read-aheads compare the pid they were made in with the current one
//! to notice that they were inherited by a forked child. That check runs on every call, and
//! `getpid` is a real system call (glibc stopped caching it). So the pid is cached, and a fork
//! handler registered with `pthread_atfork` refreshes it in the child, before any other code
//! of the child runs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// 0 until first asked.
static PID: AtomicU32 = AtomicU32::new(0);
static REGISTER: Once = Once::new();

/// The id of the current process.
pub fn id() -> u32 {
    let cached = PID.load(Ordering::Acquire);
    if cached != 0 {
        return cached;
    }
    REGISTER.call_once(register_fork_handler);
    let pid = std::process::id();
    if !DISABLED.load(Ordering::Acquire) {
        PID.store(pid, Ordering::Release);
    }
    pid
}

#[cfg(unix)]
fn register_fork_handler() {
    extern "C" fn in_child() {
        PID.store(std::process::id(), Ordering::Release);
    }
    // SAFETY: registers a handler that only stores an integer; it is async-signal-safe as
    // fork handlers must be. If registration fails the cache is never filled (see below).
    let registered = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    if registered != 0 {
        // Without a handler a child could see its parent's pid: never cache then.
        DISABLED.store(true, Ordering::Release);
    }
}

#[cfg(not(unix))]
fn register_fork_handler() {}

static DISABLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(test)]
mod tests {
    #[test]
    fn the_cached_pid_is_the_process_id() {
        assert_eq!(super::id(), std::process::id());
        assert_eq!(super::id(), std::process::id());
    }
}
