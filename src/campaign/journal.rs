//! The campaign journal: one SQLite row per message (index, fingerprint, idempotency key,
//! state, sms_id, code, msg), so a campaign interrupted by a crash or Ctrl-C can be run again
//! with the same input and send only what was never sent.
//!
//! Crash safety rests on one ordering: a message's row is written as `dispatched`, and that
//! write is committed, before its request can leave. After a crash, a message without a row
//! certainly never left; a `dispatched` row without a final state may have (it is in doubt,
//! like an unknown outcome). Marks are written for a few messages at a time, just ahead of
//! dispatch, so the doubt after a crash is limited to about the messages in flight.
//!
//! SQLite runs on a thread of its own; every command that arrives while it works joins the
//! next transaction, so writes are batched by how busy the campaign is. WAL with
//! `synchronous=NORMAL` makes each commit survive the process being killed.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::message::Fingerprint;
use crate::error::{Error, Result};

const SCHEMA: &str = "1";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Dispatched,
    Sent,
    Rejected,
    Unknown,
    Failed,
    Skipped,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Dispatched => "dispatched",
            State::Sent => "sent",
            State::Rejected => "rejected",
            State::Unknown => "unknown",
            State::Failed => "failed",
            State::Skipped => "skipped",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        [
            State::Dispatched,
            State::Sent,
            State::Rejected,
            State::Unknown,
            State::Failed,
            State::Skipped,
        ]
        .into_iter()
        .find(|state| state.as_str() == text)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub index: u64,
    pub fingerprint: Option<Fingerprint>,
    pub key: Option<String>,
    pub state: State,
    pub sms_id: Option<String>,
    pub code: Option<String>,
    pub msg: Option<String>,
    /// Whether this write may turn a `dispatched` or `unknown` row into `failed` or `skipped`
    /// (never sent). Only the run that marked the message, and knows it never left, may: a
    /// message in doubt since an earlier run stays in doubt whatever this run saw of it.
    pub clears_doubt: bool,
}

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

pub struct Journal {
    commands: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    campaign_id: String,
    path: PathBuf,
}

fn failed(path: &Path, what: &str, error: impl std::fmt::Display) -> Error {
    Error::Campaign(format!("journal {}: {what}: {error}", path.display()))
}

impl Journal {
    /// Opens (or creates) the journal at `path`. A journal keeps the campaign id it was made
    /// with (`campaign_id`, or a random one): running it with another id is refused.
    pub fn open(path: &Path, campaign_id: Option<&str>) -> Result<Journal> {
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
        Ok(Journal {
            commands: Some(commands),
            thread: Some(thread),
            campaign_id,
            path: path.to_owned(),
        })
    }

    pub fn campaign_id(&self) -> &str {
        &self.campaign_id
    }

    fn send(&self, command: Command) -> Result<()> {
        self.commands
            .as_ref()
            .and_then(|commands| commands.send(command).ok())
            .ok_or_else(|| failed(&self.path, "writer", "has stopped"))
    }

    /// The rows of messages `first..=last` recorded by earlier runs.
    pub async fn lookup(&self, first: u64, last: u64) -> Result<Vec<Row>> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Lookup { first, last, reply })?;
        answer
            .await
            .map_err(|_| failed(&self.path, "writer", "stopped"))?
    }

    /// Writes `rows` and waits until they are committed.
    pub async fn write_durably(&self, rows: Vec<Row>) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.send(Command::Write {
            rows,
            reply: Some(reply),
        })?;
        answer
            .await
            .map_err(|_| failed(&self.path, "writer", "stopped"))?
    }

    /// Writes `rows` in a coming transaction.
    pub fn write(&self, rows: Vec<Row>) -> Result<()> {
        self.send(Command::Write { rows, reply: None })
    }

    /// Commits everything written so far (and reports a write that failed earlier).
    pub async fn flush(&self) -> Result<()> {
        self.write_durably(Vec::new()).await
    }

    /// Stops the writer after it committed everything queued; waits for it.
    pub fn close(&mut self) {
        self.commands = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Journal {
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
        let journal = Journal::open(&dir.join("campaign.db"), Some("c")).unwrap();
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
            let journal = Journal::open(&path, Some("spring")).unwrap();
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
        let journal = Journal::open(&path, None).unwrap();
        assert_eq!(journal.campaign_id(), "spring");
        let rows = journal.lookup(0, 9).await.unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].state, State::Sent);
        assert_eq!(rows[0].sms_id.as_deref(), Some("sms_1"));
        assert_eq!(rows[0].fingerprint, Some(Fingerprint(0)));
        assert_eq!(rows[1].state, State::Dispatched);
        assert_eq!(rows[2].index, 5);
        drop(journal);
        let refused = Journal::open(&path, Some("summer"))
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
