//! The campaign's loop: one task that keeps up to `concurrency` sends in flight, asks its
//! caller for input when its queue runs low, admits each message (`admit.rs`), marks the next
//! ones in the journal before they may leave, dispatches them (`send.rs`), records each outcome
//! (journal, stop rules) and hands outcomes back in batches (`handle.rs` has the protocol).
//!
//! Stopping: an error with `stop_on_error`, a code the platform calls fatal, a journal failure,
//! Ctrl-C or a cancelled task stop taking messages; what was queued is reported skipped, and
//! the sends in flight finish (or, when the caller abandons the campaign, end as unknown).

mod intake;
mod records;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::admit::{held_elsewhere, still_in_doubt, Admission};
use super::breaker::Breaker;
use super::claims::Claims;
use super::handle::{
    Campaign, Control, Event, Feed, Options, Stop, Summary, Warning, ABANDON, RUN, STOP,
};
use super::journal::{Claimed, JournalStore, Journaling};
use super::keys::KeySource;
use super::message::FingerprintKind;
use super::open_journal::open_journal;
use super::outcome::Outcome;
use super::report::{Run, Tally};
use super::send::{send_one, Context, Finished, Ready};
use super::senders::SenderPolicy;
use super::waiting::{self, Due, Waiting};
use crate::api::Directory;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::limits::{Gate, LimitsStore, LocalLimits};

/// Items asked for at a time.
const CHUNK: usize = 512;
/// Outcomes handed back at a time, at most; a partial batch goes after `FLUSH_EVERY`.
const BATCH: usize = 256;
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Outcomes the caller has not taken yet, past which no new message is dispatched (messages in
/// flight still finish): a slow `on_result` slows the campaign instead of filling memory.
const MAX_UNDELIVERED: usize = 65_536;

struct Engine<P> {
    concurrency: usize,
    stop_on_error: bool,
    enforce_tier: bool,
    breaker: Breaker,
    /// What the messages left waiting are told when the campaign stopped for a reason of its
    /// own (the breaker); else the usual note.
    stop_note: Option<String>,
    events: mpsc::UnboundedSender<Event<P>>,
    control: Arc<Control>,
    /// Only to be woken when the state changes; the state itself is read from `control`.
    stop_signal: watch::Receiver<u8>,
    /// What every send of the campaign shares.
    context: Arc<Context>,
    admission: Admission,
    journal: Option<Arc<dyn JournalStore>>,
    campaign_id: Option<String>,
    /// The messages ready to send, and their claims in the journal.
    claims: Claims<P>,
    inflight: FuturesUnordered<BoxFuture<'static, Finished<P>>>,
    buffer: Vec<Outcome<P>>,
    stopped: Option<Stop>,
    /// The first journal failure: the campaign stops gracefully and reports it at the end.
    failure: Option<Error>,
    /// Messages another run holds, waited for.
    waiting: Waiting<P>,
    /// The outcomes handed back so far, by status, for the end's log line.
    tally: Tally,
}

/// Sleeps until `when` (forever when there is none).
async fn sleep_until_some(when: Option<std::time::Instant>) {
    match when {
        Some(when) => tokio::time::sleep_until(when.into()).await,
        None => std::future::pending().await,
    }
}

/// A shared store that may evict keys (`policy`): refused where the tier is enforced (an
/// evicted tier count lets an account pass its tier unseen), a warning otherwise (an evicted
/// pace or pause lets a moment's sends through unpaced).
fn evicting_store(policy: &str, enforcing_tier: bool) -> Result<()> {
    let why = format!(
        "the shared limits' Redis may evict keys (maxmemory-policy {policy} with maxmemory set): \
         paces, pauses and tier counts can vanish under memory pressure. Use maxmemory-policy \
         noeviction, or a Redis (or database) of bizmsg's own"
    );
    if enforcing_tier {
        return Err(Error::SharedState(format!(
            "{why}; the tier is not enforced on such a store (enforce_tier=False sends anyway)"
        )));
    }
    log::warn!(target: "bizmsg", "campaign: {why}");
    Ok(())
}

/// What a campaign's task runs within (the caller's context, for what the sends call back into:
/// an async token callable needs its caller's event loop). The sends run inside that one task.
pub type CampaignScope = Box<dyn FnOnce(BoxFuture<'static, ()>) -> BoxFuture<'static, ()> + Send>;

impl<P: Send + 'static> Campaign<P> {
    /// Starts the campaign on `runtime`. The first event asks for input.
    pub fn start(
        client: Client,
        options: Options,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Self> {
        Self::start_within(client, options, runtime, None)
    }

    /// `start`, its task run within `scope` when there is one.
    pub fn start_within(
        client: Client,
        options: Options,
        runtime: &tokio::runtime::Handle,
        scope: Option<CampaignScope>,
    ) -> Result<Self> {
        options.check(&client)?;
        let (input, input_rx) = mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::unbounded_channel();
        let control = Arc::new(Control::new());
        // A traced campaign's records (its start and end, its warnings) name its span.
        let ids = client.log_ids().cloned();
        let campaign: BoxFuture<'static, ()> = Box::pin(crate::client::log_ids::within(
            ids,
            run(client, options, input_rx, events_tx, Arc::clone(&control)),
        ));
        let task = runtime.spawn(match scope {
            Some(scope) => scope(campaign),
            None => campaign,
        });
        Ok(Campaign::new(input, events, control, task))
    }
}

