//! A running campaign as the Python driver sees it (`CampaignRun`): fed input items, polled
//! for events (asked-for input, outcomes, warnings, done), stopped. An event handed out and
//! not yet acknowledged is handed out again, so a KeyboardInterrupt between the two never loses
//! a batch of outcomes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList, PyString};

use super::input::prepare;
use super::outcome::SendOutcome;
use pyo3_async_runtimes::generic::ContextExt;
use pyo3_async_runtimes::TaskLocals;

use crate::campaign::{Campaign, CampaignScope, Event, Input, Outcome};
use crate::error::Error;
use crate::python::errors::to_py;
use crate::python::loop_handoff::awaitable;
use crate::python::runtime::{runtime, wait, BizmsgRuntime, Reply};

type Run = Campaign<Py<PyAny>>;

/// A running campaign. Its methods are called by one driver at a time (`bizmsg/_campaign.py`).
#[pyclass(frozen, module = "bizmsg._native")]
pub(crate) struct CampaignRun {
    run: Arc<tokio::sync::Mutex<Run>>,
    /// Position of the next input item.
    next_index: AtomicU64,
    /// The input's iterator ended (every item was read).
    exhausted: std::sync::atomic::AtomicBool,
    delivery: Arc<std::sync::Mutex<Delivery>>,
    /// Stops the campaign without its lock (which `wait` holds while it waits, and a signal
    /// handler runs inside `wait`).
    stopper: crate::campaign::Stopper,
}

/// Events handed to the driver and not yet acknowledged. Python may raise KeyboardInterrupt
/// between `wait()` returning an event and the driver using it (a signal handler runs at the
/// next bytecode): the event is then handed out again by the next `wait()`, so no batch of
/// outcomes is ever lost.
#[derive(Default)]
struct Delivery {
    unacknowledged: std::collections::VecDeque<(u64, Py<PyAny>)>,
    sequence: u64,
}

impl Delivery {
    /// Forgets events up to `acknowledged`; the oldest one left, to hand out again.
    fn pending(&mut self, py: Python<'_>, acknowledged: u64) -> Option<Py<PyAny>> {
        while self
            .unacknowledged
            .front()
            .is_some_and(|(sequence, _)| *sequence <= acknowledged)
        {
            self.unacknowledged.pop_front();
        }
        self.unacknowledged
            .front()
            .map(|(_, event)| event.clone_ref(py))
    }

    /// Keeps a new event, as `(sequence, kind, value)`, until acknowledged; returns the oldest
    /// event not acknowledged (the new one, unless an earlier one was never used: an async
    /// wait cancelled after its event arrived keeps it, and the next wait must hand that one
    /// out first, or acknowledging the newer one would drop it).
    fn keep(&mut self, py: Python<'_>, event: Option<Event<Py<PyAny>>>) -> PyResult<Py<PyAny>> {
        if let Some((kind, value)) = event_to_py(py, event)? {
            self.sequence += 1;
            let numbered = (self.sequence, kind, value)
                .into_pyobject(py)?
                .into_any()
                .unbind();
            self.unacknowledged.push_back((self.sequence, numbered));
        }
        // After `done` (no new event), what was kept still comes first.
        Ok(self
            .unacknowledged
            .front()
            .map_or_else(|| py.None(), |(_, event)| event.clone_ref(py)))
    }
}

fn lock_delivery(delivery: &std::sync::Mutex<Delivery>) -> std::sync::MutexGuard<'_, Delivery> {
    crate::sync::lock(delivery)
}

impl CampaignRun {
    /// Starts a campaign; an async caller's (`locals`: its event loop and context) runs within
    /// them, so that what its sends call back into Python (an async token callable, an
    /// `on_retry` hook) runs on the caller's loop.
    pub(crate) fn start(
        client: crate::Client,
        options: crate::campaign::Options,
        locals: Option<TaskLocals>,
    ) -> Result<Self, Error> {
        let runtime = runtime()?;
        let scope = locals.map(|locals| -> CampaignScope {
            Box::new(move |campaign| BizmsgRuntime::scope(locals, campaign))
        });
        let run = Campaign::start_within(client, options, runtime.handle(), scope)?;
        Ok(CampaignRun {
            stopper: run.stopper(),
            run: Arc::new(tokio::sync::Mutex::new(run)),
            next_index: AtomicU64::new(0),
            exhausted: std::sync::atomic::AtomicBool::new(false),
            delivery: Arc::default(),
        })
    }
}

#[pymethods]
impl CampaignRun {
    /// Pulls up to `limit` items from `items` (an iterator), converts them and hands them to
    /// the engine. Returns how many were taken; fewer than `limit` means the iterator ended (the
    /// engine is then told). An exception raised by the iterator propagates.
    fn feed(&self, py: Python<'_>, items: &Bound<'_, PyAny>, limit: usize) -> PyResult<usize> {
        let mut iterator = items.cast::<PyIterator>()?.clone();
        let mut inputs = Vec::with_capacity(limit);
        let mut ended = false;
        // An exception from the input is raised after the items pulled before it were handed
        // over: each of them gets its outcome.
        let mut raised = None;
        let mut shared = None;
        while inputs.len() < limit {
            match iterator.next() {
                Some(Err(error)) => {
                    raised = Some(error);
                    break;
                }
                Some(Ok(item)) => {
                    let index = self.next_index.fetch_add(1, Ordering::Relaxed);
                    inputs.push(Input {
                        index,
                        message: prepare(py, &item, &mut shared),
                        payload: item.unbind(),
                    });
                }
                None => {
                    ended = true;
                    break;
                }
            }
        }
        let taken = inputs.len();
        let run = self.run.blocking_lock_or_try(py)?;
        if !inputs.is_empty() {
            run.feed(inputs);
        }
        if ended {
            self.exhausted.store(true, Ordering::Relaxed);
            run.end_input();
        }
        match raised {
            Some(error) => Err(error),
            None => Ok(taken),
        }
    }

