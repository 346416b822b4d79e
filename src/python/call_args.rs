//! A call's Python arguments checked and turned into the core's request and call options, on
//! the caller's thread, so that a bad argument raises at the call and not in a runtime task.

use pyo3::prelude::*;

use super::args::{call_options, integer, text};
use super::convert;
use crate::api::{idempotency_key, PageRequest, SendMessage};
use crate::client::CallOptions;
use crate::error::Error;
use crate::wire::SendRequest;

/// The arguments of `send` and `send_async`, gathered for `send_args`.
pub(super) struct SendArgs<'py> {
    pub(super) to: Bound<'py, PyAny>,
    pub(super) from_: Bound<'py, PyAny>,
    pub(super) name: Bound<'py, PyAny>,
    pub(super) parameters: Bound<'py, PyAny>,
    pub(super) language: Bound<'py, PyAny>,
    pub(super) raw: bool,
    pub(super) timeout: Bound<'py, PyAny>,
    pub(super) max_retries: Bound<'py, PyAny>,
    pub(super) idempotency_key: Option<String>,
}

pub(super) fn send_args(args: SendArgs<'_>) -> Result<(SendRequest, String, CallOptions), Error> {
    let SendArgs {
        to,
        from_,
        name,
        parameters,
        language,
        timeout,
        max_retries,
        idempotency_key: chosen_key,
        ..
    } = args;
    let message = SendMessage {
        to: text("to", &to)?,
        from: text("from_", &from_)?,
        template_name: text("template.name", &name)?,
        parameters: convert::py_to_value("template.parameters", &parameters)?,
        language: text("template.language", &language)?,
    };
    // Validated here, once, on the caller's thread, so a bad argument raises at the call.
    let request = message.validate()?;
    let key = idempotency_key(chosen_key.as_deref())?;
    let call = call_options(&timeout, &max_retries, None)?;
    Ok((request, key, call))
}

pub(super) fn list_args(
    page_no: &Bound<'_, PyAny>,
    page_size: &Bound<'_, PyAny>,
    timeout: &Bound<'_, PyAny>,
    max_retries: &Bound<'_, PyAny>,
) -> Result<(PageRequest, CallOptions), Error> {
    let page = PageRequest::new(
        integer("page_no", page_no)?,
        integer("page_size", page_size)?,
    )?;
    Ok((page, call_options(timeout, max_retries, None)?))
}
