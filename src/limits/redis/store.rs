//! The store's operations: each a script (or a plain command) run through the process's
//! link to Redis, with the reserved slots and the copies of `per_process.rs` in front.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;

use super::per_process::{PerProcess, PoolKey};
use super::slots::Grant;
use super::target::Clock;
use super::{from_micros, lock, micros, period, scripts, RedisLimits};
use crate::error::{Error, Result};
use crate::limits::{Departure, LimitsStore, Scope, Slot, StoreHealth, TierCount, TierVerdict};

/// A reservation's batch, as `scripts.rs`'s `GIVE_BACK` needs it: the token the batch was
/// written with, and the `tat` of each of its pool's pace hashes before and after it, in
/// `pace_keys`'s order.
pub(super) struct Batch {
    token: String,
    bounds: Vec<(i64, i64)>,
}

/// How often, at most, a process reads the service's pause for messages with no pace.
const PAUSE_FRESH_FOR: Duration = Duration::from_millis(250);
/// With `clock=local`, the difference between a host's clock and the store's past which a
/// warning is logged: a host ahead takes slots that much early, so 50 ms is a twentieth of a
/// second's pace in bursts.
const SKEW_WARNING: Duration = Duration::from_millis(50);
/// How long giving back a stalled batch may wait for the store: its slots are at most a
/// horizon ahead, so past that there is nothing left to give back.
const GIVE_BACK_WAIT: Duration = super::slots::HORIZON;
/// How long before its slot's time a message's last step before its request (a token
/// provider asked, a journal's write of its row as `dispatched`) begins: long enough for a
/// usual write, so that the request goes at its slot's time, and short, so that a message is
/// recorded `dispatched` (in doubt after a crash) only just before it is sent, and its token
/// is fresh. A step that ends late has its message wait for a later slot with its row
/// `dispatched`: in doubt if the process dies meanwhile (for as long as an outage of the store
/// lasts, at worst).
const STEP_LEAD: Duration = Duration::from_millis(10);
/// The rolling window of a messaging tier.
const TIER_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Recipients counted per script: one script blocks the server while it runs.
const TIER_CHUNK: usize = 512;

impl RedisLimits {
    /// The store's eviction policy when it may evict keys: a memory limit (`maxmemory`) and a
    /// policy other than `noeviction`. Every key of ours expires on its own, so `volatile-*`
    /// policies take them first, and `allkeys-*` ones take an idle tier count. A store that
    /// refuses `CONFIG` (managed services often do) cannot be checked: said at debug level.
    async fn eviction_policy(&self, here: &PerProcess) -> Option<String> {
        let settings: Result<Vec<String>> = here
            .link
            .once(|mut connection| async move {
                ::redis::cmd("CONFIG")
                    .arg("GET")
                    .arg("maxmemory*")
                    .query_async(&mut connection)
                    .await
            })
            .await;
        let settings = match settings {
            Ok(settings) => settings,
            Err(error) => {
                log::debug!(
                    target: "bizmsg",
                    "shared limits {}: its eviction policy cannot be read ({error}); it must \
                     be noeviction",
                    self.target.shown
                );
                return None;
            }
        };
        let setting = |name: &str| {
            settings
                .chunks(2)
                .find(|pair| pair.first().map(String::as_str) == Some(name))
                .and_then(|pair| pair.get(1).cloned())
        };
        let limited = setting("maxmemory").is_some_and(|bytes| bytes.trim() != "0");
        let policy = setting("maxmemory-policy")?;
        (limited && policy != "noeviction").then_some(policy)
    }

    /// With `clock=local`, how far this host's clock is from the store's: logged at connect,
    /// a warning past `SKEW_WARNING` (a host ahead by `d` takes slots `d` early, and ends
    /// pauses `d` early).
    async fn log_clock_difference(&self, here: &PerProcess) {
        let asked = SystemTime::now();
        let time: Result<(String, String)> = here
            .link
            .once(|mut connection| async move {
                ::redis::cmd("TIME").query_async(&mut connection).await
            })
            .await;
        let answered = SystemTime::now();
        let (Ok((seconds, micros_part)), Ok(asked), Ok(answered)) = (
            time,
            asked.duration_since(SystemTime::UNIX_EPOCH),
            answered.duration_since(SystemTime::UNIX_EPOCH),
        ) else {
            return;
        };
        let (Ok(seconds), Ok(micros_part)) = (seconds.parse::<f64>(), micros_part.parse::<f64>())
        else {
            return;
        };
        let store = seconds + micros_part / 1e6;
        let here_then = (asked.as_secs_f64() + answered.as_secs_f64()) / 2.0;
        let ahead = here_then - store;
        let round_trip = answered.saturating_sub(asked).as_secs_f64();
        let text = format!(
            "shared limits {} (clock=local): this host's clock is {:+.1} ms from the store's \
             (round trip {:.1} ms)",
            self.target.shown,
            ahead * 1e3,
            round_trip * 1e3
        );
        if ahead.abs() > SKEW_WARNING.as_secs_f64() {
            log::warn!(
                target: "bizmsg",
                "{text}: hosts sharing clock=local must keep their clocks within {} ms of each \
                 other (NTP), or use clock=redis",
                SKEW_WARNING.as_millis()
            );
        } else {
            log::info!(target: "bizmsg", "{text}");
        }
    }

