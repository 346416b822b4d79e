//! The platform's limits (`../limits.rs`) applied to a message that passed validation, when
//! the sandbox enforces them: a number's throughput, an account's tier of unique recipients.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use serde_json::Value;

use super::super::answer::Answer;
use super::super::limits::Limits;
use super::super::store::TenantData;
use super::validate::quote;
use super::Failure;

/// Why a valid message is not committed when the platform's limits are enforced.
pub(super) enum Refusal {
    /// Over its number's throughput: refused before processing.
    Throttled(Answer),
    /// A failed commit.
    Failed(&'static str, String),
}

impl From<Failure> for Refusal {
    fn from((code, msg): Failure) -> Self {
        Refusal::Failed(code, msg)
    }
}

/// The platform's limits (see `limits.rs`), for a message that passed validation.
pub(super) fn enforce(
    limits: &Limits,
    tenant: usize,
    data: &TenantData,
    body: &Value,
) -> Result<(), Refusal> {
    let digits = |name: &str| {
        body.get(name)
            .and_then(Value::as_str)
            .and_then(|text| text.parse::<u64>().ok())
    };
    let (Some(from), Some(to)) = (digits("from"), digits("to")) else {
        return Ok(());
    };
    let Some(number) = data.number_by_digits(from) else {
        return Ok(());
    };
    if let Err(wait) = limits.throughput(number) {
        let retry_after = super::super::limits::retry_after(wait);
        let answer = Answer::json(
            StatusCode::TOO_MANY_REQUESTS,
            &serde_json::json!({
                "code": "130429",
                "msg": format!(
                    "throughput exceeded: from {} may send {} messages per second ({}); retry \
                     after {retry_after} s",
                    quote(&from.to_string()),
                    if number.throughput.eq_ignore_ascii_case("HIGH") { 1000 } else { 80 },
                    number.throughput
                ),
            }),
        )
        .with_header(
            RETRY_AFTER,
            HeaderValue::from_str(&retry_after).unwrap_or(HeaderValue::from_static("1")),
        );
        return Err(Refusal::Throttled(answer));
    }
    let Some(account) = data.account_by_id(&number.biz_account_id) else {
        return Ok(());
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    limits
        .admit_recipient(tenant, account, to, now)
        .map_err(|(limit, tier)| {
            Refusal::Failed(
                "1007",
                format!(
                    "messaging limit reached: account {} ({tier}) may reach {limit} unique \
                     recipients in a rolling 24 h; {} would be a new one",
                    account.biz_account_id,
                    quote(&to.to_string())
                ),
            )
        })
}
