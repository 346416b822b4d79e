//! A campaign end to end, through its handle, against the embedded sandbox: outcomes in input
//! order, abandonment, re-runs from the journal, derived keys.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod journal;
mod pacing;
mod stopping;

use std::collections::VecDeque;
use std::time::Duration;

use crate::api::SendMessage;
use crate::campaign::{Campaign, Event, Input, Options, Outcome, Prepared, Status, Summary};
use crate::client::{CallOptions, Client};
use crate::client::{ClientConfig, TokenSource};
use crate::sandbox::{Sandbox, SandboxConfig};

fn message(to: &str, from: &str) -> SendMessage {
    SendMessage {
        to: to.into(),
        from: from.into(),
        template_name: "order_update".into(),
        parameters: serde_json::json!(["A-1"]),
        language: "en".into(),
    }
}

/// Runs a campaign over `messages` to the end; its outcomes by index.
async fn run(client: &Client, options: Options, messages: &[SendMessage]) -> Vec<Outcome<()>> {
    let mut campaign =
        Campaign::start(client.clone(), options, &tokio::runtime::Handle::current()).unwrap();
    let pending: VecDeque<Input<()>> = messages
        .iter()
        .enumerate()
        .map(|(index, message)| Input {
            index: index as u64,
            payload: (),
            message: Prepared::new(message, None),
        })
        .collect();
    let (outcomes, summary) = drive(&mut campaign, pending).await;
    let error = summary.and_then(|summary| summary.error);
    assert!(error.is_none(), "{error:?}");
    outcomes
}

/// Feeds `pending` as the engine asks for it and collects the outcomes (by index) and the
/// summary, until `Done`.
async fn drive(
    campaign: &mut Campaign<()>,
    mut pending: VecDeque<Input<()>>,
) -> (Vec<Outcome<()>>, Option<Summary>) {
    let mut outcomes = Vec::new();
    let mut summary = None;
    while let Some(event) = campaign.next_event().await {
        match event {
            Event::NeedInput(wanted) => {
                let chunk: Vec<Input<()>> = pending.drain(..wanted.min(pending.len())).collect();
                if chunk.is_empty() {
                    campaign.end_input();
                } else {
                    campaign.feed(chunk);
                }
            }
            Event::Outcomes(batch) => outcomes.extend(batch),
            Event::Warning(_) => {}
            Event::Done(done) => {
                summary = Some(done);
                break;
            }
        }
    }
    outcomes.sort_by_key(|outcome| outcome.index);
    (outcomes, summary)
}

async fn setup() -> (Sandbox, Client, String) {
    let sandbox = Sandbox::start(SandboxConfig::default()).await.unwrap();
    let client = Client::new(ClientConfig::new(
        sandbox.base_url(),
        TokenSource::Static(sandbox.token()),
    ))
    .unwrap();
    let page = client
        .list_business_phone_numbers(
            crate::api::PageRequest::new(1, 1).unwrap(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let sender = page.value.data[0].display_phone_number.clone().unwrap();
    (sandbox, client, sender)
}

fn statuses(outcomes: &[Outcome<()>]) -> Vec<&'static str> {
    outcomes.iter().map(|o| o.status.as_str()).collect()
}
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_has_one_outcome_in_input_order() {
    let (sandbox, client, sender) = setup().await;
    let mut messages: Vec<SendMessage> = (0..700)
        .map(|i| message(&format!("86138{i:08}"), &sender))
        .collect();
    messages.push(message("12", &sender));
    messages.push(message("8613800000003", &sender));
    let outcomes = run(&client, Options::default(), &messages).await;
    assert_eq!(outcomes.len(), 702);
    assert!(outcomes
        .iter()
        .enumerate()
        .all(|(i, o)| o.index == i as u64));
    assert_eq!(outcomes[700].status, Status::Failed);
    assert_eq!(outcomes[701].duplicate_of, Some(3));
    assert_eq!(sandbox.stats().accepted, 700);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_id_gives_every_run_the_same_keys() {
    let (sandbox, client, sender) = setup().await;
    let options = Options {
        campaign_id: Some("spring".into()),
        ..Options::default()
    };
    let messages = vec![message("8613800138000", &sender)];
    let first = run(&client, options.clone(), &messages).await;
    let second = run(&client, options, &messages).await;
    assert_eq!(first[0].idempotency_key, second[0].idempotency_key);
    assert_eq!(statuses(&second), ["sent"]);
    // The second run's send was answered from the key: nothing went out twice.
    assert_eq!((sandbox.stats().accepted, sandbox.stats().replayed), (1, 1));
}
