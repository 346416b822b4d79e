//! Python callables the core calls back: a token provider and the `on_retry` hook.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use pyo3::prelude::*;
use pyo3::types::PyString;

use super::errors;
use super::runtime::BizmsgRuntime;
use crate::client::{RetryObserver, TokenProvider};
use crate::error::{Error, Foreign};
use pyo3_async_runtimes::generic::ContextExt;

/// `token=callable`: called for each call's token, and again after a 401. An `AsyncClient`
/// may give an async callable; its coroutine is awaited on the caller's event loop.
pub(crate) struct PyTokenProvider {
    pub callable: Arc<Py<PyAny>>,
}

enum Produced {
    Token(String),
    Pending(std::pin::Pin<Box<dyn std::future::Future<Output = PyResult<Py<PyAny>>> + Send>>),
}

/// What the token callable raised, kept whole so Python gets the original back.
fn failed(error: PyErr) -> Error {
    Error::TokenProvider {
        message: error.to_string(),
        cause: Foreign(Arc::new(error)),
    }
}

fn as_token(object: &Bound<'_, PyAny>) -> Result<String, Error> {
    object
        .cast::<PyString>()
        .map_err(|_| {
            Error::Configuration(format!(
                "the token callable returned {}, not a string",
                object
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })?
        .to_str()
        .map(str::to_owned)
        .map_err(failed)
}

impl TokenProvider for PyTokenProvider {
    fn token(&self, _refresh: bool) -> BoxFuture<'static, Result<String, Error>> {
        let callable = Arc::clone(&self.callable);
        Box::pin(async move {
            if super::runtime::exiting() {
                return Err(Error::Internal(
                    "the Python interpreter is exiting".to_owned(),
                ));
            }
            let produced = Python::attach(|py| -> Result<Produced, Error> {
                let out = callable.bind(py).call0().map_err(failed)?;
                if out.hasattr("__await__").map_err(failed)? {
                    let Some(locals) = BizmsgRuntime::get_task_locals() else {
                        return Err(Error::Configuration(
                            "the token callable is async, and this call has no event loop to await \
                             it on: a Client needs a plain callable (use AsyncClient), and an \
                             AsyncClient's send_many_iter must be called inside the running \
                             loop that iterates it"
                                .to_owned(),
                        ));
                    };
                    let future = pyo3_async_runtimes::into_future_with_locals(&locals, out)
                        .map_err(failed)?;
                    return Ok(Produced::Pending(Box::pin(future)));
                }
                as_token(&out).map(Produced::Token)
            })?;
            match produced {
                Produced::Token(token) => Ok(token),
                Produced::Pending(future) => {
                    let out = future.await.map_err(failed)?;
                    Python::attach(|py| as_token(out.bind(py)))
                }
            }
        })
    }
}

/// `on_retry(attempt, error, delay)`: told before each retry's wait. An exception it raises
/// is reported as unraisable and does not stop the retry.
pub(crate) struct PyRetryHook {
    pub callable: Arc<Py<PyAny>>,
}

impl RetryObserver for PyRetryHook {
    /// Sync calls run the hook on the calling thread (a page read ahead in the background: on
    /// a runtime thread). Async calls schedule it on their event loop
    /// (`call_soon_threadsafe`), where it may touch asyncio objects, instead of running it on
    /// a runtime worker it would block; it runs there as soon as the loop is free, which may
    /// be after a short retry has started.
    fn on_retry(&self, attempt: u32, error: &Error, delay: Duration) {
        if super::runtime::exiting() {
            return;
        }
        let locals = BizmsgRuntime::get_task_locals();
        Python::attach(|py| {
            let exception = errors::to_py(py, error.clone());
            let callable = self.callable.bind(py);
            let (value, seconds) = (exception.value(py).clone(), delay.as_secs_f64());
            let outcome = match &locals {
                Some(locals) => {
                    let event_loop = locals.event_loop(py);
                    // A read-ahead may outlive its loop: then there is nobody left to tell.
                    if event_loop
                        .call_method0("is_closed")
                        .and_then(|closed| closed.is_truthy())
                        .unwrap_or(true)
                    {
                        return;
                    }
                    event_loop
                        .call_method1("call_soon_threadsafe", (callable, attempt, value, seconds))
                        .map(drop)
                }
                None => callable.call1((attempt, value, seconds)).map(drop),
            };
            if let Err(raised) = outcome {
                raised.write_unraisable(py, Some(callable));
            }
        });
    }
}
