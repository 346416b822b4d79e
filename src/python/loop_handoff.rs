//! Handing async results back to the event loop that awaits them.
//!
//! Each awaited call gets a plain asyncio future (`loop.create_future()`) and runs on the shared
//! runtime. When it is done, its result is queued for that loop and, if the queue was empty,
//! one byte is written to a socket the loop watches (`loop.add_reader`). The loop thread then
//! sets every queued result in one callback, already holding the GIL. So no other thread takes
//! the GIL to hand a result back, and a busy loop is woken once per batch of results instead of
//! once per result. (Loops without `add_reader`, such as Windows' proactor loop, are woken with
//! `call_soon_threadsafe` instead, still once per batch.)

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3_async_runtimes::generic::ContextExt;
use pyo3_async_runtimes::TaskLocals;

use super::errors::to_py;
use super::runtime::{exiting, runtime, BizmsgRuntime, Reply};

/// A finished call waiting for its loop.
struct Completed {
    future: Py<PyAny>,
    reply: Reply,
}

/// The results waiting for one event loop, and how to wake it.
struct Queue {
    items: Mutex<Vec<Completed>>,
    wake: Wake,
    /// Cleared when the loop is garbage-collected; a cached handle to a dead queue is not used.
    alive: AtomicBool,
    /// The weak reference to the loop whose callback forgets this queue (it must outlive the
    /// loop for the callback to run).
    loop_reference: Mutex<Option<Py<PyAny>>>,
}

enum Wake {
    #[cfg(unix)]
    Socket {
        reader: std::os::unix::net::UnixStream,
        writer: std::os::unix::net::UnixStream,
    },
    Threadsafe {
        event_loop: Py<PyAny>,
    },
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Vec<Completed>> {
        crate::sync::lock(&self.items)
    }

    /// Called on a runtime thread, without the GIL (except for the fallback wake).
    fn push(self: &Arc<Self>, future: Py<PyAny>, reply: Reply) {
        let was_empty = {
            let mut items = self.lock();
            let was_empty = items.is_empty();
            items.push(Completed { future, reply });
            was_empty
        };
        if was_empty {
            self.wake();
        }
    }

    fn wake(self: &Arc<Self>) {
        match &self.wake {
            #[cfg(unix)]
            Wake::Socket { writer, .. } => {
                use std::io::Write;
                // Non-blocking: a full socket already holds a wake-up the loop has yet to read.
                let _ = (&*writer).write(&[1]);
            }
            Wake::Threadsafe { event_loop } => {
                if exiting() {
                    return;
                }
                Python::attach(|py| {
                    let drain = Drain {
                        queue: Arc::clone(self),
                    };
                    let _ = event_loop
                        .bind(py)
                        .call_method1(intern!(py, "call_soon_threadsafe"), (drain,));
                });
            }
        }
    }

    /// On the loop's thread: sets every queued result.
    fn drain(&self, py: Python<'_>) {
        // The wake-up bytes are read before the queue is taken, so a result queued after the
        // take always writes a new one.
        #[cfg(unix)]
        if let Wake::Socket { reader, .. } = &self.wake {
            use std::io::Read;
            let mut buffer = [0u8; 256];
            while matches!((&*reader).read(&mut buffer), Ok(read) if read > 0) {}
        }
        let items = std::mem::take(&mut *self.lock());
        for Completed { future, reply } in items {
            let future = future.bind(py);
            // A cancelled call's future is already done: its result has nobody to go to.
            if future
                .call_method0(intern!(py, "done"))
                .and_then(|done| done.is_truthy())
                .unwrap_or(true)
            {
                if reply.even_if_cancelled {
                    let _ = reply.build(py);
                }
                continue;
            }
            let _ = match reply.build(py) {
                Ok(value) => future.call_method1(intern!(py, "set_result"), (value,)),
                Err(error) => future.call_method1(intern!(py, "set_exception"), (error.value(py),)),
            };
        }
    }
}

/// The loop's callback: drains its queue.
#[pyclass(frozen, module = "bizmsg._native")]
struct Drain {
    queue: Arc<Queue>,
}

#[pymethods]
impl Drain {
    fn __call__(&self, py: Python<'_>) {
        self.queue.drain(py);
    }
}

/// The weakref callback of a loop: forgets its queue.
#[pyclass(frozen, module = "bizmsg._native")]
struct Forget {
    key: usize,
}

#[pymethods]
impl Forget {
    fn __call__(&self, _reference: &Bound<'_, PyAny>) {
        if let Some(queue) = registry().remove(&self.key) {
            queue.alive.store(false, Ordering::Release);
        }
    }
}

/// A call's future's done-callback: aborts the call when the awaiting task was cancelled.
#[pyclass(frozen, module = "bizmsg._native")]
struct CancelOnDone {
    abort: tokio::task::AbortHandle,
}

#[pymethods]
impl CancelOnDone {
    fn __call__(&self, future: &Bound<'_, PyAny>) -> PyResult<()> {
        if future.call_method0("cancelled")?.is_truthy()? {
            self.abort.abort();
        }
        Ok(())
    }
}

