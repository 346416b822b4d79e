//! The store's operations between several instances (as separate processes would hold them)
//! of one server.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    busiest_second, free_port, multi_thread, raw, redis_binary, run_callers, store, Server,
    NAMESPACE,
};
use crate::error::Error;
use crate::limits::redis::RedisLimits;
use crate::limits::{LimitsStore, Scope, Slot, TierVerdict};

#[test]
fn instances_pace_one_sender_together() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stores: Vec<_> = (0..4).map(|_| store(&server.url())).collect();
    let runtime = multi_thread();
    let before = server.calls("evalsha");
    // 4 "processes" × 4 callers × 12 messages = 192 at 60/s: a little over 3 s.
    let times = runtime.block_on(run_callers(&stores, 4, 12, Some(("15550001", 60.0)), None));
    let round_trips = server.calls("evalsha") - before;
    let busiest = busiest_second(&times);
    let span = *times.iter().max().unwrap() - *times.iter().min().unwrap();
    eprintln!(
        "4 instances: 192 messages at 60/s, first to last {span:?} (exact pacing: 3.18 s), \
         busiest second {busiest}, {round_trips} reservations: {:.3} round trips per message",
        round_trips as f64 / 192.0
    );
    assert_eq!(times.len(), 192);
    assert!(busiest <= 61, "busiest second {busiest}");
    assert!(span >= Duration::from_millis(3000), "{span:?}");

    // One process alone on a sender: reservations cover most of a horizon each.
    let before = server.calls("evalsha");
    let times = runtime.block_on(run_callers(
        &stores[..1],
        4,
        60,
        Some(("15550021", 120.0)),
        None,
    ));
    let round_trips = server.calls("evalsha") - before;
    let busiest = busiest_second(&times);
    eprintln!(
        "one instance: 240 messages at 120/s, busiest second {busiest}, {:.3} round trips per \
         message",
        round_trips as f64 / 240.0
    );
    assert!(busiest <= 121, "busiest second {busiest}");
}

#[test]
fn a_sync_and_an_async_caller_share_one_store() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    // A sync call's runtime: current-thread, on its own thread.
    let sync_store = Arc::clone(&store);
    let sync_caller = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let slot = Slot {
            sender: Some(("15550002", 50.0)),
            campaign: None,
        };
        (0..50)
            .map(|_| {
                runtime.block_on(sync_store.admit(slot, None)).unwrap();
                Instant::now()
            })
            .collect::<Vec<_>>()
    });
    let runtime = multi_thread();
    let started = Instant::now();
    let mut times = runtime.block_on(run_callers(
        std::slice::from_ref(&store),
        2,
        25,
        Some(("15550002", 50.0)),
        None,
    ));
    times.extend(sync_caller.join().unwrap());
    assert_eq!(times.len(), 100);
    let busiest = busiest_second(&times);
    assert!(busiest <= 51, "busiest second {busiest}");
    assert!(started.elapsed() >= Duration::from_millis(1900));
}

#[test]
fn the_hosts_clock_can_stand_in_for_redis_time() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let url = format!("{}?clock=local", server.url());
    let stores: Vec<_> = (0..2).map(|_| store(&url)).collect();
    let runtime = multi_thread();
    runtime.block_on(async {
        let times = run_callers(&stores, 2, 15, Some(("15550015", 50.0)), None).await;
        assert!(busiest_second(&times) <= 51);
        // The second still holds slots reserved during the run: the pause, announced to
        // every instance, drops them (within milliseconds).
        let started = Instant::now();
        stores[0]
            .pause(Scope::Sender("15550015"), Duration::from_millis(400))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let slot = Slot {
            sender: Some(("15550015", 50.0)),
            campaign: None,
        };
        stores[1].admit(slot, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(300));
        let wait = stores[0]
            .space_pair("15550015", "4911", Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(wait, Duration::from_secs(4));
        assert!(stores[1].pair_wait("15550015", "4911").await.unwrap() > Duration::from_secs(3));
        let count = stores[1]
            .count_recipients("acct", 1, &[7, 8])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [TierVerdict::New, TierVerdict::Over]);
    });
}

