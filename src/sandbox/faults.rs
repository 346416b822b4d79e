//! Injected faults: what a test asks the next matching requests to suffer, and the FIFO queue
//! that hands them out.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use super::state::lock;

/// Which endpoint a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /v1/chat/messages/send`
    Send,
    /// `GET /v1/chat/businessAccounts`
    BusinessAccounts,
    /// `GET /v1/chat/businessPhoneNumber`
    BusinessPhoneNumbers,
    /// Any of the three.
    Any,
}

const ROUTE_NAMES: &str = "\"send\", \"business_accounts\", \"business_phone_numbers\", \"*\"";

impl Route {
    fn name(self) -> &'static str {
        match self {
            Route::Send => "send",
            Route::BusinessAccounts => "business_accounts",
            Route::BusinessPhoneNumbers => "business_phone_numbers",
            Route::Any => "*",
        }
    }

    /// Whether a fault queued for `self` applies to a request that reached `endpoint`.
    pub(crate) fn matches(self, endpoint: Route) -> bool {
        self == Route::Any || self == endpoint
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Route {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        [
            Route::Send,
            Route::BusinessAccounts,
            Route::BusinessPhoneNumbers,
            Route::Any,
        ]
        .into_iter()
        .find(|route| route.name() == text)
        .ok_or_else(|| format!("unknown sandbox route {text:?}; expected one of {ROUTE_NAMES}"))
    }
}

/// What the next `times` requests to a route suffer. See docs/sandbox.md for how the fields
/// combine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub times: usize,
    /// Answer with this status without processing the request.
    pub status: Option<u16>,
    /// Added to the response the request receives (replacing a default of the same name).
    pub headers: Vec<(String, String)>,
    /// Body of the injected response; `{"code": "<status>", "msg": "injected fault"}` when unset.
    pub body: Option<String>,
    /// Waited before responding; after processing when `status` is unset.
    pub delay: Duration,
    /// Drop the connection instead of writing the response (after processing when `status` is
    /// unset).
    pub cut_connection: bool,
}

impl Default for Fault {
    fn default() -> Self {
        Fault {
            times: 1,
            status: None,
            headers: Vec::new(),
            body: None,
            delay: Duration::ZERO,
            cut_connection: false,
        }
    }
}

/// Faults waiting for requests, oldest first.
#[derive(Debug, Default)]
pub(crate) struct FaultQueue {
    queue: Mutex<VecDeque<(Route, Fault)>>,
}

impl FaultQueue {
    /// A fault with `times == 0` applies to no request, so it is not queued at all.
    pub(crate) fn push(&self, route: Route, fault: Fault) {
        if fault.times > 0 {
            lock(&self.queue).push_back((route, fault));
        }
    }

    /// The oldest fault matching `endpoint`, used up by one request.
    pub(crate) fn take(&self, endpoint: Route) -> Option<Fault> {
        let mut queue = lock(&self.queue);
        let position = queue
            .iter()
            .position(|(route, _)| route.matches(endpoint))?;
        let entry = queue.get_mut(position)?;
        entry.1.times = entry.1.times.saturating_sub(1);
        let fault = entry.1.clone();
        if fault.times == 0 {
            queue.remove(position);
        }
        Some(fault)
    }

