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
use pyo3::types::PyType;

/// `(to, from_, template, idempotency_key)`, as given.
type FieldValues = (Py<PyAny>, Py<PyAny>, Py<PyAny>, Py<PyAny>);

/// The fields of a `bizmsg.Message`, unchecked (a bad number is the message's `failed`
/// outcome, reported when the campaign reaches it, never an exception when it is made).
#[pyclass(frozen, subclass, name = "MessageFields", module = "bizmsg._native")]
pub(crate) struct MessageFields {
    pub(crate) to: Py<PyAny>,
    pub(crate) from: Py<PyAny>,
    pub(crate) template: Py<PyAny>,
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

    /// The recipient's phone number.
    #[getter]
    fn to(&self, py: Python<'_>) -> Py<PyAny> {
        self.to.clone_ref(py)
    }

    /// The business phone number the message is sent from.
    #[getter]
    fn from_(&self, py: Python<'_>) -> Py<PyAny> {
        self.from.clone_ref(py)
    }

    /// The template to send: a `Template`, or a mapping with its name, parameters, language.
    #[getter]
    fn template(&self, py: Python<'_>) -> Py<PyAny> {
        self.template.clone_ref(py)
    }

    /// The `Idempotency-Key` to send with, instead of the one bizmsg would give; or `None`.
    #[getter]
    fn idempotency_key(&self, py: Python<'_>) -> Py<PyAny> {
        self.idempotency_key.clone_ref(py)
    }

    /// Pickles (and copies) as a call of the class with the four fields.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, FieldValues) {
        let py = slf.py();
        let fields = slf.get();
        (
            slf.get_type(),
            (
                fields.to.clone_ref(py),
                fields.from.clone_ref(py),
                fields.template.clone_ref(py),
                fields.idempotency_key.clone_ref(py),
            ),
        )
    }
}
