//! The attempt loop every operation goes through: headers, timeouts, classification of
//! failures, retries, token refresh after a 401, and the log line of each attempt.

use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderName, HeaderValue, Method, Uri};
use serde_json::Value;

use super::body::OutgoingBody;
use super::connection::Reply;
use super::meta::Meta;
use super::request::Outgoing;
use super::retry::{is_retryable, parse_retry_after};
use super::Client;
use crate::error::{ApiBody, ApiError, Error, Result, UnknownOutcome};
use crate::validate::mask_phone;
use crate::wire::fields::truncate;

/// How safe it is to repeat a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Safety {
    /// Reads: repeating is harmless.
    Idempotent,
    /// A send: repeating may message a person twice.
    SendOnce,
}

pub(crate) struct Operation {
    pub method: Method,
    /// Absolute: the transport sends it in origin form on direct connections.
    pub url: Uri,
    pub body: Option<Bytes>,
    /// Sends only: the key, the recipient and the template, for `Idempotency-Key` and for
    /// reconciling an unknown outcome.
    pub send: Option<SendContext>,
}

impl Operation {
    fn safety(&self) -> Safety {
        if self.send.is_some() {
            Safety::SendOnce
        } else {
            Safety::Idempotent
        }
    }
}

pub(crate) struct SendContext {
    pub idempotency_key: String,
    /// Shared with the caller (a campaign sends it again without copying it).
    pub request: std::sync::Arc<crate::wire::SendRequest>,
}

impl SendContext {
    /// `cause` happened after the request may have reached the service; `request_id` is the
    /// service's, when an answer arrived.
    pub(crate) fn unknown(&self, cause: Error, request_id: Option<String>) -> Error {
        Error::SendOutcomeUnknown(Box::new(UnknownOutcome {
            idempotency_key: self.idempotency_key.clone(),
            to: self.request.to.clone(),
            template_name: self.request.template.name.clone(),
            request_id,
            cause: Box::new(cause),
        }))
    }
}

/// No attempt is started with less time than this left before the deadline: it could only
/// time out, and for a send that would make an outcome unknown for nothing.
const MIN_ATTEMPT_BUDGET: Duration = Duration::from_millis(50);

/// A 2xx answer: its body, decoded by the operation that asked.
pub(crate) struct Answer {
    pub body: Bytes,
    pub meta: Meta,
}

static APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

