//! What each HTTP attempt of a call recorded for tracing: when it began and when its answer was
//! read (wall-clock, taken here in Rust where the attempt really ran, not where Python saw the
//! call), its status or the kind of its failure, and how many times the request had been sent
//! before. Only a handle made for tracing (`Client::observed`) carries a log; every other
//! handle pays one `None` check per attempt.
//!
//! The log of a campaign's handle records no attempt (it would grow with every message):
//! it records the pauses that held the campaign's sends (`PauseRecord`, a bounded number),
//! and says which messages get their own trace (`samples`), whose attempts are then recorded
//! in a log of the message's own and handed back with its outcome.

use std::sync::atomic::{AtomicU64, Ordering};
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

/// A pause that held the sends of a campaign: when it was decided, for how long, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct PauseRecord {
    pub at: SystemTime,
    /// How long it holds the sends; `None` when it has no set end (the breaker).
    pub seconds: Option<f64>,
    /// `retry_after` (a 429 or 503 with `Retry-After`), `throttled` (a platform code asking
    /// to slow down), `unreachable` (the breaker opened: one probe at a time).
    pub reason: &'static str,
    /// The status of the answer that asked for it.
    pub status: Option<u16>,
    /// The platform's code that asked for it.
    pub code: Option<String>,
    /// The sender it holds, masked as the logs mask numbers (`None`: every sender).
    pub sender: Option<String>,
}

/// Pauses kept at most per log, between two takes: past it they are only counted.
pub const MAX_PAUSES: usize = 1000;

/// The attempts of the calls of one traced handle, taken by the caller after each call (or
/// batch of calls); and, for a campaign's handle, its pauses and which messages are traced.
#[derive(Debug)]
pub struct AttemptLog {
    records: Mutex<Vec<AttemptRecord>>,
    /// Whether the attempts of calls on the handle are recorded (not a campaign's).
    attempts: bool,
    /// The share of a campaign's messages that get a trace of their own (0: none, 1: all).
    message_sample: f64,
    pauses: Mutex<Vec<PauseRecord>>,
    pauses_dropped: AtomicU64,
}

impl Default for AttemptLog {
    fn default() -> Self {
        AttemptLog::new(true, 0.0)
    }
}

impl AttemptLog {
    /// `attempts`: whether attempts are recorded; `message_sample`: the share of a campaign's
    /// messages traced on their own (clamped to 0..=1).
    pub fn new(attempts: bool, message_sample: f64) -> Self {
        let message_sample = if message_sample.is_nan() {
            0.0
        } else {
            message_sample.clamp(0.0, 1.0)
        };
        AttemptLog {
            records: Mutex::default(),
            attempts,
            message_sample,
            pauses: Mutex::default(),
            pauses_dropped: AtomicU64::new(0),
        }
    }

    pub fn records_attempts(&self) -> bool {
        self.attempts
    }

    pub fn push(&self, record: AttemptRecord) {
        if self.attempts {
            crate::sync::lock(&self.records).push(record);
        }
    }

    /// Whether the campaign message at `index` gets a trace of its own: every one, none, or a
    /// share of them chosen by a hash of the index (the same messages on every run).
    pub fn samples(&self, index: u64) -> bool {
        if self.message_sample >= 1.0 {
            return true;
        }
        if self.message_sample <= 0.0 {
            return false;
        }
        // splitmix64's finalizer: indexes in a row spread over the whole range.
        let mut z = index.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        #[allow(clippy::cast_precision_loss)] // a share: 53 bits are plenty
        let share = (z >> 11) as f64 / (1u64 << 53) as f64;
        share < self.message_sample
    }

    /// Records a pause (past `MAX_PAUSES` not taken yet, only counted).
    pub fn pause(&self, pause: PauseRecord) {
        let mut pauses = crate::sync::lock(&self.pauses);
        if pauses.len() < MAX_PAUSES {
            pauses.push(pause);
        } else {
            self.pauses_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every pause recorded since the last take, oldest first.
    pub fn take_pauses(&self) -> Vec<PauseRecord> {
        std::mem::take(&mut *crate::sync::lock(&self.pauses))
    }

    /// Pauses not kept (the log was full), since the log was made.
    pub fn pauses_dropped(&self) -> u64 {
        self.pauses_dropped.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_of_the_messages_is_sampled_by_index() {
        let none = AttemptLog::new(false, 0.0);
        let all = AttemptLog::new(false, 1.0);
        let tenth = AttemptLog::new(false, 0.1);
        assert!((0..1000).all(|i| !none.samples(i) && all.samples(i)));
        let sampled = (0..100_000).filter(|i| tenth.samples(*i)).count();
        assert!((9_000..11_000).contains(&sampled), "{sampled}");
        assert!(!AttemptLog::new(false, f64::NAN).samples(1));
    }

    #[test]
    fn pauses_are_kept_up_to_a_bound_and_counted_past_it() {
        let log = AttemptLog::new(false, 0.0);
        let pause = PauseRecord {
            at: SystemTime::now(),
            seconds: Some(1.0),
            reason: "retry_after",
            status: Some(429),
            code: None,
            sender: None,
        };
        for _ in 0..MAX_PAUSES + 5 {
            log.pause(pause.clone());
        }
        assert_eq!(log.take_pauses().len(), MAX_PAUSES);
        assert_eq!(log.pauses_dropped(), 5);
        log.pause(pause);
        assert_eq!(log.take_pauses().len(), 1);
    }

    #[test]
    fn a_campaigns_log_records_no_attempt() {
        let log = AttemptLog::new(false, 1.0);
        log.push(AttemptRecord {
            method: "POST".into(),
            path: "/".into(),
            started: SystemTime::now(),
            ended: SystemTime::now(),
            status: Some(200),
            error_type: None,
            resend_count: 0,
        });
        assert!(log.take().is_empty());
    }
}
