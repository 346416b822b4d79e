//! After a failed attempt, what comes next: refresh the token and try again, retry after a
//! wait, or give up with the error the caller sees (a send that may have reached the service
//! becomes `SendOutcomeUnknown`). One pure function of what the attempt loop knows, so every
//! retry rule is in one place and tested without sockets.

use std::time::Duration;

use super::operation::{Safety, SendContext};
use super::retry::Backoff;
use crate::error::Error;

/// No attempt is started with less time than this left before the deadline: it could only
/// time out, and for a send that would make an outcome unknown for nothing.
pub(crate) const MIN_ATTEMPT_BUDGET: Duration = Duration::from_millis(50);

/// What the attempt loop knows after an attempt failed.
pub(crate) struct Failure<'a> {
    pub error: Error,
    pub safety: Safety,
    /// Whether the request may have reached the service: its body was handed to a connection
    /// (a request without a body counts as reached).
    pub reached: bool,
    /// Whether an earlier attempt of the call may have been processed (its body left, and it
    /// failed ambiguously: a stale connection's, re-sent with its key). A send that fails
    /// after it is in doubt, however this attempt failed.
    pub in_doubt_before: bool,
    /// Retries made so far, and how many are allowed.
    pub retries_done: u32,
    pub max_retries: u32,
    /// A token provider is configured and has not been asked for a fresh token in this call.
    pub may_refresh_token: bool,
    /// Until the call's deadline; `None`: no deadline.
    pub time_left: Option<Duration>,
    pub backoff: &'a Backoff,
    /// For a send: its key and message, to report an unknown outcome with.
    pub send: Option<&'a SendContext>,
    /// The service deduplicates sends by `Idempotency-Key` (the client says so): a send lost
    /// to the keep-alive race may go again once, with its key.
    pub idempotent_sends: bool,
    /// That one retry was made in this call already.
    pub stale_retried: bool,
}

/// What the attempt loop does next.
#[derive(Debug)]
pub(crate) enum Next {
    /// Ask the token provider for a fresh token, and try again at once (a 401 was refused
    /// before processing, so this is safe for sends too).
    RefreshToken,
    /// Try again after `delay`; `error` is what failed (for the log and `on_retry`).
    Retry { delay: Duration, error: Error },
    /// Try a send again at once, with the same key, after a reused connection ended before
    /// any answer (`idempotent_sends`): once per call, outside `max_retries`.
    RetryStale { error: Error },
    /// Give up: the caller gets this error.
    Fail(Error),
}

pub(crate) fn decide(failure: Failure<'_>) -> Next {
    let Failure {
        error,
        safety,
        reached,
        in_doubt_before,
        retries_done,
        max_retries,
        may_refresh_token,
        time_left,
        backoff,
        send,
        idempotent_sends,
        stale_retried,
    } = failure;
    let room_for = |wait: Duration| time_left.is_none_or(|left| wait + MIN_ATTEMPT_BUDGET < left);
    if error.status_code() == Some(401)
        && may_refresh_token
        && time_left.is_none_or(|left| left > MIN_ATTEMPT_BUDGET)
    {
        return Next::RefreshToken;
    }
    if matches!(error, Error::StaleConnection(_))
        && send.is_some()
        && idempotent_sends
        && !stale_retried
        && room_for(Duration::ZERO)
    {
        return Next::RetryStale { error };
    }
    let retry_after = match &error {
        Error::Api(api) => api.retry_after,
        _ => None,
    };
    let delay = (retries_done < max_retries && is_retryable(safety, &error, reached))
        .then(|| backoff.delay(retries_done + 1, retry_after))
        .flatten()
        .filter(|delay| room_for(*delay));
    if let Some(delay) = delay {
        return Next::Retry { delay, error };
    }
    Next::Fail(match send {
        Some(send) if in_doubt_before || (reached && is_ambiguous(&error)) => {
            // The id of the answer that made the outcome unknown, when one arrived.
            let request_id = match &error {
                Error::Api(api) => api.request_id.clone(),
                Error::ResponseTooLarge { request_id, .. } => request_id.clone(),
                _ => None,
            };
            send.unknown(error, request_id)
        }
        _ => error,
    })
}

