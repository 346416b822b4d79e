//! The Python face of campaigns (`crate::campaign`): a running campaign the Python driver feeds
//! and polls (`CampaignRun`), input items converted to messages, and outcomes as `SendOutcome`
//! objects that keep the Rust data and build Python objects (the send result, the exception)
//! only when asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyIterator, PyList, PyMapping, PyString};

use super::args::{text, type_name};
use super::convert;
use super::errors::to_py;
use super::loop_handoff::awaitable;
use super::message_fields::MessageFields;
use super::runtime::{runtime, wait, Reply};
use crate::api::validate_template;
use crate::campaign::{
    not_a_message, Campaign, EncodedTemplate, Event, Input, Outcome, Prepared, Status,
};
use crate::error::Error;

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
    delivery
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl CampaignRun {
    pub(crate) fn start(
        client: crate::Client,
        options: crate::campaign::Options,
    ) -> Result<Self, Error> {
        let runtime = runtime()?;
        let run = Campaign::start(client, options, runtime.handle())?;
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

/// The last template a `feed` validated, to reuse while the next items share it (a campaign's
/// messages usually do): validating and encoding it again was a large part of the Python
/// thread's work per message.
struct SharedTemplate {
    /// The name, parameters and language read from the template, compared by identity.
    parts: [Py<PyAny>; 3],
    parameters: Kept,
    validated: Result<EncodedTemplate, Error>,
    /// The `bizmsg.Template` the parts were read from. It is frozen, so while the next items
    /// carry this very object its parts are these, and reading them again is skipped.
    template: Option<Py<PyAny>>,
}

/// How parameters read when the template was validated are compared with a later read, beyond
/// being the same object.
enum Kept {
    /// Text: immutable, identity is enough.
    Text,
    /// A shallow copy of a list or a dict, compared by value: the same object may have been
    /// changed in place since.
    Copy(Py<PyAny>),
}

impl Kept {
    /// Whether `parameters`, the object kept from, still equals what was kept.
    fn unchanged(&self, py: Python<'_>, parameters: &Bound<'_, PyAny>) -> bool {
        match self {
            Kept::Text => true,
            Kept::Copy(copy) => copy.bind(py).eq(parameters).unwrap_or(false),
        }
    }

    /// `None` for parameters of another type, whose validation is never reused.
    fn of(parameters: &Bound<'_, PyAny>) -> Option<Self> {
        if parameters.cast::<PyString>().is_ok() {
            Some(Kept::Text)
        } else if let Ok(list) = parameters.cast::<PyList>() {
            Some(Kept::Copy(
                list.get_slice(0, list.len()).into_any().unbind(),
            ))
        } else if let Ok(dict) = parameters.cast::<PyDict>() {
            dict.copy()
                .ok()
                .map(|copy| Kept::Copy(copy.into_any().unbind()))
        } else {
            None
        }
    }
}

impl SharedTemplate {
    /// The validation to reuse when `template` is the `Template` validated last, with its
    /// parameters unchanged; `None` when its parts must be read.
    fn reused_for(
        &self,
        py: Python<'_>,
        template: &Bound<'_, PyAny>,
    ) -> Option<Result<EncodedTemplate, Error>> {
        let same = self.template.as_ref()?.bind(py).is(template)
            && self.parameters.unchanged(py, self.parts[1].bind(py));
        same.then(|| self.validated.clone())
    }

    /// Whether `parts`, just read from a template, are the ones validated, unchanged.
    fn matches(&self, py: Python<'_>, parts: &TemplateParts<'_>) -> bool {
        let (name, parameters, language) = parts;
        let [cached_name, cached_parameters, cached_language] = &self.parts;
        cached_name.bind(py).is(name)
            && cached_parameters.bind(py).is(parameters)
            && cached_language.bind(py).is(language)
            && self.parameters.unchanged(py, parameters)
    }
}

/// The template made of `parts` validated, from `cache` when it holds these parts unchanged.
fn shared_template(
    cache: &mut Option<SharedTemplate>,
    py: Python<'_>,
    template: &Bound<'_, PyAny>,
    parts: TemplateParts<'_>,
) -> Result<EncodedTemplate, Error> {
    if let Some(shared) = cache.as_ref().filter(|shared| shared.matches(py, &parts)) {
        return shared.validated.clone();
    }
    let (name, parameters, language) = parts;
    let validated = (|| {
        EncodedTemplate::new(validate_template(
            &text("template.name", &name)?,
            &convert::py_to_value("template.parameters", &parameters)?,
            &text("template.language", &language)?,
        )?)
    })();
    *cache = Kept::of(&parameters).map(|kept| SharedTemplate {
        parts: [name.unbind(), parameters.unbind(), language.unbind()],
        parameters: kept,
        validated: validated.clone(),
        template: convert::is_template(py, template).then(|| template.clone().unbind()),
    });
    validated
}

/// An input item as a validated message, or why it is not one. `shared` carries the last
/// template validated by this `feed`.
fn prepare<'py>(
    py: Python<'py>,
    item: &Bound<'py, PyAny>,
    shared: &mut Option<SharedTemplate>,
) -> Result<Prepared, Error> {
    let message = item
        .cast::<MessageFields>()
        .ok()
        .and_then(|message| message.try_borrow().ok());
    let (to, from, template, key) = if let Some(fields) = message {
        // A `Message`: its fields are read from the Rust object, not through `getattr`.
        (
            Some(fields.to.bind(py).clone()),
            Some(fields.from.bind(py).clone()),
            Some(fields.template.bind(py).clone()),
            Some(fields.idempotency_key.bind(py).clone()),
        )
    } else if let Ok(mapping) = item.cast::<PyMapping>() {
        let get = |name: &str| mapping.get_item(name).ok();
        let template = match get("template") {
            Some(template) => Some(template),
            // Flat: name, parameters and language beside to and from.
            None => Some(mapping.clone().into_any()),
        };
        (
            get("to"),
            get("from").or_else(|| get("from_")),
            template,
            get("idempotency_key"),
        )
    } else {
        return Err(not_a_message(&type_name(item)));
    };
    let required = |value: Option<Bound<'py, PyAny>>, field: &str| {
        value
            .filter(|value| !value.is_none())
            .ok_or_else(|| Error::validation(field, "is missing"))
    };
    let template = required(template, "template")?;
    let source = match shared
        .as_ref()
        .and_then(|shared| shared.reused_for(py, &template))
    {
        Some(validated) => TemplateSource::Reused(validated),
        None => TemplateSource::Read(template_parts(py, &template)?),
    };
    let to = text("to", &required(to, "to")?)?;
    let from = text("from_", &required(from, "from_")?)?;
    let key = match key.filter(|key| !key.is_none()) {
        Some(key) => Some(text("idempotency_key", &key)?),
        None => None,
    };
    let template = match source {
        TemplateSource::Reused(validated) => validated,
        TemplateSource::Read(parts) => shared_template(shared, py, &template, parts),
    };
    Prepared::with_template(&to, &from, template, key)
}

