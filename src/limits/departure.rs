//! When a paced send really left: the store that keeps its sends from crowding a second
//! (`timeline.rs`'s ring) records a send as it releases it, and the HTTP client tells it when
//! the request is written (`client/body.rs`, as the body is claimed). The time between the two
//! is the client's own (a task waiting for a busy core, for a connection): counted from the
//! write, the sends given slots cannot put more than the pace in one second at the service.
//! A send's retries within `client/execute.rs` take slots of their own (`client/retry_slot.rs`).

use std::sync::Arc;

use tokio::time::Instant;

use super::timeline::Timeline;

/// A released send's places in its timelines' rings. Empty when the store keeps none (Redis,
/// whose slots are used within a bound of their time instead; an unpaced campaign).
#[derive(Default)]
pub struct Departure {
    marks: Vec<(Arc<Timeline>, u64)>,
}

impl Departure {
    /// The send of `marks`, one per timeline, as `Timeline::release` returned them.
    pub(super) fn of(marks: Vec<(Arc<Timeline>, u64)>) -> Self {
        Departure { marks }
    }

    /// Whether there is anything to record.
    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
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
            .finish()
    }
}
