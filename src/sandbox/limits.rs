//! The platform's limits, when a sandbox enforces them (`enforce_limits`), so campaigns can be
//! tested against what the platform behind the service does (shared/spec/platform-limits.md):
//!
//! - **throughput**: a number sends at most its tier's messages per second (STANDARD 80, HIGH
//!   1000; other values unlimited), with a one-second burst. Past it the send is refused before
//!   processing: `429` with `Retry-After` (whole seconds) and code `130429`.
//! - **messaging tier**: an account reaches at most its tier's unique recipients
//!   (`chatBusinessManagerMessagingLimit`) in a rolling 24 h. A send to a new recipient past it
//!   is a failed commit, code `1007`.

use std::collections::{BTreeMap, HashMap};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota};

use super::store::{Account, PhoneNumber};
use crate::platform::tier_limit;
use crate::sync::lock;

const WINDOW_MILLIS: i64 = 24 * 60 * 60 * 1000;

#[derive(Default)]
pub(crate) struct Limits {
    throughput: Mutex<HashMap<u64, Arc<DefaultDirectRateLimiter>>>,
    /// (tenant, account id) -> recipient -> when last sent to (ms since the epoch).
    /// B-trees: every send waits for these, and a hash map doubles all at once (`store.rs`).
    recipients: Mutex<HashMap<(usize, String), BTreeMap<u64, i64>>>,
}

fn per_second(throughput: &str) -> Option<u32> {
    match throughput.trim().to_ascii_uppercase().as_str() {
        "STANDARD" => Some(80),
        "HIGH" => Some(1000),
        _ => None,
    }
}

impl Limits {
    /// Takes a slot of `number`'s throughput, or says how long until one is free.
    pub(crate) fn throughput(&self, number: &PhoneNumber) -> Result<(), Duration> {
        let Some(rate) = per_second(&number.throughput).and_then(NonZeroU32::new) else {
            return Ok(());
        };
        let limiter = Arc::clone(lock(&self.throughput).entry(number.digits).or_insert_with(
            || Arc::new(DefaultDirectRateLimiter::direct(Quota::per_second(rate))),
        ));
        limiter
            .check()
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// Records a send to `recipient` by `account`, or refuses it: `(limit, tier)` when the
    /// recipient is new and the account already reached its tier in the last 24 h.
    pub(crate) fn admit_recipient(
        &self,
        tenant: usize,
        account: &Account,
        recipient: u64,
        now_millis: i64,
    ) -> Result<(), (u64, String)> {
        let tier = account.chat_business_manager_messaging_limit.to_string();
        let Some(limit) = tier_limit(&tier) else {
            return Ok(());
        };
        let mut all = lock(&self.recipients);
        let seen = all
            .entry((tenant, account.biz_account_id.clone()))
            .or_default();
        let recent = |last: &i64| now_millis - *last < WINDOW_MILLIS;
        if seen.get(&recipient).is_some_and(recent) {
            seen.insert(recipient, now_millis);
            return Ok(());
        }
        if seen.len() as u64 >= limit {
            // Forget recipients outside the window before deciding.
            seen.retain(|_, last| recent(last));
        }
        if seen.len() as u64 >= limit {
            return Err((limit, tier));
        }
        seen.insert(recipient, now_millis);
        Ok(())
    }
}

/// `Retry-After` for a wait: whole seconds, at least 1.
pub(crate) fn retry_after(wait: Duration) -> String {
    wait.as_secs()
        .saturating_add(u64::from(wait.subsec_nanos() > 0))
        .max(1)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::store::Timestamp;

    fn account(tier: &str) -> Account {
        Account {
            biz_account_id: "1".into(),
            name: "A".into(),
            status: "ACTIVE".into(),
            business_verification_status: "verified".into(),
            account_review_status: "APPROVED".into(),
            chat_business_manager_messaging_limit: tier.to_owned().into(),
            create_time: Timestamp {
                millis: 0,
                offset_minutes: 0,
            },
            update_time: Timestamp {
                millis: 0,
                offset_minutes: 0,
            },
            numbers: Vec::new(),
        }
    }

    #[test]
    fn the_tier_counts_unique_recipients_in_a_rolling_day() {
        let limits = Limits::default();
        let acme = account("TIER_50");
        for recipient in 0..50 {
            assert!(limits.admit_recipient(0, &acme, recipient, 1_000).is_ok());
        }
        // Known recipients are fine, a new one is not; another tenant has its own budget.
        assert!(limits.admit_recipient(0, &acme, 7, 2_000).is_ok());
        assert_eq!(
            limits.admit_recipient(0, &acme, 99, 2_000),
            Err((50, "TIER_50".into()))
        );
        assert!(limits.admit_recipient(1, &acme, 99, 2_000).is_ok());
        // A day later the window has moved on (only recipient 7 was seen since).
        assert!(limits
            .admit_recipient(0, &acme, 99, 1_000 + WINDOW_MILLIS)
            .is_ok());
        assert!(limits
            .admit_recipient(0, &account("TIER_UNLIMITED"), 5, 0)
            .is_ok());
    }

    #[test]
    fn retry_after_is_whole_seconds() {
        assert_eq!(retry_after(Duration::from_millis(1)), "1");
        assert_eq!(retry_after(Duration::from_millis(1500)), "2");
        assert_eq!(retry_after(Duration::from_secs(3)), "3");
    }
}
