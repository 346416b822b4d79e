//! `POST /v1/chat/messages/send`: body checks, business validation (failed commits answered as
//! HTTP 200 send results), Idempotency-Key replay, and the commit itself.

use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use serde::Serialize;
use serde_json::{Map, Value};

use super::answer::Answer;
use xxhash_rust::xxh3::Xxh3;

use super::limits::Limits;
use super::state::Shared;
use super::store::{Remembered, TenantData};

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// Echoed values are cut to this many characters so an answer never balloons.
const MAX_ECHOED_CHARS: usize = 64;

/// The send result of spec section 2.1.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct SendResult {
    sms_id: Option<String>,
    status: &'static str,
    code: &'static str,
    msg: String,
}

/// A string field of the request body.
fn text_field<'a>(body: &'a Value, name: &str) -> Option<&'a str> {
    body.get(name).and_then(Value::as_str)
}

/// A business validation failure: its documented code and the explanation.
type Failure = (&'static str, String);

pub(crate) fn send(shared: &Shared, tenant: usize, headers: &HeaderMap, body: &[u8]) -> Answer {
    let store = &shared.store;
    if let Err(refusal) = check_content_type(headers) {
        return refusal;
    }
    let request = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => object,
        Ok(other) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!(
                    "request body must be a JSON object, got {}",
                    describe(&other)
                ),
            )
        }
        Err(error) => {
            return Answer::error(
                StatusCode::BAD_REQUEST,
                format!("request body is not valid JSON: {error}"),
            )
        }
    };
    let key = match idempotency_key(headers) {
        // Checked even when not honoured: a malformed key is still a bad request.
        Ok(key) => key.filter(|_| shared.honour_idempotency_keys),
        Err(refusal) => return refusal,
    };
    let Some(data) = store.tenant(tenant) else {
        return Answer::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "sandbox has no data for the authenticated tenant",
        );
    };

    let mut ledger = store.ledger();
    let body = Value::Object(request);
    // Compared as JSON values: key order and whitespace do not matter.
    let fingerprint = canonical_fingerprint(&body);
    if let Some(key) = key {
        if let Some(remembered) = ledger.remembered(tenant, key) {
            if remembered.body != fingerprint {
                return Answer::error(
                    StatusCode::CONFLICT,
                    format!(
                        "Idempotency-Key {} was already used with a different request body",
                        quote(key)
                    ),
                );
            }
            let mut answer = Answer::raw(StatusCode::OK, remembered.response.to_vec()).with_header(
                HeaderName::from_static("idempotent-replayed"),
                HeaderValue::from_static("true"),
            );
            answer.idempotent_replay = true;
            shared.stats.count(&shared.stats.replayed);
            return answer;
        }
    }

    let checked = validate(data, &body).and_then(|()| match &shared.limits {
        Some(limits) => enforce(limits, tenant, data, &body),
        None => Ok(()),
    });
    let checked = match checked {
        Err(Refusal::Throttled(answer)) => {
            shared.stats.count(&shared.stats.throttled);
            if let Some(from) = text_field(&body, "from") {
                shared.traffic.throttled(from);
            }
            return answer;
        }
        Err(Refusal::Failed(code, msg)) => Err((code, msg)),
        Ok(()) => Ok(()),
    };
    let result = match checked {
        Ok(()) => SendResult {
            sms_id: Some(ledger.next_sms_id()),
            status: "ACCEPTED",
            code: "0",
            msg: "success".to_owned(),
        },
        Err((code, msg)) => SendResult {
            sms_id: None,
            status: "FAILED",
            code,
            msg,
        },
    };
    let response = match serde_json::to_vec(&result) {
        Ok(response) => response,
        Err(error) => {
            return Answer::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("sandbox could not encode the send result: {error}"),
            )
        }
    };
    shared.stats.count(if result.sms_id.is_some() {
        &shared.stats.accepted
    } else {
        &shared.stats.failed_commits
    });
    if result.sms_id.is_some() {
        if let (Some(from), Some(to)) = (text_field(&body, "from"), text_field(&body, "to")) {
            shared.traffic.committed(from, to);
        }
    }
    if let Some(key) = key {
        ledger.remember(
            tenant,
            key,
            Remembered {
                body: fingerprint,
                response: response.clone().into(),
            },
        );
    }
    Answer::raw(StatusCode::OK, response)
}

