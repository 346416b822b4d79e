//! The pace of a send's retries. A paced send (a campaign's message, a single send under shared
//! limits) takes a slot before its first attempt; the attempt loop (`execute.rs`) may then send
//! it again (a `429` or `503`, a `5xx`, a refreshed token, a stale connection). Every such
//! attempt is a request the platform counts against the pace, so each takes a slot of its own
//! first: were they sent as they came, the retries held by a `Retry-After` pause would all go
//! the moment it lifted, on top of the paced sends (1,296 in one second at `rate_limit=1000`
//! in the reproduction of `tests/campaigns/test_campaign_pacing.py`).

use futures::future::BoxFuture;

use crate::error::Result;
use crate::limits::Departure;

/// Takes a slot of a send's pace for an attempt after its first.
pub(crate) trait RetrySlot: Send + Sync {
    /// Whether the wait for the slot is part of the call's total timeout. A single send's is,
    /// as its first slot's is bounded by it. A campaign message's is not, as its first slot's
    /// is not: its retry waits behind the slots the campaign's other messages reserved (with
    /// 64 in flight at 2 a second, 32 s), and the attempts after it keep their whole time.
    fn within_call_timeout(&self) -> bool;

    /// Waits for the slot (and for every pause that holds the send), no later than `deadline`
    /// when the store can tell, making `last_step` (a token refreshed after a `401`) as the
    /// slot's last step (`LimitsStore::admit_then`). Its `Departure` is told when the
    /// attempt's request is written.
    fn take<'a>(
        &'a self,
        deadline: Option<std::time::Instant>,
        last_step: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>>;
}