    /// The hashes of `key`'s paces: the sender's, then the campaign's.
    fn pace_keys(&self, key: &PoolKey) -> Vec<String> {
        let sender = key
            .sender
            .iter()
            .map(|(sender, _)| self.keys.sender(sender));
        let campaign = key
            .campaign
            .iter()
            .map(|(campaign, _)| self.keys.campaign(campaign));
        sender.chain(campaign).collect()
    }

    /// Asks for up to `want` slots within `horizon`.
    pub(super) async fn reserve(
        &self,
        here: &PerProcess,
        key: &PoolKey,
        want: usize,
        horizon: Duration,
        deadline: Option<Instant>,
    ) -> Result<Grant<Batch>> {
        // A token per attempt, not per reservation: an attempt given up for lost may still run
        // later, and must not pass for the one whose answer came (helper-40).
        let mut token = String::new();
        let mut keys = vec![self.keys.epoch(), self.keys.service_pause()];
        keys.extend(self.pace_keys(key));
        let sender_period = key.sender.as_ref().map_or(0, |(_, period)| *period);
        let campaign_period = key.campaign.as_ref().map_or(0, |(_, period)| *period);
        let reply: Vec<i64> = here
            .link
            .run(deadline, |mut connection| {
                token = format!(
                    "{:x}.{}",
                    here.origin,
                    here.reservations.fetch_add(1, Ordering::Relaxed)
                );
                let mut invocation = scripts::RESERVE.prepare_invoke();
                for key in &keys {
                    invocation.key(key);
                }
                invocation
                    .arg(self.clock())
                    .arg(micros(horizon))
                    .arg(want)
                    .arg(sender_period)
                    .arg(campaign_period)
                    .arg(&token);
                async move { invocation.invoke_async(&mut connection).await }
            })
            .await?;
        match reply.as_slice() {
            [0, first, ..] => Ok(Grant::FirstFree(from_micros(*first))),
            [_, _, sender_from, sender_to, campaign_from, campaign_to, offsets @ ..]
                if !offsets.is_empty() =>
            {
                Ok(Grant::Slots(
                    offsets.iter().map(|offset| from_micros(*offset)).collect(),
                    Batch {
                        token,
                        bounds: key
                            .sender
                            .iter()
                            .map(|_| (*sender_from, *sender_to))
                            .chain(key.campaign.iter().map(|_| (*campaign_from, *campaign_to)))
                            .collect(),
                    },
                ))
            }
            _ => Err(self.unexpected("a reservation")),
        }
    }

    /// Gives back a batch none of whose slots will be used (`slots.rs`: an answer too late to
    /// place, or one that raced a pause). Best effort:
    /// a batch not given back is only unused, as it was before. So it is one attempt, bounded
    /// by `GIVE_BACK_WAIT` and the call's deadline, never retried (a script run twice must not
    /// give back twice) and never taken for an outage; a failure is logged at debug level.
    pub(super) async fn give_back(
        &self,
        here: &PerProcess,
        key: &PoolKey,
        batch: Batch,
        deadline: Option<Instant>,
    ) {
        // A batch holds a bound for each pace of its pool, in the same order.
        let keys = self.pace_keys(key);
        let bound = Instant::now() + GIVE_BACK_WAIT;
        let until = deadline.map_or(bound, |deadline| deadline.min(bound));
        let once = here.link.once(|mut connection| {
            let mut invocation = scripts::GIVE_BACK.prepare_invoke();
            for key in &keys {
                invocation.key(key);
            }
            invocation.arg(&batch.token);
            for (from, to) in &batch.bounds {
                invocation.arg(*from).arg(*to);
            }
            async move { invocation.invoke_async::<i64>(&mut connection).await }
        });
        let shown = &self.target.shown;
        match tokio::time::timeout_at(until.into(), once).await {
            Ok(Ok(given)) => log::debug!(
                target: "bizmsg",
                "shared limits {shown}: unused slots given back to {given} of {} paces (a \
                 pace reserved from since keeps them)",
                keys.len()
            ),
            Ok(Err(error)) => log::debug!(
                target: "bizmsg",
                "shared limits {shown}: unused slots not given back: {error}"
            ),
            Err(_) => log::debug!(
                target: "bizmsg",
                "shared limits {shown}: unused slots not known to be given back: no answer \
                 in time (the store may still run it)"
            ),
        }
    }

