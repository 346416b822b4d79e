//! Real servers for the core's tests: PostgreSQL 15 started on a free loopback port in a
//! temporary folder (as the `postgres` user when the tests run as root, since it refuses root),
//! stopped by its PID. A missing server skips its test with the reason, unless
//! `BIZMSG_REQUIRE_SERVICES=1` (CI), under which it fails it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether a missing server must fail the test (CI) rather than skip it.
fn required() -> bool {
    std::env::var("BIZMSG_REQUIRE_SERVICES").is_ok_and(|value| value == "1")
}

/// `None` (the test returns early, skipped) with a printed reason, or a panic under
/// `BIZMSG_REQUIRE_SERVICES=1`.
pub(crate) fn missing<T>(what: &str) -> Option<T> {
    let reason = format!("{what} is not installed (apt-get install postgresql-15, or run .ci/run)");
    if required() {
        panic!("{reason}; BIZMSG_REQUIRE_SERVICES=1 makes this a failure");
    }
    eprintln!("skipped: {reason}");
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[cfg(unix)]
fn is_root() -> bool {
    // SAFETY: a plain system call without arguments.
    unsafe { libc::geteuid() == 0 }
}

/// PostgreSQL's binaries on Debian. None elsewhere (under wine, /usr/lib is the host's, whose
/// binaries are Linux's).
fn postgres_bin() -> Option<PathBuf> {
    if cfg!(not(unix)) {
        return None;
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("postgres").exists())
        .collect();
    versions.sort();
    versions.pop()
}

/// The uid and gid of the `postgres` user.
#[cfg(unix)]
fn postgres_user() -> Option<(u32, u32)> {
    let name = std::ffi::CString::new("postgres").ok()?;
    // SAFETY: getpwnam returns a pointer into static storage, read at once, or null.
    let entry = unsafe { libc::getpwnam(name.as_ptr()) };
    if entry.is_null() {
        return None;
    }
    // SAFETY: checked non-null just above.
    let entry = unsafe { &*entry };
    Some((entry.pw_uid, entry.pw_gid))
}

/// A command run as the `postgres` user when we are root (it refuses root), as our own child.
#[cfg(unix)]
fn as_postgres(program: &Path) -> Command {
    use std::os::unix::process::CommandExt;
    let mut command = Command::new(program);
    if is_root() {
        let (uid, gid) = postgres_user().expect("no postgres user to run PostgreSQL as");
        command.uid(uid).gid(gid);
    }
    command
}

/// Elsewhere (the core's tests for Windows, run under wine) there is no root to avoid.
#[cfg(not(unix))]
fn as_postgres(program: &Path) -> Command {
    Command::new(program)
}

pub(crate) struct PostgresServer {
    child: Option<Child>,
    dir: PathBuf,
    pub(crate) url: String,
    bin: PathBuf,
    port: u16,
}

impl PostgresServer {
    pub(crate) fn start() -> Option<PostgresServer> {
        let Some(bin) = postgres_bin() else {
            return missing("PostgreSQL");
        };
        let dir = std::env::temp_dir().join(format!("bizmsg-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        #[cfg(unix)]
        if is_root() {
            let Some((uid, gid)) = postgres_user() else {
                return missing("a postgres user to run PostgreSQL as");
            };
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        let data = dir.join("data");
        let initdb = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(initdb.success(), "initdb failed");
        let port = free_port();
        let mut server = PostgresServer {
            child: None,
            url: format!("postgresql://postgres@127.0.0.1:{port}/postgres?sslmode=disable"),
            dir,
            bin,
            port,
        };
        server.spawn();
        Some(server)
    }

    fn spawn(&mut self) {
        let child = as_postgres(&self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-k"])
            .arg(&self.dir)
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=50",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return;
            }
            assert!(Instant::now() < deadline, "PostgreSQL did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server (SIGKILL) and starts it again on the same port and data.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
