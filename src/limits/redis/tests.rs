//! The Redis store against a real `redis-server` each test starts on a free loopback port
//! (no persistence, in a temporary folder) and stops by its PID. Without the binary the tests
//! print why and pass, unless `BIZMSG_REQUIRE_SERVICES=1`, which makes them fail.
//!
//! Several stores on one server stand for several processes: each has its own runtime thread,
//! connection and reserved slots. Assertions are on correctness (no one-second window over
//! the pace, every message admitted), never on speed, except generous lower bounds (a pace or
//! a pause is not shorter than it should be).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RedisLimits;
use crate::error::Error;
use crate::limits::{LimitsStore, Scope, Slot, TierVerdict};

const NAMESPACE: &str = "https://sandbox.test";

/// `redis-server`, if installed; else why the test is skipped (or a failure when services are
/// required).
fn redis_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("redis-server"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("BIZMSG_REQUIRE_SERVICES").as_deref() != Ok("1"),
            "redis-server is not installed and BIZMSG_REQUIRE_SERVICES=1 (apt-get install -y \
             redis-server)"
        );
        eprintln!(
            "skipped: redis-server is not installed (apt-get install -y redis-server; set \
             BIZMSG_REQUIRE_SERVICES=1 to make this a failure)"
        );
    }
    found
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` of this test.
struct Server {
    binary: PathBuf,
    dir: PathBuf,
    port: u16,
    extra: Vec<String>,
    child: Option<Child>,
}

impl Server {
    /// Started, or `None` when the binary is missing (skip).
    fn start(extra: &[&str]) -> Option<Self> {
        let binary = redis_binary()?;
        let dir = std::env::temp_dir().join(format!(
            "bizmsg-redis-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut server = Server {
            binary,
            dir,
            port: 0,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            child: None,
        };
        for _ in 0..5 {
            server.port = free_port();
            if server.spawn() {
                return Some(server);
            }
        }
        panic!("redis-server did not start: {}", server.log());
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }

    /// Starts the server on its port; false if it exited (the port was taken).
    fn spawn(&mut self) -> bool {
        // "--tls-port" (no value) in `extra`: TLS only, on the server's port.
        let tls = self.extra.iter().any(|arg| arg == "--tls-port");
        let mut command = Command::new(&self.binary);
        if tls {
            command.args(["--port", "0", "--tls-port", &self.port.to_string()]);
        } else {
            command.args(["--port", &self.port.to_string()]);
        }
        let extra = self.extra.iter().filter(|arg| *arg != "--tls-port");
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--daemonize", "no", "--dir"])
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.dir.join("log"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = command.spawn().unwrap();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if child.try_wait().unwrap().is_some() {
                return false;
            }
            let up = if tls {
                TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            } else {
                answers(self.port)
            };
            if up {
                self.child = Some(child);
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// SIGKILL, as a crash.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Started again on the same port, with nothing of its state (no persistence).
    fn restart(&mut self) {
        assert!(self.spawn(), "redis-server did not restart: {}", self.log());
    }

    /// `INFO commandstats` calls of `command` (lowercase), read over a plain socket.
    fn calls(&self, command: &str) -> u64 {
        let reply = raw(self.port, "INFO commandstats\r\n");
        reply
            .lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|calls| calls.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether a server answers on `port` (any reply, even NOAUTH).
fn answers(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).is_ok() && (byte[0] == b'+' || byte[0] == b'-')
}

fn raw(port: u16, command: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    stream.write_all(command.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let mut buffer = [0u8; 8192];
    while let Ok(n) = stream.read(&mut buffer) {
        if n == 0 {
            break;
        }
        reply.extend_from_slice(&buffer[..n]);
    }
    String::from_utf8_lossy(&reply).into_owned()
}

fn store(url: &str) -> Arc<RedisLimits> {
    Arc::new(RedisLimits::new(url, NAMESPACE, None).unwrap())
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The most send times within any closed one-second window.
fn busiest_second(times: &[Instant]) -> usize {
    let mut sorted = times.to_vec();
    sorted.sort();
    let mut busiest = 0;
    let mut start = 0;
    for end in 0..sorted.len() {
        while sorted[end] - sorted[start] > Duration::from_secs(1) {
            start += 1;
        }
        busiest = busiest.max(end - start + 1);
    }
    busiest
}

/// `tasks` callers on each store, each admitting `each` messages of `slot`; the send times.
async fn run_callers(
    stores: &[Arc<RedisLimits>],
    tasks: usize,
    each: usize,
    sender: Option<(&'static str, f64)>,
    campaign: Option<(&'static str, f64)>,
) -> Vec<Instant> {
    let mut handles = Vec::new();
    for store in stores {
        for _ in 0..tasks {
            let store = Arc::clone(store);
            handles.push(tokio::spawn(async move {
                let mut times = Vec::new();
                for _ in 0..each {
                    store.admit(Slot { sender, campaign }, None).await.unwrap();
                    times.push(Instant::now());
                }
                times
            }));
        }
    }
    let mut times = Vec::new();
    for handle in handles {
        times.extend(handle.await.unwrap());
    }
    times
}

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
            sender: Some(("15550005", 1000.0)),
            campaign: None,
        };
        // Reserved slots exist in the second before the pause.
        second.admit(paced, None).await.unwrap();

        let started = Instant::now();
        first
            .pause(Scope::Service, Duration::from_millis(800))
            .await
            .unwrap();
        // Only ever extends: a shorter pause does not shorten it.
        second
            .pause(Scope::Service, Duration::from_millis(50))
            .await
            .unwrap();
        second.admit(paced, None).await.unwrap();
        let held = started.elapsed();
        assert!(held >= Duration::from_millis(700), "{held:?}");
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
        assert_eq!(first.cached_paces().await.unwrap(), None);
        first
            .cache_paces("{\"15550001\":60.0}".to_owned(), Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(
            second.cached_paces().await.unwrap().as_deref(),
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
