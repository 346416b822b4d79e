//! A campaign end to end, through its handle, against the embedded sandbox: outcomes in input
//! order, abandonment, re-runs from the journal, derived keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::time::Duration;

use crate::api::SendMessage;
use crate::campaign::{Campaign, Event, Input, Options, Outcome, Prepared, Status, Summary};
use crate::client::{CallOptions, Client};
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
                let chunk: Vec<Input<()>> = pending.drain(..wanted.min(pending.len())).collect();
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
        journal: Some(crate::campaign::JournalTarget::File(dir.join("c.db"))),
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

/// A journal made before fingerprints were SHA-256 (format 3: xxh3 identities, no record of
/// their kind): this bizmsg resumes its campaign knowing the messages as that journal does, so
/// what was sent is not sent again, and a new message gets the key an xxh3 identity derives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_of_xxh3_fingerprints_resumes_its_campaign_without_sending_twice() {
    use crate::campaign::message::{Fingerprint, FingerprintKind};
    use crate::campaign::{Identity, KeySource};
    let (sandbox, client, sender) = setup().await;
    let dir = std::env::temp_dir().join(format!("bizmsg-engine-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.db");
    let options = Options {
        journal: Some(crate::campaign::JournalTarget::File(path.clone())),
        campaign_id: Some("legacy".into()),
        ..Options::default()
    };
    let messages = vec![
        message("8613800138000", &sender),
        message("8613800138001", &sender),
    ];
    let first = run(&client, options.clone(), &messages[..1]).await;
    assert_eq!(statuses(&first), ["sent"]);
    // What format 3 wrote: the same row under its xxh3 fingerprint, no kind recorded.
    let request = |m: &SendMessage| Prepared::new(m, None).unwrap().request;
    let legacy = |m: &SendMessage| Fingerprint::of_kind(&request(m), FingerprintKind::Xxh3);
    {
        let db = rusqlite::Connection::open(&path).unwrap();
        let changed = db
            .execute(
                "UPDATE bizmsg_messages SET fingerprint = ?1 WHERE fingerprint = ?2",
                [
                    legacy(&messages[0]).to_hex(),
                    Fingerprint::of(&request(&messages[0])).to_hex(),
                ],
            )
            .unwrap();
        assert_eq!(changed, 1);
        db.execute_batch(
            "DELETE FROM bizmsg_campaign WHERE name = 'fingerprint';
             UPDATE bizmsg_campaign SET value = '3' WHERE name = 'schema';",
        )
        .unwrap();
    }
    let second = run(&client, options, &messages).await;
    assert_eq!(statuses(&second), ["skipped", "sent"]);
    assert_eq!(sandbox.stats().accepted, 2, "each message committed once");
    let derived = KeySource::for_campaign("legacy").key(Identity {
        fingerprint: legacy(&messages[1]),
        occurrence: 0,
    });
    assert_eq!(second[1].idempotency_key.as_deref(), Some(derived.as_str()));
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

/// A campaign abandoned while messages wait for their pace: those whose request never began to
/// leave are skipped (they were not sent), only the one the server holds is unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoning_skips_what_never_left_and_keeps_unknown_what_did() {
    let (sandbox, client, sender) = setup().await;
    sandbox.set_delay(Duration::from_secs(60));
    let options = Options {
        concurrency: 8,
        // One message a minute: the first goes, the other seven in flight wait for a slot.
        rate_limit: Some(1.0 / 60.0),
        ..Options::default()
    };
    let mut campaign =
        Campaign::start(client, options, &tokio::runtime::Handle::current()).unwrap();
    let pending: VecDeque<Input<()>> = (0..8u64)
        .map(|index| Input {
            index,
            payload: (),
            message: Prepared::new(&message(&format!("86138{index:08}"), &sender), None),
        })
        .collect();
    let stopper = campaign.stopper();
    let abandon = tokio::spawn(async move {
        while sandbox.stats().sends < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Long enough for the other seven to be in flight, waiting for their slot.
        tokio::time::sleep(Duration::from_millis(100)).await;
        stopper.stop(true);
        sandbox
    });
    let collected =
        tokio::time::timeout(Duration::from_secs(20), drive(&mut campaign, pending)).await;
    let (outcomes, _) = collected.expect("the abandoned campaign did not end");
    let sandbox = abandon.await.unwrap();
    assert_eq!(sandbox.stats().sends, 1);
    assert_eq!(
        statuses(&outcomes)
            .iter()
            .filter(|s| **s == "unknown")
            .count(),
        1
    );
    let skipped: Vec<&Outcome<()>> = outcomes
        .iter()
        .filter(|o| o.status == Status::Skipped)
        .collect();
    assert_eq!(skipped.len(), 7, "{:?}", statuses(&outcomes));
    assert!(skipped.iter().all(|o| o.reason.as_deref()
        == Some("not sent: the campaign was abandoned before the request left")));
}

