//! The embedded journal: one SQLite file per campaign, one row per message (index,
//! fingerprint, idempotency key, state, sms_id, code, msg).
//!
//! SQLite runs on a thread of its own; every command that arrives while it works joins the
//! next transaction, so writes are batched by how busy the campaign is. WAL with
//! `synchronous=NORMAL` makes each commit survive the process being killed.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use futures::future::BoxFuture;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::{JournalStore, Row, State};
use crate::campaign::message::Fingerprint;
use crate::error::{Error, Result};

const SCHEMA: &str = "1";

enum Command {
    Lookup {
        first: u64,
        last: u64,
        reply: oneshot::Sender<Result<Vec<Row>>>,
    },
    Write {
        rows: Vec<Row>,
        /// Told once the rows are committed (dispatch marks wait for it).
        reply: Option<oneshot::Sender<Result<()>>>,
    },
}

pub struct SqliteJournal {
    commands: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    campaign_id: String,
    path: PathBuf,
}

fn failed(path: &Path, what: &str, error: impl std::fmt::Display) -> Error {
    Error::Campaign(format!("journal {}: {what}: {error}", path.display()))
}

impl SqliteJournal {
    /// Opens (or creates) the journal at `path`. A journal keeps the campaign id it was made
    /// with (`campaign_id`, or a random one): running it with another id is refused.
    pub fn open(path: &Path, campaign_id: Option<&str>) -> Result<SqliteJournal> {
        let connection = Connection::open(path).map_err(|e| failed(path, "cannot be opened", e))?;
        let campaign_id = prepare(&connection, campaign_id).map_err(|e| match e {
            Setup::Sqlite(e) => failed(path, "is not usable", e),
            Setup::Refused(message) => {
                Error::Campaign(format!("journal {}: {message}", path.display()))
            }
        })?;
        let (commands, received) = mpsc::channel();
        let thread_path = path.to_owned();
        let thread = std::thread::Builder::new()
            .name("bizmsg-journal".to_owned())
            .spawn(move || serve(connection, &thread_path, received))
            .map_err(|e| failed(path, "cannot start its writer thread", e))?;
        Ok(SqliteJournal {
            commands: Some(commands),
            thread: Some(thread),
            campaign_id,
            path: path.to_owned(),
        })
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .as_ref()
            .and_then(|commands| commands.send(command).ok())
            .ok_or_else(|| failed(&self.path, "writer", "has stopped"))
    }

    /// Stops the writer after it committed everything queued; waits for it.
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

    fn lookup(&self, first: u64, last: u64) -> BoxFuture<'_, Result<Vec<Row>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Lookup { first, last, reply })?;
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

fn prepare(
    connection: &Connection,
    campaign_id: Option<&str>,
) -> std::result::Result<String, Setup> {
    connection.pragma_update(None, "journal_mode", "WAL")?;
    connection.pragma_update(None, "synchronous", "NORMAL")?;
    connection.execute_batch(
        "CREATE TABLE IF NOT EXISTS bizmsg_campaign (name TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS bizmsg_messages (
             idx INTEGER PRIMARY KEY,
             fingerprint TEXT,
             idempotency_key TEXT,
             state TEXT NOT NULL,
             sms_id TEXT,
             code TEXT,
             msg TEXT,
             updated_at REAL NOT NULL
         );",
    )?;
    let setting = |name: &str| -> rusqlite::Result<Option<String>> {
        connection
            .query_row(
                "SELECT value FROM bizmsg_campaign WHERE name = ?1",
                [name],
                |row| row.get(0),
            )
            .optional()
    };
    match setting("schema")? {
        Some(schema) if schema != SCHEMA => {
            return Err(Setup::Refused(format!(
                "was written by another version of bizmsg (journal format {schema}, this one \
                 reads {SCHEMA})"
            )))
        }
        Some(_) => {}
        None => {
            connection.execute(
                "INSERT INTO bizmsg_campaign (name, value) VALUES ('schema', ?1)",
                [SCHEMA],
            )?;
        }
    }
    match (setting("campaign_id")?, campaign_id) {
        (Some(recorded), Some(given)) if recorded != given => Err(Setup::Refused(format!(
            "belongs to campaign {recorded:?}, not {given:?}; use another journal file for \
             another campaign"
        ))),
        (Some(recorded), _) => Ok(recorded),
        (None, given) => {
            let id = given
                .map(str::to_owned)
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            connection.execute(
                "INSERT INTO bizmsg_campaign (name, value) VALUES ('campaign_id', ?1)",
                [&id],
            )?;
            Ok(id)
        }
    }
}

/// Tells a waiting caller how its command's transaction went (`Some(failure)` if it failed).
type Reply = Box<dyn FnOnce(Option<&str>)>;

fn serve(mut connection: Connection, path: &Path, commands: mpsc::Receiver<Command>) {
    // A write that failed with nobody waiting is reported to the next one who waits.
    let mut earlier_failure: Option<String> = None;
    while let Ok(first) = commands.recv() {
        let mut batch = vec![first];
        while let Ok(more) = commands.try_recv() {
            batch.push(more);
        }
        let mut replies: Vec<Reply> = Vec::new();
        let outcome = run_batch(&mut connection, batch, &mut replies);
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
    }
}

