//! The limits kept in this process, for one campaign: a timeline per paced key (each sender
//! with `pace="auto"`, the campaign with `rate_limit=`; see `timeline.rs`), gates for pauses,
//! and counters for pair spacing and tiers. The embedded default: what a campaign does when no
//! store is shared.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;

use super::departure::Departure;
use super::gate::Gate;
use super::timeline::Timeline;
use super::{LimitsStore, Scope, Slot, TierCount, TierVerdict};
use crate::error::Result;
use crate::sync::lock;

/// The limits of one campaign in this process.
pub struct LocalLimits {
    /// Pauses of the whole campaign: the same gate its calls wait at (a `Retry-After` answered
    /// to one call pauses them all, see `client/execute.rs`).
    service: Arc<Gate>,
    senders: Mutex<HashMap<String, Arc<Gate>>>,
    /// By key: `s` + sender digits, `c` + campaign.
    paces: Mutex<HashMap<String, Arc<Timeline>>>,
    /// (sender, recipient) -> (hits, spaced until).
    pairs: Mutex<HashMap<(String, String), (u32, Instant)>>,
    /// Unique recipients per account (counting stops past the tier: bounded memory).
    tiers: Mutex<HashMap<String, HashSet<u64>>>,
}

impl LocalLimits {
    /// Limits whose service-wide pauses are `gate`'s.
    pub fn new(gate: Arc<Gate>) -> Self {
        LocalLimits {
            service: gate,
            senders: Mutex::new(HashMap::new()),
            paces: Mutex::new(HashMap::new()),
            pairs: Mutex::new(HashMap::new()),
            tiers: Mutex::new(HashMap::new()),
        }
    }

    /// The timeline of `key` at `per_second` (made, or made anew when the pace changed).
    fn timeline(&self, key: String, per_second: f64) -> Result<Arc<Timeline>> {
        let mut paces = lock(&self.paces);
        if let Some(timeline) = paces.get(&key) {
            if timeline.per_second() == per_second {
                return Ok(Arc::clone(timeline));
            }
        }
        let timeline = Arc::new(Timeline::new(per_second)?);
        paces.insert(key, Arc::clone(&timeline));
        Ok(timeline)
    }

    /// The gate of `sender`'s pauses, made on first use: a message waiting for its slot holds
    /// the gate a later pause of its sender closes (looked up only once it had been paused,
    /// a message already waiting when its sender was first paused would not see that pause).
    fn sender_gate(&self, sender: &str) -> Arc<Gate> {
        let mut senders = lock(&self.senders);
        if let Some(gate) = senders.get(sender) {
            return Arc::clone(gate);
        }
        let gate = Arc::new(Gate::new());
        senders.insert(sender.to_owned(), Arc::clone(&gate));
        gate
    }

    /// When the pauses that hold `sender` end, if one does now.
    fn paused_until(&self, sender: Option<&Gate>) -> Option<Instant> {
        let service = self.service.closed_until();
        let sender = sender.and_then(Gate::closed_until);
        service.max(sender)
    }
}

