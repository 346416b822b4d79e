//! The seeded data set: every tenant's accounts and numbers as a pure function of the seed,
//! the tenant names and the counts. Realistic enough that clients meet the awkward cases
//! (several UTC offsets, non-CONNECTED numbers, mixed tiers) on every run.

use std::collections::HashSet;

use fastrand::Rng;

use super::config::SandboxConfig;
use super::store::{Account, PhoneNumber, TenantData, Timestamp};

const SECOND: i64 = 1_000;
const MINUTE: i64 = 60 * SECOND;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// 2023-01-01T00:00:00Z: data looks like a service that has been running a while.
const EPOCH: i64 = 1_672_531_200_000;

/// A value and its weight; `pick` draws proportionally.
type Weighted<T> = &'static [(T, u32)];

const OFFSETS: Weighted<i32> = &[(480, 6), (0, 2), (-300, 2), (330, 1)];
const ACCOUNT_STATUS: Weighted<&str> = &[("ACTIVE", 90), ("PENDING", 6), ("DISABLED", 4)];
const VERIFICATION: Weighted<&str> = &[("verified", 85), ("unverified", 15)];
const TIERS: Weighted<&str> = &[
    ("TIER_2K", 70),
    ("TIER_10K", 15),
    ("TIER_1K", 10),
    ("TIER_100K", 5),
];
const ACCOUNT_TIERS: Weighted<&str> = &[("TIER_2K", 75), ("TIER_10K", 15), ("TIER_1K", 10)];
const NUMBER_STATUS: Weighted<&str> = &[("CONNECTED", 85), ("DISCONNECTED", 10), ("PENDING", 5)];
const QUALITY: Weighted<&str> = &[("GREEN", 55), ("UNKNOWN", 30), ("YELLOW", 12), ("RED", 3)];
const CODE_VERIFICATION: Weighted<&str> = &[("VERIFIED", 80), ("NOT_VERIFIED", 20)];

const ACCOUNT_KINDS: &[&str] = &[
    "Support",
    "Sales",
    "Store",
    "Logistics",
    "Billing",
    "Notifications",
    "Marketing",
    "Care",
    "Bookings",
    "Deliveries",
    "Onboarding",
    "Payments",
];

/// A numbering plan: country code, allowed leading national digits, national length, and the
/// digit groups of the displayed national number. Every plan gives 11 to 13 digits in all.
#[derive(Debug, Clone, Copy, Default)]
struct Plan {
    country: u64,
    leads: &'static [u64],
    lead_digits: u32,
    national_digits: u32,
    groups: &'static [usize],
}

const PLANS: Weighted<Plan> = &[
    (
        // +86 138 0013 8000
        Plan {
            country: 86,
            leads: &[135, 138, 139, 150, 177, 186],
            lead_digits: 3,
            national_digits: 11,
            groups: &[3, 4, 4],
        },
        4,
    ),
    (
        // +1 415 555 0123
        Plan {
            country: 1,
            leads: &[212, 310, 415, 512, 646],
            lead_digits: 3,
            national_digits: 10,
            groups: &[3, 3, 4],
        },
        2,
    ),
    (
        // +44 7700 900123
        Plan {
            country: 44,
            leads: &[7400, 7700, 7911],
            lead_digits: 4,
            national_digits: 10,
            groups: &[4, 6],
        },
        1,
    ),
    (
        // +91 98765 43210
        Plan {
            country: 91,
            leads: &[90, 97, 98, 99],
            lead_digits: 2,
            national_digits: 10,
            groups: &[5, 5],
        },
        1,
    ),
    (
        // +55 11 91234 5678
        Plan {
            country: 55,
            leads: &[119, 219, 319],
            lead_digits: 3,
            national_digits: 11,
            groups: &[2, 5, 4],
        },
        1,
    ),
    (
        // +49 151 23456789
        Plan {
            country: 49,
            leads: &[151, 160, 170],
            lead_digits: 3,
            national_digits: 11,
            groups: &[3, 8],
        },
        1,
    ),
];

fn pick<T: Copy + Default>(rng: &mut Rng, choices: &[(T, u32)]) -> T {
    let total: u32 = choices.iter().map(|(_, weight)| weight).sum();
    let mut draw = rng.u32(0..total.max(1));
    for (value, weight) in choices {
        if draw < *weight {
            return *value;
        }
        draw -= weight;
    }
    // Only reachable with an empty table, which the constants above are not.
    T::default()
}

/// Draws values until one not drawn before: ids and phone numbers are unique sandbox-wide.
fn fresh(rng: &mut Rng, used: &mut HashSet<u64>, mut draw: impl FnMut(&mut Rng) -> u64) -> u64 {
    loop {
        let value = draw(rng);
        if used.insert(value) {
            return value;
        }
    }
}

fn timestamp(rng: &mut Rng, millis: i64) -> Timestamp {
    Timestamp {
        millis,
        offset_minutes: pick(rng, OFFSETS),
    }
}

