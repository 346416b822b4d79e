//! The models' own functions of `_native`: `model_fields` (a model's field table, from which
//! `bizmsg.models` derives `to_dict()` of hand-built models) and `model_from_json`
//! (`Model.from_dict`, decoded as a response is).

use pyo3::prelude::*;

use super::convert::{business_account, page, phone_number, send_result, PageKind};
use super::errors::to_py;
use crate::error::Error;
use crate::wire::{BusinessAccount, BusinessPhoneNumber, FromWire, Page, SendResult, WireModel};

/// `_native.model_fields(kind)`: the `(field, wire name)` pairs of a model, in the spec's
/// order, from its table (`bizmsg.models` derives `to_dict()` of hand-built models from them).
#[pyfunction]
pub(crate) fn model_fields(
    py: Python<'_>,
    kind: &str,
) -> PyResult<Vec<(&'static str, &'static str)>> {
    let fields = match kind {
        "SendResult" => SendResult::FIELDS,
        "BusinessAccount" => BusinessAccount::FIELDS,
        "BusinessPhoneNumber" => BusinessPhoneNumber::FIELDS,
        other => {
            return Err(to_py(
                py,
                Error::validation("kind", format!("unknown model {other:?}")),
            ))
        }
    };
    Ok(fields.to_vec())
}

/// `Model.from_dict`: the same decoding as a response, from JSON text (`json.dumps` of the
/// dict, which keeps big integers and floats exact). A page's items are of `item_kind`
/// (`"BusinessAccount"` or `"BusinessPhoneNumber"`); `fallbacks` are its `(current, size)`
/// when the object leaves them out.
#[pyfunction]
#[pyo3(signature = (*, kind, json, item_kind=None, fallbacks=None))]
pub(crate) fn model_from_json<'py>(
    py: Python<'py>,
    kind: &str,
    json: &[u8],
    item_kind: Option<&str>,
    fallbacks: Option<(i64, i64)>,
) -> PyResult<Bound<'py, PyAny>> {
    let to_py = |e: crate::wire::DecodeError| to_py(py, e.into());
    let body = bytes::Bytes::copy_from_slice(json);
    let source = "from_dict";
    match (kind, item_kind) {
        ("SendResult", _) => send_result(
            py,
            &SendResult::from_answer(body, source).map_err(to_py)?,
            None,
        ),
        ("BusinessAccount", _) => business_account(
            py,
            &BusinessAccount::from_answer(body, source).map_err(to_py)?,
        ),
        ("BusinessPhoneNumber", _) => phone_number(
            py,
            &BusinessPhoneNumber::from_answer(body, source).map_err(to_py)?,
        ),
        ("Page", Some("BusinessAccount")) => {
            let decoded =
                Page::<BusinessAccount>::from_answer(body, fallbacks.unwrap_or((1, 20)), source)
                    .map_err(to_py)?;
            page(py, &decoded, None, PageKind::Sync)
        }
        ("Page", Some("BusinessPhoneNumber")) => {
            let decoded = Page::<BusinessPhoneNumber>::from_answer(
                body,
                fallbacks.unwrap_or((1, 20)),
                source,
            )
            .map_err(to_py)?;
            page(py, &decoded, None, PageKind::Sync)
        }
        (other, item) => Err(super::errors::to_py(
            py,
            Error::validation("kind", format!("unknown model {other:?} (items {item:?})")),
        )),
    }
}
