//! How many campaign messages this process has dispatched and not finished (waiting for their
//! pacing slot, or their request on the wire): one counter the instrumentation reads when its
//! metrics are collected (`bizmsg.messages.in_flight`), while it counts (`crate::counting`). A
//! send holds a [`Sending`] for its whole life, so one cancelled or abandoned mid-way is counted
//! out all the same.

use std::sync::atomic::{AtomicU64, Ordering};

static IN_FLIGHT: AtomicU64 = AtomicU64::new(0);

/// One message being sent, counted while it lives (if it was counted when it started).
pub(super) struct Sending {
    counted: bool,
}

impl Sending {
    pub(super) fn start() -> Self {
        let counted = crate::counting::on();
        if counted {
            IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        }
        Sending { counted }
    }
}

impl Drop for Sending {
    fn drop(&mut self) {
        if self.counted {
            IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Campaign messages in flight in this process now.
pub fn messages_in_flight() -> u64 {
    IN_FLIGHT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_counted_while_its_send_lives() {
        crate::counting::set(true);
        // Other tests' campaigns may run at the same time: compare with what this one adds.
        let sending = Sending::start();
        assert!(messages_in_flight() >= 1);
        let second = Sending::start();
        assert!(messages_in_flight() >= 2);
        drop(second);
        drop(sending);
    }
}
