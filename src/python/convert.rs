//! Decoded wire models to the dataclasses of `bizmsg.models`, and JSON to and from Python.
//!
//! Models are built without running their `__init__`: `object.__new__(cls)` and then each slot
//! set directly, which is what a frozen dataclass's own `__init__` does, minus the Python
//! frames. Each model's `_wire` slot holds the exact bytes of the JSON object it was decoded
//! from; `to_dict()` (and `raw=True`) build Python objects from them with jiter, only when
//! asked, exactly as `json.loads` would (big integers and floats included).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyBool, PyBytes, PyDateTime, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyTzInfo,
};
use pyo3::{intern, BoundObject};
use serde_json::{Map, Number, Value};

use crate::client::Meta;
use crate::error::Error;
use crate::wire::{
    BusinessAccount, BusinessPhoneNumber, FieldRef, FromWire, Page, RawJson, Scalar, SendResult,
    WireModel,
};

struct Classes {
    object_new: Py<PyAny>,
    send_result: Py<PyAny>,
    business_account: Py<PyAny>,
    business_phone_number: Py<PyAny>,
    page: Py<PyAny>,
    async_page: Py<PyAny>,
    response_meta: Py<PyAny>,
    template: Py<PyAny>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || {
        let models = py.import("bizmsg.models")?;
        let class = |name: &str| models.getattr(name).map(Bound::unbind);
        Ok(Classes {
            object_new: py
                .import("builtins")?
                .getattr("object")?
                .getattr("__new__")?
                .unbind(),
            send_result: class("SendResult")?,
            business_account: class("BusinessAccount")?,
            business_phone_number: class("BusinessPhoneNumber")?,
            page: class("Page")?,
            async_page: class("AsyncPage")?,
            response_meta: class("ResponseMeta")?,
            template: class("Template")?,
        })
    })
}

/// Whether `object` is exactly a `bizmsg.Template` (a subclass could make its parts change).
pub(crate) fn is_template(py: Python<'_>, object: &Bound<'_, PyAny>) -> bool {
    classes(py).is_ok_and(|classes| object.get_type().is(classes.template.bind(py)))
}

fn instance<'py>(py: Python<'py>, class: &Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
    classes(py)?.object_new.bind(py).call1((class.bind(py),))
}

/// Sets a slot the way `object.__setattr__` does, past the frozen dataclass's `__setattr__`.
fn put<'py>(
    object: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
    value: impl IntoPyObject<'py>,
) -> PyResult<()> {
    let value = value
        .into_pyobject(object.py())
        .map_err(Into::into)?
        .into_any();
    // SAFETY: all three pointers are live objects owned by bound references for the call.
    let status = unsafe {
        pyo3::ffi::PyObject_GenericSetAttr(object.as_ptr(), name.as_ptr(), value.as_ptr())
    };
    if status == 0 {
        Ok(())
    } else {
        Err(PyErr::fetch(object.py()))
    }
}

pub(crate) fn value_to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => number_to_py(py, n)?,
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => map_to_dict(py, map)?.into_any(),
    })
}

fn number_to_py<'py>(py: Python<'py>, n: &Number) -> PyResult<Bound<'py, PyAny>> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into_pyobject(py)?.into_any());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.into_pyobject(py)?.into_any());
    }
    Ok(PyFloat::new(py, n.as_f64().unwrap_or(f64::NAN)).into_any())
}

pub(crate) fn map_to_dict<'py>(
    py: Python<'py>,
    map: &Map<String, Value>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (key, value) in map {
        dict.set_item(key, value_to_py(py, value)?)?;
    }
    Ok(dict)
}

