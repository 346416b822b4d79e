//! The statements a run uses for every batch, each prepared once on its connection
//! (`Statements`), and how its session plans them (`PLANS`). They are run by `records.rs` (the
//! heartbeat, `ALIVE`, by the writer at the start of every transaction).

use tokio_postgres::{Client, Statement};

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
pub(super) const PLANS: &str =
    "SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off; \
                     SET enable_nestloop = off";

/// Each message's record, whether the run that holds it (claimed, or in doubt) is alive, and
/// whether that run is alive only for its grace (`run_settling`: a message it holds in doubt is
/// in doubt in moments; one it holds `claimed` is claimed as new once the grace is past).
pub(super) const LOOKUP: &str = "
    SELECT m.fingerprint, m.occurrence, m.idempotency_key, m.state, m.sms_id, m.code, m.msg,
           m.state IN ('claimed', 'dispatched', 'unknown') AND m.run_id IS DISTINCT FROM $3
               AND bizmsg.run_alive(m.run_id),
           m.state IN ('dispatched', 'unknown') AND m.run_id IS DISTINCT FROM $3
               AND bizmsg.run_settling(m.run_id)
    FROM bizmsg.messages m
    JOIN unnest($2::uuid[], $4::int4[]) AS i (f, o)
      ON m.fingerprint = i.f AND m.occurrence = i.o
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])";

/// Claims (see `claim`), recorded `claimed` (a row taken over in doubt: `dispatched`).
/// `inherited_doubt` of the inserted tuple carries the claim's take-over wish into the conflict
/// arm; a row actually taken over keeps its key and its doubt. A row `claimed` by another run
/// is claimed as new (never sent), keeping its key. A row is taken from another run only when
/// that run is in `$7`, the runs judged dead from their locked rows: the statement's own
/// snapshot could be older than a run that claimed a row while this waited for it. Every row
/// won returns the key it holds now, the one the message goes out with, and whether it is
/// `claimed` (to be dispatched before it is sent).
pub(super) const CLAIM: &str = "
    INSERT INTO bizmsg.messages AS m
        (campaign, fingerprint, occurrence, idempotency_key, state, run_id,
         inherited_doubt)
    SELECT $1, i.f, i.o, i.k, 'claimed', $2, i.t
    FROM unnest($3::uuid[], $4::int4[], $5::text[], $6::bool[]) AS i (f, o, k, t)
    ORDER BY i.f, i.o
    ON CONFLICT (campaign, fingerprint, occurrence) DO UPDATE
    SET state = CASE WHEN m.state IN ('dispatched', 'unknown') THEN 'dispatched'
                     ELSE 'claimed' END,
        run_id = excluded.run_id,
        inherited_doubt = (m.state IN ('dispatched', 'unknown')
                           AND (m.run_id IS DISTINCT FROM excluded.run_id
                                OR m.inherited_doubt)),
        idempotency_key = CASE WHEN m.state IN ('claimed', 'dispatched', 'unknown')
                               THEN coalesce(m.idempotency_key, excluded.idempotency_key)
                               ELSE excluded.idempotency_key END,
        sms_id = NULL, code = NULL, msg = NULL, updated_at = now()
    WHERE (m.run_id IS NOT DISTINCT FROM excluded.run_id AND m.state NOT IN ('sent', 'rejected'))
       OR m.state IN ('failed', 'skipped')
       OR (m.state = 'claimed' AND (m.run_id IS NULL OR m.run_id = ANY ($7::uuid[])))
       OR (excluded.inherited_doubt AND m.state IN ('dispatched', 'unknown')
           AND (m.run_id IS NULL OR m.run_id = ANY ($7::uuid[])))
    RETURNING m.fingerprint, m.occurrence, m.idempotency_key, m.state = 'claimed'";

/// The runs other than this one (`$4`) holding these messages in doubt, and whether each is
/// recorded at all (a run whose record was deleted is gone).
pub(super) const HOLDERS: &str = "
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
pub(super) const JUDGE_HOLDERS: &str = "
    SELECT r.id, bizmsg.run_is_alive(r) FROM bizmsg.runs r
    WHERE r.id = ANY ($1::uuid[]) ORDER BY r.id FOR UPDATE SKIP LOCKED";

/// Records the runs whose claims are taken over as lost, in the taking transaction: their next
/// round trip (`ALIVE`) stops them.
pub(super) const MARK_LOST: &str = "
    UPDATE bizmsg.runs SET state = 'lost', ended_at = now()
    WHERE id = ANY ($1::uuid[]) AND state = 'running'";

