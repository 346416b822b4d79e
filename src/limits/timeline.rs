//! One pace kept in this process on a timeline: slot k of a pace of `r` a second is due at
//! `start + k / r` (GCRA's theoretical arrival time, scheduled rather than checked), and a
//! caller reserves its slot when it asks, then sleeps until the slot's time.
//!
//! Why a timeline: a pacer that computes the next slot from the moment its waiter woke loses
//! every wake-up's lateness for good. Tokio's timer wakes a sleeper up to a millisecond late,
//! so such a pacer at 1,000 a second sends at about half that. On a timeline a late wake-up
//! only delays its own send; the next slots are still due when they were, so the pace is kept
//! whatever the timer's granularity (at 5,000 a second several slots fall in one tick and go
//! together at its end). The shared pacer on Redis works the same way (`redis/scripts.rs`'s
//! RESERVE keeps the sender's and the campaign's `tat` and hands out reserved slots).
//!
//! Three rules on top of the timeline:
//! - **No credit for idleness.** A timeline that fell more than `SLACK` behind the clock
//!   (nobody asked for a while) restarts from now: a long idle gap does not become a burst.
//!   Within `SLACK`, a slot in the past is still given (and goes at once): that is what lets a
//!   caller that asks for its next slot a little late (a late wake-up, the send itself) catch
//!   up instead of losing the difference.
//! - **No one-second window above the pace.** Slots are spaced by the period, but sends go when
//!   their callers wake: a send of slot k late by d and an on-time send of slot k + r would be
//!   r + 1 sends within the second that begins with the first, which the platform counts as
//!   over the pace. So each timeline keeps a ring of its last `most` release times (`most`:
//!   the pace, rounded up when it is not whole), and a send goes at least `APART` (a second
//!   and a little, below) after the send `most` releases before it. On time, the timeline
//!   already spaces them further; the ring only delays a send that would crowd a late one,
//!   and never moves the timeline.
//! - **A send counts from when it really left.** The ring records a send when it is released,
//!   and moves that record to the moment its request is written (`Departure`, from the body's
//!   claim in `client/body.rs`): a send released on time but written late (its task waited
//!   for a busy core, a connection) is then the one the sends `most` after it are kept apart
//!   from. Without it, the client's own delays after the release are only covered by the
//!   guard below: on one core shared with the caller's Python, 2 of 6 campaigns at 5,000 a
//!   second put 5,004 and 5,017 in one second at the service, none of 10 with it. A send
//!   written late takes its place in time among the others, so that the rest leave the ring
//!   as they age and only it is held where it was written.
//! - **A guard for the way there.** The platform (and the sandbox) count sends when they
//!   arrive, and two requests do not take exactly as long to arrive: sends spaced by exactly
//!   a second when they left were seen `r + 1` in one second at the sandbox, at every pace.
//!   So `most` slots of the timeline span a second and `GUARD` (`SPAN`): a pace of `r` runs
//!   at `r / 1.005`, within 1 % of the pace. The ring asks for half the guard
//!   only (`APART`): were it the whole, a send delayed by the ring would be exactly on the
//!   limit for the send `most` after it, which would inherit the delay, plus its own wake-up's
//!   lateness, and so on for good (lateness added up again, along every `most`-th send). With
//!   half, the other half absorbs such a delay within a few seconds. Sends `most` apart
//!   leave at least a second and 2.5 ms apart, 5 ms when on time.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// The span the platform counts a pace over: no window this long holds more than the pace.
const WINDOW: Duration = Duration::from_secs(1);
/// How much longer than `WINDOW` the sends `most` apart are spaced at release, for the
/// difference in their times on the way (see the module's comment).
const GUARD: Duration = Duration::from_millis(5);
/// What `most` periods of a timeline span.
pub(crate) const SPAN: Duration = WINDOW.saturating_add(GUARD);
/// The least time between a send and the send `most` releases before it (see the module's
/// comment for why half the guard).
const APART: Duration = WINDOW.saturating_add(Duration::from_micros(2500));

