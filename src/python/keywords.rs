//! The keyword arguments of the native methods that take many: each method receives them as
//! `**options` and reads them into one struct here, by name (`#[derive(FromPyObject)]` over the
//! dict). A call cannot swap two of them by position, and a misspelled or missing one is a
//! `TypeError` that names it, as for any Python function. The sends, the hot path, take
//! keyword-only parameters instead (the same guarantees, without the dict).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// The keyword arguments `options` of `function` read into `T`, whose fields are `names`.
pub(crate) fn keywords<'a, 'py, T: FromPyObject<'a, 'py>>(
    function: &str,
    names: &[&str],
    options: Option<&'a Bound<'py, PyDict>>,
) -> PyResult<T> {
    let Some(options) = options else {
        return Err(PyTypeError::new_err(format!(
            "{function}() takes keyword arguments only: {}",
            names.join(", ")
        )));
    };
    for key in options.keys() {
        let known = key
            .cast::<PyString>()
            .ok()
            .and_then(|key| key.to_str().ok().map(|key| names.contains(&key)))
            .unwrap_or(false);
        if !known {
            return Err(PyTypeError::new_err(format!(
                "{function}() got an unexpected keyword argument {}",
                key.repr().map(|r| r.to_string()).unwrap_or_default()
            )));
        }
    }
    if let Some(missing) = names
        .iter()
        .find(|name| !options.contains(**name).unwrap_or(false))
    {
        return Err(PyTypeError::new_err(format!(
            "{function}() missing required keyword argument {missing:?}"
        )));
    }
    options.as_any().extract::<T>().map_err(|error| {
        // The derived extraction names the field; its cause says what was wrong with it.
        let error: PyErr = error.into();
        let py = options.py();
        let cause = error
            .cause(py)
            .map(|cause| format!(": {cause}"))
            .unwrap_or_default();
        PyTypeError::new_err(format!("{function}(): {error}{cause}"))
    })
}

/// `NativeClient(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct ClientArgs<'py> {
    pub token: Bound<'py, PyAny>,
    pub base_url: Bound<'py, PyAny>,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
    pub success_codes: Option<Vec<String>>,
    pub default_headers: Bound<'py, PyDict>,
    pub on_retry: Option<Py<PyAny>>,
    pub proxy: Option<String>,
    pub verify: Bound<'py, PyAny>,
    pub allow_insecure_http: bool,
    pub max_response_bytes: Bound<'py, PyAny>,
    pub shared_limits: Option<String>,
    pub idempotent_sends: bool,
}

impl ClientArgs<'_> {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "token",
        "base_url",
        "timeout",
        "max_retries",
        "success_codes",
        "default_headers",
        "on_retry",
        "proxy",
        "verify",
        "allow_insecure_http",
        "max_response_bytes",
        "shared_limits",
        "idempotent_sends",
    ];
}

/// The arguments of `send` and `send_async`: keyword-only parameters of their own (the hot
/// path: pyo3 matches them without a dict, see `client.rs`), gathered here for `send_args`.
pub(crate) struct SendArgs<'py> {
    pub to: Bound<'py, PyAny>,
    pub from_: Bound<'py, PyAny>,
    pub name: Bound<'py, PyAny>,
    pub parameters: Bound<'py, PyAny>,
    pub language: Bound<'py, PyAny>,
    pub raw: bool,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
    pub idempotency_key: Option<String>,
}

/// `list(**options)`, `list_async(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct ListArgs<'py> {
    pub kind: super::client::Listing,
    pub page_no: Bound<'py, PyAny>,
    pub page_size: Bound<'py, PyAny>,
    pub raw: bool,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
}

impl ListArgs<'_> {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "kind",
        "page_no",
        "page_size",
        "raw",
        "timeout",
        "max_retries",
    ];
}

/// `pages(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct PagesArgs<'py> {
    pub kind: super::client::Listing,
    pub page_no: Bound<'py, PyAny>,
    pub page_size: Bound<'py, PyAny>,
    pub limit: Bound<'py, PyAny>,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
}

impl PagesArgs<'_> {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "kind",
        "page_no",
        "page_size",
        "limit",
        "timeout",
        "max_retries",
    ];
}

/// `campaign(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct CampaignArgs<'py> {
    pub concurrency: Bound<'py, PyAny>,
    pub rate_limit: Option<f64>,
    pub pace: Option<String>,
    pub stop_on_error: bool,
    pub dedupe: bool,
    pub journal: Option<String>,
    pub campaign_id: Option<String>,
    pub resend_unknown: bool,
    pub enforce_tier: bool,
    pub lease: Option<f64>,
    pub unreachable_after: Option<Bound<'py, PyAny>>,
    pub unreachable_for: f64,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
}

impl CampaignArgs<'_> {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "concurrency",
        "rate_limit",
        "pace",
        "stop_on_error",
        "dedupe",
        "journal",
        "campaign_id",
        "resend_unknown",
        "enforce_tier",
        "lease",
        "unreachable_after",
        "unreachable_for",
        "timeout",
        "max_retries",
    ];
}

/// `planner(**options)`, `planner_async(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct PlanArgs<'py> {
    pub rate_limit: Option<f64>,
    pub pace: Option<String>,
    pub dedupe: bool,
    pub timeout: Bound<'py, PyAny>,
    pub max_retries: Bound<'py, PyAny>,
}

impl PlanArgs<'_> {
    pub(crate) const NAMES: &'static [&'static str] =
        &["rate_limit", "pace", "dedupe", "timeout", "max_retries"];
}

/// `SandboxServer(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct SandboxArgs {
    pub host: String,
    pub port: u16,
    pub seed: u64,
    pub tenants: Vec<String>,
    pub accounts_per_tenant: usize,
    pub numbers_per_account: (usize, usize),
    pub delay: f64,
    pub enforce_limits: bool,
    pub max_logged_requests: Option<i64>,
    pub seed_data: Option<String>,
    pub honour_idempotency_keys: bool,
}

impl SandboxArgs {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "host",
        "port",
        "seed",
        "tenants",
        "accounts_per_tenant",
        "numbers_per_account",
        "delay",
        "enforce_limits",
        "max_logged_requests",
        "seed_data",
        "honour_idempotency_keys",
    ];
}

/// `SandboxServer.inject(**options)`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct FaultArgs {
    pub route: String,
    pub times: Option<usize>,
    pub every: usize,
    pub probability: f64,
    pub status: Option<u16>,
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    pub body_bytes: Option<usize>,
    pub chunked: bool,
    pub delay: f64,
    pub cut_connection: bool,
}

impl FaultArgs {
    pub(crate) const NAMES: &'static [&'static str] = &[
        "route",
        "times",
        "every",
        "probability",
        "status",
        "headers",
        "body",
        "body_bytes",
        "chunked",
        "delay",
        "cut_connection",
    ];
}
