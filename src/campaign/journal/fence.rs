//! The fence of a run's claims: whether this run may still send the messages it claimed, checked
//! immediately before each request is written (`client/body.rs` asks it as it takes the body).
//!
//! Another run takes over a run's claims once it judges that run dead: its session or lock gone,
//! or its heartbeat older than the run's own lease and a margin (`TAKE_OVER_AFTER`). Nothing
//! tells a frozen run (SIGSTOP, a long GC-like stall, a VM paused) or one whose session was ended
//! under it that this happened, so the run must tell itself. It holds its claims only while:
//! - its journal connection is alive and no journal transaction failed (a session that ended
//!   released its lock: others take its claims at once);
//! - it was never found taken over (its run recorded `lost` by a taker, or a write that found a
//!   row it claimed held by another run);
//! - its last confirmation is recent: the start of the last journal round trip that found it
//!   still `running` (and refreshed its heartbeat) is younger than its window (`window`: half
//!   its lease, at most `WINDOW_CAP`), by a clock of this host that runs on while the process
//!   is frozen and while the machine sleeps (`stamp`). It confirms itself at least every
//!   `heartbeat_every`.
//!
//! The arithmetic: a confirmation that started at T refreshed the heartbeat at a server time no
//! earlier than T; this run stops sending at T + its window. A taker waits until that heartbeat
//! is older than `TAKE_OVER_AFTER` leases (1.25), or, when the run's session is gone (its lock
//! released), older than `SESSION_GRACE`: a session can end without its process knowing (a
//! failover, a connection cut in the middle), and such a run goes on until its window closes.
//! Either wait is longer than the window, whatever the two hosts' clocks say (each compares
//! times from one clock only; a step of the database server's own clock is not covered). A
//! taker marks the run it takes over `lost` in the same transaction, under the run's row lock,
//! so a holder's later round trip cannot confirm it. A run whose round trips stop answering
//! for `TAKE_OVER_AFTER` leases (its journal hung) takes itself for lost; a run that was only
//! frozen waits for its next round trip to say whether it was taken over (`valid`).
//!
//! The fence is the second of two guards. The first is the journal itself: a message's request
//! is written only after this run recorded its row `dispatched`, in a write made only while the
//! run still holds the row `claimed` (`JournalStore::dispatch`), and committed. A taker takes a
//! `claimed` row as never sent, a `dispatched` one only in doubt. In each case above:
//! - a frozen run: if its dispatch committed before the taker's claim, the taker finds the row
//!   `dispatched` (in doubt: it re-sends it only with `resend_unknown`, with the recorded key).
//!   If the taker's claim committed first (it changed the row's holder, and recorded the run
//!   `lost`, under the run's row lock), the resumed run's dispatch finds the row held by
//!   another (its holder is checked in the same UPDATE, on the row's newest version) and is
//!   not made: the message is not sent, and the run stops. Only a request whose dispatch had
//!   committed before the freeze can still leave after a take-over: it is in doubt for the
//!   taker, and goes out with its recorded key;
//! - a session that ended: a dispatch needs a commit on the run's session, so once that session
//!   is gone the run's `claimed` rows can never become `dispatched` by it (they are taken, after
//!   the grace, as never sent); its `dispatched` rows are in doubt, as before, and the fence
//!   stops what was dispatched before the session ended from being written after its window;
//! - a lease judged by another run: as for a frozen run (the taker judges by the run's own lease
//!   and records it `lost` first).
//!
//! No client-side fence is perfect: a process frozen between the check and its write (a few
//! microseconds apart) still writes once when it resumes, with the message's recorded key; its
//! row is `dispatched`, so a taker found it in doubt. The service's `Idempotency-Key`
//! deduplication is the last fence (docs/operations.md).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Now, in nanoseconds of a clock that runs on while this process is frozen and while the
/// machine is suspended: a laptop that slept through another run's take-over must find its
/// confirmation as old as it is. Linux's `CLOCK_BOOTTIME`, macOS's `CLOCK_MONOTONIC` (which
/// counts sleep there); elsewhere the monotonic clock of `Instant` (which may not count a
/// suspend: docs/campaigns.md says so).
pub fn stamp() -> u64 {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "macos"))]
    {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let clock = libc::CLOCK_BOOTTIME;
        #[cfg(target_os = "macos")]
        let clock = libc::CLOCK_MONOTONIC;
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given, which lives here.
        if unsafe { libc::clock_gettime(clock, &mut now) } == 0 {
            let seconds = u64::try_from(now.tv_sec).unwrap_or_default();
            let nanos = u64::try_from(now.tv_nsec).unwrap_or_default();
            return seconds.saturating_mul(1_000_000_000).saturating_add(nanos);
        }
    }
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    nanos(ORIGIN.get_or_init(Instant::now).elapsed())
}

