//! Python arguments to core values: strings, integers, timeouts, headers, `verify`. Every
//! refusal is a core [`Error`] naming the argument, raised by the caller as its Python class.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyString};

use crate::client::{CallOptions, Verify};
use crate::error::Error;
use crate::Timeout;

/// The name of `value`'s type, for messages.
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_default()
}

pub(crate) fn text(field: &str, value: &Bound<'_, PyAny>) -> Result<String, Error> {
    value
        .cast::<PyString>()
        .map_err(|_| {
            Error::validation(field, format!("must be a string, got {}", type_name(value)))
        })?
        .to_str()
        .map(str::to_owned)
        .map_err(|_| Error::validation(field, "is not valid UTF-8"))
}

pub(crate) fn integer(field: &str, value: &Bound<'_, PyAny>) -> Result<i64, Error> {
    if value.cast::<PyBool>().is_ok() || value.cast::<PyInt>().is_err() {
        return Err(Error::validation(
            field,
            format!("must be an int, got {}", type_name(value)),
        ));
    }
    value
        .extract::<i64>()
        .map_err(|_| Error::validation(field, "is out of range"))
}

pub(crate) fn retries(value: &Bound<'_, PyAny>) -> Result<u32, Error> {
    let n = integer("max_retries", value)?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n <= 100)
        .ok_or_else(|| Error::validation("max_retries", format!("must be from 0 to 100, got {n}")))
}

/// `None`, a number of seconds (total), or a `bizmsg.Timeout` (any object with `connect`,
/// `read` and `total`).
pub(crate) fn timeout_arg(value: &Bound<'_, PyAny>) -> Result<Option<Timeout>, Error> {
    if value.is_none() {
        return Ok(None);
    }
    let seconds = |name: &str, v: &Bound<'_, PyAny>| -> Result<Option<Duration>, Error> {
        if v.is_none() {
            return Ok(None);
        }
        let secs: f64 = v.extract().map_err(|_| {
            Error::Configuration(format!("timeout {name} must be a number of seconds"))
        })?;
        if !secs.is_finite() || secs <= 0.0 {
            return Err(Error::Configuration(format!(
                "timeout {name} must be a positive number of seconds, got {secs}"
            )));
        }
        Duration::try_from_secs_f64(secs)
            .map(Some)
            .map_err(|_| Error::Configuration(format!("timeout {name} is out of range")))
    };
    if value.cast::<PyInt>().is_ok() || value.extract::<f64>().is_ok() {
        return Ok(Some(Timeout {
            connect: None,
            read: None,
            total: seconds("total", value)?,
        }));
    }
    let part = |name: &str| -> Result<Option<Duration>, Error> {
        let attribute = value.getattr(name).map_err(|_| {
            Error::Configuration(
                "timeout must be a number of seconds or a bizmsg.Timeout".to_owned(),
            )
        })?;
        seconds(name, &attribute)
    };
    Ok(Some(Timeout {
        connect: part("connect")?,
        read: part("read")?,
        total: part("total")?,
    }))
}

pub(crate) fn headers(dict: &Bound<'_, PyDict>) -> Result<Vec<(String, String)>, Error> {
    dict.iter()
        .map(|(name, value)| {
            let name = name
                .extract::<String>()
                .map_err(|_| Error::Configuration("header names must be strings".to_owned()))?;
            let value = value.extract::<String>().map_err(|_| {
                Error::Configuration(format!("the value of header {name:?} must be a string"))
            })?;
            Ok((name, value))
        })
        .collect()
}

pub(crate) fn verify_arg(value: &Bound<'_, PyAny>) -> Result<Verify, Error> {
    if let Ok(flag) = value.cast::<PyBool>() {
        return Ok(if flag.is_true() {
            Verify::Default
        } else {
            Verify::Disabled
        });
    }
    let path: std::path::PathBuf = value.extract().map_err(|_| {
        Error::Configuration("verify must be True, False or the path of a CA bundle".to_owned())
    })?;
    Ok(Verify::CaBundle(path))
}

/// The per-call options every method takes: `timeout=`, `max_retries=`.
pub(crate) fn call_options(
    timeout: &Bound<'_, PyAny>,
    max_retries: &Bound<'_, PyAny>,
    idempotency_key: Option<String>,
) -> Result<CallOptions, Error> {
    Ok(CallOptions {
        timeout: timeout_arg(timeout)?,
        max_retries: if max_retries.is_none() {
            None
        } else {
            Some(retries(max_retries)?)
        },
        idempotency_key,
        gate: None,
        attempt_log: None,
    })
}
