//! The platform's facts, as shared/spec/platform-limits.md states them: what a messaging tier
//! allows, what a sender's status, quality and throughput let it do (its verdict), and what the
//! platform's error codes in a send result ask a bulk sender to do. A leaf: it imports nothing
//! of the crate (but `masking`), so the campaign, the limits and the sandbox all read the same
//! facts without importing one another.

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

/// What a send result's error code asks a bulk sender to do. Codes are compared as text;
/// unknown codes are final for their message, like any failed commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    /// The whole batch should pause, then send the message again: throughput (130429),
    /// account rate limit (80007), maintenance (131057), service unavailable (131016).
    PauseBatch,
    /// This recipient only, later (pair rate, 131056; waits grow 4^n seconds).
    RetryRecipientLater,
    /// Stop the campaign and tell a person: spam rate limit (131048), template classification
    /// (131064), policy block (368), account locked (131031).
    StopCampaign,
    /// Final for this message.
    Final,
}

pub fn advice(code: &str) -> Advice {
    match code.trim() {
        "130429" | "80007" | "131057" | "131016" => Advice::PauseBatch,
        "131056" => Advice::RetryRecipientLater,
        "131048" | "131064" | "368" | "131031" => Advice::StopCampaign,
        _ => Advice::Final,
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

    #[test]
    fn codes_map_to_the_documented_advice() {
        assert_eq!(advice("130429"), Advice::PauseBatch);
        assert_eq!(advice(" 131056 "), Advice::RetryRecipientLater);
        assert_eq!(advice("368"), Advice::StopCampaign);
        assert_eq!(advice("1002"), Advice::Final);
        assert_eq!(advice(""), Advice::Final);
    }
}