/// Where a message's template comes from: the validation of the same `Template` just before
/// it, or its parts, read to be validated (or matched with the last ones).
enum TemplateSource<'py> {
    Reused(Result<EncodedTemplate, Error>),
    Read(TemplateParts<'py>),
}

/// A template's `(name, parameters, language)`, as given.
type TemplateParts<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// The parts of a `Template` or of a mapping with those keys.
fn template_parts<'py>(
    py: Python<'py>,
    template: &Bound<'py, PyAny>,
) -> Result<TemplateParts<'py>, Error> {
    // Asked once: a Mapping check of an object that is not a dict goes through the ABC.
    let mapping = template.cast::<PyMapping>().ok();
    let part = |name: &Bound<'py, PyString>, field: &str| -> Result<Bound<'py, PyAny>, Error> {
        let value = match &mapping {
            Some(mapping) => mapping.get_item(name).ok(),
            None => template.getattr(name).ok(),
        };
        value.ok_or_else(|| Error::validation(field, "is missing"))
    };
    Ok((
        part(intern!(py, "name"), "template.name")?,
        part(intern!(py, "parameters"), "template.parameters")?,
        part(intern!(py, "language"), "template.language")?,
    ))
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

/// What became of one message of a campaign.
#[pyclass(frozen, name = "SendOutcome", module = "bizmsg")]
pub(crate) struct SendOutcome {
    outcome: Outcome<Py<PyAny>>,
    result: PyOnceLock<Py<PyAny>>,
    error: PyOnceLock<Py<PyAny>>,
}