use tokio::sync::Notify;

/// The share of its own lease a run goes on sending after its last confirmation...
pub const HOLDER_SHARE: f64 = 0.5;
/// ... and at most this long (what a taker waits for a run whose session is gone).
pub const WINDOW_CAP: Duration = Duration::from_secs(2);
/// How many of a run's own leases its heartbeat must be older than before another run takes
/// its claims over.
pub const TAKE_OVER_AFTER: f64 = 1.25;
/// How old the heartbeat of a run whose session is gone must be before another run takes its
/// claims over: longer than any window (`WINDOW_CAP`), with room for a heartbeat's round trip.
/// (In SQL as `interval '5 seconds'`, `postgres/schema.rs`.)
pub const SESSION_GRACE: Duration = Duration::from_secs(5);

/// How long after a confirmation a run with `lease` may send.
pub fn window(lease: Duration) -> Duration {
    lease.mul_f64(HOLDER_SHARE).min(WINDOW_CAP)
}

/// How often a run confirms its claims when it has nothing else to write: well within its
/// window (a slow campaign never waits for a confirmation).
pub fn heartbeat_every(lease: Duration) -> Duration {
    (window(lease) / 4).max(Duration::from_millis(50))
}

/// Why a run may not send now.
#[derive(Clone, Debug, PartialEq)]
pub enum Unfenced {
    /// For good: its claims may be another run's by now.
    Lost(String),
    /// Until its journal confirms its claims again (its last confirmation is this old).
    Stale(Duration),
}

impl std::fmt::Display for Unfenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unfenced::Lost(reason) => write!(f, "this run no longer holds its claims: {reason}"),
            Unfenced::Stale(age) => write!(f, "{STALE} for {:.1}s", age.as_secs_f64()),
        }
    }
}

/// How a refusal for a fence only stale begins (`Unfenced::Stale`): a send refused so, whose
/// fence a round trip confirmed meanwhile, is sent again, never reported failed.
pub const STALE: &str = "this run's journal has not confirmed its claims";

/// One run's fence, shared by its journal (which confirms or loses it) and its sends.
#[derive(Debug)]
pub struct ClaimFence {
    /// When the last confirming round trip started (`stamp`).
    confirmed: AtomicU64,
    /// How long after a confirmation the run may send.
    window: Duration,
    lost: OnceLock<String>,
    /// Woken at each confirmation and at the loss.
    changed: Notify,
}

impl ClaimFence {
    /// The fence of a run with `lease`, confirmed by a round trip that started at `confirmed`
    /// (`stamp`).
    pub fn new(lease: Duration, confirmed: u64) -> Self {
        let fence = ClaimFence {
            confirmed: AtomicU64::new(0),
            window: window(lease),
            lost: OnceLock::new(),
            changed: Notify::new(),
        };
        fence.confirm(confirmed);
        fence
    }