/// How far behind the clock a timeline may be and still give its past slots. More than the
/// timer's granularity (1 ms) and a wake-up's usual lateness on a busy machine, so that
/// neither costs throughput; small enough that catching up is never a burst worth the name
/// (at most `SLACK × pace` sends at once, then the ring still caps every second).
const SLACK: Duration = Duration::from_millis(10);

/// The slowest pace: one message a day (a campaign slower than this is a mistake).
const LONGEST_PERIOD: Duration = Duration::from_secs(24 * 60 * 60);

/// One pace: `per_second` messages a second, evenly spaced, no burst.
pub struct Timeline {
    per_second: f64,
    /// The spacing of slots, `SPAN / per_second` rounded up to the nanosecond: never faster
    /// than asked.
    period: Duration,
    /// The most sends of this pace within `APART` (and so within any second): `per_second`
    /// when it is whole; for a fractional rate, its ceiling (3 for 2.5 a second: what even
    /// spacing gives; the platform's paces are whole).
    most: usize,
    state: Mutex<State>,
}

struct State {
    /// When the next slot is due; `None` before the first.
    next: Option<Instant>,
    /// The last sends within `APART`, each with its mark (`release`), in the order of their
    /// times, at most `most`: a send's time is its release, moved to when its request was
    /// written once known (`left`), so the oldest is always first and the count exact however
    /// late one was written (an entry moved in place would keep the older ones behind it, and
    /// a write a second late would hold the campaign for that second).
    released: VecDeque<(Instant, u64)>,
    /// The mark of the next send released: the sends ever released.
    next_mark: u64,
}

impl Timeline {
    pub fn new(per_second: f64) -> Result<Self> {
        check_rate(per_second)?;
        // In range by check_rate: between one a day (1.2e-5) and about 1e9 a second.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let (nanos, most) = (
            (SPAN.as_nanos() as f64 / per_second).ceil() as u64,
            per_second.ceil() as usize,
        );
        Ok(Timeline {
            per_second,
            period: Duration::from_nanos(nanos.max(1)),
            most: most.max(1),
            state: Mutex::new(State {
                next: None,
                released: VecDeque::new(),
                next_mark: 0,
            }),
        })
    }

    /// The pace, in messages per second.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Reserves the next slot common to every timeline of `paces` (a sender's pace and a
    /// campaign's rate: one send takes a slot of each) and returns when it is due: the latest
    /// of their next slots, each restarted from `now` if it fell more than `SLACK` behind.
    /// Each timeline's next slot is then a period after it, as the shared store's RESERVE does.
    ///
    /// `paces` must always be given in the same order (sender, then campaign): their locks are
    /// taken in that order.
    pub fn reserve(paces: &[&Timeline], now: Instant) -> Instant {
        let mut states: Vec<MutexGuard<'_, State>> = paces.iter().map(|t| t.lock()).collect();
        let due = states
            .iter()
            .map(|state| match state.next {
                Some(next) if next + SLACK >= now => next,
                // Behind by more than SLACK (idle), or the first slot: from now.
                _ => now,
            })
            .max()
            .unwrap_or(now);
        for (timeline, state) in paces.iter().zip(states.iter_mut()) {
            state.next = Some(due + timeline.period);
        }
        due
    }

    /// Releases one send of every timeline of `paces` at `now` if no window would then hold
    /// more than its pace, records it and returns its mark in each (for `left`, in `paces`'
    /// order); else records nothing and returns when it may go (the moment `APART` has passed
    /// since the send `most` releases before).
    pub fn release(paces: &[&Timeline], now: Instant) -> std::result::Result<Vec<u64>, Instant> {
        let mut states: Vec<MutexGuard<'_, State>> = paces.iter().map(|t| t.lock()).collect();
        let mut not_before = None;
        for (timeline, state) in paces.iter().zip(states.iter_mut()) {
            // A send a full APART ago or more shares no window with one now (the windows a
            // platform or the sandbox counts are half-open: `[t, t + 1 s)`).
            while state
                .released
                .front()
                .is_some_and(|(first, _)| now.saturating_duration_since(*first) >= APART)
            {
                state.released.pop_front();
            }
            if state.released.len() >= timeline.most {
                // Full: the oldest is exactly `most` sends before this one.
                if let Some((oldest, _)) = state.released.front() {
                    let at = *oldest + APART;
                    not_before = Some(not_before.map_or(at, |other: Instant| other.max(at)));
                }
            }
        }
        if let Some(at) = not_before {
            return Err(at);
        }
        Ok(states
            .iter_mut()
            .map(|state| {
                let mark = state.next_mark;
                state.next_mark += 1;
                // In its place in time (a write told a moment ago may be later than `now`).
                let at = state.released.partition_point(|(time, _)| *time <= now);
                state.released.insert(at, (now, mark));
                mark
            })
            .collect())
    }

    /// The send of `mark` (`release`) was written at `at`: its record moves there, if later,
    /// and takes its place in time. (Found from the newest: a send is told when written, so
    /// only the sends released while it was on its way are passed. A send no longer kept,
    /// its release more than `APART` ago, is not recorded again.)
    pub fn left(&self, mark: u64, at: Instant) {
        let mut state = self.lock();
        let released = &mut state.released;
        let Some(index) = released.iter().rposition(|(_, kept)| *kept == mark) else {
            return;
        };
        if released.get(index).is_some_and(|(time, _)| *time < at) {
            released.remove(index);
            let place = released.partition_point(|(time, _)| *time <= at);
            released.insert(place, (at, mark));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }
}

