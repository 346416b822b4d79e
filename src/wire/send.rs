//! The send operation: the request body (section 4.1) and the send result (section 2.1).

use serde::Serialize;
use serde_json::{Map, Value};

use super::{fields, FromWire};

/// The codes that mean "committed" when the client is not told otherwise. The sandbox answers
/// `"0"` on success (docs/sandbox.md); codes are compared as strings, so `0` matches too.
pub const DEFAULT_SUCCESS_CODES: &[&str] = &["0"];

/// The JSON body of `POST /v1/chat/messages/send`, fields in the spec's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SendRequest {
    pub to: String,
    pub from: String,
    #[serde(rename = "type")]
    pub message_type: &'static str,
    pub template: TemplateRequest,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateRequest {
    pub name: String,
    pub parameters: String,
    pub language: String,
}

impl SendRequest {
    /// A template message; the only type the service supports.
    pub fn template(to: String, from: String, template: TemplateRequest) -> Self {
        SendRequest {
            to,
            from,
            message_type: "template",
            template,
        }
    }
}

/// The send result. `sms_id`, `status` and `code` are kept as received (string or number):
/// the spec does not say which.
#[derive(Debug, Clone, PartialEq)]
pub struct SendResult {
    pub sms_id: Option<Value>,
    pub status: Option<Value>,
    pub code: Option<Value>,
    pub msg: Option<String>,
    /// Whether the commit succeeded, judged against the client's success codes.
    pub ok: bool,
    pub wire: Map<String, Value>,
}

impl SendResult {
    /// The code as text, so `0` and `"0"` compare equal.
    pub fn code_string(&self) -> Option<String> {
        self.code.as_ref().map(scalar_text)
    }

    /// Decides `ok`: the code is one of `success_codes`. No code is never success (the
    /// client raises an unknown outcome for it: an `smsId` alone proves nothing, services
    /// assign ids to rejected messages too).
    pub fn judge<S: AsRef<str>>(&mut self, success_codes: &[S]) {
        self.ok = is_success(self.code.as_ref(), success_codes);
    }
}

/// Whether `code` is one of `success_codes`, compared as text (`0` and `"0"` are one code).
pub fn is_success<S: AsRef<str>>(code: Option<&Value>, success_codes: &[S]) -> bool {
    code.map(scalar_text)
        .is_some_and(|code| success_codes.iter().any(|c| c.as_ref().trim() == code))
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_owned(),
        other => other.to_string(),
    }
}

impl FromWire for SendResult {
    fn wire(&self) -> &Map<String, Value> {
        &self.wire
    }

    const NAME: &'static str = "send result";

    fn from_wire(object: Map<String, Value>) -> crate::Result<Self> {
        let mut result = SendResult {
            sms_id: fields::scalar(&object, "smsId"),
            status: fields::scalar(&object, "status"),
            code: fields::scalar(&object, "code"),
            msg: fields::string(&object, "msg"),
            ok: false,
            wire: object,
        };
        result.judge(DEFAULT_SUCCESS_CODES);
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn decode(value: Value) -> SendResult {
        match value {
            Value::Object(object) => SendResult::from_wire(object).unwrap(),
            _ => unreachable!(),
        }
    }

    #[test]
    fn request_body_is_byte_exact() {
        let request = SendRequest::template(
            "8613800000000".into(),
            "8613900000000".into(),
            TemplateRequest {
                name: "order_update".into(),
                parameters: "[\"A1\"]".into(),
                language: "en_US".into(),
            },
        );
        assert_eq!(
            serde_json::to_string(&request).unwrap(),
            r#"{"to":"8613800000000","from":"8613900000000","type":"template","template":{"name":"order_update","parameters":"[\"A1\"]","language":"en_US"}}"#
        );
    }

    #[test]
    fn numeric_and_string_codes_are_the_same_code() {
        let numeric = decode(json!({"smsId": 17, "status": 1, "code": 0, "msg": ""}));
        let text = decode(json!({"smsId": "17", "status": "1", "code": "0", "msg": ""}));
        assert!(numeric.ok && text.ok);
        assert_eq!(numeric.code_string(), text.code_string());
        assert_eq!(numeric.sms_id, Some(json!(17)));
    }

    #[test]
    fn failed_commit_is_not_ok() {
        let failed =
            decode(json!({"smsId": null, "status": "FAILED", "code": "1002", "msg": "no"}));
        assert!(!failed.ok);
        assert_eq!(failed.sms_id, None);
        let mut custom = failed.clone();
        custom.judge(&["1002"]);
        assert!(custom.ok);
    }

    #[test]
    fn missing_code_is_never_success() {
        // Regression: an smsId alone was taken as success, even for `status: FAILED`.
        assert!(!decode(json!({"smsId": "a", "status": "FAILED"})).ok);
        assert!(!decode(json!({"smsId": "a", "code": null})).ok);
        assert!(!decode(json!({"status": "QUEUED"})).ok);
    }
}
