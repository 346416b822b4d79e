//! Business validation of a send's body (spec section 2.2): each failure is a failed commit
//! with its documented code and a message that names the bad field and what it held.

use serde_json::{Map, Value};

use super::super::store::TenantData;
use super::Failure;

/// Echoed values are cut to this many characters so an answer never balloons.
const MAX_ECHOED_CHARS: usize = 64;

/// Checks in the documented order: type, template, from, to. The first failure wins.
pub(super) fn validate(data: &TenantData, body: &Value) -> Result<(), Failure> {
    let field = |name: &str| body.get(name);
    check_type(field("type"))?;
    check_template(field("template"))?;
    check_from(data, field("from"))?;
    check_to(field("to"))
}

fn check_type(value: Option<&Value>) -> Result<(), Failure> {
    let fail = |msg: String| Err(("1005", msg));
    match value {
        Some(Value::String(kind)) if kind == "template" => Ok(()),
        None => fail("type is missing; only \"template\" is supported".to_owned()),
        Some(Value::String(kind)) => fail(format!(
            "type {} is not supported; only \"template\" is supported",
            quote(kind)
        )),
        Some(other) => fail(format!(
            "type must be the string \"template\", got {}",
            describe(other)
        )),
    }
}

fn check_template(value: Option<&Value>) -> Result<(), Failure> {
    let fail = |msg: String| Err(("1006", msg));
    let template: &Map<String, Value> = match value {
        Some(Value::Object(template)) => template,
        None => {
            return fail("template is missing; it is required when type is \"template\"".to_owned())
        }
        Some(other) => {
            return fail(format!(
                "template must be an object, got {}",
                describe(other)
            ))
        }
    };
    for name in ["name", "parameters", "language"] {
        match template.get(name) {
            Some(Value::String(text)) if !text.trim().is_empty() => {}
            Some(Value::String(_)) => return fail(format!("template.{name} must not be empty")),
            None => return fail(format!("template.{name} is missing")),
            Some(other) => {
                return fail(format!(
                    "template.{name} must be a string, got {}",
                    describe(other)
                ))
            }
        }
    }
    Ok(())
}

fn all_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// The number as digits, or why it is not: `field` names it in the message.
fn digits_of<'a>(field: &str, value: Option<&'a Value>) -> Result<&'a str, String> {
    const DIGITS_ONLY: &str =
        "must contain digits only: country code and number, without \"+\", spaces or dashes";
    match value {
        None => Err(format!("{field} is missing")),
        Some(Value::String(text)) if all_digits(text) => Ok(text),
        Some(Value::String(text)) => Err(format!("{field} {} {DIGITS_ONLY}", quote(text))),
        Some(other) => Err(format!(
            "{field} must be a string of digits, got {}",
            describe(other)
        )),
    }
}

fn check_from(data: &TenantData, value: Option<&Value>) -> Result<(), Failure> {
    let digits = digits_of("from", value).map_err(|msg| ("1001", msg))?;
    let number = digits
        .parse::<u64>()
        .ok()
        .and_then(|parsed| data.number_by_digits(parsed))
        // A leading zero would parse to another number's digits.
        .filter(|_| !digits.starts_with('0'));
    let Some(number) = number else {
        return Err((
            "1002",
            format!(
                "from {} is not a business phone number of this account",
                quote(digits)
            ),
        ));
    };
    if number.status != "CONNECTED" {
        return Err((
            "1003",
            format!(
                "from {} has status {}; only CONNECTED numbers can send",
                quote(digits),
                number.status
            ),
        ));
    }
    Ok(())
}

fn check_to(value: Option<&Value>) -> Result<(), Failure> {
    let digits = digits_of("to", value).map_err(|msg| ("1004", msg))?;
    if !(8..=15).contains(&digits.len()) {
        return Err((
            "1004",
            format!(
                "to {} must be 8 to 15 digits, got {}",
                quote(digits),
                digits.len()
            ),
        ));
    }
    Ok(())
}

/// A JSON string literal of `text`, cut short when long.
pub(super) fn quote(text: &str) -> String {
    let cut: String = text.chars().take(MAX_ECHOED_CHARS).collect();
    let quoted = Value::String(cut).to_string();
    if text.chars().count() > MAX_ECHOED_CHARS {
        format!("{quoted}...")
    } else {
        quoted
    }
}

pub(super) fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => format!("boolean {flag}"),
        Value::Number(number) => format!("number {number}"),
        Value::String(text) => format!("string {}", quote(text)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}
