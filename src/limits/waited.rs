//! How long this process's sends have waited to be admitted (their pacing slots and the pauses
//! that held them), in total since the process started: one counter the instrumentation reads
//! when its metrics are collected (`bizmsg.pacing.wait`), so nothing is done in Python per
//! message, and nothing but two clock reads and an atomic add per message here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

static WAITED_NANOS: AtomicU64 = AtomicU64::new(0);

/// A wait to be admitted: counted from its start to its drop, so a wait cut short (a stop, a
/// timeout, a dropped call) counts what it waited.
pub struct Waiting(Instant);

impl Waiting {
    pub fn start() -> Self {
        Self(Instant::now())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let nanos = u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        WAITED_NANOS.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// Seconds waited to be admitted, by every send of this process so far.
pub fn total_seconds() -> f64 {
    Duration::from_nanos(WAITED_NANOS.load(Ordering::Relaxed)).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_counts_from_its_start_to_its_drop() {
        let before = total_seconds();
        {
            let _waiting = Waiting::start();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(total_seconds() - before >= 0.02);
    }
}