/// Claims being made, and the queue they were made for.
type Marking = BoxFuture<'static, Result<(u64, Vec<Claimed>)>>;

async fn run<P: Send + 'static>(
    client: Client,
    options: Options,
    mut input: mpsc::UnboundedReceiver<Feed<P>>,
    events: mpsc::UnboundedSender<Event<P>>,
    control: Arc<Control>,
) {
    let mut report = Run::new(&options);
    let mut engine = match Engine::new(client, options, events.clone(), Arc::clone(&control)).await
    {
        Ok(engine) => engine,
        Err(error) => {
            let _ = events.send(Event::Done(Summary {
                error: Some(error),
                ..Summary::default()
            }));
            return;
        }
    };
    report.campaign_id.clone_from(&engine.campaign_id);
    report.log_start();
    let error = engine.drive(&mut input).await.err();
    let not_sent = engine.stopped.is_some().then(|| engine.not_sent_note());
    let mut summary = Summary {
        campaign_id: engine.campaign_id.clone(),
        stopped: engine.stopped.take(),
        error,
        not_sent,
    };
    if let Some(journal) = engine.journal.take() {
        // The last outcomes are committed, and the run ended, before the caller hears the
        // campaign is done.
        if let Err(failure) = journal.flush().await {
            summary.error = Some(failure);
        }
        journal.end().await;
    } else if let Some(journal) = &engine.context.journal {
        // A journal that failed is written to no more, but its run is ended (its connection
        // closed) before the caller hears of it all the same.
        journal.end().await;
    }
    report.log_end(
        &engine.tally,
        summary.stopped.as_ref().map(|stop| stop.reason.as_str()),
        summary.error.as_ref().map(ToString::to_string).as_deref(),
    );
    let _ = engine.events.send(Event::Done(summary));
}

