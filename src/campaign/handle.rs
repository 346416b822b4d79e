//! A campaign as its caller sees it: the options it is started with, the events it reports
//! (input wanted, outcomes, warnings, the end), and the handle that feeds and stops it.
//!
//! The caller (a binding) and the engine (`engine/`) talk through two channels. The engine
//! asks for input (`Event::NeedInput`) when its queue runs low, and the caller feeds it a chunk
//! it pulled from its iterable; the engine hands back outcomes in batches (`Event::Outcomes`).
//! So the caller works once per chunk and once per batch, never per message, and the input is
//! never read further ahead than the queue needs (a generator of a million messages is never
//! materialized).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::journal::JournalTarget;
use super::message::Input;
use super::outcome::Outcome;
use crate::client::{CallOptions, Client};
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Options {
    pub concurrency: usize,
    pub rate_limit: Option<f64>,
    /// Look up every sender (status, quality, throughput, account tier) and pace each one.
    pub pace_auto: bool,
    pub stop_on_error: bool,
    pub dedupe: bool,
    pub journal: Option<JournalTarget>,
    pub campaign_id: Option<String>,
    /// Re-send messages left in doubt by an earlier run (same key) instead of listing them.
    pub resend_unknown: bool,
    /// With `pace="auto"` and limits shared by every process: a message to a new recipient of
    /// an account past its messaging tier fails before sending (the platform would refuse
    /// it). Off: it is sent, and the platform decides.
    pub enforce_tier: bool,
    /// The breaker: after this many messages in a row could not reach the service (connect
    /// refused, DNS, TLS, a timeout before the request left), with no message answered for
    /// `unreachable_for`, the campaign stops as `stop_on_error` stops it. `None`: never.
    pub unreachable_after: Option<u32>,
    /// See `unreachable_after`: a service that answers again within this long (a restart, a
    /// blip the retries ride out) does not trip it.
    pub unreachable_for: Duration,
    /// How long a run's claims stand without a sign of life from it, where the journal
    /// cannot tell from something that dies with its process (a lock, a session) that it is
    /// gone. Longer than any request's deadline.
    pub lease: Duration,
    /// `timeout` and `max_retries` of each message.
    pub call: CallOptions,
}

/// The lease of a run's claims unless told otherwise: far above any request's deadline.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(300);
/// The longest lease: a week. (A lease is recorded for other runs to judge by; one past what a
/// database's timestamps can hold would break every run of the journal.)
pub const MAX_LEASE: Duration = Duration::from_secs(7 * 24 * 60 * 60);
/// The breaker's defaults: a whole concurrency's worth of messages failing is not enough on
/// its own (they fail together), five seconds without any answer is.
pub const DEFAULT_UNREACHABLE_AFTER: u32 = 20;
pub const DEFAULT_UNREACHABLE_FOR: Duration = Duration::from_secs(5);

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: 64,
            rate_limit: None,
            pace_auto: false,
            stop_on_error: false,
            dedupe: true,
            journal: None,
            campaign_id: None,
            resend_unknown: false,
            enforce_tier: true,
            lease: DEFAULT_LEASE,
            unreachable_after: Some(DEFAULT_UNREACHABLE_AFTER),
            unreachable_for: DEFAULT_UNREACHABLE_FOR,
            call: CallOptions::default(),
        }
    }
}

impl Options {
    /// Checks the options against each other and against `client`'s timeouts.
    pub(super) fn check(&self, client: &Client) -> Result<()> {
        if !(1..=10_000).contains(&self.concurrency) {
            return Err(Error::validation(
                "concurrency",
                format!("must be from 1 to 10000, got {}", self.concurrency),
            ));
        }
        if let Some(rate) = self.rate_limit {
            crate::limits::check_rate(rate)?;
        }
        if let Some(id) = &self.campaign_id {
            if id.trim().is_empty() {
                return Err(Error::validation("campaign_id", "must not be empty"));
            }
        }
        if self.journal.as_ref().is_some_and(JournalTarget::is_shared) && self.campaign_id.is_none()
        {
            return Err(Error::validation(
                "campaign_id",
                "a shared journal (postgresql://) holds many campaigns: name this one with \
                 campaign_id=",
            ));
        }
        let deadline = self
            .call
            .timeout
            .and_then(|timeout| timeout.total)
            .or(client.timeout().total);
        if let Some(deadline) = deadline.filter(|deadline| self.lease <= *deadline) {
            return Err(Error::validation(
                "lease",
                format!(
                    "{:.1}s is not longer than a request's deadline ({:.1}s): a live run's \
                     claims would be taken for a dead one's",
                    self.lease.as_secs_f64(),
                    deadline.as_secs_f64()
                ),
            ));
        }
        if self.lease > MAX_LEASE {
            return Err(Error::validation(
                "lease",
                format!(
                    "{:.0}s is too long: at most {} s (a week)",
                    self.lease.as_secs_f64(),
                    MAX_LEASE.as_secs()
                ),
            ));
        }
        if self.unreachable_after == Some(0) {
            return Err(Error::validation(
                "unreachable_after",
                "must be 1 or more (or None: never stop for it)",
            ));
        }
        if self.call.idempotency_key.is_some() {
            return Err(Error::validation(
                "idempotency_key",
                "a campaign gives each message its own key; set idempotency_key on the message",
            ));
        }
        Ok(())
    }
}

