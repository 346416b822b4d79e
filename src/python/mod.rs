//! The pyo3 bindings: `bizmsg._native`. They only translate between Python and the core.

mod args;
mod attempt_log;
mod call_args;
mod callbacks;
mod campaign;
mod client;
mod convert;
mod errors;
mod event_loop;
mod exceptions;
mod loop_handoff;
mod message_fields;
mod models;
mod pages;
mod replies;
mod runtime;
mod sandbox;
mod template;

use pyo3::prelude::*;

/// The extension's Rust allocations (a campaign makes tens per message) go to mimalloc, which
/// serves them in a fraction of glibc's time; Python's own objects keep Python's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Rust `log` records of target `bizmsg` go to Python's `logging.getLogger("bizmsg")`.
static LOG_RESET: std::sync::OnceLock<pyo3_log::ResetHandle> = std::sync::OnceLock::new();

/// `Page.has_next_page()`: the same rule the page stream follows.
#[pyfunction]
#[pyo3(signature = (*, current, size, items, pages, total))]
fn has_next_page(
    current: i64,
    size: i64,
    items: usize,
    pages: Option<i64>,
    total: Option<i64>,
) -> bool {
    crate::wire::has_next_page(current, size, items, pages, total)
}

/// A phone number as logs and spans may show it (`crate::masking::mask_phone`): the
/// instrumentation masks recipients exactly as the logs do.
#[pyfunction]
fn mask_phone(value: &str) -> String {
    crate::masking::mask_phone(value)
}

/// Seconds this process's sends have waited for their pacing slots and pauses, in total
/// (`crate::limits::seconds_waited`): the instrumentation's `bizmsg.pacing.wait`.
#[pyfunction]
fn seconds_waited_to_send() -> f64 {
    crate::limits::seconds_waited()
}

/// The same, per sender (masked as the logs mask numbers; the senders past the first 1,000
/// counted together as `_OTHER`): the instrumentation's `bizmsg.pacing.wait` by sender.
#[pyfunction]
fn seconds_waited_to_send_by_sender() -> Vec<(String, f64)> {
    crate::limits::seconds_waited_by_sender()
}

/// How many times a shared limits' store became unreachable in this process, and how many are
/// unreachable now (`crate::limits::shared_state_outages`): the instrumentation's
/// `bizmsg.shared_state.outages`.
#[pyfunction]
fn shared_state_outages() -> (u64, u64) {
    (
        crate::limits::shared_state_outages(),
        crate::limits::shared_state_outages_ongoing(),
    )
}

/// HTTP attempts retried so far, by the `error.type` of the attempt retried and the URL
/// template: the instrumentation's `bizmsg.retries`.
#[pyfunction]
fn retries_counted() -> Vec<(String, String, u64)> {
    crate::client::retries_counted()
}

/// Throttling answers (429, 503) received so far, by status and URL template: the
/// instrumentation's `bizmsg.throttled`.
#[pyfunction]
fn throttled_counted() -> Vec<(u16, String, u64)> {
    crate::client::throttled_counted()
}

/// Starts or stops counting what the instrumentation's metrics read (`crate::counting`): on
/// while instrumented, so that counts no one reads cost the sends nothing.
#[pyfunction]
fn count_for_metrics(on: bool) {
    crate::counting::set(on);
}

/// Campaign messages this process has dispatched and not finished (waiting for their pacing
/// slot, or on the wire): the instrumentation's `bizmsg.messages.in_flight`.
#[pyfunction]
fn campaign_messages_in_flight() -> u64 {
    crate::campaign::messages_in_flight()
}

/// `SendResult.ok` for a result built in Python: the same rule as for a received one.
#[pyfunction]
fn is_success_code(code: &Bound<'_, PyAny>, success_codes: Vec<String>) -> bool {
    use crate::wire::Scalar;
    let code = match convert::py_to_value("code", code) {
        Ok(serde_json::Value::String(text)) => Some(Scalar::Text(text)),
        Ok(serde_json::Value::Number(number)) => Some(Scalar::Number(number.to_string())),
        Ok(serde_json::Value::Bool(flag)) => Some(Scalar::Bool(flag)),
        _ => None,
    };
    crate::wire::is_success(code.as_ref(), &success_codes)
}

/// Installs the bridge from Rust `log` records to Python's `logging` (once; `bizmsg._logging`
/// calls it when the first client or sandbox is made, so importing bizmsg imports no logging).
#[pyfunction]
fn install_logging(py: Python<'_>) -> PyResult<()> {
    if LOG_RESET.get().is_some() {
        return Ok(());
    }
    // Our lines down to DEBUG; other crates' (reqwest, rustls, ...) from WARN only, so their
    // debug and trace sites stay cheap and out of the application's logs.
    let logger = pyo3_log::Logger::new(py, pyo3_log::Caching::LoggersAndLevels)?
        .filter(log::LevelFilter::Warn)
        .filter_target("bizmsg".to_owned(), log::LevelFilter::Debug);
    let handle = logger.reset_handle();
    if log::set_boxed_logger(Box::new(WithTraceIds(logger))).is_ok() {
        // The most any of its filters lets through (bizmsg's DEBUG), as `install` sets it.
        log::set_max_level(log::LevelFilter::Debug);
        let _ = LOG_RESET.set(handle);
    }
    Ok(())
}

