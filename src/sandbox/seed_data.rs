//! Accounts and numbers given by the user instead of generated ones (`--seed-data FILE`,
//! `Sandbox(seed_data=...)`): the objects the account listing returns, per tenant, so real
//! data can be pasted in. See docs/sandbox.md "Seed data".
//!
//! ```json
//! {"tenants": {"acme": [{"bizAccountId": "100", "chatBusinessManagerMessagingLimit": "TIER_50",
//!   "businessPhoneNumbers": [{"phoneNumberId": "200", "displayPhoneNumber": "+1 415 555 0100"}]}]}}
//! ```

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::store::{Account, PhoneNumber, TenantData, Text, Timestamp};
use crate::wire::parse_timestamp;

/// Tenants in file order, each with its data.
#[derive(Debug, Clone, PartialEq)]
pub struct SeedData {
    pub(crate) tenants: Vec<(String, TenantData)>,
}

/// Used for a missing `createTime`: 2024-01-01T00:00:00.000+0000.
const DEFAULT_TIME: Timestamp = Timestamp {
    millis: 1_704_067_200_000,
    offset_minutes: 0,
};

impl SeedData {
    /// Reads seed data from its JSON text; every refusal names where in the file it is.
    pub fn from_json(text: &str) -> Result<SeedData, String> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| format!("seed data is not JSON: {e}"))?;
        let tenants = root.get("tenants").and_then(Value::as_object).ok_or(
            "seed data needs a \"tenants\" object: {\"tenants\": {\"<name>\": [<account>, ...]}}",
        )?;
        if tenants.is_empty() {
            // Without a tenant no token is valid: a sandbox nobody could talk to.
            return Err("seed data names no tenant: \"tenants\" needs at least one".into());
        }
        let mut digits_seen = HashSet::new();
        let mut ids_seen = HashSet::new();
        let mut loaded = Vec::with_capacity(tenants.len());
        for (tenant, accounts) in tenants {
            let accounts = accounts
                .as_array()
                .ok_or_else(|| format!("tenants.{tenant} must be a list of accounts"))?;
            let mut parsed_accounts = Vec::with_capacity(accounts.len());
            let mut numbers = Vec::new();
            for (position, account) in accounts.iter().enumerate() {
                let at = format!("tenants.{tenant}[{position}]");
                let object = account
                    .as_object()
                    .ok_or_else(|| format!("{at} must be an account object"))?;
                let parsed = account_of(object, &at)?;
                if !ids_seen.insert(parsed.biz_account_id.clone()) {
                    return Err(format!(
                        "{at}: bizAccountId {:?} is used twice",
                        parsed.biz_account_id
                    ));
                }
                let listed = match object.get("businessPhoneNumbers") {
                    None | Some(Value::Null) => &[][..],
                    Some(Value::Array(items)) => items.as_slice(),
                    Some(_) => return Err(format!("{at}.businessPhoneNumbers must be a list")),
                };
                for (index, number) in listed.iter().enumerate() {
                    let at = format!("{at}.businessPhoneNumbers[{index}]");
                    let object = number
                        .as_object()
                        .ok_or_else(|| format!("{at} must be a phone number object"))?;
                    let number = number_of(object, &parsed, &at)?;
                    if !digits_seen.insert(number.digits) {
                        return Err(format!(
                            "{at}: the number {} is listed twice",
                            number.display_phone_number
                        ));
                    }
                    if !ids_seen.insert(number.phone_number_id.clone()) {
                        return Err(format!(
                            "{at}: phoneNumberId {:?} is used twice",
                            number.phone_number_id
                        ));
                    }
                    numbers.push((position, number));
                }
                parsed_accounts.push(parsed);
            }
            loaded.push((
                tenant.clone(),
                TenantData::assemble(parsed_accounts, numbers),
            ));
        }
        Ok(SeedData { tenants: loaded })
    }
}

