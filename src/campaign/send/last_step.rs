//! A message's last step before its request, run as its pacing slot's
//! (`LimitsStore::admit_then`): a token provider asked, then the journal's dispatch write
//! (`dispatch.rs`). Both belong just before the slot's time: after it, they would write the
//! request late for the slot; before the wait, a token could expire, and a row be
//! `dispatched` long before its request.

use std::future::Future;

use futures::future::BoxFuture;

/// A slot's last step (`LimitsStore::admit_then`): `first`, when there is one, then `then`.
/// `first` answering false (a token provider that failed: the message cannot go) ends the step
/// there, and the slot is not released; otherwise `then` says whether it may be (without it,
/// it may).
pub(super) fn last_step<'a, F>(
    first: Option<F>,
    then: Option<BoxFuture<'a, bool>>,
) -> Option<BoxFuture<'a, bool>>
where
    F: Future<Output = bool> + Send + 'a,
{
    match (first, then) {
        (None, then) => then,
        (Some(first), then) => Some(Box::pin(async move {
            if !first.await {
                return false;
            }
            match then {
                Some(then) => then.await,
                None => true,
            }
        })),
    }
}
