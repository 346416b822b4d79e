//! Pacing in one process: a GCRA limiter from governor, for the whole campaign (`rate_limit=`)
//! and for each sender (`pace="auto"`); a message waits for its sender's turn, then the
//! campaign's.

use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota};

use crate::error::{Error, Result};

pub struct Limiter {
    limiter: DefaultDirectRateLimiter,
    clock: DefaultClock,
}

/// The slowest pace: one message a day. (The rate limiter counts in u64 nanoseconds and
/// refuses periods past ~584 years by panicking; a campaign slower than this is a mistake.)
const LONGEST_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

impl Limiter {
    /// `per_second` messages per second, evenly spaced (no burst beyond one message).
    pub fn new(per_second: f64) -> Result<Self> {
        if !per_second.is_finite() || per_second <= 0.0 {
            return Err(Error::validation(
                "rate_limit",
                format!("must be a positive number of messages per second, got {per_second}"),
            ));
        }
        let period = Duration::try_from_secs_f64(1.0 / per_second)
            .ok()
            .filter(|period| !period.is_zero() && *period <= LONGEST_PERIOD)
            .ok_or_else(|| {
                Error::validation(
                    "rate_limit",
                    format!(
                        "{per_second:e} per second is out of range (at least one message a \
                         day, 1/86400)"
                    ),
                )
            })?;
        let quota = Quota::with_period(period).ok_or_else(|| {
            Error::validation(
                "rate_limit",
                format!("{per_second} per second is out of range"),
            )
        })?;
        Ok(Limiter {
            limiter: DefaultDirectRateLimiter::direct(quota),
            clock: DefaultClock::default(),
        })
    }

    /// Waits for this limiter's next free slot and takes it.
    pub async fn admit(&self) {
        loop {
            match self.limiter.check() {
                Ok(()) => return,
                Err(not_until) => {
                    tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn a_limiter_spaces_messages_evenly() {
        let limiter = Limiter::new(200.0).unwrap();
        let started = Instant::now();
        for _ in 0..21 {
            limiter.admit().await;
        }
        // 20 intervals of 5 ms; generous upper bound for a loaded machine.
        let elapsed = started.elapsed();
        assert!(elapsed >= Duration::from_millis(95), "{elapsed:?}");
        assert!(Limiter::new(0.0).is_err() && Limiter::new(f64::NAN).is_err());
    }
}