impl SendOutcome {
    fn new(outcome: Outcome<Py<PyAny>>) -> Self {
        SendOutcome {
            outcome,
            result: PyOnceLock::new(),
            error: PyOnceLock::new(),
        }
    }
}

#[pymethods]
impl SendOutcome {
    /// Position of the message in the input, from 0.
    #[getter]
    fn index(&self) -> u64 {
        self.outcome.index
    }

    /// The input item as given (a `Message`, a dict, or what was not a message).
    #[getter]
    fn message(&self, py: Python<'_>) -> Py<PyAny> {
        self.outcome.payload.clone_ref(py)
    }

    /// `"sent"`, `"rejected"`, `"unknown"`, `"failed"` or `"skipped"`.
    #[getter]
    fn status<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        // Interned: counting a batch's statuses then hashes five strings, not one per outcome.
        let status = match self.outcome.status {
            Status::Sent => intern!(py, "sent"),
            Status::Rejected => intern!(py, "rejected"),
            Status::Unknown => intern!(py, "unknown"),
            Status::Failed => intern!(py, "failed"),
            Status::Skipped => intern!(py, "skipped"),
        };
        status.clone()
    }

    /// True only when the message was sent (committed by the service).
    #[getter]
    fn ok(&self) -> bool {
        self.outcome.status == Status::Sent
    }

    /// The `Idempotency-Key` the message went out with (or would have).
    #[getter]
    fn idempotency_key(&self) -> Option<&str> {
        self.outcome.idempotency_key.as_deref()
    }

    /// The `SendResult` when sent or rejected (or recorded by an earlier run).
    #[getter]
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(result) = &self.outcome.result else {
            return Ok(py.None());
        };
        self.result
            .get_or_try_init(py, || {
                Ok(convert::send_result(py, result, self.outcome.meta.as_ref())?.unbind())
            })
            .map(|result| result.clone_ref(py))
    }

    /// The exception a single send would have raised (`SendRejectedError`,
    /// `SendOutcomeUnknownError`, `ValidationError`, ...), or `None`.
    #[getter]
    fn error(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let Some(error) = &self.outcome.error else {
            return Ok(py.None());
        };
        self.error
            .get_or_try_init(py, || {
                Ok(to_py(py, error.clone()).into_value(py).into_any())
            })
            .map(|error| error.clone_ref(py))
    }

    /// For a skipped duplicate: the index of the message it repeats.
    #[getter]
    fn duplicate_of(&self) -> Option<u64> {
        self.outcome.duplicate_of
    }

    /// Why the message was skipped (or other context), in a few words.
    #[getter]
    fn reason(&self) -> Option<&str> {
        self.outcome.reason.as_deref()
    }

    /// A flat record: index, status, ok, idempotency_key, sms_id, code, msg, error (its class
    /// and message), duplicate_of, reason.
    fn to_record<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let record = PyDict::new(py);
        record.set_item(intern!(py, "index"), self.outcome.index)?;
        record.set_item(intern!(py, "status"), self.outcome.status.as_str())?;
        record.set_item(intern!(py, "ok"), self.ok())?;
        record.set_item(intern!(py, "idempotency_key"), self.idempotency_key())?;
        let result = self.outcome.result.as_ref();
        let scalar = |value: Option<&crate::wire::Scalar>| -> PyResult<Py<PyAny>> {
            Ok(convert::scalar_to_py(py, value)?.unbind())
        };
        record.set_item(
            intern!(py, "sms_id"),
            scalar(result.and_then(|r| r.sms_id.as_ref()))?,
        )?;
        record.set_item(
            intern!(py, "code"),
            scalar(result.and_then(|r| r.code.as_ref()))?,
        )?;
        record.set_item(intern!(py, "msg"), result.and_then(|r| r.msg.as_deref()))?;
        let error = match &self.outcome.error {
            Some(_) => {
                let exception = self.error(py)?;
                let bound = exception.bind(py);
                Some(format!("{}: {}", type_name(bound), bound.str()?))
            }
            None => None,
        };
        record.set_item(intern!(py, "error"), error)?;
        record.set_item(intern!(py, "duplicate_of"), self.outcome.duplicate_of)?;
        record.set_item(intern!(py, "reason"), self.reason())?;
        Ok(record)
    }

    /// Pickling, so that a `BulkResult` (and a `CampaignError` or `KeyboardInterrupt` carrying
    /// one) can cross a process pool or be saved: the outcome's values, with its result and
    /// error as the Python objects, which pickle themselves.
    fn __reduce__<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, pyo3::types::PyTuple>)> {
        let restore = py
            .import(intern!(py, "bizmsg._native"))?
            .getattr(intern!(py, "restore_send_outcome"))?;
        let args = (
            self.outcome.index,
            self.outcome.payload.clone_ref(py),
            self.outcome.status.as_str(),
            self.outcome.idempotency_key.as_deref(),
            self.result(py)?,
            self.error(py)?,
            self.outcome.duplicate_of,
            self.outcome.reason.as_deref(),
        )
            .into_pyobject(py)?;
        Ok((restore, args))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut text = format!(
            "SendOutcome(index={}, status={:?}",
            self.outcome.index,
            self.outcome.status.as_str()
        );
        if let Some(sms_id) = self.outcome.result.as_ref().and_then(|r| r.sms_id.as_ref()) {
            text.push_str(&format!(", sms_id={:?}", sms_id.text()));
        }
        if let Some(code) = self.outcome.result.as_ref().and_then(|r| r.code.as_ref()) {
            text.push_str(&format!(", code={:?}", code.text()));
        }
        if let Some(original) = self.outcome.duplicate_of {
            text.push_str(&format!(", duplicate_of={original}"));
        }
        if self.outcome.error.is_some() {
            // The Python exception's text: the same as the Rust error's, and also right for an
            // outcome restored from a pickle.
            let exception = self.error(py)?;
            let bound = exception.bind(py);
            text.push_str(&format!(
                ", error={}({:?})",
                type_name(bound),
                crate::masking::truncate(&bound.str()?.to_string_lossy(), 80)
            ));
        }
        text.push(')');
        Ok(text)
    }
}

