//! Admission: what becomes of each message taken from the input, decided before anything is
//! sent, in two steps. First (`identify`), in input order: an invalid item fails, an exact
//! repeat of an earlier message is skipped (`dedupe`), and every other message gets its
//! identity (what the journal knows it by). Then (`admit`), with what the journal recorded of
//! it: a message an earlier run finished is reported as it was; one another run holds now is
//! waited for (`waiting`); one an earlier run left in doubt is listed, or re-sent with its key
//! (`resend_unknown`); one whose sender cannot send is failed (`pace="auto"`); the rest get
//! their idempotency key and go to the send queue.

use std::collections::hash_map::Entry;
use std::sync::Arc;

use super::handle::Warning;
use super::journal::{recorded_result, Identity, Journaling, Row, State};
use super::keys::KeySource;
use super::message::{Fingerprint, FingerprintKind, FingerprintMap, Input, Prepared};
use super::outcome::{Outcome, Status};
use super::send::{in_doubt, Ready};
use super::senders::SenderPolicy;
use crate::api::Account;

/// A message after the first step. (Not boxed: it lives only while its chunk is admitted, and
/// a box per message would cost more than the unused room of the smaller variant.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Identified<P> {
    Message {
        index: u64,
        payload: P,
        prepared: Prepared,
        identity: Identity,
    },
    /// Decided already: an invalid item, or a repeat skipped by `dedupe`.
    Decided(Outcome<P>),
}

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
    /// Known from the journal: reported as it has it, nothing written, no stop rule applies
    /// (it is not this run's doing).
    Recorded(Outcome<P>),
    /// Held by a run whose session just ended (`Row::holder_settling`), to be taken over in
    /// doubt once that run's grace is past (`resend_unknown`).
    Later(Ready<P>),
    /// Held by another run that is alive: waited for, claimed again in a moment.
    Held(Ready<P>),
    /// Decided now without sending: a sender that cannot send.
    Decided {
        outcome: Outcome<P>,
        journaling: Journaling,
    },
}

pub(super) struct Admission {
    keys: KeySource,
    dedupe: bool,
    resend_unknown: bool,
    /// The first message with each fingerprint (duplicates point at it).
    seen: FingerprintMap<u64>,
    /// Copies of each message so far (`dedupe=False`).
    occurrences: FingerprintMap<u32>,
    /// With `pace="auto"`.
    pub(super) senders: Option<SenderPolicy>,
    /// How the campaign knows its messages (its journal's record).
    fingerprints: FingerprintKind,
}

impl Admission {
    pub(super) fn new(
        keys: KeySource,
        dedupe: bool,
        resend_unknown: bool,
        senders: Option<SenderPolicy>,
        fingerprints: FingerprintKind,
    ) -> Self {
        Admission {
            fingerprints,
            keys,
            dedupe,
            resend_unknown,
            seen: FingerprintMap::default(),
            occurrences: FingerprintMap::default(),
            senders,
        }
    }

    /// The first step, in input order.
    pub(super) fn identify<P>(&mut self, item: Input<P>) -> Identified<P> {
        let Input {
            index,
            payload,
            message,
        } = item;
        let mut prepared = match message {
            Ok(prepared) => prepared,
            Err(error) => return Identified::Decided(Outcome::failed(index, payload, error)),
        };
        if self.fingerprints != FingerprintKind::Sha256 {
            // A campaign whose journal began with another kind of fingerprint keeps it.
            prepared.fingerprint = Fingerprint::of_kind(&prepared.request, self.fingerprints);
        }
        let fingerprint = prepared.fingerprint;
        let occurrence = if self.dedupe {
            match self.seen.entry(fingerprint) {
                Entry::Occupied(original) => {
                    let original = *original.get();
                    let mut outcome = Outcome::skipped(
                        index,
                        payload,
                        format!("duplicate of message #{original}"),
                    );
                    outcome.duplicate_of = Some(original);
                    return Identified::Decided(outcome);
                }
                Entry::Vacant(slot) => {
                    slot.insert(index);
                    0
                }
            }
        } else {
            let copies = self.occurrences.entry(fingerprint).or_insert(0);
            let occurrence = *copies;
            *copies = copies.saturating_add(1);
            occurrence
        };
        Identified::Message {
            index,
            payload,
            prepared,
            identity: Identity {
                fingerprint,
                occurrence,
            },
        }
    }

    /// The second step, given the journal's record of the message (`recorded`). Warnings
    /// found on the way (a sender's quality) go to `warnings`.
    pub(super) fn admit<P>(
        &mut self,
        index: u64,
        payload: P,
        prepared: Prepared,
        identity: Identity,
        recorded: Option<&Row>,
        warnings: &mut Vec<Warning>,
    ) -> Admitted<P> {
        let mut key = prepared.key.clone();
        let mut in_doubt_before = false;
        let mut later = false;
        let mut held = false;
        if let Some(row) = recorded {
            key = row.key.clone().or(key);
            match settled_by(row, self.resend_unknown) {
                Settled::No => {}
                Settled::InDoubtToResend => in_doubt_before = true,
                Settled::InDoubtSoon => later = true,
                Settled::HeldElsewhere => held = true,
                settled => {
                    return Admitted::Recorded(settled.outcome(index, payload, &prepared, row))
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
                    journaling: Journaling::Skip,
                }
            }
        };
        let key = key.unwrap_or_else(|| self.keys.key(identity));
        let ready = Ready {
            index,
            payload,
            prepared,
            identity,
            key,
            pace,
            // Set once its claim is won (`claims.rs`).
            dispatch: false,
        };
        if later {
            return Admitted::Later(ready);
        }
        if held {
            return Admitted::Held(ready);
        }
        Admitted::Send {
            ready,
            in_doubt: in_doubt_before,
            tier,
        }
    }

