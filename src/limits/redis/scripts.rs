//! The Lua scripts that change the shared limits, each atomic on the server, and the keys they
//! touch. Every key a script touches is passed in KEYS (never built inside a script), and all
//! keys of one service share one hash tag, so every script runs on one node of a Redis Cluster.
//!
//! Times are integer microseconds of the script's clock: Redis `TIME` by default, or the
//! client's clock passed as `ARGV[1]` (`clock=local`; an empty `ARGV[1]` means `TIME`).
//! Numbers are written with `%d`: Lua's own number-to-string conversion would round a
//! 16-digit microsecond time to 14 significant digits.

use std::sync::LazyLock;

use ::redis::Script;

/// Shared by every script: the clock, and integer formatting.
const PRELUDE: &str = r"
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  -- Before Redis 5, a script that reads TIME must ask for effects replication before it
  -- writes; from 7.0 on this is a no-op.
  if redis.replicate_commands then pcall(redis.replicate_commands) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(x) return string.format('%d', math.floor(x)) end
";

/// Reserves up to `want` slots of a sender's pace and/or a campaign's rate (scheduled GCRA,
/// one message per period, no burst), none further ahead than `horizon`, none before the
/// service's pause and the sender's pause end.
///
/// The store's epoch (a key without expiry, when its state began) tells whether it lost its
/// state: a restart without persistence, a flush. Slots granted before the loss, by any
/// process, may still be up to `HORIZON` ahead of it, so a hash without `tat` (new, or lost
/// with the rest) grants nothing before the epoch, `HORIZON` and one period (the `tat` the
/// lost schedule had at most), and a store without an epoch starts one now: the new schedule
/// continues the old one, however often the state is lost. (Every hash's first reservation
/// after the loss, not only the store's first; and the guard is `HORIZON` itself, not the
/// caller's `horizon`, which a deadline shortens. Versions of bizmsg before 2026-11-30 held
/// back only the store's first reservation.)
///
/// Each hash written also records who wrote it last (`by`, the reservation's token), so that
/// the batch can be given back (`GIVE_BACK`) while nobody has reserved after it.
///
/// KEYS: the epoch, the service pause (string), then the sender's hash (`tat`, `pause`, `by`)
/// if ARGV[4] > 0, then the campaign's hash (`tat`, `by`) if ARGV[5] > 0.
/// ARGV: clock, horizon µs, want, sender period µs (0: none), campaign period µs (0: none),
/// token.
/// Returns `{granted, first, sender from, sender to, campaign from, campaign to, offsets...}`:
/// the offsets (µs from now) of the granted slots; when none is granted, `first` is the offset
/// of the first slot that could be. `from` and `to` are each hash's `tat` before and after the
/// batch (0 for a hash not reserved from), what `GIVE_BACK` needs; `from` already counts the
/// pauses and the epoch's floor, so a batch given back never moves a slot before them.
pub(super) static RESERVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
-- HORIZON in µs (a test ties the two).
local loss_guard = 250000
local now = clock(ARGV[1])
local horizon = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local sp = tonumber(ARGV[4])
local cp = tonumber(ARGV[5])
local skey, ckey
local k = 3
if sp > 0 then skey = KEYS[k]; k = k + 1 end
if cp > 0 then ckey = KEYS[k] end
local floor = math.max(now, tonumber(redis.call('GET', KEYS[2])) or 0)
local epoch = tonumber(redis.call('GET', KEYS[1]))
if not epoch then
  epoch = now
  redis.call('SET', KEYS[1], int(now))
end
local unknown = epoch + loss_guard
local stat, spause = 0, 0
if skey then
  local v = redis.call('HMGET', skey, 'tat', 'pause')
  stat = tonumber(v[1]) or unknown + sp
  spause = tonumber(v[2]) or 0
  floor = math.max(floor, spause)
end
stat = math.max(stat, floor)
local ctat = floor
if ckey then ctat = math.max(tonumber(redis.call('HGET', ckey, 'tat')) or unknown + cp, floor) end
local out = {0, 0, 0, 0, 0, 0}
if skey then out[3] = stat end
if ckey then out[5] = ctat end
local n = 0
local at = math.max(stat, ctat)
while n < want and at - now <= horizon do
  n = n + 1
  out[n + 6] = at - now
  if skey then stat = at + sp end
  if ckey then ctat = at + cp end
  at = math.max(stat, ctat)
end
out[1] = n
if n == 0 then
  out[2] = at - now
  return out
end
out[2] = out[7]
if skey then
  redis.call('HSET', skey, 'tat', int(stat), 'by', ARGV[6])
  redis.call('PEXPIRE', skey, int((math.max(stat, spause) - now) / 1000 + 60000))
  out[4] = stat
