//! The request log: every request the sandbox received, in arrival order, with what it answered.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::http::request::Parts;
use axum::http::Method;
use serde_json::Value;

use super::endpoints::SEND_PATH;
use crate::sync::lock;

/// Response bodies larger than this (big list pages) are not kept, so the log stays small.
const MAX_RECORDED_RESPONSE_BYTES: usize = 64 * 1024;

/// One request as the sandbox received it, and what it answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Raw query string, `""` when there is none.
    pub query: String,
    /// Lower-case names, in the order received (repeats of a name follow its first occurrence).
    pub headers: Vec<(String, String)>,
    /// The body decoded as JSON, when it is JSON.
    pub body: Option<Value>,
    pub body_text: String,
    /// The tenant the bearer token mapped to.
    pub tenant: Option<String>,
    /// The status answered, or that would have been answered before a cut; 0 while the request
    /// is still being handled.
    pub status: u16,
    /// `None` when the body was not JSON or was larger than 64 KiB.
    pub response_body: Option<Value>,
    /// Answered from the Idempotency-Key cache: no new message was sent.
    pub idempotent_replay: bool,
    /// The `X-Request-Id` the sandbox answered with.
    pub request_id: String,
    /// The TCP connection it arrived on, numbered from 1 in accept order (0: not known).
    pub connection: u64,
}

impl RecordedRequest {
    pub(crate) fn received(parts: &Parts, body: &[u8], request_id: String) -> Self {
        RecordedRequest {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            headers: parts
                .headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
            body: serde_json::from_slice(body).ok(),
            body_text: String::from_utf8_lossy(body).into_owned(),
            tenant: None,
            status: 0,
            response_body: None,
            idempotent_replay: false,
            request_id,
            connection: parts
                .extensions
                .get::<super::connection::ConnectionNumber>()
                .map_or(0, |number| number.0),
        }
    }

    fn is_send(&self) -> bool {
        self.method == Method::POST.as_str() && self.path == SEND_PATH
    }
}

/// What a request turned out to be answered with, filled in once the answer is decided.
pub(crate) struct Outcome<'a> {
    pub(crate) tenant: Option<String>,
    pub(crate) status: u16,
    pub(crate) response_body: &'a [u8],
    pub(crate) idempotent_replay: bool,
}

#[derive(Default)]
struct Entries {
    next: u64,
    // Sequence numbers let a finishing request find its record even after a clear or after
    // older records were dropped.
    records: VecDeque<(u64, RecordedRequest)>,
}

#[derive(Default)]
pub(crate) struct RequestLog {
    entries: Mutex<Entries>,
    /// The most records kept (the oldest go first); `None`: all.
    capacity: Option<usize>,
}

impl RequestLog {
    pub(crate) fn new(capacity: Option<usize>) -> Self {
        RequestLog {
            entries: Mutex::default(),
            capacity,
        }
    }

    /// Whether requests are recorded at all (a capacity of 0 keeps none, and costs nothing).
    pub(crate) fn records(&self) -> bool {
        self.capacity != Some(0)
    }

    /// Appends a request as received; the returned sequence number finishes it later.
    pub(crate) fn begin(&self, record: RecordedRequest) -> u64 {
        let mut entries = lock(&self.entries);
        let sequence = entries.next;
        entries.next += 1;
        if let Some(capacity) = self.capacity {
            while entries.records.len() >= capacity.max(1) {
                entries.records.pop_front();
            }
        }
        entries.records.push_back((sequence, record));
        sequence
    }

    pub(crate) fn finish(&self, sequence: u64, outcome: Outcome<'_>) {
        let response_body = if outcome.response_body.len() <= MAX_RECORDED_RESPONSE_BYTES {
            serde_json::from_slice(outcome.response_body).ok()
        } else {
            None
        };
        let mut entries = lock(&self.entries);
        // Cleared while the request was in flight: nothing left to finish.
        let Ok(index) = entries
            .records
            .binary_search_by_key(&sequence, |(sequence, _)| *sequence)
        else {
            return;
        };
        if let Some((_, record)) = entries.records.get_mut(index) {
            record.tenant = outcome.tenant;
            record.status = outcome.status;
            record.response_body = response_body;
            record.idempotent_replay = outcome.idempotent_replay;
        }
    }

    pub(crate) fn all(&self) -> Vec<RecordedRequest> {
        let entries = lock(&self.entries);
        entries.records.iter().map(|(_, r)| r.clone()).collect()
    }

    pub(crate) fn sends(&self) -> Vec<RecordedRequest> {
        let entries = lock(&self.entries);
        entries
            .records
            .iter()
            .filter(|(_, r)| r.is_send())
            .map(|(_, r)| r.clone())
            .collect()
    }

