//! Sending one message of a campaign: its sender's pace, then the campaign's, then the client's
//! attempt loop (`client/execute.rs`), so the duplicate-send rules of a single send hold for
//! each message: one idempotency key reused by its own retries, retries only when provably
//! unsent, `unknown` for ambiguous failures. What a campaign adds here is what the platform's
//! codes ask of a bulk sender (pause everyone, space one recipient, stop), each retry after a
//! temporary code going out with a new key recorded in the journal first, and abandonment.

use std::borrow::Cow;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, SystemTime};

mod attempted;
mod dispatch;
mod last_step;
mod retry_slot;

use self::attempted::Attempted;
use self::dispatch::{Dispatch, Settled};
use self::last_step::last_step;
use self::retry_slot::{CampaignRetrySlot, STOPPED_BEFORE_RETRY};
use super::handle::{Control, ABANDON, RUN};
use super::journal::{Identity, JournalStore, Row, State, Unfenced, STALE};
use super::keys::retry_key;
use super::message::Prepared;
use super::outcome::{MessageTrace, Outcome, Status};
use crate::client::{AttemptLog, CallOptions, Client, PauseRecord, SendFence, SendProgress};
use crate::error::{Error, Result, UnknownOutcome};
use crate::limits::{LimitsStore, Scope, Slot};
use crate::platform::{advice, Advice};
use crate::wire::SendResult;

/// A message ready to go: checked, keyed, marked in the journal if there is one.
pub(super) struct Ready<P> {
    pub(super) index: u64,
    pub(super) payload: P,
    pub(super) prepared: Prepared,
    /// What the journal knows it by.
    pub(super) identity: Identity,
    pub(super) key: String,
    /// Its sender's pace in messages per second (`pace="auto"`).
    pub(super) pace: Option<f64>,
    /// Its journal row is `claimed` by this run: it is recorded `dispatched`
    /// (`JournalStore::dispatch`) after its pacing wait, before its first request is written.
    /// False without a journal, and for a message taken over in doubt (already `dispatched`).
    pub(super) dispatch: bool,
}

/// Why a message abandoned before its request began to leave was not sent.
const ABANDONED_BEFORE_LEAVING: &str =
    "not sent: the campaign was abandoned before the request left";

/// The longest wait before sending again to a recipient whose pair rate was hit (131056).
const PAIR_RATE_WAIT_CAP: Duration = Duration::from_secs(15 * 60);

/// A finished send and, when the platform asked for it, why the campaign must stop.
pub(super) struct Finished<P> {
    pub(super) outcome: Outcome<P>,
    pub(super) identity: Identity,
    pub(super) stop: Option<String>,
    /// A failure of the campaign itself (its shared store), reported at its end.
    pub(super) failure: Option<Error>,
    /// This run no longer holds its claims (taken over, its journal session ended): it sends
    /// nothing more, and its journal writes only the results of what it still holds.
    pub(super) claims_lost: Option<Error>,
}

/// What the sends of a campaign share, behind one reference count per message.
pub(super) struct Context {
    pub(super) client: Client,
    /// The options of each message's call, with the campaign's gate.
    pub(super) call: CallOptions,
    pub(super) control: Arc<Control>,
    /// Where paces and pauses are kept: this campaign's own, or the store every process
    /// shares (`shared_limits=`).
    pub(super) limits: Arc<dyn LimitsStore>,
    /// The campaign's own rate (`rate_limit`) and the key it is kept under.
    pub(super) rate: Option<(String, f64)>,
    pub(super) journal: Option<Arc<dyn JournalStore>>,
}

