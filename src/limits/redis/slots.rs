//! Slots reserved in the store a few at a time and handed out in this process, so that a fast
//! campaign is not one round trip per message.
//!
//! One pool per pace (a sender's, a campaign's, or both), per process. A caller takes the
//! first reserved slot and sleeps until its time; when none is left, one caller (the one
//! fetching) asks the store for as many as there are callers waiting on this pool, the others
//! wait for its answer. The store grants slots at most a horizon ahead (`HORIZON`): what a
//! process holds at any moment is at most that much of the pace, which bounds the damage when
//! the store loses its state (see `mod.rs`).
//!
//! When the store has no slot within the horizon it says when its first free one is; the
//! fetcher sleeps until enough of them have come within reach for one request to serve every
//! caller waiting, and asks again (still ahead of that first slot: nothing is lost).
//!
//! An answer that came too late for its slots to be placed in time (a stall), or that answers
//! a request made before a pause this process learned of, is not used: its slots are dropped,
//! and the batch is given back to the store before the next request (one more round trip),
//! so that a stall costs the pace its own length rather than a whole batch (`scripts.rs`'s
//! `GIVE_BACK`, which refuses when another process reserved after the batch).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::sync::lock;

/// How far ahead of its time a slot may be granted. Slots already granted still go when the
/// store loses its state; the store's epoch keeps new ones after them (`scripts.rs`), but
/// where it cannot tell (a Redis restarted from a snapshot, which keeps an old epoch; a
/// process of a bizmsg before 2026-11-30), a sender can see `(1 + HORIZON) × pace + 1`
/// messages in one second then: 76 for a STANDARD sender paced at 60 under a ceiling of 80.
pub(super) const HORIZON: Duration = Duration::from_millis(250);
/// How long before its first slot a fetcher asks again, at the latest (the round trip and a
/// late wake-up must fit in it).
const LEAD: Duration = Duration::from_millis(20);
/// The most slots one request reserves, for a pace up to 1,600 a second (the platform's are
/// 60 and 750). Slots a process reserved and never uses, when its part of a campaign ends,
/// are lost to the others: at most this many. Measured with 64 (`benches/paced.py`, 1,000 a
/// second shared by 2 processes): 97.5 %, the processes ending up to 0.12 s apart; with 16,
/// 98.2–98.5 %, ending within 10 ms, and one process alone kept 99.0 % (a round trip every
/// 16 ms).
const MOST: usize = 16;
/// For a faster pace (a campaign's `rate_limit` far above what a process sends), one request
/// reserves up to this much of the pace, and at most `MOST_FAST` slots: else a campaign
/// going as fast as its core allows waits for a round trip every 64 messages (measured at a
/// third of its speed without the store).
const MOST_SPAN: Duration = Duration::from_millis(10);
const MOST_FAST: usize = 1024;
/// How late, in all, a slot may be used. Its time here is counted from the moment the store's
/// answer came, and the store read its clock somewhere during that round trip: so a slot is
/// never used early, and is used up to the round trip late before its caller even wakes. A
/// slot from an answer that took `t` may then be taken until `LATE - t` after its time here,
/// so that it is used at most `LATE` after its true time. A slot not taken by then, or whose
/// caller woke later, is given up for a later one: sent later still, next to the following
/// slots, it could put more than the pace in a second.
///
/// Why 6 ms: `mod.rs`'s `SHARED_SPAN` spaces a pace of `r` so that `r + 1` consecutive slots
/// span 1.008 s. For `r + 1` sends to fall within one second at the service, the first must
/// be late by more than 8 ms against the last; `LATE` takes 6 of them and leaves 2 ms for
/// the write after the wake-up and the difference in the way there. Each millisecond of that
/// guard costs a thousandth of every pace, and buys the slots of callers that wake late, which
/// matters only far above the platform's paces. Measured at 5,000 a second (a campaign of
/// 25,000, 2026-11-29): with 3 ms after the slot's time here (the round trip not counted), 513
/// callers gave up their slot, 2 % of the pace; with 6 ms in all, 200 to 400 (woken a median
/// 5.2 ms late). A guard of 12 ms (`LATE` 10 ms) kept 98.0–98.1 % there, but it costs 0.4 %
/// of every pace, and at 750 and 1,000 a second, the paces that matter, it measured no better
/// (97.5–98.6 %): not kept.
const LATE: Duration = Duration::from_millis(6);
/// How long after its slot's bound (`latest`) its attempt may still be handed to the
/// transport: the 2 ms `LATE` leaves for the write after the wake-up (the difference in the
/// way there is then left to the network: on one host or one LAN, well under a millisecond).
/// An attempt later than that (the process was not scheduled, a `Retry-After` gate held it)
/// is not made on this slot: the send takes a new one (`limits/departure.rs`,
/// `client/execute.rs`), three at most. From there to the write, only the transport's own
/// waits can delay it (a connection opened when none is idle), and they are not bounded.
const WRITE_AFTER_WAKE: Duration = Duration::from_millis(2);
/// The least time a caller is given to wake for its slot: tokio's timer ticks every
/// millisecond (less, and the slot is as good as lost before it is taken).
const LEAST_TO_WAKE: Duration = Duration::from_millis(1);
/// An answer that took this many times the usual round trip is "slow": Redis or the network
/// stalled for a moment.
const SLOW_ANSWER: u32 = 4;
/// The usual round trip is the quickest of this many last answers: a stall, or an outage's
/// retries (counted in an answer's time), never makes it look usual, and a store that became
/// slower for good is taken as such after this many answers (each a batch given back).
const RECENT_ANSWERS: usize = 16;

