//! The embedded journal: one SQLite file per campaign, one row per message this campaign
//! claimed (fingerprint, occurrence, idempotency key, state, the run holding it, sms_id, code,
//! msg), and one row per run.
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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use tokio::sync::oneshot;

use super::fence::{heartbeat_every, stamp, TAKE_OVER_AFTER};
use super::run_lock::{is_alive, lock_dir, RunLock};
use super::{Claim, ClaimFence, Claimed, Identity, JournalStore, Row, State};
use crate::campaign::message::FingerprintKind;
use crate::error::{Error, Result};

/// Format 4: messages known by identity (format 1 knew them by position), runs with their own
/// lease (format 2 judged them by the reader's), claims, and the kind of fingerprint the
/// campaign's identities are (format 3 knew only xxh3: a bizmsg of format 3 must not resume a
/// campaign whose messages it would not recognise).
const SCHEMA: &str = "4";
/// How long a transaction waits for another process's to end before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

enum Command {
    Lookup {
        identities: Vec<Identity>,
        reply: oneshot::Sender<Result<Vec<Row>>>,
    },
    Claim {
        claims: Vec<Claim>,
        reply: oneshot::Sender<Result<Vec<Claimed>>>,
    },
    Write {
        rows: Vec<Row>,
        /// Told once the rows are committed (a retry's new key waits for it).
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    /// The run ends (after what was queued before): told once its connection is closed.
    End { reply: oneshot::Sender<()> },
}

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
        let (campaign_id, fingerprints) =
            prepare(&mut connection, path, campaign_id).map_err(|e| match e {
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
            .spawn(move || serve(connection, &thread_path, run, received))
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

    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .as_ref()
            .and_then(|commands| commands.send(command).ok())
            .ok_or_else(|| failed(&self.path, "writer", "has stopped"))
    }

    /// Ends the run after everything queued is committed; waits for it.
    pub fn close(&mut self) {
        self.commands = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl JournalStore for SqliteJournal {
    fn campaign_id(&self) -> &str {
        &self.campaign_id
    }

    fn fence(&self) -> &Arc<ClaimFence> {
        &self.fence
    }

    fn fingerprints(&self) -> FingerprintKind {
        self.fingerprints
    }

    fn lookup(&self, identities: Vec<Identity>) -> BoxFuture<'_, Result<Vec<Row>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Lookup { identities, reply })?;
            answer
                .await
                .map_err(|_| failed(&self.path, "writer", "stopped"))?
        })
    }

    fn claim(&self, claims: Vec<Claim>) -> BoxFuture<'_, Result<Vec<Claimed>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Claim { claims, reply })?;
            answer
                .await
                .map_err(|_| failed(&self.path, "writer", "stopped"))?
        })
    }

    fn write_durably(&self, rows: Vec<Row>) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Write {
                rows,
                reply: Some(reply),
            })?;
            answer
                .await
                .map_err(|_| failed(&self.path, "writer", "stopped"))?
        })
    }

    fn write(&self, rows: Vec<Row>) -> Result<()> {
        self.send(Command::Write { rows, reply: None })
    }

    fn end(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            // A writer that has stopped already has closed its connection.
            if self.send(Command::End { reply }).is_ok() {
                let _ = answer.await;
            }
        })
    }
}

impl Drop for SqliteJournal {
    fn drop(&mut self) {
        self.close();
    }
}

enum Setup {
    Sqlite(rusqlite::Error),
    Refused(String),
}

impl From<rusqlite::Error> for Setup {
    fn from(error: rusqlite::Error) -> Self {
        Setup::Sqlite(error)
    }
}