    pub(crate) fn clear(&self) {
        lock(&self.entries).records.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::SandboxConfig;
    use serde_json::json;

    fn record(path: &str) -> RecordedRequest {
        let (parts, ()) = axum::http::Request::post(path)
            .header("X-Custom", "1")
            .body(())
            .unwrap()
            .into_parts();
        RecordedRequest::received(&parts, b"{\"a\":1}", "req_1".into())
    }

    #[test]
    fn a_bounded_log_keeps_the_newest_records() {
        let log = RequestLog::new(Some(2));
        for path in ["/a", "/b", "/c"] {
            log.begin(record(path));
        }
        let paths: Vec<String> = log.all().into_iter().map(|r| r.path).collect();
        assert_eq!(paths, ["/b", "/c"]);
        assert!(!RequestLog::new(Some(0)).records());
    }

    #[test]
    fn finish_fills_in_the_outcome_and_survives_a_clear() {
        let log = RequestLog::default();
        let first = log.begin(record("/v1/chat/messages/send?x=1"));
        let second = log.begin(record("/v1/chat/businessAccounts"));
        let outcome = |status| Outcome {
            tenant: Some("acme".into()),
            status,
            response_body: b"{\"ok\":true}",
            idempotent_replay: true,
        };
        log.finish(second, outcome(201));
        let all = log.all();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].status, 0);
        assert_eq!(all[0].query, "x=1");
        assert_eq!(all[0].body, Some(json!({"a": 1})));
        assert_eq!(
            all[0].headers,
            vec![("x-custom".to_owned(), "1".to_owned())]
        );
        assert_eq!(all[1].status, 201);
        assert_eq!(all[1].tenant.as_deref(), Some("acme"));
        assert_eq!(all[1].response_body, Some(json!({"ok": true})));
        assert!(all[1].idempotent_replay);
        assert_eq!(log.sends().len(), 1);

        log.clear();
        log.finish(first, outcome(200));
        assert!(log.all().is_empty());
        let third = log.begin(record("/x"));
        assert!(third > second);
    }

    #[tokio::test]
    async fn every_request_is_recorded_as_received_and_answered() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let from = client.sender_number().await;
        sandbox.clear_requests();

        let listed = client
            .get("/v1/chat/businessPhoneNumber?pageNo=1&pageSize=2&x=%20")
            .await;
        let anonymous = client.get_as(None, "/v1/chat/businessAccounts").await;
        let missing = client.get("/nowhere").await;
        let body = send_body(&from, "8613900000000");
        let sent = client.send(&body).await;
        let garbage = client.send_raw("not json").await;

        let log = sandbox.requests();
        assert_eq!(log.len(), 5);
        let list = &log[0];
        assert_eq!(list.method, "GET");
        assert_eq!(list.path, "/v1/chat/businessPhoneNumber");
        assert_eq!(list.query, "pageNo=1&pageSize=2&x=%20");
        assert_eq!(list.tenant.as_deref(), Some("acme"));
        assert_eq!(list.status, 200);
        assert_eq!(list.body, None);
        assert_eq!(list.body_text, "");
        assert_eq!(list.response_body.as_ref(), Some(&listed.json));
        assert_eq!(
            Some(&list.request_id),
            listed.header("x-request-id").as_ref()
        );
        let authorization = list.headers.iter().find(|(n, _)| n == "authorization");
        assert_eq!(
            authorization.map(|(_, v)| v.as_str()),
            Some("Bearer sandbox-token-acme")
        );
        assert!(list.headers.iter().all(|(n, _)| *n == n.to_lowercase()));

        assert_eq!(log[1].status, 401);
        assert_eq!(log[1].tenant, None);
        assert_eq!(log[1].response_body.as_ref(), Some(&anonymous.json));
        assert_eq!(log[2].status, 404);
        assert_eq!(log[2].response_body.as_ref(), Some(&missing.json));

        let send = &log[3];
        assert_eq!(send.method, "POST");
        assert_eq!(send.body.as_ref(), Some(&body));
        assert_eq!(send.body_text, body.to_string());
        assert_eq!(send.response_body.as_ref(), Some(&sent.json));
        assert!(!send.idempotent_replay);
        assert_eq!(log[4].status, 400);
        assert_eq!(log[4].body, None);
        assert_eq!(log[4].body_text, "not json");
        assert_eq!(log[4].response_body.as_ref(), Some(&garbage.json));

        let ids: std::collections::HashSet<_> = log.iter().map(|r| r.request_id.clone()).collect();
        assert_eq!(ids.len(), 5);
        assert_eq!(sandbox.sent_messages(), log[3..].to_vec());
        sandbox.clear_requests();
        assert!(sandbox.requests().is_empty());
    }

    #[tokio::test]
    async fn large_pages_are_recorded_without_their_body() {
        let sandbox = start(SandboxConfig {
            accounts_per_tenant: 100,
            ..SandboxConfig::default()
        })
        .await;
        let client = TestClient::new(&sandbox);
        let reply = client.get("/v1/chat/businessAccounts?pageSize=1000").await;
        assert!(reply.text.len() > MAX_RECORDED_RESPONSE_BYTES);
        let log = sandbox.requests();
        assert_eq!(log[0].status, 200);
        assert_eq!(log[0].response_body, None);
    }
}
