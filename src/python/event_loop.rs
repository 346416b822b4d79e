//! Whether a sync call is made from inside a running asyncio loop (a notebook cell, an `async
//! def`), which it would block: what `NativeClient` warns about once per client.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Whether a sync call made now, with a loop running on this thread, holds up work the loop
/// has to do. Inside a Jupyter kernel (`bizmsg._notebook` loaded), not from the cell being run
/// (the kernel's loop waits for it anyway): the client keeps its one warning for a call that
/// does, from another task.
pub(crate) fn blocks_the_loop(py: Python<'_>) -> bool {
    let Ok(Some(notebook)) = py
        .import(pyo3::intern!(py, "sys"))
        .and_then(|sys| sys.getattr(pyo3::intern!(py, "modules")))
        .and_then(|modules| {
            modules
                .get_item(pyo3::intern!(py, "bizmsg._notebook"))
                .map(Some)
        })
        .or_else(|_| Ok::<_, PyErr>(None))
    else {
        return true;
    };
    notebook
        .call_method0(pyo3::intern!(py, "sync_call_blocks_loop"))
        .and_then(|blocks| blocks.extract::<bool>())
        .unwrap_or(true)
}

/// Whether an asyncio loop runs on this thread. asyncio is only asked if some code imported it
/// (a program that never did has no loop), so the check costs a dict lookup otherwise.
pub(crate) fn event_loop_running(py: Python<'_>) -> bool {
    static MODULES: pyo3::sync::PyOnceLock<Py<PyDict>> = pyo3::sync::PyOnceLock::new();
    let modules = MODULES.get_or_try_init(py, || -> PyResult<Py<PyDict>> {
        Ok(py
            .import(pyo3::intern!(py, "sys"))?
            .getattr(pyo3::intern!(py, "modules"))?
            .cast_into::<PyDict>()?
            .unbind())
    });
    let Ok(Some(events)) = modules.and_then(|modules| {
        modules
            .bind(py)
            .get_item(pyo3::intern!(py, "asyncio.events"))
    }) else {
        return false;
    };
    events
        .call_method0(pyo3::intern!(py, "_get_running_loop"))
        .is_ok_and(|running| !running.is_none())
}