const TABLES: &str = "
    CREATE TABLE IF NOT EXISTS bizmsg_campaign (name TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS bizmsg_runs (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        host TEXT,
        pid INTEGER,
        started_at REAL NOT NULL,
        heartbeat_at REAL NOT NULL,
        ended_at REAL,
        lease REAL NOT NULL DEFAULT 300
    );
    CREATE TABLE IF NOT EXISTS bizmsg_messages (
        fingerprint TEXT NOT NULL,
        occurrence INTEGER NOT NULL,
        idempotency_key TEXT,
        state TEXT NOT NULL,
        run_id TEXT,
        inherited_doubt INTEGER NOT NULL DEFAULT 0,
        sms_id TEXT,
        code TEXT,
        msg TEXT,
        updated_at REAL NOT NULL,
        PRIMARY KEY (fingerprint, occurrence)
    ) WITHOUT ROWID;";

/// Puts the journal in WAL mode (once per file: the mode is kept in it). Switching takes an
/// exclusive lock that the busy timeout does not wait for, so runs opening one new journal at
/// once try again, within the busy timeout, while another holds it.
fn use_wal(connection: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        let switched = connection
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0));
        match switched {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(failure, _))
                if failure.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5 + fastrand::u64(..10)));
            }
            Err(error) => return Err(error),
        }
    }
}

/// Creates the tables (or moves a format-1 journal to format 2) and settles the campaign id,
/// in one transaction that holds SQLite's write lock: processes opening one new journal at
/// once do not race.
fn prepare(
    connection: &mut Connection,
    path: &Path,
    campaign_id: Option<&str>,
) -> std::result::Result<(String, FingerprintKind), Setup> {
    use_wal(connection)?;
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute(
        "CREATE TABLE IF NOT EXISTS bizmsg_campaign (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        [],
    )?;
    let setting = |name: &str| -> rusqlite::Result<Option<String>> {
        transaction
            .query_row(
                "SELECT value FROM bizmsg_campaign WHERE name = ?1",
                [name],
                |row| row.get(0),
            )
            .optional()
    };
    let made_now = setting("schema")?.is_none();
    match setting("schema")?.as_deref() {
        None => {
            transaction.execute_batch(TABLES)?;
            transaction.execute(
                "INSERT INTO bizmsg_campaign (name, value) VALUES ('schema', ?1)",
                [SCHEMA],
            )?;
        }
        Some("1") => {
            migrate_from_positions(&transaction)?;
            record_own_leases(&transaction)?;
        }
        Some("2") => {
            // A run of the bizmsg that wrote format 2 would go on after the move, judging
            // runs by its own lease and never learning it was taken over: it must end first.
            if let Some(run) = live_run(&transaction, path)? {
                return Err(Setup::Refused(format!(
                    "is in use by a run of an earlier bizmsg ({run}): let it finish, then run \
                     this one"
                )));
            }
            record_own_leases(&transaction)?;
        }
        Some("3") => {}
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(Setup::Refused(format!(
                "was written by another version of bizmsg (journal format {other}, this one \
                 reads {SCHEMA})"
            )))
        }
    }
    let id = match (setting("campaign_id")?, campaign_id) {
        (Some(recorded), Some(given)) if recorded != given => {
            return Err(Setup::Refused(format!(
                "belongs to campaign {recorded:?}, not {given:?}; use another journal file \
                 for another campaign"
            )))
        }
        (Some(recorded), _) => recorded,
        (None, given) => {
            let id = given
                .map(str::to_owned)
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            transaction.execute(
                "INSERT INTO bizmsg_campaign (name, value) VALUES ('campaign_id', ?1)",
                [&id],
            )?;
            id
        }
    };
    let fingerprints = match setting("fingerprint")? {
        Some(name) => FingerprintKind::from_name(&name).ok_or_else(|| {
            Setup::Refused(format!(
                "knows its messages by a fingerprint this bizmsg does not compute ({name:?})"
            ))
        })?,
        None => {
            // A journal made now: SHA-256. One made before fingerprints were recorded: xxh3,
            // the only kind there was, so its campaign resumes as it began.
            let kind = if made_now {
                FingerprintKind::Sha256
            } else {
                FingerprintKind::Xxh3
            };
            transaction.execute(
                "INSERT INTO bizmsg_campaign (name, value) VALUES ('fingerprint', ?1)",
                [kind.name()],
            )?;
            kind
        }
    };
    transaction.execute(
        "UPDATE bizmsg_campaign SET value = ?1 WHERE name = 'schema'",
        [SCHEMA],
    )?;
    transaction.commit()?;
    Ok((id, fingerprints))
}

