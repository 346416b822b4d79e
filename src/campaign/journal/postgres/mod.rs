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
//! transaction. Claims (the `dispatched` marks) are committed synchronously before anything is
//! sent; results may be committed asynchronously (`synchronous_commit = off`): a result lost in
//! a crash of the server leaves its message `dispatched`, in doubt, the safe reading.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::config::SslMode;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Statement, Transaction};
use uuid::Uuid;

use super::fence::{heartbeat_every, stamp, TAKE_OVER_AFTER};
use super::{Claim, ClaimFence, Claimed, Identity, JournalStore, Row, State};
use crate::campaign::message::{Fingerprint, FingerprintKind};
use crate::client::{tls_config, Verify};
use crate::error::{Error, Result};

/// The version of the `bizmsg` schema this code reads and writes.
const SCHEMA_VERSION: i32 = 4;
/// The advisory lock (transaction-level) that makes creating or changing the schema one step
/// for all processes: a constant of bizmsg's own ("bizmsg" in ASCII).
const SCHEMA_LOCK: i64 = 0x0000_6269_7a6d_7367;
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The messages' primary key starts with the message, then its campaign: an index that starts
/// with the campaign lets the planner read a whole campaign to find a few of its messages,
/// which it did (a campaign of 50,000 messages slowed from 90 µs a write to 500 as it grew,
/// see PLANS), and one whose campaign came last would read a message's rows of every campaign
/// (a daily campaign to one list). Nothing is indexed by campaign alone, on purpose: a
/// question about a whole campaign (`psql`) reads the table. Version 1 (development builds
/// only) had the campaign first; version 2 only reorders the key, rebuilding the index while
/// the table is locked.
const MESSAGES_KEY: &str = "
    ALTER TABLE bizmsg.messages DROP CONSTRAINT messages_pkey,
        ADD CONSTRAINT messages_pkey PRIMARY KEY (fingerprint, campaign, occurrence)";

const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS bizmsg.campaigns (
        id bigserial PRIMARY KEY,
        name text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS bizmsg.runs (
        id uuid PRIMARY KEY,
        campaign bigint NOT NULL REFERENCES bizmsg.campaigns (id),
        lock_key bigint NOT NULL UNIQUE,
        state text NOT NULL DEFAULT 'running',
        host text,
        pid integer,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now(),
        ended_at timestamptz,
        -- The run's own lease: others judge its heartbeat by it, not by theirs.
        lease_seconds double precision NOT NULL DEFAULT 300
    );
    CREATE TABLE IF NOT EXISTS bizmsg.messages (
        campaign bigint NOT NULL REFERENCES bizmsg.campaigns (id),
        fingerprint uuid NOT NULL,
        occurrence integer NOT NULL,
        idempotency_key text,
        state text NOT NULL,
        run_id uuid,
        inherited_doubt boolean NOT NULL DEFAULT false,
        sms_id text,
        code text,
        msg text,
        updated_at timestamptz NOT NULL DEFAULT now(),
        -- The message first: see MESSAGES_KEY.
        CONSTRAINT messages_pkey PRIMARY KEY (fingerprint, campaign, occurrence)
    );
";

/// Whether a run is alive: recorded running, with a heartbeat within its own lease and a margin
/// (`fence::TAKE_OVER_AFTER`), and its session's advisory lock held, or, once its session is
/// gone, a heartbeat within `fence::SESSION_GRACE`: a session can end without its process
/// knowing (a failover, a connection cut in the middle), and such a run sends on until its
/// fence's window closes. (A bigint advisory lock shows in pg_locks as its high and low 32
/// bits, objsubid 1.) `bizmsg.run_is_alive` judges a row the caller has read (locked, for a
/// take-over: see `claim`); `bizmsg.run_alive` looks it up; `bizmsg.run_settling` tells a run
/// alive only for that grace, whose claims will be in doubt in moments.
const RUN_ALIVE: &str = "
    CREATE OR REPLACE FUNCTION bizmsg.run_session_held(r bizmsg.runs)
    RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT EXISTS (
            SELECT 1 FROM pg_locks l
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND l.classid = ((r.lock_key >> 32) & 4294967295)::oid
              AND l.objid = (r.lock_key & 4294967295)::oid)
    $$;
    CREATE OR REPLACE FUNCTION bizmsg.run_is_alive(r bizmsg.runs)
    RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT r.state = 'running'
           AND r.heartbeat_at > now() - make_interval(secs => r.lease_seconds * 1.25)
           AND (r.heartbeat_at > now() - interval '5 seconds'
                OR bizmsg.run_session_held(r))
    $$;
    CREATE OR REPLACE FUNCTION bizmsg.run_alive(run uuid)
    RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT coalesce((SELECT bizmsg.run_is_alive(r) FROM bizmsg.runs r WHERE r.id = run),
                        false)
    $$;
    CREATE OR REPLACE FUNCTION bizmsg.run_settling(run uuid)
    RETURNS boolean LANGUAGE sql STABLE AS $$
        SELECT coalesce((SELECT bizmsg.run_is_alive(r) AND NOT bizmsg.run_session_held(r)
                         FROM bizmsg.runs r WHERE r.id = run), false)
    $$;";

/// Version 2 judged every run by the reader's lease: each run's own is recorded from version 3
/// (runs recorded before keep the default lease, 300 s).
const OWN_LEASES: &str = "
    ALTER TABLE bizmsg.runs
        ADD COLUMN IF NOT EXISTS lease_seconds double precision NOT NULL DEFAULT 300;
    DROP FUNCTION IF EXISTS bizmsg.run_alive(uuid, double precision);";

/// Version 3 knew messages only by xxh3 fingerprints: from version 4 each campaign records how
/// its fingerprints are computed. Campaigns recorded before keep xxh3 (they resume with the
/// identities and derived keys they began with); a campaign made now is SHA-256. A bizmsg of
/// version 3 refuses the schema, so it never resumes a campaign it would not recognise.
const FINGERPRINT_KINDS: &str = "
    ALTER TABLE bizmsg.campaigns
        ADD COLUMN IF NOT EXISTS fingerprint text NOT NULL DEFAULT 'xxh3';";

/// How the journal's statements are planned, for the session. Each statement finds its messages
/// by the primary key's first columns, `fingerprint = ANY ($n) AND campaign = $1`, so what it
/// reads is bounded by the messages it is given, whatever the planner estimates. It estimates
/// badly here: a campaign fills its journal faster than autovacuum analyzes it. With the
/// campaign first in the key and each statement planned for its values, the planner took a
/// campaign's rows for a few hundred and read all of them to write each batch: a campaign of
/// 50,000 messages slowed from 90 µs a write to 500 as its journal grew, at a fifth of SQLite's
/// speed. Plans are made once per connection (generic: no planning per batch), never as a
/// sequential scan, which a plan made while the journal was still empty would otherwise keep
/// once it holds millions, and never join a batch's messages to its rows by a nested loop:
/// planned for the ten rows it assumes an array holds, that compared every message with every
/// row, and a batch of 500 took 120 ms.
/// (`plan_cache_mode` is PostgreSQL 12's; 11 and older are out of support.)
const PLANS: &str = "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; \
                     SET enable_nestloop = off";

/// Each message's record, and whether the run that holds it in doubt is alive.
const LOOKUP: &str = "
    SELECT m.fingerprint, m.occurrence, m.idempotency_key, m.state, m.sms_id, m.code, m.msg,
           m.state IN ('dispatched', 'unknown') AND m.run_id IS DISTINCT FROM $3
               AND bizmsg.run_alive(m.run_id),
           m.state IN ('dispatched', 'unknown') AND m.run_id IS DISTINCT FROM $3
               AND bizmsg.run_settling(m.run_id)
    FROM bizmsg.messages m
    JOIN unnest($2::uuid[], $4::int4[]) AS i (f, o)
      ON m.fingerprint = i.f AND m.occurrence = i.o
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])";