fn run_batch(
    connection: &mut Connection,
    batch: Vec<Command>,
    replies: &mut Vec<Reply>,
) -> rusqlite::Result<()> {
    let transaction = connection.transaction()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default();
    for command in batch {
        match command {
            Command::Lookup { first, last, reply } => {
                let rows = lookup(&transaction, first, last);
                replies.push(Box::new(move |failure: Option<&str>| {
                    let _ = reply.send(match (rows, failure) {
                        (Ok(rows), None) => Ok(rows),
                        (Err(e), _) => Err(Error::Campaign(format!("journal: {e}"))),
                        (_, Some(failure)) => Err(Error::Campaign(format!("journal: {failure}"))),
                    });
                }));
            }
            Command::Write { rows, reply } => {
                let mut statement = transaction.prepare_cached(
                    "INSERT INTO bizmsg_messages
                         (idx, fingerprint, idempotency_key, state, sms_id, code, msg, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                     ON CONFLICT(idx) DO UPDATE SET
                         fingerprint = coalesce(excluded.fingerprint, fingerprint),
                         idempotency_key = coalesce(excluded.idempotency_key, idempotency_key),
                         state = excluded.state, sms_id = excluded.sms_id,
                         code = excluded.code, msg = excluded.msg,
                         updated_at = excluded.updated_at
                     -- A row never loses what it says about a message that may have left: a
                     -- final result stays, and doubt is cleared only by a result or by the run
                     -- that marked the message (?9), never by an outcome of not sending it.
                     WHERE state NOT IN ('sent', 'rejected')
                       AND NOT (state IN ('dispatched', 'unknown')
                                AND excluded.state IN ('failed', 'skipped') AND NOT ?9)",
                )?;
                for row in &rows {
                    statement.execute(params![
                        i64::try_from(row.index).unwrap_or(i64::MAX),
                        row.fingerprint.map(Fingerprint::to_hex),
                        row.key,
                        row.state.as_str(),
                        row.sms_id,
                        row.code,
                        row.msg,
                        now,
                        row.clears_doubt
                    ])?;
                }
                if let Some(reply) = reply {
                    replies.push(Box::new(move |failure: Option<&str>| {
                        let _ = reply.send(match failure {
                            None => Ok(()),
                            Some(failure) => Err(Error::Campaign(format!("journal: {failure}"))),
                        });
                    }));
                }
            }
        }
    }
    transaction.commit()
}

fn lookup(connection: &Connection, first: u64, last: u64) -> rusqlite::Result<Vec<Row>> {
    let mut statement = connection.prepare_cached(
        "SELECT idx, fingerprint, idempotency_key, state, sms_id, code, msg
         FROM bizmsg_messages WHERE idx BETWEEN ?1 AND ?2 ORDER BY idx",
    )?;
    let as_sql = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let rows = statement.query_map(params![as_sql(first), as_sql(last)], |row| {
        let index: i64 = row.get(0)?;
        let fingerprint: Option<String> = row.get(1)?;
        let state: String = row.get(3)?;
        Ok(Row {
            index: u64::try_from(index).unwrap_or_default(),
            fingerprint: fingerprint.as_deref().and_then(Fingerprint::from_hex),
            key: row.get(2)?,
            // An unreadable state is treated as in doubt, the safe reading.
            state: State::parse(&state).unwrap_or(State::Dispatched),
            sms_id: row.get(4)?,
            code: row.get(5)?,
            msg: row.get(6)?,
            clears_doubt: false,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A new, empty directory for one test's journal.
    fn fresh_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bizmsg-journal-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn row(index: u64, state: State) -> Row {
        Row {
            index,
            fingerprint: Some(Fingerprint(index.into())),
            key: Some(format!("k{index}")),
            state,
            sms_id: None,
            code: None,
            msg: None,
            clears_doubt: true,
        }
    }

    #[tokio::test]
    async fn a_row_never_loses_a_result_or_a_doubt_to_an_outcome_of_not_sending() {
        let dir = fresh_dir();
        let journal = SqliteJournal::open(&dir.join("campaign.db"), Some("c")).unwrap();
        journal
            .write_durably(vec![
                row(0, State::Sent),
                row(1, State::Rejected),
                row(2, State::Unknown),
                row(3, State::Dispatched),
                row(4, State::Dispatched),
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
            // Rows 0-3 come from a later run that did not mark them; row 4 from the run
            // that marked it and never sent it.
            row.clears_doubt = row.index >= 4;
        }
        journal.write_durably(later).await.unwrap();
        let states: Vec<State> = journal
            .lookup(0, 9)
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
        // A result clears a doubt whoever reports it.
        let mut sent = row(2, State::Sent);
        sent.clears_doubt = false;
        journal.write_durably(vec![sent]).await.unwrap();
        let rows = journal.lookup(2, 2).await.unwrap();
        assert_eq!(rows.first().map(|row| row.state), Some(State::Sent));
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn rows_survive_reopening_and_the_campaign_id_is_kept() {
        let dir = fresh_dir();
        let path = dir.join("campaign.db");
        {
            let journal = SqliteJournal::open(&path, Some("spring")).unwrap();
            journal
                .write_durably(vec![row(0, State::Dispatched), row(1, State::Dispatched)])
                .await
                .unwrap();
            let mut sent = row(0, State::Sent);
            sent.sms_id = Some("sms_1".into());
            sent.fingerprint = None; // a finish keeps the recorded fingerprint
            journal.write(vec![sent, row(5, State::Failed)]).unwrap();
            journal.flush().await.unwrap();
        }
        let journal = SqliteJournal::open(&path, None).unwrap();
        assert_eq!(journal.campaign_id(), "spring");
        let rows = journal.lookup(0, 9).await.unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].state, State::Sent);
        assert_eq!(rows[0].sms_id.as_deref(), Some("sms_1"));
        assert_eq!(rows[0].fingerprint, Some(Fingerprint(0)));
        assert_eq!(rows[1].state, State::Dispatched);
        assert_eq!(rows[2].index, 5);
        drop(journal);
        let refused = SqliteJournal::open(&path, Some("summer"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            refused.contains("belongs to campaign \"spring\""),
            "{refused}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
