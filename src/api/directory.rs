//! Every account and business number of the account listing, read page by page: what a
//! campaign with `pace="auto"`, the preflight and single sends under shared limits know of
//! their senders. The platform's rules on what follows from it are `crate::platform`'s.

use std::collections::HashMap;
use std::sync::Arc;

use super::{PageRequest, Pager};
use crate::client::{CallOptions, Client};
use crate::error::Result;
use crate::limits::{Paces, SenderFacts};
use crate::platform::{tier_limit, verdict, Sender, Verdict};
use crate::validate::MAX_PAGE_SIZE;
use crate::wire::BusinessAccount;

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

/// Every sender's pace and tier, from the account listing (the same rules as `pace="auto"`):
/// what single sends under shared limits look up (`limits/paces.rs` keeps it).
pub(crate) async fn sender_facts(client: &Client, call: &CallOptions) -> Result<Paces> {
    let directory = Directory::fetch(client, call).await?;
    Ok(directory
        .senders()
        .map(|sender| {
            let pace = match verdict(sender) {
                Verdict::Send { pace, .. } => pace,
                Verdict::Refuse(_) => None,
            };
            let account = directory
                .account(&sender.account_id)
                .filter(|account| account.limit.is_some());
            let facts = SenderFacts {
                pace,
                account: account.map(|account| account.id.clone()),
                limit: account.and_then(|account| account.limit),
            };
            (sender.digits.clone(), facts)
        })
        .collect())
}