static LOOPS: Mutex<Option<HashMap<usize, Arc<Queue>>>> = Mutex::new(None);

struct Registry(MutexGuard<'static, Option<HashMap<usize, Arc<Queue>>>>);

impl Registry {
    fn get(&self, key: usize) -> Option<Arc<Queue>> {
        self.0.as_ref().and_then(|map| map.get(&key).cloned())
    }

    fn insert(&mut self, key: usize, queue: Arc<Queue>) {
        self.0.get_or_insert_with(HashMap::new).insert(key, queue);
    }

    fn remove(&mut self, key: &usize) -> Option<Arc<Queue>> {
        self.0.as_mut().and_then(|map| map.remove(key))
    }
}

fn registry() -> Registry {
    Registry(crate::sync::lock(&LOOPS))
}

thread_local! {
    /// The last loop this thread awaited on and its queue: a loop thread finds its queue
    /// without taking the registry's lock.
    static LAST: std::cell::RefCell<Option<(usize, Arc<Queue>)>> = const { std::cell::RefCell::new(None) };
}

/// The queue of `event_loop`, made (and its reader registered) on first use.
fn queue_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Queue>> {
    let key = event_loop.as_ptr() as usize;
    let cached = LAST
        .try_with(|last| {
            last.borrow().as_ref().and_then(|(cached_key, queue)| {
                (*cached_key == key && queue.alive.load(Ordering::Acquire))
                    .then(|| Arc::clone(queue))
            })
        })
        .ok()
        .flatten();
    if let Some(queue) = cached {
        return Ok(queue);
    }
    // Bound first: the registry's lock must be released before the `None` arm takes it again.
    let known = registry().get(key);
    let queue = match known {
        Some(queue) => queue,
        None => {
            let queue = new_queue(py, event_loop)?;
            registry().insert(key, Arc::clone(&queue));
            // When the loop goes away, so does its queue (and its socket pair). A loop that
            // cannot be weakly referenced keeps its queue for the life of the process.
            let forget = Forget { key };
            match py
                .import(intern!(py, "weakref"))?
                .call_method1(intern!(py, "ref"), (event_loop, forget))
            {
                Ok(reference) => {
                    *crate::sync::lock(&queue.loop_reference) = Some(reference.unbind());
                }
                Err(_) => log::debug!(
                    target: "bizmsg",
                    "the event loop cannot be weakly referenced; its result queue is kept"
                ),
            }
            queue
        }
    };
    let _ = LAST.try_with(|last| *last.borrow_mut() = Some((key, Arc::clone(&queue))));
    Ok(queue)
}

fn new_queue(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Queue>> {
    let make = |wake| {
        Arc::new(Queue {
            items: Mutex::new(Vec::new()),
            wake,
            alive: AtomicBool::new(true),
            loop_reference: Mutex::new(None),
        })
    };
    #[cfg(unix)]
    {
        let (reader, writer) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
        reader
            .set_nonblocking(true)
            .and_then(|()| writer.set_nonblocking(true))
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
        let fd = {
            use std::os::fd::AsRawFd;
            reader.as_raw_fd()
        };
        let queue = make(Wake::Socket { reader, writer });
        let drain = Drain {
            queue: Arc::clone(&queue),
        };
        match event_loop.call_method1(intern!(py, "add_reader"), (fd, drain)) {
            Ok(_) => return Ok(queue),
            // A loop without readers (a proactor loop): fall through to the thread-safe wake.
            Err(error) if error.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(make(Wake::Threadsafe {
        event_loop: event_loop.clone().unbind(),
    }))
}

/// `asyncio.get_running_loop`, looked up once.
fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET_RUNNING_LOOP
        .get_or_try_init(py, || {
            py.import("asyncio")?
                .getattr("get_running_loop")
                .map(Bound::unbind)
        })?
        .bind(py)
        .call0()
}

/// The running loop's and contextvars' locals, for a task that outlives the call that starts
/// it (an async campaign's) and calls back into Python (an async token callable).
pub(crate) fn running_locals(py: Python<'_>) -> PyResult<TaskLocals> {
    TaskLocals::new(running_loop(py)?).copy_context(py)
}

/// Runs `future` on the shared runtime and returns an asyncio future of the running loop that
/// gets its reply. Cancelling the awaiting task aborts `future`.
pub(crate) fn awaitable<'py, F>(py: Python<'py>, future: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Reply> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let queue = queue_for(py, &event_loop)?;
    let result = event_loop.call_method0(intern!(py, "create_future"))?;
    // The caller's loop and contextvars, for what the call runs in Python (an async token
    // callable, an on_retry hook).
    let locals = TaskLocals::new(event_loop).copy_context(py)?;
    let runtime = runtime().map_err(|e| to_py(py, e))?;
    let target = result.clone().unbind();
    let task = runtime.spawn(BizmsgRuntime::scope(locals, async move {
        let reply = future.await;
        queue.push(target, reply);
    }));
    result.call_method1(
        intern!(py, "add_done_callback"),
        (CancelOnDone {
            abort: task.abort_handle(),
        },),
    )?;
    Ok(result)
}
