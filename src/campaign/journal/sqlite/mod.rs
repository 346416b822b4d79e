//! The embedded journal: one SQLite file per campaign, one row per message this campaign
//! claimed (fingerprint, occurrence, idempotency key, state: `claimed`, then `dispatched` just
//! before its request is written, then its result; the run holding it, sms_id, code, msg), and
//! one row per run.
//!
//! SQLite runs on a thread of its own; every command that arrives while it works joins the
//! next transaction, so writes are batched by how busy the campaign is. WAL with
//! `synchronous=NORMAL` makes each commit survive the process being killed. Several processes
//! may run one campaign on one file at once (a cron job overlapping a slow run): every
//! transaction takes SQLite's write lock first (`BEGIN IMMEDIATE`, waiting up to
//! `BUSY_TIMEOUT`), so a claim's read and write are one step for all of them, and a run's
//! liveness is its lock file (`run_lock.rs`), with its own lease (recorded with it) as a
//! fallback: a frozen process keeps its lock. A run taken over is recorded `gone` by the taker,
//! so its next transaction stops it; and it sends only while its fence holds (`fence.rs`).
//!
//! The files: `schema.rs` makes the file's tables or moves an earlier format to this one;
//! `writer.rs` is the thread that owns the connection and runs each batch as a transaction, and
//! `checkpointer.rs` the one that copies its log back into the file beside it;
//! `records.rs` is what a transaction does to the messages' records, and `liveness.rs` how it
//! tells whether the run holding one is alive. This file opens a run and is its callers' handle.

mod checkpointer;
mod liveness;
mod records;
mod schema;
#[cfg(test)]
mod tests;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection};

use self::schema::Setup;
use super::commands::{Command, CommandedStore};
use super::fence::stamp;
use super::run_lock::{lock_dir, RunLock};
use super::ClaimFence;
use crate::campaign::message::FingerprintKind;
use crate::error::{Error, Result};

/// How long a transaction waits for another process's to end before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct SqliteJournal {
    commands: Option<mpsc::Sender<Command>>,
    fence: Arc<ClaimFence>,
    thread: Option<JoinHandle<()>>,
    campaign_id: String,
    fingerprints: FingerprintKind,
    path: PathBuf,
}

fn failed(path: &Path, what: &str, error: impl std::fmt::Display) -> Error {
    Error::Campaign(format!("journal {}: {what}: {error}", path.display()))
}

/// This run, as the writer thread knows it.
struct Run {
    id: String,
    /// Where the lock files of every run are.
    locks: PathBuf,
    /// Held for the run's life; dropped (released) by the writer thread when it ends.
    lock: Option<RunLock>,
    /// This run's lease (recorded with it: others judge it by this).
    lease: Duration,
    fence: Arc<ClaimFence>,
}

impl SqliteJournal {
    /// Opens (or creates) the journal at `path` and starts a run in it. A journal keeps the
    /// campaign id it was made with (`campaign_id`, or a random one): running it with another
    /// id is refused. A run older than `lease` without a sign of life is taken for gone.
    pub fn open(path: &Path, campaign_id: Option<&str>, lease: Duration) -> Result<SqliteJournal> {
        let mut connection =
            Connection::open(path).map_err(|e| failed(path, "cannot be opened", e))?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| failed(path, "is not usable", e))?;
        let (campaign_id, fingerprints) = schema::prepare(&mut connection, path, campaign_id)
            .map_err(|e| match e {
                Setup::Sqlite(e) => failed(path, "is not usable", e),
                Setup::Refused(message) => {
                    Error::Campaign(format!("journal {}: {message}", path.display()))
                }
            })?;
        let id = uuid::Uuid::new_v4().to_string();
        let registering = stamp();
        let locks = lock_dir(path);
        let lock = RunLock::acquire(&locks, &id)
            .map_err(|e| failed(path, "cannot lock this run's file", e))?;
        connection
            .execute(
                "INSERT INTO bizmsg_runs (id, state, host, pid, started_at, heartbeat_at, lease)
                 VALUES (?1, 'running', ?2, ?3, ?4, ?4, ?5)",
                params![id, host(), std::process::id(), now(), lease.as_secs_f64()],
            )
            .map_err(|e| failed(path, "cannot record this run", e))?;
        let fence = Arc::new(ClaimFence::new(lease, registering));
        let run = Run {
            id,
            locks,
            lock: Some(lock),
            lease,
            fence: Arc::clone(&fence),
        };
        let (commands, received) = mpsc::channel();
        let thread_path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("bizmsg-journal".to_owned())
            .spawn(move || writer::serve(connection, &thread_path, run, received))
            .map_err(|e| failed(path, "cannot start its writer thread", e))?;
        Ok(SqliteJournal {
            commands: Some(commands),
            fence,
            thread: Some(thread),
            campaign_id,
            fingerprints,
            path: path.to_owned(),
        })
    }

    /// Ends the run after everything queued is committed; waits for it.
    pub fn close(&mut self) {
        self.commands = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl CommandedStore for SqliteJournal {
    fn campaign_id(&self) -> &str {
        &self.campaign_id
    }

    fn fence(&self) -> &Arc<ClaimFence> {
        &self.fence
    }

    fn fingerprints(&self) -> FingerprintKind {
        self.fingerprints
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .as_ref()
            .and_then(|commands| commands.send(command).ok())
            .ok_or_else(|| self.stopped())
    }

    fn stopped(&self) -> Error {
        failed(&self.path, "writer", "has stopped")
    }
}

impl Drop for SqliteJournal {
    fn drop(&mut self) {
        self.close();
    }
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// This host's name, recorded with each run (for a person reading the journal).
pub(crate) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default()
}
