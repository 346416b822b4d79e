//! The campaign's breaker: a campaign to a service that cannot be reached stops by itself
//! after a few messages rather than after every message of its input.

use std::time::Duration;

use super::outcome::{Outcome, Status};
use crate::error::Error;

/// The breaker: counts the messages in a row that could not reach the service. Once enough
/// did, it lets one message at a time go (a probe: an answer closes it again), and trips when
/// nothing answered for its window, so a dead service costs a few messages, not the input,
/// and a service back within the window trips nothing.
pub(super) struct Breaker {
    after: Option<u32>,
    window: Duration,
    in_a_row: u32,
    /// The last answer of the service (or the campaign's start).
    last_answer: std::time::Instant,
    last_failure: String,
    /// When the last message that could not reach the service finished, and which it was.
    failed_at: std::time::Instant,
    pub(super) last_failed: Option<u64>,
}

impl Breaker {
    pub(super) fn new(after: Option<u32>, window: Duration) -> Self {
        Breaker {
            after,
            window,
            in_a_row: 0,
            last_answer: std::time::Instant::now(),
            last_failure: String::new(),
            failed_at: std::time::Instant::now(),
            last_failed: None,
        }
    }

    /// When an open breaker lets its next probe go: a few per window, not as fast as a
    /// refused connection fails.
    pub(super) fn next_probe(&self) -> std::time::Instant {
        self.failed_at + self.window / 5
    }

    /// Counts a finished send.
    pub(super) fn count<P>(&mut self, outcome: &Outcome<P>) {
        match (&outcome.status, &outcome.error) {
            // Never reached the service: each went through its retries already.
            (
                Status::Failed,
                Some(error @ (Error::Connect(_) | Error::Timeout(_) | Error::ConnectionBroken(_))),
            ) => {
                self.in_a_row = self.in_a_row.saturating_add(1);
                self.last_failure = error.to_string();
                self.failed_at = std::time::Instant::now();
                self.last_failed = Some(outcome.index);
            }
            (Status::Sent | Status::Rejected | Status::Unknown, _) => {
                self.in_a_row = 0;
                self.last_answer = std::time::Instant::now();
            }
            _ => {}
        }
    }

    /// Enough messages in a row failed: one at a time goes until an answer comes.
    pub(super) fn is_open(&self) -> bool {
        self.after.is_some_and(|after| self.in_a_row >= after)
    }

    /// When an open breaker next has something to do: trip, or let a probe go.
    pub(super) fn wakes_at(&self) -> Option<std::time::Instant> {
        self.is_open()
            .then(|| (self.last_answer + self.window).min(self.next_probe()))
    }

    /// Why the campaign stops, once open and quiet for the window.
    pub(super) fn tripped(&self) -> Option<String> {
        let quiet = self.last_answer.elapsed();
        (self.is_open() && quiet >= self.window).then(|| {
            format!(
                "the service is unreachable: {} messages in a row could not reach it, and \
                 nothing answered for {:.1} s (last: {})",
                self.in_a_row,
                quiet.as_secs_f64(),
                self.last_failure
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreachable(index: u64) -> Outcome<()> {
        Outcome::failed(index, (), Error::Connect("refused".to_owned()))
    }

    #[test]
    fn it_opens_after_enough_in_a_row_and_trips_only_once_quiet_for_its_window() {
        let mut breaker = Breaker::new(Some(3), Duration::from_millis(40));
        breaker.count(&unreachable(0));
        breaker.count(&unreachable(1));
        assert!(!breaker.is_open() && breaker.wakes_at().is_none());
        breaker.count(&unreachable(2));
        assert!(breaker.is_open());
        assert_eq!(breaker.last_failed, Some(2));
        // Open, but the window since the campaign's start has not passed.
        assert!(breaker.tripped().is_none());
        std::thread::sleep(Duration::from_millis(50));
        let reason = breaker.tripped().unwrap_or_default();
        assert!(
            reason.starts_with("the service is unreachable: 3 messages in a row")
                && reason.ends_with("(last: could not connect: refused)"),
            "{reason}"
        );
    }

    #[test]
    fn an_answer_closes_it_and_other_failures_do_not_count() {
        let mut breaker = Breaker::new(Some(2), Duration::ZERO);
        breaker.count(&unreachable(0));
        breaker.count(&Outcome::new(1, (), Status::Unknown));
        breaker.count(&unreachable(2));
        assert!(!breaker.is_open());
        // A validation failure or a skip says nothing about the service.
        breaker.count(&Outcome::failed(3, (), Error::validation("to", "bad")));
        breaker.count(&Outcome::skipped(4, (), "dedupe"));
        assert!(!breaker.is_open());
        breaker.count(&unreachable(5));
        assert!(breaker.is_open() && breaker.tripped().is_some());
    }

    #[test]
    fn without_a_count_it_never_opens() {
        let mut breaker = Breaker::new(None, Duration::ZERO);
        for index in 0..1000 {
            breaker.count(&unreachable(index));
        }
        assert!(!breaker.is_open() && breaker.tripped().is_none() && breaker.wakes_at().is_none());
    }
}
