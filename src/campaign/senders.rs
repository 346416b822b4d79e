//! What a campaign knows of its senders with `pace="auto"`: each business number's status,
//! quality, throughput and account (whose messaging tier is one budget for all its numbers),
//! looked up once from the account listing, and what follows from it (shared/spec/
//! platform-limits.md): who may send, at what pace, and what to warn about.

use std::collections::HashMap;
use std::sync::Arc;

use super::handle::Warning;
use super::message::Prepared;
use crate::api::{PageRequest, Pager};
use crate::client::{CallOptions, Client};
use crate::error::{Error, Result};
use crate::validate::MAX_PAGE_SIZE;
use crate::wire::BusinessAccount;

/// A business number that may send, as the listing describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sender {
    /// Country code and number, the form `from` takes.
    pub digits: String,
    pub phone_number_id: String,
    pub account_id: String,
    pub status: Option<String>,
    pub quality_rating: Option<String>,
    pub throughput: Option<String>,
}

/// An account (a business portfolio): its messaging tier.
#[derive(Clone, Debug, PartialEq)]
pub struct Account {
    pub id: String,
    pub name: Option<String>,
    pub tier: Option<String>,
    /// Unique recipients per rolling 24 h; `None`: unlimited, untiered or unknown.
    pub limit: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct Directory {
    senders: HashMap<String, Arc<Sender>>,
    accounts: HashMap<String, Arc<Account>>,
}

impl Directory {
    /// Reads every account, with its numbers, page by page.
    pub async fn fetch(client: &Client, call: &CallOptions) -> Result<Directory> {
        let mut directory = Directory::default();
        let mut page_no = 1;
        loop {
            let page = client
                .list_page::<BusinessAccount>(
                    Pager::BusinessAccounts,
                    PageRequest::new(page_no, MAX_PAGE_SIZE)?,
                    call,
                )
                .await?
                .value;
            for account in &page.data {
                directory.add(account);
            }
            if !page.has_next_page() {
                return Ok(directory);
            }
            page_no += 1;
        }
    }

    pub fn add(&mut self, account: &BusinessAccount) {
        let tier = account.chat_business_manager_messaging_limit.clone();
        let entry = Arc::new(Account {
            id: account.biz_account_id.clone(),
            name: account.name.clone(),
            limit: tier.as_deref().and_then(tier_limit),
            tier,
        });
        self.accounts.insert(entry.id.clone(), entry);
        for number in &account.business_phone_numbers {
            let digits: String = number
                .display_phone_number
                .as_deref()
                .unwrap_or_default()
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            if digits.is_empty() {
                continue;
            }
            self.senders.insert(
                digits.clone(),
                Arc::new(Sender {
                    digits,
                    phone_number_id: number.phone_number_id.clone(),
                    account_id: number
                        .biz_account_id
                        .clone()
                        .unwrap_or_else(|| account.biz_account_id.clone()),
                    status: number.status.clone(),
                    quality_rating: number.quality_rating.clone(),
                    throughput: number.throughput.clone(),
                }),
            );
        }
    }

    /// Every sender of the listing.
    pub fn senders(&self) -> impl Iterator<Item = &Sender> {
        self.senders.values().map(AsRef::as_ref)
    }

    pub fn sender(&self, digits: &str) -> Option<&Arc<Sender>> {
        self.senders.get(digits)
    }

    pub fn account(&self, id: &str) -> Option<&Arc<Account>> {
        self.accounts.get(id)
    }
}

/// `TIER_2K` -> 2000, `TIER_50` -> 50, `TIER_100K` -> 100000; unlimited, untiered and
/// anything else -> no known limit.
pub fn tier_limit(tier: &str) -> Option<u64> {
    let tier = tier.trim().to_ascii_uppercase();
    let size = tier.strip_prefix("TIER_")?;
    let (digits, factor) = match size.strip_suffix('K') {
        Some(digits) => (digits, 1_000),
        None => match size.strip_suffix('M') {
            Some(digits) => (digits, 1_000_000),
            None => (size, 1),
        },
    };
    digits.parse::<u64>().ok()?.checked_mul(factor)
}

/// What a campaign does with a sender.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// May send; `pace` messages per second (`None`: no known pace); `warning` if any.
    Send {
        pace: Option<f64>,
        warning: Option<String>,
    },
    /// Its messages fail up front with this reason.
    Refuse(String),
}

