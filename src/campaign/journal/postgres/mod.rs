//! The shared journal: PostgreSQL, for campaigns run by many processes on many hosts (Celery
//! workers, web workers, cron jobs). One database holds any number of campaigns, each known by
//! its `campaign_id`; its schema (`bizmsg`) is made on first use, under a lock so that processes
//! starting together do not race, and versioned.
//!
//! A run holds a session advisory lock for its life (taken before it records itself): the
//! server drops it when the run's connection ends, however the process ended, so another
//! process sees at once (`bizmsg.run_alive`, which reads `pg_locks`) that a run is gone and its
//! claims are in doubt. A heartbeat within the run's own lease (recorded with the run, with a
//! margin: `fence.rs`) is the fallback (a host that vanished leaves a half-open session until
//! TCP gives up; a frozen process keeps its session). A run that loses its own session stops
//! sending at once (its fence) and never reconnects, since its claims may meanwhile have been
//! taken for a dead run's; a run taken over is recorded `lost` by the taker, under its row's
//! lock, so its next round trip stops it too.
//!
//! One task owns the connection; every command that arrives while it works joins the next
//! transaction. Claims (the `claimed` marks) and dispatches (a message's row made `dispatched`
//! just before its request is written) are committed synchronously before what they allow
//! happens; results alone may be committed asynchronously (`synchronous_commit = off`): a result
//! lost in a crash of the server leaves its message `dispatched`, in doubt, the safe reading.
//!
//! The files: `target.rs` reads the URL (TLS, the name errors show); `schema.rs` makes the schema
//! or brings it to this version; `statements.rs` holds the statements a run prepares, and how
//! they are planned; `writer.rs` is the task that owns the connection, `transactions.rs` how it
//! runs a batch as transactions, and `records.rs` what those do to the messages' records;
//! `session.rs` checks that a run stays one server session (a pooler in transaction mode breaks
//! that). This file opens a run, is its callers' handle (`PostgresJournal`), and tells
//! PostgreSQL's errors as a person needs them (`describe`).

mod records;
mod schema;
mod session;
mod statements;
mod target;
#[cfg(test)]
mod tests;
mod transactions;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use uuid::Uuid;

use self::session::{backend_pid, pooled};
use self::statements::{Statements, PLANS};
pub use self::target::is_postgres_url;
use self::target::Target;
use self::writer::Writer;
use super::commands::{Command, CommandedStore};
use super::fence::stamp;
use super::ClaimFence;
use crate::campaign::message::FingerprintKind;
use crate::client::tls_config;
use crate::error::{Error, Result};

pub struct PostgresJournal {
    commands: mpsc::UnboundedSender<Command>,
    campaign_id: String,
    fingerprints: FingerprintKind,
    fence: Arc<ClaimFence>,
    /// The database as errors name it (no password).
    name: Arc<str>,
}

