//! `_native.SandboxServer`: the embedded service (`crate::sandbox`) for `bizmsg.testing`.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::convert;
use super::errors::to_py;
use super::runtime::runtime;
use crate::error::Error;
use crate::sandbox::{Fault, FaultPlan, RecordedRequest, Route, Sandbox, SandboxConfig, SeedData};

#[pyclass(frozen, module = "bizmsg._native")]
pub(crate) struct SandboxServer {
    sandbox: Sandbox,
}

fn seconds(name: &str, value: f64) -> Result<Duration, Error> {
    if !value.is_finite() || value < 0.0 {
        return Err(Error::validation(
            name,
            format!("must be 0 or more seconds, got {value}"),
        ));
    }
    Duration::try_from_secs_f64(value).map_err(|_| Error::validation(name, "is out of range"))
}

#[pymethods]
impl SandboxServer {
    #[new]
    #[pyo3(signature = (*, host, port, seed, tenants, accounts_per_tenant, numbers_per_account, delay, enforce_limits, max_logged_requests, seed_data, honour_idempotency_keys))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        host: String,
        port: u16,
        seed: u64,
        tenants: Vec<String>,
        accounts_per_tenant: usize,
        numbers_per_account: (usize, usize),
        delay: f64,
        enforce_limits: bool,
        max_logged_requests: Option<i64>,
        seed_data: Option<String>,
        honour_idempotency_keys: bool,
    ) -> PyResult<Self> {
        let config = || -> Result<SandboxConfig, Error> {
            if tenants.is_empty() && seed_data.is_none() {
                return Err(Error::validation(
                    "tenants",
                    "must name at least one tenant",
                ));
            }
            if numbers_per_account.0 > numbers_per_account.1 {
                return Err(Error::validation(
                    "numbers_per_account",
                    format!(
                        "({}, {}) is not a (low, high) range",
                        numbers_per_account.0, numbers_per_account.1
                    ),
                ));
            }
            Ok(SandboxConfig {
                host: host.parse().map_err(|_| {
                    Error::validation("host", format!("{host:?} is not an IP address"))
                })?,
                port,
                seed,
                tenants: tenants.clone(),
                accounts_per_tenant,
                numbers_per_account,
                delay: seconds("delay", delay)?,
                enforce_limits,
                max_logged_requests: match max_logged_requests {
                    None => None,
                    Some(n) => Some(usize::try_from(n).map_err(|_| {
                        Error::validation(
                            "max_logged_requests",
                            format!("must be 0 or more (or None: all), got {n}"),
                        )
                    })?),
                },
                fault_seed: seed,
                honour_idempotency_keys,
                data: match &seed_data {
                    Some(text) => Some(
                        SeedData::from_json(text).map_err(|e| Error::validation("seed_data", e))?,
                    ),
                    None => None,
                },
            })
        };
        let config = config().map_err(|e| to_py(py, e))?;
        let runtime = runtime().map_err(|e| to_py(py, e))?;
        let started = py.detach(|| runtime.block_on(Sandbox::start(config)));
        let sandbox = started.map_err(|e| {
            to_py(
                py,
                Error::Configuration(format!("the sandbox could not start: {e}")),
            )
        })?;
        Ok(SandboxServer { sandbox })
    }

    #[getter]
    fn base_url(&self) -> String {
        self.sandbox.base_url()
    }

    #[getter]
    fn port(&self) -> u16 {
        self.sandbox.local_addr().port()
    }

    #[getter]
    fn token(&self) -> String {
        self.sandbox.token()
    }

    #[getter]
    fn tenant_tokens(&self) -> Vec<(String, String)> {
        self.sandbox.tenant_tokens()
    }

    fn requests<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        records(py, self.sandbox.requests())
    }

    fn sent_messages<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        records(py, self.sandbox.sent_messages())
    }

    fn clear_requests(&self) {
        self.sandbox.clear_requests();
    }

    fn set_delay(&self, py: Python<'_>, delay: f64) -> PyResult<()> {
        self.sandbox
            .set_delay(seconds("delay", delay).map_err(|e| to_py(py, e))?);
        Ok(())
    }

    #[pyo3(signature = (*, route, times, every, probability, status, headers, body, body_bytes, chunked, delay, cut_connection))]
    #[allow(clippy::too_many_arguments)]
    fn inject(
        &self,
        py: Python<'_>,
        route: String,
        times: Option<usize>,
        every: usize,
        probability: f64,
        status: Option<u16>,
        headers: Vec<(String, String)>,
        body: Option<String>,
        body_bytes: Option<usize>,
        chunked: bool,
        delay: f64,
        cut_connection: bool,
    ) -> PyResult<()> {
        let fault = || -> Result<(Route, Fault), Error> {
            let route: Route = route
                .parse()
                .map_err(|e: String| Error::validation("route", e))?;
            if times == Some(0) {
                return Err(Error::validation(
                    "times",
                    "must be 1 or more (or None: every matching request)",
                ));
            }
            let fault = Fault {
                times,
                every,
                probability,
                status,
                headers,
                body,
                body_bytes,
                chunked,
                delay: seconds("delay", delay)?,
                cut_connection,
            };
            fault
                .check()
                .map_err(|why| Error::validation("fault", why))?;
            Ok((route, fault))
        };
        let (route, fault) = fault().map_err(|e| to_py(py, e))?;
        self.sandbox.inject(route, fault);
        Ok(())
    }

    /// Queues the faults of a fault file's JSON text.
    fn load_faults(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        let plan =
            FaultPlan::from_json(text).map_err(|e| to_py(py, Error::validation("faults", e)))?;
        self.sandbox.load_faults(plan);
        Ok(())
    }

    /// Per sender: messages committed, the most in one second, throughput refusals; and how
    /// many recipients got more than one message.
    fn traffic<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.sandbox.traffic();
        let senders = PyList::empty(py);
        for sender in report.senders {
            let entry = PyDict::new(py);
            entry.set_item("sender", sender.sender)?;
            entry.set_item("accepted", sender.accepted)?;
            entry.set_item("busiest_second", sender.busiest_second)?;
            entry.set_item("throttled", sender.throttled)?;
            senders.append(entry)?;
        }
        let dict = PyDict::new(py);
        dict.set_item("senders", senders)?;
        dict.set_item("repeated_recipients", report.repeated_recipients)?;
        dict.set_item("most_to_one_recipient", report.most_to_one_recipient)?;
        Ok(dict)
    }

    /// Counts of what the sandbox answered since it started.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.sandbox.stats();
        let dict = PyDict::new(py);
        dict.set_item("requests", stats.requests)?;
        dict.set_item("sends", stats.sends)?;
        dict.set_item("accepted", stats.accepted)?;
        dict.set_item("failed_commits", stats.failed_commits)?;
        dict.set_item("replayed", stats.replayed)?;
        dict.set_item("throttled", stats.throttled)?;
        Ok(dict)
    }

    fn clear_faults(&self) {
        self.sandbox.clear_faults();
    }

    /// Waits (GIL released: the server's last log lines may need it) until the port is closed.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.sandbox.shutdown());
    }
}

fn records(py: Python<'_>, requests: Vec<RecordedRequest>) -> PyResult<Bound<'_, PyList>> {
    let list = PyList::empty(py);
    for request in requests {
        let record = PyDict::new(py);
        record.set_item("method", request.method)?;
        record.set_item("path", request.path)?;
        record.set_item("query", request.query)?;
        let headers = PyDict::new(py);
        for (name, value) in request.headers {
            headers.set_item(name, value)?;
        }
        record.set_item("headers", headers)?;
        let body = match &request.body {
            Some(body) => convert::value_to_py(py, body)?,
            None => py.None().into_bound(py),
        };
        record.set_item("body", body)?;
        record.set_item("body_text", request.body_text)?;
        record.set_item("tenant", request.tenant)?;
        record.set_item("status", request.status)?;
        let response_body = match &request.response_body {
            Some(body) => convert::value_to_py(py, body)?,
            None => py.None().into_bound(py),
        };
        record.set_item("response_body", response_body)?;
        record.set_item("idempotent_replay", request.idempotent_replay)?;
        record.set_item("request_id", request.request_id)?;
        record.set_item("connection", request.connection)?;
        list.append(record)?;
    }
    Ok(list)
}