/// What the store answered to a reservation, in offsets from the moment the answer came.
pub(super) enum Grant<Batch> {
    /// Slots, in order, and what gives them back to the store (`Batch`).
    Slots(Vec<Duration>, Batch),
    /// None within the horizon; the first free one is this far ahead.
    FirstFree(Duration),
}

/// The reserved slots of one pace in this process.
pub(super) struct Pool {
    state: Mutex<State>,
    changed: Notify,
    /// Bumped by a pause this process learned of: a slot taken before is given up.
    epoch: AtomicU64,
    /// The spacing of this pool's slots.
    period: Duration,
}

/// A slot a caller took, and the pause epoch it was taken in.
pub(super) struct Taken {
    slot: Slot,
    epoch: u64,
}

impl Taken {
    /// The latest its request may be written (`WRITE_AFTER_WAKE`).
    pub(super) fn write_by(&self) -> Instant {
        self.slot.latest + WRITE_AFTER_WAKE
    }
}

/// A reserved slot: when it is due here, and the latest it may be used (see `LATE`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Slot {
    due: Instant,
    latest: Instant,
}

/// How long the slots of an answer that took `took`, where a round trip usually takes
/// `usual`, may be used after their time here, or `None` if they are given up.
///
/// - Quick enough to leave a caller `LEAST_TO_WAKE`: what `LATE` leaves after the round trip.
/// - Slower, but no slower than `SLOW_ANSWER` times the usual (a store far away, which every
///   answer takes as long to reach; or the first answer, when nothing is known yet):
///   `LEAST_TO_WAKE`, so that such a store still paces (a slot may then be used up to its
///   round trip and 1 ms late: `mod.rs` asks for a store that answers within 5 ms).
/// - Slower still (a stall): not used. Its batch is given back to the store (see the module's
///   docs), which grants it again unless another reservation came after it.
fn time_to_use(took: Duration, usual: Duration) -> Option<Duration> {
    match LATE.checked_sub(took) {
        Some(left) if left >= LEAST_TO_WAKE => Some(left),
        _ if took <= usual.saturating_mul(SLOW_ANSWER) => Some(LEAST_TO_WAKE),
        _ => None,
    }
}

#[derive(Default)]
struct State {
    slots: VecDeque<Slot>,
    /// A caller is asking the store.
    fetching: bool,
    /// Callers in `take`.
    callers: usize,
    /// From the last refusal: no slot before this.
    next_free: Option<Instant>,
    /// The store's last failure, and when: callers that waited for that fetch fail with it
    /// rather than each waiting out the store's bound again in turn.
    failure: Option<(Instant, Error)>,
    /// The round trips of the last answers (`RECENT_ANSWERS`), latest last.
    round_trips: VecDeque<Duration>,
    /// Slots taken in the current horizon-long interval, in the one before, and when the
    /// current one began: what this process will likely take in the next horizon.
    taken_now: usize,
    taken_before: usize,
    counting_since: Option<Instant>,
}

impl State {
    fn count_taken(&mut self, now: Instant) {
        self.roll(now);
        self.taken_now += 1;
    }

    /// The quickest of the last answers' round trips.
    fn usual_round_trip(&self) -> Option<Duration> {
        self.round_trips.iter().min().copied()
    }

    fn count_round_trip(&mut self, took: Duration) {
        if self.round_trips.len() == RECENT_ANSWERS {
            self.round_trips.pop_front();
        }
        self.round_trips.push_back(took);
    }