impl LimitsStore for LocalLimits {
    fn admit<'a>(&'a self, slot: Slot<'a>, deadline: Option<Instant>) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.admit_then(slot, deadline, None).await?;
            Ok(())
        })
    }

    fn admit_then<'a>(
        &'a self,
        slot: Slot<'a>,
        _: Option<Instant>,
        mut before_release: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>> {
        Box::pin(async move {
            // Sender first, then campaign: the order `Timeline::reserve` locks them in.
            let sender = slot
                .sender
                .map(|(sender, pace)| self.timeline(format!("s{sender}"), pace))
                .transpose()?;
            let campaign = slot
                .campaign
                .map(|(campaign, rate)| self.timeline(format!("c{campaign}"), rate))
                .transpose()?;
            // (Empty, and no allocation, for an unpaced campaign.)
            let paces: Vec<&Timeline> = sender.iter().chain(&campaign).map(Arc::as_ref).collect();
            let sender_gate = slot.sender.map(|(sender, _)| self.sender_gate(sender));
            'slot: loop {
                // Slots are taken once every pause is over: messages held by a pause then
                // leave at the pace from its end, not together the moment it lifts.
                while let Some(until) = self.paused_until(sender_gate.as_deref()) {
                    tokio::time::sleep_until(until.into()).await;
                }
                if paces.is_empty() {
                    if let Some(step) = before_release.take() {
                        step.await;
                    }
                    return Ok(Departure::default());
                }
                // The slot is reserved now and waited for: a late wake-up delays this send
                // only, not the slots after it (see `timeline.rs`).
                let due = Timeline::reserve(&paces, tokio::time::Instant::now());
                tokio::time::sleep_until(due).await;
                // Its last step before it leaves (once), then released when it really leaves:
                // the step's delay is a late wake-up like any, kept from crowding a second.
                if let Some(step) = before_release.take() {
                    if !step.await {
                        return Ok(Departure::default());
                    }
                }
                loop {
                    // A pause began while this caller slept: its slot is given up for a new
                    // one after the pause (once the pause outlasts the slots reserved ahead,
                    // the timeline restarts from its end: no burst when it lifts).
                    if self.paused_until(sender_gate.as_deref()).is_some() {
                        continue 'slot;
                    }
                    match Timeline::release(&paces, tokio::time::Instant::now()) {
                        Ok(marks) => {
                            let timelines = sender.iter().chain(&campaign).map(Arc::clone);
                            return Ok(Departure::of(timelines.zip(marks).collect()));
                        }
                        // It would crowd a second with the late sends before it.
                        Err(not_before) => tokio::time::sleep_until(not_before).await,
                    }
                }
            }
        })
    }

    fn pause<'a>(&'a self, scope: Scope<'a>, wait: Duration) -> BoxFuture<'a, Result<()>> {
        match scope {
            Scope::Service => self.service.pause(wait),
            Scope::Sender(sender) => self.sender_gate(sender).pause(wait),
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn space_pair<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
        cap: Duration,
    ) -> BoxFuture<'a, Result<Duration>> {
        let mut pairs = lock(&self.pairs);
        let entry = pairs
            .entry((sender.to_owned(), recipient.to_owned()))
            .or_insert((0, Instant::now()));
        entry.0 = entry.0.saturating_add(1);
        let wait = Duration::from_secs(4u64.saturating_pow(entry.0)).min(cap);
        entry.1 = Instant::now() + wait;
        Box::pin(std::future::ready(Ok(wait)))
    }

    fn pair_wait<'a>(
        &'a self,
        sender: &'a str,
        recipient: &'a str,
    ) -> BoxFuture<'a, Result<Duration>> {
        Box::pin(std::future::ready(Ok(
            self.pair_wait_known(sender, recipient)
        )))
    }

    fn pair_wait_known(&self, sender: &str, recipient: &str) -> Duration {
        lock(&self.pairs)
            .get(&(sender.to_owned(), recipient.to_owned()))
            .map_or(Duration::ZERO, |(_, until)| {
                until.saturating_duration_since(Instant::now())
            })
    }

    fn count_recipients<'a>(
        &'a self,
        account: &'a str,
        limit: u64,
        recipients: &'a [u64],
    ) -> BoxFuture<'a, Result<TierCount>> {
        let mut tiers = lock(&self.tiers);
        let seen = tiers.entry(account.to_owned()).or_default();
        let verdicts = recipients
            .iter()
            .map(|recipient| {
                if seen.contains(recipient) {
                    TierVerdict::Known
                } else if (seen.len() as u64) < limit {
                    seen.insert(*recipient);
                    TierVerdict::New
                } else {
                    // Not kept: memory stays bounded by the largest tier.
                    TierVerdict::Over
                }
            })
            .collect();
        let count = TierCount {
            verdicts,
            unique: seen.len() as u64,
        };
        Box::pin(std::future::ready(Ok(count)))
    }

    fn is_shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use crate::limits::timeline::{busiest_window, SPAN};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::time::Instant as Clock;

    const MS: Duration = Duration::from_millis(1);

    /// `count` messages of `slot`, sent by `callers` tasks at once, each of which spends
    /// `sending` on a message after its slot (its send: on the paused clock, a sleep ends at
    /// the next millisecond tick, so this also makes the next ask land off the timeline).
    /// Calls `then(i)` after the i-th release. The release times, in order.
    async fn campaign(
        limits: &Arc<LocalLimits>,
        slot: Slot<'static>,
        count: usize,
        callers: usize,
        sending: Duration,
        then: impl Fn(usize) + Send + Sync + 'static,
    ) -> Vec<Clock> {
        let taken = Arc::new(AtomicUsize::new(0));
        let releases = Arc::new(Mutex::new(Vec::new()));
        let then = Arc::new(then);
        let tasks: Vec<_> = (0..callers)
            .map(|_| {
                let (limits, taken) = (Arc::clone(limits), Arc::clone(&taken));
                let (releases, then) = (Arc::clone(&releases), Arc::clone(&then));
                tokio::spawn(async move {
                    while taken.fetch_add(1, Ordering::Relaxed) < count {
                        limits.admit(slot, None).await.unwrap();
                        let i = {
                            let mut releases = lock(&releases);
                            releases.push(Clock::now());
                            releases.len() - 1
                        };
                        then(i);
                        if !sending.is_zero() {
                            tokio::time::sleep(sending).await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let releases = lock(&releases).clone();
        releases
    }

    fn local() -> Arc<LocalLimits> {
        Arc::new(LocalLimits::new(Arc::new(Gate::new())))
    }

    const CAMPAIGN: Slot<'static> = Slot {
        sender: None,
        campaign: Some(("c", 1000.0)),
    };

    #[tokio::test(start_paused = true)]
    async fn sends_written_late_after_their_release_never_crowd_a_second() {
        // The first 50 sends are written 8 ms after their release (their tasks waited for a
        // busy core), the others at once. Counted from their release, the sends a pace later
        // would go 1.0025 s after it, 994.5 ms after those writes: 1,000 and more in a second
        // where the service counts them.
        let limits = local();
        let writes = Arc::new(Mutex::new(Vec::new()));
        let released = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..64)
            .map(|_| {
                let (limits, writes) = (Arc::clone(&limits), Arc::clone(&writes));
                let released = Arc::clone(&released);
                tokio::spawn(async move {
                    loop {
                        let departure = limits.admit_then(CAMPAIGN, None, None).await.unwrap();
                        let i = released.fetch_add(1, Ordering::Relaxed);
                        if i >= 2100 {
                            return;
                        }
                        if i < 50 {
                            tokio::time::sleep(8 * MS).await;
                        }
                        departure.left();
                        lock(&writes).push(Clock::now());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let writes = lock(&writes).clone();
        assert_eq!(writes.len(), 2100);
        assert!(
            busiest_window(&writes) <= 1000,
            "{}",
            busiest_window(&writes)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn one_caller_keeps_the_pace_when_every_wake_up_is_late() {
        // Each send takes 0.9 ms before the caller asks again, and each sleep ends on a
        // millisecond tick: a pacer that counts the next slot from the moment its caller came
        // back sends one message every ~2 ms (the old governor-based one did).
        let limits = local();
        let started = Clock::now();
        let releases = campaign(
            &limits,
            CAMPAIGN,
            1001,
            1,
            Duration::from_micros(900),
            |_| {},
        )
        .await;
        // 1,000 periods (a second and the guard, `SPAN`), and the last wake-up's tick.
        let took = releases[1000] - started;
        assert!(took <= SPAN + 2 * MS, "{took:?}");
        assert!(busiest_window(&releases) <= 1000);
    }

    #[tokio::test(start_paused = true)]
    async fn many_callers_keep_a_pace_finer_than_the_timer() {
        // 5,000 a second is a slot every 200 µs: five per tick of the timer.
        let limits = local();
        let slot = Slot {
            sender: Some(("861", 5000.0)),
            campaign: Some(("c", 10_000.0)),
        };
        let started = Clock::now();
        let releases = campaign(
            &limits,
            slot,
            12_001,
            64,
            Duration::from_micros(300),
            |_| {},
        )
        .await;
        let took = *releases.last().unwrap() - started;
        // 12,000 periods of 201 µs, and the last wake-up's tick.
        assert!(took <= SPAN * 12_000 / 5000 + 2 * MS, "{took:?}");
        assert!(
            busiest_window(&releases) <= 5000,
            "{}",
            busiest_window(&releases)
        );
    }

    /// A busy machine, on the paused clock: every few milliseconds, the clock jumps by up to
    /// 12 ms (more than the guard, see `timeline.rs`) in the middle of a tick's wake-ups, so
    /// the callers woken after the jump go late by a different amount each time (on a still
    /// clock, every wake-up is late by the same fraction of a tick, and no window is ever
    /// crowded). Until `done`.
    fn busy_machine(seed: u64, done: Arc<AtomicUsize>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut random = fastrand::Rng::with_seed(seed);
            while done.load(Ordering::Relaxed) == 0 {
                tokio::time::sleep(MS * random.u32(1..5)).await;
                tokio::task::yield_now().await;
                tokio::time::advance(Duration::from_micros(random.u64(1..12_000))).await;
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn no_second_holds_more_than_the_pace_however_late_the_wake_ups() {
        for (rate, callers) in [(80.0, 4), (300.0, 16), (1000.0, 64)] {
            let limits = local();
            let slot = Slot {
                sender: Some(("861", rate)),
                campaign: None,
            };
            let count = 4 * rate as usize + 1;
            let done = Arc::new(AtomicUsize::new(0));
            let machine = busy_machine(rate as u64, Arc::clone(&done));
            let started = Clock::now();
            let sending = Duration::from_micros(1700);
            let releases = campaign(&limits, slot, count, callers, sending, |_| {}).await;
            done.store(1, Ordering::Relaxed);
            machine.await.unwrap();
            let busiest = busiest_window(&releases);
            assert!(busiest <= rate as usize, "{rate}: {busiest}");
            // The lateness is absorbed, not added up: the last send is late by two jumps and
            // ticks at most (a wait in the ring behind a late send, and its own wake-up's), not
            // by the sum of the ~1,000 jumps (seconds).
            let took = *releases.last().unwrap() - started;
            let exact = SPAN.mul_f64((count - 1) as f64 / rate);
            assert!(took <= exact + 30 * MS, "{rate}: {took:?} for {exact:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_slot_until_it_ends_then_the_pace_resumes() {
        for scope in [Scope::Service, Scope::Sender("861")] {
            let limits = local();
            let slot = Slot {
                sender: Some(("861", 100.0)),
                campaign: None,
            };
            // The 10th send's answer pauses for half a second (a 429 with Retry-After).
            let pausing = Arc::clone(&limits);
            let paused_at = Arc::new(Mutex::new(None));
            let noted = Arc::clone(&paused_at);
            let releases = campaign(&limits, slot, 40, 8, MS, move |i| {
                if i == 9 {
                    *lock(&noted) = Some(Clock::now());
                    let pause = pausing.pause(scope, 500 * MS);
                    drop(pause);
                }
            })
            .await;
            let paused_at = lock(&paused_at).unwrap();
            let ends = paused_at + 500 * MS;
            let after: Vec<Clock> = releases
                .iter()
                .copied()
                .filter(|at| *at > paused_at)
                .collect();
            assert_eq!(after.len(), 30, "{scope:?}");
            // Nothing during the pause; after it, the pace from its end, not a burst.
            for (k, at) in after.iter().enumerate() {
                assert!(
                    *at >= ends + SPAN / 100 * k as u32,
                    "{scope:?} {k}: {:?}",
                    *at - ends
                );
            }
            assert!(*after.last().unwrap() <= ends + SPAN / 100 * 29 + 2 * MS);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_gap_brings_no_burst() {
        let limits = local();
        let slot = Slot {
            sender: Some(("861", 100.0)),
            campaign: None,
        };
        campaign(&limits, slot, 10, 1, Duration::ZERO, |_| {}).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        // Five idle seconds later, 20 callers at once: one a period (~10 ms) from now.
        let back = Clock::now();
        let mut releases = campaign(&limits, slot, 20, 20, Duration::ZERO, |_| {}).await;
        releases.sort();
        for (k, at) in releases.iter().enumerate() {
            assert!(*at >= back + SPAN / 100 * k as u32, "{k}: {:?}", *at - back);
        }
    }

    #[tokio::test]
    async fn a_sender_pause_holds_that_sender_only() {
        let limits = LocalLimits::new(Arc::new(Gate::new()));
        limits
            .pause(Scope::Sender("861"), Duration::from_millis(80))
            .await
            .unwrap();
        let started = Instant::now();
        let other = Slot {
            sender: Some(("862", 1000.0)),
            campaign: None,
        };
        limits.admit(other, None).await.unwrap();
        assert!(started.elapsed() < Duration::from_millis(60));
        let held = Slot {
            sender: Some(("861", 1000.0)),
            campaign: None,
        };
        limits.admit(held, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(75));
    }

    #[tokio::test]
    async fn tiers_count_each_recipient_once_and_refuse_past_the_limit() {
        let limits = LocalLimits::new(Arc::new(Gate::new()));
        let count = limits
            .count_recipients("a", 2, &[1, 2, 1, 3])
            .await
            .unwrap();
        assert_eq!(
            count.verdicts,
            [
                TierVerdict::New,
                TierVerdict::New,
                TierVerdict::Known,
                TierVerdict::Over
            ]
        );
        assert_eq!(count.unique, 2);
        let pair = limits
            .space_pair("861", "862", Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(pair, Duration::from_secs(4));
        assert!(limits.pair_wait("861", "862").await.unwrap() > Duration::from_secs(3));
        assert_eq!(
            limits.pair_wait("861", "863").await.unwrap(),
            Duration::ZERO
        );
    }
}
