//! How both stores work: the run's connection is owned by one writer (a task for PostgreSQL, a
//! thread for SQLite) that batches what arrives into transactions, and the store the engine
//! holds only sends it [`Command`]s and waits for the answers. So the [`JournalStore`] calls
//! are written once, here, for any store that can send a command ([`CommandedStore`]); each
//! store keeps what differs: how it sends, and what a caller is told once its writer stopped.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::{Claim, ClaimFence, Claimed, Identity, JournalStore, Row};
use crate::campaign::message::FingerprintKind;
use crate::error::{Error, Result};

/// What the engine asks of a store's writer.
pub(super) enum Command {
    Lookup {
        identities: Vec<Identity>,
        reply: oneshot::Sender<Result<Vec<Row>>>,
    },
    Claim {
        claims: Vec<Claim>,
        reply: oneshot::Sender<Result<Vec<Claimed>>>,
    },
    /// A claimed message recorded `dispatched` before its request is written, if this run
    /// still holds its row `claimed`: answered once committed, `false` when it did not.
    Dispatch {
        identity: Identity,
        reply: oneshot::Sender<Result<bool>>,
    },
    Write {
        rows: Vec<Row>,
        /// Told once the rows are committed (a retry's new key waits for it); `None` for a
        /// write nobody waits for (its failure is told to the next one who waits).
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    /// The run ends (after what was queued before): told once its connection is closed.
    End { reply: oneshot::Sender<()> },
}

/// A store whose connection a writer owns.
pub(super) trait CommandedStore: Send + Sync {
    fn campaign_id(&self) -> &str;
    fn fence(&self) -> &Arc<ClaimFence>;
    fn fingerprints(&self) -> FingerprintKind;
    /// Queues `command` for the writer; fails once the writer has stopped.
    fn send(&self, command: Command) -> Result<()>;
    /// What a caller whose command the writer dropped unanswered is told (it stopped).
    fn stopped(&self) -> Error;
}

impl<S: CommandedStore> JournalStore for S {
    fn campaign_id(&self) -> &str {
        CommandedStore::campaign_id(self)
    }

    fn fingerprints(&self) -> FingerprintKind {
        CommandedStore::fingerprints(self)
    }

    fn fence(&self) -> &Arc<ClaimFence> {
        CommandedStore::fence(self)
    }

    fn lookup(&self, identities: Vec<Identity>) -> BoxFuture<'_, Result<Vec<Row>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Lookup { identities, reply })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn claim(&self, claims: Vec<Claim>) -> BoxFuture<'_, Result<Vec<Claimed>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Claim { claims, reply })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn dispatch(&self, identity: Identity) -> BoxFuture<'_, Result<bool>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Dispatch { identity, reply })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn write_durably(&self, rows: Vec<Row>) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Write {
                rows,
                reply: Some(reply),
            })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn write(&self, rows: Vec<Row>) -> Result<()> {
        self.send(Command::Write { rows, reply: None })
    }

    fn end(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            // A writer that has stopped already has closed its connection.
            if self.send(Command::End { reply }).is_ok() {
                let _ = answer.await;
            }
        })
    }
}
