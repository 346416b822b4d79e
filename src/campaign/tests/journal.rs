//! A campaign with its journal: re-runs send nothing twice (whatever fingerprints the journal
//! was made with), and a send is checked against its claim's fence just before it is written.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_with_the_journal_sends_nothing_twice() {
    // Regression: a duplicate the first run skipped was sent by the second run, because
    // its journal row ("skipped") skipped the duplicate check.
    let (sandbox, client, sender) = setup().await;
    let dir = std::env::temp_dir().join(format!("bizmsg-engine-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        journal: Some(crate::campaign::JournalTarget::File(dir.join("c.db"))),
        ..Options::default()
    };
    let same = message("8613800138000", &sender);
    let messages = vec![same.clone(), same, message("8613800138001", &sender)];
    let first = run(&client, options.clone(), &messages).await;
    assert_eq!(statuses(&first), ["sent", "skipped", "sent"]);
    let second = run(&client, options, &messages).await;
    assert_eq!(statuses(&second), ["skipped", "skipped", "skipped"]);
    assert_eq!(second[1].duplicate_of, Some(0));
    assert_eq!(sandbox.stats().accepted, 2, "each message committed once");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A journal made before fingerprints were SHA-256 (format 3: xxh3 identities, no record of
/// their kind): this bizmsg resumes its campaign knowing the messages as that journal does, so
/// what was sent is not sent again, and a new message gets the key an xxh3 identity derives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_of_xxh3_fingerprints_resumes_its_campaign_without_sending_twice() {
    use crate::campaign::message::{Fingerprint, FingerprintKind};
    use crate::campaign::{Identity, KeySource};
    let (sandbox, client, sender) = setup().await;
    let dir = std::env::temp_dir().join(format!("bizmsg-engine-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.db");
    let options = Options {
        journal: Some(crate::campaign::JournalTarget::File(path.clone())),
        campaign_id: Some("legacy".into()),
        ..Options::default()
    };
    let messages = vec![
        message("8613800138000", &sender),
        message("8613800138001", &sender),
    ];
    let first = run(&client, options.clone(), &messages[..1]).await;
    assert_eq!(statuses(&first), ["sent"]);
    // What format 3 wrote: the same row under its xxh3 fingerprint, no kind recorded.
    let request = |m: &SendMessage| Prepared::new(m, None).unwrap().request;
    let legacy = |m: &SendMessage| Fingerprint::of_kind(&request(m), FingerprintKind::Xxh3);
    {
        let db = rusqlite::Connection::open(&path).unwrap();
        let changed = db
            .execute(
                "UPDATE bizmsg_messages SET fingerprint = ?1 WHERE fingerprint = ?2",
                [
                    legacy(&messages[0]).to_hex(),
                    Fingerprint::of(&request(&messages[0])).to_hex(),
                ],
            )
            .unwrap();
        assert_eq!(changed, 1);
        db.execute_batch(
            "DELETE FROM bizmsg_campaign WHERE name = 'fingerprint';
             UPDATE bizmsg_campaign SET value = '3' WHERE name = 'schema';",
        )
        .unwrap();
    }
    let second = run(&client, options, &messages).await;
    assert_eq!(statuses(&second), ["skipped", "sent"]);
    assert_eq!(sandbox.stats().accepted, 2, "each message committed once");
    let derived = KeySource::for_campaign("legacy").key(Identity {
        fingerprint: legacy(&messages[1]),
        occurrence: 0,
    });
    assert_eq!(second[1].idempotency_key.as_deref(), Some(derived.as_str()));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The window no client-side fence closes: how long after its last check a send's request
/// reaches the wire. A proxy in front of the sandbox notes when each request's first bytes
/// arrive; sends go one at a time, so the n-th check and the n-th arrival pair up. Printed
/// (median and worst), and asserted only in shape: every check comes before its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_checked_against_its_fence_just_before_it_is_written() {
    use std::io::{Read, Write};
    use std::sync::{Arc, Mutex};
    let sandbox = Sandbox::start(SandboxConfig::default()).await.unwrap();
    let upstream = sandbox.base_url().trim_start_matches("http://").to_owned();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let arrivals: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    let noted = Arc::clone(&arrivals);
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let mut server = std::net::TcpStream::connect(&upstream).unwrap();
            let (mut client_back, mut server_back) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut server_back, &mut client_back));
            let noted = Arc::clone(&noted);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 65536];
                while let Ok(read) = client.read(&mut buffer) {
                    if read == 0 || server.write_all(&buffer[..read]).is_err() {
                        return;
                    }
                    // A request's head and body arrive together (one write): one read each.
                    if buffer[..read].starts_with(b"POST ") {
                        noted.lock().unwrap().push(std::time::Instant::now());
                    }
                }
            });
        }
    });
    let client = Client::new(ClientConfig::new(
        format!("http://127.0.0.1:{port}"),
        TokenSource::Static(sandbox.token()),
    ))
    .unwrap();
    let sender = client
        .list_business_phone_numbers(
            crate::api::PageRequest::new(1, 1).unwrap(),
            &CallOptions::default(),
        )
        .await
        .unwrap()
        .value
        .data[0]
        .display_phone_number
        .clone()
        .unwrap();
    let fence = Arc::new(RecordingFence::default());
    let sends = 400;
    for i in 0..sends {
        let request = message(&format!("86139{i:08}"), &sender)
            .validate()
            .unwrap();
        let body = crate::api::encode(&request).unwrap();
        let progress = Arc::new(crate::client::SendProgress::fenced(Some(
            Arc::clone(&fence) as Arc<dyn crate::client::SendFence>,
        )));
        client
            .send_encoded(
                &Arc::new(request),
                body,
                format!("fence-{i}"),
                &CallOptions::default(),
                Some(&progress),
            )
            .await
            .unwrap();
    }
    let checks = fence.0.lock().unwrap().clone();
    let arrived = arrivals.lock().unwrap().clone();
    // Two checks per send (before the attempt, and as its body is taken): the second is the one
    // that counts.
    assert_eq!(checks.len(), 2 * sends);
    assert_eq!(arrived.len(), sends);
    let mut gaps: Vec<std::time::Duration> = checks
        .chunks(2)
        .zip(&arrived)
        .map(|(pair, arrival)| arrival.duration_since(pair[1]))
        .collect();
    assert!(checks
        .chunks(2)
        .zip(&arrived)
        .all(|(pair, arrival)| pair[1] <= *arrival));
    gaps.sort();
    eprintln!(
        "fence check to the request's bytes at the peer over loopback: median {:?}, 99th {:?}, \
         worst {:?} ({sends} sends)",
        gaps[gaps.len() / 2],
        gaps[gaps.len() * 99 / 100],
        gaps[gaps.len() - 1]
    );
}

/// A fence that records when it was asked, and always allows.
#[derive(Debug, Default)]
struct RecordingFence(std::sync::Mutex<Vec<std::time::Instant>>);

impl crate::client::SendFence for RecordingFence {
    fn may_send(&self) -> std::result::Result<(), String> {
        self.0.lock().unwrap().push(std::time::Instant::now());
        Ok(())
    }
}
