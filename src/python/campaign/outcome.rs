//! What became of one message (`SendOutcome`): the Rust data kept, the Python objects (the
//! send result, the exception) built only when asked for; pickled and restored.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

use crate::campaign::{MessageTrace, Outcome, Status};
use crate::error::Error;
use crate::python::args::type_name;
use crate::python::attempt_log::{as_tuple, nanos, AttemptTuple};
use crate::python::convert;
use crate::python::errors::to_py;

/// What became of one message of a campaign.
#[pyclass(frozen, name = "SendOutcome", module = "bizmsg")]
pub(crate) struct SendOutcome {
    outcome: Outcome<Py<PyAny>>,
    result: PyOnceLock<Py<PyAny>>,
    error: PyOnceLock<Py<PyAny>>,
    /// A message traced on its own: its times and attempts, until the instrumentation takes
    /// them (so a kept outcome does not keep them).
    trace: std::sync::Mutex<Option<Box<MessageTrace>>>,
}

/// `(start_ns, end_ns, recipient, sender, sms_id, code, attempts)`: see `MessageTrace`.
type TraceTuple = (
    u64,
    u64,
    String,
    String,
    Option<String>,
    Option<String>,
    Vec<AttemptTuple>,
);

impl SendOutcome {
    pub(super) fn new(mut outcome: Outcome<Py<PyAny>>) -> Self {
        let trace = outcome.trace.take();
        SendOutcome {
            outcome,
            result: PyOnceLock::new(),
            error: PyOnceLock::new(),
            trace: std::sync::Mutex::new(trace),
        }
    }
}

#[pymethods]
impl SendOutcome {
    /// Position of the message in the input, from 0.
    #[getter]
    fn index(&self) -> u64 {
        self.outcome.index
    }

    /// The input item as given (a `Message`, a dict, or what was not a message).
    #[getter]
    fn message(&self, py: Python<'_>) -> Py<PyAny> {
        self.outcome.payload.clone_ref(py)
    }

    /// `"sent"`, `"rejected"`, `"unknown"`, `"failed"` or `"skipped"`.
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        // Interned: counting a batch's statuses then hashes five strings, not one per outcome.
        let status = match self.outcome.status {
            Status::Sent => intern!(py, "sent"),
            Status::Rejected => intern!(py, "rejected"),
            Status::Unknown => intern!(py, "unknown"),
            Status::Failed => intern!(py, "failed"),
            Status::Skipped => intern!(py, "skipped"),
        };
        status.clone()
    }

    /// The times and attempts of a message traced on its own (`bizmsg.instrumentation`'s
    /// message spans), once: `None` after the first call, and for every other message.
    fn _take_trace(&self) -> Option<TraceTuple> {
        let trace = crate::sync::lock(&self.trace).take()?;
        let result = self.outcome.result.as_ref();
        let text = |value: Option<&crate::wire::Scalar>| value.map(|v| v.text().to_owned());
        Some((
            nanos(trace.started),
            nanos(trace.ended),
            trace.recipient,
            trace.sender,
            text(result.and_then(|r| r.sms_id.as_ref())),
            text(result.and_then(|r| r.code.as_ref())),
            trace.attempts.into_iter().map(as_tuple).collect(),
        ))
    }

    /// True only when the message was sent (committed by the service).
    #[getter]
    fn ok(&self) -> bool {
        self.outcome.status == Status::Sent
    }

    /// The `Idempotency-Key` the message went out with (or would have).
    #[getter]
    fn idempotency_key(&self) -> Option<&str> {
        self.outcome.idempotency_key.as_deref()
    }

    /// The `SendResult` when sent or rejected (or recorded by an earlier run).
    #[getter]
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(result) = &self.outcome.result else {
            return Ok(py.None());
        };
        self.result
            .get_or_try_init(py, || {
                Ok(convert::send_result(py, result, self.outcome.meta.as_ref())?.unbind())
            })
            .map(|result| result.clone_ref(py))
    }

    /// The exception a single send would have raised (`SendRejectedError`,
    /// `SendOutcomeUnknownError`, `ValidationError`, ...), or `None`.
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(error) = &self.outcome.error else {
            return Ok(py.None());
        };
        self.error
            .get_or_try_init(py, || {
                Ok(to_py(py, error.clone()).into_value(py).into_any())
            })
            .map(|error| error.clone_ref(py))
    }

    /// For a skipped duplicate: the index of the message it repeats.
    #[getter]
    fn duplicate_of(&self) -> Option<u64> {
        self.outcome.duplicate_of
    }

    /// Why the message was skipped (or other context), in a few words.
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.outcome.reason.as_deref()
    }

    /// A flat record: index, status, ok, idempotency_key, sms_id, code, msg, error (its class
    /// and message), duplicate_of, reason.
    fn to_record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let record = PyDict::new(py);
        record.set_item(intern!(py, "index"), self.outcome.index)?;
        record.set_item(intern!(py, "status"), self.outcome.status.as_str())?;
        record.set_item(intern!(py, "ok"), self.ok())?;
        record.set_item(intern!(py, "idempotency_key"), self.idempotency_key())?;
        let result = self.outcome.result.as_ref();
        let scalar = |value: Option<&crate::wire::Scalar>| -> PyResult<Py<PyAny>> {
            Ok(convert::scalar_to_py(py, value)?.unbind())
        };
        record.set_item(
            intern!(py, "sms_id"),
            scalar(result.and_then(|r| r.sms_id.as_ref()))?,
        )?;
        record.set_item(
            intern!(py, "code"),
            scalar(result.and_then(|r| r.code.as_ref()))?,
        )?;
        record.set_item(intern!(py, "msg"), result.and_then(|r| r.msg.as_deref()))?;
        let error = match &self.outcome.error {
            Some(_) => {
                let exception = self.error(py)?;
                let bound = exception.bind(py);
                Some(format!("{}: {}", type_name(bound), bound.str()?))
            }
            None => None,
        };
        record.set_item(intern!(py, "error"), error)?;
        record.set_item(intern!(py, "duplicate_of"), self.outcome.duplicate_of)?;
        record.set_item(intern!(py, "reason"), self.reason())?;
        Ok(record)
    }

    /// Pickling, so that a `BulkResult` (and a `CampaignError` or `KeyboardInterrupt` carrying
    /// one) can cross a process pool or be saved: the outcome's values, with its result and
    /// error as the Python objects, which pickle themselves.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, pyo3::types::PyTuple>)> {
        let restore = py
            .import(intern!(py, "bizmsg._native"))?
            .getattr(intern!(py, "restore_send_outcome"))?;
        let args = (
            self.outcome.index,
            self.outcome.payload.clone_ref(py),
            self.outcome.status.as_str(),
            self.outcome.idempotency_key.as_deref(),
            self.result(py)?,
            self.error(py)?,
            self.outcome.duplicate_of,
            self.outcome.reason.as_deref(),
        )
            .into_pyobject(py)?;
        Ok((restore, args))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut text = format!(
            "SendOutcome(index={}, status={:?}",
            self.outcome.index,
            self.outcome.status.as_str()
        );
        if let Some(sms_id) = self.outcome.result.as_ref().and_then(|r| r.sms_id.as_ref()) {
            text.push_str(&format!(", sms_id={:?}", sms_id.text()));
        }
        if let Some(code) = self.outcome.result.as_ref().and_then(|r| r.code.as_ref()) {
            text.push_str(&format!(", code={:?}", code.text()));
        }
        if let Some(original) = self.outcome.duplicate_of {
            text.push_str(&format!(", duplicate_of={original}"));
        }
        if self.outcome.error.is_some() {
            // The Python exception's text: the same as the Rust error's, and also right for an
            // outcome restored from a pickle.
            let exception = self.error(py)?;
            let bound = exception.bind(py);
            text.push_str(&format!(
                ", error={}({:?})",
                type_name(bound),
                crate::masking::truncate(&bound.str()?.to_string_lossy(), 80)
            ));
        }
        text.push(')');
        Ok(text)
    }
}

