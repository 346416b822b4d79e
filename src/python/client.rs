//! `_native.NativeClient`: the Python face of [`crate::Client`]. It converts arguments in,
//! waits (sync) or bridges (async), and builds dataclasses out; nothing else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use super::args::{headers, integer, retries, text, timeout_arg, verify_arg};
use super::attempt_log::AttemptLog;
use super::call_args::{list_args, send_args, SendArgs};
use super::callbacks::{PyRetryHook, PyTokenProvider};
use super::campaign::options::{campaign_options, plan_args, CampaignArgs};
use super::campaign::{CampaignPlanner, CampaignRun};
use super::convert::PageKind;
use super::errors::to_py;
use super::event_loop::{blocks_the_loop, event_loop_running};
use super::loop_handoff::awaitable;
use super::pages::{NativePageStream, Stream};
use super::replies::{page_reply, raw_page_reply, send_reply};
use super::runtime::{wait, Reply, Waited};
use crate::api::{PageStream, Pager};
use crate::campaign::{Directory, Planner};
use crate::client::{ClientConfig, RetryObserver, TokenSource, TransportKind};
use crate::error::Error;
use crate::{Client, Timeout};

#[pyclass(frozen, module = "bizmsg._native")]
pub(crate) struct NativeClient {
    client: Client,
    /// Shared by the handles `with_options` derives, so the warning about blocking an event
    /// loop is logged once per client.
    warned_in_loop: Arc<AtomicBool>,
}

/// Which listing `list`, `list_async` and `pages` read (each Python resource passes its own).
#[pyclass(eq, eq_int, frozen, from_py_object, module = "bizmsg._native")]
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    BusinessAccounts,
    BusinessPhoneNumbers,
}

impl Listing {
    fn pager(self) -> Pager {
        match self {
            Listing::BusinessAccounts => Pager::BusinessAccounts,
            Listing::BusinessPhoneNumbers => Pager::BusinessPhoneNumbers,
        }
    }
}

