//! Pair spacing on the store: the (sender, recipient) pairs the platform refused for their
//! rate (code 131056) wait out a spacing that every process sees, and each process keeps a
//! copy of a sender's spaced pairs, read again at most once a `PAIRS_FRESH_FOR`.

use std::time::{Duration, Instant};

use super::per_process::{PerProcess, Reading};
use super::{from_micros, lock, micros, scripts, RedisLimits};
use crate::error::Result;

/// How long a pair's count of pair-rate hits is remembered after its wait ends: a hit within
/// it waits 4× longer than the last.
const PAIR_MEMORY: Duration = Duration::from_secs(60 * 60);
/// How often, at most, a process reads a sender's spaced pairs (`pair_wait`).
const PAIRS_FRESH_FOR: Duration = Duration::from_secs(1);

impl RedisLimits {
    /// Records a pair-rate refusal of (`sender`, `recipient`) and returns how long the pair
    /// waits now (`LimitsStore::space_pair`).
    pub(super) async fn space_pair_in_store(
        &self,
        sender: &str,
        recipient: &str,
        cap: Duration,
    ) -> Result<Duration> {
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
    }

    /// The spaced pairs of `sender` as this process knows them, read again when older than
    /// `PAIRS_FRESH_FOR` (by one caller; the others answer from the copy meanwhile).
    pub(super) async fn pairs_of(
        &self,
        here: &PerProcess,
        sender: &str,
        recipient: &str,
    ) -> Result<Duration> {
        {
            let mut all = lock(&here.pairs);
            let pairs = all.entry(sender.to_owned()).or_default();
            let fresh = pairs
                .read_at
                .is_some_and(|read_at| read_at.elapsed() < PAIRS_FRESH_FOR);
            if fresh || (pairs.reading && pairs.read_at.is_some()) {
                return Ok(pairs.wait_for(recipient));
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
        Ok(pairs.wait_for(recipient))
    }

    /// How long a message to (`sender`, `recipient`) still waits for its pair, from this
    /// process's copy only: never a read (`LimitsStore::pair_wait_known`). No copy yet: the
    /// read before the slot makes one. (`here` fails only where this process's state cannot
    /// be made; the read before the slot failed then too.)
    pub(super) fn known_pair_wait(&self, sender: &str, recipient: &str) -> Duration {
        let Ok(here) = self.here() else {
            return Duration::ZERO;
        };
        let pairs = lock(&here.pairs);
        pairs
            .get(sender)
            .map_or(Duration::ZERO, |pairs| pairs.wait_for(recipient))
    }
}