end
if ckey then
  redis.call('HSET', ckey, 'tat', int(ctat), 'by', ARGV[6])
  redis.call('PEXPIRE', ckey, int((ctat - now) / 1000 + 60000))
  out[6] = ctat
end
return out
"
    ))
});

/// Gives back a batch its process will not use (`slots.rs`: its answer came too late to place
/// its slots in time): each hash's `tat` goes back to where the batch began, if nobody has
/// reserved from it since (its `tat` and `by` still the batch's). A hash reserved from after
/// the batch, or lost since, keeps its state: the batch's slots are then only unused, as they
/// would be without this script.
///
/// Why this never puts two sends in one slot: the batch's slots were dropped before this runs,
/// so none of them is used; and the hash's `tat` moves back only from the end of the batch,
/// past which nothing was granted (`by` tells the batch from another with the same end, once
/// the hash was lost and reserved anew), to where it began, before which every slot was
/// granted already. `by` goes with it, so that a batch is given back at most once, however
/// often the script runs; and each attempt of a reservation writes a token of its own
/// (`store.rs`), so that an attempt given up for lost and run later is not taken for it.
///
/// KEYS: the hashes reserved from. ARGV: the batch's token, then `from`, `to` for each key.
/// Returns how many hashes were given back.
pub(super) static GIVE_BACK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local given = 0
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 'tat', 'by')
  if v[2] == ARGV[1] and tonumber(v[1]) == tonumber(ARGV[2 * i + 1]) then
    redis.call('HSET', KEYS[i], 'tat', int(tonumber(ARGV[2 * i])))
    redis.call('HDEL', KEYS[i], 'by')
    given = given + 1
  end
end
return given
"
    ))
});

/// Pauses the service (a string) or a sender (its hash's `pause`) for ARGV[2] µs from now,
/// unless a longer pause is already set: a pause only ever extends. Then tells every process
/// listening (`<µs left> <ARGV[5]>` on channel ARGV[4]), so that they drop the slots they
/// reserved before it; a store without pub/sub only loses that.
///
/// KEYS: the pause's key. ARGV: clock, wait µs, `s` (service) or `h` (sender), channel,
/// message. Returns the µs left of the pause now in force.
pub(super) static PAUSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local now = clock(ARGV[1])
local wait = tonumber(ARGV[2])
local untilv = now + wait
if ARGV[3] == 'h' then
  local v = redis.call('HMGET', KEYS[1], 'tat', 'pause')
  local cur = tonumber(v[2]) or 0
  if untilv > cur then
    redis.call('HSET', KEYS[1], 'pause', int(untilv))
    cur = untilv
  end
  local last = math.max(cur, tonumber(v[1]) or 0)
  redis.call('PEXPIRE', KEYS[1], int((last - now) / 1000 + 60000))
  redis.pcall('PUBLISH', ARGV[4], int(cur - now) .. ' ' .. ARGV[5])
  return cur - now
end
local cur = tonumber(redis.call('GET', KEYS[1])) or 0
if untilv > cur then
  redis.call('SET', KEYS[1], int(untilv), 'PX', int(wait / 1000 + 1000))
  cur = untilv
end
redis.pcall('PUBLISH', ARGV[4], int(cur - now) .. ' ' .. ARGV[5])
return cur - now
"
    ))
});

/// The µs left of the service's pause (0: none).
///
/// KEYS: the service pause. ARGV: clock.
pub(super) static SERVICE_PAUSE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local now = clock(ARGV[1])
return math.max(0, (tonumber(redis.call('GET', KEYS[1])) or 0) - now)
"
    ))
});

/// One more pair-rate hit of a sender and recipient: the pair waits 4^n seconds for its n-th
/// hit (at most the cap). A pair's count is forgotten `memory` after its wait ends.
///
/// KEYS: the sender's pair hash (recipient -> `n:until`). ARGV: clock, recipient, cap µs,
/// memory µs. Returns the wait in µs.
pub(super) static SPACE_PAIR: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local now = clock(ARGV[1])
local cap = tonumber(ARGV[3])
local memory = tonumber(ARGV[4])
local n = 0
local v = redis.call('HGET', KEYS[1], ARGV[2])
if v then
  local sep = string.find(v, ':', 1, true)
  if sep then
    local pn = tonumber(string.sub(v, 1, sep - 1)) or 0
    local pu = tonumber(string.sub(v, sep + 1)) or 0
    if pu + memory > now then n = pn end
  end
end
n = n + 1
local wait = cap
if n < 24 then wait = math.min(cap, (4 ^ n) * 1000000) end
local untilv = now + wait
redis.call('HSET', KEYS[1], ARGV[2], int(n) .. ':' .. int(untilv))
local ttl = redis.call('PTTL', KEYS[1])
local keep = (untilv + memory - now) / 1000 + 1000
if ttl < keep then redis.call('PEXPIRE', KEYS[1], int(keep)) end
return wait
"
    ))
});