/// A Python value to JSON: `None`, bools, ints, floats, strings, lists/tuples and dicts with
/// string keys. Anything else is a [`Error::Validation`] naming `field`.
pub(crate) fn py_to_value(field: &str, object: &Bound<'_, PyAny>) -> Result<Value, Error> {
    let refuse = |what: String| Error::validation(field, what);
    if object.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = object.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = object.cast::<PyString>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_owned()))
            .map_err(|_| refuse("contains a string that is not valid UTF-8".to_owned()));
    }
    if object.cast::<PyInt>().is_ok() {
        if let Ok(i) = object.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = object.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(refuse("contains an integer too large for JSON".to_owned()));
    }
    if let Ok(f) = object.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| {
                refuse("contains a float that JSON cannot hold (NaN or infinity)".to_owned())
            });
    }
    if let Ok(dict) = object.cast::<PyDict>() {
        let mut map = Map::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            let key = key
                .cast::<PyString>()
                .map_err(|_| refuse(format!("has a non-string key {}", repr(&key))))?
                .to_str()
                .map_err(|_| refuse("has a key that is not valid UTF-8".to_owned()))?
                .to_owned();
            map.insert(key, py_to_value(field, &value)?);
        }
        return Ok(Value::Object(map));
    }
    if object.cast::<PyList>().is_ok() || object.cast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for item in object
            .try_iter()
            .map_err(|_| refuse("is not iterable".to_owned()))?
        {
            let item = item.map_err(|_| refuse("could not be iterated".to_owned()))?;
            items.push(py_to_value(field, &item)?);
        }
        return Ok(Value::Array(items));
    }
    // Other mappings and sequences (e.g. types.MappingProxyType) through their dict/list form.
    if object.hasattr("keys").unwrap_or(false) {
        if let Ok(dict) = object
            .py()
            .import("builtins")
            .and_then(|b| b.getattr("dict")?.call1((object,)))
        {
            return py_to_value(field, &dict);
        }
    }
    Err(refuse(format!(
        "{} of type {} is not JSON data",
        repr(object),
        object
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default()
    )))
}

fn repr(object: &Bound<'_, PyAny>) -> String {
    object
        .repr()
        .map(|r| crate::masking::truncate(&r.to_string(), 60))
        .unwrap_or_else(|_| "<unprintable>".to_owned())
}

/// JSON text to Python objects (dicts, lists, str, int of any size, float, bool, None), with
/// the keys of repeated objects shared: what `to_dict()` and `raw=True` return.
pub(crate) fn json_to_py<'py>(py: Python<'py>, json: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let parser = jiter::PythonParse {
        // Values too, not only keys: a page repeats the same statuses, tiers and ratings in
        // every item, and sharing those strings made a 20-item page 17% faster to build.
        cache_mode: jiter::StringCacheMode::All,
        ..jiter::PythonParse::default()
    };
    parser.python_parse(py, json).map_err(|error| {
        super::exceptions::decode_error(
            py,
            Error::Decode {
                message: format!("the JSON could not be read: {}", error.description(json)),
                snippet: crate::masking::truncate(&String::from_utf8_lossy(json), 200),
            },
        )
    })
}

/// Whether `object` is a page envelope as the listings read it: a dict whose `data` is a list
/// of dicts (the counts are read leniently, never refused).
pub(crate) fn is_page_envelope(object: &Bound<'_, PyAny>) -> bool {
    let Ok(envelope) = object.cast::<PyDict>() else {
        return false;
    };
    match envelope.get_item(intern!(object.py(), "data")) {
        Ok(None) => false,
        Ok(Some(data)) => data
            .cast::<PyList>()
            .is_ok_and(|items| items.iter().all(|item| item.is_instance_of::<PyDict>())),
        Err(_) => false,
    }
}

/// `bizmsg.models` `to_dict()`: the JSON object a model was decoded from.
#[pyfunction]
pub(crate) fn json_loads<'py>(py: Python<'py>, json: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    json_to_py(py, json)
}

fn wire<'py>(py: Python<'py>, raw: &RawJson) -> Bound<'py, PyBytes> {
    PyBytes::new(py, raw.as_bytes())
}

