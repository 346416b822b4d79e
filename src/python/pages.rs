//! `_native.PageStream`: a listing walked page by page with one page read ahead in Rust.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3_async_runtimes::generic::ContextExt;
use pyo3_async_runtimes::TaskLocals;

use super::convert;
use super::convert::PageKind;
use super::errors::to_py;
use super::loop_handoff::awaitable;
use super::runtime::{catch_panics, wait_shared, BizmsgRuntime, Reply};
use crate::api::{PageStream, TaskScope};
use crate::client::Response;
use crate::wire::{BusinessAccount, BusinessPhoneNumber, Page};

pub(crate) enum Stream {
    Accounts(PageStream<BusinessAccount>),
    Numbers(PageStream<BusinessPhoneNumber>),
}

enum Next {
    Accounts(crate::Result<Option<Response<Page<BusinessAccount>>>>),
    Numbers(crate::Result<Option<Response<Page<BusinessPhoneNumber>>>>),
}

/// The read-ahead task runs in `locals`' asyncio context (when the caller is async), so
/// what it calls back into Python (an async token callable) finds the caller's loop.
fn scope<T: crate::wire::FromWire + Send + 'static>(
    locals: &Option<TaskLocals>,
) -> Option<TaskScope<T>> {
    let locals = locals.clone()?;
    Some(Arc::new(move |task| {
        BizmsgRuntime::scope(locals.clone(), task)
    }))
}

impl Stream {
    async fn next(&mut self, locals: Option<TaskLocals>) -> Next {
        match self {
            Stream::Accounts(stream) => {
                stream.set_task_scope(scope(&locals));
                Next::Accounts(catch_panics(stream.next()).await)
            }
            Stream::Numbers(stream) => {
                stream.set_task_scope(scope(&locals));
                Next::Numbers(catch_panics(stream.next()).await)
            }
        }
    }
}

impl Next {
    fn into_py(self, py: Python<'_>, kind: PageKind) -> PyResult<Py<PyAny>> {
        fn page<T: convert::PyItem>(
            py: Python<'_>,
            next: crate::Result<Option<Response<Page<T>>>>,
            kind: PageKind,
        ) -> PyResult<Py<PyAny>> {
            match next.map_err(|e| to_py(py, e))? {
                Some(response) => {
                    Ok(convert::page(py, &response.value, Some(&response.meta), kind)?.unbind())
                }
                None => Ok(py.None()),
            }
        }
        match self {
            Next::Accounts(next) => page(py, next, kind),
            Next::Numbers(next) => page(py, next, kind),
        }
    }
}

/// One consumer at a time: the lock is held across the fetch (a second concurrent `next`
/// waits for the first, so pages are never skipped or repeated).
#[pyclass(frozen, name = "PageStream", module = "bizmsg._native")]
pub(crate) struct NativePageStream {
    stream: Arc<tokio::sync::Mutex<Stream>>,
}

impl NativePageStream {
    pub(crate) fn new(stream: Stream) -> Self {
        NativePageStream {
            stream: Arc::new(tokio::sync::Mutex::new(stream)),
        }
    }
}

#[pymethods]
impl NativePageStream {
    /// The next page, or `None` after the last.
    fn next(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stream = Arc::clone(&self.stream);
        let next = wait_shared(py, async move { Ok(stream.lock().await.next(None).await) });
        next.reply(|next| next.map_err(|e| to_py(py, e))?.into_py(py, PageKind::Sync))
    }

    /// Awaitable `next`.
    fn next_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stream = Arc::clone(&self.stream);
        awaitable(py, async move {
            let locals = BizmsgRuntime::get_task_locals();
            let next = stream.lock().await.next(locals).await;
            Reply::new(move |py| next.into_py(py, PageKind::Async))
        })
    }
}
