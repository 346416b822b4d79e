//! The pyo3 bindings: `bizmsg._native`. They only translate between Python and the core.

mod callbacks;
mod client;
mod convert;
mod errors;
mod pages;
mod result_thread;
mod runtime;
mod sandbox;

use pyo3::prelude::*;

/// Rust `log` records of target `bizmsg` go to Python's `logging.getLogger("bizmsg")`.
static LOG_RESET: std::sync::OnceLock<pyo3_log::ResetHandle> = std::sync::OnceLock::new();

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
    if let Ok(handle) = pyo3_log::Logger::new(py, pyo3_log::Caching::LoggersAndLevels)?
        .filter(log::LevelFilter::Trace)
        .filter_target("bizmsg".to_owned(), log::LevelFilter::Debug)
        .install()
    {
        let _ = LOG_RESET.set(handle);
    }
    runtime::record_main_thread(py)?;
    let shutdown = wrap_pyfunction!(runtime::shutdown, module)?;
    py.import("atexit")?
        .call_method1("register", (&shutdown,))?;
    module.add_function(shutdown)?;
    module.add_class::<client::NativeClient>()?;
    module.add_class::<sandbox::SandboxServer>()?;
    module.add_class::<pages::NativePageStream>()?;
    module.add_function(wrap_pyfunction!(convert::model_from_dict, module)?)?;
    module.add_function(wrap_pyfunction!(refresh_logging, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add(
        "DEFAULT_SUCCESS_CODES",
        crate::wire::DEFAULT_SUCCESS_CODES.to_vec(),
    )?;
    module.add("MAX_PAGE_SIZE", crate::validate::MAX_PAGE_SIZE)?;
    Ok(())
}
