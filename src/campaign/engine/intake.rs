//! The engine's intake: each chunk of input identified, looked up in the journal, admitted
//! (`../admit.rs`), counted against its account's tier, and queued to be claimed and sent; what
//! comes after a stop is reported not taken.

use std::collections::HashMap;
use std::sync::Arc;

use super::Engine;
use crate::api::Account;
use crate::campaign::admit::{Admitted, Identified};
use crate::campaign::journal::{Identity, Journaling, Row};
use crate::campaign::message::Input;
use crate::campaign::outcome::Outcome;
use crate::campaign::senders::count_tiers;
use crate::error::{Error, Result};

impl<P: Send + 'static> Engine<P> {
    /// Items fed after the campaign stopped: each gets its outcome (failed when it is not a
    /// valid message, else skipped), none is sent. Nothing goes into the journal: these were
    /// never compared with what it holds, and a message without a row is sent by a re-run
    /// anyway.
    pub(super) fn not_taken(&mut self, items: Vec<Input<P>>) {
        let note = self.not_sent_note();
        for item in items {
            let outcome = match item.message {
                Err(error) => Outcome::failed(item.index, item.payload, error),
                Ok(_) => Outcome::skipped(item.index, item.payload, note.clone()),
            };
            self.buffer.push(outcome);
        }
    }

    /// Takes a chunk of input: each item is admitted (an outcome at once, or queued to be
    /// sent). Once the campaign stops (an error with `stop_on_error`, a journal failure), the
    /// rest of the chunk is reported as not taken.
    pub(super) async fn accept(&mut self, items: Vec<Input<P>>) {
        let identified: Vec<Identified<P>> = items
            .into_iter()
            .map(|item| self.admission.identify(item))
            .collect();
        let lookup = match &self.journal {
            Some(journal) => {
                let identities = identified
                    .iter()
                    .filter_map(|item| match item {
                        Identified::Message { identity, .. } => Some(*identity),
                        Identified::Decided(_) => None,
                    })
                    .collect();
                journal.lookup(identities).await
            }
            None => Ok(Vec::new()),
        };
        let recorded: HashMap<Identity, Row> = match lookup {
            Ok(rows) => rows.into_iter().map(|row| (row.identity, row)).collect(),
            Err(error) => {
                self.fail(error);
                return self.not_identified(identified);
            }
        };
        let mut items = identified.into_iter();
        let mut warnings = Vec::new();
        let mut sends = Vec::new();
        while self.stopped.is_none() {
            let Some(item) = items.next() else {
                break;
            };
            let admitted = match item {
                Identified::Decided(outcome) => Admitted::Decided {
                    outcome,
                    journaling: Journaling::Skip,
                },
                Identified::Message {
                    index,
                    payload,
                    prepared,
                    identity,
                } => {
                    let row = recorded.get(&identity);
                    self.admission
                        .admit(index, payload, prepared, identity, row, &mut warnings)
                }
            };
            for warning in warnings.drain(..) {
                self.warn(warning);
            }
            match admitted {
                Admitted::Send {
                    ready,
                    in_doubt,
                    tier,
                } => sends.push((ready, in_doubt, tier)),
                other => {
                    if let Err(error) = self.admitted(other) {
                        self.fail(error);
                    }
                }
            }
        }
        let rest: Vec<Identified<P>> = items.collect();
        let counted: Vec<(usize, u64, Arc<Account>)> = sends
            .iter()
            .enumerate()
            .filter_map(|(position, (ready, _, tier))| {
                let account = tier.as_ref()?;
                Some((position, ready.prepared.recipient(), Arc::clone(account)))
            })
            .collect();
        let refused = self.count_tiers(counted).await;
        for (position, (ready, in_doubt, _)) in sends.into_iter().enumerate() {
            if let Some(reason) = refused.get(&position) {
                let outcome = Outcome::failed(
                    ready.index,
                    ready.payload,
                    Error::validation("to", reason.clone()),
                );
                if let Err(error) = self.record(outcome, Journaling::Skip) {
                    self.fail(error);
                }
                continue;
            }
            self.claims.queue(ready, in_doubt);
        }
        self.not_identified(rest);
    }

    /// [`Engine::not_taken`] for items identified already.
    pub(super) fn not_identified(&mut self, items: Vec<Identified<P>>) {
        let note = self.not_sent_note();
        for item in items {
            let outcome = match item {
                Identified::Decided(outcome) => outcome,
                Identified::Message { index, payload, .. } => {
                    Outcome::skipped(index, payload, note.clone())
                }
            };
            self.buffer.push(outcome);
        }
    }

    /// Counts the recipients of the messages about to be queued against their accounts' tiers
    /// (`pace="auto"`), warns at 80 % and past a tier, and returns the positions (in `sends`)
    /// of the messages that must not go: new recipients past a tier, when the limits are
    /// shared and `enforce_tier` is on. A store that fails stops the campaign.
    pub(super) async fn count_tiers(
        &mut self,
        counted: Vec<(usize, u64, Arc<Account>)>,
    ) -> HashMap<usize, String> {
        let count = count_tiers(
            self.context.limits.as_ref(),
            self.admission.senders.as_mut(),
            counted,
            self.enforce_tier,
        )
        .await;
        for warning in count.warnings {
            self.warn(warning);
        }
        if let Some(error) = count.failure {
            self.fail_limits(error);
        }
        count.refused
    }

    /// Acts on what admission decided for one message.
    pub(super) fn admitted(&mut self, admitted: Admitted<P>) -> Result<()> {
        match admitted {
            Admitted::Send {
                ready, in_doubt, ..
            } => {
                self.claims.queue(ready, in_doubt);
                Ok(())
            }
            Admitted::Recorded(outcome) => {
                self.buffer.push(outcome);
                Ok(())
            }
            Admitted::Later(ready) => {
                self.waiting.settle(ready);
                Ok(())
            }
            Admitted::Held(ready) => {
                self.wait_for_holder(ready);
                Ok(())
            }
            Admitted::Decided {
                outcome,
                journaling,
            } => self.record(outcome, journaling),
        }
    }
}
