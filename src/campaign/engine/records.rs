//! What the engine records: each outcome in the journal (and the stop rules it triggers), the
//! claims made before messages may leave, and what the journal answered to them.

use super::{Engine, Marking};
use crate::campaign::admit::{held_elsewhere, AfterLostClaim};
use crate::campaign::journal::{row_of, Claimed, Journaling};
use crate::campaign::outcome::Outcome;
use crate::campaign::send::{stops_the_campaign, Finished};
use crate::client::PauseRecord;
use crate::error::Result;

impl<P: Send + 'static> Engine<P> {
    /// Records an outcome (journal, stop rules) and queues it for the caller.
    pub(super) fn record(&mut self, outcome: Outcome<P>, journaling: Journaling) -> Result<()> {
        // The outcome is the caller's whatever happens to the journal; a failed write is
        // reported after it is queued.
        let written = self.journal_outcome(&outcome, journaling);
        if self.stop_on_error && outcome.status.is_error() && self.stopped.is_none() {
            let reason = outcome
                .error
                .as_ref()
                .map_or_else(|| outcome.status.as_str().to_owned(), ToString::to_string);
            self.stop(
                Some(outcome.index),
                &format!(
                    "message #{} was {}: {reason}",
                    outcome.index,
                    outcome.status.as_str()
                ),
            );
        }
        self.buffer.push(outcome);
        written
    }

    pub(super) fn finish(&mut self, finished: Finished<P>) -> Result<()> {
        let Finished {
            outcome,
            identity,
            stop,
            failure,
            claims_lost,
        } = finished;
        if let Some(failure) = failure {
            self.fail_limits(failure);
        }
        if let Some(lost) = claims_lost {
            // Nothing more is sent: this message's record, and every other this run no longer
            // holds, are left to the run that took them over (the journal still writes the
            // results of those it holds).
            self.fail(lost);
        }
        // The mark written before dispatch holds the fingerprint; the result keeps it.
        let fatal = stop.or_else(|| outcome.error.as_ref().and_then(stops_the_campaign));
        if let Some(reason) = fatal {
            if self.stopped.is_none() {
                self.stop(
                    Some(outcome.index),
                    &format!("message #{}: {reason}", outcome.index),
                );
            }
        }
        let was_open = self.breaker.is_open();
        self.breaker.count(&outcome);
        if !was_open && self.breaker.is_open() {
            // One probe at a time from now: a pause, for the campaign's span (a traced
            // handle's only).
            if let Some(log) = self.context.client.attempt_log() {
                log.pause(PauseRecord {
                    at: std::time::SystemTime::now(),
                    seconds: None,
                    reason: "unreachable",
                    status: None,
                    code: None,
                    sender: None,
                });
            }
        }
        self.trip_breaker();
        self.record(outcome, Journaling::Write(identity))
    }

    pub(super) fn journal_outcome(
        &mut self,
        outcome: &Outcome<P>,
        journaling: Journaling,
    ) -> Result<()> {
        let doubt_before = self.claims.forget_doubt(outcome.index);
        let (identity, held) = match journaling {
            Journaling::Write(identity) => (identity, true),
            Journaling::WriteIfHeld(identity) => (identity, false),
            Journaling::Skip => return Ok(()),
        };
        match &self.journal {
            Some(journal) => journal.write(vec![row_of(outcome, identity, !doubt_before, held)]),
            None => Ok(()),
        }
    }

    /// Claims the next messages in the journal before they may be dispatched: what this run
    /// wins is marked `claimed` with its key, durably (each is recorded `dispatched` later,
    /// just before its request is written: `send.rs`).
    pub(super) fn mark_ahead(&mut self) -> Option<Marking> {
        let journal = self.journal.clone()?;
        let (drained, claims) = self.claims.next_claims()?;
        Some(Box::pin(async move {
            let claimed = journal.claim(claims).await?;
            Ok((drained, claimed))
        }))
    }

    /// What the journal answered to the claims of `ready[marked..]`: the messages won are
    /// marked; the others are taken out of the queue with the outcome their records give
    /// (done, being sent by another run, in doubt), or queued again when it says they may go.
    pub(super) fn claimed(&mut self, drained: u64, claimed: Vec<Claimed>) {
        let Some(answer) = self.claims.answer(drained, claimed) else {
            // The queue was emptied meanwhile (a stop): these messages were reported already.
            return;
        };
        for index in answer.won {
            self.waiting.done(index);
        }
        let mut settled = Vec::new();
        for (ready, row) in answer.lost {
            match self.admission.after_lost_claim(ready, &row) {
                AfterLostClaim::Settled(outcome) => settled.push(outcome),
                AfterLostClaim::ClaimAgain { ready, in_doubt } => {
                    if let Some(ready) = self.claims.claim_again(ready, in_doubt) {
                        settled.push(held_elsewhere(ready));
                    }
                }
                AfterLostClaim::ClaimLater(ready) => self.waiting.settle(ready),
                AfterLostClaim::Held(ready) => {
                    self.claims.forget_doubt(ready.index);
                    self.wait_for_holder(ready);
                }
            }
        }
        for outcome in settled.into_iter().rev() {
            self.claims.settled(outcome.index);
            self.waiting.done(outcome.index);
            self.buffer.push(outcome);
        }
    }
}