    /// A round trip that started at `started` (`stamp`) found the run still holding its
    /// claims.
    pub fn confirm(&self, started: u64) {
        self.confirmed.fetch_max(started, Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    /// The run lost its claims, for good (the first reason is kept).
    pub fn lose(&self, reason: impl Into<String>) {
        let reason = reason.into();
        if self.lost.set(reason.clone()).is_ok() {
            log::error!(
                target: "bizmsg",
                stop_reason = reason.as_str();
                "campaign journal: this run stops sending: {reason}"
            );
        }
        self.changed.notify_waiters();
    }

    pub fn is_lost(&self) -> bool {
        self.lost.get().is_some()
    }

    /// Why the run lost its claims (the first reason), if it did.
    pub fn lost_reason(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// Whether the run may send now.
    pub fn check(&self) -> std::result::Result<(), Unfenced> {
        if let Some(reason) = self.lost.get() {
            return Err(Unfenced::Lost(reason.clone()));
        }
        let confirmed = self.confirmed.load(Ordering::Acquire);
        let age = Duration::from_nanos(stamp().saturating_sub(confirmed));
        if age > self.window {
            return Err(Unfenced::Stale(age));
        }
        Ok(())
    }

    /// Waits while the fence is only stale (a journal round trip is slow, it is waiting for
    /// another run's lock, or the process was frozen): until it is confirmed again, or lost.
    ///
    /// However long ago the last confirmation was, a stale fence is never taken for lost by
    /// itself: a run frozen past its lease that nobody took over (the runs that met its claims
    /// waited, then gave up) would otherwise send none of them, and nobody would. The next
    /// round trip settles it: a taker records the run `lost` in the taking transaction, under
    /// the run's row lock, so a confirmation after a take-over cannot happen. The wait is
    /// bounded by the journal's own: a round trip that never answers loses the fence once
    /// others would take the run over (`Writer::serve`).
    pub async fn valid(&self) -> std::result::Result<(), Unfenced> {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.check() {
                Err(Unfenced::Stale(_)) => {}
                other => return other,
            }
            // A heartbeat comes within a quarter lease when nothing else is written; the timer
            // is only a backstop for a confirmation that raced the registration above.
            let _ = tokio::time::timeout(self.window, changed).await;
        }
    }
}

impl crate::client::SendFence for ClaimFence {
    fn may_send(&self) -> std::result::Result<(), String> {
        self.check().map_err(|unfenced| unfenced.to_string())
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_is_half_the_lease_at_most_two_seconds_with_heartbeats_within_it() {
        assert_eq!(window(Duration::from_secs(300)), WINDOW_CAP);
        assert_eq!(window(Duration::from_secs(3)), Duration::from_millis(1500));
        assert!(heartbeat_every(Duration::from_secs(300)) <= WINDOW_CAP / 4);
        assert!(SESSION_GRACE > WINDOW_CAP * 2);
    }

    #[test]
    fn a_fence_goes_stale_past_its_share_of_the_lease_and_a_loss_is_for_good() {
        let lease = Duration::from_millis(200);
        let fence = ClaimFence::new(lease, stamp());
        assert_eq!(fence.check(), Ok(()));
        std::thread::sleep(Duration::from_millis(130));
        assert!(matches!(fence.check(), Err(Unfenced::Stale(_))));
        fence.confirm(stamp());
        assert_eq!(fence.check(), Ok(()));
        // An older round trip answered late never moves the confirmation back.
        fence.confirm(stamp().saturating_sub(1_000_000_000));
        assert_eq!(fence.check(), Ok(()));
        fence.lose("taken over");
        fence.confirm(stamp());
        assert!(
            matches!(fence.check(), Err(Unfenced::Lost(reason)) if reason == "taken over"),
            "a confirmation after the loss does not restore it"
        );
    }

    #[tokio::test]
    async fn a_stale_fence_waits_for_its_confirmation() {
        let lease = Duration::from_millis(100);
        let fence = std::sync::Arc::new(ClaimFence::new(lease, stamp()));
        tokio::time::sleep(Duration::from_millis(70)).await;
        let confirming = std::sync::Arc::clone(&fence);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            confirming.confirm(stamp());
        });
        assert_eq!(fence.valid().await, Ok(()));
        fence.lose("session ended");
        assert!(matches!(fence.valid().await, Err(Unfenced::Lost(_))));
    }

    #[tokio::test]
    async fn a_fence_stale_past_a_take_over_waits_for_the_journal_to_say_whether_it_was_taken() {
        // Last confirmed 200 ms ago, with a lease of 80 ms (a process frozen meanwhile): others
        // may have taken it over, or not. Only the journal knows: the fence waits for it.
        let confirmed = stamp().saturating_sub(200_000_000);
        let fence = std::sync::Arc::new(ClaimFence::new(Duration::from_millis(80), confirmed));
        let waited = tokio::time::timeout(Duration::from_millis(300), fence.valid()).await;
        assert!(waited.is_err(), "{waited:?}");
        assert!(!fence.is_lost());
        // Nobody took it over: its next round trip confirms it, and it sends on.
        let confirming = std::sync::Arc::clone(&fence);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            confirming.confirm(stamp());
        });
        assert_eq!(fence.valid().await, Ok(()));
        // Taken over: its next round trip loses it.
        let taken = ClaimFence::new(Duration::from_millis(80), confirmed);
        taken.lose("taken over");
        assert!(matches!(taken.valid().await, Err(Unfenced::Lost(_))));
    }
}
