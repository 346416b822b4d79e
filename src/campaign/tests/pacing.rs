//! A campaign's pacing against the send itself: a pair spaced while a message waits for its
//! slot is waited for before it is sent; a retry whose slot the store cannot give is not made.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::*;
use crate::campaign::handle::Control;
use crate::campaign::journal::{stamp, Claim, ClaimFence, Claimed, JournalStore, Row};
use crate::campaign::send::{send_one, Context, Finished, Ready};
use crate::campaign::Identity;
use crate::error::{Error, Result};
use crate::limits::{Departure, LimitsStore, Scope, Slot, TierCount};

/// A shared store that answers from a script: the n-th slot asked for (`slot`: a wait, or a
/// failure), the n-th pair check (`pair`: how long the pair is spaced). It records what the
/// send asked of it.
struct Scripted {
    slot: fn(usize) -> Result<Duration>,
    pair: fn(usize) -> Duration,
    asked: Mutex<Vec<&'static str>>,
    slots: AtomicUsize,
    pair_checks: AtomicUsize,
    /// Connections opened to the service so far, when the test counts them.
    connections: Mutex<Option<Arc<AtomicUsize>>>,
    /// Slots still to say their request is too late to be written (`missing_slots`).
    to_miss: AtomicUsize,
    /// Every other slot's request must be made within this of its release (`bounded`).
    bound: Mutex<Option<Duration>>,
}

impl Scripted {
    fn new(slot: fn(usize) -> Result<Duration>, pair: fn(usize) -> Duration) -> Arc<Self> {
        Arc::new(Scripted {
            slot,
            pair,
            asked: Mutex::new(Vec::new()),
            slots: AtomicUsize::new(0),
            pair_checks: AtomicUsize::new(0),
            connections: Mutex::new(None),
            to_miss: AtomicUsize::new(0),
            bound: Mutex::new(None),
        })
    }

    /// Its first `slots` say their request must have been written already (as when the
    /// sender's process was not scheduled for a while after the slot's time).
    fn missing_slots(self: Arc<Self>, slots: usize) -> Arc<Self> {
        self.to_miss.store(slots, Ordering::SeqCst);
        self
    }

    /// Notes, with each slot, whether a connection to the service was open by then (of those
    /// `connections` counts).
    fn watching(self: Arc<Self>, connections: Arc<AtomicUsize>) -> Arc<Self> {
        *self.connections.lock().unwrap() = Some(connections);
        self
    }

    /// Its slots' requests must be made within `bound` of their release, as a shared slot's
    /// must be within a few milliseconds of its time.
    fn bounded(self: Arc<Self>, bound: Duration) -> Arc<Self> {
        *self.bound.lock().unwrap() = Some(bound);
        self
    }

    fn note(&self, what: &'static str) {
        self.asked.lock().unwrap().push(what);
    }

    /// The scripted wait of the next pair check, noted as read from the store or (`known`)
    /// from this process's copy.
    fn pair_check(&self, known: bool) -> Duration {
        let wait = (self.pair)(self.pair_checks.fetch_add(1, Ordering::SeqCst));
        self.note(match (wait.is_zero(), known) {
            (true, false) => "pair free",
            (false, false) => "pair spaced",
            (true, true) => "pair free (known)",
            (false, true) => "pair spaced (known)",
        });
        wait
    }
}