impl Client {
    pub(crate) async fn execute(
        &self,
        operation: &Operation,
        call: &super::CallOptions,
    ) -> Result<Answer> {
        let started = Instant::now();
        let mut timeout = match call.timeout {
            Some(timeout) => self.options.timeout.overridden_by(timeout),
            None => self.options.timeout,
        };
        // `connect` belongs to the pool, which was built with the client's value.
        timeout.connect = self.options.timeout.connect;
        // A total too large for an Instant is no deadline at all.
        let deadline = timeout.total.and_then(|total| started.checked_add(total));
        let max_retries = call.max_retries.unwrap_or(self.options.max_retries);
        if self.shared.transport.is_closed() {
            return Err(Error::Closed);
        }
        let idempotency_key = match &operation.send {
            Some(send) => Some(HeaderValue::from_str(&send.idempotency_key).map_err(|_| {
                Error::validation("idempotency_key", "is not a valid header value")
            })?),
            None => None,
        };

        let mut authorization = self.token(false, deadline).await?;
        let mut token_refreshed = false;
        let mut attempt: u32 = 1;
        let mut retries_done: u32 = 0;
        loop {
            if let Some(gate) = &call.gate {
                gate.wait().await;
            }
            // One clock read for both: a campaign makes this call per message.
            let attempt_started = Instant::now();
            // Only a body is watched: a request without one (a GET) is a read, retried anyway.
            let (body, watch) = match &operation.body {
                Some(data) => {
                    let (body, watch) = OutgoingBody::watched(data.clone());
                    (body, Some(watch))
                }
                None => (OutgoingBody::empty(), None),
            };
            let mut headers = Vec::with_capacity(5 + self.options.headers.len());
            headers.push((AUTHORIZATION, authorization.clone()));
            headers.push((ACCEPT, APPLICATION_JSON.clone()));
            headers.push((USER_AGENT, self.shared.user_agent.clone()));
            if operation.body.is_some() {
                headers.push((CONTENT_TYPE, APPLICATION_JSON.clone()));
            }
            if let Some(key) = &idempotency_key {
                headers.push((IDEMPOTENCY_KEY.clone(), key.clone()));
            }
            // The client's own headers; one of ours with the same name (accept, user-agent:
            // the others are refused as options) takes its value, in its place.
            for (name, value) in &self.options.headers {
                match headers.iter_mut().find(|(ours, _)| ours == name) {
                    Some(ours) => ours.1 = value.clone(),
                    None => headers.push((name.clone(), value.clone())),
                }
            }
            let request = Outgoing {
                method: operation.method.clone(),
                url: operation.url.clone(),
                headers,
                body,
            };

            let budget = attempt_budget(timeout, deadline, attempt_started);
            // Boxed: an attempt's future is the largest part of a call's, and every caller's
            // future (a send, a campaign's message) would embed it, and copy it at each move.
            let exchange = Box::pin(self.attempt(operation, request));
            let outcome = match budget {
                Some(budget) if budget.is_zero() => Err(Error::Timeout(format!(
                    "the total timeout of {:.3}s elapsed",
                    timeout.total.unwrap_or_default().as_secs_f64()
                ))),
                // From the clock read above (no second read): a budget too large for an
                // Instant is no deadline at all.
                Some(budget) => match attempt_started.checked_add(budget) {
                    Some(end) => match tokio::time::timeout_at(end.into(), exchange).await {
                        Ok(outcome) => outcome,
                        Err(_) => Err(Error::Timeout(format!(
                            "no complete answer within {:.3}s",
                            budget.as_secs_f64()
                        ))),
                    },
                    None => exchange.await,
                },
                None => exchange.await,
            };

            let (status, request_id) = match &outcome {
                Ok((status, request_id, _)) => (Some(*status), request_id.clone()),
                Err(Error::Api(api)) => (Some(api.status_code), api.request_id.clone()),
                Err(_) => (None, None),
            };
            // Checked first so that nothing is formatted or allocated when the line is off.
            if log::log_enabled!(target: "bizmsg", log::Level::Debug) {
                log::debug!(
                    target: "bizmsg",
                    "{} {} -> {} in {:.1}ms (attempt {}, request id {})",
                    operation.method,
                    operation.url.path(),
                    status.map_or_else(|| "no answer".to_owned(), |s| s.to_string()),
                    attempt_started.elapsed().as_secs_f64() * 1000.0,
                    attempt,
                    request_id.as_deref().unwrap_or("-"),
                );
            }

            let error = match outcome {
                Ok((status_code, request_id, body)) => {
                    return Ok(Answer {
                        body,
                        meta: Meta {
                            status_code,
                            request_id,
                            elapsed: started.elapsed(),
                            attempts: attempt,
                            idempotency_key: operation
                                .send
                                .as_ref()
                                .map(|send| send.idempotency_key.clone()),
                        },
                    })
                }
                Err(error) => error,
            };

            // A 401 with a token provider: ask it for a fresh token and try once more. The
            // request was refused before processing, so this is safe for sends too.
            if error.status_code() == Some(401)
                && self.shared.token.can_refresh()
                && !token_refreshed
                && time_left(deadline).is_none_or(|left| left > MIN_ATTEMPT_BUDGET)
            {
                token_refreshed = true;
                authorization = self.token(true, deadline).await?;
                attempt += 1;
                continue;
            }

            let retry_after = match &error {
                Error::Api(api) => api.retry_after,
                _ => None,
            };
            // The service asked to wait: in a batch, every call waits (the wait itself is
            // below, like any retry's; a wait too long to accept pauses nobody).
            if let (Some(gate), Some(wait)) = (&call.gate, retry_after) {
                if matches!(error.status_code(), Some(429 | 503))
                    && wait <= self.shared.backoff.max_retry_after
                {
                    gate.pause(wait);
                }
            }
            let reached = watch.as_ref().is_none_or(|watch| !watch.claim_unsent());
            let retryable = is_retryable(operation.safety(), &error, reached);
            let delay = (retries_done < max_retries && retryable)
                .then(|| self.shared.backoff.delay(retries_done + 1, retry_after))
                .flatten()
                .filter(|delay| {
                    deadline.is_none_or(|d| {
                        Instant::now()
                            .checked_add(*delay + MIN_ATTEMPT_BUDGET)
                            .is_some_and(|end| end < d)
                    })
                });
            let Some(delay) = delay else {
                return Err(match &operation.send {
                    Some(send) if reached && is_ambiguous(&error) => {
                        // The id of the answer that made the outcome unknown, when one arrived.
                        let request_id = match &error {
                            Error::Api(api) => api.request_id.clone(),
                            Error::ResponseTooLarge { request_id, .. } => request_id.clone(),
                            _ => None,
                        };
                        send.unknown(error, request_id)
                    }
                    _ => error,
                });
            };
            retries_done += 1;
            if log::log_enabled!(target: "bizmsg", log::Level::Warn) {
                log::warn!(
                    target: "bizmsg",
                    "{} {} failed ({}); retry {} of {} in {:.2}s",
                    operation.method,
                    operation.url.path(),
                    for_log(&error),
                    retries_done,
                    max_retries,
                    delay.as_secs_f64(),
                );
            }
            if let Some(observer) = &self.options.retry_observer {
                observer.on_retry(retries_done, &error, delay);
            }
            tokio::time::sleep(delay).await;
            attempt += 1;
        }
    }

