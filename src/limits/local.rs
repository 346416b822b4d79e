//! The limits kept in this process, for one campaign: a GCRA limiter from governor per paced
//! key (each sender with `pace="auto"`, the campaign with `rate_limit=`), gates for pauses,
//! and counters for pair spacing and tiers. The embedded default: what a campaign does when no
//! store is shared.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota};

use super::{LimitsStore, Scope, Slot, TierCount, TierVerdict};
use crate::client::Gate;
use crate::error::{Error, Result};

/// One pace: `per_second` messages per second, evenly spaced (no burst beyond one message).
pub struct Limiter {
    limiter: DefaultDirectRateLimiter,
    clock: DefaultClock,
    per_second: f64,
}

/// The slowest pace: one message a day. (The rate limiter counts in u64 nanoseconds and
/// refuses periods past ~584 years by panicking; a campaign slower than this is a mistake.)
const LONGEST_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

impl Limiter {
    pub fn new(per_second: f64) -> Result<Self> {
        let quota = quota(per_second)?;
        Ok(Limiter {
            limiter: DefaultDirectRateLimiter::direct(quota),
            clock: DefaultClock::default(),
            per_second,
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

/// Checks a rate (`rate_limit=`, or a pace): a positive number of messages per second, at
/// least one a day.
pub fn check_rate(per_second: f64) -> Result<()> {
    quota(per_second).map(|_| ())
}

fn quota(per_second: f64) -> Result<Quota> {
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
                    "{per_second:e} per second is out of range (at least one message a day, \
                     1/86400)"
                ),
            )
        })?;
    Quota::with_period(period).ok_or_else(|| {
        Error::validation(
            "rate_limit",
            format!("{per_second} per second is out of range"),
        )
    })
}

