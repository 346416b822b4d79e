//! A campaign's pacing against the send itself: a pair spaced while a message waits for its
//! slot is waited for before it is sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

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

    use crate::campaign::handle::Control;
    use crate::campaign::send::{send_one, Context, Ready};
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
        dispatch: false,
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
