//! The paces of a client's senders, for single sends under shared limits: each send takes a
//! slot of its sender's pace, so that web workers' transactional sends and a campaign on the
//! same number together stay under it; and each one sent counts its recipient against the
//! sender's account's messaging tier, as a campaign's do, so that a campaign after them knows
//! the account's room. A number's throughput and account are looked up once (the account
//! listing) and cached in the shared store for every process, and in this process for a while.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::LimitsStore;
use crate::error::Result;
use crate::sync::lock;

/// How long a lookup stands, in the store and in each process: a number's throughput or
/// quality changes over hours, not seconds.
const FRESH_FOR: Duration = Duration::from_secs(10 * 60);

/// What single sends need of a sender: its pace, and the tier its recipients count against.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct SenderFacts {
    /// Messages per second; `None`: unpaced (an unknown throughput, or not a number of this
    /// client's accounts: the service judges the send).
    pub(crate) pace: Option<f64>,
    /// The account whose tier its recipients count against, when the tier has a limit.
    pub(crate) account: Option<String>,
    /// That account's unique recipients per rolling 24 h.
    pub(crate) limit: Option<u64>,
}

/// Each sender's facts, by digits.
pub(crate) type Paces = HashMap<String, SenderFacts>;

/// One client's memo of its senders' paces, and when they were looked up.
#[derive(Default)]
pub(crate) struct SenderPaces {
    known: Mutex<Option<(Instant, Paces)>>,
}

impl SenderPaces {
    /// What single sends need of `sender` (digits). `lookup` reads every sender's facts from
    /// the service when neither this memo nor the store knows `sender`: it is the caller's
    /// (`api/directory.rs`), which may call the service, as the limits may not.
    pub(crate) async fn of<F, L>(
        &self,
        sender: &str,
        store: &dyn LimitsStore,
        deadline: Option<Instant>,
        lookup: L,
    ) -> Result<SenderFacts>
    where
        L: FnOnce() -> F,
        F: std::future::Future<Output = Result<Paces>>,
    {
        if let Some(facts) = self.memo(sender) {
            return Ok(facts);
        }
        let cached: Paces = match store.cached_paces(deadline).await? {
            Some(json) => serde_json::from_str(&json).unwrap_or_default(),
            None => Paces::new(),
        };
        // A sender the cached listing does not name (looked up by a client with another
        // token, of other accounts) is looked up here and added: otherwise its sends would go
        // unpaced. One this client's listing does not name either is remembered as having no
        // pace in this process only (another token may know it), so that it is not looked up
        // on every send.
        let paces = if cached.contains_key(sender) {
            cached
        } else {
            let mut paces = cached;
            paces.extend(lookup().await?);
            if let Ok(json) = serde_json::to_string(&paces) {
                store.cache_paces(json, FRESH_FOR, deadline).await?;
            }
            paces.entry(sender.to_owned()).or_default();
            paces
        };
        let facts = paces.get(sender).cloned().unwrap_or_default();
        *lock(&self.known) = Some((Instant::now(), paces));
        Ok(facts)
    }

    fn memo(&self, sender: &str) -> Option<SenderFacts> {
        let known = lock(&self.known);
        let (when, paces) = known.as_ref()?;
        if when.elapsed() > FRESH_FOR {
            return None;
        }
        paces.get(sender).cloned()
    }
}
