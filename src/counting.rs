//! Whether this process counts what the instrumentation's metrics read: the seconds sends
//! waited to be admitted (`limits/waited.rs`) and the campaign messages in flight
//! (`campaign/in_flight.rs`). On while `BizmsgInstrumentor` is instrumenting, off otherwise:
//! counts no one reads cost a send nothing but the read of this flag (the counters are shared
//! by every thread, and each update moves their cache line between cores).

use std::sync::atomic::{AtomicBool, Ordering};

static ON: AtomicBool = AtomicBool::new(false);

/// Starts (`true`) or stops counting.
pub fn set(on: bool) {
    ON.store(on, Ordering::Relaxed);
}

/// Whether sends count now.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}
