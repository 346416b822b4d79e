//! How the writer runs a batch (`Writer::run_batch`): as transactions in the engine's order, each
//! claim alone and the commands between claims together; a transaction the server rolled back
//! for a conflict with another run's is run again; a claim that meets a message another
//! transaction holds split around it; and each command told its answer.

use std::time::Duration;

use tokio::sync::oneshot;

use super::describe;
use super::records::{claim, claim_locked, lock_claimable, lookup, write};
use super::session::pooled;
use super::writer::{answer_only, taken_over, Reply, Writer};
use crate::campaign::journal::commands::Command;
use crate::campaign::journal::fence::stamp;
use crate::campaign::journal::{Claim, Claimed, Identity, Row, State};
use crate::error::{Error, Result};

impl Writer {
    pub(super) async fn run_batch(
        &mut self,
        batch: Vec<Command>,
        replies: &mut Vec<Reply>,
    ) -> Result<()> {
        let answers = match self.run_segments(&batch).await {
            Ok(answers) => answers,
            Err(error) => {
                // Every command is answered with the failure (the writer loop does it).
                replies.extend(batch.into_iter().map(answer_only));
                return Err(error);
            }
        };
        for (command, answer) in batch.into_iter().zip(answers) {
            replies.push(match (command, answer) {
                (Command::Lookup { reply, .. }, Answer::Rows(rows)) => Box::new(move |failure| {
                    let _ = reply.send(match failure {
                        None => Ok(rows),
                        Some(failure) => Err(failure.clone()),
                    });
                }),
                (Command::Claim { reply, .. }, Answer::Claimed(claimed)) => {
                    Box::new(move |failure| {
                        let _ = reply.send(match failure {
                            None => Ok(claimed),
                            Some(failure) => Err(failure.clone()),
                        });
                    })
                }
                (Command::Dispatch { reply, .. }, Answer::Dispatched(made)) => {
                    Box::new(move |failure| {
                        let _ = reply.send(match failure {
                            None => Ok(made),
                            Some(failure) => Err(failure.clone()),
                        });
                    })
                }
                (command, Answer::Refused) => {
                    let refused = self.taken.clone().unwrap_or_else(|| taken_over(&self.name));
                    Box::new(move |_| answer_only(command)(Some(&refused)))
                }
                (
                    Command::Write {
                        reply: Some(reply), ..
                    },
                    _,
                ) => Box::new(move |failure| {
                    let _ = reply.send(match failure {
                        None => Ok(()),
                        Some(failure) => Err(failure.clone()),
                    });
                }),
                (other, _) => answer_only(other),
            });
        }
        Ok(())
    }

    /// Runs a batch as transactions in the engine's order: each claim alone, and the commands
    /// between claims together. A transaction that wrote this run's messages and then claimed
    /// another run's would hold the first while waiting for the second; the other run, doing
    /// the same the other way round, would deadlock with it (the server detects it only after
    /// `deadlock_timeout`, a second by default). Claims alone lock in one order (sorted) and
    /// wait for nothing they hold.
    async fn run_segments(&mut self, batch: &[Command]) -> Result<Vec<Answer>> {
        let is_claim = |command: &Command| matches!(command, Command::Claim { .. });
        let mut answers = Vec::with_capacity(batch.len());
        for segment in batch.chunk_by(|a, b| !is_claim(a) && !is_claim(b)) {
            answers.extend(self.run_segment(segment).await?);
        }
        Ok(answers)
    }

    /// One transaction, run again when the server rolled it back for a conflict with another
    /// run's (a deadlock or a serialization failure: nothing of it was committed). A claim
    /// that meets a message another transaction holds is split until that message is found.
    async fn run_segment(&mut self, segment: &[Command]) -> Result<Vec<Answer>> {
        if let [Command::Claim { claims, .. }] = segment {
            return Ok(vec![self.claim_around_busy_rows(claims).await?]);
        }
        self.attempt_segment(segment, CLAIM_LOCK_WAIT)
            .await
            .map_err(|attempt| self.attempt_failed(attempt))
    }

