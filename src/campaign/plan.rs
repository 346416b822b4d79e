//! The preflight of a campaign (`plan()`, `send_many(..., dry_run=True)`): every message
//! validated, nothing sent. It reports invalid rows, duplicates, each sender's state (from one
//! look-up of the account listing) and each account's unique recipients against its messaging
//! tier, and how long the campaign would take at the chosen pace.
//!
//! It keeps only what it reports: counts, a 128-bit fingerprint per distinct message (for
//! duplicates) and a recipient per distinct (account, recipient), so a million rows fit easily.

use std::collections::{HashMap, HashSet};

use super::message::{FingerprintMap, Input};
use crate::api::Directory;
use crate::error::Error;
use crate::platform::{verdict, Verdict};

/// Examples of invalid rows and duplicates kept (the counts are always exact).
const EXAMPLES: usize = 1000;

#[derive(Clone, Debug)]
pub struct PlanOptions {
    pub dedupe: bool,
    pub pace_auto: bool,
    pub rate_limit: Option<f64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SenderPlan {
    pub digits: String,
    pub messages: u64,
    /// Known to the listing: its status, quality and throughput.
    pub listed: bool,
    pub status: Option<String>,
    pub quality_rating: Option<String>,
    pub throughput: Option<String>,
    pub account_id: Option<String>,
    /// Messages per second it would be paced at with `pace="auto"` (`None`: no known pace).
    pub pace: Option<f64>,
    /// Why its messages would fail up front.
    pub problem: Option<String>,
    pub warning: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct AccountPlan {
    pub id: String,
    pub name: Option<String>,
    pub tier: Option<String>,
    pub limit: Option<u64>,
    pub unique_recipients: u64,
}

#[derive(Debug)]
pub struct Plan {
    pub total: u64,
    pub valid: u64,
    pub invalid_count: u64,
    /// The first invalid rows: (index, why).
    pub invalid: Vec<(u64, Error)>,
    pub duplicate_count: u64,
    /// The first duplicates: (index, index of the original).
    pub duplicates: Vec<(u64, u64)>,
    /// Valid, not duplicates, from senders that can send.
    pub to_send: u64,
    pub senders: Vec<SenderPlan>,
    pub accounts: Vec<AccountPlan>,
    /// At the chosen pace; `None` when nothing paces the campaign (as fast as the service
    /// answers).
    pub estimated_seconds: Option<f64>,
    pub warnings: Vec<String>,
}

pub struct Planner {
    options: PlanOptions,
    directory: Directory,
    total: u64,
    valid: u64,
    invalid_count: u64,
    invalid: Vec<(u64, Error)>,
    duplicate_count: u64,
    duplicates: Vec<(u64, u64)>,
    seen: FingerprintMap<u64>,
    /// Per sender: messages that would be sent.
    per_sender: HashMap<String, u64>,
    /// Per account: distinct recipients.
    recipients: HashMap<String, HashSet<u64>>,
    /// Per sender: whether its messages would go out.
    sends: HashMap<String, bool>,
}

impl Planner {
    pub fn new(options: PlanOptions, directory: Directory) -> Self {
        Planner {
            options,
            directory,
            total: 0,
            valid: 0,
            invalid_count: 0,
            invalid: Vec::new(),
            duplicate_count: 0,
            duplicates: Vec::new(),
            seen: FingerprintMap::default(),
            per_sender: HashMap::new(),
            recipients: HashMap::new(),
            sends: HashMap::new(),
        }
    }

    pub fn add<P>(&mut self, input: Input<P>) {
        self.total += 1;
        let prepared = match input.message {
            Ok(prepared) => prepared,
            Err(error) => {
                self.invalid_count += 1;
                if self.invalid.len() < EXAMPLES {
                    self.invalid.push((input.index, error));
                }
                return;
            }
        };
        self.valid += 1;
        if self.options.dedupe {
            if let Some(original) = self.seen.get(&prepared.fingerprint) {
                self.duplicate_count += 1;
                if self.duplicates.len() < EXAMPLES {
                    self.duplicates.push((input.index, *original));
                }
                return;
            }
            self.seen.insert(prepared.fingerprint, input.index);
        }
        let from = &prepared.request.from;
        *self.per_sender.entry(from.clone()).or_default() += 1;
        // The tier is one budget for an account's numbers: recipients count per account, for
        // senders whose messages would go out.
        let Some(sender) = self.directory.sender(from) else {
            return;
        };
        let sends = *self
            .sends
            .entry(from.clone())
            .or_insert_with(|| !matches!(verdict(sender), Verdict::Refuse(_)));
        if sends {
            self.recipients
                .entry(sender.account_id.clone())
                .or_default()
                .insert(prepared.recipient());
        }
    }

    pub fn finish(self) -> Plan {
        let mut warnings = Vec::new();
        let mut to_send = 0;
        let mut slowest: Option<f64> = None;
        let mut senders: Vec<SenderPlan> = self
            .per_sender
            .iter()
            .map(|(digits, messages)| {
                let listed = self.directory.sender(digits);
                let (pace, problem, warning) = match listed.map(|sender| verdict(sender)) {
                    None => (
                        None,
                        Some(format!(
                            "{} is not a business phone number of this account",
                            crate::masking::mask_phone(digits)
                        )),
                        None,
                    ),
                    Some(Verdict::Refuse(reason)) => (None, Some(reason), None),
                    Some(Verdict::Send { pace, warning }) => (pace, None, warning),
                };
                if problem.is_none() {
                    to_send += messages;
                    if self.options.pace_auto {
                        if let Some(pace) = pace {
                            let seconds = crate::limits::duration_of(*messages, pace).as_secs_f64();
                            slowest = Some(slowest.map_or(seconds, |s| s.max(seconds)));
                        }
                    }
                }
                if let Some(problem) = &problem {
                    warnings.push(format!(
                        "{messages} message(s) would fail up front: {problem}"
                    ));
                }
                if let Some(warning) = &warning {
                    warnings.push(warning.clone());
                }
                SenderPlan {
                    digits: digits.clone(),
                    messages: *messages,
                    listed: listed.is_some(),
                    status: listed.and_then(|s| s.status.clone()),
                    quality_rating: listed.and_then(|s| s.quality_rating.clone()),
                    throughput: listed.and_then(|s| s.throughput.clone()),
                    account_id: listed.map(|s| s.account_id.clone()),
                    pace,
                    problem,
                    warning,
                }
            })
            .collect();
        senders.sort_by(|a, b| b.messages.cmp(&a.messages).then(a.digits.cmp(&b.digits)));
        let mut accounts: Vec<AccountPlan> = self
            .recipients
            .iter()
            .filter_map(|(id, recipients)| {
                let account = self.directory.account(id)?;
                let unique = recipients.len() as u64;
                if let Some(limit) = account.limit {
                    if unique > limit {
                        warnings.push(format!(
                            "account {} ({}) would reach {unique} unique recipients, past its \
                             messaging tier {} ({limit} per rolling 24 h)",
                            account.name.as_deref().unwrap_or(&account.id),
                            account.id,
                            account.tier.as_deref().unwrap_or("")
                        ));
                    } else if unique * 5 >= limit * 4 {
                        warnings.push(format!(
                            "account {} ({}) would reach {unique} unique recipients, {:.0}% of \
                             its messaging tier {} ({limit} per rolling 24 h)",
                            account.name.as_deref().unwrap_or(&account.id),
                            account.id,
                            unique as f64 * 100.0 / limit as f64,
                            account.tier.as_deref().unwrap_or("")
                        ));
                    }
                }
                Some(AccountPlan {
                    id: account.id.clone(),
                    name: account.name.clone(),
                    tier: account.tier.clone(),
                    limit: account.limit,
                    unique_recipients: unique,
                })
            })
            .collect();
        accounts.sort_by(|a, b| a.id.cmp(&b.id));
        // As the campaign paces them (the first at once, then one a period), not `n / rate`.
        let batch = self
            .options
            .rate_limit
            .map(|rate| crate::limits::duration_of(to_send, rate).as_secs_f64());
        let estimated_seconds = match (slowest, batch) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (one, other) => one.or(other),
        };
        Plan {
            total: self.total,
            valid: self.valid,
            invalid_count: self.invalid_count,
            invalid: self.invalid,
            duplicate_count: self.duplicate_count,
            duplicates: self.duplicates,
            to_send,
            senders,
            accounts,
            estimated_seconds,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::api::SendMessage;
    use crate::campaign::Prepared;
    use crate::wire::{BusinessAccount, FromWire};
    use serde_json::json;

    fn directory() -> Directory {
        let account = json!({
            "bizAccountId": "A1", "name": "Acme", "chatBusinessManagerMessagingLimit": "TIER_50",
            "businessPhoneNumbers": [
                {"phoneNumberId": "n1", "displayPhoneNumber": "+1 415 555 0100", "status": "CONNECTED",
                 "qualityRating": "GREEN", "throughput": "STANDARD", "bizAccountId": "A1"},
                {"phoneNumberId": "n2", "displayPhoneNumber": "+1 415 555 0101", "status": "DISCONNECTED",
                 "qualityRating": "RED", "throughput": "STANDARD", "bizAccountId": "A1"}
            ]
        });
        let mut directory = Directory::default();
        let body = bytes::Bytes::from(account.to_string());
        directory.add(&BusinessAccount::from_json(body).unwrap());
        directory
    }

    fn input(index: u64, to: &str, from: &str) -> Input<()> {
        let message = SendMessage {
            to: to.into(),
            from: from.into(),
            template_name: "t".into(),
            parameters: json!("p"),
            language: "en".into(),
        };
        Input {
            index,
            payload: (),
            message: Prepared::new(&message, None),
        }
    }

    #[test]
    fn a_plan_counts_checks_and_estimates() {
        let mut planner = Planner::new(
            PlanOptions {
                dedupe: true,
                pace_auto: true,
                rate_limit: None,
            },
            directory(),
        );
        for i in 0..120u64 {
            planner.add(input(i, &format!("86138{:08}", i % 60), "14155550100"));
        }
        planner.add(input(120, "12", "14155550100"));
        planner.add(input(121, "8613800000001", "14155550101"));
        planner.add(input(122, "8613800000001", "19995550100"));
        let plan = planner.finish();
        assert_eq!((plan.total, plan.valid, plan.invalid_count), (123, 122, 1));
        assert_eq!(plan.duplicate_count, 60);
        assert_eq!(plan.duplicates[0], (60, 0));
        assert_eq!(plan.to_send, 60);
        let first = &plan.senders[0];
        assert_eq!((first.messages, first.pace), (60, Some(60.0)));
        assert!(plan.senders.iter().any(|s| s
            .problem
            .as_deref()
            .is_some_and(|p| p.contains("DISCONNECTED"))));
        assert!(plan.senders.iter().any(|s| !s.listed));
        // The disconnected number's message would not go out: it does not count.
        assert_eq!(plan.accounts[0].unique_recipients, 60);
        assert!(plan
            .warnings
            .iter()
            .any(|w| w.contains("past its messaging tier TIER_50")));
        // 60 messages at 60/s: 59 periods of the timeline (a second and 5 ms per 60).
        assert!((plan.estimated_seconds.unwrap() - 59.0 * 1.005 / 60.0).abs() < 1e-9);
    }
}
