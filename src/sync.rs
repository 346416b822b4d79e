//! The crate's one way to take a `std::sync::Mutex`. A leaf: it imports nothing of the crate,
//! so the limits, the sandbox and the bindings all use it without importing one another.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks without propagating a panic of another thread: every critical section in the crate
/// leaves its data consistent, so the data behind a poisoned lock is still good, and one
/// panicked thread must not make every later call (or the sandbox) fail.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