    /// A claim run as one transaction; when it meets a message another transaction is
    /// inserting now (a run frozen inside its claim, a commit stuck on a standby), run again in
    /// halves, each waiting less, until only that message is left: it alone is answered held by
    /// another run, the others are claimed (within `SPLIT_BUDGET`: the parts not tried by then
    /// are answered held by another run too).
    async fn claim_around_busy_rows(&mut self, claims: &[Claim]) -> Result<Answer> {
        let mut answers: Vec<Option<Claimed>> = vec![None; claims.len()];
        let mut parts = vec![(0, claims.len(), CLAIM_LOCK_WAIT)];
        let began = std::time::Instant::now();
        while let Some((start, end, wait)) = parts.pop() {
            if wait == BUSY_LOCK_WAIT && began.elapsed() >= SPLIT_BUDGET {
                // Left unanswered: held by another run (below), claimed again in a moment.
                continue;
            }
            let Some(part) = claims.get(start..end) else {
                continue;
            };
            // Answered by the engine through the batch's own command, not this one.
            let (reply, _) = oneshot::channel();
            let command = [Command::Claim {
                claims: part.to_vec(),
                reply,
            }];
            match self.attempt_segment(&command, wait).await {
                Ok(mut answer) => match answer.pop() {
                    Some(Answer::Claimed(claimed)) => {
                        for (slot, claimed) in answers.iter_mut().skip(start).zip(claimed) {
                            *slot = Some(claimed);
                        }
                    }
                    // Taken over meanwhile: the whole claim is refused.
                    _ => return Ok(Answer::Refused),
                },
                Err(Attempt::Busy(error)) if end - start > 1 => {
                    log::debug!(
                        target: "bizmsg",
                        "campaign journal {}: a claim of {} messages met one another transaction \
                         holds ({}): claimed in halves",
                        self.name,
                        end - start,
                        describe(&error)
                    );
                    let middle = start + (end - start) / 2;
                    parts.push((middle, end, BUSY_LOCK_WAIT));
                    parts.push((start, middle, BUSY_LOCK_WAIT));
                }
                Err(Attempt::Busy(_)) => {
                    if let (Some(slot), Some(claim)) = (answers.get_mut(start), part.first()) {
                        *slot = Some(held_by_another(claim));
                    }
                }
                Err(attempt) => return Err(self.attempt_failed(attempt)),
            }
        }
        Ok(Answer::Claimed(
            answers
                .into_iter()
                .zip(claims)
                .map(|(answer, claim)| answer.unwrap_or_else(|| held_by_another(claim)))
                .collect(),
        ))
    }

