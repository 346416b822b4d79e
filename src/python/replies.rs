//! A call's answer as Python receives it: a `SendResult` or page dataclass, or (`raw=True`) the
//! received JSON as dicts; an error as its exception.

use pyo3::prelude::*;

use super::convert;
use super::convert::PageKind;
use super::errors::to_py;
use crate::api::UnreadPage;
use crate::client::Response;
use crate::error::Error;
use crate::wire::{Page, SendResult};

pub(crate) fn send_reply(
    py: Python<'_>,
    result: crate::Result<Response<SendResult>>,
    raw: bool,
) -> PyResult<Py<PyAny>> {
    let response = result.map_err(|e| to_py(py, e))?;
    if raw {
        return Ok(convert::json_to_py(py, response.value.wire.as_bytes())?.unbind());
    }
    Ok(convert::send_result(py, &response.value, Some(&response.meta))?.unbind())
}

pub(crate) fn page_reply<T: convert::PyItem>(
    py: Python<'_>,
    result: crate::Result<Response<Page<T>>>,
    kind: PageKind,
) -> PyResult<Py<PyAny>> {
    let response = result.map_err(|e| to_py(py, e))?;
    Ok(convert::page(py, &response.value, Some(&response.meta), kind)?.unbind())
}

/// `raw=True`: the body as the dict it was, built in one pass over it; the page envelope is
/// then checked on that dict. (Checking the body first, as the typed listings read it, meant a
/// second pass over every item's text.) A body that is not a page gets the error the typed
/// reading reports, asked for only then.
pub(crate) fn raw_page_reply(
    py: Python<'_>,
    result: crate::Result<Response<UnreadPage>>,
) -> PyResult<Py<PyAny>> {
    let response = result.map_err(|e| to_py(py, e))?;
    let page = &response.value;
    let built = convert::json_to_py(py, &page.body);
    if let Ok(object) = &built {
        if convert::is_page_envelope(object) {
            return Ok(object.clone().unbind());
        }
    }
    match (page.check(), built) {
        (Err(error), _) => Err(to_py(py, error)),
        // The check skips over items without reading them, so it passes a few bodies that
        // cannot be built (text that is not UTF-8, an item nested too deep): jiter says why.
        (Ok(_), Err(error)) => Err(error),
        // Not reached: with the body built, both ask the same of the envelope.
        (Ok(_), Ok(_)) => Err(to_py(
            py,
            Error::Decode {
                message: format!("{} did not answer a page", page.source()),
                snippet: crate::masking::truncate(&String::from_utf8_lossy(&page.body), 200),
            },
        )),
    }
}