/// Format 1 knew a message by its position in the input. Each row becomes the record of its
/// message's identity: the n-th row of a fingerprint (by position) is its occurrence n. Keys
/// are kept as recorded (a message in doubt must be re-sent with the key it went out with);
/// no run holds anything, so what was dispatched is in doubt.
fn migrate_from_positions(transaction: &Transaction<'_>) -> rusqlite::Result<()> {
    transaction.execute_batch("ALTER TABLE bizmsg_messages RENAME TO bizmsg_messages_v1;")?;
    transaction.execute_batch(TABLES)?;
    transaction.execute_batch(
        "INSERT INTO bizmsg_messages
             (fingerprint, occurrence, idempotency_key, state, run_id, inherited_doubt,
              sms_id, code, msg, updated_at)
         SELECT fingerprint,
                ROW_NUMBER() OVER (PARTITION BY fingerprint ORDER BY idx) - 1,
                idempotency_key, state, NULL, 0, sms_id, code, msg, updated_at
         FROM bizmsg_messages_v1 WHERE fingerprint IS NOT NULL;
         DROP TABLE bizmsg_messages_v1;
         UPDATE bizmsg_campaign SET value = '2' WHERE name = 'schema';",
    )
}

/// A run recorded running whose lock is held: its id, host and pid.
fn live_run(transaction: &Transaction<'_>, path: &Path) -> rusqlite::Result<Option<String>> {
    let locks = lock_dir(path);
    let mut statement =
        transaction.prepare("SELECT id, host, pid FROM bizmsg_runs WHERE state = 'running'")?;
    let runs = statement.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, Option<String>>(1)?,
            row.get::<_, Option<i64>>(2)?,
        ))
    })?;
    for run in runs {
        let (id, host, pid) = run?;
        if is_alive(&locks, &id) {
            return Ok(Some(format!(
                "run {id}, process {} on {}",
                pid.unwrap_or_default(),
                host.unwrap_or_default()
            )));
        }
    }
    Ok(None)
}

/// Format 2 judged every run by the reader's lease; from format 3 each run's own is recorded
/// (runs recorded before keep the default lease, 300 s).
fn record_own_leases(transaction: &Transaction<'_>) -> rusqlite::Result<()> {
    let has_lease: bool = transaction.query_row(
        "SELECT count(*) > 0 FROM pragma_table_info('bizmsg_runs') WHERE name = 'lease'",
        [],
        |row| row.get(0),
    )?;
    if !has_lease {
        transaction
            .execute_batch("ALTER TABLE bizmsg_runs ADD COLUMN lease REAL NOT NULL DEFAULT 300;")?;
    }
    transaction.execute(
        "UPDATE bizmsg_campaign SET value = ?1 WHERE name = 'schema'",
        [SCHEMA],
    )?;
    Ok(())
}

/// Tells a waiting caller how its command's transaction went (`Some(failure)` if it failed).
type Reply = Box<dyn FnOnce(Option<&str>)>;

