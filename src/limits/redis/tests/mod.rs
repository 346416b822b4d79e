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
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RedisLimits;
use crate::limits::{LimitsStore, Slot};

mod campaigns;
mod connection;
mod outages;
mod pacing;
mod store;

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

    /// Sends `signal` to the server (SIGSTOP: hung, SIGCONT: going on).
    #[cfg(unix)]
    fn signal(&self, signal: libc::c_int) {
        let pid = self.child.as_ref().unwrap().id();
        // SAFETY: signals the server this test started (still its child, not reaped).
        assert_eq!(unsafe { libc::kill(pid as libc::pid_t, signal) }, 0);
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
