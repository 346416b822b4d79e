//! Messages another run of the campaign holds, waited for instead of reported at once.
//!
//! A message whose journal row another run holds is that run's to send. Reporting it at once
//! ("being sent by another run") lost it whenever that run then failed to send it: a run
//! frozen past its lease is taken over and sends nothing more (its fence), and the runs that
//! had passed its messages by had finished already, so nobody sent them. So a run waits for
//! such a message: it claims it again every `RECHECK_EVERY` until its row has a result (it is
//! reported as recorded), its holder is judged gone (it is taken over, in doubt where it may
//! have left) or the run's patience is past (it is reported held by another run, as before,
//! and a later run of the campaign sends it if nobody did).
//!
//! Two kinds of wait, each a queue in the order the messages came, so the front is the first
//! due:
//! - `settling`: the holder's session just ended; its claims are in doubt once its grace is
//!   past (`SETTLE_FOR`), and taken over then (`resend_unknown`);
//! - `held`: the holder is alive; its claims are checked again every `RECHECK_EVERY`.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::journal::SESSION_GRACE;
use super::send::Ready;

/// How long after its holder's session was seen gone a message is claimed again (taken over):
/// past the grace such a run gets, with room for the round trips.
pub(super) const SETTLE_FOR: Duration = SESSION_GRACE.saturating_add(Duration::from_millis(500));

/// How often a message a live run holds is claimed again. Each check is one row in a claim
/// statement the run makes anyway, so a second costs little even for thousands of messages.
pub(super) const RECHECK_EVERY: Duration = Duration::from_secs(1);

/// How long a run waits for the messages another live run holds, given its own lease: as long
/// as it would take to judge that run dead if it had the same lease, and to take it over.
pub(super) fn patience(lease: Duration) -> Duration {
    lease
        .saturating_add(lease / 4)
        .saturating_add(SETTLE_FOR)
        .saturating_add(RECHECK_EVERY)
}

/// A message to claim again, and whether it is taken over in doubt.
pub(super) struct Due<P> {
    pub ready: Ready<P>,
    pub in_doubt: bool,
}

pub(super) struct Waiting<P> {
    settling: VecDeque<(Instant, Ready<P>)>,
    held: VecDeque<(Instant, Ready<P>)>,
    /// When each message in `held` (or claimed again from it) was first found held.
    held_since: HashMap<u64, Instant>,
    patience: Duration,
}

impl<P> Waiting<P> {
    pub(super) fn new(patience: Duration) -> Self {
        Waiting {
            settling: VecDeque::new(),
            held: VecDeque::new(),
            held_since: HashMap::new(),
            patience,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.settling.is_empty() && self.held.is_empty()
    }

    /// When the next message is due to be claimed again.
    pub(super) fn next_due(&self) -> Option<Instant> {
        let settling = self.settling.front().map(|(due, _)| *due);
        let held = self.held.front().map(|(due, _)| *due);
        match (settling, held) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A message held by a run whose session just ended: taken over once that run's grace is
    /// past (it may send until its fence's window closes).
    pub(super) fn settle(&mut self, ready: Ready<P>) {
        self.settling
            .push_back((Instant::now() + SETTLE_FOR, ready));
    }

    /// A message a live run holds: claimed again in a moment, unless the run has waited its
    /// patience for it already; then it is given back, to be reported held by another run.
    pub(super) fn hold(&mut self, ready: Ready<P>) -> Option<Ready<P>> {
        let now = Instant::now();
        let since = *self.held_since.entry(ready.index).or_insert(now);
        if now.saturating_duration_since(since) >= self.patience {
            self.held_since.remove(&ready.index);
            return Some(ready);
        }
        self.held.push_back((now + RECHECK_EVERY, ready));
        None
    }

    /// The message's wait is over: its claim was won, or it has an outcome.
    pub(super) fn done(&mut self, index: u64) {
        if !self.held_since.is_empty() {
            self.held_since.remove(&index);
        }
    }

    /// The messages due now, in the order they are due.
    pub(super) fn due(&mut self, now: Instant) -> Vec<Due<P>> {
        let mut due = Vec::new();
        while self.settling.front().is_some_and(|(when, _)| *when <= now) {
            if let Some((_, ready)) = self.settling.pop_front() {
                due.push(Due {
                    ready,
                    in_doubt: true,
                });
            }
        }
        while self.held.front().is_some_and(|(when, _)| *when <= now) {
            if let Some((_, ready)) = self.held.pop_front() {
                due.push(Due {
                    ready,
                    in_doubt: false,
                });
            }
        }
        due
    }

    /// Every message still waiting, at a stop: those whose holder's session ended (in doubt),
    /// then those a live run holds.
    pub(super) fn drain(&mut self) -> (Vec<Ready<P>>, Vec<Ready<P>>) {
        self.held_since.clear();
        (
            self.settling.drain(..).map(|(_, ready)| ready).collect(),
            self.held.drain(..).map(|(_, ready)| ready).collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patience_covers_a_take_over_of_a_run_with_the_same_lease() {
        let lease = Duration::from_secs(8);
        // 1.25 leases to be judged dead, the grace, one more look.
        assert_eq!(
            patience(lease),
            Duration::from_secs(10) + SETTLE_FOR + RECHECK_EVERY
        );
        // A week's lease does not overflow.
        assert!(patience(Duration::from_secs(7 * 24 * 3600)) > Duration::from_secs(7 * 24 * 3600));
    }
}
