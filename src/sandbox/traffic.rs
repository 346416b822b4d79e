//! What a test needs to judge a run of many processes against one sandbox: per sender, the
//! messages it committed in its busiest one-second window (sliding, by arrival) and the sends
//! refused over its throughput; per recipient, how many messages it got (a recipient with more
//! than one was messaged twice). Kept whatever the request log keeps; one counter per
//! recipient ever messaged.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::sync::lock;

const WINDOW: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(crate) struct Traffic {
    senders: Mutex<HashMap<String, Sender>>,
    recipients: Mutex<HashMap<String, u32>>,
}

#[derive(Default)]
struct Sender {
    /// Commits within the last second.
    recent: VecDeque<Instant>,
    busiest: u32,
    accepted: u64,
    throttled: u64,
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
    pub(crate) fn committed(&self, sender: &str, recipient: &str) {
        let now = Instant::now();
        {
            let mut senders = lock(&self.senders);
            let traffic = senders.entry(sender.to_owned()).or_default();
            traffic.accepted += 1;
            while traffic
                .recent
                .front()
                .is_some_and(|first| now.duration_since(*first) >= WINDOW)
            {
                traffic.recent.pop_front();
            }
            traffic.recent.push_back(now);
            let in_window = u32::try_from(traffic.recent.len()).unwrap_or(u32::MAX);
            traffic.busiest = traffic.busiest.max(in_window);
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
        for n in 0..5 {
            traffic.committed("861", &format!("862{n}"));
        }
        traffic.committed("861", "8620");
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
}
