//! The campaign journal: one record per message (fingerprint, idempotency key, state, and the
//! result when one came), so a campaign interrupted by a crash or Ctrl-C can be run again and
//! send only what was never sent.
//!
//! Crash safety rests on one ordering: a message's record is written as `dispatched`, and that
//! write is committed, before its request can leave. After a crash, a message without a record
//! certainly never left; a `dispatched` record without a final state may have (it is in doubt,
//! like an unknown outcome).
//!
//! The engine talks to a [`JournalStore`]; `sqlite.rs` is the embedded one (a file per
//! campaign). This file also maps outcomes to records and back.

mod sqlite;

use futures::future::BoxFuture;

pub use sqlite::SqliteJournal;

use super::message::Fingerprint;
use super::outcome::{Outcome, Status};
use crate::error::Result;
use crate::wire::{RawJson, Scalar, SendResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Dispatched,
    Sent,
    Rejected,
    Unknown,
    Failed,
    Skipped,
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            State::Dispatched => "dispatched",
            State::Sent => "sent",
            State::Rejected => "rejected",
            State::Unknown => "unknown",
            State::Failed => "failed",
            State::Skipped => "skipped",
        }
    }

    pub(super) fn parse(text: &str) -> Option<Self> {
        [
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

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub index: u64,
    pub fingerprint: Option<Fingerprint>,
    pub key: Option<String>,
    pub state: State,
    pub sms_id: Option<String>,
    pub code: Option<String>,
    pub msg: Option<String>,
    /// Whether this write may turn a `dispatched` or `unknown` row into `failed` or `skipped`
    /// (never sent). Only the run that marked the message, and knows it never left, may: a
    /// message in doubt since an earlier run stays in doubt whatever this run saw of it.
    pub clears_doubt: bool,
}

/// Whether an outcome is written to the journal (with the message's fingerprint when known).
pub(super) enum Journaling {
    Write(Option<Fingerprint>),
    Skip,
}

/// Where a campaign's records are kept. Writes are batched by the store; `write_durably` returns
/// once its rows (and every row written before them) are committed.
pub trait JournalStore: Send + Sync {
    /// The campaign the journal belongs to (given, or recorded by the run that made it).
    fn campaign_id(&self) -> &str;

    /// The records of messages `first..=last` written by earlier runs.
    fn lookup(&self, first: u64, last: u64) -> BoxFuture<'_, Result<Vec<Row>>>;

    /// Writes `rows` and waits until they are committed.
    fn write_durably(&self, rows: Vec<Row>) -> BoxFuture<'_, Result<()>>;

    /// Writes `rows` in a coming transaction (a failure surfaces at the next durable write).
    fn write(&self, rows: Vec<Row>) -> Result<()>;

    /// Commits everything written so far (and reports a write that failed earlier).
    fn flush(&self) -> BoxFuture<'_, Result<()>> {
        self.write_durably(Vec::new())
    }
}

/// The journal row of a finished message.
pub(super) fn row_of<P>(
    outcome: &Outcome<P>,
    fingerprint: Option<Fingerprint>,
    clears_doubt: bool,
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
        index: outcome.index,
        fingerprint,
        clears_doubt,
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