#[test]
fn a_campaign_rate_holds_across_instances() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stores: Vec<_> = (0..3).map(|_| store(&server.url())).collect();
    let runtime = multi_thread();
    let started = Instant::now();
    // Two senders paced far above the campaign's rate: the campaign's rate is what holds.
    let (mut one, two) = runtime.block_on(async {
        tokio::join!(
            run_callers(
                &stores,
                2,
                5,
                Some(("15550003", 500.0)),
                Some(("spring", 20.0))
            ),
            run_callers(
                &stores,
                2,
                5,
                Some(("15550004", 500.0)),
                Some(("spring", 20.0))
            ),
        )
    });
    one.extend(two);
    assert_eq!(one.len(), 60);
    let busiest = busiest_second(&one);
    assert!(busiest <= 21, "busiest second {busiest}");
    assert!(started.elapsed() >= Duration::from_millis(2900));
}

#[test]
fn a_pause_set_by_one_instance_holds_the_others() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let paced = Slot {
            sender: Some(("15550005", 50.0)),
            campaign: None,
        };
        // The second holds slots it reserved before the pause (up to 250 ms ahead): the pause,
        // announced to every instance, drops them (within milliseconds).
        run_callers(
            std::slice::from_ref(&second),
            4,
            5,
            Some(("15550005", 50.0)),
            None,
        )
        .await;
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(800))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        second.admit(paced, None).await.unwrap();
        let held = started.elapsed();
        assert!(held >= Duration::from_millis(700), "{held:?}");

        // Only ever extends: a shorter pause does not shorten it.
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(600))
            .await
            .unwrap();
        second
            .pause(Scope::Service, Duration::from_millis(50))
            .await
            .unwrap();
        first.admit(paced, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(500));
        // A message with no pace waits for the service's pause as well.
        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(500))
            .await
            .unwrap();
        second.admit(Slot::default(), None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(400));

        // A sender's pause holds that sender in every instance.
        let started = Instant::now();
        first
            .pause(Scope::Sender("15550005"), Duration::from_millis(600))
            .await
            .unwrap();
        second.admit(paced, None).await.unwrap();
        assert!(started.elapsed() >= Duration::from_millis(500));
    });
}

#[test]
fn a_deadline_the_wait_would_pass_times_out_without_a_slot() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let slow = Slot {
            sender: Some(("15550006", 1.0)),
            campaign: None,
        };
        first.admit(slow, None).await.unwrap();
        // The next slot is a second away: a call with 200 ms left does not wait for it.
        let deadline = Instant::now() + Duration::from_millis(200);
        let refused = second.admit(slow, Some(deadline)).await;
        assert!(matches!(refused, Err(Error::Timeout(_))), "{refused:?}");
        // Nothing was taken: the next slot is still the one a second after the first.
        let started = Instant::now();
        second.admit(slow, None).await.unwrap();
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(500), "{waited:?}");
        // And a paused service fails a deadline before the pause's end at once.
        first
            .pause(Scope::Service, Duration::from_secs(5))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(300);
        let refused = second.admit(Slot::default(), Some(deadline)).await;
        assert!(matches!(refused, Err(Error::Timeout(_))), "{refused:?}");
    });
}

#[test]
fn pairs_are_spaced_for_every_instance() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        let cap = Duration::from_secs(10);
        // The second reads the sender's pairs (none) before the first spaces one.
        assert_eq!(
            second.pair_wait("15550007", "4912345").await.unwrap(),
            Duration::ZERO
        );
        let wait = first.space_pair("15550007", "4912345", cap).await.unwrap();
        assert_eq!(wait, Duration::from_secs(4));
        assert!(first.pair_wait("15550007", "4912345").await.unwrap() > Duration::from_secs(3));
        // The second's copy is refreshed at most once a second.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert!(second.pair_wait("15550007", "4912345").await.unwrap() > Duration::from_secs(2));
        assert_eq!(
            second.pair_wait("15550007", "4900000").await.unwrap(),
            Duration::ZERO
        );
        // 4^n seconds for the n-th hit, capped.
        let wait = second.space_pair("15550007", "4912345", cap).await.unwrap();
        assert_eq!(wait, cap);
        let other = second.space_pair("15550008", "4912345", cap).await.unwrap();
        assert_eq!(other, Duration::from_secs(4));
    });
}

