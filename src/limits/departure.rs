//! When a paced send really left: the store that keeps its sends from crowding a second
//! (`timeline.rs`'s ring) records a send as it releases it, and the HTTP client tells it when
//! the request is written (`client/body.rs`, as the body is claimed). The time between the two
//! is the client's own (a task waiting for a busy core, for a connection): counted from the
//! write, the sends given slots cannot put more than the pace in one second at the service.
//! A send's retries within `client/execute.rs` take slots of their own (`client/retry_slot.rs`).
//!
//! A store that cannot count a send from its write (Redis: every process's sends share one
//! timeline in the store, which a late write cannot move) gives the latest its attempt may be
//! made instead (`write_by`). An attempt found past it as it is about to be handed to the
//! transport is not made on that slot, and the send takes a new one (`client/execute.rs`):
//! whatever made it late (a `Retry-After` gate, a process not scheduled), the request does
//! not go out next to the following slots, where it could put more than the pace in one
//! second. (Three slots at most per send: `client/body.rs`'s `MOST_SLOTS_MISSED`. What the
//! transport does after the hand-off, such as opening a connection, is not bounded.)

use std::sync::Arc;

use tokio::time::Instant;

use super::timeline::Timeline;

/// A released send's places in its timelines' rings, or the latest its request may be
/// written. Empty for a send with neither (an unpaced campaign).
#[derive(Default)]
pub struct Departure {
    marks: Vec<(Arc<Timeline>, u64)>,
    /// Past this, the attempt is not made on this slot: it is missed (`missed`).
    write_by: Option<Instant>,
}

impl Departure {
    /// The send of `marks`, one per timeline, as `Timeline::release` returned them.
    pub(super) fn of(marks: Vec<(Arc<Timeline>, u64)>) -> Self {
        Departure {
            marks,
            write_by: None,
        }
    }

    /// A send whose attempt must be made by `write_by`, or on another slot.
    pub(crate) fn written_by(write_by: Instant) -> Self {
        Departure {
            marks: Vec::new(),
            write_by: Some(write_by),
        }
    }

    /// Whether there is anything to record or check.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty() && self.write_by.is_none()
    }

    /// Whether it is too late now to make the attempt (its slot is missed).
    pub(crate) fn missed(&self) -> bool {
        self.write_by.is_some_and(|by| Instant::now() > by)
    }

    /// The send's request is being written now.
    pub fn left(self) {
        let at = Instant::now();
        for (timeline, mark) in self.marks {
            timeline.left(mark, at);
        }
    }
}

impl std::fmt::Debug for Departure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Departure")
            .field("paces", &self.marks.len())
            .field("write_by", &self.write_by)
            .finish()
    }
}