/// `createTime` and an `updateTime` up to 90 days later.
fn lifetime(rng: &mut Rng, created: i64) -> (Timestamp, Timestamp) {
    let updated = created + rng.i64(0..=90 * DAY);
    (timestamp(rng, created), timestamp(rng, updated))
}

fn display_name(tenant: &str) -> String {
    let mut chars = tenant.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn account_name(tenant: &str, index: usize) -> String {
    let kind = ACCOUNT_KINDS
        .get(index % ACCOUNT_KINDS.len())
        .copied()
        .unwrap_or_default();
    match index / ACCOUNT_KINDS.len() {
        0 => format!("{tenant} {kind}"),
        round => format!("{tenant} {kind} {}", round + 1),
    }
}

/// `(digits, display)`: digits as `from` is written, display as a person would write it.
fn phone_number(rng: &mut Rng, plan: &Plan, used: &mut HashSet<u64>) -> (u64, String) {
    let rest_digits = plan.national_digits - plan.lead_digits;
    let national = |rng: &mut Rng| {
        let lead = plan
            .leads
            .get(rng.usize(0..plan.leads.len()))
            .copied()
            .unwrap_or_default();
        lead * 10u64.pow(rest_digits) + rng.u64(0..10u64.pow(rest_digits))
    };
    let scale = 10u64.pow(plan.national_digits);
    let digits = fresh(rng, used, |rng| plan.country * scale + national(rng));

    let national = (digits % scale).to_string();
    let mut display = format!("+{}", plan.country);
    let mut start = 0;
    for size in plan.groups {
        display.push(' ');
        display.push_str(national.get(start..start + size).unwrap_or_default());
        start += size;
    }
    (digits, display)
}

fn id(rng: &mut Rng, used: &mut HashSet<u64>) -> String {
    fresh(rng, used, |rng| {
        rng.u64(100_000_000_000_000..1_000_000_000_000_000)
    })
    .to_string()
}

pub(crate) fn generate(config: &SandboxConfig) -> Vec<TenantData> {
    let mut rng = Rng::with_seed(config.seed);
    let mut ids = HashSet::new();
    let mut digits = HashSet::new();
    config
        .tenants
        .iter()
        .map(|tenant| generate_tenant(&mut rng, config, tenant, &mut ids, &mut digits))
        .collect()
}

fn generate_tenant(
    rng: &mut Rng,
    config: &SandboxConfig,
    tenant: &str,
    ids: &mut HashSet<u64>,
    digits_used: &mut HashSet<u64>,
) -> TenantData {
    let tenant = display_name(tenant);
    let (least, most) = config.numbers_per_account;
    let mut accounts = Vec::with_capacity(config.accounts_per_tenant);
    let mut numbers = Vec::new();
    let mut clock = EPOCH + rng.i64(0..90 * DAY);

    for index in 0..config.accounts_per_tenant {
        // Strictly increasing creation times make the first account (and its first number)
        // come first in both lists, which the guarantees below rely on.
        if index > 0 {
            clock += rng.i64(MINUTE..=12 * HOUR);
        }
        let first = index == 0;
        let biz_account_id = id(rng, ids);
        let name = account_name(&tenant, index);
        let status = if first {
            "ACTIVE"
        } else {
            pick(rng, ACCOUNT_STATUS)
        };
        let (create_time, update_time) = lifetime(rng, clock);
        accounts.push(Account {
            biz_account_id: biz_account_id.clone(),
            name: name.clone(),
            status: status.into(),
            business_verification_status: if first {
                "verified"
            } else {
                pick(rng, VERIFICATION)
            }
            .into(),
            account_review_status: if status == "PENDING" {
                "PENDING"
            } else {
                "APPROVED"
            }
            .into(),
            chat_business_manager_messaging_limit: pick(rng, ACCOUNT_TIERS).into(),
            create_time,
            update_time,
            numbers: Vec::new(),
        });

        let plan = pick(rng, PLANS);
        for position in 0..rng.usize(least..=most) {
            // The first number is registered with its account; the rest follow later.
            let created = match position {
                0 => clock,
                _ => clock + rng.i64(SECOND..=60 * DAY),
            };
            let (digits, display) = phone_number(rng, &plan, digits_used);
            // A demo can always send from the first number of the first account.
            let status = if first && position == 0 {
                "CONNECTED"
            } else {
                pick(rng, NUMBER_STATUS)
            };
            let (create_time, update_time) = lifetime(rng, created);
            let number = PhoneNumber {
                biz_account_id: biz_account_id.clone(),
                phone_number_id: id(rng, ids),
                display_phone_number: display,
                verified_name: name.clone(),
                status: status.into(),
                quality_rating: pick(rng, QUALITY).into(),
                code_verification_status: match status {
                    "PENDING" => "NOT_VERIFIED",
                    _ => pick(rng, CODE_VERIFICATION),
                }
                .into(),
                throughput: "STANDARD".into(),
                messaging_limit_tier: pick(rng, TIERS).into(),
                create_time,
                update_time,
                digits,
            };
            numbers.push((index, number));
        }
    }

    TenantData::assemble(accounts, numbers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{start, TestClient};
    use std::time::{Duration, Instant};

    fn config(seed: u64) -> SandboxConfig {
        SandboxConfig {
            seed,
            accounts_per_tenant: 40,
            ..SandboxConfig::default()
        }
    }

    #[test]
    fn same_inputs_same_data_and_different_seed_different_data() {
        let first = generate(&config(7));
        assert_eq!(first, generate(&config(7)));
        let other = generate(&config(8));
        assert_ne!(first, other);
        let ids = |data: &[TenantData]| -> Vec<String> {
            data.iter()
                .flat_map(|t| t.numbers.iter().map(|n| n.phone_number_id.clone()))
                .collect()
        };
        assert_ne!(ids(&first), ids(&other));
    }

    #[test]
    fn data_keeps_its_promises() {
        let data = generate(&config(3));
        assert_eq!(data.len(), 2);
        let mut ids = HashSet::new();
        let mut digits = HashSet::new();
        let mut offsets = HashSet::new();
        let mut statuses = HashSet::new();
        for tenant in &data {
            assert_eq!(tenant.accounts.len(), 40);
            let first_account = &tenant.accounts[0];
            assert_eq!(first_account.status, "ACTIVE");
            let first_number = &tenant.numbers[first_account.numbers[0]];
            assert_eq!(first_number.status, "CONNECTED");
            assert_eq!(tenant.numbers[0], *first_number);
            let mut listed = 0;
            for account in &tenant.accounts {
                assert!(ids.insert(account.biz_account_id.clone()));
                assert!((2..=4).contains(&account.numbers.len()));
                assert!(account.update_time.millis >= account.create_time.millis);
                listed += account.numbers.len();
                for position in &account.numbers {
                    assert_eq!(
                        tenant.numbers[*position].biz_account_id,
                        account.biz_account_id
                    );
                    assert_eq!(tenant.numbers[*position].verified_name, account.name);
                }
            }
            assert_eq!(listed, tenant.numbers.len());
            for (position, number) in tenant.numbers.iter().enumerate() {
                assert!(ids.insert(number.phone_number_id.clone()));
                assert!(digits.insert(number.digits));
                let written = number.digits.to_string();
                assert!((11..=13).contains(&written.len()), "{written}");
                let displayed: String = number
                    .display_phone_number
                    .chars()
                    .filter(char::is_ascii_digit)
                    .collect();
                assert_eq!(displayed, written);
                assert!(number.display_phone_number.starts_with('+'));
                assert_eq!(tenant.by_digits[&number.digits], position);
                assert!(number.update_time.millis >= number.create_time.millis);
                offsets.insert(number.create_time.offset_minutes);
                statuses.insert(number.status.clone());
            }
        }
        assert!(offsets.len() >= 3, "{offsets:?}");
        assert!(statuses.contains("DISCONNECTED") || statuses.contains("PENDING"));
        assert_eq!(display_name("acme"), "Acme");
        assert_eq!(account_name("Acme", 0), "Acme Support");
        assert_eq!(account_name("Acme", 13), "Acme Sales 2");
    }

    #[tokio::test]
    async fn served_data_is_deterministic_across_sandboxes() {
        let fetch = |seed| async move {
            let sandbox = start(config(seed)).await;
            let client = TestClient::new(&sandbox);
            client
                .get("/v1/chat/businessAccounts?pageSize=5&pageNo=2")
                .await
                .text
        };
        let first = fetch(11).await;
        assert!(first.contains("\"businessPhoneNumbers\":[{"));
        assert_eq!(first, fetch(11).await);
        assert_ne!(first, fetch(12).await);
    }

    #[tokio::test]
    async fn a_hundred_thousand_numbers_per_tenant_start_and_page_quickly() {
        let started = Instant::now();
        let sandbox = start(SandboxConfig {
            accounts_per_tenant: 1000,
            numbers_per_account: (100, 100),
            ..SandboxConfig::default()
        })
        .await;
        let startup = started.elapsed();
        let client = TestClient::new(&sandbox);

        let started = Instant::now();
        let last = client
            .get("/v1/chat/businessPhoneNumber?pageNo=100&pageSize=1000")
            .await;
        assert_eq!(last.json["total"], 100_000);
        assert_eq!(last.json["pages"], 100);
        assert_eq!(last.json["data"].as_array().unwrap().len(), 1000);
        let accounts = client
            .get("/v1/chat/businessAccounts?pageNo=50&pageSize=20")
            .await;
        assert_eq!(accounts.json["total"], 1000);
        let first = &accounts.json["data"][0]["businessPhoneNumbers"];
        assert_eq!(first.as_array().unwrap().len(), 100);
        let paging = started.elapsed();
        // Generous bounds: debug builds on a loaded machine; typical runs are far below.
        assert!(startup < Duration::from_secs(5), "startup took {startup:?}");
        assert!(paging < Duration::from_secs(3), "paging took {paging:?}");
    }
}