/// Something a caller should know about the campaign: logged, and kept on the result.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// `tier`, `tier_near`, `quality`, `unpaced`.
    pub kind: &'static str,
    pub message: String,
    pub account_id: Option<String>,
    pub sender: Option<String>,
}

/// Why a campaign stopped before its input ended.
#[derive(Clone, Debug)]
pub struct Stop {
    /// The message that stopped it (none for Ctrl-C or cancellation).
    pub index: Option<u64>,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub campaign_id: Option<String>,
    pub stopped: Option<Stop>,
    /// A failure of the campaign itself (its journal, the sender lookup): raised by the caller.
    pub error: Option<Error>,
    /// What the messages it did not send were told, once it stopped early: the reason for the
    /// input it never read, too.
    pub not_sent: Option<String>,
}

pub enum Event<P> {
    /// Feed up to this many items (or end the input).
    NeedInput(usize),
    Outcomes(Vec<Outcome<P>>),
    Warning(Warning),
    Done(Summary),
}

pub(super) enum Feed<P> {
    Items(Vec<Input<P>>),
    End,
}

/// What the caller asked: 0 run, 1 stop taking messages (in-flight ones finish), 2 stop now
/// (in-flight ones are abandoned and reported unknown).
pub(super) const RUN: u8 = 0;
pub(super) const STOP: u8 = 1;
pub(super) const ABANDON: u8 = 2;

pub(super) struct Control {
    /// Watched by the engine's loop: a change wakes it.
    pub(super) state: watch::Sender<u8>,
    /// The same state, read without a lock where it is read per message.
    now: AtomicU8,
    /// Outcomes handed to the caller and not taken yet.
    pub(super) undelivered: AtomicUsize,
}

impl Control {
    pub(super) fn new() -> Self {
        Control {
            state: watch::channel(RUN).0,
            now: AtomicU8::new(RUN),
            undelivered: AtomicUsize::new(0),
        }
    }

    pub(super) fn state(&self) -> u8 {
        self.now.load(Ordering::Acquire)
    }

    /// Raises the state to `wanted` (it never goes back) and wakes the engine. The atomic is
    /// set first, so the engine, once woken, reads the new state from it.
    pub(super) fn raise(&self, wanted: u8) {
        self.now.fetch_max(wanted, Ordering::AcqRel);
        self.state.send_if_modified(|state| {
            let raise = *state < wanted;
            if raise {
                *state = wanted;
            }
            raise
        });
    }
}

/// A running campaign, from the caller's side.
pub struct Campaign<P> {
    input: mpsc::UnboundedSender<Feed<P>>,
    events: mpsc::UnboundedReceiver<Event<P>>,
    control: Arc<Control>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl<P: Send + 'static> Campaign<P> {
    /// The caller's side of an engine just spawned (`Campaign::start`, in `engine/`: the
    /// engine is what starts, and this file, which the engine's parts import for `Control` and
    /// `Warning`, must not import the engine).
    pub(super) fn new(
        input: mpsc::UnboundedSender<Feed<P>>,
        events: mpsc::UnboundedReceiver<Event<P>>,
        control: Arc<Control>,
        task: tokio::task::JoinHandle<()>,
    ) -> Self {
        Campaign {
            input,
            events,
            control,
            task: Some(task),
        }
    }

    /// Hands the engine items it asked for.
    pub fn feed(&self, items: Vec<Input<P>>) {
        let _ = self.input.send(Feed::Items(items));
    }

    /// Tells the engine the input has ended.
    pub fn end_input(&self) {
        let _ = self.input.send(Feed::End);
    }

    /// The next event; `None` after `Done`.
    pub async fn next_event(&mut self) -> Option<Event<P>> {
        let event = self.events.recv().await;
        if let Some(Event::Outcomes(outcomes)) = &event {
            self.control
                .undelivered
                .fetch_sub(outcomes.len(), Ordering::AcqRel);
        }
        event
    }

    /// Stops taking new messages; with `abandon`, also stops waiting for those in flight.
    pub fn stop(&self, abandon: bool) {
        self.stopper().stop(abandon);
    }

    /// A handle that stops the campaign from anywhere (a signal handler), without the
    /// campaign itself.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.control))
    }
}

/// Stops a campaign: see [`Campaign::stopper`].
#[derive(Clone)]
pub struct Stopper(Arc<Control>);

impl Stopper {
    pub fn stop(&self, abandon: bool) {
        self.0.raise(if abandon { ABANDON } else { STOP });
    }
}

impl<P> Drop for Campaign<P> {
    fn drop(&mut self) {
        // Nobody will read its outcomes: the engine stops at once (in-flight sends are
        // abandoned, the journal keeps them as in doubt).
        self.control.raise(ABANDON);
        if let Some(task) = self.task.take() {
            drop(task);
        }
    }
}