/// The breaker: against a port nothing listens on, the campaign stops once enough messages in
/// a row failed to connect and nothing answered for the window; the rest are skipped, saying
/// why. (Retries off and a short window keep the test quick; the defaults are larger.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_that_cannot_reach_the_service_stops() {
    let mut config = ClientConfig::new("http://127.0.0.1:1", TokenSource::Static("t".to_owned()));
    config.max_retries = 0;
    let client = Client::new(config).unwrap();
    let options = Options {
        concurrency: 4,
        unreachable_after: Some(8),
        unreachable_for: Duration::from_millis(200),
        ..Options::default()
    };
    let messages: Vec<SendMessage> = (0..5000)
        .map(|i| message(&format!("86138{i:08}"), "8613900000000"))
        .collect();
    let mut campaign =
        Campaign::start(client, options, &tokio::runtime::Handle::current()).unwrap();
    let pending: VecDeque<Input<()>> = messages
        .iter()
        .enumerate()
        .map(|(index, message)| Input {
            index: index as u64,
            payload: (),
            message: Prepared::new(message, None),
        })
        .collect();
    let collected =
        tokio::time::timeout(Duration::from_secs(30), drive(&mut campaign, pending)).await;
    let (outcomes, summary) = collected.expect("the campaign did not stop");
    let stopped = summary.unwrap().stopped.unwrap();
    assert!(
        stopped.reason.contains("the service is unreachable"),
        "{}",
        stopped.reason
    );
    assert!(stopped.index.is_some());
    let failed = outcomes
        .iter()
        .filter(|o| o.status == Status::Failed)
        .count();
    let skipped: Vec<&Outcome<()>> = outcomes
        .iter()
        .filter(|o| o.status == Status::Skipped)
        .collect();
    // The eight in a row, the sends in flight then, and a probe at a time for the window.
    assert!(
        (8..200).contains(&failed),
        "{failed} failed before it stopped"
    );
    assert!(skipped.iter().all(|o| o
        .reason
        .as_deref()
        .is_some_and(|r| r.starts_with("not sent: the service is unreachable"))));
    assert_eq!(failed + skipped.len(), outcomes.len());
}

/// A service that answers again within the window (here: after its first messages failed to
/// connect) does not trip the breaker: the campaign goes on and sends the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_back_within_the_window_does_not_trip_the_breaker() {
    // A free port, closed again: the first sends are refused until the sandbox listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = ClientConfig::new(
        format!("http://127.0.0.1:{port}"),
        TokenSource::Static("sandbox-token-acme".to_owned()),
    );
    config.max_retries = 0;
    let client = Client::new(config).unwrap();
    let options = Options {
        concurrency: 2,
        rate_limit: Some(50.0),
        unreachable_after: Some(3),
        unreachable_for: Duration::from_secs(5),
        ..Options::default()
    };
    let messages: Vec<SendMessage> = (0..60)
        .map(|i| message(&format!("86138{i:08}"), "8617771459397"))
        .collect();
    let mut campaign =
        Campaign::start(client, options, &tokio::runtime::Handle::current()).unwrap();
    let pending: VecDeque<Input<()>> = messages
        .iter()
        .enumerate()
        .map(|(index, message)| Input {
            index: index as u64,
            payload: (),
            message: Prepared::new(message, None),
        })
        .collect();
    let service = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Sandbox::start(SandboxConfig {
            port,
            ..SandboxConfig::default()
        })
        .await
        .unwrap()
    });
    let (outcomes, summary) =
        tokio::time::timeout(Duration::from_secs(30), drive(&mut campaign, pending))
            .await
            .expect("the campaign did not end");
    let _sandbox = service.await.unwrap();
    assert!(summary.unwrap().stopped.is_none());
    let sent = outcomes.iter().filter(|o| o.status == Status::Sent).count();
    let failed = outcomes
        .iter()
        .filter(|o| o.status == Status::Failed)
        .count();
    assert!(
        failed >= 3,
        "the first messages must have failed to connect ({failed})"
    );
    assert_eq!(sent + failed, 60);
}

/// A fence that records when it was asked, and always allows.
#[derive(Debug, Default)]
struct RecordingFence(std::sync::Mutex<Vec<std::time::Instant>>);

impl crate::client::SendFence for RecordingFence {
    fn may_send(&self) -> std::result::Result<(), String> {
        self.0.lock().unwrap().push(std::time::Instant::now());
        Ok(())
    }
}

