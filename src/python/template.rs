//! `Template`'s checks, shared with the send path: a template is validated when it is made,
//! with the same rules and messages as at send time.

use pyo3::prelude::*;

use super::args::text;
use super::convert::py_to_value;
use super::errors::to_py;
use crate::error::Error;
use crate::validate;

/// `(name, parameters, language)` as the wire carries them, or the `ValidationError` of the
/// first bad one.
#[pyfunction]
pub(crate) fn template_wire(
    py: Python<'_>,
    name: &Bound<'_, PyAny>,
    parameters: &Bound<'_, PyAny>,
    language: &Bound<'_, PyAny>,
) -> PyResult<(String, String, String)> {
    let wire = || -> Result<_, Error> {
        Ok((
            validate::template_name(&text("template.name", name)?)?,
            validate::parameters(&py_to_value("template.parameters", parameters)?)?,
            validate::language(&text("template.language", language)?)?,
        ))
    };
    wire().map_err(|e| to_py(py, e))
}
