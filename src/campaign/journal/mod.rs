//! The campaign journal: what a campaign did with each message (its idempotency key, its
//! state, the result when one came), so a campaign interrupted by a crash, Ctrl-C or SIGTERM
//! can be run again, by this process or another, and send only what was never sent.
//!
//! A message is known by what it is, not by where it stood in one run's input: its
//! [`Identity`] is its fingerprint (recipient, sender, template, parameters, language) and, when
//! `dedupe=False` lets one message repeat, its occurrence. So a campaign cut into shards one way
//! and re-run cut another way, or with its input reordered, resumes without re-sending, and its
//! idempotency keys (derived from the same identity) are the same in every process.
//!
//! Crash safety rests on one ordering: a message's request leaves only after its row is
//! durably `dispatched` by this run. A run first **claims** the messages it will send, a batch
//! ahead (their rows `claimed` by it, with their keys, committed): a `claimed` row says "held by
//! this run, its request not yet written". Just before a message's first request is written,
//! after its pacing wait, the run **dispatches** it: its row goes from `claimed` to `dispatched`
//! in a write committed with the others of the moment (group commit), made only if this run
//! still holds the row `claimed` (`JournalStore::dispatch`); the request waits for that commit,
//! and a message whose row was taken over meanwhile is not sent. So after a crash a message
//! without a record, or with a `claimed` one, certainly never left: the next run claims it as
//! new, with the key its record holds; a `dispatched` row without a result may have left (it is
//! in doubt, like an unknown outcome). What a killed run leaves in doubt is then the messages
//! whose requests were being written, not those claimed ahead or waiting for their pace.
//!
//! Two runs of one campaign at the same time (a job queue's redelivery while the first worker
//! is alive, a cron job overlapping a slow run) never both send a message: the first to claim
//! it sends it, the other is told who holds it. A claim belongs to a run whose liveness the
//! store can tell from something that dies with its process (a lock on a file, a database
//! session): the claims of a run that died are taken at once, not after a lease: its `claimed`
//! rows as never sent, its `dispatched` ones in doubt. A run taking a `claimed` row makes the
//! holder's later dispatch fail (the dispatch is conditional on the holder and the state, in
//! the statement that makes it); a dispatch committed first leaves the row `dispatched`, which
//! the taker finds in doubt (`fence.rs` has the cases).
//!
//! The engine talks to a [`JournalStore`]: `sqlite/` (a file per campaign, the embedded one)
//! or `postgres/` (any number of campaigns, shared by processes on many hosts), both held to
//! one contract (`contract.rs`, run against each). This file also maps outcomes to records and
//! back.

mod commands;
#[cfg(test)]
mod contract;
mod fence;
mod postgres;
mod run_lock;
mod sqlite;

use futures::future::BoxFuture;

/// For tests that make a fence of their own (`ClaimFence::new`).
#[cfg(test)]
pub(crate) use fence::stamp;
pub use fence::{ClaimFence, Unfenced, SESSION_GRACE, STALE};
pub use postgres::{is_postgres_url, PostgresJournal};
pub use sqlite::SqliteJournal;

use super::message::Fingerprint;
use super::outcome::{Outcome, Status};
use crate::error::Result;
use crate::wire::{RawJson, Scalar, SendResult};

/// Where a campaign's journal is.
#[derive(Clone, Debug, PartialEq)]
pub enum JournalTarget {
    /// An SQLite file (the embedded journal: one campaign, one host).
    File(std::path::PathBuf),
    /// A PostgreSQL database (`postgresql://...`): shared by every process of any number of
    /// campaigns.
    Postgres(String),
}

impl JournalTarget {
    /// `journal=` as given: a `postgres://` or `postgresql://` URL, else a file path. Another
    /// scheme is refused (a path never has one).
    pub fn parse(journal: &str) -> crate::Result<Self> {
        if is_postgres_url(journal) {
            return Ok(JournalTarget::Postgres(journal.trim().to_owned()));
        }
        if let Some((scheme, _)) = journal.split_once("://") {
            if !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            {
                return Err(crate::Error::validation(
                    "journal",
                    format!(
                        "{}: the scheme {scheme:?} is not a journal; use a file path or a \
                         postgresql:// URL",
                        crate::masking::redact_url(journal)
                    ),
                ));
            }
        }
        Ok(JournalTarget::File(journal.into()))
    }