    fn roll(&mut self, now: Instant) {
        let since = *self.counting_since.get_or_insert(now);
        let elapsed = now.saturating_duration_since(since);
        if elapsed >= HORIZON {
            self.taken_before = if elapsed < HORIZON * 2 {
                self.taken_now
            } else {
                0
            };
            self.taken_now = 0;
            self.counting_since = Some(now);
        }
    }

    /// How many slots to ask for: one per caller waiting, or as many as this process took in
    /// the last horizon if more (a busy pace is then one round trip per horizon, not per
    /// caller). Unused ones are lost when the demand stops (at most one horizon's worth).
    fn want(&mut self, now: Instant, period: Duration) -> usize {
        self.roll(now);
        self.callers
            .max(self.taken_now)
            .max(self.taken_before)
            .clamp(1, most(period))
    }
}

/// The most slots one request reserves for a pace of `period` (see `MOST`, `MOST_SPAN`).
fn most(period: Duration) -> usize {
    let span = MOST_SPAN.as_nanos() / period.as_nanos().max(1);
    usize::try_from(span)
        .unwrap_or(MOST_FAST)
        .clamp(MOST, MOST_FAST)
}

fn timeout() -> Error {
    Error::Timeout("no slot of the shared pace before the call's deadline".to_owned())
}

enum Next<'a> {
    /// A slot: sleep until it (unless a pause came meanwhile).
    Go(Slot, u64),
    /// Ask the store.
    Fetch,
    /// Another caller asks: wait for its answer.
    Wait(tokio::sync::futures::Notified<'a>),
}

impl Pool {
    pub(super) fn new(period: Duration) -> Self {
        Pool {
            state: Mutex::new(State::default()),
            changed: Notify::new(),
            epoch: AtomicU64::new(0),
            period,
        }
    }

    /// Drops the reserved slots: a pause began (the store holds every process's new
    /// reservations; this process also gives up those it holds).
    pub(super) fn pause(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let mut state = lock(&self.state);
        state.slots.clear();
        state.next_free = None;
    }

    /// Waits for a slot of this pool and takes it. `fetch(want, horizon)` asks the store for
    /// up to `want` slots within `horizon`; `give_back(batch)` returns to the store a batch
    /// whose slots this pool dropped unused (best effort: it reports nothing). A slot past
    /// `deadline` is not taken: a timeout. The caller is woken `lead` before the slot's time,
    /// for a step to make first (a journal's write); `ready` then waits for the time itself.
    pub(super) async fn take<F, Fut, Batch, G, GFut>(
        &self,
        deadline: Option<Instant>,
        lead: Duration,
        mut fetch: F,
        mut give_back: G,
    ) -> Result<Taken>
    where
        F: FnMut(usize, Duration) -> Fut,
        Fut: std::future::Future<Output = Result<Grant<Batch>>>,
        G: FnMut(Batch) -> GFut,
        GFut: std::future::Future<Output = ()>,
    {
        let _caller = Caller::new(self);
        loop {
            let next = {
                let mut state = lock(&self.state);
                let now = Instant::now();
                while state.slots.front().is_some_and(|slot| slot.latest < now) {
                    state.slots.pop_front();
                }
                if let Some(slot) = state.slots.front().copied() {
                    if deadline.is_some_and(|deadline| slot.due > deadline) {
                        return Err(timeout());
                    }
                    state.slots.pop_front();
                    state.count_taken(now);
                    Next::Go(slot, self.epoch.load(Ordering::Acquire))
                } else if deadline
                    .zip(state.next_free)
                    .is_some_and(|(deadline, next_free)| next_free > deadline)
                {
                    return Err(timeout());
                } else if !state.fetching {
                    state.fetching = true;
                    Next::Fetch
                } else {
                    Next::Wait(self.changed.notified())
                }
            };
            match next {
                Next::Go(slot, epoch) => {
                    let wake = slot.due.checked_sub(lead).unwrap_or(slot.due);
                    tokio::time::sleep_until(wake.into()).await;
                    let taken = Taken { slot, epoch };
                    if self.usable(&taken) {
                        return Ok(taken);
                    }
                }
                Next::Wait(answered) => {
                    let since = Instant::now();
                    match deadline {
                        Some(deadline) => tokio::time::timeout_at(deadline.into(), answered)
                            .await
                            .map_err(|_| timeout())?,
                        None => answered.await,
                    }
                    let state = lock(&self.state);
                    if let Some((when, error)) = &state.failure {
                        if *when >= since {
                            return Err(error.clone());
                        }
                    }
                }
                Next::Fetch => {
                    let fetching = Fetching(self);
                    if let Err(error) = self.fetch(deadline, &mut fetch, &mut give_back).await {
                        // A timeout is this caller's deadline, not the store's failure.
                        if matches!(error, Error::SharedState(_)) {
                            lock(&self.state).failure = Some((Instant::now(), error.clone()));
                        }
                        return Err(error);
                    }
                    drop(fetching);
                }
            }
        }
    }

