//! Single sends under shared limits (`shared_limits=`): paced with the campaigns on the same
//! senders, each retry included (`client/retry_slot.rs`), and counted against their accounts'
//! tiers.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::client::{CallOptions, Client, RetrySlot, SendProgress};
use crate::error::Result;
use crate::limits::{Departure, LimitsStore, Slot};
use crate::wire::SendRequest;

/// What a single send took from the shared limits before its first attempt.
pub(super) struct SharedSlot {
    limits: Arc<dyn LimitsStore>,
    /// Its sender's pace, when the sender is paced.
    pace: Option<f64>,
    /// The account and tier its recipient counts against once sent (`count_recipient`).
    tier: Option<(String, u64)>,
    /// The call's total timeout, which bounds each wait for the store.
    total: Option<std::time::Duration>,
    /// A token provider's answer, asked as the slot's last step (`Client::authorization_ahead`),
    /// for the first attempt; taken by `progress_of`.
    authorization: std::sync::Mutex<Option<Result<http::HeaderValue>>>,
    /// By when its first attempt's request must be written (`limits/departure.rs`); taken by
    /// `progress_of`.
    departure: std::sync::Mutex<Option<Departure>>,
}

impl SharedSlot {
    /// The progress of the send of `request`: its retries take slots of the same pace, and
    /// its first attempt uses the token asked for its slot.
    pub(super) fn progress_of(&self, request: &Arc<SendRequest>) -> SendProgress {
        let progress = SendProgress::default().with_retry_slot(Arc::new(SingleSendRetrySlot {
            limits: Arc::clone(&self.limits),
            request: Arc::clone(request),
            pace: self.pace,
        }));
        if let Some(asked) = crate::sync::lock(&self.authorization).take() {
            progress.authorize_ahead(asked);
        }
        if let Some(departure) = crate::sync::lock(&self.departure).take() {
            progress.departs(departure);
        }
        progress
    }
}

struct SingleSendRetrySlot {
    limits: Arc<dyn LimitsStore>,
    request: Arc<SendRequest>,
    pace: Option<f64>,
}

impl RetrySlot for SingleSendRetrySlot {
    fn within_call_timeout(&self) -> bool {
        true
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
                campaign: None,
            };
            crate::limits::waited(from, self.limits.admit_then(slot, deadline, last_step)).await
        })
    }
}

impl Client {
    /// Under shared limits, a single send waits for a slot of its sender's pace (and for any
    /// pause of the service or the sender), within the call's own total timeout. `None`
    /// without shared limits.
    pub(super) async fn take_shared_slot(
        &self,
        from: &str,
        call: &CallOptions,
    ) -> Result<Option<SharedSlot>> {
        let Some(limits) = self.shared_limits() else {
            return Ok(None);
        };
        let total = self.total_timeout(call);
        let deadline = total.and_then(|total| std::time::Instant::now().checked_add(total));
        let facts = self
            .sender_paces()
            .of(from, limits.as_ref(), deadline, || {
                super::directory::sender_facts(self, call)
            })
            .await?;
        let slot = Slot {
            sender: facts.pace.map(|pace| (from, pace)),
            campaign: None,
        };
        // A token provider is asked as the slot's last step: after the slot, it would write
        // the request late for it; before the wait, the token could expire meanwhile.
        // A provider that fails ends the step (the slot is not released): its failure is the
        // send's, returned by the first attempt as when the attempt asked.
        let authorization = std::sync::Mutex::new(None);
        let ask: Option<BoxFuture<'_, bool>> = self.asks_for_token().then(|| {
            Box::pin(async {
                let asked = self.authorization_ahead(call).await;
                let go = asked.is_ok();
                *crate::sync::lock(&authorization) = Some(asked);
                go
            }) as BoxFuture<'_, bool>
        });
        let departure = crate::limits::waited(from, limits.admit_then(slot, deadline, ask)).await?;
        Ok(Some(SharedSlot {
            limits,
            pace: facts.pace,
            tier: facts.account.zip(facts.limit),
            total,
            authorization,
            departure: std::sync::Mutex::new(Some(departure)),
        }))
    }

    /// A single send that was sent counts its recipient against its sender's account's tier,
    /// as a campaign's messages do (a campaign after it then knows the account's room). The
    /// message is sent: a store that fails now only costs the count, said in a warning.
    /// The store is waited for no longer than the call's total timeout (a store away would
    /// otherwise hold the call for its whole `wait=`).
    pub(super) async fn count_recipient(&self, shared: SharedSlot, to: &str) {
        let SharedSlot {
            limits,
            tier: Some((account, limit)),
            total,
            ..
        } = shared
        else {
            return;
        };
        let recipients = [to.parse().unwrap_or(u64::MAX)];
        let counting = limits.count_recipients(&account, limit, &recipients);
        let counted = match total {
            Some(total) => tokio::time::timeout(total, counting)
                .await
                .unwrap_or_else(|_| {
                    Err(crate::error::Error::Timeout(format!(
                        "the store did not answer within the call's {:.3}s timeout",
                        total.as_secs_f64()
                    )))
                }),
            None => counting.await,
        };
        if let Err(error) = counted {
            let to = crate::masking::mask_phone(to);
            log::warn!(
                target: "bizmsg",
                to = to.as_str(),
                account = account.as_str();
                "a message to {to} was sent but not counted against the messaging tier of account \
                 {account}: {error}",
            );
        }
    }
}