    pub fn is_shared(&self) -> bool {
        matches!(self, JournalTarget::Postgres(_))
    }
}

/// A message as the journal knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub fingerprint: Fingerprint,
    /// 0 for the first (or only) copy of a message; the n-th repeat in one input is n, when
    /// `dedupe=False` sends repeats.
    pub occurrence: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Held by the run that claimed it, its request not yet written: never sent.
    Claimed,
    /// Its request may have been written (by the run recorded with it).
    Dispatched,
    Sent,
    Rejected,
    Unknown,
    Failed,
    Skipped,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Claimed => "claimed",
            State::Dispatched => "dispatched",
            State::Sent => "sent",
            State::Rejected => "rejected",
            State::Unknown => "unknown",
            State::Failed => "failed",
            State::Skipped => "skipped",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            State::Claimed,
            State::Dispatched,
            State::Sent,
            State::Rejected,
            State::Unknown,
            State::Failed,
            State::Skipped,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

/// What the journal holds of one message.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub identity: Identity,
    pub key: Option<String>,
    pub state: State,
    pub sms_id: Option<String>,
    pub code: Option<String>,
    pub msg: Option<String>,
    /// Written by this run: whether this write may turn a `dispatched` or `unknown` record
    /// into `failed` or `skipped` (never sent). Only the run that claimed the message, and
    /// knows it never left, may: a message in doubt since an earlier run stays in doubt
    /// whatever this run saw of it.
    pub clears_doubt: bool,
    /// Read back: the message is claimed by another run that is still alive (it is being sent
    /// now, by another process).
    pub held_elsewhere: bool,
    /// Read back, with `held_elsewhere`: that run's session is gone and it is alive only for
    /// the grace a run whose session ended unknown to it gets (`fence::SESSION_GRACE`): its
    /// claims are in doubt in moments.
    pub holder_settling: bool,
    /// Written by this run: it claimed the message and holds it as far as it knows, so a write
    /// that finds another run holding it means this run was taken over (an error it acts on,
    /// never silence). False for a message whose claim may never have been made (one skipped
    /// at a stop while its claim was under way). (Not the state `claimed`: a row held may be in
    /// any state this run wrote.)
    pub held: bool,
}

impl Row {
    /// A record of `identity` to write.
    pub fn new(identity: Identity, state: State, key: Option<String>) -> Self {
        Row {
            identity,
            key,
            state,
            sms_id: None,
            code: None,
            msg: None,
            clears_doubt: false,
            held_elsewhere: false,
            holder_settling: false,
            held: false,
        }
    }
}

/// A message this run wants to send: its identity and the key it will go out with.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub identity: Identity,
    pub key: String,
    /// Take it over from an earlier run that left it in doubt and is no longer alive
    /// (`resend_unknown=True`: it is re-sent with the same key).
    pub take_over: bool,
}

/// What became of one [`Claim`].
#[derive(Clone, Debug, PartialEq)]
pub enum Claimed {
    /// This run holds it: it may be sent, with `key`, the key its record holds (the claim's own
    /// for a new record; the recorded one for a message taken over in doubt, which may have
    /// gone out with it). Once a message has a record, its record is the one source of its key.
    /// `dispatch`: its row is `claimed` (never sent), and must be recorded `dispatched`
    /// (`JournalStore::dispatch`) before its first request is written; false for a message
    /// taken over in doubt, whose row stays `dispatched`.
    Won { key: String, dispatch: bool },
    /// Another run has it (holds it now, finished it, or left it in doubt): its record.
    Lost(Row),
}

impl Claimed {
    pub fn is_won(&self) -> bool {
        matches!(self, Claimed::Won { .. })
    }
}

/// Whether an outcome is written to the journal (with the message's identity).
pub(super) enum Journaling {
    /// Of a message this run claimed.
    Write(Identity),
    /// Of a message whose claim may not have been made: written only if this run holds it.
    WriteIfHeld(Identity),
    Skip,
}

/// Where a campaign's records are kept. Writes are batched by the store; a claim and
/// `write_durably` return once committed (with every write before them).
pub trait JournalStore: Send + Sync {
    /// The campaign the journal belongs to (given, or recorded by the run that made it).
    fn campaign_id(&self) -> &str;