/// The inverse of `SendOutcome.__reduce__`. The result and error objects are kept as they were
/// unpickled; the Rust send result (for `to_record` and the repr) is decoded again from the
/// result's wire bytes.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // one argument per field, as `__reduce__` gives them
pub(crate) fn restore_send_outcome(
    py: Python<'_>,
    index: u64,
    message: Py<PyAny>,
    status: &str,
    idempotency_key: Option<String>,
    result: Py<PyAny>,
    error: Py<PyAny>,
    duplicate_of: Option<u64>,
    reason: Option<String>,
) -> PyResult<SendOutcome> {
    let status = match status {
        "sent" => Status::Sent,
        "rejected" => Status::Rejected,
        "unknown" => Status::Unknown,
        "failed" => Status::Failed,
        "skipped" => Status::Skipped,
        other => {
            return Err(to_py(
                py,
                Error::Validation {
                    field: "status".into(),
                    message: format!("not an outcome status: {other:?}"),
                },
            ))
        }
    };
    let mut outcome = Outcome::new(index, message, status);
    outcome.idempotency_key = idempotency_key;
    outcome.duplicate_of = duplicate_of;
    outcome.reason = reason;
    if !result.is_none(py) {
        let wire: Vec<u8> = result
            .bind(py)
            .call_method0(intern!(py, "_wire_bytes"))?
            .extract()?;
        outcome.result = Some(
            <crate::wire::SendResult as crate::wire::FromWire>::from_answer(
                bytes::Bytes::from(wire),
                "a pickled SendOutcome",
            )
            .map_err(|e| to_py(py, e))?,
        );
    }
    if !error.is_none(py) {
        // Only marks that there is an error: every use of it goes through the Python object.
        outcome.error = Some(Error::Internal(
            error.bind(py).str()?.to_string_lossy().into(),
        ));
    }
    let restored = SendOutcome::new(outcome);
    // Set before anyone can read them, so the getters hand out these very objects.
    let _ = restored.result.set(py, result);
    let _ = restored.error.set(py, error);
    Ok(restored)
}