impl PostgresJournal {
    /// Connects, makes or checks the schema, and starts a run of `campaign_id` whose claims
    /// stand for `lease` without a sign of life. Must run on a runtime that keeps running (the
    /// connection's task is spawned on it): a campaign's.
    pub async fn open(url: &str, campaign_id: &str, lease: Duration) -> Result<PostgresJournal> {
        let target = Target::parse(url)?;
        let name: Arc<str> = Arc::from(target.name.as_str());
        let failed = |what: &str, error: &dyn std::fmt::Display| {
            Error::SharedState(format!("journal {name}: {what}: {error}"))
        };
        let failed_pg = |what: &str, error: &tokio_postgres::Error| failed(what, &describe(error));
        let tls = tls_config(&target.verify, &[]).map_err(|e| failed("TLS", &e))?;
        let registering = stamp();
        let (mut client, connection) = target
            .config
            .connect(tokio_postgres_rustls::MakeRustlsConnect::new(tls))
            .await
            .map_err(|e| failed_pg("cannot connect", &e))?;
        let fence = Arc::new(ClaimFence::new(lease, registering));
        let connection_name = Arc::clone(&name);
        let connection_fence = Arc::clone(&fence);
        let session_task = tokio::spawn(async move {
            // However it ends, its session's lock is gone with it: other runs may take this
            // run's claims at once, so it sends nothing more (its fence).
            let ended = connection.await;
            connection_fence.lose(format!("its PostgreSQL session ended ({connection_name})"));
            if let Err(error) = ended {
                log::error!(target: "bizmsg", "campaign journal {connection_name}: the connection ended: {error}");
            }
        });
        // A run is one server session: a pooler in transaction mode, which hands each
        // transaction to any session, is refused before anything else (two statements in a row
        // reach two sessions on a busy pool), and caught at every transaction after.
        let session = backend_pid(&client)
            .await
            .map_err(|e| failed_pg("cannot read its session", &e))?;
        let again = backend_pid(&client)
            .await
            .map_err(|e| failed_pg("cannot read its session", &e))?;
        if again != session {
            return Err(pooled(&name, session, again));
        }
        // Plans that stay right however big the journal grows (see PLANS), and durable
        // commits unless a transaction says otherwise (one of results alone): a claim never
        // relies on the server's default, and costs no statement of its own.
        client
            .batch_execute(&format!("{PLANS}; SET synchronous_commit = on"))
            .await
            .map_err(|e| failed_pg("cannot set how its statements are planned", &e))?;
        let (campaign, fingerprints) = schema::prepare(&mut client, campaign_id)
            .await
            .map_err(|e| failed("cannot prepare the schema", &e))?;
        let run = Uuid::new_v4();
        let lock_key = i64::from_le_bytes(fastrand::u64(..).to_le_bytes());

        // The lock first: a recorded run always holds it while alive.
        client
            .execute("SELECT pg_advisory_lock($1)", &[&lock_key])
            .await
            .map_err(|e| failed_pg("cannot lock this run", &e))?;
        client
            .execute(
                "INSERT INTO bizmsg.runs (id, campaign, lock_key, host, pid, lease_seconds) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &run,
                    &campaign,
                    &lock_key,
                    &super::sqlite::host(),
                    &i32::try_from(std::process::id()).unwrap_or(i32::MAX),
                    &lease.as_secs_f64(),
                ],
            )
            .await
            .map_err(|e| failed_pg("cannot record this run", &e))?;
        let later = backend_pid(&client)
            .await
            .map_err(|e| failed_pg("cannot read its session", &e))?;
        if later != session {
            return Err(pooled(&name, session, later));
        }
        let (commands, received) = mpsc::unbounded_channel();
        let statements = Statements::prepare(&client)
            .await
            .map_err(|e| failed_pg("cannot prepare its statements", &e))?;
        let writer = Writer {
            client,
            statements,
            campaign,
            run,
            session,
            name: Arc::clone(&name),
            fence: Arc::clone(&fence),
            taken: None,
            session_task,
        };
        tokio::spawn(writer.serve(received, lease));
        Ok(PostgresJournal {
            commands,
            campaign_id: campaign_id.to_owned(),
            fingerprints,
            fence,
            name,
        })
    }
}

impl CommandedStore for PostgresJournal {
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
        self.commands.send(command).map_err(|_| self.stopped())
    }

    fn stopped(&self) -> Error {
        Error::SharedState(format!("journal {}: its connection has ended", self.name))
    }
}

/// A PostgreSQL error as a person needs it: the server's message, its SQLSTATE and detail
/// (tokio-postgres's own text says only "db error" for them).
fn describe(error: &tokio_postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => {
            let mut text = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                text.push_str(&format!(": {detail}"));
            }
            text
        }
        // tokio-postgres says "error connecting to server" and keeps why (refused, timed out,
        // TLS, ...) in its source: said too.
        None => {
            let mut text = error.to_string();
            let mut cause = std::error::Error::source(error);
            while let Some(inner) = cause {
                let inner_text = inner.to_string();
                if !text.contains(&inner_text) {
                    text.push_str(&format!(": {inner_text}"));
                }
                cause = inner.source();
            }
            text
        }
    }
}