impl LimitsStore for Scripted {
    fn admit<'a>(
        &'a self,
        _slot: Slot<'a>,
        _deadline: Option<std::time::Instant>,
    ) -> BoxFuture<'a, Result<()>> {
        let answer = (self.slot)(self.slots.fetch_add(1, Ordering::SeqCst));
        let watched = self.connections.lock().unwrap().clone();
        if let (Ok(wait), Some(connections)) = (&answer, watched) {
            // Noted at the slot's time, when its request may be written: a connection opened
            // before the slot was taken has been counted by then.
            let wait = *wait;
            return Box::pin(async move {
                tokio::time::sleep(wait).await;
                self.note(match connections.load(Ordering::SeqCst) {
                    0 => "slot, no connection open",
                    _ => "slot, a connection open",
                });
                Ok(())
            });
        }
        self.note(if answer.is_ok() { "slot" } else { "no slot" });
        Box::pin(async move {
            tokio::time::sleep(answer?).await;
            Ok(())
        })
    }
    fn admit_then<'a>(
        &'a self,
        slot: Slot<'a>,
        deadline: Option<std::time::Instant>,
        before_release: Option<BoxFuture<'a, bool>>,
    ) -> BoxFuture<'a, Result<Departure>> {
        Box::pin(async move {
            self.admit(slot, deadline).await?;
            if let Some(step) = before_release {
                if !step.await {
                    return Ok(Departure::default());
                }
            }
            let missed = self
                .to_miss
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                    left.checked_sub(1)
                })
                .is_ok();
            let bound = *self.bound.lock().unwrap();
            Ok(if missed {
                let past = tokio::time::Instant::now() - Duration::from_millis(1);
                Departure::written_by(past)
            } else if let Some(bound) = bound {
                Departure::written_by(tokio::time::Instant::now() + bound)
            } else {
                Departure::default()
            })
        })
    }
    fn pause<'a>(&'a self, _scope: Scope<'a>, _wait: Duration) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn space_pair<'a>(
        &'a self,
        _sender: &'a str,
        _recipient: &'a str,
        _cap: Duration,
    ) -> BoxFuture<'a, Result<Duration>> {
        Box::pin(std::future::ready(Ok(Duration::ZERO)))
    }
    fn pair_wait<'a>(
        &'a self,
        _sender: &'a str,
        _recipient: &'a str,
    ) -> BoxFuture<'a, Result<Duration>> {
        Box::pin(std::future::ready(Ok(self.pair_check(false))))
    }
    fn pair_wait_known(&self, _sender: &str, _recipient: &str) -> Duration {
        self.pair_check(true)
    }
    fn count_recipients<'a>(
        &'a self,
        _account: &'a str,
        _limit: u64,
        _recipients: &'a [u64],
    ) -> BoxFuture<'a, Result<TierCount>> {
        Box::pin(std::future::ready(Ok(TierCount {
            verdicts: Vec::new(),
            unique: 0,
        })))
    }
    fn is_shared(&self) -> bool {
        true
    }
}

/// Sends one message from `sender` through `client`, paced by `store`.
async fn send_paced_by(client: Client, store: &Arc<Scripted>, sender: &str) -> Finished<()> {
    send_paced_with(client, store, sender, None).await
}

/// The same, with `journal`'s fence.
async fn send_paced_with(
    client: Client,
    store: &Arc<Scripted>,
    sender: &str,
    journal: Option<Arc<dyn JournalStore>>,
) -> Finished<()> {
    send_paced_call(client, store, sender, journal, CallOptions::default()).await
}

/// The same, each call with `call`'s options.
async fn send_paced_call(
    client: Client,
    store: &Arc<Scripted>,
    sender: &str,
    journal: Option<Arc<dyn JournalStore>>,
    call: CallOptions,
) -> Finished<()> {
    let context = Arc::new(Context {
        client,
        call,
        control: Arc::new(Control::new()),
        limits: Arc::clone(store) as Arc<dyn LimitsStore>,
        rate: Some(("pacing-test".to_owned(), 10.0)),
        journal,
    });
    let prepared = Prepared::new(&message("8613800138000", sender), None).unwrap();
    let ready = Ready {
        index: 0,
        payload: (),
        identity: Identity {
            fingerprint: prepared.fingerprint,
            occurrence: 0,
        },
        prepared,
        key: "pacing-test-0".to_owned(),
        pace: None,
        dispatch: false,
    };
    send_one(context, ready).await
}

