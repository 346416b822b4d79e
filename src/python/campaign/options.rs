//! The keywords of `send_many` and `plan` (as `NativeClient.campaign` and `.planner` receive
//! them, each checked by the Python layer for its type) read into the engine's options, with
//! the error that names a bad one. The defaults are the engine's (`crate::campaign::Options`),
//! read by the Python layer from `_native.CAMPAIGN_DEFAULTS`.

use pyo3::prelude::*;

use crate::campaign::{Options, PlanOptions};
use crate::client::CallOptions;
use crate::error::Error;
use crate::python::args::{call_options, integer};

/// The engine's defaults, for the Python signatures and docs to show (they live here only):
/// `DEFAULT_CONCURRENCY`, `DEFAULT_UNREACHABLE_AFTER`, `DEFAULT_UNREACHABLE_FOR` and
/// `DEFAULT_LEASE` (seconds).
pub(crate) fn add_defaults(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let defaults = Options::default();
    module.add("DEFAULT_CONCURRENCY", defaults.concurrency)?;
    module.add("DEFAULT_UNREACHABLE_AFTER", defaults.unreachable_after)?;
    module.add(
        "DEFAULT_UNREACHABLE_FOR",
        defaults.unreachable_for.as_secs_f64(),
    )?;
    module.add("DEFAULT_LEASE", defaults.lease.as_secs_f64())?;
    Ok(())
}

/// The arguments of `NativeClient.campaign`, as given.
pub(crate) struct CampaignArgs<'a, 'py> {
    pub concurrency: &'a Bound<'py, PyAny>,
    pub rate_limit: Option<f64>,
    pub pace: Option<&'a str>,
    pub stop_on_error: bool,
    pub dedupe: bool,
    pub journal: Option<&'a str>,
    pub campaign_id: Option<String>,
    pub resend_unknown: bool,
    pub enforce_tier: bool,
    pub lease: Option<f64>,
    pub unreachable_after: Option<&'a Bound<'py, PyAny>>,
    pub unreachable_for: f64,
    pub timeout: &'a Bound<'py, PyAny>,
    pub max_retries: &'a Bound<'py, PyAny>,
}

/// A campaign's options, or the error that names the first bad argument.
pub(crate) fn campaign_options(args: CampaignArgs<'_, '_>) -> Result<Options, Error> {
    let concurrency = integer("concurrency", args.concurrency)?;
    let concurrency = usize::try_from(concurrency).map_err(|_| {
        Error::validation(
            "concurrency",
            format!("must be from 1 to 10000, got {concurrency}"),
        )
    })?;
    Ok(Options {
        concurrency,
        rate_limit: args.rate_limit,
        pace_auto: pace_auto(args.pace)?,
        stop_on_error: args.stop_on_error,
        dedupe: args.dedupe,
        journal: args
            .journal
            .map(crate::campaign::JournalTarget::parse)
            .transpose()?,
        campaign_id: args.campaign_id,
        resend_unknown: args.resend_unknown,
        enforce_tier: args.enforce_tier,
        lease: lease_arg(args.lease)?,
        unreachable_after: match args.unreachable_after {
            None => None,
            Some(count) => Some(u32::try_from(integer("unreachable_after", count)?).map_err(
                |_| Error::validation("unreachable_after", "must be from 1 to 4294967295"),
            )?),
        },
        unreachable_for: seconds_arg("unreachable_for", args.unreachable_for)?,
        call: call_options(args.timeout, args.max_retries, None)?,
    })
}

/// `pace=`: `None` or `"auto"`.
fn pace_auto(pace: Option<&str>) -> Result<bool, Error> {
    match pace {
        None => Ok(false),
        Some("auto") => Ok(true),
        Some(other) => Err(Error::validation(
            "pace",
            format!("must be None or \"auto\", got {other:?}"),
        )),
    }
}

pub(crate) fn plan_args(
    rate_limit: Option<f64>,
    pace: Option<&str>,
    dedupe: bool,
    timeout: &Bound<'_, PyAny>,
    max_retries: &Bound<'_, PyAny>,
) -> Result<(PlanOptions, CallOptions), Error> {
    if let Some(rate) = rate_limit {
        if !rate.is_finite() || rate <= 0.0 {
            return Err(Error::validation(
                "rate_limit",
                format!("must be a positive number of messages per second, got {rate}"),
            ));
        }
    }
    Ok((
        PlanOptions {
            dedupe,
            pace_auto: pace_auto(pace)?,
            rate_limit,
        },
        call_options(timeout, max_retries, None)?,
    ))
}

/// A positive number of seconds, for `field`.
fn seconds_arg(field: &str, seconds: f64) -> Result<std::time::Duration, Error> {
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(Error::validation(
            field,
            format!("must be a positive number of seconds, got {seconds}"),
        ));
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| Error::validation(field, format!("{seconds} seconds is out of range")))
}

/// `lease=` in seconds (`None`: the default), a positive number.
fn lease_arg(lease: Option<f64>) -> Result<std::time::Duration, Error> {
    let Some(seconds) = lease else {
        return Ok(crate::campaign::DEFAULT_LEASE);
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(Error::validation(
            "lease",
            format!("must be a positive number of seconds, got {seconds}"),
        ));
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| Error::validation("lease", format!("{seconds} seconds is out of range")))
}
