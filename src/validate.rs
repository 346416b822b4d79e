//! Input checks made before any request is sent, so a bad argument costs no round trip and
//! never reaches a person. Each failure names the argument and the value.

use serde_json::Value;

use crate::error::{Error, Result};

pub const MAX_PAGE_SIZE: i64 = 1000;

/// Normalizes a phone number to the digits the wire carries (country code and number, E.164
/// without the `+`).
///
/// Spaces, dashes, dots and parentheses are presentation and are dropped; a `+` may start the
/// number. `00` before a number written without `+` is the international call prefix and is
/// dropped too (`0086 138...` is `+86 138...`). What remains must be 8 to 15 digits and, being
/// a country code first, cannot start with `0`: a number that does is refused with the reason
/// (a national trunk prefix, or a `+` followed by `00`), never guessed at.
pub fn phone_number(field: &str, value: &str) -> Result<String> {
    let refuse = |why: &str| {
        Err(Error::validation(
            field,
            format!("{value:?} is not a phone number: {why}"),
        ))
    };
    let mut digits = String::with_capacity(value.len());
    let mut plus = false;
    for c in value.chars() {
        match c {
            '0'..='9' => digits.push(c),
            '+' if digits.is_empty() && !plus => plus = true,
            '+' => return refuse("\"+\" may only start the number"),
            ' ' | '-' | '.' | '(' | ')' => {}
            other => return refuse(&format!("unexpected character {other:?}")),
        }
    }
    let international_prefix = !plus && digits.starts_with("00");
    let digits = if international_prefix {
        digits.split_off(2)
    } else {
        digits
    };
    if digits.starts_with('0') {
        return refuse(if plus {
            "after \"+\" comes the country code, which never starts with 0 (write +86..., not \
             +0086...)"
        } else if international_prefix {
            "after the international prefix 00 comes the country code, which never starts with 0"
        } else {
            "it starts with 0; write it in international form with its country code (e.g. +86 \
             138 0013 8000)"
        });
    }
    if !(8..=15).contains(&digits.len()) {
        let after = if international_prefix {
            " after the international prefix 00"
        } else {
            ""
        };
        return refuse(&format!(
            "it has {} digits{after}, E.164 numbers have 8 to 15",
            digits.len()
        ));
    }
    Ok(digits)
}

/// A template name: any non-empty text without control characters.
pub fn template_name(value: &str) -> Result<String> {
    if value.trim().is_empty() {
        return Err(Error::validation("template.name", "must not be empty"));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::validation(
            "template.name",
            format!("{value:?} contains a control character"),
        ));
    }
    Ok(value.to_owned())
}

/// A template language code: `en`, `en_US`, `pt_BR`, `zh_HK`, `es_419`. `en-US` (BCP 47
/// spelling) and any letter case are accepted and normalized to `en_US`.
pub fn language(value: &str) -> Result<String> {
    let invalid = || {
        Error::validation(
            "template.language",
            format!(
                "{value:?} is not a language code like \"en\", \"en_US\", \"pt_BR\" or \"es_419\""
            ),
        )
    };
    let (lang, region) = match value.split_once(['_', '-']) {
        Some((lang, region)) => (lang, Some(region)),
        None => (value, None),
    };
    if !(2..=3).contains(&lang.len()) || !lang.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(invalid());
    }
    let mut normalized = lang.to_ascii_lowercase();
    if let Some(region) = region {
        let letters = region.len() == 2 && region.chars().all(|c| c.is_ascii_alphabetic());
        let digits = region.len() == 3 && region.chars().all(|c| c.is_ascii_digit());
        if !(letters || digits) {
            return Err(invalid());
        }
        normalized.push('_');
        normalized.push_str(&region.to_ascii_uppercase());
    }
    Ok(normalized)
}

/// Template parameters as the wire's string. A string goes unchanged; a list of strings or a
/// mapping of string to string is encoded as compact JSON (`["a","b"]`, `{"k":"v"}`). A bad
/// element is named (`parameters[1]`, `parameters["k"]`) with what it is.
pub fn parameters(value: &Value) -> Result<String> {
    let refuse = |message: String| Err(Error::validation("template.parameters", message));
    match value {
        // The service refuses a blank parameters string (a failed commit): refused here first.
        Value::String(text) if text.trim().is_empty() => refuse(
            "must not be empty; use a list ([]) for a template without parameters".to_owned(),
        ),
        Value::String(text) => Ok(text.clone()),
        Value::Array(items) => match items.iter().enumerate().find(|(_, item)| !item.is_string()) {
            None => Ok(value.to_string()),
            Some((index, item)) => refuse(format!(
                "parameters[{index}] is {}; every parameter must be a string",
                describe(item)
            )),
        },
        Value::Object(map) => match map.iter().find(|(_, item)| !item.is_string()) {
            None => Ok(value.to_string()),
            Some((key, item)) => refuse(format!(
                "parameters[{}] is {}; every parameter must be a string",
                Value::String(key.clone()),
                describe(item)
            )),
        },
        other => refuse(format!(
            "must be a string, a list of strings or a mapping of strings to strings, not {}",
            describe(other)
        )),
    }
}

/// A JSON value as a message names it: its kind, and a short rendering of it.
fn describe(value: &Value) -> String {
    let shown = crate::masking::truncate(&value.to_string(), 40);
    match value {
        Value::Null => "None (null)".to_owned(),
        Value::Bool(_) => format!("a bool ({shown})"),
        Value::Number(_) => format!("a number ({shown})"),
        Value::String(_) => format!("a string ({shown})"),
        Value::Array(_) => format!("a list ({shown})"),
        Value::Object(_) => format!("a mapping ({shown})"),
    }
}