/// Shared limits where another process spaces the message's pair (its pair-rate code) while
/// the message waits for its pacing slot: after the slot, the pair is checked again, waited
/// for, and a new slot taken; the request leaves only then. Before the fix the pair was checked
/// only before the pacing wait, which can be seconds long: the message went out into a pair
/// the platform had just refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_spaced_during_the_pacing_wait_is_waited_for_before_the_send() {
    // Spaced (200 ms) by the time the first pacing wait (50 ms) ends, and free otherwise.
    let store = Scripted::new(
        |_| Ok(Duration::from_millis(50)),
        |check| Duration::from_millis(if check == 1 { 200 } else { 0 }),
    );
    let (sandbox, client, sender) = setup().await;
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        [
            "pair free",
            "slot",
            // Spaced while it waited for its slot (as this process knows, never read from
            // the store after a slot): waited for, then a new slot.
            "pair spaced (known)",
            "pair free",
            "slot",
            "pair free (known)",
        ]
    );
    assert_eq!(sandbox.stats().accepted, 1);
}

/// The first slot is given; the store fails for every one after (Redis gone).
fn first_slot_only(n: usize) -> Result<Duration> {
    match n {
        0 => Ok(Duration::ZERO),
        _ => Err(Error::SharedState("the store went away".to_owned())),
    }
}

/// A message answered `429` is retried within the attempt loop; its retry takes a slot of its
/// pace first. When the store cannot give one, the retry is not made: the campaign stops for
/// the store's failure, and the message is not sent (a `429` is answered before processing,
/// so its first request is no doubt). Before the fix the retry went without a slot, and with
/// every other retry the pause held, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_whose_slot_the_store_cannot_give_is_not_made() {
    let store = Scripted::new(first_slot_only, |_| Duration::ZERO);
    let (sandbox, client, sender) = setup().await;
    sandbox.inject(
        crate::sandbox::Route::Send,
        crate::sandbox::Fault {
            status: Some(429),
            ..crate::sandbox::Fault::default()
        },
    );
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(
        *store.asked.lock().unwrap(),
        ["pair free", "slot", "pair free (known)", "no slot"]
    );
    assert_eq!(finished.outcome.status, Status::Failed);
    assert!(matches!(
        &finished.outcome.error,
        Some(Error::SharedState(_))
    ));
    assert!(matches!(finished.failure, Some(Error::SharedState(_))));
    let stats = sandbox.stats();
    assert_eq!((stats.sends, stats.accepted), (1, 0));
}

/// The same when no attempt reached the service (nothing listens): the message was not sent,
/// and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_not_made_after_an_attempt_that_never_left_is_not_sent() {
    let store = Scripted::new(first_slot_only, |_| Duration::ZERO);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let client = Client::new(ClientConfig::new(
        format!("http://127.0.0.1:{port}"),
        TokenSource::Static("t".to_owned()),
    ))
    .unwrap();
    let finished = send_paced_by(client, &store, "14155550100").await;
    assert_eq!(finished.outcome.status, Status::Failed);
    assert!(
        matches!(&finished.outcome.error, Some(Error::SharedState(why)) if why.contains("went away")),
        "{:?}",
        finished.outcome.error
    );
    assert!(matches!(finished.failure, Some(Error::SharedState(_))));
}

/// A token provider that notes each time it is asked in the store's record.
struct NotedToken {
    store: Arc<Scripted>,
    /// The token, or `None` for a provider that fails.
    token: Option<String>,
    /// Its first token has expired: only a refresh gives `token`.
    expired_first: bool,
    /// How long a refresh takes (a round trip to the token service).
    refresh_takes: Duration,
}

