//! The module of bizmsg's exception classes (`bizmsg.errors`), imported once, and the one
//! exception the converters raise themselves: a leaf both `errors` (every core error) and
//! `convert` (JSON jiter cannot read) use, so neither imports the other's way.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyModule};

use crate::error::Error;

static ERRORS: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// `bizmsg.errors`.
pub(crate) fn errors_module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    ERRORS
        .get_or_try_init(py, || {
            PyModule::import(py, "bizmsg.errors").map(Bound::unbind)
        })
        .map(|module| module.bind(py))
}

/// `DecodeError` for an `Error::Decode` (as `errors::to_py` makes it); another error becomes
/// `InternalError`. Never fails: a failure to build it becomes that failure's own exception.
pub(crate) fn decode_error(py: Python<'_>, error: Error) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = errors_module(py)?;
        let message = error.to_string();
        let kwargs = PyDict::new(py);
        let class = match &error {
            Error::Decode { snippet, .. } => {
                kwargs.set_item("snippet", snippet)?;
                module.getattr("DecodeError")?
            }
            _ => module.getattr("InternalError")?,
        };
        Ok(PyErr::from_value(class.call((message,), Some(&kwargs))?))
    };
    build().unwrap_or_else(|failure| failure)
}
