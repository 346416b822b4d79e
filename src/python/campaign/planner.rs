//! A campaign's preflight (`CampaignPlanner`): fed like a run, finished into a plan (a dict
//! for `CampaignPlan`).

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyList};

use super::input::prepare;
use crate::campaign::Input;
use crate::error::Error;
use crate::python::errors::to_py;

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
        let mut guard = crate::sync::lock(&self.planner);
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
        let taken = crate::sync::lock(&self.planner).take();
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
