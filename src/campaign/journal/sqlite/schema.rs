//! The journal file's tables and its format: made on first use (in WAL mode), or moved from an
//! earlier format, in one transaction that holds SQLite's write lock, so that processes opening
//! one new journal at once do not race; and the campaign id and the kind of fingerprint the file
//! keeps for good. Each format says here what it changed and why.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::BUSY_TIMEOUT;
use crate::campaign::journal::run_lock::{is_alive, lock_dir};
use crate::campaign::message::FingerprintKind;

/// Format 5: messages known by identity (format 1 knew them by position), runs with their own
/// lease (format 2 judged them by the reader's), claims, the kind of fingerprint the campaign's
/// identities are (format 3 knew only xxh3: a bizmsg of format 3 must not resume a campaign
/// whose messages it would not recognise), and the state `claimed` (format 4 wrote a claim as
/// `dispatched`, in doubt after a crash): a bizmsg of format 4 refuses a format-5 file, so that
/// it never reads a `claimed` row it does not know. The move from 4 changes no table (a format-4
/// file has no `claimed` row). A run of format 4 still open on the file goes on safely: it reads
/// a state it does not know as in doubt, held by its run while that run lives, and never writes
/// `claimed`; a `dispatched` row of its own stays in doubt here.
const SCHEMA: &str = "5";

pub(super) enum Setup {
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
pub(super) fn prepare(
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
        Some("3" | "4") => {}
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