/// The window no client-side fence closes: how long after its last check a send's request
/// reaches the wire. A proxy in front of the sandbox notes when each request's first bytes
/// arrive; sends go one at a time, so the n-th check and the n-th arrival pair up. Printed
/// (median and worst), and asserted only in shape: every check comes before its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_checked_against_its_fence_just_before_it_is_written() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    let sandbox = Sandbox::start(SandboxConfig::default()).await.unwrap();
    let upstream = sandbox.base_url().trim_start_matches("http://").to_owned();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let arrivals: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let noted = Arc::clone(&arrivals);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let mut server = std::net::TcpStream::connect(&upstream).unwrap();
            let (mut client_back, mut server_back) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut server_back, &mut client_back));
            let noted = Arc::clone(&noted);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 65536];
                while let Ok(read) = client.read(&mut buffer) {
                    if read == 0 || server.write_all(&buffer[..read]).is_err() {
                        return;
                    }
                    // A request's head and body arrive together (one write): one read each.
                    if buffer[..read].starts_with(b"POST ") {
                        noted.lock().unwrap().push(std::time::Instant::now());
                    }
                }
            });
        }
    });
    let client = Client::new(ClientConfig::new(
        format!("http://127.0.0.1:{port}"),
        TokenSource::Static(sandbox.token()),
    ))
    .unwrap();
    let sender = client
        .list_business_phone_numbers(
            crate::api::PageRequest::new(1, 1).unwrap(),
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .value
        .data[0]
        .display_phone_number
        .clone()
        .unwrap();
    let fence = Arc::new(RecordingFence::default());
    let sends = 400;
    for i in 0..sends {
        let request = message(&format!("86139{i:08}"), &sender)
            .validate()
            .unwrap();
        let body = crate::api::encode(&request).unwrap();
        let progress = Arc::new(crate::client::SendProgress::fenced(Some(
            Arc::clone(&fence) as Arc<dyn crate::client::SendFence>,
        )));
        client
            .send_encoded(
                &Arc::new(request),
                body,
                format!("fence-{i}"),
                &CallOptions::default(),
                Some(&progress),
            )
            .await
            .unwrap();
    }
    let checks = fence.0.lock().unwrap().clone();
    let arrived = arrivals.lock().unwrap().clone();
    // Two checks per send (before the attempt, and as its body is taken): the second is the one
    // that counts.
    assert_eq!(checks.len(), 2 * sends);
    assert_eq!(arrived.len(), sends);
    let mut gaps: Vec<std::time::Duration> = checks
        .chunks(2)
        .zip(&arrived)
        .map(|(pair, arrival)| arrival.duration_since(pair[1]))
        .collect();
    assert!(checks
        .chunks(2)
        .zip(&arrived)
        .all(|(pair, arrival)| pair[1] <= *arrival));
    gaps.sort();
    eprintln!(
        "fence check to the request's bytes at the peer over loopback: median {:?}, 99th {:?}, \
         worst {:?} ({sends} sends)",
        gaps[gaps.len() / 2],
        gaps[gaps.len() * 99 / 100],
        gaps[gaps.len() - 1]
    );
}

/// Shared limits where another process spaces the message's pair (its pair-rate code) while
/// the message waits for its pacing slot: after the slot, the pair is checked again, waited
/// for, and a new slot taken; the request leaves only then. Before the fix the pair was checked
/// only before the pacing wait, which can be seconds long: the message went out into a pair
/// the platform had just refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_spaced_during_the_pacing_wait_is_waited_for_before_the_send() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;

    use super::handle::Control;
    use super::send::{send_one, Context, Ready};
    use crate::campaign::Identity;
    use crate::error::Result;
    use crate::limits::{LimitsStore, Scope, Slot, TierCount};

    /// A shared store in which the pair is spaced (200 ms) by the time the first pacing wait
    /// ends, and free otherwise; it records what the send asked of it.
    #[derive(Default)]
    struct SpacedDuringPacing {
        asked: Mutex<Vec<&'static str>>,
        pair_checks: AtomicUsize,
    }

    impl SpacedDuringPacing {
        fn note(&self, what: &'static str) {
            self.asked.lock().unwrap().push(what);
        }
    }

    impl LimitsStore for SpacedDuringPacing {
        fn admit<'a>(
            &'a self,
            _slot: Slot<'a>,
            _deadline: Option<std::time::Instant>,
        ) -> BoxFuture<'a, Result<()>> {
            self.note("slot");
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Ok(())
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
            let check = self.pair_checks.fetch_add(1, Ordering::SeqCst);
            let wait = if check == 1 {
                self.note("pair spaced");
                Duration::from_millis(200)
            } else {
                self.note("pair free");
                Duration::ZERO
            };
            Box::pin(std::future::ready(Ok(wait)))
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

    let (sandbox, client, sender) = setup().await;
    let store = Arc::new(SpacedDuringPacing::default());
    let context = Arc::new(Context {
        client,
        call: CallOptions::default(),
        control: Arc::new(Control::new()),
        limits: Arc::clone(&store) as Arc<dyn LimitsStore>,
        rate: Some(("pair-test".to_owned(), 10.0)),
        journal: None,
    });
    let prepared = Prepared::new(&message("8613800138000", &sender), None).unwrap();
    let ready = Ready {
        index: 0,
        payload: (),
        identity: Identity {
            fingerprint: prepared.fingerprint,
            occurrence: 0,
        },
        prepared,
        key: "pair-test-0".to_owned(),
        pace: None,
    };
    let finished = send_one(context, ready).await;
    assert_eq!(finished.outcome.status, Status::Sent);
    assert_eq!(
        *store.asked.lock().unwrap(),
        [
            "pair free",
            "slot",
            // Spaced while it waited for its slot: waited for, then a new slot.
            "pair spaced",
            "pair free",
            "slot",
            "pair free",
        ]
    );
    assert_eq!(sandbox.stats().accepted, 1);
}