#[test]
fn tiers_count_unique_recipients_across_instances() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let (first, second) = (store(&server.url()), store(&server.url()));
    let runtime = multi_thread();
    runtime.block_on(async {
        use TierVerdict::{Known, New, Over};
        let count = first
            .count_recipients("acct1", 3, &[1, 2, 1])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [New, New, Known]);
        assert_eq!(count.unique, 2);
        let count = second
            .count_recipients("acct1", 3, &[3, 4, 2])
            .await
            .unwrap();
        assert_eq!(count.verdicts, [New, Over, Known]);
        assert_eq!(count.unique, 3);
        // Over is never counted: still over, and still 3.
        let count = first.count_recipients("acct1", 3, &[4]).await.unwrap();
        assert_eq!((count.verdicts, count.unique), (vec![Over], 3));
        let count = first.count_recipients("acct1", 3, &[]).await.unwrap();
        assert_eq!(count.unique, 3);
        // Other accounts have their own budget; big batches are counted in chunks.
        let many: Vec<u64> = (0..1500).collect();
        let count = second.count_recipients("acct2", 1000, &many).await.unwrap();
        assert_eq!(count.unique, 1000);
        assert_eq!(count.verdicts.iter().filter(|v| **v == New).count(), 1000);
        assert_eq!(count.verdicts.iter().filter(|v| **v == Over).count(), 500);

        // The paces one process looked up are there for all.
        assert_eq!(first.cached_paces(None).await.unwrap(), None);
        first
            .cache_paces(
                "{\"15550001\":60.0}".to_owned(),
                Duration::from_secs(60),
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            second.cached_paces(None).await.unwrap().as_deref(),
            Some("{\"15550001\":60.0}")
        );
    });
}

#[test]
fn sending_waits_while_redis_is_down_and_resumes_paced() {
    let Some(mut server) = Server::start(&[]) else {
        return;
    };
    let url = format!("{}?wait=30", server.url());
    let stores: Vec<_> = (0..2).map(|_| store(&url)).collect();
    let runtime = multi_thread();
    let (killed_tx, killed_rx) = std::sync::mpsc::channel();
    let times = std::thread::scope(|scope| {
        let killer = scope.spawn(move || {
            std::thread::sleep(Duration::from_millis(1200));
            server.kill();
            let killed = Instant::now();
            std::thread::sleep(Duration::from_millis(1500));
            let restarted = Instant::now();
            server.restart();
            killed_tx.send((killed, restarted)).unwrap();
            server
        });
        // 2 × 3 callers × 25 = 150 messages at 60/s: 2.5 s of pacing around a 1.5 s outage.
        let times = runtime.block_on(run_callers(&stores, 3, 25, Some(("15550009", 60.0)), None));
        drop(killer.join().unwrap());
        times
    });
    let (killed, restarted) = killed_rx.recv().unwrap();
    assert_eq!(times.len(), 150);
    // Nothing went while the store was away (past the slots granted before it went).
    let during = times
        .iter()
        .filter(|t| **t > killed + Duration::from_millis(300) && **t < restarted)
        .count();
    assert_eq!(during, 0, "sent while Redis was down");
    assert!(times.iter().any(|t| *t > restarted), "resumed after");
    let busiest = busiest_second(&times);
    assert!(busiest <= 61, "busiest second {busiest}");
}

#[cfg(unix)]
#[test]
fn sending_waits_while_redis_hangs_and_resumes_paced() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let url = format!("{}?wait=30", server.url());
    let stores: Vec<_> = (0..2).map(|_| store(&url)).collect();
    let runtime = multi_thread();
    let (stopped, resumed, times) = std::thread::scope(|scope| {
        let hang = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(1200));
            server.signal(libc::SIGSTOP);
            let stopped = Instant::now();
            std::thread::sleep(Duration::from_millis(3000));
            let resumed = Instant::now();
            server.signal(libc::SIGCONT);
            (stopped, resumed)
        });
        let times = runtime.block_on(run_callers(&stores, 3, 25, Some(("15550014", 60.0)), None));
        let (stopped, resumed) = hang.join().unwrap();
        (stopped, resumed, times)
    });
    assert_eq!(times.len(), 150);
    let during = times
        .iter()
        .filter(|t| **t > stopped + Duration::from_millis(300) && **t < resumed)
        .count();
    assert_eq!(during, 0, "sent while Redis was hung");
    assert!(times.iter().any(|t| *t > resumed), "resumed after");
    let busiest = busiest_second(&times);
    assert!(busiest <= 61, "busiest second {busiest}");
}

