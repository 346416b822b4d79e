//! Clients sharing limits through Redis, end to end: campaigns and single sends of several
//! clients (as several processes would have) against one sandbox that acts like the platform
//! (`enforce_limits`: sends over a number's throughput are refused, as are new recipients
//! past an account's tier).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::ops::Range;

use super::{multi_thread, Server};
use crate::api::SendMessage;
use crate::campaign::{Campaign, Event, Input, Options, Outcome, Prepared, Status};
use crate::client::{CallOptions, Client, ClientConfig, TokenSource};
use crate::sandbox::{Sandbox, SandboxConfig, SeedData};

/// One STANDARD number (80/s at the platform, paced at 60/s) on an account of a large tier,
/// and one on an account of 50 recipients a day.
const SEED: &str = r#"{"tenants": {"acme": [
  {"bizAccountId": "100", "chatBusinessManagerMessagingLimit": "TIER_10K",
   "businessPhoneNumbers": [{"phoneNumberId": "200", "displayPhoneNumber": "+1 415 555 0100"}]},
  {"bizAccountId": "101", "chatBusinessManagerMessagingLimit": "TIER_50",
   "businessPhoneNumbers": [{"phoneNumberId": "201", "displayPhoneNumber": "+1 415 555 0101"}]}
]}}"#;
const PACED: &str = "14155550100";
const TIER_50: &str = "14155550101";

/// Two tenants (two tokens), each with one STANDARD number.
const TWO_TENANTS: &str = r#"{"tenants": {
  "acme": [{"bizAccountId": "100", "businessPhoneNumbers":
            [{"phoneNumberId": "200", "displayPhoneNumber": "+1 415 555 0100"}]}],
  "beta": [{"bizAccountId": "300", "businessPhoneNumbers":
            [{"phoneNumberId": "400", "displayPhoneNumber": "+1 415 555 0300"}]}]
}}"#;

async fn sandbox() -> Sandbox {
    Sandbox::start(SandboxConfig {
        enforce_limits: true,
        data: Some(SeedData::from_json(SEED).unwrap()),
        ..SandboxConfig::default()
    })
    .await
    .unwrap()
}

fn client(sandbox: &Sandbox, shared_limits: Option<&str>) -> Client {
    let mut config = ClientConfig::new(sandbox.base_url(), TokenSource::Static(sandbox.token()));
    config.shared_limits = shared_limits.map(str::to_owned);
    Client::new(config).unwrap()
}

fn message(to: u64, from: &str) -> SendMessage {
    SendMessage {
        to: format!("86138{to:08}"),
        from: from.into(),
        template_name: "order_update".into(),
        parameters: serde_json::json!(["A-1"]),
        language: "en".into(),
    }
}

/// A campaign with `pace="auto"` from `from` to `recipients`; its outcomes.
async fn campaign(client: Client, from: &str, recipients: Range<u64>) -> Vec<Outcome<()>> {
    let options = Options {
        pace_auto: true,
        concurrency: 8,
        ..Options::default()
    };
    let mut campaign =
        Campaign::start(client, options, &tokio::runtime::Handle::current()).unwrap();
    let mut pending: Vec<Input<()>> = recipients
        .enumerate()
        .map(|(index, to)| Input {
            index: index as u64,
            payload: (),
            message: Prepared::new(&message(to, from), None),
        })
        .collect();
    pending.reverse();
    let mut outcomes = Vec::new();
    while let Some(event) = campaign.next_event().await {
        match event {
            Event::NeedInput(wanted) => {
                let at = pending.len().saturating_sub(wanted);
                let mut chunk = pending.split_off(at);
                chunk.reverse();
                if chunk.is_empty() {
                    campaign.end_input();
                } else {
                    campaign.feed(chunk);
                }
            }
            Event::Outcomes(batch) => outcomes.extend(batch),
            Event::Warning(_) => {}
            Event::Done(summary) => {
                assert!(summary.error.is_none(), "{:?}", summary.error);
                break;
            }
        }
    }
    outcomes.sort_by_key(|outcome| outcome.index);
    outcomes
}

