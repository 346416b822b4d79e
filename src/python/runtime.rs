//! The tokio runtimes of the process, and the two ways Python waits on them.
//!
//! - Sync calls run on a **current-thread runtime of the calling thread** (one per thread, made
//!   on its first call), with the GIL released: the request is written, awaited and read on the
//!   caller's own thread, so a call costs no thread hop and no cross-thread wake-up. It wakes
//!   every `SIGNAL_CHECK` to let Python run signal handlers, so Ctrl-C aborts a blocked call.
//! - Everything else (async calls, page read-ahead, campaigns, the sandbox) runs on **one shared
//!   multi-thread runtime**, made on first use (never at import).
//!
//! Both remember the pid they were made in: a forked child gets new ones instead of waiting
//! forever on threads that fork did not copy. Async results come back to the event loop through
//! `loop_handoff.rs`.

use std::cell::{OnceCell, RefCell};
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
    let taken = crate::sync::lock(&RUNTIME).take();
    let Some((owner, runtime)) = taken else {
        return;
    };
    if owner != crate::process::id() {
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
    let pid = crate::process::id();
    let mut slot = crate::sync::lock(&RUNTIME);
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

impl<T> Waited<T> {
    /// The reply `f` makes of the call's result, or the exception a signal handler raised.
    pub(crate) fn reply<R>(self, f: impl FnOnce(crate::Result<T>) -> PyResult<R>) -> PyResult<R> {
        match self {
            Waited::Done(result) => f(result),
            Waited::Interrupted(interrupt) => Err(interrupt),
        }
    }
}

thread_local! {
    /// The calling thread's runtime for sync calls, and the pid it was made in.
    static LOCAL_RUNTIME: RefCell<Option<(u32, Runtime)>> = const { RefCell::new(None) };
}

/// Runs `future` to completion on the calling thread's own runtime, with the GIL released.
pub(crate) fn wait<T, F>(py: Python<'_>, future: F) -> Waited<T>
where
    F: Future<Output = crate::Result<T>> + Send,
    T: Send,
{
    if let Some(refused) = refuse_nested() {
        return Waited::Done(Err(refused));
    }
    let check_signals = is_main_thread();
    let outcome = LOCAL_RUNTIME.try_with(|slot| {
        let pid = crate::process::id();
        if slot
            .borrow()
            .as_ref()
            .is_none_or(|(owner, _)| *owner != pid)
        {
            // A forked child forgets the parent's runtime: dropping it would deregister
            // sockets from an epoll instance it shares with the parent.
            if let Some(inherited) = slot.borrow_mut().take() {
                std::mem::forget(inherited);
            }
            let built = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error::Internal(format!("cannot start a tokio runtime: {e}")));
            match built {
                Ok(runtime) => *slot.borrow_mut() = Some((pid, runtime)),
                Err(error) => return Waited::Done(Err(error)),
            }
        }
        let slot = slot.borrow();
        let Some((_, runtime)) = slot.as_ref() else {
            return Waited::Done(Err(Error::Internal("no runtime".to_owned())));
        };
        py.detach(|| runtime.block_on(until_done_or_signal(future, check_signals)))
    });
    outcome.unwrap_or_else(|_| {
        Waited::Done(Err(Error::Internal(
            "the thread is exiting; no call can be made on it".to_owned(),
        )))
    })
}

/// Runs `future` on the shared runtime, waiting for it on the calling thread with the GIL
/// released. For work that must go on between calls (a page stream's read-ahead), which a
/// thread's own runtime would only drive while a call is running.
pub(crate) fn wait_shared<T, F>(py: Python<'_>, future: F) -> Waited<T>
where
    F: Future<Output = crate::Result<T>> + Send,
    T: Send,
{
    if let Some(refused) = refuse_nested() {
        return Waited::Done(Err(refused));
    }
    let runtime = match runtime() {
        Ok(runtime) => runtime,
        Err(error) => return Waited::Done(Err(error)),
    };
    let check_signals = is_main_thread();
    py.detach(move || runtime.block_on(until_done_or_signal(future, check_signals)))
}

/// A sync call from inside a runtime (e.g. from an on_retry hook of an async call) would block
/// a worker the call itself needs.
fn refuse_nested() -> Option<Error> {
    tokio::runtime::Handle::try_current().is_ok().then(|| {
        Error::Configuration(
            "a synchronous bizmsg call was made from inside bizmsg's async runtime (for example \
             from an on_retry hook); use AsyncClient there"
                .to_owned(),
        )
    })
}

/// `future`'s outcome, or the exception a signal handler raised while it ran (the future is
/// then dropped, which aborts the call).
async fn until_done_or_signal<T, F>(future: F, check_signals: bool) -> Waited<T>
where
    F: Future<Output = crate::Result<T>>,
{
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

    /// Unused by bizmsg (results go back through `loop_handoff.rs`); implemented for the
    /// bridge's interface on tokio's blocking pool.
    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        match runtime() {
            Ok(runtime) => SpawnHandle::Spawned(runtime.spawn_blocking(f)),
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

/// A result waiting to become a Python object (or exception) once the GIL is held.
type BuildReply = Box<dyn FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send>;

pub(crate) struct Reply {
    build: BuildReply,
    /// Built even when the call was cancelled before its result was delivered (for a reply
    /// whose building has an effect that must not be lost).
    pub(crate) even_if_cancelled: bool,
}

impl Reply {
    pub(crate) fn new(
        build: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static,
    ) -> Self {
        Reply {
            build: Box::new(build),
            even_if_cancelled: false,
        }
    }

    pub(crate) fn even_if_cancelled(
        build: impl FnOnce(Python<'_>) -> PyResult<Py<PyAny>> + Send + 'static,
    ) -> Self {
        Reply {
            build: Box::new(build),
            even_if_cancelled: true,
        }
    }
}

impl Reply {
    /// The Python object (or exception) of the reply. A panic while building it becomes the
    /// call's InternalError instead of leaving the awaiting coroutine waiting forever.
    pub(crate) fn build(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match std::panic::catch_unwind(AssertUnwindSafe(|| (self.build)(py))) {
            Ok(built) => built,
            Err(panic) => Err(super::errors::to_py(
                py,
                Error::Internal(panic_message(panic.as_ref())),
            )),
        }
    }
}
