//! The three endpoints and the order every request goes through: record, route (404/405),
//! authenticate (401), take a queued fault, global delay, then the fault's answer or the handler.

use std::sync::Arc;

use axum::body::{to_bytes, Bytes};
use axum::extract::{Request, State};
use axum::http::header::ALLOW;
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use uuid::Uuid;

use super::answer::Answer;
use super::arrival::Arrived;
use super::connection::CutSignal;
use super::endpoints::{ACCOUNTS_PATH, NUMBERS_PATH, SEND_PATH};
use super::faults::{Fault, Route};
use super::log::{Outcome, RecordedRequest};
use super::paging::PageRequest;
use super::send;
use super::state::Shared;

/// Far above any real send body; larger bodies get a 413.
const MAX_BODY_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy)]
enum Target {
    Endpoint(Route),
    WrongMethod,
    NoRoute,
}

/// What the connection does once a request has been handled.
enum Reply {
    Respond(Response),
    Cut,
}

/// Not the service's: what the sandbox saw (`GET`, no token: it only reports counts).
pub(crate) const TRAFFIC_PATH: &str = "/_sandbox/traffic";

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(TRAFFIC_PATH, get(traffic))
        .route(SEND_PATH, post(send_message).fallback(wrong_method))
        .route(ACCOUNTS_PATH, get(business_accounts).fallback(wrong_method))
        .route(
            NUMBERS_PATH,
            get(business_phone_numbers).fallback(wrong_method),
        )
        .fallback(no_route)
        .with_state(shared)
}

/// The counts and the per-sender traffic, as JSON: for a test that runs the sandbox in another
/// process (`bizmsg sandbox`). Not recorded as a request.
async fn traffic(State(shared): State<Arc<Shared>>) -> Response {
    let stats = shared.stats.snapshot();
    let report = shared.traffic.report();
    let senders: Vec<serde_json::Value> = report
        .senders
        .iter()
        .map(|sender| {
            json!({
                "sender": sender.sender,
                "accepted": sender.accepted,
                "busiest_second": sender.busiest_second,
                "throttled": sender.throttled,
            })
        })
        .collect();
    let body = json!({
        "requests": stats.requests,
        "sends": stats.sends,
        "accepted": stats.accepted,
        "failed_commits": stats.failed_commits,
        "replayed": stats.replayed,
        "throttled": stats.throttled,
        "senders": senders,
        "repeated_recipients": report.repeated_recipients,
        "most_to_one_recipient": report.most_to_one_recipient,
    });
    Answer::json(StatusCode::OK, &body).into_response(&Uuid::new_v4().to_string())
}

async fn send_message(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    exchange(shared, Target::Endpoint(Route::Send), request).await
}

async fn business_accounts(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    exchange(shared, Target::Endpoint(Route::BusinessAccounts), request).await
}

async fn business_phone_numbers(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    exchange(
        shared,
        Target::Endpoint(Route::BusinessPhoneNumbers),
        request,
    )
    .await
}

async fn wrong_method(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    exchange(shared, Target::WrongMethod, request).await
}

async fn no_route(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    exchange(shared, Target::NoRoute, request).await
}

fn new_request_id() -> String {
    format!("req_{}", Uuid::new_v4().simple())
}

async fn exchange(shared: Arc<Shared>, target: Target, request: Request) -> Response {
    // When its bytes reached the machine (`arrival.rs`), else now: before its body, its checks
    // and the sandbox's own work. A send is counted by arrival (`traffic.rs`).
    let arrived = request
        .extensions()
        .get::<Arrived>()
        .map_or_else(std::time::Instant::now, |arrived| arrived.0);
    let cut = request.extensions().get::<CutSignal>().cloned();
    // Spawned so that a request, once received, is processed to the end even if the client
    // hangs up during a delay: hyper drops the handler of a closed connection, and "the client
    // timed out but the message went out" is exactly what clients must be tested against.
    match tokio::spawn(process(shared, target, request, arrived)).await {
        Ok(Reply::Respond(response)) => response,
        Ok(Reply::Cut) => match cut {
            Some(cut) => {
                cut.cut();
                // Never answer: the connection task drops the connection, and this future with it.
                std::future::pending().await
            }
            None => Answer::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "sandbox cannot cut a connection it does not serve",
            )
            .into_response(&new_request_id()),
        },
        Err(error) => Answer::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("sandbox request handler failed: {error}"),
        )
        .into_response(&new_request_id()),
    }
}

