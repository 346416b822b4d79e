//! A message's row going from `claimed` to `dispatched` before its first request may leave.
//!
//! The write is committed after the message's pacing wait and before its request is written,
//! so that after a crash a `claimed` row was certainly never written. It runs as the last step
//! of the pacing slot (`LimitsStore::admit_then`), so that its delay counts in the pace, and
//! it is made only while this run still holds the row `claimed` (`JournalStore::dispatch`):
//! a row another run took over is not flipped, and the message does not go.

use std::sync::Mutex;

use futures::future::BoxFuture;

use crate::campaign::journal::{Identity, JournalStore, Unfenced};
use crate::error::Result;

/// The dispatch write of one attempt: asked for (`before_release`), then read once the slot
/// was given (`settled`).
pub(super) struct Dispatch<'a> {
    /// The journal to write it in, when one is kept and the row is still `claimed`.
    journal: Option<&'a dyn JournalStore>,
    identity: Identity,
    /// What the write answered: `Ok(true)` made, `Ok(false)` the row is no longer this run's;
    /// `None` not run (no journal, or the slot was never given).
    made: Mutex<Option<Result<bool>>>,
}

/// What became of the dispatch write.
pub(super) enum Settled {
    /// Recorded `dispatched` (or nothing to record: no journal, or done on an earlier attempt):
    /// the request may go.
    Go,
    /// Not recorded: this run no longer holds the message, which must not go.
    Lost(Unfenced),
}

impl<'a> Dispatch<'a> {
    /// The write for a message whose row is still `claimed` (`pending`) in `journal`.
    pub(super) fn new(
        journal: Option<&'a dyn JournalStore>,
        identity: Identity,
        pending: bool,
    ) -> Self {
        Dispatch {
            journal: journal.filter(|_| pending),
            identity,
            made: Mutex::new(None),
        }
    }

    /// The slot's last step, when there is a write to make: it makes it, and lets the slot be
    /// released only when it was made.
    pub(super) fn before_release(&self) -> Option<BoxFuture<'_, bool>> {
        let journal = self.journal?;
        Some(Box::pin(async move {
            let made = journal.dispatch(self.identity).await;
            let go = matches!(made, Ok(true));
            *crate::sync::lock(&self.made) = Some(made);
            go
        }))
    }

    /// Whether the request may go, once the slot was given.
    pub(super) fn settled(self) -> Settled {
        let made = self
            .made
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match (self.journal, made) {
            (None, _) | (Some(_), Some(Ok(true))) => Settled::Go,
            (Some(_), Some(Ok(false))) => Settled::Lost(Unfenced::Lost(
                "another run took its claim on this message over".to_owned(),
            )),
            (Some(_), Some(Err(error))) => Settled::Lost(Unfenced::Lost(format!(
                "its journal could not record it dispatched: {error}"
            ))),
            // Given a slot without its last step having run: not recorded, so not sent.
            (Some(_), None) => Settled::Lost(Unfenced::Lost(
                "its journal was not asked to record it dispatched".to_owned(),
            )),
        }
    }
}