impl crate::client::TokenProvider for NotedToken {
    fn token(&self, refresh: bool) -> BoxFuture<'static, Result<String>> {
        self.store
            .note(if refresh { "token refreshed" } else { "token" });
        if self.expired_first && !refresh {
            return Box::pin(std::future::ready(Ok("expired".to_owned())));
        }
        if refresh && !self.refresh_takes.is_zero() {
            let (takes, token) = (self.refresh_takes, self.token.clone());
            return Box::pin(async move {
                tokio::time::sleep(takes).await;
                token.ok_or_else(|| Error::Configuration("no token".to_owned()))
            });
        }
        Box::pin(std::future::ready(self.token.clone().ok_or_else(|| {
            Error::TokenProvider {
                message: "the token service is down".to_owned(),
                cause: crate::error::Foreign(Arc::new(())),
            }
        })))
    }
}

/// A client of `sandbox` whose token provider notes each ask in `store`'s record, and answers
/// `token` (`None`: fails).
fn client_asking(sandbox: &Sandbox, store: &Arc<Scripted>, token: Option<String>) -> Client {
    client_asking_with(sandbox, store, token, false)
}

/// The same, whose first token (`expired_first`) the service refuses, and whose refresh takes
/// 30 ms.
fn client_asking_with(
    sandbox: &Sandbox,
    store: &Arc<Scripted>,
    token: Option<String>,
    expired_first: bool,
) -> Client {
    let provider = NotedToken {
        store: Arc::clone(store),
        token,
        expired_first,
        refresh_takes: Duration::from_millis(30),
    };
    let config = ClientConfig::new(
        sandbox.base_url(),
        TokenSource::Provider(Arc::new(provider)),
    );
    Client::new(config).unwrap()
}

/// A token provider is asked as the slot's last step, once: after the slot's wait (asked
/// before the whole wait, at 02dd1ad, a token could expire in it) and before the pair's last
/// check, where the request goes (asked by the first attempt, before 02dd1ad, it sent the
/// request late for its slot, next to the following slots). ("slot" is noted as the wait
/// begins.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_provider_is_asked_as_the_slots_last_step() {
    let store = Scripted::new(|_| Ok(Duration::from_millis(20)), |_| Duration::ZERO);
    let (sandbox, _, sender) = setup().await;
    let client = client_asking(&sandbox, &store, Some(sandbox.token()));
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        ["pair free", "slot", "token", "pair free (known)"]
    );
    assert_eq!(sandbox.stats().accepted, 1);
}

/// A journal that only holds a fence, which nothing confirms but the test: no heartbeat can
/// race the test's timing.
struct FenceOnly(Arc<ClaimFence>);

impl JournalStore for FenceOnly {
    fn campaign_id(&self) -> &str {
        "pacing-test"
    }
    fn fence(&self) -> &Arc<ClaimFence> {
        &self.0
    }
    fn lookup(&self, _identities: Vec<Identity>) -> BoxFuture<'_, Result<Vec<Row>>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
    fn claim(&self, _claims: Vec<Claim>) -> BoxFuture<'_, Result<Vec<Claimed>>> {
        Box::pin(std::future::ready(Ok(Vec::new())))
    }
    fn dispatch(&self, _identity: Identity) -> BoxFuture<'_, Result<bool>> {
        Box::pin(std::future::ready(Ok(true)))
    }
    fn write_durably(&self, _rows: Vec<Row>) -> BoxFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    fn write(&self, _rows: Vec<Row>) -> Result<()> {
        Ok(())
    }
    fn end(&self) -> BoxFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// A run's claim that goes stale while its message waits for the slot (a slow journal round
