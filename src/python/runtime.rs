//! The one tokio runtime of the process, and the two ways Python waits on it.
//!
//! The runtime is made on first use (never at import) and remembers the pid it was made in: a
//! forked child gets a new one instead of waiting forever on worker threads that fork did not
//! copy. Sync calls wait on the calling thread with the GIL released, waking every
//! `SIGNAL_CHECK` to let Python run signal handlers, so Ctrl-C aborts a blocked call. Async
//! calls are bridged by pyo3-async-runtimes through [`BizmsgRuntime`], our runtime behind its
//! generic interface.

use std::cell::OnceCell;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{ContextExt, JoinError, Runtime as GenericRuntime};
use pyo3_async_runtimes::TaskLocals;
use tokio::runtime::Runtime;

use crate::error::Error;

const SIGNAL_CHECK: Duration = Duration::from_millis(50);

static RUNTIME: Mutex<Option<(u32, Arc<Runtime>)>> = Mutex::new(None);

/// Set by the `atexit` hook: from then on no Rust thread may touch the interpreter.
static EXITING: AtomicBool = AtomicBool::new(false);

pub(crate) fn exiting() -> bool {
    EXITING.load(Ordering::Acquire)
}

/// Registered with `atexit`: stops the runtime before the interpreter finalizes.
///
/// A worker or blocking-pool thread that touches Python after finalization has begun crashes
/// the process (it cannot take the GIL back). The bridge's result-setting threads, log lines
/// from workers and callbacks all do, so: logging is switched off, and the runtime is shut
/// down with the GIL released, which lets in-flight bridge threads finish first.
#[pyfunction]
pub(crate) fn shutdown(py: Python<'_>) {
    EXITING.store(true, Ordering::Release);
    log::set_max_level(log::LevelFilter::Off);
    super::result_thread::stop(py);
    let taken = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take();
    let Some((owner, runtime)) = taken else {
        return;
    };
    if owner != std::process::id() {
        std::mem::forget(runtime);
        return;
    }
    match Arc::try_unwrap(runtime) {
        Ok(runtime) => py.detach(move || runtime.shutdown_timeout(Duration::from_secs(2))),
        // A call is still in flight on another thread: leave the runtime to it.
        Err(shared) => std::mem::forget(shared),
    }
}

/// The runtime of this process, made on first use.
pub(crate) fn runtime() -> Result<Arc<Runtime>, Error> {
    if exiting() {
        return Err(Error::Internal(
            "the Python interpreter is exiting".to_owned(),
        ));
    }
    let pid = std::process::id();
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((owner, runtime)) = slot.as_ref() {
        if *owner == pid {
            return Ok(Arc::clone(runtime));
        }
    }
    // In a forked child the parent's runtime has no threads: dropping it would wait for them
    // forever, so it is forgotten instead.
    if let Some(inherited) = slot.take() {
        std::mem::forget(inherited);
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.worker_threads(worker_threads());
    let runtime = builder
        .enable_all()
        .thread_name("bizmsg-worker")
        .build()
        .map(Arc::new)
        .map_err(|e| Error::Internal(format!("cannot start the tokio runtime: {e}")))?;
    *slot = Some((pid, Arc::clone(&runtime)));
    Ok(runtime)
}

/// The runtime's worker threads: `BIZMSG_WORKER_THREADS`, else one per core but one, left
/// to the Python thread that holds the GIL (measured: on 2 cores one worker is as fast for
/// threads and asyncio, and steadier for sequential calls, than two; see benches/).
fn worker_threads() -> usize {
    let configured = std::env::var("BIZMSG_WORKER_THREADS")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok())
        .filter(|n| *n >= 1);
    configured.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(1, |cores| cores.get().saturating_sub(1))
            .max(1)
    })
}

/// How a sync wait ended.
pub(crate) enum Waited<T> {
    Done(crate::Result<T>),
    /// A signal handler raised (KeyboardInterrupt); the future was dropped, aborting the call.
    Interrupted(PyErr),
}

/// Runs `future` to completion on the calling thread with the GIL released.
pub(crate) fn wait<T, F>(py: Python<'_>, future: F) -> Waited<T>
where
    F: Future<Output = crate::Result<T>> + Send,
    T: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        // A sync call from inside the runtime (e.g. from an on_retry hook of an async call)
        // would block a worker the call itself needs.
        return Waited::Done(Err(Error::Configuration(
            "a synchronous bizmsg call was made from inside bizmsg's async runtime (for example \
             from an on_retry hook); use AsyncClient there"
                .to_owned(),
        )));
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(error) => return Waited::Done(Err(error)),
    };
    let check_signals = is_main_thread();
    py.detach(move || {
        runtime.block_on(async move {
            let future = AssertUnwindSafe(future).catch_unwind();
            tokio::pin!(future);
            if !check_signals {
                // Python runs signal handlers on the main thread only: nothing to check here.
                return Waited::Done(without_panic(future.await));
            }
            loop {
                tokio::select! {
                    biased;
                    outcome = &mut future => return Waited::Done(without_panic(outcome)),
                    () = tokio::time::sleep(SIGNAL_CHECK) => {
                        if let Err(interrupt) = Python::attach(|py| py.check_signals()) {
                            return Waited::Interrupted(interrupt);
                        }
                    }
                }
            }
        })
    })
}