fn text(object: &Map<String, Value>, name: &str) -> Option<String> {
    match object.get(name)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn or(object: &Map<String, Value>, name: &str, default: &'static str) -> Text {
    text(object, name).map_or(Text::Borrowed(default), Text::Owned)
}

fn time(
    object: &Map<String, Value>,
    name: &str,
    at: &str,
    default: Timestamp,
) -> Result<Timestamp, String> {
    let Some(written) = text(object, name) else {
        return Ok(default);
    };
    let parsed = parse_timestamp(&written).ok_or_else(|| {
        format!("{at}.{name} {written:?} is not a timestamp like 2024-03-05T10:15:30.123+0800")
    })?;
    Ok(Timestamp {
        millis: parsed.timestamp_millis(),
        offset_minutes: parsed.offset().local_minus_utc() / 60,
    })
}

fn account_of(object: &Map<String, Value>, at: &str) -> Result<Account, String> {
    let id =
        text(object, "bizAccountId").ok_or_else(|| format!("{at}: bizAccountId is missing"))?;
    let create_time = time(object, "createTime", at, DEFAULT_TIME)?;
    Ok(Account {
        name: text(object, "name").unwrap_or_else(|| id.clone()),
        biz_account_id: id,
        status: or(object, "status", "ACTIVE"),
        business_verification_status: or(object, "businessVerificationStatus", "verified"),
        account_review_status: or(object, "accountReviewStatus", "APPROVED"),
        chat_business_manager_messaging_limit: or(
            object,
            "chatBusinessManagerMessagingLimit",
            "TIER_2K",
        ),
        update_time: time(object, "updateTime", at, create_time)?,
        create_time,
        numbers: Vec::new(),
    })
}

fn number_of(
    object: &Map<String, Value>,
    account: &Account,
    at: &str,
) -> Result<PhoneNumber, String> {
    let display = text(object, "displayPhoneNumber")
        .ok_or_else(|| format!("{at}: displayPhoneNumber is missing"))?;
    let digits_text: String = display.chars().filter(char::is_ascii_digit).collect();
    let digits = digits_text
        .parse::<u64>()
        .ok()
        .filter(|_| (8..=15).contains(&digits_text.len()) && !digits_text.starts_with('0'))
        .ok_or_else(|| {
            format!("{at}: displayPhoneNumber {display:?} must hold 8 to 15 digits (country code first)")
        })?;
    let create_time = time(object, "createTime", at, account.create_time)?;
    Ok(PhoneNumber {
        biz_account_id: account.biz_account_id.clone(),
        phone_number_id: text(object, "phoneNumberId")
            .ok_or_else(|| format!("{at}: phoneNumberId is missing"))?,
        display_phone_number: display,
        verified_name: text(object, "verifiedName").unwrap_or_else(|| account.name.clone()),
        status: or(object, "status", "CONNECTED"),
        quality_rating: or(object, "qualityRating", "GREEN"),
        code_verification_status: or(object, "codeVerificationStatus", "VERIFIED"),
        throughput: or(object, "throughput", "STANDARD"),
        messaging_limit_tier: text(object, "messagingLimitTier").map_or_else(
            || account.chat_business_manager_messaging_limit.clone(),
            Text::Owned,
        ),
        update_time: time(object, "updateTime", at, create_time)?,
        create_time,
        digits,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accounts_and_numbers_load_with_defaults_and_sorted() {
        let data = SeedData::from_json(
            r#"{"tenants": {"acme": [
                {"bizAccountId": 2, "name": "B", "createTime": "2024-02-01T00:00:00.000+0000",
                 "businessPhoneNumbers": [{"phoneNumberId": "p2", "displayPhoneNumber": "+1 415 555 0101"}]},
                {"bizAccountId": "1", "chatBusinessManagerMessagingLimit": "TIER_50",
                 "businessPhoneNumbers": [{"phoneNumberId": "p1", "displayPhoneNumber": "+86 138 0013 8000",
                                           "status": "DISCONNECTED", "throughput": "HIGH"}]}
            ]}}"#,
        )
        .unwrap();
        let (name, tenant) = &data.tenants[0];
        assert_eq!(name, "acme");
        assert_eq!(
            tenant.accounts[0].biz_account_id, "1",
            "sorted by createTime"
        );
        assert_eq!(
            tenant.accounts[0].chat_business_manager_messaging_limit,
            "TIER_50"
        );
        let number = tenant.number_by_digits(8613800138000).unwrap();
        assert_eq!(number.status, "DISCONNECTED");
        assert_eq!(number.messaging_limit_tier, "TIER_50");
        assert_eq!(number.verified_name, "1");
        assert_eq!(
            tenant.number_by_digits(14155550101).unwrap().quality_rating,
            "GREEN"
        );
    }

    #[test]
    fn refusals_name_the_place() {
        for (text, says) in [
            ("[]", "needs a \"tenants\" object"),
            (r#"{"tenants": {}}"#, "seed data names no tenant"),
            (
                r#"{"tenants": {"a": [{"name": "x"}]}}"#,
                "tenants.a[0]: bizAccountId is missing",
            ),
            (
                r#"{"tenants": {"a": [{"bizAccountId": "1", "businessPhoneNumbers": [{"phoneNumberId": "p", "displayPhoneNumber": "12"}]}]}}"#,
                "tenants.a[0].businessPhoneNumbers[0]: displayPhoneNumber \"12\"",
            ),
            (
                r#"{"tenants": {"a": [{"bizAccountId": "1", "createTime": "soon"}]}}"#,
                "tenants.a[0].createTime \"soon\" is not a timestamp",
            ),
        ] {
            let error = SeedData::from_json(text).unwrap_err();
            assert!(error.contains(says), "{error}");
        }
    }
}