/// Whether an attempt that failed with `error` may be tried again. `reached`: whether the
/// request's body was handed to a connection (for a request without a body, always true).
///
/// A list is read-only: any transport failure and the usual transient statuses are retried.
/// A send is a message to a person: it is retried only when the service provably did not
/// process it: no connection was made, the body never left (so nothing the service could
/// process did), or the service answered 429/503, which it sends before processing.
pub(crate) fn is_retryable(safety: Safety, error: &Error, reached: bool) -> bool {
    match (safety, error) {
        (_, Error::Connect(_)) => true,
        (
            Safety::Idempotent,
            Error::Timeout(_) | Error::ConnectionBroken(_) | Error::StaleConnection(_),
        ) => true,
        (
            Safety::SendOnce,
            Error::Timeout(_) | Error::ConnectionBroken(_) | Error::StaleConnection(_),
        ) => !reached,
        (Safety::Idempotent, Error::Api(api)) => {
            matches!(api.status_code, 408 | 429 | 500 | 502 | 503 | 504)
        }
        (Safety::SendOnce, Error::Api(api)) => matches!(api.status_code, 429 | 503),
        _ => false,
    }
}

/// Failures after which a send's request may or may not have been processed: no complete
/// answer, an answer that cannot be read, or a server error other than 503 (a gateway's 502 or
/// 504, a 500, may come after the service processed the request).
pub(crate) fn is_ambiguous(error: &Error) -> bool {
    match error {
        Error::Timeout(_)
        | Error::ConnectionBroken(_)
        | Error::StaleConnection(_)
        | Error::Decode { .. }
        | Error::ResponseTooLarge { .. } => true,
        Error::Api(api) => matches!(api.status_code, 500 | 502 | 504),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::error::{ApiBody, ApiError};

    fn api(status: u16) -> Error {
        Error::Api(Box::new(ApiError {
            status_code: status,
            method: "POST".into(),
            url: "u".into(),
            body: ApiBody::Text(String::new()),
            request_id: None,
            retry_after: None,
            message: String::new(),
        }))
    }

    #[test]
    fn sends_are_retried_only_when_provably_unprocessed() {
        let connect = Error::Connect("refused".into());
        let timeout = Error::Timeout("read".into());
        let broken = Error::ConnectionBroken("reset".into());
        assert!(is_retryable(Safety::SendOnce, &connect, true));
        assert!(!is_retryable(Safety::SendOnce, &timeout, true));
        assert!(!is_retryable(Safety::SendOnce, &broken, true));
        // The body never left: nothing the service could have processed.
        assert!(is_retryable(Safety::SendOnce, &timeout, false));
        assert!(is_retryable(Safety::SendOnce, &broken, false));
        for status in [429, 503] {
            assert!(is_retryable(Safety::SendOnce, &api(status), true));
        }
        for status in [400, 408, 500, 502, 504] {
            assert!(
                !is_retryable(Safety::SendOnce, &api(status), true),
                "{status}"
            );
        }
        for status in [408, 429, 500, 502, 503, 504] {
            assert!(is_retryable(Safety::Idempotent, &api(status), true));
        }
        assert!(is_retryable(Safety::Idempotent, &timeout, true));
        assert!(!is_retryable(Safety::Idempotent, &api(404), true));
    }

    /// A failure with the defaults of a call: no retry made yet, two allowed, no deadline, no
    /// jitter (so delays are exact).
    fn failure<'a>(error: Error, safety: Safety, backoff: &'a Backoff) -> Failure<'a> {
        Failure {
            error,
            safety,
            reached: true,
            in_doubt_before: false,
            retries_done: 0,
            max_retries: 2,
            may_refresh_token: false,
            time_left: None,
            backoff,
            send: None,
            idempotent_sends: false,
            stale_retried: false,
        }
    }

    #[test]
    fn a_send_lost_to_the_keep_alive_race_goes_again_once_only_when_the_service_dedupes() {
        let backoff = exact();
        let context = send();
        let stale = || Error::StaleConnection("closed before an answer".into());
        let mut opted_out = failure(stale(), Safety::SendOnce, &backoff);
        opted_out.send = Some(&context);
        assert!(matches!(
            decide(opted_out),
            Next::Fail(Error::SendOutcomeUnknown(_))
        ));
        let mut opted_in = failure(stale(), Safety::SendOnce, &backoff);
        opted_in.send = Some(&context);
        opted_in.idempotent_sends = true;
        opted_in.max_retries = 0;
        assert!(matches!(decide(opted_in), Next::RetryStale { .. }));
        let mut twice = failure(stale(), Safety::SendOnce, &backoff);
        twice.send = Some(&context);
        twice.idempotent_sends = true;
        twice.stale_retried = true;
        twice.max_retries = 0;
        assert!(matches!(
            decide(twice),
            Next::Fail(Error::SendOutcomeUnknown(_))
        ));
        // A listing is retried anyway, as any broken connection.
        let listing = failure(stale(), Safety::Idempotent, &backoff);
        assert!(matches!(decide(listing), Next::Retry { .. }));
    }

    fn exact() -> Backoff {
        Backoff {
            jitter: 0.0,
            ..Backoff::default()
        }
    }

    fn send() -> SendContext {
        SendContext {
            idempotency_key: "k-1".into(),
            request: std::sync::Arc::new(crate::wire::SendRequest::template(
                "8613800138000".into(),
                "8613900000000".into(),
                crate::wire::TemplateRequest {
                    name: "order_update".into(),
                    parameters: "[]".into(),
                    language: "en".into(),
                },
            )),
        }
    }

    #[test]
    fn a_401_refreshes_the_token_once_when_there_is_time() {
        let backoff = exact();
        let mut first = failure(api(401), Safety::SendOnce, &backoff);
        first.may_refresh_token = true;
        assert!(matches!(decide(first), Next::RefreshToken));
        // Already refreshed (or a static token): the 401 is the caller's.
        let again = failure(api(401), Safety::SendOnce, &backoff);
        assert!(matches!(decide(again), Next::Fail(Error::Api(_))));
        let mut late = failure(api(401), Safety::Idempotent, &backoff);
        late.may_refresh_token = true;
        late.time_left = Some(Duration::from_millis(10));
        assert!(matches!(decide(late), Next::Fail(_)));
    }

    #[test]
    fn retries_wait_the_backoff_or_retry_after_while_the_budget_allows() {
        let backoff = exact();
        let timeout = Error::Timeout("read".into());
        match decide(failure(timeout, Safety::Idempotent, &backoff)) {
            Next::Retry { delay, .. } => assert_eq!(delay, Duration::from_millis(500)),
            other => panic!("{other:?}"),
        }
        let mut asked = api(503);
        if let Error::Api(api) = &mut asked {
            api.retry_after = Some(Duration::from_secs(3));
        }
        match decide(failure(asked, Safety::SendOnce, &backoff)) {
            Next::Retry { delay, .. } => assert_eq!(delay, Duration::from_secs(3)),
            other => panic!("{other:?}"),
        }
        // No room before the deadline for the wait and one more attempt.
        let mut short = failure(Error::Connect("refused".into()), Safety::SendOnce, &backoff);
        short.time_left = Some(Duration::from_millis(520));
        assert!(matches!(decide(short), Next::Fail(Error::Connect(_))));
        let mut spent = failure(Error::Connect("refused".into()), Safety::SendOnce, &backoff);
        spent.retries_done = 2;
        assert!(matches!(decide(spent), Next::Fail(Error::Connect(_))));
    }

    #[test]
    fn a_send_that_may_have_arrived_is_unknown_and_one_that_never_left_is_not() {
        let backoff = exact();
        let context = send();
        let mut reached = failure(Error::Timeout("read".into()), Safety::SendOnce, &backoff);
        reached.send = Some(&context);
        reached.max_retries = 0;
        match decide(reached) {
            Next::Fail(Error::SendOutcomeUnknown(unknown)) => {
                assert_eq!(unknown.idempotency_key, "k-1");
            }
            other => panic!("{other:?}"),
        }
        let mut unsent = failure(Error::Timeout("read".into()), Safety::SendOnce, &backoff);
        unsent.send = Some(&context);
        unsent.reached = false;
        unsent.max_retries = 0;
        assert!(matches!(decide(unsent), Next::Fail(Error::Timeout(_))));
        // A rejected send (400) is the service's answer, never unknown.
        let mut rejected = failure(api(400), Safety::SendOnce, &backoff);
        rejected.send = Some(&context);
        assert!(matches!(decide(rejected), Next::Fail(Error::Api(_))));
        // A 502 from a gateway may come after processing: unknown, never retried.
        let mut gateway = failure(api(502), Safety::SendOnce, &backoff);
        gateway.send = Some(&context);
        assert!(matches!(
            decide(gateway),
            Next::Fail(Error::SendOutcomeUnknown(_))
        ));
    }

    /// A send re-sent after its stale connection (which may have been processed) and then
    /// stopped before the re-send left (its deadline passed while it waited for a slot): in
    /// doubt, not "never sent". Before, the last attempt alone was judged, and the message was
    /// `failed` while the service had accepted it.
    #[test]
    fn a_send_whose_earlier_attempt_may_have_arrived_stays_in_doubt() {
        let backoff = exact();
        let context = send();
        let mut unsent_again = failure(Error::Timeout("total".into()), Safety::SendOnce, &backoff);
        unsent_again.send = Some(&context);
        unsent_again.reached = false;
        unsent_again.in_doubt_before = true;
        unsent_again.time_left = Some(Duration::ZERO);
        assert!(matches!(
            decide(unsent_again),
            Next::Fail(Error::SendOutcomeUnknown(_))
        ));
        // Answered 429 before (never processed): a failure after is the failure.
        let mut answered_before = failure(api(429), Safety::SendOnce, &backoff);
        answered_before.send = Some(&context);
        answered_before.retries_done = 2;
        assert!(matches!(decide(answered_before), Next::Fail(Error::Api(_))));
    }
}
