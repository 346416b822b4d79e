//! The request body, and the handshake that proves whether a send's body ever left.
//!
//! The HTTP client takes a body (`claim`, or `poll_frame` for reqwest) only to write it, and a
//! POST is not processed without its body: a body that was never taken proves the service never
//! had the request, whatever the failure was. The attempt loop claims a failed attempt's body
//! (FRESH -> ABANDONED) and only then counts the send as unsent; the connection, racing it,
//! takes the body (FRESH -> TAKEN) or, finding it abandoned, fails the write instead of sending
//! it.

use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::retry_slot::RetrySlot;
use crate::error::{Error, Result};
use crate::limits::Departure;

/// The most slots a send gives up for being too late for them (`misses_its_slot`); its
/// attempts then go on their slots however late. Only a process starved of its core for
/// milliseconds at every slot misses this many: it sends, where it would retake slots for as
/// long as the starvation lasts.
pub(crate) const MOST_SLOTS_MISSED: u32 = 3;

const FRESH: u8 = 0;
const TAKEN: u8 = 1;
/// The attempt was given up on: the body must never leave now.
const ABANDONED: u8 = 2;

/// Where a watched body stands; shared by the body (inside the connection) and the attempt loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct BodyWatch(Arc<AtomicU8>);

impl BodyWatch {
    /// Whether a failed attempt's request provably never reached the service: its body was
    /// never taken, and now never will be.
    pub(crate) fn claim_unsent(&self) -> bool {
        self.0
            .compare_exchange(FRESH, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
            || self.0.load(Ordering::Acquire) == ABANDONED
    }
}

/// Whether a send may still be written, asked as its body is taken, immediately before the
/// request is written: a campaign's claim on the message (`campaign/journal/fence.rs`). A body
/// whose fence refuses is abandoned, so the send provably never left.
pub(crate) trait SendFence: Send + Sync + std::fmt::Debug {
    /// `Err(why)` when the send must not be written.
    fn may_send(&self) -> std::result::Result<(), String>;
}

/// Where a send's current attempt stands, for a caller that may give the send up midway (a
/// campaign abandoned by a second Ctrl-C): the watch of the attempt's body, once one began;
/// the fence each attempt's body is checked against, when the caller has one; the pace's
/// record of the send, told when its body is written; and, for a paced send, where its
/// retries take their slots (`retry_slot.rs`).
#[derive(Default)]
pub(crate) struct SendProgress {
    watch: std::sync::Mutex<Option<BodyWatch>>,
    fence: Option<Arc<dyn SendFence>>,
    departure: std::sync::Mutex<Option<Departure>>,
    retry_slot: Option<Arc<dyn RetrySlot>>,
    /// Why a retry's slot could not be taken (its store failed): the send stopped there.
    slot_failure: std::sync::Mutex<Option<Error>>,
    /// An attempt may have been processed (it left, and failed ambiguously): whatever the
    /// current attempt does, the send is in doubt if given up.
    in_doubt: std::sync::atomic::AtomicBool,
    /// Slots its attempts were found too late for (`misses_its_slot`).
    slots_missed: std::sync::atomic::AtomicU32,
    /// The first attempt's `Authorization` value (or the provider's failure), asked of a token
    /// provider as its slot's last step (`Client::authorization_ahead`): asked after the slot,
    /// it would delay the request past the slot's time; asked before the whole wait for it, it
    /// could expire meanwhile.
    authorization: std::sync::Mutex<Option<Result<http::HeaderValue>>>,
}

impl std::fmt::Debug for SendProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendProgress")
            .field("fence", &self.fence)
            .field("paced_retries", &self.retry_slot.is_some())
            .finish_non_exhaustive()
    }
}

impl SendProgress {
    /// The progress of a send whose every attempt is checked against `fence`.
    pub(crate) fn fenced(fence: Option<Arc<dyn SendFence>>) -> Self {
        SendProgress {
            fence,
            ..SendProgress::default()
        }
    }

    /// The same, whose every attempt after its first takes a slot from `retry_slot`.
    pub(crate) fn with_retry_slot(mut self, retry_slot: Arc<dyn RetrySlot>) -> Self {
        self.retry_slot = Some(retry_slot);
        self
    }