fn serve(mut connection: Connection, path: &Path, mut run: Run, commands: mpsc::Receiver<Command>) {
    // A write that failed with nobody waiting is reported to the next one who waits.
    let mut earlier_failure: Option<String> = None;
    // A sign of life a few times per lease, for processes that cannot see the lock (a frozen
    // one keeps it), which confirms this run's fence too.
    let beat = heartbeat_every(run.lease);
    let mut ending = None;
    loop {
        let first = match commands.recv_timeout(beat) {
            Ok(command) => command,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !run.fence.is_lost() {
                    let started = stamp();
                    match heartbeat(&connection, &run.id) {
                        Ok(true) => run.fence.confirm(started),
                        Ok(false) => run.fence.lose(TAKEN_OVER),
                        // Busy: another process's transaction; the fence goes stale meanwhile.
                        Err(_) => {}
                    }
                }
                continue;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        let mut batch = vec![first];
        while let Ok(more) = commands.try_recv() {
            batch.push(more);
        }
        ending = take_end(&mut batch);
        if batch.is_empty() {
            break;
        }
        let mut replies: Vec<Reply> = Vec::new();
        let started = stamp();
        let mut pending = batch.into_iter();
        let outcome = run_batch(&mut connection, &run, &mut pending, &mut replies);
        match &outcome {
            Ok(Held::Yes) => run.fence.confirm(started),
            // Taken over: it sends nothing more, and only writes the results of what it holds.
            Ok(Held::TakenOver) => run.fence.lose(TAKEN_OVER),
            // No journal transaction of this run may fail and its sends go on. (Lost before
            // anyone waiting is answered: whoever learns of the failure finds the fence down.)
            Err(error) => run.fence.lose(error.to_string()),
        }
        // The commands a failure cut short are answered with it too.
        replies.extend(pending.map(answer_only));
        let failure = outcome
            .err()
            .map(|e| e.to_string())
            .or(earlier_failure.take());
        for reply in replies {
            reply(failure.as_deref());
        }
        if let Some(failure) = failure {
            log::error!(target: "bizmsg", "campaign journal {}: {failure}", path.display());
            earlier_failure = Some(failure);
        }
        if ending.is_some() {
            break;
        }
    }
    // The run ends: recorded, then its lock released (a reader never sees a running run
    // without its lock).
    let _ = connection.execute(
        "UPDATE bizmsg_runs SET state = 'ended', ended_at = ?2 WHERE id = ?1 AND state = 'running'",
        params![run.id, now()],
    );
    drop(run.lock.take());
    // Closed before the caller hears the run ended. A caller that reads the file next with
    // another copy of SQLite in this process (Python's sqlite3) does not see our connection
    // (POSIX locks are per process), so closing theirs would checkpoint and delete the WAL
    // ours still had open: the file is then malformed (sqlite.org/howtocorrupt.html, 2.2.1).
    drop(connection);
    if let Some(reply) = ending {
        let _ = reply.send(());
    }
}

/// Takes the run's end out of a batch; a command queued after it (none is, once the engine
/// ends its run) is answered as one the ended run cannot make.
fn take_end(batch: &mut Vec<Command>) -> Option<oneshot::Sender<()>> {
    let at = batch
        .iter()
        .position(|command| matches!(command, Command::End { .. }))?;
    let after: Vec<Command> = batch.drain(at + 1..).collect();
    for command in after {
        answer_only(command)(Some("the run has ended"));
    }
    match batch.pop() {
        Some(Command::End { reply }) => Some(reply),
        _ => None,
    }
}

/// What this run is told when it was taken for a dead one.
const TAKEN_OVER: &str = "this run was taken for a dead one (its lease passed) and its claims \
                          taken over: it stops";

/// Whether this run still holds its claims after a batch.
enum Held {
    Yes,
    /// Taken over (recorded gone by another run, or a message it claimed is another's): it
    /// sends nothing more, and from then on only writes the results of what it still holds.
    TakenOver,
}

/// A sign of life: whether the run is still recorded running (not taken over).
fn heartbeat(connection: &Connection, run: &str) -> rusqlite::Result<bool> {
    let changed = connection.execute(
        "UPDATE bizmsg_runs SET heartbeat_at = ?2 WHERE id = ?1 AND state = 'running'",
        params![run, now()],
    )?;
    Ok(changed > 0)
}

/// The reply of a command a failure cut short.
fn answer_only(command: Command) -> Reply {
    let failed = |failure: Option<&str>| {
        Error::Campaign(format!(
            "journal: {}",
            failure.unwrap_or("its transaction failed")
        ))
    };
    match command {
        Command::Lookup { reply, .. } => Box::new(move |failure: Option<&str>| {
            let _ = reply.send(Err(failed(failure)));
        }),
        Command::Claim { reply, .. } => Box::new(move |failure: Option<&str>| {
            let _ = reply.send(Err(failed(failure)));
        }),
        Command::Write { reply, .. } => Box::new(move |failure: Option<&str>| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(failed(failure)));
            }
        }),
        Command::End { reply } => Box::new(move |_: Option<&str>| {
            let _ = reply.send(());
        }),
    }
}