/// Three clients' campaigns and a fourth's single sends, all from one number: together under
/// its throughput when they share limits, over it when each paces alone.
async fn three_campaigns_and_single_sends(sandbox: &Sandbox, shared: Option<&str>) {
    let runs = (0..3u64).map(|i| {
        let client = client(sandbox, shared);
        tokio::spawn(async move { campaign(client, PACED, i * 1000..i * 1000 + 80).await })
    });
    let single = client(sandbox, shared);
    let singles = tokio::spawn(async move {
        for to in 5000..5010 {
            single
                .send_message(&message(to, PACED), &CallOptions::default())
                .await
                .unwrap();
        }
    });
    for run in runs.collect::<Vec<_>>() {
        let outcomes = run.await.unwrap();
        assert_eq!(outcomes.len(), 80);
        assert!(
            outcomes.iter().all(|o| o.status == Status::Sent),
            "{:?}",
            outcomes
                .iter()
                .find(|o| o.status != Status::Sent)
                .map(|o| (o.status, &o.error, &o.reason))
        );
    }
    singles.await.unwrap();
}

#[test]
fn clients_sharing_limits_stay_under_a_numbers_throughput_together() {
    let Some(redis) = Server::start(&[]) else {
        return;
    };
    multi_thread().block_on(async {
        let shared = sandbox().await;
        three_campaigns_and_single_sends(&shared, Some(&redis.url())).await;
        let stats = shared.stats();
        assert_eq!(stats.accepted, 250);
        assert_eq!(stats.throttled, 0, "{stats:?}");

        // The same without shared limits: each paces alone, and the platform refuses some
        // (so the check above can fail).
        let alone = sandbox().await;
        three_campaigns_and_single_sends(&alone, None).await;
        assert!(alone.stats().throttled > 0, "{:?}", alone.stats());
    });
}

#[test]
fn an_accounts_tier_is_counted_across_clients() {
    let Some(redis) = Server::start(&[]) else {
        return;
    };
    multi_thread().block_on(async {
        let sandbox = sandbox().await;
        let url = redis.url();
        let first = campaign(client(&sandbox, Some(&url)), TIER_50, 0..40).await;
        assert!(first.iter().all(|o| o.status == Status::Sent));
        // 10 known, 30 new of which 10 fit the tier of 50: 20 fail before sending.
        let second = campaign(client(&sandbox, Some(&url)), TIER_50, 30..70).await;
        let failed: Vec<_> = second
            .iter()
            .filter(|o| o.status == Status::Failed)
            .collect();
        assert_eq!(failed.len(), 20);
        assert!(failed.iter().all(|o| o
            .error
            .as_ref()
            .is_some_and(|e| e.to_string().contains("messaging tier"))));
        assert_eq!(
            second.iter().filter(|o| o.status == Status::Sent).count(),
            20
        );
        let stats = sandbox.stats();
        assert_eq!((stats.accepted, stats.failed_commits), (60, 0), "{stats:?}");
    });
}

#[test]
fn single_sends_of_another_tokens_sender_are_paced_too() {
    let Some(redis) = Server::start(&[]) else {
        return;
    };
    multi_thread().block_on(async {
        let sandbox = Sandbox::start(SandboxConfig {
            enforce_limits: true,
            tenants: vec!["acme".into(), "beta".into()],
            data: Some(SeedData::from_json(TWO_TENANTS).unwrap()),
            ..SandboxConfig::default()
        })
        .await
        .unwrap();
        let url = redis.url();
        let tenant = |name: &str| {
            let token = sandbox
                .tenant_tokens()
                .into_iter()
                .find(|(tenant, _)| tenant == name)
                .unwrap()
                .1;
            let mut config = ClientConfig::new(sandbox.base_url(), TokenSource::Static(token));
            config.shared_limits = Some(url.clone());
            Client::new(config).unwrap()
        };
        // The first tenant's listing is cached in the store first; it does not name the
        // second tenant's number, which must still be paced (100 at once: over the
        // platform's burst if they were not).
        let acme = tenant("acme");
        acme.send_message(&message(1, PACED), &CallOptions::default())
            .await
            .unwrap();
        let beta = tenant("beta");
        let sends: Vec<_> = (0..100)
            .map(|to| {
                let beta = beta.clone();
                tokio::spawn(async move {
                    beta.send_message(&message(to, "14155550300"), &CallOptions::default())
                        .await
                })
            })
            .collect();
        for send in sends {
            send.await.unwrap().unwrap();
        }
        let stats = sandbox.stats();
        assert_eq!((stats.accepted, stats.throttled), (101, 0), "{stats:?}");
    });
}