    /// The `Authorization` value, asking the provider no longer than the deadline allows.
    async fn token(&self, refresh: bool, deadline: Option<Instant>) -> Result<HeaderValue> {
        // A static token is at hand: no timer, no clock read (a campaign asks once a message).
        if let Some(value) = self.shared.token.at_hand() {
            return Ok(value);
        }
        match time_left(deadline) {
            None => self.shared.token.header(refresh).await,
            Some(left) => tokio::time::timeout(left, self.shared.token.header(refresh))
                .await
                .unwrap_or_else(|_| {
                    Err(Error::Timeout(
                        "the token provider did not answer within the total timeout".to_owned(),
                    ))
                }),
        }
    }

    /// One request and its answer: `(status, request id, body)` for a 2xx.
    async fn attempt(
        &self,
        operation: &Operation,
        request: Outgoing,
    ) -> Result<(u16, Option<String>, Bytes)> {
        let limit = self.shared.max_response_bytes;
        let Reply {
            status,
            request_id,
            retry_after,
            body: bytes,
            oversized,
        } = self.shared.transport.send(request, limit).await?;

        if (200..300).contains(&status) {
            if let Some(oversized) = oversized {
                return Err(Error::ResponseTooLarge {
                    limit,
                    size: oversized.size,
                    declared: oversized.declared,
                    request_id,
                });
            }
            // Decoded by the operation, which knows what it expects (and, for a send, how to
            // report an answer it cannot judge).
            return Ok((status, request_id, bytes));
        }
        let retry_after = retry_after
            .as_deref()
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        // An error answer past the size cap keeps its start: its status is what matters.
        let (body, mut message) = if oversized.is_some() {
            let body = ApiBody::Text(String::from_utf8_lossy(&bytes).into_owned());
            let message = api_message(&body);
            (body, message)
        } else {
            error_body(&bytes)
        };
        if let Some(oversized) = oversized {
            message = format!(
                "{message} (answer body of {} bytes cut at the {limit}-byte max_response_bytes)",
                oversized.size
            )
            .trim_start()
            .to_owned();
        }
        Err(Error::Api(Box::new(ApiError {
            status_code: status,
            method: operation.method.to_string(),
            url: operation.url.to_string(),
            message,
            body,
            request_id,
            retry_after,
        })))
    }
}