    /// Waits for the time of a slot taken early; whether it may still be used: not past its
    /// bound (see `LATE`), and no pause learned of since it was taken.
    pub(super) async fn ready(&self, taken: &Taken) -> bool {
        tokio::time::sleep_until(taken.slot.due.into()).await;
        self.usable(taken)
    }

    fn usable(&self, taken: &Taken) -> bool {
        Instant::now() <= taken.slot.latest && self.epoch.load(Ordering::Acquire) == taken.epoch
    }

    /// Asks the store until it grants slots (this caller is the one fetching).
    async fn fetch<F, Fut, Batch, G, GFut>(
        &self,
        deadline: Option<Instant>,
        fetch: &mut F,
        give_back: &mut G,
    ) -> Result<()>
    where
        F: FnMut(usize, Duration) -> Fut,
        Fut: std::future::Future<Output = Result<Grant<Batch>>>,
        G: FnMut(Batch) -> GFut,
        GFut: std::future::Future<Output = ()>,
    {
        loop {
            let want = lock(&self.state).want(Instant::now(), self.period);
            let horizon = match deadline {
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(timeout());
                    }
                    left.min(HORIZON)
                }
                None => HORIZON,
            };
            let asked = Instant::now();
            let epoch = self.epoch.load(Ordering::Acquire);
            let grant = fetch(want, horizon).await?;
            let answered = Instant::now();
            let took = answered - asked;
            match grant {
                Grant::Slots(offsets, batch) => {
                    let to_use = {
                        let mut state = lock(&self.state);
                        state.next_free = None;
                        let usual = state.usual_round_trip().unwrap_or(took);
                        state.count_round_trip(took);
                        // An answer to a request made before a pause this process learned of
                        // meanwhile: its slots may lie within the pause (helper-40).
                        let paused = self.epoch.load(Ordering::Acquire) != epoch;
                        let to_use = time_to_use(took, usual).filter(|_| !paused);
                        if let Some(to_use) = to_use {
                            state.slots.extend(offsets.iter().map(|offset| Slot {
                                due: answered + *offset,
                                latest: answered + *offset + to_use,
                            }));
                        }
                        to_use
                    };
                    if to_use.is_some() {
                        return Ok(());
                    }
                    // A stall, or a pause: none of these slots was put in the pool, so none is
                    // used. Given back before asking again, the next request can be granted
                    // them (after the pause: the store floors every reservation at it).
                    give_back(batch).await;
                }
                Grant::FirstFree(first) => {
                    let first_free = answered + first;
                    let waiting = {
                        let mut state = lock(&self.state);
                        state.next_free = Some(first_free);
                        state.callers.clamp(1, most(self.period))
                    };
                    if deadline.is_some_and(|deadline| first_free > deadline) {
                        return Err(timeout());
                    }
                    // Ask again once a slot for each caller fits in the horizon, and no later
                    // than LEAD before the first. (Not `want`: other processes take slots
                    // meanwhile, and waiting for a horizon's worth would have every refused
                    // process ask at the same moment.)
                    let span = self.period.saturating_mul(
                        u32::try_from(waiting.saturating_sub(1)).unwrap_or(u32::MAX),
                    );
                    let window = horizon.saturating_sub(span).max(LEAD.min(horizon));
                    let wait = first.saturating_sub(window).max(Duration::from_micros(100));
                    tokio::time::sleep_until((answered + wait).into()).await;
                }
            }
        }
    }
}

/// Counts a caller in `take` for as long as it is there.
struct Caller<'a>(&'a Pool);

impl<'a> Caller<'a> {
    fn new(pool: &'a Pool) -> Self {
        lock(&pool.state).callers += 1;
        Caller(pool)
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        state.callers = state.callers.saturating_sub(1);
    }
}

/// Marks the caller fetching; when it is done (answered, failed, or cancelled), the waiting
/// callers are woken to take the new slots or to fetch themselves.
struct Fetching<'a>(&'a Pool);

impl Drop for Fetching<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).fetching = false;
        self.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests;
