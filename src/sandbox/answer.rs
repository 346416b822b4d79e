//! The answer the sandbox decided on for one request, before it is written (or not, after a cut).

use axum::body::Body;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use serde::Serialize;
use serde_json::json;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) body: Vec<u8>,
    /// Replace the default header of the same name; repeats of a name are all sent.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    pub(crate) idempotent_replay: bool,
    /// Written without `Content-Length` (chunked), in pieces.
    pub(crate) chunked: bool,
}

impl Answer {
    pub(crate) fn raw(status: StatusCode, body: Vec<u8>) -> Answer {
        Answer {
            status,
            body,
            headers: Vec::new(),
            idempotent_replay: false,
            chunked: false,
        }
    }

    pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Answer {
        match serde_json::to_vec(value) {
            Ok(body) => Answer::raw(status, body),
            Err(error) => Answer::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("sandbox could not encode its answer: {error}"),
            ),
        }
    }

    /// The error shape of every non-2xx the sandbox produces itself.
    pub(crate) fn error(status: StatusCode, msg: impl Into<String>) -> Answer {
        let body = json!({"code": status.as_str(), "msg": msg.into()});
        Answer::raw(status, body.to_string().into_bytes())
    }

    pub(crate) fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Answer {
        self.headers.push((name, value));
        self
    }

    pub(crate) fn into_response(self, request_id: &str) -> Response {
        let body = if self.chunked {
            // A stream of pieces has no known length: hyper sends it chunked.
            let pieces: Vec<Result<bytes::Bytes, std::convert::Infallible>> = self
                .body
                .chunks(64 * 1024)
                .map(|piece| Ok(bytes::Bytes::copy_from_slice(piece)))
                .collect();
            Body::from_stream(futures::stream::iter(pieces))
        } else {
            Body::from(self.body)
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Ok(id) = HeaderValue::from_str(request_id) {
            headers.insert(REQUEST_ID, id);
        }
        for (name, _) in &self.headers {
            // The request id identifies the exchange in both logs, so nothing overrides it.
            if *name != REQUEST_ID {
                headers.remove(name);
            }
        }
        for (name, value) in self.headers {
            if name != REQUEST_ID {
                headers.append(name, value);
            }
        }
        response
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use axum::http::header::RETRY_AFTER;

    #[test]
    fn error_body_and_default_headers() {
        let answer = Answer::error(StatusCode::CONFLICT, "taken")
            .with_header(CONTENT_TYPE, HeaderValue::from_static("text/plain"))
            .with_header(RETRY_AFTER, HeaderValue::from_static("1"))
            .with_header(RETRY_AFTER, HeaderValue::from_static("2"))
            .with_header(REQUEST_ID, HeaderValue::from_static("req_forged"));
        assert_eq!(answer.body, br#"{"code":"409","msg":"taken"}"#);
        let response = answer.into_response("req_abc");
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let headers = response.headers();
        assert_eq!(headers[CONTENT_TYPE], "text/plain");
        assert_eq!(headers[REQUEST_ID], "req_abc");
        let retry: Vec<_> = headers.get_all(RETRY_AFTER).iter().collect();
        assert_eq!(retry, vec!["1", "2"]);
    }
}