    /// Tells the engine the input has ended (an async iterator's end, seen in Python).
    fn end_input(&self, py: Python<'_>) -> PyResult<()> {
        self.run.blocking_lock_or_try(py)?.end_input();
        Ok(())
    }

    /// The next event, waiting with the GIL released (Ctrl-C raises KeyboardInterrupt here):
    /// `(sequence, kind, value)` with kind `"input"` (value: how many items), `"outcomes"` (a
    /// list of SendOutcome), `"warning"` ((kind, message, account_id, sender)) or `"done"` (a
    /// dict); `None` after done. `acknowledged` is the sequence of the last event the driver
    /// used: an event after it that was handed out but not used is handed out again first.
    fn wait(&self, py: Python<'_>, acknowledged: u64) -> PyResult<Py<PyAny>> {
        if let Some(event) = lock_delivery(&self.delivery).pending(py, acknowledged) {
            return Ok(event);
        }
        let run = Arc::clone(&self.run);
        wait(py, async move { Ok(run.lock().await.next_event().await) })
            .reply(|event| lock_delivery(&self.delivery).keep(py, event.map_err(|e| to_py(py, e))?))
    }

    /// Awaitable `wait`.
    fn wait_async<'py>(&self, py: Python<'py>, acknowledged: u64) -> PyResult<Bound<'py, PyAny>> {
        let pending = lock_delivery(&self.delivery).pending(py, acknowledged);
        let run = Arc::clone(&self.run);
        let delivery = Arc::clone(&self.delivery);
        awaitable(py, async move {
            let event = match pending {
                Some(event) => Err(event),
                None => Ok(run.lock().await.next_event().await),
            };
            // Built even if the awaiting task was cancelled meanwhile: the event is then kept
            // and handed out by the next wait, not lost with the cancelled call.
            Reply::even_if_cancelled(move |py| match event {
                Err(pending) => Ok(pending),
                Ok(event) => lock_delivery(&delivery).keep(py, event),
            })
        })
    }

    /// How many items were read from the input.
    #[getter]
    fn read(&self) -> u64 {
        self.next_index.load(Ordering::Relaxed)
    }

    /// Whether the input was read to its end.
    #[getter]
    fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    /// After the campaign stopped early: every item left in `items` (an iterator of known
    /// length) as a `skipped` outcome with `reason`, numbered on from the items read. Nothing
    /// is checked or prepared: an outcome per item and nothing more.
    fn skip_rest(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        reason: &str,
    ) -> PyResult<Vec<Py<SendOutcome>>> {
        let mut iterator = items.cast::<PyIterator>()?.clone();
        let mut outcomes = Vec::new();
        for item in &mut iterator {
            let index = self.next_index.fetch_add(1, Ordering::Relaxed);
            let outcome = Outcome::skipped(index, item?.unbind(), reason.to_owned());
            outcomes.push(Py::new(py, SendOutcome::new(outcome))?);
        }
        self.exhausted.store(true, Ordering::Relaxed);
        Ok(outcomes)
    }

    /// Stops taking new messages; `abandon` also stops waiting for those in flight (they are
    /// reported unknown). Safe from a signal handler.
    fn stop(&self, abandon: bool) {
        self.stopper.stop(abandon);
    }
}

/// The lock of a run, from a driver that never holds it across calls: waits without the GIL
/// in the rare case an abandoned `wait` still holds it.
trait LockRun {
    fn blocking_lock_or_try(&self, py: Python<'_>) -> PyResult<tokio::sync::MutexGuard<'_, Run>>;
}

impl LockRun for Arc<tokio::sync::Mutex<Run>> {
    fn blocking_lock_or_try(&self, py: Python<'_>) -> PyResult<tokio::sync::MutexGuard<'_, Run>> {
        if let Ok(guard) = self.try_lock() {
            return Ok(guard);
        }
        Ok(py.detach(|| self.blocking_lock()))
    }
}

/// An event as `(kind, value)` Python objects; `None` after the campaign is done.
fn event_to_py<'py>(
    py: Python<'py>,
    event: Option<Event<Py<PyAny>>>,
) -> PyResult<Option<(Bound<'py, PyString>, Bound<'py, PyAny>)>> {
    let Some(event) = event else {
        return Ok(None);
    };
    let kind = |name: &str| PyString::new(py, name);
    Ok(Some(match event {
        Event::NeedInput(wanted) => (kind("input"), wanted.into_pyobject(py)?.into_any()),
        Event::Outcomes(outcomes) => {
            let list = PyList::empty(py);
            for outcome in outcomes {
                list.append(Bound::new(py, SendOutcome::new(outcome))?)?;
            }
            (kind("outcomes"), list.into_any())
        }
        Event::Warning(warning) => (
            kind("warning"),
            (
                warning.kind,
                warning.message,
                warning.account_id,
                warning.sender,
            )
                .into_pyobject(py)?
                .into_any(),
        ),
        Event::Done(summary) => {
            let done = PyDict::new(py);
            done.set_item("campaign_id", summary.campaign_id)?;
            done.set_item(
                "stopped",
                summary.stopped.map(|stop| (stop.index, stop.reason)),
            )?;
            let error = match summary.error {
                Some(error) => to_py(py, error).into_value(py).into_any(),
                None => py.None(),
            };
            done.set_item("error", error)?;
            done.set_item("not_sent", summary.not_sent)?;
            (kind("done"), done.into_any())
        }
    }))
}
