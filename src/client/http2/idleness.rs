//! How long the HTTP/2 transport's connection had been idle when a call went out on it (reqwest
//! keeps the connection; bizmsg sees the calls, and counts the connections reqwest opens).
//!
//! An HTTP/2 connection carries every call at once, so it is idle exactly while no call is in
//! flight. A call that begins with none in flight wakes it after the idleness since the last
//! call ended; the calls begun within `JOIN_WITHIN` after it go out on the same wake-up (a
//! burst) and share its idleness. Once any call got an answer's head the connection is known to
//! be alive, and no call of the burst counts as sent into a closing connection any more. A
//! connection opened since the burst began (reqwest had given the idle one up, or a `GOAWAY`
//! retired it) means the burst's calls may be on a new connection: no longer a wake-up of an
//! idle one. (A call begun later, while the burst's streams are open, is not: a server's idle
//! timer does not run while a stream is open.)
//!
//! What it is for: a server that closes idle connections on its own timer (HAProxy, a load
//! balancer) may do so as a burst's streams go out. Its close does not wait for them: they fail
//! with a broken pipe before any answer, and each send's outcome is unknown. The transport
//! learns from such a failure (`IdleLimit`), and starts a burst that comes after more idleness
//! than it learned on a new connection instead.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::client::idle_limit::millis;

/// How soon after a burst's first call the others must begin to share its wake-up: the calls of
/// an `asyncio.gather` or a campaign's window all begin within a few milliseconds.
const JOIN_WITHIN: Duration = Duration::from_millis(50);

#[derive(Debug)]
pub(super) struct Idleness {
    since: Instant,
    /// Connections the client set out to open (`CountConnections`).
    opened: AtomicU64,
    /// Read and changed together by calls on several threads at once: behind one lock (held
    /// for a few instructions; this transport is not on the hot path).
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    in_flight: usize,
    /// When (ms after `since`) the last call ended.
    last_ended: Option<u64>,
    /// The current burst's wake-up of an idle connection.
    wake: Option<Wake>,
}

#[derive(Clone, Copy, Debug)]
struct Wake {
    idle: Duration,
    /// `opened` when the burst began.
    opened: u64,
    /// When (ms after `since`) the burst began.
    at: u64,
}

impl Default for Idleness {
    fn default() -> Self {
        Idleness {
            since: Instant::now(),
            opened: AtomicU64::new(0),
            state: Mutex::new(State::default()),
        }
    }
}

/// A call in flight on the connection. Dropped when the call ends (answered or not, or
/// cancelled), so a cancelled call never leaves the connection looking busy.
pub(super) struct InFlight<'a> {
    idleness: &'a Idleness,
    wake: Option<Wake>,
}

impl InFlight<'_> {
    /// The call got an answer's head: the connection is alive, and the calls begun after this
    /// were not sent into a closing one.
    pub(super) fn answered(&mut self) {
        self.wake = None;
        self.idleness.state().wake = None;
    }

    /// How long the connection had been idle when this call's burst woke it, if the call went
    /// out on that connection: none was opened since, and no call of the burst was answered.
    pub(super) fn woken_after(&self) -> Option<Duration> {
        let wake = self.wake?;
        // While this call is in flight no other burst can begin: a wake-up there is this one's.
        let unanswered = self.idleness.state().wake.is_some();
        let same_connection = self.idleness.opened.load(Ordering::Acquire) == wake.opened;
        (unanswered && same_connection).then_some(wake.idle)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let now = self.idleness.now();
        let mut state = self.idleness.state();
        state.last_ended = Some(now);
        state.in_flight = state.in_flight.saturating_sub(1);
    }
}

impl Idleness {
    /// How long the connection has been idle, if no call is in flight and one ever ended.
    pub(super) fn idle_now(&self) -> Option<Duration> {
        let now = self.now();
        let state = self.state();
        if state.in_flight > 0 {
            return None;
        }
        state
            .last_ended
            .map(|ended| Duration::from_millis(now.saturating_sub(ended)))
    }

    /// A call begins on the connection.
    pub(super) fn begin(&self) -> InFlight<'_> {
        let now = self.now();
        let opened = self.opened.load(Ordering::Acquire);
        let mut state = self.state();
        if state.in_flight == 0 {
            state.wake = state.last_ended.map(|ended| Wake {
                idle: Duration::from_millis(now.saturating_sub(ended)),
                opened,
                at: now,
            });
        }
        state.in_flight += 1;
        let joins = |wake: &Wake| now.saturating_sub(wake.at) <= millis(JOIN_WITHIN);
        InFlight {
            idleness: self,
            wake: state.wake.filter(joins),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Nothing panics under it; were it poisoned, its few fields are still consistent.
        crate::sync::lock(&self.state)
    }

