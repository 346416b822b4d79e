//! The attempt loop every operation goes through, in three steps per attempt: build the
//! request (`operation.rs`), run it within its time budget (here), and decide what comes next
//! (`decide.rs`: a fresh token, a retry after a wait, or the error the caller sees). Here too:
//! the timeouts, the batch-wide pause on `Retry-After` (a campaign's gate), and the log line
//! of each attempt.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::HeaderValue;

use super::attempt_log::{error_type, wall_clock_at, AttemptRecord, PauseRecord};
use super::body::{BodyWatch, MOST_SLOTS_MISSED};
use super::decide::{decide, is_ambiguous, Failure, Next};
use super::error_body::{api_message, error_body};
use super::operation::{Headers, Operation};
use super::reply::Reply;
use super::request::Outgoing;
use super::retry::parse_retry_after;
use super::Client;
use crate::error::{ApiBody, ApiError, Error, Result};
use crate::masking::mask_phone_numbers;
use crate::meta::Meta;

/// A 2xx answer: its body, decoded by the operation that asked.
pub(crate) struct Answer {
    pub body: Bytes,
    pub meta: Meta,
}

/// A send's attempt that was not made (its fence refused, or its pace's store failed): never
/// sent, unless an earlier attempt may have been processed, in which case its outcome is
/// unknown.
fn not_attempted(operation: &Operation, error: Error, in_doubt_before: bool) -> Error {
    match (&operation.send, in_doubt_before) {
        (Some(send), true) => send.unknown(error, None),
        _ => error,
    }
}

/// A send's attempt was too late for its pacing slot: written, its request could have
/// crowded the following slots into one second above the pace. It is not made on that slot,
/// but on a new one, with the same key: not an attempt, nothing is counted or logged as one.
/// (A campaign stopped meanwhile ends the wait for it, `retry_slot.rs`.)
fn missed_slot(operation: &Operation, slots_missed: u32) {
    let waived = slots_missed >= MOST_SLOTS_MISSED;
    log::debug!(
        target: "bizmsg",
        method = operation.method.as_str(),
        path = operation.url.path(),
        idempotency_key = send_key(operation),
        slots_missed = slots_missed;
        "{} {} not written: too late for its pacing slot; it takes a new one{}",
        operation.method,
        operation.url.path(),
        if waived { ", and is written on it however late" } else { "" },
    );
}

/// A send its fence refused (`not_attempted`).
fn fenced(operation: &Operation, reason: String, in_doubt_before: bool) -> Error {
    not_attempted(operation, Error::SharedState(reason), in_doubt_before)
}

impl Client {
    /// Runs `operation` through the attempt loop; a traced handle's span ids are current
    /// meanwhile, for the records it logs (`log_ids`).
    pub(crate) async fn execute(
        &self,
        operation: &Operation,
        call: &super::CallOptions,
    ) -> Result<Answer> {
        match &self.options.log_ids {
            None => self.attempts(operation, call).await,
            Some(ids) => {
                super::log_ids::within(Some(Arc::clone(ids)), self.attempts(operation, call)).await
            }
        }
    }

