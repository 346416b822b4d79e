//! The limits kept in Redis, shared by every process and host given the same URL
//! (`shared_limits=`, `BIZMSG_SHARED_LIMITS`).
//!
//! # The URL
//! `redis://[user][:password@]host[:port][/db]`, or `rediss://` for TLS, checked with the
//! client's own rustls configuration (`verify=`), as its HTTP is. User and password are
//! percent-encoded. Query parameters:
//! - `clock=redis` (the default) reads the time inside each script with Redis `TIME`: one
//!   clock for every host, so clock skew between hosts does not matter. `clock=local` passes
//!   the calling host's clock to each script instead, for stores that refuse `TIME` in scripts
//!   (Redis before 5 without effects replication, some proxies); hosts must then keep their
//!   clocks in sync (NTP): a host ahead sees state as older than it is by its skew.
//! - `wait=<seconds>` (default 60): how long an operation waits for an unreachable store,
//!   retrying with backoff, before it fails with `SharedStateError`.
//!
//! A bad URL, scheme or parameter is a `ValidationError` of `shared_limits`; the password
//! never appears in an error, a log line or a `Debug` output (`redact_url`).
//!
//! # Keys
//! Every key of one service (the client's base URL) carries one hash tag, `bz:{<hash>}:`, so
//! every script's keys live on one Redis Cluster node, and every key is declared in KEYS:
//! - `pause`: the service's pause (a `429`/`503` with `Retry-After`), µs of the clock;
//! - `snd:<sender>`: a hash `{tat, pause}`: the sender's pace (GCRA's theoretical arrival
//!   time) and its pause (its throughput code);
//! - `cmp:<campaign>`: a hash `{tat}`: a campaign's `rate_limit=`;
//! - `pair:<sender>`: a hash recipient -> `n:until` for pairs whose pair rate was hit;
//! - `acct:<account>:rcpt`: a sorted set recipient -> last contact (ms), the account's unique
//!   recipients in the last 24 h;
//! - `paces`: the senders' paces looked up by one process (JSON), for all.
//!
//! Each key expires on its own once it no longer matters (a pace a minute after its last slot,
//! a pause when it ends, a pair an hour after its wait, recipients a day after their last).
//!
//! # Pacing
//! The scripts (`scripts.rs`) keep a sender's pace and a campaign's rate as GCRA with no
//! burst, and reserve several slots at once, none more than `HORIZON` (250 ms) ahead, which a
//! process hands out to its callers (`slots.rs`): about one round trip per `HORIZON` of pace
//! per process, not one per message. A reservation honours the service's and the sender's
//! pauses; a pause only ever extends. The process that learns of a pause drops its own
//! reserved slots; other processes' slots already granted still go (at most `HORIZON` of
//! pace).
//!
//! # When Redis is away, or forgets
//! Nothing is sent unpaced: a message waits until the store grants it a slot. An operation on
//! an unreachable store retries with backoff on a new connection (`link.rs`) and fails with
//! `SharedStateError` past `wait=`; a campaign then stops as it does when its journal fails,
//! a single send raises. A call's deadline that the wait would pass fails with a timeout, and
//! no slot is taken. A campaign checks the store (PING) before it sends anything.
//!
//! A Redis restarted without persistence has forgotten paces, pauses, pair spacing and tier
//! counts. The damage to pacing is bounded by the horizon: slots granted before the restart
//! (at most `HORIZON × pace`) plus a fresh schedule make at most `(1 + HORIZON) × pace + 1`
//! sends in one second (76 for a STANDARD sender paced at 60 under its ceiling of 80). Tier
//! counts restart from zero: run Redis with persistence (AOF or RDB) where that matters.
//!
//! # Pair spacing
//! `pair_wait`, asked before every message of a campaign, is answered from this process's copy
//! of the sender's spaced pairs, read from the store at most about once a second per sender:
//! a pair spaced by another process is seen here up to about a second late (the platform
//! tolerates short bursts to a pair; its own refusal would space it here at once).
//!
//! # Processes
//! Callers run on many tokio runtimes; the connection lives on a runtime of its own
//! (`link.rs`). Everything held per process (runtime, connection, reserved slots, copies) is
//! made on first use and made anew in a forked child, which forgets the parent's without
//! dropping it (dropping would close sockets the parent still uses).