/// A campaign's preflight: fed like a run, finished into a plan (a dict for `CampaignPlan`).
#[pyclass(frozen, module = "bizmsg._native")]
pub(crate) struct CampaignPlanner {
    planner: std::sync::Mutex<Option<crate::campaign::Planner>>,
    next_index: AtomicU64,
}

impl CampaignPlanner {
    pub(crate) fn new(planner: crate::campaign::Planner) -> Self {
        CampaignPlanner {
            planner: std::sync::Mutex::new(Some(planner)),
            next_index: AtomicU64::new(0),
        }
    }

    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut crate::campaign::Planner) -> T,
    ) -> PyResult<T> {
        let mut guard = self
            .planner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match guard.as_mut() {
            Some(planner) => Ok(f(planner)),
            None => Err(to_py(
                py,
                Error::Campaign("this plan is already finished".to_owned()),
            )),
        }
    }
}

#[pymethods]
impl CampaignPlanner {
    /// Checks up to `limit` items from `items`; returns how many were taken.
    fn feed(&self, py: Python<'_>, items: &Bound<'_, PyAny>, limit: usize) -> PyResult<usize> {
        let mut iterator = items.cast::<PyIterator>()?.clone();
        let mut taken = 0;
        let mut shared = None;
        while taken < limit {
            let Some(item) = iterator.next() else { break };
            let item = item?;
            let input = Input {
                index: self.next_index.fetch_add(1, Ordering::Relaxed),
                message: prepare(py, &item, &mut shared),
                payload: (),
            };
            self.with(py, |planner| planner.add(input))?;
            taken += 1;
        }
        Ok(taken)
    }

    /// The plan, as a dict of plain values (see `bizmsg.CampaignPlan`).
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let taken = self
            .planner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let Some(planner) = taken else {
            return Err(to_py(
                py,
                Error::Campaign("this plan is already finished".to_owned()),
            ));
        };
        let plan = planner.finish();
        let out = PyDict::new(py);
        out.set_item("total", plan.total)?;
        out.set_item("valid", plan.valid)?;
        out.set_item("invalid_count", plan.invalid_count)?;
        let invalid = PyList::empty(py);
        for (index, error) in plan.invalid {
            invalid.append((index, to_py(py, error).into_value(py)))?;
        }
        out.set_item("invalid", invalid)?;
        out.set_item("duplicate_count", plan.duplicate_count)?;
        out.set_item("duplicates", plan.duplicates)?;
        out.set_item("to_send", plan.to_send)?;
        let senders = PyList::empty(py);
        for sender in plan.senders {
            let entry = PyDict::new(py);
            entry.set_item("sender", sender.digits)?;
            entry.set_item("messages", sender.messages)?;
            entry.set_item("listed", sender.listed)?;
            entry.set_item("status", sender.status)?;
            entry.set_item("quality_rating", sender.quality_rating)?;
            entry.set_item("throughput", sender.throughput)?;
            entry.set_item("account_id", sender.account_id)?;
            entry.set_item("pace", sender.pace)?;
            entry.set_item("problem", sender.problem)?;
            entry.set_item("warning", sender.warning)?;
            senders.append(entry)?;
        }
        out.set_item("senders", senders)?;
        let accounts = PyList::empty(py);
        for account in plan.accounts {
            let entry = PyDict::new(py);
            entry.set_item("account_id", account.id)?;
            entry.set_item("name", account.name)?;
            entry.set_item("tier", account.tier)?;
            entry.set_item("limit", account.limit)?;
            entry.set_item("unique_recipients", account.unique_recipients)?;
            accounts.append(entry)?;
        }
        out.set_item("accounts", accounts)?;
        out.set_item("estimated_seconds", plan.estimated_seconds)?;
        out.set_item("warnings", plan.warnings)?;
        Ok(out)
    }
}
