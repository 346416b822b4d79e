//! The service's data: each tenant's accounts and numbers (fixed at start, kept sorted for
//! paging) and the send ledger (smsId counter and Idempotency-Key cache).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

use chrono::{DateTime, FixedOffset};
use serde::ser::{Error as _, SerializeStruct};
use serde::{Serialize, Serializer};

use super::paging::{Envelope, PageRequest};
use crate::sync::lock;

/// An instant plus the UTC offset it is displayed in, serialized Java style:
/// `2024-03-05T10:15:30.123+0800`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Timestamp {
    pub(crate) millis: i64,
    pub(crate) offset_minutes: i32,
}

impl Timestamp {
    fn render(self) -> Option<String> {
        let offset = FixedOffset::east_opt(self.offset_minutes * 60)?;
        let instant = DateTime::from_timestamp_millis(self.millis)?.with_timezone(&offset);
        Some(instant.format("%Y-%m-%dT%H:%M:%S%.3f%z").to_string())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = self
            .render()
            .ok_or_else(|| S::Error::custom("timestamp out of range"))?;
        serializer.serialize_str(&text)
    }
}

/// Text of the seeded data: the generator's constants borrowed, loaded data owned.
pub(crate) type Text = std::borrow::Cow<'static, str>;

/// A business phone number, fields named and ordered as in spec section 2.3.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PhoneNumber {
    pub(crate) biz_account_id: String,
    pub(crate) phone_number_id: String,
    pub(crate) display_phone_number: String,
    pub(crate) verified_name: String,
    pub(crate) status: Text,
    pub(crate) quality_rating: Text,
    pub(crate) code_verification_status: Text,
    pub(crate) throughput: Text,
    pub(crate) messaging_limit_tier: Text,
    pub(crate) create_time: Timestamp,
    pub(crate) update_time: Timestamp,
    /// Country code and national number, the form `from` is given in.
    #[serde(skip)]
    pub(crate) digits: u64,
}

/// A business account (spec section 2.2). Its numbers are positions in the tenant's number list,
/// so each number is stored once however it is listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Account {
    pub(crate) biz_account_id: String,
    pub(crate) name: String,
    pub(crate) status: Text,
    pub(crate) business_verification_status: Text,
    pub(crate) account_review_status: Text,
    pub(crate) chat_business_manager_messaging_limit: Text,
    pub(crate) create_time: Timestamp,
    pub(crate) update_time: Timestamp,
    pub(crate) numbers: Vec<usize>,
}

/// One tenant's data, both lists sorted by createTime then id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TenantData {
    pub(crate) accounts: Vec<Account>,
    pub(crate) numbers: Vec<PhoneNumber>,
    pub(crate) by_digits: HashMap<u64, usize>,
    pub(crate) by_account_id: HashMap<String, usize>,
}

struct AccountView<'a> {
    account: &'a Account,
    numbers: &'a [PhoneNumber],
}

struct NumbersOf<'a>(&'a AccountView<'a>);

impl Serialize for NumbersOf<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let view = self.0;
        serializer.collect_seq(
            view.account
                .numbers
                .iter()
                .filter_map(|position| view.numbers.get(*position)),
        )
    }
}

impl Serialize for AccountView<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let a = self.account;
        let mut out = serializer.serialize_struct("BusinessAccount", 9)?;
        out.serialize_field("bizAccountId", &a.biz_account_id)?;
        out.serialize_field("name", &a.name)?;
        out.serialize_field("status", &a.status)?;
        out.serialize_field(
            "businessVerificationStatus",
            &a.business_verification_status,
        )?;
        out.serialize_field("accountReviewStatus", &a.account_review_status)?;
        out.serialize_field(
            "chatBusinessManagerMessagingLimit",
            &a.chat_business_manager_messaging_limit,
        )?;
        out.serialize_field("businessPhoneNumbers", &NumbersOf(self))?;
        out.serialize_field("createTime", &a.create_time)?;
        out.serialize_field("updateTime", &a.update_time)?;
        out.end()
    }
}

impl TenantData {
    /// A tenant's data from its accounts and its numbers (each with the position of its
    /// account in `accounts`): both lists sorted by createTime then id, as the listings serve
    /// them, and numbers indexed by their digits.
    pub(crate) fn assemble(
        mut accounts: Vec<Account>,
        mut numbers: Vec<(usize, PhoneNumber)>,
    ) -> TenantData {
        let order =
            |number: &PhoneNumber| (number.create_time.millis, number.phone_number_id.clone());
        numbers.sort_by_cached_key(|(_, number)| order(number));
        let mut by_digits = HashMap::with_capacity(numbers.len());
        let numbers: Vec<PhoneNumber> = numbers
            .into_iter()
            .enumerate()
            .map(|(position, (account, number))| {
                if let Some(account) = accounts.get_mut(account) {
                    account.numbers.push(position);
                }
                by_digits.insert(number.digits, position);
                number
            })
            .collect();
        accounts.sort_by(|a, b| {
            (a.create_time.millis, &a.biz_account_id)
                .cmp(&(b.create_time.millis, &b.biz_account_id))
        });
        let by_account_id = accounts
            .iter()
            .enumerate()
            .map(|(position, account)| (account.biz_account_id.clone(), position))
            .collect();
        TenantData {
            accounts,
            numbers,
            by_digits,
            by_account_id,
        }
    }