/// trip) is not waited for after the slot, where the request would then leave late for it:
/// the message takes a new slot once the claim is confirmed. Before the fix it waited for the
/// confirmation after its slot (here 150 ms), and went then, on that slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_stale_after_the_slot_takes_a_new_slot_once_confirmed() {
    let store = Scripted::new(
        |n| Ok(Duration::from_millis(if n == 0 { 100 } else { 0 })),
        |_| Duration::ZERO,
    );
    let (sandbox, client, sender) = setup().await;
    // Stale 40 ms after its confirmation (a lease of 80 ms); the first slot is 100 ms away.
    // Confirmed again from 250 ms on, every 5 ms (as heartbeats would), for the second slot.
    let fence = Arc::new(ClaimFence::new(Duration::from_millis(80), stamp()));
    let confirming = Arc::clone(&fence);
    let heartbeats = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(250)).await;
        loop {
            confirming.confirm(stamp());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let journal: Arc<dyn JournalStore> = Arc::new(FenceOnly(Arc::clone(&fence)));
    let finished = tokio::time::timeout(
        Duration::from_secs(10),
        send_paced_with(client, &store, &sender, Some(journal)),
    )
    .await
    .expect("the send ends");
    heartbeats.abort();
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        [
            "pair free",
            "slot",
            "pair free (known)",
            // Stale after the slot: the confirmation is waited for, then a new slot.
            "pair free",
            "slot",
            "pair free (known)",
        ]
    );
    assert_eq!(sandbox.stats().accepted, 1);
}

/// Forwards every connection made to the address it returns to `to`, counting them.
async fn counting_forwarder(to: std::net::SocketAddr) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let opened = Arc::new(AtomicUsize::new(0));
    let counting = Arc::clone(&opened);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            counting.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                if let Ok(mut service) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut service).await;
                }
            });
        }
    });
    (format!("http://{address}"), opened)
}

/// A client of `sandbox` through a `counting_forwarder`, and the count of its connections.
async fn client_counting_connections(sandbox: &Sandbox) -> (Client, Arc<AtomicUsize>) {
    let service: std::net::SocketAddr = sandbox
        .base_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let (url, opened) = counting_forwarder(service).await;
    let config = ClientConfig::new(url, TokenSource::Static(sandbox.token()));
    (Client::new(config).unwrap(), opened)
}

/// A paced message whose client has no idle connection opens one before it waits for its
/// slot, not after: opened after (TCP, TLS: a round trip or more), it wrote its request that
/// late for its slot, next to the following slots. Before the fix the slot was taken with no
/// connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_opened_before_the_slot_when_none_is_idle() {
    let (sandbox, _, sender) = setup().await;
    let (client, opened) = client_counting_connections(&sandbox).await;
    let store = Scripted::new(|_| Ok(Duration::from_millis(20)), |_| Duration::ZERO)
        .watching(Arc::clone(&opened));
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        ["pair free", "slot, a connection open", "pair free (known)"]
    );
    // The send used the connection opened ahead: one in all.
    assert_eq!(opened.load(Ordering::SeqCst), 1);
    assert_eq!(sandbox.stats().accepted, 1);
}

/// A token provider that fails in the slot's last step fails the message, as when the attempt
/// asked: asked once, nothing written, and the message goes no further (no pair check after
/// the slot, no request). (Found in review, helper-48: the step went on to the dispatch write
/// and the checks after the slot before the failure came out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_provider_that_fails_at_the_slot_fails_the_message_once() {
    let store = Scripted::new(|_| Ok(Duration::from_millis(20)), |_| Duration::ZERO);
    let (sandbox, _, sender) = setup().await;
    let client = client_asking(&sandbox, &store, None);
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Failed);
    assert!(
        matches!(&finished.outcome.error, Some(Error::TokenProvider { message, .. }) if message.contains("down")),
        "{:?}",
        finished.outcome.error
    );
    assert_eq!(*store.asked.lock().unwrap(), ["pair free", "slot", "token"]);
    assert_eq!(sandbox.stats().sends, 0);
}