/// The limits of one campaign in this process.
pub struct LocalLimits {
    /// Pauses of the whole campaign: the same gate its calls wait at (a `Retry-After` answered
    /// to one call pauses them all, see `client/execute.rs`).
    service: Arc<Gate>,
    senders: Mutex<HashMap<String, Arc<Gate>>>,
    /// By key: `s` + sender digits, `c` + campaign.
    paces: Mutex<HashMap<String, Arc<Limiter>>>,
    /// (sender, recipient) -> (hits, spaced until).
    pairs: Mutex<HashMap<(String, String), (u32, Instant)>>,
    /// Unique recipients per account (counting stops past the tier: bounded memory).
    tiers: Mutex<HashMap<String, HashSet<u64>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl LocalLimits {
    /// Limits whose service-wide pauses are `gate`'s.
    pub fn new(gate: Arc<Gate>) -> Self {
        LocalLimits {
            service: gate,
            senders: Mutex::new(HashMap::new()),
            paces: Mutex::new(HashMap::new()),
            pairs: Mutex::new(HashMap::new()),
            tiers: Mutex::new(HashMap::new()),
        }
    }

    /// The limiter of `key` at `per_second` (made, or made anew when the pace changed).
    fn limiter(&self, key: String, per_second: f64) -> Result<Arc<Limiter>> {
        let mut paces = lock(&self.paces);
        if let Some(limiter) = paces.get(&key) {
            if limiter.per_second == per_second {
                return Ok(Arc::clone(limiter));
            }
        }
        let limiter = Arc::new(Limiter::new(per_second)?);
        paces.insert(key, Arc::clone(&limiter));
        Ok(limiter)
    }

    fn sender_gate(&self, sender: &str) -> Option<Arc<Gate>> {
        lock(&self.senders).get(sender).cloned()
    }

    /// When the pauses that hold `sender` end, if one does now.
    fn paused_until(&self, sender: Option<&Gate>) -> Option<Instant> {
        let service = self.service.closed_until();
        let sender = sender.and_then(Gate::closed_until);
        service.max(sender)
    }
}

impl LimitsStore for LocalLimits {
    fn admit<'a>(&'a self, slot: Slot<'a>, _: Option<Instant>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let sender_pace = match slot.sender {
                Some((sender, pace)) => Some(self.limiter(format!("s{sender}"), pace)?),
                None => None,
            };
            let campaign_pace = match slot.campaign {
                Some((campaign, rate)) => Some(self.limiter(format!("c{campaign}"), rate)?),
                None => None,
            };
            let sender_gate = slot.sender.and_then(|(sender, _)| self.sender_gate(sender));
            // Slots are taken once every pause is over: messages held by a pause then leave at
            // the pace, not together the moment it lifts. A slot taken as a pause began is
            // given up for a new one after it.
            loop {
                while let Some(until) = self.paused_until(sender_gate.as_deref()) {
                    tokio::time::sleep_until(until.into()).await;
                }
                if let Some(limiter) = &sender_pace {
                    limiter.admit().await;
                }
                if let Some(limiter) = &campaign_pace {
                    limiter.admit().await;
                }
                let paced = sender_pace.is_some() || campaign_pace.is_some();
                if !paced || self.paused_until(sender_gate.as_deref()).is_none() {
                    return Ok(());
                }
            }
        })
    }

    fn pause<'a>(&'a self, scope: Scope<'a>, wait: Duration) -> BoxFuture<'a, Result<()>> {
        match scope {
            Scope::Service => self.service.pause(wait),
            Scope::Sender(sender) => lock(&self.senders)
                .entry(sender.to_owned())
                .or_insert_with(|| Arc::new(Gate::new()))
                .pause(wait),
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn space_pair<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
        cap: Duration,
    ) -> BoxFuture<'a, Result<Duration>> {
        let mut pairs = lock(&self.pairs);
        let entry = pairs
            .entry((sender.to_owned(), recipient.to_owned()))
            .or_insert((0, Instant::now()));
        entry.0 = entry.0.saturating_add(1);
        let wait = Duration::from_secs(4u64.saturating_pow(entry.0)).min(cap);
        entry.1 = Instant::now() + wait;
        Box::pin(std::future::ready(Ok(wait)))
    }

    fn pair_wait<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
    ) -> BoxFuture<'a, Result<Duration>> {
        let wait = lock(&self.pairs)
            .get(&(sender.to_owned(), recipient.to_owned()))
            .map_or(Duration::ZERO, |(_, until)| {
                until.saturating_duration_since(Instant::now())
            });
        Box::pin(std::future::ready(Ok(wait)))
    }

    fn count_recipients<'a>(
        &'a self,
        account: &'a str,
        limit: u64,
        recipients: &'a [u64],
    ) -> BoxFuture<'a, Result<TierCount>> {
        let mut tiers = lock(&self.tiers);
        let seen = tiers.entry(account.to_owned()).or_default();
        let verdicts = recipients
            .iter()
            .map(|recipient| {
                if seen.contains(recipient) {
                    TierVerdict::Known
                } else if (seen.len() as u64) < limit {
                    seen.insert(*recipient);
                    TierVerdict::New
                } else {
                    // Not kept: memory stays bounded by the largest tier.
                    TierVerdict::Over
                }
            })
            .collect();
        let count = TierCount {
            verdicts,
            unique: seen.len() as u64,
        };
        Box::pin(std::future::ready(Ok(count)))
    }

    fn is_shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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

    #[tokio::test]
    async fn a_sender_pause_holds_that_sender_only() {
        let limits = LocalLimits::new(Arc::new(Gate::new()));
        limits
            .pause(Scope::Sender("861"), Duration::from_millis(80))
            .await
            .unwrap();
        let started = Instant::now();
        let other = Slot {
            sender: Some(("862", 1000.0)),
            campaign: None,
        };
        limits.admit(other, None).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(60));
        let held = Slot {
            sender: Some(("861", 1000.0)),
            campaign: None,
        };
        limits.admit(held, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(75));
    }

    #[tokio::test]
    async fn tiers_count_each_recipient_once_and_refuse_past_the_limit() {
        let limits = LocalLimits::new(Arc::new(Gate::new()));
        let count = limits
            .count_recipients("a", 2, &[1, 2, 1, 3])
            .await
            .unwrap();
        assert_eq!(
            count.verdicts,
            [
                TierVerdict::New,
                TierVerdict::New,
                TierVerdict::Known,
                TierVerdict::Over
            ]
        );
        assert_eq!(count.unique, 2);
        let pair = limits
            .space_pair("861", "862", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(pair, Duration::from_secs(4));
        assert!(limits.pair_wait("861", "862").await.unwrap() > Duration::from_secs(3));
        assert_eq!(
            limits.pair_wait("861", "863").await.unwrap(),
            Duration::ZERO
        );
    }
}