    pub(crate) fn clear(&self) {
        lock(&self.queue).clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::SandboxConfig;
    use serde_json::json;
    use std::time::Instant;

    #[test]
    fn routes_parse_from_their_names_and_refuse_others() {
        assert_eq!("send".parse::<Route>(), Ok(Route::Send));
        assert_eq!(
            "business_accounts".parse::<Route>(),
            Ok(Route::BusinessAccounts)
        );
        assert_eq!(
            "business_phone_numbers".parse::<Route>(),
            Ok(Route::BusinessPhoneNumbers)
        );
        assert_eq!("*".parse::<Route>(), Ok(Route::Any));
        let error = "Send".parse::<Route>().unwrap_err();
        assert!(error.contains("\"Send\""), "{error}");
        assert!(error.contains("\"business_phone_numbers\""), "{error}");
        assert_eq!(Route::BusinessAccounts.to_string(), "business_accounts");
    }

    #[test]
    fn queue_is_fifo_per_route_and_counts_down() {
        let queue = FaultQueue::default();
        let fault = |status, times| Fault {
            status: Some(status),
            times,
            ..Fault::default()
        };
        queue.push(Route::Send, fault(500, 2));
        queue.push(Route::Any, fault(502, 1));
        queue.push(Route::BusinessAccounts, fault(503, 1));
        queue.push(Route::Send, fault(504, 0));

        let status = |route| queue.take(route).and_then(|f| f.status);
        assert_eq!(status(Route::BusinessAccounts), Some(502));
        assert_eq!(status(Route::Send), Some(500));
        assert_eq!(status(Route::Send), Some(500));
        assert_eq!(status(Route::Send), None);
        assert_eq!(status(Route::BusinessAccounts), Some(503));
        assert_eq!(status(Route::BusinessPhoneNumbers), None);

        queue.push(Route::Any, fault(500, 3));
        queue.clear();
        assert_eq!(status(Route::Send), None);
    }

    #[tokio::test]
    async fn status_fault_answers_without_processing() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::Send,
            Fault {
                times: 2,
                status: Some(429),
                headers: vec![("Retry-After".into(), "7".into())],
                ..Fault::default()
            },
        );
        sandbox.inject(
            Route::Send,
            Fault {
                status: Some(503),
                body: Some("{\"error\":\"maintenance\"}".into()),
                headers: vec![("Content-Type".into(), "text/plain".into())],
                ..Fault::default()
            },
        );
        let body = send_body(&client.sender_number().await, "8613800000000");
        for _ in 0..2 {
            let reply = client.send_with_key(&body, Some("k1")).await;
            assert_eq!(reply.status, 429);
            assert_eq!(reply.header("retry-after").as_deref(), Some("7"));
            assert_eq!(reply.json, json!({"code": "429", "msg": "injected fault"}));
        }
        let reply = client.send(&body).await;
        assert_eq!(reply.status, 503);
        assert_eq!(reply.header("content-type").as_deref(), Some("text/plain"));
        assert!(reply.header("x-request-id").unwrap().starts_with("req_"));
        assert_eq!(reply.text, "{\"error\":\"maintenance\"}");

