//! The store's operations between several instances (as separate processes would hold them)
//! of one server.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{busiest_second, multi_thread, run_callers, store, Server};
use crate::error::Error;
use crate::limits::{LimitsStore, Scope, Slot, TierVerdict};
#[test]
fn instances_pace_one_sender_together() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stores: Vec<_> = (0..4).map(|_| store(&server.url())).collect();
    let runtime = multi_thread();
    let before = server.calls("evalsha");
    // 4 "processes" × 4 callers × 12 messages = 192 at 60/s: a little over 3 s.
    let times = runtime.block_on(run_callers(&stores, 4, 12, Some(("15550001", 60.0)), None));
    let round_trips = server.calls("evalsha") - before;
    let busiest = busiest_second(&times);
    let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    eprintln!(
        "4 instances: 192 messages at 60/s, first to last {span:?} (exact pacing: 3.18 s), \
         busiest second {busiest}, {round_trips} reservations: {:.3} round trips per message",
        round_trips as f64 / 192.0
    );
    assert_eq!(times.len(), 192);
    assert!(busiest <= 61, "busiest second {busiest}");
    assert!(span >= Duration::from_millis(3000), "{span:?}");

    // One process alone on a sender: reservations cover most of a horizon each.
    let before = server.calls("evalsha");
    let times = runtime.block_on(run_callers(
        &stores[..1],
        4,
        60,
        Some(("15550021", 120.0)),
        None,
    ));
    let round_trips = server.calls("evalsha") - before;
    let busiest = busiest_second(&times);
    eprintln!(
        "one instance: 240 messages at 120/s, busiest second {busiest}, {:.3} round trips per \
         message",
        round_trips as f64 / 240.0
    );
    assert!(busiest <= 121, "busiest second {busiest}");
}

#[test]
fn a_sync_and_an_async_caller_share_one_store() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    // A sync call's runtime: current-thread, on its own thread.
    let sync_store = Arc::clone(&store);
    let sync_caller = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let slot = Slot {
            sender: Some(("15550002", 50.0)),
            campaign: None,
        };
        (0..50)
            .map(|_| {
                runtime.block_on(sync_store.admit(slot, None)).unwrap();
                Instant::now()
            })
            .collect::<Vec<_>>()
    });
    let runtime = multi_thread();
    let started = Instant::now();
    let mut times = runtime.block_on(run_callers(
        std::slice::from_ref(&store),
        2,
        25,
        Some(("15550002", 50.0)),
        None,
    ));
    times.extend(sync_caller.join().unwrap());
    assert_eq!(times.len(), 100);
    let busiest = busiest_second(&times);
    assert!(busiest <= 51, "busiest second {busiest}");
    assert!(started.elapsed() >= Duration::from_millis(1900));
}

#[test]
fn the_hosts_clock_can_stand_in_for_redis_time() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let url = format!("{}?clock=local", server.url());
    let stores: Vec<_> = (0..2).map(|_| store(&url)).collect();
    let runtime = multi_thread();
    runtime.block_on(async {
        let times = run_callers(&stores, 2, 15, Some(("15550015", 50.0)), None).await;
        assert!(busiest_second(&times) <= 51);
        // The second still holds slots reserved during the run: the pause, announced to
        // every instance, drops them (within milliseconds).
        let started = Instant::now();
        stores[0]
            .pause(Scope::Sender("15550015"), Duration::from_millis(400))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let slot = Slot {
            sender: Some(("15550015", 50.0)),
            campaign: None,
        };
        stores[1].admit(slot, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let wait = stores[0]
            .space_pair("15550015", "4911", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(wait, Duration::from_secs(4));
        assert!(stores[1].pair_wait("15550015", "4911").await.unwrap() > Duration::from_secs(3));
        let count = stores[1]
            .count_recipients("acct", 1, &[7, 8])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [TierVerdict::New, TierVerdict::Over]);
    });
}

#[test]
fn a_campaign_rate_holds_across_instances() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stores: Vec<_> = (0..3).map(|_| store(&server.url())).collect();
    let runtime = multi_thread();
    let started = Instant::now();
    // Two senders paced far above the campaign's rate: the campaign's rate is what holds.
    let (mut one, two) = runtime.block_on(async {
        tokio::join!(
            run_callers(
                &stores,
                2,
                5,
                Some(("15550003", 500.0)),
                Some(("spring", 20.0))
            ),
            run_callers(
                &stores,
                2,
                5,
                Some(("15550004", 500.0)),
                Some(("spring", 20.0))
            ),
        )
    });
    one.extend(two);
    assert_eq!(one.len(), 60);
    let busiest = busiest_second(&one);
    assert!(busiest <= 21, "busiest second {busiest}");
    assert!(started.elapsed() >= Duration::from_millis(2900));
}