/// Why a valid message is not committed when the platform's limits are enforced.
enum Refusal {
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
fn enforce(limits: &Limits, tenant: usize, data: &TenantData, body: &Value) -> Result<(), Refusal> {
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
        let retry_after = super::limits::retry_after(wait);
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

/// A 128-bit fingerprint of a JSON value that ignores object key order (the sandbox keeps it
/// instead of the whole body of every Idempotency-Key it remembers).
fn canonical_fingerprint(value: &Value) -> u128 {
    fn feed(hasher: &mut Xxh3, value: &Value) {
        match value {
            Value::Null => hasher.update(b"n"),
            Value::Bool(flag) => hasher.update(if *flag { b"t" } else { b"f" }),
            Value::Number(number) => {
                hasher.update(b"#");
                hasher.update(number.to_string().as_bytes());
            }
            Value::String(text) => {
                hasher.update(b"s");
                hasher.update(&(text.len() as u64).to_le_bytes());
                hasher.update(text.as_bytes());
            }
            Value::Array(items) => {
                hasher.update(b"[");
                hasher.update(&(items.len() as u64).to_le_bytes());
                for item in items {
                    feed(hasher, item);
                }
            }
            Value::Object(map) => {
                hasher.update(b"{");
                hasher.update(&(map.len() as u64).to_le_bytes());
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, item) in entries {
                    hasher.update(&(key.len() as u64).to_le_bytes());
                    hasher.update(key.as_bytes());
                    feed(hasher, item);
                }
            }
        }
    }
    let mut hasher = Xxh3::new();
    feed(&mut hasher, value);
    hasher.digest128()
}

fn check_content_type(headers: &HeaderMap) -> Result<(), Answer> {
    let given = headers
        .get(CONTENT_TYPE)
        .map(|value| value.to_str().unwrap_or("<not text>"));
    let essence = given
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase());
    if essence.as_deref() == Some("application/json") {
        return Ok(());
    }
    let got = given.map_or_else(|| "none".to_owned(), quote);
    Err(Answer::error(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!("Content-Type must be application/json, got {got}"),
    ))
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, Answer> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match value.to_str() {
        // Visible ASCII only, as the message says: `to_str` alone would let spaces and tabs in.
        Ok(key)
            if !key.is_empty()
                && key.len() <= MAX_IDEMPOTENCY_KEY_CHARS
                && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(Some(key))
        }
        _ => Err(Answer::error(
            StatusCode::BAD_REQUEST,
            format!(
                "Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} visible ASCII characters"
            ),
        )),
    }
}

/// Checks in the documented order: type, template, from, to. The first failure wins.
fn validate(data: &TenantData, body: &Value) -> Result<(), Refusal> {
    validate_fields(data, body).map_err(Refusal::from)
}

