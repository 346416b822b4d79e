//! Tolerant reads of fields from a JSON object: the spec shows strings, a real service may send
//! numbers; a field may be missing or null.

use serde_json::{Map, Value};

use crate::error::Error;

/// A string field; a number is accepted and rendered as its decimal text.
pub(crate) fn string(object: &Map<String, Value>, name: &str) -> Option<String> {
    match object.get(name)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A string field the model cannot do without (an identifier).
pub(crate) fn required_string(
    object: &Map<String, Value>,
    model: &str,
    name: &str,
) -> crate::Result<String> {
    string(object, name).ok_or_else(|| Error::Decode {
        message: format!("{model} has no usable {name:?} field"),
        snippet: crate::wire::fields::snippet(&Value::Object(object.clone())),
    })
}

/// A field whose type the spec leaves open (string or number): kept as received.
pub(crate) fn scalar(object: &Map<String, Value>, name: &str) -> Option<Value> {
    match object.get(name)? {
        Value::Null => None,
        v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)) => Some(v.clone()),
        other => Some(Value::String(other.to_string())),
    }
}

/// An integer field; a numeric string (`"12"`) is accepted.
pub(crate) fn integer(object: &Map<String, Value>, name: &str) -> Option<i64> {
    match object.get(name)? {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The first 200 characters of a body, for error messages.
pub(crate) fn snippet(value: &Value) -> String {
    truncate(&value.to_string(), 200)
}

pub(crate) fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}
