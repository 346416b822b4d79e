//! The thread that owns a run's connection (`serve`): every command that arrives while it works
//! joins the next transaction (`run_batch`, which takes SQLite's write lock first); with nothing
//! to write it beats the run's heartbeat, which confirms its fence; a run found taken over writes
//! only the results of what it still holds; and the run is recorded ended, its lock released and
//! its connection closed before its end is told.

use std::path::Path;
use std::sync::mpsc;

use rusqlite::{params, Connection, TransactionBehavior};
use tokio::sync::oneshot;

use super::checkpointer::Checkpointer;
use super::liveness::Liveness;
use super::records::{claim, dispatch, lookup, write};
use super::{now, Run};
use crate::campaign::journal::commands::Command;
use crate::campaign::journal::fence::{heartbeat_every, stamp};
use crate::error::Error;

/// Tells a waiting caller how its command's transaction went (`Some(failure)` if it failed).
type Reply = Box<dyn FnOnce(Option<&str>)>;

pub(super) fn serve(
    mut connection: Connection,
    path: &Path,
    mut run: Run,
    commands: mpsc::Receiver<Command>,
) {
    // A write that failed with nobody waiting is reported to the next one who waits.
    let mut earlier_failure: Option<String> = None;
    // A sign of life a few times per lease, for processes that cannot see the lock (a frozen
    // one keeps it), which confirms this run's fence too.
    let beat = heartbeat_every(run.lease);
    let checkpointer = checkpointer_of(path);
    let mut ending = None;
    loop {
        let first = match commands.recv_timeout(beat) {
            Ok(command) => command,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !run.fence.is_lost() {
                    let started = stamp();
                    match heartbeat(&connection, &run.id) {
                        Ok(true) => run.fence.confirm(started),
                        Ok(false) => run.fence.lose(TAKEN_OVER),
                        // Busy: another process's transaction; the fence goes stale meanwhile.
                        Err(_) => {}
                    }
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
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
        let started = stamp();
        let mut pending = batch.into_iter();
        let outcome = run_batch(&mut connection, &run, &mut pending, &mut replies);
        if let Some(checkpointer) = &checkpointer {
            checkpointer.nudge();
        }
        match &outcome {
            Ok(Held::Yes) => run.fence.confirm(started),
            // Taken over: it sends nothing more, and only writes the results of what it holds.
            Ok(Held::TakenOver) => run.fence.lose(TAKEN_OVER),
            // No journal transaction of this run may fail and its sends go on. (Lost before
            // anyone waiting is answered: whoever learns of the failure finds the fence down.)
            Err(error) => run.fence.lose(error.to_string()),
        }
        // The commands a failure cut short are answered with it too.
        replies.extend(pending.map(answer_only));
        let failure = outcome
            .err()
            .map(|e| e.to_string())
            .or(earlier_failure.take());
        for reply in replies {
            reply(failure.as_deref());
        }
        if let Some(failure) = failure {
            log::error!(target: "bizmsg", "campaign journal {}: {failure}", path.display());
            earlier_failure = Some(failure);
        }
        if ending.is_some() {
            break;
        }
    }
    // The run ends: recorded, then its lock released (a reader never sees a running run
    // without its lock).
    let _ = connection.execute(
        "UPDATE bizmsg_runs SET state = 'ended', ended_at = ?2 WHERE id = ?1 AND state = 'running'",
        params![run.id, now()],
    );
    drop(run.lock.take());
    drop(checkpointer);
    // Closed before the caller hears the run ended. A caller that reads the file next with
    // another copy of SQLite in this process (Python's sqlite3) does not see our connection
    // (POSIX locks are per process), so closing theirs would checkpoint and delete the WAL
    // ours still had open: the file is then malformed (sqlite.org/howtocorrupt.html, 2.2.1).
    drop(connection);
    if let Some(reply) = ending {
        let _ = reply.send(());
    }
}

/// The run's checkpointer; `None` if it cannot start (the writer then checkpoints alone, as
/// SQLite does by default).
fn checkpointer_of(path: &Path) -> Option<Checkpointer> {
    match Checkpointer::start(path) {
        Ok(checkpointer) => Some(checkpointer),
        Err(error) => {
            log::debug!(
                target: "bizmsg",
                "campaign journal {}: no checkpointing thread ({error}); the writer checkpoints",
                path.display()
            );
            None
        }
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
        answer_only(command)(Some("the run has ended"));
    }
    match batch.pop() {
        Some(Command::End { reply }) => Some(reply),
        _ => None,
    }
}

/// What this run is told when it was taken for a dead one.
const TAKEN_OVER: &str = "this run was taken for a dead one (its lease passed) and its claims \
                          taken over: it stops";

/// Whether this run still holds its claims after a batch.
enum Held {
    Yes,
    /// Taken over (recorded gone by another run, or a message it claimed is another's): it
    /// sends nothing more, and from then on only writes the results of what it still holds.
    TakenOver,
}

/// A sign of life: whether the run is still recorded running (not taken over).
fn heartbeat(connection: &Connection, run: &str) -> rusqlite::Result<bool> {
    let changed = connection.execute(
        "UPDATE bizmsg_runs SET heartbeat_at = ?2 WHERE id = ?1 AND state = 'running'",
        params![run, now()],
    )?;
    Ok(changed > 0)
}

/// The reply of a command a failure cut short.
fn answer_only(command: Command) -> Reply {
    let failed = |failure: Option<&str>| {
        Error::Campaign(format!(
            "journal: {}",
            failure.unwrap_or("its transaction failed")
        ))
    };
    match command {
        Command::Lookup { reply, .. } => Box::new(move |failure: Option<&str>| {
            let _ = reply.send(Err(failed(failure)));
        }),
        Command::Claim { reply, .. } => Box::new(move |failure: Option<&str>| {
            let _ = reply.send(Err(failed(failure)));
        }),
        Command::Dispatch { reply, .. } => Box::new(move |failure: Option<&str>| {
            let _ = reply.send(Err(failed(failure)));
        }),
        Command::Write { reply, .. } => Box::new(move |failure: Option<&str>| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(failed(failure)));
            }
        }),
        Command::End { reply } => Box::new(move |_: Option<&str>| {
            let _ = reply.send(());
        }),
    }
}