    /// Whether the wait for a retry's slot counts in the call's total timeout
    /// (`RetrySlot::within_call_timeout`); without a retry slot, there is no such wait.
    pub(crate) fn retry_slot_within_call_timeout(&self) -> bool {
        self.retry_slot
            .as_ref()
            .is_none_or(|retry_slot| retry_slot.within_call_timeout())
    }

    pub(crate) fn fence(&self) -> Option<&Arc<dyn SendFence>> {
        self.fence.as_ref()
    }

    /// Before an attempt after the first: a paced send waits for a slot of its pace, which is
    /// told when this attempt's body is written. (A departure of an earlier attempt that never
    /// wrote is dropped: its place in the pace stays where it was released, which only spaces
    /// the sends after it a little more.) `Ok`: how long it waited outside the call's timeout
    /// (`RetrySlot::within_call_timeout`), by which the call's deadline moves. `Err`: no slot
    /// (the store failed, or the call's deadline would pass first), and the attempt must not be
    /// made; a store's failure is kept for `slot_failure`.
    /// `last_step` is made as the slot's last step (`RetrySlot::take`); without a retry slot
    /// it is not made at all.
    pub(crate) async fn retry_slot(
        &self,
        deadline: Option<std::time::Instant>,
        last_step: Option<futures::future::BoxFuture<'_, bool>>,
    ) -> Result<std::time::Duration> {
        let Some(retry_slot) = &self.retry_slot else {
            return Ok(std::time::Duration::ZERO);
        };
        let within = retry_slot.within_call_timeout();
        let started = std::time::Instant::now();
        match retry_slot
            .take(deadline.filter(|_| within), last_step)
            .await
        {
            Ok(departure) => {
                *crate::sync::lock(&self.departure) = (!departure.is_empty()).then_some(departure);
                Ok(if within {
                    std::time::Duration::ZERO
                } else {
                    started.elapsed()
                })
            }
            Err(error) => {
                if matches!(error, Error::SharedState(_)) {
                    *crate::sync::lock(&self.slot_failure) = Some(error.clone());
                }
                Err(error)
            }
        }
    }

    /// The `Authorization` value for the next attempt, or why the provider could not give it,
    /// asked as its slot's last step (replacing one asked for an earlier slot not used).
    pub(crate) fn authorize_ahead(&self, value: Result<http::HeaderValue>) {
        *crate::sync::lock(&self.authorization) = Some(value);
    }

    /// Whether what was asked for the slot is the provider's failure.
    pub(crate) fn authorization_failed(&self) -> bool {
        crate::sync::lock(&self.authorization)
            .as_ref()
            .is_some_and(Result::is_err)
    }

    /// What was asked for the slot, if anything; taken by the attempt that uses it.
    pub(crate) fn authorization_ahead(&self) -> Option<Result<http::HeaderValue>> {
        crate::sync::lock(&self.authorization).take()
    }

    /// The store's failure that stopped a retry (`retry_slot`), if one did.
    pub(crate) fn slot_failure(&self) -> Option<Error> {
        crate::sync::lock(&self.slot_failure).take()
    }

    /// The next body written is the send the pace released with `departure`
    /// (`LimitsStore::admit_then`): it is told when.
    pub(crate) fn departs(&self, departure: Departure) {
        if !departure.is_empty() {
            *crate::sync::lock(&self.departure) = Some(departure);
        }
    }

