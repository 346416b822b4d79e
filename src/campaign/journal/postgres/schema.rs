//! The `bizmsg` schema: its tables, the functions that judge whether a run is alive, its
//! version, and how a database is brought to it (`prepare`: made on first use, or moved from an
//! earlier version) under a lock, so that processes starting together do not race. Each change
//! of version says here what it changed and why.

use tokio_postgres::Client;

use super::describe;
use crate::campaign::message::FingerprintKind;
use crate::error::Error;

/// The version of the `bizmsg` schema this code reads and writes.
pub(super) const SCHEMA_VERSION: i32 = 5;
/// The advisory lock (transaction-level) that makes creating or changing the schema one step
/// for all processes: a constant of bizmsg's own ("bizmsg" in ASCII).
const SCHEMA_LOCK: i64 = 0x0000_6269_7a6d_7367;

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
pub(super) const RUN_ALIVE: &str = "
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

// Version 4 wrote a claim as `dispatched` (in doubt after a crash): from version 5 a claim is
// `claimed`, and becomes `dispatched` just before its request is written. No table changes (a
// version-4 database has no `claimed` row; `state` is text); the version alone changes, so that
// a bizmsg of version 4 refuses the schema rather than read a `claimed` row it does not know.
// A run of version 4 still open goes on safely: it reads `claimed` as in doubt, never claims
// such a row (its claims take only `failed`, `skipped`, or in doubt rows) and never writes one.

/// Makes the schema on first use (or checks its version) and the campaign's row; returns the
/// campaign's id.
pub(super) async fn prepare(
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
        Some(Ok(version @ (1..=4))) => {
            if version == 1 {
                // Made by a development build: the key's order differs.
                transaction.batch_execute(MESSAGES_KEY).await.map_err(sql)?;
            }
            if version < 3 {
                transaction.batch_execute(OWN_LEASES).await.map_err(sql)?;
                transaction.batch_execute(RUN_ALIVE).await.map_err(sql)?;
            }
            if version < 4 {
                transaction
                    .batch_execute(FINGERPRINT_KINDS)
                    .await
                    .map_err(sql)?;
            }
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