    async fn attempts(&self, operation: &Operation, call: &super::CallOptions) -> Result<Answer> {
        let started = Instant::now();
        let mut timeout = match call.timeout {
            Some(timeout) => self.options.timeout.overridden_by(timeout),
            None => self.options.timeout,
        };
        // `connect` belongs to the pool, which was built with the client's value.
        timeout.connect = self.options.timeout.connect;
        // A total too large for an Instant is no deadline at all.
        let mut deadline = timeout.total.and_then(|total| started.checked_add(total));
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

        // A paced send asked for it as its slot's last step (and fails now if that failed, as
        // it would have asking here); anything else asks now.
        let ahead = operation
            .progress
            .as_ref()
            .and_then(|progress| progress.authorization_ahead());
        let mut authorization = match ahead {
            Some(asked) => asked?,
            None => self.token(false, deadline).await?,
        };
        let mut token_refreshed = false;
        let mut stale_retried = false;
        let mut attempt: u32 = 1;
        let mut retries_done: u32 = 0;
        let fence = operation
            .progress
            .as_ref()
            .and_then(|progress| progress.fence());
        // Whether an earlier attempt of this send may have been processed (it left, and failed
        // ambiguously: only a stale connection's re-send follows such an attempt): a send that
        // stops after one did is in doubt, not unsent. (An attempt answered 429, 503 or 401 was
        // refused before processing, and one whose body never left did not arrive.)
        let mut in_doubt_before = false;
        // The `error.type` of the last attempt, when the next is its retry (`attempt_counts`).
        let mut last_error_type: Option<String> = None;
        // The attempt was found too late for its slot (`missed_slot`): it is made on a new one.
        let mut slot_missed = false;
        // The service refused the token (401): a fresh one is asked before the next attempt.
        let mut refresh_token = false;
        loop {
            if let Some(gate) = &call.gate {
                gate.wait().await;
            }
            // Sent again: a paced send takes a slot of its pace first, as its first attempt did
            // (`retry_slot.rs`). A store that cannot give one stops the send here. A wait that
            // is not the call's (a campaign's pace, as its first slot's) moves its deadline.
            // After a `401`, the fresh token is asked as the retry slot's last step, as the
            // first slot's token is (`authorization_ahead`): after the slot's wait (seconds, at
            // a low pace, behind a campaign's queued messages), where it would expire, and not
            // after the slot, where a round trip to the provider would make the attempt late
            // for it. An unpaced send asks it here. A provider that fails stops the send: in
            // doubt if an earlier attempt may have been processed.
            let refreshed = std::sync::Mutex::new(None);
            let refresh = std::mem::take(&mut refresh_token);
            let retake = std::mem::take(&mut slot_missed);
            if attempt > 1 || retake {
                if let Some(progress) = &operation.progress {
                    // A wait that is not the call's moves its deadline (below): the step,
                    // made at its end, has the deadline moved by the wait so far.
                    let (waiting, moves) =
                        (Instant::now(), !progress.retry_slot_within_call_timeout());
                    let (step_deadline, refreshed) = (deadline, &refreshed);
                    let step = refresh.then(|| {
                        Box::pin(async move {
                            let step_deadline = match step_deadline {
                                Some(deadline) if moves => deadline.checked_add(waiting.elapsed()),
                                deadline => deadline,
                            };
                            let asked = self.token(true, step_deadline).await;
                            let go = asked.is_ok();
                            *crate::sync::lock(refreshed) = Some(asked);
                            go
                        }) as futures::future::BoxFuture<'_, bool>
                    });
                    match progress.retry_slot(deadline, step).await {
                        Ok(waited) => {
                            deadline = deadline.and_then(|deadline| deadline.checked_add(waited));
                        }
                        Err(error) => return Err(not_attempted(operation, error, in_doubt_before)),
                    }
                }
            }
            if refresh {
                let asked = crate::sync::lock(&refreshed).take();
                let asked = match asked {
                    Some(asked) => asked,
                    None => self.token(true, deadline).await,
                };
                authorization =
                    asked.map_err(|error| not_attempted(operation, error, in_doubt_before))?;
            }
            // A send its caller may no longer make (a campaign run whose claims were taken
            // over) is not attempted; the body's own check covers what happens from here.
            if let Some(Err(reason)) = fence.map(|fence| fence.may_send()) {
                return Err(fenced(operation, reason, in_doubt_before));
            }
            // Too late for its slot already (held by a `Retry-After` gate, a process not
            // scheduled): not handed to the transport, and a new slot taken (`missed_slot`).
            // From here to the write, what waits is the transport's own: a connection opened
            // when none is idle (or again, after a pooled one turned out closed; with HTTP/2,
            // reqwest's connection and streams). That is not bounded: the next slot would need
            // a connection opened after it just the same (the idle ones can expire in the wait
            // for it; a stale connection's retry wants a new one), and be missed in turn.
            if let Some(progress) = &operation.progress {
                if progress.misses_its_slot() {
                    missed_slot(operation, progress.slots_missed());
                    slot_missed = true;
                    continue;
                }
            }
            // One clock read for both: a campaign makes this call per message.
            let attempt_started = Instant::now();
            let headers = Headers {
                authorization: &authorization,
                user_agent: &self.shared.user_agent,
                extra: &self.options.headers,
            };
            let (mut request, watch) = operation.request(&headers, idempotency_key.as_ref());
            // Sent again after its reused connection ended without an answer: on a new one.
            request.fresh_connection = stale_retried;
            // A campaign message traced on its own records in its own log.
            let attempt_log = call
                .attempt_log
                .as_ref()
                .or(self.options.attempt_log.as_ref())
                .filter(|log| log.records_attempts());
            request.timed = attempt_log.is_some();
            let mut head_read = None;
            if let Some(progress) = &operation.progress {
                progress.attempt(watch.as_ref());
            }
            let budget = attempt_budget(timeout, deadline, attempt_started);
            let outcome = self
                .attempt_within(
                    operation,
                    request,
                    budget,
                    attempt_started,
                    timeout.total,
                    &mut head_read,
                )
                .await;

            if log::log_enabled!(target: "bizmsg", log::Level::Debug) {
                log_attempt(operation, &outcome, attempt, attempt_started);
            }
            if crate::counting::on() {
                let status = match &outcome {
                    Ok((status, _, _)) => Some(*status),
                    Err(error) => answer_of(error).0,
                };
                super::attempt_counts::attempt_ended(
                    operation.url.path(),
                    status,
                    last_error_type.as_deref(),
                );
            }
            // Kept counting or not: a retry made once counting started is filed under the
            // error it followed (only a failed attempt pays for the text).
            last_error_type = outcome.as_ref().err().map(error_type);
            if let Some(attempt_log) = attempt_log {
                attempt_log.push(AttemptRecord {
                    method: operation.method.as_str().to_owned(),
                    path: operation.url.path().to_owned(),
                    started: wall_clock_at(attempt_started),
                    // When the answer's head was read; without an answer, now.
                    ended: head_read.map_or_else(SystemTime::now, wall_clock_at),
                    status: match &outcome {
                        Ok((status, _, _)) => Some(*status),
                        Err(error) => answer_of(error).0,
                    },
                    error_type: outcome.as_ref().err().map(error_type),
                    resend_count: attempt - 1,
                });
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

            // The service asked to wait: in a batch, every call waits, and under shared limits
            // every process (the wait itself is decided below, like any retry's; a wait too
            // long to accept pauses nobody).
            if let Some(wait) = asked_to_wait(&error, self.shared.backoff.max_retry_after) {
                if let Some(gate) = &call.gate {
                    gate.pause(wait);
                    // A campaign's pause, for its span (a traced handle's only).
                    if let Some(log) = &self.options.attempt_log {
                        log.pause(PauseRecord {
                            at: SystemTime::now(),
                            seconds: Some(wait.as_secs_f64()),
                            reason: "retry_after",
                            status: answer_of(&error).0,
                            code: None,
                            sender: None,
                        });
                    }
                }
                if let Some(limits) = &self.shared.limits {
                    // A store that fails now stops the send: in doubt if an earlier attempt
                    // may have been processed.
                    limits
                        .pause(crate::limits::Scope::Service, wait)
                        .await
                        .map_err(|error| not_attempted(operation, error, in_doubt_before))?;
                }
            }
            // Refused by its fence as it was about to be written: it never left, and no retry
            // may send it.
            if let Some(Err(reason)) = fence.map(|fence| fence.may_send()) {
                if watch.as_ref().is_some_and(BodyWatch::claim_unsent) {
                    return Err(fenced(operation, reason, in_doubt_before));
                }
            }
            let reached = watch.as_ref().is_none_or(|watch| !watch.claim_unsent());
            let in_doubt_now = reached && is_ambiguous(&error);
            let next = decide(Failure {
                error,
                safety: operation.safety(),
                reached,
                in_doubt_before,
                retries_done,
                max_retries,
                may_refresh_token: self.shared.token.can_refresh() && !token_refreshed,
                time_left: time_left(deadline),
                backoff: &self.shared.backoff,
                send: operation.send.as_ref(),
                idempotent_sends: self.shared.idempotent_sends,
                stale_retried,
            });
            if in_doubt_now && !in_doubt_before {
                in_doubt_before = true;
                // A caller that gives the send up midway must know it too.
                if let Some(progress) = &operation.progress {
                    progress.in_doubt();
                }
            }
            match next {
                Next::RefreshToken => {
                    token_refreshed = true;
                    // Asked for the next attempt, as its slot's last step (above).
                    refresh_token = true;
                }
                Next::Retry { delay, error } => {
                    retries_done += 1;
                    if log::log_enabled!(target: "bizmsg", log::Level::Warn) {
                        let (status, request_id) = answer_of(&error);
                        log::warn!(
                            target: "bizmsg",
                            method = operation.method.as_str(),
                            path = operation.url.path(),
                            status = status,
                            request_id = request_id,
                            attempt = attempt,
                            retry = retries_done,
                            max_retries = max_retries,
                            delay_seconds = delay.as_secs_f64(),
                            idempotency_key = send_key(operation);
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
                }
                Next::RetryStale { error } => {
                    stale_retried = true;
                    log::info!(
                        target: "bizmsg",
                        method = operation.method.as_str(),
                        path = operation.url.path(),
                        attempt = attempt,
                        idempotency_key = send_key(operation);
                        "{} {} lost to the keep-alive race ({}); sent again once with the same \
                         Idempotency-Key (idempotent_sends)",
                        operation.method,
                        operation.url.path(),
                        for_log(&error),
                    );
                }
                Next::Fail(error) => return Err(error),
            }
            attempt += 1;
        }
    }

    /// One attempt, cut off when its `budget` (counted from `started`) runs out.
    async fn attempt_within(
        &self,
        operation: &Operation,
        request: Outgoing,
        budget: Option<Duration>,
        started: Instant,
        total: Option<Duration>,
        head_read: &mut Option<Instant>,
    ) -> Result<(u16, Option<String>, Bytes)> {
        // Boxed: an attempt's future is the largest part of a call's, and every caller's future
        // (a send, a campaign's message) would embed it, and copy it at each move.
        let exchange = Box::pin(self.attempt(operation, request, head_read));
        match budget {
            Some(budget) if budget.is_zero() => Err(Error::Timeout(format!(
                "the total timeout of {:.3}s elapsed",
                total.unwrap_or_default().as_secs_f64()
            ))),
            // From the attempt's own clock read (no second read): a budget too large for an
            // Instant is no deadline at all.
            Some(budget) => match started.checked_add(budget) {
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
        }
    }

    /// Whether a call must ask a token provider for its `Authorization` value (not a static
    /// token, which is at hand).
    pub(crate) fn asks_for_token(&self) -> bool {
        self.shared.token.at_hand().is_none()
    }

    /// The `Authorization` value of a paced send's first attempt, asked of a token provider as
    /// the slot's last step (`SendProgress::authorize_ahead`): asked after the slot (a Python
    /// callable waits for the GIL; a refresh makes a round trip), it wrote the request late
    /// for the slot, next to the following slots; asked before the whole wait for the slot
    /// (seconds, at a low pace), it could expire meanwhile. Bounded by the call's total
    /// timeout, as the attempt's own asking is.
    pub(crate) async fn authorization_ahead(
        &self,
        call: &super::CallOptions,
    ) -> Result<HeaderValue> {
        let deadline = self
            .total_timeout(call)
            .and_then(|total| Instant::now().checked_add(total));
        self.token(false, deadline).await
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

    /// One request and its answer: `(status, request id, body)` for a 2xx. `head_read` gets
    /// when the answer's head was read, for a traced attempt.
    async fn attempt(
        &self,
        operation: &Operation,
        request: Outgoing,
        head_read: &mut Option<Instant>,
    ) -> Result<(u16, Option<String>, Bytes)> {
        let limit = self.shared.max_response_bytes;
        let Reply {
            status,
            request_id,
            retry_after,
            body: bytes,
            oversized,
            head_read: read_at,
        } = self.shared.transport.send(request, limit).await?;
        *head_read = read_at;

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

/// The wait a `429` or `503` asked for with `Retry-After`, when it is one to honour.
fn asked_to_wait(error: &Error, longest: Duration) -> Option<Duration> {
    match error {
        Error::Api(api) if matches!(api.status_code, 429 | 503) => {
            api.retry_after.filter(|wait| *wait <= longest)
        }
        _ => None,
    }
}

/// The debug line of one attempt.
fn log_attempt(
    operation: &Operation,
    outcome: &Result<(u16, Option<String>, Bytes)>,
    attempt: u32,
    started: Instant,
) {
    let (status, request_id) = match outcome {
        Ok((status, request_id, _)) => (Some(*status), request_id.as_deref()),
        Err(error) => answer_of(error),
    };
    let duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    log::debug!(
        target: "bizmsg",
        method = operation.method.as_str(),
        path = operation.url.path(),
        status = status,
        request_id = request_id,
        attempt = attempt,
        duration_ms = duration_ms,
        idempotency_key = send_key(operation);
        "{} {} -> {} in {:.1}ms (attempt {}, request id {})",
        operation.method,
        operation.url.path(),
        status.map_or_else(|| "no answer".to_owned(), |s| s.to_string()),
        duration_ms,
        attempt,
        request_id.unwrap_or("-"),
    );
}

/// The status and request id of a failed attempt's answer (none when nothing was answered).
fn answer_of(error: &Error) -> (Option<u16>, Option<&str>) {
    match error {
        Error::Api(api) => (Some(api.status_code), api.request_id.as_deref()),
        _ => (None, None),
    }
}

/// The `Idempotency-Key` of a send, for its log lines' fields (none for other calls).
fn send_key(operation: &Operation) -> Option<&str> {
    operation
        .send
        .as_ref()
        .map(|send| send.idempotency_key.as_str())
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
