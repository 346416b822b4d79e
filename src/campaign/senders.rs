//! What a campaign knows of its senders with `pace="auto"`: each business number's status,
//! quality, throughput and account (whose messaging tier is one budget for all its numbers),
//! looked up once from the account listing, and what follows from it for a campaign (the
//! platform's rules themselves are `crate::platform`'s): who may send, at what pace, and what
//! to warn about.

use std::collections::HashMap;
use std::sync::Arc;

use super::handle::Warning;
use super::message::Prepared;
// `admit.rs` names `Account` from here.
use crate::api::Account;
use crate::api::Directory;
use crate::error::{Error, Result};
use crate::limits::{LimitsStore, TierVerdict};
use crate::platform::{verdict, Verdict};

/// What `pace="auto"` decides for each message of a campaign: whether its sender may send, at
/// which pace, and against which account's tier its recipient counts. The warnings it finds are
/// handed back with each decision, to be reported by the engine.
pub(super) struct SenderPolicy {
    directory: Directory,
    /// Decided once per sender.
    verdicts: HashMap<String, Verdict>,
    /// Accounts already warned about: near their tier, past it.
    warned: HashMap<String, (bool, bool)>,
}

/// What [`SenderPolicy::check`] found for one message.
pub(super) struct Checked {
    /// Its sender's pace in messages per second, if it has one.
    pub(super) pace: Option<f64>,
    /// The account whose tier its recipient counts against, when the tier has a limit.
    pub(super) tier: Option<Arc<Account>>,
    /// Something worth telling the caller, found while checking (each said once per campaign).
    pub(super) warnings: Vec<Warning>,
}

impl SenderPolicy {
    pub(super) fn new(directory: Directory) -> Self {
        SenderPolicy {
            directory,
            verdicts: HashMap::new(),
            warned: HashMap::new(),
        }
    }

    /// With `pace="auto"`: refuses a sender that cannot send, paces the others, and names the
    /// tier the message's recipient counts against.
    pub(super) fn check(&mut self, prepared: &Prepared) -> Result<Checked> {
        let mut warnings = Vec::new();
        let from = &prepared.request.from;
        let Some(sender) = self.directory.sender(from).cloned() else {
            return Err(Error::validation(
                "from_",
                format!(
                    "{} is not a business phone number of this account (checked before \
                     sending, pace=\"auto\")",
                    crate::masking::mask_phone(from)
                ),
            ));
        };
        if !self.verdicts.contains_key(from) {
            let decided = verdict(&sender);
            if let Verdict::Send { pace, warning } = &decided {
                if pace.is_none() {
                    warnings.push(Warning {
                        kind: "unpaced",
                        message: format!(
                            "sender {} has throughput {:?}, whose pace is unknown: it is not \
                             paced",
                            crate::masking::mask_phone(from),
                            sender.throughput.as_deref().unwrap_or("")
                        ),
                        account_id: Some(sender.account_id.clone()),
                        sender: Some(from.clone()),
                    });
                }
                if let Some(message) = warning {
                    warnings.push(Warning {
                        kind: "quality",
                        message: message.clone(),
                        account_id: Some(sender.account_id.clone()),
                        sender: Some(from.clone()),
                    });
                }
            }
            self.verdicts.insert(from.clone(), decided);
        }
        let pace = match self.verdicts.get(from) {
            Some(Verdict::Refuse(reason)) => {
                return Err(Error::validation(
                    "from_",
                    format!("{reason} (checked before sending, pace=\"auto\")"),
                ))
            }
            Some(Verdict::Send { pace, .. }) => *pace,
            None => None,
        };
        let tier = self
            .directory
            .account(&sender.account_id)
            .filter(|account| account.limit.is_some())
            .cloned();
        Ok(Checked {
            pace,
            tier,
            warnings,
        })
    }