/// The thread Python runs signal handlers on, recorded when the module is imported there.
static MAIN_THREAD: std::sync::OnceLock<std::thread::ThreadId> = std::sync::OnceLock::new();

/// Called at import: remembers the main thread when the import runs on it.
pub(crate) fn record_main_thread(py: Python<'_>) -> PyResult<()> {
    let threading = py.import("threading")?;
    let current = threading.call_method0("current_thread")?;
    let main = threading.call_method0("main_thread")?;
    if current.is(&main) {
        let _ = MAIN_THREAD.set(std::thread::current().id());
    }
    Ok(())
}

/// Whether signals may arrive on this thread; when unknown (imported off the main thread),
/// every thread checks.
fn is_main_thread() -> bool {
    MAIN_THREAD
        .get()
        .is_none_or(|main| *main == std::thread::current().id())
}

/// Runs `future` and turns a panic inside it into [`Error::Internal`].
pub(crate) async fn catch_panics<T, F>(future: F) -> crate::Result<T>
where
    F: Future<Output = crate::Result<T>>,
{
    without_panic(AssertUnwindSafe(future).catch_unwind().await)
}

/// A caught panic becomes [`Error::Internal`]: no panic crosses into Python.
fn without_panic<T>(
    outcome: Result<crate::Result<T>, Box<dyn std::any::Any + Send>>,
) -> crate::Result<T> {
    outcome.unwrap_or_else(|panic| Err(Error::Internal(panic_message(panic.as_ref()))))
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("panic: {text}")
}

/// Our runtime as pyo3-async-runtimes sees it.
pub(crate) struct BizmsgRuntime;

tokio::task_local! {
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

/// A task handle, or the note that no runtime could be had (the bridge then reports it).
pub(crate) enum SpawnHandle {
    Spawned(tokio::task::JoinHandle<()>),
    /// A job on the result thread; resolves once it ran.
    Queued(futures::channel::oneshot::Receiver<()>),
    Unavailable,
}

pub(crate) enum SpawnError {
    Join(tokio::task::JoinError),
    Unavailable,
}

impl JoinError for SpawnError {
    fn is_panic(&self) -> bool {
        matches!(self, SpawnError::Join(e) if e.is_panic())
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        match self {
            SpawnError::Join(e) => match e.try_into_panic() {
                Ok(panic) => panic,
                Err(e) => Box::new(e.to_string()),
            },
            SpawnError::Unavailable => Box::new("the bizmsg runtime is unavailable"),
        }
    }
}

impl Future for SpawnHandle {
    type Output = Result<(), SpawnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            SpawnHandle::Spawned(handle) => handle.poll_unpin(cx).map_err(SpawnError::Join),
            SpawnHandle::Queued(done) => done.poll_unpin(cx).map_err(|_| SpawnError::Unavailable),
            SpawnHandle::Unavailable => Poll::Ready(Err(SpawnError::Unavailable)),
        }
    }
}

impl GenericRuntime for BizmsgRuntime {
    type JoinError = SpawnError;
    type JoinHandle = SpawnHandle;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        match runtime() {
            Ok(runtime) => SpawnHandle::Spawned(runtime.spawn(fut)),
            Err(_) => SpawnHandle::Unavailable,
        }
    }

    /// Only used by the bridge to set asyncio results: see `result_thread`.
    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        let (done, finished) = futures::channel::oneshot::channel();
        let job: super::result_thread::Job = Box::new(move || {
            f();
            let _ = done.send(());
        });
        match super::result_thread::submit(job) {
            Ok(()) => SpawnHandle::Queued(finished),
            // No result thread (the interpreter is exiting): the result is dropped with it.
            Err(_) => SpawnHandle::Unavailable,
        }
    }
}

impl ContextExt for BizmsgRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|cell| cell.get().cloned())
            .unwrap_or_default()
    }
}

/// Turns a Rust future into a Python awaitable on the running asyncio loop. The reply is
/// built into Python objects on a blocking thread holding the GIL, never on a worker.
pub(crate) fn awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Reply> + Send + 'static,
{
    runtime().map_err(|e| super::errors::to_py(py, e))?;
    pyo3_async_runtimes::generic::future_into_py::<BizmsgRuntime, _, _>(py, async move {
        Ok(future.await)
    })
}

/// A result waiting to become a Python object (or exception) once the GIL is held.
type BuildReply = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

pub(crate) struct Reply(BuildReply);

impl Reply {
    pub(crate) fn new(
        build: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static,
    ) -> Self {
        Reply(Box::new(build))
    }
}

impl<'py> IntoPyObject<'py> for Reply {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> Result<Self::Output, Self::Error> {
        // A panic here would leave the awaiting coroutine waiting forever: it becomes the
        // awaited call's InternalError instead.
        match std::panic::catch_unwind(AssertUnwindSafe(|| (self.0)(py))) {
            Ok(built) => built.map(|object| object.into_bound(py)),
            Err(panic) => Err(super::errors::to_py(
                py,
                Error::Internal(panic_message(panic.as_ref())),
            )),
        }
    }
}