    /// How the campaign's messages are known (`Fingerprint::of_kind`), as recorded when its
    /// journal was made.
    fn fingerprints(&self) -> crate::campaign::message::FingerprintKind {
        crate::campaign::message::FingerprintKind::Sha256
    }

    /// Whether this run still holds its claims, checked before each of its requests is written
    /// (`fence.rs`).
    fn fence(&self) -> &std::sync::Arc<ClaimFence>;

    /// The records of these messages (those that have one), with `held_elsewhere` set for the
    /// ones a live run of another process holds.
    fn lookup(&self, identities: Vec<Identity>) -> BoxFuture<'_, Result<Vec<Row>>>;

    /// Claims these messages for this run, durably, one answer per claim in order. A message
    /// is won when it has no record, or one that says it was never sent (`failed`, `skipped`,
    /// or `claimed` by a run that is gone), or (`take_over`) one in doubt from a run that is
    /// gone. What is won is recorded `claimed` (taken over in doubt: `dispatched`).
    fn claim(&self, claims: Vec<Claim>) -> BoxFuture<'_, Result<Vec<Claimed>>>;

    /// Records a message this run claimed `dispatched`, just before its first request is
    /// written, and returns once that is committed (with the other writes of the moment: the
    /// store's writer batches them). Made only if this run still holds the message's row
    /// `claimed`: `Ok(false)` when it does not (another run took it over, judging this one
    /// dead, or it has a result), and the message must not be sent.
    fn dispatch(&self, identity: Identity) -> BoxFuture<'_, Result<bool>>;

    /// Writes `rows` (of messages this run claimed) and waits until they are committed.
    fn write_durably(&self, rows: Vec<Row>) -> BoxFuture<'_, Result<()>>;

    /// Writes `rows` (of messages this run claimed) in a coming transaction (a failure
    /// surfaces at the next durable write).
    fn write(&self, rows: Vec<Row>) -> Result<()>;

    /// Commits everything written so far (and reports a write that failed earlier).
    fn flush(&self) -> BoxFuture<'_, Result<()>> {
        self.write_durably(Vec::new())
    }

    /// Ends this run after what was written before: records it ended, releases its lock and
    /// closes its connection, then returns. The campaign's caller hears it is done only after,
    /// so what it does next with the journal (read it, start another run) finds this run
    /// closed. Every command after fails.
    fn end(&self) -> BoxFuture<'_, ()>;
}

/// The journal record of a finished message.
pub(super) fn row_of<P>(
    outcome: &Outcome<P>,
    identity: Identity,
    clears_doubt: bool,
    held: bool,
) -> Row {
    let state = match outcome.status {
        Status::Sent => State::Sent,
        Status::Rejected => State::Rejected,
        Status::Unknown => State::Unknown,
        Status::Failed => State::Failed,
        Status::Skipped => State::Skipped,
    };
    let text = |value: &Option<Scalar>| value.as_ref().map(|value| value.text().to_owned());
    let result = outcome.result.as_ref();
    Row {
        identity,
        clears_doubt,
        held_elsewhere: false,
        holder_settling: false,
        held,
        key: outcome.idempotency_key.clone(),
        state,
        sms_id: result.and_then(|r| text(&r.sms_id)),
        code: result.and_then(|r| text(&r.code)),
        msg: result
            .and_then(|r| r.msg.clone())
            .or_else(|| outcome.error.as_ref().map(ToString::to_string))
            .or_else(|| outcome.reason.clone()),
    }
}

/// The send result an earlier run recorded (as text: the journal keeps `smsId`, `code` and
/// `msg`, not their JSON types).
pub(super) fn recorded_result(row: &Row) -> SendResult {
    let mut wire = serde_json::Map::new();
    let mut put = |name: &str, value: &Option<String>| {
        if let Some(value) = value {
            wire.insert(name.to_owned(), serde_json::Value::String(value.clone()));
        }
    };
    put("smsId", &row.sms_id);
    put("code", &row.code);
    put("msg", &row.msg);
    SendResult {
        sms_id: row.sms_id.clone().map(Scalar::Text),
        status: None,
        code: row.code.clone().map(Scalar::Text),
        msg: row.msg.clone(),
        ok: row.state == State::Sent,
        wire: RawJson(serde_json::to_vec(&wire).unwrap_or_default().into()),
    }
}
