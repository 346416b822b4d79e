//! Core errors to the Python exception classes of `bizmsg.errors`, which are imported once.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::convert;
use super::exceptions::{decode_error, errors_module};
use crate::error::{ApiBody, Error};

/// The Python exception for a core error. Never fails: a failure to build the exception
/// becomes that failure's own exception.
pub(crate) fn to_py(py: Python<'_>, error: Error) -> PyErr {
    build(py, error).unwrap_or_else(|failure| failure)
}

fn build(py: Python<'_>, error: Error) -> PyResult<PyErr> {
    let module = errors_module(py)?;
    let message = error.to_string();
    let kwargs = PyDict::new(py);
    let class = match error {
        Error::Configuration(_) => module.getattr("ConfigurationError")?,
        Error::TokenProvider { cause, .. } => {
            let Some(original) = cause.0.downcast_ref::<PyErr>() else {
                return Ok(PyErr::from_value(
                    module.getattr("ConfigurationError")?.call1((message,))?,
                ));
            };
            let original = original.clone_ref(py);
            // KeyboardInterrupt, SystemExit and the like are not errors of ours to wrap.
            if !original.is_instance_of::<pyo3::exceptions::PyException>(py) {
                return Ok(original);
            }
            let error = PyErr::from_value(module.getattr("ConfigurationError")?.call1((message,))?);
            error.set_cause(py, Some(original));
            return Ok(error);
        }
        Error::Validation { field, .. } => {
            kwargs.set_item("field", field)?;
            module.getattr("ValidationError")?
        }
        Error::Connect(_) => module.getattr("ConnectError")?,
        Error::Timeout(_) => module.getattr("TimeoutError")?,
        Error::ConnectionBroken(_) | Error::StaleConnection(_) => {
            module.getattr("ConnectionBrokenError")?
        }
        Error::SendOutcomeUnknown(unknown) => {
            kwargs.set_item("idempotency_key", &unknown.idempotency_key)?;
            kwargs.set_item("to", &unknown.to)?;
            kwargs.set_item("template_name", &unknown.template_name)?;
            kwargs.set_item("request_id", &unknown.request_id)?;
            let exception = module
                .getattr("SendOutcomeUnknownError")?
                .call((message,), Some(&kwargs))?;
            let error = PyErr::from_value(exception);
            error.set_cause(py, Some(to_py(py, *unknown.cause)));
            return Ok(error);
        }
        Error::Api(api) => {
            kwargs.set_item("status_code", api.status_code)?;
            kwargs.set_item("method", &api.method)?;
            kwargs.set_item("url", &api.url)?;
            let body = match &api.body {
                ApiBody::Json(json) => convert::value_to_py(py, json)?,
                ApiBody::Text(text) => text.into_pyobject(py)?.into_any(),
            };
            kwargs.set_item("body", body)?;
            kwargs.set_item("request_id", &api.request_id)?;
            if api.status_code == 429 {
                kwargs.set_item("retry_after", api.retry_after.map(|d| d.as_secs_f64()))?;
            }
            module
                .getattr("_api_error_class")?
                .call1((api.status_code,))?
        }
        error @ Error::Decode { .. } => return Ok(decode_error(py, error)),
        Error::SendRejected(rejected) => {
            kwargs.set_item(
                "result",
                convert::send_result(py, &rejected.result, Some(&rejected.meta))?,
            )?;
            module.getattr("SendRejectedError")?
        }
        Error::ResponseTooLarge {
            limit,
            size,
            declared,
            request_id,
        } => {
            kwargs.set_item("limit", limit)?;
            kwargs.set_item("size", size)?;
            kwargs.set_item("declared", declared)?;
            kwargs.set_item("request_id", request_id.as_deref())?;
            module.getattr("ResponseTooLargeError")?
        }
        Error::Pagination(_) => module.getattr("PaginationError")?,
        Error::Campaign(_) => module.getattr("CampaignError")?,
        Error::SharedState(_) => module.getattr("SharedStateError")?,
        Error::Closed => module.getattr("ClientClosedError")?,
        Error::Internal(_) => module.getattr("InternalError")?,
    };
    Ok(PyErr::from_value(class.call((message,), Some(&kwargs))?))
}