/// Claims (see `claim`). `inherited_doubt` of the inserted tuple carries the claim's take-over
/// wish into the conflict arm; a row actually taken over keeps its key and its doubt. A row is
/// taken over only from a run in `$7`, the runs judged dead from their locked rows: the
/// statement's own snapshot could be older than a run that claimed a row while this waited for
/// it. Every row won returns the key it holds now, the one the message goes out with.
const CLAIM: &str = "
    INSERT INTO bizmsg.messages AS m
        (campaign, fingerprint, occurrence, idempotency_key, state, run_id,
         inherited_doubt)
    SELECT $1, i.f, i.o, i.k, 'dispatched', $2, i.t
    FROM unnest($3::uuid[], $4::int4[], $5::text[], $6::bool[]) AS i (f, o, k, t)
    ORDER BY i.f, i.o
    ON CONFLICT (campaign, fingerprint, occurrence) DO UPDATE
    SET state = 'dispatched', run_id = excluded.run_id,
        inherited_doubt = (m.state IN ('dispatched', 'unknown')
                           AND (m.run_id IS DISTINCT FROM excluded.run_id
                                OR m.inherited_doubt)),
        idempotency_key = CASE WHEN m.state IN ('dispatched', 'unknown')
                               THEN m.idempotency_key
                               ELSE excluded.idempotency_key END,
        sms_id = NULL, code = NULL, msg = NULL, updated_at = now()
    WHERE (m.run_id IS NOT DISTINCT FROM excluded.run_id AND m.state NOT IN ('sent', 'rejected'))
       OR m.state IN ('failed', 'skipped')
       OR (excluded.inherited_doubt AND m.state IN ('dispatched', 'unknown')
           AND (m.run_id IS NULL OR m.run_id = ANY ($7::uuid[])))
    RETURNING m.fingerprint, m.occurrence, m.idempotency_key";

/// The runs other than this one (`$4`) holding these messages in doubt, and whether each is
/// recorded at all (a run whose record was deleted is gone).
const HOLDERS: &str = "
    SELECT DISTINCT m.run_id, EXISTS (SELECT 1 FROM bizmsg.runs r WHERE r.id = m.run_id)
    FROM bizmsg.messages m
    JOIN unnest($2::uuid[], $3::int4[]) AS i (f, o)
      ON m.fingerprint = i.f AND m.occurrence = i.o
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])
      AND m.state IN ('dispatched', 'unknown') AND m.run_id IS NOT NULL
      AND m.run_id <> $4";

/// Locks the runs holding rows a claim would take over, in one order, and judges each from its
/// locked row (the newest version, whatever the statement's snapshot): a holder's heartbeat
/// cannot then confirm it alive after it was judged dead. A run whose row is locked now is in
/// a transaction of its own (or being judged by another run): it is skipped, taken for alive
/// this time, so that a run frozen inside a transaction never blocks the others.
const JUDGE_HOLDERS: &str = "
    SELECT r.id, bizmsg.run_is_alive(r) FROM bizmsg.runs r
    WHERE r.id = ANY ($1::uuid[]) ORDER BY r.id FOR UPDATE SKIP LOCKED";

/// Records the runs whose claims are taken over as lost, in the taking transaction: their next
/// round trip (`ALIVE`) stops them.
const MARK_LOST: &str = "
    UPDATE bizmsg.runs SET state = 'lost', ended_at = now()
    WHERE id = ANY ($1::uuid[]) AND state = 'running'";

/// Of the messages a claim asks for that are recorded, which this run may claim (a record of
/// its own without a result, one never sent, or, taken over, one in doubt whose holder is in
/// `$6`, the dead), and, of those, the ones it locked now for the claim. Only such rows are
/// locked, never a live run's: a run frozen inside this transaction (SIGSTOP, a debugger)
/// then blocks nobody's writes. A claimable row another transaction holds now (a run frozen
/// inside one) is skipped, not waited for, and reported held by another run.
const LOCK_CLAIMABLE: &str = "
    WITH wanted AS (
        SELECT m.fingerprint, m.occurrence,
               (m.run_id = $4 AND m.state NOT IN ('sent', 'rejected'))
               OR m.state IN ('failed', 'skipped')
               OR (i.t AND m.state IN ('dispatched', 'unknown')
                   AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[]))) AS claimable
        FROM bizmsg.messages m
        JOIN unnest($2::uuid[], $3::int4[], $5::bool[]) AS i (f, o, t)
          ON m.fingerprint = i.f AND m.occurrence = i.o
        WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])),
    locked AS MATERIALIZED (
        SELECT m.fingerprint, m.occurrence FROM bizmsg.messages m
        JOIN unnest($2::uuid[], $3::int4[], $5::bool[]) AS i (f, o, t)
          ON m.fingerprint = i.f AND m.occurrence = i.o
        WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])
          AND ((m.run_id = $4 AND m.state NOT IN ('sent', 'rejected'))
               OR m.state IN ('failed', 'skipped')
               OR (i.t AND m.state IN ('dispatched', 'unknown')
                   AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[]))))
        ORDER BY m.fingerprint, m.occurrence
        FOR UPDATE OF m SKIP LOCKED)
    SELECT w.fingerprint, w.occurrence, w.claimable,
           EXISTS (SELECT 1 FROM locked l
                   WHERE l.fingerprint = w.fingerprint AND l.occurrence = w.occurrence)
    FROM wanted w";

/// Locks the rows a claim or a write changes, in the claims' order (see `write`), with the run
/// holding each.
const LOCK_ROWS: &str = "
    SELECT m.fingerprint, m.occurrence, m.run_id, m.state FROM bizmsg.messages m
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])
      AND (m.fingerprint, m.occurrence) IN (SELECT * FROM unnest($2::uuid[], $3::int4[]))
    ORDER BY m.fingerprint, m.occurrence
    FOR UPDATE";

/// Writes the records of messages this run holds, never losing a result or a doubt.
const WRITE_ROWS: &str = "
    UPDATE bizmsg.messages AS m
    SET state = u.s, idempotency_key = coalesce(u.k, m.idempotency_key),
        sms_id = u.sms, code = u.code, msg = u.msg, updated_at = now()
    FROM unnest($3::uuid[], $4::int4[], $5::text[], $6::text[], $7::text[],
                $8::text[], $9::text[], $10::bool[])
         AS u (f, o, s, k, sms, code, msg, clears)
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($3::uuid[])
      AND m.fingerprint = u.f AND m.occurrence = u.o
      AND m.run_id = $2 AND m.state NOT IN ('sent', 'rejected')
      AND NOT (m.state IN ('dispatched', 'unknown') AND u.s IN ('failed', 'skipped')
               AND (m.inherited_doubt OR NOT u.clears))";

/// Every transaction's first statement: the run's heartbeat, whether it is still taken for
/// alive, and the server process of its session (see `Writer::same_session`).
const ALIVE: &str = "UPDATE bizmsg.runs SET heartbeat_at = now() WHERE id = $1 \
                     RETURNING state = 'running', pg_backend_pid()";

/// The statements a run uses for every batch, prepared once on its connection: a statement
/// prepared per use costs a round trip of its own, and its plan, each time.
struct Statements {
    alive: Statement,
    lookup: Statement,
    claim: Statement,
    lock_claimable: Statement,
    holders: Statement,
    judge_holders: Statement,
    mark_lost: Statement,
    lock_rows: Statement,
    write_rows: Statement,
}

impl Statements {
    async fn prepare(client: &Client) -> std::result::Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            alive: client.prepare(ALIVE).await?,
            lookup: client.prepare(LOOKUP).await?,
            claim: client.prepare(CLAIM).await?,
            lock_claimable: client.prepare(LOCK_CLAIMABLE).await?,
            holders: client.prepare(HOLDERS).await?,
            judge_holders: client.prepare(JUDGE_HOLDERS).await?,
            mark_lost: client.prepare(MARK_LOST).await?,
            lock_rows: client.prepare(LOCK_ROWS).await?,
            write_rows: client.prepare(WRITE_ROWS).await?,
        })
    }
}

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
        reply: Option<oneshot::Sender<Result<()>>>,
    },
    /// The run ends (after what was queued before): told once its session is closed.
    End { reply: oneshot::Sender<()> },
}

pub struct PostgresJournal {
    commands: mpsc::UnboundedSender<Command>,
    campaign_id: String,
    fingerprints: FingerprintKind,
    fence: Arc<ClaimFence>,
    /// The database as errors name it (no password).
    name: Arc<str>,
}

/// Where the journal is: the connection settings, and how TLS is checked (`sslmode`).
struct Target {
    config: Config,
    verify: Verify,
    name: String,
}