/// How long `count` messages take at a pace of `per_second` on a timeline: the first goes at
/// once, each next one a period later (`plan()`'s estimate, as the campaign will pace them).
pub fn duration_of(count: u64, per_second: f64) -> Duration {
    if count == 0 || !per_second.is_finite() || per_second <= 0.0 {
        return Duration::ZERO;
    }
    // Counts and paces far below f64's exact range (2^53).
    #[allow(clippy::cast_precision_loss)]
    let periods = (count - 1) as f64;
    Duration::try_from_secs_f64(periods * SPAN.as_secs_f64() / per_second).unwrap_or(Duration::MAX)
}

/// Checks a rate (`rate_limit=`, or a pace): a positive number of messages per second, at
/// least one a day, at most about one a nanosecond.
pub fn check_rate(per_second: f64) -> Result<()> {
    if !per_second.is_finite() || per_second <= 0.0 {
        return Err(Error::validation(
            "rate_limit",
            format!("must be a positive number of messages per second, got {per_second}"),
        ));
    }
    Duration::try_from_secs_f64(1.0 / per_second)
        .ok()
        .filter(|period| !period.is_zero() && *period <= LONGEST_PERIOD)
        .ok_or_else(|| {
            Error::validation(
                "rate_limit",
                format!(
                    "{per_second:e} per second is out of range (at least one message a day, \
                     1/86400)"
                ),
            )
        })?;
    Ok(())
}