/// A scalar as the service wrote it: a string, a number (an int of any size, or a float), a
/// bool.
pub(crate) fn scalar_to_py<'py>(
    py: Python<'py>,
    value: Option<&Scalar>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        None => py.None().into_bound(py),
        Some(Scalar::Text(text)) => PyString::new(py, text).into_any(),
        Some(Scalar::Bool(flag)) => PyBool::new(py, *flag).to_owned().into_any(),
        Some(Scalar::Number(number)) => json_to_py(py, number.as_bytes())?,
    })
}

/// Timezones by UTC offset in seconds: a page of a thousand timestamps in three offsets makes
/// three tzinfo objects, not a thousand.
fn timezone<'py>(py: Python<'py>, offset: i32) -> PyResult<Bound<'py, PyTzInfo>> {
    static ZONES: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    let zones = ZONES
        .get_or_try_init(py, || Ok::<_, PyErr>(PyDict::new(py).unbind()))?
        .bind(py);
    if let Some(zone) = zones.get_item(offset)? {
        return Ok(zone.cast_into::<PyTzInfo>()?);
    }
    let zone = if offset == 0 {
        PyTzInfo::utc(py)?.to_owned()
    } else {
        PyTzInfo::fixed_offset(py, pyo3::types::PyDelta::new(py, 0, offset, 0, true)?)?
    };
    zones.set_item(offset, &zone)?;
    Ok(zone)
}

/// A timezone-aware `datetime` in the timestamp's own offset.
fn datetime<'py>(
    py: Python<'py>,
    value: Option<&chrono::DateTime<chrono::FixedOffset>>,
) -> PyResult<Bound<'py, PyAny>> {
    use chrono::{Datelike, Timelike};
    let Some(value) = value else {
        return Ok(py.None().into_bound(py));
    };
    let local = value.naive_local();
    let zone = timezone(py, value.offset().local_minus_utc())?;
    let narrow = |n: u32| u8::try_from(n).unwrap_or(0);
    // A leap second (nanoseconds past 1e9) is kept as the second it extends.
    let micros = (local.nanosecond() % 1_000_000_000) / 1_000;
    Ok(PyDateTime::new(
        py,
        local.year(),
        narrow(local.month()),
        narrow(local.day()),
        narrow(local.hour()),
        narrow(local.minute()),
        narrow(local.second()),
        micros,
        Some(&zone),
    )?
    .into_any())
}

pub(crate) fn meta<'py>(py: Python<'py>, meta: &Meta) -> PyResult<Bound<'py, PyAny>> {
    let object = instance(py, &classes(py)?.response_meta)?;
    put(&object, intern!(py, "status_code"), meta.status_code)?;
    put(
        &object,
        intern!(py, "request_id"),
        meta.request_id.as_deref(),
    )?;
    put(&object, intern!(py, "elapsed"), meta.elapsed)?;
    put(&object, intern!(py, "attempts"), meta.attempts)?;
    put(
        &object,
        intern!(py, "idempotency_key"),
        meta.idempotency_key.as_deref(),
    )?;
    Ok(object)
}

pub(crate) fn send_result<'py>(
    py: Python<'py>,
    result: &SendResult,
    call: Option<&Meta>,
) -> PyResult<Bound<'py, PyAny>> {
    static NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
    let object = model(py, result, &classes(py)?.send_result, &NAMES)?;
    put(&object, intern!(py, "_ok"), result.ok)?;
    put(&object, intern!(py, "_meta"), optional_meta(py, call)?)?;
    Ok(object)
}

