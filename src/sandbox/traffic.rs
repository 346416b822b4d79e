//! What a test needs to judge a run of many processes against one sandbox: per sender, the
//! messages it committed in its busiest one-second window (sliding, by arrival) and the sends
//! refused over its throughput; per recipient, how many messages it got (a recipient with more
//! than one was messaged twice). Kept whatever the request log keeps; one counter per
//! recipient ever messaged.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

const WINDOW: Duration = Duration::from_secs(1);
/// How much later than a later arrival an arrival may be recorded and still be counted in every
/// window it belongs to (two handlers are milliseconds apart; a send recorded later than this
/// counts only with the arrivals still kept).
const DISORDER: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(crate) struct Traffic {
    senders: Mutex<HashMap<String, Sender>>,
    /// A B-tree, for the ledger's reason (`store.rs`): no stall as it grows.
    recipients: Mutex<BTreeMap<String, u32>>,
}

#[derive(Default)]
struct Sender {
    /// The arrivals of the commits within a second and `DISORDER` of the latest, in order.
    recent: VecDeque<Instant>,
    busiest: u32,
    accepted: u64,
    throttled: u64,
}

impl Sender {
    fn record(&mut self, arrived: Instant) {
        let recent = &mut self.recent;
        let at = recent.partition_point(|earlier| *earlier <= arrived);
        recent.insert(at, arrived);
        // The windows `(e - 1 s, e]` that end at this arrival or at a later one have one more.
        for end in at..recent.len() {
            let Some(last) = recent.get(end).copied() else {
                break;
            };
            let first = recent.partition_point(|earlier| last.duration_since(*earlier) >= WINDOW);
            let in_window = u32::try_from(end + 1 - first).unwrap_or(u32::MAX);
            self.busiest = self.busiest.max(in_window);
        }
        // Kept: what the window of an arrival recorded up to `DISORDER` late may still hold.
        if let Some(latest) = recent.back().copied() {
            while recent
                .front()
                .is_some_and(|first| latest.duration_since(*first) >= WINDOW + DISORDER)
            {
                recent.pop_front();
            }
        }
    }
}

/// One sender's traffic (`Sandbox::traffic`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderTraffic {
    pub sender: String,
    /// Messages it committed.
    pub accepted: u64,
    /// The most it committed within any one second.
    pub busiest_second: u32,
    /// Sends refused over its throughput (`enforce_limits`).
    pub throttled: u64,
}

/// What the sandbox saw of the traffic since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrafficReport {
    /// By sender, in the order of their digits.
    pub senders: Vec<SenderTraffic>,
    /// Recipients that got more than one message.
    pub repeated_recipients: u64,
    /// The most messages one recipient got.
    pub most_to_one_recipient: u32,
}

impl Traffic {
    /// A message from `sender` to `recipient` that arrived at `arrived` was committed.
    ///
    /// Counted by arrival, as the platform counts a sender's throughput, not by when the
    /// sandbox got to it: a send that waited on the sandbox's own locks (its idempotency ledger
    /// growing past 28,672 keys took 8 ms) would otherwise be counted with the sends after it,
    /// and a second seen by the sandbox would hold more than the client sent in any second.
    /// Two handlers may so record out of order: an arrival is put in its place, and every
    /// window it belongs to is counted again.
    pub(crate) fn committed(&self, sender: &str, recipient: &str, arrived: Instant) {
        {
            let mut senders = lock(&self.senders);
            let traffic = senders.entry(sender.to_owned()).or_default();
            traffic.accepted += 1;
            traffic.record(arrived);
        }
        *lock(&self.recipients)
            .entry(recipient.to_owned())
            .or_default() += 1;
    }

    pub(crate) fn throttled(&self, sender: &str) {
        lock(&self.senders)
            .entry(sender.to_owned())
            .or_default()
            .throttled += 1;
    }

    pub(crate) fn report(&self) -> TrafficReport {
        let mut senders: Vec<SenderTraffic> = lock(&self.senders)
            .iter()
            .map(|(sender, traffic)| SenderTraffic {
                sender: sender.clone(),
                accepted: traffic.accepted,
                busiest_second: traffic.busiest,
                throttled: traffic.throttled,
            })
            .collect();
        senders.sort_by(|a, b| a.sender.cmp(&b.sender));
        let recipients = lock(&self.recipients);
        TrafficReport {
            senders,
            repeated_recipients: recipients.values().filter(|count| **count > 1).count() as u64,
            most_to_one_recipient: recipients.values().copied().max().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_slide_and_repeats_are_counted() {
        let traffic = Traffic::default();
        let now = Instant::now();
        for n in 0..5 {
            traffic.committed("861", &format!("862{n}"), now);
        }
        traffic.committed("861", "8620", now);
        traffic.throttled("861");
        let report = traffic.report();
        assert_eq!(
            report.senders,
            [SenderTraffic {
                sender: "861".into(),
                accepted: 6,
                busiest_second: 6,
                throttled: 1
            }]
        );
        assert_eq!(
            (report.repeated_recipients, report.most_to_one_recipient),
            (1, 2)
        );
    }

    #[test]
    fn sends_are_counted_by_arrival_whatever_order_they_are_recorded_in() {
        let start = Instant::now();
        let busiest = |arrivals: &[u64]| {
            let mut sender = Sender::default();
            for arrival in arrivals {
                sender.record(start + Duration::from_millis(*arrival));
            }
            sender.busiest
        };
        // What a window `(e - 1 s, e]` ending at each arrival holds, at most.
        let reference = |arrivals: &[u64]| {
            arrivals
                .iter()
                .map(|end| {
                    arrivals
                        .iter()
                        .filter(|at| *at <= end && end - *at < 1000)
                        .count()
                })
                .max()
                .unwrap_or(0)
        };
        assert_eq!(busiest(&[0, 1000, 2000]), 1);
        assert_eq!(busiest(&[1000, 0, 2000]), 1);
        // Recorded after a later one (it waited on a lock): every window it is in counts it.
        assert_eq!(busiest(&[0, 500, 1000, 990]), 3);
        assert_eq!(busiest(&[0, 999, 998, 997]), 4);
        // Each recorded up to 500 ms after it arrived (a send held on the sandbox's locks),
        // so in any order within that.
        let mut random = fastrand::Rng::with_seed(7);
        for _ in 0..300 {
            let mut arrivals: Vec<(u64, u64)> = (0..80)
                .map(|_| {
                    let at = random.u64(..4000);
                    (at + random.u64(..500), at)
                })
                .collect();
            arrivals.sort_unstable();
            let arrivals: Vec<u64> = arrivals.into_iter().map(|(_, at)| at).collect();
            assert_eq!(
                busiest(&arrivals) as usize,
                reference(&arrivals),
                "{arrivals:?}"
            );
        }
    }
}