mod link;
mod scripts;
mod slots;
mod target;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;

use self::link::Link;
use self::scripts::Keys;
use self::slots::{Grant, Pool};
use self::target::{Clock, Target};
use super::{check_rate, LimitsStore, Scope, Slot, TierCount, TierVerdict};
use crate::error::{Error, Result};

/// How long a pair's count of pair-rate hits is remembered after its wait ends: a hit within
/// it waits 4× longer than the last.
const PAIR_MEMORY: Duration = Duration::from_secs(60 * 60);
/// How often, at most, a process reads a sender's spaced pairs (`pair_wait`).
const PAIRS_FRESH_FOR: Duration = Duration::from_secs(1);
/// How often, at most, a process reads the service's pause for messages with no pace.
const PAUSE_FRESH_FOR: Duration = Duration::from_millis(250);
/// The rolling window of a messaging tier.
const TIER_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Recipients counted per script: one script blocks the server while it runs.
const TIER_CHUNK: usize = 512;

/// The limits shared through one Redis.
pub struct RedisLimits {
    target: Arc<Target>,
    tls: Option<Arc<rustls::ClientConfig>>,
    keys: Keys,
    /// This process's part, made on first use (anew in a forked child).
    here: Mutex<Option<Arc<Here>>>,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits")
            .field("url", &self.target.shown)
            .finish_non_exhaustive()
    }
}

/// What one process keeps.
struct Here {
    pid: u32,
    link: Link,
    /// Reserved slots, by pace.
    pools: Mutex<HashMap<PoolKey, Arc<Pool>>>,
    /// Each sender's spaced pairs as last read.
    pairs: Mutex<HashMap<String, Pairs>>,
    /// The service's pause as last read: (read at, paused until).
    service_pause: Mutex<Option<(Instant, Instant)>>,
}

/// A pool's pace: the sender's and/or the campaign's, with their periods in µs.
#[derive(Clone, PartialEq, Eq, Hash)]
struct PoolKey {
    sender: Option<(String, u64)>,
    campaign: Option<(String, u64)>,
}