    /// `try_segment`, run again after a conflict the server rolled back.
    async fn attempt_segment(
        &mut self,
        segment: &[Command],
        lock_wait: Duration,
    ) -> std::result::Result<Vec<Answer>, Attempt> {
        let mut attempt = 0;
        loop {
            match self.try_segment(segment, lock_wait).await {
                Err(Attempt::Again(error)) if attempt < MAX_TRANSACTION_RETRIES => {
                    attempt += 1;
                    log::debug!(
                        target: "bizmsg",
                        "campaign journal {}: transaction rolled back ({}), running it again",
                        self.name,
                        describe(&error)
                    );
                    let pause = 5 + fastrand::u64(..20) * u64::from(attempt);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                done => return done,
            }
        }
    }

    fn attempt_failed(&self, attempt: Attempt) -> Error {
        match attempt {
            Attempt::Again(error) | Attempt::Failed(error) | Attempt::Busy(error) => {
                self.failed(&error)
            }
            Attempt::Stop(error) => error,
        }
    }

    /// One transaction for a segment of a batch: the answer of each command, in order.
    async fn try_segment(
        &mut self,
        batch: &[Command],
        lock_wait: Duration,
    ) -> std::result::Result<Vec<Answer>, Attempt> {
        // A claim or a durable write waits for the commit to be on disk; results alone may be
        // committed asynchronously.
        let durable = batch.iter().any(|command| {
            matches!(
                command,
                Command::Claim { .. }
                    | Command::Dispatch { .. }
                    | Command::Write { reply: Some(_), .. }
            )
        });
        let (campaign, run) = (self.campaign, self.run);
        let statements = &self.statements;
        let started = stamp();
        let transaction = self.client.transaction().await.map_err(Attempt::of)?;
        // The session commits durably (set at open); results alone may go asynchronously.
        // Sent in one go with the liveness check (tokio-postgres pipelines statements polled
        // together): no round trip of its own.
        let asynchronous = async {
            if durable {
                Ok(())
            } else {
                transaction
                    .batch_execute("SET LOCAL synchronous_commit = off")
                    .await
            }
        };
        // A run taken for dead (its lock found gone, its lease past) sends nothing more: its
        // claims may be another run's by now. It still writes the results of the messages it
        // holds (they went out), and nothing else.
        let mut taken = self.taken.is_some();
        let alive = async {
            if taken {
                Ok(None)
            } else {
                transaction
                    .query_one(&statements.alive, &[&run])
                    .await
                    .map(Some)
            }
        };
        // A claim alone (every claim is: `run_segments`) sends its first step, which changes
        // no message, with the liveness check: the fence costs the claim no round trip. It
        // claims (`claim_locked`) only once the check found the run alive. Not a take-over,
        // whose first step judges other runs and records the dead ones lost: that waits for
        // the check, as before.
        let lone_claim = match batch {
            [Command::Claim { claims, .. }]
                if !taken && !claims.iter().any(|claim| claim.take_over) =>
            {
                Some(claims)
            }
            _ => None,
        };
        let early = async {
            match lone_claim {
                Some(claims) => {
                    lock_claimable(&transaction, statements, campaign, run, claims, lock_wait)
                        .await
                        .map(Some)
                }
                None => Ok(None),
            }
        };
        let ((), found, mut locked) = futures::future::try_join3(asynchronous, alive, early)
            .await
            .map_err(Attempt::of)?;
        if let Some(found) = found {
            if found.get::<_, i32>(1) != self.session {
                return Err(Attempt::Stop(pooled(
                    &self.name,
                    self.session,
                    found.get(1),
                )));
            }
            taken = !found.get::<_, bool>(0);
        }
        let mut answers = Vec::with_capacity(batch.len());
        let mut writes: Vec<Row> = Vec::new();
        let mut dispatches: Vec<Identity> = Vec::new();
        // Rows this run claimed that a write found held by another run.
        let mut lost = 0;
        for command in batch {
            // A durable write is a key recorded before a send, or the run's last flush:
            // neither is this run's to make any more.
            let refused = match command {
                Command::Write { reply, .. } => reply.is_some(),
                Command::Lookup { .. } | Command::Claim { .. } | Command::Dispatch { .. } => true,
                // Never in a batch (`take_end`).
                Command::End { .. } => false,
            };
            if taken && refused {
                answers.push(Answer::Refused);
                continue;
            }
            match command {
                Command::Lookup { identities, .. } => {
                    let rows = lookup(&transaction, statements, campaign, run, identities)
                        .await
                        .map_err(Attempt::of)?;
                    answers.push(Answer::Rows(rows));
                }
                Command::Claim { claims, .. } => {
                    // Earlier writes of the batch first: the order the engine gave. (A claim
                    // is alone in its transaction, `run_segments`: there are none.)
                    let written = write(
                        &transaction,
                        statements,
                        campaign,
                        run,
                        std::mem::take(&mut writes),
                        std::mem::take(&mut dispatches),
                    )
                    .await
                    .map_err(Attempt::of)?;
                    lost += written.lost;
                    let claimed = match locked.take() {
                        Some(locked) => {
                            claim_locked(&transaction, statements, campaign, run, claims, locked)
                                .await
                        }
                        None => {
                            claim(&transaction, statements, campaign, run, claims, lock_wait).await
                        }
                    }
                    .map_err(Attempt::of)?;
                    answers.push(Answer::Claimed(claimed));
                }
                Command::Dispatch { identity, .. } => {
                    dispatches.push(*identity);
                    // Answered below, once the batch's dispatches are made.
                    answers.push(Answer::Dispatched(false));
                }
                Command::Write { rows, .. } => {
                    writes.extend(rows.iter().cloned());
                    answers.push(Answer::Written);
                }
                Command::End { .. } => answers.push(Answer::Written),
            }
        }
        let written = write(&transaction, statements, campaign, run, writes, dispatches)
            .await
            .map_err(Attempt::of)?;
        lost += written.lost;
        for (command, answer) in batch.iter().zip(answers.iter_mut()) {
            if let (Command::Dispatch { identity, .. }, Answer::Dispatched(made)) =
                (command, answer)
            {
                *made = written.dispatched.contains(identity);
            }
        }
        transaction.commit().await.map_err(Attempt::of)?;
        if taken || lost > 0 {
            // What it still held is committed; it sends nothing more.
            if lost > 0 {
                log::error!(
                    target: "bizmsg",
                    "campaign journal {}: {lost} message(s) this run claimed are held by another \
                     run",
                    self.name
                );
            }
            self.taken_over();
        } else {
            self.fence.confirm(started);
        }
        Ok(answers)
    }
}

/// The answer to a claim of a message another run holds, or is claiming now.
fn held_by_another(claim: &Claim) -> Claimed {
    let mut row = Row::new(claim.identity, State::Dispatched, None);
    row.held_elsewhere = true;
    Claimed::Lost(row)
}

/// How long a claim waits for a row another transaction holds before it is split around it;
/// its halves wait less.
const CLAIM_LOCK_WAIT: Duration = Duration::from_secs(2);
const BUSY_LOCK_WAIT: Duration = Duration::from_millis(200);
/// How long a claim goes on splitting around busy rows: the parts not tried by then are
/// answered held by another run (the engine waits for them, and claims them again in a
/// moment). A run frozen inside a claim of many rows another run also claims would otherwise
/// cost that run a wait per busy row, and its journal would be taken for hung (`MIN_PATIENCE`).
const SPLIT_BUDGET: Duration = Duration::from_secs(3);

/// Transactions rolled back by the server for a conflict, run again within one batch.
const MAX_TRANSACTION_RETRIES: u32 = 8;

/// What a command of a batch was answered.
enum Answer {
    Rows(Vec<Row>),
    Claimed(Vec<Claimed>),
    /// Whether the message was recorded `dispatched` (this run held it `claimed`).
    Dispatched(bool),
    Written,
    /// Not done: this run was taken over.
    Refused,
}

/// How a batch's transaction failed.
enum Attempt {
    /// Rolled back for a conflict with another run's: run again.
    Again(tokio_postgres::Error),
    /// A row lock not granted within the statement's `lock_timeout` (a claim's).
    Busy(tokio_postgres::Error),
    Failed(tokio_postgres::Error),
    /// The run must stop (taken for dead).
    Stop(Error),
}

impl Attempt {
    fn of(error: tokio_postgres::Error) -> Attempt {
        use tokio_postgres::error::SqlState;
        match error.code() {
            Some(code)
                if *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE =>
            {
                Attempt::Again(error)
            }
            Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => Attempt::Busy(error),
            _ => Attempt::Failed(error),
        }
    }
}
