//! The task that owns a run's connection (`Writer`): every command that arrives while it works
//! joins the next batch (run as transactions by `transactions.rs`); with nothing to write it
//! beats the run's heartbeat, which confirms its fence; its first failure, or a round trip that
//! never ends, fails the run; and it closes the session before the run's end is told.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_postgres::Client;
use uuid::Uuid;

use super::describe;
use super::session::pooled;
use super::statements::Statements;
use crate::campaign::journal::commands::Command;
use crate::campaign::journal::fence::{heartbeat_every, stamp, TAKE_OVER_AFTER};
use crate::campaign::journal::ClaimFence;
use crate::error::{Error, Result};

/// The task that owns the connection.
pub(super) struct Writer {
    pub(super) client: Client,
    pub(super) statements: Statements,
    pub(super) campaign: i64,
    pub(super) run: Uuid,
    /// The server process of this run's session (`pg_backend_pid()`): a run is one session.
    pub(super) session: i32,
    pub(super) name: Arc<str>,
    /// Confirmed by each round trip that finds this run still `running`, lost at its first
    /// failure.
    pub(super) fence: Arc<ClaimFence>,
    /// Set once this run was taken over: from then on it writes the results of the messages
    /// it still holds (they were sent: a taker must not send them again), and nothing else.
    pub(super) taken: Option<Error>,
    /// Drives the connection; ends once the session is closed.
    pub(super) session_task: tokio::task::JoinHandle<()>,
}

/// Tells a waiting caller how its command's transaction went.
pub(super) type Reply = Box<dyn FnOnce(Option<&Error>) + Send>;

impl Writer {
    pub(super) async fn serve(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        lease: Duration,
    ) {
        let mut beat = tokio::time::interval(heartbeat_every(lease));
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A round trip that never ends (a connection cut in the middle, where neither TCP nor
        // its keepalives notice) fails the run once others would take it over anyway.
        let patience = lease.mul_f64(TAKE_OVER_AFTER).max(MIN_PATIENCE);
        // The first failure ends the run: every later command gets it.
        let mut failure: Option<Error> = None;
        let mut ending = None;
        loop {
            let first = tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => command,
                    None => break,
                },
                _ = beat.tick() => {
                    if failure.is_none() && self.taken.is_none() {
                        let beat = tokio::time::timeout(patience, self.heartbeat()).await;
                        match beat.unwrap_or_else(|_| Err(self.no_answer(patience))) {
                            Ok(true) => {}
                            Ok(false) => self.taken_over(),
                            Err(error) => {
                                self.fence.lose(error.to_string());
                                failure = Some(error);
                            }
                        }
                    }
                    continue;
                }
            };
            let mut batch = vec![first];
            while let Ok(more) = commands.try_recv() {
                batch.push(more);
            }
            ending = take_end(&mut batch);
            if batch.is_empty() {
                break;
            }
            let mut replies: Vec<Reply> = Vec::new();
            if failure.is_none() {
                let ran = tokio::time::timeout(patience, self.run_batch(batch, &mut replies)).await;
                if let Err(error) = ran.unwrap_or_else(|_| Err(self.no_answer(patience))) {
                    log::error!(target: "bizmsg", "campaign journal {}: {error}", self.name);
                    // No journal transaction of this run may fail and its sends go on: what it
                    // holds is unknown now.
                    self.fence.lose(error.to_string());
                    failure = Some(error);
                }
            } else {
                for command in batch {
                    replies.push(answer_only(command));
                }
            }
            for reply in replies {
                reply(failure.as_ref());
            }
            if ending.is_some() {
                break;
            }
        }
        if failure.is_none() && self.taken.is_none() {
            // The run ends; closing the connection (below) releases its lock.
            let _ = tokio::time::timeout(
                patience,
                self.client.execute(
                    "UPDATE bizmsg.runs SET state = 'ended', ended_at = now() WHERE id = $1",
                    &[&self.run],
                ),
            )
            .await;
        }
        // The session closed before the caller hears the run ended: a run it starts next
        // finds this one's lock released.
        let Writer {
            client,
            statements,
            session_task,
            ..
        } = self;
        drop(statements);
        drop(client);
        let _ = tokio::time::timeout(MIN_PATIENCE, session_task).await;
        if let Some(reply) = ending {
            let _ = reply.send(());
        }
    }

    fn no_answer(&self, patience: Duration) -> Error {
        Error::SharedState(format!(
            "journal {}: no answer within {:.0}s: its connection is taken for lost",
            self.name,
            patience.as_secs_f64()
        ))
    }

    /// This run was found taken over: it sends nothing more, and writes only what it holds.
    pub(super) fn taken_over(&mut self) {
        let error = taken_over(&self.name);
        self.fence.lose(error.to_string());
        log::error!(target: "bizmsg", "campaign journal {}: {error}", self.name);
        self.taken.get_or_insert(error);
    }

    /// A sign of life when there is nothing to write, which confirms the fence too: the same
    /// statement every transaction starts with. `Ok(false)`: this run was taken over.
    async fn heartbeat(&self) -> Result<bool> {
        let started = stamp();
        let found = self
            .client
            .query_one(&self.statements.alive, &[&self.run])
            .await
            .map_err(|e| self.failed(&e))?;
        if found.get::<_, i32>(1) != self.session {
            return Err(pooled(&self.name, self.session, found.get(1)));
        }
        if !found.get::<_, bool>(0) {
            return Ok(false);
        }
        self.fence.confirm(started);
        Ok(true)
    }

    pub(super) fn failed(&self, error: &tokio_postgres::Error) -> Error {
        Error::SharedState(format!("journal {}: {}", self.name, describe(error)))
    }
}

/// What a run recorded `lost` by another is told.
pub(super) fn taken_over(name: &str) -> Error {
    Error::SharedState(format!(
        "journal {name}: this run was taken for a dead one (its lease passed, or its session \
         ended) and its claims taken over: it stops"
    ))
}

/// The least a journal round trip is waited for before the connection is taken for lost.
const MIN_PATIENCE: Duration = Duration::from_secs(10);

/// The reply of a command that was not run (the journal failed earlier).
pub(super) fn answer_only(command: Command) -> Reply {
    match command {
        Command::Lookup { reply, .. } => Box::new(move |failure| {
            let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
        }),
        Command::Claim { reply, .. } => Box::new(move |failure| {
            let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
        }),
        Command::Dispatch { reply, .. } => Box::new(move |failure| {
            let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
        }),
        Command::Write { reply, .. } => Box::new(move |failure| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
            }
        }),
        Command::End { reply } => Box::new(move |_| {
            let _ = reply.send(());
        }),
    }
}

/// Takes the run's end out of a batch; a command queued after it (none is, once the engine
/// ends its run) is answered as one the ended run cannot make.
fn take_end(batch: &mut Vec<Command>) -> Option<oneshot::Sender<()>> {
    let at = batch
        .iter()
        .position(|command| matches!(command, Command::End { .. }))?;
    let after: Vec<Command> = batch.drain(at + 1..).collect();
    for command in after {
        answer_only(command)(None);
    }
    match batch.pop() {
        Some(Command::End { reply }) => Some(reply),
        _ => None,
    }
}

fn ended() -> Error {
    Error::SharedState("journal: its connection has ended".to_owned())
}