/// One transaction for the commands of `batch`; those a failure cuts short are left in it.
/// A run taken over writes the results of what it holds, and refuses everything else.
fn run_batch(
    connection: &mut Connection,
    run: &Run,
    batch: &mut std::vec::IntoIter<Command>,
    replies: &mut Vec<Reply>,
) -> rusqlite::Result<Held> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now();
    let taken = run.fence.is_lost()
        || transaction.execute(
            "UPDATE bizmsg_runs SET heartbeat_at = ?2 WHERE id = ?1 AND state = 'running'",
            params![run.id, now],
        )? == 0;
    // What a refused command is told: why the run lost its claims (a write that failed: the
    // disk full, the file gone), else that it was taken over. Before, a full disk was told as
    // a takeover.
    let refusal: Option<std::sync::Arc<str>> =
        taken.then(|| run.fence.lost_reason().unwrap_or(TAKEN_OVER).into());
    // Rows this run claimed that a write found held by another run.
    let mut lost = 0;
    let mut liveness = Liveness::new(run);
    for command in batch.by_ref() {
        // A durable write is a key recorded before a send, or the run's last flush: neither
        // is this run's to make any more.
        let refused = match &command {
            Command::Write { reply, .. } => reply.is_some(),
            Command::Lookup { .. } | Command::Claim { .. } | Command::Dispatch { .. } => true,
            // Never in a batch (`take_end`).
            Command::End { .. } => false,
        };
        if let Some(refusal) = refusal.as_ref().filter(|_| refused) {
            let reply = answer_only(command);
            let refusal = std::sync::Arc::clone(refusal);
            replies.push(Box::new(move |_| reply(Some(&refusal))));
            continue;
        }
        match command {
            Command::Lookup { identities, reply } => {
                let rows = lookup(&transaction, &identities, &mut liveness);
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match (rows, failure) {
                        (Ok(rows), None) => Ok(rows),
                        (Err(e), _) => Err(Error::Campaign(format!("journal: {e}"))),
                        (_, Some(failure)) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Claim { claims, reply } => {
                let claimed = claim(&transaction, &claims, &mut liveness, now)?;
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match failure {
                        None => Ok(claimed),
                        Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Dispatch { identity, reply } => {
                let (made, taken) = dispatch(&transaction, &run.id, identity, now)?;
                if taken {
                    lost += 1;
                }
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match failure {
                        None => Ok(made),
                        Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Write { rows, reply } => {
                lost += write(&transaction, &run.id, &rows, now)?;
                if let Some(reply) = reply {
                    replies.push(Box::new(move |failure: Option<&str>| {
                        let _ = reply.send(match failure {
                            None => Ok(()),
                            Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                        });
                    }));
                }
            }
            Command::End { reply } => replies.push(answer_only(Command::End { reply })),
        }
    }
    transaction.commit()?;
    if lost > 0 {
        log::error!(
            target: "bizmsg",
            "campaign journal: {lost} message(s) this run claimed are held by another run"
        );
    }
    // What it still held is committed; it sends nothing more.
    Ok(if taken || lost > 0 {
        Held::TakenOver
    } else {
        Held::Yes
    })
}