        // Nothing was processed: the key is still free and the first smsId is still unused.
        let other = send_body(&client.sender_number().await, "8613800000009");
        let reply = client.send_with_key(&other, Some("k1")).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.json["status"], "ACCEPTED");
        assert!(reply.json["smsId"]
            .as_str()
            .unwrap()
            .ends_with("000000000001"));

        let log = sandbox.sent_messages();
        let statuses: Vec<u16> = log.iter().map(|r| r.status).collect();
        assert_eq!(statuses, vec![429, 429, 503, 200]);
        assert_eq!(
            log[0].response_body,
            Some(json!({"code": "429", "msg": "injected fault"}))
        );
        assert_eq!(log[2].response_body, Some(json!({"error": "maintenance"})));
    }

    #[tokio::test]
    async fn faults_wait_for_auth_and_match_their_route() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::BusinessPhoneNumbers,
            Fault {
                status: Some(500),
                ..Fault::default()
            },
        );
        // A 401 and a request to another route leave the fault queued.
        let anonymous = client.get_as(None, "/v1/chat/businessPhoneNumber").await;
        assert_eq!(anonymous.status, 401);
        assert_eq!(client.get("/v1/chat/businessAccounts").await.status, 200);
        assert_eq!(client.get("/v1/chat/businessPhoneNumber").await.status, 500);
        assert_eq!(client.get("/v1/chat/businessPhoneNumber").await.status, 200);

        sandbox.inject(
            Route::Any,
            Fault {
                status: Some(502),
                ..Fault::default()
            },
        );
        sandbox.clear_faults();
        assert_eq!(client.get("/v1/chat/businessAccounts").await.status, 200);
    }

    #[tokio::test]
    async fn fault_delay_processes_first_and_answers_late() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::Send,
            Fault {
                delay: Duration::from_millis(600),
                ..Fault::default()
            },
        );
        let body = send_body(&client.sender_number().await, "14155550100");
        let impatient = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_millis(150))
            .build()
            .unwrap();
        let outcome = impatient
            .post(format!("{}/v1/chat/messages/send", sandbox.base_url()))
            .bearer_auth(sandbox.token())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        assert!(outcome.unwrap_err().is_timeout());
        // The message was committed even though the caller gave up waiting.
        let sent = sandbox.sent_messages();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].status, 200);
        assert_eq!(
            sent[0].response_body.as_ref().unwrap()["status"],
            "ACCEPTED"
        );

        sandbox.inject(
            Route::BusinessAccounts,
            Fault {
                delay: Duration::from_millis(300),
                ..Fault::default()
            },
        );
        let started = Instant::now();
        assert_eq!(client.get("/v1/chat/businessAccounts").await.status, 200);
        assert!(started.elapsed() >= Duration::from_millis(300));
        let started = Instant::now();
        assert_eq!(client.get("/v1/chat/businessAccounts").await.status, 200);
        assert!(started.elapsed() < Duration::from_millis(300));
    }

    #[tokio::test]
    async fn cut_connection_sends_the_message_but_answers_nothing() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::Send,
            Fault {
                cut_connection: true,
                ..Fault::default()
            },
        );
        let body = send_body(&client.sender_number().await, "447700900123");
        let outcome = client
            .http
            .post(format!("{}/v1/chat/messages/send", sandbox.base_url()))
            .bearer_auth(sandbox.token())
            .header("content-type", "application/json")
            .header("idempotency-key", "retry-me")
            .body(body.to_string())
            .send()
            .await;
        let error = outcome.unwrap_err();
        assert!(!error.is_timeout() && error.status().is_none(), "{error:?}");

        let sent = sandbox.sent_messages();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].status, 200);
        let first = sent[0].response_body.clone().unwrap();
        assert_eq!(first["status"], "ACCEPTED");

        // The retry a careful client makes is answered from the idempotency cache.
        let retry = client.send_with_key(&body, Some("retry-me")).await;
        assert_eq!(retry.status, 200);
        assert_eq!(retry.json, first);
        assert_eq!(retry.header("idempotent-replayed").as_deref(), Some("true"));
        let sent = sandbox.sent_messages();
        assert_eq!(sent.len(), 2);
        assert!(sent[1].idempotent_replay);
    }

    #[tokio::test]
    async fn cut_with_status_drops_the_connection_without_processing() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let body = send_body(&client.sender_number().await, "447700900123");
        sandbox.inject(
            Route::Any,
            Fault {
                status: Some(500),
                cut_connection: true,
                ..Fault::default()
            },
        );
        let outcome = client
            .http
            .post(format!("{}/v1/chat/messages/send", sandbox.base_url()))
            .bearer_auth(sandbox.token())
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        assert!(outcome.is_err());
        let reply = client.send(&body).await;
        assert!(reply.json["smsId"]
            .as_str()
            .unwrap()
            .ends_with("000000000001"));
        let statuses: Vec<u16> = sandbox.sent_messages().iter().map(|r| r.status).collect();
        assert_eq!(statuses, vec![500, 200]);
    }

    #[tokio::test]
    async fn invalid_injected_status_is_reported_not_sent() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::BusinessAccounts,
            Fault {
                status: Some(42),
                headers: vec![("bad header".into(), "x".into())],
                ..Fault::default()
            },
        );
        let reply = client.get("/v1/chat/businessAccounts").await;
        assert_eq!(reply.status, 500);
        assert!(reply.json["msg"]
            .as_str()
            .unwrap()
            .contains("invalid status 42"));
    }
}
