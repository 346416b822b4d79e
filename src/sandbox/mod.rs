//! An embedded, faithful implementation of the Business Chat Messaging Service for tests and
//! demos: seeded tenants, accounts and numbers, the three endpoints, a request log, and
//! injectable faults. Behaviour the spec leaves open is decided and documented in
//! docs/sandbox.md, which is the reference for what the service does there.

mod answer;
mod arrival;
mod auth;
mod config;
mod connection;
mod endpoints;
mod fault_file;
mod faults;
mod limits;
mod log;
mod paging;
mod routes;
mod seed;
mod seed_data;
mod send;
mod server;
mod state;
mod store;
mod traffic;

pub use config::SandboxConfig;
pub use fault_file::FaultPlan;
pub use faults::{Fault, Route};
pub use log::RecordedRequest;
pub use seed_data::SeedData;
pub use server::Sandbox;
pub use traffic::{SenderTraffic, TrafficReport};

/// What a sandbox answered since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SandboxStats {
    pub requests: u64,
    pub sends: u64,
    /// Sends committed: a message went out.
    pub accepted: u64,
    pub failed_commits: u64,
    /// Sends answered from the Idempotency-Key cache (no new message).
    pub replayed: u64,
    /// Sends refused over a number's throughput (`enforce_limits`).
    pub throttled: u64,
}

/// A sandbox and an HTTP client speaking to it over loopback, shared by the tests of every file.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(crate) mod testing {
    use super::{Sandbox, SandboxConfig};
    use serde_json::{json, Value};

    pub(crate) async fn start(config: SandboxConfig) -> Sandbox {
        Sandbox::start(config).await.expect("sandbox starts")
    }

    /// A valid send body from `from` to `to`.
    pub(crate) fn send_body(from: &str, to: &str) -> Value {
        json!({
            "to": to,
            "from": from,
            "type": "template",
            "template": {"name": "order_update", "parameters": "A-1042", "language": "en_US"}
        })
    }

    #[derive(Debug)]
    pub(crate) struct Reply {
        pub(crate) status: u16,
        pub(crate) headers: reqwest::header::HeaderMap,
        pub(crate) text: String,
        /// `Null` when the body is not JSON.
        pub(crate) json: Value,
    }

    impl Reply {
        pub(crate) fn header(&self, name: &str) -> Option<String> {
            self.headers
                .get(name)
                .map(|value| value.to_str().unwrap().to_owned())
        }
    }

    pub(crate) struct TestClient {
        pub(crate) http: reqwest::Client,
        base_url: String,
        token: String,
    }

    impl TestClient {
        pub(crate) fn new(sandbox: &Sandbox) -> TestClient {
            TestClient {
                http: reqwest::Client::builder().no_proxy().build().unwrap(),
                base_url: sandbox.base_url(),
                token: sandbox.token(),
            }
        }

        async fn reply(request: reqwest::RequestBuilder) -> Reply {
            let response = request.send().await.expect("sandbox answers");
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let text = response.text().await.unwrap();
            let json = serde_json::from_str(&text).unwrap_or(Value::Null);
            Reply {
                status,
                headers,
                text,
                json,
            }
        }

        /// GET as the first tenant.
        pub(crate) async fn get(&self, path: &str) -> Reply {
            self.get_as(Some(&self.token.clone()), path).await
        }

        /// GET with `Authorization: Bearer <token>`, or without the header.
        pub(crate) async fn get_as(&self, token: Option<&str>, path: &str) -> Reply {
            let authorization = token.map(|token| format!("Bearer {token}"));
            self.get_with_authorization(authorization.as_deref(), path)
                .await
        }

        pub(crate) async fn get_with_authorization(
            &self,
            authorization: Option<&str>,
            path: &str,
        ) -> Reply {
            let mut request = self.http.get(format!("{}{path}", self.base_url));
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            Self::reply(request).await
        }

        /// The digits of the first tenant's first number, which is always CONNECTED.
        pub(crate) async fn sender_number(&self) -> String {
            let reply = self.get("/v1/chat/businessPhoneNumber?pageSize=1").await;
            let number = &reply.json["data"][0];
            assert_eq!(number["status"], "CONNECTED");
            number["displayPhoneNumber"]
                .as_str()
                .unwrap()
                .chars()
                .filter(char::is_ascii_digit)
                .collect()
        }

        pub(crate) async fn send(&self, body: &Value) -> Reply {
            self.send_with_key(body, None).await
        }

        pub(crate) async fn send_with_key(&self, body: &Value, key: Option<&str>) -> Reply {
            self.send_raw_with_key(&body.to_string(), key).await
        }

        pub(crate) async fn send_raw(&self, body: &str) -> Reply {
            self.send_raw_with_key(body, None).await
        }

        pub(crate) async fn send_raw_with_key(&self, body: &str, key: Option<&str>) -> Reply {
            let authorization = format!("Bearer {}", self.token);
            self.send_full(Some(&authorization), body, key).await
        }

        pub(crate) async fn send_with_authorization(
            &self,
            authorization: Option<&str>,
            body: &Value,
        ) -> Reply {
            self.send_full(authorization, &body.to_string(), None).await
        }

        pub(crate) async fn send_full(
            &self,
            authorization: Option<&str>,
            body: &str,
            key: Option<&str>,
        ) -> Reply {
            let mut request = self
                .http
                .post(format!("{}/v1/chat/messages/send", self.base_url))
                .header("content-type", "application/json")
                .body(body.to_owned());
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            if let Some(key) = key {
                request = request.header("idempotency-key", key);
            }
            Self::reply(request).await
        }
    }
}
