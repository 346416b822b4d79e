//! Admission: what becomes of each message taken from the input, decided before anything is
//! sent. A message an earlier run finished (the journal says so) is reported as it was; one an
//! earlier run left in doubt is listed, or re-sent with its key (`resend_unknown`); an exact
//! repeat of an earlier message is skipped (`dedupe`); one whose sender cannot send is failed
//! (`pace="auto"`); the rest get their idempotency key and go to the send queue.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::handle::Warning;
use super::journal::{recorded_result, Journaling, Row, State};
use super::keys::KeySource;
use super::message::{FingerprintMap, Input};
use super::outcome::{Outcome, Status};
use super::send::{in_doubt, Ready};
use super::senders::{Account, SenderPolicy};
use crate::error::Error;

/// What admission decided for one message.
pub(super) enum Admitted<P> {
    /// To be sent. `in_doubt`: an earlier run may have sent it already (it is re-sent with
    /// the same key because `resend_unknown` asks so); its record stays in doubt unless a
    /// result comes back.
    Send {
        ready: Ready<P>,
        in_doubt: bool,
        /// The account whose tier its recipient counts against (`pace="auto"`).
        tier: Option<Arc<Account>>,
    },
    /// Known from an earlier run: reported as the journal has it, nothing written, no stop
    /// rule applies (it is not this run's doing).
    Recorded(Outcome<P>),
    /// Decided now without sending: a duplicate, an invalid message, a sender that cannot
    /// send.
    Decided {
        outcome: Outcome<P>,
        journaling: Journaling,
    },
    /// Not the message the journal recorded at its position: the input changed, and the
    /// campaign stops with `reason`.
    InputChanged { outcome: Outcome<P>, reason: String },
}

pub(super) struct Admission {
    keys: KeySource,
    dedupe: bool,
    resend_unknown: bool,
    /// The first message with each fingerprint (duplicates point at it).
    seen: FingerprintMap<u64>,
    /// With `pace="auto"`.
    pub(super) senders: Option<SenderPolicy>,
}

impl Admission {
    pub(super) fn new(
        keys: KeySource,
        dedupe: bool,
        resend_unknown: bool,
        senders: Option<SenderPolicy>,
    ) -> Self {
        Admission {
            keys,
            dedupe,
            resend_unknown,
            seen: FingerprintMap::default(),
            senders,
        }
    }

    /// Decides for `item`, given what the journal recorded at its position (`recorded`).
    /// Warnings found on the way (a sender's quality, an account near its tier) go to
    /// `warnings`.
    pub(super) fn admit<P>(
        &mut self,
        item: Input<P>,
        recorded: Option<&Row>,
        warnings: &mut Vec<Warning>,
    ) -> Admitted<P> {
        let Input {
            index,
            payload,
            message,
        } = item;
        let prepared = match message {
            Ok(prepared) => prepared,
            // The journal recorded a valid message here: the input changed.
            Err(_) if recorded.is_some_and(|row| row.fingerprint.is_some()) => {
                return input_changed(index, payload);
            }
            // An invalid item is never sent and needs no record; writing one could clear the
            // doubt of the message an earlier run had at that position.
            Err(error) => {
                return Admitted::Decided {
                    outcome: Outcome::failed(index, payload, error),
                    journaling: Journaling::Skip,
                }
            }
        };
        let mut key = prepared.key.clone();
        let mut in_doubt_before = false;
        if let Some(row) = recorded {
            if row.fingerprint.is_some_and(|f| f != prepared.fingerprint) {
                return input_changed(index, payload);
            }
            key = row.key.clone().or(key);
            match row.state {
                State::Sent | State::Rejected => {
                    self.seen.entry(prepared.fingerprint).or_insert(index);
                    let status = if row.state == State::Sent {
                        "sent"
                    } else {
                        "rejected"
                    };
                    let mut outcome = Outcome::skipped(
                        index,
                        payload,
                        format!("already {status} by an earlier run (journal)"),
                    );
                    outcome.idempotency_key = key;
                    outcome.result = Some(recorded_result(row));
                    return Admitted::Recorded(outcome);
                }
                State::Dispatched | State::Unknown if !self.resend_unknown => {
                    self.seen.entry(prepared.fingerprint).or_insert(index);
                    let key = key.unwrap_or_default();
                    let mut outcome = Outcome::new(index, payload, Status::Unknown);
                    outcome.error = Some(in_doubt(&prepared, &key));
                    outcome.idempotency_key = Some(key);
                    outcome.reason = Some(
                        "in doubt since an earlier run: reconcile it, or run again with \
                         resend_unknown=True to re-send it with the same key"
                            .to_owned(),
                    );
                    return Admitted::Recorded(outcome);
                }
                State::Dispatched | State::Unknown => in_doubt_before = true,
                // Never sent, or skipped: on to the same duplicate check as new messages (a
                // duplicate skipped by an earlier run is skipped again, never sent).
                State::Failed | State::Skipped => {}
            }
        }
        if self.dedupe {
            match self.seen.entry(prepared.fingerprint) {
                Entry::Occupied(original) if *original.get() != index => {
                    let original = *original.get();
                    let mut outcome = Outcome::skipped(
                        index,
                        payload,
                        format!("duplicate of message #{original}"),
                    );
                    outcome.duplicate_of = Some(original);
                    return Admitted::Decided {
                        outcome,
                        journaling: Journaling::Write(Some(prepared.fingerprint)),
                    };
                }
                Entry::Occupied(_) => {}
                Entry::Vacant(slot) => {
                    slot.insert(index);
                }
            }
        }
        let (pace, tier) = match self
            .senders
            .as_mut()
            .map(|senders| senders.check(&prepared))
        {
            None => (None, None),
            Some(Ok(checked)) => {
                warnings.extend(checked.warnings);
                (checked.pace, checked.tier)
            }
            Some(Err(error)) => {
                return Admitted::Decided {
                    outcome: Outcome::failed(index, payload, error),
                    journaling: Journaling::Write(Some(prepared.fingerprint)),
                }
            }
        };
        let key = key.unwrap_or_else(|| self.keys.key(index, prepared.fingerprint));
        Admitted::Send {
            ready: Ready {
                index,
                payload,
                prepared,
                key,
                pace,
            },
            in_doubt: in_doubt_before,
            tier,
        }
    }
}

/// The message at `index` is not the one the journal recorded there: the input changed since
/// the journal was written. Its outcome is failed and the campaign stops, since with positions
/// shifted nothing after it can be matched with what was sent (a message moved to a later
/// position would get a new key and go out again). The journal is left as it is.
fn input_changed<P>(index: u64, payload: P) -> Admitted<P> {
    let reason = format!(
        "message #{index} differs from the one the journal recorded at that position: the \
         input changed since the journal was written (use a new journal for new input)"
    );
    let error = Error::validation("message", reason.clone());
    Admitted::InputChanged {
        outcome: Outcome::failed(index, payload, error),
        reason,
    }
}