    /// The warnings, each once per account: its unique recipients reach 80 % of its tier
    /// (`tier_near`), and a recipient is past it (`over`: `tier`). `shared`: counted across
    /// every process sharing the limits over the last 24 h (else in this campaign);
    /// `enforcing`: messages past the tier fail before sending (`enforce_tier`).
    pub(super) fn tier_warnings(
        &mut self,
        account: &Account,
        unique: u64,
        over: bool,
        shared: bool,
        enforcing: bool,
    ) -> Vec<Warning> {
        let Some(limit) = account.limit else {
            return Vec::new();
        };
        let warned = self.warned.entry(account.id.clone()).or_default();
        let near = !warned.0 && (over || unique * 5 >= limit * 4);
        let over = !warned.1 && over;
        warned.0 |= near;
        warned.1 |= over;
        let tier = account.tier.clone().unwrap_or_default();
        let name = account.name.clone().unwrap_or_else(|| account.id.clone());
        let counted = if shared {
            "in the last 24 h (every process sharing the limits)"
        } else {
            "in this campaign"
        };
        let mut warnings = Vec::new();
        if near {
            warnings.push(Warning {
                kind: "tier_near",
                message: format!(
                    "account {name} ({}) reaches 80% of its messaging tier {tier} ({limit} \
                     unique recipients per rolling 24 h) {counted}",
                    account.id
                ),
                account_id: Some(account.id.clone()),
                sender: None,
            });
        }
        if over {
            let fate = if enforcing {
                "messages to new recipients past the limit fail before sending"
            } else {
                "messages to new recipients past the limit will be refused"
            };
            warnings.push(Warning {
                kind: "tier",
                message: format!(
                    "account {name} ({}) reaches more than {limit} unique recipients {counted}, \
                     past its messaging tier {tier} (unique recipients per rolling 24 h): {fate}",
                    account.id
                ),
                account_id: Some(account.id.clone()),
                sender: None,
            });
        }
        warnings
    }
}

/// What counting a batch's new recipients against their accounts' tiers found.
pub(super) struct TierCount {
    /// The messages (by position in the batch) that must not go, and why.
    pub(super) refused: HashMap<usize, String>,
    /// At 80 % of a tier and past it, in the order found.
    pub(super) warnings: Vec<Warning>,
    /// The store failed: the accounts after this one were not counted.
    pub(super) failure: Option<Error>,
}

/// Counts the recipients of the messages about to be queued (`counted`: position, recipient,
/// account) against their accounts' tiers (`pace="auto"`): warns at 80 % and past a tier, and
/// refuses new recipients past a tier when `enforce_tier` is on (with shared limits every
/// process's recipients count; in one process, this campaign's).
pub(super) async fn count_tiers(
    limits: &dyn LimitsStore,
    mut policy: Option<&mut SenderPolicy>,
    counted: Vec<(usize, u64, Arc<Account>)>,
    enforce_tier: bool,
) -> TierCount {
    let mut found = TierCount {
        refused: HashMap::new(),
        warnings: Vec::new(),
        failure: None,
    };
    let mut by_account: Vec<(Arc<Account>, Vec<usize>, Vec<u64>)> = Vec::new();
    for (position, recipient, account) in counted {
        match by_account
            .iter_mut()
            .find(|(known, _, _)| known.id == account.id)
        {
            Some((_, positions, recipients)) => {
                positions.push(position);
                recipients.push(recipient);
            }
            None => by_account.push((account, vec![position], vec![recipient])),
        }
    }
    let shared = limits.is_shared();
    for (account, positions, recipients) in by_account {
        let Some(limit) = account.limit else { continue };
        let count = match limits
            .count_recipients(&account.id, limit, &recipients)
            .await
        {
            Ok(count) => count,
            Err(error) => {
                found.failure = Some(error);
                return found;
            }
        };
        let over = count.verdicts.contains(&TierVerdict::Over);
        if let Some(policy) = policy.as_deref_mut() {
            found.warnings.extend(policy.tier_warnings(
                &account,
                count.unique,
                over,
                shared,
                enforce_tier,
            ));
        }
        if enforce_tier {
            // In one process, only the recipients this campaign itself counted are known:
            // the messages it knows are past the tier fail up front all the same.
            let seen = if shared {
                ""
            } else {
                "; counted in this campaign only (other processes' and earlier campaigns' \
                 recipients are not seen here: shared_limits= counts them all)"
            };
            for (position, verdict) in positions.iter().zip(&count.verdicts) {
                if *verdict == TierVerdict::Over {
                    found.refused.insert(
                        *position,
                        format!(
                            "a new recipient past the messaging tier {} of account {} \
                             ({limit} unique recipients per rolling 24 h): not sent, the \
                             platform would refuse it (enforce_tier=False sends it \
                             anyway){seen}",
                            account.tier.as_deref().unwrap_or("?"),
                            account.id
                        ),
                    );
                }
            }
        }
    }
    found
}