/// A request too late for its slot (its departure says so: the process was not scheduled for a
/// while after the slot's time, a `Retry-After` gate held it) is not handed to the transport:
/// the message takes a new slot, with the same key, and goes on the connection opened ahead.
/// Before, it was written late, next to the following slots, where it could put more than the
/// pace in one second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_too_late_for_its_slot_is_not_written_and_takes_a_new_one() {
    let (sandbox, _, sender) = setup().await;
    let (client, opened) = client_counting_connections(&sandbox).await;
    let store =
        Scripted::new(|_| Ok(Duration::from_millis(20)), |_| Duration::ZERO).missing_slots(1);
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        finished.outcome.idempotency_key.as_deref(),
        Some("pacing-test-0")
    );
    // The retake is not an attempt.
    assert_eq!(
        finished.outcome.meta.as_ref().map(|meta| meta.attempts),
        Some(1)
    );
    assert_eq!(
        *store.asked.lock().unwrap(),
        ["pair free", "slot", "pair free (known)", "slot"]
    );
    // One request, on the connection opened ahead: the missed slot took none.
    assert_eq!(sandbox.stats().sends, 1);
    assert_eq!(sandbox.stats().accepted, 1);
    assert_eq!(opened.load(Ordering::SeqCst), 1);
}

/// After a `401`, the fresh token is asked as the retry slot's last step: after its wait,
/// where it could expire (with a campaign's messages queued before the retry), and before its
/// release, where a refresh's round trip (here 30 ms, against a slot used within 5 ms) would
/// make the attempt late for it, and cost that slot. Before: asked before the retry's wait
/// ("token refreshed", then "slot"), then (ff5e140) after its slot, which the attempt then
/// missed (a third "slot").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refused_is_refreshed_as_the_retry_slots_last_step() {
    let store = Scripted::new(|_| Ok(Duration::from_millis(20)), |_| Duration::ZERO)
        .bounded(Duration::from_millis(5));
    let (sandbox, _, sender) = setup().await;
    let client = client_asking_with(&sandbox, &store, Some(sandbox.token()), true);
    let finished = send_paced_by(client, &store, &sender).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        [
            "pair free",
            "slot",
            "token",
            "pair free (known)",
            // Refused (401): the retry's slot, and its token as the slot's last step.
            "slot",
            "token refreshed",
        ]
    );
    assert_eq!(sandbox.stats().sends, 2);
    assert_eq!(sandbox.stats().accepted, 1);
}

/// A message that misses slot after slot (a process starved of its core at every one) gives
/// up at most three, and is written on the fourth however late: it is sent, where it would
/// otherwise retake slots for as long as the starvation lasts (found in review, helper-49,
/// where a connection opened after every slot made each miss; that case is no longer bounded
/// at all).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_missing_every_slot_is_sent_after_three() {
    let (sandbox, client, sender) = setup().await;
    let store =
        Scripted::new(|_| Ok(Duration::from_millis(5)), |_| Duration::ZERO).missing_slots(100);
    let finished = tokio::time::timeout(
        Duration::from_secs(10),
        send_paced_by(client, &store, &sender),
    )
    .await
    .expect("the send ends");
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        [
            "pair free",
            "slot",
            "pair free (known)",
            "slot",
            "slot",
            "slot"
        ]
    );
    assert_eq!(sandbox.stats().sends, 1);
}

/// A campaign's retry waits for its slot outside the call's total timeout, and so does the
/// fresh token asked as that slot's last step after a `401`: here the retry's slot comes
/// 150 ms after a call whose total is 100 ms, and the refresh takes 30 ms. (Found in the last
/// read of 94fbedc: the step was bounded by the deadline as it stood before the wait, already
/// past, and the message failed with a timeout.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_refreshed_at_a_campaign_retrys_slot_is_not_bounded_by_the_wait() {
    let store = Scripted::new(
        |n| Ok(Duration::from_millis(if n == 1 { 150 } else { 5 })),
        |_| Duration::ZERO,
    );
    let (sandbox, _, sender) = setup().await;
    let client = client_asking_with(&sandbox, &store, Some(sandbox.token()), true);
    let call = CallOptions {
        timeout: Some(crate::client::Timeout::total(Duration::from_millis(100))),
        ..CallOptions::default()
    };
    let finished = send_paced_call(client, &store, &sender, None, call).await;
    assert_eq!(
        finished.outcome.status,
        Status::Sent,
        "{:?}",
        finished.outcome.error
    );
    assert_eq!(sandbox.stats().accepted, 1);
}
