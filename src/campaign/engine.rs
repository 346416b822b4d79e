//! The bulk sender: one task that keeps up to `concurrency` sends in flight.
//!
//! The caller (a binding) and the engine talk through two channels. The engine asks for input
//! (`Event::NeedInput`) when its queue runs low, and the caller feeds it a chunk it pulled from
//! its iterable; the engine hands back outcomes in batches (`Event::Outcomes`). So the caller
//! works once per chunk and once per batch, never per message, and the input is never read
//! further ahead than the queue needs (a generator of a million messages is never
//! materialized).
//!
//! Every send goes through the client's one attempt loop (`client/execute.rs`), so the
//! duplicate-send rules of a single send hold for each message: one idempotency key per message
//! reused by its own retries, retries only when provably unsent, `unknown` for ambiguous
//! failures. What the engine adds: the batch-wide pause on `Retry-After` (a shared gate),
//! pacing, duplicate detection, the platform's codes (pause, retry later, stop), the journal,
//! and stopping (an error with `stop_on_error`, Ctrl-C, a cancelled task).

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use tokio::sync::{mpsc, watch};

use super::journal::{Journal, Row, State};
use super::keys::{retry_key, KeySource};
use super::message::{Fingerprint, FingerprintMap, Input, Prepared};
use super::outcome::{Outcome, Status};
use super::pacing::{Limiter, Pacer};
use super::platform::{advice, Advice};
use super::senders::{verdict, Directory, Verdict};
use crate::client::{CallOptions, Client, Gate};
use crate::error::{Error, Result, UnknownOutcome};
use crate::wire::{RawJson, Scalar, SendResult};

/// Items asked for at a time.
const CHUNK: usize = 512;
/// Outcomes handed back at a time, at most; a partial batch goes after `FLUSH_EVERY`.
const BATCH: usize = 256;
const FLUSH_EVERY: Duration = Duration::from_millis(50);
/// Outcomes the caller has not taken yet, past which no new message is dispatched (messages in
/// flight still finish): a slow `on_result` slows the campaign instead of filling memory.
const MAX_UNDELIVERED: usize = 65_536;
/// Messages marked `dispatched` in the journal per transaction, ahead of dispatch.
const MARK_AHEAD: usize = 64;

#[derive(Clone, Debug)]
pub struct Options {
    pub concurrency: usize,
    pub rate_limit: Option<f64>,
    /// Look up every sender (status, quality, throughput, account tier) and pace each one.
    pub pace_auto: bool,
    pub stop_on_error: bool,
    pub dedupe: bool,
    pub journal: Option<PathBuf>,
    pub campaign_id: Option<String>,
    /// Re-send messages left in doubt by an earlier run (same key) instead of listing them.
    pub resend_unknown: bool,
    /// `timeout` and `max_retries` of each message.
    pub call: CallOptions,
}

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
            call: CallOptions::default(),
        }
    }
}

