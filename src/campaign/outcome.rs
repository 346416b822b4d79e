//! What became of each message.

use std::time::SystemTime;

use crate::client::{AttemptRecord, Meta};
use crate::error::Error;
use crate::wire::SendResult;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    /// Committed by the service.
    Sent,
    /// The service answered with a failed commit.
    Rejected,
    /// It may or may not have been sent (never retried blindly).
    Unknown,
    /// Never sent: invalid, refused before sending, or it could not reach the service.
    Failed,
    /// Not sent by this run: a duplicate of an earlier message, already done in an earlier run
    /// (journal), or left when the campaign stopped.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Sent => "sent",
            Status::Rejected => "rejected",
            Status::Unknown => "unknown",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }

    /// Whether `stop_on_error` stops at this outcome.
    pub fn is_error(self) -> bool {
        matches!(self, Status::Rejected | Status::Unknown | Status::Failed)
    }
}

pub struct Outcome<P> {
    pub index: u64,
    pub payload: P,
    pub status: Status,
    /// The key the message went out with (for an unknown outcome: the key to reconcile with).
    pub idempotency_key: Option<String>,
    /// The send result (sent, rejected, or recorded by an earlier run).
    pub result: Option<SendResult>,
    pub meta: Option<Meta>,
    /// What went wrong: the same error a single send would have raised.
    pub error: Option<Error>,
    /// A duplicate's original message.
    pub duplicate_of: Option<u64>,
    /// Why it was skipped, or other context, in a few words.
    pub reason: Option<String>,
    /// Its times and attempts, when the campaign's handle traces it (`AttemptLog::samples`);
    /// `None` for every other message (no allocation).
    pub trace: Option<Box<MessageTrace>>,
}

/// What a message traced on its own recorded, for its span: built in Rust, handed back with
/// the outcome, and taken once.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageTrace {
    /// When its first attempt began (when it was dispatched, if no attempt was made).
    pub started: SystemTime,
    /// When its outcome was decided.
    pub ended: SystemTime,
    /// Its recipient and its sender, masked as the logs mask numbers.
    pub recipient: String,
    pub sender: String,
    /// Each HTTP attempt, oldest first (a retry after a temporary code included).
    pub attempts: Vec<AttemptRecord>,
}

impl<P> Outcome<P> {
    pub fn new(index: u64, payload: P, status: Status) -> Self {
        Outcome {
            index,
            payload,
            status,
            idempotency_key: None,
            result: None,
            meta: None,
            error: None,
            duplicate_of: None,
            reason: None,
            trace: None,
        }
    }

    pub fn failed(index: u64, payload: P, error: Error) -> Self {
        Outcome {
            error: Some(error),
            ..Outcome::new(index, payload, Status::Failed)
        }
    }

    pub fn skipped(index: u64, payload: P, reason: impl Into<String>) -> Self {
        Outcome {
            reason: Some(reason.into()),
            ..Outcome::new(index, payload, Status::Skipped)
        }
    }
}
