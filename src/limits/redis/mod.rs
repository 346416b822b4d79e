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
//!   clocks in sync (NTP): a host ahead sees state as older than it is by its skew, and takes
//!   slots that much early (logged at connect; keep it within 1 or 2 ms, which the pace's
//!   guard leaves for it and the way there: a warning past 50).
//! - `wait=<seconds>` (default 60): how long an operation waits for an unreachable store,
//!   retrying with backoff, before it fails with `SharedStateError`.
//!
//! Redis 6.2 or later (the tier count uses `ZADD ... GT`), or a store that speaks its
//! commands and Lua scripts.
//!
//! A bad URL, scheme or parameter is a `ValidationError` of `shared_limits`; the password
//! never appears in an error, a log line or a `Debug` output (`redact_url`).
//!
//! # Keys
//! Every key of one service (the client's base URL) carries one hash tag, `bz:{<hash>}:`, so
//! every script's keys live on one Redis Cluster node, and every key is declared in KEYS:
//! - `pause`: the service's pause (a `429`/`503` with `Retry-After`), µs of the clock;
//! - `snd:<sender>`: a hash `{tat, pause, by}`: the sender's pace (GCRA's theoretical arrival
//!   time), its pause (its throughput code), and the token of the last reservation (a batch
//!   is given back only while it is the last);
//! - `cmp:<campaign>`: a hash `{tat, by}`: a campaign's `rate_limit=`;
//! - `pair:<sender>`: a hash recipient -> `n:until` for pairs whose pair rate was hit;
//! - `acct:<account>:rcpt`: a sorted set recipient -> last contact (ms), the account's unique
//!   recipients in the last 24 h;
//! - `paces`: the senders' paces looked up by one process (JSON), for all;
//! - `epoch`: when the store's state began, without expiry (see below).
//!
//! Each key expires on its own once it no longer matters (a pace a minute after its last slot,
//! a pause when it ends, a pair an hour after its wait, recipients a day after their last).
//!
//! # Pacing
//! The scripts (`scripts.rs`) keep a sender's pace and a campaign's rate as GCRA with no
//! burst, and reserve several slots at once, none more than `HORIZON` (250 ms) ahead, which a
//! process hands out to its callers (`slots.rs`): about one round trip per `HORIZON` of pace
//! per process, not one per message. A reservation honours the service's and the sender's
//! pauses; a pause only ever extends. A pause is also announced on the channel `pauses`
//! (pub/sub, one more connection per process): every process drops the slots it reserved
//! before it, within milliseconds. Where the store has no pub/sub, or while that connection
//! is being made again, slots already granted still go (at most `HORIZON` of pace).
//!
//! A slot's time is known here only to within the round trip of the answer that granted it,
//! and a slot is used at most 6 ms after its true time, that round trip included (`slots.rs`'s
//! `LATE`; the spacing leaves 8 ms a second for it, `SHARED_SPAN`). So the store must answer
//! within 5 ms, as a Redis in the same data centre does. A store every answer takes longer to
//! come from still paces, with 1 ms for a caller to wake: a slot may then be used its round
//! trip and 1 ms late, and a second at the service may hold sends over the pace (about the
//! pace × the round trip's excess over 5 ms). An answer much slower than the quickest of the
//! last 16 (a stall, an outage's retries) is not used: its slots are dropped, and the batch is
//! given back to the store (`GIVE_BACK`), which grants it again unless another reservation came
//! after it. Nothing between a slot and its request waits for the store, and a message's last
//! step before it (a journal's write) begins `STEP_LEAD` before the slot's time: one that ends
//! past the slot's bound takes a later slot (`store.rs`, `slot`). So does an attempt found,
//! as it is about to be handed to the transport, more than 2 ms past that bound (the write's
//! share of the 8 ms, `slots.rs`'s `WRITE_AFTER_WAKE`; `client/execute.rs`).
//!
//! # When Redis is away, or forgets
//! Nothing is sent unpaced: a message waits until the store grants it a slot. An operation on
//! an unreachable store retries with backoff on a new connection (`link.rs`) and fails with
//! `SharedStateError` past `wait=`; a campaign then stops as it does when its journal fails,
//! a single send raises. A call's deadline that the wait would pass fails with a timeout, and
//! no slot is taken. A campaign checks the store (PING) before it sends anything.
//!
//! A Redis restarted without persistence (or flushed) has forgotten paces, pauses, pair
//! spacing and tier counts. Pacing notices: the store's epoch (`epoch`, a key without expiry)
//! is gone, and every pace's first reservation after starts its schedule `HORIZON` and a
//! period past the new epoch, so the slots granted before the loss (at most `HORIZON` ahead)
//! never overlap new ones, however often it happens: no second holds more than the pace. (A
//! process of a bizmsg before 2026-11-30 holds back only the store's first reservation; a
//! Redis restarted from a snapshot keeps an old epoch and is not noticed: back within
//! `HORIZON`, it may grant slots next to those granted before the restart.) Tier counts
//! restart from zero: run Redis with persistence (AOF or RDB) where that matters.
//!
//! A Redis that evicts keys under memory pressure (`maxmemory` with a policy other than
//! `noeviction`: a shared cache) drops ours silently: every key of ours expires on its own, so
//! `volatile-*` policies take them first, and `allkeys-*` take an idle tier count. `check`
//! reads the policy (`CONFIG GET`, where the store allows it): a campaign that enforces the
//! tier refuses such a store, others warn. Use `noeviction`, or a Redis of bizmsg's own.
//!
//! With `clock=local`, `check` logs how far this host's clock is from the store's (a warning
//! past 50 ms): a host ahead takes slots and ends pauses that much early.
//!
//! # Pair spacing
//! `pair_wait`, asked before every message of a campaign, is answered from this process's copy
//! of the sender's spaced pairs, read from the store at most about once a second per sender:
//! a pair spaced by another process is seen here up to about a second late (the platform
//! tolerates short bursts to a pair; its own refusal would space it here at once). Asked again
//! after the message's slot, it is `pair_wait_known`, which never reads: a read that met a
//! stalled store sent the request late for its slot (helper-43: a second of 61 at a pace of
//! 60).
//!
//! # Processes
//! Callers run on many tokio runtimes; the connection lives on a runtime of its own
//! (`link.rs`, `connect.rs`). Everything held per process (`per_process.rs`: runtime, connections,
//! reserved slots, copies) is made on first use and made anew in a forked child, which
//! forgets the parent's without dropping it (dropping would close sockets the parent still
//! uses). The operations themselves are in `store.rs`, pair spacing in `pairs.rs`.

