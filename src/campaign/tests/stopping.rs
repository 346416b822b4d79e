//! Stopping a campaign: abandoned with sends in flight (each ends at once, unknown only if it
//! left), and stopped by the breaker when the service cannot be reached.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

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