/// Of the messages a claim asks for that are recorded, which this run may claim (a record of
/// its own without a result, one never sent, one `claimed` by a run in `$6`, the dead, or,
/// taken over, one in doubt whose holder is in `$6`), and, of those, the ones it locked now
/// for the claim; and the run holding each row `claimed` that is not judged yet (not this one,
/// not in `$6`) and looks dead in this statement's snapshot: the claim judges those runs from
/// their locked rows, then asks again. (A run that looks alive is taken for alive this time:
/// a live run's claims cost another run's claim no more round trips.) Only such rows are
/// locked, never a live run's: a run frozen inside this transaction (SIGSTOP, a debugger)
/// then blocks nobody's writes. A claimable row another transaction holds now (a run frozen
/// inside one) is skipped, not waited for, and reported held by another run.
pub(super) const LOCK_CLAIMABLE: &str = "
    WITH wanted AS (
        SELECT m.fingerprint, m.occurrence,
               (m.run_id = $4 AND m.state NOT IN ('sent', 'rejected'))
               OR m.state IN ('failed', 'skipped')
               OR (m.state = 'claimed' AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[])))
               OR (i.t AND m.state IN ('dispatched', 'unknown')
                   AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[]))) AS claimable,
               CASE WHEN m.state = 'claimed' AND m.run_id <> $4
                         AND NOT (m.run_id = ANY ($6::uuid[]))
                         AND NOT bizmsg.run_alive(m.run_id)
                    THEN m.run_id END AS unjudged
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
               OR (m.state = 'claimed' AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[])))
               OR (i.t AND m.state IN ('dispatched', 'unknown')
                   AND (m.run_id IS NULL OR m.run_id = ANY ($6::uuid[]))))
        ORDER BY m.fingerprint, m.occurrence
        FOR UPDATE OF m SKIP LOCKED)
    SELECT w.fingerprint, w.occurrence, w.claimable,
           EXISTS (SELECT 1 FROM locked l
                   WHERE l.fingerprint = w.fingerprint AND l.occurrence = w.occurrence),
           w.unjudged
    FROM wanted w";

/// Of these runs, those with no record (deleted by a person tidying the table): gone.
pub(super) const UNRECORDED: &str = "
    SELECT x.id FROM unnest($1::uuid[]) AS x (id)
    WHERE NOT EXISTS (SELECT 1 FROM bizmsg.runs r WHERE r.id = x.id)";

/// Locks the rows a claim or a write changes, in the claims' order (see `write`), with the run
/// holding each.
pub(super) const LOCK_ROWS: &str = "
    SELECT m.fingerprint, m.occurrence, m.run_id, m.state FROM bizmsg.messages m
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($2::uuid[])
      AND (m.fingerprint, m.occurrence) IN (SELECT * FROM unnest($2::uuid[], $3::int4[]))
    ORDER BY m.fingerprint, m.occurrence
    FOR UPDATE";

/// Records messages this run holds `claimed` as `dispatched`, before their requests are
/// written: only rows this run (`$2`) still holds `claimed`, checked by the statement itself
/// on each row's newest version (a run that took a row over and committed first leaves it
/// unchanged). Returns the rows it changed.
pub(super) const DISPATCH: &str = "
    UPDATE bizmsg.messages AS m SET state = 'dispatched', updated_at = now()
    FROM unnest($3::uuid[], $4::int4[]) AS u (f, o)
    WHERE m.campaign = $1 AND m.fingerprint = ANY ($3::uuid[])
      AND m.fingerprint = u.f AND m.occurrence = u.o
      AND m.run_id = $2 AND m.state = 'claimed'
    RETURNING m.fingerprint, m.occurrence";

/// Writes the records of messages this run holds, never losing a result or a doubt.
pub(super) const WRITE_ROWS: &str = "
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
/// alive, and the server process of its session (see `session.rs`).
pub(super) const ALIVE: &str = "UPDATE bizmsg.runs SET heartbeat_at = now() WHERE id = $1 \
                     RETURNING state = 'running', pg_backend_pid()";

/// The statements a run uses for every batch, prepared once on its connection: a statement
/// prepared per use costs a round trip of its own, and its plan, each time.
pub(super) struct Statements {
    pub(super) alive: Statement,
    pub(super) lookup: Statement,
    pub(super) claim: Statement,
    pub(super) lock_claimable: Statement,
    pub(super) holders: Statement,
    pub(super) judge_holders: Statement,
    pub(super) mark_lost: Statement,
    pub(super) lock_rows: Statement,
    pub(super) dispatch: Statement,
    pub(super) write_rows: Statement,
    pub(super) unrecorded: Statement,
}

impl Statements {
    pub(super) async fn prepare(
        client: &Client,
    ) -> std::result::Result<Statements, tokio_postgres::Error> {
        Ok(Statements {
            alive: client.prepare(ALIVE).await?,
            lookup: client.prepare(LOOKUP).await?,
            claim: client.prepare(CLAIM).await?,
            lock_claimable: client.prepare(LOCK_CLAIMABLE).await?,
            holders: client.prepare(HOLDERS).await?,
            judge_holders: client.prepare(JUDGE_HOLDERS).await?,
            mark_lost: client.prepare(MARK_LOST).await?,
            lock_rows: client.prepare(LOCK_ROWS).await?,
            dispatch: client.prepare(DISPATCH).await?,
            write_rows: client.prepare(WRITE_ROWS).await?,
            unrecorded: client.prepare(UNRECORDED).await?,
        })
    }
}
