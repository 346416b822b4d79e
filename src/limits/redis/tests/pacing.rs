//! How the shared pace spends its slots when something goes wrong between a reservation and its
//! use: a stalled answer's batch given back, a store that lost its state, a last step that
//! ends late.

use std::time::{Duration, Instant};

use super::{multi_thread, raw, store, Server};
use crate::limits::{LimitsStore, Slot};

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