    pub(crate) fn accounts_page(&self, page: PageRequest) -> Envelope<impl Serialize + '_> {
        let data = page
            .window(&self.accounts)
            .iter()
            .map(|account| AccountView {
                account,
                numbers: &self.numbers,
            })
            .collect();
        page.envelope(data, self.accounts.len())
    }

    pub(crate) fn numbers_page(&self, page: PageRequest) -> Envelope<&PhoneNumber> {
        let data = page.window(&self.numbers).iter().collect();
        page.envelope(data, self.numbers.len())
    }

    pub(crate) fn account_by_id(&self, id: &str) -> Option<&Account> {
        self.by_account_id
            .get(id)
            .and_then(|position| self.accounts.get(*position))
    }

    pub(crate) fn number_by_digits(&self, digits: u64) -> Option<&PhoneNumber> {
        self.by_digits
            .get(&digits)
            .and_then(|position| self.numbers.get(*position))
    }
}

/// What a send with an Idempotency-Key committed, replayed when the same key comes again:
/// the body's canonical fingerprint (a repeat with another body is a conflict) and the answer.
pub(crate) struct Remembered {
    pub(crate) body: u128,
    pub(crate) response: bytes::Bytes,
}

pub(crate) struct Ledger {
    sent: u64,
    seed_tag: u32,
    /// A B-tree, not a hash map: a hash map doubles all at once (8 ms past 28,672 keys), and
    /// every send waits for the ledger, so the sandbox stalled mid-campaign and then took the
    /// sends that had waited together, as if they had arrived so.
    idempotency: BTreeMap<(usize, String), Remembered>,
}

impl Ledger {
    /// A fresh smsId: `sms_` and 20 hex digits, 8 from the seed and 12 from a counter, so ids are
    /// unique for the sandbox's lifetime and the same across runs with one seed.
    pub(crate) fn next_sms_id(&mut self) -> String {
        self.sent += 1;
        format!("sms_{:08x}{:012x}", self.seed_tag, self.sent)
    }

    pub(crate) fn remembered(&self, tenant: usize, key: &str) -> Option<&Remembered> {
        self.idempotency.get(&(tenant, key.to_owned()))
    }

    pub(crate) fn remember(&mut self, tenant: usize, key: &str, remembered: Remembered) {
        self.idempotency
            .insert((tenant, key.to_owned()), remembered);
    }
}

pub(crate) struct Store {
    tenants: Vec<TenantData>,
    ledger: Mutex<Ledger>,
}

impl Store {
    pub(crate) fn new(tenants: Vec<TenantData>, seed: u64) -> Store {
        // Folding the seed keeps ids of differently seeded sandboxes apart.
        let seed_tag = (seed ^ (seed >> 32)) as u32;
        Store {
            tenants,
            ledger: Mutex::new(Ledger {
                sent: 0,
                seed_tag,
                idempotency: BTreeMap::new(),
            }),
        }
    }

    pub(crate) fn tenant(&self, index: usize) -> Option<&TenantData> {
        self.tenants.get(index)
    }

    /// Held across lookup, validation and commit so one Idempotency-Key commits once.
    pub(crate) fn ledger(&self) -> MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_java_style_in_their_offset() {
        let at = |offset_minutes| Timestamp {
            millis: 1_709_604_930_123,
            offset_minutes,
        };
        assert_eq!(at(480).render().unwrap(), "2024-03-05T10:15:30.123+0800");
        assert_eq!(at(0).render().unwrap(), "2024-03-05T02:15:30.123+0000");
        assert_eq!(at(-300).render().unwrap(), "2024-03-04T21:15:30.123-0500");
        assert_eq!(at(330).render().unwrap(), "2024-03-05T07:45:30.123+0530");
        assert_eq!(
            serde_json::to_string(&at(480)).unwrap(),
            "\"2024-03-05T10:15:30.123+0800\""
        );
        assert!(serde_json::to_string(&at(24 * 60)).is_err());
    }

    #[test]
    fn sms_ids_count_up_under_the_seed_tag() {
        let store = Store::new(Vec::new(), 0x1234_5678_0000_0001);
        let mut ledger = store.ledger();
        assert_eq!(ledger.next_sms_id(), "sms_12345679000000000001");
        assert_eq!(ledger.next_sms_id(), "sms_12345679000000000002");
    }
}
