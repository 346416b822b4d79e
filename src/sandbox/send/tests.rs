//! The send endpoint over real HTTP: what a client sees of each check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

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
