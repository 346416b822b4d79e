//! The storage under `bizmsg.Message`: its four fields, held by a Rust object.
//!
//! `Message` itself stays a frozen dataclass defined in Python (`bizmsg._campaign`), with the
//! same fields, constructor, `repr`, equality, hash, `dataclasses.replace` and `asdict` as
//! before. It inherits its constructor and its fields from this class because a campaign makes
//! one `Message` per row: a frozen dataclass's generated `__init__` sets each field through
//! `object.__setattr__`, which cost more than half of the time it took to make one, and the
//! feed then read each field back with a `getattr`. Here the fields are set by one native call
//! and read by the feed straight from the Rust object.

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

/// The fields of a `bizmsg.Message`, unchecked (a bad number is the message's `failed`
/// outcome, reported when the campaign reaches it, never an exception when it is made).
///
/// The fields can be set (`object.__setattr__`, as a dataclass's generated `__init__` does for
/// a subclass of `Message` with fields of its own); `Message` itself refuses assignment with
/// `FrozenInstanceError`, as any frozen dataclass does.
#[pyclass(subclass, name = "MessageFields", module = "bizmsg._native")]
pub(crate) struct MessageFields {
    /// The recipient's phone number.
    #[pyo3(get, set)]
    pub(crate) to: Py<PyAny>,
    /// The business phone number the message is sent from.
    #[pyo3(get, set, name = "from_")]
    pub(crate) from: Py<PyAny>,
    /// The template to send: a `Template`, or a mapping with its name, parameters, language.
    #[pyo3(get, set)]
    pub(crate) template: Py<PyAny>,
    /// The `Idempotency-Key` to send with, instead of the one bizmsg would give; or `None`.
    #[pyo3(get, set)]
    pub(crate) idempotency_key: Py<PyAny>,
}

#[pymethods]
impl MessageFields {
    #[new]
    #[pyo3(signature = (to, from_, template, idempotency_key = None))]
    fn new(
        py: Python<'_>,
        to: Py<PyAny>,
        from_: Py<PyAny>,
        template: Py<PyAny>,
        idempotency_key: Option<Py<PyAny>>,
    ) -> Self {
        MessageFields {
            to,
            from: from_,
            template,
            idempotency_key: idempotency_key.unwrap_or_else(|| py.None()),
        }
    }

    /// The fields, for Python's cycle collector: a template (or any value) may refer back to
    /// the message.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.to)?;
        visit.call(&self.from)?;
        visit.call(&self.template)?;
        visit.call(&self.idempotency_key)
    }

    fn __clear__(&mut self) {
        Python::attach(|py| {
            let none = || py.None();
            self.to = none();
            self.from = none();
            self.template = none();
            self.idempotency_key = none();
        });
    }
}