#[derive(Default)]
struct Pairs {
    read_at: Option<Instant>,
    reading: bool,
    until: HashMap<String, Instant>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn from_micros(micros: i64) -> Duration {
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// The spacing of `per_second`, in µs (rounded up: never faster than asked).
fn period(per_second: f64) -> Result<u64> {
    check_rate(per_second)?;
    // In range by check_rate: between 1 µs... and one day.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let period = (1e6 / per_second).ceil() as u64;
    Ok(period.max(1))
}

impl RedisLimits {
    /// The store at `url` for the service named `namespace` (the client's base URL), TLS
    /// checked with `tls`. Nothing is connected before first use.
    pub fn new(url: &str, namespace: &str, tls: Option<Arc<rustls::ClientConfig>>) -> Result<Self> {
        let target = Target::parse(url)?;
        if target.tls && tls.is_none() {
            return Err(Error::validation(
                "shared_limits",
                format!(
                    "{}: rediss:// needs the client's TLS settings",
                    target.shown
                ),
            ));
        }
        Ok(RedisLimits {
            target: Arc::new(target),
            tls,
            keys: Keys::new(namespace),
            here: Mutex::new(None),
        })
    }

    /// This process's part, made on first use; a forked child makes its own and forgets the
    /// parent's (its runtime's thread does not exist in the child; dropping it would close
    /// sockets the parent still uses).
    fn here(&self) -> Result<Arc<Here>> {
        let pid = crate::process::id();
        let mut here = lock(&self.here);
        if let Some(current) = here.as_ref() {
            if current.pid == pid {
                return Ok(Arc::clone(current));
            }
        }
        if let Some(inherited) = here.take() {
            std::mem::forget(inherited);
        }
        let made = Arc::new(Here {
            pid,
            link: Link::new(Arc::clone(&self.target), self.tls.clone())?,
            pools: Mutex::new(HashMap::new()),
            pairs: Mutex::new(HashMap::new()),
            service_pause: Mutex::new(None),
        });
        *here = Some(Arc::clone(&made));
        Ok(made)
    }

    /// `ARGV[1]` of every script: empty for Redis `TIME`, else this host's clock in µs.
    fn clock(&self) -> String {
        match self.target.clock {
            Clock::Redis => String::new(),
            Clock::Local => SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|now| micros(now).to_string())
                .unwrap_or_default(),
        }
    }

    fn unexpected(&self, what: &str) -> Error {
        Error::SharedState(format!(
            "{}: unexpected answer to {what}",
            self.target.shown
        ))
    }

    /// Asks for up to `want` slots within `horizon`.
    async fn reserve(
        &self,
        here: &Here,
        key: &PoolKey,
        want: usize,
        horizon: Duration,
        deadline: Option<Instant>,
    ) -> Result<Grant> {
        let mut keys = vec![self.keys.service_pause()];
        if let Some((sender, _)) = &key.sender {
            keys.push(self.keys.sender(sender));
        }
        if let Some((campaign, _)) = &key.campaign {
            keys.push(self.keys.campaign(campaign));
        }
        let sender_period = key.sender.as_ref().map_or(0, |(_, period)| *period);
        let campaign_period = key.campaign.as_ref().map_or(0, |(_, period)| *period);
        let reply: Vec<i64> = here
            .link
            .run(deadline, |mut connection| {
                let mut invocation = scripts::RESERVE.prepare_invoke();
                for key in &keys {
                    invocation.key(key);
                }
                invocation
                    .arg(self.clock())
                    .arg(micros(horizon))
                    .arg(want)
                    .arg(sender_period)
                    .arg(campaign_period);
                async move { invocation.invoke_async(&mut connection).await }
            })
            .await?;
        match reply.as_slice() {
            [0, first, ..] => Ok(Grant::FirstFree(from_micros(*first))),
            [_, _, offsets @ ..] if !offsets.is_empty() => Ok(Grant::Slots(
                offsets.iter().map(|offset| from_micros(*offset)).collect(),
            )),
            _ => Err(self.unexpected("a reservation")),
        }
    }

    /// Waits out the service's pause (for a message with no pace: no reservation to read it).
    async fn service_pause(&self, here: &Here, deadline: Option<Instant>) -> Result<()> {
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

    /// Drops the reserved slots a pause of `scope` holds back.
    fn drop_slots(here: &Here, scope: Scope<'_>) {
        for (key, pool) in lock(&here.pools).iter() {
            let held = match scope {
                Scope::Service => true,
                Scope::Sender(sender) => key
                    .sender
                    .as_ref()
                    .is_some_and(|(paused, _)| paused == sender),
            };
            if held {
                pool.pause();
            }
        }
    }

    /// The spaced pairs of `sender` as this process knows them, read again when older than
    /// `PAIRS_FRESH_FOR` (by one caller; the others answer from the copy meanwhile).
    async fn pairs_of(&self, here: &Here, sender: &str, recipient: &str) -> Result<Duration> {
        let answer = |pairs: &Pairs| {
            pairs.until.get(recipient).map_or(Duration::ZERO, |until| {
                until.saturating_duration_since(Instant::now())
            })
        };
        {
            let mut all = lock(&here.pairs);
            let pairs = all.entry(sender.to_owned()).or_default();
            let fresh = pairs
                .read_at
                .is_some_and(|read_at| read_at.elapsed() < PAIRS_FRESH_FOR);
            if fresh || (pairs.reading && pairs.read_at.is_some()) {
                return Ok(answer(pairs));
            }
            pairs.reading = true;
        }
        let reading = Reading { here, sender };
        let key = self.keys.pairs(sender);
        let reply: Vec<(String, i64)> = here
            .link
            .run(None, |mut connection| {
                let mut invocation = scripts::PAIRS.prepare_invoke();
                invocation
                    .key(&key)
                    .arg(self.clock())
                    .arg(micros(PAIR_MEMORY));
                async move { invocation.invoke_async(&mut connection).await }
            })
            .await?;
        let now = Instant::now();
        let until = reply
            .into_iter()
            .map(|(recipient, left)| (recipient, now + from_micros(left)))
            .collect();
        drop(reading);
        let mut all = lock(&here.pairs);
        let pairs = all.entry(sender.to_owned()).or_default();
        pairs.until = until;
        pairs.read_at = Some(now);
        Ok(answer(pairs))
    }
}

/// Marks a sender's pairs as being read; cleared however the reading ends.
struct Reading<'a> {
    here: &'a Here,
    sender: &'a str,
}

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        if let Some(pairs) = lock(&self.here.pairs).get_mut(self.sender) {
            pairs.reading = false;
        }
    }
}

