//! What each HTTP attempt of a call recorded for tracing: when it began and when its answer was
//! read (wall-clock, taken here in Rust where the attempt really ran, not where Python saw the
//! call), its status or the kind of its failure, and how many times the request had been sent
//! before. Only a handle made for tracing (`Client::observed`) carries a log; every other
//! handle pays one `None` check per attempt.

use std::sync::Mutex;
use std::time::{Instant, SystemTime};

use crate::error::Error;

/// One attempt of a call.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRecord {
    pub method: String,
    /// The path as the endpoint names it (`/v1/chat/messages/send`): a route, never the query.
    pub path: String,
    pub started: SystemTime,
    pub ended: SystemTime,
    /// The status answered; `None` when no answer arrived.
    pub status: Option<u16>,
    /// What went wrong, as OpenTelemetry's `error.type` wants it: the status for an error
    /// answer, else a low-cardinality kind (`timeout`, `connect`...). `None` for a 2xx.
    pub error_type: Option<String>,
    /// How many times this request had already been sent (0 for the first attempt); the
    /// attempt before a resend says why it was retried (its `error_type`).
    pub resend_count: u32,
}

/// The attempts of the calls of one traced handle, taken by the caller after each call (or
/// batch of calls).
#[derive(Debug, Default)]
pub struct AttemptLog {
    records: Mutex<Vec<AttemptRecord>>,
}

impl AttemptLog {
    pub fn push(&self, record: AttemptRecord) {
        crate::sync::lock(&self.records).push(record);
    }

    /// Every attempt recorded since the last take, oldest first.
    pub fn take(&self) -> Vec<AttemptRecord> {
        std::mem::take(&mut *crate::sync::lock(&self.records))
    }
}

/// `error.type` of a failed attempt: the status of an error answer, else the kind of failure.
pub fn error_type(error: &Error) -> String {
    let kind = match error {
        Error::Api(api) => return api.status_code.to_string(),
        Error::Connect(_) => "connect",
        Error::Timeout(_) => "timeout",
        Error::ConnectionBroken(_) => "connection_broken",
        Error::StaleConnection(_) => "stale_connection",
        Error::SendOutcomeUnknown(_) => "send_outcome_unknown",
        Error::ResponseTooLarge { .. } => "response_too_large",
        Error::Decode { .. } => "decode",
        Error::SharedState(_) => "shared_state",
        Error::Closed => "closed",
        Error::TokenProvider { .. } => "token_provider",
        _ => "_OTHER",
    };
    kind.to_owned()
}

/// The wall-clock time of `instant`, an instant of the past: the attempt loop reads the
/// monotonic clock (one read per attempt, as a campaign needs), and only a traced attempt pays
/// for the conversion.
pub fn wall_clock_at(instant: Instant) -> SystemTime {
    SystemTime::now()
        .checked_sub(instant.elapsed())
        .unwrap_or(SystemTime::UNIX_EPOCH)
}
