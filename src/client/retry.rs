//! When a failed attempt is tried again, and after how long.
//!
//! Delay before retry `n` (1-based): `min(max, initial * 2^(n-1)) * (1 - jitter * u)` with `u`
//! uniform in [0, 1). A `Retry-After` the service sends (seconds or an HTTP date) is used as is
//! instead, as long as it is at most `max_retry_after`; a longer one is not waited for and the
//! error goes to the caller.

use std::time::{Duration, SystemTime};

use super::execute::Safety;
use crate::error::Error;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    /// Fraction of the delay that is random, 0 to 1.
    pub jitter: f64,
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            jitter: 0.25,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Told of every retry before its wait starts (Python's `on_retry`).
pub trait RetryObserver: Send + Sync {
    fn on_retry(&self, attempt: u32, error: &Error, delay: Duration);
}

impl Backoff {
    /// The wait before retry number `retry` (1 for the first retry), or `None` when the
    /// service asked for a wait longer than we accept.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if let Some(asked) = retry_after {
            return (asked <= self.max_retry_after).then_some(asked);
        }
        let exponent = retry.saturating_sub(1).min(30);
        let base = self.initial.saturating_mul(1u32 << exponent).min(self.max);
        // A NaN fraction would make `mul_f64` panic: it counts as no jitter.
        let fraction = if self.jitter.is_nan() {
            0.0
        } else {
            self.jitter.clamp(0.0, 1.0)
        };
        Some(base.mul_f64(1.0 - fraction * fastrand::f64()))
    }
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
        (Safety::Idempotent, Error::Timeout(_) | Error::ConnectionBroken(_)) => true,
        (Safety::SendOnce, Error::Timeout(_) | Error::ConnectionBroken(_)) => !reached,
        (Safety::Idempotent, Error::Api(api)) => {
            matches!(api.status_code, 408 | 429 | 500 | 502 | 503 | 504)
        }
        (Safety::SendOnce, Error::Api(api)) => matches!(api.status_code, 429 | 503),
        _ => false,
    }
}

/// `Retry-After`: delay-seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if value.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty() {
        // More seconds than a u64 holds is still "a very long wait", not garbage.
        return Some(
            value
                .parse::<u64>()
                .map_or(Duration::MAX, Duration::from_secs),
        );
    }
    if let Ok(seconds) = value.parse::<f64>() {
        if !seconds.is_finite() || seconds < 0.0 {
            return None;
        }
        return Some(Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX));
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(date.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
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
    fn delays_grow_are_capped_and_jittered() {
        let backoff = Backoff::default();
        for retry in 1..=10 {
            let delay = backoff.delay(retry, None).unwrap();
            let full = Duration::from_millis(500)
                .saturating_mul(1 << (retry - 1))
                .min(backoff.max);
            assert!(
                delay <= full && delay >= full.mul_f64(0.75),
                "{retry}: {delay:?}"
            );
        }
        assert_eq!(
            backoff.delay(1, Some(Duration::from_secs(3))),
            Some(Duration::from_secs(3))
        );
        assert_eq!(backoff.delay(1, Some(Duration::from_secs(61))), None);
        let nan = Backoff {
            jitter: f64::NAN,
            ..Backoff::default()
        };
        assert_eq!(nan.delay(1, None), Some(Duration::from_millis(500)));
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("0.5", now),
            Some(Duration::from_millis(500))
        );
        let later = httpdate::fmt_http_date(now + Duration::from_secs(20));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(20))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(20));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert_eq!(parse_retry_after("NaN", now), None);
        // Regression: these panicked in Duration::from_secs_f64.
        assert_eq!(parse_retry_after("inf", now), None);
        for huge in ["99999999999999999999", "1e20", "1e308"] {
            assert_eq!(parse_retry_after(huge, now), Some(Duration::MAX), "{huge}");
        }
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
}
