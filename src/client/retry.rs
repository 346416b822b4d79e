//! How long to wait before a retry: exponential backoff with jitter, or the service's
//! `Retry-After`. (Whether to retry at all is `decide.rs`'s.)
//!
//! Delay before retry `n` (1-based): `min(max, initial * 2^(n-1)) * (1 - jitter * u)` with `u`
//! uniform in [0, 1). A `Retry-After` the service sends (seconds or an HTTP date) is used as is
//! instead, as long as it is at most `max_retry_after`; a longer one is not waited for and the
//! error goes to the caller.

use std::time::{Duration, SystemTime};

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
}
