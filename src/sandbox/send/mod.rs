//! `POST /v1/chat/messages/send`: body checks, business validation (failed commits answered as
//! HTTP 200 send results), Idempotency-Key replay, and the commit itself.

use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::Serialize;
use serde_json::Value;

use xxhash_rust::xxh3::Xxh3;

use super::answer::Answer;
use super::state::Shared;
use super::store::Remembered;

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;

mod enforce;
#[cfg(test)]
mod tests;
mod validate;

use enforce::{enforce, Refusal};
use validate::{describe, quote, validate};

/// The send result of spec section 2.1.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SendResult {
    sms_id: Option<String>,
    status: &'static str,
    code: &'static str,
    msg: String,
}

/// A string field of the request body.
fn text_field<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    body.get(name).and_then(Value::as_str)
}

/// A business validation failure: its documented code and the explanation.
type Failure = (&'static str, String);

/// A send that `arrived` then (when its bytes reached the machine: `arrival.rs`).
pub(crate) fn send(
    shared: &Shared,
    tenant: usize,
    headers: &HeaderMap,
    body: &[u8],
    arrived: std::time::Instant,
) -> Answer {
    let store = &shared.store;
    if let Err(refusal) = check_content_type(headers) {
        return refusal;
    }
    let request = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!(
                    "request body must be a JSON object, got {}",
                    describe(&other)
                ),
            )
        }
        Err(error) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!("request body is not valid JSON: {error}"),
            )
        }
    };
    let key = match idempotency_key(headers) {
        // Checked even when not honoured: a malformed key is still a bad request.
        Ok(key) => key.filter(|_| shared.honour_idempotency_keys),
        Err(refusal) => return refusal,
    };
    let Some(data) = store.tenant(tenant) else {
        return Answer::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "sandbox has no data for the authenticated tenant",
        );
    };

    let mut ledger = store.ledger();
    let body = Value::Object(request);
    // Compared as JSON values: key order and whitespace do not matter.
    let fingerprint = canonical_fingerprint(&body);
    if let Some(key) = key {
        if let Some(remembered) = ledger.remembered(tenant, key) {
            if remembered.body != fingerprint {
                return Answer::error(
                    StatusCode::CONFLICT,
                    format!(
                        "Idempotency-Key {} was already used with a different request body",
                        quote(key)
                    ),
                );
            }
            let mut answer = Answer::raw(StatusCode::OK, remembered.response.to_vec()).with_header(
                HeaderName::from_static("idempotent-replayed"),
                HeaderValue::from_static("true"),
            );
            answer.idempotent_replay = true;
            shared.stats.count(&shared.stats.replayed);
            return answer;
        }
    }

    let checked =
        validate(data, &body)
            .map_err(Refusal::from)
            .and_then(|()| match &shared.limits {
                Some(limits) => enforce(limits, tenant, data, &body),
                None => Ok(()),
            });
    let checked = match checked {
        Err(Refusal::Throttled(answer)) => {
            shared.stats.count(&shared.stats.throttled);
            if let Some(from) = text_field(&body, "from") {
                shared.traffic.throttled(from);
            }
            return answer;
        }
        Err(Refusal::Failed(code, msg)) => Err((code, msg)),
        Ok(()) => Ok(()),
    };
    let result = match checked {
        Ok(()) => SendResult {
            sms_id: Some(ledger.next_sms_id()),
            status: "ACCEPTED",
            code: "0",
            msg: "success".to_owned(),
        },
        Err((code, msg)) => SendResult {
            sms_id: None,
            status: "FAILED",
            code,
            msg,
        },
    };
    let response = match serde_json::to_vec(&result) {
        Ok(response) => response,
        Err(error) => {
            return Answer::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("sandbox could not encode the send result: {error}"),
            )
        }
    };
    shared.stats.count(if result.sms_id.is_some() {
        &shared.stats.accepted
    } else {
        &shared.stats.failed_commits
    });
    if result.sms_id.is_some() {
        if let (Some(from), Some(to)) = (text_field(&body, "from"), text_field(&body, "to")) {
            shared.traffic.committed(from, to, arrived);
        }
    }
    if let Some(key) = key {
        ledger.remember(
            tenant,
            key,
            Remembered {
                body: fingerprint,
                response: response.clone().into(),
            },
        );
    }
    Answer::raw(StatusCode::OK, response)
}

/// A 128-bit fingerprint of a JSON value that ignores object key order (the sandbox keeps it
/// instead of the whole body of every Idempotency-Key it remembers).
fn canonical_fingerprint(value: &Value) -> u128 {
    fn feed(hasher: &mut Xxh3, value: &Value) {
        match value {
            Value::Null => hasher.update(b"n"),
            Value::Bool(flag) => hasher.update(if *flag { b"t" } else { b"f" }),
            Value::Number(number) => {
                hasher.update(b"#");
                hasher.update(number.to_string().as_bytes());
            }
            Value::String(text) => {
                hasher.update(b"s");
                hasher.update(&(text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
            Value::Array(items) => {
                hasher.update(b"[");
                hasher.update(&(items.len() as u64).to_le_bytes());
                for item in items {
                    feed(hasher, item);
                }
            }
            Value::Object(map) => {
                hasher.update(b"{");
                hasher.update(&(map.len() as u64).to_le_bytes());
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, item) in entries {
                    hasher.update(&(key.len() as u64).to_le_bytes());
                    hasher.update(key.as_bytes());
                    feed(hasher, item);
                }
            }
        }
    }
    let mut hasher = Xxh3::new();
    feed(&mut hasher, value);
    hasher.digest128()
}

fn check_content_type(headers: &HeaderMap) -> Result<(), Answer> {
    let given = headers
        .get(CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or("<not text>"));
    let essence = given
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase());
    if essence.as_deref() == Some("application/json") {
        return Ok(());
    }
    let got = given.map_or_else(|| "none".to_owned(), quote);
    Err(Answer::error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("Content-Type must be application/json, got {got}"),
    ))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, Answer> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match value.to_str() {
        // Visible ASCII only, as the message says: `to_str` alone would let spaces and tabs in.
        Ok(key)
            if !key.is_empty()
                && key.len() <= MAX_IDEMPOTENCY_KEY_CHARS
                && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(Some(key))
        }
        _ => Err(Answer::error(
            StatusCode::BAD_REQUEST,
            format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters"
            ),
        )),
    }
}