pub fn page_no(value: i64) -> Result<i64> {
    if value < 1 {
        return Err(Error::validation(
            "page_no",
            format!("must be 1 or more, got {value}"),
        ));
    }
    Ok(value)
}

pub fn page_size(value: i64) -> Result<i64> {
    if !(1..=MAX_PAGE_SIZE).contains(&value) {
        return Err(Error::validation(
            "page_size",
            format!("must be from 1 to {MAX_PAGE_SIZE}, got {value}"),
        ));
    }
    Ok(value)
}

/// An `Idempotency-Key`: 1 to 255 visible ASCII characters (what the sandbox, the reference
/// service here, accepts), so a bad key costs no round trip.
pub fn idempotency_key(key: &str) -> Result<&str> {
    let visible = key.bytes().all(|b| (0x21..=0x7e).contains(&b));
    if key.is_empty() || key.len() > 255 || !visible {
        return Err(Error::validation(
            "idempotency_key",
            format!("{key:?} is not 1 to 255 visible ASCII characters (no spaces)"),
        ));
    }
    Ok(key)
}

/// A value that goes into an HTTP header: whitespace inside, CR, LF or any control character
/// would either be refused by the server or split the header, so it is refused here.
pub fn header_value(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::Configuration(format!("{what} is empty")));
    }
    if let Some(bad) = value.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Configuration(format!(
            "{what} contains {} (whitespace, CR, LF and control characters are not allowed)",
            describe_char(bad)
        )));
    }
    Ok(())
}

fn describe_char(c: char) -> String {
    match c {
        '\r' => "a carriage return (CR)".to_owned(),
        '\n' => "a line feed (LF)".to_owned(),
        ' ' => "a space".to_owned(),
        '\t' => "a tab".to_owned(),
        other => format!("the character U+{:04X}", u32::from(other)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn phone_numbers_are_normalized_to_digits() {
        assert_eq!(
            phone_number("to", "+86 (138) 0000-0000").unwrap(),
            "8613800000000"
        );
        // 00 is the international call prefix when no + is written.
        assert_eq!(
            phone_number("to", "008613800138000").unwrap(),
            "8613800138000"
        );
        assert_eq!(
            phone_number("to", "00 86 138 0013 8000").unwrap(),
            "8613800138000"
        );
        for (bad, why) in [
            ("+0086 138 0013 8000", "never starts with 0"),
            ("+086 138 0013 8000", "never starts with 0"),
            ("00013800138000", "after the international prefix 00"),
            ("013800138000", "starts with 0"),
            ("86+13800138000", "may only start"),
            ("001234567", "after the international prefix 00"),
        ] {
            let err = phone_number("to", bad).unwrap_err().to_string();
            assert!(
                err.contains(why) && err.contains(&format!("{bad:?}")),
                "{err}"
            );
        }
        for bad in [
            "",
            "1234567",
            "1234567890123456",
            "8613800000000x",
            "+86 138 0000 000a",
        ] {
            let err = phone_number("to", bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid to:") && err.contains(&format!("{bad:?}")),
                "{err}"
            );
        }
    }

    #[test]
    fn languages() {
        for (input, expected) in [
            ("en", "en"),
            ("en_US", "en_US"),
            ("en-US", "en_US"),
            ("pt_br", "pt_BR"),
            ("es_419", "es_419"),
            ("fil", "fil"),
        ] {
            assert_eq!(language(input).unwrap(), expected);
        }
        for bad in ["", "e", "english", "en_", "en_USA", "en_41", "e1", "en US"] {
            assert!(language(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parameters_encoding() {
        assert_eq!(parameters(&json!("a, b")).unwrap(), "a, b");
        assert_eq!(
            parameters(&json!(["A1", "x y"])).unwrap(),
            r#"["A1","x y"]"#
        );
        assert_eq!(parameters(&json!({"k": "v"})).unwrap(), r#"{"k":"v"}"#);
        let message = |v: Value| parameters(&v).unwrap_err().to_string();
        assert!(message(json!(["A-1", 2, null])).contains("parameters[1] is a number (2)"));
        assert!(message(json!(["A-1", null])).contains("parameters[1] is None (null)"));
        assert!(message(json!({"k": ["v"]})).contains("parameters[\"k\"] is a list"));
        assert!(message(json!(3)).contains("not a number (3)"));
        // Regression: "" passed here and was refused by the service (1006).
        assert!(message(json!(" ")).contains("must not be empty"));
        assert_eq!(parameters(&json!([])).unwrap(), "[]");
    }

    #[test]
    fn header_values_and_masking() {
        assert!(header_value("token", "abc.DEF-123_~+/=").is_ok());
        for bad in ["", "a b", "a\r\nX-Evil: 1", "tab\t", "nl\n"] {
            assert!(header_value("token", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn idempotency_keys() {
        assert!(idempotency_key("order-42_retry.1").is_ok());
        assert!(idempotency_key(&"k".repeat(255)).is_ok());
        for bad in ["", "has space", "clé-1", "a\nb"] {
            assert!(idempotency_key(bad).is_err(), "{bad:?}");
        }
        assert!(idempotency_key(&"k".repeat(256)).is_err());
    }

    #[test]
    fn paging_bounds() {
        assert!(page_no(0).is_err() && page_no(1).is_ok());
        assert!(page_size(0).is_err() && page_size(1001).is_err() && page_size(1000).is_ok());
    }
}
