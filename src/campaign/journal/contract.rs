//! The journal contract, one test each, run against SQLite and PostgreSQL alike: what a take-over
//! may and may not do to a run, whatever store holds the journal. A frozen run is stood for by
//! its heartbeat aged in the store itself (what a SIGSTOP does to it); the real processes and
//! signals are in `tests/test_journal_takeover.py`.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Claim, Claimed, Identity, JournalStore, PostgresJournal, SqliteJournal, State};
use crate::campaign::message::Fingerprint;
use crate::test_servers::PostgresServer;

/// Long enough that no heartbeat of the journal's own lands while a test ages one.
const LEASE: Duration = Duration::from_secs(60);

enum Store {
    Sqlite(PathBuf),
    Postgres(PostgresServer),
}

impl Store {
    /// Both stores, PostgreSQL when a server can be started here (required under
    /// `BIZMSG_REQUIRE_SERVICES=1`, as every real-server test).
    fn all() -> Vec<Store> {
        let dir = std::env::temp_dir().join(format!("bizmsg-contract-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut stores = vec![Store::Sqlite(dir.join("journal.db"))];
        stores.extend(PostgresServer::start().map(Store::Postgres));
        stores
    }

    fn name(&self) -> &'static str {
        match self {
            Store::Sqlite(_) => "sqlite",
            Store::Postgres(_) => "postgresql",
        }
    }

    async fn open(&self, campaign: &str, lease: Duration) -> Arc<dyn JournalStore> {
        match self {
            Store::Sqlite(path) => {
                let path = path.clone();
                let campaign = campaign.to_owned();
                let journal = tokio::task::spawn_blocking(move || {
                    SqliteJournal::open(&path, Some(&campaign), lease)
                })
                .await
                .unwrap()
                .unwrap();
                Arc::new(journal)
            }
            Store::Postgres(server) => Arc::new(
                PostgresJournal::open(&server.url, campaign, lease)
                    .await
                    .unwrap(),
            ),
        }
    }

    /// Makes every run recorded running look silent for `seconds`, as a frozen process is.
    async fn age_heartbeats(&self, seconds: f64) {
        match self {
            Store::Sqlite(path) => {
                let connection = rusqlite::Connection::open(path).unwrap();
                connection
                    .execute(
                        "UPDATE bizmsg_runs SET heartbeat_at = heartbeat_at - ?1 \
                         WHERE state = 'running'",
                        [seconds],
                    )
                    .unwrap();
            }
            Store::Postgres(server) => {
                connect(&server.url)
                    .await
                    .execute(
                        "UPDATE bizmsg.runs SET heartbeat_at = heartbeat_at \
                         - make_interval(secs => $1) WHERE state = 'running'",
                        &[&seconds],
                    )
                    .await
                    .unwrap();
            }
        }
    }

    /// The states of the runs recorded, sorted.
    async fn run_states(&self) -> Vec<String> {
        let mut states: Vec<String> = match self {
            Store::Sqlite(path) => {
                let connection = rusqlite::Connection::open(path).unwrap();
                let mut statement = connection.prepare("SELECT state FROM bizmsg_runs").unwrap();
                let states = statement
                    .query_map([], |row| row.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                states
            }
            Store::Postgres(server) => connect(&server.url)
                .await
                .query("SELECT state FROM bizmsg.runs", &[])
                .await
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect(),
        };
        states.sort();
        states
    }
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = url
        .parse::<tokio_postgres::Config>()
        .unwrap()
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

fn identity(n: u128) -> Identity {
    Identity {
        fingerprint: Fingerprint(n),
        occurrence: 0,
    }
}

fn claims(range: std::ops::Range<u128>, prefix: &str, take_over: bool) -> Vec<Claim> {
    range
        .map(|n| Claim {
            identity: identity(n),
            key: format!("{prefix}{n}"),
            take_over,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_taken_over_learns_it_and_its_writes_are_never_silently_lost() {
    for store in Store::all() {
        let name = store.name();
        let first = store.open("contract", LEASE).await;
        assert!(first
            .claim(claims(0..3, "a", false))
            .await
            .unwrap()
            .iter()
            .all(Claimed::is_won));
        assert_eq!(first.fence().check(), Ok(()), "{name}");
        // Frozen past its own lease and the margin.
        store.age_heartbeats(LEASE.as_secs_f64() * 1.3).await;
        let second = store.open("contract", LEASE).await;
        let taken = second.claim(claims(0..2, "b", true)).await.unwrap();
        assert_eq!(
            taken,
            [
                Claimed::Won { key: "a0".into() },
                Claimed::Won { key: "a1".into() }
            ],
            "{name}: a take-over is told the recorded keys"
        );
        // The run taken over writes a result of a message it no longer holds: an error it
        // acts on, never silence; and it may send nothing more.
        let mut sent = super::Row::new(identity(0), State::Sent, Some("a0".into()));
        sent.claimed = true;
        let written = first.write_durably(vec![sent]).await;
        assert!(
            written.is_err(),
            "{name}: a taken-over run's write was accepted"
        );
        assert!(
            first.fence().is_lost(),
            "{name}: the fence of a taken-over run still holds"
        );
        let kept = second.lookup(vec![identity(0)]).await.unwrap();
        assert_eq!(kept[0].state, State::Dispatched, "{name}");
        assert_eq!(kept[0].key.as_deref(), Some("a0"), "{name}");
        // It still writes the result of a message it holds (it went out: nobody may send it
        // again), and claims nothing more.
        let mut result = super::Row::new(identity(2), State::Sent, Some("a2".into()));
        result.claimed = true;
        first.write(vec![result]).unwrap();
        assert!(
            first.flush().await.is_err(),
            "{name}: a taken-over run's flush succeeded"
        );
        let held = second.lookup(vec![identity(2)]).await.unwrap();
        assert_eq!(held[0].state, State::Sent, "{name}: its result was lost");
        assert!(
            first.claim(claims(5..6, "a", false)).await.is_err(),
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_judged_by_its_own_lease_not_by_the_readers() {
    for store in Store::all() {
        let name = store.name();
        let slow = store.open("leases", LEASE).await;
        assert!(slow
            .claim(claims(0..2, "a", false))
            .await
            .unwrap()
            .iter()
            .all(Claimed::is_won));
        // Silent for 20 s: well within its own lease of 60 s, far past the reader's of 3 s.
        store.age_heartbeats(20.0).await;
        let hasty = store.open("leases", Duration::from_secs(3)).await;
        let answers = hasty.claim(claims(0..2, "b", true)).await.unwrap();
        assert!(
            answers
                .iter()
                .all(|answer| matches!(answer, Claimed::Lost(row) if row.held_elsewhere)),
            "{name}: a live run's claims were taken: {answers:?}"
        );
        assert_eq!(slow.fence().check(), Ok(()), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_stopped_being_confirmed_stops_sending_until_confirmed_again() {
    for store in Store::all() {
        let name = store.name();
        let lease = Duration::from_millis(400);
        let run = store.open("confirmed", lease).await;
        run.claim(claims(0..1, "a", false)).await.unwrap();
        assert_eq!(run.fence().check(), Ok(()), "{name}");
        // Its heartbeat every tenth of a second keeps it confirmed with nothing to write.
        tokio::time::sleep(lease * 2).await;
        assert_eq!(
            run.fence().check(),
            Ok(()),
            "{name}: an idle run lost its confirmation"
        );
        run.flush().await.unwrap();
        assert_eq!(run.fence().check(), Ok(()), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_postgres_session_ends_stops_sending_at_once() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let run = PostgresJournal::open(&server.url, "terminated", LEASE)
        .await
        .unwrap();
    run.claim(claims(0..1, "a", false)).await.unwrap();
    let admin = connect(&server.url).await;
    let ended = Instant::now();
    let terminated: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l \
             JOIN bizmsg.runs r ON l.locktype = 'advisory' AND l.objsubid = 1 \
               AND l.classid = ((r.lock_key >> 32) & 4294967295)::oid \
               AND l.objid = (r.lock_key & 4294967295)::oid \
             WHERE r.state = 'running'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(terminated, 1);
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
    let first = Arc::new(
        PostgresJournal::open(&server.url, "snapshot", LEASE)
            .await
            .unwrap(),
    );
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
    let second = Arc::new(
        PostgresJournal::open(&server.url, "snapshot", LEASE)
            .await
            .unwrap(),
    );
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
        if let Claimed::Won { key } = answer {
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
    let first = PostgresJournal::open(&server.url, "grace", LEASE)
        .await
        .unwrap();
    first.claim(claims(0..2, "a", false)).await.unwrap();
    let admin = connect(&server.url).await;
    admin
        .execute(
            "SELECT pg_terminate_backend(l.pid) FROM pg_locks l \
             JOIN bizmsg.runs r ON l.locktype = 'advisory' AND l.objsubid = 1 \
               AND l.classid = ((r.lock_key >> 32) & 4294967295)::oid \
               AND l.objid = (r.lock_key & 4294967295)::oid",
            &[],
        )
        .await
        .unwrap();
    let ended = Instant::now();
    let second = PostgresJournal::open(&server.url, "grace", LEASE)
        .await
        .unwrap();
    let early = second.claim(claims(0..1, "b", true)).await.unwrap();
    assert!(
        matches!(&early[0], Claimed::Lost(row) if row.held_elsewhere && row.holder_settling),
        "taken over {:?} after the session ended: {early:?}",
        ended.elapsed()
    );
    tokio::time::sleep(super::SESSION_GRACE + Duration::from_millis(500)).await;
    let late = second.claim(claims(0..1, "b", true)).await.unwrap();
    assert_eq!(late, [Claimed::Won { key: "a0".into() }]);
    // A run whose record a person deleted is gone, and its claims are taken at once.
    admin
        .execute("DELETE FROM bizmsg.runs WHERE state <> 'running'", &[])
        .await
        .unwrap();
    let orphan = second.claim(claims(1..2, "b", true)).await.unwrap();
    assert_eq!(orphan, [Claimed::Won { key: "a1".into() }]);
}

/// A claim that meets one message another transaction is inserting now (a run frozen inside
/// its claim) claims every other message and reports only that one held by another run (found
/// in review: the whole batch was reported held, and none of it sent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_meets_one_busy_message_claims_all_the_others() {
    let Some(server) = PostgresServer::start() else {
        return;
    };
    let run = PostgresJournal::open(&server.url, "busy", LEASE)
        .await
        .unwrap();
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
                    key: format!("a{n}")
                },
                "message {n}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ended_is_recorded_ended_and_holds_nothing_before_end_returns() {
    for store in Store::all() {
        let name = store.name();
        let first = store.open("ending", LEASE).await;
        assert!(first
            .claim(claims(0..2, "a", false))
            .await
            .unwrap()
            .iter()
            .all(Claimed::is_won));
        let mut sent = super::Row::new(identity(0), State::Sent, Some("a0".into()));
        sent.claimed = true;
        first.write(vec![sent]).unwrap();
        first.flush().await.unwrap();
        first.end().await;
        // Once `end` returns (the caller hears the campaign is done), the run is recorded
        // ended and its lock is gone: what it left in doubt is nobody's.
        assert_eq!(store.run_states().await, ["ended"], "{name}");
        let next = store.open("ending", LEASE).await;
        let rows = next.lookup(vec![identity(0), identity(1)]).await.unwrap();
        assert_eq!(rows[0].state, State::Sent, "{name}");
        assert_eq!(rows[1].state, State::Dispatched, "{name}");
        assert!(
            !rows[1].held_elsewhere,
            "{name}: an ended run still holds its claims"
        );
        assert!(
            first.claim(claims(5..6, "a", false)).await.is_err(),
            "{name}: an ended run claimed"
        );
        // Ending twice is harmless.
        first.end().await;
        next.end().await;
    }
}