/// pyo3-log's logger, with the span ids of the traced call being run (`client::log_ids`)
/// added to each record's fields, as `otelTraceID`, `otelSpanID` and `otelTraceSampled`: a
/// record logged on one of the runtime's threads (an async call, a campaign), where Python
/// has no current span, then still names the call's. Records of untraced calls are passed on
/// as they are.
struct WithTraceIds(pyo3_log::Logger);

impl log::Log for WithTraceIds {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        log::Log::enabled(&self.0, metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        match crate::client::log_ids::current() {
            None => log::Log::log(&self.0, record),
            Some(ids) => {
                let fields = IdsAfter {
                    fields: record.key_values(),
                    ids: &ids,
                };
                log::Log::log(&self.0, &record.to_builder().key_values(&fields).build());
            }
        }
    }

    fn flush(&self) {
        log::Log::flush(&self.0);
    }
}

/// A record's own fields, then the span ids.
struct IdsAfter<'a> {
    fields: &'a dyn log::kv::Source,
    ids: &'a crate::client::LogIds,
}

impl log::kv::Source for IdsAfter<'_> {
    fn visit<'kvs>(
        &'kvs self,
        visitor: &mut dyn log::kv::VisitSource<'kvs>,
    ) -> Result<(), log::kv::Error> {
        use log::kv::{Key, Value};
        self.fields.visit(visitor)?;
        visitor.visit_pair(
            Key::from_str("otelTraceID"),
            Value::from(self.ids.trace_id.as_str()),
        )?;
        visitor.visit_pair(
            Key::from_str("otelSpanID"),
            Value::from(self.ids.span_id.as_str()),
        )?;
        visitor.visit_pair(
            Key::from_str("otelTraceSampled"),
            Value::from(self.ids.sampled),
        )
    }
}

/// Forgets the logging levels pyo3-log cached, so a level set after the first call applies.
#[pyfunction]
fn refresh_logging() {
    if let Some(handle) = LOG_RESET.get() {
        handle.reset();
    }
}

#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    runtime::record_main_thread(py)?;
    let shutdown = wrap_pyfunction!(runtime::shutdown, module)?;
    py.import("atexit")?
        .call_method1("register", (&shutdown,))?;
    module.add_function(shutdown)?;
    module.add_class::<client::NativeClient>()?;
    module.add_class::<attempt_log::AttemptLog>()?;
    module.add_class::<client::Listing>()?;
    module.add_class::<campaign::CampaignRun>()?;
    module.add_class::<campaign::SendOutcome>()?;
    module.add_class::<message_fields::MessageFields>()?;
    module.add_function(wrap_pyfunction!(campaign::restore_send_outcome, module)?)?;
    module.add_class::<campaign::CampaignPlanner>()?;
    module.add_function(wrap_pyfunction!(has_next_page, module)?)?;
    module.add_function(wrap_pyfunction!(is_success_code, module)?)?;
    module.add_function(wrap_pyfunction!(mask_phone, module)?)?;
    module.add_function(wrap_pyfunction!(seconds_waited_to_send, module)?)?;
    module.add_function(wrap_pyfunction!(seconds_waited_to_send_by_sender, module)?)?;
    module.add_function(wrap_pyfunction!(shared_state_outages, module)?)?;
    module.add_function(wrap_pyfunction!(campaign_messages_in_flight, module)?)?;
    module.add_function(wrap_pyfunction!(count_for_metrics, module)?)?;
    module.add_function(wrap_pyfunction!(retries_counted, module)?)?;
    module.add_function(wrap_pyfunction!(throttled_counted, module)?)?;
    module.add_class::<sandbox::SandboxServer>()?;
    module.add_class::<pages::NativePageStream>()?;
    module.add_function(wrap_pyfunction!(models::model_from_json, module)?)?;
    module.add_function(wrap_pyfunction!(convert::json_loads, module)?)?;
    module.add_function(wrap_pyfunction!(models::model_fields, module)?)?;
    module.add_function(wrap_pyfunction!(refresh_logging, module)?)?;
    module.add_function(wrap_pyfunction!(install_logging, module)?)?;
    module.add_function(wrap_pyfunction!(template::template_wire, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add(
        "DEFAULT_SUCCESS_CODES",
        crate::wire::DEFAULT_SUCCESS_CODES.to_vec(),
    )?;
    module.add("MAX_PAGE_SIZE", crate::validate::MAX_PAGE_SIZE)?;
    campaign::options::add_defaults(module)?;
    Ok(())
}