async fn process(
    shared: Arc<Shared>,
    target: Target,
    request: Request,
    arrived: std::time::Instant,
) -> Reply {
    let request_id = new_request_id();
    let (parts, body) = request.into_parts();
    let (body, unreadable) = match to_bytes(body, MAX_BODY_BYTES).await {
        Ok(body) => (body, None),
        Err(_) => (Bytes::new(), Some(unreadable_body())),
    };
    shared.stats.count(&shared.stats.requests);
    if matches!(target, Target::Endpoint(Route::Send)) {
        shared.stats.count(&shared.stats.sends);
    }
    let sequence = shared.log.records().then(|| {
        shared
            .log
            .begin(RecordedRequest::received(&parts, &body, request_id.clone()))
    });

    // Auth comes before faults, so an unauthenticated request never uses up a fault.
    let admitted = match (unreadable, target) {
        (Some(answer), _) => Err(answer),
        (None, Target::NoRoute) => Err(no_route_answer(&parts)),
        (None, Target::WrongMethod) => Err(wrong_method_answer(&parts)),
        (None, Target::Endpoint(route)) => shared
            .tokens
            .authenticate(&parts.headers)
            .map(|tenant| (route, tenant))
            .map_err(|refusal| refusal.answer()),
    };
    let tenant = admitted
        .as_ref()
        .ok()
        .and_then(|(_, tenant)| shared.tokens.tenant_name(*tenant))
        .map(str::to_owned);
    let fault = match &admitted {
        Ok((route, _)) => shared.faults.take(*route),
        Err(_) => None,
    };

    let delay = shared.delay();
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }

    let mut answer = match admitted {
        Err(answer) => answer,
        Ok((route, tenant)) => match fault.as_ref().and_then(|fault| fault.status) {
            Some(status) => injected(status, fault.as_ref().and_then(|f| f.body.as_deref())),
            None => handle(&shared, route, tenant, &parts, &body, arrived),
        },
    };
    if let Some(fault) = &fault {
        add_fault_headers(&mut answer, fault);
        if let Some(size) = fault.body_bytes {
            answer.body = padded_body(size);
        }
        answer.chunked = fault.chunked;
    }
    if let Some(sequence) = sequence {
        shared.log.finish(
            sequence,
            Outcome {
                tenant,
                status: answer.status.as_u16(),
                response_body: &answer.body,
                idempotent_replay: answer.idempotent_replay,
            },
        );
    }
    ::log::debug!(
        "sandbox: {} {} -> {} ({request_id})",
        parts.method,
        parts.uri.path(),
        answer.status.as_u16()
    );

    if let Some(fault) = &fault {
        if !fault.delay.is_zero() {
            tokio::time::sleep(fault.delay).await;
        }
        if fault.cut_connection {
            return Reply::Cut;
        }
    }
    Reply::Respond(answer.into_response(&request_id))
}

fn handle(
    shared: &Shared,
    route: Route,
    tenant: usize,
    parts: &Parts,
    body: &[u8],
    arrived: std::time::Instant,
) -> Answer {
    let Some(data) = shared.store.tenant(tenant) else {
        return Answer::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "sandbox has no data for the authenticated tenant",
        );
    };
    let page = || PageRequest::from_uri(&parts.uri);
    let page_answer = |answer: Result<Answer, String>| {
        answer.unwrap_or_else(|msg| Answer::error(StatusCode::BAD_REQUEST, msg))
    };
    match route {
        Route::Send => send::send(shared, tenant, &parts.headers, body, arrived),
        Route::BusinessAccounts => {
            page_answer(page().map(|page| Answer::json(StatusCode::OK, &data.accounts_page(page))))
        }
        Route::BusinessPhoneNumbers => {
            page_answer(page().map(|page| Answer::json(StatusCode::OK, &data.numbers_page(page))))
        }
        // Requests only ever reach one concrete endpoint; `Any` exists for fault matching.
        Route::Any => Answer::error(StatusCode::INTERNAL_SERVER_ERROR, "no endpoint for route *"),
    }
}

fn unreadable_body() -> Answer {
    Answer::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body could not be read or exceeds {MAX_BODY_BYTES} bytes"),
    )
}

fn no_route_answer(parts: &Parts) -> Answer {
    Answer::error(
        StatusCode::NOT_FOUND,
        format!("no route for {} {}", parts.method, parts.uri.path()),
    )
}

fn wrong_method_answer(parts: &Parts) -> Answer {
    let path = parts.uri.path();
    let allowed = if path == SEND_PATH {
        "POST"
    } else {
        "GET,HEAD"
    };
    Answer::error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "method {} is not allowed for {path}; use {}",
            parts.method,
            allowed.split(',').next().unwrap_or(allowed)
        ),
    )
    .with_header(ALLOW, HeaderValue::from_static(allowed))
}