/// The pairs of a sender still spaced, and forgets those whose count is past its memory.
///
/// KEYS: the sender's pair hash. ARGV: clock, memory µs.
/// Returns `{recipient, µs left, ...}` for the pairs still waiting.
pub(super) static PAIRS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local now = clock(ARGV[1])
local memory = tonumber(ARGV[2])
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local v = all[i + 1]
  local sep = string.find(v, ':', 1, true)
  local u = 0
  if sep then u = tonumber(string.sub(v, sep + 1)) or 0 end
  if u + memory <= now then
    redis.call('HDEL', KEYS[1], all[i])
  elseif u > now then
    out[#out + 1] = all[i]
    out[#out + 1] = u - now
  end
end
return out
"
    ))
});

/// Counts recipients against an account's tier: unique recipients in a rolling window, exact
/// (a sorted set of recipient -> last contact, ms). A known recipient costs nothing (its last
/// contact moves on); a new one is counted while the account is under `limit`; past it, it is
/// refused and not counted.
///
/// KEYS: the account's set. ARGV: clock, limit, window ms, recipients...
/// Returns `{verdict..., unique}`, verdicts 0 known, 1 new, 2 over.
pub(super) static COUNT_RECIPIENTS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(&format!(
        "{PRELUDE}{}",
        r"
local now = math.floor(clock(ARGV[1]) / 1000)
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', int(now - window))
local count = redis.call('ZCARD', KEYS[1])
local out = {}
for i = 4, #ARGV do
  local r = ARGV[i]
  if redis.call('ZSCORE', KEYS[1], r) then
    redis.call('ZADD', KEYS[1], 'GT', int(now), r)
    out[#out + 1] = 0
  elseif count < limit then
    redis.call('ZADD', KEYS[1], int(now), r)
    count = count + 1
    out[#out + 1] = 1
  else
    out[#out + 1] = 2
  end
end
if count > 0 then redis.call('PEXPIRE', KEYS[1], int(window + 60000)) end
out[#out + 1] = count
return out
"
    ))
});

/// The keys of one service (one hash tag: one Cluster slot).
#[derive(Clone, Debug)]
pub(super) struct Keys {
    /// `bz:{<tag>}:`
    prefix: String,
}

impl Keys {
    /// The keys of the service named `namespace` (its base URL): the tag is a hash of it, so
    /// that every client of one service, in any process, meets at the same keys.
    pub(super) fn new(namespace: &str) -> Self {
        let tag = xxhash_rust::xxh3::xxh3_64(namespace.as_bytes());
        Keys {
            prefix: format!("bz:{{{tag:016x}}}:"),
        }
    }

    /// When this store's state began (µs), without expiry: gone means the state was lost.
    pub(super) fn epoch(&self) -> String {
        format!("{}epoch", self.prefix)
    }

    /// The service's pause (`Retry-After`), a string of µs.
    pub(super) fn service_pause(&self) -> String {
        format!("{}pause", self.prefix)
    }

    /// A sender's pace and pause, a hash `{tat, pause, by}`.
    pub(super) fn sender(&self, sender: &str) -> String {
        format!("{}snd:{sender}", self.prefix)
    }

    /// A campaign's rate (`rate_limit=` with a `campaign_id`), a hash `{tat, by}`.
    pub(super) fn campaign(&self, campaign: &str) -> String {
        format!("{}cmp:{campaign}", self.prefix)
    }

    /// A sender's spaced recipients (pair rate), a hash recipient -> `n:until`.
    pub(super) fn pairs(&self, sender: &str) -> String {
        format!("{}pair:{sender}", self.prefix)
    }

    /// An account's recipients of the last 24 h, a sorted set recipient -> ms.
    pub(super) fn recipients(&self, account: &str) -> String {
        format!("{}acct:{account}:rcpt", self.prefix)
    }

    /// The channel pauses are announced on (not a key: pub/sub channels are not stored).
    pub(super) fn pauses(&self) -> String {
        format!("{}pauses", self.prefix)
    }

    /// The senders' paces and tiers, a JSON string (`paces.rs`). (Named anew when what it
    /// holds changed: versions that read another shape each keep their own.)
    pub(super) fn paces(&self) -> String {
        format!("{}senders", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::super::micros;
    use super::super::slots::HORIZON;

    /// `RESERVE`'s guard after a loss is `HORIZON`, written as a literal so that every script
    /// keeps the shape `PRELUDE` + one literal body (`../shared/repro/distributed/redis_sim.py`
    /// loads them by it).
    #[test]
    fn the_loss_guard_is_the_horizon() {
        let guard = format!("local loss_guard = {}\n", micros(HORIZON));
        assert!(include_str!("scripts.rs").contains(&guard), "{guard}");
    }
}
