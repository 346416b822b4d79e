//! A campaign message's retries within the attempt loop take slots of the same paces as its
//! first attempt: its sender's (`pace="auto"`) and its campaign's (`rate_limit=`), through the
//! campaign's limits store (`client/retry_slot.rs` says why).

use std::sync::Arc;

use futures::future::BoxFuture;

use super::Context;
use crate::campaign::handle::RUN;
use crate::client::RetrySlot;
use crate::error::{Error, Result};
use crate::limits::{Departure, Slot};
use crate::wire::SendRequest;

/// Why a retry was not made: the campaign stopped while it waited for its slot.
pub(super) const STOPPED_BEFORE_RETRY: &str =
    "the campaign stopped before the message was sent again";

pub(super) struct CampaignRetrySlot {
    pub(super) context: Arc<Context>,
    pub(super) request: Arc<SendRequest>,
    /// Its sender's pace, when paced.
    pub(super) pace: Option<f64>,
}

impl RetrySlot for CampaignRetrySlot {
    fn within_call_timeout(&self) -> bool {
        false
    }

    fn take<'a>(
        &'a self,
        deadline: Option<std::time::Instant>,
        last_step: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>> {
        Box::pin(async move {
            let from = self.request.from.as_str();
            let slot = Slot {
                sender: self.pace.map(|pace| (from, pace)),
                campaign: self
                    .context
                    .rate
                    .as_ref()
                    .map(|(name, rate)| (name.as_str(), *rate)),
            };
            // Without a deadline (`within_call_timeout`), it ends when the campaign stops: a
            // message held here is not sent (`send.rs` reports it so).
            let mut state = self.context.control.state.subscribe();
            crate::limits::waited(from, async {
                tokio::select! {
                    // A slot given as the stop comes is taken: the retry goes, as it would have.
                    biased;
                    taken = self.context.limits.admit_then(slot, deadline, last_step) => taken,
                    _ = state.wait_for(|state| *state != RUN) => {
                        Err(Error::Campaign(STOPPED_BEFORE_RETRY.to_owned()))
                    }
                }
            })
            .await
        })
    }
}