#[test]
fn a_pause_set_by_one_instance_holds_the_others() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let paced = Slot {
            sender: Some(("15550005", 50.0)),
            campaign: None,
        };
        // The second holds slots it reserved before the pause (up to 250 ms ahead): the pause,
        // announced to every instance, drops them (within milliseconds).
        run_callers(
            std::slice::from_ref(&second),
            4,
            5,
            Some(("15550005", 50.0)),
            None,
        )
        .await;
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(800))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        second.admit(paced, None).await.unwrap();
        let held = started.elapsed();
        assert!(held >= Duration::from_millis(700), "{held:?}");

        // Only ever extends: a shorter pause does not shorten it.
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(600))
            .await
            .unwrap();
        second
            .pause(Scope::Service, Duration::from_millis(50))
            .await
            .unwrap();
        first.admit(paced, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(500));
        // A message with no pace waits for the service's pause as well.
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(500))
            .await
            .unwrap();
        second.admit(Slot::default(), None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(400));

        // A sender's pause holds that sender in every instance.
        let started = Instant::now();
        first
            .pause(Scope::Sender("15550005"), Duration::from_millis(600))
            .await
            .unwrap();
        second.admit(paced, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(500));
    });
}

#[test]
fn a_deadline_the_wait_would_pass_times_out_without_a_slot() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let slow = Slot {
            sender: Some(("15550006", 1.0)),
            campaign: None,
        };
        first.admit(slow, None).await.unwrap();
        // The next slot is a second away: a call with 200 ms left does not wait for it.
        let deadline = Instant::now() + Duration::from_millis(200);
        let refused = second.admit(slow, Some(deadline)).await;
        assert!(matches!(refused, Err(Error::Timeout(_))), "{refused:?}");
        // Nothing was taken: the next slot is still the one a second after the first.
        let started = Instant::now();
        second.admit(slow, None).await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        // And a paused service fails a deadline before the pause's end at once.
        first
            .pause(Scope::Service, Duration::from_secs(5))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(300);
        let refused = second.admit(Slot::default(), Some(deadline)).await;
        assert!(matches!(refused, Err(Error::Timeout(_))), "{refused:?}");
    });
}

#[test]
fn pairs_are_spaced_for_every_instance() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let cap = Duration::from_secs(10);
        // The second reads the sender's pairs (none) before the first spaces one.
        assert_eq!(
            second.pair_wait("15550007", "4912345").await.unwrap(),
            Duration::ZERO
        );
        let wait = first.space_pair("15550007", "4912345", cap).await.unwrap();
        assert_eq!(wait, Duration::from_secs(4));
        assert!(first.pair_wait("15550007", "4912345").await.unwrap() > Duration::from_secs(3));
        // The second's copy is refreshed at most once a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(second.pair_wait("15550007", "4912345").await.unwrap() > Duration::from_secs(2));
        assert_eq!(
            second.pair_wait("15550007", "4900000").await.unwrap(),
            Duration::ZERO
        );
        // 4^n seconds for the n-th hit, capped.
        let wait = second.space_pair("15550007", "4912345", cap).await.unwrap();
        assert_eq!(wait, cap);
        let other = second.space_pair("15550008", "4912345", cap).await.unwrap();
        assert_eq!(other, Duration::from_secs(4));
    });
}

#[test]
fn tiers_count_unique_recipients_across_instances() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        use TierVerdict::{Known, New, Over};
        let count = first
            .count_recipients("acct1", 3, &[1, 2, 1])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [New, New, Known]);
        assert_eq!(count.unique, 2);
        let count = second
            .count_recipients("acct1", 3, &[3, 4, 2])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [New, Over, Known]);
        assert_eq!(count.unique, 3);
        // Over is never counted: still over, and still 3.
        let count = first.count_recipients("acct1", 3, &[4]).await.unwrap();
        assert_eq!((count.verdicts, count.unique), (vec![Over], 3));
        let count = first.count_recipients("acct1", 3, &[]).await.unwrap();
        assert_eq!(count.unique, 3);
        // Other accounts have their own budget; big batches are counted in chunks.
        let many: Vec<u64> = (0..1500).collect();
        let count = second.count_recipients("acct2", 1000, &many).await.unwrap();
        assert_eq!(count.unique, 1000);
        assert_eq!(count.verdicts.iter().filter(|v| **v == New).count(), 1000);
        assert_eq!(count.verdicts.iter().filter(|v| **v == Over).count(), 500);

        // The paces one process looked up are there for all.
        assert_eq!(first.cached_paces(None).await.unwrap(), None);
        first
            .cache_paces(
                "{\"15550001\":60.0}".to_owned(),
                Duration::from_secs(60),
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            second.cached_paces(None).await.unwrap().as_deref(),
            Some("{\"15550001\":60.0}")
        );
    });
}