    /// Waits out the service's pause (for a message with no pace: no reservation to read it).
    async fn service_pause(&self, here: &PerProcess, deadline: Option<Instant>) -> Result<()> {
        loop {
            let known = *lock(&here.service_pause);
            let until = match known {
                Some((read_at, until)) if read_at.elapsed() < PAUSE_FRESH_FOR => until,
                _ => {
                    let key = self.keys.service_pause();
                    let left: i64 = here
                        .link
                        .run(deadline, |mut connection| {
                            let mut invocation = scripts::SERVICE_PAUSE.prepare_invoke();
                            invocation.key(&key).arg(self.clock());
                            async move { invocation.invoke_async(&mut connection).await }
                        })
                        .await?;
                    let now = Instant::now();
                    let until = now + from_micros(left);
                    *lock(&here.service_pause) = Some((now, until));
                    until
                }
            };
            if until <= Instant::now() {
                return Ok(());
            }
            if deadline.is_some_and(|deadline| until > deadline) {
                return Err(Error::Timeout(
                    "the service is paused past the call's deadline".to_owned(),
                ));
            }
            tokio::time::sleep_until(until.into()).await;
        }
    }

    /// Waits for a slot of `slot`'s paces (a message with no pace: for the service's pause)
    /// and takes it, making `last_step` (a journal's write) first. The step begins `STEP_LEAD`
    /// before the slot's time, so that it is made by then; one that ends past the slot's
    /// bound takes a later slot, the step made: sent when the step ended, next to the following
    /// slots, the request could put more than the pace in one second. The same holds for the
    /// attempt itself: the `Departure` says by when it must be made (`slots.rs`'s
    /// `WRITE_AFTER_WAKE`).
    async fn slot(
        &self,
        slot: Slot<'_>,
        deadline: Option<Instant>,
        mut last_step: Option<BoxFuture<'_, bool>>,
    ) -> Result<Departure> {
        let here = self.here()?;
        let key = PoolKey {
            sender: match slot.sender {
                Some((sender, pace)) => Some((sender.to_owned(), period(pace)?)),
                None => None,
            },
            campaign: match slot.campaign {
                Some((campaign, rate)) => Some((campaign.to_owned(), period(rate)?)),
                None => None,
            },
        };
        if key.sender.is_none() && key.campaign.is_none() {
            self.service_pause(&here, deadline).await?;
            if let Some(step) = last_step {
                step.await;
            }
            return Ok(Departure::default());
        }
        let pool = here.pool(&key);
        let (here, key) = (&*here, &key);
        loop {
            let lead = if last_step.is_some() {
                STEP_LEAD
            } else {
                Duration::ZERO
            };
            let taken = pool
                .take(
                    deadline,
                    lead,
                    move |want, horizon| self.reserve(here, key, want, horizon, deadline),
                    move |batch| self.give_back(here, key, batch, deadline),
                )
                .await?;
            if let Some(step) = last_step.take() {
                if !step.await {
                    // The message does not go (its claim was lost): nothing to wait for.
                    return Ok(Departure::default());
                }
            }
            if pool.ready(&taken).await {
                return Ok(Departure::written_by(taken.write_by().into()));
            }
            log::debug!(
                target: "bizmsg",
                "shared limits {}: a slot given up (its message's last step before the \
                 request ended past its time, or a pause came); a later one is taken",
                self.target.shown
            );
        }
    }
}