/// Sends one message: its sender's pace, then the batch's, then the attempt loop; a failed
/// commit the platform calls temporary is sent again (with a new key, see `retry_key`).
pub(super) async fn send_one<P>(context: Arc<Context>, ready: Ready<P>) -> Finished<P> {
    let _sending = super::in_flight::Sending::start();
    let Ready {
        index,
        payload,
        prepared,
        identity,
        key,
        pace,
        dispatch,
    } = ready;
    // A retry's own key, once there is one (most messages never need one: no allocation).
    let current = Mutex::new(None);
    let keys = KeyInUse {
        identity,
        base: &key,
        journal: context.journal.as_deref(),
        current: &current,
        control: &context.control,
    };
    // Whether the request began to leave: a message abandoned before is known never sent.
    // Each attempt is written only while this run still holds its claim on the message.
    let fence = context
        .journal
        .as_ref()
        .map(|journal| Arc::clone(journal.fence()) as Arc<dyn SendFence>);
    // Its retries within the attempt loop are paced as its first attempt is.
    let retry_slot = CampaignRetrySlot {
        context: Arc::clone(&context),
        request: Arc::clone(&prepared.request),
        pace,
    };
    let progress = Arc::new(SendProgress::fenced(fence).with_retry_slot(Arc::new(retry_slot)));
    // Traced on its own (the instrumentation asked for message spans): its attempts go to a
    // log of its own, handed back with its outcome. Every other message: one `None` check.
    let traced = context
        .client
        .attempt_log()
        .filter(|log| log.samples(index))
        .map(|_| (SystemTime::now(), Arc::new(AttemptLog::new(true, 0.0))));
    let call = match &traced {
        Some((_, log)) => Cow::Owned(CallOptions {
            attempt_log: Some(Arc::clone(log)),
            ..context.call.clone()
        }),
        None => Cow::Borrowed(&context.call),
    };
    let attempt = attempt(&context, &call, &prepared, keys, pace, dispatch, &progress);
    let mut finished = tokio::select! {
        biased;
        done = attempt => {
            let Attempted {
                result,
                key,
                stop,
                failure,
                stopped_before_sending,
                claims_lost,
            } = done;
            let outcome = if let Some(lost) = &claims_lost {
                let mut outcome = Outcome::skipped(
                    index,
                    payload,
                    format!("not sent: {lost}; its record is left to the run that takes it over"),
                );
                outcome.idempotency_key = Some(key);
                outcome
            } else if stopped_before_sending && progress.was_in_doubt() {
                // Stopped before sending it again, after an attempt that may have been
                // processed (none of the paths back to a slot follows one today): in doubt.
                let mut outcome = Outcome::new(index, payload, Status::Unknown);
                outcome.error = Some(in_doubt(&prepared, &key));
                outcome.reason = Some("stopped before it was sent again: it may have been sent".to_owned());
                outcome.idempotency_key = Some(key);
                outcome
            } else if stopped_before_sending {
                // Abandoned (a second Ctrl-C) while it waited for its slot: said as for the
                // sends the abandonment itself ends.
                let reason = if context.control.state() == ABANDON {
                    ABANDONED_BEFORE_LEAVING
                } else {
                    "not sent: the campaign was interrupted"
                };
                let mut outcome = Outcome::skipped(index, payload, reason);
                outcome.idempotency_key = Some(key);
                outcome
            } else {
                outcome_of(index, payload, result, key)
            };
            Finished {
                outcome,
                identity,
                stop,
                failure,
                claims_lost: claims_lost.map(|lost| Error::SharedState(lost.to_string())),
            }
        }
        () = abandoned(&context.control) => {
            // The key of the attempt in flight (a retry after a temporary code has its own).
            let retry_key = current
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = retry_key.unwrap_or(key);
            // The attempt is dropped by now: a body it never took can never be taken.
            let mut outcome = if progress.claim_never_left() {
                Outcome::skipped(index, payload, ABANDONED_BEFORE_LEAVING)
            } else {
                let mut outcome = Outcome::new(index, payload, Status::Unknown);
                outcome.error = Some(in_doubt(&prepared, &key));
                outcome.reason =
                    Some("abandoned while in flight: it may have been sent".to_owned());
                outcome
            };
            outcome.idempotency_key = Some(key);
            Finished {
                outcome,
                identity,
                stop: None,
                failure: None,
                claims_lost: None,
            }
        }
    };
    if let Some((dispatched, log)) = traced {
        let attempts = log.take();
        finished.outcome.trace = Some(Box::new(MessageTrace {
            started: attempts.first().map_or(dispatched, |first| first.started),
            ended: SystemTime::now(),
            recipient: crate::masking::mask_phone(&prepared.request.to),
            sender: crate::masking::mask_phone(&prepared.request.from),
            attempts,
        }));
    }
    finished
}

/// Whether a message waited for its pair's spacing (shared limits).
enum PairWait {
    Clear,
    Waited,
    /// The campaign stopped while it waited.
    Stopped,
}

/// The platform's throughput code: the sender sends too fast.
const SENDER_THROUGHPUT: &str = "130429";

/// The idempotency key a message is being sent with, and where a new one is recorded before a
/// retry uses it.
struct KeyInUse<'a> {
    identity: Identity,
    base: &'a str,
    journal: Option<&'a dyn JournalStore>,
    current: &'a Mutex<Option<String>>,
    /// The campaign's state: a stop cuts a wait before a retry short.
    control: &'a Control,
}