/// The answer of a fault with a status. Only statuses a client can be handed as a final answer
/// are honoured; anything else is reported as the sandbox's own 500.
fn injected(status: u16, body: Option<&str>) -> Answer {
    let Some(code) = StatusCode::from_u16(status)
        .ok()
        .filter(|code| (200..=599).contains(&code.as_u16()))
    else {
        return Answer::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("injected fault has invalid status {status}; use 200 to 599"),
        );
    };
    match body {
        Some(body) => Answer::raw(code, body.as_bytes().to_vec()),
        None => Answer::json(
            code,
            &json!({"code": code.as_str(), "msg": "injected fault"}),
        ),
    }
}

/// A JSON object of exactly `size` bytes, `{"data":[],"pad":"xxx..."}` (an empty page, padded;
/// shorter sizes get a prefix of it), for answers larger than a client accepts.
fn padded_body(size: usize) -> Vec<u8> {
    const FRAME: &[u8] = b"{\"data\":[],\"pad\":\"\"}";
    if size < FRAME.len() {
        return FRAME.get(..size).unwrap_or_default().to_vec();
    }
    let mut body = Vec::with_capacity(size);
    body.extend_from_slice(b"{\"data\":[],\"pad\":\"");
    body.resize(size - 2, b'x');
    body.extend_from_slice(b"\"}");
    body
}

fn add_fault_headers(answer: &mut Answer, fault: &Fault) {
    for (name, value) in &fault.headers {
        match (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            (Ok(name), Ok(value)) => answer.headers.push((name, value)),
            _ => ::log::warn!("sandbox: skipping invalid injected header {name:?}: {value:?}"),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{send_body, start, TestClient};
    use crate::sandbox::SandboxConfig;
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn unknown_paths_are_404_and_wrong_methods_405_as_json() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let reply = client.get_as(None, "/x").await;
        assert_eq!(reply.status, 404);
        assert_eq!(
            reply.json,
            json!({"code": "404", "msg": "no route for GET /x"})
        );
        assert_eq!(
            reply.header("content-type").as_deref(),
            Some("application/json")
        );
        assert!(reply.header("x-request-id").unwrap().starts_with("req_"));
        let reply = client.get("/v1/chat/businessAccounts/").await;
        assert_eq!(reply.status, 404);

        let url = format!("{}{ACCOUNTS_PATH}", sandbox.base_url());
        let response = client.http.delete(&url).send().await.unwrap();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "GET,HEAD");
        assert_eq!(response.headers()["content-type"], "application/json");
        let json: serde_json::Value =
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(
            json,
            json!({"code": "405", "msg": "method DELETE is not allowed for /v1/chat/businessAccounts; use GET"})
        );
        let response = client
            .http
            .get(format!("{}{SEND_PATH}", sandbox.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "POST");
        let statuses: Vec<u16> = sandbox.requests().iter().map(|r| r.status).collect();
        assert_eq!(statuses, vec![404, 404, 405, 405]);
    }

    #[tokio::test]
    async fn every_response_has_a_unique_request_id() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let from = client.sender_number().await;
        let replies = vec![
            client.get("/v1/chat/businessAccounts").await,
            client.get("/v1/chat/businessAccounts").await,
            client.get_as(None, "/v1/chat/businessPhoneNumber").await,
            client.send(&send_body(&from, "8613800000001")).await,
            client.get("/v1/chat/businessPhoneNumber?pageSize=0").await,
        ];
        let ids: HashSet<String> = replies
            .iter()
            .map(|reply| reply.header("x-request-id").unwrap())
            .collect();
        assert_eq!(ids.len(), replies.len());
        for reply in &replies {
            assert_eq!(
                reply.header("content-type").as_deref(),
                Some("application/json")
            );
            assert!(reply.json.is_object());
        }
    }

    #[tokio::test]
    async fn global_delay_applies_to_every_response() {
        let sandbox = start(SandboxConfig {
            delay: Duration::from_millis(250),
            ..SandboxConfig::default()
        })
        .await;
        let client = TestClient::new(&sandbox);
        for path in ["/v1/chat/businessAccounts", "/nowhere"] {
            let started = Instant::now();
            client.get(path).await;
            assert!(started.elapsed() >= Duration::from_millis(250), "{path}");
        }
        sandbox.set_delay(Duration::ZERO);
        let started = Instant::now();
        client.get("/v1/chat/businessAccounts").await;
        assert!(started.elapsed() < Duration::from_millis(250));
    }

    #[tokio::test]
    async fn oversized_bodies_are_413() {
        let sandbox = start(SandboxConfig::default()).await;
        let client = TestClient::new(&sandbox);
        let reply = client.send_raw(&"x".repeat(MAX_BODY_BYTES + 1)).await;
        assert_eq!(reply.status, 413);
        assert_eq!(reply.json["code"], "413");
    }
}