/// How long the next attempt may take: `read` when set, never past the overall deadline.
/// `None`: unbounded. (Connecting, when the pool has no idle connection, happens inside the
/// attempt and is bounded by `connect` as well.)
fn attempt_budget(
    timeout: super::Timeout,
    deadline: Option<Instant>,
    now: Instant,
) -> Option<Duration> {
    let remaining = deadline.map(|d| d.saturating_duration_since(now));
    match (timeout.read, remaining) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn time_left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// Failures after which a send's request may or may not have been processed: no complete
/// answer, an answer that cannot be read, or a server error other than 503 (a gateway's 502 or
/// 504, a 500, may come after the service processed the request).
fn is_ambiguous(error: &Error) -> bool {
    match error {
        Error::Timeout(_)
        | Error::ConnectionBroken(_)
        | Error::Decode { .. }
        | Error::ResponseTooLarge { .. } => true,
        Error::Api(api) => matches!(api.status_code, 500 | 502 | 504),
        _ => false,
    }
}

/// A non-2xx answer's body: its JSON when it is JSON, else its text, and the one-line
/// explanation taken from it.
pub fn error_body(bytes: &[u8]) -> (ApiBody, String) {
    let body = match serde_json::from_slice::<Value>(bytes) {
        Ok(json) => ApiBody::Json(json),
        Err(_) => ApiBody::Text(String::from_utf8_lossy(bytes).into_owned()),
    };
    let message = api_message(&body);
    (body, message)
}

/// The explanation in an error body: the spec's `msg`, or the usual alternatives.
fn api_message(body: &ApiBody) -> String {
    match body {
        ApiBody::Json(Value::Object(object)) => ["msg", "message", "error_description", "detail"]
            .iter()
            .find_map(|key| object.get(*key).and_then(Value::as_str))
            .or_else(|| {
                object
                    .get("error")
                    .and_then(|e| e.get("message").or(Some(e)))
                    .and_then(Value::as_str)
            })
            .map(|m| truncate(m, 500))
            .unwrap_or_default(),
        ApiBody::Json(_) => String::new(),
        ApiBody::Text(text) => truncate(text.trim(), 200),
    }
}

/// Masks phone numbers in a log line: a run of 8 to 15 digits, possibly written with `+`,
/// spaces, dashes, dots or parentheses between them, that is not part of a longer token (an
/// ASCII word, or a hyphenated one such as a UUID request id). Letters of other scripts are
/// not glue: `号码8613800000000` is masked.
pub(crate) fn mask_phone_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let word = |c: Option<&char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_');
    let at = |i: usize| chars.get(i);
    // Glued to the token on the left: a word character, or a hyphen right after one.
    let glued_left = |start: usize| {
        let before = start.checked_sub(1).and_then(&at);
        word(before) || (before == Some(&'-') && word(start.checked_sub(2).and_then(&at)))
    };
    let glued_right = |end: usize| word(at(end)) || (at(end) == Some(&'-') && word(at(end + 1)));
    let mut out = String::with_capacity(text.len());
    let mut index = 0;
    while let Some(&c) = at(index) {
        let opens = c == '+' || c == '(';
        let starts =
            c.is_ascii_digit() || (opens && at(index + 1).is_some_and(char::is_ascii_digit));
        if !starts || glued_left(index) {
            out.push(c);
            index += 1;
            continue;
        }
        // Extend over digits and short runs of separators that sit between digits.
        let separator = |c: Option<&char>| matches!(c, Some(' ' | '-' | '.' | '(' | ')'));
        let mut end = index + usize::from(opens);
        let mut digits = String::new();
        while let Some(&next) = at(end) {
            if next.is_ascii_digit() {
                digits.push(next);
                end += 1;
                continue;
            }
            let gap = (end..end + 3).take_while(|i| separator(at(*i))).count();
            if gap == 0 || !at(end + gap).is_some_and(char::is_ascii_digit) {
                break;
            }
            end += gap;
        }
        if (8..=15).contains(&digits.len()) && !glued_right(end) {
            out.push_str(&mask_phone(&digits));
            index = end;
        } else {
            // Not a phone number: copy this character and keep scanning after it.
            out.push(c);
            index += 1;
        }
    }
    out
}

/// An error as a retry warning shows it: phone numbers masked, the request id left whole.
fn for_log(error: &Error) -> String {
    match error {
        Error::Api(api) => {
            let mut text = format!("{} {}", api.status_code, mask_phone_numbers(&api.message));
            if let Some(id) = &api.request_id {
                text.push_str(&format!(", request id {id}"));
            }
            text
        }
        other => mask_phone_numbers(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_mask_phone_numbers() {
        for (line, masked) in [
            (
                "from \"8613900000000\" to +14155550100 on port 8080",
                "from \"8613****0000\" to 1415****0100 on port 8080",
            ),
            ("to +86 138 0000 0000; done", "to 8613****0000; done"),
            ("call (415) 555-0100 now", "call 4155****0100 now"),
            ("号码8613800000000限流", "号码8613****0000限流"),
            // Not phone numbers: part of a longer token, or too short or long.
            (
                "req_83b7b28ee1494e0abf48349a21734145",
                "req_83b7b28ee1494e0abf48349a21734145",
            ),
            (
                "rid 4d5f6c1e-1234-5678-9abc-012345678901",
                "rid 4d5f6c1e-1234-5678-9abc-012345678901",
            ),
            ("1234567890123456 digits", "1234567890123456 digits"),
            ("page 12 of 1234567", "page 12 of 1234567"),
        ] {
            assert_eq!(mask_phone_numbers(line), masked, "{line}");
        }
    }

    #[test]
    fn error_messages_come_from_the_usual_places() {
        let json = |v: serde_json::Value| ApiBody::Json(v);
        assert_eq!(
            api_message(&json(serde_json::json!({"code": "401", "msg": "no"}))),
            "no"
        );
        assert_eq!(
            api_message(&json(serde_json::json!({"error": {"message": "m"}}))),
            "m"
        );
        assert_eq!(api_message(&json(serde_json::json!({"error": "e"}))), "e");
        assert_eq!(
            api_message(&ApiBody::Text(" bad gateway \n".into())),
            "bad gateway"
        );
    }
}