impl Here {
    fn pool(&self, key: &PoolKey) -> Arc<Pool> {
        let mut pools = lock(&self.pools);
        if let Some(pool) = pools.get(key) {
            return Arc::clone(pool);
        }
        if pools.len() >= 4096 {
            // Paces no longer used (finished campaigns, senders gone quiet).
            pools.retain(|_, pool| Arc::strong_count(pool) > 1);
        }
        let spacing = key
            .sender
            .iter()
            .chain(key.campaign.iter())
            .map(|(_, period)| *period)
            .max()
            .unwrap_or(1);
        let pool = Arc::new(Pool::new(Duration::from_micros(spacing)));
        pools.insert(key.clone(), Arc::clone(&pool));
        pool
    }
}

impl LimitsStore for RedisLimits {
    fn admit<'a>(&'a self, slot: Slot<'a>, deadline: Option<Instant>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
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
                return self.service_pause(&here, deadline).await;
            }
            let pool = here.pool(&key);
            let (here, key) = (&*here, &key);
            pool.take(deadline, move |want, horizon| {
                self.reserve(here, key, want, horizon, deadline)
            })
            .await
        })
    }

    fn pause<'a>(&'a self, scope: Scope<'a>, wait: Duration) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let here = self.here()?;
            // Slots this process holds stop at once, before the store is even told.
            Self::drop_slots(&here, scope);
            let (key, kind) = match scope {
                Scope::Service => (self.keys.service_pause(), "s"),
                Scope::Sender(sender) => (self.keys.sender(sender), "h"),
            };
            let left: i64 = here
                .link
                .run(None, |mut connection| {
                    let mut invocation = scripts::PAUSE.prepare_invoke();
                    invocation
                        .key(&key)
                        .arg(self.clock())
                        .arg(micros(wait))
                        .arg(kind);
                    async move { invocation.invoke_async(&mut connection).await }
                })
                .await?;
            // Slots reserved while the store was being told were granted before the pause.
            Self::drop_slots(&here, scope);
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
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.pairs(sender);
            let wait: i64 = here
                .link
                .run(None, |mut connection| {
                    let mut invocation = scripts::SPACE_PAIR.prepare_invoke();
                    invocation
                        .key(&key)
                        .arg(self.clock())
                        .arg(recipient)
                        .arg(micros(cap))
                        .arg(micros(PAIR_MEMORY));
                    async move { invocation.invoke_async(&mut connection).await }
                })
                .await?;
            let wait = from_micros(wait);
            lock(&here.pairs)
                .entry(sender.to_owned())
                .or_default()
                .until
                .insert(recipient.to_owned(), Instant::now() + wait);
            Ok(wait)
        })
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

    fn check(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let here = self.here()?;
            let _: String = here
                .link
                .once(|mut connection| async move {
                    ::redis::cmd("PING").query_async(&mut connection).await
                })
                .await?;
            Ok(())
        })
    }

    fn cached_paces(&self) -> BoxFuture<'_, Result<Option<String>>> {
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.paces();
            here.link
                .run(None, |mut connection| {
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

    fn cache_paces(&self, json: String, ttl: Duration) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let here = self.here()?;
            let key = self.keys.paces();
            let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
            here.link
                .run(None, |mut connection| {
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
