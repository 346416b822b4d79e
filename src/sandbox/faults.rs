//! Injected faults: what a test asks the next matching requests to suffer, and the FIFO queue
//! that hands them out.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

use crate::sync::lock;

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

/// What requests to a route suffer. See docs/sandbox.md for how the fields combine.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// How many requests it applies to; `None`: every one, for as long as it is queued.
    pub times: Option<usize>,
    /// Applies to every `every`-th matching request (1: each one).
    pub every: usize,
    /// Chance that a request it could apply to gets it (drawn from the sandbox's seeded
    /// generator, so a seed replays the same faults).
    pub probability: f64,
    /// Answer with this status without processing the request.
    pub status: Option<u16>,
    /// Added to the response the request receives (replacing a default of the same name).
    pub headers: Vec<(String, String)>,
    /// Body of the injected response; `{"code": "<status>", "msg": "injected fault"}` when unset.
    pub body: Option<String>,
    /// Replace the answer's body with a JSON object of exactly this many bytes (an oversized
    /// answer; the status stays the fault's or, if processed, the handler's).
    pub body_bytes: Option<usize>,
    /// Send the body without `Content-Length` (chunked), so its size is only seen while
    /// reading it.
    pub chunked: bool,
    /// Waited before responding; after processing when `status` is unset.
    pub delay: Duration,
    /// Drop the connection instead of writing the response (after processing when `status` is
    /// unset).
    pub cut_connection: bool,
}

impl Default for Fault {
    fn default() -> Self {
        Fault {
            times: Some(1),
            every: 1,
            probability: 1.0,
            status: None,
            headers: Vec::new(),
            body: None,
            body_bytes: None,
            chunked: false,
            delay: Duration::ZERO,
            cut_connection: false,
        }
    }
}

impl Fault {
    /// Refuses a fault that could never behave as written.
    pub fn check(&self) -> Result<(), String> {
        if self.every == 0 {
            return Err("every must be 1 or more".to_owned());
        }
        if !(0.0..=1.0).contains(&self.probability) {
            return Err(format!(
                "probability must be from 0 to 1, got {}",
                self.probability
            ));
        }
        if let Some(status) = self.status {
            if !(200..=599).contains(&status) {
                return Err(format!(
                    "status {status} is not a final HTTP status (200 to 599)"
                ));
            }
        }
        Ok(())
    }
}

struct Queued {
    route: Route,
    fault: Fault,
    /// Matching requests seen, for `every`.
    seen: usize,
}

/// Faults waiting for requests, oldest first.
pub(crate) struct FaultQueue {
    queue: Mutex<(VecDeque<Queued>, fastrand::Rng)>,
}

impl FaultQueue {
    pub(crate) fn new(seed: u64) -> Self {
        FaultQueue {
            queue: Mutex::new((VecDeque::new(), fastrand::Rng::with_seed(seed))),
        }
    }

    /// A fault with `times == Some(0)` applies to no request, so it is not queued at all.
    pub(crate) fn push(&self, route: Route, fault: Fault) {
        if fault.times != Some(0) {
            lock(&self.queue).0.push_back(Queued {
                route,
                fault,
                seen: 0,
            });
        }
    }

    /// The oldest fault matching `endpoint` that fires for this request (its `every` and
    /// `probability` allow it), used up by one request.
    pub(crate) fn take(&self, endpoint: Route) -> Option<Fault> {
        let mut guard = lock(&self.queue);
        let (queue, rng) = &mut *guard;
        let mut fired = None;
        for (position, queued) in queue.iter_mut().enumerate() {
            if !queued.route.matches(endpoint) {
                continue;
            }
            queued.seen += 1;
            let turn = queued.seen % queued.fault.every == 0;
            // Drawn only on its turn, so `every` alone never consumes random numbers.
            if turn && (queued.fault.probability >= 1.0 || rng.f64() < queued.fault.probability) {
                fired = Some(position);
                break;
            }
        }
        let position = fired?;
        let queued = queue.get_mut(position)?;
        if let Some(times) = queued.fault.times.as_mut() {
            *times = times.saturating_sub(1);
        }
        let fault = queued.fault.clone();
        if fault.times == Some(0) {
            queue.remove(position);
        }
        Some(fault)
    }

    pub(crate) fn clear(&self) {
        lock(&self.queue).0.clear();
    }

    /// Restarts the draws of `probability` faults from `seed`.
    pub(crate) fn reseed(&self, seed: u64) {
        lock(&self.queue).1 = fastrand::Rng::with_seed(seed);
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
        let queue = FaultQueue::new(0);
        let fault = |status, times| Fault {
            status: Some(status),
            times: Some(times),
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

    #[test]
    fn every_probability_and_unlimited_times() {
        let queue = FaultQueue::new(7);
        queue.push(
            Route::Send,
            Fault {
                status: Some(503),
                times: None,
                every: 3,
                ..Fault::default()
            },
        );
        let fired: Vec<bool> = (0..9).map(|_| queue.take(Route::Send).is_some()).collect();
        assert_eq!(
            fired,
            [false, false, true, false, false, true, false, false, true]
        );
        queue.clear();
        queue.push(
            Route::Send,
            Fault {
                status: Some(500),
                times: None,
                probability: 0.25,
                ..Fault::default()
            },
        );
        let hits = (0..4000)
            .filter(|_| queue.take(Route::Send).is_some())
            .count();
        assert!((800..1200).contains(&hits), "{hits}");
        // The same seed replays the same draws.
        let replay = |seed| {
            let queue = FaultQueue::new(seed);
            queue.push(
                Route::Any,
                Fault {
                    status: Some(500),
                    times: None,
                    probability: 0.5,
                    ..Fault::default()
                },
            );
            (0..64)
                .map(|_| queue.take(Route::Send).is_some())
                .collect::<Vec<_>>()
        };
        assert_eq!(replay(11), replay(11));
        assert_ne!(replay(11), replay(12));
        assert!(Fault {
            every: 0,
            ..Fault::default()
        }
        .check()
        .is_err());
        assert!(Fault {
            probability: 1.5,
            ..Fault::default()
        }
        .check()
        .is_err());
    }

    #[tokio::test]
    async fn status_fault_answers_without_processing() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        sandbox.inject(
            Route::Send,
            Fault {
                times: Some(2),
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