    /// Whether the attempt about to be made is too late for its slot (`Departure::missed`),
    /// asked by the attempt loop before it hands the request to the transport: the slot is
    /// then given up (its departure dropped), and the send takes a new one. Once a send has
    /// given up `MOST_SLOTS_MISSED`, its attempts go however late.
    pub(crate) fn misses_its_slot(&self) -> bool {
        if self.slots_missed.load(Ordering::Acquire) >= MOST_SLOTS_MISSED {
            return false;
        }
        let mut departure = crate::sync::lock(&self.departure);
        if !departure.as_ref().is_some_and(Departure::missed) {
            return false;
        }
        *departure = None;
        self.slots_missed.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// How many slots this send was found too late for (`misses_its_slot`), its every call
    /// included (a campaign's message may make several).
    pub(crate) fn slots_missed(&self) -> u32 {
        self.slots_missed.load(Ordering::Acquire)
    }

    /// A body of this send is being written: the pace learns when (once per release).
    fn left(&self) {
        let departure = crate::sync::lock(&self.departure).take();
        if let Some(departure) = departure {
            departure.left();
        }
    }

    /// The attempt that begins now.
    pub(crate) fn attempt(&self, watch: Option<&BodyWatch>) {
        *crate::sync::lock(&self.watch) = watch.cloned();
    }

    /// No attempt is under way (between a campaign's retries).
    pub(crate) fn between_attempts(&self) {
        self.attempt(None);
    }

    /// An attempt of this send may have been processed (`execute.rs`'s `in_doubt_before`).
    pub(crate) fn in_doubt(&self) {
        self.in_doubt.store(true, Ordering::Release);
    }

    /// Whether an attempt of this send may have been processed (`in_doubt`).
    pub(crate) fn was_in_doubt(&self) -> bool {
        self.in_doubt.load(Ordering::Acquire)
    }

    /// Whether the send, given up now, provably never left: no attempt may have been processed,
    /// and the current one's body, if one began, was never taken (and now never will be).
    pub(crate) fn claim_never_left(&self) -> bool {
        if self.in_doubt.load(Ordering::Acquire) {
            return false;
        }
        match crate::sync::lock(&self.watch).as_ref() {
            None => true,
            Some(watch) => watch.claim_unsent(),
        }
    }
}

/// Every request's body: empty (a GET) or JSON bytes, watched for sends.
#[derive(Debug, Default)]
pub(crate) struct OutgoingBody {
    data: Option<Bytes>,
    watch: Option<BodyWatch>,
    /// The send's progress, when its caller follows it: its fence, and its pace's record.
    progress: Option<Arc<SendProgress>>,
}

impl OutgoingBody {
    pub(crate) fn empty() -> Self {
        OutgoingBody::default()
    }

    /// `data`, and the watch that tells whether it was ever taken; taken only while the fence
    /// of `progress` (when there is one) allows it, and then told to `progress`.
    pub(crate) fn watched(data: Bytes, progress: Option<Arc<SendProgress>>) -> (Self, BodyWatch) {
        let watch = BodyWatch::default();
        let body = OutgoingBody {
            data: Some(data),
            watch: Some(watch.clone()),
            progress,
        };
        (body, watch)
    }

    /// The same body again, watched by the same watch, for a request sent again after a
    /// refusal that proves it was not processed (an HTTP/2 GOAWAY): it counts as having left
    /// if either copy did, and can never leave once the attempt is abandoned.
    pub(crate) fn again(&self) -> Self {
        OutgoingBody {
            data: self.data.clone(),
            watch: self.watch.clone(),
            progress: self.progress.clone(),
        }
    }

    /// The bytes to write, claimed (FRESH -> TAKEN): `Err` when the attempt was abandoned, or
    /// its fence refuses now, and nothing may be written. The HTTP/1.1 transport calls it
    /// immediately before writing; reqwest, through [`Body::poll_frame`].
    pub(crate) fn claim(&self) -> std::result::Result<&[u8], Abandoned> {
        if let Some(watch) = &self.watch {
            let fence = self.progress.as_ref().and_then(|progress| progress.fence());
            if fence.is_some_and(|fence| fence.may_send().is_err()) {
                // Abandoned, so that the attempt loop knows it never left (a copy sent again
                // after a refusal is not written either, whatever the first copy did).
                let _ =
                    watch
                        .0
                        .compare_exchange(FRESH, ABANDONED, Ordering::AcqRel, Ordering::Acquire);
                return Err(Abandoned);
            }
            let claimed =
                watch
                    .0
                    .compare_exchange(FRESH, TAKEN, Ordering::AcqRel, Ordering::Acquire);
            if claimed == Err(ABANDONED) {
                return Err(Abandoned);
            }
            if claimed.is_ok() {
                if let Some(progress) = &self.progress {
                    progress.left();
                }
            }
        }
        Ok(self.data.as_deref().unwrap_or_default())
    }
}

#[derive(Debug)]
pub(crate) struct Abandoned;

impl std::fmt::Display for Abandoned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the attempt was abandoned before its body was sent")
    }
}

impl std::error::Error for Abandoned {}