/// The inverse of `SendOutcome.__reduce__`. The result and error objects are kept as they were
/// unpickled; the Rust send result (for `to_record` and the repr) is decoded again from the
/// result's wire bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // one argument per field, as `__reduce__` gives them
pub(crate) fn restore_send_outcome(
    py: Python<'_>,
    index: u64,
    message: Py<PyAny>,
    status: &str,
    idempotency_key: Option<String>,
    result: Py<PyAny>,
    error: Py<PyAny>,
    duplicate_of: Option<u64>,
    reason: Option<String>,
) -> PyResult<SendOutcome> {
    let status = match status {
        "sent" => Status::Sent,
        "rejected" => Status::Rejected,
        "unknown" => Status::Unknown,
        "failed" => Status::Failed,
        "skipped" => Status::Skipped,
        other => {
            return Err(to_py(
                py,
                Error::Validation {
                    field: "status".into(),
                    message: format!("not an outcome status: {other:?}"),
                },
            ))
        }
    };
    let mut outcome = Outcome::new(index, message, status);
    outcome.idempotency_key = idempotency_key;
    outcome.duplicate_of = duplicate_of;
    outcome.reason = reason;
    if !result.is_none(py) {
        let wire: Vec<u8> = result
            .bind(py)
            .call_method0(intern!(py, "_wire_bytes"))?
            .extract()?;
        outcome.result = Some(
            <crate::wire::SendResult as crate::wire::FromWire>::from_answer(
                bytes::Bytes::from(wire),
                "a pickled SendOutcome",
            )
            .map_err(|e| to_py(py, e.into()))?,
        );
    }
    if !error.is_none(py) {
        // Only marks that there is an error: every use of it goes through the Python object.
        outcome.error = Some(Error::Internal(
            error.bind(py).str()?.to_string_lossy().into(),
        ));
    }
    let restored = SendOutcome::new(outcome);
    // Set before anyone can read them, so the getters hand out these very objects.
    let _ = restored.result.set(py, result);
    let _ = restored.error.set(py, error);
    Ok(restored)
}
