//! The messages ready to send, in order, and their claims in the journal: a message leaves
//! only once this run holds its claim (the front `marked` of the queue; its request then waits
//! for its row to be recorded `dispatched`, `send.rs`), claims are asked a batch ahead (`claim_size.rs` sizes the batch), and an answer that comes back after the
//! queue was emptied by a stop is ignored. The engine (`engine/`) asks the journal and acts
//! on what it answers; this type keeps the queue's side of it.

use std::collections::{HashMap, HashSet, VecDeque};

use super::claim_size::ClaimSize;
use super::journal::{Claim, Claimed, Row};
use super::send::Ready;

/// How many times one message may lose its claim and be claimed again before it is reported
/// held by another run: a holder that is neither alive nor takeable must not keep the run
/// claiming in a loop.
const MAX_RECLAIMS: u8 = 4;

pub(super) struct Claims<P> {
    ready: VecDeque<Ready<P>>,
    /// How many messages at the front of `ready` are marked in the journal.
    marked: usize,
    /// How many the next claim asks for (it follows the campaign's speed).
    size: ClaimSize,
    /// How many times the queue was emptied by a stop (claims made before are ignored).
    drained: u64,
    /// Messages taken again while in doubt since an earlier run (`resend_unknown`): whatever
    /// this run sees of them, their journal rows stay in doubt unless a result comes back.
    doubtful: HashSet<u64>,
    /// How many times each message lost its claim and was claimed again.
    reclaims: HashMap<u64, u8>,
}

/// What the journal answered to one batch of claims, for the engine to act on.
pub(super) struct Answer<P> {
    /// The messages won (now marked), by index.
    pub(super) won: Vec<u64>,
    /// The messages lost, taken out of the queue, with the record that holds them: from the
    /// back of the batch to its front.
    pub(super) lost: Vec<(Ready<P>, Row)>,
}

impl<P> Claims<P> {
    pub(super) fn new() -> Self {
        Claims {
            ready: VecDeque::new(),
            marked: 0,
            size: ClaimSize::default(),
            drained: 0,
            doubtful: HashSet::new(),
            reclaims: HashMap::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.ready.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// How many the next claim asks for.
    pub(super) fn size(&self) -> usize {
        self.size.size()
    }

    /// Queued at the back, to be claimed; `in_doubt`: taken over in doubt (`resend_unknown`).
    pub(super) fn queue(&mut self, ready: Ready<P>, in_doubt: bool) {
        if in_doubt {
            self.doubtful.insert(ready.index);
        }
        self.ready.push_back(ready);
    }

    /// Forgets that message `index` was taken in doubt; whether it was.
    pub(super) fn forget_doubt(&mut self, index: u64) -> bool {
        self.doubtful.remove(&index)
    }

    /// Empties the queue (a stop): the messages, and how many at its front were marked.
    /// Claims being made now are answered for messages no longer queued: ignored.
    pub(super) fn drain(&mut self) -> (Vec<Ready<P>>, usize) {
        let queued = self.ready.drain(..).collect();
        let marked = std::mem::take(&mut self.marked);
        self.drained = self.drained.wrapping_add(1);
        (queued, marked)
    }

    /// The next claims to ask for, and the queue's generation they are for; none while the
    /// marked ones are enough, or when every queued message is marked.
    pub(super) fn next_claims(&mut self) -> Option<(u64, Vec<Claim>)> {
        if !self.size.wants_more(self.marked) || self.marked >= self.ready.len() {
            return None;
        }
        self.size.asked();
        let claims: Vec<Claim> = self
            .ready
            .iter()
            .skip(self.marked)
            // Up to the size in all, never a size more: what a killed run leaves in doubt is at
            // most the largest size and what was in flight.
            .take(self.size.size().saturating_sub(self.marked))
            .map(|ready| Claim {
                identity: ready.identity,
                key: ready.key.clone(),
                take_over: self.doubtful.contains(&ready.index),
            })
            .collect();
        Some((self.drained, claims))
    }

    /// The journal answered the claims asked last (whatever it said).
    pub(super) fn answered(&mut self) {
        self.size.answered();
    }

    /// What the journal answered to the claims of `ready[marked..]`, asked for generation
    /// `drained`: the messages won are marked, with the key their record holds; the others
    /// are taken out of the queue, for the engine to decide on. None when the queue was
    /// emptied meanwhile (a stop): those messages were reported already.
    pub(super) fn answer(&mut self, drained: u64, claimed: Vec<Claimed>) -> Option<Answer<P>> {
        if drained != self.drained {
            return None;
        }
        let start = self.marked;
        let mut won = Vec::new();
        let mut lost = Vec::new();
        for (offset, claim) in claimed.into_iter().enumerate() {
            match claim {
                Claimed::Won { key, dispatch } => {
                    // The key its record holds: a message taken over in doubt goes out with
                    // the key it may already have gone out with, whatever key this run had.
                    if let Some(ready) = self.ready.get_mut(start + offset) {
                        ready.key = key;
                        ready.dispatch = dispatch;
                        if !self.reclaims.is_empty() {
                            self.reclaims.remove(&ready.index);
                        }
                        won.push(ready.index);
                    }
                    self.marked += 1;
                }
                Claimed::Lost(row) => lost.push((start + offset, row)),
            }
        }
        // From the back, so the positions before stay right.
        let lost = lost
            .into_iter()
            .rev()
            .filter_map(|(position, row)| self.ready.remove(position).map(|ready| (ready, row)))
            .collect();
        Some(Answer { won, lost })
    }

    /// A lost message the journal says may go: at the back, to be claimed again, a few times
    /// at most (a holder neither alive nor takeable must not keep the run claiming in a
    /// loop). Given back when it was claimed too often: it is then held by another run.
    pub(super) fn claim_again(&mut self, ready: Ready<P>, in_doubt: bool) -> Option<Ready<P>> {
        let tries = self.reclaims.entry(ready.index).or_insert(0);
        *tries = tries.saturating_add(1);
        if *tries > MAX_RECLAIMS {
            self.reclaims.remove(&ready.index);
            self.doubtful.remove(&ready.index);
            return Some(ready);
        }
        self.queue(ready, in_doubt);
        None
    }

    /// Message `index` has its outcome: nothing of it is kept.
    pub(super) fn settled(&mut self, index: u64) {
        self.reclaims.remove(&index);
        self.doubtful.remove(&index);
    }

    /// The next message to send: the front of the queue, once it is marked when there is a
    /// journal (`journaled`).
    pub(super) fn next_to_send(&mut self, journaled: bool) -> Option<Ready<P>> {
        if journaled && self.marked == 0 {
            if !self.ready.is_empty() {
                self.size.ran_out();
            }
            return None;
        }
        let ready = self.ready.pop_front()?;
        self.marked = self.marked.saturating_sub(1);
        self.size.dispatched();
        Some(ready)
    }
}