/// Whether `journal` names a PostgreSQL database rather than a file.
pub fn is_postgres_url(journal: &str) -> bool {
    let lower = journal.trim_start().to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

impl Target {
    /// `postgresql://user:password@host:port/db?sslmode=...&sslrootcert=...` (also
    /// `postgres://`). `sslmode` has libpq's meanings: `disable`; `allow` and `prefer` (TLS
    /// when the server offers it, the certificate not checked); `require` (TLS, not checked);
    /// `verify-ca` and `verify-full` (TLS, checked against the system's roots or
    /// `sslrootcert`, host name included: bizmsg does not skip the host check for
    /// `verify-ca`).
    fn parse(url: &str) -> Result<Target> {
        let name = crate::limits::redact_url(url);
        let refuse = |why: String| Error::validation("journal", format!("{name}: {why}"));
        let mut parsed = url::Url::parse(url.trim())
            .ok()
            .filter(url::Url::has_host)
            .ok_or_else(|| {
                refuse("not a URL: expected postgresql://user:password@host:port/database".into())
            })?;
        let mut sslmode = None;
        let mut rootcert = None;
        let mut kept: Vec<(String, String)> = Vec::new();
        for (key, value) in parsed.query_pairs() {
            match key.as_ref() {
                "sslmode" => sslmode = Some(value.into_owned()),
                "sslrootcert" => rootcert = Some(value.into_owned()),
                _ => kept.push((key.into_owned(), value.into_owned())),
            }
        }
        if kept.is_empty() {
            parsed.set_query(None);
        } else {
            parsed.query_pairs_mut().clear().extend_pairs(kept);
        }
        let mut config: Config = parsed
            .as_str()
            .parse()
            .map_err(|e: tokio_postgres::Error| {
                // The cause ("unknown option `x`") is the error's source.
                let cause = std::error::Error::source(&e).map(ToString::to_string);
                refuse(cause.map_or_else(|| e.to_string(), |cause| format!("{e}: {cause}")))
            })?;
        let (mode, verify) = match sslmode.as_deref().unwrap_or("prefer") {
            "disable" => (SslMode::Disable, Verify::Disabled),
            "allow" | "prefer" => (SslMode::Prefer, Verify::Disabled),
            "require" => (SslMode::Require, Verify::Disabled),
            "verify-ca" | "verify-full" => (
                SslMode::Require,
                match &rootcert {
                    Some(path) => Verify::CaBundle(path.into()),
                    None => Verify::Default,
                },
            ),
            other => {
                return Err(refuse(format!(
                    "sslmode={other:?} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
                )))
            }
        };
        if config.get_dbname().is_none() {
            return Err(refuse("names no database".to_owned()));
        }
        config
            .ssl_mode(mode)
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .application_name("bizmsg");
        Ok(Target {
            config,
            verify,
            name,
        })
    }
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
        let (campaign, fingerprints) = prepare(&mut client, campaign_id)
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

    fn send(&self, command: Command) -> Result<()> {
        self.commands.send(command).map_err(|_| self.stopped())
    }

    fn stopped(&self) -> Error {
        Error::SharedState(format!("journal {}: its connection has ended", self.name))
    }
}

/// Makes the schema on first use (or checks its version) and the campaign's row; returns the
/// campaign's id.
async fn prepare(
    client: &mut Client,
    campaign_id: &str,
) -> std::result::Result<(i64, FingerprintKind), Error> {
    let sql = |e: tokio_postgres::Error| Error::Campaign(describe(&e));
    let transaction = client.transaction().await.map_err(sql)?;
    transaction
        .execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
        .await
        .map_err(sql)?;
    transaction
        .batch_execute(
            "CREATE SCHEMA IF NOT EXISTS bizmsg;
             CREATE TABLE IF NOT EXISTS bizmsg.meta (name text PRIMARY KEY, value text NOT NULL);",
        )
        .await
        .map_err(sql)?;
    let version = transaction
        .query_opt(
            "SELECT value FROM bizmsg.meta WHERE name = 'schema_version'",
            &[],
        )
        .await
        .map_err(sql)?
        .map(|row| row.get::<_, String>(0));
    match version.as_deref().map(str::parse::<i32>) {
        None => {
            transaction.batch_execute(SCHEMA).await.map_err(sql)?;
            transaction.batch_execute(RUN_ALIVE).await.map_err(sql)?;
            transaction
                .batch_execute(FINGERPRINT_KINDS)
                .await
                .map_err(sql)?;
            transaction
                .execute(
                    "INSERT INTO bizmsg.meta (name, value) VALUES ('schema_version', $1)",
                    &[&SCHEMA_VERSION.to_string()],
                )
                .await
                .map_err(sql)?;
        }
        Some(Ok(SCHEMA_VERSION)) => {}
        Some(Ok(version @ (1..=3))) => {
            if version == 1 {
                // Made by a development build: the key's order differs.
                transaction.batch_execute(MESSAGES_KEY).await.map_err(sql)?;
            }
            if version < 3 {
                transaction.batch_execute(OWN_LEASES).await.map_err(sql)?;
                transaction.batch_execute(RUN_ALIVE).await.map_err(sql)?;
            }
            transaction
                .batch_execute(FINGERPRINT_KINDS)
                .await
                .map_err(sql)?;
            transaction
                .execute(
                    "UPDATE bizmsg.meta SET value = $1 WHERE name = 'schema_version'",
                    &[&SCHEMA_VERSION.to_string()],
                )
                .await
                .map_err(sql)?;
        }
        Some(other) => {
            return Err(Error::Campaign(format!(
                "the bizmsg schema there is version {}, this bizmsg reads {SCHEMA_VERSION}: \
                 use the bizmsg version that made it",
                other.map_or_else(|_| version.clone().unwrap_or_default(), |v| v.to_string())
            )))
        }
    }
    transaction
        .execute(
            "INSERT INTO bizmsg.campaigns (name, fingerprint) VALUES ($1, $2)
             ON CONFLICT (name) DO NOTHING",
            &[&campaign_id, &FingerprintKind::Sha256.name()],
        )
        .await
        .map_err(sql)?;
    let found = transaction
        .query_one(
            "SELECT id, fingerprint FROM bizmsg.campaigns WHERE name = $1",
            &[&campaign_id],
        )
        .await
        .map_err(sql)?;
    let kind: String = found.get(1);
    let fingerprints = FingerprintKind::from_name(&kind).ok_or_else(|| {
        Error::Campaign(format!(
            "campaign {campaign_id:?} knows its messages by a fingerprint this bizmsg does not \
             compute ({kind:?})"
        ))
    })?;
    transaction.commit().await.map_err(sql)?;
    Ok((found.get(0), fingerprints))
}

impl JournalStore for PostgresJournal {
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
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn claim(&self, claims: Vec<Claim>) -> BoxFuture<'_, Result<Vec<Claimed>>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Claim { claims, reply })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn write_durably(&self, rows: Vec<Row>) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            self.send(Command::Write {
                rows,
                reply: Some(reply),
            })?;
            answer.await.map_err(|_| self.stopped())?
        })
    }

    fn write(&self, rows: Vec<Row>) -> Result<()> {
        self.send(Command::Write { rows, reply: None })
    }

    fn end(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            // A writer that has stopped already has closed its session.
            if self.send(Command::End { reply }).is_ok() {
                let _ = answer.await;
            }
        })
    }
}

/// The task that owns the connection.
struct Writer {
    client: Client,
    statements: Statements,
    campaign: i64,
    run: Uuid,
    /// The server process of this run's session (`pg_backend_pid()`): a run is one session.
    session: i32,
    name: Arc<str>,
    /// Confirmed by each round trip that finds this run still `running`, lost at its first
    /// failure.
    fence: Arc<ClaimFence>,
    /// Set once this run was taken over: from then on it writes the results of the messages
    /// it still holds (they were sent: a taker must not send them again), and nothing else.
    taken: Option<Error>,
    /// Drives the connection; ends once the session is closed.
    session_task: tokio::task::JoinHandle<()>,
}

/// Tells a waiting caller how its command's transaction went.
type Reply = Box<dyn FnOnce(Option<&Error>) + Send>;