    fn now(&self) -> u64 {
        millis(self.since.elapsed())
    }
}

/// A layer of reqwest's connector that counts the connections it sets out to open.
#[derive(Clone)]
pub(super) struct CountConnections(pub(super) Arc<Idleness>);

impl<S> tower::Layer<S> for CountConnections {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            idleness: self.0.clone(),
        }
    }
}

#[derive(Clone)]
pub(super) struct Counted<S> {
    inner: S,
    idleness: Arc<Idleness>,
}

impl<S, R> tower::Service<R> for Counted<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> S::Future {
        self.idleness.opened.fetch_add(1, Ordering::AcqRel);
        self.inner.call(request)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// As if the last call had ended `millis` ago.
    fn idle_for(idleness: &Idleness, millis: u64) {
        let ended = idleness.now().checked_sub(millis).unwrap();
        idleness.state().last_ended = Some(ended);
    }

    fn long_lived() -> Idleness {
        Idleness {
            since: Instant::now().checked_sub(Duration::from_secs(10)).unwrap(),
            ..Idleness::default()
        }
    }

    #[test]
    fn a_new_connections_first_burst_is_no_wake_up() {
        let idleness = Idleness::default();
        assert_eq!(idleness.idle_now(), None);
        let first = idleness.begin();
        let second = idleness.begin();
        assert_eq!((first.woken_after(), second.woken_after()), (None, None));
        assert_eq!(idleness.idle_now(), None, "calls in flight: not idle");
    }

    #[test]
    fn a_burst_after_idleness_shares_it_until_a_call_is_answered() {
        let idleness = long_lived();
        idle_for(&idleness, 900);
        assert!(idleness.idle_now().unwrap() >= Duration::from_millis(900));
        let mut first = idleness.begin();
        let second = idleness.begin();
        assert!(first.woken_after().unwrap() >= Duration::from_millis(900));
        assert_eq!(second.woken_after(), first.woken_after());
        first.answered();
        assert_eq!(first.woken_after(), None);
        assert_eq!(
            second.woken_after(),
            None,
            "the connection answered another call"
        );
        drop(first);
        // The connection answered: later calls of the burst were not sent into a close.
        assert_eq!(idleness.begin().woken_after(), None);
        drop(second);
    }

    #[test]
    fn a_connection_opened_since_the_burst_began_is_no_wake_up() {
        let idleness = long_lived();
        idle_for(&idleness, 900);
        let call = idleness.begin();
        assert!(call.woken_after().is_some());
        // reqwest had given the idle connection up and opens another for this call.
        idleness.opened.fetch_add(1, Ordering::AcqRel);
        assert_eq!(call.woken_after(), None);
    }

    #[test]
    fn a_call_begun_long_after_the_wake_up_does_not_share_it() {
        let idleness = long_lived();
        idle_for(&idleness, 900);
        let first = idleness.begin();
        assert!(first.woken_after().is_some());
        // As if the burst had begun longer ago than JOIN_WITHIN.
        if let Some(wake) = idleness.state().wake.as_mut() {
            wake.at = wake.at.saturating_sub(millis(JOIN_WITHIN) + 1);
        }
        assert_eq!(idleness.begin().woken_after(), None);
        assert!(first.woken_after().is_some());
    }

    #[test]
    fn a_cancelled_call_leaves_the_connection_idle_again() {
        let idleness = Idleness::default();
        let call = idleness.begin();
        assert_eq!(idleness.idle_now(), None);
        drop(call);
        assert_eq!(idleness.state().in_flight, 0);
        assert!(idleness.idle_now().is_some());
    }

    #[tokio::test]
    async fn the_layer_counts_each_connection_it_is_asked_for() {
        use tower::{Layer, Service};
        let idleness = Arc::new(Idleness::default());
        let mut service =
            CountConnections(idleness.clone()).layer(tower::service_fn(|n: u32| async move {
                Ok::<_, std::convert::Infallible>(n)
            }));
        assert_eq!(service.call(7).await.unwrap(), 7);
        assert_eq!(service.call(8).await.unwrap(), 8);
        assert_eq!(idleness.opened.load(Ordering::Acquire), 2);
    }
}