impl LimitsStore for RedisLimits {
    fn admit<'a>(&'a self, slot: Slot<'a>, deadline: Option<Instant>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.slot(slot, deadline, None).await?;
            Ok(())
        })
    }

    fn admit_then<'a>(
        &'a self,
        slot: Slot<'a>,
        deadline: Option<Instant>,
        before_release: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>> {
        Box::pin(self.slot(slot, deadline, before_release))
    }

    fn pause<'a>(&'a self, scope: Scope<'a>, wait: Duration) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let here = self.here()?;
            // Slots this process holds stop at once, before the store is even told.
            here.drop_slots(scope);
            let (key, kind, announced) = match scope {
                Scope::Service => (self.keys.service_pause(), "s", format!("{} s", here.origin)),
                Scope::Sender(sender) => (
                    self.keys.sender(sender),
                    "h",
                    format!("{} h {sender}", here.origin),
                ),
            };
            let channel = self.keys.pauses();
            let left: i64 = here
                .link
                .run(None, |mut connection| {
                    let mut invocation = scripts::PAUSE.prepare_invoke();
                    invocation
                        .key(&key)
                        .arg(self.clock())
                        .arg(micros(wait))
                        .arg(kind)
                        .arg(&channel)
                        .arg(&announced);
                    async move { invocation.invoke_async(&mut connection).await }
                })
                .await?;
            // Slots reserved while the store was being told were granted before the pause.
            here.drop_slots(scope);
            if scope == Scope::Service {
                let now = Instant::now();
                *lock(&here.service_pause) = Some((now, now + from_micros(left)));
            }
            Ok(())
        })
    }

    fn space_pair<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
        cap: Duration,
    ) -> BoxFuture<'a, Result<Duration>> {
        Box::pin(self.space_pair_in_store(sender, recipient, cap))
    }

    fn pair_wait<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
    ) -> BoxFuture<'a, Result<Duration>> {
        Box::pin(async move {
            let here = self.here()?;
            self.pairs_of(&here, sender, recipient).await
        })
    }

    fn pair_wait_known(&self, sender: &str, recipient: &str) -> Duration {
        self.known_pair_wait(sender, recipient)
    }

    fn count_recipients<'a>(
        &'a self,
        account: &'a str,
        limit: u64,
        recipients: &'a [u64],
    ) -> BoxFuture<'a, Result<TierCount>> {
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.recipients(account);
            let mut verdicts = Vec::with_capacity(recipients.len());
            let mut unique = 0;
            for chunk in recipients.chunks(TIER_CHUNK) {
                let reply: Vec<u64> = here
                    .link
                    .run(None, |mut connection| {
                        let mut invocation = scripts::COUNT_RECIPIENTS.prepare_invoke();
                        invocation
                            .key(&key)
                            .arg(self.clock())
                            .arg(limit)
                            .arg(TIER_WINDOW.as_millis().to_string());
                        for recipient in chunk {
                            invocation.arg(recipient);
                        }
                        async move { invocation.invoke_async(&mut connection).await }
                    })
                    .await?;
                let Some((count, each)) = reply.split_last() else {
                    return Err(self.unexpected("a tier count"));
                };
                if each.len() != chunk.len() {
                    return Err(self.unexpected("a tier count"));
                }
                verdicts.extend(each.iter().map(|verdict| match verdict {
                    0 => TierVerdict::Known,
                    1 => TierVerdict::New,
                    _ => TierVerdict::Over,
                }));
                unique = *count;
            }
            if recipients.is_empty() {
                let count: u64 = here
                    .link
                    .run(None, |mut connection| {
                        let key = key.clone();
                        async move {
                            ::redis::cmd("ZCARD")
                                .arg(key)
                                .query_async(&mut connection)
                                .await
                        }
                    })
                    .await?;
                unique = count;
            }
            Ok(TierCount { verdicts, unique })
        })
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn check(&self) -> BoxFuture<'_, Result<StoreHealth>> {
        Box::pin(async move {
            let here = self.here()?;
            let _: String = here
                .link
                .once(|mut connection| async move {
                    ::redis::cmd("PING").query_async(&mut connection).await
                })
                .await?;
            if self.target.clock == Clock::Local {
                self.log_clock_difference(&here).await;
            }
            Ok(StoreHealth {
                evicts: self.eviction_policy(&here).await,
            })
        })
    }

    fn cached_paces(&self, deadline: Option<Instant>) -> BoxFuture<'_, Result<Option<String>>> {
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.paces();
            here.link
                .run(deadline, |mut connection| {
                    let key = key.clone();
                    async move {
                        ::redis::cmd("GET")
                            .arg(key)
                            .query_async(&mut connection)
                            .await
                    }
                })
                .await
        })
    }

    fn cache_paces(
        &self,
        json: String,
        ttl: Duration,
        deadline: Option<Instant>,
    ) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.paces();
            let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            here.link
                .run(deadline, |mut connection| {
                    let (key, json) = (key.clone(), json.clone());
                    async move {
                        ::redis::cmd("SET")
                            .arg(key)
                            .arg(json)
                            .arg("PX")
                            .arg(ttl)
                            .query_async::<()>(&mut connection)
                            .await
                    }
                })
                .await
        })
    }
}