mod connect;
mod link;
mod pairs;
mod per_process;
mod scripts;
mod slots;
mod store;
mod target;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use self::link::Link;
use self::per_process::PerProcess;
use self::scripts::Keys;
use self::target::{Clock, Target};
use super::check_rate;
use crate::error::{Error, Result};
use crate::sync::lock;

/// The limits shared through one Redis.
pub struct RedisLimits {
    target: Arc<Target>,
    tls: Option<Arc<rustls::ClientConfig>>,
    keys: Keys,
    /// This process's part, made on first use (anew in a forked child).
    here: Mutex<Option<Arc<PerProcess>>>,
}

impl std::fmt::Debug for RedisLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimits")
            .field("url", &self.target.shown)
            .finish_non_exhaustive()
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

fn from_micros(micros: i64) -> Duration {
    Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// The spacing of `per_second`, in µs (rounded up: never faster than asked): `per_second` slots
/// span a second and the guard a send may be late by (`slots.rs`'s `LATE`) and arrive late by,
/// so that no second at the service holds more than the pace (the local timeline's `SPAN`,
/// `timeline.rs`, with the same reasoning).
fn period(per_second: f64) -> Result<u64> {
    check_rate(per_second)?;
    // In range by check_rate: between 1 µs... and one day.
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let period = (micros(SHARED_SPAN) as f64 / per_second).ceil() as u64;
    Ok(period.max(1))
}

/// What `per_second` slots of a shared pace span: a second, a slot's use up to `LATE` after
/// its time, and the difference in the way there.
const SHARED_SPAN: Duration = Duration::from_millis(1_008);

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
    fn here(&self) -> Result<Arc<PerProcess>> {
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
        let made = Arc::new(PerProcess {
            pid,
            // The pid in it: a forked child's random generator repeats its parent's.
            origin: (u64::from(pid) << 32) ^ fastrand::u64(..),
            reservations: AtomicU64::new(0),
            link: Link::new(Arc::clone(&self.target), self.tls.clone())?,
            pools: Mutex::new(HashMap::new()),
            pairs: Mutex::new(HashMap::new()),
            service_pause: Mutex::new(None),
        });
        // Pauses set by other processes drop the slots this one reserved before them.
        let heard = Arc::downgrade(&made);
        made.link.watch(self.keys.pauses(), move |message| {
            let Some(here) = heard.upgrade() else {
                return false;
            };
            here.heard(message);
            true
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
}