impl Options {
    fn check(&self) -> Result<()> {
        if !(1..=10_000).contains(&self.concurrency) {
            return Err(Error::validation(
                "concurrency",
                format!("must be from 1 to 10000, got {}", self.concurrency),
            ));
        }
        if let Some(rate) = self.rate_limit {
            Limiter::new(rate)?;
        }
        if let Some(id) = &self.campaign_id {
            if id.trim().is_empty() {
                return Err(Error::validation("campaign_id", "must not be empty"));
            }
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
}

pub enum Event<P> {
    /// Feed up to this many items (or end the input).
    NeedInput(usize),
    Outcomes(Vec<Outcome<P>>),
    Warning(Warning),
    Done(Summary),
}

enum Feed<P> {
    Items(Vec<Input<P>>),
    End,
}

/// What the caller asked: 0 run, 1 stop taking messages (in-flight ones finish), 2 stop now
/// (in-flight ones are abandoned and reported unknown).
const RUN: u8 = 0;
const STOP: u8 = 1;
const ABANDON: u8 = 2;

struct Control {
    /// Watched by the engine's loop: a change wakes it.
    state: watch::Sender<u8>,
    /// The same state, read without a lock where it is read per message.
    now: AtomicU8,
    undelivered: AtomicUsize,
}

impl Control {
    fn new() -> Self {
        Control {
            state: watch::channel(RUN).0,
            now: AtomicU8::new(RUN),
            undelivered: AtomicUsize::new(0),
        }
    }

    fn state(&self) -> u8 {
        self.now.load(Ordering::Acquire)
    }

    /// Raises the state to `wanted` (it never goes back) and wakes the engine. The atomic is
    /// set first, so the engine, once woken, reads the new state from it.
    fn raise(&self, wanted: u8) {
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
    /// Starts the campaign on `runtime`. The first event asks for input.
    pub fn start(
        client: Client,
        options: Options,
        runtime: &tokio::runtime::Handle,
    ) -> Result<Self> {
        options.check()?;
        let (input, input_rx) = mpsc::unbounded_channel();
        let (events_tx, events) = mpsc::unbounded_channel();
        let control = Arc::new(Control::new());
        let task = runtime.spawn(run(
            client,
            options,
            input_rx,
            events_tx,
            Arc::clone(&control),
        ));
        Ok(Campaign {
            input,
            events,
            control,
            task: Some(task),
        })
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

/// A message ready to go: checked, keyed, marked in the journal if there is one.
struct Ready<P> {
    index: u64,
    payload: P,
    prepared: Prepared,
    key: String,
    limiter: Option<Arc<Limiter>>,
}

/// The longest wait before sending again to a recipient whose pair rate was hit (131056).
const PAIR_RATE_WAIT_CAP: Duration = Duration::from_secs(15 * 60);

/// Whether an outcome is written to the journal (with the message's fingerprint when known).
enum Journaling {
    Write(Option<Fingerprint>),
    Skip,
}

/// A finished send and, when the platform asked for it, why the campaign must stop.
struct Finished<P> {
    outcome: Outcome<P>,
    stop: Option<String>,
}

/// What the sends of a campaign share, behind one reference count per message.
struct Shared {
    client: Client,
    /// The options of each message's call, with the campaign's gate.
    call: CallOptions,
    gate: Arc<Gate>,
    control: Arc<Control>,
}

struct Engine<P> {
    options: Options,
    events: mpsc::UnboundedSender<Event<P>>,
    control: Arc<Control>,
    /// Only to be woken when the state changes; the state itself is read from `control`.
    stop_signal: watch::Receiver<u8>,
    shared: Arc<Shared>,
    pacer: Pacer,
    keys: KeySource,
    journal: Option<Arc<Journal>>,
    campaign_id: Option<String>,
    directory: Option<Directory>,
    verdicts: HashMap<String, Verdict>,
    recipients: HashMap<String, Recipients>,
    seen: FingerprintMap<u64>,
    ready: VecDeque<Ready<P>>,
    /// How many messages at the front of `ready` are marked in the journal.
    marked: usize,
    inflight: FuturesUnordered<BoxFuture<'static, Finished<P>>>,
    buffer: Vec<Outcome<P>>,
    stopped: Option<Stop>,
    /// Messages taken again while in doubt since an earlier run (`resend_unknown`): whatever
    /// this run sees of them, their journal rows stay in doubt unless a result comes back.
    doubtful: HashSet<u64>,
    /// The first journal failure: the campaign stops gracefully and reports it at the end.
    failure: Option<Error>,
}

/// Unique recipients of one account in this campaign, against its tier.
struct Recipients {
    limit: u64,
    seen: std::collections::HashSet<u64>,
    warned_near: bool,
    warned_over: bool,
}

async fn run<P: Send + 'static>(
    client: Client,
    options: Options,
    mut input: mpsc::UnboundedReceiver<Feed<P>>,
    events: mpsc::UnboundedSender<Event<P>>,
    control: Arc<Control>,
) {
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
    let error = engine.drive(&mut input).await.err();
    let summary = Summary {
        campaign_id: engine.campaign_id.clone(),
        stopped: engine.stopped.take(),
        error,
    };
    if let Some(journal) = engine.journal.take() {
        // The last outcomes are committed before the caller hears the campaign is done.
        let flushed = journal.flush().await;
        if let (Err(failure), Some(events)) = (flushed, Some(&engine.events)) {
            let _ = events.send(Event::Done(Summary {
                error: Some(failure),
                ..summary
            }));
            return;
        }
    }
    let _ = engine.events.send(Event::Done(summary));
}

impl<P: Send + 'static> Engine<P> {
    async fn new(
        client: Client,
        mut options: Options,
        events: mpsc::UnboundedSender<Event<P>>,
        control: Arc<Control>,
    ) -> Result<Self> {
        let journal = match &options.journal {
            Some(path) => {
                let path = path.clone();
                let id = options.campaign_id.clone();
                let opened =
                    tokio::task::spawn_blocking(move || Journal::open(&path, id.as_deref()))
                        .await
                        .map_err(|e| {
                            Error::Internal(format!("the journal could not be opened: {e}"))
                        })??;
                Some(Arc::new(opened))
            }
            None => None,
        };
        let campaign_id = journal
            .as_ref()
            .map(|journal| journal.campaign_id().to_owned())
            .or_else(|| options.campaign_id.clone());
        let keys = campaign_id
            .as_deref()
            .map_or(KeySource::Random, KeySource::for_campaign);
        let directory = if options.pace_auto {
            Some(Directory::fetch(&client, &options.call).await?)
        } else {
            None
        };
        let gate = Arc::new(Gate::new());
        options.call.gate = Some(Arc::clone(&gate));
        let stop_signal = control.state.subscribe();
        let shared = Arc::new(Shared {
            client,
            call: options.call.clone(),
            gate,
            control: Arc::clone(&control),
        });
        Ok(Engine {
            pacer: Pacer::new(options.rate_limit)?,
            options,
            events,
            control,
            stop_signal,
            shared,
            keys,
            journal,
            campaign_id,
            directory,
            verdicts: HashMap::new(),
            recipients: HashMap::new(),
            seen: FingerprintMap::default(),
            ready: VecDeque::new(),
            marked: 0,
            inflight: FuturesUnordered::new(),
            buffer: Vec::with_capacity(BATCH),
            stopped: None,
            doubtful: HashSet::new(),
            failure: None,
        })
    }

    async fn drive(&mut self, input: &mut mpsc::UnboundedReceiver<Feed<P>>) -> Result<()> {
        let mut input_done = false;
        let mut waiting_for_input = false;
        let mut marking: Option<BoxFuture<'static, Result<usize>>> = None;
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
            if stopping && !self.ready.is_empty() {
                // Whatever was queued after the stop is reported, never left waiting.
                self.skip_waiting();
            }
            let backlog = self.control.undelivered.load(Ordering::Acquire) >= MAX_UNDELIVERED;
            if !input_done
                && !waiting_for_input
                && !stopping
                && !backlog
                && self.ready.len() < CHUNK.max(2 * self.options.concurrency)
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
            if finished_input && self.ready.is_empty() && self.inflight.is_empty() {
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
                    match marked {
                        Ok(count) => self.marked += count,
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
        log::warn!(target: "bizmsg", "campaign: {}", warning.message);
        self.emit(Event::Warning(warning));
    }

    fn flush_outcomes(&mut self) {
        if self.buffer.is_empty() {
            return;
        }
        let batch = std::mem::replace(&mut self.buffer, Vec::with_capacity(BATCH));
        self.control
            .undelivered
            .fetch_add(batch.len(), Ordering::AcqRel);
        self.emit(Event::Outcomes(batch));
    }

    /// A journal failure: nothing more is written (the rows of messages in flight stay
    /// `dispatched`, in doubt, the safe reading), the campaign stops gracefully so that every
    /// message still gets its outcome, and the error is reported at the end.
    fn fail(&mut self, error: Error) {
        let reason = format!("the journal failed: {error}");
        if self.failure.is_none() {
            self.failure = Some(error);
        }
        if self.stopped.is_none() {
            // The messages waiting are reported skipped, and written so if the journal still
            // takes writes (best effort: else they stay in doubt, the safe reading).
            self.stop(None, &reason);
        }
        self.journal = None;
    }

    /// Records an outcome (journal, stop rules) and queues it for the caller.
    fn record(&mut self, outcome: Outcome<P>, journaling: Journaling) -> Result<()> {
        // The outcome is the caller's whatever happens to the journal; a failed write is
        // reported after it is queued.
        let written = self.journal_outcome(&outcome, journaling);
        if self.options.stop_on_error && outcome.status.is_error() && self.stopped.is_none() {
            let reason = outcome
                .error
                .as_ref()
                .map_or_else(|| outcome.status.as_str().to_owned(), ToString::to_string);
            self.stop(
                Some(outcome.index),
                &format!(
                    "message #{} was {}: {reason}",
                    outcome.index,
                    outcome.status.as_str()
                ),
            );
        }
        self.buffer.push(outcome);
        written
    }

    fn finish(&mut self, finished: Finished<P>) -> Result<()> {
        let Finished { outcome, stop } = finished;
        // The mark written before dispatch holds the fingerprint; the result keeps it.
        let fatal = stop.or_else(|| outcome.error.as_ref().and_then(stops_the_campaign));
        if let Some(reason) = fatal {
            if self.stopped.is_none() {
                self.stop(
                    Some(outcome.index),
                    &format!("message #{}: {reason}", outcome.index),
                );
            }
        }
        self.record(outcome, Journaling::Write(None))
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

    /// Reports the messages waiting to be sent as skipped (in the journal: never sent, so a
    /// re-run sends them, unless they were in doubt before this run).
    fn skip_waiting(&mut self) {
        let note = self.not_sent_note();
        let waiting: Vec<Ready<P>> = self.ready.drain(..).collect();
        self.marked = 0;
        for ready in waiting {
            let mut outcome = Outcome::skipped(ready.index, ready.payload, note.clone());
            outcome.idempotency_key = Some(ready.key);
            // A write error here surfaces at the final flush.
            let _ = self.journal_outcome(
                &outcome,
                Journaling::Write(Some(ready.prepared.fingerprint)),
            );
            self.buffer.push(outcome);
        }
    }

    /// Why messages were not sent, once the campaign stopped.
    fn not_sent_note(&self) -> String {
        match self.stopped.as_ref().and_then(|stop| stop.index) {
            Some(index) => format!("not sent: the campaign stopped at message #{index}"),
            None => "not sent: the campaign was interrupted".to_owned(),
        }
    }

    /// Items fed after the campaign stopped: each gets its outcome (failed when it is not a
    /// valid message, else skipped), none is sent. Nothing goes into the journal: these were
    /// never compared with what it holds, and a message without a row is sent by a re-run
    /// anyway.
    fn not_taken(&mut self, items: Vec<Input<P>>) {
        let note = self.not_sent_note();
        for item in items {
            let outcome = match item.message {
                Err(error) => Outcome::failed(item.index, item.payload, error),
                Ok(_) => Outcome::skipped(item.index, item.payload, note.clone()),
            };
            self.buffer.push(outcome);
        }
    }

    fn journal_outcome(&mut self, outcome: &Outcome<P>, journaling: Journaling) -> Result<()> {
        let doubt_before = self.doubtful.remove(&outcome.index);
        match (&self.journal, journaling) {
            (Some(journal), Journaling::Write(fingerprint)) => {
                journal.write(vec![row_of(outcome, fingerprint, !doubt_before)])
            }
            _ => Ok(()),
        }
    }

    /// Marks the next messages in the journal before they may be dispatched.
    fn mark_ahead(&mut self) -> Option<BoxFuture<'static, Result<usize>>> {
        let journal = self.journal.clone()?;
        if self.marked >= MARK_AHEAD / 2 || self.marked >= self.ready.len() {
            return None;
        }
        let rows: Vec<Row> = self
            .ready
            .iter()
            .skip(self.marked)
            .take(MARK_AHEAD)
            .map(|ready| Row {
                index: ready.index,
                fingerprint: Some(ready.prepared.fingerprint),
                key: Some(ready.key.clone()),
                state: State::Dispatched,
                sms_id: None,
                code: None,
                msg: None,
                clears_doubt: false,
            })
            .collect();
        let count = rows.len();
        Some(Box::pin(async move {
            journal.write_durably(rows).await?;
            Ok(count)
        }))
    }

    fn dispatch(&mut self) {
        while self.inflight.len() < self.options.concurrency {
            if self.journal.is_some() && self.marked == 0 {
                return;
            }
            let Some(ready) = self.ready.pop_front() else {
                return;
            };
            self.marked = self.marked.saturating_sub(1);
            let send = send_one(
                Arc::clone(&self.shared),
                ready,
                self.pacer.batch(),
                self.journal.clone(),
            );
            self.inflight.push(Box::pin(send));
        }
    }

    /// Takes a chunk of input: failures and skips become outcomes at once, the rest is queued.
    /// Once the campaign stops (an error with `stop_on_error`, a journal failure), the rest of
    /// the chunk is reported as not taken.
    async fn accept(&mut self, items: Vec<Input<P>>) {
        let lookup = match (&self.journal, items.first(), items.last()) {
            (Some(journal), Some(first), Some(last)) => {
                journal.lookup(first.index, last.index).await
            }
            _ => Ok(Vec::new()),
        };
        let recorded: HashMap<u64, Row> = match lookup {
            Ok(rows) => rows.into_iter().map(|row| (row.index, row)).collect(),
            Err(error) => {
                self.fail(error);
                return self.not_taken(items);
            }
        };
        let mut items = items.into_iter();
        while self.stopped.is_none() {
            let Some(item) = items.next() else {
                return;
            };
            // An invalid item is never sent and needs no row; writing one could clear the
            // doubt of the message an earlier run had at that position.
            let row = recorded.get(&item.index);
            let taken = match item.message {
                Ok(prepared) => self.take(item.index, item.payload, prepared, row),
                // The journal recorded a valid message here: the input changed.
                Err(_) if row.is_some_and(|row| row.fingerprint.is_some()) => {
                    self.input_changed(item.index, item.payload)
                }
                Err(error) => self.record(
                    Outcome::failed(item.index, item.payload, error),
                    Journaling::Skip,
                ),
            };
            if let Err(error) = taken {
                self.fail(error);
            }
        }
        self.not_taken(items.collect());
    }

    /// The message at `index` is not the one the journal recorded there: the input changed
    /// since the journal was written. Its outcome is failed and the campaign stops, since with
    /// positions shifted nothing after it can be matched with what was sent (a message moved
    /// to a later position would get a new key and go out again). The journal is left as it is.
    fn input_changed(&mut self, index: u64, payload: P) -> Result<()> {
        let reason = format!(
            "message #{index} differs from the one the journal recorded at that position: the \
             input changed since the journal was written (use a new journal for new input)"
        );
        let error = Error::validation("message", reason.clone());
        let outcome = Outcome::failed(index, payload, error);
        if self.stopped.is_none() {
            self.stop(Some(index), &reason);
        }
        self.record(outcome, Journaling::Skip)
    }

    fn take(
        &mut self,
        index: u64,
        payload: P,
        prepared: Prepared,
        recorded: Option<&Row>,
    ) -> Result<()> {
        let mut key = prepared.key.clone();
        if let Some(row) = recorded {
            if row.fingerprint.is_some_and(|f| f != prepared.fingerprint) {
                return self.input_changed(index, payload);
            }
            key = row.key.clone().or(key);
            match row.state {
                State::Sent | State::Rejected => {
                    self.seen.entry(prepared.fingerprint).or_insert(index);
                    let status = if row.state == State::Sent {
                        "sent"
                    } else {
                        "rejected"
                    };
                    let mut outcome = Outcome::skipped(
                        index,
                        payload,
                        format!("already {status} by an earlier run (journal)"),
                    );
                    outcome.idempotency_key = key;
                    outcome.result = Some(recorded_result(row));
                    self.buffer.push(outcome);
                    return Ok(());
                }
                State::Dispatched | State::Unknown if !self.options.resend_unknown => {
                    self.seen.entry(prepared.fingerprint).or_insert(index);
                    let key = key.unwrap_or_default();
                    let mut outcome = Outcome::new(index, payload, Status::Unknown);
                    outcome.error = Some(in_doubt(&prepared, &key));
                    outcome.idempotency_key = Some(key);
                    outcome.reason = Some(
                        "in doubt since an earlier run: reconcile it, or run again with \
                         resend_unknown=True to re-send it with the same key"
                            .to_owned(),
                    );
                    self.buffer.push(outcome);
                    return Ok(());
                }
                State::Dispatched | State::Unknown => {
                    // In doubt and to be re-sent with the same key: it stays in doubt in the
                    // journal unless a result comes back.
                    self.doubtful.insert(index);
                }
                // Never sent, or skipped: on to the same duplicate check as new messages (a
                // duplicate skipped by an earlier run is skipped again, never sent).
                State::Failed | State::Skipped => {}
            }
        }
        if self.options.dedupe {
            match self.seen.entry(prepared.fingerprint) {
                std::collections::hash_map::Entry::Occupied(original)
                    if *original.get() != index =>
                {
                    let original = *original.get();
                    let mut outcome = Outcome::skipped(
                        index,
                        payload,
                        format!("duplicate of message #{original}"),
                    );
                    outcome.duplicate_of = Some(original);
                    let fingerprint = Some(prepared.fingerprint);
                    return self.record(outcome, Journaling::Write(fingerprint));
                }
                std::collections::hash_map::Entry::Occupied(_) => {}
                std::collections::hash_map::Entry::Vacant(slot) => {
                    slot.insert(index);
                }
            }
        }
        let limiter = match self.check_sender(&prepared) {
            Ok(limiter) => limiter,
            Err(error) => {
                let fingerprint = Some(prepared.fingerprint);
                return self.record(
                    Outcome::failed(index, payload, error),
                    Journaling::Write(fingerprint),
                );
            }
        };
        let key = key.unwrap_or_else(|| self.keys.key(index, prepared.fingerprint));
        self.ready.push_back(Ready {
            index,
            payload,
            prepared,
            key,
            limiter,
        });
        Ok(())
    }

    /// With `pace="auto"`: refuses a sender that cannot send, paces the others, counts each
    /// account's unique recipients against its tier.
    fn check_sender(&mut self, prepared: &Prepared) -> Result<Option<Arc<Limiter>>> {
        let Some(directory) = &self.directory else {
            return Ok(None);
        };
        let from = &prepared.request.from;
        let Some(sender) = directory.sender(from).cloned() else {
            return Err(Error::validation(
                "from_",
                format!(
                    "{} is not a business phone number of this account (checked before \
                     sending, pace=\"auto\")",
                    crate::validate::mask_phone(from)
                ),
            ));
        };
        if !self.verdicts.contains_key(from) {
            let decided = verdict(&sender);
            if let Verdict::Send { pace, warning } = &decided {
                match pace {
                    Some(pace) => self.pacer.pace_sender(from, *pace)?,
                    None => self.warn(Warning {
                        kind: "unpaced",
                        message: format!(
                            "sender {} has throughput {:?}, whose pace is unknown: it is not \
                             paced",
                            crate::validate::mask_phone(from),
                            sender.throughput.as_deref().unwrap_or("")
                        ),
                        account_id: Some(sender.account_id.clone()),
                        sender: Some(from.clone()),
                    }),
                }
                if let Some(message) = warning {
                    self.warn(Warning {
                        kind: "quality",
                        message: message.clone(),
                        account_id: Some(sender.account_id.clone()),
                        sender: Some(from.clone()),
                    });
                }
            }
            self.verdicts.insert(from.clone(), decided);
        }
        if let Some(Verdict::Refuse(reason)) = self.verdicts.get(from) {
            return Err(Error::validation(
                "from_",
                format!("{reason} (checked before sending, pace=\"auto\")"),
            ));
        }
        self.count_recipient(&sender.account_id, prepared.recipient());
        Ok(self.pacer.sender_pace(from))
    }

    fn count_recipient(&mut self, account_id: &str, recipient: u64) {
        let Some(account) = self
            .directory
            .as_ref()
            .and_then(|directory| directory.account(account_id))
            .cloned()
        else {
            return;
        };
        let Some(limit) = account.limit else {
            return;
        };
        let counter = self
            .recipients
            .entry(account_id.to_owned())
            .or_insert_with(|| Recipients {
                limit,
                seen: std::collections::HashSet::new(),
                warned_near: false,
                warned_over: false,
            });
        // Counting stops past the limit: memory stays bounded by the largest tier.
        if counter.seen.len() as u64 > counter.limit {
            return;
        }
        counter.seen.insert(recipient);
        let unique = counter.seen.len() as u64;
        let tier = account.tier.clone().unwrap_or_default();
        let (near, over) = (
            !counter.warned_near && unique * 5 >= limit * 4,
            !counter.warned_over && unique > limit,
        );
        if over {
            counter.warned_over = true;
            counter.warned_near = true;
        } else if near {
            counter.warned_near = true;
        }
        let name = account.name.clone().unwrap_or_else(|| account.id.clone());
        if over {
            self.warn(Warning {
                kind: "tier",
                message: format!(
                    "account {name} ({}) reaches more than {limit} unique recipients in this \
                     campaign, past its messaging tier {tier} (unique recipients per rolling \
                     24 h): messages to new recipients past the limit will be refused",
                    account.id
                ),
                account_id: Some(account.id.clone()),
                sender: None,
            });
        } else if near {
            self.warn(Warning {
                kind: "tier_near",
                message: format!(
                    "account {name} ({}) reaches 80% of its messaging tier {tier} ({limit} \
                     unique recipients per rolling 24 h) in this campaign",
                    account.id
                ),
                account_id: Some(account.id.clone()),
                sender: None,
            });
        }
    }
}

/// Sends one message: its sender's pace, then the batch's, then the attempt loop; a failed
/// commit the platform calls temporary is sent again (with a new key, see `retry_key`).
async fn send_one<P>(
    shared: Arc<Shared>,
    ready: Ready<P>,
    batch: Option<Arc<Limiter>>,
    journal: Option<Arc<Journal>>,
) -> Finished<P> {
    let Ready {
        index,
        payload,
        prepared,
        key,
        limiter,
    } = ready;
    // A retry's own key, once there is one (most messages never need one: no allocation).
    let current = Mutex::new(None);
    let keys = KeyInUse {
        index,
        base: &key,
        journal: journal.as_deref(),
        current: &current,
        control: &shared.control,
    };
    let attempt = attempt(&shared, &prepared, keys, limiter, batch);
    tokio::select! {
        biased;
        done = attempt => {
            let (result, sent_key, stop) = done;
            Finished {
                outcome: outcome_of(index, payload, result, sent_key),
                stop,
            }
        }
        () = abandoned(&shared.control) => {
            // The key of the attempt in flight (a retry after a temporary code has its own).
            let retry_key = current
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = retry_key.unwrap_or(key);
            let mut outcome = Outcome::new(index, payload, Status::Unknown);
            outcome.error = Some(in_doubt(&prepared, &key));
            outcome.reason = Some("abandoned while in flight: it may have been sent".to_owned());
            outcome.idempotency_key = Some(key);
            Finished { outcome, stop: None }
        }
    }
}

type Attempted = (
    Result<crate::client::Response<SendResult>>,
    String,
    Option<String>,
);

/// The idempotency key a message is being sent with, and where a new one is recorded before a
/// retry uses it.
struct KeyInUse<'a> {
    index: u64,
    base: &'a str,
    journal: Option<&'a Journal>,
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
                    index: self.index,
                    fingerprint: None,
                    key: Some(next.to_owned()),
                    state: State::Dispatched,
                    sms_id: None,
                    code: None,
                    msg: None,
                    clears_doubt: false,
                }])
                .await?;
        }
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
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
    shared: &Shared,
    prepared: &Prepared,
    keys: KeyInUse<'_>,
    limiter: Option<Arc<Limiter>>,
    batch: Option<Arc<Limiter>>,
) -> Attempted {
    let Shared {
        client, call, gate, ..
    } = shared;
    let max_retries = call.max_retries.unwrap_or_else(|| client.max_retries());
    let base = keys.base;
    let mut key = base.to_owned();
    let mut retries = 0;
    loop {
        // Slots are taken once the gate is open: messages held by a pause then leave at the
        // pace, not together the moment it lifts. A slot taken as a pause began is given up
        // for a new one after it.
        loop {
            gate.wait().await;
            if let Some(limiter) = &limiter {
                limiter.admit().await;
            }
            if let Some(batch) = &batch {
                batch.admit().await;
            }
            if gate.closed_until().is_none() || (limiter.is_none() && batch.is_none()) {
                break;
            }
        }
        let result = client
            .send_encoded(&prepared.request, prepared.body.clone(), key.clone(), call)
            .await;
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
                return (result, key, Some(reason));
            }
            Some(Advice::PauseBatch) if retries < max_retries => {
                retries += 1;
                if let Some(wait) = client.backoff().delay(retries, None) {
                    gate.pause(wait);
                }
            }
            Some(Advice::RetryRecipientLater) if retries < max_retries => {
                retries += 1;
                // The platform suggests 4^n seconds for the pair rate of one recipient; capped,
                // so that a generous max_retries cannot hold a slot for days.
                let wait =
                    Duration::from_secs(4u64.saturating_pow(retries)).min(PAIR_RATE_WAIT_CAP);
                let mut stop = keys.control.state.subscribe();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    // Stopping: the temporary rejection is this message's outcome (not sent).
                    _ = stop.wait_for(|state| *state != RUN) => return (result, key, None),
                }
            }
            _ => return (result, key, None),
        }
        log::warn!(
            target: "bizmsg",
            "campaign: message to {} rejected with code {} (temporary); sending it again, retry \
             {retries} of {max_retries}",
            crate::validate::mask_phone(&prepared.request.to),
            code.unwrap_or_default()
        );
        let next = retry_key(base, retries);
        if keys.switch_to(&next).await.is_err() {
            // The new key could not be recorded, so it is not used: the temporary failure
            // stands as this message's outcome (the journal's failure surfaces at its next
            // durable write, which stops the campaign).
            return (result, key, None);
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
fn stops_the_campaign(error: &Error) -> Option<String> {
    let fatal = match error {
        Error::Api(api) => matches!(api.status_code, 401 | 403 | 404),
        Error::Closed | Error::Configuration(_) | Error::TokenProvider { .. } => true,
        _ => false,
    };
    fatal.then(|| format!("{error}; no other message could be sent"))
}

/// The error of a message left in doubt: it may have been sent with `key`.
fn in_doubt(prepared: &Prepared, key: &str) -> Error {
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

/// The journal row of a finished message.
fn row_of<P>(outcome: &Outcome<P>, fingerprint: Option<Fingerprint>, clears_doubt: bool) -> Row {
    let state = match outcome.status {
        Status::Sent => State::Sent,
        Status::Rejected => State::Rejected,
        Status::Unknown => State::Unknown,
        Status::Failed => State::Failed,
        Status::Skipped => State::Skipped,
    };
    let text = |value: &Option<Scalar>| value.as_ref().map(|value| value.text().to_owned());
    let result = outcome.result.as_ref();
    Row {
        index: outcome.index,
        fingerprint,
        clears_doubt,
        key: outcome.idempotency_key.clone(),
        state,
        sms_id: result.and_then(|r| text(&r.sms_id)),
        code: result.and_then(|r| text(&r.code)),
        msg: result
            .and_then(|r| r.msg.clone())
            .or_else(|| outcome.error.as_ref().map(ToString::to_string))
            .or_else(|| outcome.reason.clone()),
    }
}

/// The send result an earlier run recorded (as text: the journal keeps `smsId`, `code` and
/// `msg`, not their JSON types).
fn recorded_result(row: &Row) -> SendResult {
    let mut wire = serde_json::Map::new();
    let mut put = |name: &str, value: &Option<String>| {
        if let Some(value) = value {
            wire.insert(name.to_owned(), serde_json::Value::String(value.clone()));
        }
    };
    put("smsId", &row.sms_id);
    put("code", &row.code);
    put("msg", &row.msg);
    SendResult {
        sms_id: row.sms_id.clone().map(Scalar::Text),
        status: None,
        code: row.code.clone().map(Scalar::Text),
        msg: row.msg.clone(),
        ok: row.state == State::Sent,
        wire: RawJson(serde_json::to_vec(&wire).unwrap_or_default().into()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::api::SendMessage;
    use crate::client::{ClientConfig, TokenSource};
    use crate::sandbox::{Sandbox, SandboxConfig};

    fn message(to: &str, from: &str) -> SendMessage {
        SendMessage {
            to: to.into(),
            from: from.into(),
            template_name: "order_update".into(),
            parameters: serde_json::json!(["A-1"]),
            language: "en".into(),
        }
    }

    /// Runs a campaign over `messages` to the end; its outcomes by index.
    async fn run(client: &Client, options: Options, messages: &[SendMessage]) -> Vec<Outcome<()>> {
        let mut campaign =
            Campaign::start(client.clone(), options, &tokio::runtime::Handle::current()).unwrap();
        let pending: VecDeque<Input<()>> = messages
            .iter()
            .enumerate()
            .map(|(index, message)| Input {
                index: index as u64,
                payload: (),
                message: Prepared::new(message, None),
            })
            .collect();
        let (outcomes, summary) = drive(&mut campaign, pending).await;
        let error = summary.and_then(|summary| summary.error);
        assert!(error.is_none(), "{error:?}");
        outcomes
    }

    /// Feeds `pending` as the engine asks for it and collects the outcomes (by index) and the
    /// summary, until `Done`.
    async fn drive(
        campaign: &mut Campaign<()>,
        mut pending: VecDeque<Input<()>>,
    ) -> (Vec<Outcome<()>>, Option<Summary>) {
        let mut outcomes = Vec::new();
        let mut summary = None;
        while let Some(event) = campaign.next_event().await {
            match event {
                Event::NeedInput(wanted) => {
                    let chunk: Vec<Input<()>> =
                        pending.drain(..wanted.min(pending.len())).collect();
                    if chunk.is_empty() {
                        campaign.end_input();
                    } else {
                        campaign.feed(chunk);
                    }
                }
                Event::Outcomes(batch) => outcomes.extend(batch),
                Event::Warning(_) => {}
                Event::Done(done) => {
                    summary = Some(done);
                    break;
                }
            }
        }
        outcomes.sort_by_key(|outcome| outcome.index);
        (outcomes, summary)
    }

    async fn setup() -> (Sandbox, Client, String) {
        let sandbox = Sandbox::start(SandboxConfig::default()).await.unwrap();
        let client = Client::new(ClientConfig::new(
            sandbox.base_url(),
            TokenSource::Static(sandbox.token()),
        ))
        .unwrap();
        let page = client
            .list_business_phone_numbers(
                crate::api::PageRequest::new(1, 1).unwrap(),
                &CallOptions::default(),
            )
            .await
            .unwrap();
        let sender = page.value.data[0].display_phone_number.clone().unwrap();
        (sandbox, client, sender)
    }

    fn statuses(outcomes: &[Outcome<()>]) -> Vec<&'static str> {
        outcomes.iter().map(|o| o.status.as_str()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_message_has_one_outcome_in_input_order() {
        let (sandbox, client, sender) = setup().await;
        let mut messages: Vec<SendMessage> = (0..700)
            .map(|i| message(&format!("86138{i:08}"), &sender))
            .collect();
        messages.push(message("12", &sender));
        messages.push(message("8613800000003", &sender));
        let outcomes = run(&client, Options::default(), &messages).await;
        assert_eq!(outcomes.len(), 702);
        assert!(outcomes
            .iter()
            .enumerate()
            .all(|(i, o)| o.index == i as u64));
        assert_eq!(outcomes[700].status, Status::Failed);
        assert_eq!(outcomes[701].duplicate_of, Some(3));
        assert_eq!(sandbox.stats().accepted, 700);
    }

    /// Runs 20 messages at concurrency 8 against a server that sits on every request, and
    /// abandons the campaign once the first 8 reached it: the outcomes and the summary.
    async fn abandon_with_8_in_flight(stop_on_error: bool) -> (Vec<Outcome<()>>, Summary) {
        let (sandbox, client, sender) = setup().await;
        sandbox.set_delay(Duration::from_secs(60));
        let options = Options {
            concurrency: 8,
            stop_on_error,
            ..Options::default()
        };
        let mut campaign =
            Campaign::start(client, options, &tokio::runtime::Handle::current()).unwrap();
        let pending: VecDeque<Input<()>> = (0..20u64)
            .map(|index| Input {
                index,
                payload: (),
                message: Prepared::new(&message(&format!("86138{index:08}"), &sender), None),
            })
            .collect();
        let stopper = campaign.stopper();
        let abandon = tokio::spawn(async move {
            // The sandbox counts a send when it arrives, before its delay.
            while sandbox.stats().sends < 8 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stopper.stop(true);
            sandbox
        });
        let collected =
            tokio::time::timeout(Duration::from_secs(20), drive(&mut campaign, pending)).await;
        let (outcomes, summary) = collected.expect("the abandoned campaign did not end");
        let sandbox = abandon.await.unwrap();
        assert_eq!(sandbox.stats().sends, 8);
        (outcomes, summary.unwrap())
    }

    /// A send in flight is not woken by the stop signal itself (no registration per message):
    /// the engine polls each one when the campaign is abandoned. Every one must end at once,
    /// unknown, while the server still sits on the requests.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoning_ends_every_send_in_flight_at_once_as_unknown() {
        for stop_on_error in [false, true] {
            let (outcomes, summary) = abandon_with_8_in_flight(stop_on_error).await;
            assert_eq!(outcomes.len(), 20);
            let abandoned: Vec<&Outcome<()>> = outcomes
                .iter()
                .filter(|o| o.status == Status::Unknown)
                .collect();
            assert_eq!(abandoned.len(), 8, "{:?}", statuses(&outcomes));
            for outcome in &abandoned {
                assert_eq!(
                    outcome.reason.as_deref(),
                    Some("abandoned while in flight: it may have been sent")
                );
                assert!(outcome.idempotency_key.is_some());
            }
            assert!(outcomes
                .iter()
                .filter(|o| o.status != Status::Unknown)
                .all(|o| o.status == Status::Skipped
                    && o.reason.as_deref() == Some("not sent: the campaign was interrupted")));
            // Regression: with stop_on_error, the first abandoned message (unknown) was taken
            // for the reason of the stop.
            let stopped = summary.stopped.unwrap();
            assert_eq!(
                (stopped.index, stopped.reason.as_str()),
                (None, "interrupted")
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rerun_with_the_journal_sends_nothing_twice() {
        // Regression: a duplicate the first run skipped was sent by the second run, because
        // its journal row ("skipped") skipped the duplicate check.
        let (sandbox, client, sender) = setup().await;
        let dir = std::env::temp_dir().join(format!("bizmsg-engine-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let options = Options {
            journal: Some(dir.join("c.db")),
            ..Options::default()
        };
        let same = message("8613800138000", &sender);
        let messages = vec![same.clone(), same, message("8613800138001", &sender)];
        let first = run(&client, options.clone(), &messages).await;
        assert_eq!(statuses(&first), ["sent", "skipped", "sent"]);
        let second = run(&client, options, &messages).await;
        assert_eq!(statuses(&second), ["skipped", "skipped", "skipped"]);
        assert_eq!(second[1].duplicate_of, Some(0));
        assert_eq!(sandbox.stats().accepted, 2, "each message committed once");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_campaign_id_gives_every_run_the_same_keys() {
        let (sandbox, client, sender) = setup().await;
        let options = Options {
            campaign_id: Some("spring".into()),
            ..Options::default()
        };
        let messages = vec![message("8613800138000", &sender)];
        let first = run(&client, options.clone(), &messages).await;
        let second = run(&client, options, &messages).await;
        assert_eq!(first[0].idempotency_key, second[0].idempotency_key);
        assert_eq!(statuses(&second), ["sent"]);
        // The second run's send was answered from the key: nothing went out twice.
        assert_eq!((sandbox.stats().accepted, sandbox.stats().replayed), (1, 1));
    }
}