/// Ceiling of a number's throughput tier, messages per second (inbound and outbound).
fn ceiling(throughput: &str) -> Option<f64> {
    match throughput.trim().to_ascii_uppercase().as_str() {
        "STANDARD" => Some(80.0),
        "HIGH" => Some(1000.0),
        _ => None,
    }
}

/// Paced a little under the ceiling: inbound traffic shares it, and providers in front of the
/// platform often submit more slowly.
const PACE_SHARE: f64 = 0.75;
/// A medium-quality (YELLOW) sender is paced lower still.
const YELLOW_SHARE: f64 = 0.5;

pub fn verdict(sender: &Sender) -> Verdict {
    let number = &sender.digits;
    let status = sender.status.as_deref().unwrap_or("UNKNOWN");
    if !status.eq_ignore_ascii_case("CONNECTED") {
        return Verdict::Refuse(format!(
            "sender {} has status {status}; only CONNECTED numbers can send",
            crate::masking::mask_phone(number)
        ));
    }
    let throughput = sender.throughput.as_deref().unwrap_or("");
    if throughput.eq_ignore_ascii_case("NOT_APPLICABLE") {
        return Verdict::Refuse(format!(
            "sender {} has throughput NOT_APPLICABLE: the number is not registered to send",
            crate::masking::mask_phone(number)
        ));
    }
    let quality = sender
        .quality_rating
        .as_deref()
        .unwrap_or("UNKNOWN")
        .to_ascii_uppercase();
    let share = if quality == "YELLOW" {
        YELLOW_SHARE
    } else {
        PACE_SHARE
    };
    let pace = ceiling(throughput).map(|ceiling| ceiling * share);
    let warning = match quality.as_str() {
        "RED" => Some(format!(
            "sender {} has quality RED (low): the platform may restrict it; consider pausing \
             this campaign",
            crate::masking::mask_phone(number)
        )),
        "YELLOW" => Some(format!(
            "sender {} has quality YELLOW (medium): paced at {:.0}/s, half its throughput",
            crate::masking::mask_phone(number),
            pace.unwrap_or_default()
        )),
        _ => None,
    };
    Verdict::Send { pace, warning }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn sender(status: &str, quality: &str, throughput: &str) -> Sender {
        Sender {
            digits: "8613900000000".into(),
            phone_number_id: "p".into(),
            account_id: "a".into(),
            status: Some(status.into()),
            quality_rating: Some(quality.into()),
            throughput: Some(throughput.into()),
        }
    }

    #[test]
    fn tiers_parse_generically() {
        assert_eq!(tier_limit("TIER_2K"), Some(2_000));
        assert_eq!(tier_limit("TIER_50"), Some(50));
        assert_eq!(tier_limit("tier_100k"), Some(100_000));
        assert_eq!(tier_limit("TIER_UNLIMITED"), None);
        assert_eq!(tier_limit("UNTIERED"), None);
        assert_eq!(tier_limit("TIER_NOT_SET"), None);
    }

    #[test]
    fn verdicts_follow_status_quality_and_throughput() {
        assert_eq!(
            verdict(&sender("CONNECTED", "GREEN", "STANDARD")),
            Verdict::Send {
                pace: Some(60.0),
                warning: None
            }
        );
        assert!(matches!(
            verdict(&sender("CONNECTED", "YELLOW", "STANDARD")),
            Verdict::Send { pace: Some(p), warning: Some(_) } if (p - 40.0).abs() < 1e-9
        ));
        assert!(matches!(
            verdict(&sender("CONNECTED", "RED", "HIGH")),
            Verdict::Send { pace: Some(p), warning: Some(_) } if (p - 750.0).abs() < 1e-9
        ));
        assert!(matches!(
            verdict(&sender("CONNECTED", "GREEN", "SOMETHING_NEW")),
            Verdict::Send {
                pace: None,
                warning: None
            }
        ));
        for refused in [
            sender("DISCONNECTED", "GREEN", "STANDARD"),
            sender("FLAGGED", "GREEN", "STANDARD"),
            sender("CONNECTED", "GREEN", "NOT_APPLICABLE"),
        ] {
            assert!(
                matches!(verdict(&refused), Verdict::Refuse(_)),
                "{refused:?}"
            );
        }
    }
}