impl<P: Send + 'static> Engine<P> {
    async fn new(
        client: Client,
        mut options: Options,
        events: mpsc::UnboundedSender<Event<P>>,
        control: Arc<Control>,
    ) -> Result<Self> {
        let journal = open_journal(
            options.journal.as_ref(),
            options.campaign_id.as_deref(),
            options.lease,
        )
        .await?;
        let campaign_id = journal
            .as_ref()
            .map(|journal| journal.campaign_id().to_owned())
            .or_else(|| options.campaign_id.clone());
        let keys = campaign_id
            .as_deref()
            .map_or(KeySource::Random, KeySource::for_campaign);
        let senders = if options.pace_auto {
            Some(SenderPolicy::new(
                Directory::fetch(&client, &options.call).await?,
            ))
        } else {
            None
        };
        let gate = Arc::new(Gate::new());
        options.call.gate = Some(Arc::clone(&gate));
        let stop_signal = control.state.subscribe();
        let limits: Arc<dyn LimitsStore> = match client.shared_limits() {
            Some(shared) => {
                // Reachable before anything is sent, or the campaign does not start.
                let health = shared.check().await?;
                if let Some(policy) = health.evicts {
                    evicting_store(&policy, options.pace_auto && options.enforce_tier)?;
                }
                shared
            }
            None => Arc::new(LocalLimits::new(gate)),
        };
        // Shared by every process of the campaign when it has an id; else this run's own.
        let rate = options.rate_limit.map(|rate| {
            let name = campaign_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            (name, rate)
        });
        let context = Arc::new(Context {
            client,
            call: options.call.clone(),
            control: Arc::clone(&control),
            limits,
            rate,
            journal: journal.clone(),
        });
        Ok(Engine {
            concurrency: options.concurrency,
            stop_on_error: options.stop_on_error,
            enforce_tier: options.enforce_tier,
            breaker: Breaker::new(options.unreachable_after, options.unreachable_for),
            stop_note: None,
            admission: Admission::new(
                keys,
                options.dedupe,
                options.resend_unknown,
                senders,
                journal
                    .as_ref()
                    .map_or(FingerprintKind::Sha256, |journal| journal.fingerprints()),
            ),
            events,
            control,
            stop_signal,
            context,
            journal,
            campaign_id,
            claims: Claims::new(),
            inflight: FuturesUnordered::new(),
            buffer: Vec::with_capacity(BATCH),
            stopped: None,
            failure: None,
            waiting: Waiting::new(waiting::patience(options.lease)),
            tally: Tally::default(),
        })
    }

    async fn drive(&mut self, input: &mut mpsc::UnboundedReceiver<Feed<P>>) -> Result<()> {
        let mut input_done = false;
        let mut waiting_for_input = false;
        let mut marking: Option<Marking> = None;
        let mut flush = tokio::time::interval(FLUSH_EVERY);
        flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let state = self.control.state();
            let stopping = self.stopped.is_some() || state != RUN;
            if stopping && self.stopped.is_none() {
                self.stop(None, "interrupted");
            }
            // After the stop is recorded as an interruption: with `stop_on_error`, the first
            // abandoned message (unknown) must not be taken for the reason of the stop.
            if state == ABANDON && !self.inflight.is_empty() {
                self.abandon_in_flight().await;
            }
            if stopping && !self.claims.is_empty() {
                // Whatever was queued after the stop is reported, never left waiting.
                self.skip_waiting();
            }
            let backlog = self.control.undelivered.load(Ordering::Acquire) >= MAX_UNDELIVERED;
            if !input_done
                && !waiting_for_input
                && !stopping
                && !backlog
                && self.claims.len() < CHUNK.max(2 * self.concurrency).max(self.claims.size())
            {
                waiting_for_input = true;
                self.emit(Event::NeedInput(CHUNK));
            }
            if !stopping && !backlog {
                self.dispatch();
            }
            if marking.is_none() && !stopping {
                marking = self.mark_ahead();
            }
            if self.buffer.len() >= BATCH {
                self.flush_outcomes();
            }
            // An input request still open is answered (the driver may be feeding it right
            // now): every item the driver pulled gets an outcome, even after a stop.
            let finished_input = (input_done || stopping) && !waiting_for_input;
            if finished_input
                && self.claims.is_empty()
                && self.inflight.is_empty()
                && self.waiting.is_empty()
            {
                self.flush_outcomes();
                return self.failure.take().map_or(Ok(()), Err);
            }
            tokio::select! {
                Some(finished) = self.inflight.next(), if !self.inflight.is_empty() => {
                    self.finished(finished);
                    // The others that are done by now, in the same turn: the loop's checks
                    // and this select's set-up then run once per wake-up, not per message.
                    while self.buffer.len() < BATCH {
                        let Some(finished) = self.finished_now().await else {
                            break;
                        };
                        self.finished(finished);
                    }
                }
                feed = input.recv(), if waiting_for_input => {
                    waiting_for_input = false;
                    match feed {
                        Some(Feed::Items(items)) if stopping => self.not_taken(items),
                        Some(Feed::Items(items)) => self.accept(items).await,
                        Some(Feed::End) | None => input_done = true,
                    }
                }
                marked = async { match marking.as_mut() { Some(m) => m.await, None => std::future::pending().await } }, if marking.is_some() => {
                    marking = None;
                    self.claims.answered();
                    match marked {
                        Ok((drained, claimed)) => self.claimed(drained, claimed),
                        Err(error) => self.fail(error),
                    }
                }
                changed = self.stop_signal.changed() => {
                    if changed.is_err() {
                        // The caller is gone: nothing it could still want.
                        self.control.raise(ABANDON);
                    }
                }
                _ = flush.tick(), if !self.buffer.is_empty() => self.flush_outcomes(),
                () = sleep_until_some(self.breaker.wakes_at()), if self.breaker.is_open() && !stopping => {
                    // Trips, or lets the next probe go (the loop dispatches it).
                    self.trip_breaker();
                }
                () = sleep_until_some(self.waiting.next_due()), if !self.waiting.is_empty() && !stopping => {
                    self.claim_waiting();
                }
            }
        }
    }

    /// A send that is done, without waiting for one.
    async fn finished_now(&mut self) -> Option<Finished<P>> {
        std::future::poll_fn(|cx| match self.inflight.poll_next_unpin(cx) {
            Poll::Ready(finished) => Poll::Ready(finished),
            Poll::Pending => Poll::Ready(None),
        })
        .await
    }

    fn finished(&mut self, finished: Finished<P>) {
        if let Err(error) = self.finish(finished) {
            self.fail(error);
        }
    }

    /// After `ABANDON`: polls every send in flight once, which ends it (see `abandoned`: a
    /// send is not woken by the stop itself, this poll is what ends it), and records the
    /// outcomes.
    async fn abandon_in_flight(&mut self) {
        let mut sends = Some(std::mem::take(&mut self.inflight));
        let (done, left) = std::future::poll_fn(|cx| {
            let mut done = Vec::new();
            let left = FuturesUnordered::new();
            for mut send in sends.take().unwrap_or_default() {
                match send.as_mut().poll(cx) {
                    Poll::Ready(finished) => done.push(finished),
                    Poll::Pending => left.push(send),
                }
            }
            Poll::Ready((done, left))
        })
        .await;
        self.inflight = left;
        for finished in done {
            self.finished(finished);
        }
    }

    fn emit(&self, event: Event<P>) {
        let _ = self.events.send(event);
    }

    fn warn(&self, warning: Warning) {
        log::warn!(
            target: "bizmsg",
            campaign_id = self.campaign_id.as_deref();
            "campaign: {}",
            warning.message
        );
        self.emit(Event::Warning(warning));
    }

    fn flush_outcomes(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.buffer, Vec::with_capacity(BATCH));
        self.tally.count(&batch);
        self.control
            .undelivered
            .fetch_add(batch.len(), Ordering::AcqRel);
        self.emit(Event::Outcomes(batch));
    }

    /// A journal failure: nothing more is written (the rows of messages in flight stay
    /// `dispatched`, in doubt, the safe reading, or `claimed` when their requests were never
    /// written), the campaign stops gracefully so that every
    /// message still gets its outcome, and the error is reported at the end.
    fn fail(&mut self, error: Error) {
        let reason = format!("the journal failed: {error}");
        self.stop_for(error, &reason);
        // A run taken over (its fence down) still writes the results of the messages it
        // holds, which went out: a taker must not send them again. The journal itself refuses
        // everything else of it.
        if !self
            .journal
            .as_ref()
            .is_some_and(|journal| journal.fence().is_lost())
        {
            self.journal = None;
        }
    }

    /// A shared-limits failure (the store could not say when a message may go): the campaign
    /// stops as for a journal failure, but the journal keeps recording the outcomes.
    fn fail_limits(&mut self, error: Error) {
        let reason = format!("the shared limits failed: {error}");
        self.stop_for(error, &reason);
    }

    fn stop_for(&mut self, error: Error, reason: &str) {
        if self.failure.is_none() {
            self.failure = Some(error);
        }
        if self.stopped.is_none() {
            // The messages waiting are reported skipped, and written so if the journal still
            // takes writes (best effort: else they stay in doubt, the safe reading).
            self.stop(None, reason);
        }
    }

    /// Stops the campaign when the breaker trips, at the last message that could not reach
    /// the service.
    fn trip_breaker(&mut self) {
        if self.stopped.is_some() {
            return;
        }
        if let Some(reason) = self.breaker.tripped() {
            let index = self.breaker.last_failed;
            let at = index.map_or_else(String::new, |index| format!(" at message #{index}"));
            self.stop_note = Some(format!(
                "not sent: the service is unreachable (the campaign stopped{at})"
            ));
            self.stop(index, &reason);
        }
    }

    /// Stops taking messages: those waiting are reported skipped (and, in the journal, as never
    /// sent, so a re-run sends them).
    fn stop(&mut self, index: Option<u64>, reason: &str) {
        self.stopped = Some(Stop {
            index,
            reason: reason.to_owned(),
        });
        self.control.raise(STOP);
        self.skip_waiting();
    }

    /// Messages waited for that are due: queued to be claimed again (taking over in doubt
    /// those whose holder's grace is past).
    fn claim_waiting(&mut self) {
        for Due { ready, in_doubt } in self.waiting.due(std::time::Instant::now()) {
            self.claims.queue(ready, in_doubt);
        }
    }

    /// A message a live run holds: waited for, or reported held by it once this run has
    /// waited its patience.
    fn wait_for_holder(&mut self, ready: Ready<P>) {
        if let Some(ready) = self.waiting.hold(ready) {
            self.buffer.push(held_elsewhere(ready));
        }
    }

    /// Reports the messages waiting to be sent as skipped (in the journal: never sent, so a
    /// re-run sends them, unless they were in doubt before this run).
    fn skip_waiting(&mut self) {
        let note = self.not_sent_note();
        // Held by a run whose session ended, which may have sent them: in doubt, with their
        // keys; held by a live run: its to send. Never written: not this run's.
        let (settling, held) = self.waiting.drain();
        for ready in settling {
            self.claims.forget_doubt(ready.index);
            self.buffer.push(still_in_doubt(ready));
        }
        for ready in held {
            self.buffer.push(held_elsewhere(ready));
        }
        // Claims being made now are answered for messages no longer waiting: ignored.
        let (waiting, marked) = self.claims.drain();
        for (position, ready) in waiting.into_iter().enumerate() {
            let mut outcome = Outcome::skipped(ready.index, ready.payload, note.clone());
            outcome.idempotency_key = Some(ready.key);
            // Written whether or not the claim was made (a claim being made now is committed
            // before this write, and a record this run does not hold is never written): a
            // write error here surfaces at the final flush.
            let journaling = if position < marked {
                Journaling::Write(ready.identity)
            } else {
                Journaling::WriteIfHeld(ready.identity)
            };
            let _ = self.journal_outcome(&outcome, journaling);
            self.buffer.push(outcome);
        }
    }

    /// Why messages were not sent, once the campaign stopped.
    fn not_sent_note(&self) -> String {
        if let Some(note) = &self.stop_note {
            return note.clone();
        }
        match self.stopped.as_ref().and_then(|stop| stop.index) {
            Some(index) => format!("not sent: the campaign stopped at message #{index}"),
            None => "not sent: the campaign was interrupted".to_owned(),
        }
    }

    fn dispatch(&mut self) {
        // An open breaker lets one message at a time go, a probe of the service, a few per
        // window.
        let limit = if !self.breaker.is_open() {
            self.concurrency
        } else if std::time::Instant::now() >= self.breaker.next_probe() {
            1
        } else {
            0
        };
        while self.inflight.len() < limit {
            let Some(ready) = self.claims.next_to_send(self.journal.is_some()) else {
                return;
            };
            let send = send_one(Arc::clone(&self.context), ready);
            self.inflight.push(Box::pin(send));
        }
    }
}
