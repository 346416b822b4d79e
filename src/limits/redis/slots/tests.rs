//! The pool of reserved slots alone, without a store: fetching, taking, deadlines.

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use super::*;
use std::sync::Arc;

#[tokio::test]
async fn one_caller_fetches_for_all_and_deadlines_take_nothing() {
    let pool = Arc::new(Pool::new(Duration::from_millis(10)));
    let fetches = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let pool = Arc::clone(&pool);
        let fetches = Arc::clone(&fetches);
        tasks.push(tokio::spawn(async move {
            pool.take(
                None,
                Duration::ZERO,
                |want, _| {
                    fetches.fetch_add(1, Ordering::Relaxed);
                    let offsets = (0..want as u64).map(|i| Duration::from_millis(i * 10));
                    std::future::ready(Ok(Grant::Slots(offsets.collect(), ())))
                },
                |()| std::future::ready(()),
            )
            .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    assert!(fetches.load(Ordering::Relaxed) < 8);

    // A first free slot past the deadline: a timeout at once.
    let pool = Pool::new(Duration::from_millis(10));
    let deadline = Instant::now() + Duration::from_millis(50);
    let refused = pool
        .take(
            Some(deadline),
            Duration::ZERO,
            |_, _| std::future::ready(Ok(Grant::FirstFree(Duration::from_secs(5)))),
            |()| std::future::ready(()),
        )
        .await;
    assert!(matches!(refused, Err(Error::Timeout(_))));
}

/// An answer to a request made before a pause this process learned of is not used (its
/// slots may lie within the pause) and is given back.
#[tokio::test]
async fn an_answer_asked_before_a_pause_is_given_back() {
    let pool = Pool::new(Duration::from_millis(1));
    let asked = Mutex::new(0_u32);
    let given_back = Mutex::new(Vec::new());
    let fetch = |_want: usize, _horizon: Duration| {
        let batch = {
            let mut asked = lock(&asked);
            *asked += 1;
            *asked
        };
        if batch == 1 {
            pool.pause();
        }
        std::future::ready(Ok(Grant::Slots(vec![Duration::ZERO], batch)))
    };
    let give_back = |batch| {
        lock(&given_back).push(batch);
        std::future::ready(())
    };
    pool.take(None, Duration::ZERO, fetch, give_back)
        .await
        .unwrap();
    assert_eq!(*lock(&given_back), vec![1]);
    assert_eq!(*lock(&asked), 2);
}

/// A stall's batch is dropped unused and given back before the next request; a quick
/// answer's batch is kept and never given back. (Real time: the stall is 200 ms against
/// answers that are ready at once, far past `SLOW_ANSWER` times the usual on any machine.)
#[tokio::test]
async fn a_stalled_batch_is_given_back_and_never_used() {
    let pool = Pool::new(Duration::from_millis(1));
    let asked = Mutex::new(0_u32);
    let given_back = Mutex::new(Vec::new());
    let taken_from = Mutex::new(Vec::new());
    let fetch = |_want: usize, _horizon: Duration| {
        let batch = {
            let mut asked = lock(&asked);
            *asked += 1;
            *asked
        };
        async move {
            if batch == 2 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Ok(Grant::Slots(vec![Duration::ZERO], batch))
        }
    };
    let give_back = |batch| {
        lock(&given_back).push(batch);
        std::future::ready(())
    };
    for _ in 0..2 {
        pool.take(None, Duration::ZERO, fetch, give_back)
            .await
            .unwrap();
        taken_from.lock().unwrap().push(*lock(&asked));
    }
    // Batch 1 served the first caller; batch 2 stalled, was given back, and batch 3
    // served the second.
    assert_eq!(*lock(&given_back), vec![2]);
    assert_eq!(*taken_from.lock().unwrap(), vec![1, 3]);
}

#[test]
fn a_slot_is_used_at_most_late_after_its_true_time_unless_the_store_is_far() {
    let ms = Duration::from_millis;
    let usual = Duration::from_micros(600);
    // A quick answer: its round trip and the time to wake add up to `LATE`.
    for took in [Duration::ZERO, usual, ms(2), ms(5)] {
        assert_eq!(time_to_use(took, usual), Some(LATE - took), "{took:?}");
    }
    // A stall: given up.
    assert_eq!(time_to_use(ms(6), usual), None);
    assert_eq!(time_to_use(ms(11), usual), None);
    // A store every answer takes 6 ms or 20 ms to come from: still used, with the least
    // time to wake (the guard no longer covers the round trip: `mod.rs` says so).
    assert_eq!(time_to_use(ms(6), ms(6)), Some(LEAST_TO_WAKE));
    assert_eq!(time_to_use(ms(21), ms(20)), Some(LEAST_TO_WAKE));
}

/// The arithmetic `LATE` rests on: a slot is used at most `LATE` after its true time, the
/// way to the service may differ by up to 2 ms, and still no second holds more than the
/// pace, because `r + 1` consecutive slots of a pace of `r` span more than a second and
/// both (a send at exactly the second's end belongs to the next).
#[test]
fn pace_plus_one_slots_span_a_second_and_the_lateness_allowed() {
    let way_there = Duration::from_millis(2);
    let needed = Duration::from_secs(1) + LATE + way_there;
    for pace in [
        1, 2, 3, 7, 50, 60, 80, 200, 750, 1000, 5000, 6400, 9999, 100_000,
    ] {
        let period = Duration::from_micros(super::super::period(f64::from(pace)).unwrap());
        assert!(
            period * pace >= needed,
            "{pace}/s: {pace} periods of {period:?} span less than {needed:?}"
        );
    }
}

#[test]
fn the_usual_round_trip_is_the_quickest_recent_one() {
    let ms = Duration::from_millis;
    let mut state = State::default();
    assert_eq!(state.usual_round_trip(), None);
    state.count_round_trip(Duration::from_micros(600));
    // An outage's retries, counted in one answer: not usual, and the next stall is one.
    state.count_round_trip(Duration::from_secs(10));
    assert_eq!(state.usual_round_trip(), Some(Duration::from_micros(600)));
    assert_eq!(
        time_to_use(ms(200), state.usual_round_trip().unwrap()),
        None
    );
    // A store slower for good: usual once the quick answers are out of the recent ones.
    for _ in 0..RECENT_ANSWERS - 2 {
        state.count_round_trip(ms(20));
        assert_eq!(state.usual_round_trip(), Some(Duration::from_micros(600)));
    }
    state.count_round_trip(ms(20));
    assert_eq!(state.usual_round_trip(), Some(ms(20)));
    assert_eq!(time_to_use(ms(21), ms(20)), Some(LEAST_TO_WAKE));
}
