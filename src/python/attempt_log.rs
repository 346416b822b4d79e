//! `_native.AttemptLog`: the attempts of a traced handle's calls (`NativeClient.observed`), as
//! plain tuples for `bizmsg.instrumentation` to turn into spans and metrics. Made only when
//! instrumented: nothing here runs for an untraced call.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use pyo3::prelude::*;

use crate::client::{AttemptLog as CoreAttemptLog, AttemptRecord};

/// `(method, path, start_ns, end_ns, status, error_type, resend_count)`, times in nanoseconds
/// since the epoch (OpenTelemetry's span times).
type AttemptTuple = (String, String, u64, u64, Option<u16>, Option<String>, u32);

#[pyclass(frozen, module = "bizmsg._native")]
pub struct AttemptLog {
    pub(crate) log: Arc<CoreAttemptLog>,
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    })
}

fn as_tuple(record: AttemptRecord) -> AttemptTuple {
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
}