#[test]
fn an_unreachable_store_fails_with_its_name_and_no_password() {
    // Nothing listens on this port: no server is needed.
    let port = free_port();
    let url = format!("redis://user:s3cr3t-pw@127.0.0.1:{port}/0?wait=1");
    let store = store(&url);
    let runtime = multi_thread();
    runtime.block_on(async {
        let error = store.check().await.unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!text.contains("s3cr3t"), "{text}");
        assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
        assert!(!format!("{store:?}").contains("s3cr3t"));

        // admit retries for wait= (1 s), then fails the same way.
        let started = Instant::now();
        let slot = Slot {
            sender: Some(("15550010", 10.0)),
            campaign: None,
        };
        let error = store.admit(slot, None).await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!error.to_string().contains("s3cr3t"));
        assert!(started.elapsed() >= Duration::from_millis(900));
        // A deadline shorter than wait=: a timeout.
        let deadline = Instant::now() + Duration::from_millis(300);
        let error = store.admit(slot, Some(deadline)).await.unwrap_err();
        assert!(matches!(error, Error::Timeout(_)), "{error:?}");

        // Many callers waiting on one pace fail together with the one asking the store (not
        // each after the others' wait=).
        let started = Instant::now();
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.admit(slot, None).await })
            })
            .collect();
        for caller in callers {
            let error = caller.await.unwrap().unwrap_err();
            assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        }
        eprintln!("8 callers failed after {:?} (wait=1)", started.elapsed());
    });
}

#[test]
fn bad_urls_are_validation_errors() {
    for url in [
        "http://localhost:6379",
        "redis://:pw@localhost:6379/zero",
        "redis://localhost:6379/0?timeout=3",
        "rediss://localhost:6379/0?clock=atomic",
    ] {
        let error = crate::limits::shared(url, NAMESPACE, None).err().unwrap();
        assert!(
            matches!(&error, Error::Validation { field, .. } if field == "shared_limits"),
            "{url}: {error:?}"
        );
    }
    // rediss:// needs the client's TLS settings (a client always passes them).
    assert!(crate::limits::shared("rediss://localhost", NAMESPACE, None).is_err());
}

#[test]
fn a_password_is_used_and_never_shown() {
    let Some(server) = Server::start(&["--requirepass", "s3cr:t@x"]) else {
        return;
    };
    let runtime = multi_thread();
    runtime.block_on(async {
        let good = store(&format!(
            "redis://:s3cr%3At%40x@127.0.0.1:{}/2",
            server.port
        ));
        good.check().await.unwrap();
        good.pause(Scope::Service, Duration::from_millis(1))
            .await
            .unwrap();
        let bad = store(&format!(
            "redis://:wr0ng-pw@127.0.0.1:{}/2?wait=1",
            server.port
        ));
        let error = bad.check().await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
        assert!(!error.to_string().contains("wr0ng"), "{error}");
    });
}

