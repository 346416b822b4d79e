//! The limits the platform puts on senders (docs/platform-limits.md), kept by bizmsg so that
//! the platform never has to refuse a message for them: each sender's pace (and a campaign's
//! own rate), pauses (the service's `Retry-After`, a sender's throughput code), the spacing of
//! one sender and recipient pair (the pair-rate code), and each account's unique recipients
//! per rolling 24 h against its messaging tier.
//!
//! Where they are kept is a [`LimitsStore`]:
//! - `local.rs`: in this process, for one campaign (the embedded default, as before there was
//!   a store): a timeline per pace (`timeline.rs`), a gate, counters;
//! - `redis/`: in Redis, shared by every process and host given the same URL
//!   (`shared_limits=`), so that their sum keeps the limits.

mod departure;
mod gate;
mod local;
mod outages;
mod paces;
mod redis;
mod timeline;
mod waited;

use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use crate::error::Result;

pub use departure::Departure;
pub use gate::Gate;
pub use local::LocalLimits;
pub use outages::{ongoing as shared_state_outages_ongoing, total as shared_state_outages};
pub(crate) use paces::{Paces, SenderFacts, SenderPaces};
pub use timeline::{check_rate, duration_of};
pub use waited::{
    seconds_by_sender as seconds_waited_by_sender, total_seconds as seconds_waited, waited,
};

/// What a message must wait for before it goes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slot<'a> {
    /// Its sender (digits) and the sender's pace in messages per second, when paced.
    pub sender: Option<(&'a str, f64)>,
    /// Its campaign and the campaign's rate (`rate_limit=`), when it has one.
    pub campaign: Option<(&'a str, f64)>,
}

/// What a pause holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every send to the service (a `429`/`503` with `Retry-After`, a maintenance code).
    Service,
    /// Every send from one sender (its throughput code, `130429`).
    Sender(&'a str),
}

/// One recipient counted against its account's tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TierVerdict {
    /// Contacted within the last 24 h already: costs nothing.
    Known,
    /// New, and counted.
    New,
    /// New, past the tier: the platform would refuse it (not counted).
    Over,
}

/// What [`LimitsStore::count_recipients`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TierCount {
    /// One per recipient, in order.
    pub verdicts: Vec<TierVerdict>,
    /// The account's unique recipients in the last 24 h, after counting.
    pub unique: u64,
}

/// What [`LimitsStore::check`] found of the store.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreHealth {
    /// The store may evict keys under memory pressure (its eviction policy, when it is not
    /// `noeviction` and a memory limit is set): paces, pauses and tier counts may vanish.
    pub evicts: Option<String>,
}

/// Where the limits are kept. Every method may fail only for a store that lives elsewhere
/// (Redis): a local store always answers.
pub trait LimitsStore: Send + Sync {
    /// Waits until a message with `slot` may go: every pause that applies has ended, and one
    /// slot of each pace is taken. A wait that would end past `deadline` is not started: it
    /// fails with a timeout, and nothing is taken.
    fn admit<'a>(&'a self, slot: Slot<'a>, deadline: Option<Instant>) -> BoxFuture<'a, Result<()>>;

    /// `admit`, with `before_release` run once the slot's time has come and before the
    /// message is let go: what must be done just before a request leaves, and after its pacing
    /// wait (a token provider asked, a campaign's journal dispatch), is then inside the pace. A
    /// store that keeps sends from crowding a second (`timeline.rs`'s ring) counts the send
    /// when it really leaves, so the step's own delay cannot make a window above the pace: it
    /// releases the send after the step, and returns the `Departure` to tell it when the
    /// request was written; one that cannot (Redis) returns by when the request must be
    /// written, or not on this slot (`departure.rs`).
    /// `before_release` answering false ends the admission there (the message does not go).
    /// By default the step runs after `admit`, and there is nothing to tell.
    fn admit_then<'a>(
        &'a self,
        slot: Slot<'a>,
        deadline: Option<Instant>,
        before_release: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>> {
        Box::pin(async move {
            self.admit(slot, deadline).await?;
            if let Some(step) = before_release {
                step.await;
            }
            Ok(Departure::default())
        })
    }

    /// Holds every message in `scope` for `wait` from now (a longer pause already set stays).
    fn pause<'a>(&'a self, scope: Scope<'a>, wait: Duration) -> BoxFuture<'a, Result<()>>;

    /// The pair rate of `sender` to `recipient` was hit: the pair is spaced (4^n seconds for
    /// its n-th hit, at most `cap`), and the wait before it may be tried again is returned.
    fn space_pair<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
        cap: Duration,
    ) -> BoxFuture<'a, Result<Duration>>;

    /// How long until `sender` may send to `recipient` again (zero: now).
    fn pair_wait<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
    ) -> BoxFuture<'a, Result<Duration>>;

    /// The same, as this process knows it now, never waiting for the store: asked between a
    /// slot and its request, where a wait would send the request late for its slot (a slot is
    /// used within a bound of its time, `redis/slots.rs`).
    fn pair_wait_known(&self, sender: &str, recipient: &str) -> Duration;

    /// Counts `recipients` (digits as numbers) against `account`'s tier of `limit` unique
    /// recipients per rolling 24 h.
    fn count_recipients<'a>(
        &'a self,
        account: &'a str,
        limit: u64,
        recipients: &'a [u64],
    ) -> BoxFuture<'a, Result<TierCount>>;

    /// Whether every process given the same store shares these limits (else they are this
    /// process's, for one campaign).
    fn is_shared(&self) -> bool;

    /// Checks that the store answers, and how it keeps what it is given (a campaign asks
    /// before it sends anything).
    fn check(&self) -> BoxFuture<'_, Result<StoreHealth>> {
        Box::pin(std::future::ready(Ok(StoreHealth::default())))
    }

    /// The senders' paces one process looked up and cached in the store (`paces.rs`'s JSON),
    /// if still there; waiting for an unreachable store no later than `deadline` (a call's).
    fn cached_paces(&self, deadline: Option<Instant>) -> BoxFuture<'_, Result<Option<String>>> {
        let _ = deadline;
        Box::pin(std::future::ready(Ok(None)))
    }

    /// Caches the senders' paces (`json`) in the store for `ttl`, for every process.
    fn cache_paces(
        &self,
        json: String,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> BoxFuture<'_, Result<()>> {
        let _ = (json, ttl, deadline);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The store shared by every process given `url` (`shared_limits=`, `BIZMSG_SHARED_LIMITS`):
/// `redis://` or `rediss://` (TLS, checked with `tls`), with a password in the URL if the
/// server wants one (the URL's form and parameters: `redis/mod.rs`). `namespace` names the
/// service whose limits these are (the client's base URL): clients of one service, in every
/// process, share its limits, and clients of another service sharing the Redis do not. It
/// connects on first use; a URL it cannot use is refused now.
pub fn shared(
    url: &str,
    namespace: &str,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
) -> Result<std::sync::Arc<dyn LimitsStore>> {
    Ok(std::sync::Arc::new(self::redis::RedisLimits::new(
        url, namespace, tls,
    )?))
}
