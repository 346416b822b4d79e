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

use super::{busiest_second, multi_thread, raw, run_callers, store, Server};
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

/// A batch given back (its process dropped it: a stall) is granted again, for a sender's pace,
/// a campaign's rate and both (their periods differ, so that each hash is seen to be given
/// back its own bounds); unless a later batch was reserved from the same hash (by this version
/// or one before it, which writes no token), or the hash was lost and written anew with the
/// same `tat` (told apart by the token). Slot times are compared within 30 ms.
#[test]
fn a_batch_given_back_is_granted_again_unless_reserved_after() {
    use super::super::per_process::PoolKey;
    use super::super::slots::Grant;

    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    let runtime = multi_thread();
    let near = |a: Instant, b: Instant| a.max(b) - a.min(b) < Duration::from_millis(30);
    runtime.block_on(async {
        let here = store.here().unwrap();
        let horizon = Duration::from_secs(5);
        // The store's epoch first: a hash's first reservation in a new one starts `HORIZON`
        // after it.
        let other = PoolKey {
            sender: Some(("15550098".to_owned(), 100_000)),
            campaign: None,
        };
        store
            .reserve(&here, &other, 1, horizon, None)
            .await
            .unwrap();
        tokio::time::sleep(super::super::slots::HORIZON).await;
        // 10 a second for the sender, 14 for the campaign: 5 slots span 500 ms.
        let sender = ("15550099".to_owned(), 100_000);
        let campaign = ("give-back".to_owned(), 70_000);
        let reserve = |key: &PoolKey| {
            let (here, store, key) = (&here, &store, key.clone());
            async move {
                let asked = Instant::now();
                match store.reserve(here, &key, 5, horizon, None).await.unwrap() {
                    Grant::Slots(offsets, batch) => {
                        assert_eq!(offsets.len(), 5);
                        (asked + offsets[0], batch)
                    }
                    Grant::FirstFree(_) => panic!("no slot granted"),
                }
            }
        };
        let keys = [
            (Some(sender.clone()), None),
            (None, Some(campaign.clone())),
            (Some(sender.clone()), Some(campaign.clone())),
        ];
        for (sender, campaign) in keys {
            // 5 slots of the slower pace: 500 ms, or 350 for the campaign alone.
            let span = Duration::from_micros(
                5 * sender
                    .iter()
                    .chain(&campaign)
                    .map(|(_, p)| *p)
                    .max()
                    .unwrap(),
            );
            let key = PoolKey { sender, campaign };
            // A batch kept, and one after it given back: the next starts where that one did,
            // after the one kept (not before it, as a `tat` wiped or set too far back would).
            let (kept, _) = reserve(&key).await;
            let (first, batch) = reserve(&key).await;
            assert!(near(first, kept + span));
            store.give_back(&here, &key, batch, None).await;
            let (again, batch) = reserve(&key).await;
            assert!(
                near(first, again),
                "given back: granted again from {first:?}, not {again:?}"
            );
            // Given back once only: after a second batch, the first is not given back again.
            let (second, _) = reserve(&key).await;
            store.give_back(&here, &key, batch, None).await;
            let (third, _) = reserve(&key).await;
            assert!(near(third, second + span));
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        let key = PoolKey {
            sender: Some(sender),
            campaign: Some(campaign),
        };

        // Another batch reserved after it: that one is not given back.
        let (start, batch) = reserve(&key).await;
        let (after, _) = reserve(&key).await;
        assert!(near(after, start + Duration::from_millis(500)));
        store.give_back(&here, &key, batch, None).await;
        let (next, batch) = reserve(&key).await;
        assert!(
            near(next, after + Duration::from_millis(500)),
            "given back over a later batch"
        );

        // The hashes lost, and written anew by another reservation ending where this batch
        // did: the token tells them apart, and `tat` stays. (Read raw: each read here waits
        // out its socket's timeout, so slot times would have passed.)
        let hashes = [
            store.keys.sender("15550099"),
            store.keys.campaign("give-back"),
        ];
        let tat = |hash: &str| {
            let reply = raw(server.port, &format!("HGET {hash} tat\r\n"));
            reply.lines().nth(1).unwrap().to_owned()
        };
        let ends: Vec<String> = hashes.iter().map(|hash| tat(hash)).collect();
        for (hash, end) in hashes.iter().zip(&ends) {
            assert!(raw(server.port, &format!("DEL {hash}\r\n")).starts_with(':'));
            let written = raw(
                server.port,
                &format!("HSET {hash} tat {end} by someone\r\n"),
            );
            assert!(written.starts_with(':'), "{written}");
        }
        store.give_back(&here, &key, batch, None).await;
        for (hash, end) in hashes.iter().zip(&ends) {
            assert_eq!(
                &tat(hash),
                end,
                "{hash} given back over another's reservation"
            );
        }

        // A version of bizmsg before this script reserves after a batch: it moves `tat` and
        // leaves `by` as it was. The batch is not given back.
        let (_, batch) = reserve(&key).await;
        let mut moved = Vec::new();
        for hash in &hashes {
            let later = tat(hash).parse::<i64>().unwrap() + 100_000;
            let written = raw(server.port, &format!("HSET {hash} tat {later}\r\n"));
            assert!(written.starts_with(':'), "{written}");
            moved.push(later.to_string());
        }
        store.give_back(&here, &key, batch, None).await;
        for (hash, later) in hashes.iter().zip(&moved) {
            assert_eq!(
                &tat(hash),
                later,
                "{hash} given back over an older version's batch"
            );
        }
    });
}

/// After the store lost its state, every pace's first reservation starts `HORIZON` after the
/// new epoch, not only the store's first: slots granted before the loss may be that far ahead.
/// (Before: a sender reserved from after another had started the epoch was granted slots at
/// once, next to those it held from before the loss.)
#[test]
fn after_a_loss_every_pace_starts_past_the_slots_granted_before() {
    use super::super::per_process::PoolKey;
    use super::super::slots::{Grant, HORIZON};

    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    let runtime = multi_thread();
    runtime.block_on(async {
        let here = store.here().unwrap();
        let pace = |sender: &str| PoolKey {
            sender: Some((sender.to_owned(), 10_000)),
            campaign: None,
        };
        // The slots granted, or when the first free one is.
        let reserve = |key: PoolKey, horizon: Duration| {
            let (here, store) = (&here, &store);
            async move {
                let asked = Instant::now();
                match store.reserve(here, &key, 20, horizon, None).await.unwrap() {
                    Grant::Slots(offsets, _) => {
                        Ok(offsets.iter().map(|o| asked + *o).collect::<Vec<_>>())
                    }
                    Grant::FirstFree(first) => Err(asked + first),
                }
            }
        };
        // A store in use a while; then sender A holds slots up to 200 ms ahead.
        // (A new store's first pace starts `HORIZON` and a period ahead: past this horizon.)
        reserve(pace("15550201"), HORIZON).await.unwrap_err();
        tokio::time::sleep(HORIZON * 2).await;
        let held = reserve(pace("15550202"), HORIZON).await.unwrap();
        assert_eq!(held.len(), 20);
        let flushed: String = here
            .link
            .once(|mut connection| async move {
                ::redis::cmd("FLUSHALL").query_async(&mut connection).await
            })
            .await
            .unwrap();
        assert_eq!(flushed, "OK");
        let lost = Instant::now();
        // Another sender starts the new epoch; then sender A asks again, within a short
        // horizon (a call's deadline): told to wait past `HORIZON`, not granted slots in it.
        reserve(pace("15550203"), HORIZON).await.unwrap_err();
        let first_free = reserve(pace("15550202"), Duration::from_millis(50))
            .await
            .unwrap_err();
        let last_held = *held.last().unwrap();
        assert!(
            first_free > last_held,
            "a first free slot {:?} after the loss, before one held from before it ({:?})",
            first_free.saturating_duration_since(lost),
            last_held.saturating_duration_since(lost)
        );
        // And within a long one, granted from there on, a period after the last slot held.
        let after = reserve(pace("15550202"), Duration::from_secs(1))
            .await
            .unwrap();
        assert_eq!(after.len(), 20);
        assert!(
            after[0] >= last_held + Duration::from_millis(9),
            "a slot granted {:?} after the loss, next to one held from before it ({:?})",
            after[0].saturating_duration_since(lost),
            last_held.saturating_duration_since(lost)
        );
        assert!(after[0] < lost + HORIZON + Duration::from_millis(60));
    });
}

/// A message's last step before its request (a journal's write, `admit_then`) that ends past
/// its slot's bound makes the message take a later slot: written when the step ended, next to
/// the following slots, it could put more than the pace in one second. The step is made once.
/// Before the fix the slot was used however late the step ended.
#[test]
fn a_last_step_that_ends_past_the_slot_takes_a_later_one() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    let runtime = multi_thread();
    // 5 a second: slots about 200 ms apart.
    let slot = Slot {
        sender: Some(("15550031", 5.0)),
        campaign: None,
    };
    runtime.block_on(async {
        let steps = std::sync::atomic::AtomicU32::new(0);
        let began = std::sync::Mutex::new(None);
        // The step begins as the slot is taken and ends 40 ms later, past its 6 ms bound.
        let step = Box::pin(async {
            steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            *began.lock().unwrap() = Some(Instant::now());
            tokio::time::sleep(Duration::from_millis(40)).await;
            true
        });
        store.admit_then(slot, None, Some(step)).await.unwrap();
        let released = Instant::now();
        let began = began.lock().unwrap().unwrap();
        assert_eq!(steps.load(std::sync::atomic::Ordering::SeqCst), 1);
        // Released at the next slot, a period after the first; without the fix, 40 ms after.
        assert!(
            released - began >= Duration::from_millis(150),
            "released {:?} after the step began",
            released - began
        );
    });
}