/// The most of `releases` within any half-open window `[t, t + 1 s)`, as the sandbox counts.
#[cfg(test)]
pub(crate) fn busiest_window(releases: &[Instant]) -> usize {
    let mut sorted = releases.to_vec();
    sorted.sort();
    let mut busiest = 0;
    let mut first = 0;
    for (last, at) in sorted.iter().enumerate() {
        while sorted
            .get(first)
            .is_some_and(|oldest| at.saturating_duration_since(*oldest) >= WINDOW)
        {
            first += 1;
        }
        busiest = busiest.max(last + 1 - first);
    }
    busiest
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// One caller sending in turn: it asks for a slot at `asks`, wakes `late` after the slot,
    /// is released (or waits for the ring), and asks again at once. The release times.
    fn one_caller(
        pace: &Timeline,
        sends: usize,
        mut asks: Instant,
        late: Duration,
    ) -> Vec<Instant> {
        let mut releases = Vec::new();
        for _ in 0..sends {
            let due = Timeline::reserve(&[pace], asks);
            let mut now = due.max(asks) + late;
            while let Err(at) = Timeline::release(&[pace], now) {
                assert!(at > now);
                now = at;
            }
            releases.push(now);
            asks = now;
        }
        releases
    }

    #[test]
    fn late_wake_ups_are_absorbed_and_cost_no_throughput() {
        // Every wake-up 0.9 ms late: a pacer that counted from the wake-up would take 1.9 s.
        let pace = Timeline::new(1000.0).unwrap();
        assert_eq!(pace.period, Duration::from_nanos(1_005_000));
        let start = Instant::now();
        let releases = one_caller(&pace, 1001, start, Duration::from_micros(900));
        // 1,000 periods: a second and the guard, and the last wake-up's lateness.
        let took = releases[1000] - start;
        assert!(took <= SPAN + MS, "{took:?}");
        assert!(busiest_window(&releases) <= 1000);
    }

    #[test]
    fn a_late_send_does_not_crowd_the_next_second() {
        let pace = Timeline::new(10.0).unwrap();
        let start = Instant::now();
        // Slot 0 goes 8 ms late, slots 1..=10 on time: slot 10 (due 1.005 s after slot 0)
        // would be within 1 s and the guard of slot 0's send, the 11th there.
        let mut releases = Vec::new();
        for k in 0..=10u32 {
            let due = Timeline::reserve(&[&pace], start);
            assert_eq!(due, start + pace.period * k);
            let late = if k == 0 { 8 * MS } else { Duration::ZERO };
            let mut now = due + late;
            if let Err(at) = Timeline::release(&[&pace], now) {
                assert_eq!(k, 10);
                now = at;
                Timeline::release(&[&pace], now).unwrap();
            }
            releases.push(now);
        }
        assert_eq!(releases[10], releases[0] + APART);
        assert_eq!(busiest_window(&releases), 10);
        // The timeline did not move: slot 11 is still due 11 periods after slot 0.
        assert_eq!(Timeline::reserve(&[&pace], start), start + pace.period * 11);
    }

    #[test]
    fn a_send_written_late_is_counted_from_when_it_was_written() {
        // Slot 0 released on time, but its request written 8 ms later (its task waited for a
        // core): slot 10, due 1.005 s after slot 0 and so 997 ms after its write, would be the
        // 11th within a second at the service. Counted from the write, it waits.
        let pace = Timeline::new(10.0).unwrap();
        let start = Instant::now();
        let mut marks = Vec::new();
        for k in 0..10u32 {
            let due = Timeline::reserve(&[&pace], start);
            marks.push(Timeline::release(&[&pace], due).unwrap()[0]);
            if k == 0 {
                pace.left(marks[0], due + 8 * MS);
            }
        }
        assert_eq!(marks, (0..10).collect::<Vec<u64>>());
        let due = Timeline::reserve(&[&pace], start);
        assert_eq!(due, start + pace.period * 10);
        assert_eq!(
            Timeline::release(&[&pace], due),
            Err(start + 8 * MS + APART)
        );
        // Written earlier than released is no record: a send counts from the later of the two.
        pace.left(marks[1], start);
        assert_eq!(pace.lock().released[1], (start + pace.period, 1));
        let at = start + 8 * MS + APART;
        assert_eq!(Timeline::release(&[&pace], at), Ok(vec![10]));
        // Marks go on past the dropped entries; a dropped one's write changes nothing.
        let later = at + Duration::from_secs(5);
        assert_eq!(Timeline::release(&[&pace], later), Ok(vec![11]));
        pace.left(marks[0], later);
        assert_eq!(pace.lock().released.len(), 1);
        pace.left(11, later + MS);
        assert_eq!(pace.lock().released.front(), Some(&(later + MS, 11)));
    }

    #[test]
    fn a_send_written_very_late_holds_back_no_other() {
        // Found in review: send #10 of a pace of 100 written 900 ms late, recorded in place,
        // kept every older send in the ring behind it, and the campaign waited for it. It takes
        // its place in time: the others leave the ring as they age, and only it is counted
        // where it was written.
        let pace = Timeline::new(100.0).unwrap();
        let start = Instant::now();
        let mut releases = Vec::new();
        for k in 0..400u32 {
            let due = Timeline::reserve(&[&pace], start);
            assert_eq!(due, start + pace.period * k);
            let mut now = due;
            let mark = loop {
                match Timeline::release(&[&pace], now) {
                    Ok(marks) => break marks[0],
                    Err(at) => now = at,
                }
            };
            releases.push(now);
            if k == 10 {
                pace.left(mark, now + 900 * MS);
            }
        }
        // Each send on time, or held a few milliseconds while that one's place is counted where
        // it was written (the sends a pace after its release would be the 101st in a second).
        for (k, released) in releases.iter().enumerate() {
            let due = start + pace.period * u32::try_from(k).unwrap();
            assert!(
                *released - due <= 8 * MS,
                "send {k} held {:?}",
                *released - due
            );
        }
        let mut counted = releases.clone();
        counted[10] += 900 * MS;
        assert!(busiest_window(&counted) <= 100);
    }

    #[test]
    fn an_idle_timeline_restarts_from_now_without_credit() {
        let pace = Timeline::new(100.0).unwrap();
        let start = Instant::now();
        one_caller(&pace, 5, start, Duration::ZERO);
        // Five seconds idle, then many callers ask at once: spaced from now, not 500 at once.
        let back = start + Duration::from_secs(5);
        let dues: Vec<Instant> = (0..20).map(|_| Timeline::reserve(&[&pace], back)).collect();
        for (k, due) in dues.iter().enumerate() {
            assert_eq!(*due, back + pace.period * u32::try_from(k).unwrap());
        }
        // Within SLACK, a past slot is still given: a caller a little late catches up.
        let pace = Timeline::new(100.0).unwrap();
        assert_eq!(Timeline::reserve(&[&pace], start), start);
        assert_eq!(
            Timeline::reserve(&[&pace], start + 15 * MS),
            start + pace.period
        );
        assert_eq!(
            Timeline::reserve(&[&pace], start + 40 * MS),
            start + 40 * MS
        );
    }

    #[test]
    fn a_sender_and_a_campaign_share_each_slot() {
        let sender = Timeline::new(100.0).unwrap();
        let campaign = Timeline::new(50.0).unwrap();
        let start = Instant::now();
        let dues: Vec<Instant> = (0..4)
            .map(|_| Timeline::reserve(&[&sender, &campaign], start))
            .collect();
        // The slower one sets the pace; neither is ever earlier than its own timeline.
        assert_eq!(dues, [0, 1, 2, 3].map(|k| start + campaign.period * k));
        // A fractional rate: 2.5 a second is a slot every 402 ms, at most 3 in a second.
        let slow = Timeline::new(2.5).unwrap();
        assert_eq!((slow.period, slow.most), (402 * MS, 3));
        assert_eq!(Timeline::new(1000.0).unwrap().most, 1000);
        assert_eq!(Timeline::new(3.0).unwrap().most, 3);
    }

    #[test]
    fn rates_out_of_range_are_refused() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1.0 / 100_000.0] {
            assert!(check_rate(rate).is_err(), "{rate}");
            assert!(Timeline::new(rate).is_err(), "{rate}");
        }
        assert!(check_rate(1.0 / 3600.0).is_ok() && check_rate(1e9).is_ok());
    }
}