/// One transaction for the commands of `batch`; those a failure cuts short are left in it.
/// A run taken over writes the results of what it holds, and refuses everything else.
fn run_batch(
    connection: &mut Connection,
    run: &Run,
    batch: &mut std::vec::IntoIter<Command>,
    replies: &mut Vec<Reply>,
) -> rusqlite::Result<Held> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let now = now();
    let taken = run.fence.is_lost()
        || transaction.execute(
            "UPDATE bizmsg_runs SET heartbeat_at = ?2 WHERE id = ?1 AND state = 'running'",
            params![run.id, now],
        )? == 0;
    // Rows this run claimed that a write found held by another run.
    let mut lost = 0;
    let mut liveness = Liveness::new(run);
    for command in batch.by_ref() {
        // A durable write is a key recorded before a send, or the run's last flush: neither
        // is this run's to make any more.
        let refused = match &command {
            Command::Write { reply, .. } => reply.is_some(),
            Command::Lookup { .. } | Command::Claim { .. } => true,
            // Never in a batch (`take_end`).
            Command::End { .. } => false,
        };
        if taken && refused {
            let reply = answer_only(command);
            replies.push(Box::new(move |_| reply(Some(TAKEN_OVER))));
            continue;
        }
        match command {
            Command::Lookup { identities, reply } => {
                let rows = lookup(&transaction, &identities, &mut liveness);
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match (rows, failure) {
                        (Ok(rows), None) => Ok(rows),
                        (Err(e), _) => Err(Error::Campaign(format!("journal: {e}"))),
                        (_, Some(failure)) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Claim { claims, reply } => {
                let claimed = claim(&transaction, &claims, &mut liveness, now)?;
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match failure {
                        None => Ok(claimed),
                        Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Write { rows, reply } => {
                lost += write(&transaction, &run.id, &rows, now)?;
                if let Some(reply) = reply {
                    replies.push(Box::new(move |failure: Option<&str>| {
                        let _ = reply.send(match failure {
                            None => Ok(()),
                            Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                        });
                    }));
                }
            }
            Command::End { reply } => replies.push(answer_only(Command::End { reply })),
        }
    }
    transaction.commit()?;
    if lost > 0 {
        log::error!(
            target: "bizmsg",
            "campaign journal: {lost} message(s) this run claimed are held by another run"
        );
    }
    // What it still held is committed; it sends nothing more.
    Ok(if taken || lost > 0 {
        Held::TakenOver
    } else {
        Held::Yes
    })
}

/// Which runs are alive, asked once per run within a transaction.
struct Liveness<'a> {
    run: &'a Run,
    known: HashMap<String, bool>,
}

impl<'a> Liveness<'a> {
    fn new(run: &'a Run) -> Self {
        Liveness {
            run,
            known: HashMap::new(),
        }
    }

    /// Whether the run `id` (not this one) is alive: recorded running, with its lock held and
    /// a heartbeat within the lease. A run found gone is recorded so.
    fn alive(&mut self, transaction: &Transaction<'_>, id: &str) -> rusqlite::Result<bool> {
        if let Some(alive) = self.known.get(id) {
            return Ok(*alive);
        }
        let recorded: Option<(String, f64, f64)> = transaction
            .query_row(
                "SELECT state, heartbeat_at, lease FROM bizmsg_runs WHERE id = ?1",
                [id],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()?;
        let alive = match recorded {
            // Judged by its own lease, with the margin its fence leaves (`fence.rs`).
            Some((state, heartbeat, lease)) if state == "running" => {
                let fresh = now() - heartbeat < lease * TAKE_OVER_AFTER;
                fresh && is_alive(&self.run.locks, id)
            }
            _ => false,
        };
        if !alive {
            transaction.execute(
                "UPDATE bizmsg_runs SET state = 'gone' WHERE id = ?1 AND state = 'running'",
                [id],
            )?;
        }
        self.known.insert(id.to_owned(), alive);
        Ok(alive)
    }
}

/// A message's row as recorded, with the run holding it.
fn recorded(
    transaction: &Transaction<'_>,
    identity: Identity,
) -> rusqlite::Result<Option<(Row, Option<String>)>> {
    let mut statement = transaction.prepare_cached(
        "SELECT idempotency_key, state, sms_id, code, msg, run_id
         FROM bizmsg_messages WHERE fingerprint = ?1 AND occurrence = ?2",
    )?;
    statement
        .query_row(
            params![identity.fingerprint.to_hex(), identity.occurrence],
            |row| {
                let state: String = row.get(1)?;
                Ok((
                    Row {
                        identity,
                        key: row.get(0)?,
                        // An unreadable state is taken for in doubt, the safe reading.
                        state: State::parse(&state).unwrap_or(State::Dispatched),
                        sms_id: row.get(2)?,
                        code: row.get(3)?,
                        msg: row.get(4)?,
                        clears_doubt: false,
                        held_elsewhere: false,
                        // A run lock is released only when its process ends: never settling.
                        holder_settling: false,
                        claimed: false,
                    },
                    row.get(5)?,
                ))
            },
        )
        .optional()
}

fn lookup(
    transaction: &Transaction<'_>,
    identities: &[Identity],
    liveness: &mut Liveness<'_>,
) -> rusqlite::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for identity in identities {
        if let Some((mut row, holder)) = recorded(transaction, *identity)? {
            row.held_elsewhere = held_elsewhere(transaction, &row, holder.as_deref(), liveness)?;
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Whether `row` is claimed, without a result, by a live run other than this one.
fn held_elsewhere(
    transaction: &Transaction<'_>,
    row: &Row,
    holder: Option<&str>,
    liveness: &mut Liveness<'_>,
) -> rusqlite::Result<bool> {
    match (row.state, holder) {
        (State::Dispatched | State::Unknown, Some(holder)) if holder != liveness.run.id => {
            liveness.alive(transaction, holder)
        }
        _ => Ok(false),
    }
}

fn claim(
    transaction: &Transaction<'_>,
    claims: &[Claim],
    liveness: &mut Liveness<'_>,
    now: f64,
) -> rusqlite::Result<Vec<Claimed>> {
    let me = liveness.run.id.clone();
    let mut answers = Vec::with_capacity(claims.len());
    for claim in claims {
        let Some((mut row, holder)) = recorded(transaction, claim.identity)? else {
            transaction.execute(
                "INSERT INTO bizmsg_messages
                     (fingerprint, occurrence, idempotency_key, state, run_id, inherited_doubt,
                      updated_at)
                 VALUES (?1, ?2, ?3, 'dispatched', ?4, 0, ?5)",
                params![
                    claim.identity.fingerprint.to_hex(),
                    claim.identity.occurrence,
                    claim.key,
                    me,
                    now
                ],
            )?;
            answers.push(Claimed::Won {
                key: claim.key.clone(),
            });
            continue;
        };
        let mine = holder.as_deref() == Some(me.as_str());
        // A message that may have left keeps the key it may have left with, whoever claims it.
        let may_have_left = matches!(row.state, State::Dispatched | State::Unknown);
        let won = match row.state {
            State::Sent | State::Rejected => false,
            State::Failed | State::Skipped => true,
            State::Dispatched | State::Unknown if mine => true,
            State::Dispatched | State::Unknown => {
                row.held_elsewhere =
                    held_elsewhere(transaction, &row, holder.as_deref(), liveness)?;
                !row.held_elsewhere && claim.take_over
            }
        };
        if !won {
            answers.push(Claimed::Lost(row));
            continue;
        }
        // A message taken over from a run that left it in doubt keeps its key, and its doubt.
        let inherited = may_have_left && !mine;
        let key = match (&row.key, may_have_left) {
            (Some(recorded), true) => recorded.clone(),
            _ => claim.key.clone(),
        };
        transaction.execute(
            "UPDATE bizmsg_messages
             SET state = 'dispatched', run_id = ?3, idempotency_key = ?4,
                 inherited_doubt = ?5 OR (inherited_doubt AND ?7),
                 sms_id = NULL, code = NULL, msg = NULL, updated_at = ?6
             WHERE fingerprint = ?1 AND occurrence = ?2",
            params![
                claim.identity.fingerprint.to_hex(),
                claim.identity.occurrence,
                me,
                key,
                inherited,
                now,
                mine && may_have_left
            ],
        )?;
        answers.push(Claimed::Won { key });
    }
    Ok(answers)
}

/// Writes the records of messages this run holds; returns how many of those it claimed
/// (`Row::claimed`) another run holds now (this run was taken over).
fn write(
    transaction: &Transaction<'_>,
    me: &str,
    rows: &[Row],
    now: f64,
) -> rusqlite::Result<usize> {
    let mut statement = transaction.prepare_cached(
        "UPDATE bizmsg_messages
         SET state = ?3, idempotency_key = coalesce(?4, idempotency_key),
             sms_id = ?5, code = ?6, msg = ?7, updated_at = ?8
         -- Only this run's claims; a record never loses what it says about a message that may
         -- have left: a result stays, and doubt is cleared only by a result or by the run that
         -- claimed the message and knows it never left (?9), never for a message this run
         -- took over in doubt.
         WHERE fingerprint = ?1 AND occurrence = ?2 AND run_id = ?10
           AND state NOT IN ('sent', 'rejected')
           AND NOT (state IN ('dispatched', 'unknown') AND ?3 IN ('failed', 'skipped')
                    AND (inherited_doubt OR NOT ?9))",
    )?;
    let mut lost = 0;
    for row in rows {
        let changed = statement.execute(params![
            row.identity.fingerprint.to_hex(),
            row.identity.occurrence,
            row.state.as_str(),
            row.key,
            row.sms_id,
            row.code,
            row.msg,
            now,
            row.clears_doubt,
            me
        ])?;
        // Unchanged is usual (a result already there, a doubt kept); held by another run is
        // not, for a message this run claimed.
        if changed == 0 && row.claimed {
            if let Some((_, holder)) = recorded(transaction, row.identity)? {
                if holder.as_deref() != Some(me) {
                    lost += 1;
                }
            }
        }
    }
    Ok(lost)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::campaign::message::Fingerprint;

    const LEASE: Duration = Duration::from_secs(60);

    /// A new, empty directory for one test's journal.
    fn fresh_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bizmsg-journal-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn identity(n: u128) -> Identity {
        Identity {
            fingerprint: Fingerprint(n),
            occurrence: 0,
        }
    }

    fn won_with(key: &str) -> Claimed {
        Claimed::Won {
            key: key.to_owned(),
        }
    }

    fn claims(range: std::ops::Range<u128>) -> Vec<Claim> {
        range
            .map(|n| Claim {
                identity: identity(n),
                key: format!("k{n}"),
                take_over: false,
            })
            .collect()
    }

    fn row(n: u128, state: State) -> Row {
        let mut row = Row::new(identity(n), state, Some(format!("k{n}")));
        row.clears_doubt = true;
        row
    }

    #[test]
    fn runs_opening_one_new_journal_at_once_all_open_it() {
        // Switching a new file to WAL takes an exclusive lock that SQLite's busy timeout does
        // not wait for: the runs that lost the race failed with "database is locked".
        for _ in 0..20 {
            let path = fresh_dir().join("campaign.db");
            let opened: Vec<Result<SqliteJournal>> = std::thread::scope(|scope| {
                let runs: Vec<_> = (0..6)
                    .map(|_| scope.spawn(|| SqliteJournal::open(&path, Some("c"), LEASE)))
                    .collect();
                runs.into_iter().map(|run| run.join().unwrap()).collect()
            });
            for journal in opened {
                journal.unwrap();
            }
        }
    }

    #[tokio::test]
    async fn a_row_never_loses_a_result_or_a_doubt_to_an_outcome_of_not_sending() {
        let dir = fresh_dir();
        let journal = SqliteJournal::open(&dir.join("campaign.db"), Some("c"), LEASE).unwrap();
        let won = journal.claim(claims(0..6)).await.unwrap();
        assert!(won.iter().all(|claim| claim.is_won()));
        journal
            .write_durably(vec![
                row(0, State::Sent),
                row(1, State::Rejected),
                row(2, State::Unknown),
                row(5, State::Failed),
            ])
            .await
            .unwrap();
        let mut later = vec![
            row(0, State::Skipped),
            row(1, State::Failed),
            row(2, State::Skipped),
            row(3, State::Failed),
            row(4, State::Skipped),
            row(5, State::Skipped),
        ];
        for row in &mut later {
            // Rows 2 and 3 as a write that does not know the message never left.
            row.clears_doubt = !matches!(row.identity.fingerprint.0, 2 | 3);
        }
        journal.write_durably(later).await.unwrap();
        let states: Vec<State> = journal
            .lookup((0..9).map(identity).collect())
            .await
            .unwrap()
            .into_iter()
            .map(|row| row.state)
            .collect();
        assert_eq!(
            states,
            [
                State::Sent,
                State::Rejected,
                State::Unknown,
                State::Dispatched,
                State::Skipped,
                State::Skipped
            ]
        );
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn two_runs_never_both_win_a_message_and_a_gone_run_leaves_its_claims_in_doubt() {
        let dir = fresh_dir();
        let path = dir.join("campaign.db");
        let first = SqliteJournal::open(&path, Some("spring"), LEASE).unwrap();
        let second = SqliteJournal::open(&path, None, LEASE).unwrap();
        assert_eq!(second.campaign_id(), "spring");
        assert!(first
            .claim(claims(0..4))
            .await
            .unwrap()
            .iter()
            .all(|c| c.is_won()));
        let contested = second.claim(claims(2..6)).await.unwrap();
        assert!(matches!(&contested[0], Claimed::Lost(row) if row.held_elsewhere));
        assert!(matches!(&contested[1], Claimed::Lost(row) if row.held_elsewhere));
        assert_eq!(contested[2..], [won_with("k4"), won_with("k5")]);
        first
            .write_durably(vec![row(0, State::Sent)])
            .await
            .unwrap();
        drop(first);
        // The first run is gone: what it finished is done, what it held is in doubt.
        let after = second.lookup(vec![identity(0), identity(1)]).await.unwrap();
        assert_eq!(after[0].state, State::Sent);
        assert_eq!(after[1].state, State::Dispatched);
        assert!(!after[1].held_elsewhere);
        let mut take_over = claims(1..2);
        take_over[0].take_over = true;
        take_over[0].key = "other".into();
        // The run taking a message over is told the key its record holds, the one it may have
        // gone out with, not its own.
        assert_eq!(second.claim(take_over).await.unwrap(), [won_with("k1")]);
        let kept = second.lookup(vec![identity(1)]).await.unwrap();
        assert_eq!(
            kept[0].key.as_deref(),
            Some("k1"),
            "a taken-over message keeps its key"
        );
        drop(second);
        let refused = SqliteJournal::open(&path, Some("summer"), LEASE)
            .err()
            .unwrap()
            .to_string();
        assert!(
            refused.contains("belongs to campaign \"spring\""),
            "{refused}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_format_1_journal_is_moved_to_identities_keeping_keys_and_doubt() {
        let dir = fresh_dir();
        let path = dir.join("old.db");
        {
            let connection = Connection::open(&path).unwrap();
            connection
                .execute_batch(
                    "CREATE TABLE bizmsg_campaign (name TEXT PRIMARY KEY, value TEXT NOT NULL);
                     INSERT INTO bizmsg_campaign VALUES ('schema', '1'), ('campaign_id', 'old');
                     CREATE TABLE bizmsg_messages (idx INTEGER PRIMARY KEY, fingerprint TEXT,
                         idempotency_key TEXT, state TEXT NOT NULL, sms_id TEXT, code TEXT,
                         msg TEXT, updated_at REAL NOT NULL);",
                )
                .unwrap();
            let fingerprint = Fingerprint(7).to_hex();
            for (idx, state) in [(0, "sent"), (3, "dispatched"), (5, "skipped")] {
                connection
                    .execute(
                        "INSERT INTO bizmsg_messages VALUES (?1, ?2, ?3, ?4, NULL, NULL, NULL, 0)",
                        params![idx, fingerprint, format!("old-{idx}"), state],
                    )
                    .unwrap();
            }
        }
        let journal = SqliteJournal::open(&path, None, LEASE).unwrap();
        assert_eq!(journal.campaign_id(), "old");
        // Made before fingerprints were SHA-256: its messages stay known by xxh3.
        assert_eq!(journal.fingerprints(), FingerprintKind::Xxh3);
        let fresh = SqliteJournal::open(&dir.join("new.db"), None, LEASE).unwrap();
        assert_eq!(fresh.fingerprints(), FingerprintKind::Sha256);
        drop(fresh);
        let rows = journal
            .lookup(
                (0..3)
                    .map(|occurrence| Identity {
                        fingerprint: Fingerprint(7),
                        occurrence,
                    })
                    .collect(),
            )
            .await
            .unwrap();
        let seen: Vec<(State, Option<&str>, bool)> = rows
            .iter()
            .map(|row| (row.state, row.key.as_deref(), row.held_elsewhere))
            .collect();
        assert_eq!(
            seen,
            [
                (State::Sent, Some("old-0"), false),
                (State::Dispatched, Some("old-3"), false),
                (State::Skipped, Some("old-5"), false),
            ]
        );
        drop(journal);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
