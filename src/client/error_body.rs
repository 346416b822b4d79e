//! What a non-2xx answer says: its body (JSON when it is JSON, else text) and the one-line
//! explanation an error message carries.

use serde_json::Value;

use crate::error::ApiBody;
use crate::masking::truncate;

/// A non-2xx answer's body: its JSON when it is JSON, else its text, and the one-line
/// explanation taken from it.
pub fn error_body(bytes: &[u8]) -> (ApiBody, String) {
    let body = match serde_json::from_slice::<Value>(bytes) {
        Ok(json) => ApiBody::Json(json),
        Err(_) => ApiBody::Text(String::from_utf8_lossy(bytes).into_owned()),
    };
    let message = api_message(&body);
    (body, message)
}

/// The explanation in an error body: the spec's `msg`, or the usual alternatives.
pub(crate) fn api_message(body: &ApiBody) -> String {
    match body {
        ApiBody::Json(Value::Object(object)) => ["msg", "message", "error_description", "detail"]
            .iter()
            .find_map(|key| object.get(*key).and_then(Value::as_str))
            .or_else(|| {
                object
                    .get("error")
                    .and_then(|e| e.get("message").or(Some(e)))
                    .and_then(Value::as_str)
            })
            .map(|m| truncate(m, 500))
            .unwrap_or_default(),
        ApiBody::Json(_) => String::new(),
        ApiBody::Text(text) => truncate(text.trim(), 200),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_come_from_the_usual_places() {
        let json = |v: serde_json::Value| ApiBody::Json(v);
        assert_eq!(
            api_message(&json(serde_json::json!({"code": "401", "msg": "no"}))),
            "no"
        );
        assert_eq!(
            api_message(&json(serde_json::json!({"error": {"message": "m"}}))),
            "m"
        );
        assert_eq!(api_message(&json(serde_json::json!({"error": "e"}))), "e");
        assert_eq!(
            api_message(&ApiBody::Text(" bad gateway \n".into())),
            "bad gateway"
        );
    }
}
