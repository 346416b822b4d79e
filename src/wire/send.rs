//! The send operation: the request body (section 4.1) and the send result (section 2.1).

use serde::Serialize;

use super::json::Scalar;
use super::model::{wire_model, AnyScalar, Text};

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

wire_model! {
    /// The send result. `sms_id`, `status` and `code` are kept as received (string or number):
    /// the spec does not say which.
    pub struct SendResult as "send result" {
        sms_id: AnyScalar = "smsId",
        status: AnyScalar = "status",
        code: AnyScalar = "code",
        msg: Text = "msg",
    }
    extra {
        /// Whether the commit succeeded, judged against the client's success codes.
        ok: bool = false,
    }
    after |result| {
        result.judge(DEFAULT_SUCCESS_CODES);
    }
}

impl SendResult {
    /// The code as text, so `0` and `"0"` compare equal.
    pub fn code_string(&self) -> Option<String> {
        self.code.as_ref().map(|code| code.text().to_owned())
    }

    /// Decides `ok`: the code is one of `success_codes`. No code is never success (the
    /// client raises an unknown outcome for it: an `smsId` alone proves nothing, services
    /// assign ids to rejected messages too).
    pub fn judge<S: AsRef<str>>(&mut self, success_codes: &[S]) {
        self.ok = is_success(self.code.as_ref(), success_codes);
    }
}

/// Whether `code` is one of `success_codes`, compared as text (`0` and `"0"` are one code).
pub fn is_success<S: AsRef<str>>(code: Option<&Scalar>, success_codes: &[S]) -> bool {
    code.map(Scalar::text)
        .is_some_and(|code| success_codes.iter().any(|c| c.as_ref().trim() == code))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::wire::FromWire;

    fn decode(text: &str) -> SendResult {
        SendResult::from_json(bytes::Bytes::from(text.to_owned())).unwrap()
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
        let numeric = decode(r#"{"smsId": 17, "status": 1, "code": 0, "msg": ""}"#);
        let text = decode(r#"{"smsId": "17", "status": "1", "code": "0", "msg": ""}"#);
        assert!(numeric.ok && text.ok);
        assert_eq!(numeric.code_string(), text.code_string());
        assert_eq!(numeric.sms_id, Some(Scalar::Number("17".into())));
        assert_eq!(
            numeric.wire.as_bytes(),
            br#"{"smsId": 17, "status": 1, "code": 0, "msg": ""}"#
        );
    }

    #[test]
    fn failed_commit_is_not_ok() {
        let failed = decode(r#"{"smsId": null, "status": "FAILED", "code": "1002", "msg": "no"}"#);
        assert!(!failed.ok);
        assert_eq!(failed.sms_id, None);
        let mut custom = failed.clone();
        custom.judge(&["1002"]);
        assert!(custom.ok);
    }

    #[test]
    fn missing_code_is_never_success() {
        // Regression: an smsId alone was taken as success, even for `status: FAILED`.
        assert!(!decode(r#"{"smsId": "a", "status": "FAILED"}"#).ok);
        assert!(!decode(r#"{"smsId": "a", "code": null}"#).ok);
        assert!(!decode(r#"{"status": "QUEUED"}"#).ok);
        // The last of repeated keys wins, as in most JSON readers.
        assert!(decode(r#"{"code": "1", "code": "0"}"#).ok);
    }

    #[test]
    fn what_is_not_an_object_is_a_decode_error() {
        for body in ["[]", "1", "\"x\"", "not json", "{\"code\": \"0\"} trailing"] {
            let decoded = SendResult::from_json(bytes::Bytes::from(body.to_owned()));
            assert!(
                matches!(decoded, Err(crate::wire::DecodeError { .. })),
                "{body}"
            );
        }
    }
}