/// A decoded model as its dataclass: each field of its table set from Rust (`names` caches the
/// fields' names as Python strings), and the object's text in `_wire`.
fn model<'py, M: WireModel + FromWire>(
    py: Python<'py>,
    decoded: &M,
    class: &Py<PyAny>,
    names: &'static PyOnceLock<Vec<Py<PyString>>>,
) -> PyResult<Bound<'py, PyAny>> {
    let names = names.get_or_init(py, || {
        M::FIELDS
            .iter()
            .map(|(name, _)| PyString::intern(py, name).unbind())
            .collect()
    });
    let object = instance(py, class)?;
    decoded.visit(|index, value| {
        let Some(name) = names.get(index) else {
            return Ok(());
        };
        put(&object, name.bind(py), field_to_py(py, value)?)
    })?;
    put(&object, intern!(py, "_wire"), wire(py, decoded.wire()))?;
    Ok(object)
}

/// A field's value as Python has it.
fn field_to_py<'py>(py: Python<'py>, value: FieldRef<'_>) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        FieldRef::Text(text) => match text {
            Some(text) => PyString::new(py, text).into_any(),
            None => py.None().into_bound(py),
        },
        FieldRef::Scalar(scalar) => scalar_to_py(py, scalar)?,
        FieldRef::Timestamp(timestamp) => datetime(py, timestamp)?,
        FieldRef::PhoneNumbers(numbers) => {
            let list = PyList::empty(py);
            for number in numbers {
                list.append(phone_number(py, number)?)?;
            }
            list.into_any()
        }
    })
}

fn optional_meta<'py>(py: Python<'py>, call: Option<&Meta>) -> PyResult<Bound<'py, PyAny>> {
    match call {
        Some(call) => meta(py, call),
        None => Ok(py.None().into_bound(py)),
    }
}

pub(crate) fn phone_number<'py>(
    py: Python<'py>,
    number: &BusinessPhoneNumber,
) -> PyResult<Bound<'py, PyAny>> {
    static NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
    let object = model(py, number, &classes(py)?.business_phone_number, &NAMES)?;
    put(&object, intern!(py, "_meta"), py.None())?;
    Ok(object)
}

pub(crate) fn business_account<'py>(
    py: Python<'py>,
    account: &BusinessAccount,
) -> PyResult<Bound<'py, PyAny>> {
    static NAMES: PyOnceLock<Vec<Py<PyString>>> = PyOnceLock::new();
    let object = model(py, account, &classes(py)?.business_account, &NAMES)?;
    put(&object, intern!(py, "_meta"), py.None())?;
    Ok(object)
}

/// A list item as its dataclass.
pub(crate) trait PyItem {
    fn build<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

impl PyItem for BusinessAccount {
    fn build<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        business_account(py, self)
    }
}

impl PyItem for BusinessPhoneNumber {
    fn build<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        phone_number(py, self)
    }
}

/// Which class a page is built as: `Page`, or `AsyncPage` (fetched by an `AsyncClient`, whose
/// `next_page()` is awaitable).
#[derive(Clone, Copy)]
pub(crate) enum PageKind {
    Sync,
    Async,
}

/// A page as a `Page` (or `AsyncPage`) dataclass, or (`raw`) as the received JSON object.
pub(crate) fn page<'py, T: PyItem>(
    py: Python<'py>,
    page: &Page<T>,
    call: Option<&Meta>,
    kind: PageKind,
) -> PyResult<Bound<'py, PyAny>> {
    let items = PyList::empty(py);
    for item in &page.data {
        items.append(item.build(py)?)?;
    }
    let class = match kind {
        PageKind::Sync => &classes(py)?.page,
        PageKind::Async => &classes(py)?.async_page,
    };
    let object = instance(py, class)?;
    put(&object, intern!(py, "data"), items)?;
    put(&object, intern!(py, "total"), page.total)?;
    put(&object, intern!(py, "size"), page.size)?;
    put(&object, intern!(py, "current"), page.current)?;
    put(&object, intern!(py, "pages"), page.pages)?;
    put(&object, intern!(py, "_wire"), wire(py, &page.wire))?;
    put(&object, intern!(py, "_meta"), optional_meta(py, call)?)?;
    Ok(object)
}