impl KeyInUse<'_> {
    /// Records `next` as the message's key (in the journal, durably, before it is used: a
    /// crash during the retry must leave the key it was sent with) and makes it current.
    async fn switch_to(&self, next: &str) -> Result<()> {
        if let Some(journal) = self.journal {
            journal
                .write_durably(vec![Row {
                    held: true,
                    ..Row::new(self.identity, State::Dispatched, Some(next.to_owned()))
                }])
                .await?;
        }
        let mut current = crate::sync::lock(self.current);
        *current = Some(next.to_owned());
        Ok(())
    }
}

/// Ready once the campaign is abandoned. It registers no waker, so that a message costs no
/// registration with the stop signal: on `ABANDON` the engine polls every send in flight once
/// (`Engine::abandon_in_flight`), and that poll is what ends it.
fn abandoned(control: &Control) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |_| {
        if control.state() == ABANDON {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
}

async fn attempt(
    context: &Context,
    call: &CallOptions,
    prepared: &Prepared,
    keys: KeyInUse<'_>,
    pace: Option<f64>,
    dispatch: bool,
    progress: &Arc<SendProgress>,
) -> Attempted {
    let Context {
        client,
        limits,
        rate,
        ..
    } = context;
    let fence = context.journal.as_ref().map(|journal| journal.fence());
    let max_retries = call.max_retries.unwrap_or_else(|| client.max_retries());
    let base = keys.base;
    let mut key = base.to_owned();
    let mut retries = 0;
    // Whether its row must still be recorded `dispatched` before a request is written: once,
    // before the first (its retries go out from a `dispatched` row).
    let mut to_dispatch = dispatch;
    let from = prepared.request.from.as_str();
    let slot = Slot {
        sender: pace.map(|pace| (from, pace)),
        campaign: rate.as_ref().map(|(name, rate)| (name.as_str(), *rate)),
    };
    // Whether the message waits for a slot: an unpaced one has no wait to open a connection
    // ahead of.
    let paced = slot.sender.is_some() || slot.campaign.is_some();
    let stopped = || async {
        let _ = keys
            .control
            .state
            .subscribe()
            .wait_for(|state| *state != RUN)
            .await;
    };
    // Shared limits: a pair spaced by another process (its pair-rate code) waits here too.
    let pair_spaced = || async {
        if !limits.is_shared() {
            return Ok(PairWait::Clear);
        }
        match limits.pair_wait(from, &prepared.request.to).await? {
            wait if wait.is_zero() => Ok(PairWait::Clear),
            wait => Ok(tokio::select! {
                () = tokio::time::sleep(wait) => PairWait::Waited,
                () = stopped() => PairWait::Stopped,
            }),
        }
    };
    loop {
        match pair_spaced().await {
            Ok(PairWait::Clear | PairWait::Waited) => {}
            Ok(PairWait::Stopped) => return Attempted::stopped_before_sending(key),
            Err(error) => return Attempted::not_sent(error, key),
        }
        // Before the slot, so that nothing after it waits: a connection when none is idle
        // (opened after the slot, it wrote the request a handshake late), and this run's claim
        // (a slow journal round trip is waited for here; after the slot it is only checked).
        // The token is asked as the slot's last step (below).
        if paced {
            tokio::select! {
                () = client.warm_connection(call) => {}
                () = stopped() => return Attempted::stopped_before_sending(key),
            }
        }
        if let Some(fence) = fence {
            tokio::select! {
                valid = fence.valid() => if let Err(lost) = valid {
                    return Attempted::lost(lost, key);
                },
                () = stopped() => return Attempted::stopped_before_sending(key),
            }
        }
        // Its row goes from `claimed` to `dispatched` as the slot's last step (`dispatch.rs`).
        let dispatch = Dispatch::new(keys.journal, keys.identity, to_dispatch);
        // The slot's last step: a token provider asked (at the slot's time, so that the token
        // is fresh and the request not late for it), then the dispatch write. A provider that
        // fails ends the step: no dispatch write, and its failure is the first attempt's
        // (`execute.rs`), as when the attempt asked.
        let last_step = last_step(
            client.asks_for_token().then_some(async {
                let asked = client.authorization_ahead(call).await;
                let go = asked.is_ok();
                progress.authorize_ahead(asked);
                go
            }),
            dispatch.before_release(),
        );
        // A stop while it waits for its slot: not sent (a journal's dispatch write, if it was
        // under way, is followed by the outcome's, which says so).
        let admission = crate::limits::waited(from, async {
            tokio::select! {
                biased;
                admitted = limits.admit_then(slot, None, last_step) => Some(admitted),
                () = stopped() => None,
            }
        });
        let Some(admitted) = admission.await else {
            return Attempted::stopped_before_sending(key);
        };
        let departure = match admitted {
            Ok(departure) => departure,
            // The store could not say when this message may go: it does not go.
            Err(error) => return Attempted::not_sent(error, key),
        };
        // Its pace counts it from when its request is written (`limits/departure.rs`).
        progress.departs(departure);
        // Its token provider failed in the slot's last step: the attempt returns that failure
        // (nothing is written, and no dispatch was recorded).
        let token_failed = progress.authorization_failed();
        if to_dispatch && !token_failed {
            match dispatch.settled() {
                Settled::Go => to_dispatch = false,
                Settled::Lost(lost) => return Attempted::lost(lost, key),
            }
            // A stop that came during the dispatch: not sent (its record says so, written
            // over the `dispatched` one by the run that knows it never left).
            if keys.control.state() != RUN {
                return Attempted::stopped_before_sending(key);
            }
        }
        // The pacing wait may have been long: a pair spaced meanwhile (by another process)
        // waits now, and takes a new slot after. Asked of what this process knows, never of
        // the store: a slot is used within a few milliseconds of its time, and a read that met
        // a stalled store sent the request late, next to the following slots (a second over
        // the pace). The read before the next slot brings the copy up to date.
        let spaced = if limits.is_shared() && !token_failed {
            limits.pair_wait_known(from, &prepared.request.to)
        } else {
            Duration::ZERO
        };
        if !spaced.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(spaced) => continue,
                () = stopped() => return Attempted::stopped_before_sending(key),
            }
        }
        // After the pacing wait, which may be long: this run must still hold its claim. A claim
        // lost is lost for good. One only stale (a journal round trip is slow) is not waited
        // for here, where the request would then leave late for its slot: the message takes a
        // new slot, after the wait above. (The body is checked once more as it is written.)
        // A message whose token provider failed writes nothing: its failure is returned now.
        if let Some(fence) = fence.filter(|_| !token_failed) {
            match fence.check() {
                Ok(()) => {}
                Err(lost @ Unfenced::Lost(_)) => return Attempted::lost(lost, key),
                Err(Unfenced::Stale(_)) => continue,
            }
        }
        let result = client
            .send_encoded(
                &prepared.request,
                prepared.body.clone(),
                key.clone(),
                call,
                Some(progress),
            )
            .await;
        // Answered: until the next attempt begins, nothing is on its way.
        progress.between_attempts();
        // A retry's slot could not be taken: the store failed, and the campaign stops as it
        // does when the first slot cannot be (the result says whether an attempt went).
        if let Some(failure) = progress.slot_failure() {
            return Attempted::failed(result, key, failure);
        }
        // Stopped while its retry waited for a slot: not sent (in doubt, were it perhaps).
        if matches!(&result, Err(Error::Campaign(why)) if why == STOPPED_BEFORE_RETRY) {
            return Attempted::stopped_before_sending(key);
        }
        if let (Err(Error::SharedState(refusal)), Some(fence)) = (&result, fence) {
            match fence.check() {
                // Refused as it was about to be written: never sent, and not to be.
                Err(lost @ Unfenced::Lost(_)) => return Attempted::lost(lost, key),
                // Refused while a journal round trip was slow: sent once it answers.
                Err(Unfenced::Stale(_)) => continue,
                // Refused as stale, and confirmed since (a heartbeat in between): sent now.
                Ok(()) if refusal.starts_with(STALE) => continue,
                Ok(()) => {}
            }
        }
        let code = match &result {
            Err(Error::SendRejected(rejected)) => rejected.result.code_string(),
            _ => None,
        };
        let advised = code.as_deref().map(advice);
        match advised {
            Some(Advice::StopCampaign) => {
                let reason = format!(
                    "the platform answered code {} ({}); it asks to stop sending and alert a person",
                    code.unwrap_or_default(),
                    rejected_msg(&result)
                );
                return Attempted::done(result, key, Some(reason));
            }
            Some(Advice::PauseBatch) if retries < max_retries => {
                retries += 1;
                if let Some(wait) = client.backoff().delay(retries, None) {
                    // The throughput code is the sender's; the others (maintenance, the
                    // account's rate) hold every send.
                    let scope = if code.as_deref().map(str::trim) == Some(SENDER_THROUGHPUT) {
                        Scope::Sender(from)
                    } else {
                        Scope::Service
                    };
                    // For the campaign's span (a traced handle's only).
                    if let Some(log) = client.attempt_log() {
                        log.pause(PauseRecord {
                            at: SystemTime::now(),
                            seconds: Some(wait.as_secs_f64()),
                            reason: "throttled",
                            status: None,
                            code: code.as_deref().map(|code| code.trim().to_owned()),
                            sender: match scope {
                                Scope::Sender(sender) => Some(crate::masking::mask_phone(sender)),
                                Scope::Service => None,
                            },
                        });
                    }
                    if let Err(error) = limits.pause(scope, wait).await {
                        return Attempted::failed(result, key, error);
                    }
                }
            }
            Some(Advice::RetryRecipientLater) if retries < max_retries => {
                retries += 1;
                // The platform suggests 4^n seconds for the pair rate of one recipient; capped,
                // so that a generous max_retries cannot hold a slot for days.
                let wait = match limits
                    .space_pair(from, &prepared.request.to, PAIR_RATE_WAIT_CAP)
                    .await
                {
                    Ok(wait) => wait,
                    Err(error) => return Attempted::failed(result, key, error),
                };
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    // Stopping: the temporary rejection is this message's outcome (not sent).
                    () = stopped() => return Attempted::done(result, key, None),
                }
            }
            _ => return Attempted::done(result, key, None),
        }
        let to = crate::masking::mask_phone(&prepared.request.to);
        let code = code.unwrap_or_default();
        log::warn!(
            target: "bizmsg",
            to = to.as_str(),
            code = code.as_str(),
            idempotency_key = key.as_str(),
            retry = retries,
            max_retries = max_retries;
            "campaign: message to {to} rejected with code {code} (temporary); sending it again, \
             retry {retries} of {max_retries}",
        );
        let next = retry_key(base, retries);
        if keys.switch_to(&next).await.is_err() {
            // The new key could not be recorded, so it is not used: the temporary failure
            // stands as this message's outcome (the journal's failure surfaces at its next
            // durable write, which stops the campaign).
            return Attempted::done(result, key, None);
        }
        key = next;
    }
}

