//! How long this process's sends have waited to be admitted (their pacing slots and the pauses
//! that held them), in total and per sender, while it counts (`crate::counting`): totals the
//! instrumentation reads when its metrics are collected (`bizmsg.pacing.wait`, with the sender
//! as its attribute), so nothing is done in Python per message. Here, per message: two clock
//! reads and an atomic add; and, for a message that really waited (longer than
//! [`NOT_A_WAIT`]), an add into its sender's total under a lock held for a map lookup: an
//! unpaced campaign's admissions, answered at once, take no lock here.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

static WAITED_NANOS: AtomicU64 = AtomicU64::new(0);

/// Nanoseconds waited per sender (the number as the send gave it).
static BY_SENDER: LazyLock<Mutex<HashMap<String, u64>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Senders counted apart, at most: a metric attribute must stay of low cardinality, so the
/// waits of any sender past these are counted under [`OTHER_SENDERS`].
pub const MAX_SENDERS: usize = 1000;
/// Where the senders past [`MAX_SENDERS`] are counted.
pub const OTHER_SENDERS: &str = "_OTHER";
/// An admission answered within this is no wait: counted in the total, not by sender. A pacing
/// slot at 5,000 a second is 200 µs apart.
pub const NOT_A_WAIT: Duration = Duration::from_micros(10);

/// A wait to be admitted: counted from its start to its drop, so a wait cut short (a stop, a
/// timeout, a dropped call) counts what it waited.
pub struct Waiting<'a> {
    /// When it started, if the process counts (`crate::counting`).
    started: Option<Instant>,
    sender: &'a str,
}

impl<'a> Waiting<'a> {
    /// A wait of a message from `sender`.
    pub fn start(sender: &'a str) -> Self {
        Self {
            started: crate::counting::on().then(Instant::now),
            sender,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(started) = self.started else {
            return;
        };
        let waited = started.elapsed();
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        WAITED_NANOS.fetch_add(nanos, Ordering::Relaxed);
        if waited <= NOT_A_WAIT {
            return;
        }
        let mut by_sender = crate::sync::lock(&BY_SENDER);
        if let Some(total) = by_sender.get_mut(self.sender) {
            *total = total.saturating_add(nanos);
        } else {
            let key = if by_sender.len() < MAX_SENDERS {
                self.sender
            } else {
                OTHER_SENDERS
            };
            let total = by_sender.entry(key.to_owned()).or_insert(0);
            *total = total.saturating_add(nanos);
        }
    }
}

/// Awaits `wait`, an admission of a message from `sender`, counted as a [`Waiting`] (also when
/// the future is dropped before it ends).
pub async fn waited<F: Future>(sender: &str, wait: F) -> F::Output {
    let _waiting = Waiting::start(sender);
    wait.await
}

/// Seconds waited to be admitted, by every send of this process so far.
pub fn total_seconds() -> f64 {
    Duration::from_nanos(WAITED_NANOS.load(Ordering::Relaxed)).as_secs_f64()
}

/// Seconds waited to be admitted so far, per sender, each sender masked as the logs mask
/// numbers (its waits past [`MAX_SENDERS`] under [`OTHER_SENDERS`]).
pub fn seconds_by_sender() -> Vec<(String, f64)> {
    let by_sender = crate::sync::lock(&BY_SENDER);
    by_sender
        .iter()
        .map(|(sender, nanos)| {
            let name = if sender == OTHER_SENDERS {
                sender.clone()
            } else {
                crate::masking::mask_phone(sender)
            };
            (name, Duration::from_nanos(*nanos).as_secs_f64())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_counts_from_its_start_to_its_drop_in_all_and_for_its_sender() {
        crate::counting::set(true);
        let sender = "14155559871";
        let seconds_of = |sender: &str| {
            let masked = crate::masking::mask_phone(sender);
            seconds_by_sender()
                .into_iter()
                .find(|(name, _)| *name == masked)
                .map_or(0.0, |(_, seconds)| seconds)
        };
        let before = total_seconds();
        let before_sender = seconds_of(sender);
        {
            let _waiting = Waiting::start(sender);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(total_seconds() - before >= 0.02);
        assert!(seconds_of(sender) - before_sender >= 0.02);
        // Never the whole number.
        assert!(seconds_by_sender().iter().all(|(name, _)| name != sender));
    }

    #[test]
    fn an_admission_answered_at_once_is_no_wait_of_its_sender() {
        crate::counting::set(true);
        let sender = "14155559872";
        drop(Waiting::start(sender));
        let masked = crate::masking::mask_phone(sender);
        assert!(seconds_by_sender().iter().all(|(name, _)| *name != masked));
    }
}