fn validate_fields(data: &TenantData, body: &Value) -> Result<(), Failure> {
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
fn quote(text: &str) -> String {
    let cut: String = text.chars().take(MAX_ECHOED_CHARS).collect();
    let quoted = Value::String(cut).to_string();
    if text.chars().count() > MAX_ECHOED_CHARS {
        format!("{quoted}...")
    } else {
        quoted
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => format!("boolean {flag}"),
        Value::Number(number) => format!("number {number}"),
        Value::String(text) => format!("string {}", quote(text)),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::SandboxConfig;
    use serde_json::json;
    use std::collections::HashSet;

    #[tokio::test]
    async fn a_valid_send_is_accepted() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let reply = client
            .send(&send_body(&client.sender_number().await, "8613800000001"))
            .await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.json,
            json!({"smsId": "sms_00000000000000000001", "status": "ACCEPTED", "code": "0", "msg": "success"})
        );
        let fields: Vec<&String> = reply.json.as_object().unwrap().keys().collect();
        assert_eq!(fields, ["smsId", "status", "code", "msg"]);
    }

    #[tokio::test]
    async fn every_failure_code_names_the_bad_field() {
        let sandbox = start(SandboxConfig {
            accounts_per_tenant: 30,
            ..SandboxConfig::default()
        })
        .await;
        let client = TestClient::new(&sandbox);
        let from = client.sender_number().await;
        let numbers = client
            .get("/v1/chat/businessPhoneNumber?pageSize=1000")
            .await
            .json;
        let idle = numbers["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["status"] != "CONNECTED")
            .expect("30 accounts hold a number that is not CONNECTED");
        let idle_status = idle["status"].as_str().unwrap().to_owned();
        let idle_digits: String = idle["displayPhoneNumber"]
            .as_str()
            .unwrap()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();

        let good = send_body(&from, "8613800000001");
        let with = |path: &[&str], value: Option<Value>| {
            let mut body = good.clone();
            let (last, parents) = path.split_last().unwrap();
            let mut target = &mut body;
            for parent in parents {
                target = &mut target[*parent];
            }
            let object = target.as_object_mut().unwrap();
            match value {
                Some(value) => object.insert((*last).to_owned(), value),
                None => object.remove(*last),
            };
            body
        };
        let cases: Vec<(Value, &str, String)> = vec![
            (with(&["type"], None), "1005", "type is missing".into()),
            (
                with(&["type"], Some(json!("text"))),
                "1005",
                "type \"text\" is not supported".into(),
            ),
            (
                with(&["type"], Some(json!(1))),
                "1005",
                "got number 1".into(),
            ),
            (
                with(&["template"], None),
                "1006",
                "template is missing".into(),
            ),
            (
                with(&["template"], Some(json!("hello"))),
                "1006",
                "template must be an object, got string \"hello\"".into(),
            ),
            (
                with(&["template", "name"], None),
                "1006",
                "template.name is missing".into(),
            ),
            (
                with(&["template", "parameters"], Some(json!(["a"]))),
                "1006",
                "template.parameters must be a string, got an array".into(),
            ),
            (
                with(&["template", "language"], Some(json!(""))),
                "1006",
                "template.language must not be empty".into(),
            ),
            (with(&["from"], None), "1001", "from is missing".into()),
            (
                with(&["from"], Some(json!(8613800000000u64))),
                "1001",
                "from must be a string of digits, got number 8613800000000".into(),
            ),
            (
                with(&["from"], Some(json!("+86 138"))),
                "1001",
                "from \"+86 138\" must contain digits only".into(),
            ),
            (
                with(&["from"], Some(json!("8613800000000"))),
                "1002",
                "from \"8613800000000\" is not a business phone number".into(),
            ),
            (
                with(&["from"], Some(json!(format!("0{from}")))),
                "1002",
                "is not a business phone number".into(),
            ),
            (
                with(&["from"], Some(json!(idle_digits))),
                "1003",
                format!("has status {idle_status}"),
            ),
            (with(&["to"], None), "1004", "to is missing".into()),
            (
                with(&["to"], Some(json!(null))),
                "1004",
                "to must be a string of digits, got null".into(),
            ),
            (
                with(&["to"], Some(json!("1234567"))),
                "1004",
                "to \"1234567\" must be 8 to 15 digits, got 7".into(),
            ),
            (
                with(&["to"], Some(json!("1234567890123456"))),
                "1004",
                "got 16".into(),
            ),
            (
                with(&["to"], Some(json!("138-0000-0001"))),
                "1004",
                "must contain digits only".into(),
            ),
            // The order is type, template, from, to: the earliest bad field is reported.
            (
                json!({"to": "1", "from": "x"}),
                "1005",
                "type is missing".into(),
            ),
            (
                json!({"type": "template", "to": "1", "from": "x"}),
                "1006",
                "template is missing".into(),
            ),
            (
                json!({"type": "template", "template": good["template"], "from": "x", "to": "1"}),
                "1001",
                "from \"x\"".into(),
            ),
        ];
        for (body, code, needle) in cases {
            let reply = client.send(&body).await;
            assert_eq!(reply.status, 200, "{body}");
            assert_eq!(reply.json["smsId"], Value::Null, "{body}");
            assert_eq!(reply.json["status"], "FAILED", "{body}");
            assert_eq!(reply.json["code"], code, "{body}: {}", reply.json);
            let msg = reply.json["msg"].as_str().unwrap();
            assert!(msg.contains(&needle), "{body}: {msg}");
        }
        // Failed commits use no smsId.
        let reply = client.send(&good).await;
        assert_eq!(reply.json["smsId"], "sms_00000000000000000001");
    }

    #[tokio::test]
    async fn malformed_bodies_are_400_and_wrong_media_type_415() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let reply = client.send_raw("{\"to\": ").await;
        assert_eq!(reply.status, 400);
        assert_eq!(reply.json["code"], "400");
        assert!(reply.json["msg"]
            .as_str()
            .unwrap()
            .starts_with("request body is not valid JSON: "));
        let reply = client.send_raw("").await;
        assert_eq!(reply.status, 400);
        let reply = client.send_raw("[1, 2]").await;
        assert_eq!(reply.status, 400);
        assert_eq!(
            reply.json["msg"],
            "request body must be a JSON object, got an array"
        );

        let body = send_body(&client.sender_number().await, "8613800000001").to_string();
        let url = format!("{}/v1/chat/messages/send", sandbox.base_url());
        let post = |content_type: Option<&'static str>| {
            let mut request = client
                .http
                .post(&url)
                .bearer_auth(sandbox.token())
                .body(body.clone());
            if let Some(content_type) = content_type {
                request = request.header("content-type", content_type);
            }
            request.send()
        };
        let reply = post(Some("text/plain")).await.unwrap();
        assert_eq!(reply.status(), 415);
        let json: Value = serde_json::from_slice(&reply.bytes().await.unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"code": "415", "msg": "Content-Type must be application/json, got \"text/plain\""})
        );
        assert_eq!(post(None).await.unwrap().status(), 415);
        assert_eq!(
            post(Some("Application/JSON; charset=utf-8"))
                .await
                .unwrap()
                .status(),
            200
        );
    }

    #[tokio::test]
    async fn sms_ids_are_unique_under_concurrency() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let body = send_body(&client.sender_number().await, "8613800000001");
        let replies = futures::future::join_all((0..40).map(|_| client.send(&body))).await;
        let ids: HashSet<String> = replies
            .iter()
            .map(|r| r.json["smsId"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), 40);
        assert!(ids
            .iter()
            .all(|id| id.len() == 24 && id.starts_with("sms_")));
    }

    #[tokio::test]
    async fn idempotency_key_replays_or_conflicts_per_tenant() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let from = client.sender_number().await;
        let body = send_body(&from, "8613800000001");
        let first = client.send_with_key(&body, Some("order-42")).await;
        assert_eq!(first.json["status"], "ACCEPTED");
        assert_eq!(first.header("idempotent-replayed"), None);

        // Same body with other key order and spacing: the same JSON value, replayed.
        let reordered = format!(
            "{{ \"template\": {}, \"type\": \"template\", \"from\": \"{from}\", \"to\": \"8613800000001\" }}",
            body["template"]
        );
        let replay = client.send_raw_with_key(&reordered, Some("order-42")).await;
        assert_eq!(replay.status, 200);
        assert_eq!(replay.json, first.json);
        assert_eq!(
            replay.header("idempotent-replayed").as_deref(),
            Some("true")
        );

        let changed = send_body(&from, "8613800000002");
        let conflict = client.send_with_key(&changed, Some("order-42")).await;
        assert_eq!(conflict.status, 409);
        assert_eq!(
            conflict.json,
            json!({"code": "409", "msg": "Idempotency-Key \"order-42\" was already used with a different request body"})
        );

        // Keys belong to a tenant: globex's "order-42" is a different key.
        let globex = client
            .get_as(Some("sandbox-token-globex"), "/v1/chat/businessPhoneNumber")
            .await;
        let globex_from: String = globex.json["data"][0]["displayPhoneNumber"]
            .as_str()
            .unwrap()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let other = client
            .send_full(
                Some("Bearer sandbox-token-globex"),
                &send_body(&globex_from, "8613800000001").to_string(),
                Some("order-42"),
            )
            .await;
        assert_eq!(other.json["status"], "ACCEPTED");
        assert_ne!(other.json["smsId"], first.json["smsId"]);

        // Failed commits are remembered too.
        let failing = send_body("123", "8613800000001");
        let failed = client.send_with_key(&failing, Some("bad-from")).await;
        assert_eq!(failed.json["code"], "1002");
        let again = client.send_with_key(&failing, Some("bad-from")).await;
        assert_eq!(again.json, failed.json);

        let replays: Vec<bool> = sandbox
            .sent_messages()
            .iter()
            .map(|r| r.idempotent_replay)
            .collect();
        assert_eq!(replays, vec![false, true, false, false, false, true]);

        let empty = client.send_with_key(&body, Some("")).await;
        assert_eq!(empty.status, 400);
        assert!(empty.json["msg"]
            .as_str()
            .unwrap()
            .contains("Idempotency-Key must be 1 to 255"));
        let long = "k".repeat(256);
        assert_eq!(client.send_with_key(&body, Some(&long)).await.status, 400);
    }
}
