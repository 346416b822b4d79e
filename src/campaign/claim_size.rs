//! How many messages a campaign claims in its journal at a time.
//!
//! A claim is a durable commit, so its round trip bounds the campaign: a run can send only what
//! it has claimed, and it starts the next claim when half of the last is left. With a fixed 64
//! and a PostgreSQL journal whose claim takes a few milliseconds (other runs' claims, this
//! run's results and a commit to disk before it), a campaign sent at most 32 messages per round
//! trip, a quarter of what the same campaign did with SQLite on the same machine.
//!
//! A bigger claim is not free either: what a run has claimed and not sent when it is killed is
//! in doubt for the next run (`unknown`, re-sent only with `resend_unknown`). So the size
//! follows what the run sends while a claim is being made: it doubles when the run had to wait
//! for a claim, and halves when a claim's round trip saw under a quarter of it sent. A paced
//! campaign (60 a second) comes back to the smallest size after its start (its first sends are
//! dispatched at once and wait for their pace in flight); one sending as fast as the service
//! answers claims about two round trips' worth of messages. The engine never holds more than
//! the size claimed and unsent: that, at most `LARGEST`, and what is in flight are what a
//! killed run leaves in doubt.

/// The size a campaign starts with and never goes under: what every claim was before.
pub const SMALLEST: usize = 64;
/// The most claimed at once, however fast the campaign goes.
pub const LARGEST: usize = 1_024;

#[derive(Debug)]
pub struct ClaimSize {
    size: usize,
    /// Whether a claim is being made.
    asking: bool,
    /// Messages dispatched since then.
    dispatched: usize,
    /// Whether the run had nothing claimed left to send while waiting for it.
    waited: bool,
    /// Whether a claim was answered before: the first is always waited for.
    warm: bool,
}

impl Default for ClaimSize {
    fn default() -> Self {
        ClaimSize {
            size: SMALLEST,
            asking: false,
            dispatched: 0,
            waited: false,
            warm: false,
        }
    }
}

impl ClaimSize {
    /// How many messages the next claim asks for.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether a run with `marked` messages claimed and unsent should claim more now.
    pub fn wants_more(&self, marked: usize) -> bool {
        marked < self.size / 2
    }

    /// A claim was asked for.
    pub fn asked(&mut self) {
        self.asking = true;
        self.dispatched = 0;
        self.waited = false;
    }

    /// A claimed message was dispatched.
    pub fn dispatched(&mut self) {
        if self.asking {
            self.dispatched += 1;
        }
    }

    /// The run could have dispatched a message but had none claimed.
    pub fn ran_out(&mut self) {
        if self.asking {
            self.waited = true;
        }
    }

    /// The claim was answered (or dropped by a stop): the next one's size.
    pub fn answered(&mut self) {
        if !std::mem::replace(&mut self.asking, false) {
            return;
        }
        // The first claim is waited for whatever the run's speed: it says nothing of it.
        let warm = std::mem::replace(&mut self.warm, true);
        if self.waited && warm {
            self.size = (self.size * 2).min(LARGEST);
        } else if self.dispatched * 4 < self.size {
            self.size = (self.size / 2).max(SMALLEST);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A size past its first claim.
    fn warm() -> ClaimSize {
        let mut size = ClaimSize::default();
        round(&mut size, 0, true);
        size
    }

    fn round(size: &mut ClaimSize, dispatched: usize, ran_out: bool) {
        size.asked();
        for _ in 0..dispatched {
            size.dispatched();
        }
        if ran_out {
            size.ran_out();
        }
        size.answered();
    }

    #[test]
    fn a_run_that_waits_for_its_claims_claims_more_up_to_the_largest() {
        let mut size = warm();
        assert_eq!(size.size(), SMALLEST);
        round(&mut size, 40, true);
        assert_eq!(size.size(), 128);
        for _ in 0..10 {
            let dispatched = size.size();
            round(&mut size, dispatched, true);
        }
        assert_eq!(size.size(), LARGEST);
    }

    #[test]
    fn a_slow_run_comes_back_to_the_smallest_and_never_under_it() {
        let mut size = warm();
        for _ in 0..4 {
            round(&mut size, 1, true);
        }
        assert_eq!(size.size(), 1_024);
        round(&mut size, 100, false);
        assert_eq!(size.size(), 512);
        for _ in 0..10 {
            round(&mut size, 1, false);
        }
        assert_eq!(size.size(), SMALLEST);
    }

    #[test]
    fn a_run_sending_between_a_quarter_and_half_a_claim_per_round_trip_keeps_its_size() {
        let mut size = warm();
        round(&mut size, 32, true);
        assert_eq!(size.size(), 128);
        for _ in 0..10 {
            round(&mut size, 40, false);
        }
        assert_eq!(size.size(), 128);
        assert!(size.wants_more(63));
        assert!(!size.wants_more(64));
    }

    #[test]
    fn the_first_claim_waited_for_says_nothing_of_speed() {
        let mut size = ClaimSize::default();
        round(&mut size, 0, true);
        assert_eq!(size.size(), SMALLEST);
        // A run whose whole claim goes in flight at once waits with nothing sent meanwhile.
        round(&mut size, 0, true);
        assert_eq!(size.size(), 128);
    }

    #[test]
    fn what_happens_outside_a_claim_changes_nothing() {
        let mut size = ClaimSize::default();
        size.ran_out();
        size.dispatched();
        size.answered();
        assert_eq!(size.size(), SMALLEST);
    }
}