impl Body for OutgoingBody {
    type Data = Bytes;
    type Error = Abandoned;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Abandoned>>> {
        if let Err(abandoned) = self.claim() {
            return Poll::Ready(Some(Err(abandoned)));
        }
        Poll::Ready(self.data.take().map(|data| Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |data| data.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::limits::LimitsStore;
    use std::task::Waker;
    use std::time::Duration;

    #[test]
    fn a_taken_body_cannot_be_claimed_unsent_and_an_abandoned_one_never_leaves() {
        let mut context = Context::from_waker(Waker::noop());
        let (mut taken, watch) = OutgoingBody::watched(Bytes::from_static(b"{}"), None);
        assert!(matches!(
            Pin::new(&mut taken).poll_frame(&mut context),
            Poll::Ready(Some(Ok(_)))
        ));
        assert!(!watch.claim_unsent());

        let (mut abandoned, watch) = OutgoingBody::watched(Bytes::from_static(b"{}"), None);
        assert!(watch.claim_unsent());
        assert!(watch.claim_unsent(), "claiming twice still says unsent");
        assert!(matches!(
            Pin::new(&mut abandoned).poll_frame(&mut context),
            Poll::Ready(Some(Err(Abandoned)))
        ));
        assert!(OutgoingBody::empty().is_end_stream());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_taken_tells_its_pace_when_it_left_once() {
        let limits = crate::limits::LocalLimits::new(Arc::new(crate::limits::Gate::new()));
        let slot = crate::limits::Slot {
            sender: None,
            campaign: Some(("c", 10.0)),
        };
        let progress = Arc::new(SendProgress::default());
        progress.departs(limits.admit_then(slot, None, None).await.unwrap());
        assert!(crate::sync::lock(&progress.departure).is_some());
        let (body, _) = OutgoingBody::watched(Bytes::from_static(b"{}"), Some(progress.clone()));
        let again = body.again();
        assert!(body.claim().is_ok());
        assert!(crate::sync::lock(&progress.departure).is_none(), "told");
        assert!(again.claim().is_ok());
        // Nothing to tell without a ring (unpaced): nothing is kept.
        let unpaced = crate::limits::Slot {
            sender: None,
            campaign: None,
        };
        progress.departs(limits.admit_then(unpaced, None, None).await.unwrap());
        assert!(crate::sync::lock(&progress.departure).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_too_late_for_its_slot_gives_it_up_three_times_at_most() {
        let progress = SendProgress::default();
        let by = tokio::time::Instant::now() + Duration::from_millis(2);
        progress.departs(Departure::written_by(by));
        assert!(!progress.misses_its_slot(), "in time");
        tokio::time::advance(Duration::from_millis(3)).await;
        assert!(progress.misses_its_slot(), "past its bound");
        // The slot is given up with it: nothing more to miss until the next slot.
        assert!(!progress.misses_its_slot());
        assert!(crate::sync::lock(&progress.departure).is_none());

        for missed in 2..=MOST_SLOTS_MISSED {
            progress.departs(Departure::written_by(tokio::time::Instant::now()));
            tokio::time::advance(Duration::from_millis(1)).await;
            assert!(progress.misses_its_slot());
            assert_eq!(progress.slots_missed(), missed);
        }
        progress.departs(Departure::written_by(tokio::time::Instant::now()));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(!progress.misses_its_slot(), "waived");
        assert!(
            crate::sync::lock(&progress.departure).is_some(),
            "kept, to be told"
        );
    }

    #[derive(Debug)]
    struct Refusing;

    impl SendFence for Refusing {
        fn may_send(&self) -> std::result::Result<(), String> {
            Err("taken over".to_owned())
        }
    }

    #[test]
    fn a_body_whose_fence_refuses_is_never_taken_and_counts_as_unsent() {
        let mut context = Context::from_waker(Waker::noop());
        let progress = SendProgress::fenced(Some(Arc::new(Refusing)));
        let (mut fenced, watch) =
            OutgoingBody::watched(Bytes::from_static(b"{}"), Some(Arc::new(progress)));
        let mut again = fenced.again();
        assert!(matches!(
            Pin::new(&mut fenced).poll_frame(&mut context),
            Poll::Ready(Some(Err(Abandoned)))
        ));
        assert!(matches!(
            Pin::new(&mut again).poll_frame(&mut context),
            Poll::Ready(Some(Err(Abandoned)))
        ));
        assert!(watch.claim_unsent());
    }
}