#[pymethods]
impl NativeClient {
    #[new]
    #[pyo3(signature = (*, token, base_url, timeout, max_retries, success_codes, default_headers, on_retry, proxy, verify, allow_insecure_http, max_response_bytes, shared_limits, idempotent_sends))]
    #[allow(clippy::too_many_arguments)]
    fn new<'py>(
        py: Python<'py>,
        token: Bound<'py, PyAny>,
        base_url: Bound<'py, PyAny>,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
        success_codes: Option<Vec<String>>,
        default_headers: Bound<'py, PyDict>,
        on_retry: Option<Py<PyAny>>,
        proxy: Option<String>,
        verify: Bound<'py, PyAny>,
        allow_insecure_http: bool,
        max_response_bytes: Bound<'py, PyAny>,
        shared_limits: Option<String>,
        idempotent_sends: bool,
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
            let mut config = ClientConfig::new(text("base_url", &base_url)?, token);
            config.timeout = timeout_arg(&timeout)?
                .map(|t| Timeout::default().overridden_by(t))
                .unwrap_or_default();
            config.max_retries = retries(&max_retries)?;
            if let Some(codes) = success_codes {
                config.success_codes = codes;
            }
            config.default_headers = headers(&default_headers)?;
            config.retry_observer = on_retry.map(observer);
            config.proxy = proxy;
            config.verify = verify_arg(&verify)?;
            config.allow_insecure_http = allow_insecure_http;
            config.shared_limits = shared_limits;
            config.idempotent_sends = idempotent_sends;
            let cap = integer("max_response_bytes", &max_response_bytes)?;
            config.max_response_bytes = u64::try_from(cap)
                .ok()
                .filter(|cap| *cap >= 1)
                .ok_or_else(|| {
                    Error::validation(
                        "max_response_bytes",
                        format!("must be a number of bytes from 1 up, got {cap}"),
                    )
                })?;
            Ok(config)
        };
        let config = build().map_err(|e| to_py(py, e))?;
        // Building the pool loads the platform's trust store: not with the GIL held.
        let client = py
            .detach(|| Client::new(config))
            .map_err(|e| to_py(py, e))?;
        Ok(NativeClient {
            client,
            warned_in_loop: Arc::new(AtomicBool::new(false)),
        })
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
    fn max_response_bytes(&self) -> u64 {
        self.client.max_response_bytes()
    }

    /// `"http1"` or `"http2"`: which transport the client chose.
    #[getter]
    fn transport(&self) -> &'static str {
        match self.client.transport_kind() {
            TransportKind::Http1 => "http1",
            TransportKind::Http2 => "http2",
        }
    }

    #[getter]
    fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    fn close(&self) {
        self.client.close();
    }

    #[pyo3(signature = (*, timeout, max_retries, headers_, on_retry))]
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
        Ok(NativeClient {
            client,
            warned_in_loop: Arc::clone(&self.warned_in_loop),
        })
    }

    /// A handle for one traced call or campaign (`bizmsg.instrumentation`): its requests carry
    /// `headers_` (the trace context); it records in the returned log each attempt with
    /// `record_attempts`, a campaign's pauses, and which of a campaign's messages are traced on
    /// their own (`message_sample`, 0 to 1: their times and attempts come with their outcomes,
    /// `SendOutcome._take_trace`); `log_ids` (`(trace_id, span_id, sampled)`, hex as
    /// `opentelemetry-instrumentation-logging` writes them) go on the records logged while its
    /// calls or its campaign run.
    #[pyo3(signature = (*, headers_, record_attempts, message_sample=0.0, log_ids=None))]
    fn observed(
        &self,
        py: Python<'_>,
        headers_: &Bound<'_, PyDict>,
        record_attempts: bool,
        message_sample: f64,
        log_ids: Option<(String, String, bool)>,
    ) -> PyResult<(Self, AttemptLog)> {
        let observe = crate::client::Observe {
            attempts: record_attempts,
            message_sample,
            log_ids: log_ids.map(|(trace_id, span_id, sampled)| crate::client::LogIds {
                trace_id,
                span_id,
                sampled,
            }),
        };
        let (client, log) = headers(headers_)
            .and_then(|headers| self.client.observed(&headers, observe))
            .map_err(|e| to_py(py, e))?;
        Ok((
            NativeClient {
                client,
                warned_in_loop: Arc::clone(&self.warned_in_loop),
            },
            AttemptLog { log },
        ))
    }

    // Keyword-only parameters, as every native method takes: pyo3 matches them to parameters
    // without building a dict, and a call cannot swap two of them by position.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        *, to, from_, name, parameters, language, raw, timeout, max_retries, idempotency_key
    ))]
    fn send<'py>(
        &self,
        py: Python<'py>,
        to: Bound<'py, PyAny>,
        from_: Bound<'py, PyAny>,
        name: Bound<'py, PyAny>,
        parameters: Bound<'py, PyAny>,
        language: Bound<'py, PyAny>,
        raw: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
        idempotency_key: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let args = SendArgs {
            to,
            from_,
            name,
            parameters,
            language,
            raw,
            timeout,
            max_retries,
            idempotency_key,
        };
        let raw = args.raw;
        let (request, key, call) = send_args(args).map_err(|e| to_py(py, e))?;
        self.warn_if_in_event_loop(py);
        match wait(py, self.client.send_request(request, key.clone(), &call)) {
            Waited::Done(result) => send_reply(py, result, raw),
            Waited::Interrupted(interrupt) => {
                // The request may already be with the service: say how to reconcile it.
                let note = format!(
                    "bizmsg: the interrupted send may have reached the service; it went out \
                     with Idempotency-Key {key:?}"
                );
                note_on(py, &interrupt, &note);
                // For code, not only for eyes: `KeyboardInterrupt.idempotency_key`.
                let _ = interrupt.value(py).setattr("idempotency_key", &key);
                Err(interrupt)
            }
        }
    }

    // Keyword-only, as `send` (the hot path).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (
        *, to, from_, name, parameters, language, raw, timeout, max_retries, idempotency_key
    ))]
    fn send_async<'py>(
        &self,
        py: Python<'py>,
        to: Bound<'py, PyAny>,
        from_: Bound<'py, PyAny>,
        name: Bound<'py, PyAny>,
        parameters: Bound<'py, PyAny>,
        language: Bound<'py, PyAny>,
        raw: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
        idempotency_key: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = SendArgs {
            to,
            from_,
            name,
            parameters,
            language,
            raw,
            timeout,
            max_retries,
            idempotency_key,
        };
        let raw = args.raw;
        let (request, key, call) = send_args(args).map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        awaitable(py, async move {
            let result =
                super::runtime::catch_panics(client.send_request(request, key, &call)).await;
            Reply::new(move |py| send_reply(py, result, raw))
        })
    }

    #[pyo3(signature = (*, kind, page_no, page_size, raw, timeout, max_retries))]
    #[allow(clippy::too_many_arguments)]
    fn list<'py>(
        &self,
        py: Python<'py>,
        kind: super::client::Listing,
        page_no: Bound<'py, PyAny>,
        page_size: Bound<'py, PyAny>,
        raw: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let (page, call) =
            list_args(&page_no, &page_size, &timeout, &max_retries).map_err(|e| to_py(py, e))?;
        self.warn_if_in_event_loop(py);
        match (kind, raw) {
            (_, true) => wait(py, self.client.list_unread(kind.pager(), page, &call))
                .reply(|result| raw_page_reply(py, result)),
            (Listing::BusinessAccounts, false) => {
                wait(py, self.client.list_business_accounts(page, &call))
                    .reply(|result| page_reply(py, result, PageKind::Sync))
            }
            (Listing::BusinessPhoneNumbers, false) => {
                wait(py, self.client.list_business_phone_numbers(page, &call))
                    .reply(|result| page_reply(py, result, PageKind::Sync))
            }
        }
    }

    /// A stream of pages from `page_no` on, reading one page ahead; stops once `limit` items
    /// were delivered.
    #[pyo3(signature = (*, kind, page_no, page_size, limit, timeout, max_retries))]
    #[allow(clippy::too_many_arguments)]
    fn pages<'py>(
        &self,
        py: Python<'py>,
        kind: super::client::Listing,
        page_no: Bound<'py, PyAny>,
        page_size: Bound<'py, PyAny>,
        limit: Bound<'py, PyAny>,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
    ) -> PyResult<NativePageStream> {
        let args = || -> Result<_, Error> {
            let (page, call) = list_args(&page_no, &page_size, &timeout, &max_retries)?;
            let limit = if limit.is_none() {
                None
            } else {
                let n = integer("limit", &limit)?;
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

    #[pyo3(signature = (*, kind, page_no, page_size, raw, timeout, max_retries))]
    #[allow(clippy::too_many_arguments)]
    fn list_async<'py>(
        &self,
        py: Python<'py>,
        kind: super::client::Listing,
        page_no: Bound<'py, PyAny>,
        page_size: Bound<'py, PyAny>,
        raw: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (page, call) =
            list_args(&page_no, &page_size, &timeout, &max_retries).map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        match (kind, raw) {
            (_, true) => awaitable(py, async move {
                let result =
                    super::runtime::catch_panics(client.list_unread(kind.pager(), page, &call))
                        .await;
                Reply::new(move |py| raw_page_reply(py, result))
            }),
            (Listing::BusinessAccounts, false) => awaitable(py, async move {
                let result =
                    super::runtime::catch_panics(client.list_business_accounts(page, &call)).await;
                Reply::new(move |py| page_reply(py, result, PageKind::Async))
            }),
            (Listing::BusinessPhoneNumbers, false) => awaitable(py, async move {
                let result =
                    super::runtime::catch_panics(client.list_business_phone_numbers(page, &call))
                        .await;
                Reply::new(move |py| page_reply(py, result, PageKind::Async))
            }),
        }
    }

    /// Starts a campaign (`send_many`); the Python driver feeds and polls the run.
    #[pyo3(signature = (*, concurrency, rate_limit, pace, stop_on_error, dedupe, journal, campaign_id, resend_unknown, enforce_tier, lease, unreachable_after, unreachable_for, timeout, max_retries, in_loop=false))]
    #[allow(clippy::too_many_arguments)]
    fn campaign<'py>(
        &self,
        py: Python<'py>,
        concurrency: Bound<'py, PyAny>,
        rate_limit: Option<f64>,
        pace: Option<String>,
        stop_on_error: bool,
        dedupe: bool,
        journal: Option<String>,
        campaign_id: Option<String>,
        resend_unknown: bool,
        enforce_tier: bool,
        lease: Option<f64>,
        unreachable_after: Option<Bound<'py, PyAny>>,
        unreachable_for: f64,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
        in_loop: bool,
    ) -> PyResult<CampaignRun> {
        let options = campaign_options(CampaignArgs {
            concurrency: &concurrency,
            rate_limit,
            pace: pace.as_deref(),
            stop_on_error,
            dedupe,
            journal: journal.as_deref(),
            campaign_id,
            resend_unknown,
            enforce_tier,
            lease,
            unreachable_after: unreachable_after.as_ref(),
            unreachable_for,
            timeout: &timeout,
            max_retries: &max_retries,
        });
        let options = options.map_err(|e| to_py(py, e))?;
        if self.client.is_closed() {
            return Err(to_py(py, Error::Closed));
        }
        // An async caller's campaign calls back into Python on the caller's loop.
        let locals = if in_loop {
            Some(super::loop_handoff::running_locals(py)?)
        } else {
            None
        };
        CampaignRun::start(self.client.clone(), options, locals).map_err(|e| to_py(py, e))
    }

    /// A campaign's preflight: looks the senders up (one account listing), then checks what
    /// it is fed.
    #[pyo3(signature = (*, rate_limit, pace, dedupe, timeout, max_retries))]
    fn planner<'py>(
        &self,
        py: Python<'py>,
        rate_limit: Option<f64>,
        pace: Option<String>,
        dedupe: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
    ) -> PyResult<CampaignPlanner> {
        let (options, call) =
            plan_args(rate_limit, pace.as_deref(), dedupe, &timeout, &max_retries)
                .map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        wait(py, async move { Directory::fetch(&client, &call).await }).reply(|directory| {
            let directory = directory.map_err(|e| to_py(py, e))?;
            Ok(CampaignPlanner::new(Planner::new(options, directory)))
        })
    }

    /// Awaitable `planner`.
    #[pyo3(signature = (*, rate_limit, pace, dedupe, timeout, max_retries))]
    fn planner_async<'py>(
        &self,
        py: Python<'py>,
        rate_limit: Option<f64>,
        pace: Option<String>,
        dedupe: bool,
        timeout: Bound<'py, PyAny>,
        max_retries: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (options, call) =
            plan_args(rate_limit, pace.as_deref(), dedupe, &timeout, &max_retries)
                .map_err(|e| to_py(py, e))?;
        let client = self.client.clone();
        awaitable(py, async move {
            let directory = super::runtime::catch_panics(Directory::fetch(&client, &call)).await;
            Reply::new(move |py| {
                let directory = directory.map_err(|e| to_py(py, e))?;
                Ok(
                    Bound::new(py, CampaignPlanner::new(Planner::new(options, directory)))?
                        .into_any()
                        .unbind(),
                )
            })
        })
    }
}

impl NativeClient {
    /// A sync call made on a thread whose asyncio loop is running (a notebook cell, an
    /// `async def`) blocks that loop for the whole call: said once per client, as a WARNING.
    fn warn_if_in_event_loop(&self, py: Python<'_>) {
        if self.warned_in_loop.load(Ordering::Relaxed)
            || !event_loop_running(py)
            || !blocks_the_loop(py)
        {
            return;
        }
        if !self.warned_in_loop.swap(true, Ordering::Relaxed) {
            log::warn!(
                target: "bizmsg",
                "a synchronous bizmsg call was made while an asyncio event loop is running on \
                 this thread (a notebook cell or an async function): the loop is blocked until \
                 the call returns. Use bizmsg.AsyncClient and await its calls there."
            );
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