impl Writer {
    async fn serve(mut self, mut commands: mpsc::UnboundedReceiver<Command>, lease: Duration) {
        let mut beat = tokio::time::interval(heartbeat_every(lease));
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // A round trip that never ends (a connection cut in the middle, where neither TCP nor
        // its keepalives notice) fails the run once others would take it over anyway.
        let patience = lease.mul_f64(TAKE_OVER_AFTER).max(MIN_PATIENCE);
        // The first failure ends the run: every later command gets it.
        let mut failure: Option<Error> = None;
        let mut ending = None;
        loop {
            let first = tokio::select! {
                command = commands.recv() => match command {
                    Some(command) => command,
                    None => break,
                },
                _ = beat.tick() => {
                    if failure.is_none() && self.taken.is_none() {
                        let beat = tokio::time::timeout(patience, self.heartbeat()).await;
                        match beat.unwrap_or_else(|_| Err(self.no_answer(patience))) {
                            Ok(true) => {}
                            Ok(false) => self.taken_over(),
                            Err(error) => {
                                self.fence.lose(error.to_string());
                                failure = Some(error);
                            }
                        }
                    }
                    continue;
                }
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
            if failure.is_none() {
                let ran = tokio::time::timeout(patience, self.run_batch(batch, &mut replies)).await;
                if let Err(error) = ran.unwrap_or_else(|_| Err(self.no_answer(patience))) {
                    log::error!(target: "bizmsg", "campaign journal {}: {error}", self.name);
                    // No journal transaction of this run may fail and its sends go on: what it
                    // holds is unknown now.
                    self.fence.lose(error.to_string());
                    failure = Some(error);
                }
            } else {
                for command in batch {
                    replies.push(answer_only(command));
                }
            }
            for reply in replies {
                reply(failure.as_ref());
            }
            if ending.is_some() {
                break;
            }
        }
        if failure.is_none() && self.taken.is_none() {
            // The run ends; closing the connection (below) releases its lock.
            let _ = tokio::time::timeout(
                patience,
                self.client.execute(
                    "UPDATE bizmsg.runs SET state = 'ended', ended_at = now() WHERE id = $1",
                    &[&self.run],
                ),
            )
            .await;
        }
        // The session closed before the caller hears the run ended: a run it starts next
        // finds this one's lock released.
        let Writer {
            client,
            statements,
            session_task,
            ..
        } = self;
        drop(statements);
        drop(client);
        let _ = tokio::time::timeout(MIN_PATIENCE, session_task).await;
        if let Some(reply) = ending {
            let _ = reply.send(());
        }
    }

    fn no_answer(&self, patience: Duration) -> Error {
        Error::SharedState(format!(
            "journal {}: no answer within {:.0}s: its connection is taken for lost",
            self.name,
            patience.as_secs_f64()
        ))
    }

    /// This run was found taken over: it sends nothing more, and writes only what it holds.
    fn taken_over(&mut self) {
        let error = taken_over(&self.name);
        self.fence.lose(error.to_string());
        log::error!(target: "bizmsg", "campaign journal {}: {error}", self.name);
        self.taken.get_or_insert(error);
    }

    /// A sign of life when there is nothing to write, which confirms the fence too: the same
    /// statement every transaction starts with. `Ok(false)`: this run was taken over.
    async fn heartbeat(&self) -> Result<bool> {
        let started = stamp();
        let found = self
            .client
            .query_one(&self.statements.alive, &[&self.run])
            .await
            .map_err(|e| self.failed(&e))?;
        if found.get::<_, i32>(1) != self.session {
            return Err(pooled(&self.name, self.session, found.get(1)));
        }
        if !found.get::<_, bool>(0) {
            return Ok(false);
        }
        self.fence.confirm(started);
        Ok(true)
    }

    fn failed(&self, error: &tokio_postgres::Error) -> Error {
        Error::SharedState(format!("journal {}: {}", self.name, describe(error)))
    }

    async fn run_batch(&mut self, batch: Vec<Command>, replies: &mut Vec<Reply>) -> Result<()> {
        let answers = match self.run_segments(&batch).await {
            Ok(answers) => answers,
            Err(error) => {
                // Every command is answered with the failure (the writer loop does it).
                replies.extend(batch.into_iter().map(answer_only));
                return Err(error);
            }
        };
        for (command, answer) in batch.into_iter().zip(answers) {
            replies.push(match (command, answer) {
                (Command::Lookup { reply, .. }, Answer::Rows(rows)) => Box::new(move |failure| {
                    let _ = reply.send(match failure {
                        None => Ok(rows),
                        Some(failure) => Err(failure.clone()),
                    });
                }),
                (Command::Claim { reply, .. }, Answer::Claimed(claimed)) => {
                    Box::new(move |failure| {
                        let _ = reply.send(match failure {
                            None => Ok(claimed),
                            Some(failure) => Err(failure.clone()),
                        });
                    })
                }
                (command, Answer::Refused) => {
                    let refused = self.taken.clone().unwrap_or_else(|| taken_over(&self.name));
                    Box::new(move |_| answer_only(command)(Some(&refused)))
                }
                (
                    Command::Write {
                        reply: Some(reply), ..
                    },
                    _,
                ) => Box::new(move |failure| {
                    let _ = reply.send(match failure {
                        None => Ok(()),
                        Some(failure) => Err(failure.clone()),
                    });
                }),
                (other, _) => answer_only(other),
            });
        }
        Ok(())
    }

    /// Runs a batch as transactions in the engine's order: each claim alone, and the commands
    /// between claims together. A transaction that wrote this run's messages and then claimed
    /// another run's would hold the first while waiting for the second; the other run, doing
    /// the same the other way round, would deadlock with it (the server detects it only after
    /// `deadlock_timeout`, a second by default). Claims alone lock in one order (sorted) and
    /// wait for nothing they hold.
    async fn run_segments(&mut self, batch: &[Command]) -> Result<Vec<Answer>> {
        let is_claim = |command: &Command| matches!(command, Command::Claim { .. });
        let mut answers = Vec::with_capacity(batch.len());
        for segment in batch.chunk_by(|a, b| !is_claim(a) && !is_claim(b)) {
            answers.extend(self.run_segment(segment).await?);
        }
        Ok(answers)
    }

    /// One transaction, run again when the server rolled it back for a conflict with another
    /// run's (a deadlock or a serialization failure: nothing of it was committed). A claim
    /// that meets a message another transaction holds is split until that message is found.
    async fn run_segment(&mut self, segment: &[Command]) -> Result<Vec<Answer>> {
        if let [Command::Claim { claims, .. }] = segment {
            return Ok(vec![self.claim_around_busy_rows(claims).await?]);
        }
        self.attempt_segment(segment, CLAIM_LOCK_WAIT)
            .await
            .map_err(|attempt| self.attempt_failed(attempt))
    }

    /// A claim run as one transaction; when it meets a message another transaction is
    /// inserting now (a run frozen inside its claim, a commit stuck on a standby), run again in
    /// halves, each waiting less, until only that message is left: it alone is answered held by
    /// another run, the others are claimed (within `SPLIT_BUDGET`: the parts not tried by then
    /// are answered held by another run too).
    async fn claim_around_busy_rows(&mut self, claims: &[Claim]) -> Result<Answer> {
        let mut answers: Vec<Option<Claimed>> = vec![None; claims.len()];
        let mut parts = vec![(0, claims.len(), CLAIM_LOCK_WAIT)];
        let began = std::time::Instant::now();
        while let Some((start, end, wait)) = parts.pop() {
            if wait == BUSY_LOCK_WAIT && began.elapsed() >= SPLIT_BUDGET {
                // Left unanswered: held by another run (below), claimed again in a moment.
                continue;
            }
            let Some(part) = claims.get(start..end) else {
                continue;
            };
            // Answered by the engine through the batch's own command, not this one.
            let (reply, _) = oneshot::channel();
            let command = [Command::Claim {
                claims: part.to_vec(),
                reply,
            }];
            match self.attempt_segment(&command, wait).await {
                Ok(mut answer) => match answer.pop() {
                    Some(Answer::Claimed(claimed)) => {
                        for (slot, claimed) in answers.iter_mut().skip(start).zip(claimed) {
                            *slot = Some(claimed);
                        }
                    }
                    // Taken over meanwhile: the whole claim is refused.
                    _ => return Ok(Answer::Refused),
                },
                Err(Attempt::Busy(error)) if end - start > 1 => {
                    log::debug!(
                        target: "bizmsg",
                        "campaign journal {}: a claim of {} messages met one another transaction \
                         holds ({}): claimed in halves",
                        self.name,
                        end - start,
                        describe(&error)
                    );
                    let middle = start + (end - start) / 2;
                    parts.push((middle, end, BUSY_LOCK_WAIT));
                    parts.push((start, middle, BUSY_LOCK_WAIT));
                }
                Err(Attempt::Busy(_)) => {
                    if let (Some(slot), Some(claim)) = (answers.get_mut(start), part.first()) {
                        *slot = Some(held_by_another(claim));
                    }
                }
                Err(attempt) => return Err(self.attempt_failed(attempt)),
            }
        }
        Ok(Answer::Claimed(
            answers
                .into_iter()
                .zip(claims)
                .map(|(answer, claim)| answer.unwrap_or_else(|| held_by_another(claim)))
                .collect(),
        ))
    }

    /// `try_segment`, run again after a conflict the server rolled back.
    async fn attempt_segment(
        &mut self,
        segment: &[Command],
        lock_wait: Duration,
    ) -> std::result::Result<Vec<Answer>, Attempt> {
        let mut attempt = 0;
        loop {
            match self.try_segment(segment, lock_wait).await {
                Err(Attempt::Again(error)) if attempt < MAX_TRANSACTION_RETRIES => {
                    attempt += 1;
                    log::debug!(
                        target: "bizmsg",
                        "campaign journal {}: transaction rolled back ({}), running it again",
                        self.name,
                        describe(&error)
                    );
                    let pause = 5 + fastrand::u64(..20) * u64::from(attempt);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
                done => return done,
            }
        }
    }

    fn attempt_failed(&self, attempt: Attempt) -> Error {
        match attempt {
            Attempt::Again(error) | Attempt::Failed(error) | Attempt::Busy(error) => {
                self.failed(&error)
            }
            Attempt::Stop(error) => error,
        }
    }

    /// One transaction for a segment of a batch: the answer of each command, in order.
    async fn try_segment(
        &mut self,
        batch: &[Command],
        lock_wait: Duration,
    ) -> std::result::Result<Vec<Answer>, Attempt> {
        // A claim or a durable write waits for the commit to be on disk; results alone may be
        // committed asynchronously.
        let durable = batch.iter().any(|command| {
            matches!(
                command,
                Command::Claim { .. } | Command::Write { reply: Some(_), .. }
            )
        });
        let (campaign, run) = (self.campaign, self.run);
        let statements = &self.statements;
        let started = stamp();
        let transaction = self.client.transaction().await.map_err(Attempt::of)?;
        // The session commits durably (set at open); results alone may go asynchronously.
        // Sent in one go with the liveness check (tokio-postgres pipelines statements polled
        // together): no round trip of its own.
        let asynchronous = async {
            if durable {
                Ok(())
            } else {
                transaction
                    .batch_execute("SET LOCAL synchronous_commit = off")
                    .await
            }
        };
        // A run taken for dead (its lock found gone, its lease past) sends nothing more: its
        // claims may be another run's by now. It still writes the results of the messages it
        // holds (they went out), and nothing else.
        let mut taken = self.taken.is_some();
        let alive = async {
            if taken {
                Ok(None)
            } else {
                transaction
                    .query_one(&statements.alive, &[&run])
                    .await
                    .map(Some)
            }
        };
        let ((), found) = futures::future::try_join(asynchronous, alive)
            .await
            .map_err(Attempt::of)?;
        if let Some(found) = found {
            if found.get::<_, i32>(1) != self.session {
                return Err(Attempt::Stop(pooled(
                    &self.name,
                    self.session,
                    found.get(1),
                )));
            }
            taken = !found.get::<_, bool>(0);
        }
        let mut answers = Vec::with_capacity(batch.len());
        let mut writes: Vec<Row> = Vec::new();
        // Rows this run claimed that a write found held by another run.
        let mut lost = 0;
        for command in batch {
            // A durable write is a key recorded before a send, or the run's last flush:
            // neither is this run's to make any more.
            let refused = match command {
                Command::Write { reply, .. } => reply.is_some(),
                Command::Lookup { .. } | Command::Claim { .. } => true,
                // Never in a batch (`take_end`).
                Command::End { .. } => false,
            };
            if taken && refused {
                answers.push(Answer::Refused);
                continue;
            }
            match command {
                Command::Lookup { identities, .. } => {
                    let rows = lookup(&transaction, statements, campaign, run, identities)
                        .await
                        .map_err(Attempt::of)?;
                    answers.push(Answer::Rows(rows));
                }
                Command::Claim { claims, .. } => {
                    // Earlier writes of the batch first: the order the engine gave.
                    lost += write(
                        &transaction,
                        statements,
                        campaign,
                        run,
                        std::mem::take(&mut writes),
                    )
                    .await
                    .map_err(Attempt::of)?;
                    let claimed = claim(&transaction, statements, campaign, run, claims, lock_wait)
                        .await
                        .map_err(Attempt::of)?;
                    answers.push(Answer::Claimed(claimed));
                }
                Command::Write { rows, .. } => {
                    writes.extend(rows.iter().cloned());
                    answers.push(Answer::Written);
                }
                Command::End { .. } => answers.push(Answer::Written),
            }
        }
        lost += write(&transaction, statements, campaign, run, writes)
            .await
            .map_err(Attempt::of)?;
        transaction.commit().await.map_err(Attempt::of)?;
        if taken || lost > 0 {
            // What it still held is committed; it sends nothing more.
            if lost > 0 {
                log::error!(
                    target: "bizmsg",
                    "campaign journal {}: {lost} message(s) this run claimed are held by another \
                     run",
                    self.name
                );
            }
            self.taken_over();
        } else {
            self.fence.confirm(started);
        }
        Ok(answers)
    }
}

/// The server process of the connection's session.
async fn backend_pid(client: &Client) -> std::result::Result<i32, tokio_postgres::Error> {
    // A simple query: no statement prepared on one session and run on another.
    let answer = client.simple_query("SELECT pg_backend_pid()").await?;
    Ok(answer
        .iter()
        .find_map(|message| match message {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0)?.parse().ok(),
            _ => None,
        })
        .unwrap_or_default())
}

/// What a run is told when its statements reach more than one server session: a pooler in
/// transaction or statement mode (PgBouncer) sits between it and PostgreSQL. A run is one
/// session: its lock is its liveness, and its settings and prepared statements are the
/// session's. Through such a pool a dead run would look alive, and its settings would leak to
/// the pool's other clients.
fn pooled(name: &str, first: i32, then: i32) -> Error {
    Error::SharedState(format!(
        "journal {name}: its statements reached two PostgreSQL sessions (server processes \
         {first} and {then}): a connection pooler in transaction or statement mode (PgBouncer's \
         pool_mode = transaction) is between bizmsg and PostgreSQL. The journal needs one \
         session per run: connect to PostgreSQL directly, or through a pool in session mode"
    ))
}

/// The answer to a claim of a message another run holds, or is claiming now.
fn held_by_another(claim: &Claim) -> Claimed {
    let mut row = Row::new(claim.identity, State::Dispatched, None);
    row.held_elsewhere = true;
    Claimed::Lost(row)
}

/// What a run recorded `lost` by another is told.
fn taken_over(name: &str) -> Error {
    Error::SharedState(format!(
        "journal {name}: this run was taken for a dead one (its lease passed, or its session \
         ended) and its claims taken over: it stops"
    ))
}

/// How long a claim waits for a row another transaction holds before it is split around it;
/// its halves wait less.
const CLAIM_LOCK_WAIT: Duration = Duration::from_secs(2);
const BUSY_LOCK_WAIT: Duration = Duration::from_millis(200);
/// How long a claim goes on splitting around busy rows: the parts not tried by then are
/// answered held by another run (the engine waits for them, and claims them again in a
/// moment). A run frozen inside a claim of many rows another run also claims would otherwise
/// cost that run a wait per busy row, and its journal would be taken for hung (`MIN_PATIENCE`).
const SPLIT_BUDGET: Duration = Duration::from_secs(3);

/// The least a journal round trip is waited for before the connection is taken for lost.
const MIN_PATIENCE: Duration = Duration::from_secs(10);

/// Transactions rolled back by the server for a conflict, run again within one batch.
const MAX_TRANSACTION_RETRIES: u32 = 8;

/// What a command of a batch was answered.
enum Answer {
    Rows(Vec<Row>),
    Claimed(Vec<Claimed>),
    Written,
    /// Not done: this run was taken over.
    Refused,
}

/// How a batch's transaction failed.
enum Attempt {
    /// Rolled back for a conflict with another run's: run again.
    Again(tokio_postgres::Error),
    /// A row lock not granted within the statement's `lock_timeout` (a claim's).
    Busy(tokio_postgres::Error),
    Failed(tokio_postgres::Error),
    /// The run must stop (taken for dead).
    Stop(Error),
}

impl Attempt {
    fn of(error: tokio_postgres::Error) -> Attempt {
        use tokio_postgres::error::SqlState;
        match error.code() {
            Some(code)
                if *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE =>
            {
                Attempt::Again(error)
            }
            Some(code) if *code == SqlState::LOCK_NOT_AVAILABLE => Attempt::Busy(error),
            _ => Attempt::Failed(error),
        }
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

/// The reply of a command that was not run (the journal failed earlier).
fn answer_only(command: Command) -> Reply {
    match command {
        Command::Lookup { reply, .. } => Box::new(move |failure| {
            let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
        }),
        Command::Claim { reply, .. } => Box::new(move |failure| {
            let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
        }),
        Command::Write { reply, .. } => Box::new(move |failure| {
            if let Some(reply) = reply {
                let _ = reply.send(Err(failure.cloned().unwrap_or_else(ended)));
            }
        }),
        Command::End { reply } => Box::new(move |_| {
            let _ = reply.send(());
        }),
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
        answer_only(command)(None);
    }
    match batch.pop() {
        Some(Command::End { reply }) => Some(reply),
        _ => None,
    }
}

fn ended() -> Error {
    Error::SharedState("journal: its connection has ended".to_owned())
}

fn uuid_of(fingerprint: Fingerprint) -> Uuid {
    Uuid::from_u128(fingerprint.0)
}

fn occurrence_of(identity: Identity) -> i32 {
    i32::try_from(identity.occurrence).unwrap_or(i32::MAX)
}

/// The records of `identities`, with whether a live run of another process holds each.
async fn lookup(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    identities: &[Identity],
) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
    if identities.is_empty() {
        return Ok(Vec::new());
    }
    let fingerprints: Vec<Uuid> = identities.iter().map(|i| uuid_of(i.fingerprint)).collect();
    let occurrences: Vec<i32> = identities.iter().map(|i| occurrence_of(*i)).collect();
    let found = transaction
        .query(
            &statements.lookup,
            &[&campaign, &fingerprints, &run, &occurrences],
        )
        .await?;
    Ok(found.iter().map(row_from).collect())
}

fn row_from(found: &tokio_postgres::Row) -> Row {
    let fingerprint: Uuid = found.get(0);
    let occurrence: i32 = found.get(1);
    let state: String = found.get(3);
    Row {
        identity: Identity {
            fingerprint: Fingerprint(fingerprint.as_u128()),
            occurrence: u32::try_from(occurrence).unwrap_or_default(),
        },
        key: found.get(2),
        // An unreadable state is taken for in doubt, the safe reading.
        state: State::parse(&state).unwrap_or(State::Dispatched),
        sms_id: found.get(4),
        code: found.get(5),
        msg: found.get(6),
        clears_doubt: false,
        held_elsewhere: found.get::<_, Option<bool>>(7).unwrap_or(false),
        holder_settling: found.get::<_, Option<bool>>(8).unwrap_or(false),
        claimed: false,
    }
}

/// Claims in one statement: a message is won when it has no record (inserted), a record of
/// this run without a result, one that says it was never sent, or (taken over) one in doubt
/// whose run is dead; the statement returns what it won, with each record's key. Sorted, so
/// that concurrent claims of overlapping messages lock them in one order and never deadlock.
///
/// A take-over judges the holders first, from their locked rows (`JUDGE_HOLDERS`), and records
/// the dead ones `lost` in this transaction: a run judged dead cannot confirm itself alive
/// before this commits, and afterwards learns it was taken over. (Runs rows are locked before
/// message rows, as a run's own transactions lock them: its heartbeat comes first.)
async fn claim(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
    lock_wait: Duration,
) -> std::result::Result<Vec<Claimed>, tokio_postgres::Error> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let dead = dead_holders(transaction, statements, campaign, run, claims).await?;
    let all_fingerprints: Vec<Uuid> = claims
        .iter()
        .map(|c| uuid_of(c.identity.fingerprint))
        .collect();
    let all_occurrences: Vec<i32> = claims.iter().map(|c| occurrence_of(c.identity)).collect();
    let all_take_over: Vec<bool> = claims.iter().map(|c| c.take_over).collect();
    // A new message another run is inserting now (a run frozen inside its claim) is not waited
    // for long: the claim is then split around it (`Writer::claim_around_busy_rows`). Set with
    // the next statement, in one go (it only matters to the claim's own, which follows).
    let lock_timeout = format!("SET LOCAL lock_timeout = '{}ms'", lock_wait.as_millis());
    // (claimable, locked) of each recorded message; the others are new.
    let ((), claimable) = futures::future::try_join(
        transaction.batch_execute(&lock_timeout),
        transaction.query(
            &statements.lock_claimable,
            &[
                &campaign,
                &all_fingerprints,
                &all_occurrences,
                &run,
                &all_take_over,
                &dead,
            ],
        ),
    )
    .await?;
    let recorded: HashMap<(Uuid, i32), (bool, bool)> = claimable
        .iter()
        .map(|row| ((row.get(0), row.get(1)), (row.get(2), row.get(3))))
        .collect();
    let position = |claim: &Claim| {
        (
            uuid_of(claim.identity.fingerprint),
            occurrence_of(claim.identity),
        )
    };
    // Claimable, but held by another transaction now: reported held by another run.
    let busy: HashSet<(Uuid, i32)> = recorded
        .iter()
        .filter(|(_, (claimable, locked))| *claimable && !*locked)
        .map(|(position, _)| *position)
        .collect();
    // New messages, and recorded ones this run locked: nothing else is touched.
    let free: Vec<&Claim> = claims
        .iter()
        .filter(|claim| {
            recorded
                .get(&position(claim))
                .is_none_or(|(_, locked)| *locked)
        })
        .collect();
    let fingerprints: Vec<Uuid> = free
        .iter()
        .map(|c| uuid_of(c.identity.fingerprint))
        .collect();
    let occurrences: Vec<i32> = free.iter().map(|c| occurrence_of(c.identity)).collect();
    let keys: Vec<&str> = free.iter().map(|c| c.key.as_str()).collect();
    let take_over: Vec<bool> = free.iter().map(|c| c.take_over).collect();
    let won_rows = transaction
        .query(
            &statements.claim,
            &[
                &campaign,
                &run,
                &fingerprints,
                &occurrences,
                &keys,
                &take_over,
                &dead,
            ],
        )
        .await?;
    let mut won: HashMap<(Uuid, i32), Option<String>> = won_rows
        .iter()
        .map(|row| {
            (
                (row.get::<_, Uuid>(0), row.get::<_, i32>(1)),
                row.get::<_, Option<String>>(2),
            )
        })
        .collect();
    let lost: Vec<Identity> = claims
        .iter()
        .map(|c| c.identity)
        .filter(|i| !won.contains_key(&(uuid_of(i.fingerprint), occurrence_of(*i))))
        .collect();
    let mut records: HashMap<Identity, Row> = lookup(transaction, statements, campaign, run, &lost)
        .await?
        .into_iter()
        .map(|row| (row.identity, row))
        .collect();
    Ok(claims
        .iter()
        .map(|claim| {
            let position = position(claim);
            match won.remove(&position) {
                // A record always has a key once claimed; the claim's own is a fallback only.
                Some(key) => Claimed::Won {
                    key: key.unwrap_or_else(|| claim.key.clone()),
                },
                // A record that vanished meanwhile cannot be (records are never deleted): it
                // is reported as held elsewhere, the safe reading; so is one another
                // transaction holds now.
                None => {
                    let mut row = records.remove(&claim.identity).unwrap_or_else(|| {
                        let mut row = Row::new(claim.identity, State::Dispatched, None);
                        row.held_elsewhere = true;
                        row
                    });
                    if busy.contains(&position) {
                        row.held_elsewhere = true;
                        row.holder_settling = false;
                    }
                    Claimed::Lost(row)
                }
            }
        })
        .collect())
}

/// The runs holding the messages of take-over claims that are dead, judged from their locked
/// rows and recorded `lost`.
async fn dead_holders(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    claims: &[Claim],
) -> std::result::Result<Vec<Uuid>, tokio_postgres::Error> {
    let (fingerprints, occurrences): (Vec<Uuid>, Vec<i32>) = claims
        .iter()
        .filter(|claim| claim.take_over)
        .map(|claim| {
            (
                uuid_of(claim.identity.fingerprint),
                occurrence_of(claim.identity),
            )
        })
        .unzip();
    if fingerprints.is_empty() {
        return Ok(Vec::new());
    }
    let found = transaction
        .query(
            &statements.holders,
            &[&campaign, &fingerprints, &occurrences, &run],
        )
        .await?;
    // A run whose record is gone (deleted by a person tidying the table) is gone too.
    let mut dead: Vec<Uuid> = found
        .iter()
        .filter(|row| !row.get::<_, bool>(1))
        .map(|row| row.get(0))
        .collect();
    let recorded: Vec<Uuid> = found
        .iter()
        .filter(|row| row.get::<_, bool>(1))
        .map(|row| row.get(0))
        .collect();
    if recorded.is_empty() {
        return Ok(dead);
    }
    let judged: Vec<Uuid> = transaction
        .query(&statements.judge_holders, &[&recorded])
        .await?
        .iter()
        .filter(|row| !row.get::<_, Option<bool>>(1).unwrap_or(false))
        .map(|row| row.get(0))
        .collect();
    if !judged.is_empty() {
        transaction
            .execute(&statements.mark_lost, &[&judged])
            .await?;
    }
    dead.extend(judged);
    Ok(dead)
}

/// Writes the records of messages this run holds (the last write of each message in the
/// batch: it supersedes the earlier ones), never losing a result or a doubt. Returns how many
/// of the messages this run claimed (`Row::claimed`) another run holds now: this run was
/// taken over, and the caller stops it.
async fn write(
    transaction: &Transaction<'_>,
    statements: &Statements,
    campaign: i64,
    run: Uuid,
    rows: Vec<Row>,
) -> std::result::Result<usize, tokio_postgres::Error> {
    if rows.is_empty() {
        return Ok(0);
    }
    let mut last: HashMap<Identity, Row> = HashMap::with_capacity(rows.len());
    for row in rows {
        last.insert(row.identity, row);
    }
    let rows: Vec<Row> = last.into_values().collect();
    let fingerprints: Vec<Uuid> = rows
        .iter()
        .map(|r| uuid_of(r.identity.fingerprint))
        .collect();
    let occurrences: Vec<i32> = rows.iter().map(|r| occurrence_of(r.identity)).collect();
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    let keys: Vec<Option<&str>> = rows.iter().map(|r| r.key.as_deref()).collect();
    let sms_ids: Vec<Option<&str>> = rows.iter().map(|r| r.sms_id.as_deref()).collect();
    let codes: Vec<Option<&str>> = rows.iter().map(|r| r.code.as_deref()).collect();
    let msgs: Vec<Option<&str>> = rows.iter().map(|r| r.msg.as_deref()).collect();
    let clears: Vec<bool> = rows.iter().map(|r| r.clears_doubt).collect();
    // Locked first in one order (the claims' order), so that a claim of the same messages by
    // another run, sorted too, cannot hold one of them while waiting for another this holds.
    // The UPDATE's join would lock them in the order of its plan. The lock also tells who
    // holds each: a row this run claimed and another holds is never written, and not silently.
    let holders: HashMap<(Uuid, i32), Option<Uuid>> = transaction
        .query(
            &statements.lock_rows,
            &[&campaign, &fingerprints, &occurrences],
        )
        .await?
        .iter()
        .map(|row| ((row.get(0), row.get(1)), row.get(2)))
        .collect();
    let lost = rows
        .iter()
        .filter(|row| row.claimed)
        .filter(|row| {
            let position = (
                uuid_of(row.identity.fingerprint),
                occurrence_of(row.identity),
            );
            holders
                .get(&position)
                .is_some_and(|holder| *holder != Some(run))
        })
        .count();
    let parameters: [&(dyn ToSql + Sync); 10] = [
        &campaign,
        &run,
        &fingerprints,
        &occurrences,
        &states,
        &keys,
        &sms_ids,
        &codes,
        &msgs,
        &clears,
    ];
    transaction
        .execute(&statements.write_rows, &parameters)
        .await?;
    Ok(lost)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::campaign::journal::fence::SESSION_GRACE;
    use crate::test_servers::PostgresServer;

    const LEASE: Duration = Duration::from_secs(60);

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

    fn result(n: u128, state: State) -> Row {
        let mut row = Row::new(identity(n), state, Some(format!("k{n}")));
        row.clears_doubt = true;
        row
    }

    /// A client of our own on the server, its connection driven in the background.
    async fn connect(url: &str) -> Client {
        let (client, connection) = url
            .parse::<Config>()
            .unwrap()
            .connect(tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }

    /// The plan PostgreSQL makes for `sql` as the journal's session makes it, with `arguments`.
    async fn plan_of(client: &Client, name: &str, sql: &str, arguments: &str) -> String {
        client
            .batch_execute(&format!("{PLANS}; PREPARE {name} AS {sql}"))
            .await
            .unwrap();
        let lines = client
            .simple_query(&format!("EXPLAIN EXECUTE {name}({arguments})"))
            .await
            .unwrap();
        lines
            .iter()
            .filter_map(|line| match line {
                tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Regression: with the campaign first in the key and plans made for a journal not yet
    /// analyzed, each write read the whole campaign (90 µs a message at the start of a 50,000
    /// message campaign, 500 at its end), and a batch's messages were compared with each of its
    /// rows. The plans, made while the journal is empty as a new run's are, must find the
    /// messages by key and join them by hash or merge, whatever the journal holds later.
    #[test]
    fn the_sql_judges_runs_with_the_fences_margins() {
        let grace = format!("interval '{} seconds'", SESSION_GRACE.as_secs());
        assert!(RUN_ALIVE.contains(&grace), "{RUN_ALIVE}");
        assert!(RUN_ALIVE.contains(&format!("r.lease_seconds * {TAKE_OVER_AFTER}")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn statements_planned_on_an_empty_journal_read_only_the_messages_they_are_given() {
        let Some(server) = PostgresServer::start() else {
            return;
        };
        let journal = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        let client = connect(&server.url).await;
        let uuids = "ARRAY[gen_random_uuid(), gen_random_uuid()]";
        let texts = "ARRAY['sent', 'sent']";
        let plans = [
            plan_of(
                &client,
                "lookup",
                LOOKUP,
                &format!("1, {uuids}, gen_random_uuid(), ARRAY[0, 0]"),
            )
            .await,
            plan_of(
                &client,
                "lock_claimable",
                LOCK_CLAIMABLE,
                &format!(
                    "1, {uuids}, ARRAY[0, 0], gen_random_uuid(), ARRAY[true, false], \
                     ARRAY[gen_random_uuid()]"
                ),
            )
            .await,
            plan_of(
                &client,
                "holders",
                HOLDERS,
                &format!("1, {uuids}, ARRAY[0, 0], gen_random_uuid()"),
            )
            .await,
            plan_of(
                &client,
                "lock_rows",
                LOCK_ROWS,
                &format!("1, {uuids}, ARRAY[0, 0]"),
            )
            .await,
            plan_of(
                &client,
                "write_rows",
                WRITE_ROWS,
                &format!(
                    "1, gen_random_uuid(), {uuids}, ARRAY[0, 0], {texts}, {texts}, {texts}, \
                     {texts}, {texts}, ARRAY[true, true]"
                ),
            )
            .await,
        ];
        for plan in plans {
            assert!(
                plan.contains("Index Cond: ((fingerprint = ANY")
                    && plan.contains("AND (campaign = $1))"),
                "messages not found by key:\n{plan}"
            );
            assert!(!plan.contains("Seq Scan"), "a sequential scan:\n{plan}");
            assert!(!plan.contains("Nested Loop"), "a nested loop:\n{plan}");
        }
        // And the journal's own session plans so: a run on the empty journal never reads it
        // sequentially, and reads about the rows it touches (its counters, flushed when its
        // session ends; the first run's, which made the schema, are left out).
        drop(journal);
        let (sequential_before, fetched_before) = table_reads_after_sessions_end(&client).await;
        let journal = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        for batch in 0..8u128 {
            let range = batch * 100..(batch + 1) * 100;
            journal.claim(claims(range.clone())).await.unwrap();
            journal
                .lookup(range.clone().map(identity).collect())
                .await
                .unwrap();
            journal
                .write_durably(range.map(|n| result(n, State::Sent)).collect())
                .await
                .unwrap();
        }
        drop(journal);
        let (sequential, fetched) = table_reads_after_sessions_end(&client).await;
        let (sequential, fetched) = (sequential - sequential_before, fetched - fetched_before);
        assert_eq!(
            sequential, 0,
            "the journal's session read the table sequentially"
        );
        // Each of 800 messages read by its lookup, its write's lock and its write: 2,400.
        assert!(fetched <= 3_000, "{fetched} rows read for 800 messages");
    }

    /// How many times `bizmsg.messages` was read sequentially, and how many rows were fetched
    /// from it by index, once every other session has ended (and flushed its counters).
    async fn table_reads_after_sessions_end(client: &Client) -> (i64, i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let others: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity \
                     WHERE datname = current_database() AND pid <> pg_backend_pid() \
                       AND backend_type = 'client backend'",
                    &[],
                )
                .await
                .unwrap()
                .get(0);
            if others == 0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "a run's session did not end"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // A new snapshot of the statistics, not the one this transaction may have taken.
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let read = client
            .query_one(
                "SELECT seq_scan, coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables \
                 WHERE schemaname = 'bizmsg' AND relname = 'messages'",
                &[],
            )
            .await
            .unwrap();
        (read.get(0), read.get(1))
    }

    /// A journal made by a development build (schema version 1, the campaign first in the key)
    /// is brought to version 2 by the first run that opens it, its records kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_version_1_journal_gets_the_message_first_key_and_keeps_its_records() {
        let Some(server) = PostgresServer::start() else {
            return;
        };
        let journal = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        journal.claim(claims(0..3)).await.unwrap();
        journal
            .write_durably(vec![result(0, State::Sent)])
            .await
            .unwrap();
        drop(journal);
        let client = connect(&server.url).await;
        client
            .batch_execute(
                "ALTER TABLE bizmsg.messages DROP CONSTRAINT messages_pkey, \
                   ADD CONSTRAINT messages_pkey PRIMARY KEY (campaign, fingerprint, occurrence); \
                 ALTER TABLE bizmsg.campaigns DROP COLUMN fingerprint; \
                 UPDATE bizmsg.meta SET value = '1' WHERE name = 'schema_version'",
            )
            .await
            .unwrap();
        let reopened = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        // Its campaign knew its messages by xxh3, and still does; a campaign made now is
        // SHA-256.
        assert_eq!(reopened.fingerprints(), FingerprintKind::Xxh3);
        let summer = PostgresJournal::open(&server.url, "summer", LEASE)
            .await
            .unwrap();
        assert_eq!(summer.fingerprints(), FingerprintKind::Sha256);
        drop(summer);
        let key: String = client
            .query_one(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint \
                 WHERE conname = 'messages_pkey'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(key, "PRIMARY KEY (fingerprint, campaign, occurrence)");
        let version: String = client
            .query_one(
                "SELECT value FROM bizmsg.meta WHERE name = 'schema_version'",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, SCHEMA_VERSION.to_string());
        let rows = reopened
            .lookup(vec![identity(0), identity(1)])
            .await
            .unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows
            .iter()
            .any(|row| row.identity == identity(0) && row.state == State::Sent));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_claim_each_message_once_and_a_dead_run_leaves_doubt_at_once() {
        let Some(server) = PostgresServer::start() else {
            return;
        };
        let first = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        let second = PostgresJournal::open(&server.url, "spring", LEASE)
            .await
            .unwrap();
        let won = first.claim(claims(0..4)).await.unwrap();
        assert!(won.iter().all(|claim| claim.is_won()));
        let contested = second.claim(claims(2..6)).await.unwrap();
        assert!(matches!(&contested[0], Claimed::Lost(row) if row.held_elsewhere));
        assert!(matches!(&contested[1], Claimed::Lost(row) if row.held_elsewhere));
        assert_eq!(contested[2..], [won_with("k4"), won_with("k5")]);
        first
            .write_durably(vec![result(0, State::Sent), result(3, State::Skipped)])
            .await
            .unwrap();
        // A write of a message another run holds changes nothing.
        second
            .write_durably(vec![result(1, State::Sent)])
            .await
            .unwrap();
        drop(first);
        // Its connection closes with it: its lock goes, its claims are in doubt at once.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let rows = loop {
            let rows = second
                .lookup(vec![identity(0), identity(1), identity(3)])
                .await
                .unwrap();
            if rows.iter().all(|row| !row.held_elsewhere) {
                break rows;
            }
            assert!(std::time::Instant::now() < deadline, "{rows:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let states: HashMap<u128, State> = rows
            .iter()
            .map(|row| (row.identity.fingerprint.0, row.state))
            .collect();
        assert_eq!(states[&0], State::Sent);
        assert_eq!(states[&1], State::Dispatched);
        assert_eq!(states[&3], State::Skipped);
        // Taken over in doubt: keeps its key; a message never sent is claimed anew.
        let mut again = claims(1..2);
        again[0].take_over = true;
        again[0].key = "other".into();
        again.extend(claims(3..4));
        // The run taking a message over is told the key its record holds, the one it may
        // have gone out with, not its own.
        assert_eq!(
            second.claim(again).await.unwrap(),
            [won_with("k1"), won_with("k3")]
        );
        let kept = second.lookup(vec![identity(1)]).await.unwrap();
        assert_eq!(kept[0].key.as_deref(), Some("k1"));
        // A message taken over in doubt stays in doubt if this run does not send it.
        second
            .write_durably(vec![result(1, State::Skipped)])
            .await
            .unwrap();
        let still = second.lookup(vec![identity(1)]).await.unwrap();
        assert_eq!(still[0].state, State::Dispatched);
        // Another campaign in the same database knows none of this.
        let other = PostgresJournal::open(&server.url, "summer", LEASE)
            .await
            .unwrap();
        assert!(other.lookup(vec![identity(0)]).await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_runs_over_overlapping_messages_claim_each_exactly_once() {
        let Some(server) = PostgresServer::start() else {
            return;
        };
        let mut runs = Vec::new();
        for _ in 0..4 {
            runs.push(Arc::new(
                PostgresJournal::open(&server.url, "load", LEASE)
                    .await
                    .unwrap(),
            ));
        }
        let mut tasks = Vec::new();
        for (number, run) in runs.iter().enumerate() {
            let run = Arc::clone(run);
            tasks.push(tokio::spawn(async move {
                // Each run walks the same 2,000 messages from another start, in batches.
                let mut order: Vec<u128> = (0..2000).collect();
                order.rotate_left(number * 500);
                let mut won = Vec::new();
                for batch in order.chunks(64) {
                    let claims: Vec<Claim> = batch
                        .iter()
                        .map(|n| Claim {
                            identity: identity(*n),
                            key: format!("k{n}"),
                            take_over: false,
                        })
                        .collect();
                    let answers = run.claim(claims).await.unwrap();
                    for (n, answer) in batch.iter().zip(answers) {
                        if answer.is_won() {
                            won.push(*n);
                        }
                    }
                }
                won
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all.sort_unstable();
        assert_eq!(all, (0..2000).collect::<Vec<u128>>());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_that_write_their_messages_and_claim_each_others_never_deadlock() {
        // Each run writes the messages it holds and at once claims the other's. Were the write
        // and the claim one transaction, or the write's locks taken in its plan's order, the
        // two would lock the same rows in opposite orders and the server roll one back as a
        // deadlock (a second later), which the run would fail with.
        let Some(server) = PostgresServer::start() else {
            return;
        };
        let first = Arc::new(
            PostgresJournal::open(&server.url, "crossing", LEASE)
                .await
                .unwrap(),
        );
        let second = Arc::new(
            PostgresJournal::open(&server.url, "crossing", LEASE)
                .await
                .unwrap(),
        );
        for round in 0..40u128 {
            let (mine, theirs) = (
                round * 400..round * 400 + 200,
                round * 400 + 200..round * 400 + 400,
            );
            assert!(first
                .claim(claims(mine.clone()))
                .await
                .unwrap()
                .iter()
                .all(|c| c.is_won()));
            assert!(second
                .claim(claims(theirs.clone()))
                .await
                .unwrap()
                .iter()
                .all(|c| c.is_won()));
            let cross = |run: Arc<PostgresJournal>,
                         held: std::ops::Range<u128>,
                         wanted: std::ops::Range<u128>| {
                tokio::spawn(async move {
                    run.write(held.map(|n| result(n, State::Failed)).collect())?;
                    run.claim(claims(wanted)).await
                })
            };
            let a = cross(Arc::clone(&first), mine.clone(), theirs.clone());
            let b = cross(Arc::clone(&second), theirs, mine);
            a.await.unwrap().unwrap();
            b.await.unwrap().unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_urls_are_refused_naming_the_field_without_the_password() {
        for (url, says) in [
            (
                "postgresql://user:s3cret@127.0.0.1:1/db?sslmode=bogus",
                "sslmode=\"bogus\"",
            ),
            (
                "postgresql://user:s3cret@127.0.0.1:1/?sslmode=disable",
                "names no database",
            ),
            (
                "postgresql://user:s3cret@127.0.0.1:1/db?bogus_option=1",
                "unknown option `bogus_option`",
            ),
            ("user:s3cret@127.0.0.1:5432/db", "not a URL"),
        ] {
            let error = PostgresJournal::open(url, "c", LEASE).await.err().unwrap();
            let text = error.to_string();
            assert!(matches!(error, Error::Validation { ref field, .. } if field == "journal"));
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains(says), "{text}");
        }
        let unreachable = PostgresJournal::open(
            "postgresql://user:s3cret@127.0.0.1:1/db?sslmode=disable",
            "c",
            LEASE,
        )
        .await
        .err()
        .unwrap();
        assert!(
            matches!(unreachable, Error::SharedState(_)),
            "{unreachable:?}"
        );
        assert!(!unreachable.to_string().contains("s3cret"), "{unreachable}");
    }
}
