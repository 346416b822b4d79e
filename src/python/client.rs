//! `_native.NativeClient`: the Python face of [`crate::Client`]. It converts arguments in,
//! waits (sync) or bridges (async), and builds dataclasses out; nothing else.

use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use super::callbacks::{PyRetryHook, PyTokenProvider};
use super::convert;
use super::errors::to_py;
use super::pages::{NativePageStream, Stream};
use super::runtime::{awaitable, wait, Reply, Waited};
use crate::api::{idempotency_key, PageRequest, PageStream, Pager, SendMessage};
use crate::client::{CallOptions, ClientConfig, Response, RetryObserver, TokenSource, Verify};
use crate::error::Error;
use crate::wire::{Page, SendRequest, SendResult};
use crate::{Client, Timeout};

#[pyclass(frozen, module = "bizmsg._native")]
pub(crate) struct NativeClient {
    client: Client,
}

/// Which listing `list`, `list_async` and `pages` read (each Python resource passes its own).
#[pyclass(eq, eq_int, frozen, from_py_object, module = "bizmsg._native")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    BusinessAccounts,
    BusinessPhoneNumbers,
}

#[pymethods]
impl NativeClient {
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        token: &Bound<'_, PyAny>,
        base_url: &Bound<'_, PyAny>,
        timeout: &Bound<'_, PyAny>,
        max_retries: &Bound<'_, PyAny>,
        success_codes: Option<Vec<String>>,
        default_headers: &Bound<'_, PyDict>,
        on_retry: Option<Py<PyAny>>,
        proxy: Option<String>,
        verify: &Bound<'_, PyAny>,
        allow_insecure_http: bool,
    ) -> PyResult<Self> {
        let build = || -> Result<ClientConfig, Error> {
            let token = if let Ok(text) = token.cast::<PyString>() {
                TokenSource::Static(
                    text.to_str()
                        .map_err(|_| {
                            Error::Configuration("the token is not valid UTF-8".to_owned())
                        })?
                        .to_owned(),
                )
            } else if token.is_callable() {
                TokenSource::Provider(Arc::new(PyTokenProvider {
                    callable: Arc::new(token.clone().unbind()),
                }))
            } else {
                return Err(Error::Configuration(
                    "token must be a string or a callable returning one".to_owned(),
                ));
            };
            let mut config = ClientConfig::new(text("base_url", base_url)?, token);
            config.timeout = timeout_arg(timeout)?
                .map(|t| Timeout::default().overridden_by(t))
                .unwrap_or_default();
            config.max_retries = retries(max_retries)?;
            if let Some(codes) = success_codes {
                config.success_codes = codes;
            }
            config.default_headers = headers(default_headers)?;
            config.retry_observer = on_retry.map(observer);
            config.proxy = proxy;
            config.verify = verify_arg(verify)?;
            config.allow_insecure_http = allow_insecure_http;
            Ok(config)
        };
        let config = build().map_err(|e| to_py(py, e))?;
        // Building the pool loads the platform's trust store: not with the GIL held.
        let client = py
            .detach(|| Client::new(config))
            .map_err(|e| to_py(py, e))?;
        Ok(NativeClient { client })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.client.base_url().to_owned()
    }

    #[getter]
    fn max_retries(&self) -> u32 {
        self.client.max_retries()
    }

    #[getter]
    fn timeout(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let t = self.client.timeout();
        let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
        (secs(t.connect), secs(t.read), secs(t.total))
    }

    #[getter]
    fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn close(&self) {
        self.client.close();
    }

    fn with_options(
        &self,
        py: Python<'_>,
        timeout: &Bound<'_, PyAny>,
        max_retries: &Bound<'_, PyAny>,
        headers_: &Bound<'_, PyDict>,
        on_retry: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let build = || -> Result<Client, Error> {
            let max_retries = if max_retries.is_none() {
                None
            } else {
                Some(retries(max_retries)?)
            };
            self.client.with_options(
                timeout_arg(timeout)?,
                max_retries,
                &headers(headers_)?,
                on_retry.map(observer),
            )
        };
        let client = build().map_err(|e| to_py(py, e))?;
        Ok(NativeClient { client })
    }

    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        to: &Bound<'_, PyAny>,
        from_: &Bound<'_, PyAny>,
        name: &Bound<'_, PyAny>,
        parameters: &Bound<'_, PyAny>,
        language: &Bound<'_, PyAny>,
        raw: bool,
        timeout: &Bound<'_, PyAny>,
        max_retries: &Bound<'_, PyAny>,
        idempotency_key: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let (request, key, call) = send_args(
            to,
            from_,
            name,
            parameters,
            language,
            timeout,
            max_retries,
            idempotency_key,
        )
        .map_err(|e| to_py(py, e))?;
        match wait(py, self.client.send_request(request, key.clone(), &call)) {
            Waited::Done(result) => send_reply(py, result, raw),
            Waited::Interrupted(interrupt) => {
                // The request may already be with the service: say how to reconcile it.
                let note = format!(
                    "bizmsg: the interrupted send may have reached the service; it went out \
                     with Idempotency-Key {key:?}"
                );
                note_on(py, &interrupt, &note);
                Err(interrupt)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn send_async<'py>(
        &self,
        py: Python<'py>,
        to: &Bound<'py, PyAny>,
        from_: &Bound<'py, PyAny>,
        name: &Bound<'py, PyAny>,
        parameters: &Bound<'py, PyAny>,
        language: &Bound<'py, PyAny>,
        raw: bool,
        timeout: &Bound<'py, PyAny>,
        max_retries: &Bound<'py, PyAny>,
        idempotency_key: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (request, key, call) = send_args(
            to,
            from_,
            name,
            parameters,
            language,
            timeout,
            max_retries,
            idempotency_key,
        )
        .map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        awaitable(py, async move {
            let result =
                super::runtime::catch_panics(client.send_request(request, key, &call)).await;
            Reply::new(move |py| send_reply(py, result, raw))
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn list(
        &self,
        py: Python<'_>,
        kind: Listing,
        page_no: &Bound<'_, PyAny>,
        page_size: &Bound<'_, PyAny>,
        raw: bool,
        timeout: &Bound<'_, PyAny>,
        max_retries: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let (page, call) =
            list_args(page_no, page_size, timeout, max_retries).map_err(|e| to_py(py, e))?;
        match kind {
            Listing::BusinessAccounts => {
                match wait(py, self.client.list_business_accounts(page, &call)) {
                    Waited::Done(result) => page_reply(py, result, raw),
                    Waited::Interrupted(interrupt) => Err(interrupt),
                }
            }
            Listing::BusinessPhoneNumbers => {
                match wait(py, self.client.list_business_phone_numbers(page, &call)) {
                    Waited::Done(result) => page_reply(py, result, raw),
                    Waited::Interrupted(interrupt) => Err(interrupt),
                }
            }
        }
    }

    /// A stream of pages from `page_no` on, reading one page ahead; stops once `limit` items
    /// were delivered.
    #[allow(clippy::too_many_arguments)]
    fn pages(
        &self,
        py: Python<'_>,
        kind: Listing,
        page_no: &Bound<'_, PyAny>,
        page_size: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
        timeout: &Bound<'_, PyAny>,
        max_retries: &Bound<'_, PyAny>,
    ) -> PyResult<NativePageStream> {
        let args = || -> Result<_, Error> {
            let (page, call) = list_args(page_no, page_size, timeout, max_retries)?;
            let limit = if limit.is_none() {
                None
            } else {
                let n = integer("limit", limit)?;
                Some(u64::try_from(n).map_err(|_| {
                    Error::validation("limit", format!("must be 0 or more, got {n}"))
                })?)
            };
            Ok((page, call, limit))
        };
        let (page, call, limit) = args().map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        let stream = match kind {
            Listing::BusinessAccounts => Stream::Accounts(PageStream::new(
                client,
                Pager::BusinessAccounts,
                page,
                limit,
                call,
            )),
            Listing::BusinessPhoneNumbers => Stream::Numbers(PageStream::new(
                client,
                Pager::BusinessPhoneNumbers,
                page,
                limit,
                call,
            )),
        };
        Ok(NativePageStream::new(stream))
    }

    #[allow(clippy::too_many_arguments)]
    fn list_async<'py>(
        &self,
        py: Python<'py>,
        kind: Listing,
        page_no: &Bound<'py, PyAny>,
        page_size: &Bound<'py, PyAny>,
        raw: bool,
        timeout: &Bound<'py, PyAny>,
        max_retries: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (page, call) =
            list_args(page_no, page_size, timeout, max_retries).map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        match kind {
            Listing::BusinessAccounts => awaitable(py, async move {
                let result =
                    super::runtime::catch_panics(client.list_business_accounts(page, &call)).await;
                Reply::new(move |py| page_reply(py, result, raw))
            }),
            Listing::BusinessPhoneNumbers => awaitable(py, async move {
                let result =
                    super::runtime::catch_panics(client.list_business_phone_numbers(page, &call))
                        .await;
                Reply::new(move |py| page_reply(py, result, raw))
            }),
        }
    }
}

/// Adds `note` to an exception: `add_note` (Python 3.11+, shown in tracebacks), else the
/// `__notes__` list it would have filled (3.10: visible to code, not in the traceback).
fn note_on(py: Python<'_>, error: &PyErr, note: &str) {
    let value = error.value(py);
    if value.call_method1("add_note", (note,)).is_err() {
        let _ = value.setattr("__notes__", vec![note]);
    }
}

fn observer(callable: Py<PyAny>) -> Arc<dyn RetryObserver> {
    Arc::new(PyRetryHook {
        callable: Arc::new(callable),
    })
}

fn send_reply(
    py: Python<'_>,
    result: crate::Result<Response<SendResult>>,
    raw: bool,
) -> PyResult<Py<PyAny>> {
    let response = result.map_err(|e| to_py(py, e))?;
    if raw {
        return Ok(convert::map_to_dict(py, &response.value.wire)?
            .into_any()
            .unbind());
    }
    Ok(convert::send_result(py, &response.value, Some(&response.meta))?.unbind())
}

fn page_reply<T: convert::PyItem>(
    py: Python<'_>,
    result: crate::Result<Response<Page<T>>>,
    raw: bool,
) -> PyResult<Py<PyAny>> {
    let response = result.map_err(|e| to_py(py, e))?;
    Ok(convert::page(py, &response.value, Some(&response.meta), raw)?.unbind())
}

#[allow(clippy::too_many_arguments)]
fn send_args(
    to: &Bound<'_, PyAny>,
    from_: &Bound<'_, PyAny>,
    name: &Bound<'_, PyAny>,
    parameters: &Bound<'_, PyAny>,
    language: &Bound<'_, PyAny>,
    timeout: &Bound<'_, PyAny>,
    max_retries: &Bound<'_, PyAny>,
    chosen_key: Option<String>,
) -> Result<(SendRequest, String, CallOptions), Error> {
    let message = SendMessage {
        to: text("to", to)?,
        from: text("from_", from_)?,
        template_name: text("template.name", name)?,
        parameters: convert::py_to_value("template.parameters", parameters)?,
        language: text("template.language", language)?,
    };
    // Validated here, once, on the caller's thread, so a bad argument raises at the call.
    let request = message.validate()?;
    let key = idempotency_key(chosen_key.as_deref())?;
    let call = call_options(timeout, max_retries, None)?;
    Ok((request, key, call))
}

fn list_args(
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

fn call_options(
    timeout: &Bound<'_, PyAny>,
    max_retries: &Bound<'_, PyAny>,
    idempotency_key: Option<String>,
) -> Result<CallOptions, Error> {
    Ok(CallOptions {
        timeout: timeout_arg(timeout)?,
        max_retries: if max_retries.is_none() {
            None
        } else {
            Some(retries(max_retries)?)
        },
        idempotency_key,
    })
}

fn text(field: &str, value: &Bound<'_, PyAny>) -> Result<String, Error> {
    let type_name = || {
        value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    };
    value
        .cast::<PyString>()
        .map_err(|_| Error::validation(field, format!("must be a string, got {}", type_name())))?
        .to_str()
        .map(str::to_owned)
        .map_err(|_| Error::validation(field, "is not valid UTF-8"))
}

fn integer(field: &str, value: &Bound<'_, PyAny>) -> Result<i64, Error> {
    if value.cast::<PyBool>().is_ok() || value.cast::<PyInt>().is_err() {
        let type_name = value
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        return Err(Error::validation(
            field,
            format!("must be an int, got {type_name}"),
        ));
    }
    value
        .extract::<i64>()
        .map_err(|_| Error::validation(field, "is out of range"))
}

fn retries(value: &Bound<'_, PyAny>) -> Result<u32, Error> {
    let n = integer("max_retries", value)?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= 100)
        .ok_or_else(|| Error::validation("max_retries", format!("must be from 0 to 100, got {n}")))
}

/// `None`, a number of seconds (total), or a `bizmsg.Timeout` (any object with `connect`,
/// `read` and `total`).
fn timeout_arg(value: &Bound<'_, PyAny>) -> Result<Option<Timeout>, Error> {
    if value.is_none() {
        return Ok(None);
    }
    let seconds = |name: &str, v: &Bound<'_, PyAny>| -> Result<Option<Duration>, Error> {
        if v.is_none() {
            return Ok(None);
        }
        let secs: f64 = v.extract().map_err(|_| {
            Error::Configuration(format!("timeout {name} must be a number of seconds"))
        })?;
        if !secs.is_finite() || secs <= 0.0 {
            return Err(Error::Configuration(format!(
                "timeout {name} must be a positive number of seconds, got {secs}"
            )));
        }
        Duration::try_from_secs_f64(secs)
            .map(Some)
            .map_err(|_| Error::Configuration(format!("timeout {name} is out of range")))
    };
    if value.cast::<PyInt>().is_ok() || value.extract::<f64>().is_ok() {
        return Ok(Some(Timeout {
            connect: None,
            read: None,
            total: seconds("total", value)?,
        }));
    }
    let part = |name: &str| -> Result<Option<Duration>, Error> {
        let attribute = value.getattr(name).map_err(|_| {
            Error::Configuration(
                "timeout must be a number of seconds or a bizmsg.Timeout".to_owned(),
            )
        })?;
        seconds(name, &attribute)
    };
    Ok(Some(Timeout {
        connect: part("connect")?,
        read: part("read")?,
        total: part("total")?,
    }))
}

fn headers(dict: &Bound<'_, PyDict>) -> Result<Vec<(String, String)>, Error> {
    dict.iter()
        .map(|(name, value)| {
            let name = name
                .extract::<String>()
                .map_err(|_| Error::Configuration("header names must be strings".to_owned()))?;
            let value = value.extract::<String>().map_err(|_| {
                Error::Configuration(format!("the value of header {name:?} must be a string"))
            })?;
            Ok((name, value))
        })
        .collect()
}

fn verify_arg(value: &Bound<'_, PyAny>) -> Result<Verify, Error> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(if flag.is_true() {
            Verify::Default
        } else {
            Verify::Disabled
        });
    }
    let path: std::path::PathBuf = value.extract().map_err(|_| {
        Error::Configuration("verify must be True, False or the path of a CA bundle".to_owned())
    })?;
    Ok(Verify::CaBundle(path))
}