fn rejected_msg(result: &Result<crate::client::Response<SendResult>>) -> String {
    match result {
        Err(Error::SendRejected(rejected)) => rejected.result.msg.clone().unwrap_or_default(),
        _ => String::new(),
    }
}

fn outcome_of<P>(
    index: u64,
    payload: P,
    result: Result<crate::client::Response<SendResult>>,
    key: String,
) -> Outcome<P> {
    let mut outcome = match result {
        Ok(response) => Outcome {
            result: Some(response.value),
            meta: Some(response.meta),
            ..Outcome::new(index, payload, Status::Sent)
        },
        Err(Error::SendRejected(rejected)) => Outcome {
            result: Some(rejected.result.clone()),
            meta: Some(rejected.meta.clone()),
            error: Some(Error::SendRejected(rejected)),
            ..Outcome::new(index, payload, Status::Rejected)
        },
        Err(error @ Error::SendOutcomeUnknown(_)) => Outcome {
            error: Some(error),
            ..Outcome::new(index, payload, Status::Unknown)
        },
        Err(error) => Outcome::failed(index, payload, error),
    };
    outcome.idempotency_key = Some(key);
    outcome
}

/// Errors after which no other message of the campaign can succeed either: the credentials or
/// the endpoint are wrong, or the client is gone. Stopping beats failing a million messages.
pub(super) fn stops_the_campaign(error: &Error) -> Option<String> {
    let fatal = match error {
        Error::Api(api) => matches!(api.status_code, 401 | 403 | 404),
        Error::Closed | Error::Configuration(_) | Error::TokenProvider { .. } => true,
        _ => false,
    };
    fatal.then(|| format!("{error}; no other message could be sent"))
}

/// The error of a message left in doubt: it may have been sent with `key`.
pub(super) fn in_doubt(prepared: &Prepared, key: &str) -> Error {
    Error::SendOutcomeUnknown(Box::new(UnknownOutcome {
        idempotency_key: key.to_owned(),
        to: prepared.request.to.clone(),
        template_name: prepared.request.template.name.clone(),
        request_id: None,
        cause: Box::new(Error::Campaign(
            "the campaign stopped while the message was in flight".to_owned(),
        )),
    }))
}