    /// What a record this run lost a claim to says of the message: the same rules as at
    /// admission.
    pub(super) fn after_lost_claim<P>(&self, ready: Ready<P>, row: &Row) -> AfterLostClaim<P> {
        match settled_by(row, self.resend_unknown) {
            Settled::No => AfterLostClaim::ClaimAgain {
                ready,
                in_doubt: false,
            },
            Settled::InDoubtToResend => AfterLostClaim::ClaimAgain {
                ready,
                in_doubt: true,
            },
            Settled::InDoubtSoon => AfterLostClaim::ClaimLater(ready),
            Settled::HeldElsewhere => {
                let mut ready = ready;
                // The key its holder sends it with: the one to report if this run gives up.
                if let Some(key) = &row.key {
                    ready.key.clone_from(key);
                }
                AfterLostClaim::Held(ready)
            }
            settled => AfterLostClaim::Settled(settled.outcome(
                ready.index,
                ready.payload,
                &ready.prepared,
                row,
            )),
        }
    }
}

/// A message whose claim another run's record beat.
#[allow(clippy::large_enum_variant)]
pub(super) enum AfterLostClaim<P> {
    /// Its outcome: done, or in doubt.
    Settled(Outcome<P>),
    /// It may go after all (its holder ended meanwhile): to be claimed again, taking it over
    /// when it is in doubt (`resend_unknown`).
    ClaimAgain { ready: Ready<P>, in_doubt: bool },
    /// Its holder's session just ended: to be taken over once its grace is past.
    ClaimLater(Ready<P>),
    /// Another run that is alive holds it: waited for, claimed again in a moment.
    Held(Ready<P>),
}

/// A message waiting to be taken over from a run whose session just ended, when the campaign
/// stops first: in doubt (that run may have sent it), with its key, as without
/// `resend_unknown`.
pub(super) fn still_in_doubt<P>(ready: Ready<P>) -> Outcome<P> {
    let row = Row::new(ready.identity, State::Dispatched, Some(ready.key.clone()));
    Settled::InDoubt.outcome(ready.index, ready.payload, &ready.prepared, &row)
}

/// A message that kept losing its claim (its holder neither alive nor taken over), or that a
/// live run still held when this run stopped or had waited its patience: reported held by
/// another run, not sent by this one (a later run of the campaign sends it if nobody did).
pub(super) fn held_elsewhere<P>(ready: Ready<P>) -> Outcome<P> {
    let row = Row::new(ready.identity, State::Dispatched, Some(ready.key.clone()));
    Settled::HeldElsewhere.outcome(ready.index, ready.payload, &ready.prepared, &row)
}

/// What a record says of a message.
enum Settled {
    /// Nothing that stops it: no result, never sent.
    No,
    /// Sent or rejected by some run.
    Done,
    /// Claimed by a run of another process that is alive: being sent now, waited for.
    HeldElsewhere,
    /// Claimed by a run whose session just ended: in doubt once its grace is past, and then
    /// re-sent with its key (`resend_unknown`).
    InDoubtSoon,
    /// Claimed by a run that is gone, without a result: it may have been sent.
    InDoubt,
    /// In doubt, and to be re-sent with its key (`resend_unknown`).
    InDoubtToResend,
}

fn settled_by(row: &Row, resend_unknown: bool) -> Settled {
    match row.state {
        State::Sent | State::Rejected => Settled::Done,
        // Claimed by a live run of another process: it sends it, or, once that run is gone,
        // this one claims it as never sent (a `claimed` row was never written).
        State::Claimed if row.held_elsewhere => Settled::HeldElsewhere,
        State::Claimed => Settled::No,
        // Its holder's session ended moments ago: the message may have left, and that run
        // sends nothing more once its fence's window closes.
        State::Dispatched | State::Unknown
            if row.held_elsewhere && row.holder_settling && resend_unknown =>
        {
            Settled::InDoubtSoon
        }
        State::Dispatched | State::Unknown if row.held_elsewhere && row.holder_settling => {
            Settled::InDoubt
        }
        State::Dispatched | State::Unknown if row.held_elsewhere => Settled::HeldElsewhere,
        State::Dispatched | State::Unknown if resend_unknown => Settled::InDoubtToResend,
        State::Dispatched | State::Unknown => Settled::InDoubt,
        // Never sent: sent now like a new message.
        State::Failed | State::Skipped => Settled::No,
    }
}

impl Settled {
    fn outcome<P>(self, index: u64, payload: P, prepared: &Prepared, row: &Row) -> Outcome<P> {
        let key = row.key.clone().or_else(|| prepared.key.clone());
        let mut outcome = match self {
            Settled::Done => {
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
                outcome.result = Some(recorded_result(row));
                outcome
            }
            Settled::HeldElsewhere => Outcome::skipped(
                index,
                payload,
                "being sent by another run of this campaign, which holds it (journal): not \
                 sent by this one",
            ),
            Settled::InDoubt | Settled::No | Settled::InDoubtToResend | Settled::InDoubtSoon => {
                let key = key.clone().unwrap_or_default();
                let mut outcome = Outcome::new(index, payload, Status::Unknown);
                outcome.error = Some(in_doubt(prepared, &key));
                outcome.reason = Some(
                    "in doubt since an earlier run: reconcile it, or run again with \
                     resend_unknown=True to re-send it with the same key"
                        .to_owned(),
                );
                outcome
            }
        };
        outcome.idempotency_key = key;
        outcome
    }
}
