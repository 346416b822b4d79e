//! `_native.AttemptLog`: the attempts of a traced handle's calls (`NativeClient.observed`), and
//! the pauses of a traced campaign, as plain tuples for `bizmsg.instrumentation` to turn into
//! spans, events and metrics. Made only when instrumented: nothing here runs for an untraced
//! call.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;

use crate::client::{AttemptLog as CoreAttemptLog, AttemptRecord, PauseRecord};

/// `(method, path, start_ns, end_ns, status, error_type, resend_count)`, times in nanoseconds
/// since the epoch (OpenTelemetry's span times).
pub(crate) type AttemptTuple = (String, String, u64, u64, Option<u16>, Option<String>, u32);

/// `(at_ns, seconds, reason, status, code, sender)`: see `PauseRecord`.
type PauseTuple = (
    u64,
    Option<f64>,
    &'static str,
    Option<u16>,
    Option<String>,
    Option<String>,
);

#[pyclass(frozen, module = "bizmsg._native")]
pub struct AttemptLog {
    pub(crate) log: Arc<CoreAttemptLog>,
}

pub(crate) fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

pub(crate) fn as_tuple(record: AttemptRecord) -> AttemptTuple {
    (
        record.method,
        record.path,
        nanos(record.started),
        nanos(record.ended),
        record.status,
        record.error_type,
        record.resend_count,
    )
}

#[pymethods]
impl AttemptLog {
    /// Every attempt recorded since the last call, oldest first.
    fn take(&self) -> Vec<AttemptTuple> {
        self.log.take().into_iter().map(as_tuple).collect()
    }

    /// Every pause of the campaign recorded since the last call, oldest first (at most
    /// `MAX_PAUSES` between two calls).
    fn take_pauses(&self) -> Vec<PauseTuple> {
        self.log
            .take_pauses()
            .into_iter()
            .map(|pause: PauseRecord| {
                (
                    nanos(pause.at),
                    pause.seconds,
                    pause.reason,
                    pause.status,
                    pause.code,
                    pause.sender,
                )
            })
            .collect()
    }

    /// Pauses not kept because the log was full.
    #[getter]
    fn pauses_dropped(&self) -> u64 {
        self.log.pauses_dropped()
    }
}