#[test]
fn rediss_uses_the_clients_tls_settings() {
    let Some(openssl) = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("openssl"))
            .find(|candidate| candidate.is_file())
    }) else {
        eprintln!("skipped: no openssl to make a test certificate");
        return;
    };
    if redis_binary().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("bizmsg-redis-tls-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    make_certificates(&openssl, &dir);
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let (cert, key, ca) = (path("server.pem"), path("server.key"), path("ca.pem"));
    let Some(server) = Server::start(&[
        "--tls-port",
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ]) else {
        return;
    };
    let trusted = tls_trusting(Some(&dir.join("ca.pem")));
    let runtime = multi_thread();
    runtime.block_on(async {
        let url = format!("rediss://localhost:{}/0", server.port);
        let store = RedisLimits::new(&url, NAMESPACE, Some(Arc::new(trusted))).unwrap();
        store.check().await.unwrap();
        let slot = Slot {
            sender: Some(("15550011", 100.0)),
            campaign: None,
        };
        store.admit(slot, None).await.unwrap();
        // A client that does not trust the test CA is refused.
        let untrusted = tls_trusting(None);
        let store = RedisLimits::new(
            &format!("{url}?wait=1"),
            NAMESPACE,
            Some(Arc::new(untrusted)),
        )
        .unwrap();
        let error = store.check().await.unwrap_err();
        assert!(matches!(error, Error::SharedState(_)), "{error:?}");
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rustls configuration trusting the CA at `ca` only (or nothing).
fn tls_trusting(ca: Option<&Path>) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    if let Some(ca) = ca {
        roots
            .add(rustls::pki_types::CertificateDer::from_pem_file(ca).unwrap())
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A CA and a server certificate for `localhost` signed by it.
fn make_certificates(openssl: &Path, dir: &Path) {
    let run = |args: &[&str]| {
        let status = Command::new(openssl)
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "openssl {args:?}");
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=bizmsg test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "ext",
        "-out",
        "server.pem",
    ]);
}

#[cfg(unix)]
#[test]
fn a_forked_child_makes_its_own_connection() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let store = store(&server.url());
    let slot = Slot {
        sender: Some(("15550012", 100.0)),
        campaign: None,
    };
    let current = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    };
    current().block_on(store.admit(slot, None)).unwrap();
    // SAFETY: the child only runs this test's code (its own runtime and the store), then
    // leaves with _exit; an alarm ends it should anything inherited block.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        unsafe { libc::alarm(20) };
        let ok = current().block_on(async {
            store.admit(slot, None).await.is_ok()
                && store
                    .pause(Scope::Sender("15550013"), Duration::from_millis(1))
                    .await
                    .is_ok()
                && store.check().await.is_ok()
        });
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    // The parent's connection is untouched by the child (which used one of its own).
    current().block_on(store.admit(slot, None)).unwrap();
    current().block_on(store.check()).unwrap();
}

/// A store that loses its state (a restart without persistence, a flush, an eviction) twice
/// within a second: slots granted before each loss are never overlapped by the new schedule,
/// so no one-second window holds more than the pace (before the store's epoch: 89 in a
/// second at 60/s, over the bound of 76 the docs then gave).
#[test]
fn a_store_that_loses_its_state_never_grants_slots_over_the_pace() {
    let Some(server) = Server::start(&[]) else {
        return;
    };
    let stores: Vec<_> = (0..2).map(|_| store(&server.url())).collect();
    let runtime = multi_thread();
    let port = server.port;
    let times = std::thread::scope(|scope| {
        let flusher = scope.spawn(move || {
            for pause in [1200, 500] {
                std::thread::sleep(Duration::from_millis(pause));
                assert!(raw(port, "FLUSHALL\r\n").starts_with("+OK"));
            }
        });
        // 2 × 4 callers × 25 = 200 messages at 60/s: about 3.3 s around both losses.
        let times = runtime.block_on(run_callers(&stores, 4, 25, Some(("15550031", 60.0)), None));
        flusher.join().unwrap();
        times
    });
    assert_eq!(times.len(), 200);
    let busiest = busiest_second(&times);
    eprintln!("two losses of the store's state within a second: busiest second {busiest}");
    assert!(busiest <= 61, "busiest second {busiest} at a pace of 60");
}

/// A store that may evict keys says so (its policy); one that may not, or has no memory limit,
/// does not.
#[test]
fn a_store_that_may_evict_keys_is_told_apart() {
    for (settings, evicts) in [
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru"][..],
            Some("volatile-lru"),
        ),
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"][..],
            Some("allkeys-lru"),
        ),
        (
            &["--maxmemory", "64mb", "--maxmemory-policy", "noeviction"][..],
            None,
        ),
        (
            &["--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"][..],
            None,
        ),
    ] {
        let Some(server) = Server::start(settings) else {
            return;
        };
        let store = store(&server.url());
        let health = multi_thread().block_on(store.check()).unwrap();
        assert_eq!(health.evicts.as_deref(), evicts, "{settings:?}");
    }
}
