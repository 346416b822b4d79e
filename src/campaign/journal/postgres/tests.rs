//! The PostgreSQL journal's own tests: what only it does (its schema's SQL and versions, how its
//! statements are planned, its URL, campaigns sharing one database, a run tied to its server
//! session, a take-over under row locks, claims around a row another transaction holds). What
//! both stores do is the contract (`contract.rs`), whose helpers these use too.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::Client;

use super::schema::{RUN_ALIVE, SCHEMA_VERSION};
use super::statements::{DISPATCH, HOLDERS, LOCK_CLAIMABLE, LOCK_ROWS, LOOKUP, PLANS, WRITE_ROWS};
use super::PostgresJournal;
use crate::campaign::journal::contract::{claims, connect, identity, result, LEASE};
use crate::campaign::journal::fence::{SESSION_GRACE, TAKE_OVER_AFTER};
use crate::campaign::journal::{Claimed, JournalStore, State};
use crate::campaign::message::FingerprintKind;
use crate::error::Error;
use crate::test_servers::PostgresServer;

/// A run of campaign `name` on `server`'s journal.
async fn open(server: &PostgresServer, name: &str) -> PostgresJournal {
    PostgresJournal::open(&server.url, name, LEASE)
        .await
        .unwrap()
}

/// Ends the server sessions of the runs recorded `running` (`only_running`) or of every run,
/// as an operator's `pg_terminate_backend` would; how many it ended.
async fn terminate_sessions(admin: &Client, only_running: bool) -> i64 {
    let which = if only_running {
        "WHERE r.state = 'running'"
    } else {
        ""
    };
    admin
        .query_one(
            &format!(
                "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l \
                 JOIN bizmsg.runs r ON l.locktype = 'advisory' AND l.objsubid = 1 \
                   AND l.classid = ((r.lock_key >> 32) & 4294967295)::oid \
                   AND l.objid = (r.lock_key & 4294967295)::oid {which}"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

#[test]
fn the_sql_judges_runs_with_the_fences_margins() {
    let grace = format!("interval '{} seconds'", SESSION_GRACE.as_secs());
    assert!(RUN_ALIVE.contains(&grace), "{RUN_ALIVE}");
    assert!(RUN_ALIVE.contains(&format!("r.lease_seconds * {TAKE_OVER_AFTER}")));
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
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_planned_on_an_empty_journal_read_only_the_messages_they_are_given() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let journal = open(&server, "spring").await;
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
            "dispatch",
            DISPATCH,
            &format!("1, gen_random_uuid(), {uuids}, ARRAY[0, 0]"),
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
    let journal = open(&server, "spring").await;
    for batch in 0..8u128 {
        let range = batch * 100..(batch + 1) * 100;
        journal
            .claim(claims(range.clone(), "k", false))
            .await
            .unwrap();
        journal
            .lookup(range.clone().map(identity).collect())
            .await
            .unwrap();
        // Dispatched together, as a campaign's sends are: batched by the writer.
        let dispatched =
            futures::future::join_all(range.clone().map(|n| journal.dispatch(identity(n)))).await;
        assert!(dispatched.into_iter().all(|made| made.unwrap()));
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
    // Each of 800 messages read by its lookup, its dispatch's lock and its dispatch, its
    // write's lock and its write: 4,000.
    assert!(fetched <= 5_000, "{fetched} rows read for 800 messages");
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
    let journal = open(&server, "spring").await;
    journal.claim(claims(0..3, "k", false)).await.unwrap();
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
    let reopened = open(&server, "spring").await;
    // Its campaign knew its messages by xxh3, and still does; a campaign made now is
    // SHA-256.
    assert_eq!(reopened.fingerprints(), FingerprintKind::Xxh3);
    let summer = open(&server, "summer").await;
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

/// One database holds any number of campaigns, each knowing only its own records (an SQLite
/// journal is one campaign's: `sqlite/tests.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_campaign_in_the_same_database_knows_none_of_its_records() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let spring = open(&server, "spring").await;
    spring.claim(claims(0..2, "k", false)).await.unwrap();
    spring
        .write_durably(vec![result(0, State::Sent)])
        .await
        .unwrap();
    let other = open(&server, "summer").await;
    assert!(other.lookup(vec![identity(0)]).await.unwrap().is_empty());
    assert_eq!(spring.lookup(vec![identity(0)]).await.unwrap().len(), 1);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_postgres_session_ends_stops_sending_at_once() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let run = open(&server, "terminated").await;
    run.claim(claims(0..1, "a", false)).await.unwrap();
    let admin = connect(&server.url).await;
    let ended = Instant::now();
    assert_eq!(terminate_sessions(&admin, true).await, 1);
    while !run.fence().is_lost() {
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "the run still sends 5 s after its session ended"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    eprintln!(
        "the fence fell {:.1} ms after pg_terminate_backend returned",
        ended.elapsed().as_secs_f64() * 1e3
    );
    assert!(run.write_durably(Vec::new()).await.is_err());
}

/// A take-over waiting on a row lock judges the holders as they are when it gets the lock, not
/// as its statement's snapshot saw them: a run that registered and took a message over while
/// the first waited is alive, and keeps it. (PostgreSQL only: SQLite runs one transaction at a
/// time.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_take_over_that_waited_on_a_lock_never_takes_a_message_from_a_live_run() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let first = Arc::new(open(&server, "snapshot").await);
    let admin = connect(&server.url).await;
    // A dead run's claims of messages 1 and 2 (recorded, its lock never held).
    admin
        .batch_execute(
            "INSERT INTO bizmsg.runs (id, campaign, lock_key, heartbeat_at) SELECT \
                 'd0000000-0000-0000-0000-000000000000', id, 1001, now() - interval '1 minute' \
                 FROM bizmsg.campaigns WHERE name = 'snapshot'; \
             INSERT INTO bizmsg.messages \
                 (campaign, fingerprint, occurrence, idempotency_key, state, run_id) \
             SELECT c.id, m.f::uuid, 0, m.k, 'dispatched', \
                    'd0000000-0000-0000-0000-000000000000' \
             FROM bizmsg.campaigns c, (VALUES \
                 ('00000000-0000-0000-0000-000000000001', 'kD1'), \
                 ('00000000-0000-0000-0000-000000000002', 'kD2')) AS m (f, k) \
             WHERE c.name = 'snapshot'",
        )
        .await
        .unwrap();
    // Another transaction holds message 1's row for a moment.
    let mut holder = connect(&server.url).await;
    let holding = holder.transaction().await.unwrap();
    holding
        .batch_execute(
            "SELECT 1 FROM bizmsg.messages \
             WHERE fingerprint = '00000000-0000-0000-0000-000000000001' FOR UPDATE",
        )
        .await
        .unwrap();
    let waiting = tokio::spawn({
        let first = Arc::clone(&first);
        async move { first.claim(claims(1..3, "b", true)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A run that starts while the first waits, and takes message 2 over.
    let second = Arc::new(open(&server, "snapshot").await);
    let meanwhile = tokio::spawn({
        let second = Arc::clone(&second);
        async move { second.claim(claims(2..3, "x", true)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    holding.rollback().await.unwrap();
    let (waited, meanwhile) = (waiting.await.unwrap(), meanwhile.await.unwrap());
    let holders_of_2 = usize::from(waited[1].is_won()) + usize::from(meanwhile[0].is_won());
    assert_eq!(
        holders_of_2, 1,
        "message 2 held by {holders_of_2} runs: {waited:?} {meanwhile:?}"
    );
    // Whoever holds it sends it with the dead run's key.
    for answer in waited.iter().chain(&meanwhile) {
        if let Claimed::Won { key, .. } = answer {
            assert!(key.starts_with("kD"), "{key}");
        }
    }
}

/// A run whose session ended without its process knowing (a failover, a connection cut in the
/// middle) may send until its fence's window closes: its claims are taken over only once its
/// heartbeat is older than the grace, not the moment its lock is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_session_ended_is_taken_over_only_after_its_grace() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let first = open(&server, "grace").await;
    first.claim(claims(0..3, "a", false)).await.unwrap();
    // Messages 0 and 1 dispatched (in doubt once the run is gone); 2 only claimed.
    assert!(first.dispatch(identity(0)).await.unwrap());
    assert!(first.dispatch(identity(1)).await.unwrap());
    let admin = connect(&server.url).await;
    terminate_sessions(&admin, false).await;
    let ended = Instant::now();
    let second = open(&server, "grace").await;
    let early = second.claim(claims(0..1, "b", true)).await.unwrap();
    assert!(
        matches!(&early[0], Claimed::Lost(row) if row.held_elsewhere && row.holder_settling),
        "taken over {:?} after the session ended: {early:?}",
        ended.elapsed()
    );
    // A message it only claimed is held as long (the grace is one rule for all its claims).
    let claimed = second.claim(claims(2..3, "b", false)).await.unwrap();
    assert!(
        matches!(&claimed[0], Claimed::Lost(row) if row.held_elsewhere),
        "{claimed:?}"
    );
    tokio::time::sleep(SESSION_GRACE + Duration::from_millis(500)).await;
    let late = second.claim(claims(0..1, "b", true)).await.unwrap();
    assert_eq!(
        late,
        [Claimed::Won {
            key: "a0".into(),
            dispatch: false
        }]
    );
    let claimed = second.claim(claims(2..3, "b", false)).await.unwrap();
    assert_eq!(
        claimed,
        [Claimed::Won {
            key: "a2".into(),
            dispatch: true
        }]
    );
    // A run whose record a person deleted is gone, and its claims are taken at once.
    admin
        .execute("DELETE FROM bizmsg.runs WHERE state <> 'running'", &[])
        .await
        .unwrap();
    let orphan = second.claim(claims(1..2, "b", true)).await.unwrap();
    assert_eq!(
        orphan,
        [Claimed::Won {
            key: "a1".into(),
            dispatch: false
        }]
    );
}

/// A claim that meets one message another transaction is inserting now (a run frozen inside
/// its claim) claims every other message and reports only that one held by another run (found
/// in review: the whole batch was reported held, and none of it sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_meets_one_busy_message_claims_all_the_others() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let run = open(&server, "busy").await;
    let mut frozen = connect(&server.url).await;
    let inserting = frozen.transaction().await.unwrap();
    inserting
        .batch_execute(
            "INSERT INTO bizmsg.messages (campaign, fingerprint, occurrence, idempotency_key, \
             state) SELECT id, '00000000-0000-0000-0000-000000000007', 0, 'other', 'dispatched' \
             FROM bizmsg.campaigns WHERE name = 'busy'",
        )
        .await
        .unwrap();
    let claimed = run.claim(claims(0..20, "a", false)).await.unwrap();
    inserting.rollback().await.unwrap();
    for (n, answer) in claimed.iter().enumerate() {
        if n == 7 {
            assert!(
                matches!(answer, Claimed::Lost(row) if row.held_elsewhere),
                "{answer:?}"
            );
        } else {
            assert_eq!(
                *answer,
                Claimed::Won {
                    key: format!("a{n}"),
                    dispatch: true
                },
                "message {n}"
            );
        }
    }
}

/// Version 4 wrote claims `dispatched`: a version-4 schema is moved to version 5 as it is (its
/// claims stay in doubt), and a later version is refused, never misread (a bizmsg of version 4
/// refuses version 5 so, rather than read a `claimed` row it does not know).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_4_journal_keeps_its_doubt_and_a_later_version_is_refused() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let journal = open(&server, "v4").await;
    journal.claim(claims(0..2, "k", false)).await.unwrap();
    for n in 0..2 {
        assert!(journal.dispatch(identity(n)).await.unwrap());
    }
    journal.end().await;
    let client = connect(&server.url).await;
    let set_version = |version: &'static str| {
        let client = &client;
        async move {
            client
                .execute(
                    "UPDATE bizmsg.meta SET value = $1 WHERE name = 'schema_version'",
                    &[&version],
                )
                .await
                .unwrap();
        }
    };
    set_version("4").await;
    let moved = open(&server, "v4").await;
    let rows = moved.lookup(vec![identity(0), identity(1)]).await.unwrap();
    assert!(
        rows.iter()
            .all(|row| row.state == State::Dispatched && !row.held_elsewhere),
        "{rows:?}"
    );
    moved.end().await;
    let version: String = client
        .query_one(
            "SELECT value FROM bizmsg.meta WHERE name = 'schema_version'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, SCHEMA_VERSION.to_string());
    set_version("6").await;
    let refused = PostgresJournal::open(&server.url, "v4", LEASE)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        refused.contains("version 6, this bizmsg reads 5"),
        "{refused}"
    );
}
